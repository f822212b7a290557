/* qkv: one binary, one subcommand per job. Each subcommand lives in cmd_<name>.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/qkv.h"

static const cli_command *const commands[] = {
    &cmd_demo,
    &cmd_train,
    &cmd_eval,
    &cmd_predict,
    &cmd_answer,
    &cmd_tag,
    &cmd_generate,
    &cmd_chat,
    &cmd_translate,
    &cmd_summarize,
    &cmd_viz,
    &cmd_plot,
    &cmd_config,
    &cmd_tokenize,
    &cmd_data,
    &cmd_bleu,
    &cmd_rouge,
    &cmd_embed,
    &cmd_similar,
    &cmd_attend,
    &cmd_bench,
    &cmd_lesson,
#ifdef QKV_HAVE_SERVE
    &cmd_serve,
#endif
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
    fprintf(out,
            "qkv %s: attention-based language models in C\n\n"
            "usage: qkv <command> [options]   (qkv <command> --help for each)\n\ncommands:\n",
            QKV_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out, "\nenvironment: QKV_THREADS sets the thread count (default: all cores).\n"
                 "environment: QKV_ISA=avx512|avx2|generic forces a kernel path (default: the widest this CPU runs).\n"
                 "exit codes: 0 ok, 1 usage error, 2 bad input, 3 runtime failure.\n");
}

int main(int argc, char **argv) {
    cli_runtime_env(argv);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        if (argc >= 3 && !strcmp(argv[1], "help")) {
            for (size_t i = 0; i < N_COMMANDS; i++)
                if (!strcmp(argv[2], commands[i]->name)) {
                    commands[i]->help(stdout);
                    return CLI_OK;
                }
        }
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    /* A bad QKV_ISA is bad input: refused before any work, rather than silently running another path. */
    if (qkv_cpu_check() != QKV_OK) {
        fprintf(stderr, "qkv: %s\n", qkv_last_error());
        return CLI_INPUT;
    }
    if (!strcmp(argv[1], "--version")) {
        qkv_isa best = qkv_cpu_supports(QKV_ISA_AVX512) ? QKV_ISA_AVX512
                       : qkv_cpu_supports(QKV_ISA_AVX2) ? QKV_ISA_AVX2
                                                         : QKV_ISA_GENERIC;
        const char *picked = getenv("QKV_BLAS_PICKED");
        printf("qkv %s\nkernels: %s (this CPU: %s; QKV_ISA forces avx512, avx2 or generic)\nblas: openblas %s",
               QKV_VERSION, qkv_cpu_isa_name(qkv_cpu_isa()), qkv_cpu_isa_name(best), qkv_cpu_blas_core());
        if (picked) printf(" (OPENBLAS_CORETYPE set by qkv: OpenBLAS took this CPU for %s)", picked);
        printf("\n");
        return CLI_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(argv[1], commands[i]->name)) continue;
        if (cli_wants_help(argc - 1, argv + 1)) {
            commands[i]->help(stdout);
            return CLI_OK;
        }
        int rc = cli_check_last_value(commands[i], argc - 1, argv + 1);
        return rc ? rc : commands[i]->run(argc - 1, argv + 1);
    }
    fprintf(stderr, "qkv: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
