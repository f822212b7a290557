/* 1-D convolution over time, channels last: x [B, T, Cin] with a weight in torch's layout [Cout, Cin, K].
 *
 * The sequence is padded with `padding` zero rows at both ends once (xp [B, Tp, Cin], Tp = T + 2p) and the
 * batch is folded into the rows: with W_k = w[:, :, k] the output row r of the folded sequence is
 *     full[r] = sum_k xp[r + k] W_k^T,   r in [0, B Tp - K + 1),
 * which is K GEMMs of B Tp - K + 1 rows each, one per tap, accumulated by BLAS (beta = 1). Rows whose window
 * crosses from one sequence into the next are computed and thrown away: K - 1 rows in Tp, against one small GEMM per
 * sequence and tap or an im2col copy K times the size of x. The backward is the same three products turned around
 * (dW_k = dfull^T xp[k:], dxp[k:] += dfull W_k) with the discarded rows' gradient zero.
 */
#include <cblas.h>
#include <string.h>

#include "core/internal.h"
#include "qkv/ops.h"

#define PAR_MIN (1 << 15)

typedef struct {
    const float *xp; /* padded input [B Tp, Cin] (x's own data when padding is 0 and x contiguous) */
    const float *wk; /* weight by tap [K, Cout, Cin] */
} conv_saved;

/* Rows of the folded output that belong to sequence b: full[b Tp + t] for t < T_out. */
static void gather_rows(float *restrict dst, const float *restrict full, int64_t B, int64_t Tp, int64_t T_out,
                        int64_t C, const float *bias) {
#pragma omp parallel for schedule(static) if (B * T_out * C > PAR_MIN)
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T_out; t++) {
            float *restrict d = dst + (b * T_out + t) * C;
            const float *restrict s = full + (b * Tp + t) * C;
            if (bias)
                for (int64_t c = 0; c < C; c++) d[c] = s[c] + bias[c];
            else
                memcpy(d, s, sizeof(float) * (size_t)C);
        }
}

static qkv_status conv1d_backward(qkv_ctx *ctx, qkv_node *nd) {
    const conv_saved *sv = nd->saved;
    int64_t B = nd->i[0], T = nd->i[1], Cin = nd->i[2], Cout = nd->i[3], K = nd->i[4], p = nd->i[5];
    int64_t Tp = T + 2 * p, T_out = Tp - K + 1, M = B * Tp - K + 1;
    const float *dy = qkv_f32(nd->out->grad);
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    qkv_tensor *gw = qkv_grad_for(ctx, nd->in[1]);
    qkv_tensor *gb = nd->n_in > 2 ? qkv_grad_for(ctx, nd->in[2]) : NULL;
    if (gb) {
        float *db = qkv_f32(gb);
        for (int64_t r = 0; r < B * T_out; r++)
            for (int64_t c = 0; c < Cout; c++) db[c] += dy[r * Cout + c];
    }
    if (!gx && !gw) return QKV_OK;
    /* dy laid out as the folded rows, zero where a window crossed sequences. One sequence is already that. */
    const float *dfull = dy;
    if (B > 1) {
        float *f = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(B * Tp * Cout));
        if (!f) return qkv_last_status();
        memset(f, 0, sizeof(float) * (size_t)(B * Tp * Cout));
        for (int64_t b = 0; b < B; b++)
            memcpy(f + b * Tp * Cout, dy + b * T_out * Cout, sizeof(float) * (size_t)(T_out * Cout));
        dfull = f;
    }
    if (gw) {
        float *dwk = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(K * Cout * Cin));
        if (!dwk) return qkv_last_status();
        for (int64_t k = 0; k < K; k++)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Cout, (int)Cin, (int)M, 1.0f, dfull,
                        (int)Cout, sv->xp + k * Cin, (int)Cin, 0.0f, dwk + k * Cout * Cin, (int)Cin);
        float *dw = qkv_f32(gw);
        for (int64_t o = 0; o < Cout; o++)
            for (int64_t c = 0; c < Cin; c++)
                for (int64_t k = 0; k < K; k++) dw[(o * Cin + c) * K + k] += dwk[(k * Cout + o) * Cin + c];
    }
    if (gx) {
        /* Without padding the folded rows are x's rows: accumulate straight into its gradient. */
        float *dxp = qkv_f32(gx);
        if (p > 0) {
            dxp = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(B * Tp * Cin));
            if (!dxp) return qkv_last_status();
            memset(dxp, 0, sizeof(float) * (size_t)(B * Tp * Cin));
        }
        for (int64_t k = 0; k < K; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)Cin, (int)Cout, 1.0f, dfull,
                        (int)Cout, sv->wk + k * Cout * Cin, (int)Cin, 1.0f, dxp + k * Cin, (int)Cin);
        if (p > 0) {
            float *dx = qkv_f32(gx);
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < T * Cin; i++) dx[b * T * Cin + i] += dxp[(b * Tp + p) * Cin + i];
        }
    }
    return QKV_OK;
}

