/* The Trax course's recurrent language model:
 *
 *     ShiftRight -> Embedding -> n x GRU (or LSTM) -> Dense -> LogSoftmax
 *
 * The model reads the target sequence shifted right by one (position 0 sees the start id, Trax pads with 0) and
 * predicts every target from what precedes it. With shift_right off it reads the batch's `ids` instead (the data
 * pipeline's inputs, already one step behind the targets).
 *
 * Parameters (torch names): "embedding.weight" [V, d_model], "rnn.weight_ih_l<k>" ... (see rnn.h, one direction),
 * "output.weight" [V, d_model], "output.bias" [V]. Initialisation: embedding normal(0, 1), recurrent and output
 * layers as torch's GRU / LSTM / Linear.
 *
 * Ownership: the model borrows its parameters from the qkv_params given to create; a decoder borrows the model. */
#ifndef QKV_RNNLM_H
#define QKV_RNNLM_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/model.h"
#include "qkv/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_rnnlm_config {
    int64_t vocab_size, d_model; /* d_model: embedding size and hidden size (Trax's single width) */
    int n_layers;
    qkv_rnn_kind kind;   /* QKV_RNN_GRU (the course's) or QKV_RNN_LSTM */
    float dropout;       /* between recurrent layers, training mode only */
    bool shift_right;    /* read ShiftRight(targets) (Trax) rather than ids */
    int32_t start_id;    /* the id ShiftRight puts at position 0 (Trax: 0) */
} qkv_rnnlm_config;

qkv_rnnlm_config qkv_rnnlm_config_default(void); /* GRU, d_model 512, 2 layers, shift right with 0 */

typedef struct qkv_rnnlm {
    qkv_rnnlm_config cfg;
    qkv_layer *net; /* Serial(Embedding, GRU/LSTM, Dense, LogSoftmax) (nn.h), owned: the forward */
    /* The net's modules (views of the same parameters), for the decoder's step-by-step use. */
    qkv_nn_embedding embedding;
    qkv_rnn rnn;
    qkv_nn_linear output;
} qkv_rnnlm;

qkv_rnnlm *qkv_rnnlm_new(const qkv_rnnlm_config *cfg, qkv_params *params, qkv_rng *rng);
void qkv_rnnlm_free(qkv_rnnlm *m);

/* inputs int32 [B, T] (already the model's inputs: shifted targets or ids) -> log-probabilities [B, T, V]. */
qkv_tensor *qkv_rnnlm_forward(qkv_ctx *ctx, const qkv_rnnlm *m, qkv_tensor *inputs);

/* ---- Incremental decoding: the recurrent state is carried from step to step (inference, no autograd). ---- */
typedef struct qkv_rnnlm_decoder qkv_rnnlm_decoder;
qkv_rnnlm_decoder *qkv_rnnlm_decoder_new(const qkv_rnnlm *m, int batch);
void qkv_rnnlm_decoder_free(qkv_rnnlm_decoder *d);
void qkv_rnnlm_decoder_reset(qkv_rnnlm_decoder *d); /* zero state */
/* Feed tokens[0..batch) as the next inputs; log-probabilities [batch, V] of the following token. */
qkv_status qkv_rnnlm_decoder_step(qkv_rnnlm_decoder *d, const int32_t *tokens, float *logprobs);
/* The decoder then holds n_rows sequences (1..the batch it was made for): sequence b becomes old sequence from[b]
 * (each in [0, current count)). Later steps take n_rows tokens. Error (nothing changed) on an index out of range. */
qkv_status qkv_rnnlm_decoder_reorder(qkv_rnnlm_decoder *d, const int32_t *from, int n_rows);

/* The registered "rnnlm" type's decoder (decoder.h) is this one: log-probabilities as scores, no capacity limit,
 * and cfg.start_id as start token when cfg.shift_right. */
extern const qkv_model_type qkv_model_rnnlm;

#ifdef __cplusplus
}
#endif
#endif
