/* The checkpoint loader against a fixed small model with an Adam optimiser: shapes, dtypes, missing or extra
 * tensors, and the qkv.* metadata of the training state. QKV_FUZZ_WRITE_SEED=PATH writes a valid checkpoint of the
 * model (a seed) and exits. */
#include "fuzz.h"
#include "qkv/checkpoint.h"
#include "qkv/optim.h"
#include "qkv/params.h"

static qkv_params *params;
static qkv_optim *opt;

static void init(void) {
    if (params) return;
    params = qkv_params_new();
    const int64_t w[2] = {4, 3}, b[1] = {3};
    qkv_tensor *tw = qkv_params_add(params, "enc", "weight", 2, w);
    qkv_tensor *tb = qkv_params_add(params, "enc", "bias", 1, b);
    if (!tw || !tb) abort();
    qkv_optim_config oc = qkv_optim_defaults(QKV_ADAM);
    opt = qkv_optim_new(params, &oc);
    if (!opt) abort();
    const char *seed = getenv("QKV_FUZZ_WRITE_SEED");
    if (seed) {
        qkv_train_state st = {.step = 7, .data_epoch = 1, .data_pos = 2};
        int rc = qkv_checkpoint_save(seed, params, opt, &st, "{\"model\":{\"type\":\"embmean\"}}");
        exit(rc ? 1 : 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    init();
    const char *path = fuzz_file(0, ".safetensors", data, size);
    if (!path) return 0;
    qkv_train_state st;
    char *config = NULL;
    if (qkv_checkpoint_load(path, params, opt, &st, &config) == QKV_OK) free(config);
    (void)qkv_checkpoint_load(path, params, NULL, NULL, NULL); /* weights only */
    return 0;
}
