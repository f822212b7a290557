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
#include "qkv/nn_layers.h"
#include "qkv/optim.h"
#include "qkv/schedule.h"
#include "qkv/text.h"
#include "qkv/train.h"

QKV_INTERNAL_BEGIN

struct cJSON;

typedef enum {
    TASK_CLASSIFY, TASK_LM, TASK_SEQ2SEQ, TASK_TAGGING, TASK_PAIRS, TASK_SUMMARIZE, TASK_QA, TASK_PRETRAIN
} task_kind;
typedef enum { TOK_WORD, TOK_CHAR, TOK_BPE, TOK_WORDPIECE, TOK_NONE } tok_kind;

/* One example: token ids pool[off .. off+n) (classify: the text; lm: a window of seq_len + 1 tokens; seq2seq:
 * the source; tagging: the sentence; pairs: the first text; summarize: article </s> <sep> summary </s>), target
 * ids pool[toff .. toff+tn) (seq2seq: <s> y </s>; tagging: one tag id a token; pairs: the second text), and a label
 * (classify; pairs: 1 = duplicate). summarize: the first `prompt` tokens are article </s> <sep>. */
typedef struct example {
    int64_t off, n, toff, tn;
    int32_t label;
    int64_t prompt;
    int64_t seg; /* classify sentence pair: position of the second text's first token (0: one text) */
} example;

