/* Task data pipelines: labels in sorted order, vocabularies built from train and saved, truncation, [CLS], lm windows
 * with targets shifted by one, seq2seq decoder inputs shifted right, padding and masks, and bad-input errors. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qkv/config.h"
#include "test.h"
#include "train/train_internal.h"

static char dir[256];

static const char *file(const char *name, const char *content) { return test_write_file(dir, name, content); }

/* A resolved config with data.train set and extra data settings (JSON members without braces). */
static cJSON *config(const char *type, const char *train, const char *data_extra) {
    char text[2048];
    snprintf(text, sizeof text, "{\"model\": {\"type\": \"%s\"}, \"data\": {\"train\": \"%s\"%s%s}}", type, train,
             data_extra[0] ? ", " : "", data_extra);
    cJSON *u = qkv_config_parse("t", text);
    cJSON *c = u ? qkv_config_resolve(u, NULL) : NULL;
    cJSON_Delete(u);
    return c;
}

static int32_t id_of(const task *t, const char *tok) { return qkv_vocab_id(t->vocab, tok, strlen(tok)); }

TEST(classify_pipeline) {
    const char *train = file("cls_train.tsv", "pos\tGood, good film good!\nneg\tBad film\nmid\tok\npos\tgreat\n");
    cJSON *cfg = config("embmean", train, "\"max_len\": 2, \"cls_token\": true");
    CHECK_NN(cfg);
    if (!cfg) return;
    task t;
    CHECK_OK(qkv__task_prepare(&t, cfg, "classify", dir, true));
    CHECK(t.n_labels == 3 && !strcmp(t.labels[0], "mid") && !strcmp(t.labels[1], "neg") && !strcmp(t.labels[2], "pos"));
    CHECK(t.pad == 0 && t.unk == 1 && t.cls == 2);
    CHECK(id_of(&t, "good") == 3); /* most frequent word first, after <pad> <unk> [CLS] */
    split s;
    CHECK_OK(qkv__task_load(&t, train, &s));
    CHECK(s.n == 4);
    /* "Good, good film good!" -> [CLS] good (max_len 2 counts the [CLS]) */
    CHECK(s.ex[0].n == 2 && s.ex[0].label == 2);
    CHECK(s.pool[s.ex[0].off] == t.cls && s.pool[s.ex[0].off + 1] == id_of(&t, "good"));
    qkv_ctx *ctx = qkv_ctx_new();
    int64_t idx[2] = {2, 1}, real = 0;
    qkv_batch b;
    CHECK_OK(qkv__batch_make(ctx, &t, &s, idx, 2, &b, &real));
    CHECK(b.ids->shape[0] == 2 && b.ids->shape[1] == 2 && b.n_tokens == 2 && real == 4);
    CHECK(qkv_i32(b.labels)[0] == 0 && qkv_i32(b.labels)[1] == 1);
    qkv_ctx_free(ctx);
    qkv__split_free(&s);
    /* The vocabulary and labels were saved and load back the same. */
    task u;
    CHECK_OK(qkv__task_prepare(&u, cfg, "classify", dir, false));
    CHECK(u.n_labels == 3 && u.vocab_size == t.vocab_size && u.cls == t.cls);
    qkv__task_free(&u);
    /* A dev label the training data did not have: an error naming file and line. */
    const char *dev = file("cls_dev.tsv", "pos\tfine\nodd\tfilm\n");
    CHECK(qkv__task_load(&t, dev, &s) == QKV_ERR_FORMAT);
    CHECKF(strstr(qkv_last_error(), "cls_dev.tsv:2: label 'odd'") != NULL, "%s", qkv_last_error());
    const char *three = file("cls_bad.tsv", "pos\ta\tb\n");
    CHECK(qkv__task_load(&t, three, &s) != QKV_OK);
    CHECKF(strstr(qkv_last_error(), "cls_bad.tsv:1") != NULL, "%s", qkv_last_error());
    qkv__task_free(&t);
    cJSON_Delete(cfg);
}

