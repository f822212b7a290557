/* Readers for line-oriented data files: plain text lines, TSV, CSV (RFC 4180) and JSONL.
 *
 * Every reader validates as it goes: input must be UTF-8 without NUL bytes, physical lines are at most
 * opts.max_line bytes, TSV/CSV records have opts.n_fields fields when that is set, each JSONL line is one JSON
 * object. Errors name the file and the line (and column where it helps), e.g.
 *     train.tsv:17: expected 2 fields, found 3
 *     dev.txt:5: invalid UTF-8 at byte 12
 * Lines end with "\n" or "\r\n"; a last line without a newline is still a line.
 *
 * Streaming: qkv_reader_open + qkv_reader_next hand out one record at a time (memory is bounded by the longest
 * record), or qkv_data_foreach calls a function per record. Small files: qkv_data_read_all.
 */
#ifndef QKV_DATA_H
#define QKV_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

typedef enum qkv_data_format {
    QKV_DATA_LINES = 0, /* one record per line, one field (the line) */
    QKV_DATA_TSV,       /* fields separated by tabs, no quoting (fields cannot contain tabs or newlines) */
    QKV_DATA_CSV,       /* RFC 4180: separator ',', fields may be "quoted", "" is a quote, quoted fields may
                           contain separators and newlines */
    QKV_DATA_JSONL,     /* one JSON object per line */
} qkv_data_format;

#define QKV_DATA_DEFAULT_MAX_LINE ((size_t)1 << 20)

typedef struct qkv_data_opts {
    qkv_data_format format;
    int n_fields;       /* TSV/CSV: required field count per record; 0 = any */
    char separator;     /* TSV/CSV: 0 = '\t' for TSV, ',' for CSV */
    size_t max_line;    /* longest physical line in bytes, without its newline; 0 = QKV_DATA_DEFAULT_MAX_LINE */
    bool keep_blank;    /* blank lines become records with 0 fields (e.g. sentence breaks); default: skipped */
    bool skip_header;   /* drop the first record (CSV/TSV header row) */
} qkv_data_opts;

/* One record. Everything it points to is owned by the reader and valid until the next qkv_reader_next call. */
typedef struct qkv_data_record {
    int64_t line;              /* 1-based line where the record starts */
    int n_fields;              /* LINES: 1 (0 for a kept blank line); JSONL: 1 (the raw line) */
    char **fields;             /* NUL-terminated UTF-8 strings */
    size_t *lens;              /* byte length of each field */
    struct cJSON *json;        /* JSONL: the parsed object; NULL for other formats */
} qkv_data_record;

typedef struct qkv_reader qkv_reader;

/* Opens path for reading; NULL (error set) if it cannot be opened or the options are invalid. opts NULL = lines. */
qkv_reader *qkv_reader_open(const char *path, const qkv_data_opts *opts);
/* A reader over an in-memory buffer (copied); `name` is used in error messages. */
qkv_reader *qkv_reader_open_mem(const char *name, const char *data, size_t len, const qkv_data_opts *opts);
/* Next record in *rec (borrowed), or *rec = NULL at the end. Returns non-zero (error set) on malformed input or a
 * read error; the reader is then unusable except for qkv_reader_close. */
qkv_status qkv_reader_next(qkv_reader *r, const qkv_data_record **rec);
/* Number of physical lines consumed so far. */
int64_t qkv_reader_line(const qkv_reader *r);
void qkv_reader_close(qkv_reader *r);

/* Calls fn for every record of path; stops at the first non-zero status fn returns (and returns it). */
typedef qkv_status (*qkv_data_record_fn)(const qkv_data_record *rec, void *user);
qkv_status qkv_data_foreach(const char *path, const qkv_data_opts *opts, qkv_data_record_fn fn, void *user);

/* A whole file in memory: rows[i] owns its fields (and json). Free with qkv_dataset_free. */
typedef struct qkv_row {
    int64_t line;
    int n_fields;
    char **fields;
    size_t *lens;
    struct cJSON *json;
} qkv_row;

typedef struct qkv_dataset {
    size_t n_rows;
    qkv_row *rows;
} qkv_dataset;

/* NULL (error set) on any error. */
qkv_dataset *qkv_data_read_all(const char *path, const qkv_data_opts *opts);
void qkv_dataset_free(qkv_dataset *d);

/* Checks that s[0..len) is UTF-8 (no overlongs, surrogates or code points above U+10FFFF). Returns true, or false
 * with *bad_offset set to the 0-based offset of the first bad byte. */
bool qkv_utf8_valid(const char *s, size_t len, size_t *bad_offset);

/* Characters (code points) of s[0..len), which should be valid UTF-8: every byte that is not a continuation byte
 * (10xxxxxx) starts one. */
size_t qkv_utf8_count(const char *s, size_t len);

/* Seeded train/dev/test assignment of n examples: out[i] = 0 (train), 1 (dev) or 2 (test). Each split gets
 * round(fraction * count) examples; with labels (non-NULL), the split is stratified: every label's examples are
 * divided in the same proportions, so class balance is kept. Deterministic for a seed. */
qkv_status qkv_data_split(size_t n, const int32_t *labels, double dev_frac, double test_frac, uint64_t seed,
                          uint8_t *out);

#ifdef __cplusplus
}
#endif
#endif
