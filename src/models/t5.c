/* The "t5" model type: T5's text-to-text encoder-decoder (Raffel et al. 2020; Hugging Face's T5ForConditionalGeneration
 * with its defaults), built from nn's Linear and Embedding layers and the ops relative_position_bias, rms_norm and
 * sdpa (with its additive bias):
 *
 *   - one embedding "shared.weight" for source, target and output (tied), no embedding scale, no positions table;
 *   - relative position bias instead of positions: a table [num_buckets, H] in the first layer of each stack
 *     (encoder bidirectional, decoder causal buckets), its bias added to the attention logits of every layer;
 *   - pre-norm blocks with RMS norm (T5LayerNorm, eps 1e-6, weight only), a final RMS norm per stack;
 *   - no biases in any dense layer, unscaled attention logits (T5 folds 1/sqrt(d_kv) into the query's init), ReLU
 *     feed-forward;
 *   - the decoder output times d_model^-0.5, then the tied embedding as output projection.
 *
 * Parameter names are Hugging Face's T5 state_dict keys (encoder.block.<i>.layer.0.SelfAttention.q.weight, ...), and
 * so is the initialisation (_init_weights with factor 1). Dropout (one p) on the embeddings, each sublayer's output,
 * the feed-forward hidden layer, the attention weights and the final norms' outputs, as Hugging Face's.
 *
 * Vocabularies: source and target share the embedding; when a task's target vocabulary differs in size the table
 * has max(V_src, V_tgt) rows and the output scores the first V_tgt. Span corruption's sentinels are the top ids.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/attention.h"
#include "qkv/error.h"
#include "qkv/init.h"
#include "qkv/nn_transformer.h"
#include "qkv/ops.h"
#include "qkv/schema.h"
#include "core/internal.h"
#include "ops/gemm_packed.h"
#include "seq2seq_internal.h"
#include "seq2seq_state.h"

#define T5_EPS 1e-6f

typedef struct t5_config {
    int64_t src_vocab, tgt_vocab, d_model, d_kv, n_heads, d_ff, max_len;
    int n_enc, n_dec, num_buckets, max_distance;
    float dropout;
} t5_config;

typedef struct t5_attn {
    qkv_nn_linear q, k, v, o;
} t5_attn;

/* One block: layer.0 self-attention, (decoder) layer.1 cross-attention, then the feed-forward layer; ln[i] is the
 * RMS norm weight before sublayer i. */
typedef struct t5_block {
    t5_attn self, cross;
    qkv_nn_linear wi, wo;
    qkv_tensor *ln[3];
} t5_block;

typedef struct t5_model {
    t5_config cfg;
    qkv_tensor *shared;           /* [max(V_src, V_tgt), d] */
    qkv_tensor *enc_rel, *dec_rel; /* [num_buckets, H] */
    t5_block enc[QKV_NN_MAX_LAYERS], dec[QKV_NN_MAX_LAYERS];
    qkv_tensor *enc_norm, *dec_norm;
} t5_model;

/* ---- building ---- */

static qkv_status add_norm(qkv_params *p, const char *prefix, int64_t d, qkv_tensor **w) {
    *w = qkv_params_add(p, prefix, "weight", 1, &d);
    return *w ? qkv_init_constant(*w, 1.0f) : qkv_last_status();
}

/* A bias-free Linear drawn from N(0, std) (Hugging Face's T5 init). */
static qkv_status add_dense(qkv_nn_linear *l, qkv_params *p, const char *prefix, int64_t in, int64_t out, float std,
                            qkv_rng *rng) {
    qkv_status st = qkv_nn_linear_init(l, p, prefix, in, out, false, rng);
    return st ? st : qkv_init_normal(l->weight, 0.0f, std, rng);
}

static qkv_status add_attn(t5_attn *a, qkv_params *p, const char *prefix, const t5_config *c, qkv_rng *rng) {
    char k[160];
    const int64_t d = c->d_model, inner = c->n_heads * c->d_kv;
    qkv_status st;
    if ((st = qkv_params_join(k, sizeof k, prefix, "q")) ||
        (st = add_dense(&a->q, p, k, d, inner, 1.0f / sqrtf((float)(d * c->d_kv)), rng)) ||
        (st = qkv_params_join(k, sizeof k, prefix, "k")) ||
        (st = add_dense(&a->k, p, k, d, inner, 1.0f / sqrtf((float)d), rng)) ||
        (st = qkv_params_join(k, sizeof k, prefix, "v")) ||
        (st = add_dense(&a->v, p, k, d, inner, 1.0f / sqrtf((float)d), rng)) ||
        (st = qkv_params_join(k, sizeof k, prefix, "o")) ||
        (st = add_dense(&a->o, p, k, inner, d, 1.0f / sqrtf((float)inner), rng)))
        return st;
    return QKV_OK;
}

