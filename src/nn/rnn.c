/* Recurrent modules (RNN / GRU / LSTM): parameters with torch's names, the layer stack, and the one-step cells.
 * The heavy lifting is the fused op in rnn_op.c; this file wires input projections (one GEMM per layer and
 * direction over all timesteps), initial states, dropout between layers and the slicing of results. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "nn/rnn_op.h"
#include "qkv/init.h"
#include "qkv/ops.h"
#include "qkv/rnn.h"

static const char *kind_name(qkv_rnn_kind kind) {
    switch (kind) {
    case QKV_RNN_TANH: return "RNN_TANH";
    case QKV_RNN_RELU: return "RNN_RELU";
    case QKV_RNN_GRU: return "GRU";
    case QKV_RNN_LSTM: return "LSTM";
    }
    return "?";
}

qkv_rnn_config qkv_rnn_config_default(qkv_rnn_kind kind, int64_t input_size, int64_t hidden_size) {
    return (qkv_rnn_config){.kind = kind, .input_size = input_size, .hidden_size = hidden_size, .num_layers = 1,
                            .bias = true};
}

static qkv_status check_config(const qkv_rnn_config *c) {
    if (!c) return qkv_error_set(QKV_ERR_INVALID, "rnn init: config is NULL");
    if (c->kind < QKV_RNN_TANH || c->kind > QKV_RNN_LSTM)
        return qkv_error_set(QKV_ERR_INVALID, "rnn init: unknown kind %d", (int)c->kind);
    if (c->input_size < 1 || c->hidden_size < 1 || c->input_size > (1 << 24) || c->hidden_size > (1 << 24))
        return qkv_error_set(QKV_ERR_INVALID, "rnn init: input_size %lld and hidden_size %lld must be in 1..2^24",
                             (long long)c->input_size, (long long)c->hidden_size);
    if (c->num_layers < 1 || c->num_layers > QKV_RNN_MAX_LAYERS)
        return qkv_error_set(QKV_ERR_INVALID, "rnn init: num_layers %d outside 1..%d", c->num_layers,
                             QKV_RNN_MAX_LAYERS);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return qkv_error_set(QKV_ERR_INVALID, "rnn init: dropout %g outside [0, 1)", c->dropout);
    if (c->forget_bias_one && (c->kind != QKV_RNN_LSTM || !c->bias))
        return qkv_error_set(QKV_ERR_INVALID, "rnn init: forget_bias_one needs an LSTM with bias (kind is %s%s)",
                             kind_name(c->kind), c->bias ? "" : ", bias off");
    return QKV_OK;
}

/* Add one parameter and draw it uniform in +-k (torch's reset_parameters). */
static qkv_tensor *add_param(qkv_params *p, const char *prefix, const char *base, int layer, int d, int ndim,
                             const int64_t *shape, float k, qkv_rng *rng) {
    char name[64];
    snprintf(name, sizeof name, "%s_l%d%s", base, layer, d ? "_reverse" : "");
    qkv_tensor *t = qkv_params_add(p, prefix, name, ndim, shape);
    if (t && qkv_init_uniform(t, -k, k, rng) != QKV_OK) return NULL;
    return t;
}

