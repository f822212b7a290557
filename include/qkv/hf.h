/* Hugging Face checkpoints: BERT, RoBERTa and GPT-2 base models read straight from a model directory
 * (config.json + model.safetensors, or a sharded model.safetensors.index.json) and run with qkv's layers.
 *
 * Keys. Parameters are named as in Hugging Face's base models without a prefix ("embeddings.word_embeddings.weight",
 * "encoder.layer.0.attention.self.query.weight", "h.0.attn.c_attn.weight", ...). Loading accepts what hub files
 * hold: keys with the task-model prefix ("bert.", "roberta.", "transformer."), TF-era "LayerNorm.gamma/beta",
 * GPT-2's Conv1D weights stored [in, out] (transposed on load), F16 / BF16 / F32 tensors. Ignored: pretraining heads
 * ("cls.*", "lm_head.*" — GPT-2's tied LM head is wte), GPT-2's "attn.bias" / "attn.masked_bias" mask buffers and
 * "embeddings.position_ids". Anything else is an unknown key; unknown and missing keys are reported together, each
 * list in the error message. A checkpoint without any pooler weights loads without a pooler (pooler_output NULL),
 * as BertForMaskedLM checkpoints have none. Every shape is checked against the config.
 *
 * Forward (eval mode, as the model's `output_attentions=True` call): the last hidden state, BERT/RoBERTa's pooler
 * output, GPT-2's LM logits (tied to wte unless tie_word_embeddings is false) and, on request, each layer's
 * attention weights [B, heads, T, T]. BERT uses token type ids (zeros when absent) and positions 0..T-1; RoBERTa's
 * positions are pad_token_id + 1 + the count of non-pad tokens so far (pad positions get pad_token_id), as
 * create_position_ids_from_input_ids. attention_mask (1 = token, 0 = padding, HF's convention) masks keys; GPT-2
 * is also causal. Padded query rows are computed as HF computes them. Differences: a query whose every key is
 * masked gets zero attention (HF: uniform over the masked keys); dropout is never applied.
 *
 * Ownership: qkv_hf_model owns its parameters (qkv_hf_params gives read access, e.g. to save or fine-tune them);
 * outputs are context tensors valid until qkv_ctx_reset.
 */
#ifndef QKV_HF_H
#define QKV_HF_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/autograd.h"
#include "qkv/nn_layers.h"
#include "qkv/params.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_HF_MAX_LAYERS 64

typedef enum qkv_hf_arch { QKV_HF_BERT = 0, QKV_HF_ROBERTA = 1, QKV_HF_GPT2 = 2 } qkv_hf_arch;

/* The fields of config.json qkv uses, under common names (GPT-2's n_embd is hidden_size, and so on). */
typedef struct qkv_hf_config {
    qkv_hf_arch arch;
    int64_t vocab_size, hidden_size, num_layers, num_heads;
    int64_t intermediate_size;  /* GPT-2: n_inner, or 4 * n_embd when null */
    int64_t max_positions;      /* max_position_embeddings / n_positions */
    int64_t type_vocab_size;    /* BERT / RoBERTa; 0 for GPT-2 */
    float layer_norm_eps;
    qkv_activation activation;  /* hidden_act / activation_function */
    int32_t pad_token_id;       /* -1 when absent */
    bool scale_attn_weights;    /* GPT-2 (true elsewhere) */
    bool tie_word_embeddings;   /* GPT-2 LM head = wte (default true) */
} qkv_hf_config;

/* Parse config.json text (`what` names it in errors) / a config.json file. model_type must be "bert", "roberta" or
 * "gpt2"; a missing required field, a wrong type or a bad value (hidden size not divisible by the head count, an
 * unknown activation, position embeddings other than "absolute") is an error naming the field. */
qkv_status qkv_hf_config_parse(const char *json, const char *what, qkv_hf_config *cfg);
qkv_status qkv_hf_config_load(const char *path, qkv_hf_config *cfg);
const char *qkv_hf_arch_name(qkv_hf_arch arch);

typedef struct qkv_hf_model qkv_hf_model;

/* A model of the config's architecture with zero weights (to load into, or to fill by name). */
qkv_hf_model *qkv_hf_model_new(const qkv_hf_config *cfg);
/* Load weights from a .safetensors file or a model.safetensors.index.json (shards resolved beside it). Every
 * parameter must be found exactly once (see the key rules above). On error the model's weights are unspecified. */
qkv_status qkv_hf_model_load_weights(qkv_hf_model *m, const char *path);
/* config.json + model.safetensors (or model.safetensors.index.json) of a model directory. */
qkv_hf_model *qkv_hf_load(const char *dir);
void qkv_hf_free(qkv_hf_model *m);

const qkv_hf_config *qkv_hf_config_of(const qkv_hf_model *m);
qkv_params *qkv_hf_params(qkv_hf_model *m);
bool qkv_hf_has_pooler(const qkv_hf_model *m);
/* A tokenizer of vocab_size tokens fits the model's embedding table (else an error naming both sizes). */
qkv_status qkv_hf_check_vocab(const qkv_hf_model *m, int64_t tokenizer_vocab_size);

typedef struct qkv_hf_inputs {
    const qkv_tensor *input_ids;      /* [B, T] int32 */
    const qkv_tensor *attention_mask; /* [B, T] int32 or float32, 1 = token, 0 = padding; NULL = all tokens */
    const qkv_tensor *token_type_ids; /* [B, T] int32 or NULL (zeros); ignored by GPT-2 */
} qkv_hf_inputs;

typedef struct qkv_hf_outputs {
    qkv_tensor *last_hidden_state; /* [B, T, hidden] */
    qkv_tensor *pooler_output;     /* [B, hidden]: tanh(dense(h[:, 0])); BERT / RoBERTa with a pooler, else NULL */
    qkv_tensor *logits;            /* [B, T, vocab]: GPT-2 only, else NULL */
    int n_layers;
    qkv_tensor *attentions[QKV_HF_MAX_LAYERS]; /* [B, heads, T, T] per layer when asked, else NULL */
} qkv_hf_outputs;

/* Run the model. Bad ids (outside the vocabulary), a sequence longer than the position table, masks of the wrong
 * shape: an error naming them. Gradients flow into the parameters if the context records them. */
qkv_status qkv_hf_forward(qkv_ctx *ctx, const qkv_hf_model *m, const qkv_hf_inputs *in, bool output_attentions,
                          qkv_hf_outputs *out);

#ifdef __cplusplus
}
#endif
#endif
