/* Scaled dot-product attention: softmax(scale * Q K^T + masks) V, forward and backward.
 *
 * Two paths compute the same function:
 *   - fused (flash-style, the default): key blocks are streamed through an online softmax, so memory is linear in
 *     the sequence length; only the output and one log-sum-exp per query row are kept for backward, which
 *     recomputes the scores block by block. No [Tq, Tk] buffer exists at any point.
 *   - materialised: the full [B, H, Tq, Tk] score matrix, as PyTorch 1.13 computes it. Used when the attention
 *     weights are asked for, and as the reference the fused path is tested against.
 *
 * Masks. A query row whose every key is masked (by causality and/or padding) has no defined softmax; both paths
 * give it output 0 and send zero gradient through it (PyTorch gives NaN there).
 *
 * Additive bias. opts.bias [B or 1, H or 1, Tq, Tk] is added to the scaled scores before the softmax (T5's relative
 * position bias, ALiBi-style biases); it is an autograd input, and its gradient is the softmax backward summed
 * over the dimensions it is broadcast along. The fused path adds it row by row inside the kernels (no [Tq, Tk]
 * buffer in the forward; the backward needs one only to sum a broadcast bias over the batch).
 *
 * Prefix-LM mask. opts.prefix [B] int32 together with causal: query i of batch b sees key j when j <= i + (Tk - Tq)
 * or j < prefix[b], i.e. bidirectional attention over the first prefix[b] positions and causal after them.
 *
 * Dropout (training mode, p > 0) drops attention weights after the softmax, keeping each with probability 1-p
 * and scaling kept ones by 1/(1-p). Element (b, h, i, j) keeps when qkv_rng_uniform_at(seed, base,
 * ((b*H + h)*Tq + i)*Tk + j) >= p, where (seed, base) is the context generator before the call; each call
 * advances the generator by ceil(B*H*Tq*Tk / 4) blocks. Both paths therefore drop exactly the same weights.
 */
#ifndef QKV_ATTENTION_H
#define QKV_ATTENTION_H

#include <stdbool.h>

#include "qkv/autograd.h"
#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_sdpa_opts {
    /* Query i sees keys j <= i + (Tk - Tq): bottom-right aligned, as torch's is_causal when Tq == Tk. */
    bool causal;
    /* [B, Tk] int32 or float32 (any strides), non-zero = padded key (never attended to), or NULL. Read during the
     * call only: backward does not look at it again. */
    const qkv_tensor *key_padding;
    /* [B or 1, H or 1, Tq, Tk] float32 (any strides) added to scale * Q K^T, or NULL. Receives a gradient. */
    qkv_tensor *bias;
    /* [B] int32 (any stride), or NULL: with causal, keys j < prefix[b] are visible to every query of batch b (the
     * prefix-LM mask). Values are clamped to [0, Tk]. Read during the call only. Ignored without causal. */
    const qkv_tensor *prefix;
    /* Multiplies Q K^T; 0 means 1/sqrt(D). Must be finite. */
    float scale;
    /* Attention-weight dropout probability in [0, 1), applied only in training mode. */
    float dropout;
    /* If non-NULL, the materialising path runs and *weights receives the attention weights [B, H, Tq, Tk] (a
     * context tensor, after dropout, as torch.nn.MultiheadAttention returns them). No gradient flows through
     * *weights: it is for inspection. */
    qkv_tensor **weights;
} qkv_sdpa_opts;

/* No causality, no padding, scale 1/sqrt(D), no dropout, no weights. */
qkv_sdpa_opts qkv_sdpa_defaults(void);

/* q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv] float32, any strides (views such as a permuted
 * [B, T, H, D] projection are read in place or copied internally) -> a new context tensor [B, H, Tq, Dv].
 * opts may be NULL for the defaults. Returns NULL (error set) on mismatched shapes, a padding mask of the wrong
 * shape or dtype, or a bad scale or dropout; NULL inputs give NULL with no new error. */
qkv_tensor *qkv_sdpa(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v, const qkv_sdpa_opts *opts);

/* The same function through the materialising path even when opts->weights is NULL: memory quadratic in T. */
qkv_tensor *qkv_sdpa_materialized(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                  const qkv_sdpa_opts *opts);

/* T5's relative position bucket of offset rel = key - query (its _relative_position_bucket, same float32 math):
 * bidirectional splits the buckets between keys after and at-or-before the query; causal (decoder) buckets only
 * -min(rel, 0). Distances below a quarter (bidirectional) or half (causal) of num_buckets get a bucket each, larger
 * ones logarithmic buckets up to max_distance. */
int qkv_relative_position_bucket(int64_t rel, bool bidirectional, int num_buckets, int max_distance);

/* Bias [1, H, Tq, Tk] from a learned table [num_buckets, H]: element (h, i, j) = table[bucket(j - (i + q_offset)),
 * h]. q_offset places the queries after earlier positions (incremental decoding: Tq = 1, q_offset = step). The
 * table receives the gradient. NULL (error set) for a table not 2-D or too few buckets for max_distance. */
qkv_tensor *qkv_relative_position_bias(qkv_ctx *ctx, qkv_tensor *table, int64_t Tq, int64_t Tk, int64_t q_offset,
                                       bool bidirectional, int max_distance);

#ifdef __cplusplus
}
#endif
#endif
