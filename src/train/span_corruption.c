/* T5's span corruption (include/qkv/span_corruption.h), following t5.data.preprocessors function by function:
 * qkv_span_count / qkv_span_noise_mask are random_spans_noise_mask, qkv_span_lengths is random_spans_helper,
 * qkv_span_corrupt is noise_span_to_unique_sentinel plus nonnoise_span_to_unique_sentinel and the EOS.
 *
 * Roundings are T5's on purpose: tf.round and Python's round both round half to even (rintf / rint in the default
 * rounding mode), the mask's counts are float32 (tf.cast to float32), the helper's are doubles (Python floats).
 */
#include "qkv/span_corruption.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

qkv_span_counts qkv_span_count(int64_t length, float density, float mean_span) {
    if (length < 2) length = 2; /* "increase length to avoid degeneracy" */
    int64_t noise = (int64_t)rintf((float)length * density);
    if (noise < 1) noise = 1;
    if (noise > length - 1) noise = length - 1;
    int64_t spans = (int64_t)rintf((float)noise / mean_span);
    if (spans < 1) spans = 1;
    return (qkv_span_counts){.noise = noise, .nonnoise = length - noise, .spans = spans};
}

/* Input and target lengths of `tokens` raw tokens, with one sentinel per span and an EOS on each side. */
static void helper_lengths(int64_t tokens, double density, double mean_span, int64_t *in, int64_t *tgt) {
    int64_t noise = (int64_t)rint((double)tokens * density);
    int64_t spans = (int64_t)rint((double)noise / mean_span);
    *in = tokens - noise + spans + 1;
    *tgt = noise + spans + 1;
}

qkv_status qkv_span_lengths(int64_t inputs_length, double density, double mean_span, int64_t *tokens_length,
                            int64_t *targets_length) {
    if (inputs_length < 2 || !(density > 0.0 && density < 1.0) || !(mean_span >= 1.0)) {
        qkv_error_set(QKV_ERR_INVALID,
                      "span corruption: inputs_length %lld, noise density %g, mean span %g: need inputs_length >= 2, "
                      "0 < density < 1, mean span >= 1",
                      (long long)inputs_length, density, mean_span);
        return QKV_ERR_INVALID;
    }
    int64_t tokens = inputs_length - 1, in, tgt;
    for (;;) {
        helper_lengths(tokens + 1, density, mean_span, &in, &tgt);
        if (in > inputs_length) break;
        tokens++;
    }
    helper_lengths(tokens, density, mean_span, &in, &tgt);
    /* T5: "minor hack to get the targets length to be equal to inputs length" */
    if (density == 0.5 && tgt > in) {
        tokens--;
        tgt--;
    }
    *tokens_length = tokens;
    *targets_length = tgt;
    return QKV_OK;
}

/* T5's _random_segmentation: num_items split into num_segments non-empty segments, uniformly among all such
 * splits: shuffle a vector with num_segments - 1 ones among num_items - 1 places; a one before item i starts a new
 * segment there. lengths[num_segments]; flags is scratch of num_items entries. */
static void random_segmentation(int64_t num_items, int64_t num_segments, qkv_rng *rng, uint8_t *flags,
                                int64_t *lengths) {
    const int64_t m = num_items - 1;
    for (int64_t i = 0; i < m; i++) flags[i] = i < num_segments - 1;
    for (int64_t i = m - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)qkv_rng_below(rng, (uint32_t)(i + 1));
        uint8_t t = flags[i];
        flags[i] = flags[j];
        flags[j] = t;
    }
    memset(lengths, 0, (size_t)num_segments * sizeof *lengths);
    int64_t seg = 0;
    lengths[0] = 1;
    for (int64_t i = 0; i < m; i++) {
        seg += flags[i];
        lengths[seg]++;
    }
}

