/* Fine-tuning heads on the BERT encoder, as Hugging Face's BertForSequenceClassification and
 * BertForTokenClassification: model types "bert_classifier" (task classify: dropout + "classifier" Linear over the
 * pooled [CLS] state; a sentence pair's segment ids come with the batch) and "bert_tagger" (task tagging: dropout +
 * "classifier" over every token's last hidden state). The encoder's parameters keep HF's "bert." names, so
 * finetune.init_from takes them from a bert run or a Hugging Face directory and leaves the pretraining heads unused;
 * both types also expose the encoder's states as features (the qa task's head). */
#include <stdlib.h>
#include <string.h>

#include "models/bert_internal.h"
#include "qkv/ops.h"

struct qkv_model {
    qkv_bert_config cfg;
    qkv_hf_model *enc;
    qkv_nn_linear classifier;
    bool per_token; /* bert_tagger */
};

static qkv_model *heads_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng,
                               bool per_token) {
    if (!info || !params || !rng) {
        qkv_error_set(QKV_ERR_INVALID, "bert heads: task info, params or rng is NULL");
        return NULL;
    }
    if (info->n_classes < 1) {
        qkv_error_set(QKV_ERR_INVALID, "bert heads: the task has no classes");
        return NULL;
    }
    qkv_model *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "bert heads: out of memory");
        return NULL;
    }
    m->per_token = per_token;
    qkv_status st = qkv__bert_config_from(&qkv__bert_encoder_schema, cfg, info, &m->cfg);
    if (!st && !(m->enc = qkv__bert_encoder_new(&m->cfg, params, rng))) st = qkv_last_status();
    qkv_hf_model head = {.cfg = m->enc ? m->enc->cfg : (qkv_hf_config){0}, .params = params};
    if (!st) st = qkv__hf_add_linear(&head, &m->classifier, "classifier", m->cfg.hidden_size, info->n_classes, true);
    if (st) {
        qkv_hf_free(m->enc);
        free(m);
        return NULL;
    }
    qkv_rng_fill_normal(rng, m->classifier.weight, 0.0f, m->cfg.initializer_range);
    return m;
}

static qkv_model *cls_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    return heads_create(cfg, info, params, rng, false);
}

static qkv_model *tag_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    return heads_create(cfg, info, params, rng, true);
}

static void heads_free(qkv_model *m) {
    if (!m) return;
    qkv_hf_free(m->enc);
    free(m);
}

static qkv_status encode(qkv_ctx *ctx, const qkv_model *m, const qkv_batch *b, bool maps, qkv_hf_outputs *o) {
    if (!b || !b->ids) return qkv_error_set(QKV_ERR_INVALID, "bert heads: batch has no ids");
    qkv_bert_inputs in = {.ids = b->ids, .type_ids = b->type_ids, .mask = b->mask};
    return qkv__bert_encode(ctx, m->enc, &m->cfg, &in, maps, o);
}

/* Logits: [B, C] from the pooled [CLS] state, or [B, T, C] per token. */
static qkv_tensor *logits(qkv_ctx *ctx, const qkv_model *m, const qkv_batch *b, qkv_attention_maps *maps) {
    qkv_hf_outputs o;
    if (encode(ctx, m, b, maps != NULL, &o)) return NULL;
    if (maps) qkv__bert_maps(&o, maps);
    qkv_tensor *h = m->per_token ? o.last_hidden_state : o.pooler_output;
    if (m->cfg.hidden_dropout > 0.0f) h = qkv_dropout(ctx, h, m->cfg.hidden_dropout);
    return qkv_nn_linear_forward(ctx, &m->classifier, h);
}

/* classify: log-probabilities [B, C]; tagging: [B, T, C]. */
static qkv_tensor *heads_forward(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b, qkv_attention_maps *maps) {
    qkv_tensor *z = logits(ctx, m, b, maps);
    return z ? qkv_log_softmax(ctx, z, z->ndim - 1) : NULL;
}

static qkv_tensor *heads_loss(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b) {
    if (!b || (m->per_token ? !b->targets : !b->labels)) {
        qkv_error_set(QKV_ERR_INVALID, "%s: the batch has no %s", m->per_token ? "bert_tagger" : "bert_classifier",
                      m->per_token ? "targets" : "labels");
        return NULL;
    }
    qkv_tensor *z = logits(ctx, m, b, NULL);
    if (!z) return NULL;
    if (!m->per_token) return qkv_cross_entropy(ctx, z, b->labels, NULL);
    /* Padded positions become ignored targets: the mean is over the sentences' tokens alone. */
    qkv_ce_opts o = qkv_ce_defaults();
    qkv_tensor *tg = b->targets;
    if (b->mask) {
        if (!(tg = qkv_ctx_tensor(ctx, QKV_I32, 2, b->targets->shape))) return NULL;
        for (int64_t k = 0; k < qkv_numel(tg); k++) {
            bool on = b->mask->dtype == QKV_I32 ? qkv_i32(b->mask)[k] != 0 : qkv_f32(b->mask)[k] != 0.0f;
            qkv_i32(tg)[k] = on ? qkv_i32(b->targets)[k] : o.ignore_index;
        }
    }
    return qkv_cross_entropy(ctx, z, tg, &o);
}

static qkv_tensor *heads_features(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b) {
    qkv_hf_outputs o;
    return encode(ctx, m, b, false, &o) ? NULL : o.last_hidden_state;
}

static void heads_info(const qkv_model *m, qkv_model_info *out) {
    out->max_positions = m->cfg.max_positions;
    out->features_dim = m->cfg.hidden_size;
}

static const qkv_model_embedding embeddings[] = {
    {"bert.embeddings.word_embeddings.weight", "input", NULL}, {NULL, NULL, NULL}};

static char cls_defaults[QKV_MODEL_DEFAULTS_MAX], tag_defaults[QKV_MODEL_DEFAULTS_MAX];

const qkv_model_type qkv_model_bert_classifier = {
    .name = "bert_classifier",
    .task = "classify",
    .summary = "BERT encoder + classifier on the pooled [CLS] state (BertForSequenceClassification names)",
    .config = &qkv__bert_encoder_schema,
    .default_config = cls_defaults,
    .data_defaults = "{\"cls_token\": true}",
    .create = cls_create,
    .free = heads_free,
    .loss = heads_loss,
    .forward = heads_forward,
    .embeddings = embeddings,
    .features = heads_features,
    .info = heads_info,
};

const qkv_model_type qkv_model_bert_tagger = {
    .name = "bert_tagger",
    .task = "tagging",
    .summary = "BERT encoder + per-token classifier (BertForTokenClassification names)",
    .config = &qkv__bert_encoder_schema,
    .default_config = tag_defaults,
    .data_defaults = "{\"lowercase\": false, \"min_freq\": 2, \"max_len\": 512}",
    .create = tag_create,
    .free = heads_free,
    .loss = heads_loss,
    .forward = heads_forward,
    .embeddings = embeddings,
    .features = heads_features,
    .info = heads_info,
};
