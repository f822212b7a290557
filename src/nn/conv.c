/* Conv1d as a module (torch's nn.Conv1d parameters and init, channels-last activations), and which of its output
 * steps see tokens when the input is a padded batch. */
#include <math.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "qkv/init.h"
#include "qkv/nn_layers.h"
#include "qkv/ops.h"

qkv_status qkv_nn_conv1d_init(qkv_nn_conv1d *c, qkv_params *params, const char *prefix, int64_t in_channels,
                              int64_t out_channels, int64_t width, int64_t padding, qkv_rng *rng) {
    if (!c || !params || !rng) return qkv_error_set(QKV_ERR_INVALID, "conv1d init: layer, params or rng is NULL");
    memset(c, 0, sizeof *c);
    if (in_channels < 1 || out_channels < 1 || width < 1 || padding < 0)
        return qkv_error_set(QKV_ERR_INVALID,
                             "conv1d '%s': in (%lld), out (%lld) and width (%lld) must be >= 1, padding (%lld) >= 0",
                             prefix ? prefix : "", (long long)in_channels, (long long)out_channels, (long long)width,
                             (long long)padding);
    qkv_tensor *w = qkv_params_add(params, prefix, "weight", QKV_DIMS(out_channels, in_channels, width));
    qkv_tensor *b = qkv_params_add(params, prefix, "bias", QKV_DIMS(out_channels));
    if (!w || !b) return qkv_last_status();
    /* torch's _ConvNd.reset_parameters: as Linear's, with fan_in = in_channels * width. */
    qkv_status st = qkv_init_kaiming_uniform(w, sqrtf(5.0f), QKV_FAN_IN, QKV_GAIN_LEAKY_RELU, rng);
    float bound = 1.0f / sqrtf((float)(in_channels * width));
    if (!st) st = qkv_init_uniform(b, -bound, bound, rng);
    if (st) return st;
    *c = (qkv_nn_conv1d){.in_channels = in_channels, .out_channels = out_channels, .width = width,
                         .padding = padding, .weight = w, .bias = b};
    return QKV_OK;
}

qkv_tensor *qkv_nn_conv1d_forward(qkv_ctx *ctx, const qkv_nn_conv1d *c, qkv_tensor *x, const qkv_tensor *pad_mask,
                                  qkv_tensor **out_pad) {
    if (out_pad) *out_pad = NULL;
    if (!x) return NULL;
    if (!c || !c->weight) {
        qkv_error_set(QKV_ERR_INVALID, "conv1d forward: layer is not initialised");
        return NULL;
    }
    if (x->ndim != 3 || x->shape[2] != c->in_channels) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "conv1d '%s': input %s must be [batch, time, %lld]", c->weight->name,
                      qkv_shape_str(x, s, sizeof s), (long long)c->in_channels);
        return NULL;
    }
    int64_t B = x->shape[0], T = x->shape[1], T_out = T + 2 * c->padding - c->width + 1;
    if (!qkv__nn_check_pad_mask("conv1d", pad_mask, B, T)) return NULL;
    if (pad_mask) {
        /* Padded steps read as the zeros a shorter sentence would be padded with. */
        qkv_tensor *m3 = qkv_reshape(ctx, (qkv_tensor *)pad_mask, QKV_DIMS(B, T, 1));
        x = qkv_masked_fill(ctx, x, m3, 0.0f);
    }
    qkv_tensor *y = qkv_conv1d(ctx, x, c->weight, c->bias, c->padding);
    if (!y || !out_pad) return y;
    qkv_tensor *op = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(B, T_out));
    if (!op) return NULL;
    /* Output t reads input steps t - padding .. t - padding + width - 1: padded when none of them is a token. */
    float *o = qkv_f32(op);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T_out; t++) {
            bool token = false;
            for (int64_t k = 0; k < c->width && !token; k++) {
                int64_t s = t - c->padding + k;
                if (s < 0 || s >= T) continue;
                if (!pad_mask) token = true;
                else {
                    int64_t off = b * pad_mask->stride[0] + s * pad_mask->stride[1];
                    token = pad_mask->dtype == QKV_I32 ? qkv_i32(pad_mask)[off] == 0 : qkv_f32(pad_mask)[off] == 0.0f;
                }
            }
            o[b * T_out + t] = token ? 0.0f : 1.0f;
        }
    *out_pad = op;
    return y;
}
