#include "random_model.h"

#include <cjson/cJSON.h>

#include "test.h"

bool test_random_model(const qkv_model_type *t, const char *over_json, const qkv_task_info *info, uint64_t seed,
                       qkv_params **p, qkv_model **m) {
    cJSON *cfg = t->default_config ? cJSON_Parse(t->default_config) : cJSON_CreateObject();
    cJSON *over = cJSON_Parse(over_json);
    for (cJSON *it = over ? over->child : NULL; cfg && it; it = it->next) {
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, it->string);
        cJSON_AddItemToObject(cfg, it->string, cJSON_Duplicate(it, true));
    }
    *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, seed);
    *m = cfg ? t->create(cfg, info, *p, &rng) : NULL;
    cJSON_Delete(cfg);
    cJSON_Delete(over);
    CHECKF(*m != NULL, "%s create: %s", t->name, qkv_last_error());
    return *m != NULL;
}
