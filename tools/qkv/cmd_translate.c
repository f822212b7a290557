/* qkv translate: translate lines with a trained seq2seq run (greedy, beam search, sampling or MBR). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_repeat.h"
#include "commands.h"
#include "qkv/beam.h"
#include "qkv/decode_batch.h"
#include "qkv/decoder.h"
#include "qkv/train.h"
#include "run_view.h"
#include "translate_run.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv translate --run DIR [--beam K] [--alpha A] [--n-best N] [--mbr N [--utility U]]\n"
            "                     [--temperature T] [--max-len N] [--seed S] [--checkpoint FILE]\n"
            "                     [--batch N] [--batch-tokens N] [--view PAGE.html] [FILE | --input FILE]\n"
            "                     " CLI_REPEAT_USAGE "\n\n"
            "Translates each line of FILE (or standard input) with the run's seq2seq model and prints one\n"
            "translation per line. Default: greedy decoding. --beam K: beam search with GNMT length penalty\n"
            "alpha (default 0.6); --n-best N prints the N best, tab-separated with their scores. --mbr N:\n"
            "Minimum Bayes Risk over N samples at --temperature (default 1) with utility bleu (default),\n"
            "rougeL, rouge1 or rouge2.\n"
            "Sentences are decoded in batches of --batch N (default 32) of alike lengths, optionally also at most\n"
            "--batch-tokens N rows x source tokens; the output is the same as one at a time, in input order.\n"
            "Every search: " CLI_REPEAT_HELP
            "--view PAGE.html also writes the alignment viewer page: per sentence, one teacher-forced pass over\n"
            "(source, translation) with the attention captured; rows are target tokens, columns source tokens.\n"
            "LSTM: its attention (one map); Transformer: each decoder layer's cross-attention (all heads), then\n"
            "the encoder's and the decoder's self-attention.\n");
}

/* Copies of a sentence's source ids and best hypothesis for the alignment page; false when out of memory. */
static bool keep_pair(run_view_pair *p, const char *text, const int32_t *src, int n_src, const qkv_hyp *h) {
    int n_tgt = h ? h->len : 0;
    int32_t *s = malloc(sizeof *s * (size_t)n_src), *t = malloc(sizeof *t * (size_t)(n_tgt ? n_tgt : 1));
    if (!s || !t) {
        free(s);
        free(t);
        return false;
    }
    memcpy(s, src, sizeof *s * (size_t)n_src);
    if (n_tgt) memcpy(t, h->tokens, sizeof *t * (size_t)n_tgt);
    *p = (run_view_pair){.source_text = text, .src = s, .n_src = n_src, .tgt = t, .n_tgt = n_tgt};
    return true;
}

/* Beam search (--beam, --n-best, --alpha) and MBR (--mbr with --utility, --temperature, --seed) are two decoders:
 * a flag of the one not chosen would be ignored. The message naming the conflict, or NULL. */
static const char *translate_conflict(int argc, char **argv, bool mbr) {
    static const char *const beam_flags[] = {"--beam", "--n-best", "--alpha", NULL};
    static const char *const mbr_flags[] = {"--utility", "--temperature", "--seed", NULL};
    static _Thread_local char msg[160];
    for (int i = 1; i < argc; i++) {
        const char *const *list = mbr ? beam_flags : mbr_flags;
        for (int k = 0; list[k]; k++)
            if (!strcmp(argv[i], list[k])) {
                if (mbr) snprintf(msg, sizeof msg, "--mbr and %s exclude each other (%s is an option of beam search)",
                                  list[k], list[k]);
                else snprintf(msg, sizeof msg, "%s goes with --mbr N (an option of MBR decoding, unused without it)",
                              list[k]);
                return msg;
            }
    }
    return NULL;
}

/* Where each translation goes, in input order: printed at once (the n-best with their scores), kept for --view. */
typedef struct {
    qkv_run *r;
    int n_best;
    run_view_pair *pairs;
    size_t n_pairs;
    const cli_lines *lines;
    const translate_job *job;
} out_ctx;

