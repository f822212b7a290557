/* Hugging Face config.json for BERT, RoBERTa and GPT-2 (hf.h): the fields qkv needs, validated, errors naming the
 * field. Fields HF always writes are required; the rest take HF's class defaults. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/fsutil.h"
#include "qkv/hf.h"

const char *qkv_hf_arch_name(qkv_hf_arch arch) {
    switch (arch) {
    case QKV_HF_BERT: return "bert";
    case QKV_HF_ROBERTA: return "roberta";
    case QKV_HF_GPT2: return "gpt2";
    }
    return "?";
}

/* An integer field: required (dflt < 0 means required) and at least `lo`. */
static qkv_status get_int(const cJSON *root, const char *what, const char *key, int64_t dflt, int64_t lo,
                          int64_t *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) {
        if (dflt < 0) return qkv_error_set(QKV_ERR_FORMAT, "%s: missing field \"%s\"", what, key);
        *out = dflt;
        return QKV_OK;
    }
    double v = j->valuedouble;
    if (!cJSON_IsNumber(j) || v != floor(v) || v < (double)lo || v > 1e12)
        return qkv_error_set(QKV_ERR_FORMAT, "%s: field \"%s\" must be an integer >= %lld", what, key, (long long)lo);
    *out = (int64_t)v;
    return QKV_OK;
}

static qkv_status get_float(const cJSON *root, const char *what, const char *key, double dflt, float *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) {
        *out = (float)dflt;
        return QKV_OK;
    }
    if (!cJSON_IsNumber(j) || !(j->valuedouble > 0) || !isfinite(j->valuedouble))
        return qkv_error_set(QKV_ERR_FORMAT, "%s: field \"%s\" must be a positive number", what, key);
    *out = (float)j->valuedouble;
    return QKV_OK;
}

static qkv_status get_bool(const cJSON *root, const char *what, const char *key, bool dflt, bool *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) {
        *out = dflt;
        return QKV_OK;
    }
    if (!cJSON_IsBool(j)) return qkv_error_set(QKV_ERR_FORMAT, "%s: field \"%s\" must be true or false", what, key);
    *out = cJSON_IsTrue(j);
    return QKV_OK;
}

static const char *get_str(const cJSON *root, const char *key, const char *dflt) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsString(j) ? j->valuestring : j && !cJSON_IsNull(j) ? NULL : dflt;
}

static qkv_status get_act(const cJSON *root, const char *what, const char *key, const char *dflt,
                          qkv_activation *act) {
    const char *s = get_str(root, key, dflt);
    if (!s) return qkv_error_set(QKV_ERR_FORMAT, "%s: field \"%s\" must be a string", what, key);
    if (!strcmp(s, "gelu")) *act = QKV_ACT_GELU;
    else if (!strcmp(s, "gelu_new") || !strcmp(s, "gelu_pytorch_tanh")) *act = QKV_ACT_GELU_TANH;
    else if (!strcmp(s, "relu")) *act = QKV_ACT_RELU;
    else if (!strcmp(s, "tanh")) *act = QKV_ACT_TANH;
    else
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: %s \"%s\" is not supported (gelu, gelu_new, "
                             "gelu_pytorch_tanh, relu, tanh)", what, key, s);
    return QKV_OK;
}

static qkv_status parse_bert(const cJSON *r, const char *what, qkv_hf_config *c) {
    int64_t pad = 0;
    qkv_status st;
    if ((st = get_int(r, what, "vocab_size", -1, 1, &c->vocab_size)) ||
        (st = get_int(r, what, "hidden_size", -1, 1, &c->hidden_size)) ||
        (st = get_int(r, what, "num_hidden_layers", -1, 1, &c->num_layers)) ||
        (st = get_int(r, what, "num_attention_heads", -1, 1, &c->num_heads)) ||
        (st = get_int(r, what, "intermediate_size", -1, 1, &c->intermediate_size)) ||
        (st = get_int(r, what, "max_position_embeddings", -1, 1, &c->max_positions)) ||
        (st = get_int(r, what, "type_vocab_size", 2, 1, &c->type_vocab_size)) ||
        (st = get_int(r, what, "pad_token_id", c->arch == QKV_HF_ROBERTA ? 1 : 0, 0, &pad)) ||
        (st = get_float(r, what, "layer_norm_eps", 1e-12, &c->layer_norm_eps)) ||
        (st = get_act(r, what, "hidden_act", "gelu", &c->activation)))
        return st;
    c->pad_token_id = (int32_t)pad;
    const char *pe = get_str(r, "position_embedding_type", "absolute");
    if (!pe || strcmp(pe, "absolute"))
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: position_embedding_type \"%s\" is not supported (absolute)",
                             what, pe ? pe : "?");
    if (c->arch == QKV_HF_ROBERTA && c->max_positions < c->pad_token_id + 2)
        return qkv_error_set(QKV_ERR_FORMAT, "%s: max_position_embeddings %lld leaves no position after the "
                             "padding offset %d + 1", what, (long long)c->max_positions, (int)c->pad_token_id);
    c->scale_attn_weights = true;
    c->tie_word_embeddings = true;
    return QKV_OK;
}

