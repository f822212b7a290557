/* The pieces both Hugging Face architectures (hf_bert.c, hf_gpt2.c) are built from: parameters added under HF's
 * names and wired into nn layers, and the multi-head attention core. */
#include "models/hf_internal.h"
#include "qkv/attention.h"
#include "qkv/ops.h"

#include <stdio.h>

/* name_prefix + prefix, or NULL (error set) when too long for a parameter name. */
static const char *full_name(const qkv_hf_model *m, const char *prefix, char *buf, size_t size) {
    if (!m->name_prefix[0]) return prefix;
    if ((size_t)snprintf(buf, size, "%s%s", m->name_prefix, prefix) >= size) {
        qkv_error_set(QKV_ERR_INVALID, "hf model: parameter name '%s%s' is too long", m->name_prefix, prefix);
        return NULL;
    }
    return buf;
}

qkv_status qkv__hf_add_linear(qkv_hf_model *m, qkv_nn_linear *l, const char *prefix, int64_t in, int64_t out,
                              bool bias) {
    char buf[160];
    if (!(prefix = full_name(m, prefix, buf, sizeof buf))) return qkv_last_status();
    l->in_features = in, l->out_features = out;
    l->weight = qkv_params_add(m->params, prefix, "weight", QKV_DIMS(out, in));
    l->bias = bias ? qkv_params_add(m->params, prefix, "bias", QKV_DIMS(out)) : NULL;
    return l->weight && (!bias || l->bias) ? QKV_OK : qkv_last_status();
}

qkv_status qkv__hf_add_layer_norm(qkv_hf_model *m, qkv_nn_layer_norm *n, const char *prefix, int64_t dim) {
    char buf[160];
    if (!(prefix = full_name(m, prefix, buf, sizeof buf))) return qkv_last_status();
    n->dim = dim, n->eps = m->cfg.layer_norm_eps;
    n->weight = qkv_params_add(m->params, prefix, "weight", QKV_DIMS(dim));
    n->bias = qkv_params_add(m->params, prefix, "bias", QKV_DIMS(dim));
    if (!n->weight || !n->bias) return qkv_last_status();
    qkv_tensor_fill(n->weight, 1.0f);
    return QKV_OK;
}

qkv_status qkv__hf_add_embedding(qkv_hf_model *m, qkv_nn_embedding *e, const char *prefix, int64_t num, int64_t dim) {
    char buf[160];
    if (!(prefix = full_name(m, prefix, buf, sizeof buf))) return qkv_last_status();
    /* No padding index: it only changes gradients, and HF's pretrained rows are used as stored. */
    *e = (qkv_nn_embedding){.num_embeddings = num, .embedding_dim = dim, .padding_idx = -1, .scale = 1.0f};
    e->weight = qkv_params_add(m->params, prefix, "weight", QKV_DIMS(num, dim));
    return e->weight ? QKV_OK : qkv_last_status();
}

/* [B, T, E] -> [B, H, T, D] as views. */
static qkv_tensor *split_heads(qkv_ctx *ctx, qkv_tensor *x, int64_t B, int64_t T, int64_t H, int64_t D) {
    return qkv_permute(ctx, qkv_reshape(ctx, x, QKV_DIMS(B, T, H, D)), (const int[]){0, 2, 1, 3});
}

qkv_tensor *qkv__hf_attention(qkv_ctx *ctx, const qkv_hf_model *m, const hf_batch *b, qkv_tensor *q, qkv_tensor *k,
                              qkv_tensor *v, bool causal, qkv_tensor **weights) {
    int64_t H = m->cfg.num_heads, E = m->cfg.hidden_size, D = E / H;
    qkv_sdpa_opts o = qkv_sdpa_defaults();
    o.causal = causal;
    o.key_padding = b->key_padding;
    o.scale = m->cfg.scale_attn_weights ? 0.0f : 1.0f;
    o.weights = weights;
    o.dropout = b->attn_dropout;
    qkv_tensor *a = qkv_sdpa(ctx, split_heads(ctx, q, b->B, b->T, H, D), split_heads(ctx, k, b->B, b->T, H, D),
                             split_heads(ctx, v, b->B, b->T, H, D), &o);
    return qkv_reshape(ctx, qkv_permute(ctx, a, (const int[]){0, 2, 1, 3}), QKV_DIMS(b->B, b->T, E));
}
