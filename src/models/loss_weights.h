/* The per-token loss weights of a language-model batch, shared by the LMs' loss functions (gpt.c, rnnlm.c,
 * reformer.c). Not installed. */
#ifndef QKV_MODELS_LOSS_WEIGHTS_H
#define QKV_MODELS_LOSS_WEIGHTS_H

#include "core/visibility.h"
#include "qkv/model.h"

QKV_INTERNAL_BEGIN

/* The batch's mask (1 = counted) times its optional per-token weights, as float32 (an int32 mask is converted and
 * must be contiguous; `who` names the model in that error). NULL when the batch has neither; NULL with the error
 * set on failure, so a caller fails when (b->mask || b->weights) and the result is NULL. */
qkv_tensor *qkv__model_loss_weights(qkv_ctx *ctx, const qkv_batch *b, const char *who);

QKV_INTERNAL_END
#endif
