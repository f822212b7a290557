/* Vocabulary (token <-> id), token counting, building from counts, plain-file save/load. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/text.h"
#include "text/text_internal.h"

struct qkv_vocab {
    qkv__strmap map; /* entry index == id */
};

struct qkv_token_counter {
    qkv__strmap map; /* entry value unused; counts kept apart so they can exceed int32 */
    int64_t *counts;
    size_t cap;
};

qkv_vocab *qkv_vocab_new(void) {
    qkv_vocab *v = calloc(1, sizeof *v);
    if (!v) qkv_error_set(QKV_ERR_NOMEM, "qkv_vocab_new: out of memory");
    return v;
}

void qkv_vocab_free(qkv_vocab *v) {
    if (!v) return;
    qkv__strmap_free(&v->map);
    free(v);
}

size_t qkv_vocab_size(const qkv_vocab *v) { return v ? v->map.n : 0; }

int32_t qkv_vocab_add(qkv_vocab *v, const char *tok, size_t len) {
    if (!v || !tok || !len) {
        qkv_error_set(QKV_ERR_INVALID, "qkv_vocab_add: %s", !v ? "NULL vocabulary" : "empty token");
        return -1;
    }
    int64_t e = qkv__strmap_find(&v->map, tok, len);
    if (e >= 0) return (int32_t)e;
    if (v->map.n >= INT32_MAX) {
        qkv_error_set(QKV_ERR_RANGE, "qkv_vocab_add: vocabulary full (%zu tokens)", v->map.n);
        return -1;
    }
    e = qkv__strmap_insert(&v->map, tok, len, (int32_t)v->map.n);
    return (int32_t)e;
}

int32_t qkv_vocab_id(const qkv_vocab *v, const char *tok, size_t len) {
    if (!v || !tok) return -1;
    return (int32_t)qkv__strmap_find(&v->map, tok, len);
}

const char *qkv_vocab_token(const qkv_vocab *v, int32_t id, size_t *len) {
    if (!v || id < 0 || (size_t)id >= v->map.n) {
        qkv_error_set(QKV_ERR_RANGE, "qkv_vocab_token: id %d out of range [0, %zu)", (int)id, qkv_vocab_size(v));
        return NULL;
    }
    if (len) *len = v->map.key_len[id];
    return qkv__strmap_key(&v->map, (size_t)id);
}

static const char *const SPECIAL_NAMES[] = {"<pad>", "<unk>", "<s>", "</s>", "[CLS]", "[SEP]", "[MASK]"};

qkv_status qkv_vocab_add_specials(qkv_vocab *v, unsigned specials, int n_sentinels) {
    if (!v) return qkv_error_set(QKV_ERR_INVALID, "qkv_vocab_add_specials: NULL vocabulary");
    if (n_sentinels < 0 || n_sentinels > 100000)
        return qkv_error_set(QKV_ERR_RANGE, "qkv_vocab_add_specials: n_sentinels %d not in [0, 100000]",
                             n_sentinels);
    for (unsigned i = 0; i < sizeof SPECIAL_NAMES / sizeof *SPECIAL_NAMES; i++)
        if ((specials & (1u << i)) && qkv_vocab_add(v, SPECIAL_NAMES[i], strlen(SPECIAL_NAMES[i])) < 0)
            return qkv_last_status();
    for (int i = 0; i < n_sentinels; i++) {
        char name[32];
        int k = snprintf(name, sizeof name, "<X%d>", i);
        if (qkv_vocab_add(v, name, (size_t)k) < 0) return qkv_last_status();
    }
    return QKV_OK;
}

qkv_token_counter *qkv_token_counter_new(void) {
    qkv_token_counter *c = calloc(1, sizeof *c);
    if (!c) qkv_error_set(QKV_ERR_NOMEM, "qkv_token_counter_new: out of memory");
    return c;
}

void qkv_token_counter_free(qkv_token_counter *c) {
    if (!c) return;
    qkv__strmap_free(&c->map);
    free(c->counts);
    free(c);
}

qkv_status qkv_token_counter_add(qkv_token_counter *c, const char *tok, size_t len) {
    if (!c || !tok) return qkv_error_set(QKV_ERR_INVALID, "qkv_token_counter_add: NULL argument");
    if (!len) return QKV_OK; /* nothing to count */
    int64_t e = qkv__strmap_find(&c->map, tok, len);
    if (e < 0) {
        e = qkv__strmap_insert(&c->map, tok, len, 0);
        if (e < 0) return qkv_last_status();
        if ((size_t)e >= c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 1024;
            int64_t *p = realloc(c->counts, cap * sizeof *p);
            if (!p) return qkv_error_set(QKV_ERR_NOMEM, "qkv_token_counter_add: out of memory");
            c->counts = p;
            c->cap = cap;
        }
        c->counts[e] = 0;
    }
    c->counts[e]++;
    return QKV_OK;
}

qkv_status qkv_token_counter_add_all(qkv_token_counter *c, char *const *toks, size_t n) {
    for (size_t i = 0; i < n; i++) {
        qkv_status s = qkv_token_counter_add(c, toks[i], strlen(toks[i]));
        if (s) return s;
    }
    return QKV_OK;
}

static const qkv_token_counter *sort_counter; /* qsort has no context argument; building is not hot */

