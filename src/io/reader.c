/* The public reader: physical lines from a file (read in chunks, so memory is bounded by the longest line) or a
 * buffer, validated for length, NUL bytes and UTF-8; records assembled by the format's parser; foreach and
 * read-all built on the iterator. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "io/data_internal.h"
#include "qkv/fsutil.h"

#define CHUNK ((size_t)1 << 16)

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

static qkv_reader *reader_new(const char *name, const qkv_data_opts *opts) {
    qkv_data_opts o = opts ? *opts : (qkv_data_opts){0};
    if ((unsigned)o.format > QKV_DATA_JSONL) {
        qkv_error_set(QKV_ERR_INVALID, "%s: unknown data format %d", name, (int)o.format);
        return NULL;
    }
    if (o.n_fields < 0) {
        qkv_error_set(QKV_ERR_INVALID, "%s: n_fields %d is negative", name, o.n_fields);
        return NULL;
    }
    if (o.separator == '\n' || o.separator == '\r' || o.separator == '"' || (unsigned char)o.separator >= 0x80) {
        qkv_error_set(QKV_ERR_INVALID, "%s: the separator must be an ASCII character other than a newline or quote",
                      name);
        return NULL;
    }
    if (!o.separator) o.separator = o.format == QKV_DATA_CSV ? ',' : '\t';
    if (!o.max_line) o.max_line = QKV_DATA_DEFAULT_MAX_LINE;
    qkv_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->name = strdup(name))) {
        free(r);
        qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", name);
        return NULL;
    }
    r->o = o;
    return r;
}

qkv_reader *qkv_reader_open(const char *path, const qkv_data_opts *opts) {
    if (!path) {
        qkv_error_set(QKV_ERR_INVALID, "qkv_reader_open: path is NULL");
        return NULL;
    }
    if (qkv_fs_check_not_dir(path, "data file") != QKV_OK) return NULL;
    qkv_reader *r = reader_new(path, opts);
    if (!r) return NULL;
    r->f = fopen(path, "rb");
    if (!r->f) {
        qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        qkv_reader_close(r);
        return NULL;
    }
    r->src_cap = CHUNK;
    r->src = malloc(CHUNK);
    if (!r->src) {
        qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", path);
        qkv_reader_close(r);
        return NULL;
    }
    return r;
}

qkv_reader *qkv_reader_open_mem(const char *name, const char *data, size_t len, const qkv_data_opts *opts) {
    if (!name || (!data && len)) {
        qkv_error_set(QKV_ERR_INVALID, "qkv_reader_open_mem: name and data must not be NULL");
        return NULL;
    }
    qkv_reader *r = reader_new(name, opts);
    if (!r) return NULL;
    r->src = malloc(len ? len : 1);
    if (!r->src) {
        qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory for %zu bytes", name, len);
        qkv_reader_close(r);
        return NULL;
    }
    if (len) memcpy(r->src, data, len);
    r->src_len = r->src_cap = len;
    r->src_eof = true;
    return r;
}

static bool is_blank(const qkv_reader *r) {
    if (r->o.format != QKV_DATA_JSONL) return r->line_len == 0;
    for (size_t i = 0; i < r->line_len; i++)
        if (r->line[i] != ' ' && r->line[i] != '\t') return false;
    return true;
}

qkv_status qkv_reader_next(qkv_reader *r, const qkv_data_record **rec) {
    if (!r || !rec) return qkv_error_set(QKV_ERR_INVALID, "qkv_reader_next: reader and rec must not be NULL");
    *rec = NULL;
    if (r->failed) return qkv_error_set(QKV_ERR_INVALID, "%s: reader already failed", r->name);
    if (r->json) {
        cJSON_Delete(r->json);
        r->json = NULL;
    }
    for (;;) {
        bool got;
        qkv_status st = qkv__reader_line(r, &got);
        if (st) return st;
        if (!got) return QKV_OK;
        qkv__rec_reset(r);
        int64_t start = r->line_no;
        if (is_blank(r)) {
            if (!r->o.keep_blank) continue;
        } else {
            switch (r->o.format) {
            case QKV_DATA_LINES:
                st = qkv__rec_append(r, r->line, r->line_len);
                if (!st) st = qkv__rec_end_field(r);
                break;
            case QKV_DATA_TSV: st = qkv__tsv_record(r); break;
            case QKV_DATA_CSV: st = qkv__csv_record(r); break;
            case QKV_DATA_JSONL: st = qkv__jsonl_record(r); break;
            }
            if (st) return st;
            if ((r->o.format == QKV_DATA_TSV || r->o.format == QKV_DATA_CSV) && r->o.n_fields &&
                r->n_fields != r->o.n_fields)
                return qkv__reader_error(r, QKV_ERR_FORMAT, start, "expected %d field%s, found %d", r->o.n_fields,
                                         r->o.n_fields == 1 ? "" : "s", r->n_fields);
            if (r->o.skip_header && !r->header_done) {
                r->header_done = true;
                continue;
            }
        }
        for (int i = 0; i < r->n_fields; i++) r->fields[i] = r->buf + r->offs[i];
        r->rec = (qkv_data_record){.line = start, .n_fields = r->n_fields, .fields = r->fields, .lens = r->lens,
                              .json = r->json};
        *rec = &r->rec;
        return QKV_OK;
    }
}

int64_t qkv_reader_line(const qkv_reader *r) { return r ? r->line_no : 0; }

void qkv_reader_close(qkv_reader *r) {
    if (!r) return;
    if (r->f) fclose(r->f);
    cJSON_Delete(r->json);
    free(r->name);
    free(r->src);
    free(r->line);
    free(r->buf);
    free(r->offs);
    free(r->fields);
    free(r->lens);
    free(r);
}

qkv_status qkv_data_foreach(const char *path, const qkv_data_opts *opts, qkv_data_record_fn fn, void *user) {
    if (!fn) return qkv_error_set(QKV_ERR_INVALID, "qkv_data_foreach: fn is NULL");
    qkv_reader *r = qkv_reader_open(path, opts);
    if (!r) return qkv_last_status();
    qkv_status st;
    const qkv_data_record *rec;
    while ((st = qkv_reader_next(r, &rec)) == QKV_OK && rec)
        if ((st = fn(rec, user)) != QKV_OK) break;
    qkv_reader_close(r);
    return st;
}

void qkv_dataset_free(qkv_dataset *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_rows; i++) {
        qkv_row *row = &d->rows[i];
        free(row->fields ? row->fields[0] : NULL); /* one block per row */
        free(row->fields);
        free(row->lens);
        cJSON_Delete(row->json);
    }
    free(d->rows);
    free(d);
}

