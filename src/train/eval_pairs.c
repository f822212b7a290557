/* Evaluating a pairs run: cosines of every pair, AUC, the most accurate threshold (chosen on dev and kept in the
 * run directory) and accuracy / precision / recall / F1 of "duplicate" at a threshold; text embeddings for
 * `qkv similar`. A pairs model's forward gives the unit vectors of both texts, [2, B, D] ([1, B, D] for a batch
 * of single texts): the cosine of a pair is their dot product. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pairs.h"
#include "qkv/config.h"
#include "qkv/metrics.h"
#include "qkv/ops.h"

/* Runs the model on examples idx[0..B) and returns its vectors, contiguous [sides, B, D] (NULL, error set). */
static qkv_tensor *vectors_of(qkv_run *r, const split *s, const int64_t *idx, int64_t B) {
    qkv_batch batch;
    if (qkv__pairs_batch_make(r->ctx, &r->task, s, idx, B, &batch, NULL) != QKV_OK) return NULL;
    qkv_tensor *v = qkv_contiguous(r->ctx, r->type->forward(r->ctx, r->model, &batch, NULL));
    if (v && (v->ndim != 3 || v->shape[1] != B || v->shape[0] != (batch.src_ids ? 2 : 1))) {
        qkv_error_set(QKV_ERR_INVALID, "model type '%s': a pairs model's forward must give [2, B, D] vectors",
                      r->type->name);
        return NULL;
    }
    return v;
}

/* The cosine of each of the first n examples into cos[0..n). */
static qkv_status cosines(qkv_run *r, const split *s, int64_t n, float *cos) {
    int64_t bs = r->set.eval.batch_size;
    int64_t *idx = malloc(sizeof *idx * (size_t)bs);
    qkv_status st = idx ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int64_t start = 0; st == QKV_OK && start < n; start += bs) {
        int64_t B = n - start < bs ? n - start : bs;
        for (int64_t i = 0; i < B; i++) idx[i] = start + i;
        qkv_ctx_reset(r->ctx);
        qkv_tensor *v = vectors_of(r, s, idx, B);
        if (!v) {
            st = qkv_last_status();
            break;
        }
        int64_t D = v->shape[2];
        const float *a = qkv_f32(v), *b = a + B * D;
        for (int64_t i = 0; i < B; i++) {
            double dot = 0;
            for (int64_t d = 0; d < D; d++) dot += (double)a[i * D + d] * b[i * D + d];
            cos[start + i] = (float)dot;
        }
    }
    free(idx);
    return st;
}

/* The model's loss over the duplicate pairs among the first n examples, in eval batches of them (a last batch of
 * one pair, which has no negative, is left out); NAN when there is no batch. */
static qkv_status duplicate_loss(qkv_run *r, const split *s, int64_t n, double *out) {
    int64_t bs = r->set.eval.batch_size, k = 0, *dup = malloc(sizeof *dup * (size_t)(n ? n : 1));
    if (!dup) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++)
        if (s->ex[i].label == 1) dup[k++] = i;
    double sum = 0;
    int64_t counted = 0;
    qkv_status st = QKV_OK;
    for (int64_t start = 0; st == QKV_OK && start + 1 < k; start += bs) {
        int64_t B = k - start < bs ? k - start : bs;
        if (B < 2) break;
        qkv_ctx_reset(r->ctx);
        qkv_batch batch;
        st = qkv__pairs_batch_make(r->ctx, &r->task, s, dup + start, B, &batch, NULL);
        qkv_tensor *loss = st == QKV_OK ? r->type->loss(r->ctx, r->model, &batch) : NULL;
        if (!loss) {
            st = qkv_last_status();
            break;
        }
        sum += (double)qkv_f32(loss)[0] * (double)B;
        counted += B;
    }
    free(dup);
    *out = counted ? sum / (double)counted : NAN;
    return st;
}

