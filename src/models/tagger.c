/* The sequence tagger (include/qkv/tagger.h) and its model-type table: Embedding -> LSTM or Transformer encoder ->
 * Dense -> LogSoftmax per token. Written with nn's structs rather than the combinators: the LSTM needs each
 * sentence's length beside the activations (the reverse direction must start at the last real token), which the
 * one-in-one-out rnn leaf does not carry. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/ops.h"
#include "qkv/schema.h"
#include "qkv/tagger.h"

qkv_tagger_config qkv_tagger_config_default(int64_t vocab_size, int64_t n_tags) {
    return (qkv_tagger_config){.vocab_size = vocab_size, .n_tags = n_tags, .d_model = 128, .n_layers = 1,
                               .encoder = QKV_TAGGER_LSTM, .bidirectional = true, .dropout = 0.0f, .n_heads = 4,
                               .d_ff = 512, .max_len = 512, .learned_pos = false};
}

static qkv_status check_config(const qkv_tagger_config *c) {
    if (c->vocab_size < 1 || c->n_tags < 1)
        return qkv_error_set(QKV_ERR_INVALID, "tagger: vocab_size %lld and n_tags %lld must be positive",
                             (long long)c->vocab_size, (long long)c->n_tags);
    if (c->d_model < 1 || c->n_layers < 1)
        return qkv_error_set(QKV_ERR_INVALID, "tagger: d_model %lld and n_layers %lld must be positive",
                             (long long)c->d_model, (long long)c->n_layers);
    if (c->encoder == QKV_TAGGER_LSTM && c->n_layers > QKV_RNN_MAX_LAYERS)
        return qkv_error_set(QKV_ERR_INVALID, "tagger: n_layers %lld outside [1, %d] for the LSTM",
                             (long long)c->n_layers, QKV_RNN_MAX_LAYERS);
    if (c->encoder == QKV_TAGGER_TRANSFORMER &&
        (c->n_layers > QKV_NN_MAX_LAYERS || c->n_heads < 1 || c->d_model % c->n_heads || c->d_ff < 1 ||
         c->max_len < 1))
        return qkv_error_set(QKV_ERR_INVALID, "tagger: transformer needs n_layers in [1, %d], n_heads dividing "
                             "d_model %lld, positive d_ff and max_len", QKV_NN_MAX_LAYERS, (long long)c->d_model);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return qkv_error_set(QKV_ERR_INVALID, "tagger: dropout %g outside [0, 1)", (double)c->dropout);
    return QKV_OK;
}

qkv_tagger *qkv_tagger_new(const qkv_tagger_config *cfg, qkv_params *params, qkv_rng *rng) {
    if (!cfg || !params || !rng) {
        qkv_error_set(QKV_ERR_INVALID, "tagger: config, params or rng is NULL");
        return NULL;
    }
    if (check_config(cfg)) return NULL;
    qkv_tagger *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "tagger: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    const qkv_tagger_config *c = cfg;
    int64_t d = c->d_model, out_in = d;
    bool tf = c->encoder == QKV_TAGGER_TRANSFORMER;
    qkv_status st = qkv_nn_embedding_init(&m->embedding, params, "embedding", c->vocab_size, d, QKV_NN_NO_PADDING,
                                          tf, rng);
    if (!st && !tf) {
        qkv_rnn_config rc = qkv_rnn_config_default(QKV_RNN_LSTM, d, d);
        rc.num_layers = (int)c->n_layers;
        rc.bidirectional = c->bidirectional;
        rc.dropout = c->dropout;
        st = qkv_rnn_init(&m->rnn, params, "rnn", &rc, rng);
        out_in = c->bidirectional ? 2 * d : d;
    } else if (!st) {
        st = qkv_nn_posenc_init(&m->pos, params, "pos", c->learned_pos ? QKV_POSENC_LEARNED : QKV_POSENC_SINUSOIDAL,
                                c->max_len, d, c->dropout, 0.0f, rng);
        qkv_nn_block_config bc = qkv_nn_block_config_default(d, c->n_heads);
        bc.dim_feedforward = c->d_ff;
        bc.dropout = c->dropout;
        bc.norm_first = true;
        bc.adapter_dim = c->adapter_dim;
        bc.separate_proj = true;
        if (!st) st = qkv_nn_encoder_init(&m->encoder, params, "encoder", &bc, (int)c->n_layers, true, rng);
    }
    if (!st) st = qkv_nn_linear_init(&m->output, params, "output", out_in, c->n_tags, true, rng);
    if (st) {
        free(m);
        return NULL;
    }
    return m;
}

void qkv_tagger_free(qkv_tagger *m) { free(m); }

/* A float32 copy of a batch mask (int32 or float32 [B, T]). */
static qkv_tensor *mask_f32(qkv_ctx *ctx, const qkv_tensor *mask) {
    qkv_tensor *f = qkv_ctx_tensor(ctx, QKV_F32, 2, mask->shape);
    if (!f) return NULL;
    const qkv_tensor *src = mask;
    if (!qkv_is_contiguous(src)) {
        qkv_error_set(QKV_ERR_INVALID, "tagger: the mask must be contiguous");
        return NULL;
    }
    for (int64_t k = 0; k < qkv_numel(f); k++)
        qkv_f32(f)[k] = src->dtype == QKV_I32 ? (float)(qkv_i32(src)[k] != 0) : (float)(qkv_f32(src)[k] != 0.0f);
    return f;
}

