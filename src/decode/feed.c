/* Tokens whose scores nobody reads (decode_internal.h): a prompt before its last token. */
#include <stdlib.h>

#include "decode_internal.h"

qkv_status qkv__decode_feed(const qkv_decoder *d, qkv_decoder_state *st, int rows, const int32_t *tokens, int n) {
    if (n < 1) return QKV_OK;
    if (d->ops->prefill) return d->ops->prefill(st, tokens, n);
    /* A model without a prefill takes the tokens one step at a time; the scores go to scratch. */
    float *scores = malloc(sizeof(float) * (size_t)rows * (size_t)(d->info.vocab > 0 ? d->info.vocab : 1));
    int32_t *column = malloc(sizeof(int32_t) * (size_t)rows);
    qkv_status s = scores && column ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "decode: out of memory");
    for (int t = 0; s == QKV_OK && t < n; t++) {
        for (int r = 0; r < rows; r++) column[r] = tokens[(size_t)r * (size_t)n + (size_t)t];
        s = d->ops->step(st, column, scores, NULL);
    }
    free(scores);
    free(column);
    return s;
}
