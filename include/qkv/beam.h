/* Decoding for sequence-to-sequence models: greedy, sampling with temperature, beam search (GNMT length penalty,
 * n-best) and Minimum Bayes Risk over samples (BLEU or ROUGE utility).
 *
 * The algorithms see a model only through its incremental decoder (qkv_decoder, decoder.h), whatever its type:
 * start() encodes the source sentences once and prepares rows (rows_per_src consecutive rows per source sentence);
 * step() feeds one token per row and returns next-token scores; reorder() permutes rows (beam search keeps the
 * surviving hypotheses). A decoder whose scores are raw logits is normalised here (log_softmax per row), so scores
 * below are always log-probabilities. Get one with qkv_model_decoder(type, model, &d).
 *
 * Conventions. Token ids are int32. A generated sequence excludes BOS and includes the EOS that ended it (if any).
 * Scores are natural log-probabilities of the generated tokens (EOS included) under the model; tokens that are
 * banned (pad, BOS, and repeated n-grams under no_repeat_ngram) get probability 0 without renormalising the rest, so
 * scores stay true log-probabilities of the model's distribution (a repetition penalty other than 1 is the exception:
 * scores then sum the penalised log-probabilities, as HF's beam scores do). Errors follow qkv's rules: a status (or
 * NULL) with qkv_last_error() naming what was wrong.
 *
 * Ownership: results are heap structs owned by the caller and freed with qkv_hyps_free(). */
#ifndef QKV_BEAM_H
#define QKV_BEAM_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/decoder.h"
#include "qkv/error.h"
#include "qkv/metrics.h"
#include "qkv/repeat.h"
#include "qkv/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_decode_opts {
    int32_t bos, eos;
    int32_t pad;          /* banned from generation when >= 0 (BOS is always banned) */
    int max_len;          /* generated tokens at most (EOS included); > 0 */
    int beam;             /* beam size (beam search), >= 1 */
    int n_best;           /* hypotheses returned by beam search, 1..beam */
    float alpha;          /* GNMT length penalty ((5 + len) / 6)^alpha, >= 0; 0 = rank by log-probability */
    float temperature;    /* sampling: p ~ exp(logprob / temperature), > 0 */
    int n_samples;        /* MBR: number of samples, each both a candidate and a pseudo-reference, >= 1 */
    bool want_attention;  /* fill qkv_hyp.attn (the decoder must have source attention) */
    /* Repetition control, every search (repeat.h): */
    int no_repeat_ngram;  /* >= 0: no n-gram of this size twice in a hypothesis's history; 0 = off */
    float repetition_penalty; /* > 0, on log-probabilities (scores then sum the penalised ones); 1 = off */
    qkv_repeat_scope repeat_scope; /* what the history is: the generated tokens, or a prompted.h prompt too */
} qkv_decode_opts;

/* bos 1, eos 2, pad 0, max_len 100, beam 4, n_best 1, alpha 0.6, temperature 1, n_samples 16, no attention, no
 * repetition rules (no_repeat_ngram 0, repetition_penalty 1, scope generated). */
qkv_decode_opts qkv_decode_defaults(void);

typedef struct qkv_hyp {
    int32_t *tokens;     /* len tokens (no BOS; EOS last if finished) */
    int len;
    bool finished;       /* ended with EOS (false: stopped at max_len) */
    double logprob;      /* sum of the tokens' log-probabilities */
    double score;        /* the ranking score: logprob / ((5 + len) / 6)^alpha (beam), logprob otherwise,
                          * expected utility for MBR */
    float *attn;         /* [len, src_len] attention of each generated token over the source, or NULL */
    int src_len;
} qkv_hyp;

typedef struct qkv_hyps {
    int n;
    qkv_hyp *h;          /* n hypotheses, best first */
} qkv_hyps;

void qkv_hyps_free(qkv_hyps *hs);

/* GNMT's length penalty ((5 + len) / 6)^alpha. */
double qkv_length_penalty(int len, float alpha);

/* Greedy decoding of n_src sentences at once: out[i] gets sentence i's hypothesis (one each). */
qkv_status qkv_decode_greedy(const qkv_decoder *d, const int32_t *src, const int32_t *lengths, int n_src,
                             int src_len, const qkv_decode_opts *opts, qkv_hyps *out);
/* Ancestral sampling with opts->temperature: n samples of one sentence (src [src_len], length given). */
qkv_status qkv_decode_sample(const qkv_decoder *d, const int32_t *src, int src_len, int n,
                             const qkv_decode_opts *opts, qkv_rng *rng, qkv_hyps *out);
/* Beam search of one sentence: opts->n_best hypotheses, best first, by score. Finished hypotheses are ranked by
 * logprob / lp(len); the search stops when n_best hypotheses are finished and no live one can still beat the
 * worst of them, or at max_len (live hypotheses then enter the n-best unfinished). */
qkv_status qkv_decode_beam(const qkv_decoder *d, const int32_t *src, int src_len, const qkv_decode_opts *opts,
                           qkv_hyps *out);

/* ---- Minimum Bayes Risk ---- */
typedef enum qkv_mbr_utility { QKV_MBR_BLEU = 0, QKV_MBR_ROUGE_L, QKV_MBR_ROUGE_1, QKV_MBR_ROUGE_2 } qkv_mbr_utility;
/* "bleu", "rougeL", "rouge1", "rouge2"; false if unknown. */
bool qkv_mbr_utility_parse(const char *name, qkv_mbr_utility *u);

/* The candidate with the highest expected utility against the others used as pseudo-references:
 * E(i) = mean over j != i of u(cand_i, ref = cand_j) (sentence BLEU with effective order, or ROUGE F1). Ties go to
 * the earlier candidate. n >= 1 (one candidate: index 0, expectation 0). expected[] (n entries) may be NULL. */
qkv_status qkv_mbr_select(const char *const *cands, int n, qkv_mbr_utility u, int *best, double *expected);

/* Turns a token sequence into the text the utility compares (e.g. BPE detokenisation). Returns a malloc'd string
 * owned by the caller, or NULL on error. NULL callback: the ids as decimal numbers separated by spaces. */
typedef char *(*qkv_detok_fn)(const int32_t *tokens, int len, void *user);

/* Reduces samples (n >= 1, as drawn) to the MBR choice among them in place: samples->n becomes 1, the winner's score
 * its expected utility. EOS is stripped before detokenising. */
qkv_status qkv_mbr_reduce(qkv_hyps *samples, qkv_mbr_utility u, qkv_detok_fn detok, void *user);

/* MBR decoding of one sentence: opts->n_samples samples, EOS stripped before detokenising, the consensus
 * candidate returned as out (n = 1, score = its expected utility). */
qkv_status qkv_decode_mbr(const qkv_decoder *d, const int32_t *src, int src_len, const qkv_decode_opts *opts,
                          qkv_mbr_utility u, qkv_detok_fn detok, void *user, qkv_rng *rng, qkv_hyps *out);

#ifdef __cplusplus
}
#endif
#endif
