/* The fused recurrent layer: all timesteps of one layer (both directions) as a single op on the tape.
 *
 * Forward, per direction: the input projections were computed beforehand as one GEMM over all B*T rows; each
 * step then adds h_{t-1} W_hh^T (one GEMM of [B, H] x [H, G]) and applies the gate nonlinearities in one fused
 * pass per batch row, saving the activations backward needs. Backward runs the steps in reverse with the same
 * shape: a fused pass turns dh (and dc) into the pre-activation gradients dG_t, one GEMM gives dh_{t-1} = dG_t W_hh,
 * and the weight gradient is left for the end, where dW_hh = sum_t dG_t^T h_{t-1} is one GEMM over all T*B rows.
 *
 * Padding: a row b is active at time t when t < len[b]. An inactive step copies the state through, writes a zero
 * output and gets dG = 0, so it contributes to no gradient, while the state's gradient passes through unchanged.
 * Because inactive steps are the identity on the state, the reverse direction (t from T-1 down) naturally starts
 * each sequence at its own last valid step from h0, and the state after the loop is every sequence's h_n.
 * The fused row passes are compiled per instruction set and dispatched at run time (core/isa.h).
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "nn/rnn_op.h"
#include "ops/gemm_packed.h"
#include "ops/gemv.h"
#include "ops/fast_exp.h"

typedef struct {
    qkv_rnn_kind kind;
    int dirs;
    int64_t B, T, H, G, A; /* A: saved activation floats per row and step */
    int32_t *len;          /* NULL: all sequences have length T */
    float *hs[2];          /* [T + 1][B][H] states in processing order: hs[s] is the state entering step s */
    float *cs[2];          /* LSTM cell states, same layout */
    float *act[2];         /* [T][B][A] gate activations of step s */
} rnn_saved;

/* The fused pass of one step is tiny next to its GEMM (B*G elements vs B*G*H FMAs), and on few cores handing it
 * to OpenMP costs more than it gains: GOMP's workers then spin while OpenBLAS's own threads need the same cores for
 * the next step's GEMM (measured on 2 cores: the 2-layer LSTM bench ran 3-5x slower with the pass threaded). So
 * rows are split over OpenMP threads only for very wide steps, where the pass itself takes milliseconds. */
#define PAR_MIN (1 << 22)

/* Branch-free gate functions so the row loops vectorise (libm's expf / tanhf are one call per element). tanh as
 * 1 - 2 / (e^2x + 1) loses relative accuracy near 0 but stays within ~1e-7 absolute, far below float32 GEMM noise,
 * and saturates cleanly to +-1 (e^2x overflowing to inf gives exactly 1). */
QKV_KERNEL_BODY float sigm(float x) { return 1.0f / (1.0f + qkv__expf(-x)); }
QKV_KERNEL_BODY float ftanh(float x) { return 1.0f - 2.0f / (qkv__expf(2.0f * x) + 1.0f); }
static inline bool is_active(const int32_t *len, int64_t b, int64_t t) { return !len || t < len[b]; }
static inline int64_t time_of(int d, int64_t s, int64_t T) { return d ? T - 1 - s : s; }

/* ---- fused forward passes over one batch row: xr and hr are the input and recurrent pre-activations ---- */

QKV_KERNEL_BODY void lstm_row_body(int64_t H, const float *restrict xr, const float *restrict hr,
                                   const float *restrict cprev, float *restrict hnew, float *restrict cnew,
                                   float *restrict act, float *restrict orow) {
    for (int64_t j = 0; j < H; j++) {
        float i = sigm(xr[j] + hr[j]), f = sigm(xr[H + j] + hr[H + j]);
        float g = ftanh(xr[2 * H + j] + hr[2 * H + j]), o = sigm(xr[3 * H + j] + hr[3 * H + j]);
        float c = f * cprev[j] + i * g, tc = ftanh(c), h = o * tc;
        act[j] = i;
        act[H + j] = f;
        act[2 * H + j] = g;
        act[3 * H + j] = o;
        act[4 * H + j] = tc;
        cnew[j] = c;
        hnew[j] = h;
        orow[j] = h;
    }
}
QKV_ISA_KERNEL_VOID(lstm_row,
                    (int64_t H, const float *restrict xr, const float *restrict hr, const float *restrict cprev,
                     float *restrict hnew, float *restrict cnew, float *restrict act, float *restrict orow),
                    (H, xr, hr, cprev, hnew, cnew, act, orow))

