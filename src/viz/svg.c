/* A standalone SVG heatmap of one attention map (one head or the mean over heads): cells white -> dark blue with
 * the value as a tooltip, query labels on the left, key labels rotated on top, a colour scale on the right. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "viz/viz_internal.h"

static double weight(const qkv_viz_map *m, int head, int i, int j) {
    size_t plane = (size_t)m->n_rows * (size_t)m->n_cols, at = (size_t)i * (size_t)m->n_cols + (size_t)j;
    if (head >= 0) return m->weights[(size_t)head * plane + at];
    double s = 0;
    for (int h = 0; h < m->n_heads; h++) s += m->weights[(size_t)h * plane + at];
    return s / m->n_heads;
}

/* The same scale as the page: 0 -> white, 1 -> rgb(0, 12, 255). */
static void colour(double v, int *r, int *g) {
    if (!isfinite(v)) v = 0;
    double c = 255.0 * (1.0 - fmin(1.0, fmax(0.0, v)));
    *r = (int)lround(c * 0.9);
    *g = (int)lround(c * 0.95 + 12);
}

static int longest(int n, const char *const *labels) {
    int mx = 1;
    for (int i = 0; i < n; i++) {
        int len = (int)strlen(labels[i]);
        if (len > mx) mx = len;
    }
    return mx > 16 ? 16 : mx;
}

qkv_status qkv_viz_write_svg(const char *path, const qkv_viz_map *m, int head, const char *title) {
    qkv_status st = qkv__viz_check_map(m, "svg heatmap");
    if (st) return st;
    if (head < -1 || head >= m->n_heads)
        return qkv_error_set(QKV_ERR_INVALID, "viewer: svg heatmap: head %d outside [-1, %d)", head, m->n_heads);
    const char *const *cols = viz_cols(m);
    int R = m->n_rows, C = m->n_cols, big = R > C ? R : C;
    int cs = 640 / big;
    cs = cs < 8 ? 8 : cs > 26 ? 26 : cs;
    int lw = 8 + 7 * longest(R, m->row_labels), th = 8 + 7 * longest(C, cols) + (title ? 20 : 0);
    int W = lw + C * cs + 60, H = th + R * cs + 10;
    viz_buf b = {0};
    qkv__viz_buf_printf(&b,
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
                   "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
                   "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
                   W, H, W, H);
    if (title) {
        qkv__viz_buf_put(&b, "<text x=\"4\" y=\"16\" font-size=\"13\" font-weight=\"600\">");
        qkv__viz_buf_xml(&b, title);
        qkv__viz_buf_put(&b, "</text>\n");
    }
    for (int j = 0; j < C; j++) {
        double x = lw + j * cs + cs / 2.0, y = th - 4;
        qkv__viz_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" transform=\"rotate(-60 %.1f %.1f)\">", x, y, x, y);
        char lab[80];
        snprintf(lab, sizeof lab, "%.16s", cols[j]);
        qkv__viz_buf_xml(&b, lab);
        qkv__viz_buf_put(&b, "</text>\n");
    }
    for (int i = 0; i < R; i++) {
        char lab[80];
        snprintf(lab, sizeof lab, "%.16s", m->row_labels[i]);
        qkv__viz_buf_printf(&b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", lw - 4, th + i * cs + cs / 2.0 + 4);
        qkv__viz_buf_xml(&b, lab);
        qkv__viz_buf_put(&b, "</text>\n");
        for (int j = 0; j < C; j++) {
            double v = weight(m, head, i, j);
            int r, g;
            colour(v, &r, &g);
            qkv__viz_buf_printf(&b, "<rect class=\"cell\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                               "fill=\"rgb(%d,%d,255)\"><title>",
                           lw + j * cs, th + i * cs, cs, cs, r, g);
            qkv__viz_buf_xml(&b, m->row_labels[i]);
            qkv__viz_buf_put(&b, " \xe2\x86\x92 ");
            qkv__viz_buf_xml(&b, cols[j]);
            qkv__viz_buf_printf(&b, ": %.3f</title></rect>\n", isfinite(v) ? v : 0.0);
        }
    }
    double step = R * cs / 11.0 < 4 ? 4 : R * cs / 11.0;
    for (int k = 0; k <= 10; k++) {
        int r, g;
        colour(k / 10.0, &r, &g);
        qkv__viz_buf_printf(&b, "<rect x=\"%d\" y=\"%.1f\" width=\"12\" height=\"%.1f\" fill=\"rgb(%d,%d,255)\"/>\n",
                            lw + C * cs + 16, th + (10 - k) * step, step, r, g);
    }
    qkv__viz_buf_printf(&b, "<text x=\"%d\" y=\"%d\">1</text><text x=\"%d\" y=\"%.1f\">0</text>\n</svg>\n",
                        lw + C * cs + 30, th + 10, lw + C * cs + 30, th + 11 * step);
    st = qkv__viz_buf_save(&b, path);
    qkv__viz_buf_free(&b);
    return st;
}
