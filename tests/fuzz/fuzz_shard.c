/* Token shards: open (header checks), then read every id in chunks. */
#include "fuzz.h"
#include "qkv/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    const char *path = fuzz_file(0, ".tok", data, size);
    if (!path) return 0;
    qkv_shard *s = qkv_shard_open(path);
    if (!s) return 0;
    int32_t buf[256];
    uint64_t n = qkv_shard_tokens(s);
    for (uint64_t i = 0; i < n; i += 256) {
        size_t k = n - i < 256 ? (size_t)(n - i) : 256;
        if (qkv_shard_read(s, i, k, buf) != QKV_OK) break;
    }
    (void)qkv_shard_read(s, n, 1, buf); /* past the end: an error, not a read */
    qkv_shard_close(s);
    return 0;
}