QKV_KERNEL_BODY void gru_row_body(int64_t H, const float *restrict xr, const float *restrict hr,
                                  const float *restrict hprev, float *restrict hnew, float *restrict act,
                                  float *restrict orow) {
    for (int64_t j = 0; j < H; j++) {
        float r = sigm(xr[j] + hr[j]), z = sigm(xr[H + j] + hr[H + j]), hn = hr[2 * H + j];
        float n = ftanh(xr[2 * H + j] + r * hn), h = (1.0f - z) * n + z * hprev[j];
        act[j] = r;
        act[H + j] = z;
        act[2 * H + j] = n;
        act[3 * H + j] = hn;
        hnew[j] = h;
        orow[j] = h;
    }
}
QKV_ISA_KERNEL_VOID(gru_row,
                    (int64_t H, const float *restrict xr, const float *restrict hr, const float *restrict hprev,
                     float *restrict hnew, float *restrict act, float *restrict orow),
                    (H, xr, hr, hprev, hnew, act, orow))

QKV_KERNEL_BODY void elman_row_body(int64_t H, bool relu, const float *restrict xr, const float *restrict hr,
                                    float *restrict hnew, float *restrict orow) {
    for (int64_t j = 0; j < H; j++) {
        float a = xr[j] + hr[j], h = relu ? (a > 0.0f ? a : 0.0f) : ftanh(a);
        hnew[j] = h;
        orow[j] = h;
    }
}
QKV_ISA_KERNEL_VOID(elman_row,
                    (int64_t H, bool relu, const float *restrict xr, const float *restrict hr, float *restrict hnew,
                     float *restrict orow),
                    (H, relu, xr, hr, hnew, orow))

/* ---- fused backward passes over one batch row: dh (incoming, output grad included) -> dG, gx, dh_direct ---- */

QKV_KERNEL_BODY void lstm_row_back_body(int64_t H, const float *restrict act, const float *restrict cprev,
                                        const float *restrict dh, float *restrict dc, float *restrict dg,
                                        float *restrict gx, float *restrict dh_direct) {
    for (int64_t j = 0; j < H; j++) {
        float i = act[j], f = act[H + j], g = act[2 * H + j], o = act[3 * H + j], tc = act[4 * H + j];
        float dct = dc[j] + dh[j] * o * (1.0f - tc * tc);
        float di = dct * g * i * (1.0f - i), df = dct * cprev[j] * f * (1.0f - f);
        float dgg = dct * i * (1.0f - g * g), dout = dh[j] * tc * o * (1.0f - o);
        dc[j] = dct * f;
        dg[j] = di;
        dg[H + j] = df;
        dg[2 * H + j] = dgg;
        dg[3 * H + j] = dout;
        dh_direct[j] = 0.0f;
    }
    if (gx)
        for (int64_t j = 0; j < 4 * H; j++) gx[j] += dg[j];
}
QKV_ISA_KERNEL_VOID(lstm_row_back,
                    (int64_t H, const float *restrict act, const float *restrict cprev, const float *restrict dh,
                     float *restrict dc, float *restrict dg, float *restrict gx, float *restrict dh_direct),
                    (H, act, cprev, dh, dc, dg, gx, dh_direct))

