/* The Trax course's Siamese network for duplicate detection:
 *
 *     Parallel(encoder, encoder), one encoder (shared weights) = Serial(Embedding, n x LSTM, MaskedMean, L2Normalize)
 *
 * Each text becomes a unit vector (the mean of the LSTM's outputs over its tokens, normalised); two texts are
 * duplicates when the cosine of their vectors (a dot product) is high. Training takes a batch of duplicate pairs
 * (a_i, b_i): every b_j, j != i, is a negative of a_i, and the loss is qkv_triplet_loss (ops.h) with mean and/or
 * closest negatives.
 *
 * Parameters (torch names): "embedding.weight" [V, d_model], "rnn.weight_ih_l<k>", "rnn.weight_hh_l<k>",
 * "rnn.bias_ih_l<k>", "rnn.bias_hh_l<k>" (rnn.h, one direction). Initialisation as torch's Embedding (normal(0, 1))
 * and LSTM. Ownership: the model borrows its parameters from the qkv_params given to qkv_siamese_new. */
#ifndef QKV_SIAMESE_H
#define QKV_SIAMESE_H

#include <stdint.h>

#include "qkv/model.h"
#include "qkv/nn.h"
#include "qkv/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_siamese_config {
    int64_t vocab_size, d_model; /* d_model: embedding width, LSTM hidden size and the vectors' size */
    int n_layers;                /* stacked LSTM layers */
    float margin;                /* the triplet loss's alpha */
    qkv_triplet_terms terms;     /* mean negative, closest negative or both (the default) */
} qkv_siamese_config;

qkv_siamese_config qkv_siamese_config_default(void); /* d_model 128, 1 layer, margin 0.25, both terms */

typedef struct qkv_siamese {
    qkv_siamese_config cfg;
    qkv_layer *net;     /* Parallel(encoder, share(encoder)): (ids1, mask1, ids2, mask2) -> (v1, v2), owned */
    qkv_layer *encoder; /* the net's first child: (ids [B, T], token mask [B, T]) -> unit vectors [B, d_model] */
} qkv_siamese;

qkv_siamese *qkv_siamese_new(const qkv_siamese_config *cfg, qkv_params *params, qkv_rng *rng);
void qkv_siamese_free(qkv_siamese *m);
/* Unit vectors of a batch of texts: ids int32 [B, T], mask [B, T] (non-zero = token) -> [B, d_model]. */
qkv_tensor *qkv_siamese_encode(qkv_ctx *ctx, const qkv_siamese *m, qkv_tensor *ids, qkv_tensor *mask);
/* Both sides of a batch of pairs at once through the parallel net: *v1, *v2 [B, d_model]. */
qkv_status qkv_siamese_forward(qkv_ctx *ctx, const qkv_siamese *m, qkv_tensor *ids1, qkv_tensor *mask1,
                               qkv_tensor *ids2, qkv_tensor *mask2, qkv_tensor **v1, qkv_tensor **v2);

/* The registered "siamese" type (task "pairs"): forward gives [2, B, d_model] (the vectors of both texts; [1, B, D]
 * for a batch without src_ids), loss the triplet loss of the batch's pairs taken as duplicates. */
extern const qkv_model_type qkv_model_siamese;

#ifdef __cplusplus
}
#endif
#endif
