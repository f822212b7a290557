/* Attention modules: score-function attention (dot, general, additive, scaled dot) and multi-head attention with
 * torch.nn.MultiheadAttention's parameters. Both are compositions of differentiable ops; multi-head attention
 * hands the softmax(QK^T)V core to qkv_sdpa (fused, linear memory) unless weights are requested. */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "nn/nn_internal.h"
#include "qkv/attention.h"
#include "qkv/init.h"
#include "qkv/nn_attention.h"
#include "qkv/ops.h"

/* Scores at padded keys; finite so that a row with every key padded gives a defined (then zeroed) softmax. */
#define MASKED_SCORE (-1e30f)

/* ---- Score-function attention ------------------------------------------------------------------------------ */

static const char *const SCORE_NAMES[] = {"dot", "general", "additive", "scaled_dot"};

bool qkv_score_kind_parse(const char *name, qkv_score_kind *kind) {
    if (!name) return false;
    for (int i = 0; i < (int)(sizeof SCORE_NAMES / sizeof *SCORE_NAMES); i++)
        if (strcmp(name, SCORE_NAMES[i]) == 0) {
            *kind = (qkv_score_kind)i;
            return true;
        }
    if (strcmp(name, "concat") == 0 || strcmp(name, "bahdanau") == 0) {
        *kind = QKV_SCORE_ADDITIVE;
        return true;
    }
    return false;
}

qkv_status qkv_nn_score_attention_init(qkv_nn_score_attention *a, qkv_params *params, const char *prefix,
                                       qkv_score_kind kind, int64_t query_dim, int64_t key_dim, int64_t attn_dim,
                                       bool bias, qkv_rng *rng) {
    if (!a || !params) return qkv_error_set(QKV_ERR_INVALID, "score attention init: layer or params is NULL");
    memset(a, 0, sizeof *a);
    const char *p = prefix ? prefix : "";
    if (query_dim < 1 || key_dim < 1)
        return qkv_error_set(QKV_ERR_INVALID, "score attention '%s': query_dim (%lld) and key_dim (%lld) must be >= 1",
                             p, (long long)query_dim, (long long)key_dim);
    if (attn_dim <= 0) attn_dim = key_dim;
    char name[NN_NAME_MAX];
    qkv_status st = QKV_OK;
    switch (kind) {
    case QKV_SCORE_DOT:
    case QKV_SCORE_SCALED_DOT:
        if (query_dim != key_dim)
            return qkv_error_set(QKV_ERR_INVALID,
                                 "score attention '%s': %s scores need query_dim == key_dim (%lld vs %lld)", p,
                                 SCORE_NAMES[kind], (long long)query_dim, (long long)key_dim);
        break;
    case QKV_SCORE_GENERAL:
        if ((st = qkv_params_join(name, sizeof name, prefix, "W"))) return st;
        if ((st = qkv_nn_linear_init(&a->w, params, name, key_dim, query_dim, false, rng))) return st;
        break;
    case QKV_SCORE_ADDITIVE:
        if ((st = qkv_params_join(name, sizeof name, prefix, "W1")) ||
            (st = qkv_nn_linear_init(&a->w1, params, name, key_dim, attn_dim, bias, rng)))
            return st;
        if ((st = qkv_params_join(name, sizeof name, prefix, "W2")) ||
            (st = qkv_nn_linear_init(&a->w2, params, name, query_dim, attn_dim, bias, rng)))
            return st;
        if ((st = qkv_params_join(name, sizeof name, prefix, "v")) ||
            (st = qkv_nn_linear_init(&a->v, params, name, attn_dim, 1, bias, rng)))
            return st;
        break;
    default: return qkv_error_set(QKV_ERR_INVALID, "score attention '%s': unknown score kind %d", p, (int)kind);
    }
    a->kind = kind;
    a->query_dim = query_dim;
    a->key_dim = key_dim;
    a->attn_dim = kind == QKV_SCORE_ADDITIVE ? attn_dim : 0;
    return QKV_OK;
}

