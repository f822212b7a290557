/* LSTM encoder-decoder with attention over the encoder states (Luong et al. 2015; Bahdanau et al. 2015 scores),
 * teacher-forced training, incremental decoding and the "lstm_seq2seq" model type. Equations in seq2seq.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/error.h"
#include "qkv/ops.h"
#include "qkv/schema.h"
#include "core/internal.h"
#include "ops/gemm_packed.h"
#include "ops/linear_rows.h"
#include "ops/log_softmax_rows.h"
#include "ops/row_attention.h"
#include "seq2seq_internal.h"

qkv_status qkv_lstm_s2s_init(qkv_lstm_s2s *m, qkv_params *params, const qkv_lstm_s2s_config *cfg, qkv_rng *rng) {
    memset(m, 0, sizeof *m);
    if (!params || !cfg || !rng) return qkv_error_set(QKV_ERR_INVALID, "lstm_seq2seq: params, cfg and rng are required");
    if (cfg->src_vocab < 1 || cfg->tgt_vocab < 1 || cfg->embed < 1 || cfg->hidden < 1)
        return qkv_error_set(QKV_ERR_INVALID, "lstm_seq2seq: src_vocab %lld, tgt_vocab %lld, embed %lld, hidden %lld "
                             "must all be >= 1", (long long)cfg->src_vocab, (long long)cfg->tgt_vocab,
                             (long long)cfg->embed, (long long)cfg->hidden);
    if (cfg->num_layers < 1 || cfg->num_layers > QKV_RNN_MAX_LAYERS)
        return qkv_error_set(QKV_ERR_INVALID, "lstm_seq2seq: n_layers %d out of [1, %d]", cfg->num_layers,
                             QKV_RNN_MAX_LAYERS);
    if (!(cfg->dropout >= 0.0f && cfg->dropout < 1.0f))
        return qkv_error_set(QKV_ERR_INVALID, "lstm_seq2seq: dropout %g out of [0, 1)", (double)cfg->dropout);
    m->cfg = *cfg;
    int64_t E = cfg->embed, H = cfg->hidden;
    qkv_rnn_config enc = qkv_rnn_config_default(QKV_RNN_LSTM, E, H);
    enc.num_layers = cfg->num_layers;
    qkv_rnn_config dec = enc;
    if (cfg->input_feeding) dec.input_size = E + H;
    qkv_status st;
    if ((st = qkv_nn_embedding_init(&m->src_emb, params, "src_emb", cfg->src_vocab, E, QKV_NN_NO_PADDING, false,
                                    rng)) ||
        (st = qkv_nn_embedding_init(&m->tgt_emb, params, "tgt_emb", cfg->tgt_vocab, E, QKV_NN_NO_PADDING, false,
                                    rng)) ||
        (st = qkv_rnn_init(&m->enc, params, "enc", &enc, rng)) || (st = qkv_rnn_init(&m->dec, params, "dec", &dec, rng)) ||
        (st = qkv_nn_score_attention_init(&m->attn, params, "attn", cfg->attention, H, H, H, true, rng)) ||
        (st = qkv_nn_linear_init(&m->combine, params, "combine", 2 * H, H, false, rng)) ||
        (st = qkv_nn_linear_init(&m->gen, params, "gen", H, cfg->tgt_vocab, true, rng)))
        return st;
    return QKV_OK;
}

/* Lengths [B] from a right-padded mask (non-zero = padded); padding before a token is an error. */
static qkv_tensor *lengths_of(qkv_ctx *ctx, const qkv_tensor *pad) {
    int64_t B = pad->shape[0], S = pad->shape[1];
    qkv_tensor *len = qkv_ctx_tensor(ctx, QKV_I32, 1, &B);
    if (!len) return NULL;
    for (int64_t b = 0; b < B; b++) {
        int32_t n = 0;
        bool seen_pad = false;
        for (int64_t t = 0; t < S; t++) {
            int64_t off = b * pad->stride[0] + t * pad->stride[1];
            bool p = pad->dtype == QKV_F32 ? qkv_f32(pad)[off] != 0.0f : qkv_i32(pad)[off] != 0;
            if (!p && seen_pad) {
                qkv_error_set(QKV_ERR_INVALID, "lstm_seq2seq: source %lld has a token after padding (the encoder "
                              "needs right-padded sources)", (long long)b);
                return NULL;
            }
            seen_pad |= p;
            n += !p;
        }
        qkv_i32(len)[b] = n;
    }
    return len;
}