static qkv_status add_block(t5_block *b, qkv_params *p, const char *stack, int i, bool decoder, const t5_config *c,
                            qkv_tensor **rel, qkv_rng *rng) {
    char k[160];
    const int64_t d = c->d_model;
    qkv_status st;
    snprintf(k, sizeof k, "%s.block.%d.layer.0.SelfAttention", stack, i);
    if ((st = add_attn(&b->self, p, k, c, rng))) return st;
    if (i == 0) {
        int64_t shape[2] = {c->num_buckets, c->n_heads};
        *rel = qkv_params_add(p, k, "relative_attention_bias.weight", 2, shape);
        if (!*rel || (st = qkv_init_normal(*rel, 0.0f, 1.0f / sqrtf((float)d), rng))) return qkv_last_status();
    }
    snprintf(k, sizeof k, "%s.block.%d.layer.0.layer_norm", stack, i);
    if ((st = add_norm(p, k, d, &b->ln[0]))) return st;
    int ff = 1;
    if (decoder) {
        snprintf(k, sizeof k, "%s.block.%d.layer.1.EncDecAttention", stack, i);
        if ((st = add_attn(&b->cross, p, k, c, rng))) return st;
        snprintf(k, sizeof k, "%s.block.%d.layer.1.layer_norm", stack, i);
        if ((st = add_norm(p, k, d, &b->ln[1]))) return st;
        ff = 2;
    }
    snprintf(k, sizeof k, "%s.block.%d.layer.%d.DenseReluDense.wi", stack, i, ff);
    if ((st = add_dense(&b->wi, p, k, d, c->d_ff, 1.0f / sqrtf((float)d), rng))) return st;
    snprintf(k, sizeof k, "%s.block.%d.layer.%d.DenseReluDense.wo", stack, i, ff);
    if ((st = add_dense(&b->wo, p, k, c->d_ff, d, 1.0f / sqrtf((float)c->d_ff), rng))) return st;
    snprintf(k, sizeof k, "%s.block.%d.layer.%d.layer_norm", stack, i, ff);
    return add_norm(p, k, d, &b->ln[decoder ? 2 : 1]);
}

static qkv_status t5_init(t5_model *m, qkv_params *p, const t5_config *c, qkv_rng *rng) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    int64_t V = c->src_vocab > c->tgt_vocab ? c->src_vocab : c->tgt_vocab, shape[2] = {V, c->d_model};
    m->shared = qkv_params_add(p, "shared", "weight", 2, shape);
    qkv_status st;
    if (!m->shared || (st = qkv_init_normal(m->shared, 0.0f, 1.0f, rng))) return qkv_last_status();
    for (int i = 0; i < c->n_enc; i++)
        if ((st = add_block(&m->enc[i], p, "encoder", i, false, c, &m->enc_rel, rng))) return st;
    for (int i = 0; i < c->n_dec; i++)
        if ((st = add_block(&m->dec[i], p, "decoder", i, true, c, &m->dec_rel, rng))) return st;
    if ((st = add_norm(p, "encoder.final_layer_norm", c->d_model, &m->enc_norm)) ||
        (st = add_norm(p, "decoder.final_layer_norm", c->d_model, &m->dec_norm)))
        return st;
    return QKV_OK;
}

/* ---- forward ---- */

/* [B, T, H*dk] -> [B, H, T, dk] (a view). */
static qkv_tensor *heads(qkv_ctx *ctx, qkv_tensor *x, int64_t H) {
    if (!x) return NULL;
    int64_t B = x->shape[0], T = x->shape[1], inner = x->shape[2];
    return qkv_permute(ctx, qkv_reshape(ctx, x, QKV_DIMS(B, T, H, inner / H)), (const int[]){0, 2, 1, 3});
}

