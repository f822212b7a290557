/* T5's span corruption (Raffel et al. 2020, t5.data.preprocessors.span_corruption): a fraction `density` of the
 * tokens, in spans of mean length `mean_span`, is removed from the input; each removed span becomes one sentinel
 * (<extra_id_0>, <extra_id_1>, ... = vocab_size - 1, vocab_size - 2, ...), and the target lists each sentinel
 * followed by the tokens it replaced, then EOS.
 *
 * The arithmetic is T5's, including its roundings (round half to even, float32 in the mask, double in the length
 * helper), so lengths agree with T5's to the token; the two random segmentations use qkv's Philox generator
 * instead of TensorFlow's stateless shuffle (same distribution, other draws).
 */
#ifndef QKV_SPAN_CORRUPTION_H
#define QKV_SPAN_CORRUPTION_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/error.h"
#include "qkv/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_span_counts {
    int64_t noise;    /* noise tokens: round(length * density), at least 1 and at most length - 1 */
    int64_t nonnoise; /* length - noise */
    int64_t spans;    /* noise spans (= non-noise spans): max(1, round(noise / mean_span)) */
} qkv_span_counts;

/* The counts random_spans_noise_mask uses for a sequence of `length` tokens (length raised to 2 as T5 does). */
qkv_span_counts qkv_span_count(int64_t length, float density, float mean_span);

/* T5's random_spans_helper with one extra token per span on each side: the number of raw tokens to corrupt so that
 * the input (non-noise tokens, one sentinel per span, EOS) has inputs_length tokens, and the target's length
 * (noise tokens, one sentinel per span, EOS). inputs_length 128, density 0.15, mean span 3 give 141 and 29.
 * QKV_ERR_INVALID for inputs_length < 2, density outside (0, 1) or mean_span < 1. */
qkv_status qkv_span_lengths(int64_t inputs_length, double density, double mean_span, int64_t *tokens_length,
                            int64_t *targets_length);

/* T5's random_spans_noise_mask: mask[i] = 1 for noise. Non-noise and noise span lengths are random segmentations
 * (every segment non-empty) of the counts above, interleaved non-noise first, so the mask starts with non-noise and
 * ends with noise. Draws from rng. density 0 gives no noise. QKV_ERR_INVALID for length < 1, density outside
 * [0, 1) or mean_span < 1. */
qkv_status qkv_span_noise_mask(int64_t length, float density, float mean_span, qkv_rng *rng, uint8_t *mask);

/* Apply a noise mask to tokens[n]: inputs = the tokens with each noise span replaced by the next sentinel, targets =
 * the tokens with each non-noise span replaced by the next sentinel (T5's noise_span_to_unique_sentinel and
 * nonnoise_span_to_unique_sentinel), both followed by eos unless eos < 0. Sentinel k is vocab_size - 1 - k.
 * inputs and targets need room for n + 1 ids each; the lengths written go to *n_inputs, *n_targets.
 * QKV_ERR_INVALID if the sentinels would reach id 0 or collide with a token (a token id >= the lowest sentinel). */
qkv_status qkv_span_corrupt(const int32_t *tokens, const uint8_t *mask, int64_t n, int32_t vocab_size, int32_t eos,
                            int32_t *inputs, int64_t *n_inputs, int32_t *targets, int64_t *n_targets);

#ifdef __cplusplus
}
#endif
#endif
