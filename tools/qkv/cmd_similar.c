/* qkv similar: a trained pairs run (e.g. the siamese model type) on texts: the cosine of two texts and whether they
 * are duplicates, or the nearest lines of a file to a query (the file embedded once). Word vectors of a GloVe file
 * are `qkv embed`'s. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/train.h"
#include "qkv/viz.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv similar --run DIR [--checkpoint FILE] [--threshold T] [--json] TEXT1 TEXT2\n"
            "       qkv similar --run DIR --index FILE [-k N] [--checkpoint FILE] [--json] [QUERY ...]\n"
            "       qkv similar --run DIR --view PAGE.html A1 B1 [A2 B2 ...]\n\n"
            "Texts through a trained pairs run (model type siamese): each text becomes a unit vector, and the\n"
            "cosine of two vectors says how alike the texts are. (qkv embed similar is about words of a GloVe\n"
            "file, not about a trained run.)\n\n"
            "  TEXT1 TEXT2        prints the cosine and the verdict: duplicate when the cosine is at least the\n"
            "                     run's threshold (chosen on its dev file, the most accurate cut; kept in\n"
            "                     DIR/threshold.json)\n"
            "  --index FILE       prints the k lines of FILE nearest each QUERY (no QUERY: one a line on standard\n"
            "                     input); FILE is embedded once. Blank lines are skipped; line numbers count them\n"
            "  -k N               lines per query (default 5)\n"
            "  --view PAGE.html   several pairs: prints each pair's verdict and writes a page with the cosine\n"
            "                     of every A_i with every B_j as a heatmap (rows A, columns B; the diagonal holds\n"
            "                     the pairs; negative cosines show as 0) and the run's training curves\n"
            "  --threshold T      decide with this cosine instead of the run's\n"
            "  --checkpoint FILE  weights (default DIR/best.safetensors, else the newest checkpoint)\n"
            "  --json             one JSON object per answer\n\n"
            "Output: \"cosine<TAB>duplicate|different\" (and the threshold on stderr), or per query\n"
            "\"cosine<TAB>line<TAB>text\" lines, best first, after a \"# query\" line.\n");
}

static bool blank(const char *s) {
    while (*s && isspace((unsigned char)*s)) s++;
    return !*s;
}

static double dot(const float *a, const float *b, int64_t d) {
    double s = 0;
    for (int64_t i = 0; i < d; i++) s += (double)a[i] * b[i];
    return s;
}

static int pair(qkv_run *r, const char *a, const char *b, double threshold, bool json) {
    const char *texts[2] = {a, b};
    float *v = NULL;
    int64_t d = 0;
    if (qkv_run_embed(r, texts, 2, &v, &d) != QKV_OK)
        return cli_error("similar", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if (threshold != threshold && qkv_run_threshold(r, &threshold) != QKV_OK) {
        free(v);
        return cli_error("similar", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    }
    double c = dot(v, v + d, d);
    free(v);
    bool dup = c >= threshold;
    if (json)
        printf("{\"cosine\":%.6f,\"threshold\":%.6f,\"duplicate\":%s}\n", c, threshold, dup ? "true" : "false");
    else {
        printf("%.4f\t%s\n", c, dup ? "duplicate" : "different");
        fprintf(stderr, "threshold %.4f\n", threshold);
    }
    return CLI_OK;
}

/* A text as a heatmap label: its first 40 bytes, cut at a character boundary, "..." when longer. */
static char *label_of(const char *text) {
    size_t n = strlen(text), keep = n <= 40 ? n : 40;
    while (keep < n && keep > 0 && ((unsigned char)text[keep] & 0xC0) == 0x80) keep--;
    char *s = malloc(keep + 4);
    if (s) snprintf(s, keep + 4, "%.*s%s", (int)keep, text, keep < n ? "..." : "");
    return s;
}

/* Pairs (A_i, B_i) from texts[2i], texts[2i + 1]: each pair's verdict on stdout, and a page with the n x n cosine
 * matrix of every A_i against every B_j. */