/* with_gx is a compile-time constant at both call sites, so each specialisation is a plain vectorisable loop */
QKV_KERNEL_BODY void gru_row_back_impl(int64_t H, const float *restrict act, const float *restrict hprev,
                                       const float *restrict dh, float *restrict dg, float *restrict gx,
                                       float *restrict dh_direct, bool with_gx) {
    for (int64_t j = 0; j < H; j++) {
        float r = act[j], z = act[H + j], n = act[2 * H + j], hn = act[3 * H + j];
        float dn = dh[j] * (1.0f - z) * (1.0f - n * n);
        float dr = dn * hn * r * (1.0f - r), dz = dh[j] * (hprev[j] - n) * z * (1.0f - z);
        dg[j] = dr;
        dg[H + j] = dz;
        dg[2 * H + j] = dn * r; /* the recurrent half of n sits inside the reset product */
        dh_direct[j] = dh[j] * z;
        if (with_gx) {
            gx[j] += dr;
            gx[H + j] += dz;
            gx[2 * H + j] += dn;
        }
    }
}

QKV_KERNEL_BODY void gru_row_back_body(int64_t H, const float *act, const float *hprev, const float *dh, float *dg,
                                       float *gx, float *dh_direct) {
    if (gx)
        gru_row_back_impl(H, act, hprev, dh, dg, gx, dh_direct, true);
    else
        gru_row_back_impl(H, act, hprev, dh, dg, NULL, dh_direct, false);
}
QKV_ISA_KERNEL_VOID(gru_row_back,
                    (int64_t H, const float *act, const float *hprev, const float *dh, float *dg, float *gx,
                     float *dh_direct),
                    (H, act, hprev, dh, dg, gx, dh_direct))

QKV_KERNEL_BODY void elman_row_back_body(int64_t H, bool relu, const float *restrict hnew, const float *restrict dh,
                                         float *restrict dg, float *restrict gx, float *restrict dh_direct) {
    for (int64_t j = 0; j < H; j++) {
        float h = hnew[j];
        dg[j] = relu ? (h > 0.0f ? dh[j] : 0.0f) : dh[j] * (1.0f - h * h);
        dh_direct[j] = 0.0f;
    }
    if (gx)
        for (int64_t j = 0; j < H; j++) gx[j] += dg[j];
}
QKV_ISA_KERNEL_VOID(elman_row_back,
                    (int64_t H, bool relu, const float *restrict hnew, const float *restrict dh, float *restrict dg,
                     float *restrict gx, float *restrict dh_direct),
                    (H, relu, hnew, dh, dg, gx, dh_direct))

/* ---- backward -------------------------------------------------------------------------------------------- */