/* [B, H, T, dk] -> [B, T, H*dk]. */
static qkv_tensor *merge(qkv_ctx *ctx, qkv_tensor *o) {
    if (!o) return NULL;
    int64_t B = o->shape[0], H = o->shape[1], T = o->shape[2], dk = o->shape[3];
    return qkv_reshape(ctx, qkv_contiguous(ctx, qkv_permute(ctx, o, (const int[]){0, 2, 1, 3})), QKV_DIMS(B, T, H * dk));
}

/* T5Attention on x (queries) and kv (keys and values): o(softmax(q k^T + bias + masks) v), logits unscaled. */
static qkv_tensor *attend(qkv_ctx *ctx, const t5_model *m, const t5_attn *a, qkv_tensor *x, qkv_tensor *kv,
                          qkv_tensor *bias, bool causal, const qkv_tensor *pad, qkv_tensor **weights) {
    const int64_t H = m->cfg.n_heads;
    qkv_sdpa_opts o = qkv_sdpa_defaults();
    o.scale = 1.0f;
    o.bias = bias;
    o.causal = causal;
    o.key_padding = pad;
    o.dropout = m->cfg.dropout;
    o.weights = weights;
    qkv_tensor *q = heads(ctx, qkv_nn_linear_forward(ctx, &a->q, x), H);
    qkv_tensor *k = heads(ctx, qkv_nn_linear_forward(ctx, &a->k, kv), H);
    qkv_tensor *v = heads(ctx, qkv_nn_linear_forward(ctx, &a->v, kv), H);
    if (!q || !k || !v) return NULL;
    return qkv_nn_linear_forward(ctx, &a->o, merge(ctx, qkv_sdpa(ctx, q, k, v, &o)));
}

static qkv_tensor *feed_forward(qkv_ctx *ctx, const t5_model *m, const t5_block *b, qkv_tensor *x) {
    qkv_tensor *h = qkv_dropout(ctx, qkv_relu(ctx, qkv_nn_linear_forward(ctx, &b->wi, x)), m->cfg.dropout);
    return qkv_nn_linear_forward(ctx, &b->wo, h);
}

/* x + dropout(sublayer output). */
static qkv_tensor *residual(qkv_ctx *ctx, const t5_model *m, qkv_tensor *x, qkv_tensor *y) {
    return qkv_add(ctx, x, qkv_dropout(ctx, y, m->cfg.dropout));
}

static qkv_tensor *embed(qkv_ctx *ctx, const t5_model *m, qkv_tensor *ids) {
    qkv_tensor *flat = qkv_reshape(ctx, ids, QKV_DIMS(-1));
    qkv_tensor *e = qkv_index_select(ctx, m->shared, 0, flat);
    if (!e) return NULL;
    return qkv_dropout(ctx, qkv_reshape(ctx, e, QKV_DIMS(ids->shape[0], ids->shape[1], m->cfg.d_model)),
                       m->cfg.dropout);
}

static bool check_ids(const qkv_tensor *t, int64_t V, const char *what) {
    if (t->dtype != QKV_I32 || t->ndim != 2) {
        qkv_error_set(QKV_ERR_INVALID, "t5: %s must be int32 [batch, time]", what);
        return false;
    }
    for (int64_t i = 0; i < qkv_numel(t); i++)
        if (qkv_i32(t)[i] < 0 || qkv_i32(t)[i] >= V) {
            qkv_error_set(QKV_ERR_RANGE, "t5: %s id %d out of [0, %lld)", what, qkv_i32(t)[i], (long long)V);
            return false;
        }
    return true;
}

/* Encoder states [B, S, d] of src [B, S] with padding pad [B, S] (or NULL); weights: n_enc slots or NULL. */
static qkv_tensor *encode(qkv_ctx *ctx, const t5_model *m, qkv_tensor *src, const qkv_tensor *pad,
                          qkv_tensor **weights) {
    const int64_t S = src->shape[1];
    qkv_tensor *x = embed(ctx, m, src);
    qkv_tensor *bias = qkv_relative_position_bias(ctx, m->enc_rel, S, S, 0, true, m->cfg.max_distance);
    for (int l = 0; l < m->cfg.n_enc && x; l++) {
        const t5_block *b = &m->enc[l];
        qkv_tensor *h = qkv_rms_norm(ctx, x, b->ln[0], T5_EPS);
        x = residual(ctx, m, x, attend(ctx, m, &b->self, h, h, bias, false, pad, weights ? &weights[l] : NULL));
        x = residual(ctx, m, x, feed_forward(ctx, m, b, qkv_rms_norm(ctx, x, b->ln[1], T5_EPS)));
    }
    return qkv_dropout(ctx, qkv_rms_norm(ctx, x, m->enc_norm, T5_EPS), m->cfg.dropout);
}

