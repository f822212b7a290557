/* Optimisers (SGD with momentum/Nesterov, Adam, AdamW, AdaDelta) and gradient clipping, with torch.optim's
 * update rules (tests/test_optim.c compares 20 steps with torch to 1e-6 relative).
 *
 * An optimiser updates every trainable tensor of a qkv_params collection from its .grad. Parameter groups are set
 * by name prefix: a frozen prefix is skipped entirely, a learning-rate scale multiplies the base rate (fine-tuning,
 * gradual unfreezing). Weight decay can exclude 1-D tensors (biases and norm gains), as is usual for AdamW.
 *
 * Ownership: the optimiser borrows the collection (which must outlive it) and owns its moment buffers. */
#ifndef QKV_OPTIM_H
#define QKV_OPTIM_H

#include <stdbool.h>

#include "qkv/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_optim_kind { QKV_SGD = 0, QKV_ADAM, QKV_ADAMW, QKV_ADADELTA } qkv_optim_kind;

typedef struct qkv_optim_config {
    qkv_optim_kind kind;
    float lr;
    float weight_decay;     /* SGD/Adam/AdaDelta: L2 added to the gradient; AdamW: decoupled decay */
    bool decay_exclude_1d;  /* no weight decay on 1-D parameters (biases, LayerNorm weights) */
    float momentum, dampening; /* SGD */
    bool nesterov;             /* SGD */
    float beta1, beta2, eps;   /* Adam/AdamW (eps also AdaDelta's) */
    float rho;                 /* AdaDelta */
} qkv_optim_config;

/* torch.optim's defaults for the kind (lr: SGD 0.01 — torch requires one —, Adam/AdamW 1e-3, AdaDelta 1.0;
 * AdamW weight_decay 0.01). */
qkv_optim_config qkv_optim_defaults(qkv_optim_kind kind);
/* "sgd", "adam", "adamw", "adadelta" -> kind; false if unknown. */
bool qkv_optim_kind_parse(const char *name, qkv_optim_kind *kind);

typedef struct qkv_optim qkv_optim;

qkv_optim *qkv_optim_new(qkv_params *params, const qkv_optim_config *cfg);
void qkv_optim_free(qkv_optim *o);

/* One update of every trainable, non-frozen parameter that has a gradient. */
qkv_status qkv_optim_step(qkv_optim *o);
void qkv_optim_zero_grad(qkv_optim *o);
void qkv_optim_set_lr(qkv_optim *o, float lr);
float qkv_optim_lr(const qkv_optim *o);
/* Number of steps taken (the bias-correction step count). */
long qkv_optim_steps(const qkv_optim *o);

/* Parameter groups by name prefix ("" matches all). Returns the number of parameters matched; 0 is an error
 * (QKV_ERR_INVALID naming the prefix) so typos do not pass silently. */
int qkv_optim_freeze(qkv_optim *o, const char *prefix, bool frozen);
int qkv_optim_set_lr_scale(qkv_optim *o, const char *prefix, float scale);

/* Per-parameter settings (parameter groups, docs/training.md "Fine-tuning"), for the trainable parameters the
 * optimiser holds, in the collection's order (index 0 .. param_count - 1). A frozen parameter is never updated and
 * stops requiring a gradient (backward skips it); unfreezing makes it require one again. `since` is the optimiser's
 * step count when the parameter began to train: Adam's bias correction then counts the parameter's own steps, as
 * torch.optim's per-parameter state does for a parameter that had no gradient before. Defaults: not frozen, lr_scale
 * 1, weight_decay NAN (the optimiser's), since 0. */
typedef struct qkv_optim_param {
    bool frozen;
    float lr_scale;     /* times the optimiser's learning rate */
    float weight_decay; /* NAN: the optimiser's weight_decay (decay_exclude_1d still applies) */
    long since;
} qkv_optim_param;
int qkv_optim_param_count(const qkv_optim *o);
qkv_tensor *qkv_optim_param_at(const qkv_optim *o, int i);
qkv_optim_param qkv_optim_param_get(const qkv_optim *o, int i);
void qkv_optim_param_set(qkv_optim *o, int i, const qkv_optim_param *p);

/* Optimiser state as named tensors for checkpoints: "<kind>.<slot>.<param name>" plus the step count, in a fixed
 * order. count/at enumerate them (borrowed pointers); set_steps restores the count. */
int qkv_optim_state_count(const qkv_optim *o);
qkv_tensor *qkv_optim_state_at(const qkv_optim *o, int i);
void qkv_optim_set_steps(qkv_optim *o, long steps);

/* torch.nn.utils.clip_grad_norm_: scales all gradients so their global 2-norm is at most max_norm (coefficient
 * max_norm / (norm + 1e-6), capped at 1). Returns the norm before clipping (inf/NaN are returned as is, nothing
 * is scaled then). */
float qkv_clip_grad_norm(qkv_params *params, float max_norm);
/* torch.nn.utils.clip_grad_value_: clamps every gradient element to [-clip, clip]. */
void qkv_clip_grad_value(qkv_params *params, float clip);

#ifdef __cplusplus
}
#endif
#endif
