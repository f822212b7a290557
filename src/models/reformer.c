/* The Reformer language model (Kitaev et al. 2020; Trax's ReformerLM), model type "reformer_lm":
 *
 *     ShiftRight -> Embedding -> + positions (learned or axial) -> Dropout -> Dup -> Concatenate streams [x | x]
 *     -> n reversible blocks, each  y1 = x1 + Attention(LayerNorm(x2)),  y2 = x2 + FeedForward(LayerNorm(y1))
 *        with causal LSH or full attention as the config's pattern says for that layer, the feed-forward applied
 *        in chunks of rows when ff_chunk > 0
 *     -> LayerNorm over both streams [2 d] -> Dense -> logits.
 *
 * The blocks run through qkv_nn_reversible (activation memory independent of depth) and the LSH attention through
 * qkv_lsh_attention (memory linear in the length). A sequence is padded at its end to a multiple of chunk_len for
 * the LSH layers (causal masking hides the padding from every real position) and the logits cut back.
 *
 * Hashing. In training mode every forward draws fresh rotations from the context generator (the reversible
 * backward restores the generator, so the backward sees the forward's hashes, as Trax); in eval mode the rotations
 * of layer l come from a generator seeded with hash_seed + l, so scoring and decoding are deterministic.
 *
 * Decoding: with decode_cache (the default) a step runs only the new position through the blocks, against per-layer
 * caches of keys and values (and, for LSH layers, the stored buckets): see "decoding" below. Without it every step
 * recomputes the whole history, O(T) forwards of length up to T. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/attention.h"
#include "qkv/lsh_attention.h"
#include "qkv/model.h"
#include "qkv/nn.h"
#include "qkv/ops.h"
#include "qkv/reformer.h"
#include "qkv/schema.h"
#include "loss_weights.h"
#include "ops/lsh_hash.h"

#define RF_MAX_LAYERS 64
#define RF_PARAMS_PER_LAYER 16

typedef struct rf_model rf_model;

typedef struct {
    const rf_model *m;
    int layer;
    bool lsh;
    qkv_nn_layer_norm norm;
    qkv_nn_linear q, k, v, out; /* q is the shared query-key projection of an LSH layer; k unused there */
} rf_attention;

typedef struct {
    const rf_model *m;
    qkv_nn_layer_norm norm;
    qkv_nn_linear w1, w2;
} rf_feed_forward;

typedef struct {
    int64_t vocab, d_model, n_heads, d_head, d_ff, n_layers, n_ctx, chunk_len, n_hashes, n_buckets, ff_chunk;
    int64_t bucket_factor, factorize_above;
    int64_t axial[2];
    bool decode_cache; /* axial positions: n_ctx = axial[0] * axial[1]; 0 = learned table */
    float dropout;
    bool shift_right, any_lsh;
    int32_t start_id;
    uint64_t hash_seed;
    bool lsh[RF_MAX_LAYERS];
} rf_config;

struct rf_model {
    rf_config c;
    qkv_nn_embedding embedding;
    qkv_tensor *pos, *axial0, *axial1;
    rf_attention attn[RF_MAX_LAYERS];
    rf_feed_forward ff[RF_MAX_LAYERS];
    qkv_nn_layer_norm norm;
    qkv_nn_linear head;
    qkv_tensor **block_params; /* every parameter of the blocks, for the reversible node */
    int n_block_params;
};

/* ---- the two halves of a block -------------------------------------------------------------------------------- */

/* x [B, T, H * dh] -> [B, H, T, dh] (a view). */
static qkv_tensor *heads(qkv_ctx *ctx, qkv_tensor *x, int64_t H, int64_t dh) {
    if (!x) return NULL;
    qkv_tensor *r = qkv_reshape(ctx, x, QKV_DIMS(x->shape[0], x->shape[1], H, dh));
    return qkv_permute(ctx, r, (const int[]){0, 2, 1, 3});
}

/* Buckets per round for a padded length T: *n1 > 0 for factorized hashing (n1 x n2); returns the rotation columns
 * times two (the n_buckets argument of qkv_lsh_rotations). */
static int lsh_buckets(const rf_config *c, int64_t T, int *n1, int *n2) {
    int nb = c->n_buckets ? (int)c->n_buckets : qkv_lsh_default_buckets(T, c->chunk_len);
    *n2 = nb;
    *n1 = c->bucket_factor ? (int)c->bucket_factor : qkv_lsh_factor(nb, (int)c->factorize_above, n2);
    if (c->bucket_factor) *n2 = ((nb + *n1 - 1) / *n1 + 1) / 2 * 2;
    return *n1 ? *n1 + *n2 : nb;
}

