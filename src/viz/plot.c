/* SVG line plots: axes with nice ticks, polylines, a legend. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/data.h"
#include "qkv/plot.h"

static const char *const PALETTE[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

static void xml_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A tick step of 1, 2 or 5 x 10^k giving about 5 intervals over span. */
static double nice_step(double span) {
    double raw = span / 5, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

static bool usable(const qkv_plot_panel *p, double x, double y) {
    return isfinite(x) && isfinite(y) && (!p->log_y || y > 0);
}

/* Characters (not bytes) of a UTF-8 string: text widths are estimated per character. */
static size_t utf8_chars(const char *s) { return s ? qkv_utf8_count(s, strlen(s)) : 0; }

static void panel(FILE *f, const qkv_plot_panel *p, double ox, double W, double H) {
    const double L = 64, R = 16, T = 30, B = 44; /* margins: room for tick labels and titles */
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int s = 0; s < p->n_series; s++)
        for (size_t i = 0; i < p->series[s].n; i++) {
            double x = p->series[s].x[i], y = p->series[s].y[i];
            if (!usable(p, x, y)) continue;
            if (p->log_y) y = log10(y);
            x0 = fmin(x0, x);
            x1 = fmax(x1, x);
            y0 = fmin(y0, y);
            y1 = fmax(y1, y);
        }
    if (!isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    if (x1 - x0 < 1e-12) x0 -= 0.5, x1 += 0.5;
    if (y1 - y0 < 1e-12) y0 -= 0.5, y1 += 0.5;
    double pad = (y1 - y0) * 0.05;
    y0 -= pad;
    y1 += pad;
    double pw = W - L - R, ph = H - T - B;
#define PX(x) (ox + L + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (T + ph - ((y) - y0) / (y1 - y0) * ph)
    fprintf(f, "<g font-family=\"sans-serif\" font-size=\"11\">\n");
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fff\" stroke=\"#999\"/>\n",
            ox + L, T, pw, ph);
    double xs = nice_step(x1 - x0), ys = nice_step(y1 - y0);
    for (double v = ceil(x0 / xs) * xs; v <= x1 + xs * 1e-9; v += xs) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>", PX(v), T, PX(v), T + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", PX(v), T + ph + 14,
                fabs(v) < xs * 1e-6 ? 0.0 : v);
    }
    for (double v = ceil(y0 / ys) * ys; v <= y1 + ys * 1e-9; v += ys) {
        double shown = fabs(v) < ys * 1e-6 ? 0.0 : v;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>", ox + L, PY(v),
                ox + L + pw, PY(v));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", ox + L - 4, PY(v) + 4,
                p->log_y ? pow(10, shown) : shown);
    }
    /* A title wider than the panel (about 7 px per character at 13 px) is squeezed to fit rather than cut off. */
    bool squeeze = (double)utf8_chars(p->title) * 7.2 > W - 8;
    fprintf(f, "<text x=\"%.1f\" y=\"18\" text-anchor=\"middle\" font-size=\"13\"",
            squeeze ? ox + W / 2 : ox + L + pw / 2);
    if (squeeze) fprintf(f, " textLength=\"%.1f\" lengthAdjust=\"spacingAndGlyphs\"", W - 8);
    fputc('>', f);
    xml_text(f, p->title);
    fprintf(f, "</text>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", ox + L + pw / 2, H - 8);
    xml_text(f, p->xlabel);
    fprintf(f, "</text>\n<text transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"middle\">", ox + 14,
            T + ph / 2);
    xml_text(f, p->ylabel);
    fprintf(f, "</text>\n");
    /* The legend sits inside the top right corner, as far left as its longest label needs (~6.2 px a character). */
    double label_w = 0;
    for (int s = 0; s < p->n_series; s++) label_w = fmax(label_w, (double)utf8_chars(p->series[s].label) * 6.2);
    double lx = ox + L + pw - fmax(110, label_w + 30);
    for (int s = 0; s < p->n_series; s++) {
        const qkv_plot_series *se = &p->series[s];
        const char *color = se->color ? se->color : PALETTE[s % (int)(sizeof PALETTE / sizeof PALETTE[0])];
        bool open = false;
        size_t shown = 0;
        for (size_t i = 0; i < se->n; i++) {
            if (!usable(p, se->x[i], se->y[i])) {
                if (open) fprintf(f, "\"/>\n");
                open = false;
                continue;
            }
            double y = p->log_y ? log10(se->y[i]) : se->y[i];
            if (!open)
                fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
            fprintf(f, "%.1f,%.1f ", PX(se->x[i]), PY(y));
            open = true;
            shown++;
        }
        if (open) fprintf(f, "\"/>\n");
        if (shown <= 40) /* markers only where they do not blur into the line */
            for (size_t i = 0; i < se->n; i++)
                if (usable(p, se->x[i], se->y[i]))
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>", PX(se->x[i]),
                            PY(p->log_y ? log10(se->y[i]) : se->y[i]), color);
        double ly = T + 14 + 14 * s;
        fprintf(f, "\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>",
                lx, ly - 4, lx + 18, ly - 4, color);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", lx + 22, ly);
        xml_text(f, se->label);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</g>\n");
