/* Helpers the ops share across their files (defined in src/ops, so declared here and not in core/internal.h:
 * core sits below ops). Not installed. */
#ifndef QKV_OPS_INTERNAL_H
#define QKV_OPS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/visibility.h"
#include "qkv/tensor.h"

QKV_INTERNAL_BEGIN
/* If t is a view swapping the last two dims of a tensor x (qkv_transpose(x, -1, -2) or an equivalent permute),
 * returns x; else NULL. Lets matmul take x^T as a BLAS flag and write x's gradient directly. */
qkv_tensor *qkv__transposed_source(const qkv_tensor *t);
/* Write NumPy broadcast shape of a and b into out; false (error set) if incompatible. */
bool qkv__broadcast_shape(const char *op, const qkv_tensor *a, const qkv_tensor *b, int *ndim, int64_t *shape);
/* Reduce a contiguous gradient g of shape `gshape` onto `dst` (shape of an input that was broadcast), adding. */
void qkv__reduce_broadcast_add(float *dst, const qkv_tensor *dst_like, const float *g, int gndim,
                               const int64_t *gshape);
QKV_INTERNAL_END

#endif