/* Row l of a [L, B, H] state as [B, H]. */
static qkv_tensor *layer_state(qkv_ctx *ctx, qkv_tensor *s, int l) {
    return qkv_reshape(ctx, qkv_slice(ctx, s, 0, l, l + 1, 1), QKV_DIMS(s->shape[1], s->shape[2]));
}

/* h~ = tanh(combine([ctx; h])) for [.., H] tensors. */
static qkv_tensor *combine(qkv_ctx *ctx, const qkv_lstm_s2s *m, qkv_tensor *c, qkv_tensor *h) {
    qkv_tensor *both[2] = {c, h};
    return qkv_tanh(ctx, qkv_nn_linear_forward(ctx, &m->combine, qkv_concat(ctx, 2, both, -1)));
}

/* One decoder step through every layer with carried h[l], c[l] (updated in place in the arrays). */
static qkv_tensor *decoder_cells(qkv_ctx *ctx, const qkv_lstm_s2s *m, qkv_tensor *x, qkv_tensor **h, qkv_tensor **c) {
    for (int l = 0; l < m->cfg.num_layers; l++) {
        qkv_tensor *hn, *cn;
        if (!x || qkv_lstm_cell(ctx, x, h[l], c[l], m->dec.w_ih[l][0], m->dec.w_hh[l][0], m->dec.b_ih[l][0],
                                m->dec.b_hh[l][0], &hn, &cn) != QKV_OK)
            return NULL;
        h[l] = hn;
        c[l] = cn;
        x = hn;
    }
    return x;
}

/* Input feeding: the decoder runs step by step since x_t needs h~_{t-1}. Returns h~ [B, T, H]. */
static qkv_tensor *feed_decoder(qkv_ctx *ctx, const qkv_lstm_s2s *m, qkv_tensor *xt, qkv_tensor *hn, qkv_tensor *cn,
                                qkv_tensor *henc, const qkv_tensor *pad, qkv_tensor **attn) {
    int64_t B = xt->shape[0], T = xt->shape[1], E = m->cfg.embed, H = m->cfg.hidden;
    int L = m->cfg.num_layers;
    qkv_tensor *h[QKV_RNN_MAX_LAYERS], *c[QKV_RNN_MAX_LAYERS];
    for (int l = 0; l < L; l++) {
        h[l] = layer_state(ctx, hn, l);
        c[l] = layer_state(ctx, cn, l);
    }
    qkv_tensor **outs = qkv_ctx_alloc(ctx, sizeof(qkv_tensor *) * (size_t)T * 2);
    if (!outs) return NULL;
    qkv_tensor **ws = outs + T;
    qkv_tensor *feed = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, H));
    for (int64_t t = 0; t < T; t++) {
        qkv_tensor *x[2] = {qkv_reshape(ctx, qkv_slice(ctx, xt, 1, t, t + 1, 1), QKV_DIMS(B, E)), feed};
        qkv_tensor *top = decoder_cells(ctx, m, qkv_concat(ctx, 2, x, -1), h, c);
        qkv_tensor *w = NULL;
        qkv_tensor *cx = qkv_nn_score_attention_forward(ctx, &m->attn, top, henc, NULL, pad, attn ? &w : NULL);
        feed = combine(ctx, m, cx, top);
        if (!feed) return NULL;
        outs[t] = feed;
        ws[t] = w;
    }
    if (attn) *attn = qkv_stack(ctx, (int)T, ws, 1);
    return qkv_stack(ctx, (int)T, outs, 1);
}

