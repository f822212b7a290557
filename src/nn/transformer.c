/* Transformer encoder / decoder blocks and stacks, torch.nn.Transformer* semantics and state_dict names. Each
 * forward reads like torch's: x = norm(x + block(x)) post-norm, x = x + block(norm(x)) pre-norm. */
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "qkv/init.h"
#include "qkv/nn_transformer.h"
#include "qkv/ops.h"

qkv_nn_block_config qkv_nn_block_config_default(int64_t d_model, int64_t nhead) {
    return (qkv_nn_block_config){.d_model = d_model, .nhead = nhead, .dim_feedforward = 2048, .dropout = 0.1f,
                                 .activation = QKV_ACT_RELU, .layer_norm_eps = 1e-5f};
}

static qkv_status check_config(const char *prefix, const qkv_nn_block_config *cfg) {
    const char *p = prefix ? prefix : "";
    if (!cfg) return qkv_error_set(QKV_ERR_INVALID, "transformer block '%s': config is NULL", p);
    if (cfg->d_model < 1 || cfg->nhead < 1 || cfg->d_model % cfg->nhead || cfg->dim_feedforward < 1)
        return qkv_error_set(QKV_ERR_INVALID,
                             "transformer block '%s': d_model %lld must be a positive multiple of nhead %lld and "
                             "dim_feedforward %lld positive",
                             p, (long long)cfg->d_model, (long long)cfg->nhead, (long long)cfg->dim_feedforward);
    if (!(cfg->dropout >= 0.0f && cfg->dropout < 1.0f))
        return qkv_error_set(QKV_ERR_INVALID, "transformer block '%s': dropout %g outside [0, 1)", p,
                             (double)cfg->dropout);
    if (cfg->adapter_dim < 0)
        return qkv_error_set(QKV_ERR_INVALID, "transformer block '%s': adapter_dim %lld is negative", p,
                             (long long)cfg->adapter_dim);
    if (cfg->activation != QKV_ACT_RELU && cfg->activation != QKV_ACT_GELU && cfg->activation != QKV_ACT_GELU_TANH)
        return qkv_error_set(QKV_ERR_INVALID, "transformer block '%s': activation must be relu or gelu", p);
    return QKV_OK;
}

/* Sub-module "<prefix>.<name>" helpers, so the init functions list the parts in torch's order. */
static qkv_status add_mha(qkv_nn_mha *m, qkv_params *params, const char *prefix, const char *name,
                          const qkv_nn_block_config *cfg, qkv_rng *rng) {
    char full[NN_NAME_MAX];
    qkv_status st = qkv_params_join(full, sizeof full, prefix, name);
    if (st) return st;
    qkv_nn_mha_config mc = qkv_nn_mha_config_default(cfg->d_model, cfg->nhead);
    mc.dropout = cfg->dropout;
    mc.separate_proj = cfg->separate_proj;
    return qkv_nn_mha_init(m, params, full, &mc, rng);
}

static qkv_status add_linear(qkv_nn_linear *l, qkv_params *params, const char *prefix, const char *name, int64_t in,
                             int64_t out, qkv_rng *rng) {
    char full[NN_NAME_MAX];
    qkv_status st = qkv_params_join(full, sizeof full, prefix, name);
    return st ? st : qkv_nn_linear_init(l, params, full, in, out, true, rng);
}

static qkv_status add_norm(qkv_nn_layer_norm *n, qkv_params *params, const char *prefix, const char *name,
                           int64_t dim, float eps) {
    char full[NN_NAME_MAX];
    qkv_status st = qkv_params_join(full, sizeof full, prefix, name);
    return st ? st : qkv_nn_layer_norm_init(n, params, full, dim, eps > 0.0f ? eps : 1e-5f, true);
}

/* A bottleneck adapter near the identity: its output starts as its input, whatever block it is put into. */
static qkv_status add_adapter(qkv_nn_adapter *a, qkv_params *params, const char *prefix, const char *name,
                              const qkv_nn_block_config *cfg, qkv_rng *rng) {
    char full[NN_NAME_MAX];
    qkv_status st = qkv_params_join(full, sizeof full, prefix, name);
    if (!st) st = add_linear(&a->down, params, full, "down", cfg->d_model, cfg->adapter_dim, rng);
    if (!st) st = add_linear(&a->up, params, full, "up", cfg->adapter_dim, cfg->d_model, rng);
    if (!st) st = qkv_init_normal(a->down.weight, 0.0f, 1e-3f, rng);
    if (!st) st = qkv_init_normal(a->up.weight, 0.0f, 1e-3f, rng);
    if (!st) st = qkv_init_constant(a->down.bias, 0.0f);
    if (!st) st = qkv_init_constant(a->up.bias, 0.0f);
    return st;
}

