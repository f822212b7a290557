/* The training engine's pieces that do not need data: config resolution and its errors, --set overrides, batch
 * plans (seeded, complete, bucketed), the SVG plotter, and checkpoint metadata round trips. The end-to-end proofs
 * (resume == uninterrupted, determinism, kill -9, signals) are in tests/cli_train.sh. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/config.h"
#include "qkv/plot.h"
#include "qkv/safetensors.h"
#include "test.h"
#include "train/train_internal.h"

/* Resolves JSON text; returns the resolved tree or NULL (error set). */
static cJSON *resolve(const char *text) {
    cJSON *u = qkv_config_parse("test", text);
    if (!u) return NULL;
    cJSON *c = qkv_config_resolve(u, NULL);
    cJSON_Delete(u);
    return c;
}

/* Resolution fails with a message starting with the key path. */
static void expect_error(const char *text, const char *prefix) {
    cJSON *c = resolve(text);
    CHECKF(c == NULL, "resolving %s should fail", text);
    CHECKF(!strncmp(qkv_last_error(), prefix, strlen(prefix)), "error '%s' should start with '%s'", qkv_last_error(),
           prefix);
    cJSON_Delete(c);
}

TEST(defaults_are_complete_and_merged) {
    const qkv_model_type *t = qkv_model_type_find("embmean");
    CHECK_NN(t);
    if (!t) return;
    cJSON *d = qkv_config_defaults(t);
    CHECK_NN(d);
    CHECK(!strcmp(qkv_config_str(d, "model.type", ""), "embmean"));
    CHECK(qkv_config_int(d, "model.dim", 0) == 64);
    CHECK(qkv_config_num(d, "train.optimizer.lr", 0) == 0.001);
    CHECK(qkv_config_int(d, "eval.every", 0) == 100);
    CHECK(qkv_config_int(d, "seed", 0) == 1);
    cJSON_Delete(d);
    cJSON *c = resolve("{\"model\": {\"type\": \"embmean\", \"dim\": 8}, \"data\": {\"train\": \"t.tsv\"},"
                       " \"train\": {\"optimizer\": {\"lr\": 0.5}}, \"seed\": 7}");
    CHECK_NN(c);
    CHECK(qkv_config_int(c, "model.dim", 0) == 8);
    CHECK(qkv_config_num(c, "train.optimizer.lr", 0) == 0.5);
    CHECK(!strcmp(qkv_config_str(c, "train.optimizer.name", ""), "adam")); /* untouched default */
    CHECK(qkv_config_int(c, "seed", 0) == 7);
    CHECK(qkv_config_get(c, "train.nosuch") == NULL);
    /* Resolving a resolved config changes nothing. */
    cJSON *again = qkv_config_resolve(c, NULL);
    CHECK_NN(again);
    CHECK(again && cJSON_Compare(c, again, true));
    cJSON_Delete(again);
    cJSON_Delete(c);
}

TEST(errors_name_the_key_path) {
    expect_error("{\"data\": {\"train\": \"x\"}}", "model: required");
    expect_error("{\"model\": 3}", "model: expected an object");
    expect_error("{\"model\": {\"dim\": 3}}", "model.type: required");
    expect_error("{\"model\": {\"type\": \"nosuch\"}}", "model.type: unknown model type 'nosuch'");
    expect_error("{\"model\": {\"type\": \"embmean\", \"dims\": 3}, \"data\": {\"train\": \"x\"}}",
                 "model.dims: unknown key");
    expect_error("{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"x\"}, \"trian\": {}}",
                 "trian: unknown key");
    expect_error("{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": 3}}", "data.train: expected a string");
    expect_error("{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"x\"}, \"train\": {\"optimizer\": 1}}",
                 "train.optimizer: expected an object");
    expect_error("{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"x\"},"
                 " \"train\": {\"optimizer\": {\"lr\": 0}}}",
                 "train.optimizer.lr: expected a number > 0");
    expect_error("{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"x\"},"
                 " \"train\": {\"optimizer\": {\"beta2\": 1.5}}}",
                 "train.optimizer.beta2: expected a number in [0, 1]");
    expect_error("{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"x\"},"
                 " \"train\": {\"optimizer\": {\"name\": \"lion\"}}}",
                 "train.optimizer.name: expected one of sgd|adam|adamw|adadelta");
    expect_error("{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"x\"}, \"train\": {\"batch_size\": 0}}",
                 "train.batch_size: expected an integer");
    expect_error("{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"x\"}, \"seed\": -1}",
                 "seed: expected an integer");
    expect_error("{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"x\"},"
                 " \"train\": {\"schedule\": {\"spec\": \"constant * linear_warmup\"}}}",
                 "train.schedule: ");
    expect_error("{\"model\": {\"type\": \"embmean\"}}", "data.train: required");
    CHECK(qkv_config_parse("bad.json", "{\"a\": \n 1,,}") == NULL);
    CHECKF(strstr(qkv_last_error(), "bad.json:2") != NULL, "syntax error line: %s", qkv_last_error());
    CHECK(qkv_config_parse("arr.json", "[1, 2]") == NULL);
}

