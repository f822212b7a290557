/* Word vectors: the staged GloVe 6B 100d subset against its reference.json (float64 values computed from the same
 * numbers), text / header / word2vec binary formats agreeing, bad files named by line, and vectors as an
 * Embedding's initial weights. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/glove.h"
#include "qkv/nn.h"
#include "test.h"

static qkv_vectors *glove;
static cJSON *ref;

static const char *glove_dir(void) { return test_shared_path("pretrained/glove-6B-100d-top20k"); }

static bool load_staged(void) {
    if (glove) return true;
    const char *dir = glove_dir();
    char path[1024];
    snprintf(path, sizeof path, "%s/glove.6B.100d.top20k.txt", dir ? dir : "");
    if (!dir || !test_file_exists(path)) {
        test_skip("staged GloVe vectors not found (QKV_SHARED/pretrained/glove-6B-100d-top20k)");
        return false;
    }
    glove = qkv_vectors_load(path, QKV_VEC_AUTO);
    CHECK_NN(glove);
    snprintf(path, sizeof path, "%s/reference.json", dir);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!glove || !f) {
        if (f) fclose(f);
        return false;
    }
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    ref = cJSON_Parse(buf);
    CHECK(ref != NULL);
    return ref != NULL;
}

static const char *tmp_path(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "/tmp/qkv_test_glove_%d_%s", (int)getpid(), name);
    return buf[k];
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, len, f) == len);
    fclose(f);
}

/* Loading a bad file must fail with an error containing `needle`. */
static void expect_bad(const char *name, const char *content, qkv_vec_format fmt, const char *needle) {
    const char *p = tmp_path(name);
    write_file(p, content, strlen(content));
    qkv_error_clear();
    qkv_vectors *v = qkv_vectors_load(p, fmt);
    CHECKF(v == NULL, "%s: loaded a bad file", name);
    CHECKF(strstr(qkv_last_error(), needle) != NULL, "%s: error '%s' lacks '%s'", name, qkv_last_error(), needle);
    CHECKF(qkv_last_status() == QKV_ERR_FORMAT, "%s: status %d", name, (int)qkv_last_status());
    qkv_vectors_free(v);
    unlink(p);
}

TEST(staged_file_shape) {
    if (!load_staged()) return;
    CHECK(qkv_vectors_count(glove) == 20000);
    CHECK(qkv_vectors_dim(glove) == 100);
    CHECK(strcmp(qkv_vectors_word(glove, 0), "the") == 0);
    CHECK(qkv_vectors_find(glove, "the") == 0);
    /* "the -0.038194 -0.24487 0.72812 ..." */
    CHECK(qkv_f32(qkv_vectors_matrix(glove))[0] == strtof("-0.038194", NULL));
    CHECK(qkv_f32(qkv_vectors_matrix(glove))[2] == strtof("0.72812", NULL));
    CHECK(qkv_vectors_find(glove, "no-such-word-here") == -1);
}

TEST(cosine_matches_reference) {
    if (!load_staged()) return;
    int n = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cosine")) {
        double got = 0, want = cJSON_GetObjectItem(c, "cosine")->valuedouble;
        const char *a = cJSON_GetObjectItem(c, "a")->valuestring, *b = cJSON_GetObjectItem(c, "b")->valuestring;
        CHECK_OK(qkv_vectors_cosine(glove, a, b, &got));
        CHECKF(fabs(got - want) < 1e-6, "cos(%s, %s) = %.9f, want %.9f", a, b, got, want);
        n++;
    }
    CHECK(n == 7);
}

static void check_hits(const char *what, const qkv_vec_hit *hits, int n, const cJSON *want) {
    CHECKF(n == cJSON_GetArraySize(want), "%s: %d hits, want %d", what, n, cJSON_GetArraySize(want));
    for (int i = 0; i < n && i < cJSON_GetArraySize(want); i++) {
        const cJSON *w = cJSON_GetArrayItem(want, i);
        const char *word = cJSON_GetArrayItem(w, 0)->valuestring;
        double score = cJSON_GetArrayItem(w, 1)->valuedouble;
        const char *got = qkv_vectors_word(glove, hits[i].row);
        CHECKF(got && !strcmp(got, word), "%s #%d: %s, want %s", what, i, got ? got : "?", word);
        CHECKF(fabs(hits[i].score - score) < 1e-6, "%s #%d: %.9f, want %.9f", what, i, hits[i].score, score);
    }
}

TEST(nearest_neighbours_match_reference) {
    if (!load_staged()) return;
    cJSON *q;
    cJSON_ArrayForEach(q, cJSON_GetObjectItem(ref, "nearest")) {
        const char *word = cJSON_GetObjectItem(q, "query")->valuestring;
        qkv_vec_hit hits[10];
        int n = 0;
        CHECK_OK(qkv_vectors_similar(glove, word, 10, hits, &n));
        check_hits(word, hits, n, cJSON_GetObjectItem(q, "top10"));
    }
}

