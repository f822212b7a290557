/* The mteval-v13a tokenisation as sacrebleu applies it (tokenizer_13a + tokenizer_re), rewritten as byte passes:
 * each regex substitution of the reference is one left-to-right, non-overlapping scan here. The patterns only
 * look at ASCII bytes, and UTF-8 continuation bytes never match them, so scanning bytes gives the same result as
 * Python scanning code points. */
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_internal.h"
#include "qkv/error.h"
#include "qkv/metrics.h"

typedef struct buf {
    char *s;
    size_t n;
} buf;

/* Every occurrence of `from` replaced by `to` (to is never longer than from), in place. */
static void replace_all(buf *b, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to), o = 0;
    for (size_t i = 0; i < b->n;) {
        if (i + fl <= b->n && memcmp(b->s + i, from, fl) == 0) {
            memcpy(b->s + o, to, tl);
            o += tl;
            i += fl;
        } else {
            b->s[o++] = b->s[i++];
        }
    }
    b->n = o;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation and space, except ' - . , and digits/letters. */
static bool is_split_punct(unsigned char c) {
    return (c >= 0x7b && c <= 0x7e) || (c >= 0x5b && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
           (c >= 0x28 && c <= 0x2b) || (c >= 0x3a && c <= 0x40) || c == 0x2f;
}

typedef enum pass { PASS_PUNCT, PASS_DOT_AFTER, PASS_DOT_BEFORE, PASS_DASH } pass;

/* One regex substitution; returns false on OOM (error set). */
static bool run_pass(buf *b, pass p) {
    char *out = malloc(b->n * 3 + 1);
    if (!out) {
        qkv_error_set(QKV_ERR_NOMEM, "13a tokenizer: out of memory for a line of %zu bytes", b->n);
        return false;
    }
    size_t o = 0;
    const char *s = b->s;
    for (size_t i = 0; i < b->n;) {
        char c = s[i], d = i + 1 < b->n ? s[i + 1] : '\0';
        bool two = i + 1 < b->n;
        switch (p) {
        case PASS_PUNCT: /* ' \1 ' */
            if (is_split_punct((unsigned char)c)) {
                out[o++] = ' ';
                out[o++] = c;
                out[o++] = ' ';
                i++;
                continue;
            }
            break;
        case PASS_DOT_AFTER: /* ([^0-9])([\.,]) -> '\1 \2 ' */
            if (two && !is_digit(c) && (d == '.' || d == ',')) {
                out[o++] = c;
                out[o++] = ' ';
                out[o++] = d;
                out[o++] = ' ';
                i += 2;
                continue;
            }
            break;
        case PASS_DOT_BEFORE: /* ([\.,])([^0-9]) -> ' \1 \2' */
            if (two && (c == '.' || c == ',') && !is_digit(d)) {
                out[o++] = ' ';
                out[o++] = c;
                out[o++] = ' ';
                out[o++] = d;
                i += 2;
                continue;
            }
            break;
        case PASS_DASH: /* ([0-9])(-) -> '\1 \2 ' */
            if (two && is_digit(c) && d == '-') {
                out[o++] = c;
                out[o++] = ' ';
                out[o++] = d;
                out[o++] = ' ';
                i += 2;
                continue;
            }
            break;
        }
        out[o++] = s[i++];
    }
    free(b->s);
    b->s = out;
    b->n = o;
    return true;
}

/* ' '.join(s.split()) with Python's whitespace, into a new string. */
static char *collapse_ws(const buf *b) {
    char *out = malloc(b->n + 1);
    if (!out) {
        qkv_error_set(QKV_ERR_NOMEM, "13a tokenizer: out of memory");
        return NULL;
    }
    const unsigned char *u = (const unsigned char *)b->s;
    size_t o = 0;
    bool pending_space = false;
    for (size_t i = 0; i < b->n;) {
        int32_t cp = 0;
        size_t k = qkv__metrics_utf8_decode(u + i, b->n - i, &cp);
        if (k == 0) k = 1, cp = -1;
        if (qkv__py_isspace(cp)) {
            pending_space = o > 0;
        } else {
            if (pending_space) out[o++] = ' ';
            pending_space = false;
            memcpy(out + o, b->s + i, k);
            o += k;
        }
        i += k;
    }
    out[o] = '\0';
    return out;
}

char *qkv_bleu_tokenize_13a(const char *line) {
    if (!line) {
        qkv_error_set(QKV_ERR_INVALID, "qkv_bleu_tokenize_13a: line is NULL");
        return NULL;
    }
    size_t n = strlen(line);
    buf b = {malloc(n + 3), 0};
    if (!b.s) {
        qkv_error_set(QKV_ERR_NOMEM, "13a tokenizer: out of memory for a line of %zu bytes", n);
        return NULL;
    }
    /* Language-independent part; the wrapping spaces let the punctuation rules see a left context. */
    b.s[0] = ' ';
    memcpy(b.s + 1, line, n);
    b.n = n + 1;
    replace_all(&b, "<skipped>", "");
    replace_all(&b, "-\n", "");
    for (size_t i = 0; i < b.n; i++)
        if (b.s[i] == '\n') b.s[i] = ' ';
    if (memchr(b.s, '&', b.n)) {
        replace_all(&b, "&quot;", "\"");
        replace_all(&b, "&amp;", "&");
        replace_all(&b, "&lt;", "<");
        replace_all(&b, "&gt;", ">");
    }
    b.s[b.n++] = ' ';
    char *out = NULL;
    if (run_pass(&b, PASS_PUNCT) && run_pass(&b, PASS_DOT_AFTER) && run_pass(&b, PASS_DOT_BEFORE) &&
        run_pass(&b, PASS_DASH))
        out = collapse_ws(&b);
    free(b.s);
    return out;
}
