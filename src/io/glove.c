/* Word vectors: GloVe / word2vec text and word2vec binary files, and what one does with them (glove.h). */
#include "qkv/glove.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "qkv/fsutil.h"
#include "qkv/params.h"

struct qkv_vectors {
    int64_t count, dim;
    qkv_tensor *matrix; /* [count, dim] */
    double *norms;      /* L2 norm of each row, for cosine */
    qkv_vocab *vocab;
};

/* ---- Reading ---------------------------------------------------------------------------------------------- */

/* The whole file, NUL-terminated (so strtof never runs off the end). Text vectors have lines of a few KB: a device
 * or pipe without line breaks (/dev/zero) is refused after 1 MiB instead of filling memory. */
static char *read_all(const char *path, size_t *size) {
    return qkv_fs_read_capped(path, (uint64_t)64 << 30, (uint64_t)1 << 20, "vectors file", size);
}

/* Growing row storage while parsing. */
typedef struct {
    float *data;
    int64_t rows, cap, dim;
} rows_buf;

static float *rows_push(rows_buf *r, const char *path) {
    if (r->rows == r->cap) {
        int64_t ncap = r->cap ? r->cap * 2 : 1024;
        float *nd = realloc(r->data, sizeof(float) * (size_t)(ncap * r->dim));
        if (!nd) {
            qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory after %lld vectors", path, (long long)r->rows);
            return NULL;
        }
        r->data = nd, r->cap = ncap;
    }
    return r->data + r->dim * r->rows++;
}

/* "N D" with both positive integers and nothing else: word2vec's header line. */
static bool parse_header(const char *s, const char *e, int64_t *n, int64_t *d) {
    char tmp[64];
    size_t len = (size_t)(e - s);
    if (len == 0 || len >= sizeof tmp) return false;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    long long a, b;
    char extra;
    if (sscanf(tmp, "%lld %lld %c", &a, &b, &extra) != 2) return false;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)tmp[i]) && tmp[i] != ' ' && tmp[i] != '\t' && tmp[i] != '\r') return false;
    if (a < 1 || b < 1 || b > (1 << 20)) return false;
    *n = a, *d = b;
    return true;
}

static qkv_status add_word(qkv_vocab *vocab, const char *path, const char *kind, int64_t where, const char *w,
                           size_t len, int64_t expect_id) {
    if (len == 0) return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: empty word", path, (long long)where);
    int32_t id = qkv_vocab_add(vocab, w, len);
    if (id < 0) return qkv_error_set(qkv_last_status(), "%s:%lld: %s", path, (long long)where, qkv_last_error());
    if (id != expect_id)
        return qkv_error_set(QKV_ERR_FORMAT, "%s: %s %lld: duplicate word '%.*s' (already at row %d)", path, kind,
                             (long long)where, (int)len, w, id);
    return QKV_OK;
}

/* The common case of GloVe's numbers, "-0.038194": at most 18 digits, no exponent. The digits form an exact
 * integer, divided by an exact power of ten in double (correctly rounded), then rounded to float: the same value
 * Python's float() + numpy's float32 give. Anything else (exponents, long digit strings, inf, nan) goes to
 * strtof. Returns false when the fast path does not apply. */
static bool fast_float(const char *s, const char *e, float *out) {
    static const double pow10[19] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8, 1e9,
                                     1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18};
    bool neg = false;
    if (s < e && (*s == '-' || *s == '+')) neg = *s++ == '-';
    uint64_t m = 0;
    int digits = 0, frac = -1;
    for (; s < e; s++) {
        if (*s >= '0' && *s <= '9') {
            if (++digits > 18) return false;
            m = m * 10 + (uint64_t)(*s - '0');
            if (frac >= 0) frac++;
        } else if (*s == '.' && frac < 0) {
            frac = 0;
        } else {
            return false;
        }
    }
    if (digits == 0) return false;
    double v = (double)m / pow10[frac > 0 ? frac : 0];
    *out = (float)(neg ? -v : v);
    return true;
}

