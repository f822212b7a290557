/* SQuAD v1.1 exact match and token F1, as the official evaluate-v1.1.py computes them:
 *     normalize(s) = white_space_fix(remove_articles(remove_punc(lower(s))))
 * lower is Python's str.lower, remove_punc drops the characters of string.punctuation (ASCII), remove_articles is
 * re.sub(r'\b(a|an|the)\b', ' ', ...) with Python 3's Unicode word characters (letters, numbers, '_'), and
 * white_space_fix splits on str.split()'s whitespace. EM compares the normalised strings; F1 is the harmonic mean of
 * precision and recall of the multiset of common tokens (0 when none is common, even for two empty answers). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "metrics/metrics_internal.h"
#include "qkv/error.h"
#include "qkv/metrics.h"

static bool is_word(int32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == '_';
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return true;
    default:
        return false;
    }
}

/* The code point before byte i of s (a valid UTF-8 string), or -1 at the start. */
static int32_t cp_before(const char *s, size_t i) {
    if (i == 0) return -1;
    size_t b = i - 1;
    while (b > 0 && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
    int32_t cp = -1;
    qkv__metrics_utf8_decode((const unsigned char *)s + b, i - b, &cp);
    return cp;
}

/* The normalised tokens of s, interned into v. */
static qkv_status normalize(const char *s, qkv__vocab *v, qkv__ids *out) {
    size_t n;
    char *lo = qkv__py_lower(s, strlen(s), &n, "squad answer");
    if (!lo) return qkv_last_status();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) /* remove_punc: string.punctuation is ASCII, so bytes will do */
        if (!strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", lo[i]) || !lo[i]) lo[k++] = lo[i];
    lo[k] = '\0';
    /* remove_articles: a whole-word a, an or the (tried in that order, as the regex alternation is) becomes
     * spaces; Python puts one space, and white_space_fix makes the two the same. */
    static const char *const articles[] = {"a", "an", "the"};
    for (size_t i = 0; i < k; i++) {
        if (is_word(cp_before(lo, i))) continue;
        for (int t = 0; t < 3; t++) {
            size_t len = strlen(articles[t]);
            if (i + len > k || strncmp(lo + i, articles[t], len)) continue;
            int32_t next = -1;
            if (i + len < k) qkv__metrics_utf8_decode((const unsigned char *)lo + i + len, k - i - len, &next);
            if (is_word(next)) continue;
            memset(lo + i, ' ', len);
            i += len - 1;
            break;
        }
    }
    bool ok = qkv__split_ws(lo, k, v, out);
    free(lo);
    return ok ? QKV_OK : qkv_last_status();
}

static double f1_of(const qkv__ids *p, const qkv__ids *g) {
    int64_t same = 0;
    bool *used = calloc(g->n ? g->n : 1, sizeof *used);
    if (!used) return -1;
    for (size_t i = 0; i < p->n; i++)
        for (size_t j = 0; j < g->n; j++)
            if (!used[j] && g->v[j] == p->v[i]) {
                used[j] = true;
                same++;
                break;
            }
    free(used);
    if (!same) return 0;
    double precision = (double)same / (double)p->n, recall = (double)same / (double)g->n;
    return 2 * precision * recall / (precision + recall);
}

qkv_status qkv_squad_score(const char *prediction, const char *const *golds, int n_golds, double *em, double *f1) {
    *em = *f1 = 0;
    if (!prediction || !golds || n_golds < 1)
        return qkv_error_set(QKV_ERR_INVALID, "squad score: a prediction and at least one gold answer");
    qkv__vocab v = {0};
    qkv__ids p = {0}, g = {0};
    qkv_status st = normalize(prediction, &v, &p);
    for (int k = 0; st == QKV_OK && k < n_golds; k++) {
        g.n = 0;
        st = normalize(golds[k], &v, &g);
        if (st) break;
        bool exact = g.n == p.n && (!p.n || !memcmp(g.v, p.v, sizeof *p.v * p.n));
        double f = f1_of(&p, &g);
        if (f < 0) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        if (exact) *em = 1;
        if (f > *f1) *f1 = f;
    }
    qkv__ids_free(&p);
    qkv__ids_free(&g);
    qkv__vocab_free(&v);
    return st;
}
