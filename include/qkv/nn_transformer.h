/* Transformer blocks and stacks matching torch.nn.TransformerEncoderLayer / TransformerDecoderLayer /
 * TransformerEncoder / TransformerDecoder / Transformer (batch_first=True), parameter names equal to torch's
 * state_dict keys so a torch state_dict loads by name:
 *
 *   encoder layer:  self_attn.{in_proj_weight,in_proj_bias,out_proj.weight,out_proj.bias}, linear1.{weight,bias},
 *                   linear2.{weight,bias}, norm1.{weight,bias}, norm2.{weight,bias}
 *   decoder layer:  the same plus multihead_attn.* (cross-attention) and norm3.*
 *   stacks:         layers.<i>.*, norm.* (the optional final norm)
 *   transformer:    encoder.layers.<i>.*, encoder.norm.*, decoder.layers.<i>.*, decoder.norm.*
 *
 * Post-norm (norm_first false, torch's default):  x = norm1(x + SA(x));        x = norm2(x + FF(x))
 * Pre-norm  (norm_first true):                    x = x + SA(norm1(x));        x = x + FF(norm2(x))
 * with SA = dropout(self_attn(...)), FF = dropout(linear2(dropout(act(linear1(x))))). Decoders insert the
 * cross-attention block (norm2) between them and use norm3 for the FFN.
 *
 * Initialisation: a layer or a stack is initialised as torch's modules (MHA xavier, Linear defaults, LayerNorm
 * ones/zeros); qkv_nn_transformer_init additionally re-draws every parameter of rank > 1 with xavier_uniform, as
 * torch.nn.Transformer._reset_parameters does.
 */
#ifndef QKV_NN_TRANSFORMER_H
#define QKV_NN_TRANSFORMER_H

#include "qkv/nn_attention.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_NN_MAX_LAYERS 64

typedef struct qkv_nn_block_config {
    int64_t d_model, nhead, dim_feedforward;
    float dropout;             /* residual, FFN and attention dropout (torch uses one p for all three) */
    qkv_activation activation; /* relu (torch's default) or gelu */
    float layer_norm_eps;      /* 1e-5 */
    bool norm_first;
    bool separate_proj;        /* q/k/v/out Linears instead of torch's fused in_proj (not loadable from torch) */
    /* Houlsby adapters (encoder layers): 0 = none (the block is torch's, bit for bit); n > 0 adds after the attention
     * and after the feed-forward sublayer, on its output before the residual, h + up(act(down(h))) with a
     * bottleneck of n units: adapter1.{down,up}.{weight,bias} and adapter2.*, initialised near the identity
     * (weights N(0, 1e-3), biases 0) so a pretrained block starts out unchanged. */
    int64_t adapter_dim;
} qkv_nn_block_config;
/* torch's defaults: dim_feedforward 2048, dropout 0.1, relu, eps 1e-5, post-norm. */
qkv_nn_block_config qkv_nn_block_config_default(int64_t d_model, int64_t nhead);

/* Masks for one attention: causal and/or a key padding mask [B, Tk] (non-zero = padded). */
typedef struct qkv_nn_attn_mask {
    bool causal;
    const qkv_tensor *key_padding;
} qkv_nn_attn_mask;

typedef struct qkv_nn_adapter {
    qkv_nn_linear down, up;
} qkv_nn_adapter;

typedef struct qkv_nn_encoder_layer {
    qkv_nn_block_config cfg;
    qkv_nn_mha self_attn;
    qkv_nn_linear linear1, linear2;
    qkv_nn_layer_norm norm1, norm2;
    qkv_nn_adapter adapter1, adapter2; /* cfg.adapter_dim > 0 */
} qkv_nn_encoder_layer;

qkv_status qkv_nn_encoder_layer_init(qkv_nn_encoder_layer *l, qkv_params *params, const char *prefix,
                                     const qkv_nn_block_config *cfg, qkv_rng *rng);
/* x [B, T, d_model] -> [B, T, d_model]. mask may be NULL. If weights is non-NULL it receives the self-attention
 * weights [B, H, T, T]. */
qkv_tensor *qkv_nn_encoder_layer_forward(qkv_ctx *ctx, const qkv_nn_encoder_layer *l, qkv_tensor *x,
                                         const qkv_nn_attn_mask *mask, qkv_tensor **weights);
/* The layer computed for the first n_queries positions only, each attending to every position of x: [B, T, d] ->
 * [B, n_queries, d], those rows of qkv_nn_encoder_layer_forward's output (the same numbers) without the work of the
 * others, as a classifier that reads position 0 ([CLS]) needs from its last layer. weights receives
 * [B, H, n_queries, T]. n_queries outside [1, T]: an error. */
