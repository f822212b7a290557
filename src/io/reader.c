/* The public reader: a file (read in chunks, so memory is bounded by the longest line) or a buffer, iterated
 * record by record (lines and record assembly in line.c, each format's parser in tsv.c / jsonl.c); foreach and
 * read-all built on the iterator. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "io/data_internal.h"
#include "qkv/fsutil.h"

#define CHUNK ((size_t)1 << 16)

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
                cJSON_Delete(r->json); /* a JSONL header's object: the next record would drop it */
                r->json = NULL;
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
