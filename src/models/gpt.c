/* GPT-2-style decoder-only Transformer LM: training forward through the ops (autograd gives the backward) and a
 * KV-cached incremental decoder that runs without autograd. See include/qkv/gpt.h. */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "core/par.h"
#include "ops/gemm_packed.h"
#include "ops/gemv.h"
#include "qkv/gpt.h"
#include "qkv/ops.h"
#include "qkv/schema.h"
#include "loss_weights.h"
#include "row_moves.h"

qkv_gpt_config qkv_gpt_config_default(void) {
    return (qkv_gpt_config){.vocab_size = 8192, .n_ctx = 256, .d_model = 384, .n_heads = 6, .d_ff = 1536,
                            .n_layers = 6, .tied = true, .dropout = 0.0f, .ln_eps = 1e-5f, .init_std = 0.02f};
}

static qkv_status check_config(const qkv_gpt_config *c) {
    if (c->vocab_size < 1) return qkv_error_set(QKV_ERR_INVALID, "gpt: vocab_size %lld < 1", (long long)c->vocab_size);
    if (c->n_ctx < 1) return qkv_error_set(QKV_ERR_INVALID, "gpt: n_ctx %lld < 1", (long long)c->n_ctx);
    if (c->n_layers < 1 || c->n_layers > QKV_GPT_MAX_LAYERS)
        return qkv_error_set(QKV_ERR_INVALID, "gpt: n_layers %d outside 1..%d", c->n_layers, QKV_GPT_MAX_LAYERS);
    if (c->n_heads < 1 || c->d_model < 1 || c->d_model % c->n_heads)
        return qkv_error_set(QKV_ERR_INVALID, "gpt: d_model %lld must be a positive multiple of n_heads %lld",
                             (long long)c->d_model, (long long)c->n_heads);
    if (c->d_ff < 1) return qkv_error_set(QKV_ERR_INVALID, "gpt: d_ff %lld < 1", (long long)c->d_ff);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return qkv_error_set(QKV_ERR_INVALID, "gpt: dropout %g outside [0, 1)", (double)c->dropout);
    if (!(c->ln_eps > 0.0f)) return qkv_error_set(QKV_ERR_INVALID, "gpt: ln_eps %g must be > 0", (double)c->ln_eps);
    if (!(c->init_std >= 0.0f && isfinite(c->init_std)))
        return qkv_error_set(QKV_ERR_INVALID, "gpt: init_std %g must be finite and >= 0", (double)c->init_std);
    return QKV_OK;
}

/* A Linear [out, in] + bias [out] named "<prefix>.<sub>.{weight,bias}": weight normal(0, std) as torch_ref.py,
 * bias as torch's Linear default. */
static qkv_status add_linear(qkv_params *p, const char *prefix, const char *sub, int64_t in, int64_t out, float std,
                             qkv_rng *rng, qkv_tensor **w, qkv_tensor **b) {
    char name[224];
    qkv_status st = qkv_params_join(name, sizeof name, prefix, sub);
    if (st) return st;
    *w = qkv_params_add(p, name, "weight", QKV_DIMS(out, in));
    *b = qkv_params_add(p, name, "bias", QKV_DIMS(out));
    if (!*w || !*b) return qkv_last_status();
    qkv_rng_fill_normal(rng, *w, 0.0f, std);
    float bound = 1.0f / sqrtf((float)in);
    qkv_rng_fill_uniform(rng, *b, -bound, bound);
    return QKV_OK;
}

static qkv_status add_norm(qkv_params *p, const char *prefix, const char *sub, int64_t d, qkv_tensor **w,
                           qkv_tensor **b) {
    char name[224];
    qkv_status st = qkv_params_join(name, sizeof name, prefix, sub);
    if (st) return st;
    *w = qkv_params_add(p, name, "weight", QKV_DIMS(d));
    *b = qkv_params_add(p, name, "bias", QKV_DIMS(d));
    if (!*w || !*b) return qkv_last_status();
    qkv_tensor_fill(*w, 1.0f);
    return QKV_OK;
}

qkv_gpt *qkv_gpt_new(const qkv_gpt_config *cfg, qkv_params *params, const char *prefix, qkv_rng *rng) {
    if (check_config(cfg) != QKV_OK) return NULL;
    qkv_gpt *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "gpt: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    int64_t V = cfg->vocab_size, d = cfg->d_model, f = cfg->d_ff;
    float std = cfg->init_std;
    char pre[160];
    m->wte = qkv_params_add(params, prefix, "transformer.wte.weight", QKV_DIMS(V, d));
    m->wpe = qkv_params_add(params, prefix, "transformer.wpe.weight", QKV_DIMS(cfg->n_ctx, d));
    if (!m->wte || !m->wpe) goto fail;
    qkv_rng_fill_normal(rng, m->wte, 0.0f, std);
    qkv_rng_fill_normal(rng, m->wpe, 0.0f, std);
    for (int l = 0; l < cfg->n_layers; l++) {
        qkv_gpt_block *b = &m->h[l];
        char blk[32];
        snprintf(blk, sizeof blk, "transformer.h.%d", l);
        if (qkv_params_join(pre, sizeof pre, prefix, blk) || add_norm(params, pre, "ln_1", d, &b->ln1_w, &b->ln1_b) ||
            add_linear(params, pre, "attn.c_attn", d, 3 * d, std, rng, &b->attn_w, &b->attn_b) ||
            add_linear(params, pre, "attn.c_proj", d, d, std, rng, &b->proj_w, &b->proj_b) ||
            add_norm(params, pre, "ln_2", d, &b->ln2_w, &b->ln2_b) ||
            add_linear(params, pre, "mlp.c_fc", d, f, std, rng, &b->fc_w, &b->fc_b) ||
            add_linear(params, pre, "mlp.c_proj", f, d, std, rng, &b->mproj_w, &b->mproj_b))
            goto fail;
    }
    if (add_norm(params, prefix, "transformer.ln_f", d, &m->lnf_w, &m->lnf_b)) goto fail;
    if (cfg->tied) {
        m->head = m->wte;
    } else {
        m->head = qkv_params_add(params, prefix, "lm_head.weight", QKV_DIMS(V, d));
        if (!m->head) goto fail;
        qkv_rng_fill_normal(rng, m->head, 0.0f, std);
    }
    return m;
fail:
    free(m);
    return NULL;
}

