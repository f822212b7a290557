/* The Trax course's Siamese network on the combinators, and its model type. See include/qkv/siamese.h. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/schema.h"
#include "qkv/siamese.h"

qkv_siamese_config qkv_siamese_config_default(void) {
    return (qkv_siamese_config){.vocab_size = 0, .d_model = 128, .n_layers = 1, .margin = 0.25f,
                                .terms = QKV_TRIPLET_BOTH};
}

qkv_siamese *qkv_siamese_new(const qkv_siamese_config *cfg, qkv_params *params, qkv_rng *rng) {
    if (cfg->vocab_size < 1 || cfg->d_model < 1) {
        qkv_error_set(QKV_ERR_INVALID, "siamese: vocabulary %lld and d_model %lld must be >= 1",
                      (long long)cfg->vocab_size, (long long)cfg->d_model);
        return NULL;
    }
    qkv_siamese *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "siamese: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    qkv_rnn_config rc = qkv_rnn_config_default(QKV_RNN_LSTM, cfg->d_model, cfg->d_model);
    rc.num_layers = cfg->n_layers;
    /* One statement a leaf: parameters are added and drawn in this order whatever the compiler. */
    qkv_layer *embedding = qkv_layer_embedding(params, "embedding", cfg->vocab_size, cfg->d_model,
                                               QKV_NN_NO_PADDING, false, rng);
    qkv_layer *lstm = embedding ? qkv_layer_rnn(params, "rnn", &rc, rng) : NULL;
    qkv_layer *mean = lstm ? qkv_layer_masked_mean() : NULL;
    qkv_layer *normalise = mean ? qkv_layer_l2_normalize(1e-12f) : NULL;
    if (!normalise) { /* the failed leaf set the error */
        qkv_layer_free(embedding);
        qkv_layer_free(lstm);
        qkv_layer_free(mean);
        free(m);
        return NULL;
    }
    qkv_layer *encoder = QKV_SERIAL(embedding, lstm, mean, normalise);
    if (!encoder || !(m->net = QKV_PARALLEL(encoder, qkv_layer_share(encoder)))) {
        free(m);
        return NULL;
    }
    m->encoder = encoder;
    return m;
}

void qkv_siamese_free(qkv_siamese *m) {
    if (!m) return;
    qkv_layer_free(m->net);
    free(m);
}

static bool check_side(const char *which, const qkv_tensor *ids, const qkv_tensor *mask) {
    if (!ids || !mask) return false;
    if (ids->dtype != QKV_I32 || ids->ndim != 2) {
        qkv_error_set(QKV_ERR_INVALID, "siamese: %s ids must be int32 [batch, time]", which);
        return false;
    }
    return true;
}

qkv_tensor *qkv_siamese_encode(qkv_ctx *ctx, const qkv_siamese *m, qkv_tensor *ids, qkv_tensor *mask) {
    qkv_tensor *out[1] = {0};
    if (!check_side("the", ids, mask)) return NULL;
    return qkv_layer_apply(ctx, m->encoder, 2, (qkv_tensor *[]){ids, mask}, out) ? NULL : out[0];
}

qkv_status qkv_siamese_forward(qkv_ctx *ctx, const qkv_siamese *m, qkv_tensor *ids1, qkv_tensor *mask1,
                               qkv_tensor *ids2, qkv_tensor *mask2, qkv_tensor **v1, qkv_tensor **v2) {
    if (!check_side("first", ids1, mask1) || !check_side("second", ids2, mask2))
        return qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_INVALID, "siamese: a side is missing");
    qkv_tensor *out[2] = {0};
    qkv_status st = qkv_layer_apply(ctx, m->net, 4, (qkv_tensor *[]){ids1, mask1, ids2, mask2}, out);
    *v1 = st ? NULL : out[0];
    *v2 = st ? NULL : out[1];
    return st;
}

/* ---- The model type ---------------------------------------------------------------------------------------- */

/* The "model" fields, declared once. */
typedef struct siamese_opts {
    int64_t d_model, n_layers;
    double margin;
    const char *loss;
} siamese_opts;

