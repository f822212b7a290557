/* The training engine: a run (model + data + optimiser + schedule in a run directory), its training loop, its
 * evaluator and its predictor. Modelled on Trax's TrainTask / EvalTask / Loop; docs/training.md is the guide.
 *
 * A run directory holds:
 *     config.json               the complete resolved config (qkv_config_resolve)
 *     log.jsonl                 one JSON object per log step ("kind":"train"), per eval ("kind":"eval"), per
 *                               skipped non-finite step ("kind":"nonfinite") and per resume ("kind":"resume")
 *     ckpt-<step>.safetensors   the last train.keep_checkpoints checkpoints (weights, optimiser, training state)
 *     best.safetensors          the checkpoint with the best dev metric so far
 *     vocab.txt / labels.txt / vocab.json + merges.txt   tokenizer files, as the task needs (a BPE trained on the
 *                               corpus lands here too; a seq2seq run with separate BPE vocabularies adds
 *                               tgt_vocab.json + tgt_merges.txt for the target side)
 *     plot.svg                  train and dev loss (and the dev metric) against steps, rewritten at each eval
 *
 * Determinism: a run is a pure function of its config (seed included) and the thread count. Resuming from a
 * checkpoint continues bit-identically: the checkpoint holds the weights, the optimiser's moments, the dropout
 * generator, the data position (epoch, batch) and the loop's own state (best metric, patience, running log sums).
 *
 * Ownership: a qkv_run owns everything it creates; qkv_run_free releases it. JSON results are new cJSON trees the
 * caller frees with cJSON_Delete. */
#ifndef QKV_TRAIN_H
#define QKV_TRAIN_H

#include <signal.h>
#include <stdbool.h>

#include "qkv/checkpoint.h"
#include "qkv/model.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

typedef struct qkv_run qkv_run;

/* The loop's state between steps, saved in checkpoints (metadata "qkv.loop") so a resumed run logs and stops
 * exactly as an uninterrupted one would. */
typedef struct qkv_loop_state {
    double best;           /* best dev metric so far (NaN before the first eval) */
    long best_step;        /* step of best (-1 none) */
    long bad_evals;        /* evals since the last improvement (early stopping) */
    double acc_loss;       /* sum of train losses since the last log record */
    long acc_steps;        /* steps in that sum */
    long nonfinite_skips;  /* steps skipped for a non-finite loss or gradient, in a row */
} qkv_loop_state;

/* Prepare a run for training. cfg is a resolved config (qkv_config_resolve; copied). fresh (resume false): run_dir
 * is created if needed and must not hold checkpoints yet; tokenizer files are built from data.train and saved
 * there. resume: the tokenizer files are loaded from run_dir, and the newest ckpt-<step>.safetensors restores the
 * model, optimiser and training state (an error if there is none). Either way config.json is (re)written. */
qkv_run *qkv_run_new(const char *run_dir, const struct cJSON *cfg, bool resume);

/* Open a run for evaluation or prediction: config.json, tokenizer files and a checkpoint (NULL: best.safetensors,
 * else the newest ckpt-<step>.safetensors). Training data is not read. */
qkv_run *qkv_run_open(const char *run_dir, const char *checkpoint);
void qkv_run_free(qkv_run *r);

const qkv_model_type *qkv_run_model_type(const qkv_run *r);
const struct cJSON *qkv_run_config(const qkv_run *r);
long qkv_run_step(const qkv_run *r);

/* What the CLI sees of training. Every callback is optional. */
typedef struct qkv_train_hooks {
    void *user;
    /* After every step: steps done, total steps, that step's loss, learning rate, real tokens in the batch. */
    void (*on_step)(void *user, long step, long total, double loss, double lr, double tokens);
    /* Each record written to log.jsonl (one line of JSON, no newline). */
    void (*on_record)(void *user, const char *json);
    /* Polled after every step: non-zero asks the loop to save a checkpoint and return (SIGINT / SIGTERM). */
    volatile sig_atomic_t *stop;
} qkv_train_hooks;

typedef enum qkv_train_outcome {
    QKV_TRAIN_FINISHED = 0, /* train.steps reached */
    QKV_TRAIN_EARLY_STOP,   /* eval.patience evals without improvement */
    QKV_TRAIN_STOPPED,      /* hooks->stop was set; a checkpoint was saved */
    QKV_TRAIN_TIME_LIMIT,   /* train.max_seconds of training elapsed; dev evaluated and a checkpoint saved */
} qkv_train_outcome;

/* Train until train.steps (counting steps already done when resumed), early stopping or a stop request. Errors
 * (QKV_ERR_NUMERIC after train.max_nan_skips non-finite steps in a row, i/o failures) are returned with a message;
 * a checkpoint is not written for a failed step. */
qkv_status qkv_run_train(qkv_run *r, const qkv_train_hooks *hooks, qkv_train_outcome *outcome);

/* Metrics on "dev" / "test" (the config's data paths) or on any file in the task's format (file non-NULL).
 * classify: loss, accuracy, macro_f1, confusion ([gold][pred]), labels, examples; lm: loss, perplexity,
 * bits_per_token (and bits_per_char), tokens; seq2seq: loss, perplexity, tokens; pairs: at the run's duplicate
 * threshold (qkv_run_threshold) accuracy, precision, recall, f1, and auc, loss, threshold, examples, duplicates. */
struct cJSON *qkv_run_eval(qkv_run *r, const char *split, const char *file);

/* Pairs runs (task "pairs", e.g. the siamese model type): unit vectors of n texts (non-empty after tokenising)
 * into *vectors, [n, *dim] row-major, malloc'd (caller frees); the cosine of two texts is their dot product. */
