/* Helpers of the tokenizer tests (tests/test_text_*.c): whole-file reading and decoding a JSON string field with
 * its exact bytes (cJSON stops a string at "\u0000", and the references contain NULs). */
#ifndef QKV_TEST_TEXT_JSON_H
#define QKV_TEST_TEXT_JSON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/text.h"

static inline char *tt_slurp(const char *path, size_t *len) {
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) p[n] = '\0', *len = (size_t)n;
    return p;
}

static inline int tt_hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10);
    }
    return v;
}

static inline size_t tt_put_utf8(char *o, int cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 63)), o[2] = (char)(0x80 | (cp & 63)), 3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 63)), o[2] = (char)(0x80 | (cp >> 6 & 63));
    o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* The bytes of the JSON string value of "key" in a one-line JSON object (first occurrence), malloc'd; NULL if
 * absent. */
static inline char *tt_json_string(const char *line, const char *key, size_t *len) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *s = strstr(line, pat);
    if (!s) return NULL;
    s += strlen(pat);
    char *out = malloc(strlen(s) + 1), *o = out;
    while (*s && *s != '"') {
        if (*s != '\\') {
            *o++ = *s++;
            continue;
        }
        s++;
        char c = *s++;
        switch (c) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'r': *o++ = '\r'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'u': {
            int cp = tt_hex4(s);
            s += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && s[0] == '\\' && s[1] == 'u') {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (tt_hex4(s + 2) - 0xDC00);
                s += 6;
            }
            o += tt_put_utf8(o, cp);
            break;
        }
        default: *o++ = c; /* \" \\ \/ */
        }
    }
    *len = (size_t)(o - out);
    return out;
}

#endif
