/* A sequence tagger (the Trax course's NER model): Embedding -> encoder -> Dense -> LogSoftmax, one distribution
 * over tags per token. The encoder is a (deep, optionally bidirectional) LSTM or a Transformer encoder stack.
 *
 * Parameters (torch names, so a PyTorch module with the same attribute names loads as is):
 *     embedding.weight [V, d]
 *     lstm:        rnn.weight_ih_l<k>[_reverse], rnn.weight_hh_l<k>[_reverse], rnn.bias_*  (torch.nn.LSTM)
 *     transformer: pos.* (learned positions only), encoder.layers.<k>.* and encoder.norm.* (nn_transformer.h)
 *     output.weight [C, d * directions], output.bias [C]
 * Padding: the LSTM runs with each sentence's length (torch's packed sequences), so the reverse direction starts at
 * the sentence's last token; the Transformer masks padded keys. Padded positions still get outputs (the LSTM's
 * output there is 0): the loss and the metrics leave them out through the batch mask. */
#ifndef QKV_TAGGER_H
#define QKV_TAGGER_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/model.h"
#include "qkv/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_tagger_encoder { QKV_TAGGER_LSTM = 0, QKV_TAGGER_TRANSFORMER = 1 } qkv_tagger_encoder;

typedef struct qkv_tagger_config {
    int64_t vocab_size, n_tags;
    int64_t d_model;  /* embedding width = LSTM hidden size per direction = Transformer width */
    int64_t n_layers; /* LSTM layers or encoder blocks */
    qkv_tagger_encoder encoder;
    bool bidirectional; /* lstm */
    float dropout;      /* lstm: between layers and before the output layer; transformer: the blocks' dropout */
    int64_t n_heads, d_ff, max_len; /* transformer */
    bool learned_pos;               /* transformer: learned positions instead of sinusoidal */
    int64_t adapter_dim;            /* transformer: Houlsby adapters in every block, 0 = none */
} qkv_tagger_config;

/* d_model 128, one bidirectional LSTM layer, no dropout; transformer: 4 heads, d_ff 512, max_len 512. */
qkv_tagger_config qkv_tagger_config_default(int64_t vocab_size, int64_t n_tags);

typedef struct qkv_tagger {
    qkv_tagger_config cfg;
    qkv_nn_embedding embedding;
    qkv_rnn rnn;
    qkv_nn_posenc pos;
    qkv_nn_encoder encoder;
    qkv_nn_linear output;
} qkv_tagger;

/* A heap model whose parameters live in params (the caller's); NULL with an error on a bad config. */
qkv_tagger *qkv_tagger_new(const qkv_tagger_config *cfg, qkv_params *params, qkv_rng *rng);
void qkv_tagger_free(qkv_tagger *m);
/* ids int32 [B, T], mask [B, T] (non-zero = token, each row's tokens first; NULL = all tokens) -> log-probabilities
 * [B, T, n_tags]. weights: NULL, or n_layers slots for the Transformer's attention maps [B, H, T, T]. */
qkv_tensor *qkv_tagger_forward(qkv_ctx *ctx, const qkv_tagger *m, qkv_tensor *ids, const qkv_tensor *mask,
                               qkv_tensor **weights);
/* Mean negative log-likelihood of targets int32 [B, T] over the tokens of mask (masked positions count nothing,
 * whatever their target). */
qkv_tensor *qkv_tagger_loss(qkv_ctx *ctx, const qkv_tagger *m, qkv_tensor *ids, const qkv_tensor *mask,
                            qkv_tensor *targets);

#ifdef __cplusplus
}
#endif
#endif
