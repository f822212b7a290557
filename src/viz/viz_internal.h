/* Shared by the viewer's writers (src/viz): a growing text buffer with JSON / XML escaping, map validation and
 * atomic file output. Not installed. */
#ifndef QKV_VIZ_INTERNAL_H
#define QKV_VIZ_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/visibility.h"
#include "qkv/viz.h"

QKV_INTERNAL_BEGIN

typedef struct viz_buf {
    char *data;
    size_t len, cap;
    bool oom; /* sticky: once an append fails, the buffer is unusable and qkv__viz_buf_save reports it */
} viz_buf;

void qkv__viz_buf_free(viz_buf *b);
void qkv__viz_buf_put(viz_buf *b, const char *s);
void qkv__viz_buf_printf(viz_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal (quotes included); '<' and '>' are escaped so the text cannot close a <script>. NULL -> null */
void qkv__viz_buf_json_str(viz_buf *b, const char *s);
/* XML text / attribute content. */
void qkv__viz_buf_xml(viz_buf *b, const char *s);
/* A finite number compactly ("%.4g"); non-finite -> 0. */
void qkv__viz_buf_num(viz_buf *b, double v);
/* Writes the buffer to path through a temporary file and rename; frees nothing. */
qkv_status qkv__viz_buf_save(const viz_buf *b, const char *path);

/* Checks a map's sizes and pointers; errors name `where`. */
qkv_status qkv__viz_check_map(const qkv_viz_map *m, const char *where);
/* The key labels of a map (col_labels, or row_labels for self-attention). */
static inline const char *const *viz_cols(const qkv_viz_map *m) {
    return m->col_labels ? m->col_labels : m->row_labels;
}

QKV_INTERNAL_END
#endif
