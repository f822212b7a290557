/* Helpers shared by the metrics in src/metrics: Python-compatible Unicode whitespace and lowercasing, a string
 * interner (token -> small integer id) and an n-gram counter keyed by id sequences. Not installed. */
#ifndef QKV_METRICS_INTERNAL_H
#define QKV_METRICS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/visibility.h"

QKV_INTERNAL_BEGIN

/* Longest n-gram any metric counts (BLEU up to QKV_BLEU_MAX_ORDER, ROUGE-N up to 9 like rouge-score). */
#define QKV__MAX_NGRAM 9

/* True for the code points Python's str.isspace() accepts. */
bool qkv__py_isspace(int32_t cp);
/* Byte length of the UTF-8 sequence at s (s[0..len)) and its code point in *cp; 0 if the bytes are not valid
 * UTF-8 (the error is not set: callers name their own context). */
size_t qkv__metrics_utf8_decode(const unsigned char *s, size_t len, int32_t *cp);
/* Python's str.lower() of a UTF-8 string, as a new NUL-terminated malloc'd string (length in *out_len), or NULL
 * (error set) on invalid UTF-8 / out of memory. `what` names the input in error messages. */
char *qkv__py_lower(const char *s, size_t len, size_t *out_len, const char *what);

/* String -> id interner. ids are dense from 0. */
typedef struct qkv__vocab {
    struct qkv__vocab_slot *slots;
    size_t cap, count;
    char *arena;
    size_t arena_len, arena_cap;
} qkv__vocab;
/* Id of the string s[0..len), adding it when new; -1 (error set) when out of memory. */
int32_t qkv__vocab_id(qkv__vocab *v, const char *s, size_t len);
void qkv__vocab_free(qkv__vocab *v);

/* Growable array of token ids. */
typedef struct qkv__ids {
    int32_t *v;
    size_t n, cap;
} qkv__ids;
bool qkv__ids_push(qkv__ids *a, int32_t id); /* false (error set) when out of memory */
void qkv__ids_free(qkv__ids *a);
/* Appends the ids of the tokens of s split on Python whitespace (str.split()). false (error set) on OOM. */
bool qkv__split_ws(const char *s, size_t len, qkv__vocab *v, qkv__ids *out);

/* Counts per n-gram (an id sequence of length 1..QKV__MAX_NGRAM); two counters per entry. */
typedef struct qkv__ngram {
    int32_t ids[QKV__MAX_NGRAM];
    int32_t n; /* 0 = empty slot */
    int64_t a, b;
} qkv__ngram;
typedef struct qkv__ngram_map {
    qkv__ngram *slots;
    size_t cap, count;
} qkv__ngram_map;
/* The entry of ids[0..n), created with zero counts when absent and `create`; NULL if absent (or OOM, error set,
 * when creating). */
qkv__ngram *qkv__ngram_get(qkv__ngram_map *m, const int32_t *ids, int n, bool create);
void qkv__ngram_clear(qkv__ngram_map *m);
void qkv__ngram_free(qkv__ngram_map *m);

QKV_INTERNAL_END
#endif
