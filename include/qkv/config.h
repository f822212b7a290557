/* Run configurations: the JSON file `qkv train` reads.
 *
 *     {"model": {"type": "embmean", ...}, "data": {...}, "train": {...}, "eval": {...}, "seed": 1}
 *
 * Every field has a default (docs/training.md lists them; `qkv config show TYPE` prints them all, `qkv config
 * explain TYPE` documents them). Each section is declared once as a field table (include/qkv/schema.h): the
 * "model" one by the model type (qkv_model_type.config), the rest here (qkv_config_schema). A user config is
 * resolved by merging it over the defaults; resolution is strict and checks every field, the model's included: an unknown key, a value of the wrong JSON type, or a
 * value out of range is an error naming the key path, e.g.
 *     train.optimizer.lr: expected a number > 0, got -1
 *     data.tokenizr: unknown key (known: train, dev, test, format, tokenizer, ...)
 *
 * Ownership: every function returning a cJSON* returns a new tree the caller frees with cJSON_Delete. */
#ifndef QKV_CONFIG_H
#define QKV_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/error.h"
#include "qkv/model.h"
#include "qkv/schema.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/* The run config but "model", typed: what the training engine and the CLI read. Filled from a resolved config by
 * qkv_config_settings; strings point into that tree. docs/training.md explains each field. */
typedef struct qkv_run_settings {
    struct {
        const char *train, *dev, *test, *format, *tokenizer, *vocab_file, *merges_file;
        bool lowercase, strip_punct;
        int64_t min_freq, max_vocab, bpe_vocab_size, bpe_min_freq, max_len, seq_len;
        bool shared_vocab, cls_token, shuffle, bucket;
        const char *tagset; /* tagging: universal | brown | names (docs/tagging.md) */
        /* summarize (src/train/task_summarize.c) */
        const char *task;
        double article_weight;
        int64_t summary_max_len;
        /* span_corruption (src/train/task_span.c) */
        double noise_density, mean_span;
        int64_t sentinels;
        bool span_redraw;           /* span_corruption: fresh noise on the training text every pass (T5) */
        bool keep_sentinels;        /* seq2seq: the sentinel ids too (fine-tuning a span-corruption run) */
        const char *tokenizer_from; /* seq2seq: "" or a run directory whose tokenizer files this run copies */
        /* pretrain (src/train/task_pretrain.c, docs/bert.md) */
        double heldout, mask_prob, short_seq_prob;
        int64_t max_predictions, wordpiece_vocab_size;
        bool nsp;
        const char *masking;
        /* multi-task text-to-text (src/train/multitask.c): the tasks (an array, NULL when none; read each with
         * qkv_config_task) and how their examples are mixed (include/qkv/mixture.h) */
        const struct cJSON *tasks;
        const char *mixing;
        double mixing_cap, mixing_temperature;
    } data;
    struct {
        int64_t steps, batch_size;
        struct {
            const char *name;
            double lr, weight_decay;
            bool decay_exclude_1d;
            double momentum, dampening;
            bool nesterov;
            double beta1, beta2, eps, rho;
        } optimizer;
        struct {
            const char *spec;
            int64_t warmup_steps, total_steps;
            double min_ratio, d_model;
        } schedule;
        double clip_norm, clip_value;
        const char *loss_average; /* "tokens" (every target token weighs alike) or "examples" (seq2seq) */
        int64_t log_every, checkpoint_every, keep_checkpoints, max_nan_skips;
        double max_seconds;
    } train;
    struct {
        int64_t every, batch_size, max_batches;
        double every_seconds; /* also (or instead) an eval each time this much training time has passed; 0 off */
        const char *metric, *mode;
        int64_t patience;
        bool bleu;
        int64_t bleu_max_examples;
        bool rouge;
        int64_t rouge_max_examples;
        /* The decodes of BLEU, ROUGE and eval.tasks: repetition control (include/qkv/repeat.h). */
        int64_t no_repeat_ngram;   /* 0 = off */
        double repetition_penalty; /* 1 = off */
        const char *repeat_scope;  /* "generated" | "all" */
        const char *tasks; /* text-to-text: "prefix=metric,..." scored per task (src/train/eval_tasks.c) */
    } eval;
    struct {
        const char *pretrained; /* NULL: none */
        bool frozen, lowercase_fallback;
        const char *format;
    } embeddings;
    /* Transfer learning (src/train/finetune.c, docs/training.md "Fine-tuning"). */
    struct {
        const char *init_from;  /* "" none: a qkv run directory or a Hugging Face directory */
        const char *mode;       /* full | head | adapters */
        const char *freeze;     /* comma-separated parameter patterns that never train */
        int64_t unfreeze_every; /* gradual unfreezing: one more layer from the top every N steps (0 off) */
        double layer_lr_decay;  /* discriminative rates: lr times decay^(top layer - layer) */
        const char *groups;     /* parameter groups "SELECTOR:SETTINGS;..." */
    } finetune;
    int64_t seed;
} qkv_run_settings;

