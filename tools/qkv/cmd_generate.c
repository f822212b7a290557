/* qkv generate: continue a prompt with a trained language model through its type's incremental decoder. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_repeat.h"
#include "commands.h"
#include "qkv/decode.h"
#include "qkv/decode_batch.h"
#include "qkv/train.h"
#include "run_view.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv generate --run DIR [--prompt TEXT | TEXT] [--max-tokens N] [--temperature T] [--top-k K]\n"
            "                    [--top-p P] [--seed S] [--checkpoint FILE] [--view PAGE.html]\n"
            "                    " CLI_REPEAT_USAGE "\n"
            "       qkv generate --run DIR --input FILE [--batch N] [sampling options as above]\n\n"
            "Continues the prompt with the run's language model, printing tokens as they come.\n"
            "Temperature 0 (the default) is greedy decoding; --top-k / --top-p restrict sampling to the k most\n"
            "likely tokens / the smallest set with probability p. A seed reproduces a sample. Generation stops\n"
            "after --max-tokens (default 200) or when the model's context is full.\n"
            CLI_REPEAT_HELP
            "--view PAGE.html then runs the model once over prompt + generated text and writes the attention\n"
            "viewer page: one causal map per layer (all heads), the tokens as labels (a space shows as \"\u2423\",\n"
            "a newline as \"\u23ce\"). Models without attention (rnnlm) cannot be viewed.\n"
            "A text-to-text run (an encoder-decoder such as t5) takes the prompt as its input, task prefix\n"
            "included (\"summarize: ...\"), and prints the decoded output alone (greedy, or sampled at\n"
            "--temperature T > 0 with --seed).\n"
            "--input FILE (- for standard input) continues every line of FILE as its own prompt, --batch N\n"
            "(default 32) at a time, and prints each prompt and its continuation followed by a newline, in input\n"
            "order: exactly what one --prompt run per line prints.\n");
}

typedef struct {
    qkv_run *r;
    int32_t *hist;
    size_t n, cap;
    size_t printed; /* bytes of the decoded text already written */
} stream;

/* Decode the whole generated sequence and print what is new: byte-level tokens may split a character, and
 * decoding everything keeps the output exactly equal to decode(ids). */
static int on_token(int32_t token, void *user) {
    stream *s = user;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        int32_t *h = realloc(s->hist, sizeof *h * s->cap);
        if (!h) return 1;
        s->hist = h;
    }
    s->hist[s->n++] = token;
    char *text = NULL;
    if (qkv_run_decode(s->r, s->hist, s->n, &text) != QKV_OK) return 1;
    size_t len = strlen(text);
    if (len > s->printed) {
        fwrite(text + s->printed, 1, len - s->printed, stdout);
        fflush(stdout);
        s->printed = len;
    }
    free(text);
    return 0;
}

typedef struct {
    qkv_run *r;
    const cli_lines *lines;
} batch_out;

static qkv_status print_continuation(int index, const int32_t *tokens, int64_t n, qkv_gen_end end, void *user) {
    (void)end;
    batch_out *b = user;
    char *text = NULL;
    qkv_status st = qkv_run_decode(b->r, tokens, (size_t)n, &text);
    if (st) return st;
    printf("%s%s\n", b->lines->line[index], text);
    fflush(stdout);
    free(text);
    return QKV_OK;
}

/* --input: every line a prompt, generated in batches. */
static int generate_lines(qkv_run *r, const char *path, const qkv_gen_opts *o, int batch) {
    cli_lines *lines = cli_read_lines("generate", path);
    if (!lines) return CLI_INPUT;
    int rc = CLI_OK;
    size_t n = lines->n;
    int32_t **ids = calloc(n ? n : 1, sizeof *ids);
    int64_t *lens = calloc(n ? n : 1, sizeof *lens);
    if (!ids || !lens) rc = cli_error("generate", CLI_RUNTIME, "out of memory");
    for (size_t l = 0; l < n && rc == CLI_OK; l++) {
        size_t k = 0;
        if (qkv_run_encode(r, lines->line[l], &ids[l], &k) != QKV_OK)
            rc = cli_error("generate", CLI_INPUT, "%s:%zu: %s", path, l + 1, qkv_last_error());
        lens[l] = (int64_t)k;
    }
    batch_out b = {r, lines};
    if (rc == CLI_OK && qkv_generate_batch(qkv_run_model_type(r), qkv_run_model(r), (int)n,
                                           (const int32_t *const *)ids, lens, o, batch, print_continuation,
                                           &b) != QKV_OK)
        rc = cli_error("generate", cli_status_exit(qkv_last_status()), "%s: %s", path, qkv_last_error());
    for (size_t l = 0; ids && l < n; l++) free(ids[l]);
    free(ids);
    free(lens);
    cli_lines_free(lines);
    return rc;
}