static qkv_status parse_gpt2(const cJSON *r, const char *what, qkv_hf_config *c) {
    int64_t pad = 0;
    bool inv_layer = false, upcast = false;
    qkv_status st;
    if ((st = get_int(r, what, "vocab_size", -1, 1, &c->vocab_size)) ||
        (st = get_int(r, what, "n_embd", -1, 1, &c->hidden_size)) ||
        (st = get_int(r, what, "n_layer", -1, 1, &c->num_layers)) ||
        (st = get_int(r, what, "n_head", -1, 1, &c->num_heads)) ||
        (st = get_int(r, what, "n_positions", -1, 1, &c->max_positions)) ||
        (st = get_int(r, what, "n_inner", 0, 1, &c->intermediate_size)) ||
        (st = get_int(r, what, "pad_token_id", 0, 0, &pad)) ||
        (st = get_float(r, what, "layer_norm_epsilon", 1e-5, &c->layer_norm_eps)) ||
        (st = get_act(r, what, "activation_function", "gelu_new", &c->activation)) ||
        (st = get_bool(r, what, "scale_attn_weights", true, &c->scale_attn_weights)) ||
        (st = get_bool(r, what, "tie_word_embeddings", true, &c->tie_word_embeddings)) ||
        (st = get_bool(r, what, "scale_attn_by_inverse_layer_idx", false, &inv_layer)) ||
        (st = get_bool(r, what, "reorder_and_upcast_attn", false, &upcast)))
        return st;
    if (inv_layer || upcast)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: %s is not supported", what,
                             inv_layer ? "scale_attn_by_inverse_layer_idx" : "reorder_and_upcast_attn");
    if (c->intermediate_size == 0) c->intermediate_size = 4 * c->hidden_size;
    c->pad_token_id = cJSON_GetObjectItemCaseSensitive(r, "pad_token_id") ? (int32_t)pad : -1;
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "pad_token_id"))) c->pad_token_id = -1;
    c->type_vocab_size = 0;
    return QKV_OK;
}

qkv_status qkv_hf_config_parse(const char *json, const char *what, qkv_hf_config *cfg) {
    if (!json || !cfg) return qkv_error_set(QKV_ERR_INVALID, "hf config: NULL argument");
    if (!what) what = "config.json";
    cJSON *r = cJSON_Parse(json);
    if (!r || !cJSON_IsObject(r)) {
        cJSON_Delete(r);
        return qkv_error_set(QKV_ERR_FORMAT, "%s: not a JSON object", what);
    }
    qkv_hf_config c = {0};
    qkv_status st = QKV_OK;
    const char *type = get_str(r, "model_type", NULL);
    if (!type) st = qkv_error_set(QKV_ERR_FORMAT, "%s: missing field \"model_type\"", what);
    else if (!strcmp(type, "bert")) c.arch = QKV_HF_BERT;
    else if (!strcmp(type, "roberta")) c.arch = QKV_HF_ROBERTA;
    else if (!strcmp(type, "gpt2")) c.arch = QKV_HF_GPT2;
    else st = qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (bert, roberta, gpt2)",
                            what, type);
    if (!st) st = c.arch == QKV_HF_GPT2 ? parse_gpt2(r, what, &c) : parse_bert(r, what, &c);
    cJSON_Delete(r);
    if (st) return st;
    if (c.hidden_size % c.num_heads)
        return qkv_error_set(QKV_ERR_FORMAT, "%s: hidden size %lld is not divisible by the %lld attention heads",
                             what, (long long)c.hidden_size, (long long)c.num_heads);
    if (c.num_layers > QKV_HF_MAX_LAYERS)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: %lld layers (at most %d)", what, (long long)c.num_layers,
                             QKV_HF_MAX_LAYERS);
    if (c.pad_token_id >= c.vocab_size)
        return qkv_error_set(QKV_ERR_FORMAT, "%s: pad_token_id %d is outside the vocabulary of %lld", what,
                             (int)c.pad_token_id, (long long)c.vocab_size);
    *cfg = c;
    return QKV_OK;
}

qkv_status qkv_hf_config_load(const char *path, qkv_hf_config *cfg) {
    if (!path) return qkv_error_set(QKV_ERR_INVALID, "hf config: path is NULL");
    if (qkv_fs_check_not_dir(path, "config file") != QKV_OK) return qkv_last_status();
    FILE *f = fopen(path, "rb");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot open", path);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > (64u << 20)) {
                free(buf);
                fclose(f);
                return qkv_error_set(QKV_ERR_FORMAT, "%s: too large for a config file", path);
            }
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    buf[n] = '\0';
    qkv_status st = qkv_hf_config_parse(buf, path, cfg);
    free(buf);
    return st;
}
