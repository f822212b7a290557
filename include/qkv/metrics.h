/* NLP evaluation metrics: corpus/sentence BLEU (sacrebleu-compatible), ROUGE (rouge-score-compatible) with NLTK's
 * Porter stemmer, classification scores, conlleval entity F1, perplexity.
 *
 * Strings are UTF-8 and borrowed (never kept after a call returns). Results are plain structs filled by the
 * caller-provided pointer; the few that own heap memory say so and have a *_free function. Every function that can
 * fail on its input returns a qkv_status with qkv_last_error() naming what was wrong.
 */
#ifndef QKV_METRICS_H
#define QKV_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------------------
 * BLEU (Papineni et al. 2002) as computed by sacrebleu 2.x: same tokenisation (13a = mteval-v13a), same n-gram
 * clipping over multiple references, closest reference length (ties to the shorter), corpus-level brevity penalty,
 * same smoothing methods and effective order. Scores are on sacrebleu's 0..100 scale.
 * ------------------------------------------------------------------------------------------------------------- */

#define QKV_BLEU_MAX_ORDER 8

typedef enum qkv_bleu_smooth {
    QKV_BLEU_SMOOTH_EXP = 0, /* sacrebleu's default: NIST geometric sequence for orders without matches */
    QKV_BLEU_SMOOTH_NONE,
    QKV_BLEU_SMOOTH_FLOOR,   /* precision floor: smooth_value / total for orders without matches (default 0.1) */
    QKV_BLEU_SMOOTH_ADD_K,   /* add smooth_value to counts and totals of orders >= 2 (default 1) */
} qkv_bleu_smooth;

typedef enum qkv_bleu_tokenizer {
    QKV_BLEU_TOK_13A = 0,    /* mteval-v13a, sacrebleu's default */
    QKV_BLEU_TOK_NONE,       /* split on whitespace only */
} qkv_bleu_tokenizer;

typedef struct qkv_bleu_opts {
    qkv_bleu_smooth smooth;
    double smooth_value;        /* for FLOOR / ADD_K; negative = the method's default */
    bool lowercase;
    bool effective_order;       /* ignore orders the hypothesis is too short to have (sentence BLEU) */
    int max_order;              /* 1..QKV_BLEU_MAX_ORDER; 0 = 4 */
    qkv_bleu_tokenizer tokenizer;
} qkv_bleu_opts;

/* sacrebleu.corpus_bleu's defaults (exp smoothing, 13a, n=4, no effective order). */
qkv_bleu_opts qkv_bleu_default_opts(void);
/* sacrebleu.sentence_bleu's defaults: the same with effective order on. */
qkv_bleu_opts qkv_bleu_sentence_opts(void);

typedef struct qkv_bleu_result {
    double score;                           /* 0..100 */
    double precisions[QKV_BLEU_MAX_ORDER];  /* percent, after smoothing */
    int64_t counts[QKV_BLEU_MAX_ORDER];     /* clipped matching n-grams per order */
    int64_t totals[QKV_BLEU_MAX_ORDER];     /* hypothesis n-grams per order */
    double bp, ratio;
    int64_t hyp_len, ref_len;
    int max_order;
    int n_refs;                             /* references per segment; -1 when it varies ("var") */
    qkv_bleu_opts opts;                     /* the settings used, for the signature */
} qkv_bleu_result;

/* Corpus BLEU. hyps: n hypothesis strings. refs: n_refs reference streams, each an array of n strings (sacrebleu's
 * layout: refs[r][i] is reference r of segment i); a NULL reference entry means "segment i has fewer references".
 * opts NULL = qkv_bleu_default_opts(). */
qkv_status qkv_bleu_corpus(const char *const *hyps, size_t n, const char **const *refs, int n_refs,
                           const qkv_bleu_opts *opts, qkv_bleu_result *out);
/* Sentence BLEU of one hypothesis against n_refs references. opts NULL = qkv_bleu_sentence_opts(). */
qkv_status qkv_bleu_sentence(const char *hyp, const char *const *refs, int n_refs, const qkv_bleu_opts *opts,
                             qkv_bleu_result *out);
