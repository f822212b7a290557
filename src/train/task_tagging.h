/* The tagging task's data (task_tagging.c) and its evaluation and tagging of free text (eval_tagging.c). */
#ifndef QKV_TASK_TAGGING_H
#define QKV_TASK_TAGGING_H

#include <stddef.h>

#include "train_internal.h"

QKV_INTERNAL_BEGIN

typedef enum { TAGSET_UNIVERSAL, TAGSET_BROWN, TAGSET_NAMES } tagset_kind;

/* The `names` layer of one sentence from its Brown tags (docs/tagging.md): out[i] is "B-NAME", "I-NAME" or "O"
 * (static strings). */
void qkv__tagging_names(char *const *tokens, char *const *brown, size_t n, const char **out);
/* Vocabulary and tag list: built from the training file (fresh) into run_dir/vocab.txt and labels.txt, or loaded. */
qkv_status qkv__tagging_prepare(task *t, const qkv_run_settings *rs, const char *dir, bool fresh);
/* Reads and encodes a file of "token<TAB>universal<TAB>brown" lines, sentences separated by one blank line. */
qkv_status qkv__tagging_load(task *t, const char *path, split *s);
/* Free text as tagger tokens: split on whitespace, then punctuation at either end of a word is a token of its own
 * (as the Brown corpus writes it: "Atlanta's" stays one token, "said," is two), unless the word with its marks is
 * in t's vocabulary ("Mr.", "U.S."; t may be NULL). *toks as qkv_word_split's. */
qkv_status qkv__tagging_split(const task *t, const char *text, char ***toks, size_t *n);
/* Token ids of tokens, with the run's lowercasing and <unk>. */
qkv_status qkv__tagging_encode(const task *t, char *const *toks, size_t n, int32_t *ids);
/* Whether the tags are BIO (every tag O, B-<type> or I-<type>): then entities are scored and printed. */
bool qkv__tagging_is_bio(const task *t);

/* Masked token accuracy and loss over a split (and entity precision/recall/F1 for BIO tag sets). */
struct cJSON *qkv__tagging_evaluate(qkv_run *r, const split *s, int64_t max_batches);
/* One text: {"tokens": [...], "tags": [...], "entities": [{"text", "type", "start", "end"}]} (entities: BIO). */
struct cJSON *qkv__tagging_tag(qkv_run *r, const char *text);

QKV_INTERNAL_END
#endif
