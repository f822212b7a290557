/* Declared sizes of a Hugging Face config against its safetensors headers (hf_check.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hf_check.h"
#include "qkv/fsutil.h"
#include "qkv/safetensors.h"

#define MAX_FILES 256

typedef struct {
    qkv_st_file *f[MAX_FILES];
    int n;
    double bytes; /* of every weights file */
} weights;

static qkv_status open_weights(weights *w, const char *path) {
    struct stat sb;
    size_t n = strlen(path);
    if (n < 5 || strcmp(path + n - 5, ".json")) {
        if (!(w->f[w->n] = qkv_st_open(path))) return qkv_last_status();
        w->n++;
        w->bytes += stat(path, &sb) == 0 ? (double)sb.st_size : 0;
        return QKV_OK;
    }
    size_t len;
    char *text = qkv_fs_read_capped(path, (uint64_t)256 << 20, 0, "safetensors index", &len);
    if (!text) return qkv_last_status();
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), *e;
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    qkv_status st = QKV_OK;
    char seen[MAX_FILES][256];
    int n_seen = 0;
    cJSON_ArrayForEach(e, map) {
        /* The loader reports malformed entries; here only what can be opened counts. */
        if (!cJSON_IsString(e) || !e->valuestring[0] || strchr(e->valuestring, '/') || strlen(e->valuestring) > 255)
            continue;
        bool dup = false;
        for (int i = 0; i < n_seen && !dup; i++) dup = !strcmp(seen[i], e->valuestring);
        if (dup || n_seen == MAX_FILES) continue;
        snprintf(seen[n_seen++], sizeof seen[0], "%s", e->valuestring);
        char file[4096];
        snprintf(file, sizeof file, "%.*s%s", dirlen, path, e->valuestring);
        if (!(w->f[w->n] = qkv_st_open(file))) {
            st = qkv_last_status();
            break;
        }
        w->n++;
        w->bytes += stat(file, &sb) == 0 ? (double)sb.st_size : 0;
    }
    cJSON_Delete(root);
    return st;
}

/* The shape of a tensor under its base name or with the task-model prefix; false if no file has it. */
static bool find(const weights *w, const char *prefix, const char *name, char *key, size_t size, int *ndim,
                 int64_t *shape) {
    for (int pass = 0; pass < 2; pass++) {
        snprintf(key, size, "%s%s", pass ? prefix : "", name);
        const char *dtype;
        for (int i = 0; i < w->n; i++)
            if (qkv_st_find(w->f[i], key) >= 0 && qkv_st_info(w->f[i], key, &dtype, ndim, shape) == QKV_OK)
                return true;
    }
    return false;
}

typedef struct {
    const char *tensor;
    const char *key[2]; /* config.json key of each dimension */
    int64_t size[2];
} declared;

qkv_status qkv__hf_check_declared(const qkv_hf_config *c, const char *config_path, const char *weights_path) {
    weights w = {0};
    qkv_status st = open_weights(&w, weights_path);
    bool gpt2 = c->arch == QKV_HF_GPT2;
    const char *prefix = gpt2 ? "transformer." : c->arch == QKV_HF_ROBERTA ? "roberta." : "bert.";
    const char *H = gpt2 ? "n_embd" : "hidden_size";
    declared bert[] = {
        {"embeddings.word_embeddings.weight", {"vocab_size", H}, {c->vocab_size, c->hidden_size}},
        {"embeddings.position_embeddings.weight", {"max_position_embeddings", H}, {c->max_positions, c->hidden_size}},
        {"embeddings.token_type_embeddings.weight", {"type_vocab_size", H}, {c->type_vocab_size, c->hidden_size}},
        {"encoder.layer.0.intermediate.dense.weight", {"intermediate_size", H}, {c->intermediate_size, c->hidden_size}},
    };
    declared gpt[] = {
        {"wte.weight", {"vocab_size", H}, {c->vocab_size, c->hidden_size}},
        {"wpe.weight", {"n_positions", H}, {c->max_positions, c->hidden_size}},
        {"h.0.mlp.c_fc.weight", {H, "n_inner"}, {c->hidden_size, c->intermediate_size}}, /* Conv1D: [in, out] */
    };
    const declared *d = gpt2 ? gpt : bert;
    int nd = gpt2 ? (int)(sizeof gpt / sizeof *gpt) : (int)(sizeof bert / sizeof *bert);
    for (int i = 0; st == QKV_OK && i < nd; i++) {
        char key[300];
        int ndim;
        int64_t shape[QKV_MAX_DIMS];
        if (!find(&w, prefix, d[i].tensor, key, sizeof key, &ndim, shape) || ndim != 2) continue;
        for (int k = 0; k < 2 && st == QKV_OK; k++)
            if (shape[k] != d[i].size[k])
                st = qkv_error_set(QKV_ERR_FORMAT, "%s: %s is %lld, but the weights' '%s' has shape [%lld, %lld] where "
                                   "the config needs [%lld, %lld]", config_path, d[i].key[k], (long long)d[i].size[k],
                                   key, (long long)shape[0], (long long)shape[1], (long long)d[i].size[0],
                                   (long long)d[i].size[1]);
    }
    /* Tensors the check above did not find: the declared sizes must at least fit in the files (2 bytes a weight,
     * F16, is the smallest dtype read). */
    double h = (double)c->hidden_size, params = (double)c->vocab_size * h + (double)c->max_positions * h +
                                                (double)c->type_vocab_size * h +
                                                (double)c->num_layers * (4 * h * h + 2 * h * (double)c->intermediate_size);
    if (st == QKV_OK && w.n && params * 2 > w.bytes * 1.01 + (1 << 20))
        st = qkv_error_set(QKV_ERR_FORMAT, "%s: its sizes (vocab_size %lld, %s %lld, %lld layers, intermediate %lld, "
                           "%lld positions) need %.3g weights, more than the %.3g bytes of %s hold",
                           config_path, (long long)c->vocab_size, H, (long long)c->hidden_size,
                           (long long)c->num_layers, (long long)c->intermediate_size, (long long)c->max_positions,
                           params, w.bytes, weights_path);
    for (int i = 0; i < w.n; i++) qkv_st_close(w.f[i]);
    return st;
}
