/* GPT-2 byte-level pre-tokenisation: the byte-to-unicode map and the split regex (PCRE2). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>

#include "text/text_internal.h"

/* OpenAI's bytes_to_unicode: printable Latin-1 bytes stand for themselves; the other 68 bytes (controls, space,
 * 127-160, 173) take code points 256, 257, ... in byte order, so every token is printable text. */
static bool printable_byte(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

int32_t qkv__byte_to_unicode(unsigned b) {
    if (printable_byte(b)) return (int32_t)b;
    int32_t n = 0;
    for (unsigned c = 0; c < b; c++) n += !printable_byte(c);
    return 256 + n;
}

int qkv__unicode_to_byte(int32_t cp) {
    if (cp < 0 || cp >= 256 + 68) return -1;
    if (cp < 256) return printable_byte((unsigned)cp) ? cp : -1;
    int32_t n = 0;
    for (unsigned c = 0; c < 256; c++)
        if (!printable_byte(c) && n++ == cp - 256) return (int)c;
    return -1;
}

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct qkv__pretok {
    pcre2_code *re;
    pcre2_match_data *md;
    bool jit;
};

qkv__pretok *qkv__pretok_new(void) {
    qkv__pretok *p = calloc(1, sizeof *p);
    if (!p) {
        qkv_error_set(QKV_ERR_NOMEM, "pre-tokeniser: out of memory");
        return NULL;
    }
    int err;
    PCRE2_SIZE erroff;
    p->re = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &erroff,
                          NULL);
    if (!p->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        qkv_error_set(QKV_ERR_UNSUPPORTED, "pre-tokeniser: PCRE2 cannot compile the GPT-2 regex: %s", (char *)msg);
        free(p);
        return NULL;
    }
    p->jit = pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE) == 0; /* interpreted matching still works without */
    p->md = pcre2_match_data_create_from_pattern(p->re, NULL);
    if (!p->md) {
        qkv__pretok_free(p);
        qkv_error_set(QKV_ERR_NOMEM, "pre-tokeniser: out of memory");
        return NULL;
    }
    return p;
}

void qkv__pretok_free(qkv__pretok *p) {
    if (!p) return;
    pcre2_match_data_free(p->md);
    pcre2_code_free(p->re);
    free(p);
}

/* Split one valid UTF-8 run with the regex. */
static qkv_status split_run(qkv__pretok *p, const char *text, size_t base, size_t len, qkv__pretok_fn fn,
                            void *ctx) {
    PCRE2_SPTR subj = (PCRE2_SPTR)(text + base);
    size_t pos = 0;
    while (pos < len) {
        int rc = p->jit ? pcre2_jit_match(p->re, subj, len, pos, PCRE2_NO_UTF_CHECK, p->md, NULL)
                        : pcre2_match(p->re, subj, len, pos, PCRE2_NO_UTF_CHECK, p->md, NULL);
        size_t s, e;
        if (rc >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(p->md);
            s = ov[0];
            e = ov[1];
        } else if (rc == PCRE2_ERROR_NOMATCH) {
            s = e = len; /* cannot happen: every character matches one alternative; keep the rest whole */
        } else {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return qkv_error_set(QKV_ERR_INVALID, "pre-tokeniser: PCRE2 match failed at byte %zu: %s", base + pos,
                                 (char *)msg);
        }
        if (s > pos) { /* unmatched text (never for this regex): one pre-token rather than lost bytes */
            qkv_status st = fn(ctx, base + pos, base + s);
            if (st) return st;
        }
        if (e <= s) break;
        qkv_status st = fn(ctx, base + s, base + e);
        if (st) return st;
        pos = e;
    }
    if (pos < len) return fn(ctx, base + pos, base + len);
    return QKV_OK;
}

qkv_status qkv__pretok_run(qkv__pretok *p, const char *text, size_t len, qkv__pretok_fn fn, void *ctx) {
    size_t pos = 0;
    while (pos < len) {
        size_t good = pos + qkv__utf8_validate(text + pos, len - pos);
        if (good > pos) {
            qkv_status st = split_run(p, text, pos, good - pos, fn, ctx);
            if (st) return st;
        }
        if (good < len) {
            qkv_status st = fn(ctx, good, good + 1);
            if (st) return st;
        }
        pos = good + 1;
    }
    return QKV_OK;
}
