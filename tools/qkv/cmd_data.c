/* qkv data: build training data from raw text. `dialogue` turns novels' quoted speech into conversations. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/dialogue.h"
#include "qkv/fsutil.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv data dialogue [--min-turns N] [--max-turns N] [-o OUT] FILE...\n\n"
            "dialogue  writes one conversation a line, \"Person 1: ... Person 2: ... Person 1: ...\", from the quoted\n"
            "          speech of plain-text novels (one paragraph a line), to OUT (default standard output), and\n"
            "          a summary to standard error. The rule (include/qkv/dialogue.h, docs/reformer.md):\n"
            "            - a paragraph's speech is the text inside its double quotes; narration is dropped;\n"
            "            - a paragraph that leaves a quote open continues its speaker into the next one;\n"
            "            - every other paragraph with speech is a new turn by the other person;\n"
            "            - a paragraph without speech ends the conversation.\n"
            "          Conversations of fewer than --min-turns (default 2) turns are dropped; --max-turns N (default\n"
            "          0, no limit) cuts longer ones into pieces of N turns.\n");
}

typedef struct {
    FILE *out;
    long conversations, turns;
    size_t bytes;
} sink;

static qkv_status write_conversation(const char *text, int turns, void *user) {
    sink *s = user;
    size_t n = strlen(text);
    if (fwrite(text, 1, n, s->out) != n || fputc('\n', s->out) == EOF)
        return qkv_error_set(QKV_ERR_IO, "cannot write the conversations");
    s->conversations++;
    s->turns += turns;
    s->bytes += n + 1;
    return QKV_OK;
}

static int dialogue(int argc, char **argv) {
    qkv_dialogue_opts o = qkv_dialogue_defaults();
    const char *out_path = NULL;
    const char *files[256];
    int n_files = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (!strcmp(a, "--min-turns") && v) {
            if (!cli_parse_int("data dialogue", a, argv[++i], 1, 1 << 20, &x)) return CLI_USAGE;
            o.min_turns = (int)x;
        } else if (!strcmp(a, "--max-turns") && v) {
            if (!cli_parse_int("data dialogue", a, argv[++i], 0, 1 << 20, &x)) return CLI_USAGE;
            o.max_turns = (int)x;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && v) {
            out_path = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return cli_error("data dialogue", CLI_USAGE, "unexpected argument '%s' (see qkv data --help)", a);
        } else if (n_files < 256) {
            files[n_files++] = a;
        } else {
            return cli_error("data dialogue", CLI_USAGE, "at most 256 input files");
        }
    }
    if (!n_files) return cli_error("data dialogue", CLI_USAGE, "which novels? (FILE...)");
    if (o.max_turns && o.max_turns < o.min_turns)
        return cli_error("data dialogue", CLI_USAGE, "--max-turns %d is below --min-turns %d", o.max_turns,
                         o.min_turns);
    if (out_path) {
        int rc = cli_prepare_out("data dialogue", out_path, false);
        if (rc) return rc;
    }
    sink s = {.out = out_path ? fopen(out_path, "w") : stdout};
    if (!s.out) return cli_error("data dialogue", CLI_INPUT, "%s: cannot open for writing", out_path);
    int rc = CLI_OK;
    for (int f = 0; f < n_files && rc == CLI_OK; f++) {
        size_t len = 0;
        char *text = qkv_fs_read_capped(files[f], (uint64_t)1 << 32, 0, "novel", &len);
        if (!text) {
            rc = cli_error("data dialogue", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
            break;
        }
        if (qkv_dialogue_extract(text, len, &o, write_conversation, &s) != QKV_OK)
            rc = cli_error("data dialogue", cli_status_exit(qkv_last_status()), "%s: %s", files[f], qkv_last_error());
        free(text);
    }
    if (out_path && fclose(s.out) != 0 && rc == CLI_OK)
        rc = cli_error("data dialogue", CLI_RUNTIME, "%s: cannot write", out_path);
    if (rc == CLI_OK)
        fprintf(stderr, "%ld conversations, %ld turns (%.1f a conversation), %zu bytes\n", s.conversations, s.turns,
                s.conversations ? (double)s.turns / (double)s.conversations : 0.0, s.bytes);
    return rc;
}

static int run(int argc, char **argv) {
    if (argc < 2) return cli_error("data", CLI_USAGE, "which data? (qkv data dialogue ...; see qkv data --help)");
    if (!strcmp(argv[1], "dialogue")) return dialogue(argc, argv);
    return cli_error("data", CLI_USAGE, "unknown data builder '%s' (known: dialogue)", argv[1]);
}

const cli_command cmd_data = {"data", "build training data from raw text (dialogue: novels' speech as conversations)",
                              run, help};
