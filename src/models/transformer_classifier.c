/* The Transformer-encoder sentence classifier (include/qkv/transformer_classifier.h) and its model-type table.
 * The forward reads like the diagram: embed, add positions, blocks, final norm, take position 0, classify. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/classifier_adapter.h"
#include "qkv/model.h"
#include "qkv/ops.h"
#include "qkv/safetensors.h"
#include "qkv/schema.h"
#include "qkv/transformer_classifier.h"

qkv_tcls_config qkv_tcls_config_default(int64_t vocab_size, int64_t n_classes) {
    return (qkv_tcls_config){.vocab_size = vocab_size, .n_classes = n_classes, .d_model = 128, .n_layers = 2,
                             .n_heads = 4, .d_ff = 512, .max_len = 512, .activation = QKV_ACT_RELU,
                             .norm_first = true, .dropout = 0.1f, .attn_dropout = 0.1f,
                             .pos_enc = QKV_POSENC_SINUSOIDAL, .emb_scale_sqrt_d = true};
}

static qkv_status check_config(const qkv_tcls_config *c) {
    if (c->vocab_size < 1 || c->n_classes < 2)
        return qkv_error_set(QKV_ERR_INVALID, "transformer classifier: vocab_size %lld and n_classes %lld (need >= 1, >= 2)",
                             (long long)c->vocab_size, (long long)c->n_classes);
    if (c->d_model < 1 || c->n_heads < 1 || c->d_model % c->n_heads)
        return qkv_error_set(QKV_ERR_INVALID,
                             "transformer classifier: d_model %lld must be a positive multiple of n_heads %lld",
                             (long long)c->d_model, (long long)c->n_heads);
    if (c->n_layers < 1 || c->n_layers > QKV_TCLS_MAX_LAYERS)
        return qkv_error_set(QKV_ERR_INVALID, "transformer classifier: n_layers %lld outside [1, %d]",
                             (long long)c->n_layers, QKV_TCLS_MAX_LAYERS);
    if (c->d_ff < 1 || c->max_len < 1)
        return qkv_error_set(QKV_ERR_INVALID, "transformer classifier: d_ff %lld and max_len %lld must be positive",
                             (long long)c->d_ff, (long long)c->max_len);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f) || !(c->attn_dropout >= 0.0f && c->attn_dropout < 1.0f))
        return qkv_error_set(QKV_ERR_INVALID, "transformer classifier: dropout %g / attn_dropout %g outside [0, 1)",
                             (double)c->dropout, (double)c->attn_dropout);
    if (c->pretrained && (c->pretrained->dtype != QKV_F32 || c->pretrained->ndim != 2 ||
                          c->pretrained->shape[0] != c->vocab_size || c->pretrained->shape[1] != c->d_model)) {
        char s[96];
        return qkv_error_set(QKV_ERR_INVALID,
                             "transformer classifier: pretrained embeddings %s must be float32 [vocab %lld, d_model "
                             "%lld]",
                             qkv_shape_str(c->pretrained, s, sizeof s), (long long)c->vocab_size,
                             (long long)c->d_model);
    }
    return QKV_OK;
}

qkv_status qkv_tcls_init(qkv_tcls *m, qkv_params *params, const qkv_tcls_config *cfg, qkv_rng *rng) {
    if (!m || !params || !cfg || !rng)
        return qkv_error_set(QKV_ERR_INVALID, "transformer classifier init: model, params, config or rng is NULL");
    memset(m, 0, sizeof *m);
    qkv_status st = check_config(cfg);
    if (st) return st;
    const qkv_tcls_config *c = cfg;
    int64_t d = c->d_model;
    if (c->pretrained) {
        st = qkv_nn_embedding_init_from(&m->embed, params, "embedding", c->pretrained, c->frozen, QKV_NN_NO_PADDING,
                                        c->emb_scale_sqrt_d);
    } else {
        st = qkv_nn_embedding_init(&m->embed, params, "embedding", c->vocab_size, d, QKV_NN_NO_PADDING,
                                   c->emb_scale_sqrt_d, rng);
        if (!st && c->frozen) qkv_tensor_set_requires_grad(m->embed.weight, false);
    }
    if (st || (st = qkv_nn_posenc_init(&m->pos, params, "pos", c->pos_enc, c->max_len, d, c->dropout, 0.0f, rng)))
        return st;
    qkv_nn_block_config bc = qkv_nn_block_config_default(d, c->n_heads);
    bc.dim_feedforward = c->d_ff;
    bc.dropout = c->dropout;
    bc.activation = c->activation;
    bc.norm_first = c->norm_first;
    bc.separate_proj = true;
    bc.adapter_dim = c->adapter_dim;
    if ((st = qkv_nn_encoder_init(&m->encoder, params, "encoder", &bc, (int)c->n_layers, c->norm_first, rng)))
        return st;
    /* The block config has one dropout for everything; the attention weights get their own. */
    for (int i = 0; i < m->encoder.num_layers; i++) m->encoder.layers[i].self_attn.cfg.dropout = c->attn_dropout;
    if ((st = qkv_nn_linear_init(&m->classifier, params, "classifier", d, c->n_classes, true, rng))) return st;
    m->cfg = *c;
    m->cfg.pretrained = NULL; /* copied above; not kept */
    return QKV_OK;
}

