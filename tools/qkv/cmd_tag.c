/* qkv tag: tag the words of texts with a trained tagger run (one prediction per token; entities for BIO tags). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/train.h"
#include "run_view.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv tag --run DIR [--checkpoint FILE] [--json] [--view PAGE.html] [TEXT ...]\n\n"
            "Tags each TEXT (or, with none, each line of standard input) with a run of a tagging model type.\n"
            "Words are split on whitespace, and punctuation at either end of a word is a token of its own.\n"
            "Prints one line per text: token/TAG pairs, then for BIO tag sets (data.tagset names) a line\n"
            "\"entities:\" listing each entity as [text]TYPE.\n\n"
            "  --checkpoint FILE  weights to use (default DIR/best.safetensors, else the newest checkpoint)\n"
            "  --json             one JSON object per text: tokens, tags, entities (text, type, start, end)\n"
            "  --view PAGE.html   also write the viewer page: each text's words coloured by tag (entities by\n"
            "                     type), with the run's training curves\n");
}

static int tag_one(qkv_run *r, const char *text, bool json) {
    cJSON *p = qkv_run_predict(r, text);
    if (!p) return cli_error("tag", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if (json) {
        cli_print_json(p);
    } else {
        const cJSON *toks = cJSON_GetObjectItem(p, "tokens"), *tags = cJSON_GetObjectItem(p, "tags");
        int n = cJSON_GetArraySize(toks);
        for (int i = 0; i < n; i++)
            printf("%s%s/%s", i ? " " : "", cJSON_GetStringValue(cJSON_GetArrayItem(toks, i)),
                   cJSON_GetStringValue(cJSON_GetArrayItem(tags, i)));
        printf("\n");
        const cJSON *ents = cJSON_GetObjectItem(p, "entities"), *e;
        if (ents) {
            printf("entities:");
            cJSON_ArrayForEach(e, ents)
                printf(" [%s]%s", cJSON_GetStringValue(cJSON_GetObjectItem(e, "text")),
                       cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")));
            printf("\n");
        }
    }
    cJSON_Delete(p);
    return CLI_OK;
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *ckpt = NULL, *view = NULL;
    bool json = false;
    int first_text = argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--view") && v) view = argv[++i];
        else if (!strcmp(a, "--")) {
            first_text = i + 1;
            break;
        } else if (a[0] == '-' && a[1] == '-') return cli_error("tag", CLI_USAGE, "unknown option '%s'", a);
        else {
            first_text = i;
            break;
        }
    }
    if (!dir) return cli_error("tag", CLI_USAGE, "needs --run DIR");
    qkv_run *r = qkv_run_open(dir, ckpt);
    if (!r) return cli_error("tag", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if (strcmp(qkv_run_model_type(r)->task, "tagging")) {
        int rc = cli_error("tag", CLI_INPUT, "model type '%s' is not a tagger (task %s; use qkv predict)",
                           qkv_run_model_type(r)->name, qkv_run_model_type(r)->task);
        qkv_run_free(r);
        return rc;
    }
    int rc = CLI_OK;
    cli_lines *l = NULL;
    const char **texts = NULL;
    int n = 0;
    if (first_text < argc) {
        texts = (const char **)argv + first_text;
        n = argc - first_text;
    } else if (!(l = cli_read_lines("tag", "-"))) {
        rc = CLI_INPUT;
    } else if (!(texts = malloc(sizeof *texts * (l->n ? l->n : 1)))) {
        rc = cli_error("tag", CLI_RUNTIME, "out of memory");
    } else {
        for (size_t i = 0; i < l->n; i++)
            if (l->line[i][0]) texts[n++] = l->line[i];
    }
    for (int i = 0; i < n && rc == CLI_OK; i++) rc = tag_one(r, texts[i], json);
    if (rc == CLI_OK && view && n && run_view_write(r, dir, texts, n, view, NULL) != QKV_OK)
        rc = cli_error("tag", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if (l) free(texts);
    cli_lines_free(l);
    qkv_run_free(r);
    return rc;
}

const cli_command cmd_tag = {"tag", "tag the words of texts with a trained tagger", run, help};
