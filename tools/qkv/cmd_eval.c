/* qkv eval: score a trained run on its dev or test split, or on any file in the task's format. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/train.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv eval --run DIR [--checkpoint FILE] [--split dev|test | --data FILE] [--json]\n\n"
            "Scores a run's model: classify: loss, accuracy, macro F1 and the confusion matrix; lm: loss,\n"
            "perplexity, bits per token (and per character); seq2seq: loss and perplexity; tagging: loss,\n"
            "token accuracy (padding left out), and entity precision, recall and F1 for BIO tag sets; pairs: AUC,\n"
            "and accuracy, precision, recall and F1 at the duplicate threshold chosen on dev (kept in the run);\n"
            "summarize: the summary's loss and greedy ROUGE-1/2/L F (eval.rouge_max_examples articles).\n"
            "The greedy decodes behind BLEU, ROUGE and eval.tasks follow the run's eval.no_repeat_ngram,\n"
            "eval.repetition_penalty and eval.repeat_scope (as qkv summarize's --no-repeat-ngram and friends).\n\n"
            "  --run DIR          the run directory (its config.json and tokenizer files are used)\n"
            "  --checkpoint FILE  weights to score (default DIR/best.safetensors, else the newest checkpoint)\n"
            "  --split S          dev (default) or test: the files the run's config names. Training never reads\n"
            "                     the test split; only this command does, when asked\n"
            "  --data FILE        any file in the task's format instead of a split\n"
            "  --json             print the metrics as one JSON object\n");
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *ckpt = NULL, *split = NULL, *data = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "--split") && v) split = argv[++i];
        else if (!strcmp(a, "--data") && v) data = argv[++i];
        else if (!strcmp(a, "--json")) json = true;
        else return cli_error("eval", CLI_USAGE, "unexpected argument '%s' (see qkv eval --help)", a);
    }
    if (!dir) return cli_error("eval", CLI_USAGE, "needs --run DIR");
    if (split && data) return cli_error("eval", CLI_USAGE, "give --split or --data, not both");
    if (split && strcmp(split, "dev") && strcmp(split, "test"))
        return cli_error("eval", CLI_USAGE, "--split must be dev or test, got '%s'", split);
    qkv_run *r = qkv_run_open(dir, ckpt);
    if (!r) return cli_error("eval", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    cJSON *m = qkv_run_eval(r, data ? NULL : split ? split : "dev", data);
    qkv_run_free(r);
    if (!m) return cli_error("eval", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if (json) {
        cli_print_json(m);
    } else {
        const cJSON *where = cJSON_GetObjectItem(m, data ? "file" : "split");
        printf("%s (step %.0f)\n", cJSON_GetStringValue(where), cJSON_GetNumberValue(cJSON_GetObjectItem(m, "step")));
        for (const cJSON *it = m->child; it; it = it->next) {
            if (cJSON_IsNumber(it) && strcmp(it->string, "step")) printf("  %-15s %.6g\n", it->string, it->valuedouble);
        }
        /* text-to-text runs: one line a task, its metrics after its name */
        const cJSON *tasks = cJSON_GetObjectItem(m, "tasks");
        for (const cJSON *t = cJSON_IsObject(tasks) ? tasks->child : NULL; t; t = t->next) {
            printf("  %-15s", t->string);
            for (const cJSON *v = t->child; v; v = v->next)
                if (cJSON_IsNumber(v)) printf(" %s %.6g", v->string, v->valuedouble);
            printf("\n");
        }
        const cJSON *conf = cJSON_GetObjectItem(m, "confusion"), *labels = cJSON_GetObjectItem(m, "labels");
        if (cJSON_IsArray(conf)) {
            printf("  confusion (rows gold, columns predicted):\n  %12s", "");
            for (const cJSON *l = labels ? labels->child : NULL; l; l = l->next) printf(" %10.10s", l->valuestring);
            printf("\n");
            const cJSON *l = labels ? labels->child : NULL;
            for (const cJSON *row = conf->child; row; row = row->next, l = l ? l->next : NULL) {
                printf("  %12.12s", l ? l->valuestring : "");
                for (const cJSON *c = row->child; c; c = c->next) printf(" %10.0f", c->valuedouble);
                printf("\n");
            }
        }
    }
    cJSON_Delete(m);
    return CLI_OK;
}

const cli_command cmd_eval = {"eval", "score a trained run on dev, test or any file", run, help};
