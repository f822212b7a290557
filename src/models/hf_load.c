/* Loading Hugging Face checkpoints into qkv_hf_model (hf.h): single safetensors files or sharded ones through
 * model.safetensors.index.json, with hub key variants mapped onto the base model's names. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_check.h"
#include "models/hf_internal.h"
#include "qkv/safetensors.h"

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static bool ends_with(const char *s, const char *p) {
    size_t n = strlen(s), k = strlen(p);
    return n >= k && strcmp(s + n - k, p) == 0;
}

/* GPT-2's Conv1D layers store weight [in, out]. */
static bool is_conv1d(const qkv_hf_model *m, const char *name) {
    return m->cfg.arch == QKV_HF_GPT2 &&
           (ends_with(name, ".attn.c_attn.weight") || ends_with(name, ".attn.c_proj.weight") ||
            ends_with(name, ".mlp.c_fc.weight") || ends_with(name, ".mlp.c_proj.weight"));
}

/* The base-model name of a file key into out; false when the key is a known extra the base model ignores. */
static bool canonical_name(const qkv_hf_model *m, const char *key, char *out, size_t size) {
    const char *prefix = m->cfg.arch == QKV_HF_BERT      ? "bert."
                         : m->cfg.arch == QKV_HF_ROBERTA ? "roberta."
                                                         : "transformer.";
    const char *k = starts_with(key, prefix) ? key + strlen(prefix) : key;
    snprintf(out, size, "%s", k);
    size_t n = strlen(out);
    if (ends_with(out, "LayerNorm.gamma")) snprintf(out + n - strlen("gamma"), size - (n - strlen("gamma")), "weight");
    else if (ends_with(out, "LayerNorm.beta")) snprintf(out + n - strlen("beta"), size - (n - strlen("beta")), "bias");
    if (qkv_params_find(m->params, out)) return true; /* e.g. an untied GPT-2 lm_head.weight */
    if (starts_with(k, "cls.") || starts_with(k, "lm_head.")) return false;
    if (!strcmp(out, "embeddings.position_ids")) return false;
    if (m->cfg.arch == QKV_HF_GPT2 && (ends_with(out, ".attn.bias") || ends_with(out, ".attn.masked_bias")))
        return false;
    return true;
}

/* A bounded list of names for an error message: "a, b, c and 12 more". */
typedef struct {
    char text[1024];
    int count;
} name_list;

static void list_add(name_list *l, const char *name) {
    size_t len = strlen(l->text);
    if (l->count < 12 && len + strlen(name) + 8 < sizeof l->text)
        snprintf(l->text + len, sizeof l->text - len, "%s'%s'", l->count ? ", " : "", name);
    l->count++;
}

static const char *list_str(name_list *l) {
    if (l->count > 12) {
        size_t len = strlen(l->text);
        snprintf(l->text + len, sizeof l->text - len, " and %d more", l->count - 12);
    }
    return l->text;
}

typedef struct {
    qkv_hf_model *m;
    bool *loaded; /* per parameter index */
    name_list unknown;
} load_state;

static int param_index(const qkv_params *p, const qkv_tensor *t) {
    for (int i = 0; i < qkv_params_count(p); i++)
        if (qkv_params_at(p, i) == t) return i;
    return -1;
}

