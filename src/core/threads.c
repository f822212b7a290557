/* Thread count shared by OpenMP kernels and OpenBLAS. */
#include <omp.h>
#include <stdlib.h>

#include "qkv/threads.h"

/* OpenBLAS's own setter; declared here to avoid depending on which cblas.h variant is installed. */
extern void openblas_set_num_threads(int num_threads);

static int qkv_nthreads; /* 0 = not initialised */

static int default_threads(void) {
    const char *env = getenv("QKV_THREADS");
    if (env) {
        int n = atoi(env);
        if (n > 0) return n;
    }
    return omp_get_num_procs();
}

void qkv_threads_set(int n) {
    if (n <= 0) n = default_threads();
    qkv_nthreads = n;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int qkv_threads_get(void) {
    if (!qkv_nthreads) qkv_threads_init();
    return qkv_nthreads;
}

void qkv_threads_init(void) {
    if (!qkv_nthreads) qkv_threads_set(0);
}