/* Decoder output [B, T, d] -> scores [B, T, V_tgt]: times d^-0.5, then the tied embedding's first V_tgt rows. */
static qkv_tensor *project(qkv_ctx *ctx, const t5_model *m, qkv_tensor *y) {
    qkv_tensor *w = m->cfg.tgt_vocab == m->shared->shape[0] ? m->shared
                                                            : qkv_slice(ctx, m->shared, 0, 0, m->cfg.tgt_vocab, 1);
    return qkv_linear(ctx, qkv_scale(ctx, y, 1.0f / sqrtf((float)m->cfg.d_model)), w, NULL);
}

static qkv_tensor *t5_logits(qkv_ctx *ctx, const t5_model *m, qkv_tensor *src, const qkv_tensor *pad, qkv_tensor *tgt,
                             qkv_tensor **enc_w, qkv_tensor **dec_w, qkv_tensor **cross_w) {
    if (!src || !tgt) return NULL;
    if (!check_ids(src, m->cfg.src_vocab, "source") || !check_ids(tgt, m->cfg.tgt_vocab, "target")) return NULL;
    if (src->shape[0] != tgt->shape[0]) {
        qkv_error_set(QKV_ERR_INVALID, "t5: source batch %lld != target batch %lld", (long long)src->shape[0],
                      (long long)tgt->shape[0]);
        return NULL;
    }
    qkv_tensor *mem = encode(ctx, m, src, pad, enc_w);
    const int64_t T = tgt->shape[1];
    qkv_tensor *y = embed(ctx, m, tgt);
    qkv_tensor *bias = qkv_relative_position_bias(ctx, m->dec_rel, T, T, 0, false, m->cfg.max_distance);
    for (int l = 0; l < m->cfg.n_dec && y && mem; l++) {
        const t5_block *b = &m->dec[l];
        qkv_tensor *h = qkv_rms_norm(ctx, y, b->ln[0], T5_EPS);
        y = residual(ctx, m, y, attend(ctx, m, &b->self, h, h, bias, true, NULL, dec_w ? &dec_w[l] : NULL));
        h = qkv_rms_norm(ctx, y, b->ln[1], T5_EPS);
        y = residual(ctx, m, y, attend(ctx, m, &b->cross, h, mem, NULL, false, pad, cross_w ? &cross_w[l] : NULL));
        y = residual(ctx, m, y, feed_forward(ctx, m, b, qkv_rms_norm(ctx, y, b->ln[2], T5_EPS)));
    }
    y = qkv_dropout(ctx, qkv_rms_norm(ctx, y, m->dec_norm, T5_EPS), m->cfg.dropout);
    return project(ctx, m, y);
}

/* ---- incremental decoding: per decoder layer a self-attention K/V cache [rows, Tmax, H, dk] written one step at a
 * time, and the cross-attention K/V of the encoder states [rows, H, S, dk] projected once in start(); a step's
 * relative bias is the row of query position t against keys 0..t. ---- */

typedef struct t5_state {
    s2s_kv_state kv; /* caches, padding, rows (seq2seq_state.h) */
    const t5_model *m;
    qkv__packs *packs; /* the step's weights, packed on first use by several rows (ops/gemm_packed.h) */
} t5_state;

static void t5_free_state(qkv_decoder_state *st) {
    t5_state *s = (t5_state *)st;
    if (!s) return;
    qkv__s2s_state_release(&s->kv);
    qkv__packs_free(s->packs);
    free(s);
}

