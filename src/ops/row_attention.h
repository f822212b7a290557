/* One-query dot-product attention for decoding rows over keys and values kept once per source sentence. Not
 * installed.
 *
 * A seq2seq decoding step attends from each live row (a hypothesis) to its own source's encoder states. The rows of
 * one source (a beam) share those states, so a state keeps them per source and each row names its source: nothing
 * is copied per row at start, nothing moves when a beam reorders, and a beam's rows read the same keys from cache.
 * Each row is computed alone, in a fixed order, so its result does not depend on the rows beside it nor on the
 * thread count. */
#ifndef QKV_OPS_ROW_ATTENTION_H
#define QKV_OPS_ROW_ATTENTION_H

#include <stdint.h>

#include "core/visibility.h"

QKV_INTERNAL_BEGIN

/* For each row r of q [R, D], with s = src_of[r]:
 *   w[r, j] = softmax_j(scale * keys[s, j, :] . q[r, :]) over the positions j < S where pad[s, j] == 0,
 *   out[r, :] = sum_j w[r, j] values[s, j, :].
 * keys [n_src, S, D], values [n_src, S, Dv], pad [n_src, S] (nonzero = padded; NULL: none) and the outputs out
 * [R, Dv], w [R, S] are contiguous. A row whose positions are all padded gets zero weights and a zero output. */
void qkv__row_attention(const float *q, int64_t R, int64_t D, const int32_t *src_of, const float *keys,
                        const float *values, int64_t Dv, const float *pad, int64_t S, float scale, float *out,
                        float *w);

QKV_INTERNAL_END
#endif