qkv_tensor *qkv_lstm_s2s_forward(qkv_ctx *ctx, const qkv_lstm_s2s *m, qkv_tensor *src, const qkv_tensor *src_pad,
                                 qkv_tensor *tgt, qkv_tensor **attn) {
    if (!src || !tgt) return NULL;
    if (src->dtype != QKV_I32 || tgt->dtype != QKV_I32 || src->ndim != 2 || tgt->ndim != 2 ||
        src->shape[0] != tgt->shape[0]) {
        qkv_error_set(QKV_ERR_INVALID, "lstm_seq2seq: src and tgt must be int32 [batch, time] with the same batch");
        return NULL;
    }
    if (src_pad && (src_pad->ndim != 2 || src_pad->shape[0] != src->shape[0] || src_pad->shape[1] != src->shape[1])) {
        qkv_error_set(QKV_ERR_INVALID, "lstm_seq2seq: the source padding mask must be [batch, src_len]");
        return NULL;
    }
    float p = m->cfg.dropout;
    qkv_tensor *lengths = src_pad ? lengths_of(ctx, src_pad) : NULL;
    if (src_pad && !lengths) return NULL;
    qkv_tensor *henc, *hn, *cn, *hdec;
    qkv_tensor *xs = qkv_dropout(ctx, qkv_nn_embedding_forward(ctx, &m->src_emb, src), p);
    if (!xs || qkv_rnn_forward(ctx, &m->enc, xs, lengths, NULL, NULL, &henc, &hn, &cn) != QKV_OK) return NULL;
    qkv_tensor *xt = qkv_dropout(ctx, qkv_nn_embedding_forward(ctx, &m->tgt_emb, tgt), p);
    if (!xt) return NULL;
    qkv_tensor *ht;
    if (m->cfg.input_feeding) {
        ht = feed_decoder(ctx, m, xt, hn, cn, henc, src_pad, attn);
    } else {
        if (qkv_rnn_forward(ctx, &m->dec, xt, NULL, hn, cn, &hdec, NULL, NULL) != QKV_OK) return NULL;
        qkv_tensor *cx = qkv_nn_score_attention_forward(ctx, &m->attn, hdec, henc, NULL, src_pad, attn);
        ht = combine(ctx, m, cx, hdec);
    }
    return qkv_nn_linear_forward(ctx, &m->gen, qkv_dropout(ctx, ht, p));
}

/* ---- incremental decoding ---- */

/* The decoder's qkv_decoder_state (decoder.h keeps it opaque; each model has its own). */
typedef struct lstm_state {
    const qkv_lstm_s2s *m;
    qkv_ctx *keep, *work;
    int rows, cap, S;            /* rows now, rows prepared by start (reorder drops and fans out rows) */
    /* Dot-product scores (dot, scaled_dot, general): the encoder side once per source, read by each row through
     * src_of (ops/row_attention.h); nothing of it is copied per row or moved by a reorder. */
    qkv_tensor *src_henc, *src_pad, *src_keys; /* [n_src, S, H], [n_src, S], general: W henc [n_src, S, H] */
    /* Additive scores: the encoder side per row (NULL for the kinds above). */
    qkv_tensor *henc, *pad;      /* [rows, S, H], [rows, S] */
    qkv_tensor *h[QKV_RNN_MAX_LAYERS], *c[QKV_RNN_MAX_LAYERS], *feed; /* [rows, H] */
    qkv_tensor *full[4 + 2 * QKV_RNN_MAX_LAYERS]; /* what each tensor above views the first rows of, in slot order */
    int32_t *src_of, *src_tmp;   /* [cap]: the source of each row; scratch */
    qkv__packs *packs;           /* the step's weights, packed on first use by several rows (ops/gemm_packed.h) */
    bool raw;                    /* the step returns raw logits (lstm_step_logits) */
} lstm_state;

/* The state's per-row tensors as slots: (henc, pad,) feed, then h and c of each layer. */
static int lstm_slots(lstm_state *s, qkv_tensor **slot[4 + 2 * QKV_RNN_MAX_LAYERS]) {
    int n = 0;
    if (s->henc) {
        slot[n++] = &s->henc;
        slot[n++] = &s->pad;
    }
    slot[n++] = &s->feed;
    for (int l = 0; l < s->m->cfg.num_layers; l++) {
        slot[n++] = &s->h[l];
        slot[n++] = &s->c[l];
    }
    return n;
}

