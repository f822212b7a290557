/* Run configs: defaults, strict merging, range checks, --set overrides and dotted-path lookups. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "qkv/config.h"
#include "qkv/fsutil.h"
#include "qkv/optim.h"
#include "qkv/schedule.h"
#include "train_internal.h"


/* One element of data.tasks. */
#define T qkv_task_settings
static const qkv_field TASK_FIELDS[] = {
    QKV_FIELD_STR(T, name, "name", "", 0, "the task's name (required; its metrics are reported under it)"),
    QKV_FIELD_STR(T, prefix, "prefix", "", 0, "text put before every source ('' = the name and ':')"),
    QKV_FIELD_STR(T, train, "train", "", QKV_FIELD_PATH, "training file (required)"),
    QKV_FIELD_STR(T, dev, "dev", "", QKV_FIELD_PATH, "dev file ('' = none)"),
    QKV_FIELD_STR(T, test, "test", "", QKV_FIELD_PATH, "test file ('' = none)"),
    QKV_FIELD_CHOICE(T, format, "format", "tsv", "tsv|label|pair_label|qa",
                     "tsv: source<TAB>target; label: label<TAB>text; pair_label: label<TAB>text1<TAB>text2; qa: SQuAD "
                     "JSONL"),
    QKV_FIELD_STR(T, labels, "labels", "", 0, "label, pair_label: comma-separated words of labels 0, 1, ... ('' = as is)"),
    QKV_FIELD_CHOICE(T, metric, "metric", "auto", "auto|bleu|rouge|accuracy|squad",
                     "per-task metric of qkv eval; auto: tsv bleu, label tasks accuracy, qa squad (EM/F1)"),
};
#undef T