void qkv_gpt_free(qkv_gpt *m) { free(m); }

/* Causal self-attention of one block on h [B, T, d]. The fused c_attn weight [3d, d] is used through three row
 * slices (contiguous views), one GEMM each, so every head split below stays a view. */
static qkv_tensor *attention(qkv_ctx *ctx, const qkv_gpt *m, const qkv_gpt_block *b, qkv_tensor *h,
                             qkv_tensor **weights) {
    if (!h) return NULL;
    int64_t B = h->shape[0], T = h->shape[1], d = m->cfg.d_model, H = m->cfg.n_heads;
    qkv_tensor *qkv[3];
    for (int i = 0; i < 3; i++) {
        qkv_tensor *w = qkv_slice(ctx, b->attn_w, 0, i * d, (i + 1) * d, 1);
        qkv_tensor *bias = qkv_slice(ctx, b->attn_b, 0, i * d, (i + 1) * d, 1);
        qkv_tensor *y = qkv_reshape(ctx, qkv_linear(ctx, h, w, bias), QKV_DIMS(B, T, H, d / H));
        qkv[i] = qkv_permute(ctx, y, (const int[]){0, 2, 1, 3});
    }
    qkv_sdpa_opts o = qkv_sdpa_defaults();
    o.causal = true;
    o.dropout = m->cfg.dropout;
    o.weights = weights;
    qkv_tensor *a = qkv_sdpa(ctx, qkv[0], qkv[1], qkv[2], &o);
    qkv_tensor *merged = qkv_reshape(ctx, qkv_permute(ctx, a, (const int[]){0, 2, 1, 3}), QKV_DIMS(B, T, d));
    return qkv_linear(ctx, merged, b->proj_w, b->proj_b);
}

qkv_tensor *qkv_gpt_hidden(qkv_ctx *ctx, const qkv_gpt *m, qkv_tensor *ids, qkv_attention_maps *maps) {
    if (!ids) return NULL;
    const qkv_gpt_config *c = &m->cfg;
    if (ids->dtype != QKV_I32 || ids->ndim != 2) {
        qkv_error_set(QKV_ERR_INVALID, "gpt: ids must be int32 [batch, time]");
        return NULL;
    }
    int64_t T = ids->shape[1];
    if (T < 1 || T > c->n_ctx) {
        qkv_error_set(QKV_ERR_RANGE, "gpt: sequence length %lld outside 1..n_ctx (%lld)", (long long)T,
                      (long long)c->n_ctx);
        return NULL;
    }
    if (maps) {
        memset(maps, 0, sizeof *maps);
        _Static_assert(QKV_GPT_MAX_LAYERS <= QKV_ATTENTION_MAPS_MAX, "a GPT's maps fit the slots");
        maps->n_layers = c->n_layers;
    }
    qkv_tensor *x = qkv_add(ctx, qkv_embedding(ctx, m->wte, ids), qkv_slice(ctx, m->wpe, 0, 0, T, 1));
    x = qkv_dropout(ctx, x, c->dropout);
    for (int l = 0; l < c->n_layers; l++) {
        const qkv_gpt_block *b = &m->h[l];
        qkv_tensor **w = maps ? &maps->weights[l] : NULL;
        if (w) {
            maps->kind[l] = "causal";
            snprintf(maps->name[l], sizeof maps->name[l], "layer %d", l + 1);
        }
        qkv_tensor *a = attention(ctx, m, b, qkv_layer_norm(ctx, x, b->ln1_w, b->ln1_b, c->ln_eps), w);
        x = qkv_add(ctx, x, qkv_dropout(ctx, a, c->dropout));
        qkv_tensor *h = qkv_layer_norm(ctx, x, b->ln2_w, b->ln2_b, c->ln_eps);
        h = qkv_linear(ctx, qkv_gelu_tanh(ctx, qkv_linear(ctx, h, b->fc_w, b->fc_b)), b->mproj_w, b->mproj_b);
        x = qkv_add(ctx, x, qkv_dropout(ctx, h, c->dropout));
    }
    return qkv_layer_norm(ctx, x, m->lnf_w, m->lnf_b, c->ln_eps);
}

