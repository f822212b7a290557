/* Losses: cross-entropy (fused log-softmax + NLL, with torch's ignore_index, class weights and label smoothing,
 * plus per-token weights), mean squared error and cosine similarity.
 *
 * Cross-entropy of one row z (C logits, target t, lse = log sum exp z, w = class weights or all ones,
 * W = sum_c w_c, e = label_smoothing):
 *     loss = (1 - e) w_t (lse - z_t) + e/C sum_c w_c (lse - z_c)          (torch 1.13's formula)
 *     dloss/dz_c = p_c ((1 - e) w_t + e W / C) - (1 - e) w_t [c == t] - e w_c / C,   p = softmax(z)
 * The forward keeps only lse per row; the backward recomputes p from the logits. Rows run in parallel; the sums
 * over rows run serially in double, so results do not depend on the thread count.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "ops/fast_exp.h"
#include "ops/ops_internal.h"
#include "qkv/ops.h"

#define PAR_MIN (1 << 15) /* elements below which a kernel is not worth threading */

/* ---- helpers ------------------------------------------------------------------------------------------------ */

static bool check_reduction(const char *op, qkv_reduction r) {
    if (r == QKV_REDUCE_MEAN || r == QKV_REDUCE_SUM || r == QKV_REDUCE_NONE) return true;
    qkv_error_set(QKV_ERR_INVALID, "%s: unknown reduction %d (expected mean, sum or none)", op, (int)r);
    return false;
}

/* Strides of t aligned to an n-dim shape, 0 along broadcast dimensions. */
static void aligned_strides(const qkv_tensor *t, int n, int64_t *s) {
    for (int d = 0; d < n; d++) {
        int td = d - (n - t->ndim);
        s[d] = (td < 0 || t->shape[td] == 1) ? 0 : t->stride[td];
    }
}

/* t broadcast to the n-dim shape as contiguous data: t's own data when it already is exactly that. */
static const float *expand(qkv_ctx *ctx, const qkv_tensor *t, int n, const int64_t *shape) {
    qkv_tensor v;
    qkv__header(&v, QKV_F32, n, shape);
    if (qkv_same_shape(t, &v) && qkv_is_contiguous(t)) return t->data;
    aligned_strides(t, n, v.stride);
    v.data = t->data;
    int64_t count = qkv_numel(&v), k = 0;
    float *dst = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(count ? count : 1));
    if (!dst) return NULL;
    const float *src = t->data;
    QKV_FOR_EACH_OFFSET(&v, off, dst[k++] = src[off]);
    return dst;
}

/* grad(t) += g (contiguous, in the n-dim broadcast shape), reduced over the dimensions t was broadcast along. */
static void add_grad(qkv_ctx *ctx, qkv_tensor *t, const float *g, int n, const int64_t *shape) {
    qkv_tensor *gt = qkv_grad_for(ctx, t);
    if (!gt) return;
    qkv_tensor like;
    qkv__header(&like, QKV_F32, n, shape);
    if (qkv_same_shape(t, &like)) {
        float *d = gt->data;
        int64_t count = qkv_numel(t);
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
        for (int64_t i = 0; i < count; i++) d[i] += g[i];
    } else {
        qkv__reduce_broadcast_add(gt->data, t, g, n, shape);
    }
}

/* A 0-d result (mean / sum reductions). */
static qkv_tensor *scalar_out(qkv_ctx *ctx, double value) {
    int64_t none[1] = {1};
    qkv_tensor *out = qkv__out(ctx, QKV_F32, 0, none);
    if (out) qkv_f32(out)[0] = (float)value;
    return out;
}

/* ---- cross-entropy -------------------------------------------------------------------------------------------- */

qkv_ce_opts qkv_ce_defaults(void) {
    return (qkv_ce_opts){.ignore_index = -100, .class_weight = NULL, .token_weight = NULL,
                         .label_smoothing = 0.0f, .reduction = QKV_REDUCE_MEAN};
}

