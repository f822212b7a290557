/* The two pieces of Python string semantics the reference metrics depend on: which code points str.split()
 * treats as whitespace, and str.lower() (full Unicode lowercasing, via utf8proc plus Python's special cases). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "metrics/metrics_internal.h"
#include "qkv/error.h"

bool qkv__py_isspace(int32_t cp) {
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f)) return true;
    if (cp < 0x85) return false;
    switch (cp) {
    case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029: case 0x202f: case 0x205f: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200a;
    }
}

size_t qkv__metrics_utf8_decode(const unsigned char *s, size_t len, int32_t *cp) {
    if (len == 0) return 0;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate(s, (utf8proc_ssize_t)(len < 4 ? len : 4), &c);
    if (k <= 0) return 0;
    *cp = c;
    return (size_t)k;
}

static bool is_cased_letter(int32_t cp) {
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

char *qkv__py_lower(const char *s, size_t len, size_t *out_len, const char *what) {
    /* Lowercase never grows a code point's encoding by more than 3 bytes (U+0130 -> "i\u0307" is the worst). */
    if (len > ((size_t)1 << 40)) {
        qkv_error_set(QKV_ERR_RANGE, "%s: string of %zu bytes is too long", what, len);
        return NULL;
    }
    char *out = malloc(len * 3 + 1);
    if (!out) {
        qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory lowercasing %zu bytes", what, len);
        return NULL;
    }
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    int32_t prev = -1;
    while (i < len) {
        int32_t cp;
        size_t k = qkv__metrics_utf8_decode(u + i, len - i, &cp);
        if (k == 0) {
            free(out);
            qkv_error_set(QKV_ERR_FORMAT, "%s: invalid UTF-8 at byte %zu", what, i + 1);
            return NULL;
        }
        int32_t lo;
        if (cp < 0x80) {
            lo = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        } else if (cp == 0x130) { /* Python: LATIN CAPITAL I WITH DOT ABOVE -> i + COMBINING DOT ABOVE */
            out[o++] = 'i';
            lo = 0x307;
        } else if (cp == 0x3a3) { /* Python's Final_Sigma rule, simplified: after a letter, not before one */
            int32_t next = -1;
            if (i + k < len && qkv__metrics_utf8_decode(u + i + k, len - i - k, &next) == 0) next = -1;
            lo = (prev >= 0 && is_cased_letter(prev) && !(next >= 0 && is_cased_letter(next))) ? 0x3c2 : 0x3c3;
        } else {
            lo = utf8proc_tolower(cp);
        }
        o += (size_t)utf8proc_encode_char(lo, (utf8proc_uint8_t *)out + o);
        prev = cp;
        i += k;
    }
    out[o] = '\0';
    if (out_len) *out_len = o;
    return out;
}

bool qkv__ids_push(qkv__ids *a, int32_t id) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) {
            qkv_error_set(QKV_ERR_NOMEM, "out of memory growing a token list to %zu entries", cap);
            return false;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return true;
}

void qkv__ids_free(qkv__ids *a) {
    free(a->v);
    memset(a, 0, sizeof *a);
}

bool qkv__split_ws(const char *s, size_t len, qkv__vocab *v, qkv__ids *out) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, start = 0;
    bool in_tok = false;
    while (i < len) {
        int32_t cp = 0;
        size_t k = qkv__metrics_utf8_decode(u + i, len - i, &cp);
        if (k == 0) k = 1; /* inputs were validated upstream; treat a stray byte as a non-space */
        bool sp = k > 0 && qkv__py_isspace(cp);
        if (sp && in_tok) {
            int32_t id = qkv__vocab_id(v, s + start, i - start);
            if (id < 0 || !qkv__ids_push(out, id)) return false;
            in_tok = false;
        } else if (!sp && !in_tok) {
            start = i;
            in_tok = true;
        }
        i += k;
    }
    if (in_tok) {
        int32_t id = qkv__vocab_id(v, s + start, len - start);
        if (id < 0 || !qkv__ids_push(out, id)) return false;
    }
    return true;
}
