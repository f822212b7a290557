/* Scoring a tagger: masked token accuracy (padding never counts), and for BIO tag sets entity precision, recall and
 * F1 with conlleval's rules (qkv_metric_chunk_f1, sentence ends close entities); tagging free text. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/metrics.h"
#include "qkv/ops.h"
#include "task_tagging.h"

static int argmax(const float *x, int64_t n) {
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = (int)i;
    return best;
}

cJSON *qkv__tagging_evaluate(qkv_run *r, const split *s, int64_t max_batches) {
    const task *t = &r->task;
    int64_t bs = r->set.eval.batch_size, nb = (s->n + bs - 1) / bs;
    if (max_batches > 0 && max_batches < nb) nb = max_batches;
    bool bio = qkv__tagging_is_bio(t);
    /* conlleval's input: gold and predicted tags, "" at each sentence end */
    size_t cap = bio ? (size_t)(s->pool_n + s->n + 1) : 1, at = 0;
    const char **gold = bio ? malloc(sizeof *gold * cap) : NULL, **pred = bio ? malloc(sizeof *pred * cap) : NULL;
    int64_t *idx = malloc(sizeof *idx * (size_t)bs);
    qkv_status st = idx && (!bio || (gold && pred)) ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    double nll = 0;
    int64_t tokens = 0, correct = 0, sentences = 0;
    for (int64_t b = 0; st == QKV_OK && b < nb; b++) {
        int64_t start = b * bs, count = s->n - start < bs ? s->n - start : bs;
        for (int64_t i = 0; i < count; i++) idx[i] = start + i;
        qkv_ctx_reset(r->ctx);
        qkv_batch batch;
        if ((st = qkv__batch_make(r->ctx, t, s, idx, count, &batch, NULL))) break;
        qkv_tensor *lp = r->type->forward(r->ctx, r->model, &batch, NULL);
        if (!lp || !(lp = qkv_contiguous(r->ctx, lp))) {
            st = qkv_last_status();
            break;
        }
        int64_t T = lp->shape[1], C = lp->shape[2];
        for (int64_t i = 0; i < count; i++) {
            const example *e = &s->ex[start + i];
            for (int64_t j = 0; j < e->n; j++) {
                const float *row = qkv_f32(lp) + (i * T + j) * C;
                int32_t y = s->pool[e->toff + j];
                int p = argmax(row, C);
                nll -= row[y];
                correct += p == y;
                if (bio) {
                    gold[at] = t->labels[y];
                    pred[at++] = p < t->n_labels ? t->labels[p] : "O";
                }
            }
            if (bio) gold[at] = pred[at] = "", at++;
            tokens += e->n;
            sentences++;
        }
    }
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    cJSON *out = NULL;
    if (st == QKV_OK && tokens == 0) st = qkv_error_set(QKV_ERR_INVALID, "evaluation: no tokens to score");
    qkv_chunk_result cr = {0};
    if (st == QKV_OK && bio) st = qkv_metric_chunk_f1(gold, pred, at, QKV_TAGS_IOB2, &cr);
    if (st == QKV_OK && (out = cJSON_CreateObject())) {
        cJSON_AddNumberToObject(out, "loss", nll / (double)tokens);
        cJSON_AddNumberToObject(out, "accuracy", (double)correct / (double)tokens);
        if (bio) {
            cJSON_AddNumberToObject(out, "entity_precision", cr.prf.precision);
            cJSON_AddNumberToObject(out, "entity_recall", cr.prf.recall);
            cJSON_AddNumberToObject(out, "entity_f1", cr.prf.f1);
            cJSON_AddNumberToObject(out, "entities", (double)cr.n_gold);
            cJSON_AddNumberToObject(out, "entities_predicted", (double)cr.n_pred);
        }
        cJSON_AddNumberToObject(out, "tokens", (double)tokens);
        cJSON_AddNumberToObject(out, "sentences", (double)sentences);
    } else if (st == QKV_OK) {
        st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    }
    qkv_chunk_free(&cr);
    free(gold);
    free(pred);
    free(idx);
    return out;
}