typedef struct {
    const float *z;   /* logits, contiguous [n, c] */
    const int32_t *t; /* targets [n] */
    const float *cw;  /* class weights [c] or NULL */
    const float *tw;  /* token weights [n] or NULL */
    float *lse;       /* per row log-sum-exp (unset for ignored rows) */
    int64_t n, c;
    int ignore;
    float eps;        /* label smoothing */
    float wsum;       /* sum of class weights (c without them) */
    double denom;     /* mean: sum of w_t * token weight over the rows that count */
    qkv_reduction reduction;
} ce_saved;

/* Log-sum-exp of a row. Eight lanes of partial maxima and sums let gcc vectorise both loops without
 * reassociating (no -ffast-math), and fix the summation order. Compiled per instruction set (core/isa.h). */
QKV_KERNEL_BODY float row_lse_body(const float *z, int64_t c) {
    float mx[8], acc[8] = {0};
    for (int l = 0; l < 8; l++) mx[l] = z[0];
    int64_t k = 0;
    for (; k + 8 <= c; k += 8)
        for (int l = 0; l < 8; l++) mx[l] = z[k + l] > mx[l] ? z[k + l] : mx[l];
    for (; k < c; k++) mx[0] = z[k] > mx[0] ? z[k] : mx[0];
    float m = mx[0];
    for (int l = 1; l < 8; l++) m = mx[l] > m ? mx[l] : m;
    k = 0;
    for (; k + 8 <= c; k += 8)
        for (int l = 0; l < 8; l++) acc[l] += qkv__expf(z[k + l] - m);
    for (; k < c; k++) acc[0] += qkv__expf(z[k] - m);
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    return m + logf(s);
}
QKV_ISA_KERNEL(float, row_lse, (const float *z, int64_t c), (z, c))

/* d += a softmax(z) - b (w: class weights scaling b, or NULL): one row of the cross-entropy gradient. */
QKV_KERNEL_BODY void ce_row_grad_body(float *restrict d, const float *restrict z, const float *restrict w, int64_t c,
                                      float lse, float a, float b) {
    if (w)
        for (int64_t k = 0; k < c; k++) d[k] += a * qkv__expf(z[k] - lse) - b * w[k];
    else
        for (int64_t k = 0; k < c; k++) d[k] += a * qkv__expf(z[k] - lse) - b;
}
QKV_ISA_KERNEL_VOID(ce_row_grad,
                    (float *restrict d, const float *restrict z, const float *restrict w, int64_t c, float lse, float a,
                     float b),
                    (d, z, w, c, lse, a, b))

static qkv_status ce_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gz = qkv_grad_for(ctx, nd->in[0]);
    if (!gz) return QKV_OK;
    const ce_saved *s = nd->saved;
    const float *g = nd->out->grad->data;
    float *dz = gz->data;
    int64_t n = s->n, c = s->c;
    float e = s->eps, ec = s->eps / (float)c;
    /* A mean over zero weight is NaN in the forward (as torch); no row then receives a gradient. */
    double per = s->reduction == QKV_REDUCE_MEAN ? (s->denom != 0 ? g[0] / s->denom : 0.0) : g[0];
#pragma omp parallel for schedule(static) if (n * c > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        int32_t t = s->t[i];
        if (t == s->ignore) continue;
        float scale = (float)(s->reduction == QKV_REDUCE_NONE ? g[i] : per) * (s->tw ? s->tw[i] : 1.0f);
        float wt = s->cw ? s->cw[t] : 1.0f;
        float a = scale * ((1 - e) * wt + ec * s->wsum), lse = s->lse[i];
        const float *z = s->z + i * c;
        float *d = dz + i * c;
        ce_row_grad(d, z, s->cw && e != 0 ? s->cw : NULL, c, lse, a, scale * ec);
        d[t] -= scale * (1 - e) * wt;
    }
    return QKV_OK;
}

