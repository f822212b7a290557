/* Pretrained word vectors as a run's initial token embeddings: the "embeddings" config object.
 *
 *     "embeddings": {"pretrained": "glove.6B.100d.txt", "frozen": false, "lowercase_fallback": true,
 *                    "format": "auto"}
 *
 * What torchtext's vocab.load_vectors + nn.Embedding.from_pretrained do, for any model type that declares its token
 * embeddings (qkv_model_type_embeddings): after the model has drawn its own initial weights, the row of every token
 * the file has (exactly, else lowercased when lowercase_fallback) is replaced by the file's vector, bit for bit.
 * Tokens the file lacks keep the model's own initialisation, and the padding token's row is never touched (it stays
 * zero in a model with a padding row). frozen: the matrices require no gradient, as from_pretrained(freeze=True). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/config.h"
#include "qkv/glove.h"
#include "train_internal.h"

typedef struct options {
    const char *path; /* NULL: no vector file */
    bool frozen, lowercase;
    qkv_vec_format format;
} options;

/* A field of the run's "model" object, read through its type's schema: false when the type has no such field. */
static bool model_get(const qkv_run *r, const char *key, qkv_field_type type, void *out) {
    const qkv_schema *s = r->type ? r->type->config : NULL;
    void *opts = s ? calloc(1, s->size ? s->size : 1) : NULL;
    bool ok = opts && qkv_model_config(s, cJSON_GetObjectItemCaseSensitive(r->cfg, "model"), opts) == QKV_OK &&
              qkv_schema_get(s, opts, key, type, out);
    free(opts);
    return ok;
}

static qkv_status read_options(const qkv_run *r, options *o) {
    const qkv_run_settings *c = &r->set;
    o->path = c->embeddings.pretrained && c->embeddings.pretrained[0] ? c->embeddings.pretrained : NULL;
    o->frozen = c->embeddings.frozen;
    o->lowercase = c->embeddings.lowercase_fallback;
    const char *f = c->embeddings.format;
    o->format = !strcmp(f, "text") ? QKV_VEC_TEXT : !strcmp(f, "binary") ? QKV_VEC_BINARY : QKV_VEC_AUTO;
    /* Two sources for one matrix would make the result depend on which ran last. */
    const char *old = NULL;
    if (o->path && model_get(r, "embeddings.pretrained", QKV_FIELD_T_STR, &old) && old && *old)
        return qkv_error_set(QKV_ERR_INVALID, "embeddings.pretrained and model.embeddings.pretrained are both set "
                             "('%s' and '%s'): use one", o->path, old);
    return QKV_OK;
}

qkv_status qkv__run_pretrained_check(const qkv_run *r) {
    options o;
    return read_options(r, &o);
}

/* Token string of an id on one side of the task, or NULL when that tokenizer has no strings for it. */
static const char *token_of(const task *t, bool target, int32_t id, size_t *len) {
    const char *s = NULL;
    if (t->tok == TOK_WORD || t->tok == TOK_CHAR) {
        const qkv_vocab *v = target && t->tgt_vocab ? t->tgt_vocab : t->vocab;
        return v ? qkv_vocab_token(v, id, len) : NULL;
    }
    if (t->tok == TOK_BPE) {
        const qkv_bpe *b = target && t->tgt_bpe ? t->tgt_bpe : t->bpe;
        s = b ? qkv_bpe_token(b, id) : NULL;
        /* Byte-level BPE spells a word-initial piece with U+0120 ("Ġthe"): that piece is the word "the". */
        if (s && (unsigned char)s[0] == 0xC4 && (unsigned char)s[1] == 0xA0) s += 2;
    } else if (t->tok == TOK_WORDPIECE) {
        s = t->wp ? qkv_wordpiece_token(t->wp, id) : NULL;
    }
    if (s) *len = strlen(s);
    return s;
}

/* A "pretrained" record in log.jsonl (step 0, before the loop's first record); qkv train shows it. */
static qkv_status log_coverage(const qkv_run *r, const char *param, const char *path, int64_t found, int64_t total) {
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "kind", "pretrained");
    cJSON_AddNumberToObject(rec, "step", 0);
    cJSON_AddStringToObject(rec, "param", param);
    cJSON_AddStringToObject(rec, "file", path);
    cJSON_AddNumberToObject(rec, "found", (double)found);
    cJSON_AddNumberToObject(rec, "tokens", (double)total);
    cJSON_AddNumberToObject(rec, "coverage", total ? (double)found / (double)total : 0.0);
    char *line = rec ? cJSON_PrintUnformatted(rec) : NULL;
    cJSON_Delete(rec);
    if (!line) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    size_t n = strlen(r->dir) + 16;
    char *log = malloc(n);
    FILE *f = NULL;
    if (log) {
        snprintf(log, n, "%s/log.jsonl", r->dir);
        f = fopen(log, "a");
    }
    qkv_status st = QKV_OK;
    if (!log) {
        st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    } else if (!f) {
        st = qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", log, strerror(errno));
    } else {
        bool bad = fprintf(f, "%s\n", line) < 0;
        if (fclose(f) != 0 || bad) st = qkv_error_set(QKV_ERR_IO, "%s: write error", log);
    }
    free(log);
    cJSON_free(line);
    return st;
}