/* h + up(act(down(h))) on a sublayer's output; h itself when the block has no adapters. */
static qkv_tensor *adapt(qkv_ctx *ctx, const qkv_nn_block_config *cfg, const qkv_nn_adapter *a, qkv_tensor *h) {
    if (cfg->adapter_dim <= 0 || !h) return h;
    qkv_tensor *z = qkv_nn_activate(ctx, cfg->activation, qkv_nn_linear_forward(ctx, &a->down, h));
    return qkv_add(ctx, h, qkv_nn_linear_forward(ctx, &a->up, z));
}

/* Position-wise feed-forward: dropout(linear2(dropout(act(linear1(x))))). */
static qkv_tensor *ff_block(qkv_ctx *ctx, const qkv_nn_block_config *cfg, const qkv_nn_linear *l1,
                            const qkv_nn_linear *l2, qkv_tensor *x) {
    qkv_tensor *h = qkv_dropout(ctx, qkv_nn_activate(ctx, cfg->activation, qkv_nn_linear_forward(ctx, l1, x)),
                                cfg->dropout);
    return qkv_dropout(ctx, qkv_nn_linear_forward(ctx, l2, h), cfg->dropout);
}

/* dropout(attention(q, kv, kv)) with the given masks. */
static qkv_tensor *attn_block(qkv_ctx *ctx, const qkv_nn_block_config *cfg, const qkv_nn_mha *m, qkv_tensor *q,
                              qkv_tensor *kv, const qkv_nn_attn_mask *mask, qkv_tensor **weights) {
    qkv_nn_mha_opts o = {.weights = weights};
    if (mask) {
        o.causal = mask->causal;
        o.key_padding = mask->key_padding;
    }
    return qkv_dropout(ctx, qkv_nn_mha_forward(ctx, m, q, kv, kv, &o), cfg->dropout);
}

/* ---- Encoder layer ----------------------------------------------------------------------------------------- */

qkv_status qkv_nn_encoder_layer_init(qkv_nn_encoder_layer *l, qkv_params *params, const char *prefix,
                                     const qkv_nn_block_config *cfg, qkv_rng *rng) {
    if (!l || !params || !rng)
        return qkv_error_set(QKV_ERR_INVALID, "encoder layer init: layer, params or rng is NULL");
    memset(l, 0, sizeof *l);
    qkv_status st = check_config(prefix, cfg);
    if (st) return st;
    int64_t d = cfg->d_model;
    if ((st = add_mha(&l->self_attn, params, prefix, "self_attn", cfg, rng)) ||
        (st = add_linear(&l->linear1, params, prefix, "linear1", d, cfg->dim_feedforward, rng)) ||
        (st = add_linear(&l->linear2, params, prefix, "linear2", cfg->dim_feedforward, d, rng)) ||
        (st = add_norm(&l->norm1, params, prefix, "norm1", d, cfg->layer_norm_eps)) ||
        (st = add_norm(&l->norm2, params, prefix, "norm2", d, cfg->layer_norm_eps)))
        return st;
    if (cfg->adapter_dim > 0 && ((st = add_adapter(&l->adapter1, params, prefix, "adapter1", cfg, rng)) ||
                                 (st = add_adapter(&l->adapter2, params, prefix, "adapter2", cfg, rng))))
        return st;
    l->cfg = *cfg;
    return QKV_OK;
}

/* The first n positions of x [B, T, d] (a view when n < T; x itself when n covers every position). */
static qkv_tensor *first_rows(qkv_ctx *ctx, qkv_tensor *x, int64_t n) {
    return x && x->ndim == 3 && n < x->shape[1] ? qkv_slice(ctx, x, 1, 0, n, 1) : x;
}

/* With xq the first n rows of x, every row attending to all of x:
 *     pre-norm:   h = norm1(x);  y = xq + SA(hq, h);  y = y + FF(norm2(y))
 *     post-norm:  y = norm1(xq + SA(xq, x));          y = norm2(y + FF(y))
 * n = T is torch's layer exactly (no slice is made). */