/* Raw scores e [B, Tq, Tk] of q [B, Tq, Dq] against keys [B, Tk, Dk]. */
static qkv_tensor *scores(qkv_ctx *ctx, const qkv_nn_score_attention *a, qkv_tensor *q, qkv_tensor *keys) {
    int64_t B = q->shape[0], Tq = q->shape[1], Tk = keys->shape[1];
    switch (a->kind) {
    case QKV_SCORE_DOT: return qkv_matmul(ctx, q, qkv_transpose(ctx, keys, 1, 2));
    case QKV_SCORE_SCALED_DOT:
        return qkv_scale(ctx, qkv_matmul(ctx, q, qkv_transpose(ctx, keys, 1, 2)), 1.0f / sqrtf((float)a->key_dim));
    case QKV_SCORE_GENERAL: {
        qkv_tensor *wh = qkv_nn_linear_forward(ctx, &a->w, keys); /* W h_i: [B, Tk, Dq] */
        return qkv_matmul(ctx, q, qkv_transpose(ctx, wh, 1, 2));
    }
    case QKV_SCORE_ADDITIVE: {
        int64_t A = a->attn_dim;
        qkv_tensor *hk = qkv_reshape(ctx, qkv_nn_linear_forward(ctx, &a->w1, keys), QKV_DIMS(B, 1, Tk, A));
        qkv_tensor *sq = qkv_reshape(ctx, qkv_nn_linear_forward(ctx, &a->w2, q), QKV_DIMS(B, Tq, 1, A));
        qkv_tensor *e = qkv_nn_linear_forward(ctx, &a->v, qkv_tanh(ctx, qkv_add(ctx, hk, sq)));
        return qkv_reshape(ctx, e, QKV_DIMS(B, Tq, Tk));
    }
    }
    return NULL;
}

/* softmax over unpadded keys; rows with every key padded become all zeros. */
static qkv_tensor *masked_softmax(qkv_ctx *ctx, qkv_tensor *e, const qkv_tensor *pad_mask) {
    if (!e || !pad_mask) return qkv_softmax(ctx, e, -1);
    int64_t B = e->shape[0], Tk = e->shape[2];
    qkv_tensor *padded = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, 1, Tk));
    qkv_tensor *keep = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(B, 1, Tk));
    if (!padded || !keep) return NULL;
    bool some_row_empty = false;
    for (int64_t b = 0; b < B; b++) {
        int64_t kept = 0;
        for (int64_t t = 0; t < Tk; t++) {
            int64_t off = b * pad_mask->stride[0] + t * pad_mask->stride[1];
            bool pad = pad_mask->dtype == QKV_I32 ? qkv_i32(pad_mask)[off] != 0 : qkv_f32(pad_mask)[off] != 0.0f;
            qkv_i32(padded)[b * Tk + t] = pad;
            qkv_f32(keep)[b * Tk + t] = pad ? 0.0f : 1.0f;
            kept += !pad;
        }
        some_row_empty |= kept == 0;
    }
    qkv_tensor *w = qkv_softmax(ctx, qkv_masked_fill(ctx, e, padded, MASKED_SCORE), -1);
    return some_row_empty ? qkv_mul(ctx, w, keep) : w;
}

qkv_tensor *qkv_nn_score_attention_forward(qkv_ctx *ctx, const qkv_nn_score_attention *a, qkv_tensor *query,
                                           qkv_tensor *keys, qkv_tensor *values, const qkv_tensor *pad_mask,
                                           qkv_tensor **weights) {
    if (weights) *weights = NULL;
    if (!query || !keys) return NULL;
    if (!a || a->query_dim < 1) {
        qkv_error_set(QKV_ERR_INVALID, "score attention forward: layer is not initialised");
        return NULL;
    }
    if (!values) values = keys;
    char sq[96], sk[96], sv[96];
    bool step = query->ndim == 2;
    int64_t B = keys->shape[0], Tk = keys->ndim == 3 ? keys->shape[1] : 0;
    if ((query->ndim != 2 && query->ndim != 3) || query->shape[0] != B ||
        query->shape[query->ndim - 1] != a->query_dim || keys->ndim != 3 || keys->shape[2] != a->key_dim ||
        values->ndim != 3 || values->shape[0] != B || values->shape[1] != Tk) {
        qkv_error_set(QKV_ERR_INVALID,
                      "score attention (%s): query %s must be [B, (Tq,) %lld], keys %s [B, Tk, %lld] and values %s "
                      "[B, Tk, Dv]",
                      SCORE_NAMES[a->kind], qkv_shape_str(query, sq, sizeof sq), (long long)a->query_dim,
                      qkv_shape_str(keys, sk, sizeof sk), (long long)a->key_dim, qkv_shape_str(values, sv, sizeof sv));
        return NULL;
    }
    if (!qkv__nn_check_pad_mask("score attention", pad_mask, B, Tk)) return NULL;
    qkv_tensor *q = step ? qkv_reshape(ctx, query, QKV_DIMS(B, 1, a->query_dim)) : query;
    qkv_tensor *w = masked_softmax(ctx, scores(ctx, a, q, keys), pad_mask);
    qkv_tensor *c = qkv_matmul(ctx, w, values);
    if (step && c) {
        c = qkv_reshape(ctx, c, QKV_DIMS(B, values->shape[2]));
        w = qkv_reshape(ctx, w, QKV_DIMS(B, Tk));
    }
    if (weights && c) *weights = w;
    return c;
}

