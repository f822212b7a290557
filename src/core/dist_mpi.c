/* qkv_dist on MPI (include/qkv/dist.h). The only file that includes mpi.h; CMake builds it instead of dist_none.c
 * when MPI is found.
 *
 * Determinism: sums use our own operation declared non-commutative, which obliges MPI to combine contributions in
 * rank order (whatever algorithm it picks for the message size), so the result has the same bits on every rank and
 * in every run with the same number of ranks. A built-in MPI_SUM may reorder by arrival or split messages
 * differently by size.
 *
 * Deadlines: every collective is started non-blocking and polled with MPI_Test; past the timeout the job ends with
 * MPI_Abort and a message naming the collective, so a dead or stopped rank never leaves the others waiting. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qkv/dist.h"

static struct {
    bool active, we_initialised;
    int rank, size;
    double timeout;
    MPI_Op sum_f32, sum_f64;
    MPI_Request pending[QKV_DIST_MAX_PENDING];
    bool used[QKV_DIST_MAX_PENDING];
} D = {.size = 1, .timeout = 600};

bool qkv_dist_built_with_mpi(void) { return true; }
int qkv_dist_rank(void) { return D.rank; }
int qkv_dist_size(void) { return D.size; }
void qkv_dist_set_timeout(double seconds) { D.timeout = seconds > 0 ? seconds : 600; }
double qkv_dist_timeout(void) { return D.timeout; }

/* inout = in + inout, element by element: MPI calls it with the lower rank's data as `in` for a non-commutative
 * operation, so the sum runs in rank order. */
static void sum_f32(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const float *a = in;
    float *b = inout;
    for (int i = 0; i < *len; i++) b[i] = a[i] + b[i];
}

static void sum_f64(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const double *a = in;
    double *b = inout;
    for (int i = 0; i < *len; i++) b[i] = a[i] + b[i];
}

static bool launched(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return true;
    const char *force = getenv("QKV_DIST");
    return force && !strcmp(force, "mpi");
}

qkv_status qkv_dist_init(int *argc, char ***argv) {
    if (D.active || !launched()) return QKV_OK;
    const char *t = getenv("QKV_DIST_TIMEOUT");
    if (t && *t) {
        char *end;
        double v = strtod(t, &end);
        if (*end || !(v > 0)) return qkv_error_set(QKV_ERR_INVALID, "QKV_DIST_TIMEOUT: '%s' is not a positive number "
                                                   "of seconds", t);
        D.timeout = v;
    }
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        /* OpenMP threads run inside a rank, MPI is called from the main thread alone. */
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return qkv_error_set(QKV_ERR_IO, "MPI_Init_thread failed");
        D.we_initialised = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &D.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &D.size);
    MPI_Op_create(sum_f32, 0, &D.sum_f32);
    MPI_Op_create(sum_f64, 0, &D.sum_f64);
    D.active = true;
    return QKV_OK;
}

void qkv_dist_finalize(void) {
    if (!D.active) return;
    MPI_Op_free(&D.sum_f32);
    MPI_Op_free(&D.sum_f64);
    if (D.we_initialised) MPI_Finalize();
    D.active = false;
    D.rank = 0;
    D.size = 1;
}