static qkv_decoder_state *t5_start(const qkv_model *model, const int32_t *src, const int32_t *lengths, int n_src,
                                   int src_len, int rows_per_src, int max_steps) {
    const t5_model *m = (const t5_model *)model;
    const int64_t H = m->cfg.n_heads, dk = m->cfg.d_kv;
    if (max_steps == 0) max_steps = (int)m->cfg.max_len;
    if (max_steps < 1 || max_steps > m->cfg.max_len) {
        qkv_error_set(QKV_ERR_RANGE, "t5 decode: %d steps exceed max_len %lld", max_steps, (long long)m->cfg.max_len);
        return NULL;
    }
    t5_state *s = calloc(1, sizeof *s);
    if (!s) {
        qkv_error_set(QKV_ERR_NOMEM, "t5 decode: out of memory");
        return NULL;
    }
    s->m = m;
    if (qkv__s2s_state_init(&s->kv, n_src, rows_per_src, src_len, max_steps, (int)m->cfg.n_dec, "t5") != QKV_OK)
        goto fail;
    qkv_ctx *w = s->kv.work;
    qkv_tensor *ids = NULL, *pad = NULL, *row_src = NULL;
    if (s2s_source(w, src, lengths, n_src, src_len, rows_per_src, &ids, &pad, &row_src) != QKV_OK) goto fail;
    if (!check_ids(ids, m->cfg.src_vocab, "source")) goto fail;
    /* The cross-attention keys and values depend on the source alone: projected and kept once per source sentence;
     * each row reads its own source's (a beam's rows share them, reorders never move them). */
    qkv_tensor *mem = encode(w, m, ids, pad, NULL);
    if (!mem || qkv__s2s_state_pad(&s->kv, pad, H, dk) != QKV_OK) goto fail;
    for (int l = 0; l < m->cfg.n_dec; l++) {
        const t5_attn *ca = &m->dec[l].cross;
        qkv_tensor *kk = heads(w, qkv_nn_linear_forward(w, &ca->k, mem), H);
        qkv_tensor *vv = heads(w, qkv_nn_linear_forward(w, &ca->v, mem), H);
        if (qkv__s2s_state_layer(&s->kv, l, kk, vv) != QKV_OK) goto fail;
    }
    qkv__s2s_state_seal(&s->kv);
    /* Every step multiplies the live rows by the same decoder weights (and the shared embedding, the output
     * projection): packed once (ops/gemm_packed.h). */
    if (!(s->packs = qkv__packs_new()) || qkv__packs_allow(s->packs, m->shared)) goto fail;
    for (int l = 0; l < m->cfg.n_dec; l++) {
        const t5_block *b = &m->dec[l];
        const qkv_nn_linear *lin[] = {&b->self.q, &b->self.k, &b->self.v, &b->self.o, &b->cross.q, &b->cross.o,
                                      &b->wi, &b->wo};
        for (size_t j = 0; j < sizeof lin / sizeof lin[0]; j++)
            if (qkv__packs_allow(s->packs, lin[j]->weight)) goto fail;
    }
    qkv__ctx_set_packs(w, s->packs);
    return (qkv_decoder_state *)s;
fail:
    t5_free_state((qkv_decoder_state *)s);
    return NULL;
}

/* Self-attention of the new step's h [rows, 1, d] over the cached steps (its own K/V written first). */
static qkv_tensor *self_step(t5_state *s, int l, qkv_tensor *h, qkv_tensor *bias) {
    qkv_ctx *w = s->kv.work;
    const t5_attn *a = &s->m->dec[l].self;
    const int64_t H = s->m->cfg.n_heads, dk = s->m->cfg.d_kv;
    qkv_tensor *K = NULL, *V = NULL;
    if (qkv__s2s_state_self_kv(&s->kv, l, qkv_nn_linear_forward(w, &a->k, h), qkv_nn_linear_forward(w, &a->v, h), H,
                               dk, &K, &V) != QKV_OK)
        return NULL;
    qkv_sdpa_opts o = qkv_sdpa_defaults();
    o.scale = 1.0f;
    o.bias = bias;
    qkv_tensor *q = heads(w, qkv_nn_linear_forward(w, &a->q, h), H);
    return qkv_nn_linear_forward(w, &a->o, merge(w, qkv_sdpa(w, q, K, V, &o)));
}

static qkv_tensor *cross_step(t5_state *s, int l, qkv_tensor *h, qkv_tensor **weights) {
    qkv_ctx *w = s->kv.work;
    const t5_attn *a = &s->m->dec[l].cross;
    qkv_tensor *q = qkv_nn_linear_forward(w, &a->q, h);
    if (!q) return NULL;
    return qkv_nn_linear_forward(w, &a->o, qkv__s2s_state_cross(&s->kv, l, q, 1.0f, weights)); /* T5: no 1/sqrt(dk) */
}

