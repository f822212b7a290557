/* Run configs: defaults, strict merging, range checks, --set overrides and dotted-path lookups. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/config.h"
#include "qkv/fsutil.h"
#include "qkv/optim.h"
#include "qkv/schedule.h"
#include "train_internal.h"


/* Everything but "model". docs/training.md explains each field; keep the two in step. */
static const char *const DEFAULTS =
    "{"
    "\"model\": {},"
    "\"data\": {"
    "  \"train\": \"\", \"dev\": \"\", \"test\": \"\","
    "  \"format\": \"auto\", \"tokenizer\": \"auto\", \"vocab_file\": \"\", \"merges_file\": \"\","
    "  \"lowercase\": true, \"strip_punct\": true, \"min_freq\": 1, \"max_vocab\": 0, \"bpe_vocab_size\": 8000,"
    "  \"bpe_min_freq\": 2,"
    "  \"max_len\": 128, \"seq_len\": 64, \"shared_vocab\": false, \"cls_token\": false,"
    "  \"shuffle\": true, \"bucket\": true"
    "},"
    "\"train\": {"
    "  \"steps\": 1000, \"batch_size\": 32,"
    "  \"optimizer\": {\"name\": \"adam\", \"lr\": 0.001, \"weight_decay\": 0, \"decay_exclude_1d\": true,"
    "                \"momentum\": 0, \"dampening\": 0, \"nesterov\": false, \"beta1\": 0.9, \"beta2\": 0.999,"
    "                \"eps\": 1e-8, \"rho\": 0.9},"
    "  \"schedule\": {\"spec\": \"constant\", \"warmup_steps\": 0, \"total_steps\": 0, \"min_ratio\": 0,"
    "               \"d_model\": 0},"
    "  \"clip_norm\": 0, \"clip_value\": 0,"
    "  \"log_every\": 10, \"checkpoint_every\": 100, \"keep_checkpoints\": 3, \"max_nan_skips\": 10, \"max_seconds\": 0"
    "},"
    "\"eval\": {"
    "  \"every\": 100, \"batch_size\": 64, \"max_batches\": 0, \"metric\": \"auto\", \"mode\": \"auto\","
    "  \"patience\": 0, \"bleu\": false, \"bleu_max_examples\": 200"
    "},"
    "\"embeddings\": {\"pretrained\": null, \"frozen\": false, \"lowercase_fallback\": true, \"format\": \"auto\"},"
    "\"seed\": 1"
    "}";

/* Range rules for the fields above. Integers must be integral; lo/hi bounds are inclusive unless open. */
typedef enum { R_INT, R_NUM, R_ENUM } rule_kind;
typedef struct {
    const char *path;
    rule_kind kind;
    double lo, hi;
    bool lo_open;
    const char *choices; /* R_ENUM: '|'-separated */
} rule;

