/* qkv answer: the answer span a qa run finds for a question in a context file. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/train.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv answer --run DIR --context FILE [--checkpoint CKPT] [--json] \"question\"\n\n"
            "Reads the context (a UTF-8 text file; its lines are joined with spaces) and prints the span of it that\n"
            "the run's model (trained with data.task \"qa\") picks as the answer: the best start <= end within 30\n"
            "tokens from the top 20 starts and ends. The context is cut to the run's data.max_len tokens together\n"
            "with the question. --json prints {\"answer\", \"score\", \"context_tokens\"}.\n");
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *ctx_path = NULL, *ckpt = NULL, *question = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--context") && v) ctx_path = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "--json")) json = true;
        else if (a[0] == '-' && a[1]) return cli_error("answer", CLI_USAGE, "unexpected argument '%s' (see qkv answer --help)", a);
        else if (!question) question = a;
        else return cli_error("answer", CLI_USAGE, "one question only (quote it)");
    }
    if (!dir || !ctx_path || !question) return cli_error("answer", CLI_USAGE, "needs --run DIR, --context FILE and a question");
    cli_lines *lines = cli_read_lines("answer", ctx_path);
    if (!lines) return CLI_INPUT;
    size_t len = 1;
    for (size_t i = 0; i < lines->n; i++) len += strlen(lines->line[i]) + 1;
    char *context = malloc(len);
    if (!context) {
        cli_lines_free(lines);
        return cli_error("answer", CLI_RUNTIME, "out of memory");
    }
    context[0] = '\0';
    for (size_t i = 0, at = 0; i < lines->n; i++) {
        if (!lines->line[i][0]) continue;
        at += (size_t)sprintf(context + at, "%s%s", at ? " " : "", lines->line[i]);
    }
    cli_lines_free(lines);
    qkv_run *r = qkv_run_open(dir, ckpt);
    cJSON *out = r ? qkv_run_answer(r, context, question) : NULL;
    int rc = CLI_OK;
    if (!out) {
        rc = cli_error("answer", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    } else if (json) {
        cli_print_json(out);
    } else {
        printf("%s\n", cJSON_GetStringValue(cJSON_GetObjectItem(out, "answer")));
    }
    cJSON_Delete(out);
    qkv_run_free(r);
    free(context);
    return rc;
}

const cli_command cmd_answer = {"answer", "answer a question from a context file with a qa run", run, help};
