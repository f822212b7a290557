/* N-dimensional float32 / int32 tensors with shape, strides and views.
 *
 * Ownership. A tensor lives in one of two places:
 *   - the heap: qkv_tensor_new() allocates it and its data; the caller frees it with qkv_tensor_free(). Model
 *     parameters, optimiser state and anything that outlives a training step live here.
 *   - a context (qkv_ctx, see autograd.h): every op's result, and qkv_ctx_tensor(), are carved from the context's
 *     arena and stay valid until qkv_ctx_reset() or qkv_ctx_free(). Nobody frees them one by one.
 * A view (reshape, transpose, permute, slice, broadcast) shares its source's data and must not outlive it.
 *
 * The struct is public so kernels can read shape, strides and data directly; treat its fields as read-only and
 * change a tensor only through the functions here and in ops.h.
 */
#ifndef QKV_TENSOR_H
#define QKV_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_MAX_DIMS 8

typedef enum qkv_dtype { QKV_F32 = 0, QKV_I32 = 1 } qkv_dtype;

enum {
    QKV_FLAG_REQUIRES_GRAD = 1u << 0, /* gradients flow into this tensor */
    QKV_FLAG_RETAIN_GRAD = 1u << 1,   /* keep .grad of an intermediate after backward (for inspection) */
    QKV_FLAG_HEAP = 1u << 2,          /* allocated by qkv_tensor_new: its grad is heap-allocated too */
    QKV_FLAG_OWNS_DATA = 1u << 3,     /* data is freed with the tensor */
};

typedef struct qkv_node qkv_node; /* the op that produced a tensor (autograd.h) */

typedef struct qkv_tensor qkv_tensor;
struct qkv_tensor {
    qkv_dtype dtype;
    int ndim;                      /* 0 for a scalar */
    int64_t shape[QKV_MAX_DIMS];
    int64_t stride[QKV_MAX_DIMS];  /* in elements, not bytes */
    void *data;                    /* address of element (0, ..., 0) */
    qkv_tensor *grad;              /* same shape, contiguous; NULL until a backward pass writes it */
    qkv_node *node;                /* producing op on the tape; NULL for leaves */
    uint32_t flags;
    char name[128];                /* parameter name (state_dict key style), "" if none */
};

/* Build a shape argument pair in place: qkv_tensor_new(QKV_F32, QKV_DIMS(2, 3)). */
#define QKV_DIMS(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

/* Heap tensor, data zero-filled. NULL (with qkv_last_error) on a bad shape or out of memory. */
qkv_tensor *qkv_tensor_new(qkv_dtype dtype, int ndim, const int64_t *shape);
/* Heap tensor holding a copy of `src` (contiguous), no grad, no node. */
qkv_tensor *qkv_tensor_clone(const qkv_tensor *src);
/* Frees a heap tensor, its data (if owned) and its grad. NULL is allowed. Never call on a context tensor. */
void qkv_tensor_free(qkv_tensor *t);

int64_t qkv_numel(const qkv_tensor *t);
size_t qkv_dtype_size(qkv_dtype dtype);
bool qkv_is_contiguous(const qkv_tensor *t);
bool qkv_same_shape(const qkv_tensor *a, const qkv_tensor *b);
/* Normalise a possibly negative axis; -1 (with an error set) if out of range. */
int qkv_axis(const qkv_tensor *t, int axis);
/* "[2, 3, 4]" into buf; returns buf. */
const char *qkv_shape_str(const qkv_tensor *t, char *buf, size_t size);

static inline float *qkv_f32(const qkv_tensor *t) { return (float *)t->data; }
static inline int32_t *qkv_i32(const qkv_tensor *t) { return (int32_t *)t->data; }

void qkv_tensor_set_name(qkv_tensor *t, const char *name);
void qkv_tensor_set_requires_grad(qkv_tensor *t, bool on);
/* Keep the gradient of an intermediate (non-leaf) tensor readable after backward, as torch's retain_grad(). */
void qkv_tensor_retain_grad(qkv_tensor *t);
/* Zero (not free) the accumulated gradient, as torch's zero_grad(set_to_none=False). */
void qkv_tensor_zero_grad(qkv_tensor *t);

/* Fill helpers (any layout). */
void qkv_tensor_fill(qkv_tensor *t, float value);
/* Copy `src` into `dst` element by element (same shape, same dtype, any strides). */
qkv_status qkv_tensor_copy(qkv_tensor *dst, const qkv_tensor *src);
/* Copy from / to a flat row-major buffer of numel elements. */
qkv_status qkv_tensor_load(qkv_tensor *t, const void *src, size_t bytes);

/* Linear offset (in elements) of a multi-index. */
static inline int64_t qkv_offset(const qkv_tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
    return off;
}

#ifdef __cplusplus
}
#endif
#endif
