/* Scaled dot-product attention: the public entry points, input validation, masks, the materialising path (full
 * [B, H, Tq, Tk] scores through cblas_sgemm) and the autograd glue. The fused kernels live in attention_fused.c,
 * the plan both paths read (masks, dropout) in attention_plan.c.
 *
 * Materialising backward, with P the softmax, Pd = P * keep (the dropped weights actually multiplied into V):
 *     dV = Pd^T dO,  dPd = dO V^T,  dS = Pd dPd - P rowsum(Pd dPd),  dQ = s dS K,  dK = s dS^T Q
 * (the dropout multiplier reaches dS through Pd, so the mask is not stored). An additive bias receives dS / s, the
 * gradient of the scores it was added to, summed over the dimensions it was broadcast along.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "ops/attention_fused.h"
#include "qkv/attention.h"
#include "qkv/rng.h"

qkv_sdpa_opts qkv_sdpa_defaults(void) { return (qkv_sdpa_opts){0}; }

/* ---- validation and the plan -------------------------------------------------------------------------------- */

typedef struct {
    sdpa_plan plan;
    sdpa_rows qr, kr, vr;   /* fused: the inputs as read (in place or a contiguous copy) */
    const float *q, *k, *v; /* materialised: contiguous data */
    float *lse;             /* fused: [B*H, Tq] */
    float *P, *Pd;          /* materialised: softmax and dropped weights [B*H, Tq, Tk] (same buffer without dropout) */
} sdpa_saved;

static bool check_inputs(const char *op, const qkv_tensor *q, const qkv_tensor *k, const qkv_tensor *v,
                         const qkv_sdpa_opts *o) {
    char sq[96], sk[96], sv[96];
    if (!qkv__check_f32(op, q, "q") || !qkv__check_f32(op, k, "k") || !qkv__check_f32(op, v, "v")) return false;
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4) {
        qkv_error_set(QKV_ERR_INVALID, "%s: q %s, k %s, v %s must all be 4-D [B, H, T, D]", op,
                      qkv_shape_str(q, sq, sizeof sq), qkv_shape_str(k, sk, sizeof sk),
                      qkv_shape_str(v, sv, sizeof sv));
        return false;
    }
    if (k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] || k->shape[1] != q->shape[1] ||
        v->shape[1] != q->shape[1] || k->shape[3] != q->shape[3] || v->shape[2] != k->shape[2]) {
        qkv_error_set(QKV_ERR_INVALID,
                      "%s: shapes q %s, k %s, v %s do not fit q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv]",
                      op, qkv_shape_str(q, sq, sizeof sq), qkv_shape_str(k, sk, sizeof sk),
                      qkv_shape_str(v, sv, sizeof sv));
        return false;
    }
    const qkv_tensor *m = o->key_padding;
    if (m && (m->ndim != 2 || m->shape[0] != q->shape[0] || m->shape[1] != k->shape[2])) {
        qkv_error_set(QKV_ERR_INVALID, "%s: key_padding %s should be [B, Tk] = [%lld, %lld]", op,
                      qkv_shape_str(m, sq, sizeof sq), (long long)q->shape[0], (long long)k->shape[2]);
        return false;
    }
    if (m && m->dtype != QKV_F32 && m->dtype != QKV_I32) {
        qkv_error_set(QKV_ERR_INVALID, "%s: key_padding must be int32 or float32", op);
        return false;
    }
    const qkv_tensor *b = o->bias;
    if (b && !qkv__check_f32(op, b, "bias")) return false;
    if (b && (b->ndim != 4 || (b->shape[0] != 1 && b->shape[0] != q->shape[0]) ||
              (b->shape[1] != 1 && b->shape[1] != q->shape[1]) || b->shape[2] != q->shape[2] ||
              b->shape[3] != k->shape[2])) {
        qkv_error_set(QKV_ERR_INVALID, "%s: bias %s should be [B or 1, H or 1, Tq, Tk] = [%lld or 1, %lld or 1, %lld, %lld]",
                      op, qkv_shape_str(b, sq, sizeof sq), (long long)q->shape[0], (long long)q->shape[1],
                      (long long)q->shape[2], (long long)k->shape[2]);
        return false;
    }
    const qkv_tensor *pf = o->prefix;
    if (pf && (pf->ndim != 1 || pf->shape[0] != q->shape[0] || pf->dtype != QKV_I32)) {
        qkv_error_set(QKV_ERR_INVALID, "%s: prefix %s should be int32 [B] = [%lld]", op,
                      qkv_shape_str(pf, sq, sizeof sq), (long long)q->shape[0]);
        return false;
    }
    if (!isfinite(o->scale)) {
        qkv_error_set(QKV_ERR_INVALID, "%s: scale %g is not finite", op, (double)o->scale);
        return false;
    }
    if (!(o->dropout >= 0.0f && o->dropout < 1.0f)) {
        qkv_error_set(QKV_ERR_INVALID, "%s: dropout %g outside [0, 1)", op, (double)o->dropout);
        return false;
    }
    return true;
}

