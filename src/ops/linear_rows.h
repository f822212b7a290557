/* A linear layer's rows written where the caller wants them. Not installed.
 *
 * A decoding step hands its vocabulary projection to the search in the caller's buffer (64 rows x 8,000 logits is
 * 2 MB a step): produced as a context tensor it had to be copied there. This takes qkv_linear's own path (bias
 * rows, then the packed, GEMV or BLAS product), so the numbers are the bits qkv_linear would return. */
#ifndef QKV_OPS_LINEAR_ROWS_H
#define QKV_OPS_LINEAR_ROWS_H

#include "core/visibility.h"
#include "qkv/autograd.h"
#include "qkv/error.h"
#include "qkv/tensor.h"

QKV_INTERNAL_BEGIN

/* y [R, out] = x W^T (+ bias) for x [..., in] (R rows in all), W [out, in]: qkv_linear's result, written to y
 * (contiguous rows, not overlapping x, W or bias) and recorded on no tape. Only for a context without gradients. */
qkv_status qkv__linear_rows(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *w, qkv_tensor *bias, float *y);

QKV_INTERNAL_END
#endif