cJSON *qkv__pairs_evaluate(qkv_run *r, const split *s, int64_t max_batches, double threshold) {
    int64_t bs = r->set.eval.batch_size, n = s->n;
    if (max_batches > 0 && max_batches * bs < n) n = max_batches * bs;
    float *cos = malloc(sizeof *cos * (size_t)(n ? n : 1));
    int32_t *gold = malloc(sizeof *gold * (size_t)(n ? n : 1));
    qkv_status st = cos && gold ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (st == QKV_OK && n == 0) st = qkv_error_set(QKV_ERR_INVALID, "evaluation: no examples to score");
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    double loss = NAN, auc = NAN, acc = 0;
    if (st == QKV_OK) st = cosines(r, s, n, cos);
    if (st == QKV_OK) st = duplicate_loss(r, s, n, &loss);
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    int64_t tp = 0, fp = 0, fn = 0, dups = 0;
    for (int64_t i = 0; st == QKV_OK && i < n; i++) dups += gold[i] = s->ex[i].label;
    if (st == QKV_OK && dups > 0 && dups < n) st = qkv_metric_auc(cos, gold, (size_t)n, &auc);
    if (st == QKV_OK && isnan(threshold)) st = qkv_metric_best_threshold(cos, gold, (size_t)n, &threshold, NULL);
    cJSON *out = NULL;
    if (st == QKV_OK) {
        for (int64_t i = 0; i < n; i++) {
            bool said = cos[i] >= threshold;
            tp += said && gold[i];
            fp += said && !gold[i];
            fn += !said && gold[i];
        }
        acc = (double)(n - fp - fn) / (double)n;
        double p = tp + fp ? (double)tp / (double)(tp + fp) : 0, rc = tp + fn ? (double)tp / (double)(tp + fn) : 0;
        out = cJSON_CreateObject();
        /* JSON has no NaN: a split without two duplicates has no loss, one with a single class no AUC. */
        if (!isnan(loss)) cJSON_AddNumberToObject(out, "loss", loss);
        if (!isnan(auc)) cJSON_AddNumberToObject(out, "auc", auc);
        cJSON_AddNumberToObject(out, "accuracy", acc);
        cJSON_AddNumberToObject(out, "precision", p);
        cJSON_AddNumberToObject(out, "recall", rc);
        cJSON_AddNumberToObject(out, "f1", p + rc > 0 ? 2 * p * rc / (p + rc) : 0);
        cJSON_AddNumberToObject(out, "threshold", threshold);
        cJSON_AddNumberToObject(out, "examples", (double)n);
        cJSON_AddNumberToObject(out, "duplicates", (double)dups);
    }
    free(cos);
    free(gold);
    return out;
}

static char *run_file(const qkv_run *r, const char *name) {
    size_t len = strlen(r->dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", r->dir, name);
    else qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    return p;
}

/* threshold.json of the run when it belongs to the loaded step. */
static bool stored_threshold(const qkv_run *r, const char *path, double *t) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char buf[8192]; /* the record and its dev path */
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    cJSON *j = cJSON_Parse(buf);
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(j, "threshold");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
    bool ok = cJSON_IsNumber(th) && cJSON_IsNumber(step) && (long)step->valuedouble == r->state.step;
    if (ok) *t = th->valuedouble;
    cJSON_Delete(j);
    return ok;
}

