/* GloVe / word2vec text and binary vector files: load (format chosen by the first byte), then query. */
#include "fuzz.h"
#include "qkv/glove.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
    qkv_vec_format fmt = (qkv_vec_format)(data[0] % 3);
    const char *path = fuzz_file(0, fmt == QKV_VEC_BINARY ? ".bin" : ".txt", data + 1, size - 1);
    if (!path) return 0;
    qkv_vectors *v = qkv_vectors_load(path, fmt);
    if (!v) return 0;
    if (qkv_vectors_count(v) > 1) {
        qkv_vec_hit hits[3];
        int n;
        const char *w = qkv_vectors_word(v, 0);
        if (w) (void)qkv_vectors_similar(v, w, 3, hits, &n);
    }
    qkv_vectors_free(v);
    return 0;
}