/* Text: "word v1 ... vD" lines. The buffer is modified in place (field ends become NULs). */
static qkv_status parse_text(char *buf, size_t size, const char *path, qkv_vocab *vocab, rows_buf *rows,
                             int64_t header_n, int64_t header_d, char *body) {
    int64_t line = header_n ? 2 : 1;
    rows->dim = header_d;
    char *p = body, *end = buf + size;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        char *next = nl ? nl + 1 : end;
        if (le > p && le[-1] == '\r') le--;
        *le = '\0';
        if (le == p) {
            if (next >= end) break; /* a final line end */
            return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: empty line", path, (long long)line);
        }
        char *w = p;
        while (p < le && *p != ' ' && *p != '\t') p++;
        size_t wlen = (size_t)(p - w);
        /* Count the values first so the dimension is known (first line) or checked (later lines). */
        int64_t nv = 0;
        for (char *q = p; q < le;) {
            while (q < le && (*q == ' ' || *q == '\t')) q++;
            if (q >= le) break;
            nv++;
            while (q < le && *q != ' ' && *q != '\t') q++;
        }
        if (rows->dim == 0) {
            if (nv == 0)
                return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: a word with no vector values", path, (long long)line);
            rows->dim = nv;
        } else if (nv != rows->dim) {
            return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: '%.*s' has %lld values, expected %lld (dimension %s)",
                                 path, (long long)line, (int)(wlen > 64 ? 64 : wlen), w, (long long)nv,
                                 (long long)rows->dim, header_d ? "from the header" : "of the first line");
        }
        float *row = rows_push(rows, path);
        if (!row) return QKV_ERR_NOMEM;
        for (int64_t j = 0; j < nv; j++) {
            while (*p == ' ' || *p == '\t') p++;
            char *num = p;
            while (p < le && *p != ' ' && *p != '\t') p++;
            if (fast_float(num, p, &row[j])) continue;
            char save = *p;
            *p = '\0';
            char *stop;
            errno = 0;
            float x = strtof(num, &stop);
            *p = save;
            if (stop != p || !isfinite(x))
                return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: value %lld of '%.*s' is not a finite number: '%.*s'",
                                     path, (long long)line, (long long)j + 1, (int)(wlen > 64 ? 64 : wlen), w,
                                     (int)(p - num > 32 ? 32 : p - num), num);
            row[j] = x;
        }
        qkv_status st = add_word(vocab, path, "line", line, w, wlen, rows->rows - 1);
        if (st) return st;
        p = next;
        line++;
    }
    if (rows->rows == 0) return qkv_error_set(QKV_ERR_FORMAT, "%s: no vectors in the file", path);
    if (header_n && rows->rows != header_n)
        return qkv_error_set(QKV_ERR_FORMAT, "%s: the header says %lld vectors but the file has %lld", path,
                             (long long)header_n, (long long)rows->rows);
    return QKV_OK;
}

/* word2vec binary: records "word " + dim float32 (little-endian), each optionally followed by '\n'. */
static qkv_status parse_binary(const char *buf, size_t size, const char *path, qkv_vocab *vocab, rows_buf *rows,
                               int64_t n, int64_t d, const char *body) {
    rows->dim = d;
    const char *p = body, *end = buf + size;
    for (int64_t i = 0; i < n; i++) {
        while (p < end && (*p == '\n' || *p == '\r')) p++;
        const char *w = p;
        while (p < end && *p != ' ') p++;
        if (p >= end)
            return qkv_error_set(QKV_ERR_FORMAT, "%s: record %lld: truncated (the header says %lld vectors)", path,
                                 (long long)i + 1, (long long)n);
        size_t wlen = (size_t)(p - w);
        p++;
        if ((size_t)(end - p) < sizeof(float) * (size_t)d)
            return qkv_error_set(QKV_ERR_FORMAT,
                                 "%s: record %lld ('%.*s'): truncated vector (%lld bytes left, need %lld)", path,
                                 (long long)i + 1, (int)(wlen > 64 ? 64 : wlen), w, (long long)(end - p),
                                 (long long)(4 * d));
        float *row = rows_push(rows, path);
        if (!row) return QKV_ERR_NOMEM;
        memcpy(row, p, sizeof(float) * (size_t)d);
        p += sizeof(float) * (size_t)d;
        for (int64_t j = 0; j < d; j++)
            if (!isfinite(row[j]))
                return qkv_error_set(QKV_ERR_FORMAT, "%s: record %lld ('%.*s'): value %lld is not finite", path,
                                     (long long)i + 1, (int)(wlen > 64 ? 64 : wlen), w, (long long)j + 1);
        qkv_status st = add_word(vocab, path, "record", i + 1, w, wlen, i);
        if (st) return st;
    }
    while (p < end && isspace((unsigned char)*p)) p++;
    if (p < end)
        return qkv_error_set(QKV_ERR_FORMAT, "%s: %lld bytes after the %lld records the header announces", path,
                             (long long)(end - p), (long long)n);
    return QKV_OK;
}

/* After a header: text when the rest of the first record's line reads as exactly d numbers, binary otherwise (d
 * raw float32 values cannot also spell d decimal numbers and a line end). */
