/* qkv rouge: ROUGE-1/2/L/Lsum as Google's rouge-score computes them, averaged over the lines. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/metrics.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv rouge -r REF [-i HYP] [--stem] [--json]\n\n"
            "ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum (precision / recall / F1, x100) of the predictions (one per\n"
            "line; HYP, or standard input) against the reference file, line by line, averaged over lines as\n"
            "rouge-score's simple aggregation does. --stem applies the Porter stemmer (NLTK's) to tokens longer\n"
            "than 3 characters. --json prints one JSON object.\n");
}

static int run(int argc, char **argv) {
    const char *ref_path = NULL, *hyp_path = "-";
    bool json = false;
    qkv_rouge_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((!strcmp(a, "-r") || !strcmp(a, "--ref")) && v) ref_path = argv[++i];
        else if ((!strcmp(a, "-i") || !strcmp(a, "--input")) && v) hyp_path = argv[++i];
        else if (!strcmp(a, "--stem")) o.use_stemmer = true;
        else if (!strcmp(a, "--json")) json = true;
        else return cli_error("rouge", CLI_USAGE, "unexpected argument '%s' (see qkv rouge --help)", a);
    }
    if (!ref_path) return cli_error("rouge", CLI_USAGE, "no reference file (-r REF)");
    int rc = CLI_OK;
    cli_lines *hyp = cli_read_lines("rouge", hyp_path), *ref = hyp ? cli_read_lines("rouge", ref_path) : NULL;
    if (!hyp || !ref) {
        rc = CLI_INPUT;
        goto done;
    }
    if (ref->n != hyp->n) {
        rc = cli_error("rouge", CLI_INPUT, "%s has %zu lines but the predictions have %zu", ref_path, ref->n, hyp->n);
        goto done;
    }
    if (hyp->n == 0) {
        rc = cli_error("rouge", CLI_INPUT, "nothing to score: %s and the predictions (%s) have no lines", ref_path,
                       strcmp(hyp_path, "-") ? hyp_path : "standard input");
        goto done;
    }
    qkv_rouge_result r;
    if (qkv_rouge_mean((const char *const *)ref->line, (const char *const *)hyp->line, hyp->n, &o, &r) != QKV_OK) {
        rc = cli_error("rouge", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        goto done;
    }
    char sig[128];
    qkv_rouge_signature(&o, sig, sizeof sig);
    const char *names[4] = {"rouge1", "rouge2", "rougeL", "rougeLsum"};
    const qkv_prf *s[4] = {&r.rouge1, &r.rouge2, &r.rougeL, &r.rougeLsum};
    if (json) {
        printf("{");
        for (int k = 0; k < 4; k++)
            printf("\"%s\": {\"precision\": %.6f, \"recall\": %.6f, \"f1\": %.6f}, ", names[k], 100 * s[k]->precision,
                   100 * s[k]->recall, 100 * s[k]->f1);
        printf("\"n\": %zu, \"signature\": \"%s\"}\n", hyp->n, sig);
    } else {
        for (int k = 0; k < 4; k++)
            printf("%-10s P = %6.2f  R = %6.2f  F1 = %6.2f\n", names[k], 100 * s[k]->precision, 100 * s[k]->recall,
                   100 * s[k]->f1);
        printf("signature: %s (%zu lines)\n", sig, hyp->n);
    }
done:
    cli_lines_free(hyp);
    cli_lines_free(ref);
    return rc;
}

const cli_command cmd_rouge = {"rouge", "ROUGE-1/2/L/Lsum like Google's rouge-score", run, help};
