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
/* The same in place: x [rows, n] becomes its log_softmax (summed in float lanes, agreeing with the out-of-place
 * form to rounding). */
void qkv__log_softmax_rows_inplace(float *x, int64_t rows, int64_t n);

QKV_INTERNAL_END
#endif
