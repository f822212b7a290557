/* qkv chat: talk with a language model trained on conversations in the "Person 1: ... Person 2: ..." format of
 * `qkv data dialogue`. The whole conversation is the model's context (as much of its end as the model's positions
 * hold); each reply is streamed as it is generated and ends where the model starts the next "Person 1:" turn. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_repeat.h"
#include "commands.h"
#include "qkv/decode.h"
#include "qkv/train.h"

#define USER_TAG "Person 1:"
#define BOT_TAG "Person 2:"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv chat --run DIR [--script FILE] [--max-tokens N] [--temperature T] [--top-k K] [--seed S]\n"
            "                [--checkpoint FILE] " CLI_REPEAT_USAGE "\n\n"
            "An interactive chat with the run's language model, trained on conversations as `qkv data dialogue`\n"
            "writes them. Each line you type becomes \"" USER_TAG " <line> " BOT_TAG "\" appended to the\n"
            "conversation, and the model's continuation, up to where it begins the next \"" USER_TAG "\" (or ends\n"
            "the line, or --max-tokens, default 200), is the reply, printed as it comes. The whole conversation is\n"
            "the context; when it outgrows the model's positions, the oldest turns are dropped from the context.\n"
            "Commands: /reset starts a new conversation, /save FILE writes the conversation so far (one line),\n"
            "/quit (or end of input) leaves.\n"
            "--script FILE reads the lines from FILE instead of the terminal (- for standard input) and prints\n"
            "each as \"" USER_TAG " ...\" before its reply: a non-interactive session for tests and demos.\n"
            "Temperature 0 (the default) is greedy; a seed reproduces a sampled session.\n"
            "In each reply: " CLI_REPEAT_HELP
            "(the prompt of a reply is the conversation so far).\n");
}

typedef struct {
    char *s;
    size_t n, cap;
} text;

static bool text_add(text *t, const char *p, size_t n) {
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 1024;
        while (cap < t->n + n + 1) cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s) return false;
        t->s = s;
        t->cap = cap;
    }
    memcpy(t->s + t->n, p, n);
    t->n += n;
    t->s[t->n] = '\0';
    return true;
}

/* The reply being generated: its tokens, and how much of its text is printed. */
typedef struct {
    qkv_run *r;
    int32_t *ids;
    size_t n, cap;
    size_t printed; /* bytes of the reply text already on stdout */
    char *reply;    /* the final reply text (malloc'd) once generation ends */
    bool failed;
} reply_stream;

/* Where the reply ends in `t`: the next user tag, or the end of the line (the corpus holds one conversation a
 * line: a newline byte for BPE, the "<nl>" token of the char and word tokenizers); NULL when none is there yet. */
static const char *reply_end(const char *t) {
    const char *marks[3] = {strstr(t, USER_TAG), strchr(t, '\n'), strstr(t, "<nl>")}, *first = NULL;
    for (int i = 0; i < 3; i++)
        if (marks[i] && (!first || marks[i] < first)) first = marks[i];
    return first;
}

/* Bytes at the end of t that could begin the user tag (held back until the next tokens decide). */
static size_t tag_prefix_len(const char *t, size_t n) {
    size_t tag = strlen(USER_TAG);
    for (size_t k = tag - 1; k > 0; k--)
        if (n >= k && !strncmp(t + n - k, USER_TAG, k)) return k;
    return 0;
}

static int on_token(int32_t token, void *user) {
    reply_stream *s = user;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        int32_t *p = realloc(s->ids, sizeof *p * s->cap);
        if (!p) {
            s->failed = true;
            return 1;
        }
        s->ids = p;
    }
    s->ids[s->n++] = token;
    char *t = NULL;
    if (qkv_run_decode(s->r, s->ids, s->n, &t) != QKV_OK) {
        s->failed = true;
        return 1;
    }
    const char *end = reply_end(t);
    size_t len = end ? (size_t)(end - t) : strlen(t);
    size_t show = end ? len : len - tag_prefix_len(t, len);
    if (end)
        while (show > s->printed && t[show - 1] == ' ') show--;
    if (show > s->printed) {
        fwrite(t + s->printed, 1, show - s->printed, stdout);
        fflush(stdout);
        s->printed = show;
    }
    free(s->reply);
    s->reply = t;
    if (end) s->reply[len] = '\0';
    return end ? 1 : 0;
}

