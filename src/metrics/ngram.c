/* Open-addressing hash tables for the metrics: a string interner and an n-gram counter. Both grow at 50 % load. */
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_internal.h"
#include "qkv/error.h"

struct qkv__vocab_slot {
    uint64_t hash;
    size_t off, len;
    int32_t id; /* -1 = empty */
};

static uint64_t hash_bytes(const void *p, size_t n) { /* FNV-1a, then a final avalanche */
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static bool vocab_grow(qkv__vocab *v) {
    size_t cap = v->cap ? v->cap * 2 : 256;
    struct qkv__vocab_slot *slots = malloc(cap * sizeof *slots);
    if (!slots) {
        qkv_error_set(QKV_ERR_NOMEM, "out of memory growing a vocabulary to %zu slots", cap);
        return false;
    }
    for (size_t i = 0; i < cap; i++) slots[i].id = -1;
    for (size_t i = 0; i < v->cap; i++) {
        if (v->slots[i].id < 0) continue;
        size_t j = v->slots[i].hash & (cap - 1);
        while (slots[j].id >= 0) j = (j + 1) & (cap - 1);
        slots[j] = v->slots[i];
    }
    free(v->slots);
    v->slots = slots;
    v->cap = cap;
    return true;
}

int32_t qkv__vocab_id(qkv__vocab *v, const char *s, size_t len) {
    if ((v->count + 1) * 2 > v->cap && !vocab_grow(v)) return -1;
    uint64_t h = hash_bytes(s, len);
    size_t j = h & (v->cap - 1);
    while (v->slots[j].id >= 0) {
        struct qkv__vocab_slot *e = &v->slots[j];
        if (e->hash == h && e->len == len && memcmp(v->arena + e->off, s, len) == 0) return e->id;
        j = (j + 1) & (v->cap - 1);
    }
    if (v->count >= INT32_MAX) {
        qkv_error_set(QKV_ERR_RANGE, "vocabulary exceeds %d distinct tokens", INT32_MAX);
        return -1;
    }
    if (v->arena_len + len > v->arena_cap) {
        size_t cap = v->arena_cap ? v->arena_cap : 4096;
        while (cap < v->arena_len + len) cap *= 2;
        char *a = realloc(v->arena, cap);
        if (!a) {
            qkv_error_set(QKV_ERR_NOMEM, "out of memory growing a vocabulary's strings to %zu bytes", cap);
            return -1;
        }
        v->arena = a;
        v->arena_cap = cap;
    }
    memcpy(v->arena + v->arena_len, s, len);
    v->slots[j] = (struct qkv__vocab_slot){.hash = h, .off = v->arena_len, .len = len, .id = (int32_t)v->count};
    v->arena_len += len;
    return (int32_t)v->count++;
}

void qkv__vocab_free(qkv__vocab *v) {
    free(v->slots);
    free(v->arena);
    memset(v, 0, sizeof *v);
}

static uint64_t hash_ngram(const int32_t *ids, int n) { return hash_bytes(ids, (size_t)n * sizeof *ids); }

static bool ngram_grow(qkv__ngram_map *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    qkv__ngram *slots = calloc(cap, sizeof *slots);
    if (!slots) {
        qkv_error_set(QKV_ERR_NOMEM, "out of memory growing an n-gram table to %zu slots", cap);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].n) continue;
        size_t j = hash_ngram(m->slots[i].ids, m->slots[i].n) & (cap - 1);
        while (slots[j].n) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

qkv__ngram *qkv__ngram_get(qkv__ngram_map *m, const int32_t *ids, int n, bool create) {
    if (create && (m->count + 1) * 2 > m->cap && !ngram_grow(m)) return NULL;
    if (!m->cap) return NULL;
    size_t j = hash_ngram(ids, n) & (m->cap - 1);
    while (m->slots[j].n) {
        qkv__ngram *e = &m->slots[j];
        if (e->n == n && memcmp(e->ids, ids, (size_t)n * sizeof *ids) == 0) return e;
        j = (j + 1) & (m->cap - 1);
    }
    if (!create) return NULL;
    qkv__ngram *e = &m->slots[j];
    memset(e, 0, sizeof *e);
    memcpy(e->ids, ids, (size_t)n * sizeof *ids);
    e->n = n;
    m->count++;
    return e;
}

void qkv__ngram_clear(qkv__ngram_map *m) {
    if (m->slots) memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->count = 0;
}

void qkv__ngram_free(qkv__ngram_map *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}