typedef struct split {
    int32_t *pool;
    int64_t pool_n, pool_cap;
    example *ex;
    int64_t n, cap;
    int64_t n_chars; /* characters of text read (bits per character) */
    struct qa_split *qa; /* qa: contexts, answers, token spans, gold positions (task_qa.c) */
    const int64_t *task_starts; /* a multi-task split: task m's examples are [starts[m], starts[m+1]) (not owned) */
    struct span_text *span; /* span_corruption: the token stream its examples are corrupted from (task_span.c) */
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
    bool per_example; /* seq2seq, train.loss_average examples: each example's target tokens weigh 1 / their count */
    int32_t cls; /* classify with data.cls_token and the word tokenizer: prepended to every text; else -1 */
    int64_t max_len, seq_len;
    int tagset; /* tagging: which column or derived layer gives the tags (task_tagging.h) */
    /* summarize: <sep> id, the article's loss weight, the summary's token limit, articles truncated so far */
    int32_t sep;
    float article_weight;
    int64_t summary_max_len, n_truncated;
    /* span_corruption (task_span.c): a seq2seq task on plain text. Ids below base_vocab are the tokenizer's; the
     * sentinels <extra_id_k> are vocab_size - 1 - k above it. */
    bool span, span_redraw;
    float noise_density, mean_span;
    int64_t base_vocab;
    uint64_t span_seed;
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
/* n texts (classify) as a split of n examples, example i from texts[i]. */
qkv_status qkv__task_encode_texts(task *t, const char *const *texts, size_t n, split *out);
void qkv__task_info(const task *t, qkv_task_info *info);
/* One text as token ids (task_encode.c). words: word or character tokens (one malloc'd block, as qkv_word_split).
 * encode: ids into a malloc'd array (NULL when *n == 0); target: with the seq2seq target side's own vocabulary or
 * BPE when it has one. encode_ids: the (source) tokenizer, no special tokens but WordPiece's [CLS]/[SEP], and the
 * error of a run without a tokenizer. */
qkv_status qkv__task_words(const task *t, const char *text, size_t len, char ***toks, size_t *n);
qkv_status qkv__task_encode(task *t, bool target, const char *text, size_t len, int32_t **ids, size_t *n);
qkv_status qkv__task_encode_ids(task *t, const char *text, size_t len, int32_t **ids, size_t *n);
/* Token shards: the tokenizer the shards were made with, when known (shard_tokenizer.c); the error of a run without
 * one asked to encode text. */
qkv_status qkv__task_shard_tokenizer(task *t, const struct cJSON *cfg, const char *shard, const char *run_dir, bool fresh);
qkv_status qkv__task_no_tokenizer(void);
/* Text of seq2seq target ids (*text malloc'd): <s>, </s> and <pad> skipped; word tokens joined by spaces, BPE
 * bytes concatenated with invalid UTF-8 (a hypothesis may stop mid-character) replaced by U+FFFD. */
qkv_status qkv__task_decode_target(const task *t, const int32_t *ids, size_t n, char **text);
/* A decoded hypothesis made fit for scoring, in place: with a word vocabulary the references are decoded from ids
 * too, so an out-of-vocabulary word is "<unk>" on both sides and would count as a match; the hypothesis's "<unk>"
 * tokens are dropped so that it earns nothing for them (the reference keeps its own, as words the model missed). */
void qkv__task_hyp_for_scoring(const task *t, char *text);
/* Growing and freeing a split (split.c): ids appended to the pool, a new zeroed example (NULL, error set, when out of
 * memory). */
qkv_status qkv__split_append(split *s, const int32_t *ids, int64_t n);
/* Room in the pool for `more` ids past pool_n (it grows by doubling). */
qkv_status qkv__split_reserve(split *s, int64_t more);
example *qkv__split_example(split *s);
void qkv__split_free(split *s);

/* ---- seq2seq evals (eval_bleu.c, eval_tasks.c) ---- */
/* Greedy decodes of examples idx[0..B) of a seq2seq split into hyp[B * cap] (pad after </s>), batched as qkv
 * translate decodes. */
qkv_status qkv__run_decode_greedy(qkv_run *r, const split *s, const int64_t *idx, int64_t B, int64_t cap,
                                  int32_t *hyp);
/* Target text of ids up to </s> (malloc'd; NULL when out of memory): BPE decoded, word tokens joined by spaces. */
char *qkv__run_detokenize(const task *t, const int32_t *ids, int64_t n);
/* eval.tasks: the examples grouped by the first word of their source, each group scored with its metric (bleu,
 * rouge = ROUGE-L F, accuracy = exact match), added to out as "tasks": {name: {metric: value, "examples": n}}. */
qkv_status qkv__run_task_metrics(qkv_run *r, const split *s, const char *spec, int64_t max_examples,
                                 struct cJSON *out);

/* ---- span_corruption (task_span.c) ---- */
/* The documents of a pretraining corpus, one call of fn per document, in order: a plain-text file, one document a
 * line (the lm/ format), or a directory laid out as ../shared/data read through qkv_documents_read_data_dir (the
 * English training splits; each document's sentences joined by spaces). docs_dataset: the same as rows of one
 * field (the tokenizer is built from them). */
typedef qkv_status (*qkv__doc_fn)(const char *text, size_t len, void *user);
qkv_status qkv__docs_each(const char *path, qkv__doc_fn fn, void *user);
qkv_dataset *qkv__docs_dataset(const char *path);
/* Encodes every document, concatenates the ids and cuts them into runs of the raw length whose corrupted input is
 * data.max_len tokens (T5's random_spans_helper); each run becomes one seq2seq example: source = the corrupted
 * input with </s>, target = <s> then sentinels and dropped spans with </s>. Masks are drawn from a generator seeded
 * by the run's seed, so a file always gives the same examples. */
qkv_status qkv__span_load(task *t, const char *path, split *s);
/* The training split's noise for data pass `epoch` (pass 0: the one drawn at load); a no-op unless data.span_redraw. */
qkv_status qkv__span_epoch(const task *t, split *s, uint64_t epoch);
void qkv__span_text_free(struct span_text *x);
/* Target text of ids that may hold sentinels: each shown as <extra_id_k> between the decoded runs around it. */
qkv_status qkv__span_decode(const task *t, const int32_t *ids, size_t n,
                            qkv_status (*decode)(const task *, const int32_t *, size_t, char **), char **text);

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

/* Data-parallel gradient averaging over ranks (grad_sync.c, docs/distributed.md). bucket_bytes 0: one bucket sent
 * after backward. Per step: begin(scale = this rank's share of the global batch's loss weight), set
 * qkv__grad_sync_ready as the context's grad-ready hook for the backward pass, then finish: every parameter's gradient
 * becomes the weighted sum over ranks (the same bits on every rank). */
typedef struct grad_sync grad_sync;
grad_sync *qkv__grad_sync_new(qkv_params *p, size_t bucket_bytes);
/* The bucket size QKV_DIST_BUCKET_MB asks for (MiB, default 4, 0 = one bucket); a bad value is QKV_ERR_INVALID. */
qkv_status qkv__grad_sync_bucket_bytes(size_t *bytes);
void qkv__grad_sync_free(grad_sync *gs);
int qkv__grad_sync_buckets(const grad_sync *gs);
void qkv__grad_sync_begin(grad_sync *gs, float scale);
void qkv__grad_sync_ready(void *user, qkv_tensor *leaf);
qkv_status qkv__grad_sync_finish(grad_sync *gs, qkv_ctx *ctx);

/* Data-parallel start (run_dist.c), collective over all ranks, no-ops in a one-process world: the same binary and
 * config on every rank and the run directory visible to all (rank 0 creates it), else an error on every rank and
 * nothing left in the directory; then rank 0's weights to every rank, and a dropout stream of its own to each. */
qkv_status qkv__run_dist_check(const char *dir, const char *cfg_text);
qkv_status qkv__run_dist_share(qkv_run *r);

/* Optimiser slots (one per trainable parameter, collection order) for ZeRO-1 (zero.c): a remote slot is skipped by
 * qkv_optim_step and holds no state (freed); making it local again allocates zeroed, named state to fill. */
int qkv__optim_slots(const qkv_optim *o);
int qkv__optim_states_per_slot(const qkv_optim *o); /* 0, 1 (SGD with momentum) or 2 */
qkv_tensor *qkv__optim_slot_param(const qkv_optim *o, int i);
qkv_tensor *qkv__optim_slot_state(const qkv_optim *o, int i, int which);
qkv_status qkv__optim_slot_set_remote(qkv_optim *o, int i, bool remote);

/* ZeRO-1 (zero.c, docs/distributed.md): optimiser state sharded over ranks by whole parameters. Per step, instead
 * of grad_sync: reduce (each rank gets the summed gradients of the parameters it owns), the gradient checks and
 * clipping over the shards, the owners' optimiser step, gather (every rank gets every updated parameter). Around
 * a checkpoint (rank 0 writes one process's state), collect(true) brings every state to rank 0, collect(false)
 * frees it again. All collective. QKV_DIST_ZERO=1 turns it on. */
typedef struct zero_shard zero_shard;
qkv_status qkv__zero_wanted(bool *on);
zero_shard *qkv__zero_new(qkv_params *p, qkv_optim *o);
void qkv__zero_free(zero_shard *z);
qkv_status qkv__zero_reduce(zero_shard *z, qkv_ctx *ctx, float scale);
/* The global gradient norm and the first parameter (collection order) with a non-finite gradient, or NULL. */
qkv_status qkv__zero_grad_check(zero_shard *z, double *norm, const char **bad);
qkv_status qkv__zero_clip_norm(zero_shard *z, float max_norm);
qkv_status qkv__zero_gather(zero_shard *z);
qkv_status qkv__zero_collect(zero_shard *z, bool collect);

/* Multi-task text-to-text runs (multitask.c, data.tasks). */
typedef struct multitask {
    int n;                /* tasks; 0: not a multi-task run */
    char **names, **metrics;
    int64_t *counts[3];   /* examples per task of train, dev, test */
    int64_t *starts[3];   /* their offsets in the rewritten split files (n + 1 each) */
    char *paths[3];       /* run_dir/tasks/{train,dev,test}.tsv ("" when no task has that split) */
    double *rates;        /* mixing rates of the training examples */
    int64_t *seen;        /* examples drawn per task so far */
    int64_t *batch;       /* the current batch's example indices */
    bool replayed;
    struct cJSON *cfg;    /* the config as a single seq2seq run over the rewritten files */
} multitask;

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
    qkv_nn_linear qa_head; /* qa: start/end logits over the model's token features */
    qkv_schedule sched;
    qkv_ctx *ctx;
    qkv_train_state state;
    qkv_loop_state loop;
    batch_plan plan;
    uint64_t plan_epoch;
    bool plan_valid;
    uint64_t data_seed;
    multitask mt;
};

