/* Internals shared by the Hugging Face files (src/models/hf_*.c): the model struct, the layer helpers
 * (hf_layers.c) and the architectures' build / forward (hf_bert.c, hf_gpt2.c) that hf_model.c dispatches to and
 * hf_load.c fills. Not installed. */
#ifndef QKV_HF_INTERNAL_H
#define QKV_HF_INTERNAL_H

#include "core/visibility.h"
#include "qkv/hf.h"
#include "qkv/nn_layers.h"

QKV_INTERNAL_BEGIN

/* BERT / RoBERTa encoder layer, HF names under "encoder.layer.<i>.": attention.self.{query,key,value},
 * attention.output.{dense,LayerNorm}, intermediate.dense, output.{dense,LayerNorm}. */
typedef struct hf_bert_layer {
    qkv_nn_linear query, key, value, attn_out, intermediate, out;
    qkv_nn_layer_norm attn_ln, out_ln;
    /* The bert model types' Houlsby adapters (qkv_hf_model.adapter_dim > 0) on the attention and feed-forward
     * outputs: "attention.output.adapter.{down,up}", "output.adapter.{down,up}". */
    qkv_nn_linear adapt_attn_down, adapt_attn_up, adapt_ff_down, adapt_ff_up;
} hf_bert_layer;

/* GPT-2 block, HF names under "h.<i>.": ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj. The Conv1D
 * weights are held as Linear weights [out, in] (transposed on load). */
typedef struct hf_gpt2_layer {
    qkv_nn_layer_norm ln_1, ln_2;
    qkv_nn_linear c_attn, attn_proj, c_fc, mlp_proj;
} hf_gpt2_layer;

struct qkv_hf_model {
    qkv_hf_config cfg;
    qkv_params *params;
    /* Prepended to every parameter name ("" for a loaded checkpoint; "bert." inside the bert model type, whose
     * parameters live in the caller's collection: params_borrowed, so freeing the model leaves them). */
    char name_prefix[16];
    bool params_borrowed;
    bool has_pooler;
    int64_t adapter_dim; /* BERT: adapters in every layer when > 0 (the bert model types; a loaded model has none) */
    /* BERT: word / position / token type embeddings + LayerNorm; GPT-2: wte (word) and wpe (position). */
    qkv_nn_embedding word, position, token_type;
    qkv_nn_layer_norm emb_ln;
    hf_bert_layer bert[QKV_HF_MAX_LAYERS];
    qkv_nn_linear pooler;
    hf_gpt2_layer gpt2[QKV_HF_MAX_LAYERS];
    qkv_nn_layer_norm ln_f;
    qkv_nn_linear lm_head; /* GPT-2 with untied embeddings only */
};

/* Zero-initialised parameters named "<prefix>.weight" / "<prefix>.bias" wired into nn layer structs (a layer
 * norm's weight starts at one). */
qkv_status qkv__hf_add_linear(qkv_hf_model *m, qkv_nn_linear *l, const char *prefix, int64_t in, int64_t out,
                              bool bias);
qkv_status qkv__hf_add_layer_norm(qkv_hf_model *m, qkv_nn_layer_norm *n, const char *prefix, int64_t dim);
qkv_status qkv__hf_add_embedding(qkv_hf_model *m, qkv_nn_embedding *e, const char *prefix, int64_t num, int64_t dim);

qkv_status qkv__hf_bert_build(qkv_hf_model *m);
qkv_status qkv__hf_gpt2_build(qkv_hf_model *m);
/* A BERT base model whose parameters are added to `params` (the caller's) under name_prefix + HF's names, zero
 * (layer norm weights one), with a pooler. qkv_hf_free releases the model and not the parameters. */
qkv_hf_model *qkv__hf_model_in(const qkv_hf_config *cfg, qkv_params *params, const char *name_prefix);

/* Checked inputs of one forward call. */
typedef struct hf_batch {
    int64_t B, T;
    qkv_tensor *ids;         /* [B, T] int32 */
    qkv_tensor *key_padding; /* [B, T] int32, non-zero = padded (qkv's convention), or NULL */
    qkv_tensor *type_ids;    /* [B, T] int32 or NULL */
    /* BERT training (the bert model type): dropout after the embeddings and each sub-layer's output dense, and on
     * the attention weights, as HF's hidden_dropout_prob / attention_probs_dropout_prob. qkv_hf_forward leaves
     * them 0; qkv_dropout is the identity outside training mode anyway. */
    float hidden_dropout, attn_dropout;
} hf_batch;

/* Multi-head attention core shared by both families: q, k, v [B, T, E] -> merged context [B, T, E]. */
qkv_tensor *qkv__hf_attention(qkv_ctx *ctx, const qkv_hf_model *m, const hf_batch *b, qkv_tensor *q, qkv_tensor *k,
                              qkv_tensor *v, bool causal, qkv_tensor **weights);

qkv_status qkv__hf_bert_forward(qkv_ctx *ctx, const qkv_hf_model *m, const hf_batch *b, bool output_attentions,
                                qkv_hf_outputs *out);
qkv_status qkv__hf_gpt2_forward(qkv_ctx *ctx, const qkv_hf_model *m, const hf_batch *b, bool output_attentions,
                                qkv_hf_outputs *out);

QKV_INTERNAL_END
#endif