qkv_tensor *qkv_gpt_forward(qkv_ctx *ctx, const qkv_gpt *m, qkv_tensor *ids, qkv_attention_maps *maps) {
    return qkv_linear(ctx, qkv_gpt_hidden(ctx, m, ids, maps), m->head, NULL);
}

/* ---- KV-cached decoding ---------------------------------------------------------------------------------- */

struct qkv_gpt_decoder {
    const qkv_gpt *m;
    int batch, cap; /* rows now, rows the cache holds (reorder can drop and fan out rows) */
    int64_t pos;
    int64_t positions; /* a row holds this many: n_ctx, or the steps its caller said it takes */
    size_t block;      /* floats of one (row, head) block, below */
    /* Per layer and (row, head), [L, cap, H] blocks of dh x `positions` (rounded up to KEY_CHUNK) floats. K as
     * chunks of KEY_CHUNK positions, each transposed ([dh, KEY_CHUNK]): one query's scores run along contiguous keys,
     * and the first n positions are the block's first ceil(n / KEY_CHUNK) chunks, so a step touches only memory (and
     * pages) it uses. (Keys transposed over the whole context, rows n_ctx apart, put a block's first 32 positions on 16
     * pages at n_ctx 256: a batch-64 call of 32 steps faulted in 39K pages instead of 9K, 25% more CPU time.) V as
     * [positions, dh]. */
    float *k, *v;
    float *moved;      /* reorder scratch (a row set aside, the move plan), allocated on its first call */
    qkv_ctx *ctx;      /* layer norms and activations reuse the ops (same numerics as training); grad off */
    qkv__packs *packs; /* the weights, packed on first use by several rows (ops/gemm_packed.h) */
};

#define KEY_CHUNK 16 /* positions per transposed chunk of the K cache */

/* A decoder whose rows hold `positions` (1..n_ctx) positions each. */
static qkv_gpt_decoder *decoder_make(const qkv_gpt *m, int batch, int64_t positions) {
    if (!m || batch < 1) {
        qkv_error_set(QKV_ERR_INVALID, "gpt decoder: batch %d must be >= 1", batch);
        return NULL;
    }
    const qkv_gpt_config *c = &m->cfg;
    int64_t dh = c->d_model / c->n_heads;
    size_t block = (size_t)((positions + KEY_CHUNK - 1) / KEY_CHUNK * KEY_CHUNK) * (size_t)dh;
    size_t cache = (size_t)c->n_layers * (size_t)batch * (size_t)c->n_heads * block;
    qkv_gpt_decoder *d = calloc(1, sizeof *d);
    if (d) {
        d->k = malloc(sizeof(float) * cache);
        d->v = malloc(sizeof(float) * cache);
        d->ctx = qkv_ctx_new();
        d->packs = qkv__packs_new();
    }
    bool allowed = d && d->packs && !qkv__packs_allow(d->packs, m->head);
    for (int l = 0; allowed && l < c->n_layers; l++) {
        const qkv_gpt_block *b = &m->h[l];
        allowed = !qkv__packs_allow(d->packs, b->attn_w) && !qkv__packs_allow(d->packs, b->proj_w) &&
                  !qkv__packs_allow(d->packs, b->fc_w) && !qkv__packs_allow(d->packs, b->mproj_w);
    }
    if (!d || !d->k || !d->v || !d->ctx || !allowed) {
        qkv_gpt_decoder_free(d);
        qkv_error_set(QKV_ERR_NOMEM, "gpt decoder: out of memory for a %zu-float KV cache", 2 * cache);
        return NULL;
    }
    d->m = m;
    d->batch = d->cap = batch;
    d->positions = positions;
    d->block = block;
    qkv_ctx_set_grad(d->ctx, false);
    qkv_ctx_set_training(d->ctx, false);
    qkv__ctx_set_packs(d->ctx, d->packs);
    return d;
}

qkv_gpt_decoder *qkv_gpt_decoder_new(const qkv_gpt *m, int batch) {
    return decoder_make(m, batch, m ? m->cfg.n_ctx : 1);
}

void qkv_gpt_decoder_free(qkv_gpt_decoder *d) {
    if (!d) return;
    free(d->k);
    free(d->v);
    free(d->moved);
    qkv_ctx_free(d->ctx);
    qkv__packs_free(d->packs);
    free(d);
}

void qkv_gpt_decoder_reset(qkv_gpt_decoder *d) { d->pos = 0; }
int64_t qkv_gpt_decoder_pos(const qkv_gpt_decoder *d) { return d->pos; }

/* The decoder's attention loop is compiled per instruction set (core/isa.h). Each sum is written as separate
 * multiplies and adds in a fixed order, and clang is told not to fuse them (GCC does not in ISO C), so every path
 * computes the bits of the portable one. */
#if defined(__clang__)
#define NO_CONTRACT _Pragma("clang fp contract(off)")
#else
#define NO_CONTRACT
#endif

/* y [M, out] = x [M, in] W^T (+ bias), for M = n positions of Bn rows each (position-major). Every row is computed
 * exactly as a step of Bn rows computes it, so that feeding n positions at once gives the bits of n steps:
 *  - several rows use the decoder's packed weights (ops/gemm_packed.h), whose kernel computes each row alone
 *    whatever M is. One row probes with M = 1, as its steps do: a pack an earlier, wider batch made stays in use,
 *    none is made for a batch of one;
 *  - a batch of one without a pack is a GEMV per row: reading every weight once per token is bound by memory
 *    bandwidth, so our own GEMV (ops/gemv.h) splits the outputs over as many threads as its work is worth
 *    (OpenBLAS's threaded sgemv spent most of its time in the thread pool's spin-waits at these sizes);
 *  - BLAS (more rows than the packed path takes, or no memory for a pack) gets one position's Bn rows a call. */