static bool looks_binary(const char *body, const char *end, int64_t d) {
    const char *p = body;
    while (p < end && *p != ' ' && *p != '\t' && *p != '\n') p++;
    if (p >= end || *p == '\n') return false; /* no vector at all: let the text parser name the problem */
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    int64_t n = 0;
    while (p < eol) {
        while (p < eol && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
        if (p >= eol) break;
        const char *tok = p;
        while (p < eol && *p != ' ' && *p != '\t' && *p != '\r') p++;
        for (const char *q = tok; q < p; q++)
            if (!strchr("0123456789+-.eE", *q) || *q == 0) return true;
        n++;
    }
    return n != d;
}

qkv_vectors *qkv_vectors_load(const char *path, qkv_vec_format format) {
    if (!path) {
        qkv_error_set(QKV_ERR_INVALID, "vectors: path is NULL");
        return NULL;
    }
    if (format != QKV_VEC_AUTO && format != QKV_VEC_TEXT && format != QKV_VEC_BINARY) {
        qkv_error_set(QKV_ERR_INVALID, "%s: unknown vector format %d", path, (int)format);
        return NULL;
    }
    size_t size = 0;
    char *buf = read_all(path, &size);
    if (!buf) return NULL;
    if (size == 0) {
        free(buf);
        qkv_error_set(QKV_ERR_FORMAT, "%s: empty file", path);
        return NULL;
    }
    char *nl = memchr(buf, '\n', size);
    char *first_end = nl ? nl : buf + size;
    int64_t hn = 0, hd = 0;
    bool header = parse_header(buf, first_end, &hn, &hd);
    char *body = header ? (nl ? nl + 1 : buf + size) : buf;
    bool binary = format == QKV_VEC_BINARY || (format == QKV_VEC_AUTO && header && looks_binary(body, buf + size, hd));
    qkv_vectors *v = calloc(1, sizeof *v);
    rows_buf rows = {0};
    qkv_status st = QKV_OK;
    if (!v || !(v->vocab = qkv_vocab_new())) {
        st = qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", path);
    } else if (binary && !header) {
        st = qkv_error_set(QKV_ERR_FORMAT, "%s:1: a word2vec binary file must start with a \"N D\" header line", path);
    } else if (binary) {
        st = parse_binary(buf, size, path, v->vocab, &rows, hn, hd, body);
    } else {
        st = parse_text(buf, size, path, v->vocab, &rows, header ? hn : 0, header ? hd : 0, body);
    }
    free(buf);
    if (!st) {
        v->count = rows.rows, v->dim = rows.dim;
        v->matrix = qkv_tensor_new(QKV_F32, QKV_DIMS(v->count, v->dim));
        v->norms = malloc(sizeof(double) * (size_t)v->count);
        if (!v->matrix || !v->norms) {
            st = qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory for %lld x %lld vectors", path, (long long)v->count,
                               (long long)v->dim);
        } else {
            memcpy(v->matrix->data, rows.data, sizeof(float) * (size_t)(v->count * v->dim));
            for (int64_t i = 0; i < v->count; i++) {
                const float *r = rows.data + i * v->dim;
                double s = 0;
                for (int64_t j = 0; j < v->dim; j++) s += (double)r[j] * r[j];
                v->norms[i] = sqrt(s);
            }
        }
    }
    free(rows.data);
    if (st) {
        qkv_vectors_free(v);
        return NULL;
    }
    return v;
}

void qkv_vectors_free(qkv_vectors *v) {
    if (!v) return;
    qkv_tensor_free(v->matrix);
    qkv_vocab_free(v->vocab);
    free(v->norms);
    free(v);
}

int64_t qkv_vectors_count(const qkv_vectors *v) { return v ? v->count : 0; }
int64_t qkv_vectors_dim(const qkv_vectors *v) { return v ? v->dim : 0; }
const qkv_tensor *qkv_vectors_matrix(const qkv_vectors *v) { return v ? v->matrix : NULL; }
const qkv_vocab *qkv_vectors_vocab(const qkv_vectors *v) { return v ? v->vocab : NULL; }

const char *qkv_vectors_word(const qkv_vectors *v, int64_t i) {
    if (!v || i < 0 || i >= v->count) {
        qkv_error_set(QKV_ERR_RANGE, "vectors: row %lld out of range [0, %lld)", (long long)i,
                      (long long)(v ? v->count : 0));
        return NULL;
    }
    return qkv_vocab_token(v->vocab, (int32_t)i, NULL);
}

int64_t qkv_vectors_find(const qkv_vectors *v, const char *word) {
    if (!v || !word || !word[0]) return -1;
    return qkv_vocab_id(v->vocab, word, strlen(word));
}