static qkv_status t5_step(qkv_decoder_state *st, const int32_t *tokens, float *logprobs, float *attn) {
    t5_state *s = (t5_state *)st;
    const t5_model *m = s->m;
    qkv_ctx *w = s->kv.work;
    qkv_ctx_reset(w);
    if (s->kv.t >= s->kv.max_steps)
        return qkv_error_set(QKV_ERR_RANGE, "t5 decode: more than the %d steps prepared", s->kv.max_steps);
    qkv_tensor *ids = qkv_reshape(w, s2s_ids(w, tokens, s->kv.rows), QKV_DIMS(s->kv.rows, 1));
    if (!ids) return qkv_last_status();
    if (!check_ids(ids, m->cfg.tgt_vocab, "target")) return qkv_last_status();
    qkv_tensor *x = embed(w, m, ids);
    qkv_tensor *bias = qkv_relative_position_bias(w, m->dec_rel, 1, s->kv.t + 1, s->kv.t, false, m->cfg.max_distance);
    qkv_tensor *cw = NULL;
    const int nl = m->cfg.n_dec;
    for (int l = 0; l < nl && x; l++) {
        const t5_block *b = &m->dec[l];
        x = qkv_add(w, x, self_step(s, l, qkv_rms_norm(w, x, b->ln[0], T5_EPS), bias));
        x = qkv_add(w, x, cross_step(s, l, qkv_rms_norm(w, x, b->ln[1], T5_EPS), attn && l == nl - 1 ? &cw : NULL));
        x = qkv_add(w, x, feed_forward(w, m, b, qkv_rms_norm(w, x, b->ln[2], T5_EPS)));
    }
    return qkv__s2s_state_emit(&s->kv, w, project(w, m, qkv_rms_norm(w, x, m->dec_norm, T5_EPS)), cw, logprobs, attn);
}

static qkv_status t5_step_logits(qkv_decoder_state *st, const int32_t *tokens, float *logits, float *attn) {
    t5_state *s = (t5_state *)st;
    s->kv.raw = true;
    qkv_status rc = t5_step(st, tokens, logits, attn);
    s->kv.raw = false;
    return rc;
}

static qkv_status t5_reorder(qkv_decoder_state *st, const int32_t *from, int n_rows) {
    return qkv__s2s_state_reorder(&((t5_state *)st)->kv, from, n_rows);
}

static void t5_decoder_info(const qkv_model *model, qkv_decoder_info *out) {
    const t5_model *m = (const t5_model *)model;
    *out = (qkv_decoder_info){.vocab = m->cfg.tgt_vocab, .capacity = m->cfg.max_len, .log_probs = true,
                              .needs_source = true, .source_attention = true, .start_token = -1};
}

static const qkv_decoder_ops t5_decoder_ops = {
    .info = t5_decoder_info, .start = t5_start, .step = t5_step, .reorder = t5_reorder, .free = t5_free_state,
    .step_logits = t5_step_logits};

/* ---- the model type ---- */

typedef struct t5_opts {
    int64_t d_model, n_heads, d_kv, d_ff, n_enc_layers, n_dec_layers, num_buckets, max_distance, max_len;
    double dropout;
} t5_opts;

static const qkv_field t5_fields[] = {
    /* The defaults are a model that pretrains in minutes on 2 cores (T5-small is d_model 512, d_ff 2048, 6 + 6 layers
     * of 8 heads). */
    QKV_FIELD_INT(t5_opts, d_model, "d_model", 128, 1, 1 << 16, "width of the model"),
    QKV_FIELD_INT(t5_opts, n_heads, "n_heads", 4, 1, 1024, "attention heads"),
    QKV_FIELD_INT(t5_opts, d_kv, "d_kv", 0, 0, 1 << 16, "width of each head's keys and values (0: d_model / n_heads)"),
    QKV_FIELD_INT(t5_opts, d_ff, "d_ff", 512, 1, 1 << 20, "inner width of the feed-forward layers"),
    QKV_FIELD_INT(t5_opts, n_enc_layers, "n_enc_layers", 2, 1, QKV_NN_MAX_LAYERS, "encoder blocks"),
    QKV_FIELD_INT(t5_opts, n_dec_layers, "n_dec_layers", 2, 1, QKV_NN_MAX_LAYERS, "decoder blocks"),
    QKV_FIELD_INT(t5_opts, num_buckets, "num_buckets", 32, 4, 4096, "relative position buckets"),
    QKV_FIELD_INT(t5_opts, max_distance, "max_distance", 128, 2, 1 << 20,
                  "distance beyond which relative positions share a bucket"),
    QKV_FIELD_NUM(t5_opts, dropout, "dropout", 0.1, 0, 0.99, 0, "dropout on embeddings, sublayers and attention"),
    QKV_FIELD_INT(t5_opts, max_len, "max_len", 512, 1, 1 << 20,
                  "longest target a decoder state holds (raised to the data's longest sequence)"),
};