static void dense(const qkv_ctx *ctx, const float *x, int64_t M, int Bn, const qkv_tensor *w, const qkv_tensor *bias,
                  float *y) {
    int64_t out = w->shape[0], in = w->shape[1], chunk = QKV__PACKED_MAX_M;
    const float *W = w->data, *b = bias ? bias->data : NULL;
    /* A step of more rows than the packed path takes goes to BLAS without asking. The packed path adds the bias as
     * it stores (the bits of the bias rows below plus an accumulating product). */
    int64_t first = Bn == 1 ? 1 : M < chunk ? M : chunk;
    if (Bn <= chunk && (b ? qkv__gemm_xwt_bias(ctx, first, out, in, x, in, W, b, y, out)
                          : qkv__gemm_xwt(ctx, first, out, in, x, in, W, y, out, false))) {
        for (int64_t r = first; r < M; r += chunk) { /* the pack exists now, so these cannot decline */
            int64_t m = M - r < chunk ? M - r : chunk;
            if (b) (void)qkv__gemm_xwt_bias(ctx, m, out, in, x + r * in, in, W, b, y + r * out, out);
            else (void)qkv__gemm_xwt(ctx, m, out, in, x + r * in, in, W, y + r * out, out, false);
        }
        return;
    }
    if (b)
        for (int64_t r = 0; r < M; r++) memcpy(y + r * out, b, sizeof(float) * (size_t)out);
    if (Bn == 1) {
        qkv__gemv_xwt(M, out, in, x, W, b, y);
        return;
    }
    for (int64_t r = 0; r < M; r += Bn)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Bn, (int)out, (int)in, 1.0f, x + r * in, (int)in, W,
                    (int)in, b ? 1.0f : 0.0f, y + r * out, (int)out);
}

/* One query q [dh] against keys 0..n-1 of one (sequence, head): KC the block's key chunks ([ceil(n / KEY_CHUNK)]
 * [dh][KEY_CHUNK]), Vc [n, dh]; writes dh outputs. s takes the scores of whole chunks (ceil(n / KEY_CHUNK) *
 * KEY_CHUNK floats; a last chunk's lanes past n hold zeros or later positions' keys, and their scores are never
 * read). Every score is its sum over e in order, and every output its sum over the keys in order, whichever group
 * of chunks (4, 2 or 1 at a time: loops the compiler vectorises with independent accumulators) or block of outputs
 * it falls in: the bits do not depend on n or on a key's place, so a query attends the same in a step and in a
 * prefill (and as with the layouts before). */
#define ATTEND_CHUNKS(G)                                                                                            \
    for (; c + (G) <= chunks; c += (G)) {                                                                           \
        float acc[G][KEY_CHUNK] = {{0}};                                                                            \
        const float *kc = KC + c * KEY_CHUNK * dh;                                                                  \
        for (int64_t e = 0; e < dh; e++) {                                                                          \
            const float qe = q[e];                                                                                  \
            for (int g = 0; g < (G); g++)                                                                           \
                for (int i = 0; i < KEY_CHUNK; i++) acc[g][i] += qe * kc[(g * dh + e) * KEY_CHUNK + i];             \
        }                                                                                                           \
        for (int g = 0; g < (G); g++)                                                                               \
            for (int i = 0; i < KEY_CHUNK; i++) s[(c + g) * KEY_CHUNK + i] = acc[g][i] * scale;                     \
    }
#define ATTEND_VALUES(W)                                                                                            \
    for (; e0 + (W) <= dh; e0 += (W)) {                                                                             \
        float acc[W] = {0};                                                                                         \
        for (int64_t k = 0; k < n; k++) {                                                                           \
            const float p = s[k], *vr = Vc + k * dh + e0;                                                           \
            for (int i = 0; i < (W); i++) acc[i] += p * vr[i];                                                      \
        }                                                                                                           \
        memcpy(out + e0, acc, sizeof acc);                                                                          \
    }
QKV_KERNEL_BODY void attend_body(const float *restrict q, const float *restrict KC, const float *restrict Vc,
                                 int64_t n, int64_t dh, float scale, float *restrict s, float *restrict out) {
    NO_CONTRACT
    int64_t c = 0, chunks = (n + KEY_CHUNK - 1) / KEY_CHUNK, j;
    ATTEND_CHUNKS(4)
    ATTEND_CHUNKS(2)
    ATTEND_CHUNKS(1)
    float mx = -INFINITY;
    for (j = 0; j < n; j++)
        if (s[j] > mx) mx = s[j];
    float sum = 0.0f;
    for (j = 0; j < n; j++) sum += s[j] = expf(s[j] - mx);
    float inv = 1.0f / sum;
    for (j = 0; j < n; j++) s[j] *= inv;
    int64_t e0 = 0;
    ATTEND_VALUES(64)
    ATTEND_VALUES(16)
    for (; e0 < dh; e0++) {
        float acc = 0.0f;
        for (int64_t k = 0; k < n; k++) acc += s[k] * Vc[k * dh + e0];
        out[e0] = acc;
    }
}
#undef ATTEND_CHUNKS
#undef ATTEND_VALUES
QKV_ISA_KERNEL_VOID(attend,
                    (const float *restrict q, const float *restrict KC, const float *restrict Vc, int64_t n,
                     int64_t dh, float scale, float *restrict s, float *restrict out),
                    (q, KC, Vc, n, dh, scale, s, out))