/* Copies a record into a row: the field strings in one block, fields[0] pointing at its start. */
static bool row_copy(qkv_row *row, const qkv_data_record *rec) {
    size_t total = 0;
    for (int i = 0; i < rec->n_fields; i++) total += rec->lens[i] + 1;
    int nf = rec->n_fields;
    row->line = rec->line;
    row->n_fields = nf;
    row->fields = calloc((size_t)(nf ? nf : 1), sizeof *row->fields);
    row->lens = calloc((size_t)(nf ? nf : 1), sizeof *row->lens);
    char *block = total ? malloc(total) : NULL;
    if (!row->fields || !row->lens || (total && !block)) {
        free(block);
        return false;
    }
    size_t o = 0;
    for (int i = 0; i < nf; i++) {
        row->fields[i] = block + o;
        row->lens[i] = rec->lens[i];
        memcpy(block + o, rec->fields[i], rec->lens[i] + 1);
        o += rec->lens[i] + 1;
    }
    if (rec->json) {
        row->json = cJSON_Duplicate(rec->json, true);
        if (!row->json) return false;
    }
    return true;
}

qkv_dataset *qkv_data_read_all(const char *path, const qkv_data_opts *opts) {
    qkv_reader *r = qkv_reader_open(path, opts);
    if (!r) return NULL;
    qkv_dataset *d = calloc(1, sizeof *d);
    size_t cap = 0;
    const qkv_data_record *rec;
    qkv_status st = d ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", path);
    while (!st && (st = qkv_reader_next(r, &rec)) == QKV_OK && rec) {
        if (d->n_rows == cap) {
            cap = cap ? cap * 2 : 1024;
            qkv_row *rows = realloc(d->rows, cap * sizeof *rows);
            if (!rows) {
                st = qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory for %zu rows", path, cap);
                break;
            }
            d->rows = rows;
        }
        qkv_row *row = &d->rows[d->n_rows++];
        memset(row, 0, sizeof *row);
        if (!row_copy(row, rec)) st = qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", path);
    }
    qkv_reader_close(r);
    if (st) {
        qkv_dataset_free(d);
        return NULL;
    }
    return d;
}