/* Fill the plan: sizes, scale, the padding bias row (in ctx) and the dropout stream (advancing the context RNG). */
static bool make_plan(qkv_ctx *ctx, const qkv_tensor *q, const qkv_tensor *k, const qkv_tensor *v,
                      const qkv_sdpa_opts *o, sdpa_plan *p) {
    memset(p, 0, sizeof *p);
    p->B = q->shape[0];
    p->H = q->shape[1];
    p->Tq = q->shape[2];
    p->Tk = k->shape[2];
    p->D = q->shape[3];
    p->Dv = v->shape[3];
    p->causal = o->causal;
    p->scale = o->scale != 0.0f ? o->scale : p->D > 0 ? 1.0f / sqrtf((float)p->D) : 1.0f;
    if (o->key_padding) {
        const qkv_tensor *m = o->key_padding;
        float *bias = qkv_ctx_alloc(ctx, (size_t)(p->B * p->Tk + 1) * sizeof(float));
        if (!bias) return false;
        for (int64_t b = 0; b < p->B; b++)
            for (int64_t j = 0; j < p->Tk; j++) {
                int64_t off = b * m->stride[0] + j * m->stride[1];
                bool pad = m->dtype == QKV_I32 ? qkv_i32(m)[off] != 0 : qkv_f32(m)[off] != 0.0f;
                bias[b * p->Tk + j] = pad ? -INFINITY : 0.0f;
            }
        p->kbias = bias;
    }
    if (o->bias) {
        const qkv_tensor *b = o->bias;
        p->abias = qkv__contig_data(ctx, b);
        if (!p->abias) return false;
        p->ab_si = p->Tk;
        p->ab_sh = b->shape[1] == 1 ? 0 : p->Tq * p->Tk;
        p->ab_sb = b->shape[0] == 1 ? 0 : b->shape[1] * p->Tq * p->Tk;
    }
    if (o->prefix && o->causal) {
        int64_t *pre = qkv_ctx_alloc(ctx, (size_t)(p->B + 1) * sizeof(int64_t));
        if (!pre) return false;
        for (int64_t b = 0; b < p->B; b++) {
            int64_t v = qkv_i32(o->prefix)[b * o->prefix->stride[0]];
            pre[b] = v < 0 ? 0 : v > p->Tk ? p->Tk : v;
        }
        p->prefix = pre;
    }
    if (o->dropout > 0.0f && qkv_ctx_training(ctx)) {
        qkv_rng *rng = qkv_ctx_rng(ctx);
        uint64_t n = (uint64_t)(p->B * p->H * p->Tq * p->Tk);
        p->dropout = o->dropout;
        p->seed = rng->seed;
        p->base = rng->counter;
        rng->counter += (n + 3) / 4;
    }
    return true;
}

static qkv_tensor *new_out(qkv_ctx *ctx, const sdpa_plan *p) {
    return qkv__out(ctx, QKV_F32, 4, (const int64_t[]){p->B, p->H, p->Tq, p->Dv});
}

/* ---- fused path ------------------------------------------------------------------------------------------------ */

/* Where the kernels add the bias gradient ([B*H, Tq, Tk]): the gradient itself when the bias is not broadcast,
 * else zeroed scratch that bias_grad_reduce sums into it. NULL (no error) when the bias needs no gradient. */
static float *bias_grad_target(qkv_ctx *ctx, const qkv_node *n, qkv_tensor **gb) {
    *gb = n->n_in > 3 ? qkv_grad_for(ctx, n->in[3]) : NULL;
    if (!*gb) return NULL;
    const qkv_tensor *b = n->in[3];
    if (b->shape[0] == n->in[0]->shape[0] && b->shape[1] == n->in[0]->shape[1]) return (*gb)->data;
    size_t count = (size_t)(n->in[0]->shape[0] * n->in[0]->shape[1] * b->shape[2] * b->shape[3]);
    float *scratch = qkv_ctx_alloc(ctx, (count + 1) * sizeof(float));
    if (scratch) memset(scratch, 0, count * sizeof(float));
    return scratch;
}

