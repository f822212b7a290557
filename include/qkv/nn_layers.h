/* Basic layers: Linear, Embedding, LayerNorm, Dropout, activations, positional encodings, ShiftRight, masked mean
 * pooling, L2 normalisation and a LogSoftmax head.
 *
 * Every layer is a small struct holding its configuration and BORROWED pointers to tensors owned by a qkv_params
 * collection. `qkv_nn_<layer>_init(layer, params, prefix, config..., rng)` validates the configuration, adds the
 * tensors under "<prefix>.<name>" with PyTorch's state_dict names (so a torch state_dict loads by name) and
 * initialises them as torch does; `qkv_nn_<layer>_forward(ctx, layer, ...)` runs it with the ops of ops.h, whose
 * autograd gives the backward. On an init error the parameters already added stay in (and are owned by) params.
 * Forwards follow the ops' conventions: a context tensor, NULL with an error on bad input, NULL (no new error)
 * when an input is NULL.
 *
 * Padding masks, everywhere in nn: int32 or float32, non-zero = padded position (as torch's key_padding_mask).
 */
#ifndef QKV_NN_LAYERS_H
#define QKV_NN_LAYERS_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/autograd.h"
#include "qkv/params.h"
#include "qkv/rng.h"
#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Linear: y = x W^T + b. Parameters "weight" [out, in], "bias" [out]. torch's init: W kaiming_uniform(a =
 * sqrt 5), i.e. uniform(+-1/sqrt(in)), and b uniform(+-1/sqrt(in)). ---- */
typedef struct qkv_nn_linear {
    int64_t in_features, out_features;
    qkv_tensor *weight, *bias; /* bias NULL when disabled */
} qkv_nn_linear;

qkv_status qkv_nn_linear_init(qkv_nn_linear *l, qkv_params *params, const char *prefix, int64_t in_features,
                              int64_t out_features, bool bias, qkv_rng *rng);
/* x [..., in] -> [..., out]. */
qkv_tensor *qkv_nn_linear_forward(qkv_ctx *ctx, const qkv_nn_linear *l, qkv_tensor *x);

/* ---- Embedding: rows of "weight" [num, dim] for int32 ids. torch's init: normal(0, 1), padding row zero.
 * With a padding index its row gets no gradient (it is copied to the output as is) — torch's padding_idx. ---- */
typedef struct qkv_nn_embedding {
    int64_t num_embeddings, embedding_dim;
    int64_t padding_idx; /* -1: none (a negative index given to init counts from the end, as torch) */
    float scale;         /* output multiplier: 1, or sqrt(dim) for the Transformer's embedding scale */
    qkv_tensor *weight;
} qkv_nn_embedding;

/* padding_idx in [-num, num) or QKV_NN_NO_PADDING; scale_sqrt_dim multiplies outputs by sqrt(dim). */
#define QKV_NN_NO_PADDING INT64_MIN
qkv_status qkv_nn_embedding_init(qkv_nn_embedding *e, qkv_params *params, const char *prefix, int64_t num,
                                 int64_t dim, int64_t padding_idx, bool scale_sqrt_dim, qkv_rng *rng);
/* From a pretrained matrix [num, dim] (copied). frozen: the weight requires no gradient (torch's
 * Embedding.from_pretrained(freeze=True)); otherwise it is tuned. The padding row is kept as given. */
qkv_status qkv_nn_embedding_init_from(qkv_nn_embedding *e, qkv_params *params, const char *prefix,
                                      const qkv_tensor *matrix, bool frozen, int64_t padding_idx,
                                      bool scale_sqrt_dim);
/* ids int32 of any shape -> [ids..., dim]; ids outside [0, num) are an error. */
qkv_tensor *qkv_nn_embedding_forward(qkv_ctx *ctx, const qkv_nn_embedding *e, qkv_tensor *ids);

/* ---- LayerNorm over the last dimension: "weight" (ones) and "bias" (zeros) [dim], torch's eps 1e-5. ---- */
typedef struct qkv_nn_layer_norm {
    int64_t dim;
    float eps;
    qkv_tensor *weight, *bias; /* NULL when elementwise_affine is off */
} qkv_nn_layer_norm;

qkv_status qkv_nn_layer_norm_init(qkv_nn_layer_norm *n, qkv_params *params, const char *prefix, int64_t dim,
                                  float eps, bool affine);
qkv_tensor *qkv_nn_layer_norm_forward(qkv_ctx *ctx, const qkv_nn_layer_norm *n, qkv_tensor *x);

/* ---- Dropout: qkv_dropout (identity in eval mode). ---- */
typedef struct qkv_nn_dropout {
    float p;
} qkv_nn_dropout;
qkv_status qkv_nn_dropout_init(qkv_nn_dropout *d, float p);
qkv_tensor *qkv_nn_dropout_forward(qkv_ctx *ctx, const qkv_nn_dropout *d, qkv_tensor *x);

/* ---- Activations ---- */
typedef enum qkv_activation { QKV_ACT_RELU = 0, QKV_ACT_GELU, QKV_ACT_GELU_TANH, QKV_ACT_TANH } qkv_activation;
/* "relu", "gelu", "gelu_tanh" (also "gelu_new"), "tanh"; false if unknown. */
bool qkv_activation_parse(const char *name, qkv_activation *act);
const char *qkv_activation_name(qkv_activation act);
qkv_tensor *qkv_nn_activate(qkv_ctx *ctx, qkv_activation act, qkv_tensor *x);

