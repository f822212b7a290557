/* The model-type entries every sentence classifier shares (classifier_adapter.c). A classifier file builds its
 * network and gives one function, the network's scores for a batch; forward (log-probabilities), loss
 * (cross-entropy against the labels) and free are then the same for all of them. Not installed. */
#ifndef QKV_MODELS_CLASSIFIER_ADAPTER_H
#define QKV_MODELS_CLASSIFIER_ADAPTER_H

#include <stdbool.h>

#include "core/visibility.h"
#include "qkv/model.h"
#include "qkv/nn.h"

typedef struct qkv__classifier {
    const char *name; /* the model type's name, for error messages */
    /* Scores [B, C] of a batch whose ids are present. maps, when non-NULL, has n_layers 0 on entry: a network
     * with attention fills it. */
    qkv_tensor *(*logits)(qkv_ctx *ctx, const void *net, const qkv_batch *b, qkv_attention_maps *maps);
    void (*free)(void *net);
    /* The scores are already log-probabilities (the network ends in log-softmax): forward returns them as they
     * are, and the loss reads them as logits (log-softmax leaves them unchanged). */
    bool log_probs;
} qkv__classifier;

QKV_INTERNAL_BEGIN
/* The model of network net (NULL: NULL, the error set by whoever failed to build it); frees net on failure. */
qkv_model *qkv__classifier_model(const qkv__classifier *kind, void *net);
/* The network a classifier model wraps. */
void *qkv__classifier_net(const qkv_model *m);
/* The qkv_model_type entries. */
void qkv__classifier_free(qkv_model *m);
qkv_tensor *qkv__classifier_forward(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b, qkv_attention_maps *maps);
qkv_tensor *qkv__classifier_loss(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b);
/* The logits of a network on the combinators that reads (ids [B, T] int32, token mask [B, T]); a NULL mask counts
 * every token. ids NULL: NULL (an earlier op failed); a network not built or ids of another shape: NULL with an
 * error naming the model. */
qkv_tensor *qkv__classifier_apply(qkv_ctx *ctx, const char *name, const qkv_layer *net, qkv_tensor *ids,
                                  qkv_tensor *mask);
QKV_INTERNAL_END

#endif
