/* LSH self-attention (qkv/lsh_attention.h), forward and backward.
 *
 * Layout. Per head bh the n_hashes * T items (round r, position t) are numbered k = r T + t ("ticker", as Trax);
 * sorted[s] is the ticker at sorted place s and place[k] its inverse. A counting sort over the n_hashes *
 * n_buckets global buckets, fed in ticker order, is stable and so orders items by (bucket, position) directly.
 * Chunk c holds places [c L, (c+1) L); its keys are the chunk before it (wrapping) then itself, 2L rows gathered
 * into thread scratch so each chunk is three small GEMMs.
 *
 * Backward. With w_s = exp(L_s - logsumexp over rounds) the weight of item s in its position's output, o_s its
 * round output and g the upstream gradient of that position, out = sum_r w o gives
 *     d o_s = w_s g,   d L_s = w_s g.(o_s - out),
 * and the softmax backward ds_ij = p_ij (d o_s . v_j - d o_s . o_s + d L_s) collapses to
 *     ds_ij = w_s p_ij (g . v_j - g . out),
 * so only out, w and each row's log-sum-exp are kept: p is recomputed per chunk from the stored sort. A chunk
 * writes dQ for its own rows and adds dK^, dV into its rows and its predecessor's, in phases (even chunks, odd
 * chunks) in which no two chunks share a row; places are then summed per position over the rounds in a fixed
 * order, so results do not depend on the thread count. The key normalisation k^ = k rho, rho = (|k|^2 / D + eps)^-1/2, has the
 * backward dk = rho dk^ - rho^3 (dk^ . k) k / D. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "ops/fast_exp.h"
#include "ops/lsh_hash.h"
#include "qkv/lsh_attention.h"

#define LSH_EPS 1e-6f
#define CAUSAL_MASK 1e9f
#define SELF_MASK 1e5f
#define PAD_MASK 1e9f

qkv_lsh_opts qkv_lsh_defaults(void) {
    return (qkv_lsh_opts){.chunk_len = 64, .exclude_self = true, .n_hashes = 1};
}

int qkv_lsh_default_buckets(int64_t T, int64_t chunk_len) {
    int64_t nb = chunk_len > 0 ? 2 * T / chunk_len : 2;
    nb += nb & 1;
    return nb < 2 ? 2 : nb > (1 << 20) ? (1 << 20) : (int)nb;
}

int qkv_lsh_factor(int n_buckets, int above, int *n2) {
    if (above < 0 || n_buckets <= above || n_buckets < 8) {
        *n2 = n_buckets;
        return 0;
    }
    const double root = sqrt((double)n_buckets);
    int n1 = 0;
    for (int d = 2; d <= (int)root; d += 2)
        if (n_buckets % d == 0 && (n_buckets / d) % 2 == 0) n1 = d;
    if (n1 && 2.0 * n1 >= root) {
        *n2 = n_buckets / n1;
        return n1;
    }
    n1 = 2 * (int)lround(root / 2.0);
    int m = (n_buckets + n1 - 1) / n1;
    *n2 = m + (m & 1);
    return n1;
}

qkv_tensor *qkv_lsh_rotations(qkv_ctx *ctx, qkv_rng *rng, int64_t d, int n_hashes, int n_buckets) {
    if (d < 1 || n_hashes < 1 || n_buckets < 2 || n_buckets % 2) {
        qkv_error_set(QKV_ERR_INVALID, "lsh_rotations: need d >= 1, n_hashes >= 1 and an even n_buckets >= 2 "
                      "(got %lld, %d, %d)", (long long)d, n_hashes, n_buckets);
        return NULL;
    }
    qkv_tensor *r = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(d, n_hashes, n_buckets / 2));
    if (r) qkv_rng_fill_normal(rng, r, 0.0f, 1.0f);
    return r;
}

typedef struct {
    int64_t B, H, T, D, Dv, L, nh, nb; /* nb: buckets per round (1 without rotations) */
    int64_t rc, h1;        /* rotation columns per round; factorized: n1 / 2 (else 0) */
    float scale;
    bool causal, exclude_self;
    const float *qk, *v;   /* contiguous [BH, T, D] / [BH, T, Dv] */
    float *khat, *rho;     /* [BH, T, D], [BH, T] */
    int32_t *sorted, *place; /* [BH, NT] */
    float *lse, *w;        /* [BH, NT] by place: a row's log-sum-exp, its weight in the position's output */
    const uint8_t *pad;    /* [B, T] or NULL */
    const float *out;      /* [BH, T, Dv] */
} lsh_plan;