static void lstm_free(qkv_decoder_state *st) {
    lstm_state *s = (lstm_state *)st;
    if (!s) return;
    qkv_ctx_free(s->keep);
    qkv_ctx_free(s->work);
    qkv__packs_free(s->packs);
    free(s->src_of);
    free(s->src_tmp);
    free(s);
}

/* A kept copy of a work tensor. */
static qkv_tensor *keep_copy(qkv_ctx *keep, qkv_tensor *t) {
    if (!t) return NULL;
    qkv_tensor *k = qkv_ctx_tensor(keep, QKV_F32, t->ndim, t->shape);
    if (k && qkv_tensor_copy(k, t) != QKV_OK) return NULL;
    return k;
}

static qkv_decoder_state *lstm_start(const qkv_model *model, const int32_t *src, const int32_t *lengths, int n_src,
                                 int src_len, int rows_per_src, int max_steps) {
    (void)max_steps;
    const qkv_lstm_s2s *m = (const qkv_lstm_s2s *)model; /* a bare struct, or the first member of lstm_model */
    lstm_state *s = calloc(1, sizeof *s);
    if (!s) {
        qkv_error_set(QKV_ERR_NOMEM, "lstm_seq2seq decode: out of memory");
        return NULL;
    }
    s->m = m;
    s->rows = s->cap = n_src * rows_per_src;
    s->S = src_len;
    if (s2s_contexts(&s->keep, &s->work) != QKV_OK) {
        free(s);
        return NULL;
    }
    s->src_of = malloc(sizeof(int32_t) * (size_t)(s->cap > 0 ? s->cap : 1));
    s->src_tmp = malloc(sizeof(int32_t) * (size_t)(s->cap > 0 ? s->cap : 1));
    if (!s->src_of || !s->src_tmp) {
        qkv_error_set(QKV_ERR_NOMEM, "lstm_seq2seq decode: out of memory");
        goto fail;
    }
    for (int r = 0; r < s->cap; r++) s->src_of[r] = r / rows_per_src;
    qkv_ctx *w = s->work;
    qkv_tensor *ids = NULL, *pad = NULL, *row_src = NULL, *henc, *hn, *cn;
    if (s2s_source(w, src, lengths, n_src, src_len, rows_per_src, &ids, &pad, &row_src) != QKV_OK) goto fail;
    for (int i = 0; i < n_src * src_len; i++)
        if (src[i] < 0 || src[i] >= m->cfg.src_vocab) {
            qkv_error_set(QKV_ERR_RANGE, "lstm_seq2seq decode: source id %d out of [0, %lld)", src[i],
                          (long long)m->cfg.src_vocab);
            goto fail;
        }
    qkv_tensor *xs = qkv_nn_embedding_forward(w, &m->src_emb, ids);
    if (!xs || qkv_rnn_forward(w, &m->enc, xs, lengths_of(w, pad), NULL, NULL, &henc, &hn, &cn) != QKV_OK) goto fail;
    s->feed = qkv_ctx_zeros(s->keep, QKV_F32, QKV_DIMS(s->rows, m->cfg.hidden));
    if (!s->feed) goto fail;
    if (m->attn.kind == QKV_SCORE_ADDITIVE) {
        s->henc = keep_copy(s->keep, qkv_index_select(w, henc, 0, row_src));
        s->pad = keep_copy(s->keep, qkv_index_select(w, pad, 0, row_src));
        if (!s->henc || !s->pad) goto fail;
    } else {
        s->src_henc = keep_copy(s->keep, henc);
        s->src_pad = keep_copy(s->keep, pad);
        if (!s->src_henc || !s->src_pad) goto fail;
        /* Luong's general score h_t^T W h_s: W h_s does not change while decoding, so it is computed once per
         * source here rather than for every key at every step (as much work per step as the output projection). */
        if (m->attn.kind == QKV_SCORE_GENERAL &&
            !(s->src_keys = keep_copy(s->keep, qkv_nn_linear_forward(w, &m->attn.w, henc))))
            goto fail;
    }
    for (int l = 0; l < m->cfg.num_layers; l++) {
        s->h[l] = keep_copy(s->keep, qkv_index_select(w, layer_state(w, hn, l), 0, row_src));
        s->c[l] = keep_copy(s->keep, qkv_index_select(w, layer_state(w, cn, l), 0, row_src));
        if (!s->h[l] || !s->c[l]) goto fail;
    }
    qkv_tensor **slot[4 + 2 * QKV_RNN_MAX_LAYERS];
    for (int i = 0, n = lstm_slots(s, slot); i < n; i++) s->full[i] = *slot[i];
    /* Every step multiplies the live rows by the same decoder weights: packed once (ops/gemm_packed.h). */
    if (!(s->packs = qkv__packs_new()) || qkv__packs_allow(s->packs, m->combine.weight) ||
        qkv__packs_allow(s->packs, m->gen.weight))
        goto fail;
    for (int l = 0; l < m->cfg.num_layers; l++)
        if (qkv__packs_allow(s->packs, m->dec.w_ih[l][0]) || qkv__packs_allow(s->packs, m->dec.w_hh[l][0])) goto fail;
    qkv__ctx_set_packs(s->work, s->packs);
    return (qkv_decoder_state *)s;
fail:
    lstm_free((qkv_decoder_state *)s);
    return NULL;
}

