/* Translation models: an LSTM encoder-decoder with attention (Luong / Bahdanau) and the encoder-decoder
 * Transformer (torch.nn.Transformer + embeddings, positions and a generator).
 *
 * Both take batch-major int32 ids: src [B, S] with a padding mask (non-zero = padded, nn's convention), decoder
 * inputs tgt [B, T] (teacher forcing: BOS followed by the target shifted right), and return logits [B, T, V_tgt].
 * Parameter names equal the state_dict keys of the PyTorch modules in tests/ref/seq2seq.py (and, for the benchmark
 * configurations, of ../shared/bench/torch_ref.py's models), so torch weights load by name.
 *
 * Both are registered as model types ("lstm_seq2seq", "transformer_seq2seq", task "seq2seq", model.h) whose
 * incremental decoder (decoder.h: log-probabilities, source attention, cached decoder state) drives greedy,
 * sampling, beam and MBR decoding (beam.h). qkv_lstm_s2s_decoder / qkv_tf_s2s_decoder give the same decoder for a
 * model struct initialised directly (not through the registry).
 *
 * Ownership: a model struct holds borrowed pointers into the qkv_params given to init, which must outlive it. */
#ifndef QKV_SEQ2SEQ_H
#define QKV_SEQ2SEQ_H

#include "qkv/beam.h"
#include "qkv/decoder.h"
#include "qkv/nn.h"
#include "qkv/rnn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- LSTM encoder-decoder with attention ----
 *   encoder: h_enc = LSTM_enc(src_emb(src))                           (packed: padding is skipped)
 *   decoder: h_t = LSTM_dec(x_t, state), state_0 = the encoder's final (h, c) per layer,
 *            x_t = tgt_emb(y_{t-1})          or [tgt_emb(y_{t-1}); h~_{t-1}] with input feeding (h~_0 = 0)
 *   attention: a_t = softmax(score(h_t, h_enc)) over unpadded source steps, ctx_t = sum_i a_ti h_enc_i
 *   h~_t = tanh(combine([ctx_t; h_t]))  (Luong's W_c, no bias),  logits_t = gen(dropout(h~_t))
 * Parameters: src_emb.weight, tgt_emb.weight, enc.* and dec.* (torch.nn.LSTM names), attn.* (score function,
 * nn_attention.h), combine.weight [H, 2H], gen.weight [V, H], gen.bias [V]. Dropout (training) applies to the
 * embeddings and h~. */
typedef struct qkv_lstm_s2s_config {
    int64_t src_vocab, tgt_vocab, embed, hidden;
    int num_layers;
    qkv_score_kind attention;
    bool input_feeding;
    float dropout;
} qkv_lstm_s2s_config;

typedef struct qkv_lstm_s2s {
    qkv_lstm_s2s_config cfg;
    qkv_nn_embedding src_emb, tgt_emb;
    qkv_rnn enc, dec;
    qkv_nn_score_attention attn;
    qkv_nn_linear combine, gen;
} qkv_lstm_s2s;

qkv_status qkv_lstm_s2s_init(qkv_lstm_s2s *m, qkv_params *params, const qkv_lstm_s2s_config *cfg, qkv_rng *rng);
/* src [B, S], src_pad [B, S] (non-zero = padded) or NULL, tgt [B, T] -> logits [B, T, tgt_vocab]. attn, if
 * non-NULL, receives the attention weights [B, T, S]. */
qkv_tensor *qkv_lstm_s2s_forward(qkv_ctx *ctx, const qkv_lstm_s2s *m, qkv_tensor *src, const qkv_tensor *src_pad,
                                 qkv_tensor *tgt, qkv_tensor **attn);
qkv_decoder qkv_lstm_s2s_decoder(const qkv_lstm_s2s *m); /* borrows m */

/* ---- Encoder-decoder Transformer ----
 *   x_src = dropout(src_emb(src) * sqrt(d) + pe[:S]),  x_tgt = dropout(tgt_emb(tgt) * sqrt(d) + pe[:T])
 *   y = tf(x_src, x_tgt; src key padding, causal target, memory padding),  logits = gen(y)
 * Parameters: src_emb.weight, tgt_emb.weight (one shared "emb.weight" when share_embeddings), the buffer pe
 * [max_len, d], tf.encoder.* / tf.decoder.* (torch.nn.Transformer's names), gen.weight, gen.bias. */
typedef struct qkv_tf_s2s_config {
    int64_t src_vocab, tgt_vocab;
    qkv_nn_block_config block; /* d_model, nhead, dim_feedforward, dropout, activation, norm_first */
    int n_enc_layers, n_dec_layers;
    int64_t max_len;           /* longest source or target (positions table) */
    bool share_embeddings;     /* one embedding for both sides (needs src_vocab == tgt_vocab) */
} qkv_tf_s2s_config;

typedef struct qkv_tf_s2s {
    qkv_tf_s2s_config cfg;
    qkv_nn_embedding src_emb, tgt_emb;
    qkv_nn_posenc pe;
    qkv_nn_transformer tf;
    qkv_nn_linear gen;
} qkv_tf_s2s;

qkv_status qkv_tf_s2s_init(qkv_tf_s2s *m, qkv_params *params, const qkv_tf_s2s_config *cfg, qkv_rng *rng);
/* src [B, S], src_pad [B, S] or NULL, tgt [B, T] -> logits [B, T, tgt_vocab]. cross, if non-NULL, is an array of
 * n_dec_layers slots receiving each decoder layer's cross-attention weights [B, H, T, S]. */
qkv_tensor *qkv_tf_s2s_forward(qkv_ctx *ctx, const qkv_tf_s2s *m, qkv_tensor *src, const qkv_tensor *src_pad,
                               qkv_tensor *tgt, qkv_tensor **cross);
/* The same, also returning (each array NULL or n_enc_layers / n_dec_layers slots) the encoder's self-attention
 * [B, H, S, S] and the decoder's causal self-attention [B, H, T, T] per layer, for the viewer. Through the model type
 * (model.h), forward's qkv_attention_maps holds the n_dec_layers cross maps first (kind "cross"), then the
 * encoder's (kind "self") and the decoder's self-attention maps (kind "causal"). */
qkv_tensor *qkv_tf_s2s_forward_maps(qkv_ctx *ctx, const qkv_tf_s2s *m, qkv_tensor *src, const qkv_tensor *src_pad,
                                    qkv_tensor *tgt, qkv_tensor **enc_self, qkv_tensor **dec_self,
                                    qkv_tensor **cross);
qkv_decoder qkv_tf_s2s_decoder(const qkv_tf_s2s *m); /* borrows m */

/* Registered as model types "lstm_seq2seq" and "transformer_seq2seq" (model.h): the decoder of a model they create
 * is the one above, reached through the type (qkv_model_decoder, decoder.h). */

#ifdef __cplusplus
}
#endif
#endif
