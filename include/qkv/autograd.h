/* Contexts, the tape and reverse-mode automatic differentiation.
 *
 * A qkv_ctx is where a forward pass happens. Every op (ops.h) computes its result at once (eager, like PyTorch)
 * into the context's arena and, when gradients are on and an input requires them, appends a node to the
 * context's tape. qkv_backward() walks the tape in reverse. qkv_ctx_reset() forgets the tape and rewinds the
 * arena while keeping its memory, so a training loop of fixed shapes allocates nothing after its first step:
 *
 *     qkv_ctx *ctx = qkv_ctx_new();
 *     for (step...) {
 *         qkv_ctx_reset(ctx);
 *         qkv_tensor *loss = model_forward(ctx, ...);   // ops return NULL on error, and accept NULL inputs,
 *         if (!loss || qkv_backward(ctx, loss))          // so the error is checked once at the end
 *             report(qkv_last_error());
 *         optimiser_step(...);                           // parameter grads live on the heap
 *     }
 *     qkv_ctx_free(ctx);
 *
 * Gradients accumulate into .grad (heap tensors: persistent until zeroed; context leaves: until reset), as in
 * PyTorch. An intermediate's gradient (the output of an op) is freed as soon as backward has passed it on, and
 * its memory serves the next gradient of the same size, so a step's gradients cost a few layers' worth of memory,
 * not a second copy of the activations; call qkv_tensor_retain_grad() on an intermediate to keep its .grad. A
 * context is used by one thread at a time; ops parallelise inside.
 */
#ifndef QKV_AUTOGRAD_H
#define QKV_AUTOGRAD_H

#include <stdbool.h>
#include <stddef.h>

#include "qkv/rng.h"
#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_ctx qkv_ctx;

qkv_ctx *qkv_ctx_new(void);
void qkv_ctx_free(qkv_ctx *ctx);
/* Forget every context tensor and the tape; keep the arena's memory for the next step. */
void qkv_ctx_reset(qkv_ctx *ctx);

/* Gradient recording (default on). Off = inference mode: ops record nothing, as torch.no_grad(). Returns the
 * previous setting so callers can restore it. */
bool qkv_ctx_set_grad(qkv_ctx *ctx, bool enabled);
bool qkv_ctx_grad_enabled(const qkv_ctx *ctx);
/* Training mode (default on) enables dropout; off = eval mode. Returns the previous setting. */
bool qkv_ctx_set_training(qkv_ctx *ctx, bool training);
bool qkv_ctx_training(const qkv_ctx *ctx);
/* The context's generator (dropout draws from it). Seeded with 0 at creation. */
qkv_rng *qkv_ctx_rng(qkv_ctx *ctx);

/* Context tensor: valid until reset. Data uninitialised (qkv_ctx_zeros: zero-filled). */
qkv_tensor *qkv_ctx_tensor(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape);
qkv_tensor *qkv_ctx_zeros(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape);
/* Context scratch memory, 64-byte aligned, valid until reset. */
void *qkv_ctx_alloc(qkv_ctx *ctx, size_t bytes);

/* Bytes the arena holds (its high-water mark after a step), and the number of nodes on the tape. */
size_t qkv_ctx_arena_bytes(const qkv_ctx *ctx);
size_t qkv_ctx_tape_length(const qkv_ctx *ctx);
/* Number of times the arena had to ask the system for memory since the context was created. */
size_t qkv_ctx_arena_allocs(const qkv_ctx *ctx);
/* Most bytes of the arena in use at once since the context was created (rewinds included, see qkv_ctx_rewind). */
size_t qkv_ctx_arena_peak(const qkv_ctx *ctx);

/* Backpropagate from a scalar (numel 1) output: seeds d(out)=1. */
qkv_status qkv_backward(qkv_ctx *ctx, qkv_tensor *out);
/* Backpropagate from any output with a given upstream gradient (same shape as out, float32). A contiguous grad_out
 * becomes out's gradient without a copy: it is read, never written, and must stay alive until the context is
 * reset (out->grad points at it). */
qkv_status qkv_backward_with(qkv_ctx *ctx, qkv_tensor *out, const qkv_tensor *grad_out);

/* Called during a backward pass for each heap leaf (a parameter) as soon as its gradient is final for the pass: right
 * after the backward of its earliest consumer on the tape, the last one to add into it. Leaves the pass never reaches
 * are not reported. For work that can start on a finished gradient while backward goes on (data-parallel training
 * sends gradients to other processes in buckets, docs/distributed.md). fn NULL removes the hook. */