static qkv_status check_task(const void *p) {
    const qkv_task_settings *t = p;
    if (!t->name[0]) return qkv_error_set(QKV_ERR_INVALID, "name: required (the task's name)");
    if (!t->train[0]) return qkv_error_set(QKV_ERR_INVALID, "%s: train: required (the task's training file)", t->name);
    for (const char *c = t->name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'))
            return qkv_error_set(QKV_ERR_INVALID, "name '%s': expected letters, digits, '_' or '-'", t->name);
    return QKV_OK;
}

static const qkv_schema TASK_SCHEMA = QKV_SCHEMA("", qkv_task_settings, TASK_FIELDS, check_task);

/* Everything but "model", declared once: defaults, allowed values and docs. docs/training.md explains each field at
 * more length; keep the two in step. Bounds are inclusive unless flagged open. */
#define NO_MAX 1e15
#define S qkv_run_settings
static const qkv_field FIELDS[] = {
    QKV_FIELD_STR(S, data.train, "data.train", "", QKV_FIELD_PATH, "training file (required)"),
    QKV_FIELD_STR(S, data.dev, "data.dev", "", QKV_FIELD_PATH, "dev file: evals and the best checkpoint ('' = none)"),
    QKV_FIELD_STR(S, data.test, "data.test", "", QKV_FIELD_PATH, "test file, read only by qkv eval --split test"),
    QKV_FIELD_CHOICE(S, data.format, "data.format", "auto", "auto|tsv|text|shard", "file format; auto: by task"),
    QKV_FIELD_CHOICE(S, data.tokenizer, "data.tokenizer", "auto", "auto|word|char|bpe|wordpiece",
                     "auto = word, or char for lm"),
    QKV_FIELD_STR(S, data.vocab_file, "data.vocab_file", "", QKV_FIELD_PATH, "wordpiece vocab.txt or GPT-2 vocab.json"),
    QKV_FIELD_STR(S, data.merges_file, "data.merges_file", "", QKV_FIELD_PATH, "GPT-2 merges.txt (with vocab_file)"),
    QKV_FIELD_BOOL(S, data.lowercase, "data.lowercase", true, "word and wordpiece tokenizers lowercase"),
    QKV_FIELD_BOOL(S, data.strip_punct, "data.strip_punct", true, "word tokenizer drops punctuation"),
    QKV_FIELD_INT(S, data.min_freq, "data.min_freq", 1, 1, NO_MAX, "word/char vocabulary: minimum count"),
    QKV_FIELD_INT(S, data.max_vocab, "data.max_vocab", 0, 0, NO_MAX, "word/char vocabulary size limit (0 = none)"),
    QKV_FIELD_INT(S, data.bpe_vocab_size, "data.bpe_vocab_size", 8000, 257, 1 << 20, "tokens of a trained BPE"),
    QKV_FIELD_INT(S, data.bpe_min_freq, "data.bpe_min_freq", 2, 1, NO_MAX, "a trained BPE merges pairs this frequent"),
    QKV_FIELD_INT(S, data.max_len, "data.max_len", 128, 1, 1 << 20, "classify/seq2seq: longer texts are truncated; summarize: tokens of a whole sequence"),
    QKV_FIELD_INT(S, data.seq_len, "data.seq_len", 64, 1, 1 << 20, "lm: window length"),
    QKV_FIELD_BOOL(S, data.shared_vocab, "data.shared_vocab", false, "seq2seq: one vocabulary for both sides"),
    QKV_FIELD_BOOL(S, data.cls_token, "data.cls_token", false, "classify, word tokenizer: prepend [CLS]"),
    QKV_FIELD_BOOL(S, data.shuffle, "data.shuffle", true, "seeded shuffle each epoch"),
    QKV_FIELD_BOOL(S, data.bucket, "data.bucket", true, "batch examples of alike lengths"),
    QKV_FIELD_CHOICE(S, data.tagset, "data.tagset", "universal", "universal|brown|names",
                     "tagging: column 2, column 3, or the NAME entities derived from column 3 (docs/tagging.md)"),
    QKV_FIELD_CHOICE(S, data.task, "data.task", "auto", "auto|summarize|qa|span_corruption",
                     "auto: the model type's task; summarize: TSV article<TAB>summary for a language model; qa: SQuAD "
                     "JSONL for a model with token features (docs/qa.md); span_corruption: plain text (one document a "
                     "line) corrupted as T5 pretraining for a seq2seq model"),
    QKV_FIELD_NUM(S, data.article_weight, "data.article_weight", 0, 0, 1, 0,
                  "summarize: loss weight of the article's tokens (the summary's are 1)"),
    QKV_FIELD_INT(S, data.summary_max_len, "data.summary_max_len", 48, 1, 1 << 20,
                  "summarize: summary tokens kept; the article gets max_len - this - 3"),
    QKV_FIELD_NUM(S, data.noise_density, "data.noise_density", 0.15, 0, 1, QKV_FIELD_LO_OPEN | QKV_FIELD_HI_OPEN,
                  "span_corruption: fraction of the tokens dropped from the input"),
    QKV_FIELD_NUM(S, data.mean_span, "data.mean_span", 3, 1, 1000, 0, "span_corruption: mean length of a dropped span"),
    QKV_FIELD_BOOL(S, data.span_redraw, "data.span_redraw", true,
                   "span_corruption: draw the training text's noise afresh on every pass over it, as T5 does (the "
                   "first pass is the load-time draw; dev files keep theirs); false: one draw at load"),
    QKV_FIELD_INT(S, data.sentinels, "data.sentinels", 100, 1, 1 << 16,
                  "span_corruption: sentinel ids <extra_id_0..> added at the top of the vocabulary"),
    QKV_FIELD_BOOL(S, data.keep_sentinels, "data.keep_sentinels", false,
                   "seq2seq: also reserve the data.sentinels ids, as span corruption does (a run fine-tuned from a "
                   "span-corruption run: its embedding then has that run's shape)"),
    QKV_FIELD_STR(S, data.tokenizer_from, "data.tokenizer_from", "", QKV_FIELD_PATH,
                  "seq2seq: a run directory whose tokenizer files a new run copies instead of building its own, so "
                  "its ids are that run's (pretrain -> fine-tune with finetune.init_from)"),
    QKV_FIELD_NUM(S, data.heldout, "data.heldout", 0.01, 0, 1, QKV_FIELD_HI_OPEN,
                  "pretrain: fraction of the training documents held out for evals (seeded by seed)"),
    QKV_FIELD_NUM(S, data.mask_prob, "data.mask_prob", 0.15, 0, 1, QKV_FIELD_LO_OPEN | QKV_FIELD_HI_OPEN,
                  "pretrain: share of tokens predicted (80% [MASK], 10% random, 10% kept)"),
    QKV_FIELD_INT(S, data.max_predictions, "data.max_predictions", 20, 1, 1 << 20,
                  "pretrain: at most this many predicted tokens a sequence"),
    QKV_FIELD_NUM(S, data.short_seq_prob, "data.short_seq_prob", 0.1, 0, 1, 0,
                  "pretrain: share of sequences given a random shorter length"),
    QKV_FIELD_BOOL(S, data.nsp, "data.nsp", true,
                   "pretrain: sentence pairs with next-sentence labels (false: one span a sequence, RoBERTa-style)"),
    QKV_FIELD_CHOICE(S, data.masking, "data.masking", "epoch", "epoch|dynamic",
                     "pretrain: masks drawn with each epoch's sequences, or anew each time a sequence is batched"),
    QKV_FIELD_INT(S, data.wordpiece_vocab_size, "data.wordpiece_vocab_size", 16000, 6, 1 << 20,
                  "pretrain: tokens of the WordPiece vocabulary learned from the corpus when data.vocab_file is empty"),
    QKV_FIELD_LIST(S, data.tasks, "data.tasks", &TASK_SCHEMA,
                   "multi-task text-to-text: the tasks, each {name, prefix, train, dev, test, format, labels, metric}; "
                   "data.train/dev/test stay empty (docs/t5.md)"),
    QKV_FIELD_CHOICE(S, data.mixing, "data.mixing", "proportional", "proportional|temperature|equal",
                     "data.tasks: examples-proportional (capped), temperature-scaled, or equal mixing"),
    QKV_FIELD_NUM(S, data.mixing_cap, "data.mixing_cap", 0, 0, NO_MAX, 0,
                  "data.tasks: K, a task counts min(examples, K) (0 = no cap)"),
    QKV_FIELD_NUM(S, data.mixing_temperature, "data.mixing_temperature", 1, 1, NO_MAX, 0,
                  "data.tasks, temperature mixing: rates^(1/T), renormalised"),
    QKV_FIELD_INT(S, train.steps, "train.steps", 1000, 1, NO_MAX, "total optimiser steps"),
    QKV_FIELD_INT(S, train.batch_size, "train.batch_size", 32, 1, 1 << 20, "examples (lm: windows) per step"),
    QKV_FIELD_CHOICE(S, train.optimizer.name, "train.optimizer.name", "adam", "sgd|adam|adamw|adadelta",
                     "optimiser (torch.optim semantics)"),
    QKV_FIELD_NUM(S, train.optimizer.lr, "train.optimizer.lr", 0.001, 0, NO_MAX, QKV_FIELD_LO_OPEN,
                  "base learning rate"),
    QKV_FIELD_NUM(S, train.optimizer.weight_decay, "train.optimizer.weight_decay", 0, 0, NO_MAX, 0,
                  "L2 (AdamW: decoupled)"),
    QKV_FIELD_BOOL(S, train.optimizer.decay_exclude_1d, "train.optimizer.decay_exclude_1d", true,
                   "no weight decay on 1-D tensors"),
    QKV_FIELD_NUM(S, train.optimizer.momentum, "train.optimizer.momentum", 0, 0, 1, 0, "SGD momentum"),
    QKV_FIELD_NUM(S, train.optimizer.dampening, "train.optimizer.dampening", 0, 0, 1, 0, "SGD dampening"),
    QKV_FIELD_BOOL(S, train.optimizer.nesterov, "train.optimizer.nesterov", false,
                   "SGD Nesterov momentum (needs momentum > 0, dampening 0)"),
    QKV_FIELD_NUM(S, train.optimizer.beta1, "train.optimizer.beta1", 0.9, 0, 1, 0, "Adam/AdamW beta1"),
    QKV_FIELD_NUM(S, train.optimizer.beta2, "train.optimizer.beta2", 0.999, 0, 1, 0, "Adam/AdamW beta2"),
    QKV_FIELD_NUM(S, train.optimizer.eps, "train.optimizer.eps", 1e-8, 0, 1, QKV_FIELD_LO_OPEN,
                  "Adam/AdamW/AdaDelta epsilon"),
    QKV_FIELD_NUM(S, train.optimizer.rho, "train.optimizer.rho", 0.9, 0, 1, 0, "AdaDelta rho"),
    QKV_FIELD_STR(S, train.schedule.spec, "train.schedule.spec", "constant", 0,
                  "schedule.h spec, e.g. \"constant * linear_warmup * rsqrt_decay\""),
    QKV_FIELD_INT(S, train.schedule.warmup_steps, "train.schedule.warmup_steps", 0, 0, NO_MAX, "warmup steps"),
    QKV_FIELD_INT(S, train.schedule.total_steps, "train.schedule.total_steps", 0, 0, NO_MAX,
                  "decay horizon (0 = train.steps)"),
    QKV_FIELD_NUM(S, train.schedule.min_ratio, "train.schedule.min_ratio", 0, 0, 1, 0, "floor of decays, times lr"),
    QKV_FIELD_NUM(S, train.schedule.d_model, "train.schedule.d_model", 0, 0, NO_MAX, 0, "rsqrt_decay's model width"),
    QKV_FIELD_NUM(S, train.clip_norm, "train.clip_norm", 0, 0, NO_MAX, 0, "clip gradients to this global norm (0 = off)"),
    QKV_FIELD_NUM(S, train.clip_value, "train.clip_value", 0, 0, NO_MAX, 0, "clip gradients to +-value (0 = off)"),
    QKV_FIELD_CHOICE(S, train.loss_average, "train.loss_average", "tokens", "tokens|examples",
                     "seq2seq: mean over target tokens, or over examples of each example's token mean (short "
                     "targets, e.g. labels beside translations in data.tasks, then weigh as much as long ones)"),
    QKV_FIELD_INT(S, train.log_every, "train.log_every", 10, 1, NO_MAX, "a train log record every N steps"),
    QKV_FIELD_INT(S, train.checkpoint_every, "train.checkpoint_every", 100, 0, NO_MAX,
                  "a checkpoint every N steps (0: at the end)"),
    QKV_FIELD_INT(S, train.keep_checkpoints, "train.keep_checkpoints", 3, 1, 1000, "ckpt-<step> files kept"),
    QKV_FIELD_INT(S, train.max_nan_skips, "train.max_nan_skips", 10, 0, NO_MAX,
                  "non-finite steps in a row before the run fails"),
    QKV_FIELD_NUM(S, train.max_seconds, "train.max_seconds", 0, 0, NO_MAX, 0,
                  "time budget of training proper (0 = none)"),
    QKV_FIELD_INT(S, eval.every, "eval.every", 100, 0, NO_MAX, "an eval on dev every N steps (0: never)"),
    QKV_FIELD_NUM(S, eval.every_seconds, "eval.every_seconds", 0, 0, NO_MAX, 0,
                  "also an eval on dev each time this many seconds of training proper have passed (0: never; "
                  "single-process runs), for learning curves against time"),
    QKV_FIELD_INT(S, eval.batch_size, "eval.batch_size", 64, 1, 1 << 20, "eval batch size"),
    QKV_FIELD_INT(S, eval.max_batches, "eval.max_batches", 0, 0, NO_MAX, "eval batches (0 = the whole split)"),
    QKV_FIELD_CHOICE(S, eval.metric, "eval.metric", "auto",
                     "auto|loss|accuracy|macro_f1|perplexity|bits_per_token|bleu|entity_f1|rougeL|f1|exact_match",
                     "what best.safetensors and early stopping follow"),
    QKV_FIELD_CHOICE(S, eval.mode, "eval.mode", "auto", "auto|min|max", "whether the metric is better low or high"),
    QKV_FIELD_INT(S, eval.patience, "eval.patience", 0, 0, NO_MAX, "stop after N evals without improvement (0: never)"),
    QKV_FIELD_BOOL(S, eval.bleu, "eval.bleu", false, "seq2seq: also report greedy-decode BLEU on dev"),
    QKV_FIELD_INT(S, eval.bleu_max_examples, "eval.bleu_max_examples", 200, 0, NO_MAX,
                  "dev examples decoded for BLEU (0 = all)"),
    QKV_FIELD_BOOL(S, eval.rouge, "eval.rouge", true, "summarize: also report greedy-decode ROUGE"),
    QKV_FIELD_INT(S, eval.rouge_max_examples, "eval.rouge_max_examples", 200, 0, NO_MAX,
                  "examples decoded for ROUGE (0 = all)"),
    QKV_FIELD_INT(S, eval.no_repeat_ngram, "eval.no_repeat_ngram", 0, 0, 1 << 20,
                  "BLEU / ROUGE / eval.tasks decodes: no n-gram of this size twice in an output (0 = off)"),
    QKV_FIELD_NUM(S, eval.repetition_penalty, "eval.repetition_penalty", 1, 0, 100, QKV_FIELD_LO_OPEN,
                  "BLEU / ROUGE / eval.tasks decodes: CTRL repetition penalty (1 = off)"),
    QKV_FIELD_CHOICE(S, eval.repeat_scope, "eval.repeat_scope", "generated", "generated|all",
                     "what the repetition rules look at: the generated tokens, or the prompt too (summarize)"),
    QKV_FIELD_STR(S, eval.tasks, "eval.tasks", "", 0,
                  "seq2seq text-to-text: per-task metrics of greedy decodes, e.g. \"translate=bleu,summarize=rouge,"
                  "sentiment=accuracy\"; an example's task is the first word of its source (the prefix)"),
    QKV_FIELD_STR(S, embeddings.pretrained, "embeddings.pretrained", NULL, QKV_FIELD_NULLABLE | QKV_FIELD_PATH,
                  "word vector file (GloVe or word2vec) for the model's token embeddings"),
    QKV_FIELD_BOOL(S, embeddings.frozen, "embeddings.frozen", false, "the embedding matrices get no gradient"),
    QKV_FIELD_BOOL(S, embeddings.lowercase_fallback, "embeddings.lowercase_fallback", true,
                   "a token missing from the file is looked up lowercased"),
    QKV_FIELD_CHOICE(S, embeddings.format, "embeddings.format", "auto", "auto|text|binary", "vector file format"),
    QKV_FIELD_STR(S, finetune.init_from, "finetune.init_from", "", QKV_FIELD_PATH,
                  "start from this qkv run or Hugging Face directory's weights, matched by name and shape ('' = none)"),
    QKV_FIELD_CHOICE(S, finetune.mode, "finetune.mode", "full", "full|head|adapters",
                     "what trains: everything; the top layer alone (the head); adapters, layer norms and the head"),
    QKV_FIELD_STR(S, finetune.freeze, "finetune.freeze", "", 0,
                  "comma-separated parameter patterns (glob, or a dotted prefix) that never train"),
    QKV_FIELD_INT(S, finetune.unfreeze_every, "finetune.unfreeze_every", 0, 0, NO_MAX,
                  "gradual unfreezing: the head first, one more layer from the top every N steps (0 = off)"),
    QKV_FIELD_NUM(S, finetune.layer_lr_decay, "finetune.layer_lr_decay", 1, 0, 1, QKV_FIELD_LO_OPEN,
                  "discriminative learning rates: a layer k below the top gets lr * decay^k"),
    QKV_FIELD_STR(S, finetune.groups, "finetune.groups", "", 0,
                  "parameter groups 'PATTERN@LO-HI:lr=X,wd=Y,frozen;...' (docs/training.md)"),
    QKV_FIELD_INT(S, seed, "seed", 1, 0, 4294967295.0, "seeds init (seed), dropout (seed + 1) and data order (seed + 2)"),
};
#undef S

/* Rules between fields that single-field checks cannot express. */
static qkv_status check_settings(const void *p) {
    const qkv_run_settings *c = p;
    qkv_schedule s;
    double total = (double)c->train.schedule.total_steps;
    if (total == 0) total = (double)c->train.steps;
    if (qkv_schedule_parse(&s, c->train.schedule.spec, c->train.optimizer.lr, (double)c->train.schedule.warmup_steps,
                           total, c->train.schedule.min_ratio, c->train.schedule.d_model) != QKV_OK)
        return qkv_error_set(QKV_ERR_INVALID, "train.schedule: %s", qkv_last_error());
    if (c->data.tasks && (c->data.train[0] || c->data.dev[0] || c->data.test[0]))
        return qkv_error_set(QKV_ERR_INVALID, "data.train/dev/test: leave them empty when data.tasks lists the tasks "
                                              "(each task names its own files)");
    int n = qkv_config_task_count(c);
    for (int i = 0; i < n; i++) {
        qkv_task_settings a, b;
        qkv_status st = qkv_config_task(c, i, &a);
        for (int k = 0; st == QKV_OK && k < i; k++) {
            st = qkv_config_task(c, k, &b);
            if (st == QKV_OK && !strcmp(a.name, b.name))
                st = qkv_error_set(QKV_ERR_INVALID, "data.tasks[%d].name: '%s' is also task %d's", i, a.name, k);
        }
        if (st) return st;
    }
    return qkv__finetune_check(c);
}

static const qkv_schema SCHEMA = QKV_SCHEMA("", qkv_run_settings, FIELDS, check_settings);

const qkv_schema *qkv_config_schema(void) { return &SCHEMA; }

int qkv_config_task_count(const qkv_run_settings *rs) { return cJSON_GetArraySize(rs->data.tasks); }

qkv_status qkv_config_task(const qkv_run_settings *rs, int i, qkv_task_settings *out) {
    return qkv_schema_list_item(&SCHEMA, qkv_schema_find(&SCHEMA, "data.tasks"), rs->data.tasks, i, out);
}

qkv_status qkv_config_settings(const cJSON *cfg, qkv_run_settings *out) {
    static const char *const skip[] = {"model", NULL};
    return qkv_schema_fill(&SCHEMA, cfg, skip, out);
}

static cJSON *parse_text(const char *name, const char *text, size_t len) {
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!j) {
        int line = 1;
        for (const char *p = text; end && p < end && p < text + len; p++) line += *p == '\n';
        qkv_error_set(QKV_ERR_FORMAT, "%s:%d: invalid JSON", name, line);
        return NULL;
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        qkv_error_set(QKV_ERR_FORMAT, "%s: the config must be a JSON object", name);
        return NULL;
    }
    return j;
}

