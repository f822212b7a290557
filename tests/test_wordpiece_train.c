/* WordPiece training (qkv_wordpiece_train): the vocabulary's layout, merges in frequency order with "##"
 * continuations, a vocabulary the WordPiece encoder loads and that covers its training text without [UNK], the same
 * file from the same input, and the size reached on real text (Austen). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

static char dir[] = "/tmp/qkv_wpt_XXXXXX";

static char **read_lines(const char *path, size_t *n) {
    char *s = test_read_file(path);
    *n = 0;
    if (!s) return NULL;
    size_t cap = 16;
    char **l = malloc(cap * sizeof *l);
    for (char *p = strtok(s, "\n"); p; p = strtok(NULL, "\n")) {
        if (*n == cap) l = realloc(l, (cap *= 2) * sizeof *l);
        l[(*n)++] = strdup(p);
    }
    free(s);
    return l;
}

static void free_lines(char **l, size_t n) {
    for (size_t i = 0; i < n; i++) free(l[i]);
    free(l);
}

TEST(small_corpus) {
    const char *texts[] = {"low lower lowest", "Low, newer newest!", "wider widest low"};
    size_t lens[3];
    for (int i = 0; i < 3; i++) lens[i] = strlen(texts[i]);
    char path[256];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    CHECK_OK(qkv_wordpiece_train(texts, lens, 3, 40, 2, 0, NULL, path));
    size_t n;
    char **v = read_lines(path, &n);
    CHECK(v && n <= 40 && n > 20);
    if (!v) return;
    const char *specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int i = 0; i < 5; i++) CHECK(!strcmp(v[i], specials[i]));
    /* alphabet: initial characters in code point order, then the "##" forms */
    CHECK(!strcmp(v[5], "!") && !strcmp(v[6], ","));
    bool has_low = false, has_hash_e = false;
    for (size_t i = 0; i < n; i++) {
        has_low |= !strcmp(v[i], "low");
        has_hash_e |= !strcmp(v[i], "##e");
        CHECK(strcmp(v[i], "##") != 0);
    }
    CHECK(has_low && has_hash_e);
    /* the first merge is the most frequent pair: "##o" "##w" and "l" "##o" both occur 5 times (low x3, lower,
     * lowest); the tie goes to the smaller left string, "##o" */
    size_t first = 5;
    while (first < n && (strlen(v[first]) == 1 || (v[first][0] == '#' && strlen(v[first]) == 3))) first++;
    CHECKF(first < n && !strcmp(v[first], "##ow"), "first merge '%s'", first < n ? v[first] : "");
    free_lines(v, n);
    qkv_wordpiece *wp = qkv_wordpiece_load(path, NULL);
    CHECK_NN(wp);
    qkv_encoding e = {0};
    CHECK_OK(qkv_wordpiece_encode(wp, texts[1], lens[1], NULL, 0, false, &e));
    int32_t unk = qkv_wordpiece_id(wp, "[UNK]");
    for (size_t i = 0; i < e.n; i++) CHECK(e.ids[i] != unk);
    CHECK(e.n >= 4);
    qkv_encoding_free(&e);
    qkv_wordpiece_free(wp);
    CHECK(qkv_wordpiece_train(texts, lens, 3, 3, 2, 0, NULL, path) != QKV_OK);
    CHECK(qkv_wordpiece_train(texts, lens, 3, 100, 0, 0, NULL, path) != QKV_OK);
}

TEST(austen) {
    const char *src = test_shared_path("data/lm/train.txt");
    if (!src || !test_file_exists(src)) {
        test_skip("no ../shared/data");
        return;
    }
    size_t n_all;
    char **lines = read_lines(src, &n_all);
    size_t n = n_all > 3000 ? 3000 : n_all;
    size_t *lens = malloc(n * sizeof *lens);
    for (size_t i = 0; i < n; i++) lens[i] = strlen(lines[i]);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/a.txt", dir);
    snprintf(b, sizeof b, "%s/b.txt", dir);
    CHECK_OK(qkv_wordpiece_train((const char *const *)lines, lens, n, 3000, 2, 1000, NULL, a));
    CHECK_OK(qkv_wordpiece_train((const char *const *)lines, lens, n, 3000, 2, 1000, NULL, b));
    char *ta = test_read_file(a), *tb = test_read_file(b);
    CHECK(ta && tb && !strcmp(ta, tb));
    size_t nv;
    char **v = read_lines(a, &nv);
    CHECKF(nv == 3000, "vocab of %zu tokens", nv);
    free_lines(v, nv);
    qkv_wordpiece *wp = qkv_wordpiece_load(a, NULL);
    CHECK_NN(wp);
    size_t words = 0, pieces = 0, unks = 0;
    int32_t unk = qkv_wordpiece_id(wp, "[UNK]");
    for (size_t i = 0; wp && i < n; i++) {
        qkv_encoding e = {0};
        CHECK_OK(qkv_wordpiece_encode(wp, lines[i], lens[i], NULL, 0, false, &e));
        for (size_t j = 0; j < e.n; j++) {
            pieces++;
            unks += e.ids[j] == unk;
            const char *t = qkv_wordpiece_token(wp, e.ids[j]);
            words += t && strncmp(t, "##", 2) != 0;
        }
        qkv_encoding_free(&e);
    }
    printf("austen, 3,000 paragraphs, 3,000 tokens: %.3f pieces per word, %zu [UNK]\n", (double)pieces / (double)words,
           unks);
    CHECK(unks == 0 && pieces < words * 13 / 10);
    qkv_wordpiece_free(wp);
    free(ta), free(tb), free(lens);
    free_lines(lines, n_all);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    RUN(small_corpus);
    RUN(austen);
    return test_finish();
}
