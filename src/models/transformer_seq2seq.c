/* Encoder-decoder Transformer for translation (torch.nn.Transformer + scaled embeddings, sinusoidal positions and
 * a generator), incremental decoding with cached K/V, and the "transformer_seq2seq" model type. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/attention.h"
#include "qkv/error.h"
#include "qkv/ops.h"
#include "qkv/schema.h"
#include "core/internal.h"
#include "ops/gemm_packed.h"
#include "ops/linear_rows.h"
#include "seq2seq_internal.h"
#include "seq2seq_state.h"

qkv_status qkv_tf_s2s_init(qkv_tf_s2s *m, qkv_params *params, const qkv_tf_s2s_config *cfg, qkv_rng *rng) {
    memset(m, 0, sizeof *m);
    if (!params || !cfg || !rng)
        return qkv_error_set(QKV_ERR_INVALID, "transformer_seq2seq: params, cfg and rng are required");
    if (cfg->src_vocab < 1 || cfg->tgt_vocab < 1 || cfg->max_len < 1)
        return qkv_error_set(QKV_ERR_INVALID, "transformer_seq2seq: src_vocab %lld, tgt_vocab %lld and max_len %lld "
                             "must be >= 1", (long long)cfg->src_vocab, (long long)cfg->tgt_vocab,
                             (long long)cfg->max_len);
    if (cfg->share_embeddings && cfg->src_vocab != cfg->tgt_vocab)
        return qkv_error_set(QKV_ERR_INVALID, "transformer_seq2seq: share_embeddings needs src_vocab == tgt_vocab "
                             "(%lld vs %lld)", (long long)cfg->src_vocab, (long long)cfg->tgt_vocab);
    if (cfg->block.separate_proj)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "transformer_seq2seq: separate q/k/v projections are not supported "
                             "(torch.nn.Transformer uses the fused in_proj)");
    m->cfg = *cfg;
    int64_t d = cfg->block.d_model;
    qkv_status st;
    if (cfg->share_embeddings) {
        if ((st = qkv_nn_embedding_init(&m->src_emb, params, "emb", cfg->src_vocab, d, QKV_NN_NO_PADDING, true, rng)))
            return st;
        m->tgt_emb = m->src_emb;
    } else if ((st = qkv_nn_embedding_init(&m->src_emb, params, "src_emb", cfg->src_vocab, d, QKV_NN_NO_PADDING, true,
                                           rng)) ||
               (st = qkv_nn_embedding_init(&m->tgt_emb, params, "tgt_emb", cfg->tgt_vocab, d, QKV_NN_NO_PADDING, true,
                                           rng))) {
        return st;
    }
    if ((st = qkv_nn_posenc_init(&m->pe, params, NULL, QKV_POSENC_SINUSOIDAL, cfg->max_len, d, cfg->block.dropout,
                                 0.0f, rng)) ||
        (st = qkv_nn_transformer_init(&m->tf, params, "tf", &cfg->block, cfg->n_enc_layers, cfg->n_dec_layers, rng)) ||
        (st = qkv_nn_linear_init(&m->gen, params, "gen", d, cfg->tgt_vocab, true, rng)))
        return st;
    return QKV_OK;
}

static bool check_ids(const qkv_tensor *t, const char *what) {
    if (t->dtype != QKV_I32 || t->ndim != 2) {
        qkv_error_set(QKV_ERR_INVALID, "transformer_seq2seq: %s must be int32 [batch, time]", what);
        return false;
    }
    return true;
}

qkv_tensor *qkv_tf_s2s_forward(qkv_ctx *ctx, const qkv_tf_s2s *m, qkv_tensor *src, const qkv_tensor *src_pad,
                               qkv_tensor *tgt, qkv_tensor **cross) {
    return qkv_tf_s2s_forward_maps(ctx, m, src, src_pad, tgt, NULL, NULL, cross);
}

qkv_tensor *qkv_tf_s2s_forward_maps(qkv_ctx *ctx, const qkv_tf_s2s *m, qkv_tensor *src, const qkv_tensor *src_pad,
                                    qkv_tensor *tgt, qkv_tensor **enc_self, qkv_tensor **dec_self,
                                    qkv_tensor **cross) {
    if (!src || !tgt) return NULL;
    if (!check_ids(src, "src") || !check_ids(tgt, "tgt")) return NULL;
    if (src->shape[0] != tgt->shape[0]) {
        qkv_error_set(QKV_ERR_INVALID, "transformer_seq2seq: src batch %lld != tgt batch %lld",
                      (long long)src->shape[0], (long long)tgt->shape[0]);
        return NULL;
    }
    qkv_tensor *xs = qkv_nn_posenc_forward(ctx, &m->pe, qkv_nn_embedding_forward(ctx, &m->src_emb, src), 0);
    qkv_tensor *xt = qkv_nn_posenc_forward(ctx, &m->pe, qkv_nn_embedding_forward(ctx, &m->tgt_emb, tgt), 0);
    qkv_nn_attn_mask smask = {.key_padding = src_pad}, tmask = {.causal = true};
    qkv_tensor *mem = qkv_nn_encoder_forward(ctx, &m->tf.encoder, xs, &smask, enc_self);
    qkv_tensor *y = qkv_nn_decoder_forward(ctx, &m->tf.decoder, xt, mem, &tmask, &smask, dec_self, cross);
    return qkv_nn_linear_forward(ctx, &m->gen, y);
}

/* ---- incremental decoding ----
 * Per decoder layer the state keeps the self-attention keys and values of every step so far ([rows, Tmax, H, dh],
 * written one step at a time) and the cross-attention keys and values of the encoder memory ([n_src, H, S, dh],
 * projected once, read by each row through its source). A step then costs O(t) attention instead of re-running
 * the whole prefix. */

