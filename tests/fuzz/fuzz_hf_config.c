/* Hugging Face config.json: parse, then check the sizes a model would be built with. */
#include "fuzz.h"
#include "qkv/hf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    char *text = fuzz_str(data, size);
    qkv_hf_config cfg;
    (void)qkv_hf_config_parse(text, "config.json", &cfg);
    free(text);
    return 0;
}
