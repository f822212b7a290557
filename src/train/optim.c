/* Optimisers. Each update follows torch.optim (1.13, single-tensor path) operation by operation, in float32 with
 * the bias corrections in double as PyTorch's Python scalars are. `x.add_(y, alpha=a)` is a fused multiply-add in
 * PyTorch's vectorised CPU kernels, so it is fmaf here, while addcmul_/addcdiv_ are not fused: 20 steps then agree to ~1e-7 relative. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "qkv/optim.h"

typedef struct {
    qkv_tensor *p;
    qkv_tensor *s1, *s2; /* moments: SGD momentum buffer; Adam exp_avg, exp_avg_sq; AdaDelta square_avg, acc_delta */
    bool frozen, momentum_init;
    bool remote; /* ZeRO-1: another rank updates this parameter and keeps its state */
    float lr_scale;
    float weight_decay; /* NAN: the optimiser's */
    long since;         /* optimiser steps taken before this parameter began to train (Adam's bias correction) */
} slot;

struct qkv_optim {
    qkv_optim_config cfg;
    qkv_params *params;
    slot *slots;
    int n;
    long steps;
};

qkv_optim_config qkv_optim_defaults(qkv_optim_kind kind) {
    qkv_optim_config c = {.kind = kind, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .rho = 0.9f};
    switch (kind) {
    case QKV_SGD: c.lr = 0.01f; break;
    case QKV_ADAM: c.lr = 1e-3f; break;
    case QKV_ADAMW: c.lr = 1e-3f; c.weight_decay = 0.01f; break;
    case QKV_ADADELTA: c.lr = 1.0f; c.eps = 1e-6f; break;
    }
    return c;
}

bool qkv_optim_kind_parse(const char *name, qkv_optim_kind *kind) {
    static const char *names[] = {"sgd", "adam", "adamw", "adadelta"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) {
            *kind = (qkv_optim_kind)i;
            return true;
        }
    return false;
}

static const char *kind_name(qkv_optim_kind k) {
    static const char *names[] = {"sgd", "adam", "adamw", "adadelta"};
    return names[k];
}

qkv_optim *qkv_optim_new(qkv_params *params, const qkv_optim_config *cfg) {
    const qkv_optim_config *c = cfg;
    if (!params || !c) {
        qkv_error_set(QKV_ERR_INVALID, "optimiser: no parameters or config");
        return NULL;
    }
    if (!(c->lr >= 0) || !(c->weight_decay >= 0) || !(c->eps >= 0) || c->beta1 < 0 || c->beta1 >= 1 ||
        c->beta2 < 0 || c->beta2 >= 1 || c->momentum < 0 || c->rho < 0 || c->rho > 1 ||
        (c->nesterov && (c->momentum <= 0 || c->dampening != 0))) {
        qkv_error_set(QKV_ERR_INVALID, "optimiser %s: invalid hyperparameters (lr %g, weight_decay %g, betas %g/%g, "
                                       "momentum %g, nesterov needs momentum > 0 and dampening 0)",
                      kind_name(c->kind), c->lr, c->weight_decay, c->beta1, c->beta2, c->momentum);
        return NULL;
    }
    qkv_optim *o = calloc(1, sizeof *o);
    int n = qkv_params_count(params);
    if (!o || !(o->slots = calloc((size_t)(n ? n : 1), sizeof(slot)))) {
        free(o);
        qkv_error_set(QKV_ERR_NOMEM, "optimiser: out of memory");
        return NULL;
    }
    o->cfg = *c;
    o->params = params;
    for (int i = 0; i < n; i++) {
        qkv_tensor *p = qkv_params_at(params, i);
        if (!(p->flags & QKV_FLAG_REQUIRES_GRAD)) continue;
        slot *s = &o->slots[o->n++];
        s->p = p;
        s->lr_scale = 1.0f;
        s->weight_decay = NAN;
        bool two = c->kind != QKV_SGD, one = two || c->momentum > 0;
        if (one) s->s1 = qkv_tensor_new(QKV_F32, p->ndim, p->shape);
        if (two) s->s2 = qkv_tensor_new(QKV_F32, p->ndim, p->shape);
        if ((one && !s->s1) || (two && !s->s2)) {
            qkv_optim_free(o);
            return NULL;
        }
        const char *slot_names[4][2] = {{"momentum_buffer", ""}, {"exp_avg", "exp_avg_sq"},
                                        {"exp_avg", "exp_avg_sq"}, {"square_avg", "acc_delta"}};
        char name[sizeof p->name + 64];
        if (s->s1) {
            snprintf(name, sizeof name, "%s.%s.%s", kind_name(c->kind), slot_names[c->kind][0], p->name);
            qkv_tensor_set_name(s->s1, name);
        }
        if (s->s2) {
            snprintf(name, sizeof name, "%s.%s.%s", kind_name(c->kind), slot_names[c->kind][1], p->name);
            qkv_tensor_set_name(s->s2, name);
        }
    }
    return o;
}