static int by_count_then_bytes(const void *pa, const void *pb) {
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    const qkv_token_counter *c = sort_counter;
    if (c->counts[a] != c->counts[b]) return c->counts[a] > c->counts[b] ? -1 : 1;
    size_t la = c->map.key_len[a], lb = c->map.key_len[b];
    int r = memcmp(qkv__strmap_key(&c->map, a), qkv__strmap_key(&c->map, b), la < lb ? la : lb);
    if (r) return r;
    return la < lb ? -1 : la > lb;
}

qkv_vocab *qkv_vocab_build(const qkv_token_counter *c, unsigned specials, int n_sentinels, int64_t min_freq,
                           size_t max_size) {
    if (!c) {
        qkv_error_set(QKV_ERR_INVALID, "qkv_vocab_build: NULL counter");
        return NULL;
    }
    qkv_vocab *v = qkv_vocab_new();
    if (!v) return NULL;
    size_t *order = malloc((c->map.n + 1) * sizeof *order);
    if (!order) {
        qkv_error_set(QKV_ERR_NOMEM, "qkv_vocab_build: out of memory");
        goto fail;
    }
    if (qkv_vocab_add_specials(v, specials, n_sentinels)) goto fail;
    size_t m = 0;
    for (size_t i = 0; i < c->map.n; i++)
        if (c->counts[i] >= min_freq) order[m++] = i;
    sort_counter = c;
    qsort(order, m, sizeof *order, by_count_then_bytes);
    for (size_t i = 0; i < m && (!max_size || v->map.n < max_size); i++)
        if (qkv_vocab_add(v, qkv__strmap_key(&c->map, order[i]), c->map.key_len[order[i]]) < 0) goto fail;
    free(order);
    return v;
fail:
    free(order);
    qkv_vocab_free(v);
    return NULL;
}

qkv_status qkv_vocab_save(const qkv_vocab *v, const char *path) {
    if (!v || !path) return qkv_error_set(QKV_ERR_INVALID, "qkv_vocab_save: NULL argument");
    for (size_t i = 0; i < v->map.n; i++) {
        const char *t = qkv__strmap_key(&v->map, i);
        if (memchr(t, '\n', v->map.key_len[i]) || memchr(t, '\r', v->map.key_len[i]))
            return qkv_error_set(QKV_ERR_INVALID, "qkv_vocab_save: token %zu contains a line break", i);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    for (size_t i = 0; i < v->map.n; i++) {
        fwrite(qkv__strmap_key(&v->map, i), 1, v->map.key_len[i], f);
        fputc('\n', f);
    }
    if (fclose(f) != 0) return qkv_error_set(QKV_ERR_IO, "%s: write error", path);
    return QKV_OK;
}

qkv_vocab *qkv_vocab_load(const char *path) {
    if (!path) {
        qkv_error_set(QKV_ERR_INVALID, "qkv_vocab_load: NULL path");
        return NULL;
    }
    size_t len;
    char *data = qkv__read_file(path, &len);
    if (!data) return NULL;
    qkv_vocab *v = qkv_vocab_new();
    if (!v) goto fail;
    size_t pos = 0, line = 0;
    while (pos < len) {
        line++;
        char *nl = memchr(data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - data) : len, tl = end - pos;
        if (tl && data[pos + tl - 1] == '\r') tl--;
        if (!tl) {
            qkv_error_set(QKV_ERR_FORMAT, "%s:%zu: empty token", path, line);
            goto fail;
        }
        size_t bad = qkv__utf8_validate(data + pos, tl);
        if (bad < tl) {
            qkv_error_set(QKV_ERR_FORMAT, "%s:%zu: invalid UTF-8 at byte %zu of the line", path, line, bad);
            goto fail;
        }
        int64_t prev = qkv__strmap_find(&v->map, data + pos, tl);
        if (prev >= 0) {
            qkv_error_set(QKV_ERR_FORMAT, "%s:%zu: duplicate token \"%.*s\" (first on line %lld)", path, line,
                          (int)(tl > 64 ? 64 : tl), data + pos, (long long)prev + 1);
            goto fail;
        }
        if (qkv_vocab_add(v, data + pos, tl) < 0) goto fail;
        pos = end + 1;
    }
    free(data);
    return v;
fail:
    free(data);
    qkv_vocab_free(v);
    return NULL;
}

qkv_status qkv_vocab_encode(const qkv_vocab *v, char *const *toks, size_t n, int32_t unk_id, int32_t *ids) {
    if (!v || (n && (!toks || !ids))) return qkv_error_set(QKV_ERR_INVALID, "qkv_vocab_encode: NULL argument");
    if (unk_id >= 0 && (size_t)unk_id >= v->map.n)
        return qkv_error_set(QKV_ERR_RANGE, "qkv_vocab_encode: unk id %d out of range [0, %zu)", (int)unk_id,
                             v->map.n);
    for (size_t i = 0; i < n; i++) {
        int32_t id = qkv_vocab_id(v, toks[i], strlen(toks[i]));
        if (id < 0) {
            if (unk_id < 0)
                return qkv_error_set(QKV_ERR_INVALID, "qkv_vocab_encode: token %zu \"%.64s\" not in the vocabulary",
                                     i, toks[i]);
            id = unk_id;
        }
        ids[i] = id;
    }
    return QKV_OK;
}
