/* One-row products (gemv.h). */
#include "core/isa.h"
#include "core/par.h"
#include "ops/gemv.h"

/* Each sum is written as separate multiplies and adds in a fixed order, and clang is told not to fuse them (GCC does
 * not in ISO C), so every instruction-set path computes the bits of the portable one. */
#if defined(__clang__)
#define NO_CONTRACT _Pragma("clang fp contract(off)")
#else
#define NO_CONTRACT
#endif

/* One output: W's row . x, with 32 independent partial sums so the loop runs at load speed. */
QKV_KERNEL_BODY float row_dot(const float *restrict w, const float *restrict x, int64_t in) {
    NO_CONTRACT
    float acc[32] = {0};
    int64_t k = 0;
    for (; k + 32 <= in; k += 32)
        for (int j = 0; j < 32; j++) acc[j] += w[k + j] * x[k + j];
    float s = 0.0f;
    for (int j = 0; j < 32; j++) s += acc[j];
    for (; k < in; k++) s += w[k] * x[k];
    return s;
}

/* Outputs [lo, hi) of y [M, out] = x [M, in] W^T (+ b), flattened: output i is row i / out of x against row
 * i % out of W. */
QKV_KERNEL_BODY void gemv_range_body(const float *restrict W, const float *restrict x, int64_t in, int64_t out,
                                     const float *restrict b, int64_t lo, int64_t hi, float *restrict y) {
    for (int64_t i = lo; i < hi; i++) {
        int64_t r = i / out, o = i % out;
        float s = row_dot(W + o * in, x + r * in, in);
        y[i] = b ? b[o] + s : s;
    }
}
QKV_ISA_KERNEL_VOID(gemv_range,
                    (const float *restrict W, const float *restrict x, int64_t in, int64_t out,
                     const float *restrict b, int64_t lo, int64_t hi, float *restrict y),
                    (W, x, in, out, b, lo, hi, y))

void qkv__gemv_xwt(int64_t M, int64_t N, int64_t K, const float *x, const float *W, const float *b, float *y) {
    int64_t total = M * N, chunks = (total + 63) / 64;
    int nth = qkv__par_threads(qkv__par_gemm_work(M, N, K));
#pragma omp parallel for schedule(static) num_threads(nth)
    for (int64_t ch = 0; ch < chunks; ch++)
        gemv_range(W, x, K, N, b, ch * 64, (ch + 1) * 64 < total ? (ch + 1) * 64 : total, y);
}