/* Multi-task runs (multitask.c). open: the tasks of data.tasks (none: a no-op), their files rewritten into the
 * run directory (write) or the index of a trained run read; r->set.data.train/dev/test then name the rewritten
 * files. task_config: the config the task pipeline reads. check_split: a split loaded from one of the rewritten
 * files gets its task offsets. next_batch: the examples of batch r->state.data_pos by the mixing rates. log: each
 * task's share of the examples seen, as "task_share" in a train record. metrics: per-task scores of a split with task
 * offsets, as "tasks": {name: {metric: value, "examples": n}} (bleu, rougeL, accuracy, or exact_match and f1). */
qkv_status qkv__mt_open(qkv_run *r, bool write);
void qkv__mt_free(multitask *mt);
const struct cJSON *qkv__mt_task_config(const qkv_run *r);
qkv_status qkv__mt_check_split(const qkv_run *r, split *s, const char *path);
qkv_status qkv__mt_next_batch(qkv_run *r, const int64_t **idx, int64_t *count);
qkv_status qkv__mt_log(const qkv_run *r, struct cJSON *rec);
qkv_status qkv__run_task_metrics_mt(qkv_run *r, const split *s, struct cJSON *out);

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
/* One line appended to the run's log.jsonl (src/train/runlog.c). */
qkv_status qkv__run_log_line(const qkv_run *r, const char *line);
/* The "finetune" section (src/train/finetune.c). check: the syntax of freeze and groups (config check). apply: each
 * optimiser parameter's frozen flag, lr scale, weight decay and start step for training step `step` (gradual
 * unfreezing makes it depend on the step), with a "finetune" log record when log; an error when a pattern matches
 * nothing. due: whether gradual unfreezing changes something at `step`. layers: a parameter's layer by the naming
 * rule (0 = embeddings .. *top = head). match: a glob, or a dotted prefix when the pattern has no wildcard. */
