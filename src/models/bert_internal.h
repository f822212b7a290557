/* What the fine-tuning model types (bert_heads.c) share with the pretraining one (bert.c): the "model" options, the
 * encoder under Hugging Face's "bert." names with BERT's initialisation, and its checked forward. Not installed. */
#ifndef QKV_BERT_INTERNAL_H
#define QKV_BERT_INTERNAL_H

#include <cjson/cJSON.h>

#include "core/visibility.h"
#include "models/hf_internal.h"
#include "qkv/bert.h"
#include "qkv/model.h"
#include "qkv/schema.h"

QKV_INTERNAL_BEGIN

/* The "model" object of bert (with "nsp") and of the fine-tuning types (the same fields without it). */
extern const qkv_schema qkv__bert_schema;
extern const qkv_schema qkv__bert_encoder_schema;

/* A "model" config object read with schema s into a BERT config for the task's vocabulary and lengths. */
qkv_status qkv__bert_config_from(const qkv_schema *s, const cJSON *cfg, const qkv_task_info *info,
                                 qkv_bert_config *out);

/* The encoder (embeddings, layers, pooler) added to params under "bert.", its matrices drawn normal(0,
 * initializer_range) in creation order as Hugging Face's _init_weights. */
qkv_hf_model *qkv__bert_encoder_new(const qkv_bert_config *c, qkv_params *params, qkv_rng *rng);

/* The encoder's forward on checked inputs (ids and segment ids in range; in->mlm_labels is not read). */
qkv_status qkv__bert_encode(qkv_ctx *ctx, const qkv_hf_model *enc, const qkv_bert_config *c,
                            const qkv_bert_inputs *in, bool output_attentions, qkv_hf_outputs *out);

/* The attention weights of out (n_layers maps, one per layer, [B, heads, T, T]) into the viewer's list. */
void qkv__bert_maps(const qkv_hf_outputs *out, qkv_attention_maps *maps);

QKV_INTERNAL_END
#endif