static qkv_tensor *attention_half(qkv_ctx *ctx, qkv_tensor *x, void *user) {
    const rf_attention *a = user;
    const rf_config *c = &a->m->c;
    const int64_t B = x->shape[0], T = x->shape[1], H = c->n_heads, dh = c->d_head;
    qkv_tensor *h = qkv_nn_layer_norm_forward(ctx, &a->norm, x);
    qkv_tensor *o;
    if (a->lsh) {
        qkv_tensor *qk = heads(ctx, qkv_nn_linear_forward(ctx, &a->q, h), H, dh);
        qkv_tensor *v = heads(ctx, qkv_nn_linear_forward(ctx, &a->v, h), H, dh);
        int n1, n2, cols = lsh_buckets(c, T, &n1, &n2);
        qkv_rng fixed, *rng = qkv_ctx_rng(ctx);
        if (!qkv_ctx_training(ctx)) {
            qkv_rng_init(&fixed, c->hash_seed + (uint64_t)a->layer);
            rng = &fixed;
        }
        qkv_tensor *rot = qkv_lsh_rotations(ctx, rng, dh, (int)c->n_hashes, cols);
        qkv_lsh_opts lo = qkv_lsh_defaults();
        lo.bucket_factor = n1;
        lo.chunk_len = c->chunk_len;
        lo.causal = true;
        o = rot ? qkv_lsh_attention(ctx, qk, v, rot, &lo) : NULL;
    } else {
        qkv_tensor *q = heads(ctx, qkv_nn_linear_forward(ctx, &a->q, h), H, dh);
        qkv_tensor *k = heads(ctx, qkv_nn_linear_forward(ctx, &a->k, h), H, dh);
        qkv_tensor *v = heads(ctx, qkv_nn_linear_forward(ctx, &a->v, h), H, dh);
        qkv_sdpa_opts so = qkv_sdpa_defaults();
        so.causal = true;
        o = qkv_sdpa(ctx, q, k, v, &so);
    }
    o = qkv_permute(ctx, o, (const int[]){0, 2, 1, 3});
    o = qkv_reshape(ctx, o ? qkv_contiguous(ctx, o) : NULL, QKV_DIMS(B, T, H * dh));
    return qkv_dropout(ctx, qkv_nn_linear_forward(ctx, &a->out, o), c->dropout);
}

static qkv_tensor *ff_rows(qkv_ctx *ctx, qkv_tensor *x, void *user) {
    const rf_feed_forward *f = user;
    const float p = f->m->c.dropout;
    qkv_tensor *h = qkv_nn_linear_forward(ctx, &f->w1, qkv_nn_layer_norm_forward(ctx, &f->norm, x));
    h = qkv_dropout(ctx, qkv_gelu_tanh(ctx, h), p);
    return qkv_dropout(ctx, qkv_nn_linear_forward(ctx, &f->w2, h), p);
}

static qkv_tensor *ff_half(qkv_ctx *ctx, qkv_tensor *x, void *user) {
    rf_feed_forward *f = user;
    if (f->m->c.ff_chunk <= 0) return ff_rows(ctx, x, user);
    qkv_tensor *p[6] = {f->norm.weight, f->norm.bias, f->w1.weight, f->w1.bias, f->w2.weight, f->w2.bias};
    return qkv_nn_chunked(ctx, x, f->m->c.ff_chunk, f->m->c.d_model, ff_rows, f, 6, p);
}

/* ---- building ------------------------------------------------------------------------------------------------- */

static void rf_free(rf_model *m) {
    if (!m) return;
    free(m->block_params);
    free(m);
}

static qkv_status add_block_param(rf_model *m, qkv_tensor *t) {
    if (t) m->block_params[m->n_block_params++] = t;
    return QKV_OK;
}

static rf_model *rf_new(const rf_config *c, qkv_params *params, qkv_rng *rng) {
    rf_model *m = calloc(1, sizeof *m);
    if (m) m->block_params = calloc((size_t)(c->n_layers * RF_PARAMS_PER_LAYER), sizeof *m->block_params);
    if (!m || !m->block_params) {
        rf_free(m);
        qkv_error_set(QKV_ERR_NOMEM, "reformer_lm: out of memory");
        return NULL;
    }
    m->c = *c;
    const int64_t d = c->d_model, hd = c->n_heads * c->d_head;
    char pre[128], name[160];
    qkv_status st = qkv_nn_embedding_init(&m->embedding, params, "embedding", c->vocab, d, QKV_NN_NO_PADDING, false,
                                          rng);
    if (!st && c->axial[0]) {
        int64_t d0 = d / 2;
        m->axial0 = qkv_params_add(params, "pos", "axial0", QKV_DIMS(c->axial[0], d0));
        m->axial1 = qkv_params_add(params, "pos", "axial1", QKV_DIMS(c->axial[1], d - d0));
        if (!m->axial0 || !m->axial1) st = qkv_last_status();
        else {
            qkv_rng_fill_normal(rng, m->axial0, 0.0f, 1.0f);
            qkv_rng_fill_normal(rng, m->axial1, 0.0f, 1.0f);
        }
    } else if (!st) {
        m->pos = qkv_params_add(params, "pos", "weight", QKV_DIMS(c->n_ctx, d));
        if (!m->pos) st = qkv_last_status();
        else qkv_rng_fill_normal(rng, m->pos, 0.0f, 1.0f);
    }
    for (int l = 0; l < c->n_layers && !st; l++) {
        rf_attention *a = &m->attn[l];
        rf_feed_forward *f = &m->ff[l];
        a->m = f->m = m;
        a->layer = l;
        a->lsh = c->lsh[l];
        snprintf(pre, sizeof pre, "layers.%d.attn", l);
#define JOIN(sub) (qkv_params_join(name, sizeof name, pre, sub) ? NULL : name)
        st = qkv_nn_layer_norm_init(&a->norm, params, JOIN("norm"), d, 1e-5f, true);
        if (!st) st = qkv_nn_linear_init(&a->q, params, JOIN(a->lsh ? "qk" : "q"), d, hd, false, rng);
        if (!st && !a->lsh) st = qkv_nn_linear_init(&a->k, params, JOIN("k"), d, hd, false, rng);
        if (!st) st = qkv_nn_linear_init(&a->v, params, JOIN("v"), d, hd, false, rng);
        if (!st) st = qkv_nn_linear_init(&a->out, params, JOIN("out"), hd, d, true, rng);
        snprintf(pre, sizeof pre, "layers.%d.ff", l);
        if (!st) st = qkv_nn_layer_norm_init(&f->norm, params, JOIN("norm"), d, 1e-5f, true);
        if (!st) st = qkv_nn_linear_init(&f->w1, params, JOIN("w1"), d, c->d_ff, true, rng);
        if (!st) st = qkv_nn_linear_init(&f->w2, params, JOIN("w2"), c->d_ff, d, true, rng);
#undef JOIN
        if (st) break;
        qkv_tensor *ts[] = {a->norm.weight, a->norm.bias, a->q.weight, a->k.weight, a->v.weight, a->out.weight,
                            a->out.bias, f->norm.weight, f->norm.bias, f->w1.weight, f->w1.bias, f->w2.weight,
                            f->w2.bias};
        for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) add_block_param(m, ts[i]);
    }
    if (!st) st = qkv_nn_layer_norm_init(&m->norm, params, "norm", 2 * d, 1e-5f, true);
    if (!st) st = qkv_nn_linear_init(&m->head, params, "head", 2 * d, c->vocab, true, rng);
    if (st) {
        rf_free(m);
        return NULL;
    }
    return m;
}

