/* The recurrent classifier: the whole model against PyTorch for each cell (tests/ref/rnn_cls_model.py: logits, every
 * parameter gradient), finite differences, the model type's config errors, and learning on the real sentiment data
 * through the training engine ($QKV_SHARED/data/sentiment; skipped visibly without it). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/config.h"
#include "qkv/rnn_classifier.h"
#include "qkv/train.h"
#include "test_nn_common.h"

static char dir[64];

static qkv_tensor *f_logits(qkv_ctx *c, qkv_tensor **in, void *u) {
    return qkv_rnn_classifier_logits(c, u, in[0], in[1]);
}

static qkv_rnn_classifier *build(qkv_params *p, qkv_rnn_kind cell, int layers, int64_t V, int64_t d, int64_t h) {
    qkv_rnn_classifier_config c = qkv_rnn_classifier_config_default(V, 3);
    c.cell = cell;
    c.n_layers = layers;
    c.d_model = d;
    c.hidden = h;
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    qkv_rnn_classifier *m = qkv_rnn_classifier_new(&c, p, &rng);
    CHECKF(m != NULL, "%s", qkv_last_error());
    return m;
}

TEST(matches_torch) {
    qkv_st_file *f = nn_open_fixture("rnn_cls_model.safetensors");
    if (!f) return;
    const char *keys[] = {"rnn", "lstm", "gru"};
    const qkv_rnn_kind cells[] = {QKV_RNN_TANH, QKV_RNN_LSTM, QKV_RNN_GRU};
    for (int i = 0; i < 3; i++) {
        qkv_params *p = qkv_params_new();
        qkv_rnn_classifier *m = build(p, cells[i], i == 1 ? 2 : 1, 13, 5, 6);
        if (m) CHECK(nn_fixture_check(f, keys[i], p, f_logits, m, 1e-4, 1e-5));
        qkv_rnn_classifier_free(m);
        qkv_params_free(p);
    }
    qkv_st_close(f);
}

TEST(gradcheck_params) {
    const qkv_rnn_kind cells[] = {QKV_RNN_TANH, QKV_RNN_LSTM, QKV_RNN_GRU};
    for (int i = 0; i < 3; i++) {
        qkv_params *p = qkv_params_new();
        qkv_rnn_classifier *m = build(p, cells[i], 1, 7, 3, 4);
        qkv_tensor *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 4)), *mask = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 4));
        const int32_t idv[] = {1, 3, 6, 2, 4, 5, 0, 0}, mv[] = {1, 1, 1, 1, 1, 1, 0, 0};
        qkv_tensor_load(ids, idv, sizeof idv);
        qkv_tensor_load(mask, mv, sizeof mv);
        if (m) CHECK(nn_gradcheck("rnn_classifier", f_logits, 2, (qkv_tensor *[]){ids, mask}, p, m));
        qkv_tensor_free(ids);
        qkv_tensor_free(mask);
        qkv_rnn_classifier_free(m);
        qkv_params_free(p);
    }
}

TEST(model_type) {
    const qkv_model_type *t = qkv_model_type_find("rnn_classifier");
    CHECK(t != NULL && !strcmp(t->task, "classify"));
    if (!t) return;
    qkv_task_info info = {.vocab_size = 12, .n_classes = 2, .pad_id = 0, .max_len = 6};
    qkv_rng rng;
    qkv_rng_init(&rng, 4);
    struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"cell\": \"transformer\"}", "model.cell"},
        {"{\"pool\": \"first\"}", "model.pool"},
        {"{\"n_layers\": 0}", "model.n_layers"},
        {"{\"hidden\": \"big\"}", "model.hidden"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        qkv_params *p = qkv_params_new();
        cJSON *cfg = cJSON_Parse(bad[i].json);
        qkv_model *m = t->create(cfg, &info, p, &rng);
        CHECKF(m == NULL && strstr(qkv_last_error(), bad[i].needle), "%s: error '%s' should name %s", bad[i].json,
               qkv_last_error(), bad[i].needle);
        if (m) t->free(m);
        cJSON_Delete(cfg);
        qkv_params_free(p);
    }
    /* mean and max pooling build and give log-probabilities. */
    const char *pools[] = {"{\"pool\": \"mean\", \"cell\": \"gru\", \"d_model\": 4, \"hidden\": 5}",
                           "{\"pool\": \"max\", \"cell\": \"rnn\", \"d_model\": 4, \"hidden\": 5}"};
    for (int i = 0; i < 2; i++) {
        qkv_params *p = qkv_params_new();
        cJSON *cfg = cJSON_Parse(pools[i]);
        qkv_model *m = t->create(cfg, &info, p, &rng);
        cJSON_Delete(cfg);
        CHECK_NN(m);
        qkv_ctx *ctx = qkv_ctx_new();
        qkv_tensor *ids = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(2, 3)), *mask = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(2, 3));
        for (int k = 0; k < 6; k++) {
            qkv_i32(ids)[k] = k + 1;
            qkv_f32(mask)[k] = k < 5 ? 1.0f : 0.0f;
        }
        qkv_batch b = {.ids = ids, .mask = mask};
        qkv_tensor *lp = m ? t->forward(ctx, m, &b, NULL) : NULL;
        CHECK(lp && fabsf(expf(qkv_f32(lp)[0]) + expf(qkv_f32(lp)[1]) - 1.0f) < 1e-5f);
        qkv_ctx_free(ctx);
        if (m) t->free(m);
        qkv_params_free(p);
    }
}