/* The decoder's qkv_decoder_state (decoder.h keeps it opaque; each model has its own). */
typedef struct tf_state {
    s2s_kv_state kv; /* caches, padding, rows (seq2seq_state.h) */
    const qkv_tf_s2s *m;
    qkv__packs *packs; /* the step's weights, packed on first use by several rows (ops/gemm_packed.h) */
} tf_state;

static void tf_free(qkv_decoder_state *st) {
    tf_state *s = (tf_state *)st;
    if (!s) return;
    qkv__s2s_state_release(&s->kv);
    qkv__packs_free(s->packs);
    free(s);
}

/* Rows [r0, r1) of a fused in_proj weight / bias: the q (0), k (1) or v (2) block. */
static qkv_tensor *proj_block(qkv_ctx *ctx, qkv_tensor *w, int which, int64_t d) {
    return w ? qkv_slice(ctx, w, 0, which * d, (which + 1) * d, 1) : NULL;
}

/* [rows, T, d] -> [rows, H, T, dh] (a view when x is contiguous). */
static qkv_tensor *heads(qkv_ctx *ctx, qkv_tensor *x, int64_t H) {
    if (!x) return NULL;
    int64_t R = x->shape[0], T = x->shape[1], d = x->shape[2];
    return qkv_permute(ctx, qkv_reshape(ctx, x, QKV_DIMS(R, T, H, d / H)), (const int[]){0, 2, 1, 3});
}

/* [rows, H, 1, dh] -> [rows, 1, d]. */
static qkv_tensor *merge(qkv_ctx *ctx, qkv_tensor *o) {
    if (!o) return NULL;
    int64_t R = o->shape[0], H = o->shape[1], dh = o->shape[3];
    return qkv_reshape(ctx, qkv_permute(ctx, o, (const int[]){0, 2, 1, 3}), QKV_DIMS(R, 1, H * dh));
}