/* ---- Forward ----------------------------------------------------------------------------------------------- */

qkv_tensor *qkv_tcls_logits(qkv_ctx *ctx, const qkv_tcls *m, qkv_tensor *ids, const qkv_tensor *pad_mask,
                            qkv_tensor **weights) {
    if (!ids) return NULL;
    if (!m || m->cfg.d_model < 1) {
        qkv_error_set(QKV_ERR_INVALID, "transformer classifier: model is not initialised");
        return NULL;
    }
    if (ids->dtype != QKV_I32 || ids->ndim != 2 || ids->shape[1] < 1 || ids->shape[1] > m->cfg.max_len) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "transformer classifier: ids %s must be int32 [batch, 1..max_len %lld]",
                      qkv_shape_str(ids, s, sizeof s), (long long)m->cfg.max_len);
        return NULL;
    }
    int64_t B = ids->shape[0], T = ids->shape[1];
    qkv_tensor *x = qkv_nn_posenc_forward(ctx, &m->pos, qkv_nn_embedding_forward(ctx, &m->embed, ids), 0);
    /* Only position 0 reaches the classifier: the last block computes it alone unless maps are wanted. */
    qkv_nn_attn_mask mask = {.key_padding = pad_mask};
    x = qkv_nn_encoder_forward_queries(ctx, &m->encoder, x, weights ? T : 1, &mask, weights);
    if (x && x->shape[1] > 1) x = qkv_slice(ctx, x, 1, 0, 1, 1);
    return qkv_nn_linear_forward(ctx, &m->classifier, qkv_reshape(ctx, x, QKV_DIMS(B, m->cfg.d_model)));
}

qkv_tensor *qkv_tcls_features(qkv_ctx *ctx, const qkv_tcls *m, qkv_tensor *ids, const qkv_tensor *pad_mask) {
    if (!ids) return NULL;
    if (ids->dtype != QKV_I32 || ids->ndim != 2 || ids->shape[1] < 1 || ids->shape[1] > m->cfg.max_len) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "transformer classifier: ids %s must be int32 [batch, 1..max_len %lld]",
                      qkv_shape_str(ids, s, sizeof s), (long long)m->cfg.max_len);
        return NULL;
    }
    qkv_tensor *x = qkv_nn_posenc_forward(ctx, &m->pos, qkv_nn_embedding_forward(ctx, &m->embed, ids), 0);
    qkv_nn_attn_mask mask = {.key_padding = pad_mask};
    return qkv_nn_encoder_forward(ctx, &m->encoder, x, &mask, NULL);
}

qkv_tensor *qkv_tcls_forward(qkv_ctx *ctx, const qkv_tcls *m, qkv_tensor *ids, const qkv_tensor *pad_mask,
                             qkv_tensor **weights) {
    return qkv_log_softmax(ctx, qkv_tcls_logits(ctx, m, ids, pad_mask, weights), -1);
}

/* ---- The model type ("transformer_classifier") ------------------------------------------------------------- */

/* The "model" fields, declared once. */
typedef struct tcls_opts {
    int64_t d_model, n_layers, n_heads, d_ff, max_len, adapter_dim;
    const char *activation, *norm, *pos_enc, *pretrained;
    double dropout, attn_dropout;
    bool emb_scale_sqrt_d, frozen;
} tcls_opts;

