/* Runs with a BPE trained on the training split: seq2seq with shared and separate vocabularies (files kept in the
 * run dir, reopened exactly, targets decoded back to their text, BLEU on detokenized text), an lm, resume without
 * retraining, and config errors. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/config.h"
#include "test.h"
#include "train/train_internal.h"

static char root[256];

static const char *path_of(const char *name) {
    static char p[4][512];
    static int k;
    char *out = p[k++ % 4];
    snprintf(out, 512, "%s/%s", root, name);
    return out;
}

static void write_file(const char *name, const char *text) { test_write_file(root, name, text); }

/* Pairs with repeated words (so merges happen), accents (multi-byte characters), punctuation and a literal "<s>". */
static const char PAIRS[] = "the cat sat on the mat\tle chat est assis sur le tapis\n"
                            "the dog sat on the log\tle chien est assis sur la bûche\n"
                            "a cat and a dog\tun chat et un chien\n"
                            "the cat saw the dog\tle chat a vu le chien\n"
                            "where is the café?\toù est le café ?\n"
                            "the tag <s> stays text\tla balise <s> reste du texte </s>\n"
                            "the dog and the cat sat\tle chien et le chat sont assis\n"
                            "on the mat on the log\tsur le tapis sur la bûche\n";

/* A resolved config: model JSON, data members (without braces), steps. */
static cJSON *config(const char *model, const char *data, int steps) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"model\": %s, \"data\": {%s}, \"train\": {\"steps\": %d, \"batch_size\": 4, \"log_every\": 1, "
             "\"checkpoint_every\": 2}, \"eval\": {\"every\": %d, \"bleu\": true}}",
             model, data, steps, steps);
    cJSON *u = qkv_config_parse("t", text);
    cJSON *c = u ? qkv_config_resolve(u, NULL) : NULL;
    CHECKF(c != NULL, "config: %s", qkv_last_error());
    cJSON_Delete(u);
    return c;
}

static const char S2S_MODEL[] = "{\"type\": \"transformer_seq2seq\", \"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, "
                                "\"n_enc_layers\": 1, \"n_dec_layers\": 1, \"dropout\": 0, \"max_len\": 64}";

static qkv_run *train_run(const char *dir, cJSON *cfg) {
    qkv_run *r = qkv_run_new(dir, cfg, false);
    CHECKF(r != NULL, "qkv_run_new: %s", qkv_last_error());
    if (!r) return NULL;
    qkv_train_outcome out;
    CHECK_OK(qkv_run_train(r, NULL, &out));
    return r;
}

/* Every target of the training file, decoded from its ids by the reopened run, is its line exactly. */
static void check_targets_round_trip(qkv_run *r, const char *train) {
    split s;
    CHECK_OK(qkv__task_load(&r->task, train, &s));
    char *text = test_read_file(train), *line = text;
    for (int64_t i = 0; text && i < s.n && *line; i++) {
        char *end = strchr(line, '\n'), *tab = strchr(line, '\t');
        *end = '\0';
        const example *e = &s.ex[i];
        CHECK(s.pool[e->toff] == r->task.tgt_bos && s.pool[e->toff + e->tn - 1] == r->task.tgt_eos);
        char *dec = NULL;
        CHECK_OK(qkv_run_decode_target(r, s.pool + e->toff, (size_t)e->tn, &dec));
        CHECKF(dec && !strcmp(dec, tab + 1), "target %lld: '%s' decoded as '%s'", (long long)i, tab + 1,
               dec ? dec : "(null)");
        free(dec);
        /* the source side through the public encoder gives the pipeline's ids */
        *tab = '\0';
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_OK(qkv_run_encode(r, line, &ids, &n));
        CHECK((int64_t)n == e->n && (n == 0 || !memcmp(ids, s.pool + e->off, n * sizeof *ids)));
        free(ids);
        line = end + 1;
    }
    free(text);
    qkv__split_free(&s);
}

