/* qkv bleu: corpus BLEU as sacrebleu computes it (13a tokenisation, exponential smoothing, corpus brevity penalty,
 * multiple references). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/metrics.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv bleu -r REF [-r REF2 ...] [-i HYP] [--lowercase] [--tokenize 13a|none]\n"
            "                [--smooth exp|none|floor|add-k] [--max-order N] [--json]\n\n"
            "Corpus BLEU of the hypotheses (one per line; HYP, or standard input) against one or more\n"
            "reference files with the same number of lines, computed as sacrebleu 2.x does by default.\n"
            "Prints the score line and the signature of the settings, e.g.\n"
            "  BLEU = 43.27 71.6/51.2/38.4/29.2 (BP = 0.961 ratio = 0.962 hyp_len = 8384 ref_len = 8716)\n"
            "  signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x\n"
            "--json prints one JSON object instead (score, precisions, bp, ratio, lengths, signature).\n");
}

static int run(int argc, char **argv) {
    const char *refs_path[16], *hyp_path = "-";
    int n_refs = 0;
    bool json = false;
    qkv_bleu_opts o = qkv_bleu_default_opts();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((!strcmp(a, "-r") || !strcmp(a, "--ref")) && v) {
            if (n_refs == 16) return cli_error("bleu", CLI_USAGE, "at most 16 reference files");
            refs_path[n_refs++] = argv[++i];
        } else if ((!strcmp(a, "-i") || !strcmp(a, "--input")) && v) {
            hyp_path = argv[++i];
        } else if (!strcmp(a, "--lowercase") || !strcmp(a, "-lc")) {
            o.lowercase = true;
        } else if (!strcmp(a, "--tokenize") && v) {
            v = argv[++i];
            if (!strcmp(v, "13a")) o.tokenizer = QKV_BLEU_TOK_13A;
            else if (!strcmp(v, "none")) o.tokenizer = QKV_BLEU_TOK_NONE;
            else return cli_error("bleu", CLI_USAGE, "--tokenize takes 13a or none, not '%s'", v);
        } else if (!strcmp(a, "--smooth") && v) {
            v = argv[++i];
            if (!strcmp(v, "exp")) o.smooth = QKV_BLEU_SMOOTH_EXP;
            else if (!strcmp(v, "none")) o.smooth = QKV_BLEU_SMOOTH_NONE;
            else if (!strcmp(v, "floor")) o.smooth = QKV_BLEU_SMOOTH_FLOOR;
            else if (!strcmp(v, "add-k")) o.smooth = QKV_BLEU_SMOOTH_ADD_K;
            else return cli_error("bleu", CLI_USAGE, "--smooth takes exp, none, floor or add-k, not '%s'", v);
        } else if (!strcmp(a, "--max-order") && v) {
            long n;
            if (!cli_parse_int("bleu", a, argv[++i], 1, QKV_BLEU_MAX_ORDER, &n)) return CLI_USAGE;
            o.max_order = (int)n;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else {
            return cli_error("bleu", CLI_USAGE, "unexpected argument '%s' (see qkv bleu --help)", a);
        }
    }
    if (n_refs == 0) return cli_error("bleu", CLI_USAGE, "no reference file (-r REF)");
    int rc = CLI_OK;
    cli_lines *hyp = cli_read_lines("bleu", hyp_path), *ref[16] = {0};
    const char **streams[16];
    if (!hyp) return CLI_INPUT;
    for (int r = 0; r < n_refs; r++) {
        if (!(ref[r] = cli_read_lines("bleu", refs_path[r]))) {
            rc = CLI_INPUT;
            goto done;
        }
        if (ref[r]->n != hyp->n) {
            rc = cli_error("bleu", CLI_INPUT, "%s has %zu lines but the hypotheses (%s) have %zu", refs_path[r],
                           ref[r]->n, strcmp(hyp_path, "-") ? hyp_path : "standard input", hyp->n);
            goto done;
        }
        streams[r] = (const char **)ref[r]->line;
    }
    if (hyp->n == 0) {
        rc = cli_error("bleu", CLI_INPUT, "nothing to score: the hypotheses (%s) and references have no lines",
                       strcmp(hyp_path, "-") ? hyp_path : "standard input");
        goto done;
    }
    qkv_bleu_result res;
    if (qkv_bleu_corpus((const char *const *)hyp->line, hyp->n, streams, n_refs, &o, &res) != QKV_OK) {
        rc = cli_error("bleu", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        goto done;
    }
    char line[256], sig[256];
    qkv_bleu_format(&res, line, sizeof line);
    qkv_bleu_signature(&res, sig, sizeof sig);
    if (json) {
        printf("{\"name\": \"BLEU\", \"score\": %.6f, \"precisions\": [", res.score);
        for (int k = 0; k < res.max_order; k++) printf("%s%.6f", k ? ", " : "", res.precisions[k]);
        printf("], \"bp\": %.6f, \"ratio\": %.6f, \"hyp_len\": %lld, \"ref_len\": %lld, \"signature\": \"%s\"}\n",
               res.bp, res.ratio, (long long)res.hyp_len, (long long)res.ref_len, sig);
    } else {
        printf("%s\nsignature: %s\n", line, sig);
    }
done:
    cli_lines_free(hyp);
    for (int r = 0; r < n_refs; r++) cli_lines_free(ref[r]);
    return rc;
}

const cli_command cmd_bleu = {"bleu", "corpus BLEU, sacrebleu-compatible", run, help};
