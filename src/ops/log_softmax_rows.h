/* log_softmax over the rows of a plain buffer, for decoding steps that hand their caller next-token scores
 * [rows, V]: the result goes straight into the caller's buffer (no tensor, no autograd node, no copy).
 * Not installed. Rows are independent, so the result does not depend on the thread count. */
#ifndef QKV_OPS_LOG_SOFTMAX_ROWS_H
#define QKV_OPS_LOG_SOFTMAX_ROWS_H

#include <stdint.h>

#include "core/visibility.h"

QKV_INTERNAL_BEGIN

/* y [rows, n] = log_softmax(x [rows, n]) along each row, bit-identical to qkv_log_softmax(x, -1). y != x. */
void qkv__log_softmax_rows(float *y, const float *x, int64_t rows, int64_t n);
/* The same in place: x [rows, n] becomes its log_softmax (the same sums in the same order as the out-of-place form,
 * so the same bits: tests/test_decode.c greedy_from_logits_equals_normalised). */
void qkv__log_softmax_rows_inplace(float *x, int64_t rows, int64_t n);
/* What the in-place form subtracts from each row, without writing it: shift[r] = max + log(sum exp(x - max)) and
 * mx[r] = the row's max (over its non-NaN values; -inf if none). x[r][k] - shift[r] is then bit for bit the in-place
 * result, so a caller that reads a few entries of each row (greedy decoding: the best token and its log-probability)
 * skips the pass that writes them all. */
void qkv__log_softmax_rows_shift(const float *x, int64_t rows, int64_t n, float *shift, float *mx);
/* The same shifts handed to each(user, r, row r, shift, mx) on every row right after they are computed, on the
 * thread that computed them, while the row is still in L1 (greedy decoding's pick of the best token reads the whole
 * row again). each runs concurrently for different rows and may write its own row. */
typedef void (*qkv__row_shift_fn)(void *user, int64_t r, float *row, float shift, float mx);
void qkv__log_softmax_rows_shift_each(float *x, int64_t rows, int64_t n, qkv__row_shift_fn each, void *user);

QKV_INTERNAL_END
#endif
