/* qkv lesson: the seeds' arguments measured on this machine and on trained runs (docs/lessons.md).
 *   gradients: how far back the loss's gradient reaches in long inputs, per trained classifier (vanishing gradient);
 *   parallel:  the time of one forward + backward against sequence length for recurrent, convolutional and
 *              attention layers of equal width (lesson_parallel.c). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "lesson.h"
#include "qkv/plot.h"
#include "qkv/train.h"

#define MAX_RUNS 16

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv lesson gradients --run [LABEL=]DIR... [--length N] [--inputs K] [--data FILE] -o OUT.svg\n"
            "       qkv lesson parallel [--run KIND=DIR...] [--lengths 64,128,...] [--width D] [--seconds S]\n"
            "                           [-o OUT.svg] [--threads N]\n\n"
            "gradients: the vanishing gradient. Long inputs are made by joining consecutive texts of a classify file\n"
            "  (default: each run's data.dev) until they reach N tokens (default 200; the runs' models must take\n"
            "  that many positions: a Transformer stops at its max_len). For each trained classifier run and each\n"
            "  of K inputs (default 8) it takes the norm of d(loss)/d(embedding) at every position (the loss of the\n"
            "  model's own prediction, eval mode) and draws the mean against the distance from the end of the input\n"
            "  (log scale), one line per run. Prints a table of the norms at a few distances relative to the last\n"
            "  position's.\n"
            "parallel: %s\n",
            LESSON_PARALLEL_SUMMARY);
}

typedef struct run_arg {
    const char *label, *dir;
} run_arg;

/* "LABEL=DIR" or "DIR" (label: the directory's last component). */
static run_arg split_run(const char *a) {
    static char labels[MAX_RUNS][64];
    static int used;
    char *label = labels[used++ % MAX_RUNS];
    const char *eq = strchr(a, '=');
    if (eq) {
        snprintf(label, 64, "%.*s", (int)(eq - a), a);
        return (run_arg){.label = label, .dir = eq + 1};
    }
    size_t len = strlen(a);
    while (len > 1 && a[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && a[start - 1] != '/') start--;
    snprintf(label, 64, "%.*s", (int)(len - start), a + start);
    return (run_arg){.label = label, .dir = a};
}

/* The texts of a classify file (second column of label<TAB>text lines). */
static char **read_texts(const char *path, size_t *n) {
    cli_lines *l = cli_read_lines("lesson", path);
    if (!l) return NULL;
    char **t = calloc(l->n + 1, sizeof *t);
    *n = 0;
    for (size_t i = 0; t && i < l->n; i++) {
        const char *tab = strchr(l->line[i], '\t');
        if (tab && tab[1]) t[(*n)++] = strdup(tab + 1);
    }
    cli_lines_free(l);
    return t;
}

static size_t count_words(const char *s) {
    size_t n = 0;
    for (bool in = false; *s; s++) {
        bool sp = *s == ' ' || *s == '\t';
        if (!sp && !in) n++;
        in = !sp;
    }
    return n;
}

/* Input k: texts from k * n / K on, joined with spaces until the words reach `length` (+10%, since tokenizers
 * split differently than spaces). NULL when the file runs out. */
static char *long_input(char **texts, size_t n_texts, int k, int K, long length) {
    size_t cap = 256, used = 0, words = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = '\0';
    for (size_t i = (size_t)k * n_texts / (size_t)K; i < n_texts && words < (size_t)(length * 11 / 10 + 1); i++) {
        size_t len = strlen(texts[i]);
        if (used + len + 2 > cap) {
            cap = 2 * (used + len + 2);
            char *p = realloc(out, cap);
            if (!p) {
                free(out);
                return NULL;
            }
            out = p;
        }
        if (used) out[used++] = ' ';
        memcpy(out + used, texts[i], len + 1);
        used += len;
        words += count_words(texts[i]);
    }
    if (words < (size_t)length) {
        free(out);
        return NULL;
    }
    return out;
}

static int gradients(int argc, char **argv) {
    run_arg runs[MAX_RUNS];
    int n_runs = 0;
    long length = 200, inputs = 8;
    const char *out = NULL, *data = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--run") && v) {
            if (n_runs == MAX_RUNS) return cli_error("lesson", CLI_USAGE, "at most %d runs", MAX_RUNS);
            runs[n_runs++] = split_run(argv[++i]);
        } else if (!strcmp(a, "--length") && v) {
            if (!cli_parse_int("lesson", a, argv[++i], 2, 100000, &length)) return CLI_USAGE;
        } else if (!strcmp(a, "--inputs") && v) {
            if (!cli_parse_int("lesson", a, argv[++i], 1, 10000, &inputs)) return CLI_USAGE;
        } else if (!strcmp(a, "--data") && v) data = argv[++i];
        else if (!strcmp(a, "-o") && v) out = argv[++i];
        else return cli_error("lesson", CLI_USAGE, "unexpected argument '%s' (see qkv lesson --help)", a);
    }
    if (!n_runs) return cli_error("lesson", CLI_USAGE, "gradients needs at least one --run DIR");
    if (!out) return cli_error("lesson", CLI_USAGE, "gradients needs -o OUT.svg");
    int rc = cli_prepare_out("lesson", out, false);
    double *sum[MAX_RUNS] = {0}, *xs = calloc((size_t)length, sizeof *xs);
    long counts[MAX_RUNS] = {0};
    for (long t = 0; xs && t < length; t++) xs[t] = (double)t;
    if (!xs) rc = cli_error("lesson", CLI_RUNTIME, "out of memory");
    for (int k = 0; !rc && k < n_runs; k++) {
        qkv_run *r = qkv_run_open(runs[k].dir, NULL);
        if (!r) {
            rc = cli_error("lesson", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
            break;
        }
        const char *file = data;
        const cJSON *dcfg = cJSON_GetObjectItemCaseSensitive(qkv_run_config(r), "data");
        if (!file) file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dcfg, "dev"));
        size_t n_texts = 0;
        char **texts = file && file[0] ? read_texts(file, &n_texts) : NULL;
        if (!texts) rc = file && file[0] ? CLI_INPUT : cli_error("lesson", CLI_USAGE, "%s has no data.dev: give --data FILE", runs[k].dir);
        sum[k] = rc ? NULL : calloc((size_t)length, sizeof **sum);
        if (!rc && !sum[k]) rc = cli_error("lesson", CLI_RUNTIME, "out of memory");
        for (int i = 0; !rc && i < inputs; i++) {
            char *text = long_input(texts, n_texts, i, (int)inputs, length);
            if (!text) continue;
            double *norms = NULL;
            int64_t n = 0;
            if (qkv_run_input_grad_norms(r, text, length, &norms, &n))
                rc = cli_error("lesson", cli_status_exit(qkv_last_status()), "%s: %s", runs[k].dir, qkv_last_error());
            else if (n < length)
                rc = cli_error("lesson", CLI_INPUT, "%s: the model reads %lld positions, fewer than --length %ld",
                               runs[k].dir, (long long)n, length);
            for (int64_t t = 0; !rc && t < n; t++) sum[k][n - 1 - t] += norms[t]; /* by distance from the end */
            counts[k] += !rc;
            free(norms);
            free(text);
        }
        if (!rc && !counts[k])
            rc = cli_error("lesson", CLI_INPUT, "%s: not one input of %ld words could be made from %s", runs[k].dir,
                           length, file);
        for (long t = 0; !rc && t < length; t++) sum[k][t] /= (double)counts[k];
        for (size_t i = 0; texts && i < n_texts; i++) free(texts[i]);
        free(texts);
        qkv_run_free(r);
    }
    if (!rc) {
        qkv_plot_series series[MAX_RUNS];
        char labels[MAX_RUNS][96];
        printf("%-20s %8s", "run", "inputs");
        const long at[] = {1, 10, 50, 100, length - 1};
        for (int j = 0; j < 5; j++)
            if (at[j] < length && (j == 4 || at[j] < length - 1)) {
                char h[32];
                snprintf(h, sizeof h, "d=%ld", at[j]);
                printf(" %15s", h);
            }
        printf("   (norm at distance d from the end / norm at the end)\n");
        for (int k = 0; k < n_runs; k++) {
            snprintf(labels[k], sizeof labels[k], "%s", runs[k].label);
            series[k] = (qkv_plot_series){.label = labels[k], .x = xs, .y = sum[k], .n = (size_t)length};
            printf("%-20s %8ld", runs[k].label, counts[k]);
            for (int j = 0; j < 5; j++)
                if (at[j] < length && (j == 4 || at[j] < length - 1))
                    printf(" %15.3g", sum[k][0] > 0 ? sum[k][at[j]] / sum[k][0] : NAN);
            printf("\n");
        }
        char title[128];
        snprintf(title, sizeof title, "gradient reaching each input word (%ld-token inputs)", length);
        qkv_plot_panel p = {.title = title, .xlabel = "distance from the end of the input (tokens)",
                            .ylabel = "mean |d loss / d embedding|", .series = series, .n_series = n_runs,
                            .log_y = true};
        if (qkv_plot_write(out, &p, 1, 720, 420))
            rc = cli_error("lesson", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        else
            fprintf(stderr, "wrote %s\n", out);
    }
    for (int k = 0; k < n_runs; k++) free(sum[k]);
    free(xs);
    return rc;
}

static int run(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : NULL;
    if (what && !strcmp(what, "gradients")) return gradients(argc, argv);
    if (what && !strcmp(what, "parallel")) return lesson_parallel(argc, argv);
    return cli_error("lesson", CLI_USAGE, "which lesson? gradients or parallel (see qkv lesson --help)");
}

const cli_command cmd_lesson = {"lesson", "the seeds' lessons measured: vanishing gradients, RNN vs CNN vs attention",
                                run, help};
