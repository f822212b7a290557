/* qkv lesson parallel: why attention replaced recurrence. A recurrent layer computes position t from t - 1, so its
 * steps run one after another however many cores there are; a convolution or an attention layer computes every
 * position at once (GEMMs over all of them). One forward + backward per layer kind and length, timed as `qkv bench
 * layers` times it, with the accuracy of trained sentiment classifiers of each kind beside it. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lesson.h"
#include "qkv/plot.h"
#include "qkv/threads.h"
#include "qkv/train.h"

#define N_KINDS 5
#define MAX_LENGTHS 16

static const char *const kinds[N_KINDS] = {"rnn", "lstm", "gru", "cnn", "attn"};
static const char *const names[N_KINDS] = {"vanilla RNN", "LSTM", "GRU", "Conv1d (width 3)", "self-attention"};

static int kind_index(const char *k, size_t len) {
    for (int i = 0; i < N_KINDS; i++)
        if (strlen(kinds[i]) == len && !strncmp(kinds[i], k, len)) return i;
    return -1;
}

/* Test accuracy of a classifier run (dev when it has no test file); NAN with a message when it cannot be read. */
static double run_accuracy(const char *dir, const char **split) {
    qkv_run *r = qkv_run_open(dir, NULL);
    if (!r) {
        cli_error("lesson", CLI_INPUT, "%s", qkv_last_error());
        return NAN;
    }
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(qkv_run_config(r), "data");
    const char *test = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(data, "test"));
    *split = test && test[0] ? "test" : "dev";
    cJSON *m = qkv_run_eval(r, *split, NULL);
    double acc = m ? cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "accuracy")) : NAN;
    if (!m) cli_error("lesson", cli_status_exit(qkv_last_status()), "%s: %s", dir, qkv_last_error());
    cJSON_Delete(m);
    qkv_run_free(r);
    return acc;
}

int lesson_parallel(int argc, char **argv) {
    long lengths[MAX_LENGTHS] = {64, 128, 256, 512, 1024, 2048, 4096}, width = 256, threads = 0;
    int n_len = 7;
    double seconds = 1.0, acc[N_KINDS];
    const char *out = "lesson_parallel.svg", *acc_split[N_KINDS] = {0};
    for (int k = 0; k < N_KINDS; k++) acc[k] = NAN;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--run") && v) {
            const char *s = argv[++i], *eq = strchr(s, '=');
            int k = eq ? kind_index(s, (size_t)(eq - s)) : -1;
            if (k < 0) return cli_error("lesson", CLI_USAGE, "--run takes KIND=DIR with KIND one of " LAYER_KINDS ", not '%s'", s);
            if (isnan(acc[k] = run_accuracy(eq + 1, &acc_split[k]))) return CLI_INPUT;
        } else if (!strcmp(a, "--lengths") && v) {
            n_len = 0;
            for (char *p = argv[++i], *end; *p; p = *end ? end + 1 : end) {
                long T = strtol(p, &end, 10);
                if (end == p || T < 1 || T > (1 << 20) || n_len == MAX_LENGTHS || (*end && *end != ','))
                    return cli_error("lesson", CLI_USAGE, "--lengths takes up to %d comma-separated lengths, e.g. 64,256,1024",
                                     MAX_LENGTHS);
                lengths[n_len++] = T;
            }
        } else if (!strcmp(a, "--width") && v) {
            if (!cli_parse_int("lesson", a, argv[++i], 1, 1 << 14, &width)) return CLI_USAGE;
        } else if (!strcmp(a, "--threads") && v) {
            if (!cli_parse_int("lesson", a, argv[++i], 1, 1024, &threads)) return CLI_USAGE;
        } else if (!strcmp(a, "--seconds") && v) {
            if (!cli_parse_double("lesson", a, argv[++i], 0, 3600, &seconds)) return CLI_USAGE;
        } else if (!strcmp(a, "-o") && v) out = argv[++i];
        else return cli_error("lesson", CLI_USAGE, "unexpected argument '%s' (see qkv lesson --help)", a);
    }
    if (!n_len) return cli_error("lesson", CLI_USAGE, "--lengths is empty");
    int rc = cli_prepare_out("lesson", out, false);
    if (rc) return rc;
    if (threads) qkv_threads_set((int)threads);
    bench_ctx b = {.name = "layers", .threads = qkv_threads_get(), .warmup = 1, .min_steps = 2, .max_steps = 50,
                   .max_seconds = seconds};
    double ms[N_KINDS][MAX_LENGTHS], xs[MAX_LENGTHS];
    for (int j = 0; j < n_len; j++) xs[j] = log2((double)lengths[j]);
    printf("| layer (width %ld, batch 1, %d thread%s) | test accuracy |", width, b.threads, b.threads > 1 ? "s" : "");
    for (int j = 0; j < n_len; j++) printf(" T=%ld |", lengths[j]);
    printf("\n|---|---|");
    for (int j = 0; j < n_len; j++) printf("---|");
    printf("\n");
    for (int k = 0; k < N_KINDS; k++) {
        printf("| %s | ", names[k]);
        if (isnan(acc[k])) printf("|");
        else printf("%.1f%%%s |", 100 * acc[k], strcmp(acc_split[k], "test") ? " (dev)" : "");
        for (int j = 0; j < n_len; j++) {
            ms[k][j] = bench_layer_ms(&b, kinds[k], width, 1, lengths[j]);
            if (ms[k][j] < 0) return CLI_RUNTIME;
            printf(" %.2f |", ms[k][j]);
            fflush(stdout);
        }
        printf("\n");
    }
    printf("(ms per forward + backward, median)\n");
    qkv_plot_series series[N_KINDS];
    char labels[N_KINDS][96];
    for (int k = 0; k < N_KINDS; k++) {
        if (isnan(acc[k])) snprintf(labels[k], sizeof labels[k], "%s", names[k]);
        else snprintf(labels[k], sizeof labels[k], "%s (sentiment %s %.1f%%)", names[k], acc_split[k], 100 * acc[k]);
        series[k] = (qkv_plot_series){.label = labels[k], .x = xs, .y = ms[k], .n = (size_t)n_len};
    }
    char title[128];
    snprintf(title, sizeof title, "one forward + backward, width %ld, %d thread%s", width, b.threads,
             b.threads > 1 ? "s" : "");
    qkv_plot_panel p = {.title = title, .xlabel = "log2(sequence length)", .ylabel = "ms", .series = series,
                        .n_series = N_KINDS, .log_y = true};
    if (qkv_plot_write(out, &p, 1, 720, 420))
        return cli_error("lesson", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    fprintf(stderr, "wrote %s\n", out);
    return CLI_OK;
}
