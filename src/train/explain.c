/* What a trained run attends to (for the viewer), and its training curves from log.jsonl. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_internal.h"

static char *token_text(const task *t, int32_t id) {
    const char *s = NULL;
    if (t->vocab) s = qkv_vocab_token(t->vocab, id, NULL);
    else if (t->wp) s = qkv_wordpiece_token(t->wp, id);
    else if (t->bpe) s = qkv_bpe_token(t->bpe, id);
    char buf[32];
    if (!s) {
        snprintf(buf, sizeof buf, "#%d", id);
        s = buf;
    }
    return strdup(s);
}

void qkv_run_explanation_free(qkv_run_explanation *e) {
    if (!e) return;
    for (int i = 0; i < e->n_tokens; i++) free(e->tokens ? e->tokens[i] : NULL);
    for (int m = 0; m < e->n_maps; m++) {
        free(e->map_names ? e->map_names[m] : NULL);
        free(e->map_kinds ? e->map_kinds[m] : NULL);
        free(e->weights ? e->weights[m] : NULL);
    }
    free(e->tokens);
    free(e->map_names);
    free(e->map_kinds);
    free(e->weights);
    free(e->label);
    memset(e, 0, sizeof *e);
}

qkv_status qkv_run_explain(qkv_run *r, const char *text, qkv_run_explanation *out) {
    memset(out, 0, sizeof *out);
    out->probability = -1;
    split s = {0};
    qkv_status st = qkv__task_encode_text(&r->task, text, &s);
    if (st) return st;
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    qkv_ctx_reset(r->ctx);
    int64_t idx = 0;
    qkv_batch b;
    qkv_attention_maps maps;
    memset(&maps, 0, sizeof maps);
    qkv_tensor *y = NULL;
    if ((st = qkv__batch_make(r->ctx, &r->task, &s, &idx, 1, &b, NULL)) == QKV_OK) {
        y = r->type->forward(r->ctx, r->model, &b, &maps);
        if (!y) st = qkv_last_status();
    }
    int64_t T = b.ids ? b.ids->shape[1] : 0;
    if (st == QKV_OK) {
        out->n_tokens = (int)T;
        out->tokens = calloc((size_t)(T ? T : 1), sizeof *out->tokens);
        for (int64_t t = 0; out->tokens && t < T; t++) out->tokens[t] = token_text(&r->task, qkv_i32(b.ids)[t]);
        if (r->task.kind == TASK_CLASSIFY) {
            int64_t C = y->shape[y->ndim - 1], best = 0;
            const float *row = qkv_f32(y);
            for (int64_t c = 1; c < C; c++)
                if (row[c] > row[best]) best = c;
            out->label = strdup(best < r->task.n_labels ? r->task.labels[best] : "?");
            out->probability = exp(row[best]);
        }
        out->n_maps = maps.n_layers;
        out->map_names = calloc((size_t)(maps.n_layers ? maps.n_layers : 1), sizeof(char *));
        out->map_kinds = calloc((size_t)(maps.n_layers ? maps.n_layers : 1), sizeof(char *));
        out->weights = calloc((size_t)(maps.n_layers ? maps.n_layers : 1), sizeof(float *));
        for (int m = 0; m < maps.n_layers && out->weights; m++) {
            qkv_tensor *w = maps.weights[m]; /* [1, H, T, T] */
            if (!w || w->ndim != 4 || w->shape[2] != T || w->shape[3] != T) {
                st = qkv_error_set(QKV_ERR_INVALID, "explain: attention map %d has an unexpected shape", m);
                break;
            }
            out->n_heads = (int)w->shape[1];
            size_t n = (size_t)qkv_numel(w);
            qkv_tensor *c = qkv_tensor_clone(w); /* contiguous copy that outlives the context */
            out->weights[m] = c ? malloc(n * sizeof(float)) : NULL;
            if (out->weights[m]) memcpy(out->weights[m], c->data, n * sizeof(float));
            qkv_tensor_free(c);
            char name[32];
            snprintf(name, sizeof name, "layer %d", m + 1);
            out->map_names[m] = strdup(name);
            out->map_kinds[m] = strdup(maps.kind[m] ? maps.kind[m] : "self");
        }
    }
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    qkv__split_free(&s);
    if (st) qkv_run_explanation_free(out);
    return st;
}

void qkv_run_curves_free(qkv_run_curves *c) {
    free(c->train_step);
    free(c->train_loss);
    free(c->dev_step);
    free(c->dev_loss);
    free(c->dev_metric);
    memset(c, 0, sizeof *c);
}

static bool push(double **v, int n, double x) {
    double *p = realloc(*v, sizeof **v * (size_t)(n + 1));
    if (!p) return false;
    p[n] = x;
    *v = p;
    return true;
}

qkv_status qkv_run_read_curves(const char *run_dir, qkv_run_curves *out) {
    memset(out, 0, sizeof *out);
    char path[4096];
    snprintf(path, sizeof path, "%s/log.jsonl", run_dir);
    FILE *f = fopen(path, "r");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot open", path);
    char line[1 << 14];
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        cJSON *rec = cJSON_Parse(line);
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(rec, "kind"));
        const cJSON *step = cJSON_GetObjectItem(rec, "step"), *loss = cJSON_GetObjectItem(rec, "loss");
        if (kind && cJSON_IsNumber(step) && !strcmp(kind, "train") && cJSON_IsNumber(loss)) {
            ok = push(&out->train_step, out->n_train, step->valuedouble) &&
                 push(&out->train_loss, out->n_train, loss->valuedouble);
            out->n_train += ok;
        } else if (kind && cJSON_IsNumber(step) && !strcmp(kind, "eval")) {
            const char *metric = cJSON_GetStringValue(cJSON_GetObjectItem(rec, "metric"));
            const cJSON *mv = metric ? cJSON_GetObjectItem(rec, metric) : NULL;
            if (metric) snprintf(out->metric, sizeof out->metric, "%s", metric);
            ok = push(&out->dev_step, out->n_dev, step->valuedouble) &&
                 push(&out->dev_loss, out->n_dev, cJSON_IsNumber(loss) ? loss->valuedouble : NAN) &&
                 push(&out->dev_metric, out->n_dev, cJSON_IsNumber(mv) ? mv->valuedouble : NAN);
            out->n_dev += ok;
        }
        cJSON_Delete(rec);
    }
    fclose(f);
    if (!ok) {
        qkv_run_curves_free(out);
        return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory reading the log", path);
    }
    return QKV_OK;
}