/* ---- Similarity ------------------------------------------------------------------------------------------- */

static qkv_status lookup(const qkv_vectors *v, const char *word, int64_t *row) {
    if (!v || !word) return qkv_error_set(QKV_ERR_INVALID, "vectors: NULL vectors or word");
    *row = qkv_vectors_find(v, word);
    if (*row < 0) return qkv_error_set(QKV_ERR_INVALID, "unknown word '%s' (not among the %lld words)", word,
                                       (long long)v->count);
    return QKV_OK;
}

static const float *row_of(const qkv_vectors *v, int64_t i) { return qkv_f32(v->matrix) + i * v->dim; }

qkv_status qkv_vectors_cosine(const qkv_vectors *v, const char *a, const char *b, double *out) {
    int64_t ia = -1, ib = -1;
    qkv_status st = lookup(v, a, &ia);
    if (!st) st = lookup(v, b, &ib);
    if (st) return st;
    const float *x = row_of(v, ia), *y = row_of(v, ib);
    double dot = 0;
    for (int64_t j = 0; j < v->dim; j++) dot += (double)x[j] * y[j];
    double den = v->norms[ia] * v->norms[ib];
    *out = den > 0 ? dot / den : 0.0;
    return QKV_OK;
}

/* Top k rows by cosine with q (double), skipping excluded rows: a sorted insertion list, k is small. */
static qkv_status nearest_d(const qkv_vectors *v, const double *q, const int64_t *exclude, int n_exclude, int k,
                            qkv_vec_hit *hits, int *n) {
    if (k < 0) return qkv_error_set(QKV_ERR_INVALID, "vectors: k must be >= 0, got %d", k);
    if (k > 0 && !hits) return qkv_error_set(QKV_ERR_INVALID, "vectors: hits is NULL");
    double qn = 0;
    for (int64_t j = 0; j < v->dim; j++) qn += q[j] * q[j];
    qn = sqrt(qn);
    int have = 0;
    for (int64_t i = 0; i < v->count && k > 0; i++) {
        bool skip = false;
        for (int e = 0; e < n_exclude; e++) skip |= exclude[e] == i;
        if (skip) continue;
        const float *r = row_of(v, i);
        double dot = 0;
        for (int64_t j = 0; j < v->dim; j++) dot += q[j] * r[j];
        double den = qn * v->norms[i];
        double s = den > 0 ? dot / den : 0.0;
        if (have == k && s <= hits[k - 1].score) continue;
        int pos = have < k ? have++ : k - 1;
        while (pos > 0 && hits[pos - 1].score < s) {
            hits[pos] = hits[pos - 1];
            pos--;
        }
        hits[pos] = (qkv_vec_hit){.row = i, .score = s};
    }
    *n = have;
    return QKV_OK;
}

qkv_status qkv_vectors_nearest(const qkv_vectors *v, const float *query, const int64_t *exclude, int n_exclude,
                               int k, qkv_vec_hit *hits, int *n) {
    if (!v || !query || !n || n_exclude < 0 || (n_exclude > 0 && !exclude))
        return qkv_error_set(QKV_ERR_INVALID, "vectors nearest: NULL argument or bad exclude list");
    double *q = malloc(sizeof(double) * (size_t)v->dim);
    if (!q) return qkv_error_set(QKV_ERR_NOMEM, "vectors nearest: out of memory");
    for (int64_t j = 0; j < v->dim; j++) q[j] = query[j];
    qkv_status st = nearest_d(v, q, exclude, n_exclude, k, hits, n);
    free(q);
    return st;
}

qkv_status qkv_vectors_similar(const qkv_vectors *v, const char *word, int k, qkv_vec_hit *hits, int *n) {
    int64_t i = -1;
    qkv_status st = lookup(v, word, &i);
    if (st) return st;
    if (!n) return qkv_error_set(QKV_ERR_INVALID, "vectors similar: n is NULL");
    return qkv_vectors_nearest(v, row_of(v, i), &i, 1, k, hits, n);
}

