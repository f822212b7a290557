/* A decoder-only language model seen as a decoder from a source: the "source" is a prompt the model reads before
 * generating (summarize: article </s> <sep>), so the searches written for seq2seq models (beam search with a
 * length penalty, qkv_decode_batch) run on it unchanged.
 *
 * start() feeds every row its prompt but the last token; the caller's first step then feeds that last token as its
 * BOS (set qkv_decode_opts.bos to it), which bans it from the output as BOS always is. Rows move in lock step and a
 * GPT's cache has no padding mask, so the prompts of one start() must have one length: decode with batch_size 1, or
 * group prompts of equal length. */
#ifndef QKV_PROMPTED_H
#define QKV_PROMPTED_H

#include "qkv/decoder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Storage of the adapter (the caller's, e.g. on the stack): the language model's decoder it wraps. */
typedef struct qkv_prompted {
    qkv_decoder lm;
} qkv_prompted;

/* *out decodes from prompts with lm (a decoder that takes no source), through p (which must outlive out).
 * QKV_ERR_UNSUPPORTED when lm needs a source or reads a start token. */
qkv_status qkv_prompted_decoder(const qkv_decoder *lm, qkv_prompted *p, qkv_decoder *out);

#ifdef __cplusplus
}
#endif
#endif