static int max_threads(void) {
    int n = omp_get_max_threads();
    return n < 1 ? 1 : n;
}

/* ---- hashing and sorting ------------------------------------------------------------------------------------- */

/* Rows hashed per GEMM: the rotated vectors of a block fit in scratch whatever T is (n_buckets grows with T, so
 * all of them at once would take T^2 / chunk_len floats). */
#define HASH_ROWS 64

/* argmax over [row ; -row] (2 half entries), the first maximum on ties (as torch.argmax). */
static int64_t argmax_pm(const float *row, int64_t half) {
    int64_t best = 0;
    float bv = row[0];
    for (int64_t j = 1; j < half; j++)
        if (row[j] > bv) bv = row[j], best = j;
    for (int64_t j = 0; j < half; j++)
        if (-row[j] > bv) bv = -row[j], best = half + j;
    return best;
}

int64_t qkv__lsh_bucket(const float *row, int64_t rc, int64_t h1) {
    return h1 ? argmax_pm(row, h1) + 2 * h1 * argmax_pm(row + h1, rc - h1) : argmax_pm(row, rc);
}

/* Buckets of every item of head bh into sorted/place. rot [D, nh * rc]; xr scratch [HASH_ROWS, nh * rc];
 * count scratch [nh * nb + 1]; bucket scratch [NT]. */
static void hash_and_sort(const lsh_plan *p, int64_t bh, const float *rot, float *xr, int64_t *count,
                          int32_t *bucket) {
    const int64_t T = p->T, D = p->D, nh = p->nh, nb = p->nb, rc = p->rc, h1 = p->h1, NT = nh * T;
    const float *x = p->qk + bh * T * D;
    for (int64_t t0 = 0; t0 < T; t0 += HASH_ROWS) {
        const int64_t nt = T - t0 < HASH_ROWS ? T - t0 : HASH_ROWS;
        if (rot)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nt, (int)(nh * rc), (int)D, 1.0f,
                        x + t0 * D, (int)D, rot, (int)(nh * rc), 0.0f, xr, (int)(nh * rc));
        for (int64_t r = 0; r < nh; r++)
            for (int64_t t = t0; t < t0 + nt; t++) {
                int64_t best = 0;
                if (rot) {
                    const float *row = xr + (t - t0) * nh * rc + r * rc;
                    best = qkv__lsh_bucket(row, rc, h1);
                }
                bucket[r * T + t] = (int32_t)(r * nb + best);
            }
    }
    int32_t *sorted = p->sorted + bh * NT, *place = p->place + bh * NT;
    memset(count, 0, sizeof *count * (size_t)(nh * nb + 1));
    for (int64_t k = 0; k < NT; k++) count[bucket[k] + 1]++;
    for (int64_t b = 0; b < nh * nb; b++) count[b + 1] += count[b];
    for (int64_t k = 0; k < NT; k++) {
        int64_t s = count[bucket[k]]++;
        sorted[s] = (int32_t)k;
        place[k] = (int32_t)s;
    }
}

