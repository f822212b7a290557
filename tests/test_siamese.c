/* The siamese model type on the pairs task, through the training engine: it learns on the real paraphrase data
 * ($QKV_SHARED/data/paraphrase: the dev triplet loss falls past a bound, AUC and accuracy at the dev threshold rise)
 * in a few hundred small steps; embeddings are unit vectors, a text is its own duplicate; bad pair files are errors
 * naming file:line. Skipped (visibly) without the shared data. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/config.h"
#include "qkv/siamese.h"
#include "qkv/train.h"
#include "test.h"

static char dir[64];

static qkv_run *new_run(const char *run, const char *train, const char *dev, int steps) {
    char json[4096];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"siamese\", \"d_model\": 32},"
             " \"data\": {\"train\": \"%s\", \"dev\": \"%s\", \"max_len\": 24, \"min_freq\": 2},"
             " \"train\": {\"steps\": %d, \"batch_size\": 32, \"log_every\": 50, \"checkpoint_every\": 1000,"
             "            \"optimizer\": {\"lr\": 0.003}},"
             " \"eval\": {\"every\": 0}, \"seed\": 7}",
             train, dev, steps);
    cJSON *cfg = cJSON_Parse(json);
    const qkv_model_type *type = NULL;
    cJSON *resolved = cfg ? qkv_config_resolve(cfg, &type) : NULL;
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, run);
    qkv_run *r = resolved ? qkv_run_new(path, resolved, false) : NULL;
    cJSON_Delete(cfg);
    cJSON_Delete(resolved);
    return r;
}

static double metric(const cJSON *m, const char *key) { return cJSON_GetNumberValue(cJSON_GetObjectItem(m, key)); }

TEST(learns_paraphrases) {
    const char *tr = test_shared_path("data/paraphrase/train.tsv");
    char train[1024], dev[1024];
    snprintf(train, sizeof train, "%s", tr ? tr : "");
    const char *dv = test_shared_path("data/paraphrase/dev.tsv");
    snprintf(dev, sizeof dev, "%s", dv ? dv : "");
    if (!tr || !test_file_exists(train) || !test_file_exists(dev)) {
        test_skip("no shared paraphrase data");
        return;
    }
    qkv_run *r = new_run("learn", train, dev, 150);
    CHECKF(r != NULL, "%s", qkv_last_error());
    if (!r) return;
    cJSON *before = qkv_run_eval(r, "dev", NULL);
    CHECKF(before != NULL, "%s", qkv_last_error());
    qkv_train_outcome out;
    CHECK_OK(qkv_run_train(r, NULL, &out));
    cJSON *after = qkv_run_eval(r, "dev", NULL);
    CHECKF(after != NULL, "%s", qkv_last_error());
    if (before && after) {
        printf("  dev loss %.4f -> %.4f, auc %.4f -> %.4f, accuracy %.4f -> %.4f, f1 %.4f (threshold %.3f)\n",
               metric(before, "loss"), metric(after, "loss"), metric(before, "auc"), metric(after, "auc"),
               metric(before, "accuracy"), metric(after, "accuracy"), metric(after, "f1"),
               metric(after, "threshold"));
        CHECK(metric(after, "loss") < 0.05 && metric(after, "loss") < 0.5 * metric(before, "loss"));
        CHECK(metric(after, "auc") > 0.97 && metric(after, "accuracy") > 0.9 && metric(after, "f1") > 0.9);
        CHECK(metric(after, "examples") == 1346);
    }
    cJSON_Delete(before);
    cJSON_Delete(after);

    /* Unit vectors; a text is its own perfect duplicate; the threshold is kept for the step it belongs to. */
    const char *texts[3] = {"In the beginning God created the heaven and the earth.",
                            "In the beginning, God created the heavens and the earth.",
                            "And the LORD spake unto Moses, saying,"};
    float *v = NULL;
    int64_t D = 0;
    CHECK_OK(qkv_run_embed(r, texts, 3, &v, &D));
    CHECK(D == 32);
    for (int i = 0; v && i < 3; i++) {
        double n = 0;
        for (int64_t d = 0; d < D; d++) n += v[i * D + d] * v[i * D + d];
        CHECK(fabs(n - 1) < 1e-5);
    }
    double t = 0, t2 = 0, same = 0, other = 0;
    for (int64_t d = 0; v && d < D; d++) {
        same += v[d] * v[D + d];
        other += v[d] * v[2 * D + d];
    }
    CHECK_OK(qkv_run_threshold(r, &t));
    CHECK_OK(qkv_run_threshold(r, &t2));
    printf("  cos(paraphrase) %.3f, cos(other verse) %.3f, threshold %.3f\n", same, other, t);
    CHECK(t == t2 && same > other && same >= t);
    char path[160];
    snprintf(path, sizeof path, "%s/learn/threshold.json", dir);
    CHECK(test_file_exists(path));
    free(v);
    const char *empty[1] = {"   "};
    CHECK(qkv_run_embed(r, empty, 1, &v, &D) == QKV_ERR_INVALID && strstr(qkv_last_error(), "empty"));
    qkv_run_free(r);
}

TEST(bad_pair_files) {
    const char *good = test_write_file(dir, "good.tsv", "1\ta b c\ta b d\n1\tc d\tc e\n0\ta\te\n");
    char g[256];
    snprintf(g, sizeof g, "%s", good);
    const char *cases[][2] = {
        {"1\ta b\ta c\n1\tb c\n", "bad1.tsv:2"},          /* missing column */
        {"1\ta b\ta c\n1\t\tb\n", "bad2.tsv:2"},          /* empty text */
        {"1\ta b\ta c\n2\tb c\tb\n1\tb\tc\n", "bad3.tsv:2"}, /* label */
    };
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%d.tsv", i + 1);
        const char *p = test_write_file(dir, name, cases[i][0]);
        char bad[256];
        snprintf(bad, sizeof bad, "%s", p);
        char run[32];
        snprintf(run, sizeof run, "bad_train%d", i);
        qkv_run *r = new_run(run, bad, g, 1);
        CHECKF(r == NULL && strstr(qkv_last_error(), cases[i][1]), "%s", qkv_last_error());
        qkv_run_free(r);
        /* The same file as dev of a good run (read when the run starts). */
        snprintf(run, sizeof run, "bad_dev%d", i);
        r = new_run(run, g, bad, 1);
        CHECKF(r == NULL && strstr(qkv_last_error(), cases[i][1]), "%s", qkv_last_error());
        qkv_run_free(r);
    }
    const char *one = test_write_file(dir, "one.tsv", "1\ta b\ta c\n0\tb\tc\n");
    char o[256];
    snprintf(o, sizeof o, "%s", one);
    qkv_run *r = new_run("one_duplicate", o, g, 1);
    CHECKF(r == NULL && strstr(qkv_last_error(), "at least 2"), "%s", qkv_last_error());
    qkv_run_free(r);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/qkv_siamese_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(bad_pair_files);
    RUN(learns_paraphrases);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return test_finish();
}