/* ---- forward ---------------------------------------------------------------------------------------------------- */

/* The positions [P, d] of the first P places. */
static qkv_tensor *positions(qkv_ctx *ctx, const rf_model *m, int64_t P) {
    const rf_config *c = &m->c;
    if (!c->axial[0]) return qkv_slice(ctx, m->pos, 0, 0, P, 1);
    /* Axial: place i = (i / a1, i % a1) takes [axial0[i / a1] | axial1[i % a1]]. */
    const int64_t a0 = c->axial[0], a1 = c->axial[1], d0 = m->axial0->shape[1], d1 = m->axial1->shape[1];
    qkv_tensor *p0 = qkv_broadcast_to(ctx, qkv_reshape(ctx, m->axial0, QKV_DIMS(a0, 1, d0)), QKV_DIMS(a0, a1, d0));
    qkv_tensor *p1 = qkv_broadcast_to(ctx, qkv_reshape(ctx, m->axial1, QKV_DIMS(1, a1, d1)), QKV_DIMS(a0, a1, d1));
    qkv_tensor *all = qkv_concat(ctx, 2, (qkv_tensor *[]){p0, p1}, -1);
    return qkv_slice(ctx, qkv_reshape(ctx, all, QKV_DIMS(a0 * a1, c->d_model)), 0, 0, P, 1);
}

/* ids [B, T] int32 -> logits [B, T, V]. */
static qkv_tensor *rf_forward(qkv_ctx *ctx, const rf_model *m, qkv_tensor *ids) {
    if (!ids) return NULL;
    const rf_config *c = &m->c;
    if (ids->dtype != QKV_I32 || ids->ndim != 2) {
        qkv_error_set(QKV_ERR_INVALID, "reformer_lm: inputs must be int32 [batch, time]");
        return NULL;
    }
    const int64_t B = ids->shape[0], T = ids->shape[1];
    const int64_t L = c->any_lsh ? c->chunk_len : 1, P = (T + L - 1) / L * L;
    if (T < 1 || P > c->n_ctx) {
        qkv_error_set(QKV_ERR_RANGE, "reformer_lm: sequence of %lld tokens (%lld with padding to chunk_len) "
                      "outside 1..n_ctx %lld", (long long)T, (long long)P, (long long)c->n_ctx);
        return NULL;
    }
    qkv_tensor *in = ids;
    if (P != T) { /* pad at the end; causal attention hides it from every real position */
        in = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(B, P));
        if (!in) return NULL;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                qkv_i32(in)[b * P + t] = qkv_i32(ids)[b * ids->stride[0] + t * ids->stride[1]];
    }
    qkv_tensor *x = qkv_nn_embedding_forward(ctx, &m->embedding, in);
    x = qkv_dropout(ctx, qkv_add(ctx, x, positions(ctx, m, P)), c->dropout);
    x = qkv_concat(ctx, 2, (qkv_tensor *[]){x, x}, -1);
    qkv_nn_rev_block blocks[RF_MAX_LAYERS];
    for (int l = 0; l < c->n_layers; l++)
        blocks[l] = (qkv_nn_rev_block){attention_half, ff_half, (void *)&m->attn[l], (void *)&m->ff[l]};
    x = qkv_nn_reversible(ctx, x, (int)c->n_layers, blocks, m->n_block_params, m->block_params);
    qkv_tensor *logits = qkv_nn_linear_forward(ctx, &m->head, qkv_nn_layer_norm_forward(ctx, &m->norm, x));
    return P == T ? logits : qkv_slice(ctx, logits, 1, 0, T, 1);
}

/* ---- decoding -------------------------------------------------------------------------------------------------
 *
 * Uncached (decode_cache false): every step runs rf_forward over the whole history and keeps the last position.
 *
 * Cached (the default): a step runs the new position t alone: embedding + position t, then per block
 * y1 = x1 + Attention(x2), y2 = x2 + FeedForward(y1) on that one row, the attention reading per-layer caches of the
 * earlier positions, written as each position passes:
 *   - full layers: keys and values; the query attends causally to positions 0..t, exactly as the forward;
 *   - LSH layers: normalised keys k^, values and each position's bucket per round, hashed with the layer's eval
 *     rotations (hash_seed + layer) for the bucket count of the decoder's capacity (the forward draws them for its
 *     own padded length). Per round the query attends to the cached positions that share its bucket (Trax's
 *     predict mode: the stored hashes decide) and, beside them, to the last chunk_len positions; its own position
 *     carries the 1e5 self mask; rounds are combined by their log-sum-exp weights as in the forward.
 * The forward of a history of at most chunk_len positions lets every position see every earlier one (all items of
 * a round fit in one chunk and the one before it), and so does the cache: there the two decoders agree. Beyond one
 * chunk the forward's choice depends on later positions (they shift the sorted chunks), which no cache can
 * reproduce; the cached decoder then differs from the uncached one by its choice of keys, bucket mates plus a local
 * window, not by an approximation of the same sum. A step costs O(t d) per layer instead of a forward over t. */

