/* qkv data dialogue: novels' quoted speech as conversations, "Person 1: ... Person 2: ...", one a line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "data_builders.h"
#include "qkv/dialogue.h"
#include "qkv/fsutil.h"

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

int cli_data_dialogue(int argc, char **argv) {
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
    char tmp[4200];
    sink s = {.out = cli_out_open("data dialogue", out_path, tmp, sizeof tmp)};
    if (!s.out) return CLI_INPUT;
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
    rc = cli_out_close("data dialogue", s.out, out_path, tmp, rc);
    if (rc == CLI_OK)
        fprintf(stderr, "%ld conversations, %ld turns (%.1f a conversation), %zu bytes\n", s.conversations, s.turns,
                s.conversations ? (double)s.turns / (double)s.conversations : 0.0, s.bytes);
    return rc;
}