/* ---- Multi-head attention ---------------------------------------------------------------------------------- */

qkv_nn_mha_config qkv_nn_mha_config_default(int64_t embed_dim, int64_t num_heads) {
    return (qkv_nn_mha_config){.embed_dim = embed_dim, .num_heads = num_heads, .bias = true};
}

qkv_status qkv_nn_mha_init(qkv_nn_mha *m, qkv_params *params, const char *prefix, const qkv_nn_mha_config *cfg,
                           qkv_rng *rng) {
    if (!m || !params || !cfg || !rng)
        return qkv_error_set(QKV_ERR_INVALID, "multi-head attention init: layer, params, config or rng is NULL");
    memset(m, 0, sizeof *m);
    const char *p = prefix ? prefix : "";
    qkv_nn_mha_config c = *cfg;
    int64_t E = c.embed_dim, H = c.num_heads;
    if (E < 1 || H < 1 || E % H != 0)
        return qkv_error_set(QKV_ERR_INVALID,
                             "multi-head attention '%s': embed_dim %lld must be a positive multiple of num_heads %lld",
                             p, (long long)E, (long long)H);
    if (!(c.dropout >= 0.0f && c.dropout < 1.0f))
        return qkv_error_set(QKV_ERR_INVALID, "multi-head attention '%s': dropout %g outside [0, 1)", p,
                             (double)c.dropout);
    if (c.kdim == 0) c.kdim = E;
    if (c.vdim == 0) c.vdim = E;
    if (c.kdim < 0 || c.vdim < 0)
        return qkv_error_set(QKV_ERR_INVALID, "multi-head attention '%s': negative kdim or vdim", p);
    if (!c.separate_proj && (c.kdim != E || c.vdim != E))
        return qkv_error_set(QKV_ERR_INVALID,
                             "multi-head attention '%s': kdim/vdim (%lld/%lld) != embed_dim %lld need separate_proj",
                             p, (long long)c.kdim, (long long)c.vdim, (long long)E);
    char name[NN_NAME_MAX];
    qkv_status st;
    if (c.separate_proj) {
        if ((st = qkv_params_join(name, sizeof name, prefix, "q_proj")) ||
            (st = qkv_nn_linear_init(&m->q_proj, params, name, E, E, c.bias, rng)) ||
            (st = qkv_params_join(name, sizeof name, prefix, "k_proj")) ||
            (st = qkv_nn_linear_init(&m->k_proj, params, name, c.kdim, E, c.bias, rng)) ||
            (st = qkv_params_join(name, sizeof name, prefix, "v_proj")) ||
            (st = qkv_nn_linear_init(&m->v_proj, params, name, c.vdim, E, c.bias, rng)))
            return st;
    } else {
        m->in_proj_weight = qkv_params_add(params, prefix, "in_proj_weight", QKV_DIMS(3 * E, E));
        if (!m->in_proj_weight) return qkv_last_status();
        if ((st = qkv_init_xavier_uniform(m->in_proj_weight, 1.0f, rng))) return st;
        if (c.bias && !(m->in_proj_bias = qkv_params_add(params, prefix, "in_proj_bias", QKV_DIMS(3 * E))))
            return qkv_last_status();
    }
    if ((st = qkv_params_join(name, sizeof name, prefix, "out_proj")) ||
        (st = qkv_nn_linear_init(&m->out_proj, params, name, E, E, c.bias, rng)))
        return st;
    /* torch zeroes the output bias of its fused module (_reset_parameters); separate Linears keep theirs. */
    if (!c.separate_proj && m->out_proj.bias) qkv_tensor_fill(m->out_proj.bias, 0.0f);
    m->cfg = c;
    return QKV_OK;
}