qkv_tensor *qkv_conv1d(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *w, qkv_tensor *bias, int64_t padding) {
    if (!x || !w) return NULL;
    if (!qkv__check_f32("conv1d", x, "x") || !qkv__check_f32("conv1d", w, "weight") ||
        (bias && !qkv__check_f32("conv1d", bias, "bias")))
        return NULL;
    char s1[96], s2[96];
    if (x->ndim != 3 || w->ndim != 3 || w->shape[1] != x->shape[2] || w->shape[2] < 1 || padding < 0 ||
        (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0]))) {
        qkv_error_set(QKV_ERR_INVALID,
                      "conv1d: x %s must be [batch, time, in], weight %s [out, in, width], bias [out], padding "
                      "%lld >= 0",
                      qkv_shape_str(x, s1, sizeof s1), qkv_shape_str(w, s2, sizeof s2), (long long)padding);
        return NULL;
    }
    int64_t B = x->shape[0], T = x->shape[1], Cin = x->shape[2], Cout = w->shape[0], K = w->shape[2];
    int64_t Tp = T + 2 * padding, T_out = Tp - K + 1;
    if (T_out < 1 || B < 1) {
        qkv_error_set(QKV_ERR_INVALID, "conv1d: %lld steps with padding %lld are fewer than the width %lld",
                      (long long)T, (long long)padding, (long long)K);
        return NULL;
    }
    const float *xd = qkv__contig_data(ctx, x), *wd = qkv__contig_data(ctx, w);
    const float *bd = bias ? qkv__contig_data(ctx, bias) : NULL;
    qkv_tensor *out = xd && wd && (bd || !bias) ? qkv__out(ctx, QKV_F32, 3, (const int64_t[]){B, T_out, Cout}) : NULL;
    float *wk = out ? qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(K * Cout * Cin)) : NULL;
    if (!wk) return NULL;
    for (int64_t o = 0; o < Cout; o++)
        for (int64_t c = 0; c < Cin; c++)
            for (int64_t k = 0; k < K; k++) wk[(k * Cout + o) * Cin + c] = wd[(o * Cin + c) * K + k];
    const float *xp = xd;
    if (padding > 0) {
        float *q = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(B * Tp * Cin));
        if (!q) return NULL;
        for (int64_t b = 0; b < B; b++) {
            float *row = q + b * Tp * Cin;
            memset(row, 0, sizeof(float) * (size_t)(padding * Cin));
            memcpy(row + padding * Cin, xd + b * T * Cin, sizeof(float) * (size_t)(T * Cin));
            memset(row + (padding + T) * Cin, 0, sizeof(float) * (size_t)(padding * Cin));
        }
        xp = q;
    }
    int64_t M = B * Tp - K + 1;
    /* One sequence without bias: the folded rows are the output rows. */
    float *full = B == 1 && !bd ? qkv_f32(out) : qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(B * Tp * Cout));
    if (!full) return NULL;
    for (int64_t k = 0; k < K; k++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)Cout, (int)Cin, 1.0f, xp + k * Cin,
                    (int)Cin, wk + k * Cout * Cin, (int)Cin, k ? 1.0f : 0.0f, full, (int)Cout);
    if (full != qkv_f32(out)) gather_rows(qkv_f32(out), full, B, Tp, T_out, Cout, bd);
    qkv_tensor *ins[3] = {x, w, bias};
    qkv_node *nd = qkv_record(ctx, out, "conv1d", conv1d_backward, bias ? 3 : 2, ins);
    if (nd) {
        conv_saved *sv = qkv_ctx_alloc(ctx, sizeof *sv);
        if (!sv) return NULL;
        sv->xp = xp;
        sv->wk = wk;
        nd->saved = sv;
        nd->i[0] = B;
        nd->i[1] = T;
        nd->i[2] = Cin;
        nd->i[3] = Cout;
        nd->i[4] = K;
        nd->i[5] = padding;
    }
    return out;
}