static const qkv_field fields[] = {
    QKV_FIELD_INT(siamese_opts, d_model, "d_model", 128, 1, 1 << 16, "embedding and LSTM width (the vectors' size)"),
    QKV_FIELD_INT(siamese_opts, n_layers, "n_layers", 1, 1, QKV_RNN_MAX_LAYERS, "stacked LSTM layers"),
    QKV_FIELD_NUM(siamese_opts, margin, "margin", 0.25, 0, 2, 0, "the triplet loss's margin alpha"),
    QKV_FIELD_CHOICE(siamese_opts, loss, "loss", "both", "both|mean|closest",
                     "triplet loss terms: mean negative, closest negative (below the positive), or their sum"),
};

static const qkv_schema schema = QKV_SCHEMA("model", siamese_opts, fields, NULL);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

static qkv_model *siamese_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    siamese_opts o;
    if (qkv_model_config(&schema, cfg, &o)) return NULL;
    qkv_siamese_config c = qkv_siamese_config_default();
    c.vocab_size = info ? info->vocab_size : 0;
    c.d_model = o.d_model;
    c.n_layers = (int)o.n_layers;
    c.margin = (float)o.margin;
    c.terms = !strcmp(o.loss, "mean")      ? QKV_TRIPLET_MEAN_NEGATIVE
              : !strcmp(o.loss, "closest") ? QKV_TRIPLET_CLOSEST_NEGATIVE
                                           : QKV_TRIPLET_BOTH;
    return (qkv_model *)qkv_siamese_new(&c, params, rng);
}

static void siamese_destroy(qkv_model *m) { qkv_siamese_free((qkv_siamese *)m); }

static qkv_tensor *siamese_fwd(qkv_ctx *ctx, qkv_model *mm, const qkv_batch *b, qkv_attention_maps *maps) {
    if (maps) memset(maps, 0, sizeof *maps);
    const qkv_siamese *m = (const qkv_siamese *)mm;
    int64_t B = b->ids ? b->ids->shape[0] : 0, D = m->cfg.d_model;
    if (!b->src_ids) {
        qkv_tensor *v = qkv_siamese_encode(ctx, m, b->ids, b->mask);
        return v ? qkv_reshape(ctx, v, QKV_DIMS(1, B, D)) : NULL;
    }
    qkv_tensor *v1 = NULL, *v2 = NULL;
    if (qkv_siamese_forward(ctx, m, b->ids, b->mask, b->src_ids, b->src_mask, &v1, &v2)) return NULL;
    return qkv_stack(ctx, 2, (qkv_tensor *[]){v1, v2}, 0);
}

/* Every row is a duplicate pair and the other rows' second texts its negatives (the engine trains on duplicates). A
 * batch of one pair has no negative: its loss is 0 (kept on the tape, so a step on it is a step of zeros). */
static qkv_tensor *siamese_loss(qkv_ctx *ctx, qkv_model *mm, const qkv_batch *b) {
    const qkv_siamese *m = (const qkv_siamese *)mm;
    if (!b->src_ids) {
        qkv_error_set(QKV_ERR_INVALID, "siamese: the batch has no second texts (src_ids)");
        return NULL;
    }
    qkv_tensor *v1 = NULL, *v2 = NULL;
    if (qkv_siamese_forward(ctx, m, b->ids, b->mask, b->src_ids, b->src_mask, &v1, &v2)) return NULL;
    if (v1->shape[0] < 2)
        return qkv_reshape(ctx, qkv_scale(ctx, qkv_sum_all(ctx, qkv_mul(ctx, v1, v2)), 0.0f), QKV_DIMS(1));
    return qkv_triplet_loss(ctx, v1, v2, m->cfg.margin, m->cfg.terms);
}

static const qkv_model_embedding embeddings[] = {{"embedding.weight", "input", NULL}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_siamese = {
    .name = "siamese",
    .task = "pairs",
    .summary = "Trax-style Siamese network: Parallel(encoder, encoder) sharing one Embedding -> LSTM -> mean -> "
               "L2 normalise; triplet loss",
    .config = &schema,
    .default_config = defaults_json,
    .create = siamese_create,
    .free = siamese_destroy,
    .loss = siamese_loss,
    .forward = siamese_fwd,
    .embeddings = embeddings,
};