/* k^ = k rho for every position of head bh. */
static void normalise_keys(const lsh_plan *p, int64_t bh) {
    const int64_t T = p->T, D = p->D;
    for (int64_t t = 0; t < T; t++) {
        const float *k = p->qk + (bh * T + t) * D;
        float *kh = p->khat + (bh * T + t) * D;
        float ss = 0;
        for (int64_t d = 0; d < D; d++) ss += k[d] * k[d];
        float rho = 1.0f / sqrtf(ss / (float)D + LSH_EPS);
        p->rho[bh * T + t] = rho;
        for (int64_t d = 0; d < D; d++) kh[d] = k[d] * rho;
    }
}

/* ---- one chunk ------------------------------------------------------------------------------------------------ */

typedef struct {
    float *Q, *K, *V, *S; /* [L, D], [2L, D], [2L, Dv], [L, 2L] */
    float *G, *dP;        /* backward: [L, Dv], [L, 2L] */
    float *dK, *dV, *dQ;  /* backward: [2L, D], [2L, Dv], [L, D] */
    int32_t *qpos, *kpos; /* [L], [2L] */
    float *kbias;         /* [2L]: the padding mask of each key */
} chunk_scratch;

static int64_t scratch_floats(const lsh_plan *p, bool backward) {
    const int64_t L = p->L, D = p->D, Dv = p->Dv;
    int64_t n = L * D + 2 * L * D + 2 * L * Dv + 2 * L * L + 5 * L;
    if (backward) n += L * Dv + 2 * L * L + 2 * L * D + 2 * L * Dv + L * D;
    return n + 64;
}

static chunk_scratch carve(const lsh_plan *p, float *w, bool backward) {
    const int64_t L = p->L, D = p->D, Dv = p->Dv;
    chunk_scratch c = {0};
    c.Q = w, w += L * D;
    c.K = w, w += 2 * L * D;
    c.V = w, w += 2 * L * Dv;
    c.S = w, w += 2 * L * L;
    c.qpos = (int32_t *)w, w += L;
    c.kpos = (int32_t *)w, w += 2 * L;
    c.kbias = w, w += 2 * L;
    if (backward) {
        c.G = w, w += L * Dv;
        c.dP = w, w += 2 * L * L;
        c.dK = w, w += 2 * L * D;
        c.dV = w, w += 2 * L * Dv;
        c.dQ = w;
    }
    return c;
}

/* Masks of one score row, subtracted in Trax's order (causal, self, padding) so the rounding matches the
 * reference; subtracting 0 leaves a score unchanged. Selects, not branches: the loop vectorises. */
QKV_KERNEL_BODY void mask_row_body(float *s, const int32_t *kpos, const float *kbias, int64_t n, int32_t qi,
                                   bool causal, bool self) {
    for (int64_t j = 0; j < n; j++) {
        float x = s[j];
        x -= causal && qi < kpos[j] ? CAUSAL_MASK : 0.0f;
        x -= self && qi == kpos[j] ? SELF_MASK : 0.0f;
        s[j] = x - kbias[j];
    }
}
QKV_ISA_KERNEL_VOID(mask_row, (float *s, const int32_t *kpos, const float *kbias, int64_t n, int32_t qi, bool causal,
                               bool self), (s, kpos, kbias, n, qi, causal, self))

/* Gathers chunk c of head bh (queries, keys = previous chunk then this one, values) and computes its masked,
 * scaled scores S [L, 2L]. Returns the places of the previous chunk's first row. */