static qkv_status lstm_step(qkv_decoder_state *st, const int32_t *tokens, float *logprobs, float *attn) {
    lstm_state *s = (lstm_state *)st;
    const qkv_lstm_s2s *m = s->m;
    qkv_ctx *w = s->work;
    qkv_ctx_reset(w);
    for (int r = 0; r < s->rows; r++)
        if (tokens[r] < 0 || tokens[r] >= m->cfg.tgt_vocab)
            return qkv_error_set(QKV_ERR_RANGE, "lstm_seq2seq decode: token %d out of [0, %lld)", tokens[r],
                                 (long long)m->cfg.tgt_vocab);
    qkv_tensor *x = qkv_nn_embedding_forward(w, &m->tgt_emb, s2s_ids(w, tokens, s->rows));
    if (m->cfg.input_feeding) {
        qkv_tensor *xf[2] = {x, s->feed};
        x = qkv_concat(w, 2, xf, -1);
    }
    qkv_tensor *h[QKV_RNN_MAX_LAYERS], *c[QKV_RNN_MAX_LAYERS];
    memcpy(h, s->h, sizeof h);
    memcpy(c, s->c, sizeof c);
    qkv_tensor *top = decoder_cells(w, m, x, h, c);
    qkv_tensor *a = NULL, *cx = NULL;
    if (s->src_henc) {
        const qkv_tensor *keys = s->src_keys ? s->src_keys : s->src_henc;
        int64_t D = keys->shape[2], Dv = s->src_henc->shape[2];
        float scale = m->attn.kind == QKV_SCORE_SCALED_DOT ? 1.0f / sqrtf((float)m->attn.key_dim) : 1.0f;
        top = qkv_contiguous(w, top);
        cx = qkv_ctx_tensor(w, QKV_F32, QKV_DIMS(s->rows, Dv));
        a = qkv_ctx_tensor(w, QKV_F32, QKV_DIMS(s->rows, s->S));
        if (!top || !cx || !a) return qkv_last_status();
        if (top->shape[top->ndim - 1] != D)
            return qkv_error_set(QKV_ERR_INVALID, "lstm_seq2seq decode: query width %lld against keys of %lld",
                                 (long long)top->shape[top->ndim - 1], (long long)D);
        qkv__row_attention(qkv_f32(top), s->rows, D, s->src_of, qkv_f32(keys), qkv_f32(s->src_henc), Dv,
                           qkv_f32(s->src_pad), s->S, scale, qkv_f32(cx), qkv_f32(a));
    } else {
        cx = qkv_nn_score_attention_forward(w, &m->attn, top, s->henc, NULL, s->pad, &a);
    }
    qkv_tensor *ht = combine(w, m, cx, top), *logits = NULL;
    if (!ht || !a) return qkv_last_status();
    if (s->raw) { /* raw logits go straight into the caller's buffer (no 2 MB copy a step at 64 rows) */
        qkv_status rc = qkv__linear_rows(w, ht, m->gen.weight, m->gen.bias, logprobs);
        if (rc) return rc;
    } else if (!(logits = qkv_contiguous(w, qkv_nn_linear_forward(w, &m->gen, ht)))) {
        return qkv_last_status();
    }
    for (int l = 0; l < m->cfg.num_layers; l++) {
        qkv_status rc;
        if ((rc = qkv_tensor_copy(s->h[l], h[l])) || (rc = qkv_tensor_copy(s->c[l], c[l]))) return rc;
    }
    qkv_status rc = qkv_tensor_copy(s->feed, ht);
    if (rc) return rc;
    if (logits) qkv__log_softmax_rows(logprobs, logits->data, s->rows, m->cfg.tgt_vocab);
    if (attn) memcpy(attn, qkv_contiguous(w, a)->data, sizeof(float) * (size_t)s->rows * (size_t)s->S);
    return QKV_OK;
}

