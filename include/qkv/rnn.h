/* Recurrent layers: Elman RNN (tanh / relu), GRU and LSTM, deep and bidirectional, on padded batches, with the
 * parameter names, shapes and gate orders of torch.nn.RNN / GRU / LSTM so a PyTorch state_dict loads as is.
 *
 * Parameters, for layer k and direction suffix "" (forward) or "_reverse" (backward), G = gates * hidden where
 * gates is 1 (RNN), 3 (GRU) or 4 (LSTM):
 *     <prefix>.weight_ih_l<k>[_reverse]  [G, in_k]   in_0 = input_size, in_k = dirs * hidden_size after
 *     <prefix>.weight_hh_l<k>[_reverse]  [G, hidden]
 *     <prefix>.bias_ih_l<k>[_reverse]    [G]         (when cfg.bias)
 *     <prefix>.bias_hh_l<k>[_reverse]    [G]
 * Gate blocks along G, as PyTorch: LSTM (i, f, g, o); GRU (r, z, n). The GRU's candidate is
 *     n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
 * (b_hn inside the reset product, as torch and cuDNN; docs/rnn.md compares Trax's orders and variant).
 *
 * Padding follows PyTorch's packed sequences (pack_padded_sequence(enforce_sorted=False) ... pad_packed_sequence):
 * with lengths given, steps t >= lengths[b] of sequence b neither read its input, update its state nor produce
 * output (the output there is 0 and no gradient flows through it); h_n / c_n hold each sequence's state after its
 * own last valid step; the reverse direction starts at each sequence's own last valid step. The output keeps the
 * input's T (torch trims it to max(lengths); the extra steps are zeros either way).
 */
#ifndef QKV_RNN_H
#define QKV_RNN_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/autograd.h"
#include "qkv/params.h"
#include "qkv/rng.h"
#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_RNN_MAX_LAYERS 16

typedef enum qkv_rnn_kind { QKV_RNN_TANH = 0, QKV_RNN_RELU = 1, QKV_RNN_GRU = 2, QKV_RNN_LSTM = 3 } qkv_rnn_kind;

typedef struct qkv_rnn_config {
    qkv_rnn_kind kind;
    int64_t input_size, hidden_size;
    int num_layers;       /* 1 .. QKV_RNN_MAX_LAYERS */
    bool bidirectional;
    bool bias;            /* bias_ih and bias_hh exist (torch's bias=True) */
    float dropout;        /* probability, applied to the output of every layer but the last, training mode only */
    /* Always batch_first: inputs are [B, T, input_size]. */
    /* Initialisation options (qkv_rnn_init). The default is torch's: every parameter uniform in +-1/sqrt(hidden). */
    bool orthogonal_hh;   /* each [hidden, hidden] gate block of every weight_hh is an independent orthogonal
                           * matrix (gain 1) instead of uniform */
    bool forget_bias_one; /* LSTM only, needs bias: the forget-gate slice [H, 2H) of every bias_ih is 1 and that of
                           * bias_hh is 0, so the effective forget bias (their sum) is exactly 1 */
} qkv_rnn_config;

/* One layer, unidirectional, bias on, no dropout, torch's initialisation. */
qkv_rnn_config qkv_rnn_config_default(qkv_rnn_kind kind, int64_t input_size, int64_t hidden_size);

/* A recurrent module: its configuration and borrowed pointers into the qkv_params that own the weights.
 * [layer][direction]; biases are NULL when cfg.bias is false. */
typedef struct qkv_rnn {
    qkv_rnn_config cfg;
    qkv_tensor *w_ih[QKV_RNN_MAX_LAYERS][2], *w_hh[QKV_RNN_MAX_LAYERS][2];
    qkv_tensor *b_ih[QKV_RNN_MAX_LAYERS][2], *b_hh[QKV_RNN_MAX_LAYERS][2];
} qkv_rnn;

/* Validate cfg, add the parameters to `params` under `prefix` (e.g. "encoder.lstm"; NULL or "" for none) and
 * initialise them from rng. On error nothing usable is left in *rnn (parameters already added stay in params,
 * which still owns them). */
qkv_status qkv_rnn_init(qkv_rnn *rnn, qkv_params *params, const char *prefix, const qkv_rnn_config *cfg,
                        qkv_rng *rng);

/* Run the module over a padded batch.
 *   x        [B, T, input_size] float32
 *   lengths  int32 [B] with 0 <= lengths[b] <= T, or NULL (every sequence has length T)
 *   h0, c0   [num_layers * dirs, B, hidden] or NULL (zeros); c0 only for LSTM. Row layer * dirs + direction.
 * Results (context tensors; pass NULL for the ones not wanted):
 *   out      [B, T, dirs * hidden]: the last layer's outputs, forward direction in [..., :hidden]
 *   h_n      [num_layers * dirs, B, hidden]
 *   c_n      the same for LSTM; set to NULL for the other kinds
 * Every result is differentiable with respect to x, h0, c0 and the parameters. */
qkv_status qkv_rnn_forward(qkv_ctx *ctx, const qkv_rnn *rnn, qkv_tensor *x, const qkv_tensor *lengths,
                           qkv_tensor *h0, qkv_tensor *c0, qkv_tensor **out, qkv_tensor **h_n, qkv_tensor **c_n);

/* ---- One timestep with carried state (decoders). Same weights and gate orders as above (pass e.g.
 * rnn->w_ih[0][0]); x [B, in], h and c [B, hidden] or NULL for zeros; biases may be NULL. Differentiable. ---- */
qkv_tensor *qkv_rnn_cell(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *h, qkv_tensor *w_ih, qkv_tensor *w_hh,
                         qkv_tensor *b_ih, qkv_tensor *b_hh, bool relu);
qkv_tensor *qkv_gru_cell(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *h, qkv_tensor *w_ih, qkv_tensor *w_hh,
                         qkv_tensor *b_ih, qkv_tensor *b_hh);
/* New state in *h_out and *c_out. */
qkv_status qkv_lstm_cell(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *h, qkv_tensor *c, qkv_tensor *w_ih,
                         qkv_tensor *w_hh, qkv_tensor *b_ih, qkv_tensor *b_hh, qkv_tensor **h_out,
                         qkv_tensor **c_out);

#ifdef __cplusplus
}
#endif
#endif
