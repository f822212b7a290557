/* A convolutional sentence classifier (Kim 2014, "Convolutional Neural Networks for Sentence Classification"):
 *
 *     Serial(Embedding,
 *            Branch(for each width k: Serial(Conv1d(k), ReLU, MaskedMax)),   every width sees the same words
 *            Concat, Dropout, Dense)                                          -> logits [B, classes]
 *
 * Each filter of width k is an n-gram detector slid over the sentence; max-over-time pooling keeps its strongest
 * match wherever it occurs, so the sentence becomes one vector of n_filters values per width. Every position is
 * computed at once (no recurrence), which is the point of the comparison with the RNN classifiers (docs/lessons.md).
 * Padding of a batch is read as zeros and excluded from the pooling, so a sentence scores the same in any batch.
 * With "wide" convolution (padding k - 1 at both ends, Kalchbrenner et al. 2014) a sentence shorter than a filter
 * still has windows; "valid" slides filters over the sentence alone.
 *
 * Parameters (torch names): "embedding.weight" [V, d_model], "convs.<i>.weight" [n_filters, d_model, widths[i]],
 * "convs.<i>.bias" [n_filters], "classifier.weight" [C, n_widths * n_filters], "classifier.bias" [C]. The model
 * borrows them from the qkv_params given to qkv_cnn_classifier_new. */
#ifndef QKV_CNN_CLASSIFIER_H
#define QKV_CNN_CLASSIFIER_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/model.h"
#include "qkv/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_CNN_MAX_WIDTHS 8

typedef struct qkv_cnn_classifier_config {
    int64_t vocab_size, n_classes, d_model, n_filters;
    int n_widths;
    int64_t widths[QKV_CNN_MAX_WIDTHS];
    bool wide;     /* padding width - 1 at both ends (true) or none */
    float dropout; /* on the pooled features, before the dense layer */
} qkv_cnn_classifier_config;

/* d_model 128, widths 3, 4, 5 with 100 filters each, wide, dropout 0.5 (Kim's). */
qkv_cnn_classifier_config qkv_cnn_classifier_config_default(int64_t vocab_size, int64_t n_classes);

typedef struct qkv_cnn_classifier {
    qkv_cnn_classifier_config cfg;
    qkv_layer *net; /* (ids [B, T], token mask [B, T], non-zero = token) -> logits [B, n_classes], owned */
} qkv_cnn_classifier;

qkv_cnn_classifier *qkv_cnn_classifier_new(const qkv_cnn_classifier_config *cfg, qkv_params *params, qkv_rng *rng);
void qkv_cnn_classifier_free(qkv_cnn_classifier *m);
/* ids int32 [B, T], mask [B, T] (int32 or float32, non-zero = token; NULL = all tokens) -> logits [B, classes]. */
qkv_tensor *qkv_cnn_classifier_logits(qkv_ctx *ctx, const qkv_cnn_classifier *m, qkv_tensor *ids, qkv_tensor *mask);

/* The registered "cnn_classifier" type (task "classify"): forward gives log-probabilities [B, classes]. */
extern const qkv_model_type qkv_model_cnn_classifier;

#ifdef __cplusplus
}
#endif
#endif