qkv_status qkv_rnn_init(qkv_rnn *rnn, qkv_params *params, const char *prefix, const qkv_rnn_config *cfg,
                        qkv_rng *rng) {
    if (!rnn || !params || !rng) return qkv_error_set(QKV_ERR_INVALID, "rnn init: rnn, params and rng are required");
    memset(rnn, 0, sizeof *rnn);
    qkv_status st = check_config(cfg);
    if (st) return st;
    int dirs = cfg->bidirectional ? 2 : 1;
    int64_t H = cfg->hidden_size, G = qkv__rnn_gates(cfg->kind) * H;
    float k = 1.0f / sqrtf((float)H);
    /* torch's order: per layer, per direction, weight_ih, weight_hh, bias_ih, bias_hh (checkpoint order). */
    for (int l = 0; l < cfg->num_layers; l++) {
        int64_t in = l == 0 ? cfg->input_size : dirs * H;
        for (int d = 0; d < dirs; d++) {
            qkv_tensor *wi = add_param(params, prefix, "weight_ih", l, d, 2, (const int64_t[]){G, in}, k, rng);
            qkv_tensor *wh = wi ? add_param(params, prefix, "weight_hh", l, d, 2, (const int64_t[]){G, H}, k, rng)
                                : NULL;
            qkv_tensor *bi = NULL, *bh = NULL;
            if (wh && cfg->bias) {
                bi = add_param(params, prefix, "bias_ih", l, d, 1, (const int64_t[]){G}, k, rng);
                bh = bi ? add_param(params, prefix, "bias_hh", l, d, 1, (const int64_t[]){G}, k, rng) : NULL;
            }
            if (!wh || (cfg->bias && !bh)) {
                memset(rnn, 0, sizeof *rnn);
                return qkv_last_status() ? qkv_last_status() : QKV_ERR_NOMEM;
            }
            if (cfg->orthogonal_hh) {
                for (int64_t g = 0; g < G / H; g++) {
                    qkv_tensor block = *wh; /* a view of gate g's [H, H] rows */
                    block.shape[0] = H;
                    block.data = qkv_f32(wh) + g * H * H;
                    block.grad = NULL;
                    if ((st = qkv_init_orthogonal(&block, 1.0f, rng))) {
                        memset(rnn, 0, sizeof *rnn);
                        return st;
                    }
                }
            }
            if (cfg->forget_bias_one)
                for (int64_t j = H; j < 2 * H; j++) {
                    qkv_f32(bi)[j] = 1.0f;
                    qkv_f32(bh)[j] = 0.0f;
                }
            rnn->w_ih[l][d] = wi;
            rnn->w_hh[l][d] = wh;
            rnn->b_ih[l][d] = bi;
            rnn->b_hh[l][d] = bh;
        }
    }
    rnn->cfg = *cfg;
    return QKV_OK;
}

/* A view of elements [start, start + numel(shape)) of a flat tensor, reshaped. */
static qkv_tensor *flat_part(qkv_ctx *ctx, qkv_tensor *flat, int64_t start, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return qkv_reshape(ctx, qkv_slice(ctx, flat, 0, start, start + n, 1), ndim, shape);
}

static qkv_status check_state(const char *what, const qkv_tensor *t, int64_t L, int64_t B, int64_t H) {
    char s[96];
    if (t->dtype != QKV_F32 || t->ndim != 3 || t->shape[0] != L || t->shape[1] != B || t->shape[2] != H)
        return qkv_error_set(QKV_ERR_INVALID, "rnn forward: %s is %s; expected float32 [%lld, %lld, %lld] "
                             "(num_layers * dirs, batch, hidden)", what, qkv_shape_str(t, s, sizeof s),
                             (long long)L, (long long)B, (long long)H);
    return QKV_OK;
}