static double metric(const cJSON *m, const char *key) { return cJSON_GetNumberValue(cJSON_GetObjectItem(m, key)); }

TEST(learns_sentiment) {
    const char *tr = test_shared_path("data/sentiment/train.tsv");
    char train[1024], dev[1024];
    snprintf(train, sizeof train, "%s", tr ? tr : "");
    const char *dv = test_shared_path("data/sentiment/dev.tsv");
    snprintf(dev, sizeof dev, "%s", dv ? dv : "");
    if (!tr || !test_file_exists(train) || !test_file_exists(dev)) {
        test_skip("no shared sentiment data");
        return;
    }
    char json[4096], path[128];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"rnn_classifier\", \"cell\": \"gru\", \"d_model\": 32, \"hidden\": 32},"
             " \"data\": {\"train\": \"%s\", \"dev\": \"%s\", \"tokenizer\": \"word\", \"lowercase\": true,"
             "          \"strip_punct\": true, \"max_len\": 64},"
             " \"train\": {\"steps\": 300, \"batch_size\": 32, \"log_every\": 100, \"checkpoint_every\": 1000,"
             "            \"optimizer\": {\"lr\": 0.003}},"
             " \"eval\": {\"every\": 0}, \"seed\": 3}",
             train, dev);
    cJSON *cfg = cJSON_Parse(json);
    const qkv_model_type *type = NULL;
    cJSON *resolved = cfg ? qkv_config_resolve(cfg, &type) : NULL;
    snprintf(path, sizeof path, "%s/learn", dir);
    qkv_run *r = resolved ? qkv_run_new(path, resolved, false) : NULL;
    cJSON_Delete(cfg);
    cJSON_Delete(resolved);
    CHECKF(r != NULL, "%s", qkv_last_error());
    if (!r) return;
    cJSON *before = qkv_run_eval(r, "dev", NULL);
    qkv_train_outcome out;
    CHECK_OK(qkv_run_train(r, NULL, &out));
    cJSON *after = qkv_run_eval(r, "dev", NULL);
    CHECK(before && after);
    if (before && after) {
        printf("  dev loss %.4f -> %.4f, accuracy %.4f -> %.4f\n", metric(before, "loss"), metric(after, "loss"),
               metric(before, "accuracy"), metric(after, "accuracy"));
        CHECK(metric(after, "accuracy") > 0.62);
    }
    cJSON_Delete(before);
    cJSON_Delete(after);
    qkv_run_free(r);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/qkv_rnncls_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(matches_torch);
    RUN(gradcheck_params);
    RUN(model_type);
    RUN(learns_sentiment);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return test_finish();
}
