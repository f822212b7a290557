/* Differentiable tensor ops.
 *
 * Conventions, for every function here:
 *   - The first argument is the context; the result is a context tensor (valid until qkv_ctx_reset).
 *   - On bad input (shape, dtype, axis) the op returns NULL and sets qkv_last_error(). An op given a NULL input
 *     returns NULL without touching the error, so a chain of ops is checked once, at its end.
 *   - Axes may be negative (-1 is the last). Broadcasting follows NumPy's rules.
 *   - Views (reshape of a contiguous tensor, transpose, permute, slice, broadcast_to) share data and copy nothing;
 *     ops that need contiguous input copy internally when they must.
 *   - Each op records its backward when gradients are on and an input requires them (autograd.h).
 */
#ifndef QKV_OPS_H
#define QKV_OPS_H

#include "qkv/autograd.h"
#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Matrix products (cblas_sgemm) ------------------------------------------------------------------------- */
/* a @ b with numpy.matmul semantics for ndim >= 2: [..., M, K] @ [..., K, N] -> [..., M, N], batch dims
 * broadcast. A transposed view (qkv_transpose(x, -1, -2)) is passed to BLAS as a transpose flag, not copied. */
qkv_tensor *qkv_matmul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
/* x @ w^T + bias, as torch.nn.functional.linear: x [..., in], w [out, in], bias [out] or NULL. */
qkv_tensor *qkv_linear(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *w, qkv_tensor *bias);

/* ---- Convolution ------------------------------------------------------------------------------------------- */
/* 1-D convolution over time, channels last (as a sequence model holds its activations): x [B, T, in], weight
 * [out, in, width] in torch's nn.Conv1d layout, bias [out] or NULL, `padding` zero steps at both ends, stride 1.
 * Result [B, T + 2 padding - width + 1, out]: torch.nn.functional.conv1d(x^T, weight, bias, padding=padding)^T. */
qkv_tensor *qkv_conv1d(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight, qkv_tensor *bias, int64_t padding);

