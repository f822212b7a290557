/* How many threads a parallel region gets (core/par.c). Not installed.
 *
 * Work is counted in multiply-adds of a vectorised loop over data in cache. A loop that reads a float from memory
 * once (a weight a one-row step streams past) is bound by that read, not by its arithmetic: each such float counts
 * QKV__PAR_STREAM. The rule and its numbers: docs/design.md "Threads under load". */
#ifndef QKV_CORE_PAR_H
#define QKV_CORE_PAR_H

#include <stdint.h>

#include "core/visibility.h"

QKV_INTERNAL_BEGIN

/* Work of one float read from memory, in multiply-adds. */
#define QKV__PAR_STREAM 8.0
/* Work below which a region runs on the calling thread: waking a sleeping worker and waiting for it at the end
 * costs more than the region saves. */
#ifndef QKV__PAR_MIN /* a build may set its own, to measure the gates */
#define QKV__PAR_MIN 4194304.0
#endif

/* Work from which a region takes every thread even when other processes keep cores busy. A region this large
 * (a batch-64 step's vocabulary projection, about a millisecond) lost nothing at 2 threads with one competing
 * process and gains when several compete; the smaller regions of a one-row step lost up to 26% (docs/benchmarks.md
 * "Threads under load"). */
#ifndef QKV__PAR_SHARED_MIN
#define QKV__PAR_SHARED_MIN 67108864.0
#endif

/* Work of y [M, N] = x [M, K] W^T when W streams from memory once. */
static inline double qkv__par_gemm_work(int64_t M, int64_t N, int64_t K) {
    return ((double)M + QKV__PAR_STREAM) * (double)N * (double)K;
}

/* Threads for a region of `work`: 1 below QKV__PAR_MIN or inside another parallel region; the thread count from
 * QKV__PAR_SHARED_MIN; in between the thread count (omp_get_max_threads) cut to the cores other processes leave
 * idle (qkv__par_cores_free). The count follows the machine's load, so only regions whose results do not depend on
 * it may ask: each output computed whole by one thread, no reduction split by thread.
 * A region takes the count as num_threads(n) alone, never beside an if clause: LLVM's OpenMP runtime (clang 14's,
 * llvm/llvm-project#63197) keeps the num_threads of a region its if clause ran serially for the thread's next
 * region, so the next one ran on 1 thread, and an OpenBLAS GEMM there waited forever for its second thread. With
 * num_threads(1) both runtimes run the region on the calling thread as an if clause would (tests/omp_pragmas.sh). */
int qkv__par_threads(double work);

/* Cores of this machine that other processes left idle over the last fraction of a second (the machine's busy
 * time from /proc/stat minus this process's CPU time), at least 1; 0 when unknown (no /proc/stat, or the first
 * call of the process). Sampled at most every 200 ms. */
int qkv__par_cores_free(void);

/* Tests and measurements: take n as the free cores instead of measuring (n < 1: measure again). */
void qkv__par_set_cores_free(int n);

QKV_INTERNAL_END
#endif