/* Validates everything cross_entropy reads; the error names the argument and what was expected. */
static bool ce_check(const qkv_tensor *logits, const qkv_tensor *targets, const qkv_ce_opts *o) {
    char sl[96], st[96], sw[96];
    if (!qkv__check_f32("cross_entropy", logits, "logits")) return false;
    if (targets->dtype != QKV_I32) {
        qkv_error_set(QKV_ERR_INVALID, "cross_entropy: targets must be int32");
        return false;
    }
    bool match = logits->ndim >= 1 && targets->ndim == logits->ndim - 1;
    for (int d = 0; match && d < targets->ndim; d++) match = targets->shape[d] == logits->shape[d];
    if (!match || logits->shape[logits->ndim - 1] < 1) {
        qkv_error_set(QKV_ERR_INVALID, "cross_entropy: logits %s must be [..., C] with C >= 1 and targets %s its "
                      "shape without the class axis", qkv_shape_str(logits, sl, sizeof sl),
                      qkv_shape_str(targets, st, sizeof st));
        return false;
    }
    int64_t c = logits->shape[logits->ndim - 1];
    if (o->class_weight) {
        const qkv_tensor *w = o->class_weight;
        if (w->dtype != QKV_F32 || w->ndim != 1 || w->shape[0] != c) {
            qkv_error_set(QKV_ERR_INVALID, "cross_entropy: class_weight must be float32 [%lld], got %s%s",
                          (long long)c, qkv_shape_str(w, sw, sizeof sw), w->dtype == QKV_F32 ? "" : " int32");
            return false;
        }
    }
    if (o->token_weight) {
        const qkv_tensor *w = o->token_weight;
        if (w->dtype != QKV_F32 || !qkv_same_shape(w, targets)) {
            qkv_error_set(QKV_ERR_INVALID, "cross_entropy: token_weight must be float32 of the targets' shape %s, "
                          "got %s%s", qkv_shape_str(targets, st, sizeof st), qkv_shape_str(w, sw, sizeof sw),
                          w->dtype == QKV_F32 ? "" : " int32");
            return false;
        }
    }
    if (!(o->label_smoothing >= 0.0f && o->label_smoothing < 1.0f)) {
        qkv_error_set(QKV_ERR_INVALID, "cross_entropy: label_smoothing %g outside [0, 1)", (double)o->label_smoothing);
        return false;
    }
    return check_reduction("cross_entropy", o->reduction);
}

qkv_tensor *qkv_cross_entropy(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets, const qkv_ce_opts *opts) {
    if (!logits || !targets) return NULL;
    qkv_ce_opts o = opts ? *opts : qkv_ce_defaults();
    if (!ce_check(logits, targets, &o)) return NULL;
    int64_t c = logits->shape[logits->ndim - 1], n = qkv_numel(targets);
    ce_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
    if (!s) return NULL;
    *s = (ce_saved){.n = n, .c = c, .ignore = o.ignore_index, .eps = o.label_smoothing, .reduction = o.reduction};
    s->t = (const int32_t *)qkv__contig_data(ctx, targets);
    if (!s->t) return NULL;
    for (int64_t i = 0; i < n; i++) {
        int32_t t = s->t[i];
        if (t == o.ignore_index || (t >= 0 && t < c)) continue;
        char st[96];
        int64_t idx[QKV_MAX_DIMS], rem = i;
        for (int d = targets->ndim - 1; d >= 0; d--) {
            idx[d] = rem % targets->shape[d];
            rem /= targets->shape[d];
        }
        size_t used = (size_t)snprintf(st, sizeof st, "[");
        for (int d = 0; d < targets->ndim && used < sizeof st; d++)
            used += (size_t)snprintf(st + used, sizeof st - used, d ? ", %lld" : "%lld", (long long)idx[d]);
        if (used < sizeof st) snprintf(st + used, sizeof st - used, "]");
        qkv_error_set(QKV_ERR_RANGE, "cross_entropy: target %d at position %s is outside the classes [0, %lld) "
                      "and is not ignore_index %d", t, st, (long long)c, o.ignore_index);
        return NULL;
    }
    s->z = qkv__contig_data(ctx, logits);
    s->cw = o.class_weight ? qkv__contig_data(ctx, o.class_weight) : NULL;
    s->tw = o.token_weight ? qkv__contig_data(ctx, o.token_weight) : NULL;
    s->lse = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(n ? n : 1));
    float *loss = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(n ? n : 1));
    if (!s->z || (o.class_weight && !s->cw) || (o.token_weight && !s->tw) || !s->lse || !loss) return NULL;
    double wsum = 0;
    for (int64_t k = 0; k < c; k++) wsum += s->cw ? s->cw[k] : 1.0f;
    s->wsum = (float)wsum;
    float e = s->eps, ec = e / (float)c;