/* ---- Elementwise, with broadcasting ----------------------------------------------------------------------- */
qkv_tensor *qkv_add(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
qkv_tensor *qkv_sub(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
qkv_tensor *qkv_mul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
qkv_tensor *qkv_div(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
/* x * s + c */
qkv_tensor *qkv_affine(qkv_ctx *ctx, qkv_tensor *x, float s, float c);
static inline qkv_tensor *qkv_scale(qkv_ctx *ctx, qkv_tensor *x, float s) { return qkv_affine(ctx, x, s, 0.0f); }

/* ---- Unary ------------------------------------------------------------------------------------------------- */
qkv_tensor *qkv_relu(qkv_ctx *ctx, qkv_tensor *x);
qkv_tensor *qkv_gelu(qkv_ctx *ctx, qkv_tensor *x);      /* exact: x * Phi(x), erf form */
qkv_tensor *qkv_gelu_tanh(qkv_ctx *ctx, qkv_tensor *x); /* tanh approximation (GPT-2, approximate='tanh') */
qkv_tensor *qkv_tanh(qkv_ctx *ctx, qkv_tensor *x);
qkv_tensor *qkv_sigmoid(qkv_ctx *ctx, qkv_tensor *x);
qkv_tensor *qkv_exp(qkv_ctx *ctx, qkv_tensor *x);
qkv_tensor *qkv_log(qkv_ctx *ctx, qkv_tensor *x);
qkv_tensor *qkv_sqrt(qkv_ctx *ctx, qkv_tensor *x);

/* ---- Reductions -------------------------------------------------------------------------------------------- */
qkv_tensor *qkv_sum(qkv_ctx *ctx, qkv_tensor *x, int axis, bool keepdim);
qkv_tensor *qkv_mean(qkv_ctx *ctx, qkv_tensor *x, int axis, bool keepdim);
/* Max over an axis; the gradient goes to the first maximal element, as torch.max(dim). */
qkv_tensor *qkv_max(qkv_ctx *ctx, qkv_tensor *x, int axis, bool keepdim);
/* Sum / mean of all elements: a 0-d tensor. */
qkv_tensor *qkv_sum_all(qkv_ctx *ctx, qkv_tensor *x);
qkv_tensor *qkv_mean_all(qkv_ctx *ctx, qkv_tensor *x);

/* ---- Shape ------------------------------------------------------------------------------------------------- */
/* One dimension may be -1 (inferred). A view when x is contiguous, else a copy. */
qkv_tensor *qkv_reshape(qkv_ctx *ctx, qkv_tensor *x, int ndim, const int64_t *shape);
qkv_tensor *qkv_transpose(qkv_ctx *ctx, qkv_tensor *x, int axis0, int axis1); /* view */
qkv_tensor *qkv_permute(qkv_ctx *ctx, qkv_tensor *x, const int *perm);        /* view; perm has x->ndim entries */
/* Elements start, start+step, ... < end along axis (step >= 1; negative start/end count from the end). View. */
qkv_tensor *qkv_slice(qkv_ctx *ctx, qkv_tensor *x, int axis, int64_t start, int64_t end, int64_t step);
qkv_tensor *qkv_broadcast_to(qkv_ctx *ctx, qkv_tensor *x, int ndim, const int64_t *shape); /* view */
qkv_tensor *qkv_contiguous(qkv_ctx *ctx, qkv_tensor *x); /* x itself when already contiguous */
qkv_tensor *qkv_concat(qkv_ctx *ctx, int n, qkv_tensor *const *xs, int axis);
qkv_tensor *qkv_stack(qkv_ctx *ctx, int n, qkv_tensor *const *xs, int axis);
/* Split along axis into n pieces of the given sizes (which must sum to the axis length); views. */
qkv_status qkv_split(qkv_ctx *ctx, qkv_tensor *x, int axis, int n, const int64_t *sizes, qkv_tensor **out);

/* ---- Indexing ---------------------------------------------------------------------------------------------- */
/* Rows of weight [V, D] for int32 ids of any shape: result [ids..., D]. Backward scatter-adds into weight.
 * ids out of [0, V) are an error. */
qkv_tensor *qkv_embedding(qkv_ctx *ctx, qkv_tensor *weight, qkv_tensor *ids);
/* torch.index_select: entries of x at int32 1-D `index` along axis. */
qkv_tensor *qkv_index_select(qkv_ctx *ctx, qkv_tensor *x, int axis, qkv_tensor *index);
/* torch.gather: out[i][j][k] = x[i][index[i][j][k]][k] for axis 1, etc.; index int32 with x's ndim. */
qkv_tensor *qkv_gather(qkv_ctx *ctx, qkv_tensor *x, int axis, qkv_tensor *index);
/* x where mask is zero, `value` where mask is non-zero (mask f32 or i32; x and mask broadcast together, as torch). */
qkv_tensor *qkv_masked_fill(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *mask, float value);
/* cond ? a : b elementwise (cond f32 or i32, non-zero = true); all three broadcast together. */
qkv_tensor *qkv_where(qkv_ctx *ctx, qkv_tensor *cond, qkv_tensor *a, qkv_tensor *b);

/* ---- Normalisation, softmax, dropout ----------------------------------------------------------------------- */
qkv_tensor *qkv_softmax(qkv_ctx *ctx, qkv_tensor *x, int axis);
qkv_tensor *qkv_log_softmax(qkv_ctx *ctx, qkv_tensor *x, int axis);
/* Layer norm over the last dimension; gamma and beta [D] or NULL. */
qkv_tensor *qkv_layer_norm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *gamma, qkv_tensor *beta, float eps);
/* RMS norm over the last dimension (T5's layer norm): x / sqrt(mean(x^2) + eps) * gamma, no mean subtraction, no
 * bias; gamma [D] or NULL. */
qkv_tensor *qkv_rms_norm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *gamma, float eps);
/* Inverted dropout with probability p, drawing from the context's generator; identity when not training. */
qkv_tensor *qkv_dropout(qkv_ctx *ctx, qkv_tensor *x, float p);

/* ---- Losses ------------------------------------------------------------------------------------------------ */
typedef enum qkv_reduction { QKV_REDUCE_MEAN = 0, QKV_REDUCE_SUM = 1, QKV_REDUCE_NONE = 2 } qkv_reduction;

typedef struct qkv_ce_opts {
    int ignore_index;           /* targets equal to this contribute nothing (default -100, as PyTorch) */
    qkv_tensor *class_weight;   /* [C] or NULL: torch's `weight` */
    qkv_tensor *token_weight;   /* shape of targets, or NULL: per-token weights (e.g. summary-only loss) */
    float label_smoothing;      /* in [0, 1) */
    qkv_reduction reduction;
} qkv_ce_opts;
/* Defaults: ignore_index -100, no weights, no smoothing, mean. */
qkv_ce_opts qkv_ce_defaults(void);
/* Cross-entropy of logits [..., C] (class axis last) against int32 targets [...]. With reduction mean the
 * result is sum(w_i * loss_i) / sum(w_i), w_i = class_weight[t_i] * token_weight_i over non-ignored tokens
 * (torch.nn.functional.cross_entropy semantics when token_weight is NULL). opts may be NULL for defaults.
 * Label smoothing e follows torch 1.13: loss_i = (1-e) w[t] (-log p_t) + e/C sum_c w[c] (-log p_c), times
 * token_weight_i; the mean still divides by sum(class_weight[t_i] * token_weight_i). Reduction none gives per-token
 * losses (0 at ignored ones). If every token is ignored the mean is NaN (0/0, as torch) with zero gradient.
 * Targets outside [0, C) other than ignore_index are a QKV_ERR_RANGE error. Gradients flow into logits only (not
 * into class_weight or token_weight). */
qkv_tensor *qkv_cross_entropy(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets, const qkv_ce_opts *opts);
/* qkv_cross_entropy(qkv_linear(h, w, bias), targets, opts) for h [..., d], w [C, d], bias [C] or NULL, targets the
 * shape of h without its last axis: the same loss and gradients (to h, w and bias), but rows whose token_weight is
 * 0 or whose target is ignore_index are dropped before the projection, so they cost nothing (an LM's head on a
 * summarizer's article or on padding). Only the order of sums over rows may differ from the dense composition. */
qkv_tensor *qkv_cross_entropy_linear(qkv_ctx *ctx, qkv_tensor *h, qkv_tensor *w, qkv_tensor *bias,
                                     qkv_tensor *targets, const qkv_ce_opts *opts);
/* (a - b)^2 with a and b broadcast together; mean is over the broadcast elements (torch.nn.functional.mse_loss). */
qkv_tensor *qkv_mse(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, qkv_reduction reduction);
/* torch.nn.functional.binary_cross_entropy_with_logits: logits and float targets in [0, 1] (broadcast together),
 * pos_weight (broadcast to them, e.g. [C]) or NULL; numerically stable for any logit. Gradients flow to logits and
 * targets (not to pos_weight). */
qkv_tensor *qkv_bce_with_logits(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets, qkv_tensor *pos_weight,
                                qkv_reduction reduction);
/* torch.nn.functional.cosine_similarity along axis, a and b broadcast together, as torch 1.13 computes it:
 * dot / (max(|a|, eps) * max(|b|, eps)), each norm clamped on its own. As in torch the clamp is invisible to the
 * backward (it uses d|a|/da = a / max(|a|, eps)), so for norms below eps the gradient is torch's, not the exact
 * derivative. */
qkv_tensor *qkv_cosine_similarity(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, int axis, float eps);

/* Triplet loss over a batch of positive pairs (the Trax course's Siamese network). a, b [B, D] (B >= 2) hold unit
 * vectors (L2-normalised by the caller), (a_i, b_i) a positive pair and every (a_i, b_j), j != i, a negative. With
 * s = a b^T (cosines), margin alpha and for each row i:
 *     mean_neg_i    = sum_{j != i} s_ij / (B - 1)
 *     closest_neg_i = max_j c_ij, c_ij = s_ij where j != i and s_ij <= s_ii (the hardest negative not above the
 *                     positive), s_ij - 2 where s_ij > s_ii, and c_ii = -2 (no gradient)
 *     loss = mean_i [ relu(alpha - s_ii + closest_neg_i) ] + mean_i [ relu(alpha - s_ii + mean_neg_i) ]
 * terms chooses the two parts (a bit set, both by default). The course's graded function sums over i instead of
 * averaging (B times this); the mean keeps the learning rate independent of the batch size. Result: a scalar [1];
 * gradients flow to a and b (the relu's kink and the max's choice as torch: 0 at relu(0), the first maximum). */
typedef enum qkv_triplet_terms {
    QKV_TRIPLET_MEAN_NEGATIVE = 1,
    QKV_TRIPLET_CLOSEST_NEGATIVE = 2,
    QKV_TRIPLET_BOTH = 3,
} qkv_triplet_terms;
qkv_tensor *qkv_triplet_loss(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, float margin, qkv_triplet_terms terms);

/* Extractive QA's span loss: with start_logits, end_logits [B, T], int32 spans [B, 2] (gold start and end positions)
 * and allowed [B, T] (float32, non-zero where an answer may be: the context's tokens; NULL = everywhere), the mean of
 *     cross_entropy(start_logits masked to allowed, start) and cross_entropy(end_logits masked to allowed, end)
 * over the batch, i.e. (CE_start + CE_end) / 2 as BERT's QA head trains. Disallowed positions are out of the softmax
 * (as a -inf logit) and get no gradient. A gold position outside [0, T) or not allowed is QKV_ERR_RANGE. Result: a
 * scalar [1]; gradients flow to both logits. */
qkv_tensor *qkv_span_loss(qkv_ctx *ctx, qkv_tensor *start_logits, qkv_tensor *end_logits, const qkv_tensor *spans,
                          const qkv_tensor *allowed);

#ifdef __cplusplus
}
#endif
#endif
