/* The Reformer (Kitaev et al. 2020; Trax's ReformerLM): its layers and its language model's options.
 *
 * Layers, each usable alone (declared in the headers included here):
 *   - qkv_lsh_attention (qkv/lsh_attention.h): shared-QK LSH self-attention, memory O(T chunk_len), with direct or
 *     factorized hashing (qkv_lsh_factor) and rotations passed in (qkv_lsh_rotations);
 *   - qkv_nn_reversible (qkv/nn_reversible.h): a stack of reversible residual blocks y1 = x1 + f(x2),
 *     y2 = x2 + g(y1) over x = [x1 | x2] that keeps only its output: the backward reconstructs each block's input,
 *     so activation memory does not grow with depth; f and g may draw from the context generator (dropout, LSH
 *     rotations): the backward restores it, so they see the same draws;
 *   - qkv_nn_chunked (qkv/nn_reversible.h): a row-wise function (a feed-forward) applied to chunks of rows, the
 *     same result with bounded memory.
 *
 * The language model: ShiftRight -> Embedding -> + positions (learned or axial) -> [x | x] -> n reversible blocks
 * (f = LayerNorm + causal LSH or full attention, per layer as `attention` says; g = LayerNorm + GELU feed-forward,
 * chunked by ff_chunk rows) -> LayerNorm over both streams -> Dense. It is a registered model type; build it from a
 * config object (qkv_reformer_config) through qkv_reformer_model_type()'s create, or with `qkv train` and a config
 * whose "model" section these options describe (`qkv config explain` of the type lists them with their ranges).
 * Decoding (qkv generate, qkv chat) keeps per-layer caches unless decode_cache is false: see docs/reformer.md. */
#ifndef QKV_REFORMER_H
#define QKV_REFORMER_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/lsh_attention.h"
#include "qkv/model.h"
#include "qkv/nn_reversible.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/* The "model" section of a Reformer LM config; qkv_reformer_defaults gives every default. */
typedef struct qkv_reformer_opts {
    int64_t d_model;         /* width of each of the two residual streams (256) */
    int64_t n_layers;        /* reversible blocks (2, at most 64) */
    int64_t n_heads, d_head; /* attention heads (2) and their width (64) */
    int64_t d_ff;            /* feed-forward inner width (512) */
    int64_t n_ctx;           /* positions; 0: the data's longest sequence rounded up to chunk_len (else 2048) */
    int64_t chunk_len;       /* LSH: sorted tokens per chunk (64); sequences are padded to a multiple */
    int64_t n_hashes;        /* LSH: hash rounds (1) */
    int64_t n_buckets;       /* LSH: buckets per round, even; 0: 2 T / chunk_len */
    int64_t ff_chunk;        /* rows per feed-forward chunk; 0: all at once */
    int64_t start_id;        /* the id ShiftRight puts first (0) */
    int64_t hash_seed;       /* LSH: seed of the rotations of layer l (hash_seed + l) in eval mode (1234) */
    int64_t bucket_factor;   /* LSH: n1 of factorized buckets n1 x n2; 0: automatic (factorize_above) */
    int64_t factorize_above; /* LSH: factorize when n_buckets exceeds this (QKV_LSH_FACTORIZE_ABOVE); -1: never */
    const char *attention;   /* per layer, a comma list of lsh|full repeated over the layers ("lsh") */
    const char *positions;   /* "learned" or "axial" */
    const char *axial_shape; /* axial: "A,B" with A * B = n_ctx; "": the most square split */
    double dropout;          /* after embeddings and in the blocks, training only (0) */
    bool shift_right;        /* read the targets shifted right (true) */
    bool decode_cache;       /* decoders keep key/value and LSH bucket caches (true) */
} qkv_reformer_opts;

qkv_reformer_opts qkv_reformer_defaults(void);

/* The options as a "model" config object (a new cJSON the caller deletes), or NULL (error set) when a value is
 * out of range or the options break a rule between fields; the error names the key. */
struct cJSON *qkv_reformer_config(const qkv_reformer_opts *o);

/* The Reformer LM model type (registered; its name is the registry's business). */
const qkv_model_type *qkv_reformer_model_type(void);

#ifdef __cplusplus
}
#endif
#endif
