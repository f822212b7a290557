/* A recurrent sentence classifier:
 *
 *     Serial(Embedding, RNN (vanilla tanh, LSTM or GRU; stacked, one direction), Pool, Dropout, Dense) -> logits
 *
 * Pool "last" reads the state after the last token (the classic encoder: everything the model knows about the
 * sentence must pass through the recurrence, so the gradient reaching an early word has crossed every later step:
 * the vanishing gradient of docs/lessons.md); "mean" and "max" pool the states of every token (padding excluded).
 * Padding must come after the tokens (as the batches do): a unidirectional recurrence then never reads it before
 * the last token.
 *
 * Parameters (torch names): "embedding.weight" [V, d_model]; "rnn.weight_ih_l<k>", "rnn.weight_hh_l<k>",
 * "rnn.bias_ih_l<k>", "rnn.bias_hh_l<k>" (torch's nn.RNN / nn.LSTM / nn.GRU); "classifier.weight" [C, hidden],
 * "classifier.bias" [C]. The model borrows them from the qkv_params given to qkv_rnn_classifier_new. */
#ifndef QKV_RNN_CLASSIFIER_H
#define QKV_RNN_CLASSIFIER_H

#include <stdint.h>

#include "qkv/model.h"
#include "qkv/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_rnn_pool { QKV_RNN_POOL_LAST = 0, QKV_RNN_POOL_MEAN, QKV_RNN_POOL_MAX } qkv_rnn_pool;

typedef struct qkv_rnn_classifier_config {
    int64_t vocab_size, n_classes, d_model, hidden;
    qkv_rnn_kind cell;
    int n_layers;
    qkv_rnn_pool pool;
    float dropout; /* on the pooled state, before the dense layer */
} qkv_rnn_classifier_config;

/* LSTM, d_model and hidden 128, 1 layer, last state, no dropout. */
qkv_rnn_classifier_config qkv_rnn_classifier_config_default(int64_t vocab_size, int64_t n_classes);

typedef struct qkv_rnn_classifier {
    qkv_rnn_classifier_config cfg;
    qkv_layer *net; /* (ids [B, T], token mask [B, T], non-zero = token) -> logits [B, n_classes], owned */
} qkv_rnn_classifier;

qkv_rnn_classifier *qkv_rnn_classifier_new(const qkv_rnn_classifier_config *cfg, qkv_params *params, qkv_rng *rng);
void qkv_rnn_classifier_free(qkv_rnn_classifier *m);
/* ids int32 [B, T], mask [B, T] (non-zero = token; NULL = all tokens) -> logits [B, classes]. */
qkv_tensor *qkv_rnn_classifier_logits(qkv_ctx *ctx, const qkv_rnn_classifier *m, qkv_tensor *ids, qkv_tensor *mask);

/* The registered "rnn_classifier" type (task "classify"): forward gives log-probabilities [B, classes]. */
extern const qkv_model_type qkv_model_rnn_classifier;

#ifdef __cplusplus
}
#endif
#endif