static qkv_status direction_backward(qkv_ctx *ctx, qkv_node *n, const rnn_saved *s, int d) {
    int64_t B = s->B, T = s->T, H = s->H, G = s->G, A = s->A, OW = s->dirs * H;
    qkv_tensor *xp = n->in[d], *w_hh = n->in[2 + d], *b_hh = n->in[4 + d], *h0 = n->in[6], *c0 = n->in[7];
    const float *grad = n->out->grad->data;
    const float *gout = grad, *ghn = grad + B * T * OW + d * B * H;
    const float *gcn = grad + B * T * OW + s->dirs * B * H + d * B * H; /* read for LSTM only */
    bool lstm = s->kind == QKV_RNN_LSTM, relu = s->kind == QKV_RNN_RELU;
    float *dh = qkv_ctx_alloc(ctx, (size_t)(B * H) * sizeof(float));
    float *dh2 = qkv_ctx_alloc(ctx, (size_t)(B * H) * sizeof(float));
    float *dc = lstm ? qkv_ctx_alloc(ctx, (size_t)(B * H) * sizeof(float)) : NULL;
    float *dG = qkv_ctx_alloc(ctx, (size_t)(T * B * G) * sizeof(float));
    if (!dh || !dh2 || !dG || (lstm && !dc)) return qkv_error_set(QKV_ERR_NOMEM, "rnn backward: out of memory");
    memcpy(dh, ghn, (size_t)(B * H) * sizeof(float));
    if (lstm) memcpy(dc, gcn, (size_t)(B * H) * sizeof(float));
    qkv_tensor *gxt = qkv_grad_for(ctx, xp);
    float *gx = gxt ? gxt->data : NULL;
    const float *whh = w_hh->data;
    const int32_t *len = s->len;

    for (int64_t st = T - 1; st >= 0; st--) {
        int64_t t = time_of(d, st, T);
        const float *act = s->act[d] ? s->act[d] + st * B * A : NULL;
        const float *hprev = s->hs[d] + st * B * H, *hnew = s->hs[d] + (st + 1) * B * H;
        const float *cprev = lstm ? s->cs[d] + st * B * H : NULL;
        float *dgs = dG + st * B * G;
#pragma omp parallel for schedule(static) if (B * G >= PAR_MIN)
        for (int64_t b = 0; b < B; b++) {
            float *dhb = dh + b * H, *dgb = dgs + b * G, *dd = dh2 + b * H;
            if (!is_active(len, b, t)) { /* identity step: the state's gradient passes through */
                memset(dgb, 0, (size_t)G * sizeof(float));
                memcpy(dd, dhb, (size_t)H * sizeof(float));
                continue;
            }
            const float *go = gout + (b * T + t) * OW + d * H;
            for (int64_t j = 0; j < H; j++) dhb[j] += go[j];
            float *gxb = gx ? gx + (b * T + t) * G : NULL;
            if (lstm)
                lstm_row_back(H, act + b * A, cprev + b * H, dhb, dc + b * H, dgb, gxb, dd);
            else if (s->kind == QKV_RNN_GRU)
                gru_row_back(H, act + b * A, hprev + b * H, dhb, dgb, gxb, dd);
            else
                elman_row_back(H, relu, hnew + b * H, dhb, dgb, gxb, dd);
        }
        /* dh_{t-1} = direct part + dG_t W_hh */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)H, (int)G, 1.0f, dgs, (int)G, whh,
                    (int)H, 1.0f, dh2, (int)H);
        float *tmp = dh;
        dh = dh2;
        dh2 = tmp;
    }
    qkv_tensor *gh0 = qkv_grad_for(ctx, h0), *gc0 = lstm ? qkv_grad_for(ctx, c0) : NULL;
    if (gh0) {
        float *p = qkv_f32(gh0) + d * B * H;
        for (int64_t k = 0; k < B * H; k++) p[k] += dh[k];
    }
    if (gc0) {
        float *p = qkv_f32(gc0) + d * B * H;
        for (int64_t k = 0; k < B * H; k++) p[k] += dc[k];
    }
    qkv_tensor *gw = qkv_grad_for(ctx, w_hh), *gb = qkv_grad_for(ctx, b_hh);
    if (gw) /* dW_hh[G, H] += dG^T [G, T*B] hs[0..T-1] [T*B, H] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)G, (int)H, (int)(T * B), 1.0f, dG, (int)G,
                    s->hs[d], (int)H, 1.0f, gw->data, (int)H);
    if (gb) {
        float *ones = qkv_ctx_alloc(ctx, (size_t)(T * B) * sizeof(float));
        if (!ones) return qkv_error_set(QKV_ERR_NOMEM, "rnn backward: out of memory");
        for (int64_t k = 0; k < T * B; k++) ones[k] = 1.0f;
        cblas_sgemv(CblasRowMajor, CblasTrans, (int)(T * B), (int)G, 1.0f, dG, (int)G, ones, 1, 1.0f, gb->data, 1);
    }
    return QKV_OK;
}

static qkv_status rnn_layer_backward(qkv_ctx *ctx, qkv_node *n) {
    const rnn_saved *s = n->saved;
    for (int d = 0; d < s->dirs; d++) {
        qkv_status st = direction_backward(ctx, n, s, d);
        if (st) return st;
    }
    return QKV_OK;
}

/* ---- forward --------------------------------------------------------------------------------------------- */

