/* The viewer's text buffer, escaping, map checks and atomic file output. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "viz/viz_internal.h"

void qkv__viz_buf_free(viz_buf *b) {
    free(b->data);
    *b = (viz_buf){0};
}

static bool reserve(viz_buf *b, size_t extra) {
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->oom = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

static void put_n(viz_buf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void qkv__viz_buf_put(viz_buf *b, const char *s) { put_n(b, s, strlen(s)); }

void qkv__viz_buf_printf(viz_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void qkv__viz_buf_json_str(viz_buf *b, const char *s) {
    if (!s) {
        qkv__viz_buf_put(b, "null");
        return;
    }
    qkv__viz_buf_put(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[3] = {'\\', (char)*p, 0};
            qkv__viz_buf_put(b, e);
        } else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') {
            qkv__viz_buf_printf(b, "\\u%04x", *p);
        } else {
            put_n(b, (const char *)p, 1);
        }
    }
    qkv__viz_buf_put(b, "\"");
}

void qkv__viz_buf_xml(viz_buf *b, const char *s) {
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '<': qkv__viz_buf_put(b, "&lt;"); break;
        case '>': qkv__viz_buf_put(b, "&gt;"); break;
        case '&': qkv__viz_buf_put(b, "&amp;"); break;
        case '"': qkv__viz_buf_put(b, "&quot;"); break;
        case '\'': qkv__viz_buf_put(b, "&#39;"); break;
        default:
            if (*p < 0x20 && *p != '\t' && *p != '\n') qkv__viz_buf_put(b, " "); /* not allowed in XML 1.0 */
            else put_n(b, (const char *)p, 1);
        }
    }
}

void qkv__viz_buf_num(viz_buf *b, double v) {
    if (!isfinite(v) || fabs(v) < 1e-30) v = 0;
    qkv__viz_buf_printf(b, "%.4g", v);
}

qkv_status qkv__viz_buf_save(const viz_buf *b, const char *path) {
    if (b->oom) return qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory building %s", path ? path : "(null)");
    if (!path || !*path) return qkv_error_set(QKV_ERR_INVALID, "viewer: no output path");
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp) return qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        qkv_status st = qkv_error_set(QKV_ERR_IO, "viewer: cannot write %s: %s", tmp, strerror(errno));
        free(tmp);
        return st;
    }
    bool ok = fwrite(b->data ? b->data : "", 1, b->len, f) == b->len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        qkv_status st = qkv_error_set(QKV_ERR_IO, "viewer: cannot write %s: %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return st;
    }
    free(tmp);
    return QKV_OK;
}

qkv_status qkv__viz_check_map(const qkv_viz_map *m, const char *where) {
    if (!m) return qkv_error_set(QKV_ERR_INVALID, "viewer: %s: map is NULL", where);
    if (m->n_heads < 1 || m->n_rows < 1 || m->n_cols < 1)
        return qkv_error_set(QKV_ERR_INVALID, "viewer: %s: %d heads x %d rows x %d columns (each must be >= 1)", where,
                             m->n_heads, m->n_rows, m->n_cols);
    if ((long long)m->n_heads * m->n_rows * m->n_cols > 64LL << 20)
        return qkv_error_set(QKV_ERR_RANGE, "viewer: %s: %d x %d x %d weights is too many to draw", where,
                             m->n_heads, m->n_rows, m->n_cols);
    if (!m->weights || !m->row_labels)
        return qkv_error_set(QKV_ERR_INVALID, "viewer: %s: weights or row labels are NULL", where);
    if (!m->col_labels && m->n_cols != m->n_rows)
        return qkv_error_set(QKV_ERR_INVALID, "viewer: %s: %d rows x %d columns need column labels", where,
                             m->n_rows, m->n_cols);
    const char *const *cols = viz_cols(m);
    for (int i = 0; i < m->n_rows; i++)
        if (!m->row_labels[i]) return qkv_error_set(QKV_ERR_INVALID, "viewer: %s: row label %d is NULL", where, i);
    for (int j = 0; j < m->n_cols; j++)
        if (!cols[j]) return qkv_error_set(QKV_ERR_INVALID, "viewer: %s: column label %d is NULL", where, j);
    return QKV_OK;
}

qkv_status qkv_viz_map_from_tensor(qkv_viz_map *map, const qkv_tensor *w, int64_t b) {
    if (!map || !w) return qkv_error_set(QKV_ERR_INVALID, "viewer: map or weights is NULL");
    char s[96];
    if (w->dtype != QKV_F32 || (w->ndim != 3 && w->ndim != 4) || !qkv_is_contiguous(w))
        return qkv_error_set(QKV_ERR_INVALID,
                             "viewer: attention weights %s must be contiguous float32 [B, H, Tq, Tk] or [B, Tq, Tk]",
                             qkv_shape_str(w, s, sizeof s));
    if (b < 0 || b >= w->shape[0])
        return qkv_error_set(QKV_ERR_RANGE, "viewer: sequence %lld outside the batch of %lld", (long long)b,
                             (long long)w->shape[0]);
    int64_t H = w->ndim == 4 ? w->shape[1] : 1, Tq = w->shape[w->ndim - 2], Tk = w->shape[w->ndim - 1];
    if (H > (1 << 20) || Tq > (1 << 20) || Tk > (1 << 20))
        return qkv_error_set(QKV_ERR_RANGE, "viewer: attention weights %s are too large", qkv_shape_str(w, s, sizeof s));
    map->n_heads = (int)H;
    map->n_rows = (int)Tq;
    map->n_cols = (int)Tk;
    map->weights = qkv_f32(w) + b * H * Tq * Tk;
    return QKV_OK;
}
