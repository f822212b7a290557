/* Sizes a Hugging Face config.json declares, checked against its weights' headers before a model is built. */
#ifndef QKV_MODELS_HF_CHECK_H
#define QKV_MODELS_HF_CHECK_H

#include "core/visibility.h"
#include "qkv/hf.h"

QKV_INTERNAL_BEGIN

/* config_path names config.json in messages; weights is model.safetensors or model.safetensors.index.json. Each
 * size the config declares (vocab_size, hidden_size, max_position_embeddings, type_vocab_size, intermediate_size,
 * or GPT-2's names) that a tensor of the weights shows differently is a QKV_ERR_FORMAT naming config.json, the key
 * and the tensor; a config whose sizes need more bytes than the weights files hold is refused too. Nothing is
 * allocated on the model's scale: a vocab_size of 1e9 fails here, not as an out-of-memory. */
qkv_status qkv__hf_check_declared(const qkv_hf_config *c, const char *config_path, const char *weights);

QKV_INTERNAL_END
#endif
