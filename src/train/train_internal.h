/* Inside the training engine: task data (tokenizers, encoded splits), batching, and the run struct the loop,
 * the evaluator and the predictor share. */
#ifndef QKV_TRAIN_INTERNAL_H
#define QKV_TRAIN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/visibility.h"
#include "qkv/autograd.h"
#include "qkv/config.h"
#include "qkv/data.h"
#include "qkv/model.h"
#include "qkv/optim.h"
#include "qkv/schedule.h"
#include "qkv/text.h"
#include "qkv/train.h"

QKV_INTERNAL_BEGIN

struct cJSON;

typedef enum { TASK_CLASSIFY, TASK_LM, TASK_SEQ2SEQ, TASK_TAGGING, TASK_PAIRS, TASK_SUMMARIZE, TASK_PRETRAIN } task_kind;
typedef enum { TOK_WORD, TOK_CHAR, TOK_BPE, TOK_WORDPIECE, TOK_NONE } tok_kind;

/* One example: token ids pool[off .. off+n) (classify: the text; lm: a window of seq_len + 1 tokens; seq2seq:
 * the source; tagging: the sentence; pairs: the first text; summarize: article </s> <sep> summary </s>), target
 * ids pool[toff .. toff+tn) (seq2seq: <s> y </s>; tagging: one tag id a token; pairs: the second text), and a label
 * (classify; pairs: 1 = duplicate). summarize: the first `prompt` tokens are article </s> <sep>. */
typedef struct example {
    int64_t off, n, toff, tn;
    int32_t label;
    int64_t prompt;
} example;

typedef struct split {
    int32_t *pool;
    int64_t pool_n, pool_cap;
    example *ex;
    int64_t n, cap;
    int64_t n_chars; /* characters of text read (bits per character) */
} split;

typedef struct pretrain_state pretrain_state; /* task_pretrain.c */

typedef struct task {
    task_kind kind;
    tok_kind tok;
    bool shard;           /* lm data already tokenised (token shards) */
    qkv_vocab *vocab;     /* word/char tokens (source side for seq2seq) */
    qkv_vocab *tgt_vocab; /* seq2seq with separate vocabularies */
    qkv_bpe *bpe;         /* byte-level BPE (source side for seq2seq) */
    qkv_bpe *tgt_bpe;     /* seq2seq with separate BPE vocabularies */
    qkv_wordpiece *wp;
    qkv_word_opts wopts;
    char **labels; /* classify: label strings in id order (sorted); tagging: the tags */
    int n_labels;
    int64_t vocab_size, tgt_vocab_size;
    int32_t pad, unk, bos, eos, tgt_bos, tgt_eos, tgt_pad;
    int32_t cls; /* classify with data.cls_token and the word tokenizer: prepended to every text; else -1 */
    int64_t max_len, seq_len;
    int tagset; /* tagging: which column or derived layer gives the tags (task_tagging.h) */
    /* summarize: <sep> id, the article's loss weight, the summary's token limit, articles truncated so far */
    int32_t sep;
    float article_weight;
    int64_t summary_max_len, n_truncated;
    pretrain_state *pre; /* pretrain: the corpus, its tokens and the masking settings */
} task;

/* Sets up the tokenizer and labels. fresh: build them from the training file and save them in run_dir; else load
 * them from run_dir. */
qkv_status qkv__task_prepare(task *t, const struct cJSON *cfg, const char *task_name, const char *run_dir, bool fresh);
void qkv__task_free(task *t);
/* Reads and encodes a file in the task's format. */
qkv_status qkv__task_load(task *t, const char *path, split *out);
/* One text (classify, lm) as a split of one example (lm: one window over the whole text). */
qkv_status qkv__task_encode_text(task *t, const char *text, split *out);
void qkv__task_info(const task *t, qkv_task_info *info);
/* Token ids of one text with the task's (source) tokenizer, no special tokens but WordPiece's [CLS]/[SEP]; *ids is
 * malloc'd (NULL when *n == 0). */
qkv_status qkv__task_encode_ids(task *t, const char *text, size_t len, int32_t **ids, size_t *n);
/* Token shards: the tokenizer the shards were made with, when known (shard_tokenizer.c); the error of a run without
 * one asked to encode text. */
qkv_status qkv__task_shard_tokenizer(task *t, const struct cJSON *cfg, const char *shard, const char *run_dir, bool fresh);
qkv_status qkv__task_no_tokenizer(void);
/* Text of seq2seq target ids (*text malloc'd): <s>, </s> and <pad> skipped; word tokens joined by spaces, BPE
 * bytes concatenated with invalid UTF-8 (a hypothesis may stop mid-character) replaced by U+FFFD. */
qkv_status qkv__task_decode_target(const task *t, const int32_t *ids, size_t n, char **text);
void qkv__split_free(split *s);
/* Growing a split (task_pairs.c): ids appended to the pool, a new zeroed example (NULL, error set, when out of
 * memory). */
qkv_status qkv__split_append(split *s, const int32_t *ids, int64_t n);
example *qkv__split_example(split *s);

/* ---- summarize (task_summarize.c): a language model on "article </s> <sep> summary </s>" ---- */
/* BPE with <pad> </s> <sep>, trained on both columns of the training split (fresh) or reloaded from run_dir. */
qkv_status qkv__summ_prepare(task *t, const qkv_run_settings *rs, const qkv_dataset *train, const char *dir,
                             bool fresh);
/* One "article<TAB>summary" row as an example; path:line in errors (empty side, invalid UTF-8). */
qkv_status qkv__summ_add_row(task *t, const char *path, const qkv_row *row, split *s);
/* The prompt of one article: its ids truncated to the task's room, then </s> <sep> (*ids malloc'd). *truncated
 * (may be NULL) says whether the article was cut. */
