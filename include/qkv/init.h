/* Parameter initialisers, as torch.nn.init: every one fills a float32 tensor in place (any layout) drawing from
 * a qkv_rng, so a seed reproduces a model's initial weights exactly. None records anything on a tape: call them
 * on parameters (heap tensors) before training.
 *
 * Fans follow torch's _calculate_fan_in_and_fan_out: for a tensor [out, in, k...] the receptive field is the
 * product of k..., fan_in = in * receptive and fan_out = out * receptive; tensors of rank < 2 have no fans.
 */
#ifndef QKV_INIT_H
#define QKV_INIT_H

#include <stdint.h>

#include "qkv/rng.h"
#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_nonlinearity {
    QKV_GAIN_LINEAR = 0, /* also conv and sigmoid: gain 1 */
    QKV_GAIN_SIGMOID,
    QKV_GAIN_TANH,       /* 5/3 */
    QKV_GAIN_RELU,       /* sqrt(2) */
    QKV_GAIN_LEAKY_RELU, /* sqrt(2 / (1 + slope^2)) */
    QKV_GAIN_SELU,       /* 3/4 */
} qkv_nonlinearity;

typedef enum qkv_fan_mode { QKV_FAN_IN = 0, QKV_FAN_OUT = 1 } qkv_fan_mode;

/* torch.nn.init.calculate_gain; `param` is the negative slope for leaky relu (ignored otherwise). */
float qkv_init_gain(qkv_nonlinearity nl, float param);
/* fan_in and fan_out of a weight tensor; QKV_ERR_INVALID for rank < 2. */
qkv_status qkv_init_fans(const qkv_tensor *t, int64_t *fan_in, int64_t *fan_out);

qkv_status qkv_init_constant(qkv_tensor *t, float value);
qkv_status qkv_init_uniform(qkv_tensor *t, float lo, float hi, qkv_rng *rng);
qkv_status qkv_init_normal(qkv_tensor *t, float mean, float std, qkv_rng *rng);
/* Glorot: std = gain * sqrt(2 / (fan_in + fan_out)); the uniform variant's bound is sqrt(3) * std. */
qkv_status qkv_init_xavier_uniform(qkv_tensor *t, float gain, qkv_rng *rng);
qkv_status qkv_init_xavier_normal(qkv_tensor *t, float gain, qkv_rng *rng);
/* He: std = gain(nl, slope) / sqrt(fan), fan chosen by mode; uniform bound sqrt(3) * std. torch's default call
 * kaiming_uniform_(w) is (slope 0, QKV_FAN_IN, QKV_GAIN_LEAKY_RELU). */
qkv_status qkv_init_kaiming_uniform(qkv_tensor *t, float slope, qkv_fan_mode mode, qkv_nonlinearity nl,
                                    qkv_rng *rng);
qkv_status qkv_init_kaiming_normal(qkv_tensor *t, float slope, qkv_fan_mode mode, qkv_nonlinearity nl,
                                   qkv_rng *rng);
/* (Semi-)orthogonal matrix times gain, as torch.nn.init.orthogonal_: the tensor is viewed as [rows, numel/rows];
 * a normal matrix is QR-factorised (in double) and Q's columns are signed so R's diagonal is positive, which makes
 * Q unique. rows <= cols gives orthonormal rows, rows >= cols orthonormal columns. Rank >= 2 required. */
qkv_status qkv_init_orthogonal(qkv_tensor *t, float gain, qkv_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