void qkv_optim_free(qkv_optim *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        qkv_tensor_free(o->slots[i].s1);
        qkv_tensor_free(o->slots[i].s2);
    }
    free(o->slots);
    free(o);
}

/* ---- updates, one parameter at a time (a parameter is large enough to thread inside) --------------------------- */

/* The element loops run over fixed chunks, each compiled per instruction set and dispatched at run time
 * (core/isa.h): fmaf is then one instruction wherever the CPU has FMA, even in a baseline x86-64 build. Every
 * element is independent, so the result depends neither on the thread count nor on the chunking. */
#define CHUNK 4096

typedef struct {
    float *p, *g, *s1, *s2;
    float lr, wd;
    float mom, damp;                                                   /* SGD */
    float step_size, inv_bc2_sqrt, b1, b2, omb1, omb2, eps, decay;     /* Adam, AdamW (eps also AdaDelta) */
    float rho, omr;                                                    /* AdaDelta */
    bool first, nesterov, decoupled;
} upd;

QKV_KERNEL_BODY void sgd_range_body(const upd *u, int64_t lo, int64_t hi) {
    float *restrict p = u->p, *restrict g = u->g, *restrict buf = u->s1;
    const float lr = u->lr, wd = u->wd, mom = u->mom, damp = u->damp;
    for (int64_t i = lo; i < hi; i++) {
        float d = g[i];
        if (wd != 0) d = fmaf(wd, p[i], d);
        if (buf) {
            buf[i] = u->first ? d : fmaf(damp, d, buf[i] * mom);
            d = u->nesterov ? fmaf(mom, buf[i], d) : buf[i];
        }
        p[i] = fmaf(-lr, d, p[i]);
    }
}
QKV_ISA_KERNEL_VOID(sgd_range, (const upd *u, int64_t lo, int64_t hi), (u, lo, hi))

QKV_KERNEL_BODY void adam_range_body(const upd *u, int64_t lo, int64_t hi) {
    float *restrict p = u->p, *restrict g = u->g, *restrict m = u->s1, *restrict v = u->s2;
    const float wd = u->wd, step_size = u->step_size, inv_bc2_sqrt = u->inv_bc2_sqrt, b1 = u->b1, b2 = u->b2;
    const float omb1 = u->omb1, omb2 = u->omb2, eps = u->eps, decay = u->decay;
    for (int64_t i = lo; i < hi; i++) {
        float gi = g[i];
        if (u->decoupled) {
            if (wd != 0) p[i] = p[i] * decay;
        } else if (wd != 0) {
            gi = fmaf(wd, p[i], gi);
        }
        m[i] = fmaf(omb1, gi, m[i] * b1);
        v[i] = v[i] * b2 + omb2 * gi * gi; /* addcmul_: self + value * t1 * t2, unfused */
        float denom = sqrtf(v[i]) * inv_bc2_sqrt + eps; /* torch divides by a scalar as a multiply by its inverse */
        p[i] = p[i] + -step_size * m[i] / denom; /* addcdiv_: self + value * t1 / t2, unfused */
    }
}
QKV_ISA_KERNEL_VOID(adam_range, (const upd *u, int64_t lo, int64_t hi), (u, lo, hi))