qkv_status qkv__summ_prompt(task *t, const char *article, size_t len, int32_t **ids, size_t *n, bool *truncated);
/* The batch of a summarize split: ids/targets/mask as lm, weights article_weight on predictions of prompt
 * tokens and 1 on the summary and its </s>; n_tokens counts the summary's. */
/* A "warning" record in run_dir/log.jsonl when articles were cut (qkv train shows it); nothing when none were. */
qkv_status qkv__summ_log_truncation(const char *dir, int64_t truncated, int64_t examples);
/* ROUGE-1/2/L F (with and without stemming) of greedy summaries of the first max_examples (0 = all) examples of a
 * summarize split against their summaries, added to out as rouge1, rouge2, rougeL, rouge1_stem, ... (0..100). */
qkv_status qkv__run_rouge(qkv_run *r, const split *s, int64_t max_examples, struct cJSON *out);
/* Summaries of token prompts (qkv__summ_prompt's) as text, in input order (summarize.c). */
struct qkv_summarize_opts;
typedef qkv_status (*qkv__summ_text_fn)(int index, const char *summary, void *user);
qkv_status qkv__summ_generate(qkv_run *r, int n, const int32_t *const *prompts, const int64_t *n_prompt,
                              const struct qkv_summarize_opts *o, qkv__summ_text_fn emit, void *user);
qkv_status qkv__summ_batch_make(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t B,
                                qkv_batch *b, int64_t *tokens);

/* ---- pretrain (task_pretrain.c): BERT's masked-LM + next-sentence sequences from documents ---- */
/* The WordPiece tokenizer (data.vocab_file copied, or learned from the corpus when fresh) and the settings. */
qkv_status qkv__pretrain_prepare(task *t, const qkv_run_settings *rs, const char *dir, bool fresh);
void qkv__pretrain_free(pretrain_state *p);
/* The corpus tokenised; epoch 0's training sequences and the held-out ones (*have_heldout false when none). */
qkv_status qkv__pretrain_load(task *t, split *train, split *heldout, bool *have_heldout);
/* The training sequences of an epoch (a no-op when they are already built). */
qkv_status qkv__pretrain_epoch(task *t, split *train, uint64_t epoch);
qkv_status qkv__pretrain_batch_make(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t B,
                                    qkv_batch *b, int64_t *tokens);
/* loss, mlm_loss, mlm_accuracy, mlm_perplexity, nsp_loss, nsp_accuracy, masked_tokens, examples. */
struct cJSON *qkv__pretrain_evaluate(qkv_run *r, const split *s, int64_t max_batches);

/* An epoch's batch order: a seeded permutation (or file order), optionally bucketed by length. */
typedef struct batch_plan {
    int64_t *order;  /* example indices */
    int64_t *starts; /* n_batches + 1 offsets into order */
    int64_t n_batches;
} batch_plan;
qkv_status qkv__batch_plan_build(batch_plan *p, const split *s, int64_t batch, bool shuffle, bool bucket, uint64_t seed,
                                 uint64_t epoch);
void qkv__batch_plan_free(batch_plan *p);
/* Tensors in ctx for examples order[start .. start+count). *tokens receives the real (unpadded) token count. */
qkv_status qkv__batch_make(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t count, qkv_batch *b,
                           int64_t *tokens);

struct qkv_run {
    char *dir;
    struct cJSON *cfg;
    qkv_run_settings set; /* cfg's fields, read once (strings point into cfg) */
    char *cfg_text;
    const qkv_model_type *type;
    task task;
    split train, dev;
    bool have_train, have_dev;
    qkv_params *params;
    qkv_model *model;
    qkv_optim *opt;
    qkv_schedule sched;
    qkv_ctx *ctx;
    qkv_train_state state;
    qkv_loop_state loop;
    batch_plan plan;
    uint64_t plan_epoch;
    bool plan_valid;
    uint64_t data_seed;
};

/* Evaluates on a split: a JSON object of metrics (caller frees). max_batches 0 = all. */
struct cJSON *qkv__run_evaluate(qkv_run *r, const split *s, int64_t max_batches);
/* Corpus BLEU (0..100) of greedy decodes of the first max_examples (0 = all) seq2seq examples against their
 * references: word runs as the tokenizer saw them (word tokens joined by spaces, whitespace-split); BPE runs as text
 * (decoded, so the reference is its line up to data.max_len tokens), tokenized with 13a as sacrebleu does. The decoder is the
 * model's teacher-forcing forward, re-run on a growing prefix: slow (quadratic) but works for any seq2seq model. */
qkv_status qkv__run_bleu(qkv_run *r, const split *s, int64_t max_examples, double *bleu);
/* The run's "embeddings" option on its freshly built model (src/train/pretrained.c), before the optimiser exists.
 * fresh: copies the vector file's rows into every token embedding the model type declares
 * (qkv_model_type_embeddings), for each token found, and logs the coverage to log.jsonl (qkv train shows it); resuming
 * (fresh false) leaves the weights to the checkpoint. Either way embeddings.frozen makes those matrices require no
 * gradient, so the optimiser's parameter list matches the checkpoint's. */
qkv_status qkv__run_pretrained_init(qkv_run *r, bool fresh);
/* The "embeddings" object's values alone (types, one source of vectors), before anything is built. */
qkv_status qkv__run_pretrained_check(const qkv_run *r);
/* "ckpt-<step>.safetensors" paths in the run dir, by step: the newest step, or -1 when none. */
long qkv__run_newest_checkpoint(const char *dir);

QKV_INTERNAL_END
#endif