typedef struct {
    const rf_model *m;
    int rows, cap;
    int64_t len, max_len;
    int32_t *hist, *moved; /* [cap, max_len] */
    qkv_ctx *ctx;
    bool cached;
    /* cached: per layer keys (LSH: k^) and values [cap, H, max_len, dh], LSH buckets [cap, H, max_len, n_hashes] */
    float *kc[RF_MAX_LAYERS], *vc[RF_MAX_LAYERS];
    int32_t *bc[RF_MAX_LAYERS];
    qkv_tensor *rot[RF_MAX_LAYERS]; /* LSH: [dh, n_hashes, rc] */
    int64_t rc, h1;
    float *work; /* [max_len + n_hashes * (rc + dh + 1) + dh] */
    void *spare; /* reorder scratch, the size of the largest cache array */
} rf_decoder;

static void rf_dec_free(qkv_decoder_state *st) {
    rf_decoder *d = (rf_decoder *)st;
    if (!d) return;
    free(d->hist);
    free(d->moved);
    for (int l = 0; l < RF_MAX_LAYERS; l++) {
        free(d->kc[l]);
        free(d->vc[l]);
        free(d->bc[l]);
        qkv_tensor_free(d->rot[l]);
    }
    free(d->work);
    free(d->spare);
    qkv_ctx_free(d->ctx);
    free(d);
}

static void rf_dec_info(const qkv_model *mm, qkv_decoder_info *out) {
    const rf_model *m = (const rf_model *)mm;
    *out = (qkv_decoder_info){.vocab = m->c.vocab, .capacity = m->c.n_ctx, .log_probs = false,
                              .start_token = m->c.shift_right ? m->c.start_id : -1};
}

/* The caches of a cached decoder; false (error set) when out of memory. */
static bool alloc_caches(rf_decoder *d) {
    const rf_config *c = &d->m->c;
    const size_t n = (size_t)d->cap * (size_t)(c->n_heads * d->max_len * c->d_head);
    const size_t nbk = (size_t)d->cap * (size_t)(c->n_heads * d->max_len * c->n_hashes);
    const int64_t L = c->chunk_len, P = (d->max_len + L - 1) / L * L;
    int n1 = 0, n2 = 0, cols = c->any_lsh ? lsh_buckets(c, P, &n1, &n2) : 2;
    d->rc = cols / 2;
    d->h1 = n1 / 2;
    for (int l = 0; l < c->n_layers; l++) {
        d->kc[l] = malloc(sizeof(float) * n);
        d->vc[l] = malloc(sizeof(float) * n);
        if (!d->kc[l] || !d->vc[l]) return false;
        if (!c->lsh[l]) continue;
        d->bc[l] = malloc(sizeof(int32_t) * nbk);
        d->rot[l] = qkv_tensor_new(QKV_F32, QKV_DIMS(c->d_head, c->n_hashes, d->rc));
        if (!d->bc[l] || !d->rot[l]) return false;
        qkv_rng rng; /* the rotations attention_half draws in eval mode */
        qkv_rng_init(&rng, c->hash_seed + (uint64_t)l);
        qkv_rng_fill_normal(&rng, d->rot[l], 0.0f, 1.0f);
    }
    d->work = malloc(sizeof(float) * (size_t)(d->max_len + c->n_hashes * (d->rc + c->d_head + 1) + c->d_head));
    d->spare = malloc(sizeof(float) * n > sizeof(int32_t) * nbk ? sizeof(float) * n : sizeof(int32_t) * nbk);
    return d->work && d->spare;
}

static qkv_decoder_state *rf_dec_start(const qkv_model *mm, const int32_t *src, const int32_t *lengths, int n_src,
                                       int src_len, int rows_per_src, int max_steps) {
    const rf_model *m = (const rf_model *)mm;
    if (src || lengths || src_len != 0 || n_src < 1 || rows_per_src < 1 || max_steps < 0) {
        qkv_error_set(QKV_ERR_INVALID, "reformer_lm decoder: takes no source and needs >= 1 rows (got %d x %d rows, "
                      "source length %d, %d steps)", n_src, rows_per_src, src_len, max_steps);
        return NULL;
    }
    rf_decoder *d = calloc(1, sizeof *d);
    int64_t n = max_steps > 0 && max_steps < m->c.n_ctx ? max_steps : m->c.n_ctx;
    int rows = n_src * rows_per_src;
    if (d) {
        d->m = m;
        d->rows = d->cap = rows;
        d->max_len = n;
        d->cached = m->c.decode_cache;
        d->hist = malloc(sizeof(int32_t) * (size_t)(rows * n));
        d->moved = malloc(sizeof(int32_t) * (size_t)(rows * n));
        d->ctx = qkv_ctx_new();
    }
    if (!d || !d->hist || !d->moved || !d->ctx || (d->cached && !alloc_caches(d))) {
        rf_dec_free((qkv_decoder_state *)d);
        qkv_error_set(QKV_ERR_NOMEM, "reformer_lm decoder: out of memory");
        return NULL;
    }
    qkv_ctx_set_grad(d->ctx, false);
    qkv_ctx_set_training(d->ctx, false);
    return (qkv_decoder_state *)d;
}