/* BLEU from sufficient statistics (sacrebleu's BLEU.compute_bleu): counts/totals have opts->max_order entries. */
qkv_status qkv_bleu_from_stats(const int64_t *counts, const int64_t *totals, int64_t hyp_len, int64_t ref_len,
                               const qkv_bleu_opts *opts, qkv_bleu_result *out);
/* "BLEU = 43.27 71.6/51.2/38.4/29.2 (BP = 0.961 ratio = 0.962 hyp_len = 8384 ref_len = 8716)". Returns the length
 * snprintf would have written. */
int qkv_bleu_format(const qkv_bleu_result *r, char *buf, size_t size);
/* sacrebleu's signature, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x". */
int qkv_bleu_signature(const qkv_bleu_result *r, char *buf, size_t size);

/* The 13a tokenisation of one line (tokens joined by single spaces), in a new malloc'd string owned by the caller,
 * or NULL (error set) on invalid UTF-8 or out of memory. */
char *qkv_bleu_tokenize_13a(const char *line);

/* ---------------------------------------------------------------------------------------------------------------
 * ROUGE as computed by Google's rouge-score package: lowercase, every run of characters outside [a-z0-9] is a
 * separator, optional Porter stemming of tokens longer than 3 characters. ROUGE-Lsum splits on newlines.
 * ------------------------------------------------------------------------------------------------------------- */

typedef struct qkv_prf {
    double precision, recall, f1;
} qkv_prf;

typedef struct qkv_rouge_result {
    qkv_prf rouge1, rouge2, rougeL, rougeLsum;
} qkv_rouge_result;

typedef struct qkv_rouge_opts {
    bool use_stemmer;
} qkv_rouge_opts;

/* Scores of one prediction against one target (rouge_scorer.RougeScorer.score(target, prediction)). opts may be
 * NULL (no stemmer). */
qkv_status qkv_rouge_score(const char *target, const char *prediction, const qkv_rouge_opts *opts,
                           qkv_rouge_result *out);
/* ROUGE-N for any n >= 1. */
qkv_status qkv_rouge_n(const char *target, const char *prediction, int n, const qkv_rouge_opts *opts, qkv_prf *out);
/* Mean of the per-pair scores over n pairs (what rouge-score's simple averaging reports). */
qkv_status qkv_rouge_mean(const char *const *targets, const char *const *predictions, size_t n,
                          const qkv_rouge_opts *opts, qkv_rouge_result *out);
/* "rouge1:P/R/F ... |stem:no" style signature of the settings. */
int qkv_rouge_signature(const qkv_rouge_opts *opts, char *buf, size_t size);

/* NLTK's PorterStemmer (NLTK_EXTENSIONS mode) applied to a lowercase ASCII word of len bytes. Writes the stem to
 * out (capacity out_size, at least len + 2) NUL-terminated and returns its length, or -1 (error set) if it does not
 * fit. */
int qkv_porter_stem(const char *word, size_t len, char *out, size_t out_size);

/* ---------------------------------------------------------------------------------------------------------------
 * Classification
 * ------------------------------------------------------------------------------------------------------------- */

/* Fraction of i with pred[i] == gold[i]. Error if n == 0. */
qkv_status qkv_metric_accuracy(const int32_t *pred, const int32_t *gold, size_t n, double *out);

/* Token and whole-sequence accuracy over n_seq sequences of seq_len labels (row-major). A position counts when
 * mask is NULL or mask[i] != 0, and gold[i] != ignore_index. A sequence is correct when all its counted positions
 * are; sequences without counted positions are left out of seq_acc. Either output may be NULL. */
qkv_status qkv_metric_masked_accuracy(const int32_t *pred, const int32_t *gold, const uint8_t *mask, size_t n_seq,
                                      size_t seq_len, int32_t ignore_index, double *token_acc, double *seq_acc);

