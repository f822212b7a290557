/* BLEU: the expected values are sacrebleu's own test vectors (test/test_bleu.py, test/test_sentence_bleu.py) plus
 * hand-computed cases; the 13a tokenizer is compared with a Python transcription of sacrebleu's regexes
 * (tests/ref/bleu_metric_ref.py) on the shared translation data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "qkv/data.h"
#include "qkv/metrics.h"
#include "test.h"

#define NEAR(a, b, eps) CHECKF(fabs((a) - (b)) < (eps), "%s = %.10f, expected %.10f", #a, (double)(a), (double)(b))

static const char *HYPS[] = {"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."};
static const char *REF1[] = {"The dog bit the man.", "It was not unexpected.", "The man bit him first."};
static const char *REF2[] = {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."};

static double corpus(const char *const *hyps, size_t n, const qkv_bleu_opts *o) {
    const char **refs[] = {REF1, REF2};
    qkv_bleu_result r;
    qkv_status st = qkv_bleu_corpus(hyps, n, refs, 2, o, &r);
    CHECKF(st == QKV_OK, "corpus BLEU failed: %s", qkv_last_error());
    return r.score;
}

TEST(corpus_sacrebleu_vectors) {
    NEAR(corpus(HYPS, 3, NULL), 48.530827, 1e-6);
    qkv_bleu_opts o = qkv_bleu_default_opts();
    o.tokenizer = QKV_BLEU_TOK_NONE;
    NEAR(corpus(HYPS, 3, &o), 49.1919566, 1e-6);
    o = qkv_bleu_default_opts();
    o.smooth = QKV_BLEU_SMOOTH_NONE;
    NEAR(corpus(HYPS, 3, &o), 48.530827, 1e-6);
    const char *empty[] = {"", "", ""};
    NEAR(corpus(empty, 3, NULL), 0.0, 1e-12);
    /* test_max_ngram_order */
    const char *expect[] = {"77.65", "60.50", "53.93", "48.53", "46.14", "43.28"};
    for (int k = 1; k <= 6; k++) {
        o = qkv_bleu_default_opts();
        o.max_order = k;
        char got[32];
        snprintf(got, sizeof got, "%.2f", corpus(HYPS, 3, &o));
        CHECKF(strcmp(got, expect[k - 1]) == 0, "order %d: %s, expected %s", k, got, expect[k - 1]);
    }
}

/* sacrebleu.raw_corpus_bleu: no tokenisation, floor smoothing, effective order. */
static double raw_bleu(const char *hyp, const char *ref, double floor_value) {
    qkv_bleu_opts o = qkv_bleu_default_opts();
    o.tokenizer = QKV_BLEU_TOK_NONE;
    o.smooth = QKV_BLEU_SMOOTH_FLOOR;
    o.smooth_value = floor_value;
    o.effective_order = true;
    const char *h[] = {hyp}, *r[] = {ref};
    const char **refs[] = {r};
    qkv_bleu_result res;
    CHECK_OK(qkv_bleu_corpus(h, 1, refs, 1, &o, &res));
    return res.score / 100;
}

TEST(raw_corpus_vectors) {
    NEAR(raw_bleu("this is a test", "this is a test", 0.01), 1.0, 1e-8);
    NEAR(raw_bleu("this is a fest", "this is a test", 0.01), 0.223606797749979, 1e-8);
    NEAR(raw_bleu("test", "a test", 0.01), 0.3678794411714425, 1e-8);
    NEAR(raw_bleu("a test", "a test", 0.01), 1.0, 1e-8);
    NEAR(raw_bleu("a little test", "a test", 0.01), 0.03218297948685433, 1e-8);
    NEAR(raw_bleu("am I am a character sequence", "I am a symbol string sequence a a", 0.0), 0.0, 1e-8);
    NEAR(raw_bleu("am I am a character sequence", "I am a symbol string sequence a a", -1), 0.1555722182, 1e-8);
    /* test_statistics */
    qkv_bleu_opts o = qkv_bleu_default_opts();
    o.tokenizer = QKV_BLEU_TOK_NONE;
    o.smooth = QKV_BLEU_SMOOTH_FLOOR;
    o.smooth_value = 0.01;
    o.effective_order = true;
    const char *h[] = {"am I am a character sequence"}, *r[] = {"I am a symbol string sequence a a"};
    const char **refs[] = {r};
    qkv_bleu_result res;
    CHECK_OK(qkv_bleu_corpus(h, 1, refs, 1, &o, &res));
    int64_t counts[] = {4, 2, 1, 0}, totals[] = {6, 5, 4, 3};
    for (int n = 0; n < 4; n++) CHECK(res.counts[n] == counts[n] && res.totals[n] == totals[n]);
    /* two hypotheses against one reference stream with no match: 0 (sacrebleu #141) */
    const char *h2[] = {"this is a test", "another test"}, *r2[] = {"ref1", "ref2"};
    const char **refs2[] = {r2};
    CHECK_OK(qkv_bleu_corpus(h2, 2, refs2, 1, &o, &res));
    CHECK(res.score == 0.0);
}

