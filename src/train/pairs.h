/* The "pairs" task (TSV "label<TAB>text1<TAB>text2", label 1 = duplicate): reading rows, batches of pairs, the
 * duplicate pairs a Siamese network trains on, and evaluation by cosine with a threshold chosen on dev. */
#ifndef QKV_TRAIN_PAIRS_H
#define QKV_TRAIN_PAIRS_H

#include <stdint.h>

#include "core/visibility.h"
#include "qkv/data.h"
#include "train_internal.h"

QKV_INTERNAL_BEGIN

struct cJSON;

/* One row into s: both texts encoded (cut to max_len), the label 0 or 1; an empty text or another label is an
 * error naming path:line. */
qkv_status qkv__pairs_add_row(task *t, const char *path, const qkv_row *row, split *s);
/* Keeps the duplicate pairs (label 1) alone, in file order: the training split, where each batch's pairs are one
 * another's negatives (the Trax course's data). Fewer than two is an error naming path. */
qkv_status qkv__pairs_keep_duplicates(split *s, const char *path);
/* ids/mask [B, T] the first texts, src_ids/src_mask [B, S] the second ones, labels [B]; n_tokens = B (pairs).
 * A split of single texts (tn == 0, from qkv_run_embed) gives ids/mask alone. */
qkv_status qkv__pairs_batch_make(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t B,
                                 qkv_batch *b, int64_t *tokens);
/* Metrics of a split: loss (the model's loss over its duplicate pairs, batched as in evaluation), auc, and at
 * threshold (NAN: the cut with the best accuracy on this split) accuracy, precision, recall, f1 of "duplicate",
 * threshold, examples, duplicates. max_batches 0 = all. */
struct cJSON *qkv__pairs_evaluate(qkv_run *r, const split *s, int64_t max_batches, double threshold);
/* The same at the run's duplicate threshold (qkv_run_threshold: chosen on dev). */
struct cJSON *qkv__pairs_evaluate_at_dev_threshold(qkv_run *r, const split *s);

QKV_INTERNAL_END
#endif
