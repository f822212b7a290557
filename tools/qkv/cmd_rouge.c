/* qkv rouge: ROUGE-1/2/L/Lsum as Google's rouge-score computes them, averaged over the lines. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/metrics.h"
#include "rouge_lead.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv rouge -r REF [-i HYP] [--stem] [--json]\n"
            "       qkv rouge --lead DATA.tsv [--stem] [--json]\n\n"
            "ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum (precision / recall / F1, x100) of the predictions (one per\n"
            "line; HYP, or standard input) against the reference file, line by line, averaged over lines as\n"
            "rouge-score's simple aggregation does. --stem applies the Porter stemmer (NLTK's) to tokens longer\n"
            "than 3 characters. --json prints one JSON object.\n"
            "--lead DATA.tsv scores the lead baseline of summarization data (article<TAB>summary lines): the\n"
            "first sentence of each article, cut to the summaries' average length in words, against its summary.\n");
}

static int run(int argc, char **argv) {
    const char *ref_path = NULL, *hyp_path = "-", *lead = NULL;
    bool json = false;
    qkv_rouge_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((!strcmp(a, "-r") || !strcmp(a, "--ref")) && v) ref_path = argv[++i];
        else if ((!strcmp(a, "-i") || !strcmp(a, "--input")) && v) hyp_path = argv[++i];
        else if (!strcmp(a, "--lead") && v) lead = argv[++i];
        else if (!strcmp(a, "--stem")) o.use_stemmer = true;
        else if (!strcmp(a, "--json")) json = true;
        else return cli_error("rouge", CLI_USAGE, "unexpected argument '%s' (see qkv rouge --help)", a);
    }
    if (lead && ref_path) return cli_error("rouge", CLI_USAGE, "--lead takes its references from DATA.tsv: not with -r");
    if (!ref_path && !lead) return cli_error("rouge", CLI_USAGE, "no reference file (-r REF)");
    int rc = CLI_OK;
    cli_lines *hyp = NULL, *ref = NULL, *data = NULL;
    char **lead_hyps = NULL, **lead_refs = NULL;
    double avg_words = 0;
    if (lead) {
        if (!(data = cli_read_lines("rouge", lead))) return CLI_INPUT;
        int bad = rouge_lead_make(data->line, data->n, &lead_hyps, &lead_refs, &avg_words);
        if (bad) {
            rc = bad < 0 ? cli_error("rouge", CLI_RUNTIME, "out of memory")
                         : cli_error("rouge", CLI_INPUT, "%s:%d: no tab (expected article<TAB>summary)", lead, bad);
            goto done;
        }
        /* the lead's lines stand in for the two files */
        static cli_lines h, r;
        h = (cli_lines){.line = lead_hyps, .n = data->n};
        r = (cli_lines){.line = lead_refs, .n = data->n};
        hyp = &h;
        ref = &r;
        ref_path = lead;
        hyp_path = "the lead baseline";
    } else {
        hyp = cli_read_lines("rouge", hyp_path);
        ref = hyp ? cli_read_lines("rouge", ref_path) : NULL;
    }
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
        if (lead) printf("\"lead_words\": %.0f, ", round(avg_words));
        printf("\"n\": %zu, \"signature\": \"%s\"}\n", hyp->n, sig);
    } else {
        for (int k = 0; k < 4; k++)
            printf("%-10s P = %6.2f  R = %6.2f  F1 = %6.2f\n", names[k], 100 * s[k]->precision, 100 * s[k]->recall,
                   100 * s[k]->f1);
        printf("signature: %s (%zu lines)\n", sig, hyp->n);
        if (lead) printf("lead: first sentence cut to %.0f words\n", round(avg_words));
    }
done:
    if (lead) {
        rouge_lead_free(lead_hyps, lead_refs, data ? data->n : 0);
        cli_lines_free(data);
    } else {
        cli_lines_free(hyp);
        cli_lines_free(ref);
    }
    return rc;
}

const cli_command cmd_rouge = {"rouge", "ROUGE-1/2/L/Lsum like Google's rouge-score", run, help};
