/* Byte-level BPE training: count pre-tokens, then repeatedly merge the most frequent adjacent pair, keeping pair
 * counts up to date incrementally; writes vocab.json + merges.txt in GPT-2's format. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/text.h"
#include "text/text_internal.h"

typedef struct trainer {
    qkv__strmap words; /* distinct pre-tokens */
    int64_t *wcount;
    size_t wcap;
    const char *text; /* text being counted */
    /* tokens: raw bytes per id */
    qkv__strmap tokens; /* raw bytes -> id (entry index == id) */
    /* per word: its current symbols */
    int32_t **wsym;
    size_t *wlen;
    qkv__u64map pairs; /* (a << 32 | b) -> count over all words */
} trainer;

static qkv_status count_word(void *ctx, size_t start, size_t end) {
    trainer *t = ctx;
    int64_t e = qkv__strmap_find(&t->words, t->text + start, end - start);
    if (e < 0) {
        e = qkv__strmap_insert(&t->words, t->text + start, end - start, 0);
        if (e < 0) return qkv_last_status();
        if ((size_t)e >= t->wcap) {
            size_t cap = t->wcap ? t->wcap * 2 : 1024;
            int64_t *p = realloc(t->wcount, cap * sizeof *p);
            if (!p) return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_train: out of memory");
            t->wcount = p;
            t->wcap = cap;
        }
        t->wcount[e] = 0;
    }
    t->wcount[e]++;
    return QKV_OK;
}

static bool add_pair(trainer *t, int32_t a, int32_t b, int64_t delta) {
    int64_t *c = qkv__u64map_put(&t->pairs, (uint64_t)(uint32_t)a << 32 | (uint32_t)b, 0);
    if (!c) return false;
    *c += delta;
    return true;
}

/* memcmp order, a proper prefix first. */
static int cmp_bytes(const char *a, size_t la, const char *b, size_t lb) {
    int r = memcmp(a, b, la < lb ? la : lb);
    return r ? r : (la < lb ? -1 : la > lb);
}

static int cmp_pairs(const trainer *t, uint64_t p, uint64_t q) {
    size_t a = p >> 32, b = (uint32_t)p, c = q >> 32, d = (uint32_t)q;
    const qkv__strmap *m = &t->tokens;
    int r = cmp_bytes(qkv__strmap_key(m, a), m->key_len[a], qkv__strmap_key(m, c), m->key_len[c]);
    return r ? r : cmp_bytes(qkv__strmap_key(m, b), m->key_len[b], qkv__strmap_key(m, d), m->key_len[d]);
}

/* Token in GPT-2's byte-level unicode form (each byte as its code point). */
static bool unicode_form(const char *raw, size_t len, qkv__buf *out) {
    out->n = 0;
    for (size_t i = 0; i < len; i++) {
        char u[4];
        if (!qkv__buf_put(out, u, (size_t)qkv__utf8_encode(qkv__byte_to_unicode((unsigned char)raw[i]), u)))
            return false;
    }
    return qkv__buf_put(out, "", 0);
}

static qkv_status write_files(trainer *t, const int64_t *merges, size_t n_merges, const char *const *specials,
                              const char *vocab_json, const char *merges_txt) {
    qkv_status st = QKV_OK;
    qkv__buf u = {0}, u2 = {0};
    char *json = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root) return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_train: out of memory");
    size_t next_id = t->tokens.n;
    for (size_t id = 0; id < t->tokens.n; id++) {
        if (!unicode_form(qkv__strmap_key(&t->tokens, id), t->tokens.key_len[id], &u)) goto nomem;
        if (!cJSON_AddNumberToObject(root, u.p, (double)id)) goto nomem;
    }
    for (size_t i = 0; specials && specials[i]; i++) {
        if (cJSON_GetObjectItemCaseSensitive(root, specials[i])) continue;
        if (!cJSON_AddNumberToObject(root, specials[i], (double)next_id++)) goto nomem;
    }
    json = cJSON_PrintUnformatted(root);
    if (!json) goto nomem;
    FILE *f = fopen(vocab_json, "wb");
    if (!f) {
        st = qkv_error_set(QKV_ERR_IO, "%s: cannot create: %s", vocab_json, strerror(errno));
        goto done;
    }
    fputs(json, f);
    fputc('\n', f);
    if (fclose(f)) {
        st = qkv_error_set(QKV_ERR_IO, "%s: write error", vocab_json);
        goto done;
    }
    f = fopen(merges_txt, "wb");
    if (!f) {
        st = qkv_error_set(QKV_ERR_IO, "%s: cannot create: %s", merges_txt, strerror(errno));
        goto done;
    }
    fputs("#version: 0.2\n", f);
    for (size_t i = 0; i < n_merges; i++) {
        size_t a = (uint64_t)merges[i] >> 32, b = (uint32_t)merges[i];
        if (!unicode_form(qkv__strmap_key(&t->tokens, a), t->tokens.key_len[a], &u) ||
            !unicode_form(qkv__strmap_key(&t->tokens, b), t->tokens.key_len[b], &u2)) {
            fclose(f);
            goto nomem;
        }
        fprintf(f, "%s %s\n", u.p, u2.p);
    }
    if (fclose(f)) st = qkv_error_set(QKV_ERR_IO, "%s: write error", merges_txt);
    goto done;
nomem:
    st = qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_train: out of memory");
done:
    free(json);
    cJSON_Delete(root);
    free(u.p);
    free(u2.p);
    return st;
}

