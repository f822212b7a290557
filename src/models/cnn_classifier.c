/* Kim (2014)'s convolutional sentence classifier on the combinators, and its model type. See
 * include/qkv/cnn_classifier.h. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/classifier_adapter.h"
#include "qkv/cnn_classifier.h"
#include "qkv/ops.h"
#include "qkv/schema.h"

qkv_cnn_classifier_config qkv_cnn_classifier_config_default(int64_t vocab_size, int64_t n_classes) {
    return (qkv_cnn_classifier_config){.vocab_size = vocab_size, .n_classes = n_classes, .d_model = 128,
                                       .n_filters = 100, .n_widths = 3, .widths = {3, 4, 5}, .wide = true,
                                       .dropout = 0.5f};
}

/* The pooled features of every width side by side; Branch pushed the first width's on top. */
static qkv_status concat_features(qkv_ctx *ctx, qkv_tensor **in, qkv_tensor **out, void *user) {
    out[0] = qkv_concat(ctx, *(const int *)user, in, -1);
    return out[0] ? QKV_OK : qkv_last_status();
}

static qkv_layer *conv_block(qkv_params *params, const qkv_cnn_classifier_config *c, int i, qkv_rng *rng) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "convs.%d", i);
    int64_t k = c->widths[i];
    qkv_layer *conv = qkv_layer_conv1d(params, prefix, c->d_model, c->n_filters, k, c->wide ? k - 1 : 0, rng);
    if (!conv) return NULL;
    return QKV_SERIAL(conv, qkv_layer_activation(QKV_ACT_RELU), qkv_layer_masked_max());
}

typedef struct cnn_model {
    qkv_cnn_classifier net;
    int n_widths; /* concat_features' argument */
} cnn_model;

static qkv_status check_config(const qkv_cnn_classifier_config *c) {
    if (c->vocab_size < 1 || c->n_classes < 2)
        return qkv_error_set(QKV_ERR_INVALID, "cnn_classifier: vocabulary %lld and classes %lld (need >= 1, >= 2)",
                             (long long)c->vocab_size, (long long)c->n_classes);
    if (c->n_widths < 1 || c->n_widths > QKV_CNN_MAX_WIDTHS)
        return qkv_error_set(QKV_ERR_INVALID, "cnn_classifier: %d filter widths, need 1..%d", c->n_widths,
                             QKV_CNN_MAX_WIDTHS);
    for (int i = 0; i < c->n_widths; i++)
        if (c->widths[i] < 1)
            return qkv_error_set(QKV_ERR_INVALID, "cnn_classifier: filter width %lld must be >= 1",
                                 (long long)c->widths[i]);
    return QKV_OK;
}

qkv_cnn_classifier *qkv_cnn_classifier_new(const qkv_cnn_classifier_config *cfg, qkv_params *params,
                                           qkv_rng *rng) {
    if (!cfg || !params || !rng) {
        qkv_error_set(QKV_ERR_INVALID, "cnn_classifier: config, params or rng is NULL");
        return NULL;
    }
    if (check_config(cfg)) return NULL;
    cnn_model *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "cnn_classifier: out of memory");
        return NULL;
    }
    m->net.cfg = *cfg;
    m->n_widths = cfg->n_widths;
    /* One statement a leaf: parameters are added and drawn in this order whatever the compiler. */
    qkv_layer *embedding = qkv_layer_embedding(params, "embedding", cfg->vocab_size, cfg->d_model,
                                               QKV_NN_NO_PADDING, false, rng);
    qkv_layer *blocks[QKV_CNN_MAX_WIDTHS] = {0};
    bool ok = embedding != NULL;
    for (int i = 0; ok && i < cfg->n_widths; i++) ok = (blocks[i] = conv_block(params, cfg, i, rng)) != NULL;
    qkv_layer *branch = ok ? qkv_layer_branch(cfg->n_widths, blocks) : NULL;
    qkv_layer *concat = branch ? qkv_layer_fn("Concat", cfg->n_widths, 1, concat_features, &m->n_widths) : NULL;
    qkv_layer *dropout = concat ? qkv_layer_dropout(cfg->dropout) : NULL;
    qkv_layer *dense = dropout ? qkv_layer_dense(params, "classifier", cfg->n_widths * cfg->n_filters,
                                                 cfg->n_classes, rng)
                               : NULL;
    if (!dense) { /* the failed leaf set the error; Branch frees its children */
        qkv_layer_free(embedding);
        if (!branch)
            for (int i = 0; i < cfg->n_widths; i++) qkv_layer_free(blocks[i]);
        qkv_layer_free(branch);
        qkv_layer_free(concat);
        qkv_layer_free(dropout);
        free(m);
        return NULL;
    }
    if (!(m->net.net = QKV_SERIAL(embedding, branch, concat, dropout, dense))) {
        free(m);
        return NULL;
    }
    return &m->net;
}