#pragma omp parallel for schedule(static) if (n * c > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        int32_t t = s->t[i];
        if (t == s->ignore) {
            loss[i] = 0.0f;
            continue;
        }
        const float *z = s->z + i * c;
        float lse = row_lse(z, c), wt = s->cw ? s->cw[t] : 1.0f;
        float l = (1 - e) * wt * (lse - z[t]);
        if (e != 0) {
            float smooth = 0;
            if (s->cw)
                for (int64_t k = 0; k < c; k++) smooth += s->cw[k] * (lse - z[k]);
            else
                for (int64_t k = 0; k < c; k++) smooth += lse - z[k];
            l += ec * smooth;
        }
        s->lse[i] = lse;
        loss[i] = s->tw ? l * s->tw[i] : l;
    }
    qkv_tensor *out;
    if (o.reduction == QKV_REDUCE_NONE) {
        out = qkv__out(ctx, QKV_F32, targets->ndim, targets->shape);
        if (!out) return NULL;
        memcpy(out->data, loss, sizeof(float) * (size_t)n);
    } else {
        double total = 0, denom = 0;
        for (int64_t i = 0; i < n; i++) {
            int32_t t = s->t[i];
            if (t == s->ignore) continue;
            total += loss[i];
            denom += (double)(s->cw ? s->cw[t] : 1.0f) * (s->tw ? s->tw[i] : 1.0f);
        }
        s->denom = denom;
        /* All tokens ignored (or weighted 0): 0 / 0 = NaN, as torch. */
        out = scalar_out(ctx, o.reduction == QKV_REDUCE_MEAN ? total / denom : total);
        if (!out) return NULL;
    }
    qkv_node *nd = qkv_record(ctx, out, "cross_entropy", ce_backward, 1, &logits);
    if (nd) nd->saved = s;
    return out;
}

/* ---- mse ---------------------------------------------------------------------------------------------------- */

typedef struct {
    const float *diff; /* a - b in the broadcast shape */
    int n;
    int64_t shape[QKV_MAX_DIMS];
    qkv_reduction reduction;
} mse_saved;

static qkv_status mse_backward(qkv_ctx *ctx, qkv_node *nd) {
    const mse_saved *s = nd->saved;
    const float *g = nd->out->grad->data;
    int64_t count = 1;
    for (int d = 0; d < s->n; d++) count *= s->shape[d];
    float *ga = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(count ? count : 1));
    if (!ga) return qkv_last_status();
    float k = s->reduction == QKV_REDUCE_MEAN ? 2.0f * g[0] / (float)count : 2.0f * g[0];
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
    for (int64_t i = 0; i < count; i++) ga[i] = (s->reduction == QKV_REDUCE_NONE ? 2.0f * g[i] : k) * s->diff[i];
    add_grad(ctx, nd->in[0], ga, s->n, s->shape);
    if (qkv_grad_for(ctx, nd->in[1])) {
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
        for (int64_t i = 0; i < count; i++) ga[i] = -ga[i];
        add_grad(ctx, nd->in[1], ga, s->n, s->shape);
    }
    return QKV_OK;
}