static qkv_decoder_state *tf_start(const qkv_model *model, const int32_t *src, const int32_t *lengths, int n_src, int src_len,
                               int rows_per_src, int max_steps) {
    const qkv_tf_s2s *m = (const qkv_tf_s2s *)model; /* a bare struct, or the first member of tf_model */
    int64_t d = m->cfg.block.d_model, H = m->cfg.block.nhead;
    if (max_steps == 0) max_steps = (int)m->cfg.max_len;
    if (max_steps < 1 || max_steps > m->cfg.max_len || src_len > m->cfg.max_len) {
        qkv_error_set(QKV_ERR_RANGE, "transformer_seq2seq decode: %d steps / source length %d exceed max_len %lld",
                      max_steps, src_len, (long long)m->cfg.max_len);
        return NULL;
    }
    tf_state *s = calloc(1, sizeof *s);
    if (!s) {
        qkv_error_set(QKV_ERR_NOMEM, "transformer_seq2seq decode: out of memory");
        return NULL;
    }
    s->m = m;
    if (qkv__s2s_state_init(&s->kv, n_src, rows_per_src, src_len, max_steps, m->tf.decoder.num_layers,
                            "transformer_seq2seq") != QKV_OK)
        goto fail;
    qkv_ctx *w = s->kv.work;
    qkv_tensor *ids = NULL, *pad = NULL, *row_src = NULL;
    if (s2s_source(w, src, lengths, n_src, src_len, rows_per_src, &ids, &pad, &row_src) != QKV_OK) goto fail;
    for (int i = 0; i < n_src * src_len; i++)
        if (src[i] < 0 || src[i] >= m->cfg.src_vocab) {
            qkv_error_set(QKV_ERR_RANGE, "transformer_seq2seq decode: source id %d out of [0, %lld)", src[i],
                          (long long)m->cfg.src_vocab);
            goto fail;
        }
    qkv_nn_attn_mask smask = {.key_padding = pad};
    qkv_tensor *xs = qkv_nn_posenc_forward(w, &m->pe, qkv_nn_embedding_forward(w, &m->src_emb, ids), 0);
    /* The cross-attention keys and values depend on the source alone: projected and kept once per source sentence;
     * each row reads its own source's (a beam's K rows share them, reorders never move them). */
    qkv_tensor *mem = qkv_nn_encoder_forward(w, &m->tf.encoder, xs, &smask, NULL);
    if (!mem || qkv__s2s_state_pad(&s->kv, pad, H, d / H) != QKV_OK) goto fail;
    for (int l = 0; l < m->tf.decoder.num_layers; l++) {
        const qkv_nn_mha *ca = &m->tf.decoder.layers[l].multihead_attn;
        qkv_tensor *kk = heads(w, qkv_linear(w, mem, proj_block(w, ca->in_proj_weight, 1, d),
                                             proj_block(w, ca->in_proj_bias, 1, d)), H);
        qkv_tensor *vv = heads(w, qkv_linear(w, mem, proj_block(w, ca->in_proj_weight, 2, d),
                                             proj_block(w, ca->in_proj_bias, 2, d)), H);
        if (qkv__s2s_state_layer(&s->kv, l, kk, vv) != QKV_OK) goto fail;
    }
    qkv__s2s_state_seal(&s->kv);
    /* Every step multiplies the live rows by the same decoder weights: packed once (ops/gemm_packed.h). */
    if (!(s->packs = qkv__packs_new()) || qkv__packs_allow(s->packs, m->gen.weight)) goto fail;
    for (int l = 0; l < m->tf.decoder.num_layers; l++) {
        const qkv_nn_decoder_layer *L = &m->tf.decoder.layers[l];
        const qkv_nn_mha *a[2] = {&L->self_attn, &L->multihead_attn};
        for (int j = 0; j < 2; j++)
            if (qkv__packs_allow(s->packs, a[j]->in_proj_weight) || qkv__packs_allow(s->packs, a[j]->q_proj.weight) ||
                qkv__packs_allow(s->packs, a[j]->k_proj.weight) || qkv__packs_allow(s->packs, a[j]->v_proj.weight) ||
                qkv__packs_allow(s->packs, a[j]->out_proj.weight))
                goto fail;
        if (qkv__packs_allow(s->packs, L->linear1.weight) || qkv__packs_allow(s->packs, L->linear2.weight)) goto fail;
    }
    qkv__ctx_set_packs(w, s->packs);
    return (qkv_decoder_state *)s;
fail:
    tf_free((qkv_decoder_state *)s);
    return NULL;
}

/* Self-attention of the new step's x [rows, 1, d] over the cached steps (its own K/V appended first). */
static qkv_tensor *self_attn_step(tf_state *s, int l, qkv_tensor *x) {
    qkv_ctx *w = s->kv.work;
    const qkv_nn_mha *sa = &s->m->tf.decoder.layers[l].self_attn;
    int64_t H = s->m->cfg.block.nhead, d = s->m->cfg.block.d_model;
    qkv_tensor *qkv = qkv_linear(w, x, sa->in_proj_weight, sa->in_proj_bias);
    qkv_tensor *parts[3];
    if (!qkv || qkv_split(w, qkv, -1, 3, (const int64_t[]){d, d, d}, parts) != QKV_OK) return NULL;
    qkv_tensor *K = NULL, *V = NULL;
    if (qkv__s2s_state_self_kv(&s->kv, l, parts[1], parts[2], H, d / H, &K, &V) != QKV_OK) return NULL;
    qkv_tensor *o = merge(w, qkv_sdpa(w, heads(w, qkv_contiguous(w, parts[0]), H), K, V, NULL));
    return qkv_nn_linear_forward(w, &sa->out_proj, o);
}

