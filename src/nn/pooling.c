/* Padding masks (checked, or made from a batch's token mask), masked mean and max pooling over time, L2
 * normalisation. */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "nn/nn_internal.h"
#include "qkv/nn_layers.h"
#include "qkv/ops.h"

/* Reads a [B, T] mask (int32 or float32, any strides) as "is non-zero". */
static bool nonzero_at(const qkv_tensor *m, int64_t b, int64_t t) {
    int64_t off = b * m->stride[0] + t * m->stride[1];
    return m->dtype == QKV_I32 ? qkv_i32(m)[off] != 0 : qkv_f32(m)[off] != 0.0f;
}

bool qkv__nn_check_pad_mask(const char *what, const qkv_tensor *m, int64_t B, int64_t T) {
    if (!m) return true;
    if ((m->dtype != QKV_I32 && m->dtype != QKV_F32) || m->ndim != 2 || m->shape[0] != B || m->shape[1] != T) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "%s: padding mask %s must be int32 or float32 [%lld, %lld]", what,
                      qkv_shape_str(m, s, sizeof s), (long long)B, (long long)T);
        return false;
    }
    return true;
}

qkv_tensor *qkv_nn_padding_of(qkv_ctx *ctx, const qkv_tensor *mask) {
    if (!mask) return NULL;
    if (mask->ndim != 2 || (mask->dtype != QKV_F32 && mask->dtype != QKV_I32)) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "token mask %s must be int32 or float32 [batch, time]",
                      qkv_shape_str(mask, s, sizeof s));
        return NULL;
    }
    qkv_tensor *pad = qkv_ctx_tensor(ctx, QKV_F32, 2, mask->shape);
    if (!pad) return NULL;
    float *p = qkv_f32(pad);
    for (int64_t b = 0; b < mask->shape[0]; b++)
        for (int64_t t = 0; t < mask->shape[1]; t++) *p++ = nonzero_at(mask, b, t) ? 0.0f : 1.0f;
    return pad;
}

qkv_tensor *qkv_nn_masked_mean(qkv_ctx *ctx, qkv_tensor *x, const qkv_tensor *pad_mask) {
    if (!x) return NULL;
    char s[96];
    if (x->dtype != QKV_F32 || x->ndim != 3) {
        qkv_error_set(QKV_ERR_INVALID, "masked_mean: input %s must be float32 [B, T, D]",
                      qkv_shape_str(x, s, sizeof s));
        return NULL;
    }
    int64_t B = x->shape[0], T = x->shape[1];
    if (!qkv__nn_check_pad_mask("masked_mean", pad_mask, B, T)) return NULL;
    /* Weights 1/count at kept steps and 0 at padded ones: the mean is then one weighted sum over time. */
    qkv_tensor *w = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(B, T, 1));
    if (!w) return NULL;
    float *wp = qkv_f32(w);
    for (int64_t b = 0; b < B; b++) {
        int64_t count = 0;
        for (int64_t t = 0; t < T; t++) count += !(pad_mask && nonzero_at(pad_mask, b, t));
        for (int64_t t = 0; t < T; t++)
            wp[b * T + t] = (pad_mask && nonzero_at(pad_mask, b, t)) || !count ? 0.0f : 1.0f / (float)count;
    }
    return qkv_sum(ctx, qkv_mul(ctx, x, w), 1, false);
}

/* ---- L2 normalise: y = x / n with n = max(|x|, eps) per row. The clamp, as in torch, makes rows with |x| <= eps
 * a plain scaling by 1/eps (no gradient through the norm). ---- */

static qkv_status l2_normalize_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    if (!gx) return QKV_OK;
    const float *y = qkv_f32(nd->out), *g = qkv_f32(nd->out->grad), *norms = nd->saved;
    float *dx = qkv_f32(gx);
    int64_t rows = nd->i[0], D = nd->i[1];
    double eps = nd->f[0];
#pragma omp parallel for schedule(static) if (rows * D > (1 << 15))
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * D, *gr = g + r * D;
        float *d = dx + r * D;
        double n = norms[r];
        if (n <= eps) {
            if (eps > 0)
                for (int64_t j = 0; j < D; j++) d[j] += (float)(gr[j] / eps);
            continue;
        }
        /* dx = (g - y (y . g)) / n */
        double dot = 0;
        for (int64_t j = 0; j < D; j++) dot += (double)yr[j] * gr[j];
        for (int64_t j = 0; j < D; j++) d[j] += (float)((gr[j] - yr[j] * dot) / n);
    }
    return QKV_OK;
}