qkv_status qkv_span_noise_mask(int64_t length, float density, float mean_span, qkv_rng *rng, uint8_t *mask) {
    if (length < 1 || length > (int64_t)UINT32_MAX || !(density >= 0.0f && density < 1.0f) || !(mean_span >= 1.0f)) {
        qkv_error_set(QKV_ERR_INVALID,
                      "span corruption: length %lld, noise density %g, mean span %g: need length >= 1, "
                      "0 <= density < 1, mean span >= 1",
                      (long long)length, (double)density, (double)mean_span);
        return QKV_ERR_INVALID;
    }
    memset(mask, 0, (size_t)length);
    if (density == 0.0f) return QKV_OK;
    const qkv_span_counts c = qkv_span_count(length, density, mean_span);
    const int64_t padded = length < 2 ? 2 : length; /* T5 masks the raised length, then cuts to the original */
    int64_t *lens = malloc((size_t)(2 * c.spans) * sizeof *lens);
    uint8_t *flags = malloc((size_t)padded);
    if (!lens || !flags) {
        free(lens);
        free(flags);
        qkv_error_set(QKV_ERR_NOMEM, "span corruption: out of memory for %lld tokens", (long long)length);
        return QKV_ERR_NOMEM;
    }
    int64_t *noise = lens, *nonnoise = lens + c.spans;
    random_segmentation(c.noise, c.spans, rng, flags, noise);
    random_segmentation(c.nonnoise, c.spans, rng, flags, nonnoise);
    int64_t pos = 0;
    for (int64_t s = 0; s < c.spans; s++) {
        pos += nonnoise[s];
        for (int64_t k = 0; k < noise[s]; k++, pos++)
            if (pos < length) mask[pos] = 1;
    }
    free(lens);
    free(flags);
    return QKV_OK;
}

/* Tokens with each span whose mask equals `drop` replaced by one sentinel, counting down from vocab_size - 1. */
static int64_t replace_spans(const int32_t *tokens, const uint8_t *mask, int64_t n, uint8_t drop, int32_t vocab_size,
                             int32_t *out) {
    int64_t len = 0;
    int32_t sentinel = vocab_size - 1;
    for (int64_t i = 0; i < n; i++) {
        bool m = (mask[i] != 0) == (drop != 0);
        if (!m) {
            out[len++] = tokens[i];
        } else if (i == 0 || ((mask[i - 1] != 0) != (drop != 0))) { /* first token of a replaced span */
            out[len++] = sentinel--;
        }
    }
    return len;
}

qkv_status qkv_span_corrupt(const int32_t *tokens, const uint8_t *mask, int64_t n, int32_t vocab_size, int32_t eos,
                            int32_t *inputs, int64_t *n_inputs, int32_t *targets, int64_t *n_targets) {
    /* Spans of either kind: each noise span starts after a non-noise token or at 0, and vice versa. */
    int64_t spans = 0;
    for (int64_t i = 0; i < n; i++) spans += i == 0 || (mask[i] != 0) != (mask[i - 1] != 0);
    const int64_t lowest = (int64_t)vocab_size - (spans + 1) / 2 - 1; /* at most ceil(spans / 2) of one kind */
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] > lowest) {
            qkv_error_set(QKV_ERR_INVALID,
                          "span corruption: token %d at %lld collides with the sentinels (ids above %lld of a "
                          "vocabulary of %d)",
                          tokens[i], (long long)i, (long long)lowest, vocab_size);
            return QKV_ERR_INVALID;
        }
    if (lowest < 1 || (eos > lowest)) {
        qkv_error_set(QKV_ERR_INVALID, "span corruption: a vocabulary of %d has no room for %lld sentinels below it%s",
                      vocab_size, (long long)((spans + 1) / 2), eos > lowest ? " (EOS among them)" : "");
        return QKV_ERR_INVALID;
    }
    int64_t ni = replace_spans(tokens, mask, n, 1, vocab_size, inputs);
    int64_t nt = replace_spans(tokens, mask, n, 0, vocab_size, targets);
    if (eos >= 0) {
        inputs[ni++] = eos;
        targets[nt++] = eos;
    }
    *n_inputs = ni;
    *n_targets = nt;
    return QKV_OK;
}