qkv_tensor *qkv_mse(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, qkv_reduction reduction) {
    if (!a || !b) return NULL;
    if (!qkv__check_f32("mse", a, "a") || !qkv__check_f32("mse", b, "b") || !check_reduction("mse", reduction))
        return NULL;
    mse_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
    if (!s || !qkv__broadcast_shape("mse", a, b, &s->n, s->shape)) return NULL;
    s->reduction = reduction;
    const float *ea = expand(ctx, a, s->n, s->shape), *eb = ea ? expand(ctx, b, s->n, s->shape) : NULL;
    int64_t count = 1;
    for (int d = 0; d < s->n; d++) count *= s->shape[d];
    float *diff = eb ? qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(count ? count : 1)) : NULL;
    if (!diff) return NULL;
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
    for (int64_t i = 0; i < count; i++) diff[i] = ea[i] - eb[i];
    s->diff = diff;
    qkv_tensor *out;
    if (reduction == QKV_REDUCE_NONE) {
        out = qkv__out(ctx, QKV_F32, s->n, s->shape);
        if (!out) return NULL;
        float *o = out->data;
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
        for (int64_t i = 0; i < count; i++) o[i] = diff[i] * diff[i];
    } else {
        double total = 0;
        for (int64_t i = 0; i < count; i++) total += (double)diff[i] * diff[i];
        out = scalar_out(ctx, reduction == QKV_REDUCE_MEAN ? total / (double)count : total);
        if (!out) return NULL;
    }
    qkv_tensor *in[2] = {a, b};
    qkv_node *nd = qkv_record(ctx, out, "mse", mse_backward, 2, in);
    if (nd) nd->saved = s;
    return out;
}

/* ---- binary cross-entropy on logits ----------------------------------------------------------------------------
 * torch.nn.functional.binary_cross_entropy_with_logits: with L = 1 + (p - 1) y (p = pos_weight, 1 if absent),
 *     loss = (1 - y) x + L softplus(-x),   softplus(-x) = log(1 + exp(-|x|)) + max(-x, 0)  (stable)
 *     dloss/dx = (1 - y) - L sigmoid(-x),   dloss/dy = -x + (p - 1) softplus(-x). */

typedef struct {
    int n;
    int64_t shape[QKV_MAX_DIMS];
    const float *x, *y, *pw; /* expanded to the common shape; pw NULL = 1 */
    qkv_reduction reduction;
} bce_saved;

static inline float softplus_neg(float x) { return log1pf(expf(-fabsf(x))) + (x < 0 ? -x : 0.0f); }

static qkv_status bce_backward(qkv_ctx *ctx, qkv_node *nd) {
    const bce_saved *s = nd->saved;
    const float *g = nd->out->grad->data;
    int64_t count = 1;
    for (int d = 0; d < s->n; d++) count *= s->shape[d];
    float *gx = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(count ? count : 1));
    if (!gx) return qkv_last_status();
    float k = s->reduction == QKV_REDUCE_MEAN ? g[0] / (float)count : g[0];
    bool want_y = qkv_grad_for(ctx, nd->in[1]) != NULL;
    for (int pass = 0; pass < (want_y ? 2 : 1); pass++) {
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
        for (int64_t i = 0; i < count; i++) {
            float x = s->x[i], y = s->y[i], p = s->pw ? s->pw[i] : 1.0f;
            float up = s->reduction == QKV_REDUCE_NONE ? g[i] : k;
            float d = pass == 0 ? (1.0f - y) - (1.0f + (p - 1.0f) * y) / (1.0f + expf(x))
                                : -x + (p - 1.0f) * softplus_neg(x);
            gx[i] = up * d;
        }
        add_grad(ctx, nd->in[pass], gx, s->n, s->shape);
    }
    return QKV_OK;
}

