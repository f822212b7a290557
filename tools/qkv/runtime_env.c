/* Settings the runtimes read once, when they are loaded: the CLI sets them and runs itself again (one exec for all).
 *
 * Passive waiting for the OpenMP pool. libgomp's idle threads spin at barriers by default. When a core is shared with
 * another busy process (a laptop, a shared server) a spinning thread burns the slice its partner needs, and every
 * parallel region then waits for the scheduler: decoding 100 sentences took 37 s at 2 threads against 2.9 s at 1
 * thread on a loaded 2-core machine, 4.1 s with passive waiting (docs/benchmarks.md). A policy the user set is left
 * alone.
 *
 * OpenBLAS's kernel family. Debian 12's OpenBLAS (0.3.21) does not know CPUs newer than itself and falls back to its
 * SSE3 "Prescott" kernels on them (a 5th-generation Xeon with AVX-512 among them): every BLAS GEMM several times
 * slower than the machine runs it. qkv_cpu_blas_core_wanted names the family the CPU deserves; an
 * OPENBLAS_CORETYPE the user set is left alone, and `qkv --version` says when qkv chose it. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "qkv/cpu.h"

static bool set_wait_policy(void) {
    return !getenv("OMP_WAIT_POLICY") && setenv("OMP_WAIT_POLICY", "passive", 1) == 0;
}

static bool set_blas_core(void) {
    if (getenv("OPENBLAS_CORETYPE")) return false;
    const char *want = qkv_cpu_blas_core_wanted();
    if (!want) return false;
    return setenv("QKV_BLAS_PICKED", qkv_cpu_blas_core(), 1) == 0 && setenv("OPENBLAS_CORETYPE", want, 1) == 0;
}

void cli_runtime_env(char **argv) {
    /* Under valgrind /proc/self/exe is valgrind's own tool, which refuses to start that way: run on as we are. */
    const char *pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "vgpreload")) return;
    bool wait = set_wait_policy(), blas = set_blas_core();
    if (!wait && !blas) return;
    execv("/proc/self/exe", argv); /* returns only on failure: then run on with the runtimes' defaults */
    if (blas) unsetenv("OPENBLAS_CORETYPE");
}
