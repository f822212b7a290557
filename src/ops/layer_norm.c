/* Layer norm over the last dimension, as torch.nn.functional.layer_norm(x, [D], gamma, beta, eps):
 *     xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps)  (biased variance),  y = xhat * gamma + beta.
 *
 * Forward and dx are per row (threads split rows). Mean and variance take two passes over the row (see
 * row_moments), more accurate than one-pass moments at no real cost: the row is in cache. The forward saves mean
 * and rstd per row.
 *
 * Backward, with gh = dy * gamma:  dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)),
 * dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy. The two column sums run over blocks of
 * columns, each block summing every row in order (in double), so they are deterministic for any thread count.
 * The per-row and per-block loops are compiled per instruction set and dispatched at run time (core/isa.h).
 */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "ops/row_sum.h"
#include "qkv/ops.h"

#define PAR_MIN (1 << 15)
#define LANES 16
#define COL_BLOCK 64

typedef struct {
    const float *x, *gamma; /* x's rows (contiguous: its data or an arena copy); gamma contiguous or NULL */
    float *mean, *mlo, *rstd; /* per row: the mean as mean + mlo (see row_moments), and 1/sqrt(var + eps) */
} ln_saved;


/* Mean and biased variance by the corrected two-pass algorithm: with d = x - m0 for a first mean m0, the mean is
 * m0 + c, c = sum(d)/D, and the variance sum(d^2)/D - c^2. The mean is returned unsummed, as (m0, c): x - m0 is
 * exact for x near m0, so (x - m0) - c keeps the digits that x - (m0 + c) would round away when |mean| >> std. */
QKV_KERNEL_BODY void row_moments(const float *restrict x, int64_t n, float *mean, float *mlo, float *var) {
    float m0 = qkv__row_sum(x, n) / (float)n;
    float s1[LANES] = {0}, s2[LANES] = {0};
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) {
            float d = x[k + l] - m0;
            s1[l] += d;
            s2[l] += d * d;
        }
    for (int l = 0; k < n; k++, l++) {
        float d = x[k] - m0;
        s1[l] += d;
        s2[l] += d * d;
    }
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) {
            s1[l] += s1[l + w];
            s2[l] += s2[l + w];
        }
    float c = s1[0] / (float)n, v = s2[0] / (float)n - c * c;
    *mean = m0;
    *mlo = c;
    *var = v > 0.0f ? v : 0.0f;
}

/* y of one row; its mean (as mean + mlo) and rstd saved for the backward. */
QKV_KERNEL_BODY void fwd_row_body(float *restrict yr, const float *restrict xr, const float *restrict g,
                                  const float *restrict b, int64_t D, float eps, float *mean, float *mlo, float *rstd) {
    float m, ml, var;
    row_moments(xr, D, &m, &ml, &var);
    float rs = 1.0f / sqrtf(var + eps);
    *mean = m;
    *mlo = ml;
    *rstd = rs;
    if (g && b) {
        for (int64_t d = 0; d < D; d++) yr[d] = (xr[d] - m - ml) * rs * g[d] + b[d];
    } else if (g) {
        for (int64_t d = 0; d < D; d++) yr[d] = (xr[d] - m - ml) * rs * g[d];
    } else if (b) {
        for (int64_t d = 0; d < D; d++) yr[d] = (xr[d] - m - ml) * rs + b[d];
    } else {
        for (int64_t d = 0; d < D; d++) yr[d] = (xr[d] - m - ml) * rs;
    }
}
QKV_ISA_KERNEL_VOID(fwd_row,
                    (float *restrict yr, const float *restrict xr, const float *restrict g, const float *restrict b,
                     int64_t D, float eps, float *mean, float *mlo, float *rstd),
                    (yr, xr, g, b, D, eps, mean, mlo, rstd))

/* dx of one row (gh: scratch of D floats), written (a fresh gradient) or added with `add`. */
QKV_KERNEL_BODY void dx_row_body(bool add, float *restrict dr, float *restrict gh, const float *restrict xr,
                                 const float *restrict gr, const float *restrict gamma, int64_t D, float m, float ml,
                                 float rs) {
    if (gamma) {
        for (int64_t d = 0; d < D; d++) gh[d] = gr[d] * gamma[d];
    } else {
        memcpy(gh, gr, sizeof(float) * (size_t)D);
    }
    /* sum(gh * xhat) = rstd * sum(gh * (x - mean)) */
    float acc[LANES] = {0};
    int64_t k = 0;
    for (; k + LANES <= D; k += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += gh[k + l] * (xr[k + l] - m - ml);
    for (int l = 0; k < D; k++, l++) acc[l] += gh[k] * (xr[k] - m - ml);
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    float mean_gh = qkv__row_sum(gh, D) / (float)D, mean_ghx = acc[0] * rs / (float)D;
    if (add) {
        for (int64_t d = 0; d < D; d++) dr[d] += rs * (gh[d] - mean_gh - (xr[d] - m - ml) * rs * mean_ghx);
    } else {
        for (int64_t d = 0; d < D; d++) dr[d] = rs * (gh[d] - mean_gh - (xr[d] - m - ml) * rs * mean_ghx);
    }
}
QKV_ISA_KERNEL_VOID(dx_row,
                    (bool add, float *restrict dr, float *restrict gh, const float *restrict xr,
                     const float *restrict gr, const float *restrict gamma, int64_t D, float m, float ml, float rs),
                    (add, dr, gh, xr, gr, gamma, D, m, ml, rs))

/* dgamma and dbeta of the columns [lo, lo + COL_BLOCK). */
QKV_KERNEL_BODY void col_sums_body(float *dg, float *db, const float *x, const float *dy, const float *mean,
                                   const float *mlo, const float *rstd, int64_t rows, int64_t D, int64_t lo) {
    int64_t w = D - lo < COL_BLOCK ? D - lo : COL_BLOCK;
    double ag[COL_BLOCK] = {0}, ab[COL_BLOCK] = {0};
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * D + lo, *restrict gr = dy + r * D + lo;
        float m = mean[r], ml = mlo[r], rs = rstd[r];
        for (int64_t j = 0; j < w; j++) {
            ag[j] += (double)(gr[j] * ((xr[j] - m - ml) * rs));
            ab[j] += (double)gr[j];
        }
    }
    for (int64_t j = 0; j < w; j++) {
        if (dg) dg[lo + j] += (float)ag[j];
        if (db) db[lo + j] += (float)ab[j];
    }
}
QKV_ISA_KERNEL_VOID(col_sums,
                    (float *dg, float *db, const float *x, const float *dy, const float *mean, const float *mlo,
                     const float *rstd, int64_t rows, int64_t D, int64_t lo),
                    (dg, db, x, dy, mean, mlo, rstd, rows, D, lo))