/* A text-to-text (seq2seq) run: the prompt is the source ("summarize: ...", "translate English to Spanish: ..."),
 * and the output is the decoded target alone. Greedy, or sampling at --temperature > 0 with --seed. */
static qkv_status print_target(int index, qkv_hyps *hs, void *user) {
    (void)index;
    char *text = NULL;
    if (hs->n && qkv_run_decode_target(user, hs->h[0].tokens, (size_t)hs->h[0].len, &text) != QKV_OK)
        return qkv_last_status();
    printf("%s\n", text ? text : "");
    free(text);
    return QKV_OK;
}

static int generate_text2text(qkv_run *r, const qkv_decoder *dec, const char *prompt, long max_tokens,
                              double temperature, long seed, const cli_repeat *rep) {
    int32_t *ids = NULL;
    size_t n = 0;
    qkv_decode_opts o = qkv_decode_defaults();
    int64_t src_max;
    qkv_run_target_ids(r, &o.bos, &o.eos, &o.pad, &src_max);
    o.temperature = temperature > 0 ? (float)temperature : 1.0f;
    o.no_repeat_ngram = rep->no_repeat_ngram;
    o.repetition_penalty = rep->repetition_penalty;
    o.repeat_scope = rep->scope;
    if (qkv_run_encode(r, prompt, &ids, &n) != QKV_OK)
        return cli_error("generate", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if ((int64_t)n > src_max) n = (size_t)src_max;
    if (!n) { /* an empty prompt still has one (pad) position to attend to */
        free(ids);
        if (!(ids = malloc(sizeof *ids))) return cli_error("generate", CLI_RUNTIME, "out of memory");
        ids[0] = o.pad >= 0 ? o.pad : 0;
        n = 1;
    }
    int len = (int)n, max_len = (int)max_tokens;
    qkv_batch_opts bo = qkv_batch_defaults();
    bo.search = temperature > 0 ? QKV_SEARCH_SAMPLE : QKV_SEARCH_GREEDY;
    bo.seed = (uint64_t)seed;
    const int32_t *src = ids;
    qkv_status st = qkv_decode_batch(dec, 1, &src, &len, &max_len, &o, &bo, print_target, r);
    free(ids);
    return st == QKV_OK ? CLI_OK : cli_error("generate", cli_status_exit(st), "%s", qkv_last_error());
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *ckpt = NULL, *prompt = NULL, *view = NULL, *input = NULL;
    long max_tokens = 200, top_k = 0, seed = 0, batch = 32;
    double temperature = 0, top_p = 1;
    cli_repeat rep = cli_repeat_defaults();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int took = cli_repeat_arg("generate", argc, argv, &i, &rep);
        if (took < 0) return CLI_USAGE;
        if (took) continue;
        if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "--prompt") && v) prompt = argv[++i];
        else if (!strcmp(a, "--view") && v) view = argv[++i];
        else if (!strcmp(a, "--input") && v) input = argv[++i];
        else if (!strcmp(a, "--batch") && v) {
            if (!cli_parse_int("generate", a, argv[++i], 1, 4096, &batch)) return CLI_USAGE;
        }
        else if (!strcmp(a, "--max-tokens") && v) {
            if (!cli_parse_int("generate", a, argv[++i], 0, 1 << 24, &max_tokens)) return CLI_USAGE;
        } else if (!strcmp(a, "--top-k") && v) {
            if (!cli_parse_int("generate", a, argv[++i], 0, 1 << 24, &top_k)) return CLI_USAGE;
        } else if (!strcmp(a, "--seed") && v) {
            if (!cli_parse_int("generate", a, argv[++i], 0, 1L << 40, &seed)) return CLI_USAGE;
        } else if (!strcmp(a, "--temperature") && v) {
            if (!cli_parse_double("generate", a, argv[++i], 0, 100, &temperature)) return CLI_USAGE;
        } else if (!strcmp(a, "--top-p") && v) {
            if (!cli_parse_double("generate", a, argv[++i], 1e-6, 1, &top_p)) return CLI_USAGE;
        } else if ((a[0] != '-' || !a[1]) && !prompt) prompt = a;
        else return cli_error("generate", CLI_USAGE, "unexpected argument '%s' (see qkv generate --help)", a);
    }
    if (input && (prompt || view))
        return cli_error("generate", CLI_USAGE, "--input takes its prompts from a file: not with %s",
                         prompt ? "a prompt" : "--view");
    if (!prompt) prompt = "";
    if (!dir) return cli_error("generate", CLI_USAGE, "which run? (--run DIR)");
    qkv_run *r = qkv_run_open(dir, ckpt);
    if (!r) return cli_error("generate", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    int rc = CLI_OK;
    int32_t *ids = NULL, *out = NULL;
    size_t n = 0;
    stream s = {.r = r};
    qkv_lm_decoder *d = NULL;
    qkv_decoder dec;
    if (qkv_model_decoder(qkv_run_model_type(r), qkv_run_model(r), &dec) == QKV_OK && dec.info.needs_source &&
        !input && !view) {
        rc = generate_text2text(r, &dec, prompt, max_tokens, temperature, seed, &rep);
        goto done;
    }
    if (qkv_model_decoder(qkv_run_model_type(r), qkv_run_model(r), &dec) != QKV_OK || dec.info.needs_source) {
        rc = cli_error("generate", CLI_INPUT, "%s: model type '%s' (task %s) is not a language model that can "
                       "generate", dir, qkv_run_model_type(r)->name, qkv_run_model_type(r)->task);
        goto done;
    }
    if (view && run_view_check_attention(r) != QKV_OK) { /* before generating: fail fast */
        rc = cli_error("generate", CLI_INPUT, "--view: %s", qkv_last_error());
        goto done;
    }
    if (view && (rc = cli_prepare_out("generate", view, false)) != CLI_OK) goto done;
    if (input) {
        qkv_gen_opts o = qkv_gen_defaults();
        o.sample.temperature = (float)temperature;
        o.sample.top_k = top_k;
        o.sample.top_p = (float)top_p;
        o.sample.repetition_penalty = rep.repetition_penalty;
        o.sample.no_repeat_ngram = rep.no_repeat_ngram;
        o.sample.repeat_scope = rep.scope;
        o.max_new_tokens = max_tokens;
        o.seed = (uint64_t)seed;
        rc = generate_lines(r, input, &o, (int)batch);
        goto done;
    }
    if (qkv_run_encode(r, prompt, &ids, &n) != QKV_OK ||
        !(d = qkv_lm_decoder_new(qkv_run_model_type(r), qkv_run_model(r)))) {
        rc = cli_error("generate", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        goto done;
    }
    qkv_gen_opts o = qkv_gen_defaults();
    o.sample.temperature = (float)temperature;
    o.sample.top_k = top_k;
    o.sample.top_p = (float)top_p;
    o.sample.repetition_penalty = rep.repetition_penalty;
    o.sample.no_repeat_ngram = rep.no_repeat_ngram;
    o.sample.repeat_scope = rep.scope;
    o.max_new_tokens = max_tokens;
    o.seed = (uint64_t)seed;
    o.on_token = on_token;
    o.user = &s;
    out = malloc(sizeof *out * (size_t)(max_tokens + 1));
    fputs(prompt, stdout);
    qkv_gen_end end;
    int64_t got = out ? qkv_generate(d, ids, (int64_t)n, &o, out, max_tokens, &end) : -1;
    if (got < 0) {
        rc = cli_error("generate", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        goto done;
    }
    printf("\n");
    if (view) {
        int32_t *all = malloc(sizeof *all * (n + (size_t)got + 1));
        if (all) {
            memcpy(all, ids, sizeof *all * n);
            memcpy(all + n, out, sizeof *all * (size_t)got);
        }
        if (!all) rc = cli_error("generate", CLI_RUNTIME, "out of memory");
        else if (run_view_write_lm(r, dir, all, n + (size_t)got, prompt, view) != QKV_OK)
            rc = cli_error("generate", cli_status_exit(qkv_last_status()), "--view: %s", qkv_last_error());
        else fprintf(stderr, "wrote %s (%zu tokens)\n", view, n + (size_t)got);
        free(all);
    }
done:
    free(ids);
    free(out);
    free(s.hist);
    qkv_lm_decoder_free(d);
    qkv_run_free(r);
    return rc;
}

const cli_command cmd_generate = {"generate", "continue a prompt with a trained language model (sampling, KV cache)",
                                  run, help};