static qkv_status lstm_step_logits(qkv_decoder_state *st, const int32_t *tokens, float *logits, float *attn) {
    lstm_state *s = (lstm_state *)st;
    s->raw = true;
    qkv_status rc = lstm_step(st, tokens, logits, attn);
    s->raw = false;
    return rc;
}

static qkv_status lstm_reorder(qkv_decoder_state *st, const int32_t *from, int n_rows) {
    lstm_state *s = (lstm_state *)st;
    qkv_ctx_reset(s->work);
    qkv_status rc = s2s_check_reorder(from, n_rows, s->rows, s->cap);
    if (rc) return rc;
    qkv_tensor **slot[4 + 2 * QKV_RNN_MAX_LAYERS];
    for (int i = 0, n = lstm_slots(s, slot); i < n; i++) {
        bool per_src = slot[i] == &s->henc || slot[i] == &s->pad;
        rc = s2s_move_rows(s->keep, s->work, s->full[i], slot[i], from, n_rows, s->rows, 0, per_src, s->src_of);
        if (rc) return rc;
    }
    s2s_move_src_of(s->src_of, s->src_tmp, from, n_rows);
    s->rows = n_rows;
    return QKV_OK;
}

static void lstm_info(const qkv_model *model, qkv_decoder_info *out) {
    const qkv_lstm_s2s *m = (const qkv_lstm_s2s *)model;
    *out = (qkv_decoder_info){.vocab = m->cfg.tgt_vocab, .capacity = 0, .log_probs = true, .needs_source = true,
                              .source_attention = true, .start_token = -1};
}

static const qkv_decoder_ops lstm_decoder_ops = {
    .info = lstm_info, .start = lstm_start, .step = lstm_step, .reorder = lstm_reorder, .free = lstm_free,
    .step_logits = lstm_step_logits};

qkv_decoder qkv_lstm_s2s_decoder(const qkv_lstm_s2s *m) {
    qkv_decoder d = {.ops = &lstm_decoder_ops, .model = (const qkv_model *)m};
    lstm_info(d.model, &d.info);
    return d;
}

/* ---- the "lstm_seq2seq" model type ---- */

typedef struct lstm_model {
    qkv_lstm_s2s m; /* first: the decoder's functions cast a model to it */
} lstm_model;

/* The "model" fields, declared once. */
typedef struct lstm_opts {
    int64_t embed, hidden, n_layers;
    const char *attention;
    bool input_feeding;
    double dropout;
} lstm_opts;