TEST(analogy_matches_reference) {
    if (!load_staged()) return;
    cJSON *q;
    cJSON_ArrayForEach(q, cJSON_GetObjectItem(ref, "analogy")) {
        /* reference.json's (a, b, c) = man : king :: woman : ?, i.e. king - man + woman. */
        const char *a = cJSON_GetObjectItem(q, "a")->valuestring, *b = cJSON_GetObjectItem(q, "b")->valuestring,
                   *c = cJSON_GetObjectItem(q, "c")->valuestring;
        qkv_vec_hit hits[5];
        int n = 0;
        CHECK_OK(qkv_vectors_analogy(glove, b, a, c, false, 5, hits, &n));
        check_hits("analogy", hits, n, cJSON_GetObjectItem(q, "top5"));
        /* gensim's unit-vector form ranks queen first too, with a different score. */
        CHECK_OK(qkv_vectors_analogy(glove, b, a, c, true, 5, hits, &n));
        CHECK(n == 5 && !strcmp(qkv_vectors_word(glove, hits[0].row), "queen"));
        for (int i = 0; i < n; i++) {
            const char *w = qkv_vectors_word(glove, hits[i].row);
            CHECK(strcmp(w, a) && strcmp(w, b) && strcmp(w, c));
            if (i) CHECK(hits[i].score <= hits[i - 1].score);
        }
    }
}

TEST(unknown_word_is_named) {
    if (!load_staged()) return;
    double c;
    qkv_vec_hit hits[3];
    int n;
    CHECK(qkv_vectors_cosine(glove, "king", "qwertyzzz", &c) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "qwertyzzz") != NULL);
    CHECK(qkv_vectors_similar(glove, "zzzunknown", 3, hits, &n) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "zzzunknown") != NULL);
    CHECK(qkv_vectors_analogy(glove, "king", "nope-nope", "woman", false, 3, hits, &n) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "nope-nope") != NULL);
    CHECK(qkv_vectors_similar(glove, "king", -1, hits, &n) == QKV_ERR_INVALID);
}

/* The same three vectors as plain text, text with a header, CRLF text and word2vec binary. */
TEST(formats_agree) {
    const char *plain = "cat 1 2 3\ndog 1.5 2 2.5\nbanana -3 0.25 1e-2\n";
    const char *header = "3 3\ncat 1 2 3\ndog 1.5 2 2.5\nbanana -3 0.25 1e-2\n";
    const char *crlf = "cat\t1 2 3\r\ndog 1.5  2 2.5\r\nbanana -3 0.25 1e-2";
    const float want[9] = {1, 2, 3, 1.5f, 2, 2.5f, -3, 0.25f, 1e-2f};
    char bin[256];
    size_t len = (size_t)snprintf(bin, sizeof bin, "3 3\n");
    const char *words[3] = {"cat", "dog", "banana"};
    for (int i = 0; i < 3; i++) {
        len += (size_t)snprintf(bin + len, sizeof bin - len, "%s ", words[i]);
        memcpy(bin + len, want + 3 * i, 12);
        len += 12;
        bin[len++] = '\n';
    }
    const char *texts[3] = {plain, header, crlf};
    for (int k = 0; k < 4; k++) {
        const char *p = tmp_path("fmt");
        if (k < 3) write_file(p, texts[k], strlen(texts[k]));
        else write_file(p, bin, len);
        qkv_vectors *v = qkv_vectors_load(p, QKV_VEC_AUTO);
        CHECKF(v != NULL, "format %d: %s", k, qkv_last_error());
        if (v) {
            CHECK(qkv_vectors_count(v) == 3 && qkv_vectors_dim(v) == 3);
            CHECKF(memcmp(qkv_f32(qkv_vectors_matrix(v)), want, sizeof want) == 0, "format %d values", k);
            CHECK(qkv_vectors_find(v, "banana") == 2);
        }
        qkv_vectors_free(v);
        if (k == 3) {
            v = qkv_vectors_load(p, QKV_VEC_BINARY);
            CHECK_NN(v);
            qkv_vectors_free(v);
        }
        unlink(p);
    }
}

