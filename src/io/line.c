/* The reader's bottom layer: physical lines from the chunk buffer, validated for length, NUL bytes and UTF-8, and
 * the record assembly that the format parsers (tsv.c, jsonl.c) and the iterator (reader.c) share. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "io/data_internal.h"

qkv_status qkv__reader_error(qkv_reader *r, qkv_status st, int64_t line, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->failed = true;
    return qkv_error_set(st, "%s:%lld: %s", r->name, (long long)line, msg);
}

static qkv_status grow(qkv_reader *r, char **p, size_t *cap, size_t need) {
    if (need <= *cap) return QKV_OK;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *q = realloc(*p, c);
    if (!q) {
        r->failed = true;
        return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory for %zu bytes", r->name, c);
    }
    *p = q;
    *cap = c;
    return QKV_OK;
}

/* Refill the chunk buffer from the file; false at end of file (or error, set). */
static qkv_status refill(qkv_reader *r, bool *more) {
    *more = false;
    if (!r->f || r->src_eof) return QKV_OK;
    r->src_len = fread(r->src, 1, r->src_cap, r->f);
    r->src_pos = 0;
    if (r->src_len == 0) {
        r->src_eof = true;
        if (ferror(r->f)) {
            r->failed = true;
            return qkv_error_set(QKV_ERR_IO, "%s: read error: %s", r->name, strerror(errno));
        }
        return QKV_OK;
    }
    *more = true;
    return QKV_OK;
}

qkv_status qkv__reader_line(qkv_reader *r, bool *got) {
    *got = false;
    r->line_len = 0;
    bool any = false, done = false;
    size_t limit = r->o.max_line + 1; /* + 1 for a '\r' before the newline */
    while (!done) {
        if (r->src_pos == r->src_len) {
            bool more;
            qkv_status st = refill(r, &more);
            if (st) return st;
            if (!more) break;
        }
        const char *p = r->src + r->src_pos;
        size_t avail = r->src_len - r->src_pos;
        const char *nl = memchr(p, '\n', avail);
        size_t take = nl ? (size_t)(nl - p) : avail;
        any = true;
        if (r->line_len + take > limit)
            return qkv__reader_error(r, QKV_ERR_RANGE, r->line_no + 1, "line longer than %zu bytes", r->o.max_line);
        qkv_status st = grow(r, &r->line, &r->line_cap, r->line_len + take + 1);
        if (st) return st;
        memcpy(r->line + r->line_len, p, take);
        r->line_len += take;
        r->src_pos += take + (nl ? 1 : 0);
        done = nl != NULL;
    }
    if (!any) return QKV_OK;
    r->line_no++;
    r->line_had_cr = r->line_len > 0 && r->line[r->line_len - 1] == '\r';
    if (r->line_had_cr) r->line_len--;
    if (r->line_len > r->o.max_line)
        return qkv__reader_error(r, QKV_ERR_RANGE, r->line_no, "line longer than %zu bytes", r->o.max_line);
    r->line[r->line_len] = '\0';
    const char *nul = memchr(r->line, '\0', r->line_len);
    if (nul) return qkv__reader_error(r, QKV_ERR_FORMAT, r->line_no, "NUL byte at column %zu",
                                      (size_t)(nul - r->line) + 1);
    size_t bad;
    if (!qkv_utf8_valid(r->line, r->line_len, &bad))
        return qkv__reader_error(r, QKV_ERR_FORMAT, r->line_no, "invalid UTF-8 at byte %zu", bad + 1);
    *got = true;
    return QKV_OK;
}

void qkv__rec_reset(qkv_reader *r) {
    r->buf_len = 0;
    r->n_fields = 0;
}

qkv_status qkv__rec_append(qkv_reader *r, const char *s, size_t n) {
    qkv_status st = grow(r, &r->buf, &r->buf_cap, r->buf_len + n + 1);
    if (st) return st;
    memcpy(r->buf + r->buf_len, s, n);
    r->buf_len += n;
    return QKV_OK;
}

qkv_status qkv__rec_end_field(qkv_reader *r) {
    if (r->n_fields == r->fields_cap) {
        int cap = r->fields_cap ? r->fields_cap * 2 : 8;
        if (cap > (1 << 24)) return qkv__reader_error(r, QKV_ERR_RANGE, r->line_no, "more than %d fields", 1 << 24);
        size_t *offs = realloc(r->offs, (size_t)cap * sizeof *offs);
        if (offs) r->offs = offs;
        char **fields = offs ? realloc(r->fields, (size_t)cap * sizeof *fields) : NULL;
        if (fields) r->fields = fields;
        size_t *lens = fields ? realloc(r->lens, (size_t)cap * sizeof *lens) : NULL;
        if (!lens) {
            r->failed = true;
            return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory for %d fields", r->name, cap);
        }
        r->lens = lens;
        r->fields_cap = cap;
    }
    /* field n starts where field n-1's terminator ended */
    size_t start = r->n_fields ? r->offs[r->n_fields - 1] + r->lens[r->n_fields - 1] + 1 : 0;
    qkv_status st = qkv__rec_append(r, "", 0);
    if (st) return st;
    r->buf[r->buf_len++] = '\0';
    r->offs[r->n_fields] = start;
    r->lens[r->n_fields] = r->buf_len - 1 - start;
    r->n_fields++;
    return QKV_OK;
}
