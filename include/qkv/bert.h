/* BERT for pretraining (Devlin et al. 2019; Hugging Face BertForPreTraining): the BERT encoder of the Hugging Face
 * loader (hf.h: token + position + segment embeddings, LayerNorm, post-LN blocks; the same forward code) with its
 * parameters in the caller's collection under "bert.", and the two pretraining heads:
 *   masked LM    cls.predictions.transform.dense (+ gelu) -> cls.predictions.transform.LayerNorm -> logits =
 *                x @ bert.embeddings.word_embeddings.weight^T + cls.predictions.bias (the decoder is tied to the
 *                token embedding, so it has no weight of its own)
 *   next sentence  bert.pooler.dense (+ tanh) over [CLS] -> cls.seq_relationship (2 logits; label 0 = B follows A,
 *                1 = B is random, as HF's next_sentence_label)
 * The names are HF's state_dict keys, so qkv_bert_save_hf writes a directory (model.safetensors + config.json) that
 * qkv_hf_load, `qkv attend --model DIR` and transformers' BertForPreTraining.from_pretrained read.
 * Initialisation as HF's _init_weights: weights normal(0, initializer_range), biases zero, LayerNorm ones/zeros.
 * Dropout (hidden_dropout after the embeddings and each sub-layer output, attn_dropout on the attention weights)
 * applies in training mode only.
 *
 * Ownership: qkv_bert_new adds the parameters to the caller's qkv_params; qkv_bert_free releases the model, not
 * them. Outputs are context tensors. */
#ifndef QKV_BERT_H
#define QKV_BERT_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/autograd.h"
#include "qkv/nn_layers.h"
#include "qkv/params.h"
#include "qkv/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_bert_config {
    int64_t vocab_size, hidden_size, num_layers, num_heads, intermediate_size;
    int64_t max_positions, type_vocab_size;
    float layer_norm_eps, hidden_dropout, attn_dropout, initializer_range;
    qkv_activation activation; /* gelu (erf) as BERT */
    bool nsp;                  /* the next-sentence head (false: RoBERTa-style MLM only; no cls.seq_relationship) */
    int32_t pad_token_id;
    /* Houlsby adapters in every layer (0 = none): a bottleneck MLP with a residual on each sub-layer's output,
     * "bert.encoder.layer.<i>.attention.output.adapter.{down,up}" and "...output.adapter.{down,up}", starting near
     * the identity; finetune.mode "adapters" trains them with the layer norms and the head. */
    int64_t adapter_dim;
} qkv_bert_config;

/* bert-base's shape scaled to the given width: 4 * hidden intermediate, 512 positions, 2 segments, eps 1e-12,
 * dropout 0.1, init 0.02, gelu, NSP on, pad 0. */
qkv_bert_config qkv_bert_config_default(int64_t vocab_size, int64_t hidden, int64_t layers, int64_t heads);

typedef struct qkv_bert qkv_bert;

/* NULL (error naming the field) for an inconsistent config. */
qkv_bert *qkv_bert_new(const qkv_bert_config *cfg, qkv_params *params, qkv_rng *rng);
void qkv_bert_free(qkv_bert *m);
const qkv_bert_config *qkv_bert_config_of(const qkv_bert *m);

typedef struct qkv_bert_inputs {
    qkv_tensor *ids;      /* [B, T] int32 */
    qkv_tensor *type_ids; /* [B, T] int32 segment ids, or NULL (zeros) */
    qkv_tensor *mask;     /* [B, T] int32 / float32, non-zero = token (HF's attention_mask), or NULL */
    /* [B, T] int32: the token to predict at masked positions, -100 elsewhere (HF's labels), or NULL: no MLM logits */
    qkv_tensor *mlm_labels;
} qkv_bert_inputs;

typedef struct qkv_bert_outputs {
    qkv_tensor *hidden;     /* [B, T, hidden] */
    qkv_tensor *mlm_logits; /* [P, vocab] at the P positions whose label is not -100, in row-major order */
    qkv_tensor *mlm_targets;/* [P] int32: those labels */
    qkv_tensor *nsp_logits; /* [B, 2], NULL without the NSP head */
    int n_layers;
    qkv_tensor *attentions[64]; /* [B, heads, T, T] per layer when asked */
} qkv_bert_outputs;

qkv_status qkv_bert_forward(qkv_ctx *ctx, const qkv_bert *m, const qkv_bert_inputs *in, bool output_attentions,
                            qkv_bert_outputs *out);
/* BertForPreTraining's loss: mean cross-entropy over the masked positions + (with the NSP head and nsp_labels
 * [B] int32 non-NULL) mean cross-entropy of the next-sentence labels. *mlm / *nsp (may be NULL) receive the two
 * terms (nsp NULL tensor when absent). A batch without any masked position: an error. */
qkv_tensor *qkv_bert_pretrain_loss(qkv_ctx *ctx, const qkv_bert *m, const qkv_bert_inputs *in, qkv_tensor *nsp_labels,
                                   qkv_tensor **mlm, qkv_tensor **nsp);

/* config.json of a BertForPreTraining in Hugging Face's layout. */
qkv_status qkv_bert_write_hf_config(const qkv_bert_config *cfg, const char *path);
/* dir/model.safetensors (the "bert." and "cls." parameters of params) + dir/config.json. dir must exist. */
qkv_status qkv_bert_save_hf(const qkv_bert_config *cfg, const qkv_params *params, const char *dir);

#ifdef __cplusplus
}
#endif
#endif
