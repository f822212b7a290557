/* How much each input position of a classifier's text reaches its loss: || d loss / d e_t || for the embedding row
 * e_t the model reads at position t (docs/lessons.md, the vanishing gradient).
 *
 * The gradient an embedding matrix receives is summed over every position that holds the same token, so it cannot
 * be read per position. Instead the model is built once more, through its type's create() alone, with a vocabulary
 * of V + T rows: rows 0..V-1 are the trained matrix, row V + t a copy of the row of token t, and the text is fed as
 * ids V, V + 1, ..., V + T - 1. The model computes exactly what it computed before, and row V + t's gradient is
 * position t's. Every other parameter is copied by name. Any classify model type that declares its input embedding
 * (qkv_model_type.embeddings) works, with no code of its own. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_internal.h"

/* The run's input embedding matrix (the type's first declared "input" matrix the model created). */
static const char *input_embedding(const qkv_run *r) {
    const qkv_model_embedding *e = qkv_model_type_embeddings(r->type);
    for (; e && e->param; e++)
        if (!strcmp(e->vocab, "input") && qkv_params_find(r->params, e->param)) return e->param;
    return NULL;
}

/* Every parameter of the wide model from the run's; the embedding's rows extended by the copies. */
static qkv_status copy_params(const qkv_run *r, qkv_params *wide, const char *emb, const int32_t *ids, int64_t T) {
    for (int i = 0; i < qkv_params_count(wide); i++) {
        qkv_tensor *dst = qkv_params_at(wide, i), *src = qkv_params_find(r->params, dst->name);
        if (!src) return qkv_error_set(QKV_ERR_INVALID, "input gradients: the rebuilt model has a parameter '%s' "
                                       "the run lacks", dst->name);
        if (!strcmp(dst->name, emb)) {
            int64_t V = src->shape[0], D = src->shape[1];
            if (dst->ndim != 2 || dst->shape[0] != V + T || dst->shape[1] != D)
                return qkv_error_set(QKV_ERR_INVALID, "input gradients: '%s' did not grow by the text's %lld rows",
                                     emb, (long long)T);
            memcpy(dst->data, src->data, sizeof(float) * (size_t)(V * D));
            for (int64_t t = 0; t < T; t++)
                memcpy(qkv_f32(dst) + (V + t) * D, qkv_f32(src) + (int64_t)ids[t] * D, sizeof(float) * (size_t)D);
            qkv_tensor_set_requires_grad(dst, true);
            continue;
        }
        if (qkv_numel(dst) != qkv_numel(src) || dst->dtype != src->dtype)
            return qkv_error_set(QKV_ERR_INVALID, "input gradients: parameter '%s' changed its size when rebuilt",
                                 dst->name);
        memcpy(dst->data, src->data, qkv_numel(dst) * (dst->dtype == QKV_I32 ? sizeof(int32_t) : sizeof(float)));
    }
    return QKV_OK;
}

qkv_status qkv_run_input_grad_norms(qkv_run *r, const char *text, int64_t max_tokens, double **norms, int64_t *n) {
    *norms = NULL;
    *n = 0;
    if (!r || !text) return qkv_error_set(QKV_ERR_INVALID, "input gradients: no run or no text");
    if (r->task.kind != TASK_CLASSIFY)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "input gradients need a classifier run (this is a '%s' run)",
                             r->type->task);
    const char *emb = input_embedding(r);
    if (!emb)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "input gradients: model type '%s' declares no input embedding",
                             r->type->name);
    qkv_model_info mi = qkv_model_type_info(r->type, r->model);
    int64_t keep = r->task.max_len;
    if (max_tokens > 0) r->task.max_len = max_tokens;
    if (mi.max_positions > 0 && r->task.max_len > mi.max_positions) r->task.max_len = mi.max_positions;
    split s = {0};
    qkv_status st = qkv__task_encode_text(&r->task, text, &s);
    r->task.max_len = keep;
    if (st) return st;
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_params *wide = qkv_params_new();
    qkv_model *m = NULL;
    qkv_batch b = {0};
    int64_t idx = 0, T = 0, V = qkv_params_find(r->params, emb)->shape[0];
    if (!ctx || !wide) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (!st) st = qkv__batch_make(ctx, &r->task, &s, &idx, 1, &b, NULL);
    int32_t *orig = NULL;
    if (!st) {
        T = b.ids->shape[1];
        orig = malloc(sizeof *orig * (size_t)T);
        if (!orig) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        else memcpy(orig, qkv_i32(b.ids), sizeof *orig * (size_t)T);
    }
    if (!st) {
        qkv_task_info info;
        qkv__task_info(&r->task, &info);
        info.vocab_size = V + T;
        if (info.max_len < T) info.max_len = T;
        qkv_rng rng;
        qkv_rng_init(&rng, 0); /* drawn weights are all overwritten */
        m = r->type->create(cJSON_GetObjectItemCaseSensitive(r->cfg, "model"), &info, wide, &rng);
        if (!m) st = qkv_last_status();
    }
    if (!st) st = copy_params(r, wide, emb, orig, T);
    qkv_tensor *loss = NULL;
    if (!st) {
        qkv_ctx_set_training(ctx, false);
        for (int64_t t = 0; t < T; t++) qkv_i32(b.ids)[t] = (int32_t)(V + t);
        /* The loss of the model's own prediction: no label is needed, and it is what the model would learn from. */
        qkv_tensor *lp = r->type->forward(ctx, m, &b, NULL);
        if (!lp) st = qkv_last_status();
        else {
            int64_t C = lp->shape[lp->ndim - 1], best = 0;
            for (int64_t c = 1; c < C; c++)
                if (qkv_f32(lp)[c] > qkv_f32(lp)[best]) best = c;
            qkv_i32(b.labels)[0] = (int32_t)best;
            loss = r->type->loss(ctx, m, &b);
            st = loss ? qkv_backward(ctx, loss) : qkv_last_status();
        }
    }
    qkv_tensor *e = st ? NULL : qkv_params_find(wide, emb);
    if (!st && !e->grad) st = qkv_error_set(QKV_ERR_INVALID, "input gradients: '%s' received no gradient", emb);
    if (!st && !(*norms = malloc(sizeof **norms * (size_t)T))) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (!st) {
        int64_t D = e->shape[1];
        const float *g = qkv_f32(e->grad);
        for (int64_t t = 0; t < T; t++) {
            double ss = 0;
            for (int64_t d = 0; d < D; d++) ss += (double)g[(V + t) * D + d] * g[(V + t) * D + d];
            (*norms)[t] = sqrt(ss);
        }
        *n = T;
    }
    free(orig);
    if (m) r->type->free(m);
    qkv_params_free(wide);
    qkv_ctx_free(ctx);
    qkv__split_free(&s);
    return st;
}
