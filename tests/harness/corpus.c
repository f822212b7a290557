#include "corpus.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* Up to max bytes of a shared file; NULL when absent. */
static unsigned char *read_slice(const char *rel, int64_t max, int64_t *n) {
    const char *path = test_shared_path(rel);
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return NULL;
    unsigned char *buf = malloc((size_t)max);
    *n = buf ? (int64_t)fread(buf, 1, (size_t)max, f) : 0;
    fclose(f);
    return buf;
}

bool test_char_corpus_load(test_char_corpus *c, int64_t train_bytes, int64_t dev_bytes) {
    memset(c, 0, sizeof *c);
    unsigned char *tr = read_slice("data/lm/train.txt", train_bytes, &c->n_train);
    unsigned char *dv = read_slice("data/lm/dev.txt", dev_bytes, &c->n_dev);
    if (!tr || !dv) {
        free(tr);
        free(dv);
        return false;
    }
    for (int i = 0; i < 256; i++) c->map[i] = -1;
    for (int64_t i = 0; i < c->n_train; i++)
        if (c->map[tr[i]] < 0) c->map[tr[i]] = (int32_t)c->vocab++;
    c->train = malloc(sizeof(int32_t) * (size_t)c->n_train);
    c->dev = malloc(sizeof(int32_t) * (size_t)c->n_dev);
    for (int64_t i = 0; i < c->n_train; i++) c->train[i] = c->map[tr[i]];
    for (int64_t i = 0; i < c->n_dev; i++) c->dev[i] = c->map[dv[i]] < 0 ? 0 : c->map[dv[i]];
    free(tr);
    free(dv);
    return true;
}

void test_char_corpus_free(test_char_corpus *c) {
    free(c->train);
    free(c->dev);
    c->train = c->dev = NULL;
}

double test_char_corpus_entropy(const test_char_corpus *c) {
    double h = 0, *p = calloc((size_t)c->vocab, sizeof(double));
    for (int64_t i = 0; i < c->n_train; i++) p[c->train[i]] += 1.0 / (double)c->n_train;
    for (int64_t v = 0; v < c->vocab; v++)
        if (p[v] > 0) h -= p[v] * log(p[v]);
    free(p);
    return h;
}

void test_char_windows(const int32_t *text, int64_t n, qkv_rng *rng, bool sequential, int B, int T, qkv_tensor *ids,
                       qkv_tensor *targets) {
    for (int b = 0; b < B; b++) {
        int64_t s = sequential ? (int64_t)b * T : (int64_t)qkv_rng_below(rng, (uint32_t)(n - T - 1));
        if (ids) memcpy(qkv_i32(ids) + b * T, text + s, sizeof(int32_t) * (size_t)T);
        memcpy(qkv_i32(targets) + b * T, text + s + 1, sizeof(int32_t) * (size_t)T);
    }
}

void test_char_lm_train(test_char_lm *lm, const test_char_corpus *c, const char *type_name, const char *json,
                        const char *label, int steps, float lr, int B, int T, bool with_ids) {
    memset(lm, 0, sizeof *lm);
    lm->first_loss = lm->dev_loss = NAN;
    lm->type = qkv_model_type_find(type_name);
    CHECKF(lm->type != NULL, "no model type '%s'", type_name);
    if (!lm->type) return;
    lm->cfg = cJSON_Parse(json);
    qkv_task_info info = {.vocab_size = c->vocab, .max_len = T};
    lm->params = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 99);
    lm->model = lm->type->create(lm->cfg, &info, lm->params, &rng);
    CHECKF(lm->model != NULL, "%s: create: %s", label, qkv_last_error());
    if (!lm->model) return;
    qkv_optim_config oc = qkv_optim_defaults(QKV_ADAMW);
    oc.lr = lr;
    oc.weight_decay = 0.01f;
    qkv_optim *opt = qkv_optim_new(lm->params, &oc);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *tg = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    qkv_tensor *ids = with_ids ? qkv_tensor_new(QKV_I32, QKV_DIMS(B, T)) : NULL;
    qkv_batch b = {.ids = ids, .targets = tg, .n_tokens = (int64_t)B * T};
    for (int s = 0; s < steps; s++) {
        qkv_ctx_reset(ctx);
        qkv_optim_zero_grad(opt);
        test_char_windows(c->train, c->n_train, &rng, false, B, T, ids, tg);
        qkv_tensor *loss = lm->type->loss(ctx, lm->model, &b);
        if (!loss || qkv_backward(ctx, loss) != QKV_OK) {
            CHECKF(false, "%s step %d: %s", label, s, qkv_last_error());
            break;
        }
        if (s == 0) lm->first_loss = qkv_f32(loss)[0];
        qkv_clip_grad_norm(lm->params, 1.0f);
        CHECK_OK(qkv_optim_step(opt));
    }
    qkv_ctx_reset(ctx);
    qkv_ctx_set_grad(ctx, false);
    qkv_ctx_set_training(ctx, false);
    test_char_windows(c->dev, c->n_dev, &rng, true, B, T, ids, tg);
    qkv_tensor *loss = lm->type->loss(ctx, lm->model, &b);
    CHECK_NN(loss);
    if (loss) lm->dev_loss = qkv_f32(loss)[0];
    printf("  %s: first train loss %.3f, dev loss after %d steps %.3f nats (%.3f bits/char), vocab %lld\n", label,
           lm->first_loss, steps, lm->dev_loss, lm->dev_loss / log(2.0), (long long)c->vocab);
    qkv_tensor_free(ids);
    qkv_tensor_free(tg);
    qkv_ctx_free(ctx);
    qkv_optim_free(opt);
}

void test_char_lm_free(test_char_lm *lm) {
    if (lm->model) lm->type->free(lm->model);
    qkv_params_free(lm->params);
    cJSON_Delete(lm->cfg);
    memset(lm, 0, sizeof *lm);
}

const char *test_austen_documents(const char *dir) {
    static char path[4096];
    const char *src = test_shared_path("data/lm/train.txt");
    char *text = src ? test_read_file(src) : NULL;
    if (!text) return NULL;
    snprintf(path, sizeof path, "%s/austen.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        free(text);
        return NULL;
    }
    int lines = 0;
    for (char *p = strtok(text, "\n"); p && lines < 2500; p = strtok(NULL, "\n"), lines++)
        fprintf(f, "%s\n", strncmp(p, "CHAPTER", 7) ? p : "");
    fclose(f);
    free(text);
    return path;
}
