/* A sentence classifier as a model type: the entries that do not depend on its architecture. See
 * classifier_adapter.h. */
#include <stdlib.h>

#include "models/classifier_adapter.h"
#include "qkv/ops.h"

/* What the engine holds: the network and how to read it. */
struct qkv_model {
    const qkv__classifier *kind;
    void *net;
};

qkv_model *qkv__classifier_model(const qkv__classifier *kind, void *net) {
    if (!net) return NULL;
    qkv_model *m = calloc(1, sizeof *m);
    if (!m) {
        kind->free(net);
        qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", kind->name);
        return NULL;
    }
    m->kind = kind;
    m->net = net;
    return m;
}

void *qkv__classifier_net(const qkv_model *m) { return m->net; }

void qkv__classifier_free(qkv_model *m) {
    if (!m) return;
    m->kind->free(m->net);
    free(m);
}

qkv_tensor *qkv__classifier_forward(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b, qkv_attention_maps *maps) {
    if (maps) maps->n_layers = 0;
    if (!b || !b->ids) {
        qkv_error_set(QKV_ERR_INVALID, "%s: batch has no ids", m->kind->name);
        return NULL;
    }
    qkv_tensor *scores = m->kind->logits(ctx, m->net, b, maps);
    return m->kind->log_probs ? scores : qkv_log_softmax(ctx, scores, -1);
}

qkv_tensor *qkv__classifier_loss(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b) {
    if (!b || !b->ids || !b->labels) {
        qkv_error_set(QKV_ERR_INVALID, "%s: batch has no ids or no labels", m->kind->name);
        return NULL;
    }
    return qkv_cross_entropy(ctx, m->kind->logits(ctx, m->net, b, NULL), b->labels, NULL);
}