/* Sum the per-(b, h) bias gradient in scratch over the broadcast dimensions into gb: each element is the sum over
 * (b, h) in order, added to the gradient; the work runs over blocks of elements of each output plane. */
#define BIAS_SUM_BLOCK 1024
static void bias_grad_reduce(const qkv_node *n, const float *scratch, qkv_tensor *gb) {
    if (!gb || scratch == gb->data) return;
    const int64_t B = n->in[0]->shape[0], H = n->in[0]->shape[1], Bb = gb->shape[0], Hb = gb->shape[1];
    const int64_t TT = gb->shape[2] * gb->shape[3], nblk = (TT + BIAS_SUM_BLOCK - 1) / BIAS_SUM_BLOCK;
    float *g = gb->data;
#pragma omp parallel for schedule(static)
    for (int64_t task = 0; task < Bb * Hb * nblk; task++) {
        const int64_t plane = task / nblk, bb = plane / Hb, hb = plane % Hb, e0 = task % nblk * BIAS_SUM_BLOCK;
        const int64_t w = TT - e0 < BIAS_SUM_BLOCK ? TT - e0 : BIAS_SUM_BLOCK;
        float acc[BIAS_SUM_BLOCK] = {0};
        for (int64_t b = Bb == 1 ? 0 : bb; b < (Bb == 1 ? B : bb + 1); b++)
            for (int64_t h = Hb == 1 ? 0 : hb; h < (Hb == 1 ? H : hb + 1); h++) {
                const float *src = scratch + (b * H + h) * TT + e0;
                for (int64_t e = 0; e < w; e++) acc[e] += src[e];
            }
        float *dst = g + plane * TT + e0;
        for (int64_t e = 0; e < w; e++) dst[e] += acc[e];
    }
}

static qkv_status fused_backward(qkv_ctx *ctx, qkv_node *n) {
    sdpa_saved *s = n->saved;
    qkv_tensor *gq = qkv_grad_for(ctx, n->in[0]), *gk = qkv_grad_for(ctx, n->in[1]), *gv = qkv_grad_for(ctx, n->in[2]);
    qkv_tensor *gb;
    float *db = bias_grad_target(ctx, n, &gb);
    if (gb && !db) return qkv_last_status();
    qkv_status st = qkv__sdpa_fused_backward(ctx, &s->plan, &s->qr, &s->kr, &s->vr, n->out->data, n->out->grad->data,
                                             s->lse, gq ? gq->data : NULL, gk ? gk->data : NULL,
                                             gv ? gv->data : NULL, db);
    if (st == QKV_OK) bias_grad_reduce(n, db, gb);
    return st;
}

/* x [B, H, T, D] as rows: in place when its last dimension is unit-stride, else through a contiguous copy. */
static bool as_rows(qkv_ctx *ctx, const qkv_tensor *x, sdpa_rows *r) {
    if (x->stride[3] == 1 || x->shape[3] <= 1) {
        *r = (sdpa_rows){x->data, x->stride[0], x->stride[1], x->stride[2]};
        return true;
    }
    const float *c = qkv__contig_data(ctx, x);
    if (!c) return false;
    *r = (sdpa_rows){c, x->shape[1] * x->shape[2] * x->shape[3], x->shape[2] * x->shape[3], x->shape[3]};
    return true;
}

static qkv_tensor *sdpa_fused(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v, const qkv_sdpa_opts *o) {
    sdpa_saved s = {0};
    if (!make_plan(ctx, q, k, v, o, &s.plan)) return NULL;
    if (!as_rows(ctx, q, &s.qr) || !as_rows(ctx, k, &s.kr) || !as_rows(ctx, v, &s.vr)) return NULL;
    qkv_tensor *out = new_out(ctx, &s.plan);
    if (!out) return NULL;
    qkv_tensor *in[4] = {q, k, v, o->bias};
    const int nin = o->bias ? 4 : 3;
    bool grad = qkv_needs_grad(ctx, nin, in);
    if (grad) {
        s.lse = qkv_ctx_alloc(ctx, (size_t)(s.plan.B * s.plan.H * s.plan.Tq + 1) * sizeof(float));
        if (!s.lse) return NULL;
    }
    if (qkv__sdpa_fused_forward(ctx, &s.plan, &s.qr, &s.kr, &s.vr, out->data, s.lse) != QKV_OK) return NULL;
    if (grad) {
        sdpa_saved *saved = qkv_ctx_alloc(ctx, sizeof *saved);
        if (!saved) return NULL;
        *saved = s;
        qkv_node *n = qkv_record(ctx, out, "sdpa", fused_backward, nin, in);
        if (n) n->saved = saved;
    }
    return out;
}