static int64_t chunk_scores(const lsh_plan *p, int64_t bh, int64_t c, chunk_scratch *w) {
    const int64_t T = p->T, D = p->D, Dv = p->Dv, L = p->L, NT = p->nh * T, nc = NT / L;
    const int64_t prev = (c + nc - 1) % nc;
    const int32_t *sorted = p->sorted + bh * NT;
    for (int64_t i = 0; i < L; i++) {
        int32_t t = sorted[c * L + i] % (int32_t)T;
        w->qpos[i] = t;
        memcpy(w->Q + i * D, p->qk + (bh * T + t) * D, sizeof(float) * (size_t)D);
    }
    for (int64_t j = 0; j < 2 * L; j++) {
        int64_t s = j < L ? prev * L + j : c * L + (j - L);
        int32_t t = sorted[s] % (int32_t)T;
        w->kpos[j] = t;
        memcpy(w->K + j * D, p->khat + (bh * T + t) * D, sizeof(float) * (size_t)D);
        memcpy(w->V + j * Dv, p->v + (bh * T + t) * Dv, sizeof(float) * (size_t)Dv);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)L, (int)(2 * L), (int)D, p->scale, w->Q, (int)D, w->K,
                (int)D, 0.0f, w->S, (int)(2 * L));
    const uint8_t *pad = p->pad ? p->pad + (bh / p->H) * T : NULL;
    for (int64_t j = 0; j < 2 * L; j++) w->kbias[j] = pad && pad[w->kpos[j]] ? PAD_MASK : 0.0f;
    for (int64_t i = 0; i < L; i++)
        mask_row(w->S + i * 2 * L, w->kpos, w->kbias, 2 * L, w->qpos[i], p->causal, p->exclude_self);
    return prev * L;
}

/* Softmax of one score row in place; returns its log-sum-exp. Lanes of fixed width keep the reductions in one
 * order whatever the vector width. */
QKV_KERNEL_BODY float softmax_row_body(float *s, int64_t n) {
    float mx = s[0];
    for (int64_t j = 1; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    float lane[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int u = 0; u < 8; u++) {
            float e = qkv__expf(s[j + u] - mx);
            s[j + u] = e;
            lane[u] += e;
        }
    float sum = 0;
    for (; j < n; j++) {
        s[j] = qkv__expf(s[j] - mx);
        sum += s[j];
    }
    for (int u = 0; u < 8; u++) sum += lane[u];
    float inv = 1.0f / sum;
    for (j = 0; j < n; j++) s[j] *= inv;
    return mx + logf(sum);
}
QKV_ISA_KERNEL(float, softmax_row, (float *s, int64_t n), (s, n))

/* p = exp(s - lse) for a row whose log-sum-exp the forward stored. */
QKV_KERNEL_BODY void probs_row_body(float *s, int64_t n, float lse) {
    for (int64_t j = 0; j < n; j++) s[j] = qkv__expf(s[j] - lse);
}
QKV_ISA_KERNEL_VOID(probs_row, (float *s, int64_t n, float lse), (s, n, lse))

/* dS = w P (dP - delta) in place of dP, with P in S. */
QKV_KERNEL_BODY void dscores_row_body(const float *P, float *dP, int64_t n, float wt, float delta) {
    for (int64_t j = 0; j < n; j++) dP[j] = wt * P[j] * (dP[j] - delta);
}
QKV_ISA_KERNEL_VOID(dscores_row, (const float *P, float *dP, int64_t n, float wt, float delta),
                    (P, dP, n, wt, delta))

/* Forward of chunk c: each row's output (by place) into so [NT, Dv] and its log-sum-exp into lse. */
static void chunk_forward(const lsh_plan *p, int64_t bh, int64_t c, chunk_scratch *w, float *so) {
    const int64_t L = p->L, Dv = p->Dv, NT = p->nh * p->T;
    chunk_scores(p, bh, c, w);
    float *lse = p->lse + bh * NT + c * L;
    for (int64_t i = 0; i < L; i++) lse[i] = softmax_row(w->S + i * 2 * L, 2 * L);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)L, (int)Dv, (int)(2 * L), 1.0f, w->S, (int)(2 * L),
                w->V, (int)Dv, 0.0f, so + (bh * NT + c * L) * Dv, (int)Dv);
}

/* ---- forward and backward ------------------------------------------------------------------------------------ */

typedef struct {
    lsh_plan p;
} lsh_saved;

