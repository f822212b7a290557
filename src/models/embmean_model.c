/* The embedding-mean classifier (embmean.h) as a model type the training engine can drive. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "models/classifier_adapter.h"
#include "qkv/embmean.h"
#include "qkv/error.h"
#include "qkv/model.h"
#include "qkv/schema.h"

typedef struct embmean_opts {
    int64_t dim;
} embmean_opts;

static const qkv_field fields[] = {
    QKV_FIELD_INT(embmean_opts, dim, "dim", 64, 1, 65536, "width of the token embeddings (and of their mean)"),
};
static const qkv_schema schema = QKV_SCHEMA("model", embmean_opts, fields, NULL);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

static qkv_tensor *log_probs(qkv_ctx *ctx, const void *net, const qkv_batch *b, qkv_attention_maps *maps) {
    (void)maps;
    return qkv_embmean_forward(ctx, net, b->ids, b->mask);
}

static const qkv__classifier kind = {.name = "embmean", .logits = log_probs, .free = free, .log_probs = true};

static qkv_model *create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    embmean_opts o;
    if (qkv_model_config(&schema, cfg, &o)) return NULL;
    if (info->n_classes < 2) {
        qkv_error_set(QKV_ERR_INVALID, "embmean: the training data has %lld label(s); a classifier needs >= 2",
                      (long long)info->n_classes);
        return NULL;
    }
    qkv_embmean *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (qkv_embmean_init(m, params, info->vocab_size, o.dim, info->n_classes, rng) != QKV_OK) {
        free(m);
        return NULL;
    }
    return qkv__classifier_model(&kind, m);
}

static const qkv_model_embedding embeddings[] = {{"embedding.weight", "input", NULL}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_embmean = {
    .name = "embmean",
    .task = "classify",
    .summary = "embedding mean -> dense -> log-softmax (the Trax sentiment baseline)",
    .config = &schema,
    .default_config = defaults_json,
    .create = create,
    .free = qkv__classifier_free,
    .loss = qkv__classifier_loss,
    .forward = qkv__classifier_forward,
    .embeddings = embeddings,
};
