/* The one summation kernel the row-wise ops share (reductions, softmax, layer norm): 16 strided partial sums
 * combined pairwise. gcc vectorises it, it is more accurate than a running sum, and its order depends only on n,
 * so results are identical for any thread count. */
#ifndef QKV_OPS_ROW_SUM_H
#define QKV_OPS_ROW_SUM_H

#include <stdint.h>

#define QKV_SUM_LANES 16

/* always_inline: it is then compiled for whichever ISA clone (core/isa.h) calls it. */
static inline __attribute__((always_inline)) float qkv__row_sum(const float *restrict x, int64_t n) {
    float acc[QKV_SUM_LANES] = {0};
    int64_t k = 0;
    for (; k + QKV_SUM_LANES <= n; k += QKV_SUM_LANES)
        for (int l = 0; l < QKV_SUM_LANES; l++) acc[l] += x[k + l];
    for (int l = 0; k < n; k++, l++) acc[l] += x[k];
    for (int w = QKV_SUM_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

#endif
