/* Pretrained word vectors as a run's initial embeddings (the "embeddings" config object, src/train/pretrained.c):
 * rows of known tokens equal the file's vectors bit for bit, unknown tokens keep the model's init, the lowercase
 * fallback, frozen matrices stay fixed through training while the rest moves, source and target embeddings of a
 * seq2seq model, a tied GPT head, resume without the file, and clear errors for bad files and settings. A tiny
 * GloVe file written here makes everything run without shared data; the real GloVe subset under QKV_SHARED adds a
 * coverage check on the sentiment data. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/config.h"
#include "qkv/glove.h"
#include "test.h"
#include "train/train_internal.h"

static char dir[256];
static int run_counter;

static const char *file(const char *name, const char *content) { return test_write_file(dir, name, content); }

/* Vectors with few significant digits or many: both must arrive as the loader reads them. */
static const char *GLOVE4 = "good 0.125 -0.5 1.75 2\n"
                            "film 0.1 0.2 0.3 0.4\n"
                            "bad -1.0e-3 3.14159265 -2.5 0.0625\n"
                            "movie 7 8 9 10\n";

static const char *CLS_TRAIN = "pos\tGood film good\nneg\tBad movie zzqx\npos\tgood good film\nneg\tbad bad "
                               "qqwv\n";

/* A fresh run directory under dir. */
static const char *run_dir(void) {
    static char p[512];
    snprintf(p, sizeof p, "%s/run%d", dir, run_counter++);
    return p;
}

/* A run from a JSON config text (a format string over the paths given). NULL when qkv_run_new fails. */
static qkv_run *make_run(const char *where, bool resume, const char *json) {
    cJSON *u = qkv_config_parse("test", json);
    qkv_run *r = u ? qkv_run_new(where, u, resume) : NULL;
    cJSON_Delete(u);
    return r;
}

static const float *row(qkv_run *r, const char *param, int64_t i) {
    qkv_tensor *w = qkv_params_find(r->params, param);
    return w ? qkv_f32(w) + i * w->shape[1] : NULL;
}

static int32_t id_of(const qkv_vocab *v, const char *tok) { return qkv_vocab_id(v, tok, strlen(tok)); }

/* Row `i` of param equals the file's vector of `word`, bit for bit. */
static bool row_is(qkv_run *r, const char *param, int32_t i, const qkv_vectors *v, const char *word) {
    int64_t k = qkv_vectors_find(v, word);
    const float *a = row(r, param, i);
    return k >= 0 && i >= 0 && a &&
           !memcmp(a, qkv_f32(qkv_vectors_matrix(v)) + k * qkv_vectors_dim(v), sizeof(float) * 4);
}

static bool rows_equal(qkv_run *a, qkv_run *b, const char *param, int32_t i) {
    const float *x = row(a, param, i), *y = row(b, param, i);
    return x && y && !memcmp(x, y, sizeof(float) * 4);
}

static char cfg[4096];
static const char *embmean_cfg(const char *train, const char *extra) {
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"embmean\", \"dim\": 4}, \"data\": {\"train\": \"%s\"}, "
             "\"train\": {\"steps\": 3, \"batch_size\": 4, \"checkpoint_every\": 0, \"optimizer\": {\"lr\": 0.1}}, "
             "\"eval\": {\"every\": 0}%s%s}",
             train, extra[0] ? ", " : "", extra);
    return cfg;
}

