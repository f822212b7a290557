/* Text generation from language models: choosing the next token from logits (greedy, temperature, top-k, top-p,
 * repetition penalty) and the generation loop (prompt, max tokens, stop tokens, seed, a callback per token).
 *
 * Decoding is incremental: a qkv_lm_decoder is one row of the model type's incremental decoder (decoder.h), fed one
 * token per step; the model keeps what it needs to continue (a Transformer's per-layer K/V cache, a recurrent
 * network's state), so nothing is recomputed. Batches of rows (and beam search over them) use decoder.h directly.
 *
 * Token choice, in this order (Hugging Face's logits processors, then warpers):
 *   1. repetition penalty r (CTRL): every token already in the history has its logit divided by r when positive
 *      and multiplied by r when negative; r = 1 is off (repeat.h).
 *   1b. no-repeat n-grams (no_repeat_ngram N > 0): every token that would complete an n-gram of N tokens already in
 *      the history is removed (repeat.h). The history is what the generation loops pass: the generated tokens, or
 *      prompt + generated with repeat_scope QKV_REPEAT_ALL (HF's rule for decoder-only models, which forbids
 *      copying a phrase of the prompt). If nothing is left, the loops end as if a stop token had been chosen.
 *   2. temperature 0: greedy, the highest logit (lowest id among equals); steps 3-5 are skipped.
 *   3. logits / temperature.
 *   4. top-k (k > 0): keep the k highest logits (ties broken by lower id), the rest are removed.
 *   5. top-p (p < 1): of the remaining tokens sorted by probability (descending, ties by lower id), keep the
 *      shortest prefix whose total probability reaches p (at least one token).
 *   6. draw from the softmax of what is kept, with the sampler's own Philox generator: a seed reproduces a sample.
 *
 * Ownership: a sampler owns its scratch memory; a decoder borrows the model (and its parameters) it was made from.
 */
#ifndef QKV_DECODE_H
#define QKV_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/decoder.h"
#include "qkv/error.h"
#include "qkv/model.h"
#include "qkv/repeat.h"
#include "qkv/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_sample_opts {
    float temperature;        /* 0 = greedy; else > 0 */
    int64_t top_k;            /* 0 = off */
    float top_p;              /* in (0, 1]; 1 = off */
    float repetition_penalty; /* > 0; 1 = off */
    int no_repeat_ngram;      /* >= 0; 0 = off */
    qkv_repeat_scope repeat_scope; /* the generation loops' history: generated tokens (default) or prompt too */
} qkv_sample_opts;

/* temperature 1, top_k 0, top_p 1, repetition_penalty 1, no_repeat_ngram 0, scope generated: plain sampling from
 * the softmax. */
qkv_sample_opts qkv_sample_defaults(void);
/* QKV_ERR_INVALID naming the field when an option is out of range. */
qkv_status qkv_sample_check(const qkv_sample_opts *o);

typedef struct qkv_sampler qkv_sampler;

/* NULL (error set) on bad options or vocab < 1. */
qkv_sampler *qkv_sampler_new(int64_t vocab, const qkv_sample_opts *o, uint64_t seed);
void qkv_sampler_free(qkv_sampler *s);

/* Steps 1 and 3-5 on logits[0..vocab) in place: removed entries become -inf, kept ones hold their processed
 * logits (penalised, divided by the temperature). Greedy options leave only the argmax. Returns the number kept
 * (0 only when no_repeat_ngram is on and nothing is left).
 * history: previous tokens (n_history of them, ids outside the vocabulary are ignored), may be NULL. */
int64_t qkv_sampler_filter(qkv_sampler *s, float *logits, const int32_t *history, int64_t n_history);
/* The next token: filter, then draw (or the argmax when greedy). Overwrites logits. -1 when no_repeat_ngram is on
 * and every token was removed. */
int32_t qkv_sampler_next(qkv_sampler *s, float *logits, const int32_t *history, int64_t n_history);

/* Index of the largest value (the lowest index among equals); -1 if n < 1. */
int64_t qkv_argmax(const float *x, int64_t n);

/* ---- One-row decoding of a language model through its type's decoder (decoder.h) ---- */
typedef struct qkv_lm_decoder qkv_lm_decoder;

