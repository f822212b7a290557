/* WordPiece vocab.txt: load, then encode a pair of fixed texts and decode the ids. */
#include "fuzz.h"
#include "qkv/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    const char *path = fuzz_file(0, "-vocab.txt", data, size);
    if (!path) return 0;
    qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
    qkv_wordpiece *w = qkv_wordpiece_load(path, &o);
    if (!w) return 0;
    static const char a[] = "Hello, world! Unaffable running\xc3\xa9 \xe4\xb8\xad", b[] = "the [UNK] ##s";
    qkv_encoding e = {0};
    if (qkv_wordpiece_encode(w, a, sizeof a - 1, b, sizeof b - 1, true, &e) == QKV_OK) {
        char *text = NULL;
        size_t len;
        if (qkv_wordpiece_decode(w, e.ids, e.n, &text, &len) == QKV_OK) free(text);
    }
    qkv_encoding_free(&e);
    qkv_wordpiece_free(w);
    return 0;
}