cJSON *qkv_config_parse(const char *name, const char *text) { return parse_text(name, text, strlen(text)); }

cJSON *qkv_config_read(const char *path) {
    if (qkv_fs_check_not_dir(path, "config file") != QKV_OK) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 14, len = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            char *nb = cap < ((size_t)64 << 20) ? realloc(buf, cap * 2) : NULL;
            if (!nb) free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    bool err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        qkv_error_set(err ? QKV_ERR_IO : QKV_ERR_RANGE, "%s: %s", path, err ? "read error" : "too large for a config");
        return NULL;
    }
    cJSON *j = parse_text(path, buf, len);
    free(buf);
    return j;
}

qkv_status qkv_config_set(cJSON *cfg, const char *assignment) {
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return qkv_error_set(QKV_ERR_INVALID, "--set '%s': expected key.path=value", assignment);
    size_t klen = (size_t)(eq - assignment);
    char *key = strndup(assignment, klen);
    if (!key) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    const char *value = eq + 1;
    cJSON *v = cJSON_Parse(value);
    if (!v) v = cJSON_CreateString(value);
    if (!v) {
        free(key);
        return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    }
    qkv_status st = QKV_OK;
    cJSON *obj = cfg;
    for (char *part = key, *dot; st == QKV_OK; part = dot + 1) {
        dot = strchr(part, '.');
        if (dot) *dot = '\0';
        if (!*part) {
            st = qkv_error_set(QKV_ERR_INVALID, "--set '%s': empty key in the path", assignment);
            break;
        }
        if (!dot) {
            bool put = cJSON_GetObjectItemCaseSensitive(obj, part)
                           ? cJSON_ReplaceItemInObjectCaseSensitive(obj, part, v)
                           : cJSON_AddItemToObject(obj, part, v);
            if (put) v = NULL; /* now owned by cfg */
            else st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            break;
        }
        cJSON *next = cJSON_GetObjectItemCaseSensitive(obj, part);
        if (!next) {
            next = cJSON_AddObjectToObject(obj, part);
            if (!next) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        } else if (!cJSON_IsObject(next)) {
            st = qkv_error_set(QKV_ERR_INVALID, "--set '%s': '%s' is not an object", assignment, part);
        }
        obj = next;
    }
    cJSON_Delete(v);
    free(key);
    return st;
}