/* A decoder for a model made by type->create; it borrows the model. NULL (error naming the type) if the type has no
 * incremental decoder (it cannot generate) or decodes from a source sentence (seq2seq: see beam.h). */
qkv_lm_decoder *qkv_lm_decoder_new(const qkv_model_type *type, qkv_model *model);
void qkv_lm_decoder_free(qkv_lm_decoder *d);
int64_t qkv_lm_decoder_vocab(const qkv_lm_decoder *d);
/* Positions the decoder can hold (a Transformer's n_ctx), or 0 when unlimited (recurrent). */
int64_t qkv_lm_decoder_capacity(const qkv_lm_decoder *d);
/* Start over: empty cache / zero state. A model that reads a start token (decoder.h's start_token: rnnlm's
 * ShiftRight) is fed it here, so the next step's logits condition on it; qkv_lm_decoder_primed() then returns true
 * and its logits are in qkv_lm_decoder_logits(). */
qkv_status qkv_lm_decoder_reset(qkv_lm_decoder *d);
bool qkv_lm_decoder_primed(const qkv_lm_decoder *d);
/* Feed one token; its output logits (the distribution of the token after it) are then in qkv_lm_decoder_logits.
 * Error when the context is full or the token is out of range. */
qkv_status qkv_lm_decoder_step(qkv_lm_decoder *d, int32_t token);
/* [vocab], owned by the decoder, valid until the next step: the model's scores as they are (decoder.h: raw logits,
 * or log-probabilities for a model that outputs them; the sampler treats both as logits). */
float *qkv_lm_decoder_logits(qkv_lm_decoder *d);

/* ---- The generation loop ---- */
/* Called with each generated token as soon as it is chosen; a non-zero return ends generation. */
typedef int (*qkv_token_fn)(int32_t token, void *user);

typedef struct qkv_gen_opts {
    qkv_sample_opts sample;
    int64_t max_new_tokens;   /* >= 0 */
    const int32_t *stop;      /* generation ends when one of these is chosen (it is not emitted), or NULL */
    int n_stop;
    uint64_t seed;
    qkv_token_fn on_token;    /* or NULL */
    void *user;
} qkv_gen_opts;

qkv_gen_opts qkv_gen_defaults(void); /* greedy (temperature 0), 64 new tokens, no stop tokens, seed 0 */

typedef enum qkv_gen_end {
    QKV_GEN_MAX_TOKENS = 0, /* produced max_new_tokens */
    QKV_GEN_STOP_TOKEN,     /* chose a stop token (or no_repeat_ngram left no token to choose) */
    QKV_GEN_CALLBACK,       /* on_token asked to stop */
    QKV_GEN_CONTEXT_FULL,   /* the decoder's capacity was reached */
} qkv_gen_end;

/* Resets d, feeds the prompt (n_prompt >= 1 unless the decoder is primed by its start token), then generates up
 * to max_new_tokens tokens into out[0..capacity). Returns the number generated (>= 0), or -1 with an error set;
 * *end (may be NULL) says why generation ended. */
int64_t qkv_generate(qkv_lm_decoder *d, const int32_t *prompt, int64_t n_prompt, const qkv_gen_opts *o,
                     int32_t *out, int64_t capacity, qkv_gen_end *end);

/* ---- Many prompts at once ---- */
/* The generated tokens of prompt `index` (n of them, then why generation ended), in input order. */
typedef qkv_status (*qkv_gen_emit_fn)(int index, const int32_t *tokens, int64_t n, qkv_gen_end end, void *user);

/* qkv_generate over n prompts, batch_size rows at a time through the type's decoder: rows move in lock step, each
 * feeding its own prompt and then its own choices (a prompt's length does not delay or pad the others), and leave
 * the batch when they end. Every prompt gets its own sampler seeded with o->seed, so its tokens and end are exactly
 * what qkv_generate gives it alone. emit() is called in input order as soon as a prompt and those before it are
 * done; o->on_token is not used. A status other than QKV_OK from emit stops generation and is returned. */
qkv_status qkv_generate_batch(const qkv_model_type *type, qkv_model *model, int n, const int32_t *const *prompts,
                              const int64_t *n_prompt, const qkv_gen_opts *o, int batch_size, qkv_gen_emit_fn emit,
                              void *user);

#ifdef __cplusplus
}
#endif
#endif
