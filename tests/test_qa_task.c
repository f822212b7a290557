/* The qa task (src/train/task_qa.c) on any model type with token features: gold token spans map back to the answer
 * text (word and WordPiece tokenizers), examples whose answer was cut away are dropped in training and kept in
 * evaluation, a model without features is refused by name, and a Transformer learns the cloze questions of the
 * shared Austen text (dev loss falls past a bound, EM/F1 reported; skipped without the data). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/config.h"
#include "test.h"
#include "train/train_internal.h"

static char dir[256];
static int run_counter;

static const char *run_dir(void) {
    static char p[512];
    snprintf(p, sizeof p, "%s/run%d", dir, run_counter++);
    return p;
}

static qkv_run *make_run(const char *json) {
    cJSON *u = qkv_config_parse("test", json);
    qkv_run *r = u ? qkv_run_new(run_dir(), u, false) : NULL;
    cJSON_Delete(u);
    return r;
}

static const char *DATA =
    "{\"context\": \"Emma met Mr. Knightley at Hartfield. She smiled.\", \"question\": \"XXXXX met Mr. Knightley.\", "
    "\"answers\": {\"text\": [\"Emma\"], \"answer_start\": [0]}}\n"
    "{\"context\": \"The ball at the Crown Inn was a great success.\", \"question\": \"The XXXXX at the inn.\", "
    "\"answers\": {\"text\": [\"ball\"], \"answer_start\": [4]}}\n"
    "{\"context\": \"Harriet walked to Highbury with Emma, talking of Mr. Martin and his farm at Abbey-Mill.\", "
    "\"question\": \"His XXXXX at Abbey-Mill.\", \"answers\": {\"text\": [\"farm\"], \"answer_start\": [68]}}\n";

static char cfg[4096];
static const char *qa_cfg(const char *train, const char *type, const char *data_extra, long max_len) {
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"%s\", \"d_model\": 16, \"n_layers\": 1, \"n_heads\": 2, \"d_ff\": 32, "
             "\"max_len\": 64}, \"data\": {\"train\": \"%s\", \"task\": \"qa\", \"max_len\": %ld%s}, "
             "\"train\": {\"steps\": 2, \"batch_size\": 2, \"checkpoint_every\": 0}, \"eval\": {\"every\": 0}}",
             type, train, max_len, data_extra);
    return cfg;
}

/* The text of example i's gold token span. */
static char *gold_text(const split *s, int64_t i) {
    const int64_t *span = s->qa->tok_span[i];
    int32_t a = s->qa->gold[i][0], z = s->qa->gold[i][1];
    if (a < 0) return strdup("");
    return strndup(s->qa->context[i] + span[2 * a], (size_t)(span[2 * z + 1] - span[2 * a]));
}

TEST(gold_spans_map_back_to_the_answer) {
    const char *train = test_write_file(dir, "qa.jsonl", DATA);
    qkv_run *r = make_run(qa_cfg(train, "transformer_classifier", "", 64));
    CHECK_NN(r);
    if (!r) return;
    CHECK(r->train.n == 3);
    const char *want[] = {"Emma", "ball", "farm"};
    for (int64_t i = 0; i < r->train.n && i < 3; i++) {
        char *g = gold_text(&r->train, i);
        CHECKF(!strcmp(g, want[i]), "example %lld: gold '%s'", (long long)i, g);
        free(g);
    }
    CHECK_NN(qkv_params_find(r->params, "qa_outputs.weight"));
    qkv_train_outcome out;
    CHECK_OK(qkv_run_train(r, NULL, &out));
    qkv_run_free(r);
    /* max_len 12: the third answer (token 17 or so) is cut away: dropped for training. */
    r = make_run(qa_cfg(train, "transformer_classifier", "", 12));
    CHECK_NN(r);
    if (r) CHECK(r->train.n == 2 && qkv__qa_dropped(&r->train) == 1);
    qkv_run_free(r);
    /* WordPiece: [CLS] question [SEP] context [SEP], offsets into the context. */
    const char *vocab = test_shared_path("pretrained/bert-base-uncased-tokenizer/vocab.txt");
    if (!vocab || access(vocab, R_OK)) {
        test_skip("no BERT vocabulary in the shared folder");
        return;
    }
    char extra[600];
    snprintf(extra, sizeof extra, ", \"tokenizer\": \"wordpiece\", \"vocab_file\": \"%s\"", vocab);
    char *c = strdup(qa_cfg(train, "transformer_classifier", extra, 64));
    /* the model's vocabulary is the WordPiece one (30,522): keep it small otherwise */
    r = make_run(c);
    free(c);
    CHECK_NN(r);
    for (int64_t i = 0; r && i < r->train.n && i < 3; i++) {
        char *g = gold_text(&r->train, i);
        CHECKF(!strcmp(g, want[i]), "wordpiece example %lld: gold '%s'", (long long)i, g);
        free(g);
    }
    qkv_run_free(r);
}