static int view(qkv_run *r, const char *dir, char **texts, int n_texts, double threshold, const char *page_path) {
    int n = n_texts / 2;
    float *v = NULL, *cos = malloc(sizeof *cos * (size_t)(n * n));
    char **rows = calloc((size_t)n, sizeof *rows), **cols = calloc((size_t)n, sizeof *cols);
    int64_t d = 0;
    int rc = cos && rows && cols ? CLI_OK : cli_error("similar", CLI_RUNTIME, "out of memory");
    if (rc == CLI_OK && qkv_run_embed(r, (const char *const *)texts, (size_t)n_texts, &v, &d) != QKV_OK)
        rc = cli_error("similar", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if (rc == CLI_OK && threshold != threshold && qkv_run_threshold(r, &threshold) != QKV_OK)
        rc = cli_error("similar", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    for (int i = 0; rc == CLI_OK && i < n; i++) {
        const float *a = v + (size_t)(2 * i) * (size_t)d;
        for (int j = 0; j < n; j++) cos[i * n + j] = (float)dot(a, v + (size_t)(2 * j + 1) * (size_t)d, d);
        printf("%.4f\t%s\n", cos[i * n + i], cos[i * n + i] >= threshold ? "duplicate" : "different");
        rows[i] = label_of(texts[2 * i]);
        cols[i] = label_of(texts[2 * i + 1]);
        if (!rows[i] || !cols[i]) rc = cli_error("similar", CLI_RUNTIME, "out of memory");
    }
    if (rc == CLI_OK) {
        qkv_viz_map map = {.name = "cosine", .kind = "cross", .n_heads = 1, .n_rows = n, .n_cols = n,
                           .weights = cos, .row_labels = (const char *const *)rows,
                           .col_labels = (const char *const *)cols};
        char title[96];
        snprintf(title, sizeof title, "cosine of %d first texts (rows) with %d second texts (columns)", n, n);
        qkv_viz_example ex = {.title = title, .highlight_row = -1, .probability = -1, .n_maps = 1, .maps = &map};
        qkv_run_curves c = {0};
        qkv_viz_curve curves[3];
        int n_curves = 0;
        if (qkv_run_read_curves(dir, &c) == QKV_OK) {
            if (c.n_train) curves[n_curves++] = (qkv_viz_curve){"loss", "train", c.n_train, c.train_step, c.train_loss};
            if (c.n_dev) curves[n_curves++] = (qkv_viz_curve){"loss", "dev", c.n_dev, c.dev_step, c.dev_loss};
        }
        qkv_error_clear(); /* a run without a log still gets its page */
        char subtitle[1024];
        snprintf(subtitle, sizeof subtitle, "model %s, run %s, step %ld, duplicate at cosine >= %.4f",
                 qkv_run_model_type(r)->name, dir, qkv_run_step(r), threshold);
        qkv_viz_page page = {.title = "qkv: similarity of pairs", .subtitle = subtitle, .n_examples = 1,
                             .examples = &ex, .n_curves = n_curves, .curves = curves};
        if (qkv_viz_write_html(page_path, &page) != QKV_OK)
            rc = cli_error("similar", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        else
            fprintf(stderr, "wrote %s\n", page_path);
        qkv_run_curves_free(&c);
    }
    for (int i = 0; i < n; i++) {
        if (rows) free(rows[i]);
        if (cols) free(cols[i]);
    }
    free(rows);
    free(cols);
    free(cos);
    free(v);
    return rc;
}

typedef struct {
    double cos;
    size_t row;
} hit;

static int by_cos_desc(const void *a, const void *b) {
    const hit *x = a, *y = b;
    if (x->cos != y->cos) return x->cos < y->cos ? 1 : -1;
    return (x->row > y->row) - (x->row < y->row);
}

static void print_query(const char *q, const hit *h, long k, const cli_lines *lines, const size_t *line_no,
                        bool json) {
    if (json) {
        cJSON *o = cJSON_CreateObject(), *arr = cJSON_CreateArray();
        cJSON_AddStringToObject(o, "query", q);
        for (long i = 0; i < k; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "line", (double)line_no[h[i].row]);
            cJSON_AddNumberToObject(e, "cosine", h[i].cos);
            cJSON_AddStringToObject(e, "text", lines->line[line_no[h[i].row] - 1]);
            cJSON_AddItemToArray(arr, e);
        }
        cJSON_AddItemToObject(o, "nearest", arr);
        cli_print_json(o);
        cJSON_Delete(o);
        return;
    }
    printf("# %s\n", q);
    for (long i = 0; i < k; i++)
        printf("%.4f\t%zu\t%s\n", h[i].cos, line_no[h[i].row], lines->line[line_no[h[i].row] - 1]);
}

static int search(qkv_run *r, const char *index, long k, char **queries, int n_queries, bool json) {
    cli_lines *lines = cli_read_lines("similar", index);
    if (!lines) return CLI_INPUT;
    size_t n = 0, *line_no = malloc(sizeof *line_no * (lines->n ? lines->n : 1));
    const char **texts = malloc(sizeof *texts * (lines->n ? lines->n : 1));
    int rc = line_no && texts ? CLI_OK : cli_error("similar", CLI_RUNTIME, "out of memory");
    for (size_t i = 0; rc == CLI_OK && i < lines->n; i++)
        if (!blank(lines->line[i])) {
            line_no[n] = i + 1;
            texts[n++] = lines->line[i];
        }
    if (rc == CLI_OK && n == 0) rc = cli_error("similar", CLI_INPUT, "%s: no non-blank lines to search", index);
    float *v = NULL, *qv = NULL;
    int64_t d = 0, qd = 0;
    if (rc == CLI_OK && qkv_run_embed(r, texts, n, &v, &d) != QKV_OK)
        rc = cli_error("similar", cli_status_exit(qkv_last_status()), "%s: %s", index, qkv_last_error());
    hit *h = rc == CLI_OK ? malloc(sizeof *h * n) : NULL;
    if (rc == CLI_OK && !h) rc = cli_error("similar", CLI_RUNTIME, "out of memory");
    if (k > (long)n) k = (long)n;
    cli_lines *in = NULL;
    if (rc == CLI_OK && n_queries == 0) { /* queries from standard input */
        if (!(in = cli_read_lines("similar", "-"))) rc = CLI_INPUT;
    }
    size_t total = in ? in->n : (size_t)n_queries;
    for (size_t q = 0; rc == CLI_OK && q < total; q++) {
        const char *query = in ? in->line[q] : queries[q];
        if (in && blank(query)) continue;
        if (qkv_run_embed(r, &query, 1, &qv, &qd) != QKV_OK) {
            rc = cli_error("similar", cli_status_exit(qkv_last_status()), "query %zu: %s", q + 1, qkv_last_error());
            break;
        }
        for (size_t i = 0; i < n; i++) h[i] = (hit){dot(qv, v + i * (size_t)d, d), i};
        qsort(h, n, sizeof *h, by_cos_desc);
        print_query(query, h, k, lines, line_no, json);
        free(qv);
        qv = NULL;
    }
    cli_lines_free(in);
    free(h);
    free(v);
    free(texts);
    free(line_no);
    cli_lines_free(lines);
    return rc;
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *ckpt = NULL, *index = NULL, *page = NULL;
    char *texts[256];
    int n_texts = 0;
    long k = 5;
    double threshold = 0; /* with have_threshold; otherwise the run's */
    bool json = false, have_threshold = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "--index") && v) index = argv[++i];
        else if (!strcmp(a, "--view") && v) page = argv[++i];
        else if (!strcmp(a, "-k") && v) {
            if (!cli_parse_int("similar", "-k", argv[++i], 1, 1000000, &k)) return CLI_USAGE;
        } else if (!strcmp(a, "--threshold") && v) {
            if (!cli_parse_double("similar", "--threshold", argv[++i], -1, 1, &threshold)) return CLI_USAGE;
            have_threshold = true;
        } else if (!strcmp(a, "--json")) json = true;
        else if (a[0] == '-' && a[1] == '-')
            return cli_error("similar", CLI_USAGE, "unexpected option '%s' (see qkv similar --help)", a);
        else if (n_texts < 256) texts[n_texts++] = argv[i];
        else return cli_error("similar", CLI_USAGE, "at most 256 texts");
    }
    if (!dir) return cli_error("similar", CLI_USAGE, "needs --run DIR");
    if (page && (index || n_texts < 2 || n_texts % 2))
        return cli_error("similar", CLI_USAGE, "--view takes pairs of texts, A1 B1 A2 B2 ... (got %d text(s)%s)",
                         n_texts, index ? " and --index" : "");
    if (!page && !index && n_texts != 2)
        return cli_error("similar", CLI_USAGE, "give two texts to compare, or --index FILE and queries (got %d "
                         "text(s))", n_texts);
    qkv_run *r = qkv_run_open(dir, ckpt);
    if (!r) return cli_error("similar", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    double t = have_threshold ? threshold : strtod("nan", NULL);
    int rc = page ? view(r, dir, texts, n_texts, t, page)
             : index ? search(r, index, k, texts, n_texts, json)
                     : pair(r, texts[0], texts[1], t, json);
    qkv_run_free(r);
    return rc;
}

const cli_command cmd_similar = {"similar", "a trained pairs run: cosine and verdict of two texts, or nearest "
                                            "lines of a file", run, help};