/* Position p's key k [dh] into a block's chunks: lane p % KEY_CHUNK of chunk p / KEY_CHUNK. A chunk's first
 * position clears it, so that its lanes past the last position hold zeros, not whatever the memory held. */
static void put_key(float *KC, int64_t p, int64_t dh, const float *k) {
    float *chunk = KC + p / KEY_CHUNK * KEY_CHUNK * dh;
    int64_t lane = p % KEY_CHUNK;
    if (lane == 0) memset(chunk, 0, sizeof(float) * KEY_CHUNK * (size_t)dh);
    for (int64_t e = 0; e < dh; e++) chunk[e * KEY_CHUNK + lane] = k[e];
}

/* Positions pos .. pos + n - 1 of every row through the blocks, their keys and values into the cache; row b's token
 * at pos + t is tokens[b * ld + t]. The work tensors hold n * Bn rows, position-major (row t * Bn + b), in the
 * (reset) work context. Returns the last block's output (ln_f's input); the caller advances pos. */
static qkv_tensor *run_positions(qkv_gpt_decoder *d, const int32_t *tokens, int64_t ld, int64_t n) {
    const qkv_gpt *m = d->m;
    const qkv_gpt_config *c = &m->cfg;
    int Bn = d->batch;
    int64_t D = c->d_model, H = c->n_heads, dh = D / H, F = c->d_ff, pos = d->pos, M = n * Bn;
    qkv_ctx *ctx = d->ctx;
    qkv_tensor *x = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(M, D));
    qkv_tensor *qkv = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(M, 3 * D));
    qkv_tensor *att = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(M, D));
    qkv_tensor *ff = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(M, F));
    qkv_tensor *y = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(M, D));
    float *scores = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)Bn * (size_t)H * d->block / (size_t)dh);
    if (!x || !qkv || !att || !ff || !y || !scores) return NULL;
    float *xs = qkv_f32(x), *qs = qkv_f32(qkv), *as = qkv_f32(att), *ys = qkv_f32(y);
    const float *wte = qkv_f32(m->wte), *wpe = qkv_f32(m->wpe);
    for (int64_t t = 0; t < n; t++)
        for (int b = 0; b < Bn; b++) {
            const float *te = wte + tokens[b * ld + t] * D, *pe = wpe + (pos + t) * D;
            float *xr = xs + (t * Bn + b) * D;
            for (int64_t e = 0; e < D; e++) xr[e] = te[e] + pe[e];
        }
    float scale = 1.0f / sqrtf((float)dh);
    int64_t items = (int64_t)Bn * H; /* (row, head) pairs: one cache block each */
    size_t block = d->block, layer = (size_t)d->cap * (size_t)H * block, P = block / (size_t)dh;
    /* Scores and weighted values: 2 n (pos + n) dh multiply-adds per (row, head), over keys and values read from the
     * cache once. Each (row, head) is computed whole by one thread. */
    int nth = items > 1 ? qkv__par_threads((double)items * 2.0 * ((double)n + QKV__PAR_STREAM) * (double)(pos + n) *
                                           (double)dh)
                        : 1;
    for (int l = 0; l < c->n_layers; l++) {
        const qkv_gpt_block *blk = &m->h[l];
        qkv_tensor *h = qkv_layer_norm(ctx, x, blk->ln1_w, blk->ln1_b, c->ln_eps);
        if (!h) return NULL;
        dense(ctx, qkv_f32(h), M, Bn, blk->attn_w, blk->attn_b, qs);
        float *kl = d->k + l * layer, *vl = d->v + l * layer;
        /* A (row, head)'s new keys and values go into its block right before it attends, by the same thread: the
         * block's lines come in from memory once, for the writes and the reads (written in a pass of their own
         * before the attention, they were fetched for the writes and were gone again when read). */
#pragma omp parallel for schedule(static) num_threads(nth)
        for (int64_t i = 0; i < items; i++) {
            int64_t b = i / H, hd = i % H;
            for (int64_t t = 0; t < n; t++) {
                const float *row = qs + (t * Bn + b) * 3 * D;
                put_key(kl + (size_t)i * block, pos + t, dh, row + D + hd * dh);
                memcpy(vl + (size_t)i * block + (size_t)(pos + t) * dh, row + 2 * D + hd * dh, sizeof(float) * dh);
            }
            for (int64_t t = 0; t < n; t++) {
                int64_t r = t * Bn + b;
                attend(qs + r * 3 * D + hd * dh, kl + (size_t)i * block, vl + (size_t)i * block, pos + t + 1, dh,
                       scale, scores + (size_t)i * P, as + r * D + hd * dh);
            }
        }
        dense(ctx, as, M, Bn, blk->proj_w, blk->proj_b, ys);
        for (int64_t i = 0; i < M * D; i++) xs[i] += ys[i];
        h = qkv_layer_norm(ctx, x, blk->ln2_w, blk->ln2_b, c->ln_eps);
        if (!h) return NULL;
        dense(ctx, qkv_f32(h), M, Bn, blk->fc_w, blk->fc_b, qkv_f32(ff));
        qkv_tensor *g = qkv_gelu_tanh(ctx, ff);
        if (!g) return NULL;
        dense(ctx, qkv_f32(g), M, Bn, blk->mproj_w, blk->mproj_b, ys);
        for (int64_t i = 0; i < M * D; i++) xs[i] += ys[i];
    }
    return x;
}

