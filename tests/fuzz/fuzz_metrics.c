/* BLEU and ROUGE on arbitrary hypothesis / reference bytes (split at a "#----" line). */
#include "fuzz.h"
#include "qkv/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    size_t alen, blen;
    const uint8_t *b;
    fuzz_split(data, size, &alen, &b, &blen);
    char *hyp = fuzz_str(data, alen), *ref = fuzz_str(b, blen);
    const char *refs[1] = {ref};
    qkv_bleu_result br;
    (void)qkv_bleu_sentence(hyp, refs, 1, NULL, &br);
    const char *hyps[1] = {hyp};
    const char **streams[1] = {refs};
    qkv_bleu_opts bo = qkv_bleu_default_opts();
    if (qkv_bleu_corpus(hyps, 1, streams, 1, &bo, &br) == QKV_OK) {
        char buf[256];
        qkv_bleu_format(&br, buf, sizeof buf);
    }
    free(qkv_bleu_tokenize_13a(hyp));
    qkv_rouge_opts ro = {.use_stemmer = size & 1};
    qkv_rouge_result rr;
    (void)qkv_rouge_score(ref, hyp, &ro, &rr);
    free(hyp);
    free(ref);
    return 0;
}