TEST(set_overrides) {
    cJSON *u = qkv_config_parse("t", "{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"x\"}}");
    CHECK_NN(u);
    CHECK_OK(qkv_config_set(u, "train.optimizer.lr=0.25"));
    CHECK_OK(qkv_config_set(u, "data.dev=dev.tsv"));         /* not JSON: a plain string */
    CHECK_OK(qkv_config_set(u, "data.test=\"1.5\""));        /* a quoted JSON string */
    CHECK_OK(qkv_config_set(u, "data.shuffle=false"));
    CHECK_OK(qkv_config_set(u, "model={\"type\": \"embmean\", \"dim\": 4}"));
    CHECK_OK(qkv_config_set(u, "train.optimizer.lr=0.5")); /* later wins */
    CHECK(qkv_config_set(u, "noequals") != QKV_OK);
    CHECK(qkv_config_set(u, "=3") != QKV_OK);
    CHECK(qkv_config_set(u, "data..x=3") != QKV_OK);
    CHECK(qkv_config_set(u, "data.train.deeper=3") != QKV_OK); /* data.train is a string */
    cJSON *c = qkv_config_resolve(u, NULL);
    CHECK_NN(c);
    if (c) {
        CHECK(qkv_config_num(c, "train.optimizer.lr", 0) == 0.5);
        CHECK(!strcmp(qkv_config_str(c, "data.dev", ""), "dev.tsv"));
        CHECK(!strcmp(qkv_config_str(c, "data.test", ""), "1.5"));
        CHECK(!qkv_config_bool(c, "data.shuffle", true));
        CHECK(qkv_config_int(c, "model.dim", 0) == 4);
    }
    CHECK_OK(qkv_config_set(u, "train.stepz=3"));
    cJSON *bad = qkv_config_resolve(u, NULL);
    CHECK(bad == NULL && strstr(qkv_last_error(), "train.stepz: unknown key"));
    cJSON_Delete(bad);
    cJSON_Delete(c);
    cJSON_Delete(u);
}

/* A split of n examples with lengths 1 + (i * 7) % 13, no token data needed for plans. */
static void fake_split(split *s, int64_t n) {
    memset(s, 0, sizeof *s);
    s->ex = calloc((size_t)n, sizeof *s->ex);
    s->n = n;
    for (int64_t i = 0; i < n; i++) s->ex[i].n = 1 + (i * 7) % 13;
}

static bool is_permutation(const int64_t *a, int64_t n) {
    char *seen = calloc((size_t)n, 1);
    bool ok = seen != NULL;
    for (int64_t i = 0; ok && i < n; i++) {
        ok = a[i] >= 0 && a[i] < n && !seen[a[i]];
        if (ok) seen[a[i]] = 1;
    }
    free(seen);
    return ok;
}

TEST(batch_plans_are_seeded_permutations) {
    split s;
    fake_split(&s, 1000);
    batch_plan a = {0}, b = {0}, c = {0}, d = {0};
    CHECK_OK(qkv__batch_plan_build(&a, &s, 32, true, false, 5, 0));
    CHECK_OK(qkv__batch_plan_build(&b, &s, 32, true, false, 5, 0));
    CHECK_OK(qkv__batch_plan_build(&c, &s, 32, true, false, 5, 1));
    CHECK(a.n_batches == 32 && a.starts[32] == 1000 && a.starts[31] == 992);
    CHECK(is_permutation(a.order, 1000));
    CHECK(!memcmp(a.order, b.order, sizeof *a.order * 1000));  /* same seed and epoch: same order */
    CHECK(memcmp(a.order, c.order, sizeof *a.order * 1000) != 0); /* next epoch: another order */
    /* Bucketing: still a permutation, with much less padding than random batches. */
    CHECK_OK(qkv__batch_plan_build(&d, &s, 32, true, true, 5, 0));
    CHECK(is_permutation(d.order, 1000));
    int64_t pad_random = 0, pad_bucket = 0;
    for (int64_t k = 0; k < d.n_batches; k++) {
        int64_t ma = 0, mb = 0, sa = 0, sb = 0;
        for (int64_t i = d.starts[k]; i < d.starts[k + 1]; i++) {
            int64_t la = s.ex[a.order[i]].n, lb = s.ex[d.order[i]].n;
            ma = la > ma ? la : ma;
            mb = lb > mb ? lb : mb;
            sa += la;
            sb += lb;
        }
        pad_random += ma * (d.starts[k + 1] - d.starts[k]) - sa;
        pad_bucket += mb * (d.starts[k + 1] - d.starts[k]) - sb;
    }
    CHECKF(pad_bucket * 4 < pad_random, "bucketing padding %lld vs random %lld", (long long)pad_bucket,
           (long long)pad_random);
    /* No shuffle: file order. */
    CHECK_OK(qkv__batch_plan_build(&b, &s, 300, false, true, 5, 3));
    CHECK(b.n_batches == 4 && b.order[0] == 0 && b.order[999] == 999 && b.starts[3] == 900);
    qkv__batch_plan_free(&a);
    qkv__batch_plan_free(&b);
    qkv__batch_plan_free(&c);
    qkv__batch_plan_free(&d);
    qkv__split_free(&s);
}

