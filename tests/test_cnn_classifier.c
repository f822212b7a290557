/* The CNN classifier (Kim 2014): the whole model against PyTorch (tests/ref/cnn_model.py: logits, every parameter
 * gradient), finite differences, a sentence scoring the same alone and in a padded batch, the model type's config
 * errors, and learning on the real sentiment data through the training engine ($QKV_SHARED/data/sentiment: the dev
 * loss falls below 0.62 in 300 steps, before it starts to overfit, and accuracy rises above chance; skipped visibly
 * without the data). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/cnn_classifier.h"
#include "qkv/config.h"
#include "qkv/train.h"
#include "test_nn_common.h"

static char dir[64];

static qkv_tensor *f_logits(qkv_ctx *c, qkv_tensor **in, void *u) {
    return qkv_cnn_classifier_logits(c, u, in[0], in[1]);
}

static qkv_cnn_classifier *build(qkv_params *p, int64_t V, int64_t C, int64_t d, int64_t filters, int n,
                                 const int64_t *widths, bool wide, uint64_t seed) {
    qkv_cnn_classifier_config c = qkv_cnn_classifier_config_default(V, C);
    c.d_model = d;
    c.n_filters = filters;
    c.n_widths = n;
    for (int i = 0; i < n; i++) c.widths[i] = widths[i];
    c.wide = wide;
    c.dropout = 0.0f;
    qkv_rng rng;
    qkv_rng_init(&rng, seed);
    qkv_cnn_classifier *m = qkv_cnn_classifier_new(&c, p, &rng);
    CHECKF(m != NULL, "%s", qkv_last_error());
    return m;
}

TEST(matches_torch) {
    qkv_st_file *f = nn_open_fixture("cnn_model.safetensors");
    if (!f) return;
    qkv_params *p = qkv_params_new();
    qkv_cnn_classifier *m = build(p, 15, 3, 6, 4, 2, (const int64_t[]){2, 3}, true, 1);
    if (m) CHECK(nn_fixture_check(f, "wide_padded", p, f_logits, m, 1e-4, 1e-5));
    qkv_cnn_classifier_free(m);
    qkv_params_free(p);
    p = qkv_params_new();
    m = build(p, 15, 2, 6, 5, 1, (const int64_t[]){2}, false, 2);
    if (m) CHECK(nn_fixture_check(f, "valid", p, f_logits, m, 1e-4, 1e-5));
    qkv_cnn_classifier_free(m);
    qkv_params_free(p);
    qkv_st_close(f);
}

TEST(gradcheck_params) {
    qkv_params *p = qkv_params_new();
    qkv_cnn_classifier *m = build(p, 7, 2, 4, 3, 2, (const int64_t[]){1, 3}, true, 5);
    qkv_tensor *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 4)), *mask = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 4));
    const int32_t idv[] = {1, 3, 6, 2, 4, 5, 0, 0}, mv[] = {1, 1, 1, 1, 1, 1, 0, 0};
    qkv_tensor_load(ids, idv, sizeof idv);
    qkv_tensor_load(mask, mv, sizeof mv);
    gc_opts g = gc_defaults();
    g.eps = 1e-3; /* small steps rarely cross a ReLU kink or change which step is the maximum */
    if (m) CHECK(nn_gradcheck_opts("cnn_classifier", f_logits, 2, (qkv_tensor *[]){ids, mask}, p, m, &g));
    qkv_tensor_free(ids);
    qkv_tensor_free(mask);
    qkv_cnn_classifier_free(m);
    qkv_params_free(p);
}