cJSON *qkv_config_defaults(const qkv_model_type *type) {
    cJSON *d = cJSON_CreateObject(), *run = qkv_schema_json(&SCHEMA);
    cJSON *model = cJSON_AddObjectToObject(d, "model");
    cJSON *m = type && type->config ? qkv_schema_json(type->config) : cJSON_CreateObject();
    if (!d || !run || !model || !m) {
        cJSON_Delete(d);
        cJSON_Delete(run);
        cJSON_Delete(m);
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    /* "model" first, then the run sections in table order. Every step checked: a failed allocation must not give a
     * config with a section or a default missing. */
    bool ok = true;
    while (ok && run->child) {
        cJSON *item = cJSON_DetachItemViaPointer(run, run->child);
        ok = cJSON_AddItemToObject(d, item->string, item); /* cJSON copies the key before freeing the old one */
        if (!ok) cJSON_Delete(item);
    }
    cJSON_Delete(run);
    if (ok && type) {
        /* "type" first in "model". */
        ok = cJSON_AddStringToObject(model, "type", type->name) != NULL;
        while (ok && m->child) {
            cJSON *item = cJSON_DetachItemViaPointer(m, m->child);
            ok = cJSON_AddItemToObject(model, item->string, item);
            if (!ok) cJSON_Delete(item);
        }
        /* The model type's own data defaults (e.g. a [CLS] token for models that classify from position 0). */
        cJSON *dd = ok && type->data_defaults ? cJSON_Parse(type->data_defaults) : NULL;
        ok = ok && (dd || !type->data_defaults);
        cJSON *data = cJSON_GetObjectItemCaseSensitive(d, "data");
        for (cJSON *it = dd ? dd->child : NULL; ok && it && data; it = it->next) {
            if (!cJSON_GetObjectItemCaseSensitive(data, it->string)) continue;
            cJSON *dup = cJSON_Duplicate(it, true);
            ok = dup && cJSON_ReplaceItemInObjectCaseSensitive(data, it->string, dup);
            if (!ok) cJSON_Delete(dup);
        }
        cJSON_Delete(dd);
    }
    cJSON_Delete(m);
    if (!ok) {
        cJSON_Delete(d);
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return d;
}

static bool same_kind(const cJSON *a, const cJSON *b) {
    return (cJSON_IsBool(a) && cJSON_IsBool(b)) || (cJSON_IsNumber(a) && cJSON_IsNumber(b)) ||
           (cJSON_IsString(a) && cJSON_IsString(b)) || (cJSON_IsArray(a) && cJSON_IsArray(b)) ||
           (cJSON_IsObject(a) && cJSON_IsObject(b)) || (cJSON_IsNull(a) && cJSON_IsNull(b));
}

static void join_path(char *out, size_t size, const char *prefix, const char *key) {
    snprintf(out, size, "%s%s%s", prefix, *prefix ? "." : "", key);
}

/* Overwrites dst's values with src's, recursively. A default of null accepts any value (an optional setting). */
static qkv_status merge(cJSON *dst, const cJSON *src, const char *prefix) {
    for (const cJSON *s = src->child; s; s = s->next) {
        char path[256];
        join_path(path, sizeof path, prefix, s->string);
        cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, s->string);
        if (!d) {
            char known[400] = "";
            for (const cJSON *k = dst->child; k; k = k->next) {
                size_t len = strlen(known);
                if (len > sizeof known - 64) {
                    snprintf(known + len, sizeof known - len, ", ...");
                    break;
                }
                snprintf(known + len, sizeof known - len, "%s%s", len ? ", " : "", k->string);
            }
            return qkv_error_set(QKV_ERR_INVALID, "%s: unknown key (known: %s)", path, known[0] ? known : "none");
        }
        if (cJSON_IsObject(d) && cJSON_IsObject(s)) {
            qkv_status st = merge(d, s, path);
            if (st) return st;
            continue;
        }
        if (!cJSON_IsNull(d) && !same_kind(d, s))
            return qkv_error_set(QKV_ERR_INVALID, "%s: expected %s, got %s", path, qkv__json_kind(d), qkv__json_kind(s));
        cJSON *copy = cJSON_Duplicate(s, true);
        if (!copy) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        cJSON_ReplaceItemViaPointer(dst, d, copy);
    }
    return QKV_OK;
}

/* The model object through its type's schema: fields, then the type's cross-field rules (as create() does). */
static qkv_status check_model(const qkv_model_type *type, const cJSON *model) {
    if (!type->config) return QKV_OK;
    void *opts = calloc(1, type->config->size ? type->config->size : 1);
    if (!opts) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    qkv_status st = qkv_model_config(type->config, model, opts);
    free(opts);
    return st;
}

static qkv_status check_all(const qkv_model_type *type, const cJSON *cfg) {
    qkv_run_settings rs;
    qkv_status st = qkv_config_settings(cfg, &rs);
    if (st == QKV_OK) st = check_model(type, cJSON_GetObjectItemCaseSensitive(cfg, "model"));
    if (st == QKV_OK && !rs.data.train[0] && !rs.data.tasks)
        st = qkv_error_set(QKV_ERR_INVALID, "data.train: required (the training file, or data.tasks)");
    return st;
}

cJSON *qkv_config_resolve(const cJSON *user, const qkv_model_type **type_out) {
    if (!cJSON_IsObject(user)) {
        qkv_error_set(QKV_ERR_INVALID, "config: expected a JSON object");
        return NULL;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(user, "model");
    if (!model) {
        qkv_model_type_find("");
        qkv_error_set(QKV_ERR_INVALID, "model: required (an object with \"type\"; %s)", qkv_last_error());
        return NULL;
    }
    if (!cJSON_IsObject(model)) {
        qkv_error_set(QKV_ERR_INVALID, "model: expected an object, got %s", qkv__json_kind(model));
        return NULL;
    }
    const cJSON *tname = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (!cJSON_IsString(tname)) {
        qkv_model_type_find("");
        qkv_error_set(QKV_ERR_INVALID, "model.type: required, a string (%s)", qkv_last_error());
        return NULL;
    }
    const qkv_model_type *type = qkv_model_type_find(tname->valuestring);
    if (!type) {
        qkv_error_set(QKV_ERR_INVALID, "model.type: %s", qkv_last_error());
        return NULL;
    }
    cJSON *cfg = qkv_config_defaults(type);
    if (!cfg) return NULL;
    qkv_status st = merge(cfg, user, "");
    if (st == QKV_OK) st = check_all(type, cfg);
    if (st != QKV_OK) {
        cJSON_Delete(cfg);
        return NULL;
    }
    if (type_out) *type_out = type;
    return cfg;
}

const cJSON *qkv_config_get(const cJSON *cfg, const char *path) {
    char part[128];
    const cJSON *j = cfg;
    while (j && *path) {
        const char *dot = strchr(path, '.');
        size_t len = dot ? (size_t)(dot - path) : strlen(path);
        if (len >= sizeof part) return NULL;
        memcpy(part, path, len);
        part[len] = '\0';
        j = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, part) : NULL;
        path += len + (dot != NULL);
    }
    return j;
}

double qkv_config_num(const cJSON *cfg, const char *path, double fallback) {
    const cJSON *j = qkv_config_get(cfg, path);
    return cJSON_IsNumber(j) ? j->valuedouble : fallback;
}

int64_t qkv_config_int(const cJSON *cfg, const char *path, int64_t fallback) {
    const cJSON *j = qkv_config_get(cfg, path);
    return cJSON_IsNumber(j) ? (int64_t)j->valuedouble : fallback;
}

bool qkv_config_bool(const cJSON *cfg, const char *path, bool fallback) {
    const cJSON *j = qkv_config_get(cfg, path);
    return cJSON_IsBool(j) ? cJSON_IsTrue(j) : fallback;
}

const char *qkv_config_str(const cJSON *cfg, const char *path, const char *fallback) {
    const cJSON *j = qkv_config_get(cfg, path);
    return cJSON_IsString(j) ? j->valuestring : fallback;
}

char *qkv_config_print(const cJSON *cfg) {
    char *s = cJSON_Print(cfg);
    if (!s) qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    return s;
}