static qkv_tensor *encoder_block(qkv_ctx *ctx, const qkv_nn_encoder_layer *l, qkv_tensor *x, int64_t n,
                                 const qkv_nn_attn_mask *mask, qkv_tensor **weights) {
    if (!x) return NULL;
    const qkv_nn_block_config *c = &l->cfg;
    if (c->norm_first) {
        qkv_tensor *h = qkv_nn_layer_norm_forward(ctx, &l->norm1, x);
        x = qkv_add(ctx, first_rows(ctx, x, n),
                    adapt(ctx, c, &l->adapter1,
                          attn_block(ctx, c, &l->self_attn, first_rows(ctx, h, n), h, mask, weights)));
        h = qkv_nn_layer_norm_forward(ctx, &l->norm2, x);
        return qkv_add(ctx, x, adapt(ctx, c, &l->adapter2, ff_block(ctx, c, &l->linear1, &l->linear2, h)));
    }
    qkv_tensor *xq = first_rows(ctx, x, n);
    x = qkv_nn_layer_norm_forward(
        ctx, &l->norm1, qkv_add(ctx, xq, adapt(ctx, c, &l->adapter1, attn_block(ctx, c, &l->self_attn, xq, x, mask,
                                                                                  weights))));
    return qkv_nn_layer_norm_forward(
        ctx, &l->norm2, qkv_add(ctx, x, adapt(ctx, c, &l->adapter2, ff_block(ctx, c, &l->linear1, &l->linear2, x))));
}

qkv_tensor *qkv_nn_encoder_layer_forward(qkv_ctx *ctx, const qkv_nn_encoder_layer *l, qkv_tensor *x,
                                         const qkv_nn_attn_mask *mask, qkv_tensor **weights) {
    return x ? encoder_block(ctx, l, x, x->ndim == 3 ? x->shape[1] : 0, mask, weights) : NULL;
}

static bool check_queries(const char *what, const qkv_tensor *x, int64_t n_queries) {
    if (x->ndim == 3 && n_queries >= 1 && n_queries <= x->shape[1]) return true;
    char s[96];
    qkv_error_set(QKV_ERR_INVALID, "%s: n_queries %lld must be in [1, T] for x %s [B, T, d]", what,
                  (long long)n_queries, qkv_shape_str(x, s, sizeof s));
    return false;
}

qkv_tensor *qkv_nn_encoder_layer_forward_queries(qkv_ctx *ctx, const qkv_nn_encoder_layer *l, qkv_tensor *x,
                                                 int64_t n_queries, const qkv_nn_attn_mask *mask,
                                                 qkv_tensor **weights) {
    if (!x || !check_queries("encoder layer forward", x, n_queries)) return NULL;
    return encoder_block(ctx, l, x, n_queries, mask, weights);
}

/* ---- Decoder layer ----------------------------------------------------------------------------------------- */

qkv_status qkv_nn_decoder_layer_init(qkv_nn_decoder_layer *l, qkv_params *params, const char *prefix,
                                     const qkv_nn_block_config *cfg, qkv_rng *rng) {
    if (!l || !params || !rng)
        return qkv_error_set(QKV_ERR_INVALID, "decoder layer init: layer, params or rng is NULL");
    memset(l, 0, sizeof *l);
    qkv_status st = check_config(prefix, cfg);
    if (st) return st;
    int64_t d = cfg->d_model;
    if ((st = add_mha(&l->self_attn, params, prefix, "self_attn", cfg, rng)) ||
        (st = add_mha(&l->multihead_attn, params, prefix, "multihead_attn", cfg, rng)) ||
        (st = add_linear(&l->linear1, params, prefix, "linear1", d, cfg->dim_feedforward, rng)) ||
        (st = add_linear(&l->linear2, params, prefix, "linear2", cfg->dim_feedforward, d, rng)) ||
        (st = add_norm(&l->norm1, params, prefix, "norm1", d, cfg->layer_norm_eps)) ||
        (st = add_norm(&l->norm2, params, prefix, "norm2", d, cfg->layer_norm_eps)) ||
        (st = add_norm(&l->norm3, params, prefix, "norm3", d, cfg->layer_norm_eps)))
        return st;
    l->cfg = *cfg;
    return QKV_OK;
}