qkv_status qkv_run_embed(qkv_run *r, const char *const *texts, size_t n, float **vectors, int64_t *dim);
/* The cosine at or above which a pair is a duplicate: the most accurate cut on the run's dev file for the loaded
 * checkpoint, computed once and kept in the run directory (threshold.json, with the step it belongs to). */
qkv_status qkv_run_threshold(qkv_run *r, double *threshold);

/* One input text. classify: {"label", "prob", "probs": {label: p}}; lm: {"loss", "perplexity", "tokens"}.
 * seq2seq: QKV_ERR_UNSUPPORTED (use a decoder, e.g. qkv translate). */
struct cJSON *qkv_run_predict(qkv_run *r, const char *text);
/* n texts at once: a JSON array of what qkv_run_predict gives for each, in order. A classifier scores them in one
 * padded batch (one forward: the server's dynamic batching), equal to one text at a time within float rounding;
 * other tasks go one text at a time. An error names the first text that fails ("<input>:N", N from 1). */
struct cJSON *qkv_run_predict_batch(qkv_run *r, const char *const *texts, size_t n);

/* A qa run (data.task "qa"): the answer span of question in context, {"answer", "score", "context_tokens"}
 * (answer "" when no span qualifies; the context is cut to data.max_len tokens with the question). */
struct cJSON *qkv_run_answer(qkv_run *r, const char *context, const char *question);

/* What a trained model attends to for one input, for the viewer (`qkv viz`, `qkv demo`). Everything is heap memory
 * owned by the struct: free with qkv_run_explanation_free. Classifiers fill label/probability; every model with
 * attention fills maps (per layer: [heads, tokens, tokens] row-major); models without attention leave n_maps 0. */
typedef struct qkv_run_explanation {
    int n_tokens;
    char **tokens;         /* the input as the model saw it (e.g. "[CLS]", "the", "food", ...) */
    char *label;           /* predicted label (classify), or NULL */
    double probability;    /* of the label, or -1 */
    int n_maps, n_heads;
    char **map_names;      /* "layer 1", ... */
    char **map_kinds;      /* "self", "causal", "cross" */
    float **weights;       /* n_maps arrays of n_heads * n_tokens * n_tokens */
} qkv_run_explanation;
qkv_status qkv_run_explain(qkv_run *r, const char *text, qkv_run_explanation *out);
void qkv_run_explanation_free(qkv_run_explanation *e);

/* Classifier runs: how much each position of a text reaches the loss (the vanishing-gradient lesson, docs/lessons.md).
 * The text is encoded as the run encodes it, cut to max_tokens tokens (0: the run's data.max_len; never more than
 * the model's positions); (*norms)[t] = || d loss / d e_t ||_2 for t < *n, e_t the embedding row the model reads at
 * position t and the loss the cross-entropy of the model's own prediction, in eval mode (no dropout). Works for every
 * classify model type that declares its input embedding; *norms is malloc'd (caller frees). */
qkv_status qkv_run_input_grad_norms(qkv_run *r, const char *text, int64_t max_tokens, double **norms, int64_t *n);
/* The run's parameters (borrowed, valid until qkv_run_free), by name with qkv_params_find. */
qkv_params *qkv_run_params(qkv_run *r);

/* The run's training log (log.jsonl) as curves for the viewer: train loss, dev loss and the dev metric against
 * steps. Arrays are heap memory owned by the struct. */
typedef struct qkv_run_curves {
    int n_train, n_dev;
    double *train_step, *train_loss, *dev_step, *dev_loss, *dev_metric;
    char metric[32]; /* name of dev_metric ("accuracy", "perplexity", ...), "" if none */
} qkv_run_curves;
qkv_status qkv_run_read_curves(const char *run_dir, qkv_run_curves *out);
void qkv_run_curves_free(qkv_run_curves *c);

/* For decoding with a trained run (`qkv generate`): its model (borrowed, valid until qkv_run_free), and its
 * tokenizer. Encoding adds no special tokens (WordPiece aside); *ids / *text are malloc'd, the caller frees them.
 * Decoding joins word tokens with spaces, character and byte-level tokens with nothing. */
qkv_model *qkv_run_model(qkv_run *r);
/* The run's model as a Hugging Face directory: the type's save_pretrained files plus the run's vocab.txt (its
 * WordPiece vocabulary) when it has one. dir is created. A type without save_pretrained: an error naming it. */
qkv_status qkv_run_export_hf(qkv_run *r, const char *dir);
qkv_status qkv_run_encode(qkv_run *r, const char *text, int32_t **ids, size_t *n);
qkv_status qkv_run_decode(qkv_run *r, const int32_t *ids, size_t n, char **text);
/* The vocabulary entry of one id as written in the run's vocabulary (WordPiece "[CLS]", "##ing"; a word), malloc'd,
 * or NULL when the run's tokenizer has no such list (characters, bytes) or the id is outside it. Decoding drops
 * special tokens; a viewer that labels every position needs them. */
char *qkv_run_token(qkv_run *r, int32_t id);
/* Seq2seq runs: the target side's decoding (its own vocabulary when separate; BPE targets skip <s> </s> <pad> and
 * show invalid UTF-8 as U+FFFD), its <s> / </s> / <pad> ids, and the longest source the data pipeline produces
 * (sources are cut to it, as in training). */
qkv_status qkv_run_decode_target(qkv_run *r, const int32_t *ids, size_t n, char **text);
void qkv_run_target_ids(const qkv_run *r, int32_t *bos, int32_t *eos, int32_t *pad, int64_t *max_len);

#ifdef __cplusplus
}
#endif
#endif
