/* The Trax course's recurrent LM (ShiftRight -> Embedding -> n x GRU/LSTM -> Dense -> LogSoftmax) and its
 * state-carrying decoder. See include/qkv/rnnlm.h. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/ops.h"
#include "qkv/schema.h"
#include "qkv/rnnlm.h"
#include "loss_weights.h"

qkv_rnnlm_config qkv_rnnlm_config_default(void) {
    return (qkv_rnnlm_config){.vocab_size = 256, .d_model = 512, .n_layers = 2, .kind = QKV_RNN_GRU,
                              .dropout = 0.0f, .shift_right = true, .start_id = 0};
}

qkv_rnnlm *qkv_rnnlm_new(const qkv_rnnlm_config *cfg, qkv_params *params, qkv_rng *rng) {
    if (cfg->kind != QKV_RNN_GRU && cfg->kind != QKV_RNN_LSTM) {
        qkv_error_set(QKV_ERR_INVALID, "rnnlm: the recurrent layer must be a GRU or an LSTM");
        return NULL;
    }
    if (cfg->start_id < 0 || cfg->start_id >= cfg->vocab_size) {
        qkv_error_set(QKV_ERR_INVALID, "rnnlm: start_id %d outside the vocabulary [0, %lld)", (int)cfg->start_id,
                      (long long)cfg->vocab_size);
        return NULL;
    }
    qkv_rnnlm *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "rnnlm: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    qkv_rnn_config rc = qkv_rnn_config_default(cfg->kind, cfg->d_model, cfg->d_model);
    rc.num_layers = cfg->n_layers;
    rc.dropout = cfg->dropout;
    /* One statement a leaf: parameters are added and drawn in this order whatever the compiler. */
    qkv_layer *embedding = qkv_layer_embedding(params, "embedding", cfg->vocab_size, cfg->d_model,
                                               QKV_NN_NO_PADDING, false, rng);
    qkv_layer *rnn = embedding ? qkv_layer_rnn(params, "rnn", &rc, rng) : NULL;
    qkv_layer *output = rnn ? qkv_layer_dense(params, "output", cfg->d_model, cfg->vocab_size, rng) : NULL;
    qkv_layer *log_softmax = output ? qkv_layer_log_softmax() : NULL;
    if (!log_softmax) { /* the failed leaf set the error */
        qkv_layer_free(embedding);
        qkv_layer_free(rnn);
        qkv_layer_free(output);
        free(m);
        return NULL;
    }
    if (!(m->net = QKV_SERIAL(embedding, rnn, output, log_softmax))) {
        free(m);
        return NULL;
    }
    m->embedding = *(const qkv_nn_embedding *)embedding->state;
    m->rnn = *(const qkv_rnn *)rnn->state;
    m->output = *(const qkv_nn_linear *)output->state;
    return m;
}

void qkv_rnnlm_free(qkv_rnnlm *m) {
    if (!m) return;
    qkv_layer_free(m->net);
    free(m);
}

qkv_tensor *qkv_rnnlm_forward(qkv_ctx *ctx, const qkv_rnnlm *m, qkv_tensor *inputs) {
    if (!inputs) return NULL;
    if (inputs->dtype != QKV_I32 || inputs->ndim != 2) {
        qkv_error_set(QKV_ERR_INVALID, "rnnlm: inputs must be int32 [batch, time]");
        return NULL;
    }
    return qkv_layer_call(ctx, m->net, inputs);
}

/* ---- Decoding with carried state ------------------------------------------------------------------------ */

struct qkv_rnnlm_decoder {
    const qkv_rnnlm *m;
    int batch, cap; /* rows now, rows the state holds (reorder can drop and fan out rows) */
    float *h, *c;  /* [n_layers, cap, d] each, the first batch rows of each layer in use */
    float *moved;  /* [batch, d] scratch of reorder */
    qkv_ctx *ctx;  /* grad off; reset every step, so a step allocates nothing after the first */
};