TEST(from_stats_vectors) {
    int64_t c[] = {9, 7, 5, 3}, t[] = {10, 8, 6, 4};
    qkv_bleu_result r;
    qkv_bleu_opts o = qkv_bleu_default_opts();
    o.smooth = QKV_BLEU_SMOOTH_NONE;
    CHECK_OK(qkv_bleu_from_stats(c, t, 11, 11, &o, &r));
    NEAR(r.score / 100, 0.8375922397, 1e-8);
    /* test_degenerate_statistics (floor smoothing) */
    struct { int64_t c[4], t[4], sys, ref; double off; } d[] = {
        {{0, 0, 0, 0}, {4, 4, 2, 1}, 0, 1, 0.0}, {{0, 0, 0, 0}, {10, 11, 12, 0}, 14, 10, 0.0},
        {{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0, 0.0}, {{6, 5, 4, 0}, {6, 5, 4, 3}, 6, 6, 0.0},
        {{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0, 0.1}, {{0, 0, 0, 0}, {0, 0, 0, 0}, 1, 5, 0.01}};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        o.smooth = QKV_BLEU_SMOOTH_FLOOR;
        o.smooth_value = d[i].off;
        CHECK_OK(qkv_bleu_from_stats(d[i].c, d[i].t, d[i].sys, d[i].ref, &o, &r));
        CHECKF(r.score == 0.0, "degenerate case %zu: %g", i, r.score);
    }
    /* hand-computed: exp smoothing, 1-gram 2/2, 2-gram 0/1 -> p2 = 100/(2*1); BP 1 */
    int64_t c2[] = {2, 0}, t2[] = {2, 1};
    o = qkv_bleu_default_opts();
    o.max_order = 2;
    CHECK_OK(qkv_bleu_from_stats(c2, t2, 2, 2, &o, &r));
    NEAR(r.score, sqrt(100.0 * 50.0), 1e-9);
    int64_t bad[] = {3, 0}, badt[] = {2, 1};
    CHECK(qkv_bleu_from_stats(bad, badt, 2, 2, &o, &r) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "order 1") != NULL);
}

static const char *REF_RO = "produc\xc5\xa3ia de zah\xc4\x83r brut se exprim\xc4\x83 \xc3\xaen zah\xc4\x83r alb;";
static const char *SYS_RO =
    "Produc\xc8\x9bia de zah\xc4\x83r prim\xc4\x83 va fi exprimat\xc4\x83 \xc3\xaen ceea ce prive\xc8\x99te "
    "zah\xc4\x83rul alb;";

static double sent(const char *sys, const char *ref, qkv_bleu_smooth sm, double val, qkv_bleu_tokenizer tok) {
    qkv_bleu_opts o = qkv_bleu_sentence_opts();
    o.smooth = sm;
    o.smooth_value = val;
    o.tokenizer = tok;
    qkv_bleu_result r;
    CHECK_OK(qkv_bleu_sentence(sys, &ref, 1, &o, &r));
    return r.score;
}