/* x [B, T, in] -> projection number `which` (0 q, 1 k, 2 v) as heads [B, H, T, Dh] (a permuted view). */
static qkv_tensor *project_heads(qkv_ctx *ctx, const qkv_nn_mha *m, qkv_tensor *x, int which) {
    int64_t E = m->cfg.embed_dim, H = m->cfg.num_heads;
    qkv_tensor *y;
    if (m->cfg.separate_proj) {
        const qkv_nn_linear *l = which == 0 ? &m->q_proj : which == 1 ? &m->k_proj : &m->v_proj;
        y = qkv_nn_linear_forward(ctx, l, x);
    } else {
        /* Row block `which` of the fused weight (a view: its gradient lands in in_proj_weight). */
        qkv_tensor *w = qkv_slice(ctx, m->in_proj_weight, 0, which * E, (which + 1) * E, 1);
        qkv_tensor *b = m->in_proj_bias ? qkv_slice(ctx, m->in_proj_bias, 0, which * E, (which + 1) * E, 1) : NULL;
        y = qkv_linear(ctx, x, w, b);
    }
    if (!y) return NULL;
    y = qkv_reshape(ctx, y, QKV_DIMS(x->shape[0], x->shape[1], H, E / H));
    return qkv_permute(ctx, y, (const int[]){0, 2, 1, 3});
}

qkv_tensor *qkv_nn_mha_forward(qkv_ctx *ctx, const qkv_nn_mha *m, qkv_tensor *query, qkv_tensor *key,
                               qkv_tensor *value, const qkv_nn_mha_opts *opts) {
    if (opts && opts->weights) *opts->weights = NULL;
    if (!query || !key || !value) return NULL;
    if (!m || m->cfg.embed_dim < 1) {
        qkv_error_set(QKV_ERR_INVALID, "multi-head attention forward: layer is not initialised");
        return NULL;
    }
    int64_t E = m->cfg.embed_dim;
    int64_t B = query->shape[0], Tk = key->ndim == 3 ? key->shape[1] : -1;
    if (query->ndim != 3 || query->shape[2] != E || key->ndim != 3 || key->shape[0] != B ||
        key->shape[2] != m->cfg.kdim || value->ndim != 3 || value->shape[0] != B || value->shape[1] != Tk ||
        value->shape[2] != m->cfg.vdim) {
        char sq[96], sk[96], sv[96];
        qkv_error_set(QKV_ERR_INVALID,
                      "multi-head attention '%s': query %s, key %s, value %s must be [B, Tq, %lld], [B, Tk, %lld], "
                      "[B, Tk, %lld]",
                      m->out_proj.weight->name, qkv_shape_str(query, sq, sizeof sq), qkv_shape_str(key, sk, sizeof sk),
                      qkv_shape_str(value, sv, sizeof sv), (long long)E, (long long)m->cfg.kdim,
                      (long long)m->cfg.vdim);
        return NULL;
    }
    qkv_nn_mha_opts o = opts ? *opts : (qkv_nn_mha_opts){0};
    if (!qkv__nn_check_pad_mask("multi-head attention", o.key_padding, B, Tk)) return NULL;
    qkv_sdpa_opts so = qkv_sdpa_defaults();
    so.causal = o.causal;
    so.key_padding = o.key_padding;
    so.dropout = m->cfg.dropout;
    so.weights = o.weights;
    qkv_tensor *heads = qkv_sdpa(ctx, project_heads(ctx, m, query, 0), project_heads(ctx, m, key, 1),
                                 project_heads(ctx, m, value, 2), &so);
    /* [B, H, Tq, Dh] -> [B, Tq, H * Dh]: heads side by side, as torch concatenates them. */
    qkv_tensor *cat = qkv_reshape(ctx, qkv_permute(ctx, heads, (const int[]){0, 2, 1, 3}),
                                  QKV_DIMS(B, query->shape[1], E));
    return qkv_nn_linear_forward(ctx, &m->out_proj, cat);
}