void qkv_cnn_classifier_free(qkv_cnn_classifier *m) {
    if (!m) return;
    qkv_layer_free(m->net);
    free((cnn_model *)m);
}

qkv_tensor *qkv_cnn_classifier_logits(qkv_ctx *ctx, const qkv_cnn_classifier *m, qkv_tensor *ids, qkv_tensor *mask) {
    return qkv__classifier_apply(ctx, "cnn_classifier", m ? m->net : NULL, ids, mask);
}

/* ---- The model type ("cnn_classifier") --------------------------------------------------------------------- */

typedef struct cnn_opts {
    int64_t d_model, n_filters;
    const char *widths, *padding;
    double dropout;
} cnn_opts;

static const qkv_field fields[] = {
    QKV_FIELD_INT(cnn_opts, d_model, "d_model", 128, 1, 1 << 16, "embedding width (the filters' input channels)"),
    QKV_FIELD_STR(cnn_opts, widths, "widths", "3,4,5", 0, "filter widths in words, comma-separated (up to 8)"),
    QKV_FIELD_INT(cnn_opts, n_filters, "n_filters", 100, 1, 1 << 16, "filters of each width"),
    QKV_FIELD_CHOICE(cnn_opts, padding, "padding", "wide", "wide|valid",
                     "wide: width - 1 zero steps at both ends (short sentences keep every filter); valid: none"),
    QKV_FIELD_NUM(cnn_opts, dropout, "dropout", 0.5, 0, 1, QKV_FIELD_HI_OPEN, "dropout on the pooled features"),
};

/* "3,4,5" -> widths; an error names the key. */
static qkv_status parse_widths(const char *text, qkv_cnn_classifier_config *c) {
    c->n_widths = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 64 || c->n_widths == QKV_CNN_MAX_WIDTHS || (*end && *end != ','))
            return qkv_error_set(QKV_ERR_INVALID,
                                 "model.widths '%s': expected up to %d comma-separated widths in 1..64, e.g. \"3,4,5\"",
                                 text, QKV_CNN_MAX_WIDTHS);
        c->widths[c->n_widths++] = v;
        p = *end ? end + 1 : end;
    }
    if (!c->n_widths)
        return qkv_error_set(QKV_ERR_INVALID, "model.widths is empty: give at least one filter width, e.g. \"3,4,5\"");
    return QKV_OK;
}

static qkv_status check_opts(const void *p) {
    qkv_cnn_classifier_config c;
    return parse_widths(((const cnn_opts *)p)->widths, &c);
}

static const qkv_schema schema = QKV_SCHEMA("model", cnn_opts, fields, check_opts);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

static qkv_tensor *cnn_logits(qkv_ctx *ctx, const void *net, const qkv_batch *b, qkv_attention_maps *maps) {
    (void)maps;
    return qkv_cnn_classifier_logits(ctx, net, b->ids, b->mask);
}

static void cnn_free(void *net) { qkv_cnn_classifier_free(net); }

static const qkv__classifier kind = {.name = "cnn_classifier", .logits = cnn_logits, .free = cnn_free};

static qkv_model *cnn_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    cnn_opts o;
    if (!info) {
        qkv_error_set(QKV_ERR_INVALID, "cnn_classifier: no task info");
        return NULL;
    }
    if (qkv_model_config(&schema, cfg, &o)) return NULL;
    qkv_cnn_classifier_config c = qkv_cnn_classifier_config_default(info->vocab_size, info->n_classes);
    c.d_model = o.d_model;
    c.n_filters = o.n_filters;
    c.wide = !strcmp(o.padding, "wide");
    c.dropout = (float)o.dropout;
    if (parse_widths(o.widths, &c)) return NULL;
    if (!c.wide)
        for (int i = 0; i < c.n_widths; i++)
            if (info->max_len && c.widths[i] > info->max_len) {
                qkv_error_set(QKV_ERR_INVALID, "model.widths: width %lld is longer than the data's longest "
                              "sequence %lld (use \"padding\": \"wide\")", (long long)c.widths[i],
                              (long long)info->max_len);
                return NULL;
            }
    return qkv__classifier_model(&kind, qkv_cnn_classifier_new(&c, params, rng));
}

static const qkv_model_embedding embeddings[] = {{"embedding.weight", "input", NULL}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_cnn_classifier = {
    .name = "cnn_classifier",
    .task = "classify",
    .summary = "Kim (2014) CNN: embedding -> Conv1d of several widths -> ReLU -> max over time -> dropout -> dense",
    .config = &schema,
    .default_config = defaults_json,
    .create = cnn_create,
    .free = qkv__classifier_free,
    .loss = qkv__classifier_loss,
    .forward = qkv__classifier_forward,
    .embeddings = embeddings,
};