static qkv_status t5_check(const void *p) {
    const t5_opts *o = p;
    if (o->d_kv == 0 && o->d_model % o->n_heads)
        return qkv_error_set(QKV_ERR_INVALID, "model.d_model %lld is not divisible by model.n_heads %lld (or set "
                             "model.d_kv)", (long long)o->d_model, (long long)o->n_heads);
    if (o->max_distance <= o->num_buckets / 4)
        return qkv_error_set(QKV_ERR_INVALID, "model.max_distance %lld must exceed model.num_buckets / 4 = %lld",
                             (long long)o->max_distance, (long long)(o->num_buckets / 4));
    return QKV_OK;
}

static const qkv_schema t5_schema = QKV_SCHEMA("model", t5_opts, t5_fields, t5_check);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

static qkv_model *t5_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    t5_opts o;
    if (qkv_model_config(&t5_schema, cfg, &o)) return NULL;
    if (!info || info->vocab_size < 1) {
        qkv_error_set(QKV_ERR_INVALID, "t5: the task gives no vocabulary size");
        return NULL;
    }
    t5_config c = {.src_vocab = info->vocab_size,
                   .tgt_vocab = info->tgt_vocab_size > 0 ? info->tgt_vocab_size : info->vocab_size,
                   .d_model = o.d_model, .n_heads = o.n_heads, .d_kv = o.d_kv ? o.d_kv : o.d_model / o.n_heads,
                   .d_ff = o.d_ff, .max_len = o.max_len > info->max_len ? o.max_len : info->max_len,
                   .n_enc = (int)o.n_enc_layers, .n_dec = (int)o.n_dec_layers, .num_buckets = (int)o.num_buckets,
                   .max_distance = (int)o.max_distance, .dropout = (float)o.dropout};
    t5_model *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "t5: out of memory");
        return NULL;
    }
    if (t5_init(m, params, &c, rng) != QKV_OK) {
        free(m);
        return NULL;
    }
    return (qkv_model *)m;
}

static void t5_model_free(qkv_model *m) { free(m); }

static qkv_tensor *t5_forward(qkv_ctx *ctx, qkv_model *model, const qkv_batch *b, qkv_attention_maps *maps) {
    t5_model *m = (t5_model *)model;
    if (!b->src_ids || !b->ids) {
        qkv_error_set(QKV_ERR_INVALID, "t5: the batch needs src_ids and ids (decoder inputs)");
        return NULL;
    }
    qkv_tensor *pad = qkv_nn_padding_of(ctx, b->src_mask);
    if (b->src_mask && !pad) return NULL;
    qkv_tensor *cross[QKV_NN_MAX_LAYERS] = {0}, *enc[QKV_NN_MAX_LAYERS] = {0}, *dec[QKV_NN_MAX_LAYERS] = {0};
    qkv_tensor *logits = t5_logits(ctx, m, b->src_ids, pad, b->ids, maps ? enc : NULL, maps ? dec : NULL,
                                   maps ? cross : NULL);
    if (maps && logits) s2s_fill_maps(maps, m->cfg.n_enc, m->cfg.n_dec, enc, dec, cross);
    return logits;
}

static qkv_tensor *t5_loss(qkv_ctx *ctx, qkv_model *model, const qkv_batch *b) {
    return s2s_masked_loss(ctx, t5_forward(ctx, model, b, NULL), b);
}

static void t5_info(const qkv_model *model, qkv_model_info *out) {
    out->max_positions = 0; /* relative positions: no table to outgrow */
    (void)model;
}

static const qkv_model_embedding embeddings[] = {{"shared.weight", "input", NULL}, {NULL, NULL, NULL}};

