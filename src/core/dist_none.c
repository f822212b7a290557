/* qkv_dist without MPI (include/qkv/dist.h): a world of one process, in which every collective leaves its data as it
 * is. CMake builds this file instead of dist_mpi.c when MPI is not found or QKV_MPI is off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/dist.h"

static double timeout_s = 600;

qkv_status qkv_dist_init(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return QKV_OK;
}
void qkv_dist_finalize(void) {}
bool qkv_dist_built_with_mpi(void) { return false; }
int qkv_dist_rank(void) { return 0; }
int qkv_dist_size(void) { return 1; }
void qkv_dist_set_timeout(double seconds) { timeout_s = seconds > 0 ? seconds : 600; }
double qkv_dist_timeout(void) { return timeout_s; }
qkv_status qkv_dist_allreduce_f32(float *buf, size_t n) {
    (void)buf;
    (void)n;
    return QKV_OK;
}
qkv_status qkv_dist_allreduce_f64(double *buf, size_t n) {
    (void)buf;
    (void)n;
    return QKV_OK;
}
qkv_status qkv_dist_allreduce_max_i64(int64_t *buf, size_t n) {
    (void)buf;
    (void)n;
    return QKV_OK;
}
qkv_status qkv_dist_bcast(void *buf, size_t bytes, int root) {
    (void)buf;
    (void)bytes;
    (void)root;
    return QKV_OK;
}
qkv_status qkv_dist_reduce_scatter_f32(const float *send, float *recv, size_t block) {
    if (recv != send) memcpy(recv, send, block * sizeof *recv);
    return QKV_OK;
}
qkv_status qkv_dist_allgather(const void *send, void *recv, size_t bytes) {
    if (recv != send) memcpy(recv, send, bytes);
    return QKV_OK;
}
qkv_status qkv_dist_barrier(void) { return QKV_OK; }
qkv_status qkv_dist_iallreduce_f32(float *buf, size_t n, qkv_dist_request *req) {
    (void)buf;
    (void)n;
    *req = -1;
    return QKV_OK;
}
void qkv_dist_progress(void) {}
qkv_status qkv_dist_wait(qkv_dist_request req) {
    (void)req;
    return QKV_OK;
}
void qkv_dist_abort(int code, const char *why) {
    fprintf(stderr, "qkv: %s\n", why);
    exit(code);
}