static qkv_status load_file(load_state *s, const char *path) {
    qkv_st_file *f = qkv_st_open(path);
    if (!f) return qkv_last_status();
    qkv_status st = QKV_OK;
    for (int i = 0; i < qkv_st_count(f) && !st; i++) {
        const char *key = qkv_st_name(f, i);
        char name[256];
        if (!canonical_name(s->m, key, name, sizeof name)) continue;
        qkv_tensor *p = qkv_params_find(s->m->params, name);
        if (!p) {
            list_add(&s->unknown, key);
            continue;
        }
        int idx = param_index(s->m->params, p);
        if (s->loaded[idx]) {
            st = qkv_error_set(QKV_ERR_FORMAT, "%s: key '%s' gives parameter '%s' a second time", path, key, name);
            break;
        }
        /* The file's shape must be the parameter's, or its transpose for a Conv1D weight. */
        qkv_tensor view = *p;
        view.flags &= ~(uint32_t)QKV_FLAG_OWNS_DATA;
        if (is_conv1d(s->m, name)) {
            view.shape[0] = p->shape[1], view.shape[1] = p->shape[0];
            view.stride[0] = 1, view.stride[1] = p->shape[1];
        }
        int ndim = 0;
        int64_t shape[QKV_MAX_DIMS];
        const char *dtype = NULL;
        if ((st = qkv_st_info(f, key, &dtype, &ndim, shape))) break;
        bool same = ndim == view.ndim;
        for (int d = 0; same && d < ndim; d++) same = shape[d] == view.shape[d];
        if (!same) {
            char got[128] = "[", want[96];
            for (int d = 0; d < ndim; d++) {
                size_t len = strlen(got);
                snprintf(got + len, sizeof got - len, "%s%lld", d ? ", " : "", (long long)shape[d]);
            }
            strncat(got, "]", sizeof got - strlen(got) - 1);
            st = qkv_error_set(QKV_ERR_FORMAT, "%s: '%s' has shape %s but the config (%s, hidden %lld, vocab %lld) "
                               "needs %s%s", path, key, got, qkv_hf_arch_name(s->m->cfg.arch),
                               (long long)s->m->cfg.hidden_size, (long long)s->m->cfg.vocab_size,
                               qkv_shape_str(&view, want, sizeof want),
                               is_conv1d(s->m, name) ? " (Conv1D [in, out])" : "");
            break;
        }
        if (strcmp(dtype, "F32") && strcmp(dtype, "F16") && strcmp(dtype, "BF16")) {
            st = qkv_error_set(QKV_ERR_FORMAT, "%s: '%s' has dtype %s, a weight must be F32, F16 or BF16", path, key,
                               dtype);
            break;
        }
        if ((st = qkv_st_read_into(f, key, &view))) break;
        s->loaded[idx] = true;
    }
    qkv_st_close(f);
    return st;
}

/* The distinct shard files named by an index's weight_map, as paths beside the index. */
static qkv_status index_files(const char *index_path, char ***files, int *n) {
    *files = NULL, *n = 0;
    FILE *fp = fopen(index_path, "rb");
    if (!fp) return qkv_error_set(QKV_ERR_IO, "%s: cannot open", index_path);
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = len >= 0 && len < (256L << 20) ? malloc((size_t)len + 1) : NULL;
    size_t got = buf ? fread(buf, 1, (size_t)len, fp) : 0;
    fclose(fp);
    if (!buf || got != (size_t)len) {
        free(buf);
        return qkv_error_set(QKV_ERR_IO, "%s: cannot read", index_path);
    }
    buf[len] = '\0';
    cJSON *root = cJSON_Parse(buf);
    free(buf);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    qkv_status st = QKV_OK;
    if (!cJSON_IsObject(map) || !cJSON_GetArraySize(map)) {
        st = qkv_error_set(QKV_ERR_FORMAT, "%s: no \"weight_map\" object", index_path);
    } else {
        int cap = cJSON_GetArraySize(map);
        *files = calloc((size_t)cap, sizeof **files);
        const char *slash = strrchr(index_path, '/');
        int dirlen = slash ? (int)(slash - index_path + 1) : 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, map) {
            if (!*files) {
                st = qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", index_path);
                break;
            }
            if (!cJSON_IsString(e) || !e->valuestring[0] || strchr(e->valuestring, '/')) {
                st = qkv_error_set(QKV_ERR_FORMAT, "%s: weight_map[\"%s\"] must be a file name beside the index",
                                   index_path, e->string);
                break;
            }
            char path[4096];
            snprintf(path, sizeof path, "%.*s%s", dirlen, index_path, e->valuestring);
            bool seen = false;
            for (int i = 0; i < *n && !seen; i++) seen = !strcmp((*files)[i], path);
            if (!seen && !((*files)[(*n)++] = strdup(path))) {
                st = qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", index_path);
                break;
            }
        }
    }
    cJSON_Delete(root);
    return st;
}