/* Per head: round outputs so [NT, Dv] (by place) -> out [T, Dv] and each row's weight w. */
static void combine_rounds(const lsh_plan *p, int64_t bh, const float *so, float *out) {
    const int64_t T = p->T, Dv = p->Dv, nh = p->nh, NT = nh * T;
    const int32_t *place = p->place + bh * NT;
    const float *lse = p->lse + bh * NT;
    float *wt = p->w + bh * NT;
    for (int64_t t = 0; t < T; t++) {
        float *o = out + (bh * T + t) * Dv;
        if (nh == 1) {
            int64_t s = place[t];
            wt[s] = 1.0f;
            memcpy(o, so + (bh * NT + s) * Dv, sizeof(float) * (size_t)Dv);
            continue;
        }
        float mx = -INFINITY, sum = 0;
        for (int64_t r = 0; r < nh; r++) mx = fmaxf(mx, lse[place[r * T + t]]);
        for (int64_t r = 0; r < nh; r++) sum += expf(lse[place[r * T + t]] - mx);
        float total = mx + logf(sum);
        memset(o, 0, sizeof(float) * (size_t)Dv);
        for (int64_t r = 0; r < nh; r++) {
            int64_t s = place[r * T + t];
            float a = expf(lse[s] - total);
            wt[s] = a;
            const float *x = so + (bh * NT + s) * Dv;
            for (int64_t d = 0; d < Dv; d++) o[d] += a * x[d];
        }
    }
}

QKV_KERNEL_BODY void add_rows_body(float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}
QKV_ISA_KERNEL_VOID(add_rows, (float *dst, const float *src, int64_t n), (dst, src, n))

static qkv_status lsh_backward(qkv_ctx *ctx, qkv_node *nd) {
    const lsh_plan *p = &((const lsh_saved *)nd->saved)->p;
    const int64_t T = p->T, D = p->D, Dv = p->Dv, L = p->L, NT = p->nh * T, nc = NT / L, BH = p->B * p->H;
    qkv_tensor *gqk = qkv_grad_for(ctx, nd->in[0]), *gv = qkv_grad_for(ctx, nd->in[1]);
    if (!gqk && !gv) return QKV_OK;
    const float *g = qkv__contig_data(ctx, nd->out->grad);
    /* g . out per position, then dQ, dK^ and dV by place. */
    float *gdot = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(BH * T));
    float *dq = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(BH * NT * D));
    float *dk = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(BH * NT * D));
    float *dv = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(BH * NT * Dv));
    const int nth = max_threads();
    const int64_t per = scratch_floats(p, true);
    float *ws = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(nth * per));
    if (!g || !gdot || !dq || !dk || !dv || !ws) return qkv_last_status();
    memset(dk, 0, sizeof(float) * (size_t)(BH * NT * D));
    memset(dv, 0, sizeof(float) * (size_t)(BH * NT * Dv));
#pragma omp parallel for schedule(static) if (BH * T * Dv > (1 << 14))
    for (int64_t i = 0; i < BH * T; i++) {
        float acc = 0;
        for (int64_t d = 0; d < Dv; d++) acc += g[i * Dv + d] * p->out[i * Dv + d];
        gdot[i] = acc;
    }
    /* Chunk c adds into its own rows and its predecessor's. Even chunks, then odd ones (and with an odd count the
     * last chunk apart, since chunk 0's predecessor wraps to it): no two chunks of a phase share a row, and each
     * row receives its two parts in a fixed order whatever the threads. */
