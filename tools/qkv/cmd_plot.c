/* qkv plot: curves of several runs (or JSON-lines logs in the same format) in one SVG, e.g. dev loss against
 * minutes of training for qkv and a PyTorch reference side by side. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "qkv/plot.h"

#define MAX_SOURCES 16

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv plot -o OUT.svg [--y FIELD] [--x step|minutes|seconds|wall-minutes] [--kind eval|train]\n"
            "                [--title T] [--log-y] [--size WxH] [LABEL=]SOURCE...\n\n"
            "Draws one line per SOURCE: a run directory (its log.jsonl) or any JSON-lines file whose records look\n"
            "like a run's log ({\"kind\": \"eval\", \"step\": 500, \"train_seconds\": 61.2, \"loss\": 1.93, ...};\n"
            "bench/quality/*.py write the PyTorch side's curves in this format). Records of --kind (default eval)\n"
            "that hold FIELD (default loss) become points; x is the step, or the training time in minutes\n"
            "(train_seconds: dev evaluations and checkpoints not counted) or seconds, or wall-clock minutes\n"
            "(elapsed). LABEL defaults to the source's name.\n\n"
            "Example, learning curves of two engines against minutes:\n"
            "  qkv plot -o curve.svg --x minutes --y bits_per_char qkv=runs/gru torch=torch_gru.jsonl\n");
}

typedef struct series_buf {
    double *x, *y;
    size_t n, cap;
} series_buf;

static bool push(series_buf *s, double x, double y) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        double *nx = realloc(s->x, sizeof *nx * cap), *ny = nx ? realloc(s->y, sizeof *ny * cap) : NULL;
        if (nx) s->x = nx;
        if (!nx || !ny) return false;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n++] = y;
    return true;
}

/* The x value of a record, or NAN when it lacks the field x needs. */
static double x_of(const cJSON *rec, const char *x) {
    const cJSON *v;
    if (!strcmp(x, "step")) {
        v = cJSON_GetObjectItemCaseSensitive(rec, "step");
        return cJSON_IsNumber(v) ? v->valuedouble : NAN;
    }
    bool wall = !strcmp(x, "wall-minutes");
    v = cJSON_GetObjectItemCaseSensitive(rec, wall ? "elapsed" : "train_seconds");
    if (!cJSON_IsNumber(v) && !wall) v = cJSON_GetObjectItemCaseSensitive(rec, "elapsed"); /* older logs */
    if (!cJSON_IsNumber(v)) return NAN;
    return strcmp(x, "seconds") ? v->valuedouble / 60.0 : v->valuedouble;
}

/* Reads one source into s. Returns an exit code. */
static int read_source(const char *path, const char *kind, const char *x, const char *y, series_buf *s) {
    char file[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(file, sizeof file, "%s/log.jsonl", path);
    else snprintf(file, sizeof file, "%s", path);
    cli_lines *lines = cli_read_lines("plot", file);
    if (!lines) return CLI_INPUT;
    int rc = CLI_OK;
    for (size_t i = 0; i < lines->n && rc == CLI_OK; i++) {
        const char *l = lines->line[i];
        if (strspn(l, " \t\r") == strlen(l)) continue;
        cJSON *rec = cJSON_Parse(l);
        if (!cJSON_IsObject(rec)) {
            rc = cli_error("plot", CLI_INPUT, "%s:%zu: not a JSON object", file, i + 1);
        } else {
            const cJSON *k = cJSON_GetObjectItemCaseSensitive(rec, "kind");
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, y);
            double xv = x_of(rec, x);
            if (cJSON_IsString(k) && !strcmp(k->valuestring, kind) && cJSON_IsNumber(v) && isfinite(xv) &&
                !push(s, xv, v->valuedouble))
                rc = cli_error("plot", CLI_RUNTIME, "out of memory");
        }
        cJSON_Delete(rec);
    }
    if (rc == CLI_OK && s->n == 0)
        rc = cli_error("plot", CLI_INPUT, "%s: no \"%s\" record holds both \"%s\" and the x field (%s)", file, kind, y,
                       x);
    cli_lines_free(lines);
    return rc;
}

