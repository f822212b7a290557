/* LSH self-attention (Reformer, Kitaev et al. 2020, as Trax's LSHSelfAttention computes it), forward and backward.
 *
 * Shared-QK attention: one tensor qk [B, H, T, D] serves as queries and keys; a key is length-normalised,
 * k^ = k / sqrt(mean(k^2) + 1e-6), and scores are scale * q . k^ (scale 0 = 1/sqrt(D), so k^ * scale has unit
 * length up to the epsilon, as in the paper). Per hash round r = 0..n_hashes-1:
 *   - hash: bucket(t) = argmax([qk_t R_r ; -qk_t R_r]) + r * n_buckets, R = rotations[:, r, :] (angular LSH; the
 *     rotations are an input, so a test or a backward pass reuses the same hashes);
 *     factorized (opts.bucket_factor = n1 > 0, Trax's n_buckets = [n1, n2]): the first n1/2 columns of R_r hash
 *     b1 in [0, n1), the other n2/2 columns b2 in [0, n2), and bucket = b1 + n1 * b2 (Trax's order), so
 *     n_buckets = n1 n2 for a hashing cost of O(D (n1 + n2)) per item instead of O(D n1 n2);
 *   - sort all n_hashes * T (round, position) items by (bucket, position) and cut the sorted sequence into chunks
 *     of chunk_len; a chunk's queries attend to the keys of the chunk itself and of the chunk before it (chunk 0's
 *     "before" wraps to the last chunk, as Trax's look_adjacent);
 *   - masks are subtracted from the scores as in Trax: 1e9 where the key comes after the query (causal) or is
 *     padding, 1e5 where the key is the query's own position, so a token attends to itself only when nothing
 *     else is available;
 *   - each query row keeps its output o_r and its log-sum-exp L_r (natural log) over its keys.
 * Rounds are combined by their log-sum-exp weights: out_t = sum_r o_r(t) exp(L_r(t) - logsumexp_r L_r(t)).
 *
 * Memory is O(B H T (n_hashes + D + chunk_len)): no [T, T] buffer exists. The backward reuses the forward's sort
 * (hashes are drawn once) and recomputes each chunk's scores. Gradients flow to qk and v, not to the rotations.
 * Results do not depend on the thread count.
 */
#ifndef QKV_LSH_ATTENTION_H
#define QKV_LSH_ATTENTION_H

#include <stdbool.h>

#include "qkv/autograd.h"
#include "qkv/rng.h"
#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_lsh_opts {
    /* Sorted items per chunk; T must be a multiple of it. */
    int64_t chunk_len;
    /* Keys after the query (by original position) are masked. */
    bool causal;
    /* Subtract 1e5 from a query's score on its own position (Trax, default on). Off: plain shared-QK attention
     * within the chunks, which with one chunk covering the sequence equals qkv_sdpa(qk, k^, v). */
    bool exclude_self;
    /* [B, T] int32 or float32, non-zero = padded key, or NULL. Read during the call only. */
    const qkv_tensor *key_padding;
    /* Multiplies q . k^; 0 means 1/sqrt(D). */
    float scale;
    /* Rounds when rotations is NULL (then every item is in one bucket per round). */
    int n_hashes;
    /* 0: rotations [D, n_hashes, n_buckets / 2] hash directly. n1 > 0 (even): factorized hashing, rotations
     * [D, n_hashes, n1 / 2 + n2 / 2] with n2 >= 2 even, n_buckets = n1 * n2 (see above). */
    int bucket_factor;
} qkv_lsh_opts;

/* qkv_lsh_factor's default threshold: up to this many buckets per round the direct hash is cheap beside the
 * attention itself (chunk_len 64 and T = 32k give 1024). */
#define QKV_LSH_FACTORIZE_ABOVE 1024

/* chunk_len 64, not causal, exclude_self on, no padding, scale 1/sqrt(D), n_hashes 1. */
qkv_lsh_opts qkv_lsh_defaults(void);

/* qk [B, H, T, D], v [B, H, T, Dv] float32 (any strides) and rotations [D, n_hashes, n_buckets / 2] float32 (no
 * gradient; NULL = one bucket; [D, n_hashes, n1 / 2 + n2 / 2] with opts.bucket_factor = n1) -> a new context tensor [B, H, T, Dv]. Returns NULL (error set) on mismatched shapes,
 * T not a multiple of chunk_len, a bad mask or scale; NULL inputs give NULL with no new error. */
qkv_tensor *qkv_lsh_attention(qkv_ctx *ctx, qkv_tensor *qk, qkv_tensor *v, const qkv_tensor *rotations,
                              const qkv_lsh_opts *opts);

/* Fresh random rotations [D, n_hashes, n_buckets / 2] (standard normal draws from rng) into a context tensor, for
 * one forward pass. n_buckets must be even and >= 2; for factorized hashing pass n1 + n2. */
qkv_tensor *qkv_lsh_rotations(qkv_ctx *ctx, qkv_rng *rng, int64_t d, int n_hashes, int n_buckets);

/* Factorized hashing for n_buckets > above (above < 0: never): returns n1 and sets *n2 (both even, n1 <= n2,
 * n1 * n2 >= n_buckets): the largest even divisor n1 <= sqrt(n_buckets) with an even cofactor when it is at least
 * half the square root, else n1 = the even number nearest sqrt(n_buckets) and n2 = n_buckets / n1 rounded up to an
 * even number. Returns 0 and sets *n2 = n_buckets when not factorizing. Draw the rotations with
 * qkv_lsh_rotations(..., n1 + n2) and pass n1 as opts.bucket_factor. */
int qkv_lsh_factor(int n_buckets, int above, int *n2);

/* n_buckets for a sequence of T: 2 T / chunk_len rounded to an even number >= 2 (the paper's choice: on average
 * a bucket fills half a chunk). */
int qkv_lsh_default_buckets(int64_t T, int64_t chunk_len);

#ifdef __cplusplus
}
#endif
#endif