QKV_KERNEL_BODY void adadelta_range_body(const upd *u, int64_t lo, int64_t hi) {
    float *restrict p = u->p, *restrict g = u->g, *restrict sq = u->s1, *restrict acc = u->s2;
    const float lr = u->lr, wd = u->wd, rho = u->rho, omr = u->omr, eps = u->eps;
    for (int64_t i = lo; i < hi; i++) {
        float gi = g[i];
        if (wd != 0) gi = fmaf(wd, p[i], gi);
        sq[i] = sq[i] * rho + omr * gi * gi;
        float std = sqrtf(sq[i] + eps);
        float delta = sqrtf(acc[i] + eps) / std * gi;
        acc[i] = acc[i] * rho + omr * delta * delta;
        p[i] = fmaf(-lr, delta, p[i]);
    }
}
QKV_ISA_KERNEL_VOID(adadelta_range, (const upd *u, int64_t lo, int64_t hi), (u, lo, hi))

typedef enum { U_SGD, U_ADAM, U_ADADELTA } upd_kind;

/* Every element of u->p through one update, in chunks split over the threads for large parameters. */
static void run_update(upd_kind kind, const upd *u, int64_t n) {
    int64_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n > (1 << 15)) /* a 256 x 256 weight splits too */
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo = c * CHUNK, hi = n - lo < CHUNK ? n : lo + CHUNK;
        switch (kind) {
        case U_SGD: sgd_range(u, lo, hi); break;
        case U_ADAM: adam_range(u, lo, hi); break;
        case U_ADADELTA: adadelta_range(u, lo, hi); break;
        }
    }
}

static void sgd_update(const qkv_optim_config *c, slot *s, float lr, float wd) {
    upd u = {.p = s->p->data, .g = s->p->grad->data, .s1 = s->s1 ? s->s1->data : NULL, .lr = lr, .wd = wd,
             .mom = c->momentum, .damp = 1.0f - c->dampening, .first = !s->momentum_init, .nesterov = c->nesterov};
    run_update(U_SGD, &u, qkv_numel(s->p));
    s->momentum_init = true;
}

static void adam_update(const qkv_optim_config *c, slot *s, float lr, float wd, long t) {
    double bc1 = 1.0 - pow((double)c->beta1, (double)t), bc2 = 1.0 - pow((double)c->beta2, (double)t);
    upd u = {.p = s->p->data, .g = s->p->grad->data, .s1 = s->s1->data, .s2 = s->s2->data, .lr = lr, .wd = wd,
             .step_size = (float)((double)lr / bc1), .inv_bc2_sqrt = 1.0f / (float)sqrt(bc2), .b1 = c->beta1,
             .b2 = c->beta2, .omb1 = (float)(1.0 - (double)c->beta1), .omb2 = (float)(1.0 - (double)c->beta2),
             .eps = c->eps, .decay = (float)(1.0 - (double)lr * (double)wd), .decoupled = c->kind == QKV_ADAMW};
    run_update(U_ADAM, &u, qkv_numel(s->p));
}

static void adadelta_update(const qkv_optim_config *c, slot *s, float lr, float wd) {
    upd u = {.p = s->p->data, .g = s->p->grad->data, .s1 = s->s1->data, .s2 = s->s2->data, .lr = lr, .wd = wd,
             .rho = c->rho, .omr = (float)(1.0 - (double)c->rho), .eps = c->eps};
    run_update(U_ADADELTA, &u, qkv_numel(s->p));
}