static int run(int argc, char **argv) {
    const char *out = NULL, *y = "loss", *x = "step", *kind = "eval", *title = NULL;
    const char *src[MAX_SOURCES], *label[MAX_SOURCES];
    int n = 0;
    long width = 640, height = 400;
    bool log_y = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && has) {
            out = argv[++i];
        } else if (!strcmp(a, "--y") && has) {
            y = argv[++i];
        } else if (!strcmp(a, "--x") && has) {
            x = argv[++i];
            if (strcmp(x, "step") && strcmp(x, "minutes") && strcmp(x, "seconds") && strcmp(x, "wall-minutes"))
                return cli_error("plot", CLI_USAGE, "--x takes step, minutes, seconds or wall-minutes, not '%s'", x);
        } else if (!strcmp(a, "--kind") && has) {
            kind = argv[++i];
        } else if (!strcmp(a, "--title") && has) {
            title = argv[++i];
        } else if (!strcmp(a, "--log-y")) {
            log_y = true;
        } else if (!strcmp(a, "--size") && has) {
            const char *v = argv[++i];
            char *end;
            width = strtol(v, &end, 10);
            if (*end != 'x' || width < 100 || width > 10000 || (height = strtol(end + 1, &end, 10)) < 100 ||
                height > 10000 || *end)
                return cli_error("plot", CLI_USAGE, "--size takes WIDTHxHEIGHT in pixels (100..10000), not '%s'", v);
        } else if (a[0] == '-' && a[1]) {
            return cli_error("plot", CLI_USAGE, "unexpected argument '%s' (see qkv plot --help)", a);
        } else {
            if (n == MAX_SOURCES) return cli_error("plot", CLI_USAGE, "at most %d sources", MAX_SOURCES);
            const char *eq = strchr(a, '=');
            /* LABEL=SOURCE, unless the '=' belongs to a path ("runs/a=b") */
            bool labelled = eq && eq != a && !memchr(a, '/', (size_t)(eq - a));
            src[n] = labelled ? eq + 1 : a;
            label[n] = a;
            n++;
            if (labelled) ((char *)eq)[0] = '\0'; /* argv is ours to edit */
        }
    }
    if (!out) return cli_error("plot", CLI_USAGE, "no output file (-o OUT.svg)");
    if (n == 0) return cli_error("plot", CLI_USAGE, "no source (a run directory or a JSON-lines log)");
    if (cli_prepare_out("plot", out, false)) return CLI_INPUT;
    series_buf buf[MAX_SOURCES] = {0};
    qkv_plot_series series[MAX_SOURCES];
    int rc = CLI_OK;
    for (int i = 0; i < n && rc == CLI_OK; i++) {
        rc = read_source(src[i], kind, x, y, &buf[i]);
        series[i] = (qkv_plot_series){.label = label[i], .x = buf[i].x, .y = buf[i].y, .n = buf[i].n};
    }
    if (rc == CLI_OK) {
        char auto_title[256];
        snprintf(auto_title, sizeof auto_title, "%s (%s records)", y, kind);
        const char *xlabel = !strcmp(x, "step")      ? "step"
                             : !strcmp(x, "seconds") ? "seconds of training"
                             : !strcmp(x, "minutes") ? "minutes of training"
                                                     : "minutes (wall clock)";
        qkv_plot_panel panel = {.title = title ? title : auto_title, .xlabel = xlabel, .ylabel = y,
                                .series = series, .n_series = n, .log_y = log_y};
        if (qkv_plot_write(out, &panel, 1, (int)width, (int)height) != QKV_OK)
            rc = cli_error("plot", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        else
            fprintf(stderr, "qkv plot: wrote %s\n", out);
    }
    for (int i = 0; i < n; i++) {
        free(buf[i].x);
        free(buf[i].y);
    }
    return rc;
}

const cli_command cmd_plot = {"plot", "curves of runs and logs in one SVG (loss against steps or minutes)", run,
                              help};
