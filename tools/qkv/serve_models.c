/* The runs qkv serve answers for, by name, and the endpoints each run's task offers. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qkv/model.h"
#include "serve.h"

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* The task a run is served by: its config's data.task when that names one ("summarize"), else the model type's. */
static const char *run_task(qkv_run *r) {
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(qkv_run_config(r), "data");
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(data, "task"));
    if (t && !strcmp(t, "summarize")) return "summarize";
    return qkv_run_model_type(r)->task;
}

bool serve_models_add(serve_models *ms, const char *spec) {
    const char *eq = strchr(spec, '='), *dir = eq ? eq + 1 : spec;
    char *name;
    if (eq) {
        name = dup_n(spec, (size_t)(eq - spec));
    } else { /* the directory's last component, trailing slashes ignored */
        size_t end = strlen(dir);
        while (end > 1 && dir[end - 1] == '/') end--;
        size_t start = end;
        while (start > 0 && dir[start - 1] != '/') start--;
        name = dup_n(dir + start, end - start);
    }
    if (!name) return cli_error("serve", CLI_RUNTIME, "out of memory"), false;
    if (!name[0] || !*dir) {
        free(name);
        return cli_error("serve", CLI_USAGE, "--run '%s': expected DIR or NAME=DIR", spec), false;
    }
    for (int i = 0; i < ms->n; i++)
        if (!strcmp(ms->m[i].name, name)) {
            cli_error("serve", CLI_USAGE, "two runs are named '%s' (use --run NAME=DIR)", name);
            free(name);
            return false;
        }
    serve_model *grown = realloc(ms->m, sizeof *grown * (size_t)(ms->n + 1));
    if (!grown) {
        free(name);
        return cli_error("serve", CLI_RUNTIME, "out of memory"), false;
    }
    ms->m = grown;
    qkv_run *r = qkv_run_open(dir, NULL);
    if (!r) {
        cli_error("serve", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        free(name);
        return false;
    }
    serve_model *m = &ms->m[ms->n];
    *m = (serve_model){.name = name, .dir = dup_n(dir, strlen(dir)), .run = r, .task = run_task(r)};
    ms->n++;
    return true;
}

void serve_models_free(serve_models *ms) {
    for (int i = 0; i < ms->n; i++) {
        qkv_run_free(ms->m[i].run);
        free(ms->m[i].name);
        free(ms->m[i].dir);
    }
    free(ms->m);
    ms->m = NULL;
    ms->n = 0;
}

serve_model *serve_models_find(serve_models *ms, serve_endpoint ep, const char *name, char *msg, size_t msg_size) {
    const char *task = serve_endpoint_task(ep);
    for (int i = 0; i < ms->n; i++) {
        serve_model *m = &ms->m[i];
        if (name ? strcmp(m->name, name) != 0 : strcmp(m->task, task) != 0) continue;
        if (!strcmp(m->task, task)) return m;
        snprintf(msg, msg_size, "field 'model': run '%s' has task %s; %s needs a %s run", m->name, m->task,
                 serve_endpoint_path(ep), task);
        return NULL;
    }
    if (name) snprintf(msg, msg_size, "field 'model': no run named '%.200s' (GET /v1/models lists them)", name);
    else snprintf(msg, msg_size, "field 'model': no run served here has task %s, which %s needs", task,
                  serve_endpoint_path(ep));
    return NULL;
}

cJSON *serve_models_json(const serve_models *ms) {
    cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "models");
    for (int i = 0; list && i < ms->n; i++) {
        const serve_model *m = &ms->m[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", m->name);
        cJSON_AddStringToObject(e, "dir", m->dir);
        cJSON_AddStringToObject(e, "type", qkv_run_model_type(m->run)->name);
        cJSON_AddStringToObject(e, "task", m->task);
        cJSON_AddNumberToObject(e, "step", (double)qkv_run_step(m->run));
        cJSON *eps = cJSON_AddArrayToObject(e, "endpoints");
        for (int k = 0; k < SERVE_N_ENDPOINTS; k++)
            if (!strcmp(serve_endpoint_task((serve_endpoint)k), m->task))
                cJSON_AddItemToArray(eps, cJSON_CreateString(serve_endpoint_path((serve_endpoint)k)));
        cJSON_AddItemToObject(e, "config", cJSON_Duplicate(qkv_run_config(m->run), true));
        cJSON_AddItemToArray(list, e);
    }
    return o;
}