static float dot(const float *a, const float *b, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Softmax over s[0..n) in place (skipping entries at -INFINITY); returns the log-sum-exp. */
static float softmax_lse(float *s, int64_t n) {
    float mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    for (int64_t j = 0; j < n; j++) sum += s[j] = s[j] == -INFINITY ? 0.0f : expf(s[j] - mx);
    for (int64_t j = 0; j < n; j++) s[j] /= sum;
    return mx + logf(sum);
}

/* The attention of position t for layer l: x2 [R, 1, d] -> [R, 1, d] (output projection included), caching this
 * position's keys, values and buckets. */
static qkv_tensor *cached_attention(rf_decoder *d, int l, qkv_tensor *x2, int64_t t) {
    const rf_attention *a = &d->m->attn[l];
    const rf_config *c = &d->m->c;
    qkv_ctx *ctx = d->ctx;
    const int64_t R = d->rows, H = c->n_heads, dh = c->d_head, E = H * dh, N = d->max_len, nh = c->n_hashes;
    const int64_t L = c->chunk_len, rc = d->rc, cols = nh * rc;
    const float scale = 1.0f / sqrtf((float)dh);
    qkv_tensor *h = qkv_nn_layer_norm_forward(ctx, &a->norm, x2);
    qkv_tensor *q = qkv_contiguous(ctx, qkv_nn_linear_forward(ctx, &a->q, h));
    qkv_tensor *k = a->lsh ? NULL : qkv_contiguous(ctx, qkv_nn_linear_forward(ctx, &a->k, h));
    qkv_tensor *v = qkv_contiguous(ctx, qkv_nn_linear_forward(ctx, &a->v, h));
    qkv_tensor *o = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(R, 1, E));
    if (!q || (!a->lsh && !k) || !v || !o) return NULL;
    const float *qd = qkv_f32(q), *kd = k ? qkv_f32(k) : NULL, *vd = qkv_f32(v);
    float *od0 = qkv_f32(o);
    float *s = d->work, *xr = s + N, *orr = xr + cols, *lse = orr + nh * dh;
    for (int64_t r = 0; r < R; r++)
        for (int64_t hd = 0; hd < H; hd++) {
            const float *qv = qd + r * E + hd * dh;
            float *K = d->kc[l] + (r * H + hd) * N * dh, *V = d->vc[l] + (r * H + hd) * N * dh;
            float *out = od0 + r * E + hd * dh;
            memcpy(V + t * dh, vd + r * E + hd * dh, sizeof(float) * (size_t)dh);
            if (!a->lsh) {
                memcpy(K + t * dh, kd + r * E + hd * dh, sizeof(float) * (size_t)dh);
                for (int64_t j = 0; j <= t; j++) s[j] = scale * dot(qv, K + j * dh, dh);
                softmax_lse(s, t + 1);
                memset(out, 0, sizeof(float) * (size_t)dh);
                for (int64_t j = 0; j <= t; j++)
                    for (int64_t e = 0; e < dh; e++) out[e] += s[j] * V[j * dh + e];
                continue;
            }
            /* k^ = k / sqrt(mean(k^2) + 1e-6), the bucket of each round, then one attention per round. */
            const float rho = 1.0f / sqrtf(dot(qv, qv, dh) / (float)dh + 1e-6f);
            for (int64_t e = 0; e < dh; e++) K[t * dh + e] = qv[e] * rho;
            const float *rot = qkv_f32(d->rot[l]);
            for (int64_t j = 0; j < cols; j++) {
                float acc = 0;
                for (int64_t e = 0; e < dh; e++) acc += qv[e] * rot[e * cols + j];
                xr[j] = acc;
            }
            int32_t *bk = d->bc[l] + (r * H + hd) * N * nh;
            for (int64_t rd = 0; rd < nh; rd++) bk[t * nh + rd] = (int32_t)qkv__lsh_bucket(xr + rd * rc, rc, d->h1);
            for (int64_t rd = 0; rd < nh; rd++) {
                for (int64_t j = 0; j <= t; j++)
                    s[j] = t - j < L || bk[j * nh + rd] == bk[t * nh + rd]
                               ? scale * dot(qv, K + j * dh, dh) - (j == t ? 1e5f : 0.0f)
                               : -INFINITY;
                lse[rd] = softmax_lse(s, t + 1);
                float *od = orr + rd * dh;
                memset(od, 0, sizeof(float) * (size_t)dh);
                for (int64_t j = 0; j <= t; j++)
                    if (s[j] != 0.0f)
                        for (int64_t e = 0; e < dh; e++) od[e] += s[j] * V[j * dh + e];
            }
            float mx = -INFINITY, sum = 0;
            for (int64_t rd = 0; rd < nh; rd++) mx = fmaxf(mx, lse[rd]);
            for (int64_t rd = 0; rd < nh; rd++) sum += expf(lse[rd] - mx);
            const float total = mx + logf(sum);
            memset(out, 0, sizeof(float) * (size_t)dh);
            for (int64_t rd = 0; rd < nh; rd++) {
                const float w = expf(lse[rd] - total);
                for (int64_t e = 0; e < dh; e++) out[e] += w * orr[rd * dh + e];
            }
        }
    return qkv_nn_linear_forward(ctx, &a->out, o);
}

/* Logits [R, 1, V] of position t = len - 1 from the caches. */
static qkv_tensor *cached_step(rf_decoder *d, const int32_t *tokens) {
    const rf_model *m = d->m;
    qkv_ctx *ctx = d->ctx;
    const int64_t R = d->rows, t = d->len - 1;
    qkv_tensor *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(R, 1));
    if (!ids) return NULL;
    memcpy(qkv_i32(ids), tokens, sizeof(int32_t) * (size_t)R);
    qkv_tensor *x = qkv_nn_embedding_forward(ctx, &m->embedding, ids);
    x = qkv_add(ctx, x, qkv_slice(ctx, positions(ctx, m, t + 1), 0, t, t + 1, 1));
    qkv_tensor *x1 = x, *x2 = x;
    for (int l = 0; l < m->c.n_layers && x1 && x2; l++) {
        x1 = qkv_add(ctx, x1, cached_attention(d, l, x2, t));
        x2 = qkv_add(ctx, x2, x1 ? ff_rows(ctx, x1, (void *)&m->ff[l]) : NULL);
    }
    if (!x1 || !x2) return NULL;
    x = qkv_concat(ctx, 2, (qkv_tensor *[]){x1, x2}, -1);
    return qkv_contiguous(ctx, qkv_nn_linear_forward(ctx, &m->head, qkv_nn_layer_norm_forward(ctx, &m->norm, x)));
}

