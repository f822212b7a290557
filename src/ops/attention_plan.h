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

QKV_INTERNAL_END
#endif