static qkv_status layer_norm_backward(qkv_ctx *ctx, qkv_node *nd) {
    bool fresh;
    qkv_tensor *gx = qkv__grad_fresh(ctx, nd->in[0], &fresh);
    qkv_tensor *ggamma = qkv_grad_for(ctx, nd->in[1]), *gbeta = qkv_grad_for(ctx, nd->in[2]);
    const ln_saved *s = nd->saved;
    int64_t rows = nd->i[0], D = nd->i[1];
    const float *dy = nd->out->grad->data, *x = s->x, *gamma = s->gamma, *mean = s->mean, *rstd = s->rstd;
    const float *mlo = s->mlo;
    bool par = rows * D > PAR_MIN;
    if (gx) {
        float *tmp = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(rows * D > 0 ? rows * D : 1));
        if (!tmp) return qkv_last_status();
        float *dx = gx->data;
#pragma omp parallel for schedule(static) if (par && rows > 1)
        for (int64_t r = 0; r < rows; r++)
            dx_row(!fresh, dx + r * D, tmp + r * D, x + r * D, dy + r * D, gamma, D, mean[r], mlo[r], rstd[r]);
    }
    if (ggamma || gbeta) {
        float *dg = ggamma ? ggamma->data : NULL, *db = gbeta ? gbeta->data : NULL;
        int64_t nblocks = (D + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if (par && nblocks > 1)
        for (int64_t b = 0; b < nblocks; b++) col_sums(dg, db, x, dy, mean, mlo, rstd, rows, D, b * COL_BLOCK);
    }
    return QKV_OK;
}

static bool check_param(const qkv_tensor *p, const char *arg, int64_t D) {
    if (!qkv__check_f32("layer_norm", p, arg)) return false;
    if (p->ndim != 1 || p->shape[0] != D) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "layer_norm: %s has shape %s, expected [%lld] (the last dimension of x)",
                      arg, qkv_shape_str(p, s, sizeof s), (long long)D);
        return false;
    }
    return true;
}

qkv_tensor *qkv_layer_norm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *gamma, qkv_tensor *beta, float eps) {
    if (!x) return NULL;
    if (!qkv__check_f32("layer_norm", x, "x")) return NULL;
    if (x->ndim == 0) {
        qkv_error_set(QKV_ERR_INVALID, "layer_norm: x must have at least one dimension (got a scalar)");
        return NULL;
    }
    if (!(eps >= 0.0f) || isinf(eps)) {
        qkv_error_set(QKV_ERR_INVALID, "layer_norm: eps must be finite and >= 0 (got %g)", (double)eps);
        return NULL;
    }
    int64_t D = x->shape[x->ndim - 1], rows = D ? qkv_numel(x) / D : 0;
    if ((gamma && !check_param(gamma, "gamma", D)) || (beta && !check_param(beta, "beta", D))) return NULL;
    const float *src = qkv__contig_data(ctx, x);
    const float *g = src && gamma ? qkv__contig_data(ctx, gamma) : NULL;
    const float *b = src && beta ? qkv__contig_data(ctx, beta) : NULL;
    if (!src || (gamma && !g) || (beta && !b)) return NULL;
    qkv_tensor *out = qkv__out_like(ctx, x);
    ln_saved *s = out ? qkv_ctx_alloc(ctx, sizeof *s) : NULL;
    float *mean = s ? qkv_ctx_alloc(ctx, sizeof(float) * 3 * (size_t)(rows ? rows : 1)) : NULL;
    if (!mean) return NULL;
    *s = (ln_saved){.x = src, .gamma = g, .mean = mean, .mlo = mean + rows, .rstd = mean + 2 * rows};
    float *y = out->data, *mlo = s->mlo, *rstd = s->rstd;
#pragma omp parallel for schedule(static) if (rows * D > PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++) fwd_row(y + r * D, src + r * D, g, b, D, eps, mean + r, mlo + r, rstd + r);
    qkv_tensor *in[3] = {x, gamma, beta};
    qkv_node *nd = qkv_record(ctx, out, "layer_norm", layer_norm_backward, 3, in);
    if (nd) {
        nd->saved = s;
        nd->i[0] = rows;
        nd->i[1] = D;
    }
    return out;
}
