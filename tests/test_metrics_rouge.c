/* ROUGE and the Porter stemmer: rouge-score's own test vectors (rouge_scorer_test.py), hand-computed cases, all
 * stems of tests/fixtures/porter_stems.tsv (NLTK, tests/ref/porter_ref.py) and the scores of
 * tests/fixtures/rouge_pairs.jsonl (tests/ref/rouge_metric_ref.py). */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "qkv/data.h"
#include "qkv/metrics.h"
#include "test.h"

#define NEAR(a, b, eps) CHECKF(fabs((a) - (b)) < (eps), "%s = %.10f, expected %.10f", #a, (double)(a), (double)(b))

static qkv_rouge_result score(const char *t, const char *p, bool stem) {
    qkv_rouge_result r;
    qkv_rouge_opts o = {.use_stemmer = stem};
    qkv_status st = qkv_rouge_score(t, p, &o, &r);
    CHECKF(st == QKV_OK, "rouge failed: %s", qkv_last_error());
    return r;
}

TEST(rouge_score_vectors) {
    qkv_rouge_result r = score("testing one two", "testing", false);
    NEAR(r.rouge1.precision, 1.0, 1e-12);
    NEAR(r.rouge1.recall, 1.0 / 3, 1e-12);
    NEAR(r.rouge1.f1, 0.5, 1e-12);
    r = score("testing one two", "", false);
    qkv_prf *all = &r.rouge1;
    for (int k = 0; k < 4; k++) CHECK(all[k].precision == 0 && all[k].recall == 0 && all[k].f1 == 0);
    r = score("testing one two", "testing one", false);
    NEAR(r.rouge2.precision, 1.0, 1e-12);
    NEAR(r.rouge2.recall, 0.5, 1e-12);
    NEAR(r.rouge2.f1, 2.0 / 3, 1e-12);
    NEAR(r.rougeL.recall, 2.0 / 3, 1e-12);
    NEAR(r.rougeL.f1, 0.8, 1e-12);
    r = score("testing one two", "testing two", false);
    NEAR(r.rougeL.precision, 1.0, 1e-12);
    NEAR(r.rougeL.f1, 0.8, 1e-12);
    r = score("w1 w2 w3 w4 w5", "w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5", false);
    NEAR(r.rougeLsum.recall, 0.8, 1e-12);
    NEAR(r.rougeLsum.precision, 0.4, 1e-12);
    NEAR(r.rougeLsum.f1, 0.5333, 1e-3);
    CHECK(score("w1 w2 w3 w4 w5", "", false).rougeLsum.f1 == 0);
    CHECK(score("", "w1", false).rougeLsum.f1 == 0);
    CHECK(score("w1 w2 w3 w4 w5", "/", false).rougeLsum.f1 == 0);
    qkv_prf p;
    CHECK_OK(qkv_rouge_n("testing one two three", "testing one two", 3, NULL, &p));
    NEAR(p.precision, 1.0, 1e-12);
    NEAR(p.recall, 0.5, 1e-12);
    CHECK(qkv_rouge_n("a", "b", 0, NULL, &p) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "n = 0") != NULL);
    CHECK(qkv_rouge_n("a", "b", 10, NULL, &p) == QKV_ERR_INVALID);
    CHECK(qkv_rouge_score(NULL, "b", NULL, &r) == QKV_ERR_INVALID);
    CHECK(qkv_rouge_score("ok", "bad \xff", NULL, &r) == QKV_ERR_FORMAT);
    CHECKF(strstr(qkv_last_error(), "prediction: invalid UTF-8 at byte 5") != NULL, "%s", qkv_last_error());
}