static const qkv_field fields[] = {
    QKV_FIELD_INT(tcls_opts, d_model, "d_model", 128, 1, 1 << 16, "width of the model"),
    QKV_FIELD_INT(tcls_opts, n_layers, "n_layers", 2, 1, QKV_TCLS_MAX_LAYERS, "encoder blocks"),
    QKV_FIELD_INT(tcls_opts, n_heads, "n_heads", 4, 1, 1 << 12, "attention heads (must divide d_model)"),
    QKV_FIELD_INT(tcls_opts, d_ff, "d_ff", 512, 1, 1 << 20, "inner width of the feed-forward layers"),
    QKV_FIELD_CHOICE(tcls_opts, activation, "activation", "relu", "relu|gelu|gelu_tanh|gelu_new",
                     "feed-forward activation (gelu_new is gelu_tanh)"),
    QKV_FIELD_CHOICE(tcls_opts, norm, "norm", "pre", "pre|post", "layer norm before (pre) or after (post) each sublayer"),
    QKV_FIELD_NUM(tcls_opts, dropout, "dropout", 0.1, 0, 1, QKV_FIELD_HI_OPEN, "dropout on embeddings and sublayers"),
    QKV_FIELD_NUM(tcls_opts, attn_dropout, "attn_dropout", 0.1, 0, 1, QKV_FIELD_HI_OPEN,
                  "dropout on the attention weights"),
    QKV_FIELD_CHOICE(tcls_opts, pos_enc, "pos_enc", "sinusoidal", "sinusoidal|learned", "position encoding"),
    QKV_FIELD_BOOL(tcls_opts, emb_scale_sqrt_d, "emb_scale_sqrt_d", true, "scale embeddings by sqrt(d_model)"),
    QKV_FIELD_INT(tcls_opts, max_len, "max_len", 512, 1, 1 << 20,
                  "longest sequence (positions); at least the data's longest"),
    QKV_FIELD_STR(tcls_opts, pretrained, "embeddings.pretrained", NULL, QKV_FIELD_NULLABLE | QKV_FIELD_PATH,
                  "safetensors [vocab, d_model] matrix in the run's vocabulary order (older than the run's "
                  "\"embeddings\" section)"),
    QKV_FIELD_BOOL(tcls_opts, frozen, "embeddings.frozen", false, "keep the token embeddings fixed"),
    QKV_FIELD_INT(tcls_opts, adapter_dim, "adapter_dim", 0, 0, 1 << 16,
                  "Houlsby adapter bottleneck in every block (0 = none; finetune.mode adapters trains them)"),
};

static qkv_status check_opts(const void *p) {
    const tcls_opts *o = p;
    if (o->d_model % o->n_heads)
        return qkv_error_set(QKV_ERR_INVALID, "model.d_model %lld must be a multiple of model.n_heads %lld",
                             (long long)o->d_model, (long long)o->n_heads);
    return QKV_OK;
}

static const qkv_schema schema = QKV_SCHEMA("model", tcls_opts, fields, check_opts);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

/* The pretrained matrix: the file's only tensor, or the one named "weight" / "embedding.weight". */
static qkv_tensor *load_pretrained(const char *path) {
    qkv_st_file *f = qkv_st_open(path);
    if (!f) return NULL;
    const char *name = NULL;
    if (qkv_st_count(f) == 1) name = qkv_st_name(f, 0);
    else if (qkv_st_find(f, "embedding.weight") >= 0) name = "embedding.weight";
    else if (qkv_st_find(f, "weight") >= 0) name = "weight";
    qkv_tensor *t = NULL;
    if (name) t = qkv_st_read(f, name);
    else qkv_error_set(QKV_ERR_FORMAT, "model.embeddings.pretrained: %s holds %d tensors and none is named 'weight'",
                       path, qkv_st_count(f));
    qkv_st_close(f);
    return t;
}

static qkv_status parse_config(const cJSON *cfg, const qkv_task_info *info, qkv_tcls_config *c, const char **pre) {
    tcls_opts o;
    qkv_status st = qkv_model_config(&schema, cfg, &o);
    if (st) return st;
    *c = qkv_tcls_config_default(info->vocab_size, info->n_classes);
    c->d_model = o.d_model;
    c->n_layers = o.n_layers;
    c->n_heads = o.n_heads;
    c->d_ff = o.d_ff;
    c->max_len = o.max_len;
    c->dropout = (float)o.dropout;
    c->attn_dropout = (float)o.attn_dropout;
    c->emb_scale_sqrt_d = o.emb_scale_sqrt_d;
    c->norm_first = !strcmp(o.norm, "pre");
    c->pos_enc = !strcmp(o.pos_enc, "sinusoidal") ? QKV_POSENC_SINUSOIDAL : QKV_POSENC_LEARNED;
    qkv_activation_parse(o.activation, &c->activation); /* the schema's choices all parse */
    c->frozen = o.frozen;
    c->adapter_dim = o.adapter_dim;
    *pre = o.pretrained && o.pretrained[0] ? o.pretrained : NULL;
    if (info->max_len > c->max_len)
        return qkv_error_set(QKV_ERR_INVALID, "model.max_len %lld is shorter than the data's longest sequence %lld",
                             (long long)c->max_len, (long long)info->max_len);
    return QKV_OK;
}