static qkv_tensor *cross_attn_step(tf_state *s, int l, qkv_tensor *x, qkv_tensor **weights) {
    qkv_ctx *w = s->kv.work;
    const qkv_nn_mha *ca = &s->m->tf.decoder.layers[l].multihead_attn;
    int64_t H = s->m->cfg.block.nhead, d = s->m->cfg.block.d_model;
    qkv_tensor *q = qkv_linear(w, x, proj_block(w, ca->in_proj_weight, 0, d), proj_block(w, ca->in_proj_bias, 0, d));
    if (!q) return NULL;
    qkv_tensor *o = qkv__s2s_state_cross(&s->kv, l, q, 1.0f / sqrtf((float)(d / H)), weights);
    return qkv_nn_linear_forward(w, &ca->out_proj, o);
}

static qkv_tensor *ffn(qkv_ctx *w, const qkv_nn_decoder_layer *L, qkv_tensor *x) {
    return qkv_nn_linear_forward(w, &L->linear2, qkv_nn_activate(w, L->cfg.activation,
                                                                 qkv_nn_linear_forward(w, &L->linear1, x)));
}

static qkv_status tf_step(qkv_decoder_state *st, const int32_t *tokens, float *logprobs, float *attn) {
    tf_state *s = (tf_state *)st;
    const qkv_tf_s2s *m = s->m;
    qkv_ctx *w = s->kv.work;
    qkv_ctx_reset(w);
    if (s->kv.t >= s->kv.max_steps)
        return qkv_error_set(QKV_ERR_RANGE, "transformer_seq2seq decode: more than the %d steps prepared",
                             s->kv.max_steps);
    for (int r = 0; r < s->kv.rows; r++)
        if (tokens[r] < 0 || tokens[r] >= m->cfg.tgt_vocab)
            return qkv_error_set(QKV_ERR_RANGE, "transformer_seq2seq decode: token %d out of [0, %lld)", tokens[r],
                                 (long long)m->cfg.tgt_vocab);
    qkv_tensor *ids = qkv_reshape(w, s2s_ids(w, tokens, s->kv.rows), QKV_DIMS(s->kv.rows, 1));
    qkv_tensor *x = qkv_nn_posenc_forward(w, &m->pe, qkv_nn_embedding_forward(w, &m->tgt_emb, ids), s->kv.t);
    qkv_tensor *cw = NULL;
    int nl = m->tf.decoder.num_layers;
    for (int l = 0; l < nl && x; l++) {
        const qkv_nn_decoder_layer *L = &m->tf.decoder.layers[l];
        qkv_tensor **wslot = (attn && l == nl - 1) ? &cw : NULL;
        if (L->cfg.norm_first) {
            x = qkv_add(w, x, self_attn_step(s, l, qkv_nn_layer_norm_forward(w, &L->norm1, x)));
            x = qkv_add(w, x, cross_attn_step(s, l, qkv_nn_layer_norm_forward(w, &L->norm2, x), wslot));
            x = qkv_add(w, x, ffn(w, L, qkv_nn_layer_norm_forward(w, &L->norm3, x)));
        } else {
            x = qkv_nn_layer_norm_forward(w, &L->norm1, qkv_add(w, x, self_attn_step(s, l, x)));
            x = qkv_nn_layer_norm_forward(w, &L->norm2, qkv_add(w, x, cross_attn_step(s, l, x, wslot)));
            x = qkv_nn_layer_norm_forward(w, &L->norm3, qkv_add(w, x, ffn(w, L, x)));
        }
    }
    if (x && m->tf.decoder.final_norm) x = qkv_nn_layer_norm_forward(w, &m->tf.decoder.norm, x);
    if (s->kv.raw) { /* raw logits straight into the caller's buffer (no copy of rows x vocab floats a step) */
        qkv_status rc = x ? qkv__linear_rows(w, x, m->gen.weight, m->gen.bias, logprobs) : qkv_last_status();
        return rc ? rc : qkv__s2s_state_emit(&s->kv, w, NULL, cw, logprobs, attn);
    }
    return qkv__s2s_state_emit(&s->kv, w, qkv_nn_linear_forward(w, &m->gen, x), cw, logprobs, attn);
}