static bool check_inputs(const qkv_tagger *m, const qkv_tensor *ids, const qkv_tensor *mask) {
    char s[96];
    if (!m) {
        qkv_error_set(QKV_ERR_INVALID, "tagger: no model");
        return false;
    }
    if (ids->dtype != QKV_I32 || ids->ndim != 2 || ids->shape[1] < 1) {
        qkv_error_set(QKV_ERR_INVALID, "tagger: ids %s must be int32 [batch, time >= 1]",
                      qkv_shape_str(ids, s, sizeof s));
        return false;
    }
    if (mask && (mask->ndim != 2 || mask->shape[0] != ids->shape[0] || mask->shape[1] != ids->shape[1] ||
                 (mask->dtype != QKV_F32 && mask->dtype != QKV_I32))) {
        qkv_error_set(QKV_ERR_INVALID, "tagger: mask %s must be int32 or float32 of the ids' shape",
                      qkv_shape_str(mask, s, sizeof s));
        return false;
    }
    if (m->cfg.encoder == QKV_TAGGER_TRANSFORMER && ids->shape[1] > m->cfg.max_len) {
        qkv_error_set(QKV_ERR_INVALID, "tagger: %lld tokens, more than max_len %lld", (long long)ids->shape[1],
                      (long long)m->cfg.max_len);
        return false;
    }
    return true;
}

qkv_tensor *qkv_tagger_forward(qkv_ctx *ctx, const qkv_tagger *m, qkv_tensor *ids, const qkv_tensor *mask,
                               qkv_tensor **weights) {
    if (!ids || !check_inputs(m, ids, mask)) return NULL;
    int64_t B = ids->shape[0], T = ids->shape[1];
    qkv_tensor *x = qkv_nn_embedding_forward(ctx, &m->embedding, ids);
    if (m->cfg.encoder == QKV_TAGGER_LSTM) {
        qkv_tensor *lengths = NULL;
        if (mask) {
            qkv_tensor *f = mask_f32(ctx, mask);
            if (!f || !(lengths = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B)))) return NULL;
            for (int64_t b = 0; b < B; b++) {
                int32_t n = 0;
                for (int64_t t = 0; t < T; t++) n += qkv_f32(f)[b * T + t] != 0.0f;
                qkv_i32(lengths)[b] = n;
            }
        }
        qkv_tensor *out = NULL;
        if (!x || qkv_rnn_forward(ctx, &m->rnn, x, lengths, NULL, NULL, &out, NULL, NULL)) return NULL;
        x = qkv_dropout(ctx, out, m->cfg.dropout);
    } else {
        qkv_tensor *pad = qkv_nn_padding_of(ctx, mask);
        if (mask && !pad) return NULL;
        qkv_nn_attn_mask am = {.key_padding = pad};
        x = qkv_nn_encoder_forward(ctx, &m->encoder, qkv_nn_posenc_forward(ctx, &m->pos, x, 0), &am, weights);
    }
    return qkv_log_softmax(ctx, qkv_nn_linear_forward(ctx, &m->output, x), -1);
}