static void direction_forward(const qkv_ctx *ctx, const rnn_saved *s, int d, const float *xp, const float *whh,
                              const float *bhh, float *hp, float *out) {
    int64_t B = s->B, T = s->T, H = s->H, G = s->G, A = s->A, OW = s->dirs * H;
    bool lstm = s->kind == QKV_RNN_LSTM, relu = s->kind == QKV_RNN_RELU;
    const int32_t *len = s->len;
    for (int64_t st = 0; st < T; st++) {
        int64_t t = time_of(d, st, T);
        const float *hprev = s->hs[d] + st * B * H, *cprev = lstm ? s->cs[d] + st * B * H : NULL;
        float *hnew = s->hs[d] + (st + 1) * B * H, *cnew = lstm ? s->cs[d] + (st + 1) * B * H : NULL;
        float *act = s->act[d] ? s->act[d] + st * B * A : NULL;
        for (int64_t b = 0; b < B; b++) {
            if (bhh)
                memcpy(hp + b * G, bhh, (size_t)G * sizeof(float));
            else
                memset(hp + b * G, 0, (size_t)G * sizeof(float));
        }
        if (!qkv__gemm_xwt(ctx, B, G, H, hprev, H, whh, hp, G, true)) {
            if (B == 1 && qkv__ctx_packs(ctx)) /* a decoding step's single row: gemv.h says why not BLAS */
                qkv__gemv_xwt(1, G, H, hprev, whh, bhh, hp);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)G, (int)H, 1.0f, hprev, (int)H,
                            whh, (int)H, 1.0f, hp, (int)G);
        }
#pragma omp parallel for schedule(static) if (B * G >= PAR_MIN)
        for (int64_t b = 0; b < B; b++) {
            float *orow = out + (b * T + t) * OW + d * H;
            if (!is_active(len, b, t)) {
                memcpy(hnew + b * H, hprev + b * H, (size_t)H * sizeof(float));
                if (lstm) memcpy(cnew + b * H, cprev + b * H, (size_t)H * sizeof(float));
                memset(orow, 0, (size_t)H * sizeof(float));
                continue;
            }
            const float *xr = xp + (b * T + t) * G, *hr = hp + b * G;
            if (lstm)
                lstm_row(H, xr, hr, cprev + b * H, hnew + b * H, cnew + b * H, act + b * A, orow);
            else if (s->kind == QKV_RNN_GRU)
                gru_row(H, xr, hr, hprev + b * H, hnew + b * H, act + b * A, orow);
            else
                elman_row(H, relu, xr, hr, hnew + b * H, orow);
        }
    }
}

static bool check_operand(const char *what, int d, const qkv_tensor *t, int ndim, const int64_t *shape) {
    char s[96];
    bool ok = t && t->dtype == QKV_F32 && t->ndim == ndim && qkv_is_contiguous(t);
    for (int k = 0; ok && k < ndim; k++) ok = t->shape[k] == shape[k];
    if (!ok)
        qkv_error_set(QKV_ERR_INVALID, "rnn layer: %s of direction %d is %s; expected a contiguous float32 tensor "
                      "of %d dims matching the layer", what, d, t ? qkv_shape_str(t, s, sizeof s) : "missing", ndim);
    return ok;
}