TEST(known_rows_bit_for_bit_unknown_keep_init) {
    const char *train = file("cls.tsv", CLS_TRAIN), *glove = file("g4.txt", GLOVE4);
    qkv_vectors *v = qkv_vectors_load(glove, QKV_VEC_AUTO);
    CHECK_NN(v);
    char extra[600];
    snprintf(extra, sizeof extra, "\"embeddings\": {\"pretrained\": \"%s\"}", glove);
    char d1[512];
    snprintf(d1, sizeof d1, "%s", run_dir());
    qkv_run *r = make_run(d1, false, embmean_cfg(train, extra));
    qkv_run *plain = make_run(run_dir(), false, embmean_cfg(train, ""));
    CHECK_NN(r);
    CHECK_NN(plain);
    if (!r || !plain || !v) goto done;
    const qkv_vocab *vocab = r->task.vocab;
    const char *known[] = {"good", "film", "bad", "movie"};
    for (int i = 0; i < 4; i++)
        CHECKF(row_is(r, "embedding.weight", id_of(vocab, known[i]), v, known[i]), "%s", known[i]);
    /* The model's own init elsewhere: same seed, same draws as a run without vectors. */
    CHECK(rows_equal(r, plain, "embedding.weight", id_of(vocab, "zzqx")));
    CHECK(rows_equal(r, plain, "embedding.weight", id_of(vocab, "qqwv")));
    CHECK(rows_equal(r, plain, "embedding.weight", r->task.pad));
    CHECK(rows_equal(r, plain, "embedding.weight", r->task.unk));
    CHECK(!rows_equal(r, plain, "embedding.weight", id_of(vocab, "good")));
    /* The coverage record: 4 of the 8 tokens (<pad>, <unk>, good, film, bad, movie, zzqx, qqwv). */
    char log[600];
    snprintf(log, sizeof log, "%s/log.jsonl", d1);
    FILE *f = fopen(log, "r");
    char line[1024] = "";
    CHECKF(f && fgets(line, sizeof line, f), "no %s", log);
    if (f) fclose(f);
    CHECKF(strstr(line, "\"kind\":\"pretrained\"") && strstr(line, "\"found\":4") && strstr(line, "\"tokens\":8"),
           "log record: %s", line);
done:
    qkv_run_free(r);
    qkv_run_free(plain);
    qkv_vectors_free(v);
}

TEST(lowercase_fallback) {
    const char *train = file("cls.tsv", CLS_TRAIN), *glove = file("g4.txt", GLOVE4);
    qkv_vectors *v = qkv_vectors_load(glove, QKV_VEC_AUTO);
    for (int fallback = 0; fallback < 2 && v; fallback++) {
        char extra[700];
        snprintf(extra, sizeof extra,
                 "\"data\": {\"train\": \"%s\", \"lowercase\": false}, \"embeddings\": {\"pretrained\": \"%s\", "
                 "\"lowercase_fallback\": %s}",
                 train, glove, fallback ? "true" : "false");
        snprintf(cfg, sizeof cfg,
                 "{\"model\": {\"type\": \"embmean\", \"dim\": 4}, \"eval\": {\"every\": 0}, %s}", extra);
        qkv_run *r = make_run(run_dir(), false, cfg);
        CHECK_NN(r);
        if (!r) continue;
        int32_t upper = id_of(r->task.vocab, "Good"), lower = id_of(r->task.vocab, "good");
        CHECK(upper >= 0 && lower >= 0 && upper != lower);
        CHECK(row_is(r, "embedding.weight", lower, v, "good"));
        CHECKF(row_is(r, "embedding.weight", upper, v, "good") == (fallback == 1), "fallback %d", fallback);
        qkv_run_free(r);
    }
    qkv_vectors_free(v);
}

static bool same_tensor(const qkv_tensor *a, const float *copy) {
    return !memcmp(qkv_f32(a), copy, sizeof(float) * (size_t)qkv_numel(a));
}

/* After a few steps: frozen keeps the embedding fixed while the classifier moves; tuned moves both. */
TEST(frozen_stays_fixed_tuned_moves) {
    const char *train = file("cls.tsv", CLS_TRAIN), *glove = file("g4.txt", GLOVE4);
    for (int frozen = 0; frozen < 2; frozen++) {
        char extra[600];
        snprintf(extra, sizeof extra, "\"embeddings\": {\"pretrained\": \"%s\", \"frozen\": %s}", glove,
                 frozen ? "true" : "false");
        qkv_run *r = make_run(run_dir(), false, embmean_cfg(train, extra));
        CHECK_NN(r);
        if (!r) continue;
        qkv_tensor *emb = qkv_params_find(r->params, "embedding.weight");
        qkv_tensor *cls = qkv_params_find(r->params, "classifier.weight");
        float *e0 = malloc(sizeof(float) * (size_t)qkv_numel(emb));
        float *c0 = malloc(sizeof(float) * (size_t)qkv_numel(cls));
        memcpy(e0, qkv_f32(emb), sizeof(float) * (size_t)qkv_numel(emb));
        memcpy(c0, qkv_f32(cls), sizeof(float) * (size_t)qkv_numel(cls));
        qkv_train_outcome out;
        CHECK_OK(qkv_run_train(r, NULL, &out));
        CHECK(qkv_run_step(r) == 3);
        CHECKF(same_tensor(emb, e0) == (frozen == 1), "frozen %d: embedding %s", frozen,
               frozen ? "moved" : "did not move");
        CHECK(!same_tensor(cls, c0));
        free(e0);
        free(c0);
        qkv_run_free(r);
    }
}