qkv_tensor *qkv_tagger_loss(qkv_ctx *ctx, const qkv_tagger *m, qkv_tensor *ids, const qkv_tensor *mask,
                            qkv_tensor *targets) {
    if (!ids || !targets) return NULL;
    if (targets->dtype != QKV_I32 || targets->ndim != 2 || targets->shape[0] != ids->shape[0] ||
        targets->shape[1] != ids->shape[1] || !qkv_is_contiguous(targets)) {
        qkv_error_set(QKV_ERR_INVALID, "tagger: targets must be contiguous int32 of the ids' shape");
        return NULL;
    }
    qkv_tensor *lp = qkv_tagger_forward(ctx, m, ids, mask, NULL);
    if (!lp) return NULL;
    /* Padded positions become ignored targets: the mean is over the sentence tokens alone. */
    qkv_ce_opts o = qkv_ce_defaults();
    qkv_tensor *tg = targets;
    if (mask) {
        qkv_tensor *f = mask_f32(ctx, mask);
        if (!f || !(tg = qkv_ctx_tensor(ctx, QKV_I32, 2, targets->shape))) return NULL;
        for (int64_t k = 0; k < qkv_numel(tg); k++)
            qkv_i32(tg)[k] = qkv_f32(f)[k] != 0.0f ? qkv_i32(targets)[k] : o.ignore_index;
    }
    /* Log-probabilities are valid logits (log_softmax is idempotent). */
    return qkv_cross_entropy(ctx, lp, tg, &o);
}

/* ---- The model type ("tagger") ------------------------------------------------------------------------------- */

typedef struct tagger_opts {
    const char *encoder, *pos_enc;
    int64_t d_model, n_layers, n_heads, d_ff, max_len, adapter_dim;
    bool bidirectional;
    double dropout;
} tagger_opts;

static const qkv_field fields[] = {
    QKV_FIELD_CHOICE(tagger_opts, encoder, "encoder", "lstm", "lstm|transformer", "contextual layers over the tokens"),
    QKV_FIELD_INT(tagger_opts, d_model, "d_model", 128, 1, 1 << 16,
                  "embedding width; LSTM hidden size per direction; Transformer width"),
    QKV_FIELD_INT(tagger_opts, n_layers, "n_layers", 1, 1, QKV_NN_MAX_LAYERS, "LSTM layers or encoder blocks"),
    QKV_FIELD_BOOL(tagger_opts, bidirectional, "bidirectional", true, "lstm: read the sentence both ways"),
    QKV_FIELD_NUM(tagger_opts, dropout, "dropout", 0.0, 0, 1, QKV_FIELD_HI_OPEN,
                  "lstm: between layers and before the output; transformer: in the blocks"),
    QKV_FIELD_INT(tagger_opts, n_heads, "n_heads", 4, 1, 1 << 12, "transformer: attention heads (divide d_model)"),
    QKV_FIELD_INT(tagger_opts, d_ff, "d_ff", 512, 1, 1 << 20, "transformer: feed-forward width"),
    QKV_FIELD_INT(tagger_opts, adapter_dim, "adapter_dim", 0, 0, 1 << 16,
                  "transformer: Houlsby adapter bottleneck in every block (0 = none; finetune.mode adapters)"),
    QKV_FIELD_INT(tagger_opts, max_len, "max_len", 512, 1, 1 << 20, "transformer: longest sentence (positions)"),
    QKV_FIELD_CHOICE(tagger_opts, pos_enc, "pos_enc", "sinusoidal", "sinusoidal|learned", "transformer: positions"),
};

static qkv_status check_opts(const void *p) {
    const tagger_opts *o = p;
    if (!strcmp(o->encoder, "transformer") && o->d_model % o->n_heads)
        return qkv_error_set(QKV_ERR_INVALID, "model.d_model %lld must be a multiple of model.n_heads %lld",
                             (long long)o->d_model, (long long)o->n_heads);
    if (!strcmp(o->encoder, "lstm") && o->n_layers > QKV_RNN_MAX_LAYERS)
        return qkv_error_set(QKV_ERR_INVALID, "model.n_layers %lld: the LSTM takes at most %d",
                             (long long)o->n_layers, QKV_RNN_MAX_LAYERS);
    return QKV_OK;
}