#pragma omp parallel num_threads(nth)
    {
        chunk_scratch w = carve(p, ws + omp_get_thread_num() * per, true);
        for (int phase = 0; phase < 3; phase++)
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < BH * nc; task++) {
            const int64_t bh = task / nc, c = task % nc;
            if ((nc > 1 && nc % 2 && c == nc - 1 ? 2 : c % 2) != phase) continue;
            const int64_t prev0 = chunk_scores(p, bh, c, &w);
            const float *lse = p->lse + bh * NT + c * L, *wt = p->w + bh * NT + c * L;
            for (int64_t i = 0; i < L; i++) {
                probs_row(w.S + i * 2 * L, 2 * L, lse[i]);
                memcpy(w.G + i * Dv, g + (bh * T + w.qpos[i]) * Dv, sizeof(float) * (size_t)Dv);
            }
            /* dP = G V^T, then dS = w P (dP - g.out); dV = (w P)^T G = P^T dO. */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)L, (int)(2 * L), (int)Dv, 1.0f, w.G, (int)Dv,
                        w.V, (int)Dv, 0.0f, w.dP, (int)(2 * L));
            for (int64_t i = 0; i < L; i++) {
                float *prow = w.S + i * 2 * L;
                dscores_row(prow, w.dP + i * 2 * L, 2 * L, wt[i], gdot[bh * T + w.qpos[i]]);
                for (int64_t j = 0; j < 2 * L; j++) prow[j] *= wt[i];
            }
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(2 * L), (int)Dv, (int)L, 1.0f, w.S,
                        (int)(2 * L), w.G, (int)Dv, 0.0f, w.dV, (int)Dv);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)L, (int)D, (int)(2 * L), p->scale, w.dP,
                        (int)(2 * L), w.K, (int)D, 0.0f, dq + (bh * NT + c * L) * D, (int)D);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(2 * L), (int)D, (int)L, p->scale, w.dP,
                        (int)(2 * L), w.Q, (int)D, 0.0f, w.dK, (int)D);
            add_rows(dk + (bh * NT + c * L) * D, w.dK + L * D, L * D);
            add_rows(dk + (bh * NT + prev0) * D, w.dK, L * D);
            add_rows(dv + (bh * NT + c * L) * Dv, w.dV + L * Dv, L * Dv);
            add_rows(dv + (bh * NT + prev0) * Dv, w.dV, L * Dv);
        }
    }
    /* Per position: the rounds in order, then the key normalisation's backward. */
    float *gq = gqk ? gqk->data : NULL, *gvd = gv ? gv->data : NULL;
#pragma omp parallel for schedule(static) if (BH * T * D > (1 << 14))
    for (int64_t i = 0; i < BH * T; i++) {
        const int64_t bh = i / T, t = i % T;
        const int32_t *place = p->place + bh * NT;
        if (gq) {
            /* dk^ summed over the rounds, dotted with k for the normalisation's backward. */
            const float *k = p->qk + i * D, rho = p->rho[i];
            float dot = 0;
            for (int64_t r = 0; r < p->nh; r++) {
                const int64_t s = bh * NT + place[r * T + t];
                for (int64_t d = 0; d < D; d++) dot += dk[s * D + d] * k[d];
            }
            const float c3 = rho * rho * rho * dot / (float)D;
            float *o = gq + i * D;
            for (int64_t r = 0; r < p->nh; r++) {
                const int64_t s = bh * NT + place[r * T + t];
                for (int64_t d = 0; d < D; d++) o[d] += dq[s * D + d] + rho * dk[s * D + d];
            }
            for (int64_t d = 0; d < D; d++) o[d] -= c3 * k[d];
        }
        if (gvd) {
            float *o = gvd + i * Dv;
            for (int64_t r = 0; r < p->nh; r++) {
                const int64_t s = bh * NT + place[r * T + t];
                for (int64_t d = 0; d < Dv; d++) o[d] += dv[s * Dv + d];
            }
        }
    }
    return QKV_OK;
}