static qkv_status print_one(int index, qkv_hyps *hs, void *user) {
    out_ctx *c = user;
    for (int k = 0; k < hs->n && k < c->n_best; k++) {
        char *text = translate_text(c->r, hs->h[k].tokens, hs->h[k].len);
        if (c->n_best > 1) printf("%s%s\t%.4f", k ? "\t" : "", text ? text : "", hs->h[k].score);
        else printf("%s", text ? text : "");
        free(text);
    }
    printf("\n");
    fflush(stdout);
    if (!c->pairs) return QKV_OK;
    if (!keep_pair(&c->pairs[c->n_pairs], c->lines->line[index], c->job->ids[index], c->job->lens[index],
                   hs->n ? &hs->h[0] : NULL))
        return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    c->n_pairs++;
    return QKV_OK;
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *ckpt = NULL, *path = "-", *utility = "bleu", *view = NULL;
    long beam = 1, n_best = 1, mbr = 0, max_len = 0, seed = 1, batch = 32, batch_tokens = 0;
    double alpha = 0.6, temperature = 1.0;
    cli_repeat rep = cli_repeat_defaults();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int took = cli_repeat_arg("translate", argc, argv, &i, &rep);
        if (took < 0) return CLI_USAGE;
        if (took) continue;
        if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "--utility") && v) utility = argv[++i];
        else if (!strcmp(a, "--view") && v) view = argv[++i];
        else if (!strcmp(a, "--input") && v) path = argv[++i]; /* as summarize and generate spell it */
        else if (!strcmp(a, "--beam") && v) {
            if (!cli_parse_int("translate", a, argv[++i], 1, 256, &beam)) return CLI_USAGE;
        } else if (!strcmp(a, "--n-best") && v) {
            if (!cli_parse_int("translate", a, argv[++i], 1, 256, &n_best)) return CLI_USAGE;
        } else if (!strcmp(a, "--mbr") && v) {
            if (!cli_parse_int("translate", a, argv[++i], 1, 4096, &mbr)) return CLI_USAGE;
        } else if (!strcmp(a, "--batch") && v) {
            if (!cli_parse_int("translate", a, argv[++i], 1, 4096, &batch)) return CLI_USAGE;
        } else if (!strcmp(a, "--batch-tokens") && v) {
            if (!cli_parse_int("translate", a, argv[++i], 1, 1L << 30, &batch_tokens)) return CLI_USAGE;
        } else if (!strcmp(a, "--max-len") && v) {
            if (!cli_parse_int("translate", a, argv[++i], 1, 1 << 20, &max_len)) return CLI_USAGE;
        } else if (!strcmp(a, "--seed") && v) {
            if (!cli_parse_int("translate", a, argv[++i], 0, 1L << 40, &seed)) return CLI_USAGE;
        } else if (!strcmp(a, "--alpha") && v) {
            if (!cli_parse_double("translate", a, argv[++i], 0, 10, &alpha)) return CLI_USAGE;
        } else if (!strcmp(a, "--temperature") && v) {
            if (!cli_parse_double("translate", a, argv[++i], 1e-3, 100, &temperature)) return CLI_USAGE;
        } else if (a[0] != '-' || !strcmp(a, "-")) path = a;
        else return cli_error("translate", CLI_USAGE, "unexpected argument '%s' (see qkv translate --help)", a);
    }
    /* Options of the other decoder are refused, not silently dropped. */
    const char *clash = translate_conflict(argc, argv, mbr > 0);
    if (clash) return cli_error("translate", CLI_USAGE, "%s", clash);
    qkv_mbr_utility u;
    if (!qkv_mbr_utility_parse(utility, &u))
        return cli_error("translate", CLI_USAGE, "--utility takes bleu, rougeL, rouge1 or rouge2, not '%s'", utility);
    if (n_best > beam) return cli_error("translate", CLI_USAGE, "--n-best %ld is more than --beam %ld", n_best, beam);
    if (!dir) return cli_error("translate", CLI_USAGE, "which run? (--run DIR)");
    qkv_run *r = qkv_run_open(dir, ckpt);
    if (!r) return cli_error("translate", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    int rc = CLI_OK;
    cli_lines *lines = NULL;
    run_view_pair *pairs = NULL; /* --view: each line's source ids and best translation (owned copies) */
    size_t n_pairs = 0;
    qkv_decoder dec;
    if (qkv_model_decoder(qkv_run_model_type(r), qkv_run_model(r), &dec) != QKV_OK || !dec.info.needs_source) {
        rc = cli_error("translate", CLI_INPUT, "%s: model type '%s' is not a translation model", dir,
                       qkv_run_model_type(r)->name);
        goto done;
    }
    if (view && run_view_check_attention(r) != QKV_OK) {
        rc = cli_error("translate", CLI_INPUT, "--view: %s", qkv_last_error());
        goto done;
    }
    if (view && (rc = cli_prepare_out("translate", view, false)) != CLI_OK) goto done;
    if (!(lines = cli_read_lines("translate", path))) {
        rc = CLI_INPUT;
        goto done;
    }
    if (view && !(pairs = calloc(lines->n ? lines->n : 1, sizeof *pairs))) {
        rc = cli_error("translate", CLI_RUNTIME, "out of memory");
        goto done;
    }
    translate_opts t = translate_defaults();
    t.beam = (int)beam;
    t.n_best = (int)n_best;
    t.mbr = (int)mbr;
    t.max_len = (int)max_len;
    t.batch = (int)batch;
    t.batch_tokens = batch_tokens;
    t.seed = (uint64_t)seed;
    t.alpha = (float)alpha;
    t.temperature = (float)temperature;
    t.utility = u;
    t.no_repeat_ngram = rep.no_repeat_ngram;
    t.repetition_penalty = rep.repetition_penalty;
    t.repeat_scope = rep.scope;
    translate_job job;
    int bad;
    qkv_status st = translate_prepare(&job, r, &t, (int)lines->n, (const char *const *)lines->line, &bad);
    if (st != QKV_OK && bad >= 0) rc = cli_error("translate", CLI_INPUT, "%s:%d: %s", path, bad + 1, qkv_last_error());
    else if (st != QKV_OK) rc = cli_error("translate", cli_status_exit(st), "%s", qkv_last_error());
    out_ctx oc = {.r = r, .n_best = t.n_best, .pairs = pairs, .lines = lines, .job = &job};
    if (rc == CLI_OK) {
        st = translate_decode(&job, print_one, &oc);
        if (st != QKV_OK) rc = cli_error("translate", cli_status_exit(st), "%s: %s", path, qkv_last_error());
    }
    translate_free(&job);
    n_pairs = oc.n_pairs;
    if (rc == CLI_OK && pairs) {
        if (run_view_write_pairs(r, dir, pairs, (int)n_pairs, view) != QKV_OK)
            rc = cli_error("translate", cli_status_exit(qkv_last_status()), "--view: %s", qkv_last_error());
        else fprintf(stderr, "wrote %s (%zu sentences)\n", view, n_pairs);
    }
done:
    for (size_t i = 0; i < n_pairs; i++) {
        free((void *)pairs[i].src);
        free((void *)pairs[i].tgt);
    }
    free(pairs);
    cli_lines_free(lines);
    qkv_run_free(r);
    return rc;
}

const cli_command cmd_translate = {"translate", "translate lines with a trained seq2seq run (greedy, beam, MBR)", run,
                                   help};
