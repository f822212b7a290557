/* The training data of each task, read as `qkv train` reads it: the first byte picks the task (classify TSV, lm
 * text, seq2seq TSV) and tokenizer; the tokenizer files are built fresh in a scratch run directory. */
#include <sys/stat.h>

#include "fuzz.h"
#include "cjson/cJSON.h"
#include "qkv/config.h"
#include "train/train_internal.h"

static const struct {
    const char *model, *task, *tokenizer, *suffix;
} kinds[] = {
    {"embmean", "classify", "word", ".tsv"},
    {"gpt", "lm", "char", ".txt"},
    {"gpt", "lm", "word", ".txt"},
    {"gpt", "lm", "bpe", ".txt"},
    {"transformer_seq2seq", "seq2seq", "word", ".tsv"},
    {"transformer_seq2seq", "seq2seq", "bpe", ".tsv"},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536) return 0;
    int k = data[0] % (int)(sizeof kinds / sizeof kinds[0]);
    const char *path = fuzz_file(0, kinds[k].suffix, data + 1, size - 1);
    const char *dir = fuzz_path(1, "-run");
    if (!path) return 0;
    mkdir(dir, 0700);
    cJSON *user = cJSON_CreateObject();
    cJSON *model = cJSON_AddObjectToObject(user, "model");
    cJSON_AddStringToObject(model, "type", kinds[k].model);
    cJSON *d = cJSON_AddObjectToObject(user, "data");
    cJSON_AddStringToObject(d, "train", path);
    cJSON_AddStringToObject(d, "tokenizer", kinds[k].tokenizer);
    cJSON_AddNumberToObject(d, "bpe_vocab_size", 300);
    cJSON_AddNumberToObject(d, "seq_len", 8);
    cJSON_AddNumberToObject(d, "max_len", 16);
    cJSON_AddBoolToObject(d, "lowercase", data[0] & 64);
    const qkv_model_type *type = NULL;
    cJSON *cfg = qkv_config_resolve(user, &type);
    if (cfg) {
        task t;
        split s = {0};
        if (qkv__task_prepare(&t, cfg, kinds[k].task, dir, true) == QKV_OK) {
            (void)qkv__task_load(&t, path, &s);
            qkv__split_free(&s);
        }
        qkv__task_free(&t);
        cJSON_Delete(cfg);
    }
    cJSON_Delete(user);
    return 0;
}
