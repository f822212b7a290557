/* Library-internal helpers shared by src/core and src/ops. Not installed. */
#ifndef QKV_CORE_INTERNAL_H
#define QKV_CORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/visibility.h"
#include "qkv/autograd.h"
#include "qkv/error.h"
#include "qkv/tensor.h"

QKV_INTERNAL_BEGIN

/* Internal tensor flag: .grad points at a caller's tensor (qkv_backward_with), to be copied before any write. */
#define QKV__FLAG_BORROWED_GRAD (1u << 8)
/* Internal tensor flag: the tensor is the output of more than one tape node (its gradient outlives one backward). */
#define QKV__FLAG_SHARED_OUT (1u << 9)

/* Largest tensor we accept: 2^40 elements; anything bigger is a corrupted size, not a model. */
#define QKV_MAX_NUMEL ((int64_t)1 << 40)

/* Fill contiguous row-major strides; returns numel, or -1 (error set) if a dim is negative or numel absurd. */
int64_t qkv__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
/* Initialise a tensor header (no data). */
void qkv__header(qkv_tensor *t, qkv_dtype dtype, int ndim, const int64_t *shape);
/* An empty result tensor in the context with the given shape (data uninitialised). */
qkv_tensor *qkv__out(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape);
qkv_tensor *qkv__out_like(qkv_ctx *ctx, const qkv_tensor *like);
/* A view header in the context sharing src's data (shape/strides set by the caller). */
qkv_tensor *qkv__view(qkv_ctx *ctx, const qkv_tensor *src);
/* Contiguous data of x: x's own if contiguous, else a copy in the context (no autograd). */
const float *qkv__contig_data(qkv_ctx *ctx, const qkv_tensor *x);
/* dst (contiguous, dst_shape) += src viewed through (shape, stride): the backward of every view op. */
void qkv__strided_add(float *dst, const qkv_tensor *src_view);
/* Check f32 dtype, set error naming the op. */
bool qkv__check_f32(const char *op, const qkv_tensor *t, const char *arg);
/* Like qkv_grad_for, but when the gradient buffer is created by this call it is left uninitialised and *fresh is
 * set: the caller must then overwrite every element instead of accumulating. */
qkv_tensor *qkv__grad_fresh(qkv_ctx *ctx, qkv_tensor *t, bool *fresh);

/* The packed weights ops may use in this context (ops/gemm_packed.h), borrowed from their owner (a decoding
 * state); NULL: none, every product goes to BLAS. Core only carries the pointer. */
struct qkv__packs;
void qkv__ctx_set_packs(qkv_ctx *ctx, struct qkv__packs *packs);
struct qkv__packs *qkv__ctx_packs(const qkv_ctx *ctx);

/* Visit every element of a (shape, stride) in row-major order; calls fn with the element offset. Iterates the
 * innermost dimension in a tight loop. */
#define QKV_FOR_EACH_OFFSET(t, off, ...)                                                       \
    do {                                                                                        \
        int64_t idx_[QKV_MAX_DIMS] = {0};                                                       \
        int64_t n_ = qkv_numel(t);                                                              \
        int nd_ = (t)->ndim;                                                                    \
        int64_t inner_ = nd_ ? (t)->shape[nd_ - 1] : 1, istr_ = nd_ ? (t)->stride[nd_ - 1] : 0; \
        for (int64_t done_ = 0; done_ < n_; done_ += inner_) {                                  \
            int64_t base_ = 0;                                                                  \
            for (int d_ = 0; d_ < nd_ - 1; d_++) base_ += idx_[d_] * (t)->stride[d_];           \
            for (int64_t j_ = 0; j_ < inner_; j_++) {                                           \
                int64_t off = base_ + j_ * istr_;                                               \
                __VA_ARGS__;                                                                           \
            }                                                                                   \
            for (int d_ = nd_ - 2; d_ >= 0; d_--) {                                             \
                if (++idx_[d_] < (t)->shape[d_]) break;                                         \
                idx_[d_] = 0;                                                                   \
            }                                                                                   \
        }                                                                                       \
    } while (0)

QKV_INTERNAL_END
#endif
