/* Neural-network layers and Trax-style combinators. Include this for everything in nn: the layer structs
 * (nn_layers.h), attention (nn_attention.h), Transformer blocks (nn_transformer.h) and, here, a generic layer
 * type with combinators so a model definition reads like its diagram:
 *
 *     qkv_layer *model = QKV_SERIAL(
 *         qkv_layer_embedding(params, "embed", vocab, d, QKV_NN_NO_PADDING, true, rng),
 *         qkv_layer_posenc(params, "pos", QKV_POSENC_SINUSOIDAL, max_len, d, 0.1f, rng),
 *         qkv_layer_encoder_block(params, "encoder.layers.0", &block, false, rng),
 *         qkv_layer_fn("take_token_0", 1, 1, take_first, NULL),
 *         qkv_layer_dense(params, "head", d, n_classes, rng),
 *         qkv_layer_log_softmax());
 *
 * Data stack (as in Trax). A layer takes n_in tensors from the top of a stack and pushes n_out results. Serial
 * runs its children one after another on the same stack; Branch gives every child a copy of the same inputs and
 * pushes all their outputs (first child's on top); Parallel splits the stack among its children, each taking its
 * own n_in; Residual(f...) computes x + Serial(f...)(x) on the top entry; Select reorders / copies stack entries;
 * Dup copies the top;
 * Drop pops it. Element 0 of an in/out array is the top of the stack.
 *
 * Ownership. Constructors return a new layer or NULL (error set). Combinators take ownership of their children
 * (also when they fail: every non-NULL child is freed), so a whole tree is built in one expression and checked
 * once; qkv_layer_free() frees a tree. Parameters live in the qkv_params the leaf constructors were given, which
 * must outlive the layers.
 *
 * Order. C leaves the evaluation order of the arguments inside one QKV_SERIAL(...) unspecified, so the order in
 * which those leaves add parameters and draw from rng is the compiler's (gcc and clang go left to right). Names do
 * not depend on it; build the leaves in separate statements when bit-exact initial weights across compilers matter.
 */
#ifndef QKV_NN_H
#define QKV_NN_H

#include "qkv/nn_attention.h"
#include "qkv/nn_layers.h"
#include "qkv/nn_reversible.h"
#include "qkv/nn_transformer.h"
#include "qkv/rnn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_LAYER_MAX_STACK 32 /* deepest data stack a layer tree may use */

typedef struct qkv_layer qkv_layer;

/* A layer's forward: read in[0..n_in), write out[0..n_out) (context tensors). */
typedef qkv_status (*qkv_layer_forward_fn)(qkv_ctx *ctx, const qkv_layer *self, qkv_tensor **in,
                                           qkv_tensor **out);
/* A plain function made a layer: in and out as above, user as given to qkv_layer_fn. */
typedef qkv_status (*qkv_layer_user_fn)(qkv_ctx *ctx, qkv_tensor **in, qkv_tensor **out, void *user);

struct qkv_layer {
    char name[64];        /* "Serial", "Dense", "Branch", or the name given to qkv_layer_fn */
    char prefix[112];     /* the parameter prefix of a leaf with parameters, "" otherwise */
    int n_in, n_out;
    qkv_layer_forward_fn forward;
    qkv_layer **children; /* owned */
    int n_children;
    void *state;          /* owned, freed with free() (leaf layers keep their module struct here) */
    void *user;           /* qkv_layer_fn's pointer (not owned) */
    qkv_layer_user_fn fn;
    int *indices;         /* Select's indices (owned) */
    int shares;           /* references beyond the first (qkv_layer_share); each qkv_layer_free drops one */
    bool batchwise;       /* rows along axis 0 of every input and output are independent examples: the layer on
                           * inputs stacked along axis 0 gives its outputs stacked (Parallel runs copies of one
                           * shared batchwise layer as one call). Leaves and combinators of them set it; a
                           * qkv_layer_fn does not (it may mix the batch, as a loss over it does). */
};

void qkv_layer_free(qkv_layer *layer);

/* Run a layer on n inputs (n must equal layer->n_in); outputs into out[0..n_out). */
qkv_status qkv_layer_apply(qkv_ctx *ctx, const qkv_layer *layer, int n, qkv_tensor **in, qkv_tensor **out);
/* The one-in, one-out case: the output or NULL (error set). */
qkv_tensor *qkv_layer_call(qkv_ctx *ctx, const qkv_layer *layer, qkv_tensor *x);
/* The tree, one layer a line, indented, with n_in -> n_out and parameter prefixes, into buf; returns buf. */
const char *qkv_layer_describe(const qkv_layer *layer, char *buf, size_t size);