qkv_tensor *qkv_nn_decoder_layer_forward(qkv_ctx *ctx, const qkv_nn_decoder_layer *l, qkv_tensor *x,
                                         qkv_tensor *memory, const qkv_nn_attn_mask *tgt_mask,
                                         const qkv_nn_attn_mask *memory_mask, qkv_tensor **self_weights,
                                         qkv_tensor **cross_weights) {
    if (!x || !memory) return NULL;
    const qkv_nn_block_config *c = &l->cfg;
    if (c->norm_first) {
        qkv_tensor *h = qkv_nn_layer_norm_forward(ctx, &l->norm1, x);
        x = qkv_add(ctx, x, attn_block(ctx, c, &l->self_attn, h, h, tgt_mask, self_weights));
        h = qkv_nn_layer_norm_forward(ctx, &l->norm2, x);
        x = qkv_add(ctx, x, attn_block(ctx, c, &l->multihead_attn, h, memory, memory_mask, cross_weights));
        h = qkv_nn_layer_norm_forward(ctx, &l->norm3, x);
        return qkv_add(ctx, x, ff_block(ctx, c, &l->linear1, &l->linear2, h));
    }
    x = qkv_nn_layer_norm_forward(ctx, &l->norm1,
                                  qkv_add(ctx, x, attn_block(ctx, c, &l->self_attn, x, x, tgt_mask, self_weights)));
    x = qkv_nn_layer_norm_forward(
        ctx, &l->norm2, qkv_add(ctx, x, attn_block(ctx, c, &l->multihead_attn, x, memory, memory_mask, cross_weights)));
    return qkv_nn_layer_norm_forward(ctx, &l->norm3, qkv_add(ctx, x, ff_block(ctx, c, &l->linear1, &l->linear2, x)));
}

/* ---- Stacks ------------------------------------------------------------------------------------------------ */

static qkv_status check_depth(const char *prefix, int n) {
    if (n < 1 || n > QKV_NN_MAX_LAYERS)
        return qkv_error_set(QKV_ERR_INVALID, "transformer stack '%s': num_layers %d outside 1..%d",
                             prefix ? prefix : "", n, QKV_NN_MAX_LAYERS);
    return QKV_OK;
}

qkv_status qkv_nn_encoder_init(qkv_nn_encoder *e, qkv_params *params, const char *prefix,
                               const qkv_nn_block_config *cfg, int num_layers, bool final_norm, qkv_rng *rng) {
    if (!e) return qkv_error_set(QKV_ERR_INVALID, "encoder init: stack is NULL");
    memset(e, 0, sizeof *e);
    qkv_status st = check_depth(prefix, num_layers);
    if (!st) st = check_config(prefix, cfg);
    char name[NN_NAME_MAX], idx[32];
    for (int i = 0; !st && i < num_layers; i++) {
        snprintf(idx, sizeof idx, "layers.%d", i);
        if (!(st = qkv_params_join(name, sizeof name, prefix, idx)))
            st = qkv_nn_encoder_layer_init(&e->layers[i], params, name, cfg, rng);
    }
    if (!st && final_norm) st = add_norm(&e->norm, params, prefix, "norm", cfg->d_model, cfg->layer_norm_eps);
    if (st) return st;
    e->num_layers = num_layers;
    e->final_norm = final_norm;
    return QKV_OK;
}

qkv_tensor *qkv_nn_encoder_forward(qkv_ctx *ctx, const qkv_nn_encoder *e, qkv_tensor *x,
                                   const qkv_nn_attn_mask *mask, qkv_tensor **weights) {
    return x ? qkv_nn_encoder_forward_queries(ctx, e, x, x->ndim == 3 ? x->shape[1] : 0, mask, weights) : NULL;
}

qkv_tensor *qkv_nn_encoder_forward_queries(qkv_ctx *ctx, const qkv_nn_encoder *e, qkv_tensor *x, int64_t n_queries,
                                           const qkv_nn_attn_mask *mask, qkv_tensor **weights) {
    if (!x) return NULL;
    if (!e || e->num_layers < 1) {
        qkv_error_set(QKV_ERR_INVALID, "encoder forward: stack is not initialised");
        return NULL;
    }
    if (x->ndim == 3 && !check_queries("encoder forward", x, n_queries)) return NULL;
    /* Without a tape nothing but a layer's output outlives it: its temporaries (the FFN's hidden rows are 4x the
     * model's) are dropped before the next layer, so the arena holds one layer's instead of the whole stack's.
     * A decoding state's encoder pass over a batch of sentences touched ~150 MB of fresh pages for 3 layers. */
    qkv_tensor *carry = NULL;
    if (!qkv_ctx_grad_enabled(ctx) && !weights && e->num_layers > 1)
        carry = qkv_ctx_tensor(ctx, QKV_F32, x->ndim, x->shape);
    for (int i = 0; i < e->num_layers && x; i++) {
        bool last = i == e->num_layers - 1;
        qkv_ctx_mark m = carry ? qkv_ctx_mark_now(ctx) : (qkv_ctx_mark){0};
        qkv_tensor *y = encoder_block(ctx, &e->layers[i], x, last ? n_queries : x->shape[1], mask,
                                      weights ? &weights[i] : NULL);
        if (carry && !last && y) { /* a layer keeps x's shape; carry is x itself from the second layer on */
            if (qkv_tensor_copy(carry, y) != QKV_OK) return NULL;
            qkv_ctx_rewind(ctx, &m);
            y = carry;
        }
        x = y;
    }
    return e->final_norm ? qkv_nn_layer_norm_forward(ctx, &e->norm, x) : x;
}

