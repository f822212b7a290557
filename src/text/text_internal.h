/* Helpers shared by the tokenizers in src/text: a byte-string hash map, a 64-bit-key hash map, UTF-8 decoding,
 * a growable byte buffer and whole-file reading. Not installed. */
#ifndef QKV_TEXT_INTERNAL_H
#define QKV_TEXT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/visibility.h"
#include "qkv/error.h"

QKV_INTERNAL_BEGIN

/* Byte string -> int32 map. Keys are copied into one arena and kept in insertion order (entry i), so a
 * vocabulary is simply a strmap whose value is the entry index. */
typedef struct qkv__strmap {
    uint32_t *slots; /* entry index + 1; 0 = empty */
    size_t cap;      /* power of two */
    size_t *key_off; /* per entry: offset of its key in bytes (NUL-terminated there) */
    uint32_t *key_len;
    uint32_t *hash;
    int32_t *val;
    size_t n, cap_n;
    char *bytes;
    size_t nbytes, cap_bytes;
} qkv__strmap;

uint64_t qkv__hash_bytes(const void *p, size_t len);
void qkv__strmap_free(qkv__strmap *m);
/* Entry index of the key, or -1. */
int64_t qkv__strmap_find(const qkv__strmap *m, const char *k, size_t len);
/* Insert key (must be absent) with a value; returns the entry index, -1 on NOMEM (error set). */
int64_t qkv__strmap_insert(qkv__strmap *m, const char *k, size_t len, int32_t val);
static inline const char *qkv__strmap_key(const qkv__strmap *m, size_t i) { return m->bytes + m->key_off[i]; }

/* uint64 -> int64 map (open addressing; the key UINT64_MAX is reserved). */
typedef struct qkv__u64map {
    uint64_t *keys;
    int64_t *vals;
    size_t cap, n;
} qkv__u64map;
void qkv__u64map_free(qkv__u64map *m);
/* Pointer to the value of key, or NULL. */
int64_t *qkv__u64map_get(const qkv__u64map *m, uint64_t key);
/* Pointer to the value of key, inserted with `init` if absent; NULL on NOMEM (error set). */
int64_t *qkv__u64map_put(qkv__u64map *m, uint64_t key, int64_t init);

/* Decode one UTF-8 code point at s[0..len) (len >= 1). Returns its byte length (1..4) and sets *cp, or 0 if the
 * bytes there are not valid UTF-8 (overlong forms, surrogates and > U+10FFFF are invalid). */
int qkv__utf8_decode(const unsigned char *s, size_t len, int32_t *cp);
/* Write cp as UTF-8 into out (4 bytes room); returns the byte count. */
int qkv__utf8_encode(int32_t cp, char *out);
/* Offset of the first invalid byte, or len if all valid. */
size_t qkv__utf8_validate(const char *s, size_t len);

/* Growable byte buffer. */
typedef struct qkv__buf {
    char *p;
    size_t n, cap;
} qkv__buf;
bool qkv__buf_reserve(qkv__buf *b, size_t extra);
bool qkv__buf_put(qkv__buf *b, const void *p, size_t n);

/* Whole file into a NUL-terminated malloc'd buffer; NULL with an error naming the path. */
char *qkv__read_file(const char *path, size_t *len);

/* BERT's notion of punctuation: ASCII 33-47, 58-64, 91-96, 123-126, or a Unicode P* category. */
bool qkv__is_bert_punct(int32_t cp);
/* Unicode White_Space property (Rust char::is_whitespace). */
bool qkv__is_unicode_space(int32_t cp);

/* Split tokens collected as NUL-separated strings in buf (count n) into the single-block char** layout that
 * qkv_word_split returns. */
qkv_status qkv__tokens_pack(const qkv__buf *buf, size_t n, char ***toks);

/* GPT-2's byte-to-unicode map: the code point standing for byte b in byte-level BPE tokens. */
int32_t qkv__byte_to_unicode(unsigned b);
/* The byte a code point stands for, or -1. */
int qkv__unicode_to_byte(int32_t cp);

/* GPT-2 pre-tokeniser: the regex through PCRE2 (UTF+UCP, JIT when available). Holds match data: one per thread. */
typedef struct qkv__pretok qkv__pretok;
qkv__pretok *qkv__pretok_new(void);
void qkv__pretok_free(qkv__pretok *p);
/* Calls fn(ctx, start, end) for each pre-token of text[0..len) in order: maximal valid UTF-8 runs go through the
 * regex, each invalid byte is a pre-token alone. Stops at the first non-OK status fn returns. */
typedef qkv_status (*qkv__pretok_fn)(void *ctx, size_t start, size_t end);
qkv_status qkv__pretok_run(qkv__pretok *p, const char *text, size_t len, qkv__pretok_fn fn, void *ctx);

/* BERT's normaliser and pre-tokeniser (wordpiece.c) over plain text: fn(ctx, word, bytes, characters) for each
 * word in order, the word's UTF-8 after normalisation. Stops at the first non-OK status fn returns. */
struct qkv_wordpiece_opts;
typedef qkv_status (*qkv__word_fn)(void *ctx, const char *word, size_t len, size_t n_chars);
qkv_status qkv__wordpiece_words(const struct qkv_wordpiece_opts *o, const char *text, size_t len, qkv__word_fn fn,
                                void *ctx);

QKV_INTERNAL_END
#endif