static qkv_status check_tokens(const qkv_gpt_decoder *d, const int32_t *tokens, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= d->m->cfg.vocab_size)
            return qkv_error_set(QKV_ERR_RANGE, "gpt decoder: token %d outside [0, %lld)", (int)tokens[i],
                                 (long long)d->m->cfg.vocab_size);
    return QKV_OK;
}

qkv_status qkv_gpt_decoder_step(qkv_gpt_decoder *d, const int32_t *tokens, float *logits) {
    const qkv_gpt *m = d->m;
    const qkv_gpt_config *c = &m->cfg;
    if (d->pos >= d->positions)
        return qkv_error_set(QKV_ERR_RANGE, "gpt decoder: context of %lld positions is full", (long long)d->positions);
    qkv_status st = check_tokens(d, tokens, d->batch);
    if (st) return st;
    qkv_ctx_reset(d->ctx);
    qkv_tensor *x = run_positions(d, tokens, 1, 1);
    qkv_tensor *h = x ? qkv_layer_norm(d->ctx, x, m->lnf_w, m->lnf_b, c->ln_eps) : NULL;
    if (!h) return qkv_last_status();
    dense(d->ctx, qkv_f32(h), d->batch, d->batch, m->head, NULL, logits);
    d->pos++;
    return QKV_OK;
}

#define PREFILL_ROWS 1024 /* rows (positions x sequences) a prefill runs through the blocks at once */

qkv_status qkv_gpt_decoder_prefill(qkv_gpt_decoder *d, const int32_t *tokens, int64_t n) {
    const qkv_gpt_config *c = &d->m->cfg;
    if (n < 0 || (n > 0 && !tokens))
        return qkv_error_set(QKV_ERR_INVALID, "gpt decoder: prefill of %lld tokens needs them", (long long)n);
    if (n > d->positions - d->pos)
        return qkv_error_set(QKV_ERR_RANGE, "gpt decoder: %lld tokens do not fit the context (%lld of %lld positions "
                             "full)", (long long)n, (long long)d->pos, (long long)d->positions);
    qkv_status st = check_tokens(d, tokens, n * d->batch);
    if (st) return st;
    /* Positions in groups of about PREFILL_ROWS rows, in order, so that each group attends to the cache the groups
     * before it filled. Each group reads that whole cache once per (row, head), so fewer, larger groups; the bound
     * keeps the work tensors to about 15 MB at d_model 256 (the arena reuses them). */
    int64_t per = PREFILL_ROWS / d->batch, pos0 = d->pos;
    if (per < 1) per = 1;
    for (int64_t t = 0; t < n; t += per) {
        int64_t k = n - t < per ? n - t : per;
        qkv_ctx_reset(d->ctx);
        if (!run_positions(d, tokens + t, n, k)) {
            d->pos = pos0;
            return qkv_last_status();
        }
        d->pos += k;
    }
    /* A step of 2..QKV__PACKED_MAX_M rows packs the output projection on its first product. Packed or not decides
     * the kernel of later one-row steps (a batch that shrinks), so the prefill packs it as those steps would have:
     * one product of two zero rows. */
    const qkv_gpt *m = d->m;
    if (n > 0 && d->batch >= 2 && d->batch <= QKV__PACKED_MAX_M) {
        qkv_ctx_reset(d->ctx);
        float *x = qkv_ctx_alloc(d->ctx, sizeof(float) * 2 * (size_t)(c->d_model + c->vocab_size));
        if (x) {
            memset(x, 0, sizeof(float) * 2 * (size_t)c->d_model);
            dense(d->ctx, x, 2, 2, m->head, NULL, x + 2 * c->d_model);
        }
    }
    return QKV_OK;
}

/* The first `pos` positions of one (row, head) block: K's first ceil(pos / KEY_CHUNK) chunks, V's first pos rows. */
static void copy_used(float *dst, const float *src, bool keys, int64_t pos, int64_t dh) {
    int64_t n = keys ? (pos + KEY_CHUNK - 1) / KEY_CHUNK * KEY_CHUNK : pos;
    memcpy(dst, src, sizeof(float) * (size_t)(n * dh));
}

/* One row copy of a reorder (row_moves.h): a row is H blocks in each layer's K and V, of which the first pos
 * positions are used; -1 is the row set aside, [L][2][H] blocks in moved. */
typedef struct {
    qkv_gpt_decoder *d;
    int64_t H, dh;
    size_t block, layer;
} gpt_rows;

