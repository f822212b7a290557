/* The embedding-mean classifier (the Trax course's sentiment baseline):
 *
 *     Embedding -> masked Mean over time -> Dense -> LogSoftmax
 *
 * Each word's vector is averaged over the sentence (padding excluded) and one linear layer scores the classes.
 * Because the model is linear after the average, a word's contribution to the verdict is exact: the score of
 * class c is the mean over words w of (W_c . e_w) + b_c, which qkv_embmean_word_scores exposes.
 *
 * Parameters (in the qkv_params given to init, which owns them): "embedding.weight" [V, D],
 * "classifier.weight" [C, D], "classifier.bias" [C]. */
#ifndef QKV_EMBMEAN_H
#define QKV_EMBMEAN_H

#include "qkv/autograd.h"
#include "qkv/params.h"
#include "qkv/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_embmean {
    int64_t vocab, dim, classes;
    qkv_tensor *emb, *w, *b; /* borrowed from the params collection */
} qkv_embmean;

/* Embedding ~ N(0, 1) as torch.nn.Embedding; Dense as torch.nn.Linear (uniform +-1/sqrt(D)). */
qkv_status qkv_embmean_init(qkv_embmean *m, qkv_params *params, int64_t vocab, int64_t dim, int64_t classes,
                            qkv_rng *rng);
/* ids int32 [B, T]; mask float32 [B, T] (1 = word, 0 = padding). Returns log-probabilities [B, classes]. */
qkv_tensor *qkv_embmean_forward(qkv_ctx *ctx, const qkv_embmean *m, qkv_tensor *ids, qkv_tensor *mask);
/* Contribution of each word to (class 1 - class 0) logit margin: out[t] = (W_1 - W_0) . e_{ids[t]} / n_words. */
void qkv_embmean_word_scores(const qkv_embmean *m, const int32_t *ids, int n, float *out);

#ifdef __cplusplus
}
#endif
#endif