static qkv_status rf_dec_step(qkv_decoder_state *st, const int32_t *tokens, float *scores, float *attn) {
    (void)attn;
    rf_decoder *d = (rf_decoder *)st;
    const int64_t V = d->m->c.vocab, R = d->rows;
    if (d->len >= d->max_len)
        return qkv_error_set(QKV_ERR_RANGE, "reformer_lm decoder: the context of %lld tokens is full",
                             (long long)d->max_len);
    for (int64_t r = 0; r < R; r++) {
        if (tokens[r] < 0 || tokens[r] >= V)
            return qkv_error_set(QKV_ERR_RANGE, "reformer_lm decoder: token %d outside [0, %lld)", (int)tokens[r],
                                 (long long)V);
        d->hist[r * d->max_len + d->len] = tokens[r];
    }
    const int64_t T = ++d->len;
    qkv_ctx_reset(d->ctx);
    qkv_tensor *y;
    if (d->cached) {
        y = cached_step(d, tokens);
    } else {
        qkv_tensor *ids = qkv_ctx_tensor(d->ctx, QKV_I32, QKV_DIMS(R, T));
        if (!ids) return qkv_last_status();
        for (int64_t r = 0; r < R; r++)
            memcpy(qkv_i32(ids) + r * T, d->hist + r * d->max_len, sizeof(int32_t) * (size_t)T);
        y = qkv_contiguous(d->ctx, qkv_slice(d->ctx, rf_forward(d->ctx, d->m, ids), 1, T - 1, T, 1));
    }
    if (!y) {
        d->len--; /* the step did not happen */
        return qkv_last_status();
    }
    memcpy(scores, y->data, sizeof(float) * (size_t)(R * V));
    return QKV_OK;
}

/* Rows of a [cap, per] array reordered by from[0..n) through the spare buffer. */
static void reorder_rows(void *base, void *spare, size_t per, const int32_t *from, int n) {
    for (int r = 0; r < n; r++) memcpy((char *)spare + r * per, (const char *)base + (size_t)from[r] * per, per);
    memcpy(base, spare, per * (size_t)n);
}

static qkv_status rf_dec_reorder(qkv_decoder_state *st, const int32_t *from, int n_rows) {
    rf_decoder *d = (rf_decoder *)st;
    if (n_rows < 1 || n_rows > d->cap)
        return qkv_error_set(QKV_ERR_RANGE, "reformer_lm decoder: reorder to %d rows (the state holds 1..%d)",
                             n_rows, d->cap);
    for (int r = 0; r < n_rows; r++)
        if (from[r] < 0 || from[r] >= d->rows)
            return qkv_error_set(QKV_ERR_RANGE, "reformer_lm decoder: reorder row %d outside [0, %d)", (int)from[r],
                                 d->rows);
    for (int r = 0; r < n_rows; r++)
        memcpy(d->moved + r * d->max_len, d->hist + from[r] * d->max_len, sizeof(int32_t) * (size_t)d->len);
    memcpy(d->hist, d->moved, sizeof(int32_t) * (size_t)(n_rows * d->max_len));
    if (d->cached) {
        const rf_config *c = &d->m->c;
        const size_t per = sizeof(float) * (size_t)(c->n_heads * d->max_len * c->d_head);
        const size_t perb = sizeof(int32_t) * (size_t)(c->n_heads * d->max_len * c->n_hashes);
        for (int l = 0; l < c->n_layers; l++) {
            reorder_rows(d->kc[l], d->spare, per, from, n_rows);
            reorder_rows(d->vc[l], d->spare, per, from, n_rows);
            if (d->bc[l]) reorder_rows(d->bc[l], d->spare, perb, from, n_rows);
        }
    }
    d->rows = n_rows;
    return QKV_OK;
}

static const qkv_decoder_ops rf_decoder_ops = {
    .info = rf_dec_info, .start = rf_dec_start, .step = rf_dec_step, .reorder = rf_dec_reorder, .free = rf_dec_free};

/* ---- the model type ---------------------------------------------------------------------------------------- */

typedef qkv_reformer_opts rf_opts;

