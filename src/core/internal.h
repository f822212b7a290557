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

/* A count of the events after which a weight's address may hold other values than before: a parameter collection
 * freed (a later model may be allocated at the same addresses), an optimiser step, a checkpoint loaded into a
 * collection. What copies weights and finds the copy again by address (the decoding pack cache,
 * ops/gemm_packed.h) drops its copies when the count has moved. Any thread may bump it. */
uint64_t qkv__weights_epoch(void);
void qkv__weights_changed(void);
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
/* x's gradient taken over from y's: when y's gradient holds x's gradient elements in x's row-major order (y is a
 * reshape or a contiguous copy of x, or an add of x), the node producing y is running its backward (its last
 * reader), x has no gradient yet and is an intermediate, and y's buffer is the tape's own (not retained, borrowed
 * or read by another node), the buffer becomes x's gradient and y's is dropped: no copy, no zero-fill. NULL when
 * it cannot; the caller then writes or adds into a gradient of its own. */
qkv_tensor *qkv__grad_adopt(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *y);

/* Bulk float moves (core/strided.c), over threads when large; each element's arithmetic is the serial loop's. */
void qkv__zero_floats(float *dst, int64_t n);
/* dst = s * src, or dst += s * src with accumulate (s = 1 or -1 are exact). */
void qkv__move_floats(float *dst, float s, const float *src, int64_t n, bool accumulate);
/* dst (row-major in v's shape) = the 4-byte elements of the strided view v. dst must not overlap v's data. */
void qkv__gather_strided(void *dst, const qkv_tensor *v);
/* base[offset of element k of map's (shape, stride) walk] = src[k], or += with accumulate; map->data is ignored.
 * Without accumulate the walk must reach every offset at most once. */
void qkv__scatter_strided(float *base, const qkv_tensor *map, const float *src, bool accumulate);
/* True when map's (shape, stride) walk reaches no offset twice (a permute, reshape or slice; not a broadcast). */
bool qkv__strided_injective(const qkv_tensor *map);

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

/* What kind of JSON value j is, for error messages: "a boolean", "a number", "a string", "an array", "an object" or
 * "null" (core/schema.c). */
struct cJSON;
const char *qkv__json_kind(const struct cJSON *j);

QKV_INTERNAL_END
#endif