TEST(lm_pipeline) {
    const char *train = file("lm.txt", "abcab\nba\n");
    cJSON *cfg = config("embmean", train, "\"seq_len\": 4, \"tokenizer\": \"char\"");
    CHECK_NN(cfg);
    if (!cfg) return;
    task t;
    CHECK_OK(qkv__task_prepare(&t, cfg, "lm", dir, true));
    split s;
    CHECK_OK(qkv__task_load(&t, train, &s));
    /* Stream: a b c a b <nl> b a <nl> = 9 tokens; windows of 5 with stride 4: [0,5) [4,9) and the tail [8,9) is
     * too short to predict anything. */
    CHECK(s.pool_n == 9 && s.n == 2);
    CHECK(s.ex[0].off == 0 && s.ex[0].n == 5 && s.ex[1].off == 4 && s.ex[1].n == 5);
    CHECK(s.pool[5] == id_of(&t, "<nl>") && s.pool[0] == id_of(&t, "a"));
    CHECK(s.n_chars == 9);
    qkv_ctx *ctx = qkv_ctx_new();
    int64_t idx[1] = {1};
    qkv_batch b;
    CHECK_OK(qkv__batch_make(ctx, &t, &s, idx, 1, &b, NULL));
    CHECK(b.ids->shape[1] == 4 && b.n_tokens == 4);
    for (int j = 0; j < 4; j++) {
        CHECK(qkv_i32(b.ids)[j] == s.pool[4 + j]);
        CHECK(qkv_i32(b.targets)[j] == s.pool[5 + j]); /* targets = inputs shifted by one */
        CHECK(qkv_f32(b.mask)[j] == 1.0f);
    }
    qkv_ctx_free(ctx);
    qkv__split_free(&s);
    /* A text for prediction: windows over it. */
    CHECK_OK(qkv__task_encode_text(&t, "abcabcabc", &s));
    CHECK(s.n == 3 && s.ex[2].off == 8 && s.ex[2].n == 2); /* 10 tokens with <nl>: [0,5) [4,9) [8,10) */
    qkv__split_free(&s);
    CHECK(qkv__task_encode_text(&t, "", &s) == QKV_ERR_INVALID); /* <nl> alone predicts nothing */
    qkv__split_free(&s);
    qkv__task_free(&t);
    cJSON_Delete(cfg);
}

TEST(seq2seq_pipeline) {
    const char *train = file("mt.tsv", "a b\tx y z\nb\tz\n");
    cJSON *cfg = config("embmean", train, "\"max_len\": 8");
    CHECK_NN(cfg);
    if (!cfg) return;
    task t;
    CHECK_OK(qkv__task_prepare(&t, cfg, "seq2seq", dir, true));
    CHECK(t.tgt_vocab != NULL && t.tgt_vocab_size == 7); /* <pad> <unk> <s> </s> z x y */
    split s;
    CHECK_OK(qkv__task_load(&t, train, &s));
    CHECK(s.n == 2 && s.ex[0].n == 2 && s.ex[0].tn == 5);
    qkv_ctx *ctx = qkv_ctx_new();
    int64_t idx[2] = {0, 1};
    qkv_batch b;
    CHECK_OK(qkv__batch_make(ctx, &t, &s, idx, 2, &b, NULL));
    CHECK(b.src_ids->shape[1] == 2 && b.ids->shape[1] == 4 && b.n_tokens == 4 + 2);
    const int32_t *in = qkv_i32(b.ids), *tg = qkv_i32(b.targets);
    CHECK(in[0] == t.tgt_bos && tg[3] == t.tgt_eos);   /* <s> x y z  ->  x y z </s> */
    CHECK(in[1] == tg[0] && in[2] == tg[1] && in[3] == tg[2]);
    CHECK(in[4] == t.tgt_bos && tg[4] == in[5] && tg[5] == t.tgt_eos); /* second row: <s> z -> z </s> */
    CHECK(qkv_f32(b.mask)[6] == 0.0f && in[6] == t.tgt_pad && qkv_f32(b.src_mask)[3] == 0.0f);
    CHECK(b.weights == NULL); /* train.loss_average tokens: every target token weighs alike */
    /* train.loss_average examples: each row's target tokens weigh 1 / their count, padding 0, so the weighted mean
     * of the token losses is the mean of the two examples' means */
    task te;
    cJSON_SetValuestring(cJSON_GetObjectItem(cJSON_GetObjectItem(cfg, "train"), "loss_average"), "examples");
    CHECK_OK(qkv__task_prepare(&te, cfg, "seq2seq", dir, true));
    CHECK_OK(qkv__batch_make(ctx, &te, &s, idx, 2, &b, NULL));
    const float *w = b.weights ? qkv_f32(b.weights) : NULL;
    CHECK(w && w[0] == 0.25f && w[3] == 0.25f && w[4] == 0.5f && w[5] == 0.5f && w[6] == 0.0f && w[7] == 0.0f);
    qkv__task_free(&te);
    CHECK(qkv__task_prepare(&te, cfg, "classify", dir, true) == QKV_ERR_UNSUPPORTED);
    CHECK(strstr(qkv_last_error(), "train.loss_average") != NULL);
    qkv__task_free(&te);
    cJSON_SetValuestring(cJSON_GetObjectItem(cJSON_GetObjectItem(cfg, "train"), "loss_average"), "tokens");
    qkv_ctx_free(ctx);
    qkv__split_free(&s);
    /* Scoring: an unknown word must not match the reference's own <unk> (both are decoded from ids). */
    char *ref = NULL, *hyp = NULL;
    const int32_t x = qkv_vocab_id(t.tgt_vocab, "x", 1), z = qkv_vocab_id(t.tgt_vocab, "z", 1);
    const int32_t ref_ids[3] = {x, t.unk, z}, hyp_ids[4] = {t.unk, x, t.unk, t.unk};
    CHECK_OK(qkv__task_decode_target(&t, ref_ids, 3, &ref));
    CHECK_OK(qkv__task_decode_target(&t, hyp_ids, 4, &hyp));
    qkv__task_hyp_for_scoring(&t, hyp);
    CHECK(ref && !strcmp(ref, "x <unk> z") && hyp && !strcmp(hyp, "x"));
    free(ref);
    free(hyp);
    char all_unk[] = "<unk> <unk>", word[] = "<unk>x y";
    qkv__task_hyp_for_scoring(&t, all_unk);
    qkv__task_hyp_for_scoring(&t, word);
    CHECK(!strcmp(all_unk, "") && !strcmp(word, "<unk>x y"));
    CHECK(qkv__task_encode_text(&t, "a", &s) == QKV_ERR_UNSUPPORTED);
    qkv__task_free(&t);
    cJSON_Delete(cfg);
}