static bool check_inputs(const qkv_tensor *qk, const qkv_tensor *v, const qkv_tensor *rot, const qkv_lsh_opts *o) {
    char a[96], b[96], c[96];
    if (!qkv__check_f32("lsh_attention", qk, "qk") || !qkv__check_f32("lsh_attention", v, "v")) return false;
    if (qk->ndim != 4 || v->ndim != 4 || v->shape[0] != qk->shape[0] || v->shape[1] != qk->shape[1] ||
        v->shape[2] != qk->shape[2]) {
        qkv_error_set(QKV_ERR_INVALID, "lsh_attention: qk %s and v %s must be [B, H, T, D] and [B, H, T, Dv]",
                      qkv_shape_str(qk, a, sizeof a), qkv_shape_str(v, b, sizeof b));
        return false;
    }
    const int64_t T = qk->shape[2];
    if (o->chunk_len < 1 || T % o->chunk_len) {
        qkv_error_set(QKV_ERR_INVALID, "lsh_attention: sequence length %lld is not a multiple of chunk_len %lld",
                      (long long)T, (long long)o->chunk_len);
        return false;
    }
    if (rot) {
        if (!qkv__check_f32("lsh_attention", rot, "rotations")) return false;
        if (rot->ndim != 3 || rot->shape[0] != qk->shape[3] || rot->shape[1] < 1 || rot->shape[2] < 1) {
            qkv_error_set(QKV_ERR_INVALID, "lsh_attention: rotations %s should be [D, n_hashes, n_buckets / 2] "
                          "with D = %lld", qkv_shape_str(rot, c, sizeof c), (long long)qk->shape[3]);
            return false;
        }
        const int64_t rc = rot->shape[2];
        if (o->bucket_factor && (o->bucket_factor < 2 || o->bucket_factor % 2 || rc - o->bucket_factor / 2 < 1 ||
                                 (double)o->bucket_factor * 2.0 * (double)(rc - o->bucket_factor / 2) *
                                         (double)rot->shape[1] > (double)INT32_MAX)) {
            qkv_error_set(QKV_ERR_INVALID, "lsh_attention: bucket_factor %d must be even, >= 2 and leave >= 1 of "
                          "the %lld rotation columns to the second factor", o->bucket_factor, (long long)rc);
            return false;
        }
    } else if (o->bucket_factor) {
        qkv_error_set(QKV_ERR_INVALID, "lsh_attention: bucket_factor %d needs rotations", o->bucket_factor);
        return false;
    } else if (o->n_hashes < 1) {
        qkv_error_set(QKV_ERR_INVALID, "lsh_attention: n_hashes %d < 1", o->n_hashes);
        return false;
    }
    const qkv_tensor *m = o->key_padding;
    if (m && (m->ndim != 2 || m->shape[0] != qk->shape[0] || m->shape[1] != T ||
              (m->dtype != QKV_F32 && m->dtype != QKV_I32))) {
        qkv_error_set(QKV_ERR_INVALID, "lsh_attention: key_padding %s should be int32 or float32 [B, T] = "
                      "[%lld, %lld]", qkv_shape_str(m, a, sizeof a), (long long)qk->shape[0], (long long)T);
        return false;
    }
    if (!isfinite(o->scale)) {
        qkv_error_set(QKV_ERR_INVALID, "lsh_attention: scale %g is not finite", (double)o->scale);
        return false;
    }
    if (T * (rot ? rot->shape[1] : o->n_hashes) > INT32_MAX) {
        qkv_error_set(QKV_ERR_INVALID, "lsh_attention: T * n_hashes exceeds 2^31");
        return false;
    }
    return true;
}

