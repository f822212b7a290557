/* One-row products y = x W^T for decoding steps of a single row. Not installed.
 *
 * A step of one row reads every weight once: bound by memory bandwidth, so a dot product per output is as fast as
 * any blocking. BLAS would do the same but decides its own threads: OpenBLAS spreads a 1 x 8000 x 256 product over
 * every thread, which on a core shared with another process costs more than it saves. Here the outputs are split
 * over qkv__par_threads (core/par.h), which follows the work and the idle cores. Each output is one dot product
 * over k in a fixed order (32 partial sums), so the result depends neither on the thread count nor on M, and every
 * instruction-set path computes the portable path's bits. */
#ifndef QKV_OPS_GEMV_H
#define QKV_OPS_GEMV_H

#include <stdint.h>

#include "core/visibility.h"

QKV_INTERNAL_BEGIN

/* y [M, N] = x [M, K] W^T (+ b), x rows contiguous, W [N, K] row-major, b [N] or NULL; y does not overlap x, W, b. */
void qkv__gemv_xwt(int64_t M, int64_t N, int64_t K, const float *x, const float *W, const float *b, float *y);

QKV_INTERNAL_END
#endif
