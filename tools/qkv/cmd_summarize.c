/* qkv summarize: one-line summaries of articles with a run trained on data.task "summarize". */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_repeat.h"
#include "commands.h"
#include "qkv/summarize.h"
#include "run_view.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv summarize --run DIR [TEXT | --input FILE] [--search greedy|sample|beam|mbr] [--temperature T]\n"
            "                     [--top-k K] [--top-p P] [--samples N] [--utility rougeL|rouge1|rouge2|bleu]\n"
            "                     [--beam K] [--alpha A] [--max-len N] [--batch N] [--seed S] [--checkpoint FILE]\n"
            "                     [--view PAGE.html] " CLI_REPEAT_USAGE "\n\n"
            "Summarises TEXT, or every line of --input FILE (default: standard input), with a run trained with\n"
            "data.task \"summarize\", and prints one summary a line in input order. A line with a tab is read as\n"
            "article<TAB>summary (the summary is ignored), so a data file can be piped in. The article is cut to\n"
            "the room the model was trained with (a warning on stderr counts the articles cut).\n"
            "  --search greedy   the most likely token at each step (default)\n"
            "  --search sample   sampling at --temperature (default 1) from the --top-k / --top-p set\n"
            "  --search beam     beam search, --beam K hypotheses (default 4), length penalty ((5 + len) / 6)^A\n"
            "                    (--alpha, default 0.6); one article at a time\n"
            "  --search mbr      --samples N (default 8) samples per article; prints the one with the highest mean\n"
            "                    --utility (default rougeL) against the others (Minimum Bayes Risk)\n"
            "--max-len N caps the summary's tokens (default and most: the run's data.summary_max_len); --batch N\n"
            "articles are decoded at once (default 32); --seed S reproduces samples.\n"
            "Every search: " CLI_REPEAT_HELP
            "(--no-repeat-ngram 3 stops greedy summaries looping \"hardware hardware hardware\"; scope generated\n"
            "still lets a summary copy a phrase of its article, which scope all forbids.)\n"
            "--view PAGE.html (with TEXT) then writes the attention viewer page of article </s> <sep> summary </s>:\n"
            "one causal map per layer, every head; the summary's rows show which article tokens each summary\n"
            "token drew on (the summary re-encoded from its text).\n"
            "Exit codes: 0 ok, 1 usage, 2 bad input (an empty article, invalid UTF-8: file:line), 3 runtime.\n");
}

typedef struct {
    long cut;
    char *last; /* the last summary (for --view) */
} printer;

static qkv_status print_summary(int index, const char *summary, bool truncated, void *user) {
    (void)index;
    printer *p = user;
    p->cut += truncated;
    free(p->last);
    p->last = strdup(summary);
    printf("%s\n", summary);
    fflush(stdout);
    return QKV_OK;
}

