/* qkv predict: apply a trained run to texts given as arguments or read line by line from standard input. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/train.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv predict --run DIR [--checkpoint FILE] [--json] [TEXT ...]\n\n"
            "Applies a trained run to each TEXT (or, with none, to each line of standard input).\n"
            "  classify  prints \"<label>\\t<probability>\" per text\n"
            "  lm        prints \"<loss>\\t<perplexity>\" of each text under the model\n"
            "  seq2seq   not supported here (use a decoding command such as qkv translate)\n\n"
            "  --checkpoint FILE  weights to use (default DIR/best.safetensors, else the newest checkpoint)\n"
            "  --json             one JSON object per text (classify: label, prob, probs)\n");
}

static int predict_one(qkv_run *r, const char *text, bool json) {
    cJSON *p = qkv_run_predict(r, text);
    if (!p) return cli_error("predict", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if (json) {
        cli_print_json(p);
    } else if (cJSON_GetObjectItem(p, "label")) {
        printf("%s\t%.4f\n", cJSON_GetStringValue(cJSON_GetObjectItem(p, "label")),
               cJSON_GetNumberValue(cJSON_GetObjectItem(p, "prob")));
    } else {
        printf("%.4f\t%.4f\n", cJSON_GetNumberValue(cJSON_GetObjectItem(p, "loss")),
               cJSON_GetNumberValue(cJSON_GetObjectItem(p, "perplexity")));
    }
    cJSON_Delete(p);
    return CLI_OK;
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *ckpt = NULL;
    bool json = false;
    int first_text = argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--")) {
            first_text = i + 1;
            break;
        } else if (a[0] == '-' && a[1] == '-') return cli_error("predict", CLI_USAGE, "unknown option '%s'", a);
        else {
            first_text = i;
            break;
        }
    }
    if (!dir) return cli_error("predict", CLI_USAGE, "needs --run DIR");
    qkv_run *r = qkv_run_open(dir, ckpt);
    if (!r) return cli_error("predict", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if (!strcmp(qkv_run_model_type(r)->task, "seq2seq") || !strcmp(qkv_run_model_type(r)->task, "tagging")) {
        int rc = cli_error("predict", CLI_INPUT, "not supported for model type '%s' (task %s)",
                           qkv_run_model_type(r)->name, qkv_run_model_type(r)->task);
        qkv_run_free(r);
        return rc;
    }
    int rc = CLI_OK;
    if (first_text < argc) {
        for (int i = first_text; i < argc && rc == CLI_OK; i++) rc = predict_one(r, argv[i], json);
    } else {
        cli_lines *l = cli_read_lines("predict", "-");
        if (!l) rc = CLI_INPUT;
        for (size_t i = 0; l && i < l->n && rc == CLI_OK; i++)
            if (l->line[i][0]) rc = predict_one(r, l->line[i], json);
        cli_lines_free(l);
    }
    qkv_run_free(r);
    return rc;
}

const cli_command cmd_predict = {"predict", "classify (or score) texts with a trained run", run, help};
