/* What the decoding algorithms of src/decode share: option checks, a step normalised to log-probabilities, token
 * choice, hypotheses under construction, and the batched searches that one-sentence calls run as a batch of one. */
#ifndef QKV_DECODE_INTERNAL_H
#define QKV_DECODE_INTERNAL_H

#include "core/visibility.h"
#include "qkv/beam.h"
#include "qkv/repeat.h"

QKV_INTERNAL_BEGIN

qkv_status qkv__decode_check_opts(const qkv_decoder *d, const qkv_decode_opts *o, const char *who);
/* Beam size, n_best and alpha. */
qkv_status qkv__decode_check_beam(const qkv_decode_opts *o, const char *who);

/* One decoder step whose scores are log-probabilities: a decoder that returns raw logits is normalised here. */
qkv_status qkv__decode_step(const qkv_decoder *d, qkv_decoder_state *st, const int32_t *tokens, float *lp, float *attn,
                            int rows);

/* Feeds n tokens to each of `rows` rows whose scores are not needed, tokens [rows, n]: the decoder's prefill when it
 * has one (one batched pass, no output projection), else n steps. */
qkv_status qkv__decode_feed(const qkv_decoder *d, qkv_decoder_state *st, int rows, const int32_t *tokens, int n);

/* ---- Repetition control (repeat.c, include/qkv/repeat.h) ---- */
/* A hypothesis's history: pre[0..n_pre) (the prompt, when the scope counts it) followed by gen[0..n_gen). */
typedef struct decode_history {
    const int32_t *pre, *gen;
    int64_t n_pre, n_gen;
} decode_history;

/* Sets scores[t] to -inf for every token t that would complete an n-gram of N tokens already in the history; returns
 * how many tokens it banned (tokens already at -inf and ids outside [0, V) are not counted). */
int64_t qkv__repeat_ban_ngrams(int N, const decode_history *h, float *scores, int64_t V);
/* The repetition penalty r over the history's distinct tokens. seen: [V] zeros, left zeros. */
void qkv__repeat_penalise(float r, const decode_history *h, float *scores, int64_t V, uint8_t *seen);

/* Whether d is a language model's decoder from a prompt (prompted.h): its source is then the start of a history. */
bool qkv__decode_prompted(const qkv_decoder *d);
/* The repetition rules of o on one row's log-probabilities lp[V] (penalty, then bans); when they leave no allowed
 * token above -inf, EOS gets its log-probability back. A no-op when both are off. seen: [V] zeros, left zeros. */
void qkv__decode_constrain(const qkv_decode_opts *o, const decode_history *h, float *lp, int64_t V, uint8_t *seen);
/* Whether o asks for any repetition rule. */
static inline bool decode_constrained(const qkv_decode_opts *o) {
    return o->no_repeat_ngram > 0 || o->repetition_penalty != 1.0f;
}

/* Whether token v may be generated. */
static inline bool decode_allowed(const qkv_decode_opts *o, int v) { return v != o->bos && v != o->pad; }

/* A row's next token from its log-probabilities lp[V]: the best allowed one, or a draw at o->temperature. */
typedef int (*decode_pick_fn)(const float *lp, int64_t V, const qkv_decode_opts *o, qkv_rng *rng);
int qkv__decode_pick_greedy(const float *lp, int64_t V, const qkv_decode_opts *o, qkv_rng *rng);
int qkv__decode_pick_sample(const float *lp, int64_t V, const qkv_decode_opts *o, qkv_rng *rng);
/* Greedy on a row of raw logits x[V] whose log-probabilities are x - shift (qkv__log_softmax_rows_shift; mx: the
 * row's max): the token qkv__decode_pick_greedy picks from the normalised row and, in *lp, its log-probability, the
 * same bits, without normalising the row (only where the best token is not allowed, or the row has no finite best,
 * is x normalised in place and the ordinary pick run). */
int qkv__decode_pick_greedy_shifted(float *x, int64_t V, float shift, float mx, const qkv_decode_opts *o, float *lp);

/* A hypothesis being built: tokens and attention rows (S source positions each) for up to max_len steps. */
typedef struct decode_track {
    int32_t *tok;
    float *attn;
    int len;
    double logprob;
    bool done;
} decode_track;

qkv_status qkv__decode_tracks_new(decode_track *t, int n, int max_len, int S, bool attn);
void qkv__decode_tracks_free(decode_track *t, int n);
/* Moves a track into a result hypothesis (the track's buffers change owner). */
void qkv__decode_track_to_hyp(decode_track *t, int S, double score, qkv_hyp *h);

/* One input of a batched search: its source (NULL for a language model), length and generation limit. */
typedef struct decode_item {
    int index; /* the input's position, passed back to done() */
    const int32_t *src;
    int len;     /* source tokens, >= 1 (seq2seq) */
    int max_len; /* generated tokens at most, >= 1 */
} decode_item;

/* Called once per item as soon as its search ends; may take the hypotheses (leaving hs empty). */
typedef qkv_status (*decode_done_fn)(void *user, int index, qkv_hyps *hs);

/* Beam search over n items at once (rows: each item's live hypotheses; finished items leave the batch). */
qkv_status qkv__decode_beam_batch(const qkv_decoder *d, const decode_item *items, int n, const qkv_decode_opts *o,
                                  decode_done_fn done, void *user);
/* Greedy (rows_per_item 1, pick greedy) or sampling (rows_per_item samples, each row drawing from rngs[row]:
 * rngs[i * rows_per_item + j] for item i) over n items at once; finished rows leave the batch. */
qkv_status qkv__decode_rows_batch(const qkv_decoder *d, const decode_item *items, int n, int rows_per_item,
                                  const qkv_decode_opts *o, decode_pick_fn pick, qkv_rng *rngs, decode_done_fn done,
                                  void *user);

QKV_INTERNAL_END
#endif