qkv_status qkv_nn_decoder_init(qkv_nn_decoder *d, qkv_params *params, const char *prefix,
                               const qkv_nn_block_config *cfg, int num_layers, bool final_norm, qkv_rng *rng) {
    if (!d) return qkv_error_set(QKV_ERR_INVALID, "decoder init: stack is NULL");
    memset(d, 0, sizeof *d);
    qkv_status st = check_depth(prefix, num_layers);
    if (!st) st = check_config(prefix, cfg);
    char name[NN_NAME_MAX], idx[32];
    for (int i = 0; !st && i < num_layers; i++) {
        snprintf(idx, sizeof idx, "layers.%d", i);
        if (!(st = qkv_params_join(name, sizeof name, prefix, idx)))
            st = qkv_nn_decoder_layer_init(&d->layers[i], params, name, cfg, rng);
    }
    if (!st && final_norm) st = add_norm(&d->norm, params, prefix, "norm", cfg->d_model, cfg->layer_norm_eps);
    if (st) return st;
    d->num_layers = num_layers;
    d->final_norm = final_norm;
    return QKV_OK;
}

qkv_tensor *qkv_nn_decoder_forward(qkv_ctx *ctx, const qkv_nn_decoder *d, qkv_tensor *x, qkv_tensor *memory,
                                   const qkv_nn_attn_mask *tgt_mask, const qkv_nn_attn_mask *memory_mask,
                                   qkv_tensor **self_weights, qkv_tensor **cross_weights) {
    if (!x || !memory) return NULL;
    if (!d || d->num_layers < 1) {
        qkv_error_set(QKV_ERR_INVALID, "decoder forward: stack is not initialised");
        return NULL;
    }
    for (int i = 0; i < d->num_layers; i++)
        x = qkv_nn_decoder_layer_forward(ctx, &d->layers[i], x, memory, tgt_mask, memory_mask,
                                         self_weights ? &self_weights[i] : NULL,
                                         cross_weights ? &cross_weights[i] : NULL);
    return d->final_norm ? qkv_nn_layer_norm_forward(ctx, &d->norm, x) : x;
}

/* ---- torch.nn.Transformer ---------------------------------------------------------------------------------- */

qkv_status qkv_nn_transformer_init(qkv_nn_transformer *t, qkv_params *params, const char *prefix,
                                   const qkv_nn_block_config *cfg, int num_encoder_layers, int num_decoder_layers,
                                   qkv_rng *rng) {
    if (!t || !params) return qkv_error_set(QKV_ERR_INVALID, "transformer init: model or params is NULL");
    char name[NN_NAME_MAX];
    int first = qkv_params_count(params);
    qkv_status st = qkv_params_join(name, sizeof name, prefix, "encoder");
    if (!st) st = qkv_nn_encoder_init(&t->encoder, params, name, cfg, num_encoder_layers, true, rng);
    if (!st) st = qkv_params_join(name, sizeof name, prefix, "decoder");
    if (!st) st = qkv_nn_decoder_init(&t->decoder, params, name, cfg, num_decoder_layers, true, rng);
    /* torch.nn.Transformer._reset_parameters: xavier_uniform on every parameter of rank > 1. */
    for (int i = first; !st && i < qkv_params_count(params); i++) {
        qkv_tensor *p = qkv_params_at(params, i);
        if (p->ndim > 1 && (p->flags & QKV_FLAG_REQUIRES_GRAD)) st = qkv_init_xavier_uniform(p, 1.0f, rng);
    }
    return st;
}

qkv_tensor *qkv_nn_transformer_forward(qkv_ctx *ctx, const qkv_nn_transformer *t, qkv_tensor *src,
                                       qkv_tensor *tgt, const qkv_nn_attn_mask *src_mask,
                                       const qkv_nn_attn_mask *tgt_mask, const qkv_nn_attn_mask *memory_mask) {
    qkv_tensor *memory = qkv_nn_encoder_forward(ctx, &t->encoder, src, src_mask, NULL);
    return qkv_nn_decoder_forward(ctx, &t->decoder, tgt, memory, tgt_mask, memory_mask, NULL, NULL);
}