static const qkv_field fields[] = {
    QKV_FIELD_INT(rf_opts, d_model, "d_model", 256, 1, 1 << 16, "width of each of the two residual streams"),
    QKV_FIELD_INT(rf_opts, n_layers, "n_layers", 2, 1, RF_MAX_LAYERS, "reversible blocks"),
    QKV_FIELD_INT(rf_opts, n_heads, "n_heads", 2, 1, 1024, "attention heads"),
    QKV_FIELD_INT(rf_opts, d_head, "d_head", 64, 1, 1 << 14, "width of a head's queries, keys and values"),
    QKV_FIELD_INT(rf_opts, d_ff, "d_ff", 512, 1, 1 << 20, "inner width of the feed-forward"),
    QKV_FIELD_INT(rf_opts, n_ctx, "n_ctx", 0, 0, 1 << 24,
                  "positions; 0: the data's longest sequence rounded up to chunk_len (else 2048)"),
    QKV_FIELD_STR(rf_opts, attention, "attention", "lsh", 0,
                  "attention per layer, a comma list of lsh|full repeated over the layers (\"full,lsh\")"),
    QKV_FIELD_INT(rf_opts, chunk_len, "chunk_len", 64, 1, 1 << 16, "LSH: sorted tokens per chunk"),
    QKV_FIELD_INT(rf_opts, n_hashes, "n_hashes", 1, 1, 64, "LSH: hash rounds"),
    QKV_FIELD_INT(rf_opts, n_buckets, "n_buckets", 0, 0, 1 << 20, "LSH: buckets per round (even); 0: 2 T / chunk_len"),
    QKV_FIELD_INT(rf_opts, bucket_factor, "bucket_factor", 0, 0, 1 << 20,
                  "LSH: n1 of factorized buckets n1 x n2 (Trax's n_buckets = [n1, n2], n2 = n_buckets / n1 rounded "
                  "up to even); 0: automatic (factorize_above)"),
    QKV_FIELD_INT(rf_opts, factorize_above, "factorize_above", QKV_LSH_FACTORIZE_ABOVE, -1, 1 << 20,
                  "LSH: factorize the hash when n_buckets exceeds this (cost O(n1 + n2) not O(n1 n2)); -1: never"),
    QKV_FIELD_INT(rf_opts, hash_seed, "hash_seed", 1234, 0, 1 << 30, "LSH: seed of the rotations in eval mode"),
    QKV_FIELD_CHOICE(rf_opts, positions, "positions", "learned", "learned|axial", "position embeddings"),
    QKV_FIELD_STR(rf_opts, axial_shape, "axial_shape", "", 0,
                  "axial positions: \"A,B\" with A * B = n_ctx; \"\": the most square split"),
    QKV_FIELD_INT(rf_opts, ff_chunk, "ff_chunk", 0, 0, 1 << 30, "rows per feed-forward chunk; 0: all at once"),
    QKV_FIELD_NUM(rf_opts, dropout, "dropout", 0.0, 0, 1, QKV_FIELD_HI_OPEN, "dropout after embeddings and blocks"),
    QKV_FIELD_BOOL(rf_opts, shift_right, "shift_right", true,
                   "the model reads its targets shifted right (start id first), as Trax's ShiftRight"),
    QKV_FIELD_BOOL(rf_opts, decode_cache, "decode_cache", true,
                   "decoding keeps per-layer key/value (and LSH bucket) caches; false: recompute the history each "
                   "step (docs/reformer.md)"),
    QKV_FIELD_INT(rf_opts, start_id, "start_id", 0, 0, 1 << 30, "id fed at the first position by shift_right"),
};

/* The attention pattern into lsh[0..n), repeated; false (error set) on a bad word. */
static bool parse_pattern(const char *s, int64_t n, bool *lsh, bool *any) {
    bool kinds[RF_MAX_LAYERS];
    int k = 0;
    *any = false;
    for (const char *p = s; *p && k < RF_MAX_LAYERS;) {
        size_t len = strcspn(p, ",");
        while (len && p[len - 1] == ' ') len--;
        if (len == 3 && !strncmp(p, "lsh", 3)) kinds[k++] = true;
        else if (len == 4 && !strncmp(p, "full", 4)) kinds[k++] = false;
        else {
            qkv_error_set(QKV_ERR_INVALID, "model.attention \"%s\": expected a comma list of lsh|full", s);
            return false;
        }
        p += strcspn(p, ",");
        if (*p == ',') p++;
        while (*p == ' ') p++;
    }
    if (!k) {
        qkv_error_set(QKV_ERR_INVALID, "model.attention \"%s\": expected a comma list of lsh|full", s);
        return false;
    }
    for (int64_t l = 0; l < n; l++) {
        if (lsh) lsh[l] = kinds[l % k];
        *any |= kinds[l % k];
    }
    return true;
}

static qkv_status check_opts(const void *p) {
    const rf_opts *o = p;
    bool any;
    if (!parse_pattern(o->attention, o->n_layers, NULL, &any)) return qkv_last_status();
    if (o->bucket_factor % 2)
        return qkv_error_set(QKV_ERR_INVALID, "model.bucket_factor %lld must be even (or 0)",
                             (long long)o->bucket_factor);
    if (o->n_buckets % 2)
        return qkv_error_set(QKV_ERR_INVALID, "model.n_buckets %lld must be even (or 0)", (long long)o->n_buckets);
    if (any && o->n_ctx && o->n_ctx % o->chunk_len)
        return qkv_error_set(QKV_ERR_INVALID, "model.n_ctx %lld must be a multiple of model.chunk_len %lld",
                             (long long)o->n_ctx, (long long)o->chunk_len);
    return QKV_OK;
}

static const qkv_schema schema = QKV_SCHEMA("model", rf_opts, fields, check_opts);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

/* "A,B" or "" (the most square split of n) into a[2]. */
static bool axial_split(const char *s, int64_t n, int64_t *a) {
    if (s && *s) {
        long long x, y;
        if (sscanf(s, "%lld,%lld", &x, &y) != 2 || x < 1 || y < 1 || x * y != n) {
            qkv_error_set(QKV_ERR_INVALID, "model.axial_shape \"%s\": expected \"A,B\" with A * B = n_ctx %lld", s,
                          (long long)n);
            return false;
        }
        a[0] = x, a[1] = y;
        return true;
    }
    int64_t best = 1;
    for (int64_t f = 1; f * f <= n; f++)
        if (n % f == 0) best = f;
    a[0] = best, a[1] = n / best;
    return true;
}