static qkv_status tf_step_logits(qkv_decoder_state *st, const int32_t *tokens, float *logits, float *attn) {
    tf_state *s = (tf_state *)st;
    s->kv.raw = true;
    qkv_status rc = tf_step(st, tokens, logits, attn);
    s->kv.raw = false;
    return rc;
}

static qkv_status tf_reorder(qkv_decoder_state *st, const int32_t *from, int n_rows) {
    return qkv__s2s_state_reorder(&((tf_state *)st)->kv, from, n_rows);
}

static void tf_info(const qkv_model *model, qkv_decoder_info *out) {
    const qkv_tf_s2s *m = (const qkv_tf_s2s *)model;
    *out = (qkv_decoder_info){.vocab = m->cfg.tgt_vocab, .capacity = m->cfg.max_len, .log_probs = true,
                              .needs_source = true, .source_attention = true, .start_token = -1};
}

static const qkv_decoder_ops tf_decoder_ops = {
    .info = tf_info, .start = tf_start, .step = tf_step, .reorder = tf_reorder, .free = tf_free,
    .step_logits = tf_step_logits};

qkv_decoder qkv_tf_s2s_decoder(const qkv_tf_s2s *m) {
    qkv_decoder d = {.ops = &tf_decoder_ops, .model = (const qkv_model *)m};
    tf_info(d.model, &d.info);
    return d;
}

/* ---- the "transformer_seq2seq" model type ---- */

typedef struct tf_model {
    qkv_tf_s2s m; /* first: the decoder's functions cast a model to it */
} tf_model;

/* The "model" fields, declared once. */
typedef struct tf_opts {
    int64_t d_model, n_heads, d_ff, n_enc_layers, n_dec_layers, max_len;
    const char *activation, *norm;
    double dropout;
    bool share_embeddings;
} tf_opts;

static const qkv_field tf_fields[] = {
    QKV_FIELD_INT(tf_opts, d_model, "d_model", 256, 1, 1 << 16, "width of the model"),
    QKV_FIELD_INT(tf_opts, n_heads, "n_heads", 4, 1, 1024, "attention heads (must divide d_model)"),
    QKV_FIELD_INT(tf_opts, d_ff, "d_ff", 1024, 1, 1 << 20, "inner width of the feed-forward layers"),
    QKV_FIELD_INT(tf_opts, n_enc_layers, "n_enc_layers", 3, 1, QKV_NN_MAX_LAYERS, "encoder blocks"),
    QKV_FIELD_INT(tf_opts, n_dec_layers, "n_dec_layers", 3, 1, QKV_NN_MAX_LAYERS, "decoder blocks"),
    QKV_FIELD_CHOICE(tf_opts, activation, "activation", "relu", "relu|gelu|gelu_tanh|tanh|gelu_new",
                     "feed-forward activation (gelu_new is gelu_tanh)"),
    QKV_FIELD_CHOICE(tf_opts, norm, "norm", "post", "pre|post", "layer norm before (pre) or after (post) each sublayer"),
    QKV_FIELD_NUM(tf_opts, dropout, "dropout", 0.1, 0, 0.99, 0, "dropout on embeddings, sublayers and attention"),
    QKV_FIELD_INT(tf_opts, max_len, "max_len", 256, 1, 1 << 20, "positions (raised to the data's longest sequence)"),
    QKV_FIELD_BOOL(tf_opts, share_embeddings, "share_embeddings", false,
                   "one embedding for source, target and output (needs data.shared_vocab)"),
};

static qkv_status tf_check(const void *p) {
    const tf_opts *o = p;
    if (o->d_model % o->n_heads)
        return qkv_error_set(QKV_ERR_INVALID, "model.d_model %lld is not divisible by model.n_heads %lld",
                             (long long)o->d_model, (long long)o->n_heads);
    return QKV_OK;
}

