/* qkv config: print default configs, list model types, check a config. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/config.h"
#include "qkv/model.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv config show TYPE|PRESET\n"
            "       qkv config explain TYPE\n"
            "       qkv config list\n"
            "       qkv config check FILE [--set key.path=value ...]\n\n"
            "show   prints the complete default run config for a model type: every field with its default\n"
            "       (model fields from the type, then data, train, eval and seed; docs/training.md explains them),\n"
            "       or a ready-made config by name (qkv config list shows them; bert_small: docs/bert.md)\n"
            "explain  every field of a model type's config and of the run sections: key, type, default, allowed\n"
            "       values and what it does\n"
            "list   the registered model types with their task\n"
            "check  resolves a config over the defaults and prints the complete result, or the first error,\n"
            "       naming the key (exit 2); every field is checked, the model's included, by the same code\n"
            "       qkv train uses (only what needs the data waits for training)\n");
}

static int run(int argc, char **argv) {
    if (argc < 2) return cli_error("config", CLI_USAGE, "needs a subcommand: show, explain, list or check");
    if (!strcmp(argv[1], "list")) {
        for (int i = 0; i < qkv_model_type_count(); i++) {
            const qkv_model_type *t = qkv_model_type_at(i);
            printf("%-24s %-9s %s\n", t->name, t->task, t->summary ? t->summary : "");
        }
        for (int i = 0; i < qkv_config_preset_count(); i++) {
            const char *summary, *name = qkv_config_preset_name(i, &summary);
            printf("%-24s %-9s %s\n", name, "preset", summary);
        }
        return CLI_OK;
    }
    cJSON *cfg = NULL;
    if (!strcmp(argv[1], "explain")) {
        if (argc != 3) {
            qkv_model_type_find("");
            return cli_error("config", CLI_USAGE, "usage: qkv config explain TYPE, %s",
                             strstr(qkv_last_error(), "(known"));
        }
        const qkv_model_type *t = qkv_model_type_find(argv[2]);
        if (!t) { /* a ready-made config: its model type's fields */
            cJSON *p = qkv_config_preset(argv[2]);
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "model"), "type");
            if (cJSON_IsString(ty)) t = qkv_model_type_find(ty->valuestring);
            cJSON_Delete(p);
            if (!t) qkv_model_type_find(argv[2]);
        }
        if (!t) return cli_error("config", CLI_USAGE, "%s", qkv_last_error());
        printf("# model: %s (task %s): %s\n", t->name, t->task, t->summary ? t->summary : "");
        char type_def[64];
        snprintf(type_def, sizeof type_def, "\"%s\"", t->name);
        printf("%-32s %-7s default %-12s %s\n", "model.type", "string", type_def, "the model type (qkv config list)");
        if (t->config) qkv_schema_explain(t->config, stdout);
        printf("\n# run: data, train, eval, embeddings, seed\n");
        if (t->data_defaults) printf("# %s sets these data defaults: %s\n", t->name, t->data_defaults);
        qkv_schema_explain(qkv_config_schema(), stdout);
        return CLI_OK;
    }
    if (!strcmp(argv[1], "show")) {
        if (argc != 3) {
            qkv_model_type_find(""); /* the error message lists the known types */
            return cli_error("config", CLI_USAGE, "usage: qkv config show TYPE, %s", strstr(qkv_last_error(), "(known"));
        }
        const qkv_model_type *t = qkv_model_type_find(argv[2]);
        bool preset = false;
        for (int i = 0; !t && i < qkv_config_preset_count(); i++) preset |= !strcmp(qkv_config_preset_name(i, NULL), argv[2]);
        if (!t && !preset) return cli_error("config", CLI_USAGE, "%s; ready-made configs: bert_small", qkv_last_error());
        cfg = t ? qkv_config_defaults(t) : qkv_config_preset(argv[2]);
    } else if (!strcmp(argv[1], "check")) {
        if (argc < 3) return cli_error("config", CLI_USAGE, "usage: qkv config check FILE [--set k=v ...]");
        cJSON *user = qkv_config_read(argv[2]);
        for (int i = 3; user && i < argc; i++) {
            if (strcmp(argv[i], "--set") || i + 1 >= argc) {
                cJSON_Delete(user);
                return cli_error("config", CLI_USAGE, "unexpected argument '%s'", argv[i]);
            }
            if (qkv_config_set(user, argv[++i]) != QKV_OK) {
                cJSON_Delete(user);
                user = NULL;
            }
        }
        cfg = user ? qkv_config_resolve(user, NULL) : NULL;
        cJSON_Delete(user);
    } else {
        return cli_error("config", CLI_USAGE, "unknown subcommand '%s' (show, explain, list, check)", argv[1]);
    }
    if (!cfg) return cli_error("config", CLI_INPUT, "%s", qkv_last_error());
    char *s = qkv_config_print(cfg);
    cJSON_Delete(cfg);
    if (!s) return cli_error("config", CLI_RUNTIME, "%s", qkv_last_error());
    printf("%s\n", s);
    free(s);
    return CLI_OK;
}

const cli_command cmd_config = {"config", "print or check run configs (defaults per model type)", run, help};