#undef PX
#undef PY
}

/* A text that would make the SVG unreadable (invalid UTF-8 is not XML) is refused, naming where it sits. */
static bool text_ok(const char *s, const char *what, int panel) {
    size_t bad = 0;
    if (!s || qkv_utf8_valid(s, strlen(s), &bad)) return true;
    qkv_error_set(QKV_ERR_INVALID, "panel %d: the %s is not valid UTF-8 (byte %zu)", panel, what, bad);
    return false;
}

char *qkv_plot_svg(const qkv_plot_panel *panels, int n_panels, int width, int height) {
    if (n_panels < 1 || !panels || width < 0 || height < 0) {
        qkv_error_set(QKV_ERR_INVALID, "plot: need at least one panel and non-negative sizes");
        return NULL;
    }
    for (int i = 0; i < n_panels; i++)
        if (panels[i].n_series < 0 || (panels[i].n_series && !panels[i].series)) {
            qkv_error_set(QKV_ERR_INVALID, "plot: panel %d has no series array", i);
            return NULL;
        }
    for (int i = 0; i < n_panels; i++) {
        const qkv_plot_panel *p = &panels[i];
        if (!text_ok(p->title, "title", i) || !text_ok(p->xlabel, "x label", i) || !text_ok(p->ylabel, "y label", i))
            return NULL;
        for (int s = 0; s < p->n_series; s++)
            if (!text_ok(p->series[s].label, "series label", i)) return NULL;
    }
    double W = width ? width : 480, H = height ? height : 320;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n",
            W * n_panels, H, W * n_panels, H);
    for (int i = 0; i < n_panels; i++) panel(f, &panels[i], W * i, W, H);
    fprintf(f, "</svg>\n");
    if (fclose(f) || !buf) {
        free(buf);
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return buf;
}

qkv_status qkv_plot_write(const char *path, const qkv_plot_panel *panels, int n_panels, int width, int height) {
    char *svg = qkv_plot_svg(panels, n_panels, width, height);
    if (!svg) return qkv_last_status();
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    qkv_status st = tmp ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (st == QKV_OK) {
        snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
        FILE *f = fopen(tmp, "w");
        if (!f) st = qkv_error_set(QKV_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
        else {
            bool bad = fputs(svg, f) < 0;
            if (fclose(f) || bad) st = qkv_error_set(QKV_ERR_IO, "%s: write error", tmp);
        }
        if (st == QKV_OK && rename(tmp, path))
            st = qkv_error_set(QKV_ERR_IO, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
        if (st != QKV_OK) unlink(tmp);
    }
    free(tmp);
    free(svg);
    return st;
}
