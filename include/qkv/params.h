/* A named collection of parameters: what a layer or model owns, what an optimiser updates and what a checkpoint
 * saves. Names follow PyTorch state_dict keys ("encoder.layers.0.self_attn.in_proj_weight") so PyTorch weights
 * load as is.
 *
 * Ownership: the collection owns every tensor it creates; qkv_params_free() frees them all (and their grads).
 * Layers hold borrowed pointers into it.
 */
#ifndef QKV_PARAMS_H
#define QKV_PARAMS_H

#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_params qkv_params;

qkv_params *qkv_params_new(void);
void qkv_params_free(qkv_params *p);

/* The key of parameter `name` under `prefix` into buf: "<prefix>.<name>", or "<name>" if prefix is NULL/"". A
 * key that does not fit in size bytes is an error (QKV_ERR_INVALID naming it), never a truncated key. */
qkv_status qkv_params_join(char *buf, size_t size, const char *prefix, const char *name);

/* A new zero-filled float32 parameter named "<prefix>.<name>" (or "<name>" if prefix is NULL/""), requiring grad.
 * NULL (error set) on a duplicate name, bad shape or out of memory. */
qkv_tensor *qkv_params_add(qkv_params *p, const char *prefix, const char *name, int ndim, const int64_t *shape);
/* A non-trainable buffer (no grad), e.g. fixed positional encodings; saved with the parameters. */
qkv_tensor *qkv_params_add_buffer(qkv_params *p, const char *prefix, const char *name, int ndim,
                                  const int64_t *shape);

/* A check each new tensor's name and shape passes before its memory is allocated (non-QKV_OK, error set: the add
 * fails). Used to compare a model's declared shapes with a checkpoint's header before building a model that a
 * wrong config would make gigabytes large. fn NULL removes it. */
typedef qkv_status (*qkv_params_check_fn)(void *user, const char *name, int ndim, const int64_t *shape);
void qkv_params_set_check(qkv_params *p, qkv_params_check_fn fn, void *user);

int qkv_params_count(const qkv_params *p);
qkv_tensor *qkv_params_at(const qkv_params *p, int i);
/* NULL if absent (no error set). */
qkv_tensor *qkv_params_find(const qkv_params *p, const char *name);
/* Total number of float elements in trainable parameters. */
int64_t qkv_params_numel(const qkv_params *p);
void qkv_params_zero_grad(qkv_params *p);
/* The first float32 tensor holding a NaN (*index: the element, row-major), or NULL. For loaders: weights read with
 * a NaN would otherwise only show as nan losses and blank attention maps. */
qkv_tensor *qkv_params_find_nan(const qkv_params *p, int64_t *index);
/* The first NaN element of a contiguous float32 tensor, or -1 (also for other tensors). */
int64_t qkv_tensor_find_nan(const qkv_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
