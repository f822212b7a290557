/* The model types qkv knows, by config name. Add a model: define its qkv_model_type in src/models/<name>.c and
 * list it here. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "qkv/error.h"
#include "qkv/model.h"
#include "qkv/schema.h"

/* Each model's file defines its table; uncomment its two lines when it lands. */
extern const qkv_model_type qkv_model_embmean;
extern const qkv_model_type qkv_model_transformer_classifier;
extern const qkv_model_type qkv_model_gpt;
extern const qkv_model_type qkv_model_rnnlm;
extern const qkv_model_type qkv_model_lstm_seq2seq;
extern const qkv_model_type qkv_model_transformer_seq2seq;
extern const qkv_model_type qkv_model_tagger;
extern const qkv_model_type qkv_model_siamese;
extern const qkv_model_type qkv_model_cnn_classifier;
extern const qkv_model_type qkv_model_rnn_classifier;
extern const qkv_model_type qkv_model_reformer_lm;
extern const qkv_model_type qkv_model_t5;
extern const qkv_model_type qkv_model_bert;
extern const qkv_model_type qkv_model_bert_classifier;
extern const qkv_model_type qkv_model_bert_tagger;

static const qkv_model_type *const types[] = {
    NULL, /* keeps the array non-empty; NULL entries are skipped */
    &qkv_model_embmean,
    &qkv_model_transformer_classifier,
    &qkv_model_gpt,
    &qkv_model_rnnlm,
    &qkv_model_lstm_seq2seq,
    &qkv_model_transformer_seq2seq,
    &qkv_model_tagger,
    &qkv_model_siamese,
    &qkv_model_cnn_classifier,
    &qkv_model_rnn_classifier,
    &qkv_model_reformer_lm,
    &qkv_model_t5,
    &qkv_model_bert,
    &qkv_model_bert_classifier,
    &qkv_model_bert_tagger,
};

/* Each type's default_config text, rendered once from its schema into the buffer its file provides (the member
 * points to a writable char array; the table itself stays const). */
static pthread_once_t rendered = PTHREAD_ONCE_INIT;

static void render_defaults(void) {
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const qkv_model_type *t = types[i];
        if (!t || !t->config || !t->default_config) continue;
        cJSON *j = qkv_schema_json(t->config);
        char *text = j ? cJSON_PrintUnformatted(j) : NULL;
        char *buf = (char *)t->default_config;
        if (text && strlen(text) < QKV_MODEL_DEFAULTS_MAX) memcpy(buf, text, strlen(text) + 1);
        cJSON_free(text);
        cJSON_Delete(j);
    }
}

static void ensure_rendered(void) { pthread_once(&rendered, render_defaults); }

qkv_status qkv_model_config(const qkv_schema *s, const cJSON *cfg, void *out) {
    static const char *const skip[] = {"type", NULL};
    return qkv_schema_fill(s, cfg, skip, out);
}

static int count_types(void) {
    int n = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) n += types[i] != NULL;
    return n;
}

int qkv_model_type_count(void) {
    ensure_rendered();
    return count_types();
}

const qkv_model_type *qkv_model_type_at(int i) {
    ensure_rendered();
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        if (types[k] && i-- == 0) return types[k];
    return NULL;
}

const qkv_model_type *qkv_model_type_find(const char *name) {
    char known[512] = "";
    for (int i = 0; i < qkv_model_type_count(); i++) {
        const qkv_model_type *t = qkv_model_type_at(i);
        if (!strcmp(t->name, name)) return t;
        size_t len = strlen(known);
        snprintf(known + len, sizeof known - len, "%s%s", len ? ", " : "", t->name);
    }
    qkv_error_set(QKV_ERR_INVALID, "unknown model type '%s' (known: %s)", name, known[0] ? known : "none");
    return NULL;
}

const qkv_model_embedding *qkv_model_type_embeddings(const qkv_model_type *t) { return t ? t->embeddings : NULL; }

qkv_model_info qkv_model_type_info(const qkv_model_type *t, const qkv_model *m) {
    qkv_model_info info = {0};
    if (t && m && t->info) t->info(m, &info);
    return info;
}

qkv_status qkv_model_decoder(const qkv_model_type *t, const qkv_model *m, qkv_decoder *out) {
    if (!t || !m || !out) return qkv_error_set(QKV_ERR_INVALID, "decoder: no model");
    memset(out, 0, sizeof *out);
    if (!t->decoder)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "model type '%s' cannot generate text (it has no incremental "
                             "decoder)", t->name);
    out->ops = t->decoder;
    out->model = m;
    t->decoder->info(m, &out->info);
    return QKV_OK;
}