qkv_status qkv_optim_step(qkv_optim *o) {
    o->steps++;
    qkv__weights_changed();
    for (int i = 0; i < o->n; i++) {
        slot *s = &o->slots[i];
        if (s->frozen || s->remote || !s->p->grad) continue;
        float lr = o->cfg.lr * s->lr_scale;
        float wd = isnan(s->weight_decay) ? o->cfg.weight_decay : s->weight_decay;
        if (o->cfg.decay_exclude_1d && s->p->ndim <= 1) wd = 0.0f;
        switch (o->cfg.kind) {
        case QKV_SGD: sgd_update(&o->cfg, s, lr, wd); break;
        case QKV_ADAM:
        case QKV_ADAMW: adam_update(&o->cfg, s, lr, wd, o->steps - s->since); break;
        case QKV_ADADELTA: adadelta_update(&o->cfg, s, lr, wd); break;
        }
    }
    return QKV_OK;
}

void qkv_optim_zero_grad(qkv_optim *o) {
    for (int i = 0; i < o->n; i++) qkv_tensor_zero_grad(o->slots[i].p);
}
void qkv_optim_set_lr(qkv_optim *o, float lr) { o->cfg.lr = lr; }
float qkv_optim_lr(const qkv_optim *o) { return o->cfg.lr; }
long qkv_optim_steps(const qkv_optim *o) { return o->steps; }
void qkv_optim_set_steps(qkv_optim *o, long steps) {
    o->steps = steps;
    for (int i = 0; i < o->n; i++) o->slots[i].momentum_init = steps > o->slots[i].since;
}

int qkv_optim_param_count(const qkv_optim *o) { return o->n; }

qkv_tensor *qkv_optim_param_at(const qkv_optim *o, int i) { return i >= 0 && i < o->n ? o->slots[i].p : NULL; }

qkv_optim_param qkv_optim_param_get(const qkv_optim *o, int i) {
    const slot *s = &o->slots[i];
    return (qkv_optim_param){.frozen = s->frozen, .lr_scale = s->lr_scale, .weight_decay = s->weight_decay,
                             .since = s->since};
}

/* A frozen parameter also stops requiring a gradient, so backward skips the work for it (an embedding's scatter,
 * a weight's GEMM); the slot and its moments stay, so a checkpoint has the same tensors whatever is frozen. */
void qkv_optim_param_set(qkv_optim *o, int i, const qkv_optim_param *g) {
    slot *s = &o->slots[i];
    s->frozen = g->frozen;
    s->lr_scale = g->lr_scale;
    s->weight_decay = g->weight_decay;
    s->since = g->since < 0 ? 0 : g->since;
    s->momentum_init = o->steps > s->since;
    qkv_tensor_set_requires_grad(s->p, !g->frozen);
}

static int for_prefix(qkv_optim *o, const char *prefix, bool set_frozen, bool frozen, float scale) {
    size_t len = strlen(prefix);
    int matched = 0;
    for (int i = 0; i < o->n; i++) {
        if (strncmp(o->slots[i].p->name, prefix, len)) continue;
        if (set_frozen)
            o->slots[i].frozen = frozen;
        else
            o->slots[i].lr_scale = scale;
        matched++;
    }
    if (!matched) qkv_error_set(QKV_ERR_INVALID, "optimiser: no trainable parameter name starts with '%s'", prefix);
    return matched;
}

int qkv_optim_freeze(qkv_optim *o, const char *prefix, bool frozen) { return for_prefix(o, prefix, true, frozen, 0); }
int qkv_optim_set_lr_scale(qkv_optim *o, const char *prefix, float scale) {
    return for_prefix(o, prefix, false, false, scale);
}

int qkv_optim_state_count(const qkv_optim *o) {
    int k = 0;
    for (int i = 0; i < o->n; i++) k += (o->slots[i].s1 != NULL) + (o->slots[i].s2 != NULL);
    return k;
}

qkv_tensor *qkv_optim_state_at(const qkv_optim *o, int idx) {
    for (int i = 0; i < o->n; i++) {
        if (o->slots[i].s1 && idx-- == 0) return o->slots[i].s1;
        if (o->slots[i].s2 && idx-- == 0) return o->slots[i].s2;
    }
    return NULL;
}

/* ---- ZeRO-1 (src/train/zero.c) ----------------------------------------------------------------------------- */