/* ---- materialising path -------------------------------------------------------------------------------------- */

/* One row of scores -> softmax in place, masks applied; a row with nothing visible becomes all zeros. */
static void softmax_row(float *s, int64_t n, int64_t nvis, float scale, const float *bias, const float *ab) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        s[j] = j < nvis ? s[j] * scale + (bias ? bias[j] : 0.0f) : -INFINITY;
        if (ab && j < nvis) s[j] += ab[j];
        if (s[j] > mx) mx = s[j];
    }
    if (mx == -INFINITY) {
        memset(s, 0, (size_t)n * sizeof(float));
        return;
    }
    float sum = 0;
    for (int64_t j = 0; j < n; j++) sum += s[j] = expf(s[j] - mx);
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; j++) s[j] *= inv;
}

static qkv_status materialized_backward(qkv_ctx *ctx, qkv_node *n) {
    sdpa_saved *s = n->saved;
    const sdpa_plan *p = &s->plan;
    const int64_t BH = p->B * p->H, Tq = p->Tq, Tk = p->Tk, D = p->D, Dv = p->Dv;
    qkv_tensor *gq = qkv_grad_for(ctx, n->in[0]), *gk = qkv_grad_for(ctx, n->in[1]), *gv = qkv_grad_for(ctx, n->in[2]);
    const float *dout = n->out->grad->data;
    qkv_tensor *gb;
    float *db = bias_grad_target(ctx, n, &gb);
    if (gb && !db) return qkv_last_status();
    float *dS = qkv_ctx_alloc(ctx, (size_t)(Tq * Tk + 1) * sizeof(float));
    if (!dS) return qkv_last_status();
    if (Tq == 0 || Tk == 0) return QKV_OK;
    for (int64_t bh = 0; bh < BH; bh++) {
        const float *P = s->P + bh * Tq * Tk, *Pd = s->Pd + bh * Tq * Tk, *dO = dout + bh * Tq * Dv;
        const float *Q = s->q + bh * Tq * D, *K = s->k + bh * Tk * D, *V = s->v + bh * Tk * Dv;
        if (gv && Dv > 0) /* dV += Pd^T dO */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Tk, (int)Dv, (int)Tq, 1.0f, Pd, (int)Tk, dO,
                        (int)Dv, 1.0f, qkv_f32(gv) + bh * Tk * Dv, (int)Dv);
        if (!gq && !gk && !db) continue;
        if (Dv > 0) /* dPd = dO V^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Tq, (int)Tk, (int)Dv, 1.0f, dO, (int)Dv, V,
                        (int)Dv, 0.0f, dS, (int)Tk);
        else
            memset(dS, 0, (size_t)(Tq * Tk) * sizeof(float));
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < Tq; i++) {
            float *ds = dS + i * Tk;
            const float *pr = P + i * Tk, *pdr = Pd + i * Tk;
            float d = 0;
            for (int64_t j = 0; j < Tk; j++) d += pdr[j] * ds[j];
            if (db) { /* the bias gets the gradient of the scaled scores, Q K^T that times the scale */
                float *g = db + (bh * Tq + i) * Tk;
                for (int64_t j = 0; j < Tk; j++) {
                    float t = pdr[j] * ds[j] - pr[j] * d;
                    g[j] += t;
                    ds[j] = p->scale * t;
                }
            } else {
                for (int64_t j = 0; j < Tk; j++) ds[j] = p->scale * (pdr[j] * ds[j] - pr[j] * d);
            }
        }
        if (gq && D > 0) /* dQ += dS K */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Tq, (int)D, (int)Tk, 1.0f, dS, (int)Tk, K,
                        (int)D, 1.0f, qkv_f32(gq) + bh * Tq * D, (int)D);
        if (gk && D > 0) /* dK += dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Tk, (int)D, (int)Tq, 1.0f, dS, (int)Tk, Q,
                        (int)D, 1.0f, qkv_f32(gk) + bh * Tk * D, (int)D);
    }
    bias_grad_reduce(n, db, gb);
    return QKV_OK;
}

static qkv_tensor *sdpa_materialized(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                     const qkv_sdpa_opts *o) {
    sdpa_saved s = {0};
    if (!make_plan(ctx, q, k, v, o, &s.plan)) return NULL;
    const sdpa_plan *p = &s.plan;
    const int64_t BH = p->B * p->H, Tq = p->Tq, Tk = p->Tk, D = p->D, Dv = p->Dv;
    s.q = qkv__contig_data(ctx, q);
    s.k = qkv__contig_data(ctx, k);
    s.v = qkv__contig_data(ctx, v);
    qkv_tensor *out = new_out(ctx, p);
    qkv_tensor *w = qkv__out(ctx, QKV_F32, 4, (const int64_t[]){p->B, p->H, Tq, Tk});
    if (!s.q || !s.k || !s.v || !out || !w) return NULL;
    s.P = s.Pd = w->data;
    qkv_tensor *wd = w;
    if (p->dropout > 0) {
        wd = qkv__out(ctx, QKV_F32, 4, w->shape);
        if (!wd) return NULL;
        s.Pd = wd->data;
    }
    for (int64_t bh = 0; bh < BH; bh++) {
        float *S = s.P + bh * Tq * Tk;
        if (Tq > 0 && Tk > 0) { /* scores = Q K^T (scaled with the masks below) */
            if (D > 0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Tq, (int)Tk, (int)D, 1.0f,
                            s.q + bh * Tq * D, (int)D, s.k + bh * Tk * D, (int)D, 0.0f, S, (int)Tk);
            else
                memset(S, 0, (size_t)(Tq * Tk) * sizeof(float));
        }
        const float *bias = p->kbias ? p->kbias + (bh / p->H) * Tk : NULL;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < Tq; i++) {
            softmax_row(S + i * Tk, Tk, qkv__sdpa_visible(p, bh / p->H, i, 0, Tk), p->scale, bias,
                        qkv__sdpa_bias_row(p, bh, i));
            if (p->dropout > 0) {
                float *pd = s.Pd + (bh * Tq + i) * Tk;
                qkv__sdpa_keep(p, bh, i, 0, Tk, pd);
                for (int64_t j = 0; j < Tk; j++) pd[j] *= S[i * Tk + j];
            }
        }
        float *O = qkv_f32(out) + bh * Tq * Dv;
        if (Tq > 0 && Dv > 0) {
            if (Tk > 0) /* out = Pd V */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Tq, (int)Dv, (int)Tk, 1.0f,
                            s.Pd + bh * Tq * Tk, (int)Tk, s.v + bh * Tk * Dv, (int)Dv, 0.0f, O, (int)Dv);
            else
                memset(O, 0, (size_t)(Tq * Dv) * sizeof(float));
        }
    }
    if (o->weights) *o->weights = wd;
    qkv_tensor *in[4] = {q, k, v, o->bias};
    const int nin = o->bias ? 4 : 3;
    if (qkv_needs_grad(ctx, nin, in)) {
        sdpa_saved *saved = qkv_ctx_alloc(ctx, sizeof *saved);
        if (!saved) return NULL;
        *saved = s;
        qkv_node *n = qkv_record(ctx, out, "sdpa_materialized", materialized_backward, nin, in);
        if (n) n->saved = saved;
    }
    return out;
}

/* ---- entry points --------------------------------------------------------------------------------------------- */

qkv_tensor *qkv_sdpa(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v, const qkv_sdpa_opts *opts) {
    if (!q || !k || !v) return NULL;
    qkv_sdpa_opts o = opts ? *opts : qkv_sdpa_defaults();
    if (!check_inputs("sdpa", q, k, v, &o)) return NULL;
    return o.weights ? sdpa_materialized(ctx, q, k, v, &o) : sdpa_fused(ctx, q, k, v, &o);
}

qkv_tensor *qkv_sdpa_materialized(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                  const qkv_sdpa_opts *opts) {
    if (!q || !k || !v) return NULL;
    qkv_sdpa_opts o = opts ? *opts : qkv_sdpa_defaults();
    if (!check_inputs("sdpa_materialized", q, k, v, &o)) return NULL;
    return sdpa_materialized(ctx, q, k, v, &o);
}
