/* Run configs: parse, resolve against the model type it names (every schema check), read the settings, print. An
 * input may carry "--set" lines after a "#----" line. */
#include "fuzz.h"
#include "cjson/cJSON.h"
#include "qkv/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    size_t alen, blen;
    const uint8_t *b;
    fuzz_split(data, size, &alen, &b, &blen);
    char *text = fuzz_str(data, alen), *sets = fuzz_str(b, blen);
    cJSON *user = qkv_config_parse("config.json", text);
    if (user) {
        for (char *line = strtok(sets, "\n"); line; line = strtok(NULL, "\n")) (void)qkv_config_set(user, line);
        const qkv_model_type *type = NULL;
        cJSON *cfg = qkv_config_resolve(user, &type);
        if (cfg) {
            qkv_run_settings rs;
            (void)qkv_config_settings(cfg, &rs);
            free(qkv_config_print(cfg));
            cJSON_Delete(cfg);
        }
        cJSON_Delete(user);
    }
    free(text);
    free(sets);
    return 0;
}
