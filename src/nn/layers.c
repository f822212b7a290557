/* Linear, LayerNorm, Dropout, activations and the LogSoftmax head: thin modules over the ops of ops.h, with
 * torch's parameter names and initialisation. */
#include <math.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "qkv/init.h"
#include "qkv/nn_layers.h"
#include "qkv/ops.h"

/* ---- Linear ---------------------------------------------------------------------------------------------- */

qkv_status qkv_nn_linear_init(qkv_nn_linear *l, qkv_params *params, const char *prefix, int64_t in_features,
                              int64_t out_features, bool bias, qkv_rng *rng) {
    if (!l || !params || !rng) return qkv_error_set(QKV_ERR_INVALID, "linear init: layer, params or rng is NULL");
    memset(l, 0, sizeof *l);
    if (in_features < 1 || out_features < 1)
        return qkv_error_set(QKV_ERR_INVALID, "linear '%s': in_features (%lld) and out_features (%lld) must be >= 1",
                             prefix ? prefix : "", (long long)in_features, (long long)out_features);
    qkv_tensor *w = qkv_params_add(params, prefix, "weight", QKV_DIMS(out_features, in_features));
    qkv_tensor *b = bias ? qkv_params_add(params, prefix, "bias", QKV_DIMS(out_features)) : NULL;
    if (!w || (bias && !b)) return qkv_last_status();
    /* torch's reset_parameters: kaiming_uniform(a = sqrt 5) is uniform(+-1/sqrt(fan_in)); the bias likewise. */
    qkv_status st = qkv_init_kaiming_uniform(w, sqrtf(5.0f), QKV_FAN_IN, QKV_GAIN_LEAKY_RELU, rng);
    float bound = 1.0f / sqrtf((float)in_features);
    if (!st && b) st = qkv_init_uniform(b, -bound, bound, rng);
    if (st) return st;
    *l = (qkv_nn_linear){.in_features = in_features, .out_features = out_features, .weight = w, .bias = b};
    return QKV_OK;
}

qkv_tensor *qkv_nn_linear_forward(qkv_ctx *ctx, const qkv_nn_linear *l, qkv_tensor *x) {
    if (!x) return NULL;
    if (!l || !l->weight) {
        qkv_error_set(QKV_ERR_INVALID, "linear forward: layer is not initialised");
        return NULL;
    }
    if (x->ndim < 1 || x->shape[x->ndim - 1] != l->in_features) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "linear '%s': input %s must end in in_features = %lld", l->weight->name,
                      qkv_shape_str(x, s, sizeof s), (long long)l->in_features);
        return NULL;
    }
    return qkv_linear(ctx, x, l->weight, l->bias);
}

/* ---- LayerNorm --------------------------------------------------------------------------------------------- */

qkv_status qkv_nn_layer_norm_init(qkv_nn_layer_norm *n, qkv_params *params, const char *prefix, int64_t dim,
                                  float eps, bool affine) {
    if (!n || !params) return qkv_error_set(QKV_ERR_INVALID, "layer norm init: layer or params is NULL");
    memset(n, 0, sizeof *n);
    if (dim < 1) return qkv_error_set(QKV_ERR_INVALID, "layer norm '%s': dim %lld must be >= 1",
                                      prefix ? prefix : "", (long long)dim);
    if (!(eps > 0.0f) || !isfinite(eps))
        return qkv_error_set(QKV_ERR_INVALID, "layer norm '%s': eps %g must be positive and finite",
                             prefix ? prefix : "", (double)eps);
    n->dim = dim;
    n->eps = eps;
    if (affine) {
        n->weight = qkv_params_add(params, prefix, "weight", QKV_DIMS(dim));
        n->bias = qkv_params_add(params, prefix, "bias", QKV_DIMS(dim));
        if (!n->weight || !n->bias) return qkv_last_status();
        qkv_tensor_fill(n->weight, 1.0f);
    }
    return QKV_OK;
}

qkv_tensor *qkv_nn_layer_norm_forward(qkv_ctx *ctx, const qkv_nn_layer_norm *n, qkv_tensor *x) {
    if (!x) return NULL;
    if (!n || n->dim < 1) {
        qkv_error_set(QKV_ERR_INVALID, "layer norm forward: layer is not initialised");
        return NULL;
    }
    if (x->ndim < 1 || x->shape[x->ndim - 1] != n->dim) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "layer norm '%s': input %s must end in dim = %lld",
                      n->weight ? n->weight->name : "", qkv_shape_str(x, s, sizeof s), (long long)n->dim);
        return NULL;
    }
    return qkv_layer_norm(ctx, x, n->weight, n->bias, n->eps);
}

/* ---- Dropout and activations ------------------------------------------------------------------------------- */

qkv_status qkv_nn_dropout_init(qkv_nn_dropout *d, float p) {
    if (!d) return qkv_error_set(QKV_ERR_INVALID, "dropout init: layer is NULL");
    if (!(p >= 0.0f && p < 1.0f)) return qkv_error_set(QKV_ERR_INVALID, "dropout: p = %g is outside [0, 1)", (double)p);
    d->p = p;
    return QKV_OK;
}

qkv_tensor *qkv_nn_dropout_forward(qkv_ctx *ctx, const qkv_nn_dropout *d, qkv_tensor *x) {
    if (!x) return NULL;
    return d->p > 0.0f ? qkv_dropout(ctx, x, d->p) : x;
}

static const char *const ACT_NAMES[] = {"relu", "gelu", "gelu_tanh", "tanh"};

bool qkv_activation_parse(const char *name, qkv_activation *act) {
    if (!name) return false;
    for (int i = 0; i < (int)(sizeof ACT_NAMES / sizeof *ACT_NAMES); i++)
        if (strcmp(name, ACT_NAMES[i]) == 0) {
            *act = (qkv_activation)i;
            return true;
        }
    if (strcmp(name, "gelu_new") == 0) {
        *act = QKV_ACT_GELU_TANH;
        return true;
    }
    return false;
}

const char *qkv_activation_name(qkv_activation act) {
    return (unsigned)act < sizeof ACT_NAMES / sizeof *ACT_NAMES ? ACT_NAMES[act] : "unknown";
}

qkv_tensor *qkv_nn_activate(qkv_ctx *ctx, qkv_activation act, qkv_tensor *x) {
    if (!x) return NULL;
    switch (act) {
    case QKV_ACT_RELU: return qkv_relu(ctx, x);
    case QKV_ACT_GELU: return qkv_gelu(ctx, x);
    case QKV_ACT_GELU_TANH: return qkv_gelu_tanh(ctx, x);
    case QKV_ACT_TANH: return qkv_tanh(ctx, x);
    }
    qkv_error_set(QKV_ERR_INVALID, "activation: unknown kind %d", (int)act);
    return NULL;
}

/* ---- LogSoftmax head ------------------------------------------------------------------------------------- */

qkv_status qkv_nn_logsoftmax_head_init(qkv_nn_logsoftmax_head *h, qkv_params *params, const char *prefix,
                                       int64_t in_features, int64_t n_classes, qkv_rng *rng) {
    if (!h) return qkv_error_set(QKV_ERR_INVALID, "logsoftmax head init: layer is NULL");
    return qkv_nn_linear_init(&h->proj, params, prefix, in_features, n_classes, true, rng);
}

qkv_tensor *qkv_nn_logsoftmax_head_forward(qkv_ctx *ctx, const qkv_nn_logsoftmax_head *h, qkv_tensor *x) {
    return qkv_log_softmax(ctx, qkv_nn_linear_forward(ctx, &h->proj, x), -1);
}