qkv_rnnlm_decoder *qkv_rnnlm_decoder_new(const qkv_rnnlm *m, int batch) {
    if (!m || batch < 1) {
        qkv_error_set(QKV_ERR_INVALID, "rnnlm decoder: batch %d must be >= 1", batch);
        return NULL;
    }
    size_t n = (size_t)m->cfg.n_layers * (size_t)batch * (size_t)m->cfg.d_model;
    qkv_rnnlm_decoder *d = calloc(1, sizeof *d);
    if (d) {
        d->h = calloc(n, sizeof(float));
        d->c = calloc(n, sizeof(float));
        d->moved = malloc(sizeof(float) * (size_t)batch * (size_t)m->cfg.d_model); /* batch = cap */
        d->ctx = qkv_ctx_new();
    }
    if (!d || !d->h || !d->c || !d->moved || !d->ctx) {
        qkv_rnnlm_decoder_free(d);
        qkv_error_set(QKV_ERR_NOMEM, "rnnlm decoder: out of memory");
        return NULL;
    }
    d->m = m;
    d->batch = d->cap = batch;
    qkv_ctx_set_grad(d->ctx, false);
    qkv_ctx_set_training(d->ctx, false);
    return d;
}

void qkv_rnnlm_decoder_free(qkv_rnnlm_decoder *d) {
    if (!d) return;
    free(d->h);
    free(d->c);
    free(d->moved);
    qkv_ctx_free(d->ctx);
    free(d);
}

void qkv_rnnlm_decoder_reset(qkv_rnnlm_decoder *d) {
    size_t n = (size_t)d->m->cfg.n_layers * (size_t)d->cap * (size_t)d->m->cfg.d_model;
    memset(d->h, 0, n * sizeof(float));
    memset(d->c, 0, n * sizeof(float));
}

/* A context tensor [B, D] holding a copy of state row block `src`. */
static qkv_tensor *state_tensor(qkv_ctx *ctx, const float *src, int64_t B, int64_t D) {
    qkv_tensor *t = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(B, D));
    if (t) memcpy(t->data, src, sizeof(float) * (size_t)(B * D));
    return t;
}

qkv_status qkv_rnnlm_decoder_step(qkv_rnnlm_decoder *d, const int32_t *tokens, float *logprobs) {
    const qkv_rnnlm *m = d->m;
    int64_t B = d->batch, D = m->cfg.d_model, V = m->cfg.vocab_size;
    for (int64_t b = 0; b < B; b++)
        if (tokens[b] < 0 || tokens[b] >= V)
            return qkv_error_set(QKV_ERR_RANGE, "rnnlm decoder: token %d outside [0, %lld)", (int)tokens[b],
                                 (long long)V);
    qkv_ctx *ctx = d->ctx;
    qkv_ctx_reset(ctx);
    qkv_tensor *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B));
    if (!ids) return qkv_last_status();
    memcpy(ids->data, tokens, sizeof(int32_t) * (size_t)B);
    qkv_tensor *x = qkv_nn_embedding_forward(ctx, &m->embedding, ids);
    const qkv_rnn *r = &m->rnn;
    for (int l = 0; l < m->cfg.n_layers && x; l++) {
        float *hl = d->h + (size_t)l * d->cap * D, *cl = d->c + (size_t)l * d->cap * D;
        qkv_tensor *h = state_tensor(ctx, hl, B, D), *hn = NULL, *cn = NULL;
        if (m->cfg.kind == QKV_RNN_GRU) {
            hn = qkv_gru_cell(ctx, x, h, r->w_ih[l][0], r->w_hh[l][0], r->b_ih[l][0], r->b_hh[l][0]);
        } else {
            qkv_tensor *c = state_tensor(ctx, cl, B, D);
            if (qkv_lstm_cell(ctx, x, h, c, r->w_ih[l][0], r->w_hh[l][0], r->b_ih[l][0], r->b_hh[l][0], &hn, &cn))
                return qkv_last_status();
            if (cn) memcpy(cl, qkv_contiguous(ctx, cn)->data, sizeof(float) * (size_t)(B * D));
        }
        if (!hn || !(hn = qkv_contiguous(ctx, hn))) return qkv_last_status();
        memcpy(hl, hn->data, sizeof(float) * (size_t)(B * D));
        x = hn;
    }
    qkv_tensor *lp = qkv_contiguous(ctx, qkv_log_softmax(ctx, qkv_nn_linear_forward(ctx, &m->output, x), -1));
    if (!lp) return qkv_last_status();
    memcpy(logprobs, lp->data, sizeof(float) * (size_t)(B * V));
    return QKV_OK;
}