qkv_status qkv_rnn_forward(qkv_ctx *ctx, const qkv_rnn *rnn, qkv_tensor *x, const qkv_tensor *lengths,
                           qkv_tensor *h0, qkv_tensor *c0, qkv_tensor **out, qkv_tensor **h_n, qkv_tensor **c_n) {
    char s[96];
    if (out) *out = NULL;
    if (h_n) *h_n = NULL;
    if (c_n) *c_n = NULL;
    if (!ctx || !rnn || !x) return qkv_error_set(QKV_ERR_INVALID, "rnn forward: context, module and input required");
    const qkv_rnn_config *cfg = &rnn->cfg;
    if (!rnn->w_ih[0][0]) return qkv_error_set(QKV_ERR_INVALID, "rnn forward: module was not initialised");
    bool lstm = cfg->kind == QKV_RNN_LSTM;
    int dirs = cfg->bidirectional ? 2 : 1, L = cfg->num_layers;
    int64_t H = cfg->hidden_size;
    if (x->dtype != QKV_F32 || x->ndim != 3 || x->shape[2] != cfg->input_size || x->shape[0] < 1 || x->shape[1] < 1)
        return qkv_error_set(QKV_ERR_INVALID, "rnn forward: input is %s; expected float32 [batch >= 1, time >= 1, "
                             "%lld] (batch first)", qkv_shape_str(x, s, sizeof s), (long long)cfg->input_size);
    int64_t B = x->shape[0], T = x->shape[1];
    const int32_t *len = NULL;
    if (lengths) {
        if (lengths->dtype != QKV_I32 || lengths->ndim != 1 || lengths->shape[0] != B)
            return qkv_error_set(QKV_ERR_INVALID, "rnn forward: lengths is %s (%s); expected int32 [%lld]",
                                 qkv_shape_str(lengths, s, sizeof s), lengths->dtype == QKV_I32 ? "int32" : "float32",
                                 (long long)B);
        len = (const int32_t *)qkv__contig_data(ctx, lengths);
        if (!len) return qkv_last_status();
        for (int64_t b = 0; b < B; b++)
            if (len[b] < 0 || len[b] > T)
                return qkv_error_set(QKV_ERR_RANGE, "rnn forward: lengths[%lld] = %d outside 0..%lld (time steps)",
                                     (long long)b, len[b], (long long)T);
    }
    if (c0 && !lstm) return qkv_error_set(QKV_ERR_INVALID, "rnn forward: c0 given to a %s (LSTM only)",
                                          kind_name(cfg->kind));
    qkv_status st;
    if (h0 && (st = check_state("h0", h0, (int64_t)L * dirs, B, H))) return st;
    if (c0 && (st = check_state("c0", c0, (int64_t)L * dirs, B, H))) return st;
    if (h0) h0 = qkv_contiguous(ctx, h0);
    if (c0) c0 = qkv_contiguous(ctx, c0);

    int64_t OW = dirs * H, state = dirs * B * H;
    qkv_tensor *input = x, *layer_out = NULL, *hs[QKV_RNN_MAX_LAYERS], *cs[QKV_RNN_MAX_LAYERS];
    for (int l = 0; l < L; l++) {
        qkv_tensor *xp[2] = {NULL, NULL};
        for (int d = 0; d < dirs; d++) {
            xp[d] = qkv_linear(ctx, input, rnn->w_ih[l][d], rnn->b_ih[l][d]);
            if (!xp[d]) return qkv_last_status();
        }
        qkv_tensor *h0l = h0 ? qkv_slice(ctx, h0, 0, (int64_t)l * dirs, (int64_t)(l + 1) * dirs, 1) : NULL;
        qkv_tensor *c0l = c0 ? qkv_slice(ctx, c0, 0, (int64_t)l * dirs, (int64_t)(l + 1) * dirs, 1) : NULL;
        if ((h0 && !h0l) || (c0 && !c0l)) return qkv_last_status();
        qkv_tensor *y = qkv__rnn_layer(ctx, cfg->kind, dirs, xp, rnn->w_hh[l], rnn->b_hh[l], h0l, c0l, len, H);
        if (!y) return qkv_last_status();
        layer_out = flat_part(ctx, y, 0, 3, (const int64_t[]){B, T, OW});
        hs[l] = flat_part(ctx, y, B * T * OW, 3, (const int64_t[]){dirs, B, H});
        cs[l] = lstm ? flat_part(ctx, y, B * T * OW + state, 3, (const int64_t[]){dirs, B, H}) : NULL;
        if (!layer_out || !hs[l] || (lstm && !cs[l])) return qkv_last_status();
        input = layer_out;
        if (l + 1 < L && cfg->dropout > 0.0f && qkv_ctx_training(ctx)) {
            input = qkv_dropout(ctx, layer_out, cfg->dropout);
            if (!input) return qkv_last_status();
        }
    }
    if (out) *out = layer_out;
    if (h_n) {
        *h_n = L == 1 ? hs[0] : qkv_concat(ctx, L, hs, 0);
        if (!*h_n) return qkv_last_status();
    }
    if (c_n && lstm) {
        *c_n = L == 1 ? cs[0] : qkv_concat(ctx, L, cs, 0);
        if (!*c_n) return qkv_last_status();
    }
    return QKV_OK;
}

/* ---- cells: the layer op with T = 1 --------------------------------------------------------------------- */