static void gpt_copy_row(void *user, int dst, int src) {
    const gpt_rows *r = user;
    const qkv_gpt_decoder *d = r->d;
    for (int l = 0; l < d->m->cfg.n_layers; l++)
        for (int kv = 0; kv < 2; kv++) {
            float *cache = (kv ? d->v : d->k) + (size_t)l * r->layer;
            float *aside = d->moved + ((size_t)l * 2 + (size_t)kv) * (size_t)r->H * r->block;
            for (int64_t h = 0; h < r->H; h++) {
                float *to = dst < 0 ? aside + h * r->block : cache + ((size_t)dst * r->H + h) * r->block;
                const float *fr = src < 0 ? aside + h * r->block : cache + ((size_t)src * r->H + h) * r->block;
                copy_used(to, fr, !kv, d->pos, r->dh);
            }
        }
}

qkv_status qkv_gpt_decoder_reorder(qkv_gpt_decoder *d, const int32_t *from, int n_rows) {
    const qkv_gpt_config *c = &d->m->cfg;
    int Bn = n_rows;
    if (n_rows < 1 || n_rows > d->cap)
        return qkv_error_set(QKV_ERR_RANGE, "gpt decoder: reorder to %d rows (the cache holds 1..%d)", n_rows, d->cap);
    for (int b = 0; b < Bn; b++)
        if (from[b] < 0 || from[b] >= d->batch)
            return qkv_error_set(QKV_ERR_RANGE, "gpt decoder: reorder row %d outside [0, %d)", (int)from[b],
                                 d->batch);
    int64_t H = c->n_heads, dh = c->d_model / H;
    size_t block = d->block;
    /* Scratch: one row set aside ([L][2][H] blocks at most) and the move plan's indices (3 x cap). */
    size_t aside = (size_t)c->n_layers * 2 * (size_t)H * block, plan = 3 * (size_t)d->cap;
    if (!d->moved && !(d->moved = malloc(sizeof(float) * aside + sizeof(int32_t) * plan)))
        return qkv_error_set(QKV_ERR_NOMEM, "gpt decoder: out of memory for a reorder");
    /* Rows move in place, each changed row once (row_moves.h): a beam step that keeps most hypotheses where they
     * are copies only the others. Positions past pos hold nothing. */
    if (d->pos > 0) {
        int32_t *todo = (int32_t *)(d->moved + aside);
        int span = d->cap;
        memset(todo, 0, sizeof(int32_t) * (size_t)span);
        for (int b = 0; b < Bn; b++) todo[b] = b >= d->batch || from[b] != b;
        gpt_rows r = {d, H, dh, block, (size_t)d->cap * (size_t)H * block};
        row_moves(from, Bn, todo, todo + span, todo + 2 * span, span, gpt_copy_row, &r);
    }
    d->batch = n_rows;
    return QKV_OK;
}

/* The model type's decoder: the KV-cached one above, all rows at the same position. */
static void gpt_dec_info(const qkv_model *m, qkv_decoder_info *out) {
    const qkv_gpt *g = (const qkv_gpt *)m;
    *out = (qkv_decoder_info){.vocab = g->cfg.vocab_size, .capacity = g->cfg.n_ctx, .log_probs = false,
                              .start_token = -1};
}

static qkv_decoder_state *gpt_dec_start(const qkv_model *m, const int32_t *src, const int32_t *lengths, int n_src,
                                        int src_len, int rows_per_src, int max_steps) {
    const qkv_gpt *g = (const qkv_gpt *)m;
    if (src || lengths || src_len != 0 || n_src < 1 || rows_per_src < 1 || max_steps < 0 ||
        max_steps > g->cfg.n_ctx) {
        qkv_error_set(QKV_ERR_INVALID, "gpt decoder: takes no source and needs >= 1 rows and at most n_ctx (%lld) "
                      "steps (got %d x %d rows, source length %d, %d steps)", (long long)g->cfg.n_ctx, n_src,
                      rows_per_src, src_len, max_steps);
        return NULL;
    }
    /* A cache for the steps the caller takes, not the whole context: 32 steps at n_ctx 256 are an eighth of the
     * memory to allocate, fault in and reorder. */
    return (qkv_decoder_state *)decoder_make(g, n_src * rows_per_src, max_steps ? max_steps : g->cfg.n_ctx);
}

static qkv_status gpt_dec_step(qkv_decoder_state *st, const int32_t *tokens, float *scores, float *attn) {
    (void)attn;
    return qkv_gpt_decoder_step((qkv_gpt_decoder *)st, tokens, scores);
}

static qkv_status gpt_dec_reorder(qkv_decoder_state *st, const int32_t *from, int n_rows) {
    return qkv_gpt_decoder_reorder((qkv_gpt_decoder *)st, from, n_rows);
}

static qkv_status gpt_dec_prefill(qkv_decoder_state *st, const int32_t *tokens, int n) {
    return qkv_gpt_decoder_prefill((qkv_gpt_decoder *)st, tokens, n);
}

static void gpt_dec_free(qkv_decoder_state *st) { qkv_gpt_decoder_free((qkv_gpt_decoder *)st); }

/* Position 0 with n_rows rows, as a new decoder: the packs go too (a one-row batch after a wider one must take the
 * kernel a new state takes), to be taken again from the open pack cache by the next product of several rows. */
