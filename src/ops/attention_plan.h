/* One attention call as its kernels see it: the plan fixed at forward time, the operands read in place, and the
 * two questions both paths (attention.c's materialising path, attention_fused.c's kernels) ask of it: which keys
 * a query sees, which weights dropout keeps (attention_plan.c). Not installed. */
#ifndef QKV_OPS_ATTENTION_PLAN_H
#define QKV_OPS_ATTENTION_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/visibility.h"
#include "qkv/attention.h"

QKV_INTERNAL_BEGIN

/* Everything a kernel needs to know about one call, fixed at forward time and reused by backward. */
typedef struct sdpa_plan {
    int64_t B, H, Tq, Tk, D, Dv;
    float scale;
    bool causal;         /* query i sees keys j <= i + (Tk - Tq) */
    const float *kbias;  /* [B, Tk]: 0 for a real key, -inf for a padded one; NULL when there is no padding */
    /* Additive bias in natural-log units, element (b, h, i, j) at abias[b*ab_sb + h*ab_sh + i*ab_si + j] (strides
     * 0 along broadcast dimensions); NULL when there is none. */
    const float *abias;
    int64_t ab_sb, ab_sh, ab_si;
    const int64_t *prefix; /* [B]: keys j < prefix[b] visible to every query under causality; NULL: none */
    float dropout;       /* 0 unless dropout is active (training mode and p > 0) */
    uint64_t seed, base; /* counter-mode stream of the dropout mask */
} sdpa_plan;

/* One past the last key row i of batch b sees: under causality alone i + (Tk - Tq) + 1, widened to the batch's
 * prefix under the prefix-LM mask. The visible keys are always a prefix [0, horizon) of the keys. */
static inline int64_t qkv__sdpa_horizon(const sdpa_plan *p, int64_t b, int64_t i) {
    if (!p->causal) return p->Tk;
    int64_t v = i + (p->Tk - p->Tq) + 1;
    if (p->prefix && p->prefix[b] > v) v = p->prefix[b];
    return v;
}

/* Number of keys of row i (0-based query index) of batch b visible under the masks, among keys [j0, j0 + n). */
static inline int64_t qkv__sdpa_visible(const sdpa_plan *p, int64_t b, int64_t i, int64_t j0, int64_t n) {
    if (!p->causal) return n;
    int64_t v = qkv__sdpa_horizon(p, b, i) - j0;
    return v < 0 ? 0 : v > n ? n : v;
}

/* Row (bh, i) of the additive bias, keys from 0; NULL when there is no bias. */
static inline const float *qkv__sdpa_bias_row(const sdpa_plan *p, int64_t bh, int64_t i) {
    if (!p->abias) return NULL;
    return p->abias + (bh / p->H) * p->ab_sb + (bh % p->H) * p->ab_sh + i * p->ab_si;
}

/* Dropout multipliers of keys [j0, j0 + n) of row (bh, i): 0 for a dropped weight, 1/(1-p) for a kept one. */
void qkv__sdpa_keep(const sdpa_plan *p, int64_t bh, int64_t i, int64_t j0, int64_t n, float *mult);

/* A [B, H, T, D] operand read in place: row (b, h, t) starts at p + b*sb + h*sh + t*st, its D elements adjacent. */
typedef struct sdpa_rows {
    const float *p;
    int64_t sb, sh, st;
} sdpa_rows;

QKV_INTERNAL_END
#endif