typedef void (*qkv_grad_ready_fn)(void *user, qkv_tensor *leaf);
void qkv_ctx_set_grad_ready(qkv_ctx *ctx, qkv_grad_ready_fn fn, void *user);

/* ---- Writing new differentiable ops -------------------------------------------------------------------------
 * An op computes its output, then calls qkv_record() with a backward function. The backward reads out->grad and
 * adds into qkv_grad_for(ctx, input) for each input (NULL means that input needs no gradient: skip it). out->grad
 * is recycled once the backward returns: keep no pointer to it. Layers use this to wrap fused kernels; see src/ops
 * for many examples. */
typedef qkv_status (*qkv_backward_fn)(qkv_ctx *ctx, qkv_node *node);

struct qkv_node {
    qkv_backward_fn backward;
    const char *op;      /* static name, used in error messages */
    qkv_tensor *out;
    qkv_tensor **in;     /* n_in inputs (array in the arena) */
    int n_in;
    void *saved;         /* op-specific data (arena memory) */
    double f[4];         /* small saved scalars */
    int64_t i[8];
};

/* True when an op on these inputs must be recorded (grad mode on and some input requires grad). */
bool qkv_needs_grad(const qkv_ctx *ctx, int n_in, qkv_tensor *const *in);
/* Mark `out` as produced by an op and append the node; returns it (for saving data) or NULL if nothing is
 * recorded (no input needs grad). `in` is copied. */
qkv_node *qkv_record(qkv_ctx *ctx, qkv_tensor *out, const char *op, qkv_backward_fn backward, int n_in,
                     qkv_tensor *const *in);
/* The gradient buffer of `t` for accumulation (allocated zeroed on first use), or NULL if t needs no gradient. */
qkv_tensor *qkv_grad_for(qkv_ctx *ctx, qkv_tensor *t);

/* ---- Sub-graphs: nodes that recompute in their backward -------------------------------------------------------
 * An op may own a sub-graph instead of recording it: its forward runs the sub-graph with gradients off and keeps
 * only what it needs to run it again (reversible layers keep nothing but their output; chunked layers their input),
 * and its backward, called with gradients off like any other, recomputes the sub-graph with gradients on inside a
 * segment and differentiates that segment alone:
 *
 *     qkv_ctx_mark m = qkv_ctx_mark_now(ctx);            // tape and arena position
 *     qkv_ctx_set_grad(ctx, true);
 *     x = fresh leaf copying the saved input, requires grad;
 *     y = f(ctx, x);                                     // records a segment of tape after the mark
 *     qkv_ctx_set_grad(ctx, false);
 *     qkv_backward_since(ctx, &m, y, dy);                // runs the segment's nodes only
 *     ... read x->grad ...
 *     qkv_ctx_rewind(ctx, &m);                           // the segment's tensors, nodes and gradients are gone
 *
 * The forward uses the same mark / rewind to drop each piece's temporaries, so the memory of a stack of such nodes
 * does not grow with its depth. Segments nest (a chunked layer inside a reversible one). Rules: a tensor made
 * before the mark whose gradient the segment writes must already have its gradient buffer (a heap tensor, or
 * qkv_grad_for() called before the mark), since memory the segment allocates is reused after the rewind; dropout
 * and other random draws repeat only if the caller restores the context generator (qkv_ctx_rng) to its state at
 * the forward. */
typedef struct qkv_ctx_mark {
    size_t tape_len, arena_used, arena_in_use, n_spare;
    void *arena_chunk; /* opaque */
    void *spare;       /* opaque: the context's free gradient buffers at the mark */
} qkv_ctx_mark;

/* The present position of the tape and arena. */
qkv_ctx_mark qkv_ctx_mark_now(qkv_ctx *ctx);
/* Forget every node and context tensor made since the mark (their memory is reused); gradients given out since
 * then are invalid. */
void qkv_ctx_rewind(qkv_ctx *ctx, const qkv_ctx_mark *mark);
/* Backpropagate grad_out (out's shape, float32) from out through the nodes recorded since the mark only. out must
 * have been produced after the mark. grad_out is read, never written, and must live until the rewind. */
qkv_status qkv_backward_since(qkv_ctx *ctx, const qkv_ctx_mark *mark, qkv_tensor *out, const qkv_tensor *grad_out);

#ifdef __cplusplus
}
#endif
#endif
