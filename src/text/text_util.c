/* Shared helpers of the tokenizers: hash maps, UTF-8, buffers, file reading (see text_internal.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "qkv/fsutil.h"
#include "qkv/text.h"
#include "text/text_internal.h"

/* 64-bit multiply-xorshift over 8-byte words: fast for the short keys of vocabularies, well mixed so that
 * power-of-two tables with linear probing behave. */
static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    return x;
}

uint64_t qkv__hash_bytes(const void *p, size_t len) {
    const unsigned char *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (len * 0xff51afd7ed558ccdULL);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = mix64(h ^ w) + 0x9e3779b97f4a7c15ULL;
        s += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, len);
    return mix64(h ^ w ^ ((uint64_t)len << 56));
}

void qkv__strmap_free(qkv__strmap *m) {
    free(m->slots);
    free(m->key_off);
    free(m->key_len);
    free(m->hash);
    free(m->val);
    free(m->bytes);
    memset(m, 0, sizeof *m);
}

int64_t qkv__strmap_find(const qkv__strmap *m, const char *k, size_t len) {
    if (!m->cap) return -1;
    uint32_t h = (uint32_t)qkv__hash_bytes(k, len);
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t s = m->slots[i];
        if (!s) return -1;
        size_t e = s - 1;
        if (m->hash[e] == h && m->key_len[e] == len && memcmp(m->bytes + m->key_off[e], k, len) == 0)
            return (int64_t)e;
    }
}

static bool strmap_rehash(qkv__strmap *m, size_t cap) {
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (size_t e = 0; e < m->n; e++) {
        size_t i = m->hash[e] & (cap - 1);
        while (slots[i]) i = (i + 1) & (cap - 1);
        slots[i] = (uint32_t)(e + 1);
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

int64_t qkv__strmap_insert(qkv__strmap *m, const char *k, size_t len, int32_t val) {
    if (m->n >= UINT32_MAX - 1 || len >= UINT32_MAX) {
        qkv_error_set(QKV_ERR_RANGE, "string map: too many or too long keys");
        return -1;
    }
    if ((m->n + 1) * 4 >= m->cap * 3 && !strmap_rehash(m, m->cap ? m->cap * 2 : 64)) goto nomem;
    size_t cap_n = m->cap_n;
    if (m->n + 1 > cap_n) {
        size_t c1 = cap_n, c2 = cap_n, c3 = cap_n, c4 = cap_n;
        if (!grow((void **)&m->key_off, &c1, m->n + 1, sizeof *m->key_off) ||
            !grow((void **)&m->key_len, &c2, m->n + 1, sizeof *m->key_len) ||
            !grow((void **)&m->hash, &c3, m->n + 1, sizeof *m->hash) ||
            !grow((void **)&m->val, &c4, m->n + 1, sizeof *m->val))
            goto nomem;
        m->cap_n = c1;
    }
    if (!grow((void **)&m->bytes, &m->cap_bytes, m->nbytes + len + 1, 1)) goto nomem;
    size_t e = m->n++;
    memcpy(m->bytes + m->nbytes, k, len);
    m->bytes[m->nbytes + len] = '\0';
    m->key_off[e] = m->nbytes;
    m->key_len[e] = (uint32_t)len;
    m->hash[e] = (uint32_t)qkv__hash_bytes(k, len);
    m->val[e] = val;
    m->nbytes += len + 1;
    size_t i = m->hash[e] & (m->cap - 1);
    while (m->slots[i]) i = (i + 1) & (m->cap - 1);
    m->slots[i] = (uint32_t)(e + 1);
    return (int64_t)e;
nomem:
    qkv_error_set(QKV_ERR_NOMEM, "string map: out of memory");
    return -1;
}

void qkv__u64map_free(qkv__u64map *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int64_t *qkv__u64map_get(const qkv__u64map *m, uint64_t key) {
    if (!m->cap) return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == key) return &m->vals[i];
        if (m->keys[i] == UINT64_MAX) return NULL;
    }
}

static bool u64map_rehash(qkv__u64map *m, size_t cap) {
    uint64_t *keys = malloc(cap * sizeof *keys);
    int64_t *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    memset(keys, 0xff, cap * sizeof *keys);
    for (size_t j = 0; j < m->cap; j++) {
        if (m->keys[j] == UINT64_MAX) continue;
        size_t i = mix64(m->keys[j]) & (cap - 1);
        while (keys[i] != UINT64_MAX) i = (i + 1) & (cap - 1);
        keys[i] = m->keys[j];
        vals[i] = m->vals[j];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return true;
}

int64_t *qkv__u64map_put(qkv__u64map *m, uint64_t key, int64_t init) {
    int64_t *v = qkv__u64map_get(m, key);
    if (v) return v;
    if ((m->n + 1) * 2 >= m->cap && !u64map_rehash(m, m->cap ? m->cap * 2 : 64)) {
        qkv_error_set(QKV_ERR_NOMEM, "hash map: out of memory");
        return NULL;
    }
    size_t i = mix64(key) & (m->cap - 1);
    while (m->keys[i] != UINT64_MAX) i = (i + 1) & (m->cap - 1);
    m->keys[i] = key;
    m->vals[i] = init;
    m->n++;
    return &m->vals[i];
}

int qkv__utf8_decode(const unsigned char *s, size_t len, int32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    }
    int n;
    int32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) n = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, v = c & 0x07, min = 0x10000;
    else return 0;
    if (len < (size_t)n) return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return n;
}