TEST(bad_files_are_named) {
    expect_bad("badnum", "cat 1 2 3\ndog 1 x 3\n", QKV_VEC_TEXT, ":2: value 2 of 'dog'");
    expect_bad("dims", "cat 1 2 3\ndog 1 2\n", QKV_VEC_AUTO, ":2: 'dog' has 2 values, expected 3");
    expect_bad("hdrdims", "2 4\ncat 1 2 3 4\ndog 1 2 3\n", QKV_VEC_AUTO, ":3: 'dog' has 3 values, expected 4");
    expect_bad("count", "3 2\ncat 1 2\ndog 1 2\n", QKV_VEC_AUTO, "header says 3 vectors but the file has 2");
    expect_bad("dup", "cat 1 2\ndog 1 2\ncat 3 4\n", QKV_VEC_AUTO, "duplicate word 'cat'");
    expect_bad("noval", "cat\n", QKV_VEC_AUTO, ":1: a word with no vector values");
    expect_bad("empty", "", QKV_VEC_AUTO, "empty file");
    expect_bad("blank", "cat 1 2\n\ndog 1 2\n", QKV_VEC_AUTO, ":2: empty line");
    expect_bad("nan", "cat 1 nan\n", QKV_VEC_AUTO, "not a finite number");
    expect_bad("binnohdr", "cat 1 2\n", QKV_VEC_BINARY, "must start with");
    /* A binary file cut in the middle of its second record. */
    char bin[64];
    size_t len = (size_t)snprintf(bin, sizeof bin, "2 2\ncat ");
    float x[2] = {1, 2};
    memcpy(bin + len, x, 8);
    len += 8;
    len += (size_t)snprintf(bin + len, sizeof bin - len, "\ndog ");
    memcpy(bin + len, x, 3);
    len += 3;
    const char *p = tmp_path("trunc");
    write_file(p, bin, len);
    CHECK(qkv_vectors_load(p, QKV_VEC_BINARY) == NULL);
    CHECKF(strstr(qkv_last_error(), "record 2 ('dog'): truncated vector") != NULL, "%s", qkv_last_error());
    unlink(p);
    CHECK(qkv_vectors_load("/nonexistent/vectors.txt", QKV_VEC_AUTO) == NULL);
    CHECK(qkv_last_status() == QKV_ERR_IO && strstr(qkv_last_error(), "/nonexistent/vectors.txt"));
}

/* Vectors as an Embedding's initial weights: known words get their rows (case folded), unknown ones random, the
 * frozen layer records no gradient, and a model whose embedding size differs from the file fails clearly. */
TEST(embedding_from_vectors) {
    const char *p = tmp_path("emb");
    const char *txt = "cat 1 2 3\ndog 4 5 6\n";
    write_file(p, txt, strlen(txt));
    qkv_vectors *v = qkv_vectors_load(p, QKV_VEC_AUTO);
    unlink(p);
    CHECK_NN(v);
    if (!v) return;
    qkv_vocab *vocab = qkv_vocab_new();
    const char *toks[4] = {"<pad>", "Dog", "cat", "unicorn"};
    for (int i = 0; i < 4; i++) qkv_vocab_add(vocab, toks[i], strlen(toks[i]));
    qkv_params *params = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 7);
    qkv_nn_embedding e;
    int64_t found = -1;
    CHECK_OK(qkv_vectors_embedding_init(&e, params, "embed", v, vocab, 3, true, 0, &rng, &found));
    CHECK(found == 2);
    const float *w = qkv_f32(e.weight);
    CHECK(w[3] == 4 && w[4] == 5 && w[5] == 6); /* "Dog" -> dog */
    CHECK(w[6] == 1 && w[7] == 2 && w[8] == 3);
    CHECK(w[9] != 0 || w[10] != 0);             /* unicorn: random */
    CHECK(!(e.weight->flags & QKV_FLAG_REQUIRES_GRAD));
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(2));
    qkv_i32(ids)[0] = 2, qkv_i32(ids)[1] = 1;
    qkv_tensor *y = qkv_nn_embedding_forward(ctx, &e, ids);
    CHECK_NN(y);
    if (y) CHECK(qkv_f32(y)[0] == 1 && qkv_f32(y)[3] == 4);
    qkv_ctx_free(ctx);
    /* A tuned copy requires grad. */
    qkv_nn_embedding e2;
    CHECK_OK(qkv_vectors_embedding_init(&e2, params, "embed2", v, vocab, 3, false, QKV_NN_NO_PADDING, NULL, NULL));
    CHECK(e2.weight->flags & QKV_FLAG_REQUIRES_GRAD);
    CHECK(qkv_f32(e2.weight)[9] == 0);
    /* Dimension mismatch. */
    qkv_nn_embedding e3;
    CHECK(qkv_vectors_embedding_init(&e3, params, "embed3", v, vocab, 64, false, 0, &rng, NULL) == QKV_ERR_INVALID);
    CHECKF(strstr(qkv_last_error(), "embedding size 64 does not match the pretrained vectors' dimension 3"), "%s",
           qkv_last_error());
    qkv_params_free(params);
    qkv_vocab_free(vocab);
    qkv_vectors_free(v);
}

int main(void) {
    RUN(staged_file_shape);
    RUN(cosine_matches_reference);
    RUN(nearest_neighbours_match_reference);
    RUN(analogy_matches_reference);
    RUN(unknown_word_is_named);
    RUN(formats_agree);
    RUN(bad_files_are_named);
    RUN(embedding_from_vectors);
    qkv_vectors_free(glove);
    cJSON_Delete(ref);
    return test_finish();
}