/* A run with sentinel ids reads "<extra_id_K>" in a text as sentinel K (T5's tokenizer), K below data.sentinels;
 * anything else that looks alike stays text. */
TEST(sentinels_in_text) {
    const char *train = file("st.tsv", "a b\tb a\n");
    cJSON *cfg = config("embmean", train, "\"max_len\": 16, \"shared_vocab\": true, \"keep_sentinels\": true, "
                                          "\"sentinels\": 3");
    CHECK_NN(cfg);
    if (!cfg) return;
    task t;
    CHECK_OK(qkv__task_prepare(&t, cfg, "seq2seq", dir, true));
    CHECK(t.base_vocab > 0 && t.vocab_size == t.base_vocab + 3);
    const int32_t a = id_of(&t, "a"), b = id_of(&t, "b"), top = (int32_t)t.vocab_size - 1;
    int32_t *ids = NULL;
    size_t n = 0;
    const char *text = "a <extra_id_0> b<extra_id_2><extra_id_1>";
    CHECK_OK(qkv__task_encode_ids(&t, text, strlen(text), &ids, &n));
    CHECK(n == 5 && ids && ids[0] == a && ids[1] == top && ids[2] == b && ids[3] == top - 2 && ids[4] == top - 1);
    free(ids);
    const char *only = "<extra_id_0>";
    CHECK_OK(qkv__task_encode_ids(&t, only, strlen(only), &ids, &n));
    CHECK(n == 1 && ids && ids[0] == top);
    free(ids);
    const char *plain[] = {"a <extra_id_3> b", "a <extra_id_> b", "a <extra_id_1 b", "<extra_id_01x>"};
    for (int k = 0; k < 4; k++) {
        ids = NULL;
        CHECK_OK(qkv__task_encode_ids(&t, plain[k], strlen(plain[k]), &ids, &n));
        for (size_t i = 0; i < n; i++) CHECK(ids[i] < t.base_vocab);
        free(ids);
    }
    qkv__task_free(&t);
    cJSON_Delete(cfg);
}

TEST(unsupported_choices) {
    const char *train = file("u.tsv", "1\ta\n");
    cJSON *cfg = config("embmean", train, "\"tokenizer\": \"char\"");
    task t;
    CHECK(qkv__task_prepare(&t, cfg, "classify", dir, true) == QKV_ERR_UNSUPPORTED);
    qkv__task_free(&t);
    cJSON_Delete(cfg);
    cfg = config("embmean", train, "\"tokenizer\": \"wordpiece\"");
    CHECK(qkv__task_prepare(&t, cfg, "classify", dir, true) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "data.vocab_file") != NULL);
    qkv__task_free(&t);
    /* tagging takes a pretrained encoder's WordPiece vocabulary (each word its first piece): it needs the file */
    CHECK(qkv__task_prepare(&t, cfg, "tagging", dir, true) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "data.vocab_file") != NULL);
    qkv__task_free(&t);
    cJSON_Delete(cfg);
    cfg = config("embmean", train, "\"tokenizer\": \"bpe\"");
    CHECK(qkv__task_prepare(&t, cfg, "tagging", dir, true) == QKV_ERR_UNSUPPORTED);
    qkv__task_free(&t);
    cJSON_Delete(cfg);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/qkv_test_train_data_%ld", (long)getpid());
    mkdir(dir, 0777);
    RUN(classify_pipeline);
    RUN(lm_pipeline);
    RUN(seq2seq_pipeline);
    RUN(sentinels_in_text);
    RUN(unsupported_choices);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish();
}
