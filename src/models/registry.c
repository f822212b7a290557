/* The model types qkv knows, by config name. Add a model: define its qkv_model_type in src/models/<name>.c and
 * list it here. */
#include <stdio.h>
#include <string.h>

#include "qkv/error.h"
#include "qkv/model.h"

/* Each model's file defines its table; uncomment its two lines when it lands. */
extern const qkv_model_type qkv_model_embmean;
extern const qkv_model_type qkv_model_transformer_classifier;
extern const qkv_model_type qkv_model_gpt;
extern const qkv_model_type qkv_model_rnnlm;
extern const qkv_model_type qkv_model_lstm_seq2seq;
extern const qkv_model_type qkv_model_transformer_seq2seq;

static const qkv_model_type *const types[] = {
    NULL, /* keeps the array non-empty; NULL entries are skipped */
    &qkv_model_embmean,
    &qkv_model_transformer_classifier,
    &qkv_model_gpt,
    &qkv_model_rnnlm,
    &qkv_model_lstm_seq2seq,
    &qkv_model_transformer_seq2seq,
};

int qkv_model_type_count(void) {
    int n = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) n += types[i] != NULL;
    return n;
}

const qkv_model_type *qkv_model_type_at(int i) {
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
