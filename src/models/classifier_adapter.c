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

qkv_tensor *qkv__classifier_apply(qkv_ctx *ctx, const char *name, const qkv_layer *net, qkv_tensor *ids,
                                  qkv_tensor *mask) {
    if (!ids) return NULL;
    if (!net) {
        qkv_error_set(QKV_ERR_INVALID, "%s: model is not built", name);
        return NULL;
    }
    char s[96];
    if (ids->dtype != QKV_I32 || ids->ndim != 2 || ids->shape[1] < 1) {
        qkv_error_set(QKV_ERR_INVALID, "%s: ids %s must be int32 [batch, time >= 1]", name,
                      qkv_shape_str(ids, s, sizeof s));
        return NULL;
    }
    if (!mask) {
        mask = qkv_ctx_tensor(ctx, QKV_F32, 2, ids->shape);
        if (!mask) return NULL;
        for (int64_t i = 0; i < qkv_numel(mask); i++) qkv_f32(mask)[i] = 1.0f;
    }
    qkv_tensor *out[1] = {0};
    return qkv_layer_apply(ctx, net, 2, (qkv_tensor *[]){ids, mask}, out) ? NULL : out[0];
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
