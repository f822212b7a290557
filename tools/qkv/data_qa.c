/* qkv data cloze-qa / check-qa: Children's Book Test style questions as SQuAD JSONL, and their check. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "data_builders.h"
#include "qkv/qa.h"

int cli_data_cloze_qa(int argc, char **argv) {
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
        } else if (!strcmp(a, "--blank") && v) {
            o.blank = argv[++i];
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
    char tmp[4200];
    FILE *out = cli_out_open("data", out_path, tmp, sizeof tmp);
    if (!out) return CLI_INPUT;
    int64_t n = 0;
    qkv_status st = qkv_cloze_qa(in, out, &o, &n);
    int rc = st ? cli_error("data", cli_status_exit(st), "%s", qkv_last_error()) : CLI_OK;
    if (rc == CLI_OK && n == 0) /* an empty dataset is never what was asked for */
        rc = cli_error("data", CLI_INPUT, "%s: no question could be built (it needs %d sentences of context and a "
                       "next sentence with a blankable word)", in, o.context_sentences);
    rc = cli_out_close("data", out, out_path, tmp, rc);
    if (rc) return rc;
    fprintf(stderr, "%lld questions\n", (long long)n);
    return CLI_OK;
}

int cli_data_check_qa(int argc, char **argv) {
    if (argc != 3) return cli_error("data", CLI_USAGE, "check-qa: one file");
    qkv_qa_example *e;
    size_t n;
    qkv_status st = qkv_qa_read(argv[2], &e, &n);
    if (st) return cli_error("data", cli_status_exit(st), "%s", qkv_last_error());
    printf("%zu examples\n", n);
    qkv_qa_free(e, n);
    return CLI_OK;
}
