/* qkv bench allreduce: the time of qkv_dist_allreduce_f32 (the trainer's gradient sum: rank-ordered, with a
 * deadline) against message size, from 4 KiB to 64 MiB. Run under mpirun (mpirun -np 2 qkv bench allreduce);
 * alone it measures a world of one. Rank 0 prints one JSON line per size: median/min milliseconds and the bus
 * bandwidth a ring allreduce would need for that time, 2 (N - 1) / N x bytes / time (docs/distributed.md). */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "qkv/dist.h"
#include "qkv/qkv.h"

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    int argc = 0;
    char **argv = NULL;
    if (qkv_dist_init(&argc, &argv) != QKV_OK) {
        fprintf(stderr, "qkv bench allreduce: %s\n", qkv_last_error());
        return CLI_RUNTIME;
    }
    int n_ranks = qkv_dist_size(), rank = qkv_dist_rank();
    const size_t max_bytes = (size_t)64 << 20;
    float *buf = malloc(max_bytes);
    double *ms = malloc(sizeof *ms * 1000);
    int rc = buf && ms ? CLI_OK : CLI_RUNTIME;
    for (size_t bytes = 4096; rc == CLI_OK && bytes <= max_bytes; bytes *= 4) {
        size_t n = bytes / sizeof(float);
        for (size_t i = 0; i < n; i++) buf[i] = (float)(i % 7);
        /* Every rank runs the same count: rank 0 decides it from the first timing and tells the others. */
        double t0 = cli_now();
        if (qkv_dist_allreduce_f32(buf, n) != QKV_OK) rc = CLI_RUNTIME;
        double first = cli_now() - t0;
        int64_t reps = first > 0 ? (int64_t)(0.5 * b->max_seconds / first) : 1000;
        if (reps < 5) reps = 5;
        if (reps > 1000) reps = 1000;
        if (qkv_dist_bcast(&reps, sizeof reps, 0) != QKV_OK) rc = CLI_RUNTIME;
        for (int64_t k = 0; rc == CLI_OK && k < reps; k++) {
            if (qkv_dist_barrier() != QKV_OK) rc = CLI_RUNTIME;
            double a = cli_now();
            if (qkv_dist_allreduce_f32(buf, n) != QKV_OK) rc = CLI_RUNTIME;
            ms[k] = (cli_now() - a) * 1e3;
        }
        if (rc != CLI_OK || rank != 0) continue;
        double mn = ms[0];
        for (int64_t k = 1; k < reps; k++) mn = ms[k] < mn ? ms[k] : mn;
        double med = bench_median(ms, (int)reps);
        cJSON *o = bench_result(b, mode);
        cJSON_AddNumberToObject(o, "ranks", n_ranks);
        cJSON_AddNumberToObject(o, "bytes", (double)bytes);
        cJSON_AddNumberToObject(o, "reps", (double)reps);
        cJSON_AddNumberToObject(o, "ms_median", med);
        cJSON_AddNumberToObject(o, "ms_min", mn);
        double bus = n_ranks > 1 ? 2.0 * (n_ranks - 1) / n_ranks * (double)bytes : 0;
        cJSON_AddNumberToObject(o, "bus_gbit_per_s_median", med > 0 ? bus * 8 / (med * 1e-3) / 1e9 : 0);
        bench_emit(o);
    }
    if (rc != CLI_OK) fprintf(stderr, "qkv bench allreduce: %s\n", qkv_last_error());
    free(buf);
    free(ms);
    qkv_dist_finalize();
    return rc;
}

static const bench_entry entry = {"allreduce", "sum", "gradient allreduce time vs message size (under mpirun)", run};
BENCH_REGISTER(entry)