qkv_status qkv_hf_model_load_weights(qkv_hf_model *m, const char *path) {
    if (!m || !path) return qkv_error_set(QKV_ERR_INVALID, "hf load: model or path is NULL");
    int np = qkv_params_count(m->params);
    load_state s = {.m = m, .loaded = calloc((size_t)np, sizeof(bool))};
    if (!s.loaded) return qkv_error_set(QKV_ERR_NOMEM, "hf load: out of memory");
    char **files = NULL;
    int nfiles = 0;
    qkv_status st = QKV_OK;
    if (ends_with(path, ".json")) {
        st = index_files(path, &files, &nfiles);
        for (int i = 0; i < nfiles && !st; i++) st = load_file(&s, files[i]);
    } else {
        st = load_file(&s, path);
    }
    for (int i = 0; i < nfiles; i++) free(files[i]);
    free(files);
    if (!st) {
        /* A checkpoint without any pooler weights (e.g. a masked-LM one) runs without the pooler. */
        bool any_pooler = false;
        for (int i = 0; i < np; i++)
            any_pooler |= s.loaded[i] && starts_with(qkv_params_at(m->params, i)->name, "pooler.");
        if (m->cfg.arch != QKV_HF_GPT2) m->has_pooler = any_pooler;
        name_list missing = {0};
        for (int i = 0; i < np; i++) {
            const char *name = qkv_params_at(m->params, i)->name;
            if (!s.loaded[i] && !(!any_pooler && starts_with(name, "pooler."))) list_add(&missing, name);
        }
        if (s.unknown.count || missing.count) {
            char unk[1200] = "", mis[1200] = "";
            if (s.unknown.count)
                snprintf(unk, sizeof unk, "%d unknown key%s: %s", s.unknown.count, s.unknown.count > 1 ? "s" : "",
                         list_str(&s.unknown));
            if (missing.count)
                snprintf(mis, sizeof mis, "%s%d missing key%s: %s", s.unknown.count ? "; " : "", missing.count,
                         missing.count > 1 ? "s" : "", list_str(&missing));
            st = qkv_error_set(QKV_ERR_FORMAT, "%s: does not match a %s base model: %s%s", path,
                               qkv_hf_arch_name(m->cfg.arch), unk, mis);
        }
    }
    free(s.loaded);
    return st;
}

qkv_hf_model *qkv_hf_load(const char *dir) {
    if (!dir) {
        qkv_error_set(QKV_ERR_INVALID, "hf load: directory is NULL");
        return NULL;
    }
    char path[4096];
    qkv_hf_config cfg;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (qkv_hf_config_load(path, &cfg)) return NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        f = fopen(path, "rb");
    }
    if (!f) {
        qkv_error_set(QKV_ERR_IO, "%s: neither model.safetensors nor model.safetensors.index.json found (only "
                      "safetensors checkpoints are read, not pytorch_model.bin)", dir);
        return NULL;
    }
    fclose(f);
    char cfg_path[4096];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    /* The declared sizes against the weights' headers first: a config.json claiming a vocabulary of 1e9 is an
     * error naming the key, not an out-of-memory building the model. */
    if (qkv__hf_check_declared(&cfg, cfg_path, path)) return NULL;
    qkv_hf_model *m = qkv_hf_model_new(&cfg);
    if (!m) return NULL;
    int64_t at = -1;
    const qkv_tensor *bad = NULL;
    if (qkv_hf_model_load_weights(m, path) ||
        ((bad = qkv_params_find_nan(qkv_hf_params(m), &at)) &&
         qkv_error_set(QKV_ERR_FORMAT, "%s: weight '%s' holds NaN (element %lld)", path, bad->name, (long long)at))) {
        qkv_hf_free(m);
        return NULL;
    }
    return m;
}