qkv_tensor *qkv_nn_l2_normalize(qkv_ctx *ctx, qkv_tensor *x, float eps) {
    if (!x) return NULL;
    if (!qkv__check_f32("l2_normalize", x, "x")) return NULL;
    if (x->ndim < 1 || !(eps >= 0.0f) || !isfinite(eps)) {
        qkv_error_set(QKV_ERR_INVALID, "l2_normalize: needs rank >= 1 and a finite eps >= 0 (got rank %d, eps %g)",
                      x->ndim, (double)eps);
        return NULL;
    }
    int64_t D = x->shape[x->ndim - 1], rows = D ? qkv_numel(x) / D : 0;
    const float *xp = qkv__contig_data(ctx, x);
    qkv_tensor *out = qkv__out_like(ctx, x);
    float *norms = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(rows ? rows : 1));
    if (!xp || !out || !norms) return NULL;
    float *y = qkv_f32(out);
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t j = 0; j < D; j++) ss += (double)xp[r * D + j] * xp[r * D + j];
        norms[r] = (float)sqrt(ss);
        float n = norms[r] > eps ? norms[r] : eps;
        for (int64_t j = 0; j < D; j++) y[r * D + j] = n > 0.0f ? xp[r * D + j] / n : 0.0f;
    }
    qkv_node *nd = qkv_record(ctx, out, "l2_normalize", l2_normalize_backward, 1, &x);
    if (nd) {
        nd->saved = norms;
        nd->i[0] = rows;
        nd->i[1] = D;
        nd->f[0] = eps;
    }
    return out;
}

/* ---- Max over time of the unpadded steps: the argmax of each (row, feature) is kept for the backward, which
 * hands the gradient to that one step (the first maximal one, as torch.max). ---- */

static qkv_status masked_max_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    if (!gx) return QKV_OK;
    const int32_t *arg = nd->saved;
    const float *g = qkv_f32(nd->out->grad);
    float *dx = qkv_f32(gx);
    int64_t B = nd->i[0], T = nd->i[1], D = nd->i[2];
    for (int64_t b = 0; b < B; b++)
        for (int64_t d = 0; d < D; d++) {
            int32_t t = arg[b * D + d];
            if (t >= 0) dx[(b * T + t) * D + d] += g[b * D + d];
        }
    return QKV_OK;
}

qkv_tensor *qkv_nn_masked_max(qkv_ctx *ctx, qkv_tensor *x, const qkv_tensor *pad_mask) {
    if (!x) return NULL;
    char s[96];
    if (x->dtype != QKV_F32 || x->ndim != 3) {
        qkv_error_set(QKV_ERR_INVALID, "masked_max: input %s must be float32 [B, T, D]",
                      qkv_shape_str(x, s, sizeof s));
        return NULL;
    }
    int64_t B = x->shape[0], T = x->shape[1], D = x->shape[2];
    if (!qkv__nn_check_pad_mask("masked_max", pad_mask, B, T)) return NULL;
    const float *xp = qkv__contig_data(ctx, x);
    qkv_tensor *out = xp ? qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(B, D)) : NULL;
    int32_t *arg = out ? qkv_ctx_alloc(ctx, sizeof(int32_t) * (size_t)(B * D > 0 ? B * D : 1)) : NULL;
    if (!arg) return NULL;
    float *y = qkv_f32(out);
#pragma omp parallel for schedule(static) if (B * T * D > (1 << 15))
    for (int64_t b = 0; b < B; b++) {
        float *yb = y + b * D;
        int32_t *ab = arg + b * D;
        for (int64_t d = 0; d < D; d++) ab[d] = -1;
        for (int64_t t = 0; t < T; t++) {
            if (pad_mask && nonzero_at(pad_mask, b, t)) continue;
            const float *row = xp + (b * T + t) * D;
            for (int64_t d = 0; d < D; d++)
                if (ab[d] < 0 || row[d] > yb[d]) {
                    yb[d] = row[d];
                    ab[d] = (int32_t)t;
                }
        }
        for (int64_t d = 0; d < D; d++)
            if (ab[d] < 0) yb[d] = 0.0f; /* nothing to pool: zeros, as masked_mean */
    }
    qkv_node *nd = qkv_record(ctx, out, "masked_max", masked_max_backward, 1, &x);
    if (nd) {
        nd->saved = arg;
        nd->i[0] = B;
        nd->i[1] = T;
        nd->i[2] = D;
    }
    return out;
}
