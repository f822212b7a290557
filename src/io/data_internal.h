/* The reader state shared by src/io's line layer (line.c), its record parsers (tsv.c, jsonl.c) and the public
 * iterator (reader.c), which sits on both. Not installed. */
#ifndef QKV_IO_DATA_INTERNAL_H
#define QKV_IO_DATA_INTERNAL_H

#include <stdio.h>

#include "core/visibility.h"
#include "qkv/data.h"

QKV_INTERNAL_BEGIN

struct qkv_reader {
    char *name;
    qkv_data_opts o;
    FILE *f;                 /* NULL for an in-memory reader */
    char *src;               /* read buffer (file chunk, or the whole copied buffer) */
    size_t src_len, src_pos, src_cap;
    bool src_eof;
    int64_t line_no;         /* physical lines consumed */
    char *line;              /* current physical line, NUL-terminated, newline stripped */
    size_t line_len, line_cap;
    bool line_had_cr;
    char *buf;               /* field bytes of the current record, each NUL-terminated */
    size_t buf_len, buf_cap;
    size_t *offs;            /* field start offsets into buf (converted to pointers when the record is done) */
    char **fields;
    size_t *lens;
    int n_fields, fields_cap;
    struct cJSON *json;
    qkv_data_record rec;
    bool header_done, failed;
};

/* line.c. Reads the next physical line into r->line (validated: length, NUL, UTF-8). *got = false at end of input. */
qkv_status qkv__reader_line(qkv_reader *r, bool *got);
/* Record assembly helpers: start a record, append bytes to the current field, end the field. */
void qkv__rec_reset(qkv_reader *r);
qkv_status qkv__rec_append(qkv_reader *r, const char *s, size_t n);
qkv_status qkv__rec_end_field(qkv_reader *r);
/* Error "name:line: message" with the reader marked failed. */
qkv_status qkv__reader_error(qkv_reader *r, qkv_status st, int64_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* tsv.c, jsonl.c. Parse one record from the current line (and, for CSV, following lines) into r's fields. */
qkv_status qkv__tsv_record(qkv_reader *r);
qkv_status qkv__csv_record(qkv_reader *r);
qkv_status qkv__jsonl_record(qkv_reader *r);

QKV_INTERNAL_END
#endif