#define BIG 1e15
static const rule RULES[] = {
    {"data.format", R_ENUM, 0, 0, false, "auto|tsv|text|shard"},
    {"data.tokenizer", R_ENUM, 0, 0, false, "auto|word|char|bpe|wordpiece"},
    {"data.min_freq", R_INT, 1, BIG, false, NULL},
    {"data.max_vocab", R_INT, 0, BIG, false, NULL},
    {"data.bpe_vocab_size", R_INT, 257, 1 << 20, false, NULL},
    {"data.bpe_min_freq", R_INT, 1, BIG, false, NULL},
    {"data.max_len", R_INT, 1, 1 << 20, false, NULL},
    {"data.seq_len", R_INT, 1, 1 << 20, false, NULL},
    {"train.steps", R_INT, 1, BIG, false, NULL},
    {"train.batch_size", R_INT, 1, 1 << 20, false, NULL},
    {"train.optimizer.name", R_ENUM, 0, 0, false, "sgd|adam|adamw|adadelta"},
    {"train.optimizer.lr", R_NUM, 0, BIG, true, NULL},
    {"train.optimizer.weight_decay", R_NUM, 0, BIG, false, NULL},
    {"train.optimizer.momentum", R_NUM, 0, 1, false, NULL},
    {"train.optimizer.dampening", R_NUM, 0, 1, false, NULL},
    {"train.optimizer.beta1", R_NUM, 0, 1, false, NULL},
    {"train.optimizer.beta2", R_NUM, 0, 1, false, NULL},
    {"train.optimizer.eps", R_NUM, 0, 1, true, NULL},
    {"train.optimizer.rho", R_NUM, 0, 1, false, NULL},
    {"train.schedule.warmup_steps", R_INT, 0, BIG, false, NULL},
    {"train.schedule.total_steps", R_INT, 0, BIG, false, NULL},
    {"train.schedule.min_ratio", R_NUM, 0, 1, false, NULL},
    {"train.schedule.d_model", R_NUM, 0, BIG, false, NULL},
    {"train.clip_norm", R_NUM, 0, BIG, false, NULL},
    {"train.clip_value", R_NUM, 0, BIG, false, NULL},
    {"train.log_every", R_INT, 1, BIG, false, NULL},
    {"train.checkpoint_every", R_INT, 0, BIG, false, NULL},
    {"train.keep_checkpoints", R_INT, 1, 1000, false, NULL},
    {"train.max_nan_skips", R_INT, 0, BIG, false, NULL},
    {"train.max_seconds", R_NUM, 0, BIG, false, NULL},
    {"eval.every", R_INT, 0, BIG, false, NULL},
    {"eval.batch_size", R_INT, 1, 1 << 20, false, NULL},
    {"eval.max_batches", R_INT, 0, BIG, false, NULL},
    {"eval.metric", R_ENUM, 0, 0, false, "auto|loss|accuracy|macro_f1|perplexity|bits_per_token|bleu"},
    {"eval.mode", R_ENUM, 0, 0, false, "auto|min|max"},
    {"eval.patience", R_INT, 0, BIG, false, NULL},
    {"eval.bleu_max_examples", R_INT, 0, BIG, false, NULL},
    {"embeddings.format", R_ENUM, 0, 0, false, "auto|text|binary"},
    {"seed", R_INT, 0, 4294967295.0, false, NULL},
};

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
            if (cJSON_GetObjectItemCaseSensitive(obj, part))
                cJSON_ReplaceItemInObjectCaseSensitive(obj, part, v);
            else
                cJSON_AddItemToObject(obj, part, v);
            v = NULL;
            break;
        }
        cJSON *next = cJSON_GetObjectItemCaseSensitive(obj, part);
        if (!next) {
            next = cJSON_AddObjectToObject(obj, part);
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
    cJSON *d = cJSON_Parse(DEFAULTS);
    if (!d) {
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (!type) return d;
    cJSON *m = type->default_config ? cJSON_Parse(type->default_config) : cJSON_CreateObject();
    if (!m || !cJSON_IsObject(m)) {
        cJSON_Delete(m);
        cJSON_Delete(d);
        qkv_error_set(QKV_ERR_FORMAT, "model type '%s': its default_config is not a JSON object", type->name);
        return NULL;
    }
    /* "type" first, whatever the model's own defaults say. */
    cJSON_DeleteItemFromObjectCaseSensitive(m, "type");
    cJSON *model = cJSON_CreateObject();
    cJSON_AddStringToObject(model, "type", type->name);
    while (m->child) {
        cJSON *item = cJSON_DetachItemViaPointer(m, m->child);
        cJSON_AddItemToObject(model, item->string, item); /* cJSON copies the key before freeing the old one */
    }
    cJSON_Delete(m);
    cJSON_ReplaceItemInObjectCaseSensitive(d, "model", model);
    /* The model type's own data defaults (e.g. a [CLS] token for models that classify from position 0). */
    cJSON *dd = type->data_defaults ? cJSON_Parse(type->data_defaults) : NULL;
    cJSON *data = cJSON_GetObjectItemCaseSensitive(d, "data");
    for (cJSON *it = dd ? dd->child : NULL; it && data; it = it->next)
        if (cJSON_GetObjectItemCaseSensitive(data, it->string))
            cJSON_ReplaceItemInObjectCaseSensitive(data, it->string, cJSON_Duplicate(it, true));
    cJSON_Delete(dd);
    return d;
}

static const char *type_name(const cJSON *j) {
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "null";
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
            return qkv_error_set(QKV_ERR_INVALID, "%s: expected %s, got %s", path, type_name(d), type_name(s));
        cJSON *copy = cJSON_Duplicate(s, true);
        if (!copy) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        cJSON_ReplaceItemViaPointer(dst, d, copy);
    }
    return QKV_OK;
}