static const qkv_schema tf_schema = QKV_SCHEMA("model", tf_opts, tf_fields, tf_check);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

static qkv_model *tf_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    const char *who = "transformer_seq2seq";
    tf_opts o;
    if (qkv_model_config(&tf_schema, cfg, &o)) return NULL;
    if (!info || info->vocab_size < 1) {
        qkv_error_set(QKV_ERR_INVALID, "%s: the task gives no vocabulary size", who);
        return NULL;
    }
    qkv_tf_s2s_config c = {.src_vocab = info->vocab_size,
                           .tgt_vocab = info->tgt_vocab_size > 0 ? info->tgt_vocab_size : info->vocab_size,
                           .block = qkv_nn_block_config_default(o.d_model, o.n_heads),
                           .n_enc_layers = (int)o.n_enc_layers, .n_dec_layers = (int)o.n_dec_layers,
                           .max_len = o.max_len > info->max_len ? o.max_len : info->max_len,
                           .share_embeddings = o.share_embeddings};
    c.block.dim_feedforward = o.d_ff;
    c.block.dropout = (float)o.dropout;
    c.block.norm_first = !strcmp(o.norm, "pre");
    qkv_activation_parse(o.activation, &c.block.activation); /* the schema's choices all parse */
    tf_model *tm = calloc(1, sizeof *tm);
    if (!tm) {
        qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", who);
        return NULL;
    }
    if (qkv_tf_s2s_init(&tm->m, params, &c, rng) != QKV_OK) {
        free(tm);
        return NULL;
    }
    return (qkv_model *)tm;
}

static void tf_model_free(qkv_model *m) { free(m); }

static qkv_tensor *tf_model_forward(qkv_ctx *ctx, qkv_model *model, const qkv_batch *b, qkv_attention_maps *maps) {
    tf_model *tm = (tf_model *)model;
    if (!b->src_ids || !b->ids) {
        qkv_error_set(QKV_ERR_INVALID, "transformer_seq2seq: the batch needs src_ids and ids (decoder inputs)");
        return NULL;
    }
    qkv_tensor *pad = qkv_nn_padding_of(ctx, b->src_mask);
    if (b->src_mask && !pad) return NULL;
    _Static_assert(3 * QKV_NN_MAX_LAYERS <= QKV_ATTENTION_MAPS_MAX, "an encoder-decoder's maps fit the slots");
    qkv_tensor *cross[QKV_NN_MAX_LAYERS] = {0}, *enc[QKV_NN_MAX_LAYERS] = {0}, *dec[QKV_NN_MAX_LAYERS] = {0};
    qkv_tensor *logits = qkv_tf_s2s_forward_maps(ctx, &tm->m, b->src_ids, pad, b->ids, maps ? enc : NULL,
                                                 maps ? dec : NULL, maps ? cross : NULL);
    if (maps && logits) s2s_fill_maps(maps, tm->m.tf.encoder.num_layers, tm->m.tf.decoder.num_layers, enc, dec, cross);
    return logits;
}

static qkv_tensor *tf_model_loss(qkv_ctx *ctx, qkv_model *model, const qkv_batch *b) {
    return s2s_masked_loss(ctx, tf_model_forward(ctx, model, b, NULL), b);
}

static void tf_model_info(const qkv_model *model, qkv_model_info *out) {
    out->max_positions = ((const tf_model *)model)->m.cfg.max_len;
}

/* share_embeddings makes one "emb.weight" instead of the source and target pair; absent entries are skipped. */
static const qkv_model_embedding embeddings[] = {{"src_emb.weight", "input", NULL},
                                                 {"tgt_emb.weight", "target", NULL},
                                                 {"emb.weight", "input", NULL},
                                                 {NULL, NULL, NULL}};

const qkv_model_type qkv_model_transformer_seq2seq = {
    .name = "transformer_seq2seq",
    .task = "seq2seq",
    .summary = "encoder-decoder Transformer (torch.nn.Transformer + embeddings, sinusoidal positions, generator)",
    .config = &tf_schema,
    .default_config = defaults_json,
    .create = tf_create,
    .free = tf_model_free,
    .loss = tf_model_loss,
    .forward = tf_model_forward,
    .embeddings = embeddings,
    .decoder = &tf_decoder_ops,
    .info = tf_model_info,
};
