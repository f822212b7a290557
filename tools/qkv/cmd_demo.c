/* qkv demo: placeholder until the sentiment slice lands; see the README. */
#include "cli.h"
#include "commands.h"
#include "qkv/qkv.h"

static void help(FILE *out) { fprintf(out, "usage: qkv demo\n\nA short demonstration of what qkv can do.\n"); }

static int run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("qkv %s\n", QKV_VERSION);
    return CLI_OK;
}

const cli_command cmd_demo = {"demo", "train a small model end to end and show what it learned", run, help};