/* The padding mask of the batch's token mask (NULL without one); false with the error set. */
static bool batch_padding(qkv_ctx *ctx, const qkv_batch *b, qkv_tensor **pad) {
    if (b->mask && (b->mask->ndim != 2 || b->mask->shape[0] != b->ids->shape[0] ||
                    b->mask->shape[1] != b->ids->shape[b->ids->ndim - 1])) {
        qkv_error_set(QKV_ERR_INVALID, "transformer_classifier: batch mask and ids shapes differ");
        return false;
    }
    *pad = qkv_nn_padding_of(ctx, b->mask);
    return !b->mask || *pad;
}

static qkv_tensor *tcls_logits(qkv_ctx *ctx, const void *net, const qkv_batch *b, qkv_attention_maps *maps) {
    const qkv_tcls *m = net;
    qkv_tensor *pad;
    if (!batch_padding(ctx, b, &pad)) return NULL;
    if (!maps) return qkv_tcls_logits(ctx, m, b->ids, pad, NULL);
    int L = (int)m->cfg.n_layers;
    qkv_tensor *weights[QKV_TCLS_MAX_LAYERS] = {0};
    qkv_tensor *out = qkv_tcls_logits(ctx, m, b->ids, pad, weights);
    maps->n_layers = out ? L : 0;
    for (int i = 0; i < L; i++) {
        maps->kind[i] = "self";
        maps->weights[i] = weights[i];
    }
    return out;
}

static const qkv__classifier kind = {.name = "transformer_classifier", .logits = tcls_logits, .free = free};

static qkv_model *tcls_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    if (!cfg || !info || !params || !rng) {
        qkv_error_set(QKV_ERR_INVALID, "transformer_classifier: config, task info, params or rng is NULL");
        return NULL;
    }
    qkv_tcls_config c;
    const char *pre;
    if (parse_config(cfg, info, &c, &pre)) return NULL;
    qkv_tensor *matrix = NULL;
    if (pre && !(matrix = load_pretrained(pre))) return NULL;
    c.pretrained = matrix;
    qkv_tcls *net = calloc(1, sizeof *net);
    qkv_status st = net ? qkv_tcls_init(net, params, &c, rng)
                        : qkv_error_set(QKV_ERR_NOMEM, "transformer_classifier: out of memory");
    qkv_tensor_free(matrix);
    if (st) {
        free(net);
        return NULL;
    }
    return qkv__classifier_model(&kind, net);
}

static qkv_tensor *tcls_features(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b) {
    if (!b || !b->ids) {
        qkv_error_set(QKV_ERR_INVALID, "transformer_classifier: batch has no ids");
        return NULL;
    }
    qkv_tensor *pad;
    if (!batch_padding(ctx, b, &pad)) return NULL;
    return qkv_tcls_features(ctx, qkv__classifier_net(m), b->ids, pad);
}

static void tcls_info(const qkv_model *m, qkv_model_info *out) {
    const qkv_tcls *net = qkv__classifier_net(m);
    out->max_positions = net->cfg.max_len;
    out->features_dim = net->cfg.d_model;
}

/* Word vectors (the run's "embeddings" option) go here; model.embeddings.pretrained is the older way for a
 * safetensors matrix already in the run's vocabulary order. */
static const qkv_model_embedding tcls_embeddings[] = {{"embedding.weight", "input", NULL}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_transformer_classifier = {
    .name = "transformer_classifier",
    .task = "classify",
    .summary = "Transformer encoder (pre/post-LN, sinusoidal or learned positions), classifies from token 0 "
               "([CLS])",
    .config = &schema,
    .default_config = defaults_json,
    .data_defaults = "{\"cls_token\": true}",
    .create = tcls_create,
    .free = qkv__classifier_free,
    .loss = qkv__classifier_loss,
    .forward = qkv__classifier_forward,
    .embeddings = tcls_embeddings,
    .features = tcls_features,
    .info = tcls_info,
};