TEST(sentence_sacrebleu_vectors) {
    NEAR(sent(SYS_RO, REF_RO, QKV_BLEU_SMOOTH_EXP, -1, QKV_BLEU_TOK_13A), 8.493, 1e-3);
    NEAR(sent(SYS_RO, REF_RO, QKV_BLEU_SMOOTH_NONE, -1, QKV_BLEU_TOK_13A), 0.0, 1e-3);
    NEAR(sent(SYS_RO, REF_RO, QKV_BLEU_SMOOTH_FLOOR, -1, QKV_BLEU_TOK_13A), 4.51688, 1e-3);
    NEAR(sent(SYS_RO, REF_RO, QKV_BLEU_SMOOTH_FLOOR, 0.1, QKV_BLEU_TOK_13A), 4.51688, 1e-3);
    NEAR(sent(SYS_RO, REF_RO, QKV_BLEU_SMOOTH_FLOOR, 0.5, QKV_BLEU_TOK_13A), 10.10, 1e-2);
    NEAR(sent(SYS_RO, REF_RO, QKV_BLEU_SMOOTH_ADD_K, -1, QKV_BLEU_TOK_13A), 14.882, 1e-3);
    NEAR(sent(SYS_RO, REF_RO, QKV_BLEU_SMOOTH_ADD_K, 1, QKV_BLEU_TOK_13A), 14.882, 1e-3);
    NEAR(sent(SYS_RO, REF_RO, QKV_BLEU_SMOOTH_ADD_K, 2, QKV_BLEU_TOK_13A), 21.389, 1e-3);
    NEAR(sent(SYS_RO, REF_RO, QKV_BLEU_SMOOTH_EXP, -1, QKV_BLEU_TOK_NONE), 7.347, 1e-3);
    for (int sm = 0; sm <= QKV_BLEU_SMOOTH_ADD_K; sm++)
        NEAR(sent("this is a cat", "okay thanks", (qkv_bleu_smooth)sm, -1, QKV_BLEU_TOK_13A), 0.0, 1e-3);
    /* default sentence opts (NULL) = exp + effective order */
    qkv_bleu_result r;
    CHECK_OK(qkv_bleu_sentence(SYS_RO, &REF_RO, 1, NULL, &r));
    NEAR(r.score, 8.493, 1e-3);
}