int qkv__utf8_encode(int32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t qkv__utf8_validate(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        int k = qkv__utf8_decode(u + i, len - i, &cp);
        if (!k) return i;
        i += (size_t)k;
    }
    return len;
}

/* Index of the character holding byte `target`, walking forward from (*pos, *chars); restarts from 0 when the
 * target lies behind (offsets of a token list are nearly sorted, so this is linear overall). */
static size_t char_index(const unsigned char *u, size_t len, size_t target, size_t *pos, size_t *chars) {
    if (target < *pos) *pos = 0, *chars = 0;
    while (*pos < len) {
        int32_t cp;
        int d = qkv__utf8_decode(u + *pos, len - *pos, &cp);
        size_t k = d ? (size_t)d : 1;
        if (*pos + k > target) break;
        *pos += k;
        (*chars)++;
    }
    return *chars;
}

void qkv_utf8_char_offsets(const char *text, size_t len, size_t *offsets, size_t n) {
    const unsigned char *u = (const unsigned char *)text;
    size_t pos = 0, chars = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        size_t s = offsets[i] < len ? offsets[i] : len, e = offsets[i + 1] < len ? offsets[i + 1] : len;
        size_t cs = char_index(u, len, s, &pos, &chars);
        offsets[i + 1] = e > s ? char_index(u, len, e - 1, &pos, &chars) + 1 : cs;
        offsets[i] = cs;
    }
}

bool qkv__buf_reserve(qkv__buf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return true;
    size_t c = b->cap ? b->cap : 256;
    while (c < b->n + extra + 1) c *= 2;
    char *p = realloc(b->p, c);
    if (!p) {
        qkv_error_set(QKV_ERR_NOMEM, "out of memory (buffer of %zu bytes)", c);
        return false;
    }
    b->p = p;
    b->cap = c;
    return true;
}

bool qkv__buf_put(qkv__buf *b, const void *p, size_t n) {
    if (!qkv__buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

char *qkv__read_file(const char *path, size_t *len) {
    /* Tokenizer files (vocab.txt, vocab.json, merges.txt) are at most tens of MB; a wrong path such as /dev/zero
     * stops at the cap instead of filling memory. */
    return qkv_fs_read_capped(path, (uint64_t)256 << 20, 0, "tokenizer file", len);
}

bool qkv__is_bert_punct(int32_t cp) {
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
        return true;
    if (cp < 128) return false;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO: return true;
    default: return false;
    }
}

bool qkv__is_unicode_space(int32_t cp) {
    if (cp == ' ' || (cp >= 9 && cp <= 13)) return true;
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

qkv_status qkv__tokens_pack(const qkv__buf *buf, size_t n, char ***toks) {
    size_t head = (n + 1) * sizeof(char *);
    char **out = malloc(head + buf->n + 1);
    if (!out) return qkv_error_set(QKV_ERR_NOMEM, "out of memory (%zu tokens)", n);
    char *bytes = (char *)out + head;
    if (buf->n) memcpy(bytes, buf->p, buf->n);
    bytes[buf->n] = '\0';
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = bytes + off;
        off += strlen(bytes + off) + 1;
    }
    out[n] = NULL;
    *toks = out;
    return QKV_OK;
}

void qkv_encoding_free(qkv_encoding *e) {
    if (!e) return;
    free(e->ids);
    free(e->type_ids);
    free(e->offsets);
    memset(e, 0, sizeof *e);
}