qkv_status qkv_rnnlm_decoder_reorder(qkv_rnnlm_decoder *d, const int32_t *from, int n_rows) {
    int64_t B = n_rows, D = d->m->cfg.d_model;
    if (n_rows < 1 || n_rows > d->cap)
        return qkv_error_set(QKV_ERR_RANGE, "rnnlm decoder: reorder to %d rows (the state holds 1..%d)", n_rows,
                             d->cap);
    for (int64_t b = 0; b < B; b++)
        if (from[b] < 0 || from[b] >= d->batch)
            return qkv_error_set(QKV_ERR_RANGE, "rnnlm decoder: reorder row %d outside [0, %d)", (int)from[b],
                                 d->batch);
    size_t row = sizeof(float) * (size_t)D;
    for (int l = 0; l < d->m->cfg.n_layers; l++)
        for (int which = 0; which < 2; which++) {
            float *s = (which ? d->c : d->h) + (size_t)l * (size_t)d->cap * (size_t)D;
            for (int64_t b = 0; b < B; b++) memcpy(d->moved + b * D, s + from[b] * D, row);
            memcpy(s, d->moved, row * (size_t)B);
        }
    d->batch = n_rows;
    return QKV_OK;
}

/* The model type's decoder: the one above; a model trained on ShiftRight(text) reads its start id first. */
static void rnnlm_dec_info(const qkv_model *mm, qkv_decoder_info *out) {
    const qkv_rnnlm *m = (const qkv_rnnlm *)mm;
    *out = (qkv_decoder_info){.vocab = m->cfg.vocab_size, .capacity = 0, .log_probs = true,
                              .start_token = m->cfg.shift_right ? m->cfg.start_id : -1};
}

static qkv_decoder_state *rnnlm_dec_start(const qkv_model *mm, const int32_t *src, const int32_t *lengths,
                                          int n_src, int src_len, int rows_per_src, int max_steps) {
    if (src || lengths || src_len != 0 || n_src < 1 || rows_per_src < 1 || max_steps < 0) {
        qkv_error_set(QKV_ERR_INVALID, "rnnlm decoder: takes no source and needs >= 1 rows (got %d x %d rows, "
                      "source length %d, %d steps)", n_src, rows_per_src, src_len, max_steps);
        return NULL;
    }
    return (qkv_decoder_state *)qkv_rnnlm_decoder_new((const qkv_rnnlm *)mm, n_src * rows_per_src);
}

static qkv_status rnnlm_dec_step(qkv_decoder_state *st, const int32_t *tokens, float *scores, float *attn) {
    (void)attn;
    return qkv_rnnlm_decoder_step((qkv_rnnlm_decoder *)st, tokens, scores);
}

static qkv_status rnnlm_dec_reorder(qkv_decoder_state *st, const int32_t *from, int n_rows) {
    return qkv_rnnlm_decoder_reorder((qkv_rnnlm_decoder *)st, from, n_rows);
}

static void rnnlm_dec_free(qkv_decoder_state *st) { qkv_rnnlm_decoder_free((qkv_rnnlm_decoder *)st); }

static const qkv_decoder_ops rnnlm_decoder_ops = {
    .info = rnnlm_dec_info, .start = rnnlm_dec_start, .step = rnnlm_dec_step, .reorder = rnnlm_dec_reorder,
    .free = rnnlm_dec_free};

/* ---- The model type ---------------------------------------------------------------------------------------- */

/* The "model" fields, declared once. */
typedef struct rnnlm_opts {
    const char *rnn;
    int64_t d_model, n_layers, start_id;
    double dropout;
    bool shift_right;
} rnnlm_opts;

