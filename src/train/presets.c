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
    {"t5_small", "T5 span-corruption pretraining on the English text of ../shared/data: d 128, 2+2 layers, 60 min",
     "{\"model\": {\"type\": \"t5\", \"d_model\": 128, \"n_heads\": 4, \"d_ff\": 512, \"n_enc_layers\": 2,"
     " \"n_dec_layers\": 2, \"dropout\": 0.1},"
     " \"data\": {\"task\": \"span_corruption\", \"train\": \"../shared/data\", \"dev\": \"../shared/data/lm/dev.txt\","
     " \"max_len\": 128, \"max_vocab\": 16000, \"noise_density\": 0.15, \"mean_span\": 3, \"sentinels\": 100},"
     " \"train\": {\"steps\": 1000000, \"max_seconds\": 3600, \"batch_size\": 32,"
     " \"optimizer\": {\"name\": \"adamw\", \"lr\": 0.001, \"weight_decay\": 0.01},"
     " \"schedule\": {\"spec\": \"constant * linear_warmup\", \"warmup_steps\": 500}, \"clip_norm\": 1.0,"
     " \"log_every\": 50, \"checkpoint_every\": 1000},"
     " \"eval\": {\"every\": 1000, \"batch_size\": 64, \"max_batches\": 20}, \"seed\": 1}"},
    {"t5_tasks", "multi-task fine-tuning of runs/t5_small (init_from) on four tasks of ../shared/data, 30 min",
     "{\"model\": {\"type\": \"t5\", \"d_model\": 128, \"n_heads\": 4, \"d_ff\": 512, \"n_enc_layers\": 2,"
     " \"n_dec_layers\": 2, \"dropout\": 0.1},"
     " \"data\": {\"max_len\": 128, \"tokenizer_from\": \"runs/t5_small\", \"keep_sentinels\": true,"
     " \"tasks\": ["
     "{\"name\": \"translate\", \"prefix\": \"translate English to Spanish:\", \"train\": \"../shared/data/translation/train.tsv\","
     " \"dev\": \"../shared/data/translation/dev.tsv\", \"test\": \"../shared/data/translation/test.tsv\"},"
     "{\"name\": \"summarize\", \"train\": \"../shared/data/summarization/train.tsv\","
     " \"dev\": \"../shared/data/summarization/dev.tsv\", \"test\": \"../shared/data/summarization/test.tsv\", \"metric\": \"rouge\"},"
     "{\"name\": \"sentiment\", \"train\": \"../shared/data/sentiment/train.tsv\", \"dev\": \"../shared/data/sentiment/dev.tsv\","
     " \"test\": \"../shared/data/sentiment/test.tsv\", \"format\": \"label\", \"labels\": \"negative,positive\"},"
     "{\"name\": \"paraphrase\", \"train\": \"../shared/data/paraphrase/train.tsv\", \"dev\": \"../shared/data/paraphrase/dev.tsv\","
     " \"test\": \"../shared/data/paraphrase/test.tsv\", \"format\": \"pair_label\", \"labels\": \"no,yes\"}],"
     " \"mixing\": \"proportional\", \"mixing_cap\": 5000},"
     " \"train\": {\"steps\": 1000000, \"max_seconds\": 1800, \"batch_size\": 32,"
     " \"optimizer\": {\"name\": \"adamw\", \"lr\": 0.0005, \"weight_decay\": 0.01}, \"clip_norm\": 1.0,"
     " \"log_every\": 50, \"checkpoint_every\": 1000},"
     " \"eval\": {\"every\": 1000, \"batch_size\": 64, \"max_batches\": 20},"
     " \"finetune\": {\"init_from\": \"runs/t5_small\"}, \"seed\": 1}"},
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
