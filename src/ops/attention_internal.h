/* Shared between the attention front end (attention.c: validation, masks, the materialising path, autograd), the
 * fused flash-style kernels (attention_fused.c) it calls, and the dropout mask both draw (attention_dropout.c).
 * Not installed. */
#ifndef QKV_OPS_ATTENTION_INTERNAL_H
#define QKV_OPS_ATTENTION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/attention.h"

/* Everything a kernel needs to know about one call, fixed at forward time and reused by backward. */
typedef struct sdpa_plan {
    int64_t B, H, Tq, Tk, D, Dv;
    float scale;
    bool causal;         /* query i sees keys j <= i + (Tk - Tq) */
    const float *kbias;  /* [B, Tk]: 0 for a real key, -inf for a padded one; NULL when there is no padding */
    float dropout;       /* 0 unless dropout is active (training mode and p > 0) */
    uint64_t seed, base; /* counter-mode stream of the dropout mask */
} sdpa_plan;

/* Number of keys of row i (0-based query index) visible under causality, among keys [j0, j0 + n). */
static inline int64_t qkv__sdpa_visible(const sdpa_plan *p, int64_t i, int64_t j0, int64_t n) {
    if (!p->causal) return n;
    int64_t v = i + (p->Tk - p->Tq) - j0 + 1;
    return v < 0 ? 0 : v > n ? n : v;
}

/* Dropout multipliers of keys [j0, j0 + n) of row (bh, i): 0 for a dropped weight, 1/(1-p) for a kept one. */
void qkv__sdpa_keep(const sdpa_plan *p, int64_t bh, int64_t i, int64_t j0, int64_t n, float *mult);

/* A [B, H, T, D] operand read in place: row (b, h, t) starts at p + b*sb + h*sh + t*st, its D elements adjacent. */
typedef struct sdpa_rows {
    const float *p;
    int64_t sb, sh, st;
} sdpa_rows;

/* Fused forward: writes out [B*H, Tq, Dv] (contiguous) and, when lse is not NULL, the base-2 log-sum-exp of each
 * row's scaled scores [B*H, Tq] (+inf for a fully masked row). Scratch comes from ctx. */
qkv_status qkv__sdpa_fused_forward(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                                   const sdpa_rows *v, float *out, float *lse);

/* Fused backward: adds the gradients into dq, dk, dv (contiguous [B*H, T, D] / [B*H, Tk, Dv]; any may be NULL to
 * skip it; they may be the same buffer when one tensor was passed twice). out, dout [B*H, Tq, Dv] contiguous and
 * lse as written by the forward. */
qkv_status qkv__sdpa_fused_backward(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                                    const sdpa_rows *v, const float *out, const float *dout, const float *lse,
                                    float *dq, float *dk, float *dv);

#endif
