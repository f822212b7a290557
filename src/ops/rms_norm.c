/* RMS norm over the last dimension, as T5's T5LayerNorm: no mean subtraction and no bias,
 *     rstd = 1 / sqrt(mean(x^2) + eps),  y = (x * rstd) * gamma.
 *
 * Backward, with xhat = x * rstd and gh = dy * gamma:  dx = rstd * (gh - xhat * mean(gh * xhat)),
 * dgamma = sum over rows of dy * xhat. As in layer_norm.c the rows run in parallel, the column sums run over blocks
 * of columns (each summing every row in order, in double), so results do not depend on the thread count; the row
 * loops are compiled per instruction set (core/isa.h).
 */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "qkv/ops.h"

#define PAR_MIN (1 << 15)
#define LANES 16
#define COL_BLOCK 64

typedef struct {
    const float *x, *gamma; /* x's rows (contiguous); gamma contiguous or NULL */
    float *rstd;            /* per row */
} rms_saved;

/* sum(a[k] * b[k]) in LANES fixed partial sums, combined pairwise: vectorised without reassociation. */
QKV_KERNEL_BODY float dot_lanes(const float *restrict a, const float *restrict b, int64_t n) {
    float acc[LANES] = {0};
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += a[k + l] * b[k + l];
    for (int l = 0; k < n; k++, l++) acc[l] += a[k] * b[k];
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

QKV_KERNEL_BODY void fwd_row_body(float *restrict yr, const float *restrict xr, const float *restrict g, int64_t D,
                                  float eps, float *rstd) {
    float rs = 1.0f / sqrtf(dot_lanes(xr, xr, D) / (float)D + eps);
    *rstd = rs;
    if (g) {
        for (int64_t d = 0; d < D; d++) yr[d] = (xr[d] * rs) * g[d];
    } else {
        for (int64_t d = 0; d < D; d++) yr[d] = xr[d] * rs;
    }
}
QKV_ISA_KERNEL_VOID(fwd_row,
                    (float *restrict yr, const float *restrict xr, const float *restrict g, int64_t D, float eps,
                     float *rstd),
                    (yr, xr, g, D, eps, rstd))

/* dx of one row, added into dr (gh: scratch of D floats). */
QKV_KERNEL_BODY void dx_row_body(float *restrict dr, float *restrict gh, const float *restrict xr,
                                 const float *restrict gr, const float *restrict gamma, int64_t D, float rs) {
    if (gamma) {
        for (int64_t d = 0; d < D; d++) gh[d] = gr[d] * gamma[d];
    } else {
        memcpy(gh, gr, sizeof(float) * (size_t)D);
    }
    /* mean(gh * xhat) = rstd * sum(gh * x) / D */
    float m = dot_lanes(gh, xr, D) * rs / (float)D;
    for (int64_t d = 0; d < D; d++) dr[d] += rs * (gh[d] - xr[d] * rs * m);
}
QKV_ISA_KERNEL_VOID(dx_row,
                    (float *restrict dr, float *restrict gh, const float *restrict xr, const float *restrict gr,
                     const float *restrict gamma, int64_t D, float rs),
                    (dr, gh, xr, gr, gamma, D, rs))

/* dgamma of the columns [lo, lo + COL_BLOCK). */
QKV_KERNEL_BODY void col_sums_body(float *dg, const float *x, const float *dy, const float *rstd, int64_t rows,
                                   int64_t D, int64_t lo) {
    int64_t w = D - lo < COL_BLOCK ? D - lo : COL_BLOCK;
    double ag[COL_BLOCK] = {0};
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * D + lo, *restrict gr = dy + r * D + lo;
        float rs = rstd[r];
        for (int64_t j = 0; j < w; j++) ag[j] += (double)(gr[j] * (xr[j] * rs));
    }
    for (int64_t j = 0; j < w; j++) dg[lo + j] += (float)ag[j];
}
QKV_ISA_KERNEL_VOID(col_sums,
                    (float *dg, const float *x, const float *dy, const float *rstd, int64_t rows, int64_t D,
                     int64_t lo),
                    (dg, x, dy, rstd, rows, D, lo))

static qkv_status rms_norm_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]), *ggamma = qkv_grad_for(ctx, nd->in[1]);
    const rms_saved *s = nd->saved;
    int64_t rows = nd->i[0], D = nd->i[1];
    const float *dy = nd->out->grad->data, *x = s->x, *rstd = s->rstd;
    bool par = rows * D > PAR_MIN;
    if (gx) {
        float *tmp = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(rows * D > 0 ? rows * D : 1));
        if (!tmp) return qkv_last_status();
        float *dx = gx->data;
#pragma omp parallel for schedule(static) if (par && rows > 1)
        for (int64_t r = 0; r < rows; r++) dx_row(dx + r * D, tmp + r * D, x + r * D, dy + r * D, s->gamma, D, rstd[r]);
    }
    if (ggamma) {
        int64_t nblocks = (D + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if (par && nblocks > 1)
        for (int64_t b = 0; b < nblocks; b++) col_sums(ggamma->data, x, dy, rstd, rows, D, b * COL_BLOCK);
    }
    return QKV_OK;
}

qkv_tensor *qkv_rms_norm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *gamma, float eps) {
    if (!x) return NULL;
    if (!qkv__check_f32("rms_norm", x, "x")) return NULL;
    if (x->ndim == 0) {
        qkv_error_set(QKV_ERR_INVALID, "rms_norm: x must have at least one dimension (got a scalar)");
        return NULL;
    }
    if (!(eps >= 0.0f) || isinf(eps)) {
        qkv_error_set(QKV_ERR_INVALID, "rms_norm: eps must be finite and >= 0 (got %g)", (double)eps);
        return NULL;
    }
    int64_t D = x->shape[x->ndim - 1], rows = D ? qkv_numel(x) / D : 0;
    if (gamma) {
        if (!qkv__check_f32("rms_norm", gamma, "gamma")) return NULL;
        if (gamma->ndim != 1 || gamma->shape[0] != D) {
            char sh[96];
            qkv_error_set(QKV_ERR_INVALID, "rms_norm: gamma has shape %s, expected [%lld] (the last dimension of x)",
                          qkv_shape_str(gamma, sh, sizeof sh), (long long)D);
            return NULL;
        }
    }
    const float *src = qkv__contig_data(ctx, x);
    const float *g = src && gamma ? qkv__contig_data(ctx, gamma) : NULL;
    if (!src || (gamma && !g)) return NULL;
    qkv_tensor *out = qkv__out_like(ctx, x);
    rms_saved *s = out ? qkv_ctx_alloc(ctx, sizeof *s) : NULL;
    float *rstd = s ? qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(rows ? rows : 1)) : NULL;
    if (!rstd) return NULL;
    *s = (rms_saved){.x = src, .gamma = g, .rstd = rstd};
    float *y = out->data;
#pragma omp parallel for schedule(static) if (rows * D > PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++) fwd_row(y + r * D, src + r * D, g, D, eps, rstd + r);
    qkv_tensor *in[2] = {x, gamma};
    qkv_node *nd = qkv_record(ctx, out, "rms_norm", rms_norm_backward, 2, in);
    if (nd) {
        nd->saved = s;
        nd->i[0] = rows;
        nd->i[1] = D;
    }
    return out;
}