qkv_tensor *qkv_nn_encoder_layer_forward_queries(qkv_ctx *ctx, const qkv_nn_encoder_layer *l, qkv_tensor *x,
                                                 int64_t n_queries, const qkv_nn_attn_mask *mask,
                                                 qkv_tensor **weights);

typedef struct qkv_nn_decoder_layer {
    qkv_nn_block_config cfg;
    qkv_nn_mha self_attn, multihead_attn;
    qkv_nn_linear linear1, linear2;
    qkv_nn_layer_norm norm1, norm2, norm3;
} qkv_nn_decoder_layer;

qkv_status qkv_nn_decoder_layer_init(qkv_nn_decoder_layer *l, qkv_params *params, const char *prefix,
                                     const qkv_nn_block_config *cfg, qkv_rng *rng);
/* x [B, Tt, d], memory [B, Ts, d]. tgt_mask (usually causal) and memory_mask (source padding) may be NULL.
 * self_weights / cross_weights, if non-NULL, receive [B, H, Tt, Tt] and [B, H, Tt, Ts]. */
qkv_tensor *qkv_nn_decoder_layer_forward(qkv_ctx *ctx, const qkv_nn_decoder_layer *l, qkv_tensor *x,
                                         qkv_tensor *memory, const qkv_nn_attn_mask *tgt_mask,
                                         const qkv_nn_attn_mask *memory_mask, qkv_tensor **self_weights,
                                         qkv_tensor **cross_weights);

/* ---- Stacks: num_layers identical blocks, then an optional final LayerNorm "norm". ---- */
typedef struct qkv_nn_encoder {
    int num_layers;
    bool final_norm;
    qkv_nn_encoder_layer layers[QKV_NN_MAX_LAYERS];
    qkv_nn_layer_norm norm;
} qkv_nn_encoder;

typedef struct qkv_nn_decoder {
    int num_layers;
    bool final_norm;
    qkv_nn_decoder_layer layers[QKV_NN_MAX_LAYERS];
    qkv_nn_layer_norm norm;
} qkv_nn_decoder;

qkv_status qkv_nn_encoder_init(qkv_nn_encoder *e, qkv_params *params, const char *prefix,
                               const qkv_nn_block_config *cfg, int num_layers, bool final_norm, qkv_rng *rng);
/* weights, if non-NULL, is an array of num_layers slots receiving each layer's [B, H, T, T] weights. */
qkv_tensor *qkv_nn_encoder_forward(qkv_ctx *ctx, const qkv_nn_encoder *e, qkv_tensor *x,
                                   const qkv_nn_attn_mask *mask, qkv_tensor **weights);
/* The stack's output at the first n_queries positions [B, n_queries, d]: every layer but the last runs on all
 * positions, the last as qkv_nn_encoder_layer_forward_queries, then the final norm. */
qkv_tensor *qkv_nn_encoder_forward_queries(qkv_ctx *ctx, const qkv_nn_encoder *e, qkv_tensor *x, int64_t n_queries,
                                           const qkv_nn_attn_mask *mask, qkv_tensor **weights);

qkv_status qkv_nn_decoder_init(qkv_nn_decoder *d, qkv_params *params, const char *prefix,
                               const qkv_nn_block_config *cfg, int num_layers, bool final_norm, qkv_rng *rng);
/* self_weights / cross_weights: arrays of num_layers slots, or NULL. */
qkv_tensor *qkv_nn_decoder_forward(qkv_ctx *ctx, const qkv_nn_decoder *d, qkv_tensor *x, qkv_tensor *memory,
                                   const qkv_nn_attn_mask *tgt_mask, const qkv_nn_attn_mask *memory_mask,
                                   qkv_tensor **self_weights, qkv_tensor **cross_weights);

/* ---- torch.nn.Transformer: encoder and decoder stacks, both with final norms. ---- */
typedef struct qkv_nn_transformer {
    qkv_nn_encoder encoder;
    qkv_nn_decoder decoder;
} qkv_nn_transformer;

qkv_status qkv_nn_transformer_init(qkv_nn_transformer *t, qkv_params *params, const char *prefix,
                                   const qkv_nn_block_config *cfg, int num_encoder_layers, int num_decoder_layers,
                                   qkv_rng *rng);
/* src [B, Ts, d], tgt [B, Tt, d] -> [B, Tt, d]. src_mask applies to encoder self-attention, tgt_mask to decoder
 * self-attention, memory_mask to cross-attention (normally src_mask's padding, not causal). */
qkv_tensor *qkv_nn_transformer_forward(qkv_ctx *ctx, const qkv_nn_transformer *t, qkv_tensor *src,
                                       qkv_tensor *tgt, const qkv_nn_attn_mask *src_mask,
                                       const qkv_nn_attn_mask *tgt_mask, const qkv_nn_attn_mask *memory_mask);

#ifdef __cplusplus
}
#endif
#endif