/* ---- Combinators (take ownership of children) ---- */
qkv_layer *qkv_layer_serial(int n, qkv_layer *const *children);
qkv_layer *qkv_layer_branch(int n, qkv_layer *const *children);
qkv_layer *qkv_layer_parallel(int n, qkv_layer *const *children);
/* f = Serial(children), k inputs -> m outputs (k, m >= 1): out[0] = f(in)[0] + in[0], out[1..m) = f(in)[1..m)
 * (so a block that carries a mask along stays residual). */
qkv_layer *qkv_layer_residual(int n, qkv_layer *const *children);
#define QKV_LAYERS_(...) (int)(sizeof((qkv_layer *[]){__VA_ARGS__}) / sizeof(qkv_layer *)), (qkv_layer *[]){__VA_ARGS__}
#define QKV_SERIAL(...) qkv_layer_serial(QKV_LAYERS_(__VA_ARGS__))
#define QKV_BRANCH(...) qkv_layer_branch(QKV_LAYERS_(__VA_ARGS__))
#define QKV_PARALLEL(...) qkv_layer_parallel(QKV_LAYERS_(__VA_ARGS__))
#define QKV_RESIDUAL(...) qkv_layer_residual(QKV_LAYERS_(__VA_ARGS__))

/* Select: takes n_in entries and pushes in[indices[0]], ..., in[indices[n_out - 1]] (Trax's Select). */
qkv_layer *qkv_layer_select(int n_in, int n_out, const int *indices);
qkv_layer *qkv_layer_dup(void);  /* x -> x, x */
qkv_layer *qkv_layer_drop(void); /* x -> (nothing) */
qkv_layer *qkv_layer_identity(void);
qkv_layer *qkv_layer_add(void);  /* a, b -> a + b */
/* One more reference to the same layer: the same weights applied again, as Trax's Parallel(model, model) (the
 * Siamese network's shared encoder is QKV_PARALLEL(enc, qkv_layer_share(enc))). Each reference is freed once; the
 * layer itself goes with the last. Returns layer (NULL stays NULL). */
qkv_layer *qkv_layer_share(qkv_layer *layer);
/* A plain C function as a layer; name is copied, user is borrowed. */
qkv_layer *qkv_layer_fn(const char *name, int n_in, int n_out, qkv_layer_user_fn fn, void *user);

/* ---- Leaves wrapping the nn modules (parameters added to params under prefix) ---- */
qkv_layer *qkv_layer_dense(qkv_params *params, const char *prefix, int64_t in, int64_t out, qkv_rng *rng);
qkv_layer *qkv_layer_embedding(qkv_params *params, const char *prefix, int64_t num, int64_t dim,
                               int64_t padding_idx, bool scale_sqrt_dim, qkv_rng *rng);
qkv_layer *qkv_layer_posenc(qkv_params *params, const char *prefix, qkv_posenc_kind kind, int64_t max_len,
                            int64_t dim, float dropout, qkv_rng *rng);
qkv_layer *qkv_layer_layer_norm(qkv_params *params, const char *prefix, int64_t dim);
qkv_layer *qkv_layer_dropout(float p);
qkv_layer *qkv_layer_activation(qkv_activation act);
qkv_layer *qkv_layer_log_softmax(void);
/* Mean over time of the unmasked steps: (x [B, T, D], token mask [B, T], non-zero = token, as qkv_batch's) -> [B, D]
 * (qkv_nn_masked_mean; a row without tokens gives zeros). */
qkv_layer *qkv_layer_masked_mean(void);
/* Max over time of the unmasked steps: (x [B, T, D], token mask [B, T], non-zero = token) -> [B, D]
 * (qkv_nn_masked_max). */
qkv_layer *qkv_layer_masked_max(void);
/* A Conv1d (qkv_nn_conv1d) that carries the mask along: (x [B, T, in], token mask [B, T]) -> (y [B, T_out, out],
 * token mask of the outputs [B, T_out]: 1 where the window holds a token). */
qkv_layer *qkv_layer_conv1d(qkv_params *params, const char *prefix, int64_t in, int64_t out, int64_t width,
                            int64_t padding, qkv_rng *rng);
/* x / max(||x||_2, eps) along the last axis (qkv_nn_l2_normalize). */
qkv_layer *qkv_layer_l2_normalize(float eps);
/* A recurrent stack (qkv_rnn) run from a zero state over full sequences: x [B, T, input_size] -> its last layer's
 * outputs [B, T, directions * hidden_size]. */
qkv_layer *qkv_layer_rnn(qkv_params *params, const char *prefix, const qkv_rnn_config *cfg, qkv_rng *rng);
/* An encoder block. with_mask: takes (x, key_padding [B, T]) and returns (y, key_padding), as Trax's blocks carry
 * the mask along; otherwise x -> y. */
qkv_layer *qkv_layer_encoder_block(qkv_params *params, const char *prefix, const qkv_nn_block_config *cfg,
                                   bool with_mask, qkv_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