qkv_status qkv_vectors_analogy(const qkv_vectors *v, const char *a, const char *b, const char *c, bool unit, int k,
                               qkv_vec_hit *hits, int *n) {
    int64_t id[3] = {-1, -1, -1};
    const char *w[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        qkv_status st = lookup(v, w[i], &id[i]);
        if (st) return st;
    }
    if (!n) return qkv_error_set(QKV_ERR_INVALID, "vectors analogy: n is NULL");
    double *q = malloc(sizeof(double) * (size_t)v->dim);
    if (!q) return qkv_error_set(QKV_ERR_NOMEM, "vectors analogy: out of memory");
    const double sign[3] = {1, -1, 1};
    for (int64_t j = 0; j < v->dim; j++) q[j] = 0;
    for (int i = 0; i < 3; i++) {
        double s = sign[i];
        if (unit) s = v->norms[id[i]] > 0 ? s / v->norms[id[i]] : 0.0;
        const float *r = row_of(v, id[i]);
        for (int64_t j = 0; j < v->dim; j++) q[j] += s * r[j];
    }
    qkv_status st = nearest_d(v, q, id, 3, k, hits, n);
    free(q);
    return st;
}

/* ---- As an embedding -------------------------------------------------------------------------------------- */

/* Lowercase each code point (utf8proc's simple mapping); NULL for invalid UTF-8. Caller frees. */
static char *lowercase(const char *s, size_t len) {
    char *out = malloc(4 * len + 1);
    if (!out) return NULL;
    size_t o = 0;
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    utf8proc_ssize_t left = (utf8proc_ssize_t)len;
    while (left > 0) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t used = utf8proc_iterate(p, left, &cp);
        if (used < 1) {
            free(out);
            return NULL;
        }
        o += (size_t)utf8proc_encode_char(utf8proc_tolower(cp), (utf8proc_uint8_t *)out + o);
        p += used, left -= used;
    }
    out[o] = '\0';
    return out;
}

int64_t qkv_vectors_lookup(const qkv_vectors *v, const char *tok, size_t len, bool lowercase_fallback) {
    if (!v || !tok || len == 0) return -1;
    int64_t r = qkv_vocab_id(v->vocab, tok, len);
    if (r < 0 && lowercase_fallback) {
        char *low = lowercase(tok, len);
        if (low) r = qkv_vocab_id(v->vocab, low, strlen(low));
        free(low);
    }
    return r;
}

qkv_tensor *qkv_vectors_vocab_matrix(const qkv_vectors *v, const qkv_vocab *vocab, int64_t dim,
                                     bool lowercase_fallback, float oov_std, qkv_rng *rng, int64_t *found) {
    if (!v || !vocab) {
        qkv_error_set(QKV_ERR_INVALID, "vectors vocab_matrix: vectors or vocabulary is NULL");
        return NULL;
    }
    if (dim != v->dim) {
        qkv_error_set(QKV_ERR_INVALID, "embedding size %lld does not match the pretrained vectors' dimension %lld",
                      (long long)dim, (long long)v->dim);
        return NULL;
    }
    if (!(oov_std >= 0) || (oov_std > 0 && !rng)) {
        qkv_error_set(QKV_ERR_INVALID, "vectors vocab_matrix: oov_std must be >= 0 (and needs an rng when > 0)");
        return NULL;
    }
    int64_t nv = (int64_t)qkv_vocab_size(vocab), hits = 0;
    if (nv < 1) {
        qkv_error_set(QKV_ERR_INVALID, "vectors vocab_matrix: empty vocabulary");
        return NULL;
    }
    qkv_tensor *m = qkv_tensor_new(QKV_F32, QKV_DIMS(nv, dim));
    if (!m) return NULL;
    if (oov_std > 0) qkv_rng_fill_normal(rng, m, 0.0f, oov_std);
    for (int64_t i = 0; i < nv; i++) {
        size_t len;
        const char *tok = qkv_vocab_token(vocab, (int32_t)i, &len);
        int64_t r = tok ? qkv_vocab_id(v->vocab, tok, len) : -1;
        if (r < 0 && tok && lowercase_fallback) {
            char *low = lowercase(tok, len);
            if (low) r = qkv_vocab_id(v->vocab, low, strlen(low));
            free(low);
        }
        if (r < 0) continue;
        memcpy(qkv_f32(m) + i * dim, row_of(v, r), sizeof(float) * (size_t)dim);
        hits++;
    }
    if (found) *found = hits;
    return m;
}

qkv_status qkv_vectors_embedding_init(qkv_nn_embedding *e, qkv_params *params, const char *prefix,
                                      const qkv_vectors *v, const qkv_vocab *vocab, int64_t dim, bool frozen,
                                      int64_t padding_idx, qkv_rng *rng, int64_t *found) {
    qkv_tensor *m = qkv_vectors_vocab_matrix(v, vocab, dim, true, rng ? 1.0f : 0.0f, rng, found);
    if (!m) return qkv_last_status();
    qkv_status st = qkv_nn_embedding_init_from(e, params, prefix, m, frozen, padding_idx, false);
    qkv_tensor_free(m);
    return st;
}