/* The LM page of article </s> <sep> summary </s>. */
static int write_view(qkv_run *r, const char *dir, const char *article, const char *summary, const char *out) {
    int32_t *p = NULL, *s = NULL, *all = NULL, bos, eos, pad;
    size_t np = 0, ns = 0;
    int64_t max_len;
    qkv_run_target_ids(r, &bos, &eos, &pad, &max_len);
    qkv_status st = qkv_run_summary_prompt(r, article, &p, &np, NULL);
    if (st == QKV_OK) st = qkv_run_encode(r, summary ? summary : "", &s, &ns);
    if (st == QKV_OK && !(all = malloc(sizeof *all * (np + ns + 1)))) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    int rc = CLI_OK;
    if (st == QKV_OK) {
        memcpy(all, p, sizeof *all * np);
        if (ns) memcpy(all + np, s, sizeof *all * ns);
        all[np + ns] = eos;
        rc = cli_prepare_out("summarize", out, false);
        if (rc == CLI_OK) st = run_view_write_lm(r, dir, all, np + ns + 1, summary, out);
    }
    if (st != QKV_OK) rc = cli_error("summarize", cli_status_exit(qkv_last_status()), "--view: %s", qkv_last_error());
    else if (rc == CLI_OK) fprintf(stderr, "wrote %s (%zu article and %zu summary tokens)\n", out, np, ns + 1);
    free(p);
    free(s);
    free(all);
    return rc;
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *ckpt = NULL, *text = NULL, *input = NULL, *view = NULL, *search = "greedy", *utility = "rougeL";
    long top_k = 0, seed = 0, batch = 32, samples = 8, max_len = 0;
    double temperature = 1, top_p = 1, alpha = 0.6;
    long beam = 4;
    cli_repeat rep = cli_repeat_defaults();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int took = cli_repeat_arg("summarize", argc, argv, &i, &rep);
        if (took < 0) return CLI_USAGE;
        if (took) continue;
        if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "--input") && v) input = argv[++i];
        else if (!strcmp(a, "--view") && v) view = argv[++i];
        else if (!strcmp(a, "--search") && v) search = argv[++i];
        else if (!strcmp(a, "--utility") && v) utility = argv[++i];
        else if (!strcmp(a, "--batch") && v) {
            if (!cli_parse_int("summarize", a, argv[++i], 1, 4096, &batch)) return CLI_USAGE;
        } else if (!strcmp(a, "--samples") && v) {
            if (!cli_parse_int("summarize", a, argv[++i], 1, 1024, &samples)) return CLI_USAGE;
        } else if (!strcmp(a, "--max-len") && v) {
            if (!cli_parse_int("summarize", a, argv[++i], 1, 1 << 20, &max_len)) return CLI_USAGE;
        } else if (!strcmp(a, "--beam") && v) {
            if (!cli_parse_int("summarize", a, argv[++i], 1, 256, &beam)) return CLI_USAGE;
        } else if (!strcmp(a, "--alpha") && v) {
            if (!cli_parse_double("summarize", a, argv[++i], 0, 100, &alpha)) return CLI_USAGE;
        } else if (!strcmp(a, "--top-k") && v) {
            if (!cli_parse_int("summarize", a, argv[++i], 0, 1 << 24, &top_k)) return CLI_USAGE;
        } else if (!strcmp(a, "--seed") && v) {
            if (!cli_parse_int("summarize", a, argv[++i], 0, 1L << 40, &seed)) return CLI_USAGE;
        } else if (!strcmp(a, "--temperature") && v) {
            if (!cli_parse_double("summarize", a, argv[++i], 1e-3, 100, &temperature)) return CLI_USAGE;
        } else if (!strcmp(a, "--top-p") && v) {
            if (!cli_parse_double("summarize", a, argv[++i], 1e-6, 1, &top_p)) return CLI_USAGE;
        } else if ((a[0] != '-' || !a[1]) && !text) text = a;
        else return cli_error("summarize", CLI_USAGE, "unexpected argument '%s' (see qkv summarize --help)", a);
    }
    qkv_summarize_opts o = qkv_summarize_defaults();
    if (!strcmp(search, "greedy")) o.search = QKV_SUMM_GREEDY;
    else if (!strcmp(search, "sample")) o.search = QKV_SUMM_SAMPLE;
    else if (!strcmp(search, "mbr")) o.search = QKV_SUMM_MBR;
    else if (!strcmp(search, "beam")) o.search = QKV_SUMM_BEAM;
    else return cli_error("summarize", CLI_USAGE, "--search: '%s' is not greedy, sample, beam or mbr", search);
    if (!qkv_mbr_utility_parse(utility, &o.utility))
        return cli_error("summarize", CLI_USAGE, "--utility: '%s' is not rougeL, rouge1, rouge2 or bleu", utility);
    if (text && input) return cli_error("summarize", CLI_USAGE, "give a TEXT or --input FILE, not both");
    if (!dir) return cli_error("summarize", CLI_USAGE, "which run? (--run DIR)");
    if (view && !text) return cli_error("summarize", CLI_USAGE, "--view shows one article: give it as TEXT");
    o.sample.temperature = (float)temperature;
    o.sample.top_k = top_k;
    o.sample.top_p = (float)top_p;
    o.sample.no_repeat_ngram = rep.no_repeat_ngram;
    o.sample.repetition_penalty = rep.repetition_penalty;
    o.sample.repeat_scope = rep.scope;
    o.n_samples = (int)samples;
    o.beam = (int)beam;
    o.alpha = (float)alpha;
    o.max_len = (int)max_len;
    o.batch_size = (int)batch;
    o.seed = (uint64_t)seed;
    if (!text && !input) input = "-";
    cli_lines *lines = NULL;
    const char *name = input && strcmp(input, "-") ? input : "standard input";
    if (input && !(lines = cli_read_lines("summarize", input))) return CLI_INPUT;
    size_t n = lines ? lines->n : 1;
    const char **articles = calloc(n ? n : 1, sizeof *articles);
    int rc = articles ? CLI_OK : cli_error("summarize", CLI_RUNTIME, "out of memory");
    for (size_t l = 0; rc == CLI_OK && l < n; l++) {
        char *a = lines ? lines->line[l] : (char *)text;
        if (lines) a[strcspn(a, "\t")] = '\0'; /* article<TAB>summary: the article */
        articles[l] = a;
        if (!a[strspn(a, " \t\r\n")]) {
            if (lines) rc = cli_error("summarize", CLI_INPUT, "%s:%zu: empty article", name, l + 1);
            else rc = cli_error("summarize", CLI_INPUT, "the article is empty");
        }
    }
    qkv_run *r = rc == CLI_OK ? qkv_run_open(dir, ckpt) : NULL;
    if (rc == CLI_OK && !r) rc = cli_error("summarize", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    printer p = {0};
    if (rc == CLI_OK && qkv_run_summarize(r, (int)n, articles, &o, print_summary, &p) != QKV_OK)
        rc = cli_error("summarize", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if (rc == CLI_OK && view) rc = write_view(r, dir, text, p.last, view);
    if (rc == CLI_OK && p.cut)
        fprintf(stderr, "summarize: warning: %ld of %zu articles were longer than the model's room and were cut\n",
                p.cut, n);
    qkv_run_free(r);
    free(p.last);
    free(articles);
    cli_lines_free(lines);
    return rc;
}

const cli_command cmd_summarize = {"summarize", "one-line summaries of articles with a summarize run (greedy, "
                                   "sampling, MBR)", run, help};