static void trainer_free(trainer *t) {
    for (size_t w = 0; t->wsym && w < t->words.n; w++) free(t->wsym[w]);
    free(t->wsym);
    free(t->wlen);
    free(t->wcount);
    qkv__strmap_free(&t->words);
    qkv__strmap_free(&t->tokens);
    qkv__u64map_free(&t->pairs);
}

qkv_status qkv_bpe_train(const char *const *texts, const size_t *lens, size_t ntexts, size_t vocab_size,
                         int64_t min_freq, const char *const *specials, const char *vocab_json,
                         const char *merges_txt) {
    if ((ntexts && (!texts || !lens)) || !vocab_json || !merges_txt)
        return qkv_error_set(QKV_ERR_INVALID, "qkv_bpe_train: NULL argument");
    if (vocab_size < 256 || vocab_size > INT32_MAX)
        return qkv_error_set(QKV_ERR_INVALID, "qkv_bpe_train: vocab_size %zu must be in [256, 2^31)", vocab_size);
    if (min_freq < 1) return qkv_error_set(QKV_ERR_INVALID, "qkv_bpe_train: min_freq %lld < 1", (long long)min_freq);
    trainer t = {0};
    int64_t *merges = NULL;
    qkv__buf joined = {0};
    qkv_status st = QKV_OK;
    qkv__pretok *pt = qkv__pretok_new();
    if (!pt) return qkv_last_status();
    for (size_t i = 0; i < ntexts && !st; i++) {
        t.text = texts[i];
        st = qkv__pretok_run(pt, texts[i], lens[i], count_word, &t);
    }
    qkv__pretok_free(pt);
    if (st) goto done;
    /* The 256 byte tokens in GPT-2's id order: printable bytes first, as bytes_to_unicode lists them. */
    for (int pass = 0; pass < 2; pass++)
        for (unsigned c = 0; c < 256; c++) {
            bool printable = qkv__byte_to_unicode(c) == (int32_t)c;
            char byte = (char)c;
            if (printable == (pass == 0) && qkv__strmap_insert(&t.tokens, &byte, 1, 0) < 0) goto fail;
        }
    int32_t byte_id[256];
    for (unsigned c = 0; c < 256; c++) {
        char byte = (char)c;
        byte_id[c] = (int32_t)qkv__strmap_find(&t.tokens, &byte, 1);
    }
    t.wsym = calloc(t.words.n + 1, sizeof *t.wsym);
    t.wlen = calloc(t.words.n + 1, sizeof *t.wlen);
    merges = malloc((vocab_size + 1) * sizeof *merges);
    if (!t.wsym || !t.wlen || !merges) goto nomem;
    for (size_t w = 0; w < t.words.n; w++) {
        size_t len = t.words.key_len[w];
        const unsigned char *s = (const unsigned char *)qkv__strmap_key(&t.words, w);
        if (!(t.wsym[w] = malloc(len * sizeof **t.wsym))) goto nomem;
        t.wlen[w] = len;
        for (size_t i = 0; i < len; i++) t.wsym[w][i] = byte_id[s[i]];
        for (size_t i = 0; i + 1 < len; i++)
            if (!add_pair(&t, t.wsym[w][i], t.wsym[w][i + 1], t.wcount[w])) goto fail;
    }
    size_t n_merges = 0;
    while (t.tokens.n < vocab_size) {
        uint64_t best = UINT64_MAX;
        int64_t best_count = 0;
        for (size_t i = 0; i < t.pairs.cap; i++) {
            uint64_t k = t.pairs.keys[i];
            int64_t c = t.pairs.vals[i];
            if (k == UINT64_MAX || c < min_freq || c < best_count) continue;
            if (c > best_count || cmp_pairs(&t, k, best) < 0) best = k, best_count = c;
        }
        if (best == UINT64_MAX) break;
        int32_t a = (int32_t)(best >> 32), b = (int32_t)(uint32_t)best;
        joined.n = 0;
        if (!qkv__buf_put(&joined, qkv__strmap_key(&t.tokens, (size_t)a), t.tokens.key_len[a]) ||
            !qkv__buf_put(&joined, qkv__strmap_key(&t.tokens, (size_t)b), t.tokens.key_len[b]))
            goto fail;
        /* The merged bytes may already be a token reached by another split: the merge is kept, the id reused. */
        int64_t m = qkv__strmap_find(&t.tokens, joined.p, joined.n);
        if (m < 0 && (m = qkv__strmap_insert(&t.tokens, joined.p, joined.n, 0)) < 0) goto fail;
        merges[n_merges++] = (int64_t)best;
        for (size_t w = 0; w < t.words.n; w++) {
            int32_t *s = t.wsym[w];
            size_t len = t.wlen[w], k = 0;
            int64_t c = t.wcount[w];
            for (size_t i = 0; i < len; i++) {
                if (i + 1 < len && s[i] == a && s[i + 1] == b) {
                    if (k > 0 && (!add_pair(&t, s[k - 1], a, -c) || !add_pair(&t, s[k - 1], (int32_t)m, c)))
                        goto fail;
                    if (i + 2 < len && (!add_pair(&t, b, s[i + 2], -c) || !add_pair(&t, (int32_t)m, s[i + 2], c)))
                        goto fail;
                    if (!add_pair(&t, a, b, -c)) goto fail;
                    s[k++] = (int32_t)m;
                    i++;
                } else {
                    s[k++] = s[i];
                }
            }
            t.wlen[w] = k;
        }
    }
    st = write_files(&t, merges, n_merges, specials, vocab_json, merges_txt);
    goto done;
nomem:
    qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_train: out of memory");
fail:
    st = qkv_last_status();
done:
    free(merges);
    free(joined.p);
    trainer_free(&t);
    return st;
}
