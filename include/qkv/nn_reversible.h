/* Layers whose activations are recomputed in the backward instead of kept (autograd.h, "Sub-graphs"):
 *
 *   - reversible residual blocks (RevNet, as the Reformer uses them): the input is two streams side by side,
 *     x = [x1 | x2] along the last axis, and each block computes
 *         y1 = x1 + f(x2),   y2 = x2 + g(y1).
 *     The inputs follow from the outputs, x2 = y2 - g(y1), x1 = y1 - f(x2), so a stack of blocks keeps only its
 *     final output: the backward walks the blocks from the last, reconstructing each block's input and
 *     recomputing f and g to differentiate them. Activation memory does not grow with the number of blocks (one
 *     block's temporaries at a time); the price is one more forward of every block. Reconstruction is exact up to
 *     float rounding (gradients agree with the ordinary computation to ~1e-6).
 *   - a row-wise function applied in chunks of rows (the Reformer's chunked feed-forward): the same result, with
 *     one chunk's temporaries alive at a time in the forward and in the backward.
 *
 * The functions are plain callbacks of one tensor. They must be deterministic given the context generator: the
 * generator's state at each call is saved and restored for the recomputation, so dropout masks (and LSH rotations
 * drawn from qkv_ctx_rng) repeat. `params` lists every tensor, other than the input, the functions differentiate
 * (the blocks' weights): the node records them as inputs so that gradients are on when they need them.
 */
#ifndef QKV_NN_REVERSIBLE_H
#define QKV_NN_REVERSIBLE_H

#include "qkv/autograd.h"
#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x [..., D] -> [..., D'] (a context tensor), user as given. */
typedef qkv_tensor *(*qkv_nn_fn)(qkv_ctx *ctx, qkv_tensor *x, void *user);

typedef struct qkv_nn_rev_block {
    qkv_nn_fn f, g; /* y1 = x1 + f(x2), y2 = x2 + g(y1); both [..., D] -> [..., D] */
    void *f_user, *g_user;
} qkv_nn_rev_block;

/* x [..., 2D] float32 -> y [..., 2D] through blocks[0..n) in turn. The blocks array is copied; what its user
 * pointers point at must live until the backward. */
qkv_tensor *qkv_nn_reversible(qkv_ctx *ctx, qkv_tensor *x, int n, const qkv_nn_rev_block *blocks, int n_params,
                              qkv_tensor *const *params);

/* fn applied to x [..., D] in chunks of `chunk` rows (rows: all leading axes flattened) -> [..., d_out]. fn must
 * treat rows independently (a feed-forward); chunk <= 0 means all rows at once. */
qkv_tensor *qkv_nn_chunked(qkv_ctx *ctx, qkv_tensor *x, int64_t chunk, int64_t d_out, qkv_nn_fn fn, void *user,
                           int n_params, qkv_tensor *const *params);

#ifdef __cplusplus
}
#endif
#endif
