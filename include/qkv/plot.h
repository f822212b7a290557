/* Line plots as standalone SVG: training curves in a run directory, loss curves in the viewer.
 *
 * A plot is one or more panels side by side; each panel has axes with "nice" ticks (1, 2, 5 x 10^k), a title,
 * axis labels, a legend and any number of series (polylines with point markers when sparse). Non-finite points are
 * skipped (a gap in the line). The SVG needs no scripts or fonts beyond the browser's sans-serif.
 *
 * Ownership: inputs are borrowed for the call; qkv_plot_svg returns a malloc'd string the caller frees. */
#ifndef QKV_PLOT_H
#define QKV_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_plot_series {
    const char *label;     /* legend text */
    const double *x, *y;   /* n points */
    size_t n;
    const char *color;     /* CSS colour, NULL: the next colour of a fixed palette */
} qkv_plot_series;

typedef struct qkv_plot_panel {
    const char *title, *xlabel, *ylabel;
    const qkv_plot_series *series;
    int n_series;
    bool log_y;            /* logarithmic y axis (non-positive values skipped) */
} qkv_plot_panel;

/* The SVG text of n_panels panels, each width x height pixels (0: 480 x 320). NULL (error) on bad arguments. */
char *qkv_plot_svg(const qkv_plot_panel *panels, int n_panels, int width, int height);
/* The same written to path atomically (temporary file + rename). */
qkv_status qkv_plot_write(const char *path, const qkv_plot_panel *panels, int n_panels, int width, int height);

#ifdef __cplusplus
}
#endif
#endif