TEST(tokenizer_13a) {
    struct { const char *in, *out; } c[] = {
        {"Hello, world!", "Hello , world !"},
        {"It costs $3.50, ok.", "It costs $ 3.50 , ok ."},
        {"1,000.5 and 3-4", "1,000.5 and 3 - 4"},
        {"a.b", "a . b"},
        {"x--y", "x--y"},
        {"&quot;q&quot; &amp;lt; &gt;", "\" q \" < >"},
        {"line-\nbreak\nhere<skipped>", "linebreak here"},
        {"don't", "don't"},
        {"(a) [b] {c} @#%^*+=|\\/~`", "( a ) [ b ] { c } @ # % ^ * + = | \\ / ~ `"},
        {"caf\xc3\xa9. \xc3\xa9,", "caf\xc3\xa9 . \xc3\xa9 ,"},
        {"  spaced\xc2\xa0" "out\t", "spaced out"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *t = qkv_bleu_tokenize_13a(c[i].in);
        CHECK_NN(t);
        if (t) CHECKF(strcmp(t, c[i].out) == 0, "13a(%s) = [%s], expected [%s]", c[i].in, t, c[i].out);
        free(t);
    }
    CHECK(qkv_bleu_tokenize_13a(NULL) == NULL && qkv_last_status() == QKV_ERR_INVALID);
}

TEST(format_and_signature) {
    qkv_bleu_result r;
    CHECK_OK(qkv_bleu_corpus(HYPS, 3, (const char **[]){REF1, REF2}, 2, NULL, &r));
    char buf[256];
    qkv_bleu_format(&r, buf, sizeof buf);
    /* sacrebleu prints the same numbers for its README example */
    CHECKF(strncmp(buf, "BLEU = 48.53 ", 13) == 0, "%s", buf);
    CHECKF(strstr(buf, "(BP = 0.") != NULL && strstr(buf, "hyp_len = ") != NULL, "%s", buf);
    qkv_bleu_signature(&r, buf, sizeof buf);
    CHECKF(strcmp(buf, "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x") == 0, "%s", buf);
    /* exact layout */
    qkv_bleu_result f = {.score = 43.2749, .precisions = {71.64, 51.23, 38.44, 29.2}, .bp = 0.9613, .ratio = 0.96189,
                         .hyp_len = 8384, .ref_len = 8716, .max_order = 4};
    qkv_bleu_format(&f, buf, sizeof buf);
    CHECKF(strcmp(buf, "BLEU = 43.27 71.6/51.2/38.4/29.2 (BP = 0.961 ratio = 0.962 hyp_len = 8384 ref_len = 8716)") ==
               0,
           "%s", buf);
    qkv_bleu_opts o = qkv_bleu_sentence_opts();
    o.smooth = QKV_BLEU_SMOOTH_FLOOR;
    o.lowercase = true;
    CHECK_OK(qkv_bleu_sentence("a b", (const char *[]){"a b", NULL}, 2, &o, &r));
    qkv_bleu_signature(&r, buf, sizeof buf);
    CHECKF(strcmp(buf, "nrefs:1|case:lc|eff:yes|tok:13a|smooth:floor[0.10]|version:2.x") == 0, "%s", buf);
    /* variable reference counts */
    const char *h[] = {"a b c", "d e f"}, *r1[] = {"a b c", "d e f"}, *r2[] = {"a b c", NULL};
    CHECK_OK(qkv_bleu_corpus(h, 2, (const char **[]){r1, r2}, 2, NULL, &r));
    qkv_bleu_signature(&r, buf, sizeof buf);
    CHECKF(strncmp(buf, "nrefs:var|", 10) == 0, "%s", buf);
}

TEST(multi_ref_and_lowercase) {
    /* closest reference length: hyp of 3 tokens, refs of 2 and 4 -> tie, shorter (2) wins -> no BP */
    qkv_bleu_result r;
    qkv_bleu_opts o = qkv_bleu_sentence_opts();
    o.tokenizer = QKV_BLEU_TOK_NONE;
    CHECK_OK(qkv_bleu_sentence("a b c", (const char *[]){"a b", "a b c d"}, 2, &o, &r));
    CHECK(r.ref_len == 2 && r.bp == 1.0);
    /* clipping by the max count over references: "the the the" vs refs with 1 and 2 "the" -> 2/3 unigrams */
    CHECK_OK(qkv_bleu_sentence("the the the", (const char *[]){"the cat", "the the"}, 2, &o, &r));
    CHECK(r.counts[0] == 2 && r.totals[0] == 3);
    o.lowercase = true;
    CHECK_OK(qkv_bleu_sentence("THE CAT", (const char *[]){"the cat"}, 1, &o, &r));
    NEAR(r.score, 100.0, 1e-9);
    o.lowercase = false;
    CHECK_OK(qkv_bleu_sentence("THE CAT", (const char *[]){"the cat"}, 1, &o, &r));
    NEAR(r.score, 0.0, 1e-9);
}

TEST(bad_inputs) {
    qkv_bleu_result r;
    const char *h[] = {"a", NULL}, *ref[] = {"a", "b"};
    CHECK(qkv_bleu_corpus(h, 2, (const char **[]){ref}, 1, NULL, &r) == QKV_ERR_INVALID);
    CHECKF(strstr(qkv_last_error(), "hypothesis 1 is NULL") != NULL, "%s", qkv_last_error());
    CHECK(qkv_bleu_corpus(h, 1, (const char **[]){ref}, 0, NULL, &r) == QKV_ERR_INVALID);
    CHECK(qkv_bleu_corpus(h, 0, (const char **[]){ref}, 1, NULL, &r) == QKV_ERR_INVALID);
    qkv_bleu_opts o = qkv_bleu_default_opts();
    o.max_order = 99;
    CHECK(qkv_bleu_corpus(h, 1, (const char **[]){ref}, 1, &o, &r) == QKV_ERR_INVALID);
    CHECKF(strstr(qkv_last_error(), "max_order 99") != NULL, "%s", qkv_last_error());
    const char *bad[] = {"ok \xff here"};
    CHECK(qkv_bleu_corpus(bad, 1, (const char **[]){ref}, 1, NULL, &r) == QKV_ERR_FORMAT);
    CHECKF(strstr(qkv_last_error(), "hypothesis 0: invalid UTF-8 at byte 4") != NULL, "%s", qkv_last_error());
    CHECK(qkv_bleu_sentence("a", (const char *[]){NULL}, 1, NULL, &r) == QKV_ERR_INVALID);
    CHECKF(strstr(qkv_last_error(), "no reference") != NULL, "%s", qkv_last_error());
}

static qkv_dataset *load_ref(void) {
    qkv_dataset *d = qkv_data_read_all(test_fixture_path("bleu_ref.jsonl"), &(qkv_data_opts){.format = QKV_DATA_JSONL});
    CHECK_NN(d);
    return d;
}

TEST(tokenizer_13a_vs_python) {
    qkv_dataset *d = load_ref();
    if (!d) return;
    int n = 0, bad = 0;
    for (size_t i = 0; i < d->n_rows; i++) {
        const cJSON *line = cJSON_GetObjectItem(d->rows[i].json, "line");
        if (!line) continue;
        const char *want = cJSON_GetObjectItem(d->rows[i].json, "tok")->valuestring;
        char *got = qkv_bleu_tokenize_13a(line->valuestring);
        n++;
        if (!got || strcmp(got, want) != 0) {
            if (bad++ < 5) printf("  13a(%s)\n    = [%s]\n want [%s]\n", line->valuestring, got ? got : "NULL", want);
        }
        free(got);
    }
    CHECKF(n > 300 && bad == 0, "%d of %d tokenizations differ", bad, n);
    qkv_dataset_free(d);
}

/* Corpus BLEU of the WEB Bible verses against the KJV ones (shared paraphrase dev, label 1). */
TEST(corpus_vs_python_on_shared_data) {
    const char *path = test_shared_path("data/paraphrase/dev.tsv");
    if (!path || !test_file_exists(path)) {
        test_skip("QKV_SHARED data not found");
        return;
    }
    qkv_dataset *pairs = qkv_data_read_all(path, &(qkv_data_opts){.format = QKV_DATA_TSV, .n_fields = 3});
    CHECK_NN(pairs);
    qkv_dataset *d = load_ref();
    if (!pairs || !d) {
        qkv_dataset_free(pairs);
        qkv_dataset_free(d);
        return;
    }
    const char **hyps = calloc(pairs->n_rows, sizeof *hyps), **r1 = calloc(pairs->n_rows, sizeof *r1),
               **r2 = calloc(pairs->n_rows, sizeof *r2);
    size_t n = 0;
    for (size_t i = 0; i < pairs->n_rows; i++)
        if (strcmp(pairs->rows[i].fields[0], "1") == 0) {
            hyps[n] = pairs->rows[i].fields[2];
            r1[n++] = pairs->rows[i].fields[1];
        }
    for (size_t i = 0; i < n; i++) r2[i] = r1[(i + 1) % n];
    int checked = 0;
    for (size_t i = 0; i < d->n_rows; i++) {
        const cJSON *j = d->rows[i].json;
        if (!cJSON_GetObjectItem(j, "corpus")) continue;
        qkv_bleu_opts o = qkv_bleu_default_opts();
        o.lowercase = cJSON_IsTrue(cJSON_GetObjectItem(j, "lowercase"));
        int k = cJSON_GetObjectItem(j, "n_refs")->valueint;
        qkv_bleu_result r;
        CHECK_OK(qkv_bleu_corpus(hyps, n, (const char **[]){r1, r2}, k, &o, &r));
        for (int g = 0; g < 4; g++) {
            CHECK(r.counts[g] == (int64_t)cJSON_GetArrayItem(cJSON_GetObjectItem(j, "counts"), g)->valuedouble);
            CHECK(r.totals[g] == (int64_t)cJSON_GetArrayItem(cJSON_GetObjectItem(j, "totals"), g)->valuedouble);
        }
        CHECK(r.hyp_len == (int64_t)cJSON_GetObjectItem(j, "hyp_len")->valuedouble);
        CHECK(r.ref_len == (int64_t)cJSON_GetObjectItem(j, "ref_len")->valuedouble);
        NEAR(r.score, cJSON_GetObjectItem(j, "score")->valuedouble, 1e-9);
        checked++;
    }
    CHECK(checked == 4);
    free(hyps);
    free(r1);
    free(r2);
    qkv_dataset_free(pairs);
    qkv_dataset_free(d);
}

int main(void) {
    RUN(corpus_sacrebleu_vectors);
    RUN(raw_corpus_vectors);
    RUN(from_stats_vectors);
    RUN(sentence_sacrebleu_vectors);
    RUN(tokenizer_13a);
    RUN(format_and_signature);
    RUN(multi_ref_and_lowercase);
    RUN(bad_inputs);
    RUN(tokenizer_13a_vs_python);
    RUN(corpus_vs_python_on_shared_data);
    return test_finish();
}
