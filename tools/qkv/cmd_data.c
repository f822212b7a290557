/* qkv data: datasets made from the shared text. cloze-qa: Children's Book Test style questions as SQuAD JSONL. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/qa.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv data cloze-qa [-n SENTENCES] [--seed S] [--kinds named,nouns] [--max N] [-o OUT.jsonl] FILE\n"
            "       qkv data check-qa FILE.jsonl\n\n"
            "cloze-qa  turns plain text (one paragraph a line) into SQuAD-format JSONL in the style of the Children's\n"
            "          Book Test: SENTENCES consecutive sentences (default 20) are the context, the next sentence is\n"
            "          the question with one word that also occurs in the context blanked out as XXXXX, and the\n"
            "          answer is that word at its first occurrence in the context (character offset). Words are named\n"
            "          words and common nouns (--kinds), picked with the seed; docs/qa.md gives the exact rules.\n"
            "          Writes OUT (default standard output) and prints the count to standard error.\n"
            "check-qa  reads a SQuAD JSONL file and checks every answer against its context (exit 2 naming the\n"
            "          line of the first that does not match); prints the number of examples.\n");
}

static int cloze(int argc, char **argv) {
    qkv_cloze_opts o = qkv_cloze_defaults();
    const char *in = NULL, *out_path = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if ((!strcmp(a, "-n") || !strcmp(a, "--sentences")) && v) {
            if (!cli_parse_int("data", a, argv[++i], 1, 1000, &x)) return CLI_USAGE;
            o.context_sentences = (int)x;
        } else if (!strcmp(a, "--seed") && v) {
            if (!cli_parse_int("data", a, argv[++i], 0, 0x7fffffffL, &x)) return CLI_USAGE;
            o.seed = (uint64_t)x;
        } else if (!strcmp(a, "--max") && v) {
            if (!cli_parse_int("data", a, argv[++i], 1, 0x7fffffffL, &x)) return CLI_USAGE;
            o.max_examples = x;
        } else if (!strcmp(a, "--kinds") && v) {
            const char *k = argv[++i];
            o.named = strstr(k, "named") != NULL;
            o.nouns = strstr(k, "nouns") != NULL;
            if (!o.named && !o.nouns)
                return cli_error("data", CLI_USAGE, "--kinds: expected named, nouns or named,nouns, got '%s'", k);
        } else if (!strcmp(a, "-o") && v) {
            out_path = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return cli_error("data", CLI_USAGE, "unexpected argument '%s' (see qkv data --help)", a);
        } else if (!in) {
            in = a;
        } else {
            return cli_error("data", CLI_USAGE, "one input file only ('%s' and '%s')", in, a);
        }
    }
    if (!in) return cli_error("data", CLI_USAGE, "cloze-qa: no input file");
    if (out_path) {
        int rc = cli_prepare_out("data", out_path, false);
        if (rc) return rc;
    }
    FILE *out = out_path ? fopen(out_path, "w") : stdout;
    if (!out) return cli_error("data", CLI_INPUT, "%s: cannot write", out_path);
    int64_t n = 0;
    qkv_status st = qkv_cloze_qa(in, out, &o, &n);
    if (out_path && fclose(out) != 0 && !st) return cli_error("data", CLI_RUNTIME, "%s: write error", out_path);
    if (st) return cli_error("data", cli_status_exit(st), "%s", qkv_last_error());
    fprintf(stderr, "%lld questions\n", (long long)n);
    return CLI_OK;
}

static int check(int argc, char **argv) {
    if (argc != 3) return cli_error("data", CLI_USAGE, "check-qa: one file");
    qkv_qa_example *e;
    size_t n;
    qkv_status st = qkv_qa_read(argv[2], &e, &n);
    if (st) return cli_error("data", cli_status_exit(st), "%s", qkv_last_error());
    printf("%zu examples\n", n);
    qkv_qa_free(e, n);
    return CLI_OK;
}

static int run(int argc, char **argv) {
    if (argc < 2) return cli_error("data", CLI_USAGE, "expected a subcommand: cloze-qa or check-qa");
    if (!strcmp(argv[1], "cloze-qa")) return cloze(argc, argv);
    if (!strcmp(argv[1], "check-qa")) return check(argc, argv);
    return cli_error("data", CLI_USAGE, "unknown subcommand '%s' (cloze-qa, check-qa)", argv[1]);
}

const cli_command cmd_data = {"data", "make datasets: cloze questions from text (SQuAD JSONL)", run, help};