/* Batch padding is invisible: the second sentence's logits alone equal its row in the padded batch. */
TEST(padding_invisible) {
    qkv_params *p = qkv_params_new();
    qkv_cnn_classifier *m = build(p, 9, 2, 5, 3, 3, (const int64_t[]){2, 3, 4}, true, 8);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *ids = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(2, 6)), *mask = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(2, 6));
    for (int i = 0; i < 12; i++) {
        qkv_i32(ids)[i] = 1 + (i * 5) % 8;
        qkv_f32(mask)[i] = i < 6 || i < 8 ? 1.0f : 0.0f; /* second sentence: 2 words, then 4 of padding */
    }
    qkv_tensor *alone = qkv_slice(ctx, qkv_slice(ctx, ids, 0, 1, 2, 1), 1, 0, 2, 1);
    qkv_tensor *both = m ? qkv_cnn_classifier_logits(ctx, m, ids, mask) : NULL;
    qkv_tensor *one = m ? qkv_cnn_classifier_logits(ctx, m, qkv_contiguous(ctx, alone), NULL) : NULL;
    CHECK(both && one);
    for (int c = 0; both && one && c < 2; c++)
        CHECKF(fabsf(qkv_f32(both)[2 + c] - qkv_f32(one)[c]) < 1e-5f, "class %d: %g in the batch, %g alone", c,
               qkv_f32(both)[2 + c], qkv_f32(one)[c]);
    qkv_ctx_free(ctx);
    qkv_cnn_classifier_free(m);
    qkv_params_free(p);
}

TEST(model_type) {
    const qkv_model_type *t = qkv_model_type_find("cnn_classifier");
    CHECK(t != NULL && !strcmp(t->task, "classify"));
    if (!t) return;
    qkv_task_info info = {.vocab_size = 12, .n_classes = 2, .pad_id = 0, .max_len = 6};
    qkv_rng rng;
    qkv_rng_init(&rng, 4);
    struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"widths\": \"3,x\"}", "model.widths"},
        {"{\"widths\": \"\"}", "model.widths"},
        {"{\"widths\": \"1,2,3,4,5,6,7,8,9\"}", "model.widths"},
        {"{\"padding\": \"same\"}", "model.padding"},
        {"{\"dropout\": 1}", "model.dropout"},
        {"{\"n_filters\": 0}", "model.n_filters"},
        {"{\"widths\": \"7\", \"padding\": \"valid\"}", "longest"},
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
    qkv_params *p = qkv_params_new();
    cJSON *cfg = cJSON_Parse("{\"d_model\": 8, \"widths\": \"2,3\", \"n_filters\": 4}");
    qkv_model *m = t->create(cfg, &info, p, &rng);
    cJSON_Delete(cfg);
    CHECK_NN(m);
    CHECK(qkv_params_find(p, "convs.1.weight") && qkv_params_find(p, "classifier.weight") &&
          qkv_params_find(p, "classifier.weight")->shape[1] == 8);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_training(ctx, false);
    qkv_tensor *ids = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(2, 3)), *labels = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(2));
    qkv_i32(ids)[1] = 4;
    qkv_i32(labels)[1] = 1;
    qkv_batch b = {.ids = ids, .labels = labels};
    qkv_tensor *lp = m ? t->forward(ctx, m, &b, NULL) : NULL;
    qkv_tensor *loss = m ? t->loss(ctx, m, &b) : NULL;
    CHECK(lp && loss);
    if (lp && loss) {
        CHECK(fabsf(expf(qkv_f32(lp)[0]) + expf(qkv_f32(lp)[1]) - 1.0f) < 1e-5f);
        float want = -(qkv_f32(lp)[0] + qkv_f32(lp)[3]) / 2.0f;
        CHECKF(fabsf(qkv_f32(loss)[0] - want) < 1e-5f, "loss %g want %g", qkv_f32(loss)[0], want);
    }
    qkv_batch nolab = {.ids = ids};
    CHECK(m && t->loss(ctx, m, &nolab) == NULL && strstr(qkv_last_error(), "labels"));
    qkv_ctx_free(ctx);
    if (m) t->free(m);
    qkv_params_free(p);
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
             "{\"model\": {\"type\": \"cnn_classifier\", \"d_model\": 32, \"n_filters\": 32, \"dropout\": 0.3},"
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
        CHECK(metric(after, "loss") < 0.62 && metric(after, "loss") < metric(before, "loss") - 0.08);
        CHECK(metric(after, "accuracy") > 0.66);
    }
    cJSON_Delete(before);
    cJSON_Delete(after);
    qkv_run_free(r);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/qkv_cnn_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(matches_torch);
    RUN(gradcheck_params);
    RUN(padding_invisible);
    RUN(model_type);
    RUN(learns_sentiment);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return test_finish();
}