static void seq2seq_run(const char *name, bool shared) {
    write_file("pairs.tsv", PAIRS);
    char data[1024], dir[512];
    snprintf(dir, sizeof dir, "%s", path_of(name));
    snprintf(data, sizeof data,
             "\"train\": \"%s\", \"dev\": \"%s\", \"tokenizer\": \"bpe\", \"bpe_vocab_size\": 300, "
             "\"shared_vocab\": %s",
             path_of("pairs.tsv"), path_of("pairs.tsv"), shared ? "true" : "false");
    cJSON *cfg = config(S2S_MODEL, data, 2);
    if (!cfg) return;
    qkv_run *r = train_run(dir, cfg);
    if (r) {
        const task *t = &r->task;
        /* Specials follow the byte-level vocabulary: 256 bytes + merges, then <pad> <s> </s>. */
        int64_t tv = shared ? t->vocab_size : t->tgt_vocab_size;
        CHECKF(t->vocab_size > 259 && t->vocab_size <= 303, "vocab size %lld", (long long)t->vocab_size);
        CHECK(t->tgt_pad == tv - 3 && t->tgt_bos == tv - 2 && t->tgt_eos == tv - 1);
        CHECK(t->pad == t->vocab_size - 3);
        CHECK(shared ? t->tgt_bpe == NULL && t->tgt_vocab_size == 0 : t->tgt_bpe != NULL && t->tgt_vocab_size > 259);
        /* BLEU on the detokenized text runs on an untrained model's arbitrary bytes */
        cJSON *m = qkv_run_eval(r, "dev", NULL);
        CHECKF(m != NULL, "eval: %s", qkv_last_error());
        const cJSON *b = m ? cJSON_GetObjectItem(m, "bleu") : NULL;
        CHECK(b && b->valuedouble >= 0 && b->valuedouble <= 100);
        cJSON_Delete(m);
        qkv_run_free(r);
    }
    char files[600];
    snprintf(files, sizeof files, "%s/vocab.json", dir);
    CHECK(test_file_exists(files));
    snprintf(files, sizeof files, "%s/tgt_merges.txt", dir);
    CHECK(test_file_exists(files) == !shared);
    /* Reopened from the run dir alone: same tokenizer, exact round trip. */
    r = qkv_run_open(dir, NULL);
    CHECKF(r != NULL, "qkv_run_open: %s", qkv_last_error());
    if (r) {
        check_targets_round_trip(r, path_of("pairs.tsv"));
        /* a literal "<s>" in the source is text, not the special id */
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_OK(qkv_run_encode(r, "<s>", &ids, &n));
        CHECK(n >= 1 && ids[0] != r->task.bos && ids[0] != r->task.pad);
        free(ids);
        qkv_run_free(r);
    }
    cJSON_Delete(cfg);
}

TEST(seq2seq_shared_bpe) { seq2seq_run("s2s_shared", true); }

TEST(seq2seq_separate_bpe) { seq2seq_run("s2s_separate", false); }

TEST(resume_keeps_the_trained_bpe) {
    write_file("resume.tsv", PAIRS);
    char data[1024], dir[512];
    snprintf(dir, sizeof dir, "%s", path_of("s2s_resume"));
    snprintf(data, sizeof data, "\"train\": \"%s\", \"tokenizer\": \"bpe\", \"bpe_vocab_size\": 280",
             path_of("resume.tsv"));
    cJSON *cfg = config(S2S_MODEL, data, 2);
    if (!cfg) return;
    qkv_run *r = train_run(dir, cfg);
    qkv_run_free(r);
    char vj[600];
    snprintf(vj, sizeof vj, "%s/vocab.json", dir);
    char *before = test_read_file(vj);
    /* Different training text: a retrained BPE would differ. */
    write_file("resume.tsv", "zzz qqq zzz qqq\txxx yyy xxx yyy\nzzz zzz\tyyy yyy\n");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cfg, "train"), "steps", cJSON_CreateNumber(3));
    r = qkv_run_new(dir, cfg, true);
    CHECKF(r != NULL, "resume: %s", qkv_last_error());
    if (r) {
        qkv_train_outcome out;
        CHECK_OK(qkv_run_train(r, NULL, &out));
        CHECK(qkv_run_step(r) == 3);
        qkv_run_free(r);
    }
    char *after = test_read_file(vj);
    CHECK(before && after && !strcmp(before, after));
    free(before);
    free(after);
    cJSON_Delete(cfg);
}

