/* Summaries from a run trained with data.task "summarize" (a decoder-only language model on
 * "article </s> <sep> summary </s>"): the prompt is the article (cut as in training) followed by </s> <sep>, and
 * generation stops at </s>. Every search runs many articles at once through the model type's incremental decoder
 * (qkv_generate_batch: rows in lock step, a KV cache per row, no padding of prompts).
 *
 *   greedy   the most likely token at each step
 *   sample   temperature, top-k, top-p (decode.h's sampler), seeded: a seed reproduces the summaries
 *   beam     beam search with GNMT's length penalty (beam.h), the article as a prompt (prompted.h); one article
 *            at a time (its beam is the batch), since prompts of one batch must have one length
 *   mbr      n_samples samples per article, the one with the highest mean ROUGE (or BLEU) against the others
 *            (beam.h: qkv_mbr_select) */
#ifndef QKV_SUMMARIZE_H
#define QKV_SUMMARIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/beam.h"
#include "qkv/decode.h"
#include "qkv/train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_summ_search { QKV_SUMM_GREEDY = 0, QKV_SUMM_SAMPLE, QKV_SUMM_MBR, QKV_SUMM_BEAM } qkv_summ_search;

typedef struct qkv_summarize_opts {
    qkv_summ_search search;
    qkv_sample_opts sample;    /* sample and mbr: temperature (> 0), top_k, top_p; every search: the repetition
                                * rules no_repeat_ngram, repetition_penalty, repeat_scope (repeat.h; scope
                                * generated lets a summary copy phrases of its article, all forbids it as HF does) */
    int n_samples;             /* mbr: candidates per article, >= 1 */
    qkv_mbr_utility utility;   /* mbr */
    int beam;                  /* beam: size, >= 1 */
    float alpha;               /* beam: length penalty ((5 + len) / 6)^alpha, >= 0 */
    int max_len;               /* summary tokens at most; 0 = the run's data.summary_max_len */
    int batch_size;            /* articles decoded at once, >= 1 */
    uint64_t seed;
} qkv_summarize_opts;

/* Greedy, temperature 1 for sampling, 8 MBR samples with ROUGE-L, beam 4 with alpha 0.6, the run's length,
 * batch 32, seed 0. */
qkv_summarize_opts qkv_summarize_defaults(void);

/* Summary of article `index`, in input order. truncated: the article was longer than the model's room and was cut. */
typedef qkv_status (*qkv_summary_emit_fn)(int index, const char *summary, bool truncated, void *user);

/* Summarises n articles (UTF-8 text). QKV_ERR_UNSUPPORTED when the run is not a summarize run; an empty article is
 * QKV_ERR_INVALID naming its index. A status other than QKV_OK from emit stops and is returned. */
qkv_status qkv_run_summarize(qkv_run *r, int n, const char *const *articles, const qkv_summarize_opts *o,
                             qkv_summary_emit_fn emit, void *user);

/* The ids the model reads for an article: its tokens cut to the run's room, then </s> <sep> (*ids malloc'd). */
qkv_status qkv_run_summary_prompt(qkv_run *r, const char *article, int32_t **ids, size_t *n, bool *truncated);

#ifdef __cplusplus
}
#endif
#endif
