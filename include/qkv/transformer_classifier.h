/* The Transformer-encoder sentence classifier ("tcls"), registered as model type "transformer_classifier":
 *
 *     ids [B, T] -> Embedding (x sqrt(d_model) optional) -> + positions (sinusoidal or learned) -> Dropout
 *                -> N encoder blocks (pre- or post-LayerNorm; self-attention with separate q/k/v/out Linears)
 *                -> final LayerNorm (pre-LN only) -> hidden state at position 0 -> Linear -> LogSoftmax [B, C]
 *
 * Position 0. The model classifies from the final hidden state of the FIRST position: the tokenizer must put a
 * classification token there ([CLS], the same id for every sentence) and never mark it as padding. Through the
 * attention of every block, that position gathers what it needs from the words; its attention row in each layer
 * is what the viewer highlights.
 *
 * Parameters (in the qkv_params given to init, which owns them), named like this PyTorch module tree (see
 * tests/ref/cls_model.py): "embedding.weight" [V, d], "pos.pe" (buffer) or "pos.weight" (learned),
 * "encoder.layers.<i>.self_attn.{q_proj,k_proj,v_proj,out_proj}.{weight,bias}", "encoder.layers.<i>.linear1.*",
 * "encoder.layers.<i>.linear2.*", "encoder.layers.<i>.norm1.*", "encoder.layers.<i>.norm2.*", "encoder.norm.*"
 * (pre-LN only), "classifier.{weight,bias}" [C, d].
 *
 * Speed. Only position 0 reaches the output, so when no attention maps are asked for the last block computes its
 * query, attention, residual and feed-forward for position 0 alone (keys and values still cover every position).
 * Outputs and gradients are exactly those of the full computation.
 */
#ifndef QKV_TRANSFORMER_CLASSIFIER_H
#define QKV_TRANSFORMER_CLASSIFIER_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_TCLS_MAX_LAYERS 32

typedef struct qkv_tcls_config {
    int64_t vocab_size, n_classes;
    int64_t d_model, n_layers, n_heads, d_ff, max_len;
    qkv_activation activation; /* relu, gelu, gelu_tanh */
    bool norm_first;           /* pre-LN (with a final LayerNorm) or post-LN */
    float dropout;             /* embedding, residual and feed-forward dropout */
    float attn_dropout;        /* attention-weight dropout */
    qkv_posenc_kind pos_enc;
    bool emb_scale_sqrt_d;     /* multiply embeddings by sqrt(d_model) before adding positions */
    const qkv_tensor *pretrained; /* [vocab_size, d_model] float32 (copied at init), or NULL: normal(0, 1) */
    bool frozen;               /* the embedding gets no gradient */
    int64_t adapter_dim;       /* Houlsby adapters in every block (qkv_nn_block_config), 0 = none */
} qkv_tcls_config;

/* d_model 128, 2 layers, 4 heads, d_ff 512, relu, pre-LN, dropout 0.1, attn_dropout 0.1, sinusoidal, sqrt(d) scale,
 * max_len 512, learned (tuned) embeddings. */
qkv_tcls_config qkv_tcls_config_default(int64_t vocab_size, int64_t n_classes);

typedef struct qkv_tcls {
    qkv_tcls_config cfg;
    qkv_nn_embedding embed;
    qkv_nn_posenc pos;
    qkv_nn_encoder encoder; /* n_layers blocks; the final norm with pre-LN only */
    qkv_nn_linear classifier;
} qkv_tcls;

/* Validates cfg (errors name the field), adds and initialises the parameters as torch would (Embedding normal,
 * Linear defaults, LayerNorm ones/zeros). cfg->pretrained is copied; it is not kept. */
qkv_status qkv_tcls_init(qkv_tcls *m, qkv_params *params, const qkv_tcls_config *cfg, qkv_rng *rng);

/* ids int32 [B, T] (T <= max_len, ids[:, 0] the classification token), pad_mask [B, T] (int32 or float32,
 * non-zero = padding) or NULL -> class logits [B, C]. If weights is non-NULL it must have n_layers slots; each
 * receives that layer's attention weights [B, H, T, T] (the full computation then runs for every layer). */
qkv_tensor *qkv_tcls_logits(qkv_ctx *ctx, const qkv_tcls *m, qkv_tensor *ids, const qkv_tensor *pad_mask,
                            qkv_tensor **weights);
/* log_softmax of the logits: log-probabilities [B, C]. */
/* The encoder's states at every position [B, T, d_model] (after the final norm with pre-LN): the token features a
 * task's own head reads (extractive QA). */
qkv_tensor *qkv_tcls_features(qkv_ctx *ctx, const qkv_tcls *m, qkv_tensor *ids, const qkv_tensor *pad_mask);
qkv_tensor *qkv_tcls_forward(qkv_ctx *ctx, const qkv_tcls *m, qkv_tensor *ids, const qkv_tensor *pad_mask,
                             qkv_tensor **weights);

#ifdef __cplusplus
}
#endif
#endif