static const qkv_schema schema = QKV_SCHEMA("model", tagger_opts, fields, check_opts);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

static qkv_model *tagger_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    tagger_opts o;
    if (qkv_model_config(&schema, cfg, &o)) return NULL;
    qkv_tagger_config c = qkv_tagger_config_default(info ? info->vocab_size : 0, info ? info->n_classes : 0);
    c.encoder = !strcmp(o.encoder, "transformer") ? QKV_TAGGER_TRANSFORMER : QKV_TAGGER_LSTM;
    c.d_model = o.d_model;
    c.n_layers = o.n_layers;
    c.bidirectional = o.bidirectional;
    c.dropout = (float)o.dropout;
    c.n_heads = o.n_heads;
    c.d_ff = o.d_ff;
    c.adapter_dim = o.adapter_dim;
    c.max_len = o.max_len;
    c.learned_pos = !strcmp(o.pos_enc, "learned");
    if (c.encoder == QKV_TAGGER_TRANSFORMER && info && info->max_len > c.max_len) {
        qkv_error_set(QKV_ERR_INVALID, "model.max_len %lld is shorter than the data's longest sentence %lld",
                      (long long)c.max_len, (long long)info->max_len);
        return NULL;
    }
    return (qkv_model *)qkv_tagger_new(&c, params, rng);
}

static void tagger_free(qkv_model *m) { qkv_tagger_free((qkv_tagger *)m); }

static qkv_tensor *tagger_fwd(qkv_ctx *ctx, qkv_model *mm, const qkv_batch *b, qkv_attention_maps *maps) {
    const qkv_tagger *m = (const qkv_tagger *)mm;
    if (maps) memset(maps, 0, sizeof *maps);
    if (!b || !b->ids) {
        qkv_error_set(QKV_ERR_INVALID, "tagger: the batch has no ids");
        return NULL;
    }
    bool want = maps && m->cfg.encoder == QKV_TAGGER_TRANSFORMER;
    qkv_tensor *w[QKV_NN_MAX_LAYERS] = {0};
    qkv_tensor *out = qkv_tagger_forward(ctx, m, b->ids, b->mask, want ? w : NULL);
    if (out && want) {
        int L = (int)m->cfg.n_layers;
        if (L > QKV_ATTENTION_MAPS_MAX) L = QKV_ATTENTION_MAPS_MAX;
        maps->n_layers = L;
        for (int i = 0; i < L; i++) {
            maps->kind[i] = "self";
            maps->weights[i] = w[i];
        }
    }
    return out;
}

static qkv_tensor *tagger_loss_fn(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b) {
    if (!b || !b->ids || !b->targets) {
        qkv_error_set(QKV_ERR_INVALID, "tagger: the batch needs ids and targets");
        return NULL;
    }
    return qkv_tagger_loss(ctx, (const qkv_tagger *)m, b->ids, b->mask, b->targets);
}

static void tagger_info(const qkv_model *mm, qkv_model_info *out) {
    const qkv_tagger *m = (const qkv_tagger *)mm;
    out->max_positions = m->cfg.encoder == QKV_TAGGER_TRANSFORMER ? m->cfg.max_len : 0;
}

static const qkv_model_embedding embeddings[] = {{"embedding.weight", "input", NULL}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_tagger = {
    .name = "tagger",
    .task = "tagging",
    .summary = "sequence tagger: Embedding -> (Bi)LSTM or Transformer encoder -> Dense -> LogSoftmax per token",
    .config = &schema,
    .default_config = defaults_json,
    /* Case tells names and sentence starts apart; words seen once teach the <unk> row for unseen ones; Brown's
     * longest sentence has 161 tokens (sentences are never cut). */
    .data_defaults = "{\"lowercase\": false, \"min_freq\": 2, \"max_len\": 512}",
    .create = tagger_create,
    .free = tagger_free,
    .loss = tagger_loss_fn,
    .forward = tagger_fwd,
    .embeddings = embeddings,
    .decoder = NULL,
    .info = tagger_info,
};
