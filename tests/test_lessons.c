/* The vanishing-gradient lesson's measurement (qkv_run_input_grad_norms): on tiny untrained classifiers of every kind
 * the lesson compares (vanilla RNN, LSTM, GRU, CNN, Transformer), each position's gradient norm equals the norm of a
 * central-difference gradient taken on the run's own model, by perturbing the embedding row of that position's token
 * (the text's tokens are all different, so a row is one position). Also: the errors for runs it cannot measure. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/config.h"
#include "qkv/train.h"
#include "test.h"

static char dir[64], data[160];

static qkv_run *new_run(const char *name, const char *model) {
    char json[2048], path[160];
    snprintf(json, sizeof json,
             "{\"model\": %s, \"data\": {\"train\": \"%s\", \"dev\": \"%s\", \"tokenizer\": \"word\", \"max_len\": 24},"
             " \"train\": {\"steps\": 1, \"checkpoint_every\": 0}, \"eval\": {\"every\": 0}, \"seed\": 5}",
             model, data, data);
    cJSON *cfg = cJSON_Parse(json);
    const qkv_model_type *type = NULL;
    cJSON *resolved = cfg ? qkv_config_resolve(cfg, &type) : NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    qkv_run *r = resolved ? qkv_run_new(path, resolved, false) : NULL;
    CHECKF(r != NULL, "%s: %s", name, qkv_last_error());
    cJSON_Delete(cfg);
    cJSON_Delete(resolved);
    return r;
}

/* -log p(label) of the text under the run's model as it is now. */
static double nll(qkv_run *r, const char *text, const char *label) {
    cJSON *p = qkv_run_predict(r, text);
    double v = p ? -log(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "probs"), label))) : NAN;
    cJSON_Delete(p);
    return v;
}

static void check_model(const char *name, const char *model) {
    qkv_run *r = new_run(name, model);
    if (!r) return;
    const char *text = "alpha beta gamma delta epsilon zeta eta theta";
    double *norms = NULL;
    int64_t n = 0;
    CHECK_OK(qkv_run_input_grad_norms(r, text, 0, &norms, &n));
    int32_t *ids = NULL;
    size_t n_ids = 0;
    CHECK_OK(qkv_run_encode(r, text, &ids, &n_ids));
    qkv_tensor *E = qkv_params_find(qkv_run_params(r), "embedding.weight");
    cJSON *pred = qkv_run_predict(r, text);
    char label[32] = "";
    if (pred) snprintf(label, sizeof label, "%s", cJSON_GetStringValue(cJSON_GetObjectItem(pred, "label")));
    cJSON_Delete(pred);
    CHECK(E && norms && n >= (int64_t)n_ids && n_ids == 8);
    int64_t off = n - (int64_t)n_ids; /* a [CLS] the task prepends comes first */
    double worst = 0;
    for (size_t t = 0; E && norms && t < n_ids; t++) {
        int64_t D = E->shape[1];
        float *row = qkv_f32(E) + (int64_t)ids[t] * D;
        double ss = 0;
        for (int64_t d = 0; d < D; d++) {
            const float h = 1e-2f, keep = row[d];
            row[d] = keep + h;
            double up = nll(r, text, label);
            row[d] = keep - h;
            double down = nll(r, text, label);
            row[d] = keep;
            double g = (up - down) / (2.0 * (double)h);
            ss += g * g;
        }
        double fd = sqrt(ss), err = fabs(fd - norms[off + (int64_t)t]);
        if (err > worst) worst = err;
        CHECKF(err <= 2e-5 + 0.02 * fd, "%s position %zu: tool %.6g, finite differences %.6g", name, t,
               norms[off + (int64_t)t], fd);
    }
    printf("  %-12s %lld positions, last %.4g first %.4g, worst |tool - finite differences| %.2g\n", name,
           (long long)n, norms ? norms[n - 1] : 0, norms ? norms[off] : 0, worst);
    free(ids);
    free(norms);
    qkv_run_free(r);
}

TEST(agrees_with_finite_differences) {
    check_model("rnn", "{\"type\": \"rnn_classifier\", \"cell\": \"rnn\", \"d_model\": 4, \"hidden\": 6}");
    check_model("lstm", "{\"type\": \"rnn_classifier\", \"cell\": \"lstm\", \"d_model\": 4, \"hidden\": 6}");
    check_model("gru", "{\"type\": \"rnn_classifier\", \"cell\": \"gru\", \"d_model\": 4, \"hidden\": 6}");
    check_model("cnn", "{\"type\": \"cnn_classifier\", \"d_model\": 4, \"widths\": \"2,3\", \"n_filters\": 5}");
    check_model("transformer", "{\"type\": \"transformer_classifier\", \"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16,"
                               " \"activation\": \"gelu\", \"max_len\": 32}");
}

TEST(longer_than_training) {
    qkv_run *r = new_run("long", "{\"type\": \"rnn_classifier\", \"cell\": \"gru\", \"d_model\": 4, \"hidden\": 4}");
    if (!r) return;
    char text[2048] = "";
    for (int i = 0; i < 100; i++) strcat(text, i % 2 ? "alpha " : "beta ");
    double *norms = NULL;
    int64_t n = 0;
    CHECK_OK(qkv_run_input_grad_norms(r, text, 80, &norms, &n));
    CHECK(n == 80);
    free(norms);
    qkv_run_free(r);
    r = new_run("tpos", "{\"type\": \"transformer_classifier\", \"d_model\": 8, \"n_heads\": 2, \"d_ff\": 8, "
                        "\"max_len\": 40}");
    if (!r) return;
    CHECK_OK(qkv_run_input_grad_norms(r, text, 80, &norms, &n));
    CHECKF(n == 40, "capped at the model's 40 positions, got %lld", (long long)n);
    free(norms);
    qkv_run_free(r);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/qkv_lessons_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(data, sizeof data, "%s/train.tsv", dir);
    FILE *f = fopen(data, "w");
    if (!f) return 1;
    const char *words[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"};
    for (int i = 0; i < 24; i++)
        fprintf(f, "%d\t%s %s %s\n", i % 2, words[i % 8], words[(i + 3) % 8], words[(i * 5 + 1) % 8]);
    fclose(f);
    RUN(agrees_with_finite_differences);
    RUN(longer_than_training);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return test_finish();
}