int qkv__optim_slots(const qkv_optim *o) { return o->n; }
int qkv__optim_states_per_slot(const qkv_optim *o) {
    return o->cfg.kind != QKV_SGD ? 2 : o->cfg.momentum > 0 ? 1 : 0;
}
qkv_tensor *qkv__optim_slot_param(const qkv_optim *o, int i) { return o->slots[i].p; }
qkv_tensor *qkv__optim_slot_state(const qkv_optim *o, int i, int which) {
    return which == 0 ? o->slots[i].s1 : o->slots[i].s2;
}

qkv_status qkv__optim_slot_set_remote(qkv_optim *o, int i, bool remote) {
    slot *s = &o->slots[i];
    if (remote) {
        qkv_tensor_free(s->s1);
        qkv_tensor_free(s->s2);
        s->s1 = s->s2 = NULL;
        s->remote = true;
        return QKV_OK;
    }
    /* Back to local (zeroed state, named as qkv_optim_new names it): the caller fills it. */
    qkv_optim_config *c = &o->cfg;
    bool two = c->kind != QKV_SGD, one = two || c->momentum > 0;
    qkv_tensor *p = s->p;
    const char *slot_names[4][2] = {{"momentum_buffer", ""}, {"exp_avg", "exp_avg_sq"}, {"exp_avg", "exp_avg_sq"},
                                    {"square_avg", "acc_delta"}};
    char name[sizeof p->name + 64];
    if (one && !s->s1) {
        if (!(s->s1 = qkv_tensor_new(QKV_F32, p->ndim, p->shape))) return qkv_last_status();
        snprintf(name, sizeof name, "%s.%s.%s", kind_name(c->kind), slot_names[c->kind][0], p->name);
        qkv_tensor_set_name(s->s1, name);
    }
    if (two && !s->s2) {
        if (!(s->s2 = qkv_tensor_new(QKV_F32, p->ndim, p->shape))) return qkv_last_status();
        snprintf(name, sizeof name, "%s.%s.%s", kind_name(c->kind), slot_names[c->kind][1], p->name);
        qkv_tensor_set_name(s->s2, name);
    }
    s->remote = false;
    return QKV_OK;
}

/* ---- clipping ----------------------------------------------------------------------------------------------- */

float qkv_clip_grad_norm(qkv_params *params, float max_norm) {
    /* torch: total = norm(stack(norm(g_i))); each per-tensor norm is accumulated in double here for
     * determinism and accuracy, then rounded to float as torch's per-tensor results are. */
    double total_sq = 0;
    int n = qkv_params_count(params);
    for (int i = 0; i < n; i++) {
        qkv_tensor *p = qkv_params_at(params, i);
        if (!p->grad) continue;
        const float *g = p->grad->data;
        double s = 0;
        int64_t m = qkv_numel(p->grad);
        for (int64_t j = 0; j < m; j++) s += (double)g[j] * g[j];
        float norm_i = (float)sqrt(s);
        total_sq += (double)norm_i * norm_i;
    }
    float total = (float)sqrt(total_sq);
    if (!isfinite(total)) return total;
    float coef = max_norm / (total + 1e-6f);
    if (coef >= 1.0f) return total;
    for (int i = 0; i < n; i++) {
        qkv_tensor *p = qkv_params_at(params, i);
        if (!p->grad) continue;
        float *g = p->grad->data;
        int64_t m = qkv_numel(p->grad);
        for (int64_t j = 0; j < m; j++) g[j] *= coef;
    }
    return total;
}

void qkv_clip_grad_value(qkv_params *params, float clip) {
    int n = qkv_params_count(params);
    for (int i = 0; i < n; i++) {
        qkv_tensor *p = qkv_params_at(params, i);
        if (!p->grad) continue;
        float *g = p->grad->data;
        int64_t m = qkv_numel(p->grad);
        for (int64_t j = 0; j < m; j++) g[j] = g[j] > clip ? clip : (g[j] < -clip ? -clip : g[j]);
    }
}
