/* GPT-2 vocab.json + merges.txt (the input holds both, split at a "#----" line): load, encode, decode. */
#include "fuzz.h"
#include "qkv/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    size_t alen, blen;
    const uint8_t *b;
    fuzz_split(data, size, &alen, &b, &blen);
    const char *vocab = fuzz_file(0, "-vocab.json", data, alen);
    const char *merges = fuzz_file(1, "-merges.txt", b, blen);
    if (!vocab || !merges) return 0;
    qkv_bpe *bpe = qkv_bpe_load(vocab, merges);
    if (!bpe) return 0;
    static const char text[] = "Hello world, it's 2024!  \xc3\xa9t\xc3\xa9 lower newest<|endoftext|>";
    int32_t *ids = NULL;
    size_t n = 0;
    if (qkv_bpe_encode(bpe, text, sizeof text - 1, &ids, &n) == QKV_OK) {
        char *out = NULL;
        size_t len;
        if (qkv_bpe_decode(bpe, ids, n, &out, &len) == QKV_OK) free(out);
    }
    free(ids);
    qkv_bpe_free(bpe);
    return 0;
}
