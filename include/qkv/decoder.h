/* The incremental decoder of a model type: how generation, translation, beam search, MBR and the viewer drive any
 * model that can produce tokens, without knowing which model it is.
 *
 * A model type that can generate points its qkv_model_type.decoder (model.h) at a qkv_decoder_ops table; NULL means
 * the model cannot generate (a classifier). The table works on rows: start() prepares `rows` independent decoding
 * rows at once, step() feeds one token to every row and returns each row's next-token scores [rows, V], reorder()
 * gathers rows (beam search keeps its surviving hypotheses; batched decoding drops finished rows), free() releases
 * the state. Every model carries what a step needs to continue without recomputing the prefix (a Transformer's K/V
 * cache, a recurrent network's state).
 *
 *   seq2seq (info.needs_source): start() encodes n_src source sentences once; rows_per_src consecutive rows belong
 *            to each source. The caller feeds its vocabulary's BOS as every row's first token.
 *   lm     : src is NULL and src_len 0; n_src * rows_per_src rows start with an empty cache / zero state. A model
 *            trained on its text shifted right by a start token (info.start_token >= 0) expects that token first;
 *            the caller feeds it before the prompt.
 *
 * Rows move in lock step: step t feeds token t of every row. The caller decides what each row's token is (a prompt
 * token, a sampled token, a beam's choice), so greedy, sampling, beam search and prompted generation are the same
 * loop over this interface.
 *
 * Scores are what the model computes today, so that decoding through this interface is bit-identical to the model's
 * own code: log-probabilities (log_softmax of the logits) when info.log_probs, else raw logits. Callers that need
 * probabilities normalise raw logits themselves.
 *
 * Ownership: a state borrows the model (and its parameters), which must outlive it and not change while it lives
 * (a state may keep its own packed copies of the weights); free() releases the state.
 * qkv_decoder is a small value (ops, borrowed model, info) the caller may copy. Errors: NULL / a status with
 * qkv_last_error() naming what was wrong (a token out of range, a full context, bad sizes). */
#ifndef QKV_DECODER_H
#define QKV_DECODER_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_model qkv_model;                 /* a built model (model.h) */
typedef struct qkv_decoder_state qkv_decoder_state; /* one model type's decoding state (opaque) */

/* What a caller needs to know about a model's decoder. */
typedef struct qkv_decoder_info {
    int64_t vocab;         /* V: scores per row (seq2seq: the target vocabulary) */
    int64_t capacity;      /* tokens a row can be fed in all (a Transformer's positions table), 0 = unlimited */
    bool log_probs;        /* step's scores are log-probabilities; false: raw logits */
    bool needs_source;     /* start() encodes source sentences (seq2seq); false: src must be NULL */
    bool source_attention; /* step() can return attention over the source */
    int32_t start_token;   /* >= 0: the token the model was trained to read first (its training inputs are the
                            * targets shifted right by it); the caller feeds it as every row's first token.
                            * -1: none (a seq2seq model takes the caller's BOS; a GPT starts from the prompt) */
} qkv_decoder_info;

typedef struct qkv_decoder_ops {
    void (*info)(const qkv_model *m, qkv_decoder_info *out);
    /* Prepare n_src * rows_per_src rows that will take at most max_steps steps (0: up to info.capacity, or
     * unbounded). seq2seq: src [n_src, src_len] row-major, lengths[i] valid tokens each (the rest is padding;
     * lengths NULL = all src_len). lm: src and lengths NULL, src_len 0. NULL with an error on bad input. */
    qkv_decoder_state *(*start)(const qkv_model *m, const int32_t *src, const int32_t *lengths, int n_src,
                                int src_len, int rows_per_src, int max_steps);
    /* One step: tokens[rows] -> scores [rows, V] (see info.log_probs) and, if attn is non-NULL and the model has
     * source attention, attention over the source [rows, src_len] (otherwise attn is not written). */
    qkv_status (*step)(qkv_decoder_state *st, const int32_t *tokens, float *scores, float *attn);
    /* The state then holds n_rows rows (1 <= n_rows <= the rows start() prepared): row i becomes old row from[i]
     * (each from[i] in [0, current rows); rows may repeat or vanish). n_rows below the current count compacts the
     * batch (finished rows stop costing compute); above it, rows fan out (one row per source growing into a beam).
     * Later steps take n_rows tokens. */
    qkv_status (*reorder)(qkv_decoder_state *st, const int32_t *from, int n_rows);
    void (*free)(qkv_decoder_state *st);
    /* Optional (NULL: callers make n steps and ignore their scores). n >= 1 tokens for every row, tokens [rows, n]
     * row-major, fed as n steps would feed them but returning no scores: a prompt before its last token. A model
     * that can runs the n positions as one batch and skips its output projection (GPT: one forward over rows x
     * positions fills the cache), and must leave the state exactly as the n steps do, so that later steps return
     * the same bits. */
    qkv_status (*prefill)(qkv_decoder_state *st, const int32_t *tokens, int n);
    /* Optional (NULL: callers free the state and start another), lm only: the state goes back to what start() made,
     * now with n_rows rows (1..the rows start() prepared) that have been fed nothing, for the same max_steps. The
     * next batch of prompts then reuses its memory (caches, packed weights) instead of allocating and faulting it in
     * again; what a restarted state computes is what a fresh one computes. */
    qkv_status (*restart)(qkv_decoder_state *st, int n_rows);
    /* Optional (NULL: not offered), for a model whose step() returns log-probabilities (info.log_probs): step() with
     * the raw logits in scores instead, the rows those log-probabilities are the log_softmax of (bit for bit as
     * step() would normalise them). Greedy decoding reads of each row only its best token and that token's
     * log-probability, so it normalises nothing but the row's shift. */
    qkv_status (*step_logits)(qkv_decoder_state *st, const int32_t *tokens, float *scores, float *attn);
} qkv_decoder_ops;

/* A model's decoder as one value: the type's table, the model it decodes, and its info. */
typedef struct qkv_decoder {
    const qkv_decoder_ops *ops;
    const qkv_model *model; /* borrowed */
    qkv_decoder_info info;
} qkv_decoder;

struct qkv_model_type;
/* The decoder of model m of type t. QKV_ERR_UNSUPPORTED naming the type when it cannot generate (no decoder). */
qkv_status qkv_model_decoder(const struct qkv_model_type *t, const qkv_model *m, qkv_decoder *out);

#ifdef __cplusplus
}
#endif
#endif
