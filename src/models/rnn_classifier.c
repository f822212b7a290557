/* A recurrent sentence classifier on the combinators, and its model type. See include/qkv/rnn_classifier.h. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "models/classifier_adapter.h"
#include "qkv/ops.h"
#include "qkv/rnn_classifier.h"
#include "qkv/schema.h"

qkv_rnn_classifier_config qkv_rnn_classifier_config_default(int64_t vocab_size, int64_t n_classes) {
    return (qkv_rnn_classifier_config){.vocab_size = vocab_size, .n_classes = n_classes, .d_model = 128,
                                       .hidden = 128, .cell = QKV_RNN_LSTM, .n_layers = 1,
                                       .pool = QKV_RNN_POOL_LAST, .dropout = 0.0f};
}

static bool is_token(const qkv_tensor *m, int64_t b, int64_t t) {
    int64_t off = b * m->stride[0] + t * m->stride[1];
    return m->dtype == QKV_I32 ? qkv_i32(m)[off] != 0 : qkv_f32(m)[off] != 0.0f;
}

/* (states [B, T, H], token mask [B, T]) -> the state at each row's last token [B, H] (zeros for a row without
 * one), as a weighted sum over time with weight 1 there: the gradient reaches that one step. */
static qkv_status last_state(qkv_ctx *ctx, qkv_tensor **in, qkv_tensor **out, void *user) {
    (void)user;
    qkv_tensor *x = in[0], *mask = in[1];
    if (x->ndim != 3 || mask->ndim != 2 || mask->shape[0] != x->shape[0] || mask->shape[1] != x->shape[1] ||
        (mask->dtype != QKV_I32 && mask->dtype != QKV_F32))
        return qkv_error_set(QKV_ERR_INVALID, "rnn_classifier: states and token mask disagree in shape");
    int64_t B = x->shape[0], T = x->shape[1];
    qkv_tensor *w = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, T, 1));
    if (!w) return qkv_last_status();
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = T - 1; t >= 0; t--)
            if (is_token(mask, b, t)) {
                qkv_f32(w)[b * T + t] = 1.0f;
                break;
            }
    out[0] = qkv_sum(ctx, qkv_mul(ctx, x, w), 1, false);
    return out[0] ? QKV_OK : qkv_last_status();
}

static qkv_status check_config(const qkv_rnn_classifier_config *c) {
    if (c->vocab_size < 1 || c->n_classes < 2)
        return qkv_error_set(QKV_ERR_INVALID, "rnn_classifier: vocabulary %lld and classes %lld (need >= 1, >= 2)",
                             (long long)c->vocab_size, (long long)c->n_classes);
    if ((unsigned)c->pool > QKV_RNN_POOL_MAX)
        return qkv_error_set(QKV_ERR_INVALID, "rnn_classifier: unknown pooling %d", (int)c->pool);
    return QKV_OK;
}

qkv_rnn_classifier *qkv_rnn_classifier_new(const qkv_rnn_classifier_config *cfg, qkv_params *params,
                                           qkv_rng *rng) {
    if (!cfg || !params || !rng) {
        qkv_error_set(QKV_ERR_INVALID, "rnn_classifier: config, params or rng is NULL");
        return NULL;
    }
    if (check_config(cfg)) return NULL;
    qkv_rnn_classifier *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "rnn_classifier: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    qkv_rnn_config rc = qkv_rnn_config_default(cfg->cell, cfg->d_model, cfg->hidden);
    rc.num_layers = cfg->n_layers;
    /* One statement a leaf: parameters are added and drawn in this order whatever the compiler. */
    qkv_layer *embedding = qkv_layer_embedding(params, "embedding", cfg->vocab_size, cfg->d_model,
                                               QKV_NN_NO_PADDING, false, rng);
    qkv_layer *rnn = embedding ? qkv_layer_rnn(params, "rnn", &rc, rng) : NULL;
    qkv_layer *pool = !rnn                              ? NULL
                      : cfg->pool == QKV_RNN_POOL_LAST ? qkv_layer_fn("LastState", 2, 1, last_state, NULL)
                      : cfg->pool == QKV_RNN_POOL_MEAN ? qkv_layer_masked_mean()
                                                       : qkv_layer_masked_max();
    qkv_layer *dropout = pool ? qkv_layer_dropout(cfg->dropout) : NULL;
    qkv_layer *dense = dropout ? qkv_layer_dense(params, "classifier", cfg->hidden, cfg->n_classes, rng) : NULL;
    if (!dense) { /* the failed leaf set the error */
        qkv_layer_free(embedding);
        qkv_layer_free(rnn);
        qkv_layer_free(pool);
        qkv_layer_free(dropout);
        free(m);
        return NULL;
    }
    if (!(m->net = QKV_SERIAL(embedding, rnn, pool, dropout, dense))) {
        free(m);
        return NULL;
    }
    return m;
}

