/* Data-parallel training across processes (docs/distributed.md): the few collectives the trainer needs, on MPI
 * when the library was built with it (CMake QKV_MPI, on when MPI is found) and the process was started by a
 * launcher (mpirun), else a one-process world in which every collective is a no-op. Code above this header never
 * sees MPI.
 *
 * Every collective is deterministic for a given number of ranks (sums run in rank order, whatever the message size
 * or the arrival order) and has a deadline: a rank that died or hangs makes the survivors end the job with a clear
 * message (MPI_Abort) after qkv_dist_timeout() seconds instead of waiting forever. */
#ifndef QKV_DIST_H
#define QKV_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Joins the job when started by a launcher (mpirun / mpiexec: OpenMPI's or a PMI environment); otherwise, or in a
 * build without MPI, the world is this process alone. Idempotent. The timeout comes from QKV_DIST_TIMEOUT
 * (seconds, default 600). */
qkv_status qkv_dist_init(int *argc, char ***argv);
/* Leaves the job (after the last collective). */
void qkv_dist_finalize(void);
/* True when the library was built with MPI (whether or not this process runs under a launcher). */
bool qkv_dist_built_with_mpi(void);
int qkv_dist_rank(void);
int qkv_dist_size(void);

void qkv_dist_set_timeout(double seconds);
double qkv_dist_timeout(void);

/* buf[0..n) <- the sum over ranks, added in rank order ((x0 + x1) + x2 ...): the same bits on every rank and in
 * every run with this rank count. */
qkv_status qkv_dist_allreduce_f32(float *buf, size_t n);
qkv_status qkv_dist_allreduce_f64(double *buf, size_t n);
/* buf[0..n) <- the maximum over ranks. */
qkv_status qkv_dist_allreduce_max_i64(int64_t *buf, size_t n);
/* bytes of root's buf to every rank. */
qkv_status qkv_dist_bcast(void *buf, size_t bytes, int root);
qkv_status qkv_dist_barrier(void);

/* ZeRO-1's two halves. reduce_scatter: send holds size x block floats; recv (block floats) <- the rank-ordered sum
 * of every rank's block number rank. allgather: recv (size x bytes) <- every rank's send (bytes), in rank order. */
qkv_status qkv_dist_reduce_scatter_f32(const float *send, float *recv, size_t block);
qkv_status qkv_dist_allgather(const void *send, void *recv, size_t bytes);

/* A non-blocking sum (qkv_dist_allreduce_f32's order). Start it, let the caller work (calling qkv_dist_progress
 * now and then lets MPI move data meanwhile), and qkv_dist_wait before reading buf. A one-process world finishes
 * at once. At most QKV_DIST_MAX_PENDING at a time. */
#define QKV_DIST_MAX_PENDING 64
typedef int qkv_dist_request;
qkv_status qkv_dist_iallreduce_f32(float *buf, size_t n, qkv_dist_request *req);
void qkv_dist_progress(void);
qkv_status qkv_dist_wait(qkv_dist_request req);

/* Ends every process of the job with a message (rank-prefixed) on stderr; exit code `code` (one process: exit). */
void qkv_dist_abort(int code, const char *why);

#ifdef __cplusplus
}
#endif
#endif
