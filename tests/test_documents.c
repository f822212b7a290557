/* Document corpora (documents.h): the sentence rule, one rule per input format, refused evaluation splits, the NSP
 * check and the seeded held-out split, then the English training text of ../shared/data. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

static char dir[] = "/tmp/qkv_docs_XXXXXX";

static void check_sentences(const char *text, int n_expect, const char *const *expect) {
    size_t *sp, n;
    CHECK_OK(qkv_documents_sentence_split(text, strlen(text), &sp, &n));
    CHECKF((int)n == n_expect, "'%s': %zu sentences, expected %d", text, n, n_expect);
    for (size_t i = 0; i < n && (int)i < n_expect; i++) {
        size_t len = sp[2 * i + 1] - sp[2 * i];
        CHECKF(len == strlen(expect[i]) && !memcmp(text + sp[2 * i], expect[i], len), "sentence %zu of '%s' is '%.*s'",
               i, text, (int)len, text + sp[2 * i]);
    }
    free(sp);
}

TEST(sentence_rule) {
    check_sentences("It rained. We stayed in!  Did you?", 3, (const char *[]){"It rained.", "We stayed in!", "Did you?"});
    check_sentences("Mr. Darcy spoke to Mrs. Bennet. She smiled.", 2,
                    (const char *[]){"Mr. Darcy spoke to Mrs. Bennet.", "She smiled."});
    check_sentences("By J. L. Schafer (1997). Next one", 2, (const char *[]){"By J. L. Schafer (1997).", "Next one"});
    check_sentences("\"Is it?\" said he. \"Yes.\" She left.", 3,
                    (const char *[]){"\"Is it?\" said he.", "\"Yes.\"", "She left."});
    check_sentences("files, etc. and more... Then 3.5 apples.", 2,
                    (const char *[]){"files, etc. and more...", "Then 3.5 apples."});
    check_sentences("   ", 0, NULL);
}

static qkv_documents *read_one(const char *name, const char *content, qkv_documents_format f, int column, int group,
                               const char *doc_start) {
    qkv_documents *d = qkv_documents_new();
    qkv_documents_source s = {.path = test_write_file(dir, name, content), .format = f, .column = column,
                              .group = group, .doc_start = doc_start};
    if (qkv_documents_read(d, &s)) {
        qkv_documents_free(d);
        return NULL;
    }
    return d;
}

TEST(formats) {
    qkv_documents *d = read_one("a.txt", "CHAPTER 1\nOne. Two.\nThree.\n\nFour.\nCHAPTER 2\nFive. Six.\n",
                                QKV_DOCS_TEXT, 0, 0, "CHAPTER");
    CHECK_NN(d);
    if (d) {
        CHECK(d->n_docs == 3 && d->n_sentences == 6);
        size_t n;
        char *const *s = qkv_documents_doc(d, 0, &n);
        CHECK(n == 3 && !strcmp(s[2], "Three."));
        s = qkv_documents_doc(d, 2, &n);
        CHECK(n == 2 && !strcmp(s[0], "Five."));
        CHECK(qkv_documents_multi(d) == 2);
        CHECK_OK(qkv_documents_check_nsp(d, "a.txt"));
    }
    qkv_documents_free(d);
    d = read_one("b.tsv", "1\tAb cd. Ef gh.\tx\n0\tIj kl.\ty\n", QKV_DOCS_TSV, 1, 0, NULL);
    CHECK_NN(d);
    if (d) CHECKF(d->n_docs == 2 && d->n_sentences == 3 && !strcmp(d->sentences[1], "Ef gh."), "%zu docs %zu sents '%s'", d->n_docs, d->n_sentences, d->sentences[1]);
    qkv_documents_free(d);
    d = read_one("c.tsv", "The\tDET\nend\tNOUN\n.\t.\n\nA\tDET\n\nB\tX\n\n", QKV_DOCS_TOKENS, 0, 2, NULL);
    CHECK_NN(d);
    if (d) CHECK(d->n_docs == 2 && d->n_sentences == 3 && !strcmp(d->sentences[0], "The end ."));
    qkv_documents_free(d);
}

TEST(bad_input) {
    CHECK(read_one("dev.txt", "A. B.\n", QKV_DOCS_TEXT, 0, 0, NULL) == NULL);
    CHECK(strstr(qkv_last_error(), "dev.txt") && strstr(qkv_last_error(), "never pretraining"));
    CHECK(read_one("short.tsv", "a\tb\nc\n", QKV_DOCS_TSV, 1, 0, NULL) == NULL);
    CHECK(strstr(qkv_last_error(), "short.tsv:2"));
    qkv_documents *d = read_one("single.txt", "One sentence.\n\nAnother one.\n", QKV_DOCS_TEXT, 0, 0, NULL);
    CHECK_NN(d);
    if (d) {
        CHECK(d->n_docs == 2);
        CHECK(qkv_documents_check_nsp(d, "single.txt") != QKV_OK);
        CHECK(strstr(qkv_last_error(), "single.txt") && strstr(qkv_last_error(), "impossible"));
    }
    qkv_documents_free(d);
}

TEST(heldout_split) {
    qkv_documents *d = qkv_documents_new();
    char buf[32];
    for (int i = 0; i < 200; i++) {
        snprintf(buf, sizeof buf, "Doc %d.", i);
        const char *s[2] = {buf, "End."};
        CHECK_OK(qkv_documents_add(d, s, 2));
    }
    qkv_documents *tr, *ho, *tr2, *ho2;
    CHECK_OK(qkv_documents_split(d, 0.1, 7, &tr, &ho));
    CHECK_OK(qkv_documents_split(d, 0.1, 7, &tr2, &ho2));
    CHECK(tr->n_docs + ho->n_docs == 200 && ho->n_docs > 5 && ho->n_docs < 40);
    CHECK(ho->n_docs == ho2->n_docs);
    for (size_t i = 0; i < ho->n_sentences && i < ho2->n_sentences; i++)
        CHECK(!strcmp(ho->sentences[i], ho2->sentences[i]));
    qkv_documents_free(tr2), qkv_documents_free(ho2);
    CHECK_OK(qkv_documents_split(d, 0.1, 8, &tr2, &ho2));
    bool differ = ho2->n_docs != ho->n_docs;
    for (size_t i = 0; !differ && i < ho->n_sentences; i++) differ = strcmp(ho->sentences[i], ho2->sentences[i]) != 0;
    CHECK(differ);
    qkv_documents_free(tr), qkv_documents_free(ho), qkv_documents_free(tr2), qkv_documents_free(ho2);
    CHECK_OK(qkv_documents_split(d, 0.0001, 1, &tr, &ho));
    CHECK(ho->n_docs == 1 && tr->n_docs == 199);
    qkv_documents_free(tr), qkv_documents_free(ho);
    CHECK(qkv_documents_split(d, 1.0, 1, &tr, &ho) != QKV_OK);
    qkv_documents_free(d);
}

TEST(shared_data) {
    const char *root = test_shared_path("data");
    if (!root || !test_file_exists(test_shared_path("data/lm/train.txt"))) {
        test_skip("no ../shared/data");
        return;
    }
    qkv_documents *d = qkv_documents_new();
    CHECK_OK(qkv_documents_read_data_dir(d, test_shared_path("data")));
    printf("shared data: %zu documents (%zu with 2+ sentences), %zu sentences\n", d->n_docs, qkv_documents_multi(d),
           d->n_sentences);
    CHECK(d->n_docs > 50000 && qkv_documents_multi(d) > 30000 && d->n_sentences > 200000);
    CHECK_OK(qkv_documents_check_nsp(d, "shared data"));
    qkv_documents_free(d);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    RUN(sentence_rule);
    RUN(formats);
    RUN(bad_input);
    RUN(heldout_split);
    RUN(shared_data);
    return test_finish();
}
