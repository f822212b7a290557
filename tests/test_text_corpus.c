/* GPT-2 BPE and BERT WordPiece ids on ~3,700 lines of real text (shared/data, read in place) against Hugging
 * Face tokenizers: per-line id counts and hashes in tests/fixtures/tokenizer_corpus_refs.txt, written by
 * tests/ref/gen_tokenizer_refs.js (the text order is documented there). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_text_json.h"

static uint64_t fnv_ids(const int32_t *ids, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    char num[16];
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(num, sizeof num, i ? ",%d" : "%d", (int)ids[i]);
        for (int j = 0; j < k; j++) h = (h ^ (unsigned char)num[j]) * 0x100000001b3ULL;
    }
    return h;
}

typedef struct text_list {
    const char **p;
    size_t *len;
    size_t n, cap;
} text_list;

static void add_text(text_list *l, const char *p, size_t len) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 4096;
        l->p = realloc(l->p, l->cap * sizeof *l->p);
        l->len = realloc(l->len, l->cap * sizeof *l->len);
    }
    l->p[l->n] = p;
    l->len[l->n++] = len;
}

/* Lines of a file; column: -1 whole line, 0/1 that tab-separated field, 2 everything after the first tab, 3 both
 * of the first two fields. Returns the number of texts added, -1 if the file is missing. */
static long add_lines(text_list *l, char **keep, const char *rel, int column) {
    const char *path = test_shared_path(rel);
    size_t len = 0;
    char *data = path ? tt_slurp(path, &len) : NULL;
    if (!data) return -1;
    *keep = data;
    long added = 0;
    for (size_t pos = 0; pos < len;) {
        char *nl = memchr(data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - data) : len;
        const char *line = data + pos;
        size_t ll = end - pos;
        const char *tab = memchr(line, '\t', ll);
        if (column < 0 || !tab) {
            add_text(l, line, ll);
            added++;
        } else if (column == 2) {
            add_text(l, tab + 1, (size_t)(line + ll - tab - 1));
            added++;
        } else {
            const char *tab2 = memchr(tab + 1, '\t', (size_t)(line + ll - tab - 1));
            const char *e2 = tab2 ? tab2 : line + ll;
            add_text(l, line, (size_t)(tab - line));
            add_text(l, tab + 1, (size_t)(e2 - tab - 1));
            added += 2;
        }
        pos = end + 1;
    }
    return added;
}

TEST(corpus_vs_hf_tokenizers) {
    const char *gdir = test_shared_path("pretrained/gpt2-tokenizer");
    char v[4096], m[4096];
    snprintf(v, sizeof v, "%s/vocab.json", gdir ? gdir : "");
    snprintf(m, sizeof m, "%s/merges.txt", gdir ? gdir : "");
    const char *bvp = test_shared_path("pretrained/bert-base-uncased-tokenizer/vocab.txt");
    char bv[4096]; /* test_shared_path's buffer is reused by the next call */
    snprintf(bv, sizeof bv, "%s", bvp ? bvp : "");
    if (!gdir || !test_file_exists(v) || !test_file_exists(bv) ||
        !test_file_exists(test_shared_path("data/lm/dev.txt"))) {
        test_skip("shared tokenizer files or shared/data not found (QKV_SHARED)");
        return;
    }
    size_t rlen = 0;
    char *ref = tt_slurp(test_fixture_path("tokenizer_corpus_refs.txt"), &rlen);
    CHECK_NN(ref);
    if (!ref) return;
    text_list texts = {0};
    char *keep[3] = {0};
    long counts[3] = {add_lines(&texts, &keep[0], "data/lm/dev.txt", -1),
                      add_lines(&texts, &keep[1], "data/translation/dev.tsv", 3),
                      add_lines(&texts, &keep[2], "data/spam/dev.tsv", 2)};
    qkv_bpe *bpe = qkv_bpe_load(v, m);
    qkv_wordpiece *wp = qkv_wordpiece_load(bv, NULL);
    CHECK_NN(bpe);
    CHECK_NN(wp);
    size_t row = 0, src = 0, bad_g = 0, bad_b = 0, tokens_g = 0, tokens_b = 0;
    for (char *line = ref; bpe && wp && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (strncmp(line, "source ", 7) == 0) {
            char name[256];
            long n = -1;
            sscanf(line + 7, "%255s %ld", name, &n);
            CHECKF(src < 3 && n == counts[src], "%s: %ld texts in the references, %ld in the data", name, n,
                   src < 3 ? counts[src] : -1L);
            src++;
        } else if (line[0] != '#') {
            size_t gn, bn;
            uint64_t gh, bh;
            CHECK(sscanf(line, "%zu %" SCNx64 " %zu %" SCNx64, &gn, &gh, &bn, &bh) == 4);
            CHECK(row < texts.n);
            if (row >= texts.n) break;
            int32_t *ids;
            size_t n;
            CHECK_OK(qkv_bpe_encode(bpe, texts.p[row], texts.len[row], &ids, &n));
            if (n != gn || fnv_ids(ids, n) != gh) {
                if (bad_g++ < 5) printf("  gpt2 differs on text %zu (%zu ids, expected %zu): %.80s\n", row, n, gn,
                                        texts.p[row]);
            }
            tokens_g += n;
            free(ids);
            qkv_encoding e;
            CHECK_OK(qkv_wordpiece_encode(wp, texts.p[row], texts.len[row], NULL, 0, false, &e));
            if (e.n != bn || fnv_ids(e.ids, e.n) != bh) {
                if (bad_b++ < 5) printf("  bert differs on text %zu (%zu ids, expected %zu): %.80s\n", row, e.n, bn,
                                        texts.p[row]);
            }
            tokens_b += e.n;
            qkv_encoding_free(&e);
            row++;
        }
        if (!nl) break;
        line = nl + 1;
    }
    CHECKF(row == texts.n && row > 3000, "%zu reference rows for %zu texts", row, texts.n);
    CHECKF(bad_g == 0, "gpt2: %zu of %zu texts differ", bad_g, row);
    CHECKF(bad_b == 0, "bert: %zu of %zu texts differ", bad_b, row);
    printf("  %zu texts: gpt2 %zu ids (%zu differ), bert %zu ids (%zu differ)\n", row, tokens_g, bad_g, tokens_b,
           bad_b);
    qkv_bpe_free(bpe);
    qkv_wordpiece_free(wp);
    for (int i = 0; i < 3; i++) free(keep[i]);
    free(texts.p);
    free(texts.len);
    free(ref);
}

int main(void) {
    RUN(corpus_vs_hf_tokenizers);
    return test_finish();
}
