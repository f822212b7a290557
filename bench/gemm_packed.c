/* The packed small-M kernel alone (src/ops/gemm_packed.h): y [M, N] = x [M, K] W^T on one thread, on every
 * instruction-set path this CPU runs, against cblas_sgemm on the same operands and against the core's FMA peak
 * (a loop of independent FMAs on the widest vectors of each path: AVX-512 2 ports x 16 lanes x 2 flops = 64
 * flop/cycle, AVX2 32). The ratio to that loop is the kernel's share of peak, whatever the clock does; CPU time of
 * the calling thread, so a loaded machine (other processes on the core) disturbs it less than wall time.
 *
 *   build/bench_gemm_packed [M N K [reps]]     default 64 8000 256 (the vocabulary projection of a batch-64 step)
 *
 * One JSON line per path. Not a test: it asserts nothing (tests/test_gemm_packed.c checks the results). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/isa.h"
#include "ops/gemm_packed.h"
#include "qkv/cpu.h"
#include "qkv/threads.h"

#if QKV_X86_KERNELS
#include <immintrin.h>
#endif
/* The peak loops per path, as src/ops/gemm_packed.c does: target attributes in a portable build; in a native one
 * (everything compiled for this CPU already) none, and only the paths the compiler targets. */
#if QKV_X86_KERNELS && !defined(QKV_NATIVE_BUILD)
#define PEAK512 1
#define PEAK2 1
#define T512 QKV_TARGET_AVX512
#define T2 QKV_TARGET_AVX2
#elif QKV_X86_KERNELS
#if defined(__AVX512F__)
#define PEAK512 1
#else
#define PEAK512 0
#endif
#if defined(__AVX2__) && defined(__FMA__)
#define PEAK2 1
#else
#define PEAK2 0
#endif
#define T512
#define T2
#else
#define PEAK512 0
#define PEAK2 0
#endif

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define PEAK_ITERS 20000000L
static volatile float sink; /* keeps the peak loops from being optimised away */
#if PEAK512
/* 12 independent FMA chains per iteration: more than latency x ports, so the ports never wait. */
static T512 double peak_avx512(void) {
    __m512 a[12], m = _mm512_set1_ps(0.999999f), s = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
    double t0 = cpu_seconds();
    for (long n = 0; n < PEAK_ITERS; n++)
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], m, s);
    double t = cpu_seconds() - t0;
    for (int i = 0; i < 12; i++) sink += _mm512_reduce_add_ps(a[i]);
    return 2.0 * 16 * 12 * (double)PEAK_ITERS / t * 1e-9;
}
#endif

#if PEAK2
static T2 double peak_avx2(void) {
    __m256 a[12], m = _mm256_set1_ps(0.999999f), s = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    double t0 = cpu_seconds();
    for (long n = 0; n < PEAK_ITERS; n++)
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, s);
    double t = cpu_seconds() - t0;
    float out[8];
    for (int i = 0; i < 12; i++) {
        _mm256_storeu_ps(out, a[i]);
        sink += out[0];
    }
    return 2.0 * 8 * 12 * (double)PEAK_ITERS / t * 1e-9;
}
#endif

/* The portable path's peak: the same chains as plain C multiply-adds on 4-float vectors the compiler makes of them
 * for its target (without FMA, as the portable kernel: a multiply and an add each). */
static double peak_generic(void) {
    float a[12][4], m = 0.999999f, s = 1e-7f;
    for (int i = 0; i < 12; i++)
        for (int l = 0; l < 4; l++) a[i][l] = (float)(i + l);
    double t0 = cpu_seconds();
    for (long n = 0; n < PEAK_ITERS; n++) {
#pragma omp simd
        for (int l = 0; l < 4; l++)
            for (int i = 0; i < 12; i++) a[i][l] = a[i][l] * m + s;
    }
    double t = cpu_seconds() - t0;
    for (int i = 0; i < 12; i++) /* every lane, or the compiler drops the lanes never read (clang does) */
        for (int l = 0; l < 4; l++) sink += a[i][l];
    return 2.0 * 4 * 12 * (double)PEAK_ITERS / t * 1e-9;
}

int main(int argc, char **argv) {
    long M = argc > 1 ? atol(argv[1]) : 64, N = argc > 2 ? atol(argv[2]) : 8000, K = argc > 3 ? atol(argv[3]) : 256;
    long reps = argc > 4 ? atol(argv[4]) : 0;
    if (M < 1 || M > QKV__PACKED_MAX_M || N < 1 || K < 1) {
        fprintf(stderr, "usage: bench_gemm_packed [M (1..%d) N K [reps]]\n", QKV__PACKED_MAX_M);
        return 1;
    }
    double flop = 2.0 * (double)M * (double)N * (double)K;
    if (reps < 1) reps = (long)(4e10 / flop) + 1; /* ~0.2-0.4 s a measurement */
    qkv_threads_set(1);
    float *W = malloc(sizeof(float) * (size_t)(N * K)), *x = malloc(sizeof(float) * (size_t)(M * K));
    float *y = malloc(sizeof(float) * (size_t)(M * N));
    if (!W || !x || !y) return 3;
    unsigned s = 12345;
    for (long i = 0; i < N * K; i++) W[i] = (float)((s = s * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
    for (long i = 0; i < M * K; i++) x[i] = (float)((s = s * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;

    double blas = 0;
    for (int pass = 0; pass < 2; pass++) { /* the first pass warms up */
        double t0 = cpu_seconds();
        for (long r = 0; r < reps; r++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x, (int)K, W, (int)K,
                        0.0f, y, (int)N);
        blas = flop * (double)reps / (cpu_seconds() - t0) * 1e-9;
    }
    qkv__pack *p = qkv__pack_new(W, N, K);
    if (!p) return 3;
    qkv_isa was = qkv_cpu_isa();
    for (int i = QKV_ISA_GENERIC; i <= QKV_ISA_AVX512; i++) {
        if (!qkv_cpu_supports((qkv_isa)i) || qkv_cpu_set_isa((qkv_isa)i) != QKV_OK) continue;
        double peak = 0, per_cycle = 0;
        if (i == QKV_ISA_GENERIC) peak = peak_generic(); /* flop per cycle unknown: it depends on the target */
#if PEAK512
        if (i == QKV_ISA_AVX512) peak = peak_avx512(), per_cycle = 64;
#endif
#if PEAK2
        if (i == QKV_ISA_AVX2) peak = peak_avx2(), per_cycle = 32;
#endif
        double gf = 0;
        for (int pass = 0; pass < 2; pass++) {
            double t0 = cpu_seconds();
            for (long r = 0; r < reps; r++) qkv__pack_gemm(p, M, x, K, y, N, false);
            gf = flop * (double)reps / (cpu_seconds() - t0) * 1e-9;
        }
        printf("{\"bench\": \"gemm_packed\", \"isa\": \"%s\", \"M\": %ld, \"N\": %ld, \"K\": %ld, \"reps\": %ld, "
               "\"packed_gflops\": %.1f, \"blas_gflops\": %.1f, \"fma_peak_gflops\": %.1f, \"share_of_peak\": %.3f, "
               "\"flop_per_cycle\": %.1f}\n",
               qkv_cpu_isa_name((qkv_isa)i), M, N, K, reps, gf, blas, peak, peak > 0 ? gf / peak : 0.0,
               peak > 0 ? per_cycle * gf / peak : 0.0);
        fflush(stdout);
    }
    (void)qkv_cpu_set_isa(was);
    qkv__pack_free(p);
    free(W);
    free(x);
    free(y);
    return 0;
}
