/* Named ready-made run configs (config.h, qkv_config_preset): each is the part of a config that differs from the
 * defaults of its model type, resolved like a user's config, so `qkv config show NAME` prints a complete, checked
 * config and `qkv train --config` takes it as written. Paths are relative to the directory qkv runs in (the checkout
 * beside ../shared, as every doc's commands assume). */
#include <cjson/cJSON.h>
#include <string.h>

#include "qkv/config.h"
#include "qkv/error.h"

static const struct {
    const char *name, *summary, *json;
} presets[] = {
    {"bert_small", "BERT pretraining on the English text of ../shared/data: d 256, 4 layers, 4 heads, seq 128, 60 min",
     "{\"model\": {\"type\": \"bert\", \"d_model\": 256, \"n_layers\": 4, \"n_heads\": 4, \"d_ff\": 1024,"
     " \"max_positions\": 128},"
     " \"data\": {\"train\": \"../shared/data\", \"max_len\": 128, \"wordpiece_vocab_size\": 16000,"
     " \"heldout\": 0.01, \"mask_prob\": 0.15, \"max_predictions\": 20, \"nsp\": true, \"masking\": \"epoch\"},"
     " \"train\": {\"steps\": 1000000, \"max_seconds\": 3600, \"batch_size\": 32,"
     " \"optimizer\": {\"name\": \"adamw\", \"lr\": 0.0005, \"weight_decay\": 0.01, \"beta2\": 0.98, \"eps\": 1e-6},"
     " \"schedule\": {\"spec\": \"constant * linear_warmup\", \"warmup_steps\": 1000}, \"clip_norm\": 1.0,"
     " \"log_every\": 50, \"checkpoint_every\": 1000},"
     " \"eval\": {\"every\": 1000, \"batch_size\": 64, \"max_batches\": 30}, \"seed\": 1}"},
};

int qkv_config_preset_count(void) { return (int)(sizeof presets / sizeof presets[0]); }

const char *qkv_config_preset_name(int i, const char **summary) {
    if (i < 0 || i >= qkv_config_preset_count()) return NULL;
    if (summary) *summary = presets[i].summary;
    return presets[i].name;
}

cJSON *qkv_config_preset(const char *name) {
    for (int i = 0; name && i < qkv_config_preset_count(); i++) {
        if (strcmp(presets[i].name, name)) continue;
        cJSON *user = qkv_config_parse(presets[i].name, presets[i].json);
        cJSON *full = user ? qkv_config_resolve(user, NULL) : NULL;
        cJSON_Delete(user);
        return full;
    }
    qkv_error_set(QKV_ERR_INVALID, "no ready-made config named '%s'", name ? name : "");
    return NULL;
}