/* Entities of one tagged sentence as conlleval delimits them: B-X starts one, I-X continues an X (and starts one
 * after O or another type), anything else ends it. */
static void add_entities(cJSON *arr, char *const *toks, const char *const *tags, size_t n) {
    size_t i = 0;
    while (i < n) {
        const char *tg = tags[i];
        if (tg[0] == 'O' || !tg[1]) {
            i++;
            continue;
        }
        const char *type = tg + 2;
        size_t j = i + 1;
        while (j < n && tags[j][0] == 'I' && tags[j][1] == '-' && !strcmp(tags[j] + 2, type)) j++;
        size_t len = 0;
        for (size_t k = i; k < j; k++) len += strlen(toks[k]) + 1;
        char *text = malloc(len + 1);
        if (text) {
            text[0] = '\0';
            for (size_t k = i; k < j; k++) {
                if (k > i) strcat(text, " ");
                strcat(text, toks[k]);
            }
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "text", text);
            cJSON_AddStringToObject(e, "type", type);
            cJSON_AddNumberToObject(e, "start", (double)i);
            cJSON_AddNumberToObject(e, "end", (double)j);
            cJSON_AddItemToArray(arr, e);
            free(text);
        }
        i = j;
    }
}

cJSON *qkv__tagging_tag(qkv_run *r, const char *text) {
    const task *t = &r->task;
    char **toks = NULL;
    size_t n = 0;
    if (qkv__tagging_split(t, text, &toks, &n) != QKV_OK) return NULL;
    if (n == 0) {
        free(toks);
        qkv_error_set(QKV_ERR_INVALID, "the text has no words to tag");
        return NULL;
    }
    if ((int64_t)n > t->max_len) {
        free(toks);
        qkv_error_set(QKV_ERR_INVALID, "the text has %zu tokens, more than data.max_len %lld", n,
                      (long long)t->max_len);
        return NULL;
    }
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    qkv_ctx_reset(r->ctx);
    cJSON *out = NULL;
    qkv_batch b = {0};
    b.ids = qkv_ctx_tensor(r->ctx, QKV_I32, QKV_DIMS(1, (int64_t)n));
    b.mask = b.ids ? qkv_ctx_tensor(r->ctx, QKV_F32, QKV_DIMS(1, (int64_t)n)) : NULL;
    qkv_tensor *lp = NULL;
    if (b.mask && qkv__tagging_encode(t, toks, n, qkv_i32(b.ids)) == QKV_OK) {
        for (size_t i = 0; i < n; i++) qkv_f32(b.mask)[i] = 1.0f;
        b.n_tokens = (int64_t)n;
        lp = r->type->forward(r->ctx, r->model, &b, NULL);
        if (lp) lp = qkv_contiguous(r->ctx, lp);
    }
    const char **tags = lp ? malloc(sizeof *tags * n) : NULL;
    if (lp && !tags) qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (tags && (out = cJSON_CreateObject())) {
        int64_t C = lp->shape[2];
        cJSON *jt = cJSON_AddArrayToObject(out, "tokens"), *jg = cJSON_AddArrayToObject(out, "tags");
        for (size_t i = 0; i < n; i++) {
            int p = argmax(qkv_f32(lp) + (int64_t)i * C, C);
            tags[i] = p < t->n_labels ? t->labels[p] : "?";
            cJSON_AddItemToArray(jt, cJSON_CreateString(toks[i]));
            cJSON_AddItemToArray(jg, cJSON_CreateString(tags[i]));
        }
        if (qkv__tagging_is_bio(t)) add_entities(cJSON_AddArrayToObject(out, "entities"), toks, tags, n);
    }
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    free(tags);
    free(toks);
    return out;
}