/* finetune.init_from on a fresh run's built model (src/train/init_from.c): weights matched by name and shape, an
 * "init_from" record in log.jsonl (loaded, new, unused). */
qkv_status qkv__finetune_init_from(qkv_run *r);
/* A qa split's text side, example by example: built by task_qa.c, freed with its split (split.c). */
struct qa_split {
    char **context;
    char ***answers;
    int *n_answers;
    int64_t **tok_span; /* per example: [n, 2] byte spans in the context; -1, -1 outside the context */
    int32_t (*gold)[2]; /* token positions, -1 when the answer was cut away */
    int64_t n, cap, dropped;
};
/* The qa task (src/train/task_qa.c). load: training drops examples whose answer was cut away (counted by
 * qkv__qa_dropped), evaluation keeps them. head_init: the "qa_outputs" head over the model's features. */
qkv_status qkv__qa_prepare(task *t, const qkv_run_settings *rs, const char *dir, bool fresh);
qkv_status qkv__qa_load(task *t, const char *path, split *s, bool training);
int64_t qkv__qa_dropped(const split *s);
qkv_status qkv__qa_batch_make(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t B,
                              qkv_batch *b, int64_t *tokens);
qkv_status qkv__qa_head_init(qkv_run *r, qkv_rng *rng);
qkv_tensor *qkv__qa_loss(qkv_run *r, const qkv_batch *b);
struct cJSON *qkv__qa_evaluate(qkv_run *r, const split *s, int64_t max_batches);
struct cJSON *qkv__qa_answer(qkv_run *r, const char *context, const char *question);
qkv_status qkv__finetune_check(const qkv_run_settings *c);
qkv_status qkv__finetune_apply(qkv_run *r, long step, bool log);
bool qkv__finetune_due(const qkv_run *r, long step);
long qkv__finetune_layers(const qkv_params *params, const char *name, long *top);
bool qkv__finetune_match(const char *pattern, const char *name);
/* The "embeddings" object's values alone (types, one source of vectors), before anything is built. */
qkv_status qkv__run_pretrained_check(const qkv_run *r);
/* "ckpt-<step>.safetensors" paths in the run dir, by step: the newest step, or -1 when none. */
long qkv__run_newest_checkpoint(const char *dir);

QKV_INTERNAL_END
#endif
