/* safetensors header + data: open, list, read every tensor and the metadata. */
#include "fuzz.h"
#include "qkv/qkv.h"
#include "qkv/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    const char *path = fuzz_file(0, ".safetensors", data, size);
    if (!path) return 0;
    qkv_st_file *f = qkv_st_open(path);
    if (!f) return 0;
    for (int i = 0; i < qkv_st_count(f); i++) {
        const char *name = qkv_st_name(f, i), *dtype;
        int ndim;
        int64_t shape[QKV_MAX_DIMS];
        if (qkv_st_info(f, name, &dtype, &ndim, shape) != QKV_OK) continue;
        qkv_tensor *t = qkv_st_read(f, name);
        qkv_tensor_free(t);
    }
    for (int i = 0; i < qkv_st_metadata_count(f); i++) (void)qkv_st_metadata(f, qkv_st_metadata_key(f, i));
    qkv_st_close(f);
    return 0;
}