/* Resuming reads the checkpoint, not the vector file (which may be gone); frozen still holds. */
TEST(resume_does_not_read_the_file) {
    const char *train = file("cls.tsv", CLS_TRAIN), *glove = file("g_resume.txt", GLOVE4);
    char extra[600];
    snprintf(extra, sizeof extra, "\"embeddings\": {\"pretrained\": \"%s\", \"frozen\": true}", glove);
    char json[4096];
    snprintf(json, sizeof json, "%s", embmean_cfg(train, extra));
    char *p = strstr(json, "\"checkpoint_every\": 0");
    if (p) memcpy(p, "\"checkpoint_every\": 3", strlen("\"checkpoint_every\": 3"));
    char where[512];
    snprintf(where, sizeof where, "%s", run_dir());
    qkv_run *r = make_run(where, false, json);
    CHECK_NN(r);
    qkv_train_outcome out;
    if (r) CHECK_OK(qkv_run_train(r, NULL, &out));
    float e0[8 * 4] = {0};
    qkv_tensor *emb = r ? qkv_params_find(r->params, "embedding.weight") : NULL;
    if (emb) memcpy(e0, qkv_f32(emb), sizeof(float) * (size_t)qkv_numel(emb));
    qkv_run_free(r);
    unlink(glove);
    p = strstr(json, "\"steps\": 3");
    if (p) memcpy(p, "\"steps\": 6", strlen("\"steps\": 6"));
    r = make_run(where, true, json);
    CHECK_NN(r);
    if (!r) return;
    CHECK(qkv_run_step(r) == 3);
    emb = qkv_params_find(r->params, "embedding.weight");
    CHECK(emb && qkv_numel(emb) == 32 && same_tensor(emb, e0));
    CHECK_OK(qkv_run_train(r, NULL, &out));
    CHECK(qkv_run_step(r) == 6);
    CHECK(emb && same_tensor(emb, e0));
    qkv_run_free(r);
}

/* Every bad input: an error naming what is wrong, no run. */
static void expect_error(const char *json, const char *a, const char *b) {
    qkv_run *r = make_run(run_dir(), false, json);
    CHECKF(r == NULL, "expected an error containing '%s'", a);
    qkv_run_free(r);
    const char *msg = qkv_last_error();
    CHECKF(strstr(msg, a) && (!b || strstr(msg, b)), "message lacks '%s'/'%s': %s", a, b ? b : "", msg);
}