qkv_tensor *qkv_lsh_attention(qkv_ctx *ctx, qkv_tensor *qk, qkv_tensor *v, const qkv_tensor *rotations,
                              const qkv_lsh_opts *opts) {
    if (!qk || !v) return NULL;
    qkv_lsh_opts o = opts ? *opts : qkv_lsh_defaults();
    if (!check_inputs(qk, v, rotations, &o)) return NULL;
    lsh_saved *sv = qkv_ctx_alloc(ctx, sizeof *sv);
    if (!sv) return NULL;
    lsh_plan *p = &sv->p;
    *p = (lsh_plan){.B = qk->shape[0], .H = qk->shape[1], .T = qk->shape[2], .D = qk->shape[3], .Dv = v->shape[3],
                    .L = o.chunk_len, .nh = rotations ? rotations->shape[1] : o.n_hashes,
                    .nb = rotations ? 2 * rotations->shape[2] : 1, .causal = o.causal,
                    .exclude_self = o.exclude_self};
    if (rotations) {
        p->rc = rotations->shape[2];
        p->h1 = o.bucket_factor / 2;
        if (p->h1) p->nb = 2 * p->h1 * 2 * (p->rc - p->h1);
    }
    p->scale = o.scale != 0.0f ? o.scale : p->D > 0 ? 1.0f / sqrtf((float)p->D) : 1.0f;
    const int64_t BH = p->B * p->H, T = p->T, NT = p->nh * T, nc = NT / p->L;
    qkv_tensor *out = qkv__out(ctx, QKV_F32, QKV_DIMS(p->B, p->H, T, p->Dv));
    if (!out) return NULL;
    if (BH * T * p->Dv == 0 || p->D == 0) return out; /* nothing to attend to, nothing to differentiate */
    p->qk = qkv__contig_data(ctx, qk);
    p->v = qkv__contig_data(ctx, v);
    const float *rot = rotations ? qkv__contig_data(ctx, rotations) : NULL;
    p->khat = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(BH * T * p->D + 1));
    p->rho = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(BH * T));
    p->sorted = qkv_ctx_alloc(ctx, sizeof(int32_t) * (size_t)(BH * NT));
    p->place = qkv_ctx_alloc(ctx, sizeof(int32_t) * (size_t)(BH * NT));
    p->lse = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(BH * NT));
    p->w = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(BH * NT));
    float *so = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(BH * NT * p->Dv + 1));
    if (!p->qk || !p->v || (rotations && !rot) || !p->khat || !p->rho || !p->sorted || !p->place || !p->lse ||
        !p->w || !so)
        return NULL;
    if (o.key_padding) {
        uint8_t *pad = qkv_ctx_alloc(ctx, (size_t)(p->B * T));
        if (!pad) return NULL;
        const qkv_tensor *m = o.key_padding;
        for (int64_t b = 0; b < p->B; b++)
            for (int64_t t = 0; t < T; t++) {
                int64_t off = b * m->stride[0] + t * m->stride[1];
                pad[b * T + t] = m->dtype == QKV_I32 ? qkv_i32(m)[off] != 0 : qkv_f32(m)[off] != 0.0f;
            }
        p->pad = pad;
    }
    /* Hash scratch per thread: rotated vectors of a block of rows, bucket counts, buckets [NT]. */
    const int nth = max_threads();
    const int64_t hper = HASH_ROWS * p->nh * p->rc + 16, cper = p->nh * p->nb + 2;
    float *hx = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(nth * hper));
    int64_t *cnt = qkv_ctx_alloc(ctx, sizeof(int64_t) * (size_t)(nth * cper));
    int32_t *bk = qkv_ctx_alloc(ctx, sizeof(int32_t) * (size_t)(nth * NT));
    const int64_t per = scratch_floats(p, false);
    float *ws = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(nth * per));
    if (!hx || !cnt || !bk || !ws) return NULL;
#pragma omp parallel num_threads(nth)
    {
        const int tid = omp_get_thread_num();
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < BH; bh++) {
            normalise_keys(p, bh);
            hash_and_sort(p, bh, rot, hx + tid * hper, cnt + tid * cper, bk + tid * NT);
        }
        chunk_scratch w = carve(p, ws + tid * per, false);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < BH * nc; task++) chunk_forward(p, task / nc, task % nc, &w, so);
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < BH; bh++) combine_rounds(p, bh, so, out->data);
    }
    p->out = out->data;
    qkv_node *nd = qkv_record(ctx, out, "lsh_attention", lsh_backward, 2, (qkv_tensor *[]){qk, v});
    if (nd) nd->saved = sv;
    return out;
}