static qkv_status check_rule(const cJSON *cfg, const rule *r) {
    const cJSON *v = qkv_config_get(cfg, r->path);
    if (!v) return QKV_OK;
    if (r->kind == R_ENUM) {
        const char *s = cJSON_GetStringValue(v);
        size_t n = s ? strlen(s) : 0;
        for (const char *c = r->choices; s && *c;) {
            const char *bar = strchr(c, '|');
            size_t len = bar ? (size_t)(bar - c) : strlen(c);
            if (len == n && !strncmp(c, s, n)) return QKV_OK;
            c += len + (bar != NULL);
        }
        return qkv_error_set(QKV_ERR_INVALID, "%s: expected one of %s, got '%s'", r->path, r->choices, s ? s : "");
    }
    double x = v->valuedouble;
    bool integral = r->kind == R_INT;
    bool ok = isfinite(x) && (r->lo_open ? x > r->lo : x >= r->lo) && x <= r->hi && (!integral || x == floor(x));
    if (ok) return QKV_OK;
    char range[96];
    if (r->hi >= BIG)
        snprintf(range, sizeof range, "%s %s %g", integral ? "an integer" : "a number", r->lo_open ? ">" : ">=", r->lo);
    else
        snprintf(range, sizeof range, "%s in %s%g, %g]", integral ? "an integer" : "a number", r->lo_open ? "(" : "[",
                 r->lo, r->hi);
    return qkv_error_set(QKV_ERR_RANGE, "%s: expected %s, got %.17g", r->path, range, x);
}

/* Cross-field checks that single-field rules cannot express. */
static qkv_status check_combined(const cJSON *cfg) {
    qkv_schedule s;
    double total = qkv_config_num(cfg, "train.schedule.total_steps", 0);
    if (total == 0) total = qkv_config_num(cfg, "train.steps", 1);
    if (qkv_schedule_parse(&s, qkv_config_str(cfg, "train.schedule.spec", ""),
                           qkv_config_num(cfg, "train.optimizer.lr", 1e-3),
                           qkv_config_num(cfg, "train.schedule.warmup_steps", 0), total,
                           qkv_config_num(cfg, "train.schedule.min_ratio", 0),
                           qkv_config_num(cfg, "train.schedule.d_model", 0)) != QKV_OK)
        return qkv_error_set(QKV_ERR_INVALID, "train.schedule: %s", train_last_error());
    if (!*qkv_config_str(cfg, "data.train", ""))
        return qkv_error_set(QKV_ERR_INVALID, "data.train: required (the training file)");
    return QKV_OK;
}

cJSON *qkv_config_resolve(const cJSON *user, const qkv_model_type **type_out) {
    if (!cJSON_IsObject(user)) {
        qkv_error_set(QKV_ERR_INVALID, "config: expected a JSON object");
        return NULL;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(user, "model");
    if (!model) {
        qkv_model_type_find("");
        qkv_error_set(QKV_ERR_INVALID, "model: required (an object with \"type\"; %s)", train_last_error());
        return NULL;
    }
    if (!cJSON_IsObject(model)) {
        qkv_error_set(QKV_ERR_INVALID, "model: expected an object, got %s", type_name(model));
        return NULL;
    }
    const cJSON *tname = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (!cJSON_IsString(tname)) {
        qkv_model_type_find("");
        qkv_error_set(QKV_ERR_INVALID, "model.type: required, a string (%s)", train_last_error());
        return NULL;
    }
    const qkv_model_type *type = qkv_model_type_find(tname->valuestring);
    if (!type) {
        qkv_error_set(QKV_ERR_INVALID, "model.type: %s", train_last_error());
        return NULL;
    }
    cJSON *cfg = qkv_config_defaults(type);
    if (!cfg) return NULL;
    qkv_status st = merge(cfg, user, "");
    for (size_t i = 0; st == QKV_OK && i < sizeof RULES / sizeof RULES[0]; i++) st = check_rule(cfg, &RULES[i]);
    if (st == QKV_OK) st = check_combined(cfg);
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