TEST(rouge_tokenizer_and_stemming) {
    /* non-ASCII letters separate tokens; case folds */
    qkv_rouge_result r = score("CAF\xc3\x89 au-lait", "caf au lait", false);
    NEAR(r.rouge1.f1, 1.0, 1e-12);
    /* stemming: "running" -> "run", "flies" -> "fli" matches "fly" -> "fli" only with the stemmer */
    r = score("running flies", "run fly", false);
    NEAR(r.rouge1.f1, 0.0, 1e-12);
    r = score("running flies", "run fly", true);
    NEAR(r.rouge1.f1, 0.5, 1e-12); /* "fly" has 3 chars: not stemmed; "running"->"run" matches */
    /* mean over pairs */
    qkv_rouge_result m;
    const char *t[] = {"a b", "a b"}, *p[] = {"a b", "c d"};
    CHECK_OK(qkv_rouge_mean(t, p, 2, NULL, &m));
    NEAR(m.rouge1.f1, 0.5, 1e-12);
    CHECK(qkv_rouge_mean(t, p, 0, NULL, &m) == QKV_ERR_INVALID);
    char sig[128];
    qkv_rouge_signature(&(qkv_rouge_opts){.use_stemmer = true}, sig, sizeof sig);
    CHECK(strstr(sig, "stem:porter") != NULL);
}

static qkv_status stem_cb(const qkv_data_record *rec, void *user) {
    int *bad = user;
    char out[256];
    int k = qkv_porter_stem(rec->fields[0], rec->lens[0], out, sizeof out);
    if (k < 0 || strcmp(out, rec->fields[1]) != 0) {
        if (*bad < 10) printf("  stem(%s) = %s, NLTK: %s\n", rec->fields[0], out, rec->fields[1]);
        (*bad)++;
    }
    return QKV_OK;
}

TEST(porter_vs_nltk) {
    const char *path = test_fixture_path("porter_stems.tsv");
    int bad = 0;
    qkv_data_opts o = {.format = QKV_DATA_TSV, .n_fields = 2};
    CHECK_OK(qkv_data_foreach(path, &o, stem_cb, &bad));
    CHECKF(bad == 0, "%d stems differ from NLTK", bad);
    char out[16];
    CHECK(qkv_porter_stem("generalization", 14, out, 8) == -1 && qkv_last_status() == QKV_ERR_RANGE);
    CHECK(qkv_porter_stem("caresses", 8, out, sizeof out) == 6 && strcmp(out, "caress") == 0);
}

static double num(const cJSON *a, int i) { return cJSON_GetArrayItem(a, i)->valuedouble; }

TEST(rouge_vs_reference) {
    qkv_dataset *d = qkv_data_read_all(test_fixture_path("rouge_pairs.jsonl"),
                                       &(qkv_data_opts){.format = QKV_DATA_JSONL});
    CHECK_NN(d);
    if (!d) return;
    CHECK(d->n_rows > 100);
    int bad = 0;
    for (size_t i = 0; i < d->n_rows; i++) {
        const char *t = cJSON_GetObjectItem(d->rows[i].json, "target")->valuestring;
        const char *p = cJSON_GetObjectItem(d->rows[i].json, "prediction")->valuestring;
        for (int stem = 0; stem < 2; stem++) {
            qkv_rouge_result r = score(t, p, stem);
            const cJSON *want = cJSON_GetObjectItem(d->rows[i].json, stem ? "stem" : "plain");
            const qkv_prf *got = &r.rouge1;
            for (int k = 0; k < 4; k++) {
                double g[3] = {got[k].precision, got[k].recall, got[k].f1};
                for (int j = 0; j < 3; j++)
                    if (fabs(g[j] - num(want, 3 * k + j)) > 1e-12) {
                        if (bad++ < 10)
                            printf("  pair %zu stem %d metric %d/%d: %.12f vs %.12f\n", i, stem, k, j, g[j],
                                   num(want, 3 * k + j));
                    }
            }
        }
    }
    CHECKF(bad == 0, "%d ROUGE values differ from the reference", bad);
    qkv_dataset_free(d);
}

int main(void) {
    RUN(rouge_score_vectors);
    RUN(rouge_tokenizer_and_stemming);
    RUN(porter_vs_nltk);
    RUN(rouge_vs_reference);
    return test_finish();
}