TEST(errors) {
    const char *train = file("cls.tsv", CLS_TRAIN), *glove = file("g4.txt", GLOVE4);
    char extra[700], json[4096];
    /* The file's dimension against the model's: both numbers and the file. */
    snprintf(extra, sizeof extra, "\"embeddings\": {\"pretrained\": \"%s\"}", glove);
    snprintf(json, sizeof json, "%s", embmean_cfg(train, extra));
    char *p = strstr(json, "\"dim\": 4");
    if (p) memcpy(p, "\"dim\": 8", 8);
    expect_error(json, "4-dimensional", "dimension 8");
    expect_error(json, "g4.txt", NULL);
    /* A missing file. */
    snprintf(extra, sizeof extra, "\"embeddings\": {\"pretrained\": \"%s/no_such.txt\"}", dir);
    expect_error(embmean_cfg(train, extra), "no_such.txt: cannot open", "embeddings.pretrained");
    /* A malformed line: file and line. */
    const char *bad = file("bad.txt", "good 1 2 3 4\nfilm 1 2 3 4\nbad 1 2 x 4\n");
    snprintf(extra, sizeof extra, "\"embeddings\": {\"pretrained\": \"%s\"}", bad);
    expect_error(embmean_cfg(train, extra), "bad.txt:3", "not a finite number");
    const char *short_line = file("short.txt", "good 1 2 3 4\nfilm 1 2 3\n");
    snprintf(extra, sizeof extra, "\"embeddings\": {\"pretrained\": \"%s\"}", short_line);
    expect_error(embmean_cfg(train, extra), "short.txt:2", "expected 4");
    /* Not a path. */
    expect_error(embmean_cfg(train, "\"embeddings\": {\"pretrained\": 3}"), "embeddings.pretrained", "file path");
    expect_error(embmean_cfg(train, "\"embeddings\": {\"format\": \"csv\"}"), "embeddings.format", NULL);
    expect_error(embmean_cfg(train, "\"embeddings\": {\"frozen\": 1}"), "embeddings.frozen", NULL);
    expect_error(embmean_cfg(train, "\"embeddings\": {\"vectors\": \"x\"}"), "embeddings.vectors: unknown key", NULL);
    /* The classifier's own safetensors path and the run-level one at once. */
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"transformer_classifier\", \"d_model\": 4, \"n_heads\": 1, \"d_ff\": 8, "
             "\"n_layers\": 1, \"embeddings\": {\"pretrained\": \"x.safetensors\"}}, \"data\": {\"train\": \"%s\"}, "
             "\"embeddings\": {\"pretrained\": \"%s\"}}",
             train, glove);
    expect_error(json, "model.embeddings.pretrained", "both set");
}

/* Both sides of a seq2seq model with separate vocabularies; the padding row is never overwritten. */
TEST(seq2seq_source_and_target) {
    const char *train = file("mt.tsv", "good film\tmovie bad\nbad movie\tgood zzqx\n");
    const char *glove = file("g4pad.txt", "<pad> 9 9 9 9\ngood 0.125 -0.5 1.75 2\nfilm 0.1 0.2 0.3 0.4\n"
                                          "bad -1.0e-3 3.14159265 -2.5 0.0625\nmovie 7 8 9 10\n");
    qkv_vectors *v = qkv_vectors_load(glove, QKV_VEC_AUTO);
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"lstm_seq2seq\", \"embed\": 4, \"hidden\": 4}, \"data\": {\"train\": \"%s\", "
             "\"tokenizer\": \"word\"}, \"eval\": {\"every\": 0}, \"embeddings\": {\"pretrained\": \"%s\"}}",
             train, glove);
    qkv_run *r = make_run(run_dir(), false, cfg);
    CHECK_NN(r);
    if (r && v) {
        CHECK(r->task.tgt_vocab != NULL);
        const qkv_vocab *sv = r->task.vocab, *tv = r->task.tgt_vocab ? r->task.tgt_vocab : r->task.vocab;
        CHECK(row_is(r, "src_emb.weight", id_of(sv, "good"), v, "good"));
        CHECK(row_is(r, "src_emb.weight", id_of(sv, "film"), v, "film"));
        CHECK(row_is(r, "tgt_emb.weight", id_of(tv, "movie"), v, "movie"));
        CHECK(row_is(r, "tgt_emb.weight", id_of(tv, "good"), v, "good"));
        CHECK(!row_is(r, "src_emb.weight", r->task.pad, v, "<pad>"));
        CHECK(!row_is(r, "tgt_emb.weight", r->task.tgt_pad, v, "<pad>"));
    }
    qkv_run_free(r);
    qkv_vectors_free(v);
}

/* GPT with its tied head: the vectors initialise the head too and training runs; freezing a tied matrix is
 * refused (it would freeze the output layer). */
