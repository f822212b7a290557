/* The fused recurrent op behind qkv_rnn_forward and the cells (library-internal). */
#ifndef QKV_NN_RNN_OP_H
#define QKV_NN_RNN_OP_H

#include "core/visibility.h"
#include "qkv/rnn.h"

QKV_INTERNAL_BEGIN

/* One layer of a recurrent network over a whole padded batch, both directions, as one differentiable op.
 *   xp[d]    [B, T, G] contiguous: the input projections x W_ih^T + b_ih of direction d (G = gates * H)
 *   w_hh[d]  [G, H];  b_hh[d] [G] or NULL
 *   h0, c0   contiguous with dirs * B * H elements ([dirs, B, H]) or NULL for zeros; c0 for LSTM only
 *   lengths  B valid lengths (copied) or NULL for all T
 * Returns one flat tensor holding, in this order: the outputs [B, T, dirs * H] (0 at padded steps), h_n
 * [dirs, B, H] and, for LSTM, c_n [dirs, B, H]; callers slice views out of it. */
qkv_tensor *qkv__rnn_layer(qkv_ctx *ctx, qkv_rnn_kind kind, int dirs, qkv_tensor *const *xp,
                           qkv_tensor *const *w_hh, qkv_tensor *const *b_hh, qkv_tensor *h0, qkv_tensor *c0,
                           const int32_t *lengths, int64_t H);

static inline int qkv__rnn_gates(qkv_rnn_kind kind) {
    return kind == QKV_RNN_LSTM ? 4 : kind == QKV_RNN_GRU ? 3 : 1;
}

QKV_INTERNAL_END
#endif