void qkv_dist_abort(int code, const char *why) {
    fprintf(stderr, "qkv: rank %d of %d: %s\n", D.rank, D.size, why);
    fflush(stderr);
    if (D.active) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

static qkv_status wait_for(MPI_Request *req, const char *what) {
    double t0 = MPI_Wtime();
    for (long polls = 0;; polls++) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return qkv_error_set(QKV_ERR_IO, "rank %d: MPI %s failed (another rank died?)", D.rank, what);
        if (done) return QKV_OK;
        if (MPI_Wtime() - t0 > D.timeout) {
            char why[256];
            snprintf(why, sizeof why, "no answer from the other ranks for %.0f s in %s (a rank died or hangs; "
                     "QKV_DIST_TIMEOUT sets the limit): ending the job", D.timeout, what);
            qkv_dist_abort(3, why);
        }
        /* Spin briefly (a collective on shared memory takes microseconds), then yield the core: ranks often share
         * cores with their own OpenMP threads. */
        if (polls > 200) nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

static qkv_status check(int rc, const char *what) {
    return rc == MPI_SUCCESS ? QKV_OK : qkv_error_set(QKV_ERR_IO, "rank %d: MPI %s failed", D.rank, what);
}

static qkv_status allreduce(void *buf, size_t n, MPI_Datatype type, MPI_Op op, const char *what) {
    if (!D.active || D.size == 1 || n == 0) return QKV_OK;
    if (n > (size_t)INT32_MAX) return qkv_error_set(QKV_ERR_INVALID, "%s: %zu elements is too many", what, n);
    MPI_Request req;
    qkv_status st = check(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, type, op, MPI_COMM_WORLD, &req), what);
    return st ? st : wait_for(&req, what);
}

qkv_status qkv_dist_allreduce_f32(float *buf, size_t n) {
    return allreduce(buf, n, MPI_FLOAT, D.sum_f32, "allreduce (float sum)");
}
qkv_status qkv_dist_allreduce_f64(double *buf, size_t n) {
    return allreduce(buf, n, MPI_DOUBLE, D.sum_f64, "allreduce (double sum)");
}
qkv_status qkv_dist_allreduce_max_i64(int64_t *buf, size_t n) {
    return allreduce(buf, n, MPI_INT64_T, MPI_MAX, "allreduce (max)");
}

qkv_status qkv_dist_reduce_scatter_f32(const float *send, float *recv, size_t block) {
    if (!D.active || D.size == 1) {
        if (recv != send) memcpy(recv, send, block * sizeof *recv);
        return QKV_OK;
    }
    if (block > (size_t)INT32_MAX) return qkv_error_set(QKV_ERR_INVALID, "reduce-scatter of %zu floats", block);
    MPI_Request req;
    qkv_status st = check(MPI_Ireduce_scatter_block(send, recv, (int)block, MPI_FLOAT, D.sum_f32, MPI_COMM_WORLD,
                                                    &req), "reduce-scatter");
    return st ? st : wait_for(&req, "reduce-scatter");
}

qkv_status qkv_dist_allgather(const void *send, void *recv, size_t bytes) {
    if (!D.active || D.size == 1) {
        if (recv != send) memcpy(recv, send, bytes);
        return QKV_OK;
    }
    if (bytes > (size_t)INT32_MAX) return qkv_error_set(QKV_ERR_INVALID, "allgather of %zu bytes", bytes);
    MPI_Request req;
    qkv_status st = check(MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &req),
                          "allgather");
    return st ? st : wait_for(&req, "allgather");
}

qkv_status qkv_dist_bcast(void *buf, size_t bytes, int root) {
    if (!D.active || D.size == 1 || bytes == 0) return QKV_OK;
    if (bytes > (size_t)INT32_MAX) return qkv_error_set(QKV_ERR_INVALID, "broadcast of %zu bytes is too large", bytes);
    MPI_Request req;
    qkv_status st = check(MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD, &req), "broadcast");
    return st ? st : wait_for(&req, "broadcast");
}

qkv_status qkv_dist_barrier(void) {
    if (!D.active || D.size == 1) return QKV_OK;
    MPI_Request req;
    qkv_status st = check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "barrier");
    return st ? st : wait_for(&req, "barrier");
}

qkv_status qkv_dist_iallreduce_f32(float *buf, size_t n, qkv_dist_request *out) {
    *out = -1;
    if (!D.active || D.size == 1 || n == 0) return QKV_OK;
    if (n > (size_t)INT32_MAX) return qkv_error_set(QKV_ERR_INVALID, "allreduce of %zu elements is too large", n);
    int slot = 0;
    while (slot < QKV_DIST_MAX_PENDING && D.used[slot]) slot++;
    if (slot == QKV_DIST_MAX_PENDING)
        return qkv_error_set(QKV_ERR_INVALID, "more than %d non-blocking allreduces pending", QKV_DIST_MAX_PENDING);
    qkv_status st = check(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, D.sum_f32, MPI_COMM_WORLD,
                                         &D.pending[slot]), "allreduce (bucket)");
    if (st) return st;
    D.used[slot] = true;
    *out = slot;
    return QKV_OK;
}

void qkv_dist_progress(void) {
    if (!D.active || D.size == 1) return;
    int flag;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

qkv_status qkv_dist_wait(qkv_dist_request req) {
    if (req < 0 || req >= QKV_DIST_MAX_PENDING || !D.used[req]) return QKV_OK;
    D.used[req] = false;
    return wait_for(&D.pending[req], "allreduce (bucket)");
}