void qkv_rnn_classifier_free(qkv_rnn_classifier *m) {
    if (!m) return;
    qkv_layer_free(m->net);
    free(m);
}

qkv_tensor *qkv_rnn_classifier_logits(qkv_ctx *ctx, const qkv_rnn_classifier *m, qkv_tensor *ids, qkv_tensor *mask) {
    return qkv__classifier_apply(ctx, "rnn_classifier", m ? m->net : NULL, ids, mask);
}

/* ---- The model type ("rnn_classifier") --------------------------------------------------------------------- */

typedef struct rnn_opts {
    const char *cell, *pool;
    int64_t d_model, hidden, n_layers;
    double dropout;
} rnn_opts;

static const qkv_field fields[] = {
    QKV_FIELD_CHOICE(rnn_opts, cell, "cell", "lstm", "rnn|lstm|gru", "recurrent cell (rnn: vanilla, tanh)"),
    QKV_FIELD_INT(rnn_opts, d_model, "d_model", 128, 1, 1 << 16, "embedding width"),
    QKV_FIELD_INT(rnn_opts, hidden, "hidden", 128, 1, 1 << 16, "recurrent state width"),
    QKV_FIELD_INT(rnn_opts, n_layers, "n_layers", 1, 1, QKV_RNN_MAX_LAYERS, "stacked recurrent layers"),
    QKV_FIELD_CHOICE(rnn_opts, pool, "pool", "last", "last|mean|max",
                     "what the classifier reads: the state after the last token, or the mean / max of all states"),
    QKV_FIELD_NUM(rnn_opts, dropout, "dropout", 0.0, 0, 1, QKV_FIELD_HI_OPEN, "dropout on the pooled state"),
};

static const qkv_schema schema = QKV_SCHEMA("model", rnn_opts, fields, NULL);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

static qkv_tensor *rnn_logits(qkv_ctx *ctx, const void *net, const qkv_batch *b, qkv_attention_maps *maps) {
    (void)maps;
    return qkv_rnn_classifier_logits(ctx, net, b->ids, b->mask);
}

static void rnn_free(void *net) { qkv_rnn_classifier_free(net); }

static const qkv__classifier kind = {.name = "rnn_classifier", .logits = rnn_logits, .free = rnn_free};

static qkv_model *rnn_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    rnn_opts o;
    if (!info) {
        qkv_error_set(QKV_ERR_INVALID, "rnn_classifier: no task info");
        return NULL;
    }
    if (qkv_model_config(&schema, cfg, &o)) return NULL;
    qkv_rnn_classifier_config c = qkv_rnn_classifier_config_default(info->vocab_size, info->n_classes);
    c.cell = !strcmp(o.cell, "rnn") ? QKV_RNN_TANH : !strcmp(o.cell, "gru") ? QKV_RNN_GRU : QKV_RNN_LSTM;
    c.pool = !strcmp(o.pool, "mean") ? QKV_RNN_POOL_MEAN : !strcmp(o.pool, "max") ? QKV_RNN_POOL_MAX : QKV_RNN_POOL_LAST;
    c.d_model = o.d_model;
    c.hidden = o.hidden;
    c.n_layers = (int)o.n_layers;
    c.dropout = (float)o.dropout;
    return qkv__classifier_model(&kind, qkv_rnn_classifier_new(&c, params, rng));
}

static const qkv_model_embedding embeddings[] = {{"embedding.weight", "input", NULL}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_rnn_classifier = {
    .name = "rnn_classifier",
    .task = "classify",
    .summary = "recurrent classifier: embedding -> vanilla RNN, LSTM or GRU -> last state (or mean / max) -> dense",
    .config = &schema,
    .default_config = defaults_json,
    .create = rnn_create,
    .free = qkv__classifier_free,
    .loss = qkv__classifier_loss,
    .forward = qkv__classifier_forward,
    .embeddings = embeddings,
};