qkv_tensor *qkv_bce_with_logits(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets, qkv_tensor *pos_weight,
                                qkv_reduction reduction) {
    if (!logits || !targets) return NULL;
    if (!qkv__check_f32("bce_with_logits", logits, "logits") || !qkv__check_f32("bce_with_logits", targets, "targets") ||
        (pos_weight && !qkv__check_f32("bce_with_logits", pos_weight, "pos_weight")) ||
        !check_reduction("bce_with_logits", reduction))
        return NULL;
    bce_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
    if (!s || !qkv__broadcast_shape("bce_with_logits", logits, targets, &s->n, s->shape)) return NULL;
    if (pos_weight) {
        int n2;
        int64_t sh2[QKV_MAX_DIMS];
        qkv_tensor hdr = {.ndim = s->n};
        memcpy(hdr.shape, s->shape, sizeof hdr.shape);
        if (!qkv__broadcast_shape("bce_with_logits (pos_weight)", &hdr, pos_weight, &n2, sh2)) return NULL;
        if (n2 != s->n || memcmp(sh2, s->shape, sizeof(int64_t) * (size_t)n2)) {
            qkv_error_set(QKV_ERR_INVALID, "bce_with_logits: pos_weight must broadcast to the logits' shape");
            return NULL;
        }
    }
    s->reduction = reduction;
    s->x = expand(ctx, logits, s->n, s->shape);
    s->y = s->x ? expand(ctx, targets, s->n, s->shape) : NULL;
    s->pw = pos_weight && s->y ? expand(ctx, pos_weight, s->n, s->shape) : NULL;
    if (!s->y || (pos_weight && !s->pw)) return NULL;
    int64_t count = 1;
    for (int d = 0; d < s->n; d++) count *= s->shape[d];
    float *l = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(count ? count : 1));
    if (!l) return NULL;
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
    for (int64_t i = 0; i < count; i++) {
        float x = s->x[i], y = s->y[i], p = s->pw ? s->pw[i] : 1.0f;
        l[i] = (1.0f - y) * x + (1.0f + (p - 1.0f) * y) * softplus_neg(x);
    }
    qkv_tensor *out;
    if (reduction == QKV_REDUCE_NONE) {
        out = qkv__out(ctx, QKV_F32, s->n, s->shape);
        if (!out) return NULL;
        memcpy(out->data, l, sizeof(float) * (size_t)count);
    } else {
        double total = 0;
        for (int64_t i = 0; i < count; i++) total += l[i];
        out = scalar_out(ctx, reduction == QKV_REDUCE_MEAN ? total / (double)count : total);
        if (!out) return NULL;
    }
    qkv_tensor *in[2] = {logits, targets};
    qkv_node *nd = qkv_record(ctx, out, "bce_with_logits", bce_backward, 2, in);
    if (nd) nd->saved = s;
    return out;
}

/* ---- cosine similarity -------------------------------------------------------------------------------------------
 * torch 1.13 clamps each squared norm from below by eps^2 in place under no_grad and sums (a / |a|) * (b / |b|):
 * so y = a.b / (max(|a|, eps) max(|b|, eps)), and autograd never sees the clamp: d|a|/da = a / |a| with the
 * clamped |a|, giving dy/da = (b / |b| - y a / |a|) / |a| (clamped norms) whether or not the clamp was active.
 * This was checked against torch 1.13 numerically (tests/ref/ops_loss.py, case cos_eps). a and b are broadcast
 * to a common shape, viewed as [outer, len, inner] around the axis. */

typedef struct {
    const float *a, *b; /* inputs broadcast to `shape`, contiguous */
    float *na, *nb, *y; /* per output element: clamped norms and the similarity */
    int n;
    int64_t shape[QKV_MAX_DIMS];
    int64_t count, len, inner;
} cos_saved;

static qkv_status cosine_backward(qkv_ctx *ctx, qkv_node *nd) {
    const cos_saved *s = nd->saved;
    const float *g = nd->out->grad->data;
    bool want_a = qkv_grad_for(ctx, nd->in[0]) != NULL, want_b = qkv_grad_for(ctx, nd->in[1]) != NULL;
    int64_t total = s->count * s->len;
    float *ga = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(total ? total : 1));
    float *gb = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(total ? total : 1));
    if (!ga || !gb) return qkv_last_status();