static qkv_tensor *cell(qkv_ctx *ctx, qkv_rnn_kind kind, const char *fn, qkv_tensor *x, qkv_tensor *h,
                        qkv_tensor *c, qkv_tensor *w_ih, qkv_tensor *w_hh, qkv_tensor *b_ih, qkv_tensor *b_hh,
                        qkv_tensor **c_out) {
    char sx[96], sw[96], sh[96];
    if (!x || !w_ih || !w_hh) return NULL;
    int gates = qkv__rnn_gates(kind);
    if (x->dtype != QKV_F32 || w_ih->dtype != QKV_F32 || w_hh->dtype != QKV_F32 || x->ndim != 2 ||
        w_ih->ndim != 2 || w_hh->ndim != 2 || w_hh->shape[1] < 1 || w_hh->shape[0] != gates * w_hh->shape[1] ||
        w_ih->shape[0] != w_hh->shape[0] || w_ih->shape[1] != x->shape[1] || x->shape[0] < 1) {
        qkv_error_set(QKV_ERR_INVALID, "%s: input %s, weight_ih %s and weight_hh %s do not fit "
                      "([B, in], [%d*H, in], [%d*H, H])", fn, qkv_shape_str(x, sx, sizeof sx),
                      qkv_shape_str(w_ih, sw, sizeof sw), qkv_shape_str(w_hh, sh, sizeof sh), gates, gates);
        return NULL;
    }
    int64_t B = x->shape[0], H = w_hh->shape[1], G = gates * H;
    qkv_tensor *states[2] = {h, c};
    for (int k = 0; k < 2; k++) {
        qkv_tensor *t = states[k];
        if (t && (t->dtype != QKV_F32 || t->ndim != 2 || t->shape[0] != B || t->shape[1] != H)) {
            qkv_error_set(QKV_ERR_INVALID, "%s: state %s is %s; expected float32 [%lld, %lld]", fn, k ? "c" : "h",
                          qkv_shape_str(t, sx, sizeof sx), (long long)B, (long long)H);
            return NULL;
        }
    }
    if (h && !(h = qkv_contiguous(ctx, h))) return NULL;
    if (c && !(c = qkv_contiguous(ctx, c))) return NULL;
    qkv_tensor *xp = qkv_reshape(ctx, qkv_linear(ctx, x, w_ih, b_ih), QKV_DIMS(B, 1, G));
    if (!xp) return NULL;
    qkv_tensor *y = qkv__rnn_layer(ctx, kind, 1, (qkv_tensor *[]){xp, NULL}, (qkv_tensor *[]){w_hh, NULL},
                                   (qkv_tensor *[]){b_hh, NULL}, h, c, NULL, H);
    if (!y) return NULL;
    if (c_out) {
        *c_out = flat_part(ctx, y, 2 * B * H, 2, (const int64_t[]){B, H});
        if (!*c_out) return NULL;
    }
    return flat_part(ctx, y, 0, 2, (const int64_t[]){B, H});
}

qkv_tensor *qkv_rnn_cell(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *h, qkv_tensor *w_ih, qkv_tensor *w_hh,
                         qkv_tensor *b_ih, qkv_tensor *b_hh, bool relu) {
    return cell(ctx, relu ? QKV_RNN_RELU : QKV_RNN_TANH, "rnn_cell", x, h, NULL, w_ih, w_hh, b_ih, b_hh, NULL);
}

qkv_tensor *qkv_gru_cell(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *h, qkv_tensor *w_ih, qkv_tensor *w_hh,
                         qkv_tensor *b_ih, qkv_tensor *b_hh) {
    return cell(ctx, QKV_RNN_GRU, "gru_cell", x, h, NULL, w_ih, w_hh, b_ih, b_hh, NULL);
}

qkv_status qkv_lstm_cell(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *h, qkv_tensor *c, qkv_tensor *w_ih,
                         qkv_tensor *w_hh, qkv_tensor *b_ih, qkv_tensor *b_hh, qkv_tensor **h_out,
                         qkv_tensor **c_out) {
    if (!h_out || !c_out) return qkv_error_set(QKV_ERR_INVALID, "lstm_cell: h_out and c_out are required");
    *c_out = NULL;
    *h_out = cell(ctx, QKV_RNN_LSTM, "lstm_cell", x, h, c, w_ih, w_hh, b_ih, b_hh, c_out);
    if (!*h_out) {
        *c_out = NULL;
        return qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_INVALID, "lstm_cell: missing input");
    }
    return QKV_OK;
}