/* Paths are relative to the directory qkv runs in (the checkout beside ../shared, as every doc's commands assume). */
static const qkv_model_preset t5_presets[] = {
    {"t5_small", "T5 span-corruption pretraining on the English text of ../shared/data: d 128, 2+2 layers, 60 min",
     "{\"model\": {\"type\": \"t5\", \"d_model\": 128, \"n_heads\": 4, \"d_ff\": 512, \"n_enc_layers\": 2,"
     " \"n_dec_layers\": 2, \"dropout\": 0.1},"
     " \"data\": {\"task\": \"span_corruption\", \"train\": \"../shared/data\", \"dev\": \"../shared/data/lm/dev.txt\","
     " \"max_len\": 128, \"max_vocab\": 16000, \"noise_density\": 0.15, \"mean_span\": 3, \"sentinels\": 100},"
     " \"train\": {\"steps\": 1000000, \"max_seconds\": 3600, \"batch_size\": 32,"
     " \"optimizer\": {\"name\": \"adamw\", \"lr\": 0.0003, \"weight_decay\": 0.01},"
     " \"schedule\": {\"spec\": \"constant * linear_warmup\", \"warmup_steps\": 500}, \"clip_norm\": 1.0,"
     " \"log_every\": 50, \"checkpoint_every\": 1000},"
     " \"eval\": {\"every\": 1000, \"batch_size\": 64, \"max_batches\": 20}, \"seed\": 1}"},
    {"t5_tasks", "multi-task fine-tuning of runs/t5_small (init_from) on four tasks of ../shared/data, 30 min",
     "{\"model\": {\"type\": \"t5\", \"d_model\": 128, \"n_heads\": 4, \"d_ff\": 512, \"n_enc_layers\": 2,"
     " \"n_dec_layers\": 2, \"dropout\": 0.1},"
     " \"data\": {\"max_len\": 128, \"tokenizer_from\": \"runs/t5_small\", \"keep_sentinels\": true,"
     " \"tasks\": ["
     "{\"name\": \"translate\", \"prefix\": \"translate English to Spanish:\", \"train\": \"../shared/data/translation/train.tsv\","
     " \"dev\": \"../shared/data/translation/dev.tsv\", \"test\": \"../shared/data/translation/test.tsv\"},"
     "{\"name\": \"summarize\", \"train\": \"../shared/data/summarization/train.tsv\","
     " \"dev\": \"../shared/data/summarization/dev.tsv\", \"test\": \"../shared/data/summarization/test.tsv\", \"metric\": \"rouge\"},"
     "{\"name\": \"sentiment\", \"train\": \"../shared/data/sentiment/train.tsv\", \"dev\": \"../shared/data/sentiment/dev.tsv\","
     " \"test\": \"../shared/data/sentiment/test.tsv\", \"format\": \"label\", \"labels\": \"negative,positive\"},"
     "{\"name\": \"paraphrase\", \"train\": \"../shared/data/paraphrase/train.tsv\", \"dev\": \"../shared/data/paraphrase/dev.tsv\","
     " \"test\": \"../shared/data/paraphrase/test.tsv\", \"format\": \"pair_label\", \"labels\": \"no,yes\"}],"
     " \"mixing\": \"proportional\", \"mixing_cap\": 5000},"
     " \"train\": {\"steps\": 1000000, \"max_seconds\": 1800, \"batch_size\": 32,"
     " \"optimizer\": {\"name\": \"adamw\", \"lr\": 0.0005, \"weight_decay\": 0.01}, \"clip_norm\": 1.0,"
     " \"log_every\": 50, \"checkpoint_every\": 1000},"
     " \"eval\": {\"every\": 1000, \"batch_size\": 64, \"max_batches\": 20},"
     " \"finetune\": {\"init_from\": \"runs/t5_small\"}, \"seed\": 1}"},
    {NULL, NULL, NULL}};

const qkv_model_type qkv_model_t5 = {
    .name = "t5",
    .presets = t5_presets,
    .task = "seq2seq",
    .summary = "T5 text-to-text encoder-decoder (relative position bias, RMS norm, tied embedding, no biases)",
    .config = &t5_schema,
    .default_config = defaults_json,
    .data_defaults = "{\"shared_vocab\": true}", /* one embedding serves source, target and output */
    .create = t5_create,
    .free = t5_model_free,
    .loss = t5_loss,
    .forward = t5_forward,
    .embeddings = embeddings,
    .decoder = &t5_decoder_ops,
    .info = t5_info,
};