#pragma omp parallel for schedule(static) if (total > PAR_MIN)
    for (int64_t r = 0; r < s->count; r++) {
        int64_t base = (r / s->inner) * s->len * s->inner + r % s->inner;
        float na = s->na[r], nb = s->nb[r], y = s->y[r], gr = g[r];
        for (int64_t k = 0; k < s->len; k++) {
            int64_t e = base + k * s->inner;
            float ah = s->a[e] / na, bh = s->b[e] / nb;
            ga[e] = gr * (bh - y * ah) / na;
            gb[e] = gr * (ah - y * bh) / nb;
        }
    }
    if (want_a) add_grad(ctx, nd->in[0], ga, s->n, s->shape);
    if (want_b) add_grad(ctx, nd->in[1], gb, s->n, s->shape);
    return QKV_OK;
}

qkv_tensor *qkv_cosine_similarity(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, int axis, float eps) {
    if (!a || !b) return NULL;
    if (!qkv__check_f32("cosine_similarity", a, "a") || !qkv__check_f32("cosine_similarity", b, "b")) return NULL;
    if (!(eps >= 0.0f)) {
        qkv_error_set(QKV_ERR_INVALID, "cosine_similarity: eps %g must be >= 0", (double)eps);
        return NULL;
    }
    cos_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
    if (!s || !qkv__broadcast_shape("cosine_similarity", a, b, &s->n, s->shape)) return NULL;
    qkv_tensor like;
    qkv__header(&like, QKV_F32, s->n, s->shape);
    int ax = qkv_axis(&like, axis);
    if (ax < 0) return NULL;
    s->len = s->shape[ax];
    s->inner = 1;
    for (int d = ax + 1; d < s->n; d++) s->inner *= s->shape[d];
    int64_t oshape[QKV_MAX_DIMS];
    for (int d = 0, k = 0; d < s->n; d++)
        if (d != ax) oshape[k++] = s->shape[d];
    qkv_tensor *out = qkv__out(ctx, QKV_F32, s->n - 1, oshape);
    if (!out) return NULL;
    s->count = qkv_numel(out);
    s->a = expand(ctx, a, s->n, s->shape);
    s->b = s->a ? expand(ctx, b, s->n, s->shape) : NULL;
    size_t bytes = sizeof(float) * (size_t)(s->count ? s->count : 1);
    s->na = qkv_ctx_alloc(ctx, bytes);
    s->nb = qkv_ctx_alloc(ctx, bytes);
    if (!s->b || !s->na || !s->nb) return NULL;
    s->y = out->data;
    double eps2 = (double)eps * eps;
    if (s->inner == 0) s->inner = 1; /* no output elements then; avoids a division by zero below */
#pragma omp parallel for schedule(static) if (s->count * s->len > PAR_MIN)
    for (int64_t r = 0; r < s->count; r++) {
        int64_t base = (r / s->inner) * s->len * s->inner + r % s->inner;
        double saa = 0, sbb = 0, sab = 0;
        for (int64_t k = 0; k < s->len; k++) {
            double x = s->a[base + k * s->inner], z = s->b[base + k * s->inner];
            saa += x * x;
            sbb += z * z;
            sab += x * z;
        }
        double na = sqrt(saa > eps2 ? saa : eps2), nb = sqrt(sbb > eps2 ? sbb : eps2);
        s->na[r] = (float)na;
        s->nb[r] = (float)nb;
        s->y[r] = (float)(sab / (na * nb));
    }
    qkv_tensor *in[2] = {a, b};
    qkv_node *nd = qkv_record(ctx, out, "cosine_similarity", cosine_backward, 2, in);
    if (nd) nd->saved = s;
    return out;
}