qkv_status qkv_run_threshold(qkv_run *r, double *threshold) {
    if (!r || !threshold) return qkv_error_set(QKV_ERR_INVALID, "threshold: no run");
    if (r->task.kind != TASK_PAIRS)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "a duplicate threshold is for pairs runs (model type '%s' has "
                             "task '%s')", r->type->name, r->type->task);
    char *path = run_file(r, "threshold.json");
    if (!path) return qkv_last_status();
    qkv_status st = QKV_OK;
    if (!stored_threshold(r, path, threshold)) {
        const char *dev = r->set.data.dev;
        split s = {0};
        cJSON *m = NULL;
        if (!*dev) st = qkv_error_set(QKV_ERR_INVALID, "data.dev: the run has no dev file to choose the duplicate "
                                      "threshold on");
        if (st == QKV_OK) st = qkv__task_load(&r->task, dev, &s);
        if (st == QKV_OK && !(m = qkv__pairs_evaluate(r, &s, 0, NAN))) st = qkv_last_status();
        qkv__split_free(&s);
        if (st == QKV_OK) {
            *threshold = cJSON_GetNumberValue(cJSON_GetObjectItem(m, "threshold"));
            cJSON *rec = cJSON_CreateObject();
            cJSON_AddNumberToObject(rec, "threshold", *threshold);
            cJSON_AddNumberToObject(rec, "step", (double)r->state.step);
            cJSON_AddStringToObject(rec, "chosen_on", dev);
            cJSON_AddNumberToObject(rec, "dev_accuracy", cJSON_GetNumberValue(cJSON_GetObjectItem(m, "accuracy")));
            char *text = cJSON_PrintUnformatted(rec);
            FILE *f = text ? fopen(path, "w") : NULL;
            /* A run directory that cannot be written to still answers; the threshold is recomputed next time. */
            if (f) {
                fprintf(f, "%s\n", text);
                fclose(f);
            }
            cJSON_free(text);
            cJSON_Delete(rec);
        }
        cJSON_Delete(m);
    }
    free(path);
    return st;
}

cJSON *qkv__pairs_evaluate_at_dev_threshold(qkv_run *r, const split *s) {
    double t = NAN;
    return qkv_run_threshold(r, &t) == QKV_OK ? qkv__pairs_evaluate(r, s, 0, t) : NULL;
}

qkv_status qkv_run_embed(qkv_run *r, const char *const *texts, size_t n, float **vectors, int64_t *dim) {
    if (!r || (!texts && n) || !vectors || !dim) return qkv_error_set(QKV_ERR_INVALID, "embed: bad arguments");
    *vectors = NULL;
    *dim = 0;
    if (r->task.kind != TASK_PAIRS)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "embedding texts is for pairs runs (model type '%s' has task '%s')",
                             r->type->name, r->type->task);
    split s = {0};
    qkv_status st = QKV_OK;
    for (size_t i = 0; st == QKV_OK && i < n; i++) {
        int32_t *ids = NULL;
        size_t len = 0;
        st = qkv__task_encode_ids(&r->task, texts[i], strlen(texts[i]), &ids, &len);
        if (st == QKV_OK && len == 0) st = qkv_error_set(QKV_ERR_INVALID, "text %zu is empty", i + 1);
        int64_t keep = (int64_t)len < r->task.max_len ? (int64_t)len : r->task.max_len, off = s.pool_n;
        if (st == QKV_OK) st = qkv__split_append(&s, ids, keep);
        example *e = st == QKV_OK ? qkv__split_example(&s) : NULL;
        if (st == QKV_OK && !e) st = qkv_last_status();
        if (e) *e = (example){.off = off, .n = keep};
        free(ids);
    }
    int64_t bs = r->set.eval.batch_size, D = 0;
    int64_t *idx = malloc(sizeof *idx * (size_t)bs);
    float *out = NULL;
    if (st == QKV_OK && !idx) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    for (int64_t start = 0; st == QKV_OK && start < (int64_t)n; start += bs) {
        int64_t B = (int64_t)n - start < bs ? (int64_t)n - start : bs;
        for (int64_t i = 0; i < B; i++) idx[i] = start + i;
        qkv_ctx_reset(r->ctx);
        qkv_tensor *v = vectors_of(r, &s, idx, B);
        if (!v) {
            st = qkv_last_status();
            break;
        }
        if (!out) {
            D = v->shape[2];
            if (!(out = malloc(sizeof *out * n * (size_t)D))) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        }
        if (st == QKV_OK) memcpy(out + start * D, qkv_f32(v), sizeof *out * (size_t)(B * D));
    }
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    free(idx);
    qkv__split_free(&s);
    if (st != QKV_OK) {
        free(out);
        return st;
    }
    *vectors = out;
    *dim = D;
    return QKV_OK;
}
