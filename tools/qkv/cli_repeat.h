/* The repetition options every decoding command takes (include/qkv/repeat.h): --no-repeat-ngram N,
 * --repetition-penalty R and --repeat-scope generated|all, parsed and described in one place. */
#ifndef QKV_CLI_REPEAT_H
#define QKV_CLI_REPEAT_H

#include "qkv/repeat.h"

typedef struct cli_repeat {
    int no_repeat_ngram;      /* 0 = off */
    float repetition_penalty; /* 1 = off */
    qkv_repeat_scope scope;
} cli_repeat;

/* Off: no n-gram rule, penalty 1, scope generated. */
cli_repeat cli_repeat_defaults(void);

/* If argv[*i] is one of the three flags: parses its value into *r, moves *i past it and returns 1; returns 0 when
 * argv[*i] is another argument, and -1 (the usage error printed, naming cmd) on a bad or missing value. */
int cli_repeat_arg(const char *cmd, int argc, char **argv, int *i, cli_repeat *r);

#define CLI_REPEAT_USAGE "[--no-repeat-ngram N] [--repetition-penalty R] [--repeat-scope generated|all]"
#define CLI_REPEAT_HELP                                                                                              \
    "--no-repeat-ngram N: no n-gram of N tokens twice in an output (a token that would repeat one is never\n"       \
    "chosen; 0 = off, the default); --repetition-penalty R: tokens already generated are made less likely\n"      \
    "(CTRL: a positive score divided by R, a negative one multiplied by R; 1 = off); --repeat-scope\n"            \
    "generated|all: what both look at, the generated tokens (default) or the prompt too (as Hugging Face does\n"   \
    "for decoder-only models; a seq2seq model's source never counts).\n"

#endif
