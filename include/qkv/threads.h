/* The thread pool: OpenMP for qkv's kernels, OpenBLAS's own threads for GEMM, kept at the same count.
 * The count comes from qkv_threads_set(), else the QKV_THREADS environment variable, else the number of cores.
 * Results are bit-identical across runs at a fixed thread count. The count is a ceiling: a small parallel region
 * runs on the calling thread, and a decoding step's regions use no more threads than the cores other processes leave
 * idle (docs/design.md "Threads under load"); those regions give the same bits at any count. */
#ifndef QKV_THREADS_H
#define QKV_THREADS_H

#ifdef __cplusplus
extern "C" {
#endif

/* n <= 0 restores the default (QKV_THREADS or all cores). */
void qkv_threads_set(int n);
int qkv_threads_get(void);
/* Read QKV_THREADS and configure OpenMP and OpenBLAS; called by the first qkv_ctx_new(), idempotent. */
void qkv_threads_init(void);

#ifdef __cplusplus
}
#endif
#endif