static const qkv_field fields[] = {
    QKV_FIELD_CHOICE(rnnlm_opts, rnn, "rnn", "gru", "gru|lstm", "recurrent cell"),
    QKV_FIELD_INT(rnnlm_opts, d_model, "d_model", 512, 1, 1 << 16, "embedding and hidden width"),
    QKV_FIELD_INT(rnnlm_opts, n_layers, "n_layers", 2, 1, QKV_RNN_MAX_LAYERS, "stacked recurrent layers"),
    QKV_FIELD_NUM(rnnlm_opts, dropout, "dropout", 0.0, 0, 1, QKV_FIELD_HI_OPEN, "dropout between layers"),
    QKV_FIELD_BOOL(rnnlm_opts, shift_right, "shift_right", true,
                   "the model reads its targets shifted right (start id first), as Trax's ShiftRight"),
    QKV_FIELD_INT(rnnlm_opts, start_id, "start_id", 0, 0, 1 << 30, "id fed at the first position by shift_right"),
};

static const qkv_schema schema = QKV_SCHEMA("model", rnnlm_opts, fields, NULL);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

static qkv_model *rnnlm_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    rnnlm_opts o;
    if (qkv_model_config(&schema, cfg, &o)) return NULL;
    qkv_rnnlm_config c = qkv_rnnlm_config_default();
    c.vocab_size = info ? info->vocab_size : 0;
    c.kind = !strcmp(o.rnn, "lstm") ? QKV_RNN_LSTM : QKV_RNN_GRU;
    c.d_model = o.d_model;
    c.n_layers = (int)o.n_layers;
    c.dropout = (float)o.dropout;
    c.shift_right = o.shift_right;
    c.start_id = (int32_t)o.start_id;
    return (qkv_model *)qkv_rnnlm_new(&c, params, rng);
}

static void rnnlm_free(qkv_model *m) { qkv_rnnlm_free((qkv_rnnlm *)m); }

static qkv_tensor *model_inputs(qkv_ctx *ctx, const qkv_rnnlm *m, const qkv_batch *b) {
    if (!m->cfg.shift_right) return b->ids;
    if (!b->targets) {
        qkv_error_set(QKV_ERR_INVALID, "rnnlm: the batch has no targets to shift right");
        return NULL;
    }
    return qkv_nn_shift_right(ctx, b->targets, (float)m->cfg.start_id);
}

static qkv_tensor *rnnlm_fwd(qkv_ctx *ctx, qkv_model *mm, const qkv_batch *b, qkv_attention_maps *maps) {
    if (maps) memset(maps, 0, sizeof *maps);
    const qkv_rnnlm *m = (const qkv_rnnlm *)mm;
    return qkv_rnnlm_forward(ctx, m, model_inputs(ctx, m, b));
}

static qkv_tensor *rnnlm_loss(qkv_ctx *ctx, qkv_model *mm, const qkv_batch *b) {
    const qkv_rnnlm *m = (const qkv_rnnlm *)mm;
    if (!b->targets) {
        qkv_error_set(QKV_ERR_INVALID, "rnnlm: the batch has no targets");
        return NULL;
    }
    qkv_tensor *lp = qkv_rnnlm_forward(ctx, m, model_inputs(ctx, m, b));
    qkv_ce_opts o = qkv_ce_defaults();
    o.token_weight = qkv__model_loss_weights(ctx, b, "rnnlm");
    if ((b->mask || b->weights) && !o.token_weight) return NULL;
    /* Log-probabilities are valid logits (log_softmax is idempotent), so cross-entropy applies as is. */
    return qkv_cross_entropy(ctx, lp, b->targets, &o);
}

static const qkv_model_embedding embeddings[] = {{"embedding.weight", "input", NULL}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_rnnlm = {
    .name = "rnnlm",
    .task = "lm",
    .summary = "Trax-style recurrent LM: ShiftRight -> Embedding -> n x GRU/LSTM -> Dense -> LogSoftmax",
    .config = &schema,
    .default_config = defaults_json,
    .create = rnnlm_create,
    .free = rnnlm_free,
    .loss = rnnlm_loss,
    .forward = rnnlm_fwd,
    .embeddings = embeddings,
    .decoder = &rnnlm_decoder_ops,
};