TEST(lm_with_a_trained_bpe) {
    char text[4096] = "";
    for (int i = 0; i < 20; i++) strcat(text, "the cat sat on the mat. the dog sat on the log, café.\n");
    write_file("lm.txt", text);
    char data[1024], dir[512];
    snprintf(dir, sizeof dir, "%s", path_of("lm_run"));
    snprintf(data, sizeof data, "\"train\": \"%s\", \"tokenizer\": \"bpe\", \"bpe_vocab_size\": 300, \"seq_len\": 16",
             path_of("lm.txt"));
    cJSON *cfg = config("{\"type\": \"gpt\", \"d_model\": 16, \"n_layers\": 1, \"n_heads\": 2, \"d_ff\": 32}", data, 2);
    if (!cfg) return;
    qkv_run *r = train_run(dir, cfg);
    if (r) CHECK(r->task.vocab_size > 256 && r->task.vocab_size <= 300);
    qkv_run_free(r);
    r = qkv_run_open(dir, NULL);
    CHECKF(r != NULL, "qkv_run_open: %s", qkv_last_error());
    if (r) {
        const char *s = "the cat sat on the log, café.";
        int32_t *ids = NULL;
        size_t n = 0;
        char *back = NULL;
        CHECK_OK(qkv_run_encode(r, s, &ids, &n));
        CHECK(n > 0 && n < strlen(s)); /* merges learned */
        CHECK_OK(qkv_run_decode(r, ids, n, &back));
        CHECK(back && !strcmp(back, s));
        free(ids);
        free(back);
        cJSON *p = qkv_run_predict(r, "the dog sat on the mat.");
        CHECKF(p != NULL, "predict: %s", qkv_last_error());
        cJSON_Delete(p);
        qkv_run_free(r);
    }
    cJSON_Delete(cfg);
}

static void expect_config_error(const char *data_extra, const char *needle) {
    char text[1024];
    snprintf(text, sizeof text, "{\"model\": {\"type\": \"gpt\"}, \"data\": {\"train\": \"x.txt\", %s}}", data_extra);
    cJSON *u = qkv_config_parse("t", text);
    cJSON *c = u ? qkv_config_resolve(u, NULL) : NULL;
    CHECKF(c == NULL && strstr(qkv_last_error(), needle), "%s: got '%s'", data_extra, c ? "ok" : qkv_last_error());
    cJSON_Delete(c);
    cJSON_Delete(u);
}

TEST(bad_bpe_settings_are_errors) {
    expect_config_error("\"bpe_vocab_size\": 0", "data.bpe_vocab_size: expected an integer in [257");
    expect_config_error("\"bpe_vocab_size\": 1e12", "data.bpe_vocab_size");
    expect_config_error("\"bpe_vocab_size\": 300.5", "data.bpe_vocab_size");
    expect_config_error("\"bpe_min_freq\": 0", "data.bpe_min_freq");
    /* vocab_file without merges_file, for seq2seq and lm */
    write_file("bad.tsv", PAIRS);
    char data[1024];
    snprintf(data, sizeof data, "\"train\": \"%s\", \"tokenizer\": \"bpe\", \"vocab_file\": \"%s\"",
             path_of("bad.tsv"), path_of("bad.tsv"));
    cJSON *cfg = config(S2S_MODEL, data, 2);
    task t;
    if (cfg) {
        CHECK(qkv__task_prepare(&t, cfg, "seq2seq", path_of("bad_run"), true) == QKV_ERR_INVALID);
        CHECKF(strstr(qkv_last_error(), "needs both vocab_file and merges_file"), "%s", qkv_last_error());
        qkv__task_free(&t);
        CHECK(qkv__task_prepare(&t, cfg, "lm", path_of("bad_run"), true) == QKV_ERR_INVALID);
        qkv__task_free(&t);
    }
    cJSON_Delete(cfg);
    /* seq2seq still has no char tokenizer */
    snprintf(data, sizeof data, "\"train\": \"%s\", \"tokenizer\": \"char\"", path_of("bad.tsv"));
    cfg = config(S2S_MODEL, data, 2);
    if (cfg) {
        CHECK(qkv__task_prepare(&t, cfg, "seq2seq", path_of("bad_run"), true) == QKV_ERR_UNSUPPORTED);
        CHECKF(strstr(qkv_last_error(), "word and bpe"), "%s", qkv_last_error());
        qkv__task_free(&t);
    }
    cJSON_Delete(cfg);
}

int main(void) {
    snprintf(root, sizeof root, "%s/qkv_run_bpe_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(root)) {
        printf("cannot create a temporary directory\n");
        return 1;
    }
    RUN(seq2seq_shared_bpe);
    RUN(seq2seq_separate_bpe);
    RUN(resume_keeps_the_trained_bpe);
    RUN(lm_with_a_trained_bpe);
    RUN(bad_bpe_settings_are_errors);
    int rc = test_finish();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) printf("note: could not remove %s\n", root);
    return rc;
}