/* Copies the file's vector into the row of every token found; returns the number of rows copied. */
static int64_t copy_rows(const task *t, const qkv_vectors *v, const options *o, bool target, qkv_tensor *w) {
    int64_t rows = w->shape[0], dim = w->shape[1], found = 0;
    int32_t pad = target ? t->tgt_pad : t->pad;
    const float *src = qkv_f32(qkv_vectors_matrix(v));
    float *dst = qkv_f32(w);
    for (int64_t i = 0; i < rows; i++) {
        if (i == pad) continue;
        size_t len = 0;
        const char *tok = token_of(t, target, (int32_t)i, &len);
        int64_t row = tok ? qkv_vectors_lookup(v, tok, len, o->lowercase) : -1;
        if (row < 0) continue;
        memcpy(dst + i * dim, src + row * dim, sizeof(float) * (size_t)dim);
        found++;
    }
    return found;
}

qkv_status qkv__run_pretrained_init(qkv_run *r, bool fresh) {
    options o = {0};
    qkv_status st = read_options(r, &o);
    if (st || (!o.path && !o.frozen)) return st;
    const qkv_model_embedding *list = qkv_model_type_embeddings(r->type);
    if (!list)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "embeddings: model type '%s' declares no token embeddings",
                             r->type->name);
    const task *t = &r->task;
    if (o.path && (t->shard || t->tok == TOK_NONE))
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "embeddings.pretrained: the data has no token strings to look up "
                             "(pre-tokenised shards)");
    qkv_vectors *v = NULL;
    if (o.path && fresh && !(v = qkv_vectors_load(o.path, o.format)))
        return qkv_error_set(qkv_last_status(), "embeddings.pretrained: %s", qkv_last_error());
    int matched = 0;
    for (const qkv_model_embedding *e = list; st == QKV_OK && e->param; e++) {
        qkv_tensor *w = qkv_params_find(r->params, e->param);
        if (!w) continue; /* another layout of the same model type (see qkv_model_embedding) */
        matched++;
        bool target = !strcmp(e->vocab, "target");
        char key[128] = "";
        if (e->tied_key) snprintf(key, sizeof key, "model.%s", e->tied_key);
        bool tied = false;
        if (o.frozen && e->tied_key && model_get(r, e->tied_key, QKV_FIELD_T_BOOL, &tied) && tied) {
            st = qkv_error_set(QKV_ERR_INVALID, "embeddings.frozen: %s is also %s's output projection (%s is true), "
                               "so freezing it would freeze the output layer too; set %s to false to freeze only the "
                               "input embedding", e->param, r->type->name, key, key);
            break;
        }
        if (v) {
            int64_t vocab = target && t->tgt_vocab_size ? t->tgt_vocab_size : t->vocab_size;
            if (w->ndim != 2 || w->dtype != QKV_F32 || w->shape[0] != vocab) {
                st = qkv_error_set(QKV_ERR_INVALID, "embeddings: %s of model type '%s' is not a float32 [%lld, dim] "
                                   "matrix of the %s vocabulary", e->param, r->type->name, (long long)vocab, e->vocab);
                break;
            }
            if (w->shape[1] != qkv_vectors_dim(v)) {
                st = qkv_error_set(QKV_ERR_INVALID, "embeddings.pretrained: %s has %lld-dimensional vectors but the "
                                   "model's %s has dimension %lld (set the model's embedding size to %lld)",
                                   o.path, (long long)qkv_vectors_dim(v), e->param, (long long)w->shape[1],
                                   (long long)qkv_vectors_dim(v));
                break;
            }
            int64_t found = copy_rows(t, v, &o, target, w);
            st = log_coverage(r, e->param, o.path, found, vocab);
        }
        if (st == QKV_OK && o.frozen) qkv_tensor_set_requires_grad(w, false);
    }
    qkv_vectors_free(v);
    if (st == QKV_OK && matched == 0)
        st = qkv_error_set(QKV_ERR_INVALID, "embeddings: model type '%s' created none of its declared token "
                           "embeddings (first: %s)", r->type->name, list->param ? list->param : "none");
    return st;
}
