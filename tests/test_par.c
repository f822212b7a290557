/* Threads a parallel region gets (src/core/par.h) and the one-row product that asks for them (src/ops/gemv.h):
 * small work stays on the calling thread, large work gets the thread count cut to the idle cores, the idle-core
 * estimate is a core count once it has an interval to measure, and the GEMV's bits depend neither on the thread
 * count, nor on the rows beside a row, nor on the instruction-set path; and a region run on one thread leaves the
 * next region its whole thread count. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/par.h"
#include "ops/gemv.h"
#include "qkv/cpu.h"
#include "test.h"

TEST(small_work_stays_on_one_thread) {
    int threads = qkv_threads_get();
    qkv_threads_set(2);
    qkv__par_set_cores_free(2);
    CHECK(qkv__par_threads(0) == 1);
    CHECK(qkv__par_threads(QKV__PAR_MIN / 2) == 1);
    CHECK(qkv__par_threads(NAN) == 1);
    CHECKF(qkv__par_threads(QKV__PAR_MIN) == 2, "work at the threshold got %d threads", qkv__par_threads(QKV__PAR_MIN));
    qkv_threads_set(1);
    CHECK(qkv__par_threads(1e12) == 1);
    qkv__par_set_cores_free(0);
    qkv_threads_set(threads);
}

TEST(threads_cut_to_idle_cores) {
    int threads = qkv_threads_get();
    qkv_threads_set(4);
    const double mid = QKV__PAR_MIN * 2; /* worth threads, but not when the cores are busy */
    qkv__par_set_cores_free(1);
    CHECK(qkv__par_threads(mid) == 1);
    qkv__par_set_cores_free(3);
    CHECK(qkv__par_threads(mid) == 3);
    qkv__par_set_cores_free(8); /* more idle cores than threads: the thread count */
    CHECK(qkv__par_threads(mid) == 4);
    qkv__par_set_cores_free(1); /* a region past QKV__PAR_SHARED_MIN takes every thread all the same */
    CHECK(qkv__par_threads(QKV__PAR_SHARED_MIN) == 4);
    int inside = 0;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        inside = omp_get_num_threads() > 1 ? qkv__par_threads(1e12) : 1; /* a team of 1 would test nothing */
    }
    CHECKF(inside == 1, "inside a parallel region: %d threads", inside);
    qkv__par_set_cores_free(0);
    qkv_threads_set(threads);
}

/* A region that ran on one thread leaves the next region of the thread its whole thread count: under clang's OpenMP
 * runtime an if clause beside num_threads did not (src/core/par.h), and an OpenBLAS GEMM next waited forever. */
TEST(one_thread_region_leaves_the_next_its_threads) {
    int threads = qkv_threads_get();
    qkv_threads_set(2);
    qkv__par_set_cores_free(2);
    const int64_t N = 8, K = 8;
    float W[8 * 8] = {0}, x[8] = {0}, y[8];
    CHECK(qkv__par_threads(qkv__par_gemm_work(1, N, K)) == 1); /* too small for threads */
    qkv__gemv_xwt(1, N, K, x, W, NULL, y);
    int team = 0;
#pragma omp parallel
    {
#pragma omp single
        team = omp_get_num_threads();
    }
    CHECKF(team == 2, "the region after a one-thread region ran on %d threads of 2", team);
    qkv__par_set_cores_free(0);
    qkv_threads_set(threads);
}

/* The measured estimate: unknown before its first interval, then a core count of this machine. */
TEST(idle_cores_measured) {
    if (access("/proc/stat", R_OK) != 0) {
        test_skip("no /proc/stat: every core counts as idle");
        return;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int first = qkv__par_cores_free();
    CHECKF(first >= 0 && first <= ncpu, "first estimate %d of %ld cores", first, ncpu);
    struct timespec wait = {0, 300 * 1000 * 1000};
    nanosleep(&wait, NULL);
    int f = qkv__par_cores_free();
    CHECKF(f >= 1 && f <= ncpu, "after 300 ms: %d idle cores of %ld", f, ncpu);
}

/* Large enough to be threaded (N x K weights streamed), K not a multiple of the 32 partial sums. */
TEST(gemv_same_bits_any_threads_rows_or_path) {
    const int64_t M = 3, N = 4001, K = 301;
    float *W = test_rand_buf(1, (size_t)(N * K)), *x = test_rand_buf(2, (size_t)(M * K)), *b = test_rand_buf(3, (size_t)N);
    float *ref = malloc(sizeof(float) * (size_t)(M * N)), *y = malloc(sizeof(float) * (size_t)(M * N));
    CHECK(W && x && b && ref && y);
    if (!W || !x || !b || !ref || !y) goto done;
    CHECK(qkv__par_gemm_work(1, N, K) >= QKV__PAR_MIN); /* one row alone is threaded too */
    int threads = qkv_threads_get();
    qkv_isa was = qkv_cpu_isa();
    CHECK_OK(qkv_cpu_set_isa(QKV_ISA_GENERIC));
    qkv_threads_set(1);
    qkv__gemv_xwt(M, N, K, x, W, b, ref);
    double worst = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = b[j];
            for (int64_t k = 0; k < K; k++) s += (double)x[i * K + k] * W[j * K + k];
            worst = fmax(worst, fabs(s - ref[i * N + j]));
        }
    CHECKF(worst < 1e-4, "off by %g from a double sum", worst);
    qkv_threads_set(2);
    qkv__par_set_cores_free(2);
    for (int i = QKV_ISA_GENERIC; i <= QKV_ISA_AVX512; i++) {
        if (!qkv_cpu_supports((qkv_isa)i)) continue;
        CHECK_OK(qkv_cpu_set_isa((qkv_isa)i));
        memset(y, 0, sizeof(float) * (size_t)(M * N));
        qkv__gemv_xwt(M, N, K, x, W, b, y);
        CHECKF(!memcmp(y, ref, sizeof(float) * (size_t)(M * N)), "%s, 2 threads: not the bits of one thread",
               qkv_cpu_isa_name((qkv_isa)i));
        qkv__gemv_xwt(1, N, K, x + 2 * K, W, b, y); /* the last row alone */
        CHECKF(!memcmp(y, ref + 2 * N, sizeof(float) * (size_t)N), "%s: a row alone differs",
               qkv_cpu_isa_name((qkv_isa)i));
    }
    qkv_threads_set(1);
    qkv__gemv_xwt(1, N, K, x, W, NULL, y); /* no bias: the bare sums */
    CHECK(fabs((double)y[7] + b[7] - ref[7]) < 1e-5);
    CHECK_OK(qkv_cpu_set_isa(was));
    qkv__par_set_cores_free(0);
    qkv_threads_set(threads);
done:
    free(W);
    free(x);
    free(b);
    free(ref);
    free(y);
}

int main(void) {
    RUN(small_work_stays_on_one_thread);
    RUN(threads_cut_to_idle_cores);
    RUN(one_thread_region_leaves_the_next_its_threads);
    RUN(idle_cores_measured);
    RUN(gemv_same_bits_any_threads_rows_or_path);
    return test_finish();
}