static qkv_model *reformer_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    rf_opts o;
    if (qkv_model_config(&schema, cfg, &o)) return NULL;
    rf_config c = {.vocab = info ? info->vocab_size : 0, .d_model = o.d_model, .n_heads = o.n_heads,
                   .d_head = o.d_head, .d_ff = o.d_ff, .n_layers = o.n_layers, .chunk_len = o.chunk_len,
                   .n_hashes = o.n_hashes, .n_buckets = o.n_buckets, .ff_chunk = o.ff_chunk,
                   .dropout = (float)o.dropout, .shift_right = o.shift_right, .start_id = (int32_t)o.start_id,
                   .hash_seed = (uint64_t)o.hash_seed, .bucket_factor = o.bucket_factor,
                   .factorize_above = o.factorize_above, .decode_cache = o.decode_cache};
    if (!parse_pattern(o.attention, o.n_layers, c.lsh, &c.any_lsh)) return NULL;
    const int64_t L = c.any_lsh ? c.chunk_len : 1;
    int64_t n = o.n_ctx ? o.n_ctx : info && info->max_len > 0 ? info->max_len : 2048;
    c.n_ctx = (n + L - 1) / L * L;
    if (c.vocab < 1) {
        qkv_error_set(QKV_ERR_INVALID, "reformer_lm: vocabulary size %lld < 1", (long long)c.vocab);
        return NULL;
    }
    if (c.start_id >= c.vocab) {
        qkv_error_set(QKV_ERR_INVALID, "model.start_id %d outside the vocabulary [0, %lld)", (int)c.start_id,
                      (long long)c.vocab);
        return NULL;
    }
    if (!strcmp(o.positions, "axial") && !axial_split(o.axial_shape, c.n_ctx, c.axial)) return NULL;
    return (qkv_model *)rf_new(&c, params, rng);
}

static void reformer_free(qkv_model *m) { rf_free((rf_model *)m); }

static void reformer_info(const qkv_model *m, qkv_model_info *out) { out->max_positions = ((const rf_model *)m)->c.n_ctx; }

static qkv_tensor *model_inputs(qkv_ctx *ctx, const rf_model *m, const qkv_batch *b) {
    if (!m->c.shift_right) return b->ids;
    if (!b->targets) {
        qkv_error_set(QKV_ERR_INVALID, "reformer_lm: the batch has no targets to shift right");
        return NULL;
    }
    return qkv_nn_shift_right(ctx, b->targets, (float)m->c.start_id);
}

static qkv_tensor *reformer_fwd(qkv_ctx *ctx, qkv_model *mm, const qkv_batch *b, qkv_attention_maps *maps) {
    if (maps) memset(maps, 0, sizeof *maps);
    const rf_model *m = (const rf_model *)mm;
    return rf_forward(ctx, m, model_inputs(ctx, m, b));
}

static qkv_tensor *reformer_loss(qkv_ctx *ctx, qkv_model *mm, const qkv_batch *b) {
    const rf_model *m = (const rf_model *)mm;
    if (!b->targets) {
        qkv_error_set(QKV_ERR_INVALID, "reformer_lm: the batch has no targets");
        return NULL;
    }
    qkv_tensor *logits = rf_forward(ctx, m, model_inputs(ctx, m, b));
    qkv_ce_opts o = qkv_ce_defaults();
    o.token_weight = qkv__model_loss_weights(ctx, b, "reformer_lm");
    if ((b->mask || b->weights) && !o.token_weight) return NULL;
    return qkv_cross_entropy(ctx, logits, b->targets, &o);
}

static const qkv_model_embedding embeddings[] = {{"embedding.weight", "input", NULL}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_reformer_lm = {
    .name = "reformer_lm",
    .task = "lm",
    .summary = "Reformer LM (Trax's ReformerLM): reversible blocks of causal LSH or full attention, chunked "
               "feed-forward, axial positions",
    .config = &schema,
    .default_config = defaults_json,
    .create = reformer_create,
    .free = reformer_free,
    .loss = reformer_loss,
    .forward = reformer_fwd,
    .embeddings = embeddings,
    .decoder = &rf_decoder_ops,
    .info = reformer_info,
};

/* ---- the public options (qkv/reformer.h) --------------------------------------------------------------------- */

qkv_reformer_opts qkv_reformer_defaults(void) {
    qkv_reformer_opts o;
    qkv_schema_defaults(&schema, &o);
    return o;
}

cJSON *qkv_reformer_config(const qkv_reformer_opts *o) {
    cJSON *obj = cJSON_CreateObject();
    for (int i = 0; obj && i < schema.n_fields; i++) {
        const qkv_field *f = &schema.fields[i];
        const char *at = (const char *)o + f->offset;
        cJSON *v = NULL;
        switch (f->type) {
        case QKV_FIELD_T_INT: v = cJSON_CreateNumber((double)*(const int64_t *)at); break;
        case QKV_FIELD_T_NUM: v = cJSON_CreateNumber(*(const double *)at); break;
        case QKV_FIELD_T_BOOL: v = cJSON_CreateBool(*(const bool *)at); break;
        case QKV_FIELD_T_STR:
        case QKV_FIELD_T_CHOICE: v = *(const char *const *)at ? cJSON_CreateString(*(const char *const *)at) : NULL;
            break;
        case QKV_FIELD_T_LIST: /* the reformer schema has no lists */
            v = *(const cJSON *const *)at ? cJSON_Duplicate(*(const cJSON *const *)at, true) : NULL;
            break;
        }
        if (v && (qkv_schema_check_value(&schema, f->key, v) != QKV_OK || !cJSON_AddItemToObject(obj, f->key, v))) {
            cJSON_Delete(v);
            cJSON_Delete(obj);
            return NULL;
        }
    }
    rf_opts filled;
    if (obj && qkv_model_config(&schema, obj, &filled) != QKV_OK) {
        cJSON_Delete(obj);
        return NULL;
    }
    if (!obj && !qkv_last_status()) qkv_error_set(QKV_ERR_NOMEM, "reformer config: out of memory");
    return obj;
}

const qkv_model_type *qkv_reformer_model_type(void) { return &qkv_model_reformer_lm; }