/* Ids of the conversation's end that fit `room` tokens, starting at a turn boundary when the whole does not fit. */
static qkv_status context_ids(qkv_run *r, const text *conv, int64_t room, int32_t **ids, size_t *n) {
    const char *from = conv->s;
    for (;;) {
        free(*ids);
        *ids = NULL;
        qkv_status st = qkv_run_encode(r, from, ids, n);
        if (st) return st;
        if (room <= 0 || (int64_t)*n <= room) return QKV_OK;
        const char *next = strstr(from + 1, USER_TAG);
        if (!next) { /* one turn longer than the context: keep its end */
            memmove(*ids, *ids + (*n - (size_t)room), sizeof **ids * (size_t)room);
            *n = (size_t)room;
            return QKV_OK;
        }
        from = next;
    }
}

static int chat_turn(qkv_run *r, text *conv, const char *line, const qkv_gen_opts *base, int64_t capacity,
                     uint64_t turn) {
    if ((conv->n && !text_add(conv, " ", 1)) || !text_add(conv, USER_TAG " ", strlen(USER_TAG) + 1) ||
        !text_add(conv, line, strlen(line)) || !text_add(conv, " " BOT_TAG, strlen(BOT_TAG) + 1))
        return cli_error("chat", CLI_RUNTIME, "out of memory");
    int32_t *ids = NULL;
    size_t n = 0;
    int64_t room = capacity > 0 ? capacity - base->max_new_tokens : 0;
    if (capacity > 0 && room < 1) room = capacity / 2;
    if (context_ids(r, conv, room, &ids, &n) != QKV_OK) {
        free(ids);
        return cli_error("chat", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    }
    qkv_lm_decoder *d = qkv_lm_decoder_new(qkv_run_model_type(r), qkv_run_model(r));
    reply_stream s = {.r = r};
    qkv_gen_opts o = *base;
    o.on_token = on_token;
    o.user = &s;
    o.seed = base->seed + turn; /* each turn its own stream, the session reproducible */
    int32_t *out = malloc(sizeof *out * (size_t)(o.max_new_tokens + 1));
    fputs(BOT_TAG, stdout);
    fflush(stdout);
    int64_t got = d && out ? qkv_generate(d, ids, (int64_t)n, &o, out, o.max_new_tokens, NULL) : -1;
    int rc = CLI_OK;
    if (got < 0 || s.failed) rc = cli_error("chat", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    fputc('\n', stdout);
    fflush(stdout);
    /* The reply joins the conversation as printed (trimmed), so the next turn reads what the user saw. */
    const char *rep = s.reply ? s.reply : "";
    size_t len = strlen(rep);
    while (len && rep[len - 1] == ' ') len--;
    if (rc == CLI_OK && len && (rep[0] == ' ' ? !text_add(conv, rep, len) : !text_add(conv, " ", 1) ||
                                                                            !text_add(conv, rep, len)))
        rc = cli_error("chat", CLI_RUNTIME, "out of memory");
    free(s.reply);
    free(s.ids);
    free(out);
    free(ids);
    qkv_lm_decoder_free(d);
    return rc;
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *ckpt = NULL, *script = NULL;
    long max_tokens = 200, top_k = 0, seed = 0;
    double temperature = 0;
    cli_repeat rep = cli_repeat_defaults();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int took = cli_repeat_arg("chat", argc, argv, &i, &rep);
        if (took < 0) return CLI_USAGE;
        if (took) continue;
        if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "--script") && v) script = argv[++i];
        else if (!strcmp(a, "--max-tokens") && v) {
            if (!cli_parse_int("chat", a, argv[++i], 1, 1 << 20, &max_tokens)) return CLI_USAGE;
        } else if (!strcmp(a, "--top-k") && v) {
            if (!cli_parse_int("chat", a, argv[++i], 0, 1 << 24, &top_k)) return CLI_USAGE;
        } else if (!strcmp(a, "--seed") && v) {
            if (!cli_parse_int("chat", a, argv[++i], 0, 1L << 40, &seed)) return CLI_USAGE;
        } else if (!strcmp(a, "--temperature") && v) {
            if (!cli_parse_double("chat", a, argv[++i], 0, 100, &temperature)) return CLI_USAGE;
        } else return cli_error("chat", CLI_USAGE, "unexpected argument '%s' (see qkv chat --help)", a);
    }
    if (!dir) return cli_error("chat", CLI_USAGE, "which run? (--run DIR)");
    FILE *in = stdin;
    if (script && strcmp(script, "-") && !(in = fopen(script, "r")))
        return cli_error("chat", CLI_INPUT, "%s: cannot open the script", script);
    qkv_run *r = qkv_run_open(dir, ckpt);
    qkv_decoder dec;
    int rc = CLI_OK;
    if (!r) rc = cli_error("chat", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    else if (qkv_model_decoder(qkv_run_model_type(r), qkv_run_model(r), &dec) != QKV_OK || dec.info.needs_source)
        rc = cli_error("chat", CLI_INPUT, "%s: model type '%s' is not a language model that can generate", dir,
                       qkv_run_model_type(r)->name);
    qkv_gen_opts o = qkv_gen_defaults();
    o.sample.temperature = (float)temperature;
    o.sample.top_k = top_k;
    o.sample.no_repeat_ngram = rep.no_repeat_ngram;
    o.sample.repetition_penalty = rep.repetition_penalty;
    o.sample.repeat_scope = rep.scope;
    o.max_new_tokens = max_tokens;
    o.seed = (uint64_t)seed;
    const bool interactive = !script && isatty(fileno(stdin));
    if (rc == CLI_OK && interactive)
        fprintf(stderr, "Chatting with %s (%s). /reset, /save FILE, /quit.\n", dir, qkv_run_model_type(r)->name);
    text conv = {0};
    char *line = NULL;
    size_t cap = 0;
    uint64_t turn = 0;
    while (rc == CLI_OK) {
        if (interactive) {
            fputs("> ", stderr);
            fflush(stderr);
        }
        ssize_t got = getline(&line, &cap, in);
        if (got < 0) break;
        while (got && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        if (!got) continue;
        if (!strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            conv.n = 0;
            if (conv.s) conv.s[0] = '\0';
            fprintf(interactive ? stderr : stdout, "(a new conversation)\n");
            continue;
        }
        if (!strncmp(line, "/save", 5) && (line[5] == ' ' || !line[5])) {
            const char *path = line + 5;
            while (*path == ' ') path++;
            FILE *f = *path ? fopen(path, "w") : NULL;
            /* fclose whether or not the write failed: a full disk must not leak the stream */
            bool ok = f && fprintf(f, "%s\n", conv.s ? conv.s : "") >= 0;
            if (f && fclose(f) != 0) ok = false;
            if (!ok)
                fprintf(stderr, "qkv chat: /save %s: cannot write\n", *path ? path : "(which file?)");
            else fprintf(interactive ? stderr : stdout, "(saved to %s)\n", path);
            continue;
        }
        if (!interactive) printf("%s %s\n", USER_TAG, line);
        rc = chat_turn(r, &conv, line, &o, dec.info.capacity, turn++);
    }
    free(line);
    free(conv.s);
    if (in != stdin) fclose(in);
    qkv_run_free(r);
    return rc;
}

const cli_command cmd_chat = {"chat", "chat with a language model trained on conversations (streamed replies)",
                              run, help};