TEST(gpt_tied_head) {
    const char *train = file("lm.txt", "good film bad movie good film good movie bad film zzqx good film\n"
                                       "bad movie good film bad good film movie\n");
    const char *glove = file("g4.txt", GLOVE4);
    qkv_vectors *v = qkv_vectors_load(glove, QKV_VEC_AUTO);
    for (int frozen = 0; frozen < 2 && v; frozen++) {
        snprintf(cfg, sizeof cfg,
                 "{\"model\": {\"type\": \"gpt\", \"d_model\": 4, \"n_heads\": 1, \"d_ff\": 8, \"n_layers\": 1}, "
                 "\"data\": {\"train\": \"%s\", \"tokenizer\": \"word\", \"seq_len\": 4}, \"train\": {\"steps\": 5, "
                 "\"batch_size\": 2, \"checkpoint_every\": 0, \"log_every\": 1}, \"eval\": {\"every\": 0}, "
                 "\"embeddings\": {\"pretrained\": \"%s\", \"frozen\": %s}}",
                 train, glove, frozen ? "true" : "false");
        if (frozen) {
            expect_error(cfg, "model.tied", "output projection");
            continue;
        }
        qkv_run *r = make_run(run_dir(), false, cfg);
        CHECK_NN(r);
        if (!r) continue;
        CHECK(row_is(r, "transformer.wte.weight", id_of(r->task.vocab, "film"), v, "film"));
        qkv_train_outcome out;
        CHECK_OK(qkv_run_train(r, NULL, &out));
        CHECK(qkv_run_step(r) == 5);
        CHECK(!row_is(r, "transformer.wte.weight", id_of(r->task.vocab, "film"), v, "film")); /* tuned */
        cJSON *ev = qkv_run_eval(r, NULL, train);
        CHECK_NN(ev);
        double loss = ev ? cJSON_GetNumberValue(cJSON_GetObjectItem(ev, "loss")) : NAN;
        CHECKF(isfinite(loss), "loss %g", loss);
        cJSON_Delete(ev);
        qkv_run_free(r);
    }
    qkv_vectors_free(v);
}

/* The real GloVe subset on the sentiment data: most words are covered, and a known one is exact. */
TEST(shared_glove_on_sentiment) {
    const char *glove = test_shared_path("pretrained/glove-6B-100d-top20k/glove.6B.100d.top20k.txt");
    if (!glove || !test_file_exists(glove)) {
        test_skip("no QKV_SHARED glove-6B-100d-top20k");
        return;
    }
    char g[1024], t[1024];
    snprintf(g, sizeof g, "%s", glove);
    snprintf(t, sizeof t, "%s", test_shared_path("data/sentiment/train.tsv"));
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"transformer_classifier\", \"d_model\": 100, \"n_heads\": 2, \"d_ff\": 64, "
             "\"n_layers\": 1}, \"data\": {\"train\": \"%s\"}, \"eval\": {\"every\": 0}, \"embeddings\": "
             "{\"pretrained\": \"%s\"}}",
             t, g);
    char d[512];
    snprintf(d, sizeof d, "%s", run_dir());
    qkv_run *r = make_run(d, false, cfg);
    CHECK_NN(r);
    qkv_vectors *v = qkv_vectors_load(g, QKV_VEC_AUTO);
    if (r && v) {
        int32_t id = id_of(r->task.vocab, "great");
        int64_t k = qkv_vectors_find(v, "great");
        const float *a = row(r, "embedding.weight", id);
        CHECK(id >= 0 && k >= 0 && a && !memcmp(a, qkv_f32(qkv_vectors_matrix(v)) + k * 100, sizeof(float) * 100));
        char log[600];
        snprintf(log, sizeof log, "%s/log.jsonl", d);
        FILE *f = fopen(log, "r");
        char line[2048] = "";
        if (f && fgets(line, sizeof line, f)) {
            cJSON *rec = cJSON_Parse(line);
            double cov = cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "coverage"));
            printf("  sentiment vocabulary: %.0f of %.0f tokens in GloVe top-20k (%.1f%%)\n",
                   cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "found")),
                   cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "tokens")), 100 * cov);
            CHECKF(cov > 0.65, "coverage %g", cov); /* 71.7%: the top-20k subset misses rarer review words */
            cJSON_Delete(rec);
        } else {
            CHECKF(false, "no record in %s", log);
        }
        if (f) fclose(f);
    }
    qkv_vectors_free(v);
    qkv_run_free(r);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/qkv_pretrained_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(known_rows_bit_for_bit_unknown_keep_init);
    RUN(lowercase_fallback);
    RUN(frozen_stays_fixed_tuned_moves);
    RUN(resume_does_not_read_the_file);
    RUN(errors);
    RUN(seq2seq_source_and_target);
    RUN(gpt_tied_head);
    RUN(shared_glove_on_sentiment);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish();
}