TEST(models_without_features_are_named) {
    const char *train = test_write_file(dir, "qa.jsonl", DATA);
    snprintf(cfg, sizeof cfg, "{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"%s\", \"task\": \"qa\"}}",
             train);
    qkv_run *r = make_run(cfg);
    CHECKF(!r && strstr(qkv_last_error(), "model type 'embmean' exposes no per-token features"), "%s",
           r ? "(no error)" : qkv_last_error());
    qkv_run_free(r);
}

/* Cloze questions from Austen (3 sentences of context): a small Transformer's dev loss falls from ~log(80) per end
 * (4.4) to about 3.0 in 150 steps (EM and F1 about 25). */
TEST(learns_cloze_questions) {
    char lm_train[512], lm_dev[512]; /* test_shared_path's buffer is static: copy each */
    const char *p = test_shared_path("data/lm/train.txt");
    snprintf(lm_train, sizeof lm_train, "%s", p ? p : "");
    p = test_shared_path("data/lm/dev.txt");
    snprintf(lm_dev, sizeof lm_dev, "%s", p ? p : "");
    if (access(lm_train, R_OK) || access(lm_dev, R_OK)) {
        test_skip("shared lm data not found");
        return;
    }
    char tr[512], dv[512];
    snprintf(tr, sizeof tr, "%s/cloze_train.jsonl", dir);
    snprintf(dv, sizeof dv, "%s/cloze_dev.jsonl", dir);
    qkv_cloze_opts o = qkv_cloze_defaults();
    o.context_sentences = 3;
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(k ? dv : tr, "w");
        CHECK_OK(qkv_cloze_qa(k ? lm_dev : lm_train, f, &o, NULL));
        fclose(f);
    }
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"transformer_classifier\", \"d_model\": 32, \"n_layers\": 1, \"n_heads\": 2, "
             "\"d_ff\": 64, \"max_len\": 160, \"pos_enc\": \"learned\", \"dropout\": 0, \"attn_dropout\": 0}, "
             "\"data\": {\"train\": \"%s\", \"dev\": \"%s\", \"task\": \"qa\", \"max_len\": 160, \"min_freq\": 2}, "
             "\"train\": {\"steps\": 150, \"batch_size\": 16, \"checkpoint_every\": 0, \"optimizer\": {\"lr\": 0.003}}, "
             "\"eval\": {\"every\": 0}}", tr, dv);
    qkv_run *r = make_run(cfg);
    CHECK_NN(r);
    if (!r) return;
    cJSON *before = qkv__run_evaluate(r, &r->dev, 0);
    qkv_train_outcome out;
    CHECK_OK(qkv_run_train(r, NULL, &out));
    cJSON *after = qkv__run_evaluate(r, &r->dev, 0);
    double l0 = cJSON_GetNumberValue(cJSON_GetObjectItem(before, "loss"));
    double l1 = cJSON_GetNumberValue(cJSON_GetObjectItem(after, "loss"));
    double f1 = cJSON_GetNumberValue(cJSON_GetObjectItem(after, "f1"));
    printf("  dev loss %.3f -> %.3f, EM %.1f, F1 %.1f\n", l0, l1,
           cJSON_GetNumberValue(cJSON_GetObjectItem(after, "exact_match")), f1);
    CHECKF(l0 > 3.8 && l1 < 3.5 && f1 > 10, "dev loss %.3f -> %.3f, F1 %.1f", l0, l1, f1);
    cJSON_Delete(before);
    cJSON_Delete(after);
    /* The public answer call on one dev example gives a span of its context. */
    cJSON *a = qkv_run_answer(r, r->dev.qa->context[0], "Who XXXXX?");
    const char *text = a ? cJSON_GetStringValue(cJSON_GetObjectItem(a, "answer")) : NULL;
    CHECK(text && strstr(r->dev.qa->context[0], text));
    cJSON_Delete(a);
    qkv_run_free(r);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/qkv_qa_task_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(gold_spans_map_back_to_the_answer);
    RUN(models_without_features_are_named);
    RUN(learns_cloze_questions);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!getenv("KEEP") && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish();
}
