/* Arbitrary bytes through the real tokenizers: GPT-2 byte-level BPE and BERT WordPiece (from
 * $QKV_SHARED/pretrained; without it only the word and char splitters run), and back through decode. */
#include "fuzz.h"
#include "qkv/text.h"

static qkv_bpe *gpt2;
static qkv_wordpiece *bert;

static void init(void) {
    static int done;
    if (done) return;
    done = 1;
    char v[4096], m[4096];
    const char *vp = fuzz_shared("gpt2-tokenizer/vocab.json", v, sizeof v);
    const char *mp = fuzz_shared("gpt2-tokenizer/merges.txt", m, sizeof m);
    if (vp && mp) {
        gpt2 = qkv_bpe_load(vp, mp);
        if (gpt2) qkv_bpe_add_special(gpt2, "<|endoftext|>");
    }
    const char *wp = fuzz_shared("bert-base-uncased-tokenizer/vocab.txt", v, sizeof v);
    qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
    if (wp) bert = qkv_wordpiece_load(wp, &o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    init();
    const char *text = (const char *)data;
    if (gpt2) {
        qkv_encoding e = {0};
        if (qkv_bpe_encode_full(gpt2, text, size, &e) == QKV_OK) {
            char *out = NULL;
            size_t len;
            if (qkv_bpe_decode(gpt2, e.ids, e.n, &out, &len) == QKV_OK) free(out);
        }
        qkv_encoding_free(&e);
    }
    if (bert) {
        size_t alen, blen;
        const uint8_t *b;
        fuzz_split(data, size, &alen, &b, &blen);
        qkv_encoding e = {0};
        if (qkv_wordpiece_encode(bert, text, alen, blen ? (const char *)b : NULL, blen, true, &e) == QKV_OK) {
            char *out = NULL;
            size_t len;
            if (qkv_wordpiece_decode(bert, e.ids, e.n, &out, &len) == QKV_OK) free(out);
        }
        qkv_encoding_free(&e);
    }
    char **toks = NULL;
    size_t n = 0;
    qkv_word_opts wo = {.lowercase = size & 1, .strip_punct = size & 2};
    if (qkv_word_split(text, size, &wo, &toks, &n) == QKV_OK) {
        free(toks);
    }
    if (qkv_char_split(text, size, &toks, &n) == QKV_OK) {
        free(toks);
    }
    return 0;
}