TEST(plot_svg) {
    double x[5] = {0, 10, 20, 30, 40}, y[5] = {2.0, 1.5, NAN, 0.9, 0.7}, y2[2] = {1.8, 1.1}, x2[2] = {20, 40};
    qkv_plot_series s[2] = {{.label = "train <loss>", .x = x, .y = y, .n = 5},
                            {.label = "dev", .x = x2, .y = y2, .n = 2, .color = "red"}};
    qkv_plot_panel p = {.title = "loss & co", .xlabel = "step", .ylabel = "loss", .series = s, .n_series = 2};
    char *svg = qkv_plot_svg(&p, 1, 0, 0);
    CHECK_NN(svg);
    if (svg) {
        CHECK(!strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"480\" height=\"320\"", 60));
        CHECK(strstr(svg, "train &lt;loss&gt;") && strstr(svg, "loss &amp; co")); /* text is escaped */
        int lines = 0;
        for (const char *q = svg; (q = strstr(q, "<polyline")); q++) lines++;
        CHECKF(lines == 3, "NaN splits the first series in two: %d polylines", lines);
        CHECK(strstr(svg, "stroke=\"red\"") != NULL);
        CHECK(!strstr(svg, "nan") && !strstr(svg, "inf"));
        CHECK(strstr(svg, "</svg>") != NULL);
        free(svg);
    }
    /* Empty and degenerate panels still draw; a log axis drops non-positive values. */
    qkv_plot_panel empty = {.title = "nothing", .log_y = true};
    qkv_plot_panel both[2] = {p, empty};
    svg = qkv_plot_svg(both, 2, 300, 200);
    CHECK(svg && strstr(svg, "width=\"600\""));
    free(svg);
    CHECK(qkv_plot_svg(&p, 0, 0, 0) == NULL);
    char path[256];
    snprintf(path, sizeof path, "/tmp/qkv_test_plot_%ld.svg", (long)getpid());
    CHECK_OK(qkv_plot_write(path, &p, 1, 0, 0));
    CHECK(test_file_exists(path));
    unlink(path);
    CHECK(qkv_plot_write("/nonexistent-dir/x.svg", &p, 1, 0, 0) == QKV_ERR_IO);
}

TEST(checkpoint_extra_metadata) {
    qkv_params *p = qkv_params_new();
    qkv_tensor *w = qkv_params_add(p, NULL, "w", QKV_DIMS(3));
    CHECK_NN(w);
    qkv_tensor_fill(w, 1.5f);
    qkv_train_state st = {.step = 12, .data_epoch = 2, .data_pos = 5};
    qkv_rng_init(&st.rng, 9);
    char path[256];
    snprintf(path, sizeof path, "/tmp/qkv_test_ckpt_%ld.safetensors", (long)getpid());
    const char *keys[] = {"qkv.loop", "note"}, *values[] = {"{\"best\":\"0.5\"}", "hello"};
    CHECK_OK(qkv_checkpoint_save_ex(path, p, NULL, &st, "{}", 2, keys, values));
    qkv_st_file *f = qkv_st_open(path);
    CHECK_NN(f);
    if (f) {
        CHECK(!strcmp(qkv_st_metadata(f, "qkv.loop"), "{\"best\":\"0.5\"}"));
        CHECK(!strcmp(qkv_st_metadata(f, "note"), "hello"));
        CHECK(!strcmp(qkv_st_metadata(f, "qkv.step"), "12"));
        qkv_st_close(f);
    }
    qkv_train_state back = {0};
    qkv_tensor_fill(w, 0.0f);
    CHECK_OK(qkv_checkpoint_load(path, p, NULL, &back, NULL));
    CHECK(back.step == 12 && back.data_epoch == 2 && back.data_pos == 5 && back.rng.seed == 9);
    CHECK(qkv_f32(w)[2] == 1.5f);
    unlink(path);
    qkv_params_free(p);
}

int main(void) {
    RUN(defaults_are_complete_and_merged);
    RUN(errors_name_the_key_path);
    RUN(set_overrides);
    RUN(batch_plans_are_seeded_permutations);
    RUN(plot_svg);
    RUN(checkpoint_extra_metadata);
    return test_finish();
}