/* Confusion matrix and precision/recall/F1 for labels 0..n_classes-1. Owns heap arrays: qkv_classify_free. */
typedef struct qkv_classify_result {
    int n_classes;
    int64_t *confusion;         /* [gold][pred], n_classes * n_classes */
    qkv_prf *per_class;         /* n_classes entries; 0 where a denominator is 0 (sklearn's zero_division=0) */
    int64_t *support;           /* gold count per class */
    qkv_prf macro;              /* unweighted mean over classes present in gold or pred (as sklearn) */
    qkv_prf micro;              /* from summed counts; equals accuracy for single-label data */
    double accuracy;
} qkv_classify_result;

qkv_status qkv_metric_classify(const int32_t *pred, const int32_t *gold, size_t n, int n_classes,
                               qkv_classify_result *out);
void qkv_classify_free(qkv_classify_result *r);

/* ---- Scores of a binary decision (a Siamese network's cosines; labels 1 = positive, 0 = negative) ---- */
/* Area under the ROC curve: the probability that a random positive scores above a random negative, ties counting
 * one half (Mann-Whitney U from average ranks, as sklearn's roc_auc_score). Needs both classes. */
qkv_status qkv_metric_auc(const float *scores, const int32_t *labels, size_t n, double *auc);
/* The threshold t with the best accuracy for "positive when score >= t": the midpoint between two neighbouring
 * distinct scores (below the lowest / above the highest at the ends); of equally accurate cuts the highest.
 * accuracy (may be NULL) receives its accuracy. */
qkv_status qkv_metric_best_threshold(const float *scores, const int32_t *labels, size_t n, double *threshold,
                                     double *accuracy);

/* ---------------------------------------------------------------------------------------------------------------
 * Entity (chunk) F1 with conlleval semantics: a chunk starts at B-X, or at I-X after O or after a tag of another
 * type; it ends before B, O or a change of type. The type is the text after the first '-' up to the next '-'
 * (as conlleval's split). A NULL or "" tag in both sequences marks a sentence boundary (conlleval's blank line).
 * ------------------------------------------------------------------------------------------------------------- */

typedef enum qkv_tag_scheme {
    QKV_TAGS_IOB2 = 0, /* BIO: every chunk starts with B- */
    QKV_TAGS_IOB1,     /* B- only between adjacent chunks of one type */
} qkv_tag_scheme;       /* both are scored identically (conlleval); the scheme only decides which tags are valid */

typedef struct qkv_chunk_type_result {
    char *type;                        /* owned */
    int64_t n_gold, n_pred, n_correct;
    qkv_prf prf;
} qkv_chunk_type_result;

typedef struct qkv_chunk_result {
    int64_t n_gold, n_pred, n_correct; /* chunks */
    int64_t n_tokens, n_correct_tags;  /* conlleval's "accuracy" = correct_tags / tokens */
    qkv_prf prf;                       /* overall, as fractions (conlleval prints percent) */
    double accuracy;
    int n_types;
    qkv_chunk_type_result *types;      /* sorted by type name; owned: qkv_chunk_free */
} qkv_chunk_result;

qkv_status qkv_metric_chunk_f1(const char *const *gold, const char *const *pred, size_t n, qkv_tag_scheme scheme,
                               qkv_chunk_result *out);
void qkv_chunk_free(qkv_chunk_result *r);

/* ---------------------------------------------------------------------------------------------------------------
 * Perplexity = exp(summed negative log-likelihood in nats / token count).
 * ------------------------------------------------------------------------------------------------------------- */
qkv_status qkv_metric_perplexity(double nll_sum, int64_t n_tokens, double *out);

/* SQuAD v1.1 exact match and token F1 of a predicted answer against the gold answers (the maximum over them), each
 * in [0, 1], normalised exactly as the official evaluate-v1.1.py does: Python's lowercasing, ASCII punctuation
 * removed, the articles a/an/the removed as whole words, whitespace collapsed (src/metrics/squad.c). A dataset's
 * scores are the means of these, x100 as the script prints them. */
qkv_status qkv_squad_score(const char *prediction, const char *const *golds, int n_golds, double *em, double *f1);

#ifdef __cplusplus
}
#endif
#endif