/* ---- Positional encodings, added to x [B, T, dim] (then dropout p in training mode, as the torch tutorial's
 * PositionalEncoding). Sinusoidal: a buffer "pe" [max_len, dim] (not trained) with the tutorial's formula
 * pe[t, 2i] = sin(t / 10000^(2i/dim)), pe[t, 2i+1] = cos(...). Learned: a parameter "weight" [max_len, dim]
 * (GPT-2's wpe), initialised normal(0, init_std). ---- */
typedef enum qkv_posenc_kind { QKV_POSENC_SINUSOIDAL = 0, QKV_POSENC_LEARNED = 1 } qkv_posenc_kind;
typedef struct qkv_nn_posenc {
    qkv_posenc_kind kind;
    int64_t max_len, dim;
    float dropout;
    qkv_tensor *table; /* "pe" buffer or "weight" parameter */
} qkv_nn_posenc;

/* init_std is used for learned positions only (0 means torch's Embedding default, 1). */
qkv_status qkv_nn_posenc_init(qkv_nn_posenc *pe, qkv_params *params, const char *prefix, qkv_posenc_kind kind,
                              int64_t max_len, int64_t dim, float dropout, float init_std, qkv_rng *rng);
/* x [B, T, dim] + table[offset : offset + T] (offset: position of x's first step, for incremental decoding). */
qkv_tensor *qkv_nn_posenc_forward(qkv_ctx *ctx, const qkv_nn_posenc *pe, qkv_tensor *x, int64_t offset);

/* ---- Sequence utilities ---- */
/* Trax's ShiftRight for teacher forcing: x [B, T, ...] -> [B, T, ...] with out[:, 0] = pad and out[:, t] =
 * x[:, t-1]. int32 (token ids; no gradient) or float32 (differentiable). */
qkv_tensor *qkv_nn_shift_right(qkv_ctx *ctx, qkv_tensor *x, float pad);
/* Mean over time of x [B, T, D] at unpadded steps only: pad_mask [B, T] (non-zero = padded) or NULL for all.
 * A sequence with no unpadded step gives zeros. -> [B, D]. */
qkv_tensor *qkv_nn_masked_mean(qkv_ctx *ctx, qkv_tensor *x, const qkv_tensor *pad_mask);
/* A batch's token mask [B, T] (int32 or float32, non-zero = token, as qkv_batch's mask) as the padding mask nn
 * takes: float32 [B, T], 1 = padded, 0 = token, a context tensor without gradient. NULL gives NULL (no error). */
qkv_tensor *qkv_nn_padding_of(qkv_ctx *ctx, const qkv_tensor *mask);
/* x / max(||x||_2, eps) along the last axis (torch.nn.functional.normalize, p = 2). */
qkv_tensor *qkv_nn_l2_normalize(qkv_ctx *ctx, qkv_tensor *x, float eps);

/* ---- Conv1d over time, channels last (qkv_conv1d): parameters "weight" [out, in, width] and "bias" [out] as
 * torch's nn.Conv1d, initialised as torch does (uniform(+-1/sqrt(in * width)) for both). ---- */
typedef struct qkv_nn_conv1d {
    int64_t in_channels, out_channels, width, padding;
    qkv_tensor *weight, *bias;
} qkv_nn_conv1d;

qkv_status qkv_nn_conv1d_init(qkv_nn_conv1d *c, qkv_params *params, const char *prefix, int64_t in_channels,
                              int64_t out_channels, int64_t width, int64_t padding, qkv_rng *rng);
/* x [B, T, in] -> [B, T + 2 padding - width + 1, out]. pad_mask [B, T] (non-zero = padded) or NULL: padded steps
 * are read as zeros, so a sentence gives the same outputs in any batch. out_pad, if non-NULL, receives the
 * padding mask of the outputs (float32 [B, T_out], 1 = the window holds no token), for masked pooling. */
qkv_tensor *qkv_nn_conv1d_forward(qkv_ctx *ctx, const qkv_nn_conv1d *c, qkv_tensor *x, const qkv_tensor *pad_mask,
                                  qkv_tensor **out_pad);
/* Max over time of x [B, T, D] at unpadded steps (pad_mask [B, T], non-zero = padded, or NULL) -> [B, D]; the
 * gradient goes to the first maximal step, as torch.max. A sequence with no unpadded step gives zeros. Kim
 * (2014)'s max-over-time pooling. */
qkv_tensor *qkv_nn_masked_max(qkv_ctx *ctx, qkv_tensor *x, const qkv_tensor *pad_mask);

/* ---- LogSoftmax head: log_softmax(Linear(x)) over the last axis; parameters of the Linear ("weight", "bias"). */
typedef struct qkv_nn_logsoftmax_head {
    qkv_nn_linear proj;
} qkv_nn_logsoftmax_head;
qkv_status qkv_nn_logsoftmax_head_init(qkv_nn_logsoftmax_head *h, qkv_params *params, const char *prefix,
                                       int64_t in_features, int64_t n_classes, qkv_rng *rng);
qkv_tensor *qkv_nn_logsoftmax_head_forward(qkv_ctx *ctx, const qkv_nn_logsoftmax_head *h, qkv_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
