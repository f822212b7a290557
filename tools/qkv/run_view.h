/* The viewer page for a trained run: what it attends to on some texts, plus its training curves. Shared by
 * `qkv viz` and `qkv demo`. */
#ifndef QKV_RUN_VIEW_H
#define QKV_RUN_VIEW_H

#include "qkv/train.h"

/* Writes out_html (and, if svg_dir is non-NULL, one SVG heatmap per text and layer, averaged over heads, into it).
 * Returns a qkv_status; the error message names the file or text. */
int run_view_write(qkv_run *r, const char *run_dir, const char *const *texts, int n, const char *out_html,
                   const char *svg_dir);

#endif