qkv_tensor *qkv__rnn_layer(qkv_ctx *ctx, qkv_rnn_kind kind, int dirs, qkv_tensor *const *xp,
                           qkv_tensor *const *w_hh, qkv_tensor *const *b_hh, qkv_tensor *h0, qkv_tensor *c0,
                           const int32_t *lengths, int64_t H) {
    if (dirs < 1 || dirs > 2 || !xp[0] || xp[0]->ndim != 3) {
        qkv_error_set(QKV_ERR_INVALID, "rnn layer: bad direction count %d or input projection", dirs);
        return NULL;
    }
    bool lstm = kind == QKV_RNN_LSTM;
    int64_t G = qkv__rnn_gates(kind) * H, B = xp[0]->shape[0], T = xp[0]->shape[1];
    for (int d = 0; d < dirs; d++) {
        if (!check_operand("input projection", d, xp[d], 3, (const int64_t[]){B, T, G}) ||
            !check_operand("weight_hh", d, w_hh[d], 2, (const int64_t[]){G, H}) ||
            (b_hh[d] && !check_operand("bias_hh", d, b_hh[d], 1, (const int64_t[]){G})))
            return NULL;
    }
    if ((h0 && (h0->dtype != QKV_F32 || !qkv_is_contiguous(h0) || qkv_numel(h0) != dirs * B * H)) ||
        (c0 && (!lstm || c0->dtype != QKV_F32 || !qkv_is_contiguous(c0) || qkv_numel(c0) != dirs * B * H))) {
        qkv_error_set(QKV_ERR_INVALID, "rnn layer: initial state must be contiguous float32 with %lld elements%s",
                      (long long)(dirs * B * H), c0 && !lstm ? " (and c0 is for LSTM only)" : "");
        return NULL;
    }
    rnn_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->dirs = dirs;
    s->B = B;
    s->T = T;
    s->H = H;
    s->G = G;
    s->A = lstm ? 5 * H : kind == QKV_RNN_GRU ? 4 * H : 0;
    if (lengths) {
        s->len = qkv_ctx_alloc(ctx, (size_t)B * sizeof(int32_t));
        if (!s->len) return NULL;
        memcpy(s->len, lengths, (size_t)B * sizeof(int32_t));
    }
    int64_t OW = dirs * H, state = dirs * B * H;
    qkv_tensor *y = qkv__out(ctx, QKV_F32, 1, (const int64_t[]){B * T * OW + state * (lstm ? 2 : 1)});
    float *hp = qkv_ctx_alloc(ctx, (size_t)(B * G) * sizeof(float));
    if (!y || !hp) return NULL;
    float *out = y->data, *hn = out + B * T * OW, *cn = hn + state;
    for (int d = 0; d < dirs; d++) {
        s->hs[d] = qkv_ctx_alloc(ctx, (size_t)((T + 1) * B * H) * sizeof(float));
        s->cs[d] = lstm ? qkv_ctx_alloc(ctx, (size_t)((T + 1) * B * H) * sizeof(float)) : NULL;
        s->act[d] = s->A ? qkv_ctx_alloc(ctx, (size_t)(T * B * s->A) * sizeof(float)) : NULL;
        if (!s->hs[d] || (lstm && !s->cs[d]) || (s->A && !s->act[d])) return NULL;
        if (h0)
            memcpy(s->hs[d], qkv_f32(h0) + d * B * H, (size_t)(B * H) * sizeof(float));
        else
            memset(s->hs[d], 0, (size_t)(B * H) * sizeof(float));
        if (lstm) {
            if (c0)
                memcpy(s->cs[d], qkv_f32(c0) + d * B * H, (size_t)(B * H) * sizeof(float));
            else
                memset(s->cs[d], 0, (size_t)(B * H) * sizeof(float));
        }
        direction_forward(ctx, s, d, xp[d]->data, w_hh[d]->data, b_hh[d] ? b_hh[d]->data : NULL, hp, out);
        memcpy(hn + d * B * H, s->hs[d] + T * B * H, (size_t)(B * H) * sizeof(float));
        if (lstm) memcpy(cn + d * B * H, s->cs[d] + T * B * H, (size_t)(B * H) * sizeof(float));
    }
    qkv_tensor *in[8] = {xp[0], dirs > 1 ? xp[1] : NULL, w_hh[0], dirs > 1 ? w_hh[1] : NULL,
                         b_hh[0], dirs > 1 ? b_hh[1] : NULL, h0, lstm ? c0 : NULL};
    qkv_node *n = qkv_record(ctx, y, "rnn_layer", rnn_layer_backward, 8, in);
    if (n) n->saved = s;
    return y;
}