static qkv_status gpt_dec_restart(qkv_decoder_state *st, int n_rows) {
    qkv_gpt_decoder *d = (qkv_gpt_decoder *)st;
    if (n_rows < 1 || n_rows > d->cap)
        return qkv_error_set(QKV_ERR_RANGE, "gpt decoder: restart with %d rows (the cache holds 1..%d)", n_rows,
                             d->cap);
    d->pos = 0;
    d->batch = n_rows;
    qkv__packs_forget(d->packs);
    return QKV_OK;
}

static const qkv_decoder_ops gpt_decoder_ops = {
    .info = gpt_dec_info, .start = gpt_dec_start, .step = gpt_dec_step, .reorder = gpt_dec_reorder,
    .free = gpt_dec_free, .prefill = gpt_dec_prefill, .restart = gpt_dec_restart};

/* ---- The model type ---------------------------------------------------------------------------------------- */

/* The "model" fields, declared once. */
typedef struct gpt_opts {
    int64_t d_model, n_layers, n_heads, d_ff, n_ctx;
    bool tied;
    double dropout, ln_eps, init_std;
} gpt_opts;

static const qkv_field fields[] = {
    QKV_FIELD_INT(gpt_opts, d_model, "d_model", 384, 1, 1 << 16, "width of the model"),
    QKV_FIELD_INT(gpt_opts, n_layers, "n_layers", 6, 1, QKV_GPT_MAX_LAYERS, "decoder blocks"),
    QKV_FIELD_INT(gpt_opts, n_heads, "n_heads", 6, 1, 1024, "attention heads (must divide d_model)"),
    QKV_FIELD_INT(gpt_opts, d_ff, "d_ff", 1536, 1, 1 << 20, "inner width of the MLPs"),
    QKV_FIELD_INT(gpt_opts, n_ctx, "n_ctx", 0, 0, 1 << 20, "positions; 0: the data's longest sequence (else 256)"),
    QKV_FIELD_BOOL(gpt_opts, tied, "tied", true, "the output projection is the token embedding"),
    QKV_FIELD_NUM(gpt_opts, dropout, "dropout", 0.0, 0, 0.999999, 0, "dropout on embeddings, attention and MLPs"),
    QKV_FIELD_NUM(gpt_opts, ln_eps, "ln_eps", 1e-5, 1e-12, 1, 0, "layer norm epsilon"),
    QKV_FIELD_NUM(gpt_opts, init_std, "init_std", 0.02, 0, 10, 0, "standard deviation of the initial weights"),
};

static qkv_status check_opts(const void *p) {
    const gpt_opts *o = p;
    if (o->d_model % o->n_heads)
        return qkv_error_set(QKV_ERR_INVALID, "model.d_model %lld must be a multiple of model.n_heads %lld",
                             (long long)o->d_model, (long long)o->n_heads);
    return QKV_OK;
}

static const qkv_schema schema = QKV_SCHEMA("model", gpt_opts, fields, check_opts);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

static qkv_model *gpt_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    gpt_opts o;
    if (qkv_model_config(&schema, cfg, &o)) return NULL;
    qkv_gpt_config c = qkv_gpt_config_default();
    c.vocab_size = info ? info->vocab_size : 0;
    c.d_model = o.d_model;
    c.n_heads = o.n_heads;
    c.d_ff = o.d_ff;
    c.n_layers = (int)o.n_layers;
    c.n_ctx = o.n_ctx ? o.n_ctx : info && info->max_len > 0 ? info->max_len : 256;
    c.tied = o.tied;
    c.dropout = (float)o.dropout;
    c.ln_eps = (float)o.ln_eps;
    c.init_std = (float)o.init_std;
    return (qkv_model *)qkv_gpt_new(&c, params, NULL, rng);
}

static void gpt_free(qkv_model *m) { qkv_gpt_free((qkv_gpt *)m); }

static void gpt_model_info(const qkv_model *m, qkv_model_info *out) {
    out->max_positions = ((const qkv_gpt *)m)->cfg.n_ctx;
}

static qkv_tensor *gpt_fwd(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b, qkv_attention_maps *maps) {
    return qkv_gpt_forward(ctx, (qkv_gpt *)m, b->ids, maps);
}

static qkv_tensor *gpt_loss(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b) {
    if (!b->targets) {
        qkv_error_set(QKV_ERR_INVALID, "gpt: the batch has no targets");
        return NULL;
    }
    const qkv_gpt *g = (const qkv_gpt *)m;
    qkv_tensor *h = qkv_gpt_hidden(ctx, g, b->ids, NULL);
    qkv_ce_opts o = qkv_ce_defaults();
    o.token_weight = qkv__model_loss_weights(ctx, b, "gpt");
    if ((b->mask || b->weights) && !o.token_weight) return NULL;
    /* the head only on positions that count: with a summarizer's article weight 0 most of them do not */
    return qkv_cross_entropy_linear(ctx, h, g->head, NULL, b->targets, &o);
}

static const qkv_model_embedding embeddings[] = {{"transformer.wte.weight", "input", "tied"}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_gpt = {
    .name = "gpt",
    .task = "lm",
    .summary = "GPT-2-style decoder-only Transformer LM (learned positions, pre-LN, GELU(tanh), tied head)",
    .config = &schema,
    .default_config = defaults_json,
    .create = gpt_create,
    .free = gpt_free,
    .loss = gpt_loss,
    .forward = gpt_fwd,
    .embeddings = embeddings,
    .decoder = &gpt_decoder_ops,
    .info = gpt_model_info,
};
