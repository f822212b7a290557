/* Named ready-made run configs (config.h, qkv_config_preset): the model files offer them (qkv_model_type.presets,
 * each the part of a config that differs from the defaults of its model type); this file lists them over the
 * registry and resolves one like a user's config, so `qkv config show NAME` prints a complete, checked config and
 * `qkv train --config` takes it as written. */
#include <cjson/cJSON.h>
#include <string.h>

#include "qkv/config.h"
#include "qkv/error.h"
#include "qkv/model.h"

/* The i-th preset over every model type's list, in registry order; NULL past the end. */
static const qkv_model_preset *preset_at(int i) {
    for (int k = 0, n = qkv_model_type_count(); k < n; k++) {
        const qkv_model_preset *p = qkv_model_type_at(k)->presets;
        for (; p && p->name; p++)
            if (i-- == 0) return p;
    }
    return NULL;
}

int qkv_config_preset_count(void) {
    int n = 0;
    while (preset_at(n)) n++;
    return n;
}

const char *qkv_config_preset_name(int i, const char **summary) {
    const qkv_model_preset *p = i >= 0 ? preset_at(i) : NULL;
    if (!p) return NULL;
    if (summary) *summary = p->summary;
    return p->name;
}

cJSON *qkv_config_preset(const char *name) {
    for (int i = 0; name && preset_at(i); i++) {
        const qkv_model_preset *p = preset_at(i);
        if (strcmp(p->name, name)) continue;
        cJSON *user = qkv_config_parse(p->name, p->json);
        cJSON *full = user ? qkv_config_resolve(user, NULL) : NULL;
        cJSON_Delete(user);
        return full;
    }
    qkv_error_set(QKV_ERR_INVALID, "no ready-made config named '%s'", name ? name : "");
    return NULL;
}