/* One element of data.tasks: a task of a multi-task text-to-text run. Its examples become "<prefix> <source>" ->
 * "<target>" by format: tsv (source<TAB>target), label (label<TAB>text; the target is the label's word), pair_label
 * (label<TAB>text1<TAB>text2 -> "sentence1: text1 sentence2: text2" and the label's word), qa (SQuAD JSONL ->
 * "question: Q context: C" and the first answer). */
typedef struct qkv_task_settings {
    const char *name, *prefix;  /* prefix "": name followed by ':' */
    const char *train, *dev, *test, *format;
    const char *labels;         /* label, pair_label: the words of labels 0, 1, ... ("negative,positive"); "": as is */
    const char *metric;         /* auto (tsv: bleu, label tasks: accuracy, qa: squad) | bleu | rouge | accuracy | squad */
} qkv_task_settings;

/* The number of tasks in data.tasks, and task i (strings point into the config tree). */
int qkv_config_task_count(const qkv_run_settings *rs);
qkv_status qkv_config_task(const qkv_run_settings *rs, int i, qkv_task_settings *out);

/* The field table of every section but "model" (the top level; keys like "train.optimizer.lr"). */
const qkv_schema *qkv_config_schema(void);

/* The typed settings of a config (resolved, or any object: absent keys take the defaults), checked field by field
 * ("model" is skipped: its type's schema reads it). */
qkv_status qkv_config_settings(const struct cJSON *cfg, qkv_run_settings *out);

/* Parse a JSON file; the top level must be an object. Errors name the file and the line of a syntax error. */
struct cJSON *qkv_config_read(const char *path);
/* Parse JSON text (name is used in messages). */
struct cJSON *qkv_config_parse(const char *name, const char *text);

/* Apply one "key.path=value" override in place (the CLI's --set). The value is read as JSON when it parses as
 * JSON (numbers, true/false, null, "quoted", objects, arrays), otherwise as a plain string. Missing intermediate
 * objects are created; whether the key is valid is decided by qkv_config_resolve. */
qkv_status qkv_config_set(struct cJSON *cfg, const char *assignment);

/* The complete default config for a model type: {"model": {"type": name, <its defaults>}, "data", "train",
 * "eval", "embeddings", "seed"}, from the field tables. type NULL: "model" is {}. */
struct cJSON *qkv_config_defaults(const qkv_model_type *type);
/* Ready-made run configs by name (src/train/presets.c): "bert_small" (BERT pretraining, docs/bert.md). The complete
 * resolved config, or NULL with an error for an unknown name. */
struct cJSON *qkv_config_preset(const char *name);
int qkv_config_preset_count(void);
/* Name (and one-line summary) of preset i, or NULL. */
const char *qkv_config_preset_name(int i, const char **summary);

/* Merge `user` over the defaults of the model type it names (model.type is required) and validate everything,
 * the model's fields and its cross-field rules included (the same checks its create() applies; only those that
 * need the data wait for training). Returns the complete config, or NULL with an error naming the key path.
 * *type (optional) receives the type. */
struct cJSON *qkv_config_resolve(const struct cJSON *user, const qkv_model_type **type);

/* Lookups in a config by dotted path ("train.optimizer.lr"), for tools and tests; the engine reads
 * qkv_run_settings. Missing keys or other types give the fallback; strings are owned by the tree. */
double qkv_config_num(const struct cJSON *cfg, const char *path, double fallback);
int64_t qkv_config_int(const struct cJSON *cfg, const char *path, int64_t fallback);
bool qkv_config_bool(const struct cJSON *cfg, const char *path, bool fallback);
const char *qkv_config_str(const struct cJSON *cfg, const char *path, const char *fallback);
const struct cJSON *qkv_config_get(const struct cJSON *cfg, const char *path);

/* Pretty JSON text of a config (malloc'd, caller frees), keys in the defaults' order. */
char *qkv_config_print(const struct cJSON *cfg);

#ifdef __cplusplus
}
#endif
#endif
