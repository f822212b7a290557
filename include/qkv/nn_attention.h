/* Attention modules: score-function attention (dot, general, additive, scaled dot) for recurrent seq2seq models,
 * and multi-head attention matching torch.nn.MultiheadAttention.
 *
 * Layers follow nn_layers.h's conventions (borrowed parameters, torch state_dict names, padding masks non-zero =
 * padded). A query row whose keys are all padded gets a zero context and zero weights (torch gives NaN).
 */
#ifndef QKV_NN_ATTENTION_H
#define QKV_NN_ATTENTION_H

#include "qkv/nn_layers.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Score-function attention between queries s and keys h_i (CS224n / Luong / Bahdanau):
 *     dot         e_i = s . h_i                          (query_dim == key_dim)
 *     general     e_i = s^T W h_i                        "W.weight" [query_dim, key_dim]  (Luong's W_a, no bias)
 *     additive    e_i = v^T tanh(W1 h_i + W2 s)          "W1.weight" [attn_dim, key_dim], "W2.weight"
 *                                                        [attn_dim, query_dim], "v.weight" [1, attn_dim]
 *                                                        (+ "W1.bias", "W2.bias", "v.bias" when bias is on)
 *     scaled_dot  e_i = s . h_i / sqrt(key_dim)          (query_dim == key_dim)
 * then a = softmax(e) over unpadded keys and the context is sum_i a_i v_i (values default to the keys).
 * Weights are initialised as torch's Linear. ---- */
typedef enum qkv_score_kind {
    QKV_SCORE_DOT = 0,
    QKV_SCORE_GENERAL,
    QKV_SCORE_ADDITIVE,
    QKV_SCORE_SCALED_DOT,
} qkv_score_kind;
/* "dot", "general", "additive" (also "concat", "bahdanau"), "scaled_dot"; false if unknown. */
bool qkv_score_kind_parse(const char *name, qkv_score_kind *kind);

typedef struct qkv_nn_score_attention {
    qkv_score_kind kind;
    int64_t query_dim, key_dim, attn_dim;
    qkv_nn_linear w, w1, w2, v; /* used by kind as above; unused ones are zeroed */
} qkv_nn_score_attention;

/* attn_dim is used by additive only (0 there means key_dim); bias for additive only. */
qkv_status qkv_nn_score_attention_init(qkv_nn_score_attention *a, qkv_params *params, const char *prefix,
                                       qkv_score_kind kind, int64_t query_dim, int64_t key_dim, int64_t attn_dim,
                                       bool bias, qkv_rng *rng);
/* query [B, Tq, query_dim] or [B, query_dim] (one decoder step), keys [B, Tk, key_dim], values [B, Tk, Dv] or
 * NULL (= keys), pad_mask [B, Tk] or NULL. Returns the context [B, Tq, Dv] (or [B, Dv] for a 2-D query); if
 * weights is non-NULL *weights gets the attention weights [B, Tq, Tk] (or [B, Tk]), differentiable. */
qkv_tensor *qkv_nn_score_attention_forward(qkv_ctx *ctx, const qkv_nn_score_attention *a, qkv_tensor *query,
                                           qkv_tensor *keys, qkv_tensor *values, const qkv_tensor *pad_mask,
                                           qkv_tensor **weights);

/* ---- Multi-head attention, torch.nn.MultiheadAttention(batch_first=True) given the same weights.
 * Fused projection (torch's names; kdim == vdim == embed_dim):
 *     "in_proj_weight" [3E, E] (q, k, v row blocks), "in_proj_bias" [3E], "out_proj.weight" [E, E], "out_proj.bias"
 * Separate projections (the BERT / tutorial style; allows kdim, vdim != E):
 *     "q_proj.weight" [E, E], "k_proj.weight" [E, kdim], "v_proj.weight" [E, vdim], "out_proj.weight", and
 *     ".bias" [E] for each when bias is on.
 * Initialisation as torch: in_proj_weight xavier_uniform, in_proj_bias and out_proj.bias zero, out_proj.weight
 * torch's Linear default; separate projections are torch Linears. ---- */
typedef struct qkv_nn_mha_config {
    int64_t embed_dim, num_heads;
    int64_t kdim, vdim;   /* 0 = embed_dim */
    bool bias;            /* projection biases (torch's bias=True) */
    bool separate_proj;   /* q_proj/k_proj/v_proj Linears instead of the fused in_proj */
    float dropout;        /* attention-weight dropout (training mode) */
} qkv_nn_mha_config;
/* Fused projection, bias on, no dropout. */
qkv_nn_mha_config qkv_nn_mha_config_default(int64_t embed_dim, int64_t num_heads);

typedef struct qkv_nn_mha {
    qkv_nn_mha_config cfg;
    qkv_tensor *in_proj_weight, *in_proj_bias; /* fused mode */
    qkv_nn_linear q_proj, k_proj, v_proj;      /* separate mode */
    qkv_nn_linear out_proj;
} qkv_nn_mha;

qkv_status qkv_nn_mha_init(qkv_nn_mha *m, qkv_params *params, const char *prefix, const qkv_nn_mha_config *cfg,
                           qkv_rng *rng);

typedef struct qkv_nn_mha_opts {
    const qkv_tensor *key_padding; /* [B, Tk], non-zero = padded key, or NULL. Borrowed until backward has run. */
    bool causal;                   /* torch's attn_mask = generate_square_subsequent_mask (bottom-right aligned) */
    qkv_tensor **weights;          /* if non-NULL: per-head weights [B, H, Tq, Tk] (torch's need_weights with
                                    * average_attn_weights=False); the materialising path runs. No gradient. */
} qkv_nn_mha_opts;

/* query [B, Tq, E], key [B, Tk, kdim], value [B, Tk, vdim] -> [B, Tq, E]. Self-attention passes the same tensor
 * three times; cross-attention passes the encoder memory as key and value. opts may be NULL. Uses the fused
 * linear-memory qkv_sdpa unless weights are requested. */
qkv_tensor *qkv_nn_mha_forward(qkv_ctx *ctx, const qkv_nn_mha *m, qkv_tensor *query, qkv_tensor *key,
                               qkv_tensor *value, const qkv_nn_mha_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