static const qkv_field lstm_fields[] = {
    QKV_FIELD_INT(lstm_opts, embed, "embed", 256, 1, 1 << 16, "embedding width (source and target)"),
    QKV_FIELD_INT(lstm_opts, hidden, "hidden", 256, 1, 1 << 16, "LSTM hidden width"),
    QKV_FIELD_INT(lstm_opts, n_layers, "n_layers", 1, 1, QKV_RNN_MAX_LAYERS, "stacked LSTM layers on each side"),
    QKV_FIELD_CHOICE(lstm_opts, attention, "attention", "dot", "dot|general|additive|scaled_dot|concat|bahdanau",
                     "attention score (concat and bahdanau are additive)"),
    QKV_FIELD_BOOL(lstm_opts, input_feeding, "input_feeding", false,
                   "feed the previous attentional vector to the decoder (Luong)"),
    QKV_FIELD_NUM(lstm_opts, dropout, "dropout", 0.0, 0, 0.99, 0, "dropout between layers and before the output"),
};

static const qkv_schema lstm_schema = QKV_SCHEMA("model", lstm_opts, lstm_fields, NULL);
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

static qkv_model *lstm_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    const char *who = "lstm_seq2seq";
    lstm_opts o;
    if (qkv_model_config(&lstm_schema, cfg, &o)) return NULL;
    if (!info || info->vocab_size < 1) {
        qkv_error_set(QKV_ERR_INVALID, "%s: the task gives no vocabulary size", who);
        return NULL;
    }
    qkv_lstm_s2s_config c = {.embed = o.embed, .hidden = o.hidden, .num_layers = (int)o.n_layers,
                             .input_feeding = o.input_feeding, .dropout = (float)o.dropout};
    c.src_vocab = info->vocab_size;
    c.tgt_vocab = info->tgt_vocab_size > 0 ? info->tgt_vocab_size : info->vocab_size;
    qkv_score_kind_parse(o.attention, &c.attention); /* the schema's choices all parse */
    lstm_model *lm = calloc(1, sizeof *lm);
    if (!lm) {
        qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", who);
        return NULL;
    }
    if (qkv_lstm_s2s_init(&lm->m, params, &c, rng) != QKV_OK) {
        free(lm);
        return NULL;
    }
    return (qkv_model *)lm;
}

static void lstm_model_free(qkv_model *m) { free(m); }

static qkv_tensor *lstm_model_forward(qkv_ctx *ctx, qkv_model *model, const qkv_batch *b, qkv_attention_maps *maps) {
    lstm_model *lm = (lstm_model *)model;
    if (!b->src_ids || !b->ids) {
        qkv_error_set(QKV_ERR_INVALID, "lstm_seq2seq: the batch needs src_ids and ids (decoder inputs)");
        return NULL;
    }
    qkv_tensor *pad = qkv_nn_padding_of(ctx, b->src_mask);
    if (b->src_mask && !pad) return NULL;
    qkv_tensor *w = NULL;
    qkv_tensor *logits = qkv_lstm_s2s_forward(ctx, &lm->m, b->src_ids, pad, b->ids, maps ? &w : NULL);
    if (maps && logits) {
        /* [B, T, S] as one head: [B, 1, T, S] */
        maps->n_layers = 1;
        maps->kind[0] = "cross";
        snprintf(maps->name[0], sizeof maps->name[0], "attention");
        maps->weights[0] = qkv_reshape(ctx, w, QKV_DIMS(w->shape[0], 1, w->shape[1], w->shape[2]));
    }
    return logits;
}

static qkv_tensor *lstm_model_loss(qkv_ctx *ctx, qkv_model *model, const qkv_batch *b) {
    return s2s_masked_loss(ctx, lstm_model_forward(ctx, model, b, NULL), b);
}

static const qkv_model_embedding embeddings[] = {
    {"src_emb.weight", "input", NULL}, {"tgt_emb.weight", "target", NULL}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_lstm_seq2seq = {
    .name = "lstm_seq2seq",
    .task = "seq2seq",
    .summary = "LSTM encoder-decoder with attention (dot / general / additive), optional input feeding",
    .config = &lstm_schema,
    .default_config = defaults_json,
    .create = lstm_create,
    .free = lstm_model_free,
    .loss = lstm_model_loss,
    .forward = lstm_model_forward,
    .embeddings = embeddings,
    .decoder = &lstm_decoder_ops,
};
