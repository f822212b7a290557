/* Passive waiting for the OpenMP pool, chosen before libgomp starts.
 *
 * libgomp's idle threads spin at barriers by default. When a core is shared with another busy process (a laptop, a
 * shared server) a spinning thread burns the slice its partner needs, and every parallel region then waits for the
 * scheduler: decoding 100 sentences took 37 s at 2 threads against 2.9 s at 1 thread on a loaded 2-core machine,
 * 4.1 s with passive waiting (docs/benchmarks.md). libgomp reads OMP_WAIT_POLICY once, when it is loaded, so the
 * CLI sets it and runs itself again; a policy the user set is left alone. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"

void cli_passive_threads(char **argv) {
    if (getenv("OMP_WAIT_POLICY")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv); /* returns only on failure: then run on with libgomp's default */
}
