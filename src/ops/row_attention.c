/* One-query attention of decoding rows over per-source keys and values (row_attention.h). */
#include <math.h>
#include <string.h>

#include "core/isa.h"
#include "core/par.h"
#include "ops/fast_exp.h"
#include "ops/row_attention.h"
#include "ops/row_sum.h"

/* a . b in 16 lanes combined pairwise (the order depends on n only). */
QKV_KERNEL_BODY float dot_body(const float *restrict a, const float *restrict b, int64_t n) {
    float acc[QKV_SUM_LANES] = {0};
    int64_t k = 0;
    for (; k + QKV_SUM_LANES <= n; k += QKV_SUM_LANES)
        for (int l = 0; l < QKV_SUM_LANES; l++) acc[l] += a[k + l] * b[k + l];
    for (int l = 0; k < n; k++, l++) acc[l] += a[k] * b[k];
    for (int h = QKV_SUM_LANES / 2; h > 0; h /= 2)
        for (int l = 0; l < h; l++) acc[l] += acc[l + h];
    return acc[0];
}

/* One row: scores, masked softmax, weighted sum of the value rows. */
QKV_KERNEL_BODY void row_one_body(const float *restrict q, int64_t D, const float *restrict K, const float *restrict V,
                              int64_t Dv, const float *restrict pad, int64_t S, float scale, float *restrict out,
                              float *restrict w) {
    float m = -INFINITY;
    for (int64_t j = 0; j < S; j++) {
        if (pad && pad[j] != 0.0f) continue;
        w[j] = scale * dot_body(K + j * D, q, D);
        m = w[j] > m ? w[j] : m;
    }
    memset(out, 0, sizeof(float) * (size_t)Dv);
    if (m == -INFINITY) { /* every position padded (or every score -inf): nothing to attend to */
        memset(w, 0, sizeof(float) * (size_t)S);
        return;
    }
    for (int64_t j = 0; j < S; j++) w[j] = pad && pad[j] != 0.0f ? 0.0f : qkv__expf(w[j] - m);
    float inv = 1.0f / qkv__row_sum(w, S);
    for (int64_t j = 0; j < S; j++) {
        w[j] *= inv;
        const float a = w[j], *v = V + j * Dv;
        if (a != 0.0f)
            for (int64_t k = 0; k < Dv; k++) out[k] += a * v[k];
    }
}

QKV_ISA_KERNEL_VOID(row_one,
                    (const float *restrict q, int64_t D, const float *restrict K, const float *restrict V, int64_t Dv,
                     const float *restrict pad, int64_t S, float scale, float *restrict out, float *restrict w),
                    (q, D, K, V, Dv, pad, S, scale, out, w))

void qkv__row_attention(const float *q, int64_t R, int64_t D, const int32_t *src_of, const float *keys,
                        const float *values, int64_t Dv, const float *pad, int64_t S, float scale, float *out,
                        float *w) {
    /* scores and weighted values over keys and values read from memory once; every row computed whole by one thread */
    int nth = qkv__par_threads((1.0 + QKV__PAR_STREAM) * (double)R * (double)S * (double)(D + Dv));
#pragma omp parallel for schedule(static) num_threads(nth)
    for (int64_t r = 0; r < R; r++) {
        const int64_t s = src_of[r];
        row_one(q + r * D, D, keys + s * S * D, values + s * S * Dv, Dv, pad ? pad + s * S : NULL, S, scale,
                out + r * Dv, w + r * S);
    }
}
