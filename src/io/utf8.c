/* Strict UTF-8 validation (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. */
#include "qkv/data.h"

bool qkv_utf8_valid(const char *s, size_t len, size_t *bad_offset) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned char c = u[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
        if (c >= 0xc2 && c <= 0xdf) need = 1;
        else if (c == 0xe0) need = 2, lo = 0xa0;
        else if (c == 0xed) need = 2, hi = 0x9f;
        else if (c >= 0xe1 && c <= 0xef) need = 2;
        else if (c == 0xf0) need = 3, lo = 0x90;
        else if (c == 0xf4) need = 3, hi = 0x8f;
        else if (c >= 0xf1 && c <= 0xf3) need = 3;
        else goto bad;
        if (i + need >= len) goto bad; /* truncated sequence */
        if (u[i + 1] < lo || u[i + 1] > hi) goto bad;
        for (size_t k = 2; k <= need; k++)
            if ((u[i + k] & 0xc0) != 0x80) goto bad;
        i += need + 1;
    }
    return true;
bad:
    if (bad_offset) *bad_offset = i;
    return false;
}

size_t qkv_utf8_count(const char *s, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xc0) != 0x80;
    return n;
}
