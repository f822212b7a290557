/* finetune.init_from: a new run's weights from a qkv run directory (its best.safetensors, else its newest
 * checkpoint) or a Hugging Face directory (model.safetensors + config.json), matched by name and shape.
 *
 * A parameter takes the file's tensor of the same name; failing that, the one tensor whose name ends in "." + its
 * name, or the one name that is a dotted suffix of its own (Hugging Face heads save "bert.encoder..." where a bare
 * encoder has "encoder..."). A shape that differs is an error naming both the weights and the config that describes
 * them (a vocabulary of another size is the usual cause); parameters found nowhere keep their fresh init ("new", a
 * head), and file tensors nothing took are "unused" (a pretraining head). All three go to log.jsonl as one
 * "init_from" record, which qkv train prints. Optimiser slots of a qkv checkpoint are not weights and are skipped. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "qkv/safetensors.h"
#include "train_internal.h"

#define LIST_MAX 8 /* names listed per kind in the log record; the counts are complete */

static bool is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool optimiser_slot(const char *name) {
    static const char *const kinds[] = {"sgd.", "adam.", "adamw.", "adadelta."};
    for (int i = 0; i < 4; i++)
        if (!strncmp(name, kinds[i], strlen(kinds[i]))) return true;
    return false;
}

/* b is a (strict) dotted suffix of a: a = "<something>." + b. */
static bool dotted_suffix(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    return la > lb && a[la - lb - 1] == '.' && !strcmp(a + la - lb, b);
}

/* The file's tensor for parameter `name`: exact, else a unique dotted-suffix match either way; -1 none. */
static int match(const qkv_st_file *f, const char *name) {
    int exact = qkv_st_find(f, name);
    if (exact >= 0) return exact;
    int found = -1, n = qkv_st_count(f);
    for (int i = 0; i < n; i++) {
        const char *t = qkv_st_name(f, i);
        if (optimiser_slot(t) || !(dotted_suffix(t, name) || dotted_suffix(name, t))) continue;
        if (found >= 0) return -1; /* ambiguous: leave it new rather than guess */
        found = i;
    }
    return found;
}

/* Weights and config of DIR. */
static qkv_status locate(const char *dir, char *weights, char *config, size_t size) {
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return qkv_error_set(QKV_ERR_IO, "finetune.init_from: %s: no such file or directory", dir);
    if (S_ISREG(sb.st_mode)) {
        snprintf(weights, size, "%s", dir);
        snprintf(config, size, "(no config: a bare weights file)");
        return QKV_OK;
    }
    snprintf(config, size, "%s/config.json", dir);
    snprintf(weights, size, "%s/model.safetensors", dir);
    if (is_file(weights)) return QKV_OK;
    snprintf(weights, size, "%s/best.safetensors", dir);
    if (is_file(weights)) return QKV_OK;
    long newest = qkv__run_newest_checkpoint(dir);
    snprintf(weights, size, "%s/ckpt-%ld.safetensors", dir, newest);
    if (newest >= 0 && is_file(weights)) return QKV_OK;
    return qkv_error_set(QKV_ERR_IO, "finetune.init_from: %s has no model.safetensors (Hugging Face), "
                         "best.safetensors or ckpt-<step>.safetensors (qkv run)", dir);
}

static void add_name(cJSON *list, const char *name) {
    if (cJSON_GetArraySize(list) < LIST_MAX) cJSON_AddItemToArray(list, cJSON_CreateString(name));
}

qkv_status qkv__finetune_init_from(qkv_run *r) {
    const char *dir = r->set.finetune.init_from;
    if (!dir || !*dir) return QKV_OK;
    char weights[4096], config[4096];
    qkv_status st = locate(dir, weights, config, sizeof weights);
    if (st) return st;
    qkv_st_file *f = qkv_st_open(weights);
    if (!f) return qkv_error_set(qkv_last_status(), "finetune.init_from: %s", qkv_last_error());
    int nf = qkv_st_count(f), np = qkv_params_count(r->params), loaded = 0, n_new = 0, n_unused = 0;
    bool *used = calloc((size_t)(nf ? nf : 1), sizeof *used);
    cJSON *rec = cJSON_CreateObject(), *fresh = cJSON_CreateArray(), *unused = cJSON_CreateArray();
    if (!used || !rec || !fresh || !unused) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int i = 0; st == QKV_OK && i < np; i++) {
        qkv_tensor *p = qkv_params_at(r->params, i);
        int k = match(f, p->name);
        if (k < 0) {
            n_new++;
            add_name(fresh, p->name);
            continue;
        }
        const char *tname = qkv_st_name(f, k), *dtype;
        qkv_tensor have = {0};
        st = qkv_st_info(f, tname, &dtype, &have.ndim, have.shape);
        bool same = st == QKV_OK && have.ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = have.shape[d] == p->shape[d];
        if (st == QKV_OK && !same) {
            char a[96], b[96];
            st = qkv_error_set(QKV_ERR_FORMAT, "finetune.init_from: %s: tensor '%s' has shape %s but this run's "
                               "model needs %s for '%s' (the model %s describes differs from this run's config and "
                               "data, e.g. in vocabulary size: use its vocabulary, data.vocab_file)", weights, tname,
                               qkv_shape_str(&have, a, sizeof a), qkv_shape_str(p, b, sizeof b), p->name, config);
            break;
        }
        if (st == QKV_OK) st = qkv_st_read_into(f, tname, p);
        if (st) {
            st = qkv_error_set(qkv_last_status(), "finetune.init_from: %s", qkv_last_error());
            break;
        }
        used[k] = true;
        loaded++;
    }
    for (int k = 0; st == QKV_OK && k < nf; k++) {
        if (used[k] || optimiser_slot(qkv_st_name(f, k))) continue;
        n_unused++;
        add_name(unused, qkv_st_name(f, k));
    }
    if (st == QKV_OK && !loaded)
        st = qkv_error_set(QKV_ERR_INVALID, "finetune.init_from: %s: no tensor matches a parameter of model type '%s' "
                           "by name (first parameter '%s', first tensor '%s')", weights, r->type->name,
                           np ? qkv_params_at(r->params, 0)->name : "none", nf ? qkv_st_name(f, 0) : "none");
    if (st == QKV_OK) {
        cJSON_AddStringToObject(rec, "kind", "init_from");
        cJSON_AddNumberToObject(rec, "step", 0);
        cJSON_AddStringToObject(rec, "file", weights);
        cJSON_AddNumberToObject(rec, "loaded", loaded);
        cJSON_AddNumberToObject(rec, "n_new", n_new);
        cJSON_AddItemToObject(rec, "new", fresh);
        cJSON_AddNumberToObject(rec, "n_unused", n_unused);
        cJSON_AddItemToObject(rec, "unused", unused);
        fresh = unused = NULL;
        char *line = cJSON_PrintUnformatted(rec);
        st = line ? qkv__run_log_line(r, line) : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        cJSON_free(line);
    }
    cJSON_Delete(rec);
    cJSON_Delete(fresh);
    cJSON_Delete(unused);
    free(used);
    qkv_st_close(f);
    return st;
}
