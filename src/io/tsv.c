/* TSV records (split on the separator, no quoting) and CSV records (RFC 4180 quoting: a field that starts with a
 * quote runs to the matching closing quote, "" inside it is one quote, and it may span lines). */
#include <string.h>

#include "io/data_internal.h"

qkv_status qkv__tsv_record(qkv_reader *r) {
    const char *p = r->line, *end = r->line + r->line_len;
    for (;;) {
        const char *sep = memchr(p, r->o.separator, (size_t)(end - p));
        const char *fe = sep ? sep : end;
        qkv_status st = qkv__rec_append(r, p, (size_t)(fe - p));
        if (!st) st = qkv__rec_end_field(r);
        if (st) return st;
        if (!sep) return QKV_OK;
        p = sep + 1;
    }
}

qkv_status qkv__csv_record(qkv_reader *r) {
    const char sep = r->o.separator;
    size_t i = 0;
    for (;;) { /* one field per iteration */
        qkv_status st;
        if (i < r->line_len && r->line[i] == '"') {
            int64_t open_line = r->line_no;
            size_t open_col = i + 1;
            i++;
            for (;;) {
                const char *p = r->line + i;
                const char *q = memchr(p, '"', r->line_len - i);
                if (!q) { /* the field goes on past this line: keep the line break, read the next line */
                    if ((st = qkv__rec_append(r, p, r->line_len - i))) return st;
                    if ((st = qkv__rec_append(r, r->line_had_cr ? "\r\n" : "\n", r->line_had_cr ? 2 : 1)))
                        return st;
                    bool got;
                    if ((st = qkv__reader_line(r, &got))) return st;
                    if (!got)
                        return qkv__reader_error(r, QKV_ERR_FORMAT, r->line_no,
                                                 "unterminated quoted field (opened on line %lld, column %zu)",
                                                 (long long)open_line, open_col);
                    i = 0;
                    continue;
                }
                if ((st = qkv__rec_append(r, p, (size_t)(q - p)))) return st;
                i = (size_t)(q - r->line) + 1;
                if (i < r->line_len && r->line[i] == '"') { /* "" is a literal quote */
                    if ((st = qkv__rec_append(r, "\"", 1))) return st;
                    i++;
                    continue;
                }
                break;
            }
            if (i < r->line_len && r->line[i] != sep)
                return qkv__reader_error(r, QKV_ERR_FORMAT, r->line_no,
                                         "unexpected character after a closing quote at column %zu", i + 1);
        } else {
            const char *p = r->line + i;
            const char *s = memchr(p, sep, r->line_len - i);
            size_t n = s ? (size_t)(s - p) : r->line_len - i;
            if ((st = qkv__rec_append(r, p, n))) return st;
            i += n;
        }
        if ((st = qkv__rec_end_field(r))) return st;
        if (i >= r->line_len) break;
        i++; /* the separator */
    }
    return QKV_OK;
}
