/* The fused flash-style kernels (attention_fused.c) that attention.c's front end calls. Not installed. */
#ifndef QKV_OPS_ATTENTION_FUSED_H
#define QKV_OPS_ATTENTION_FUSED_H

#include "core/visibility.h"
#include "ops/attention_plan.h"

QKV_INTERNAL_BEGIN

/* Fused forward: writes out [B*H, Tq, Dv] (contiguous) and, when lse is not NULL, the base-2 log-sum-exp of each
 * row's scaled scores [B*H, Tq] (+inf for a fully masked row). Scratch comes from ctx. */
qkv_status qkv__sdpa_fused_forward(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                                   const sdpa_rows *v, float *out, float *lse);

/* Fused backward: adds the gradients into dq, dk, dv (contiguous [B*H, T, D] / [B*H, Tk, Dv]; any may be NULL to
 * skip it; they may be the same buffer when one tensor was passed twice) and the additive bias's into dbias
 * ([B*H, Tq, Tk] contiguous, NULL to skip). out, dout [B*H, Tq, Dv] contiguous and lse as written by the forward. */
qkv_status qkv__sdpa_fused_backward(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                                    const sdpa_rows *v, const float *out, const float *dout, const float *lse,
                                    float *dq, float *dk, float *dv, float *dbias);

QKV_INTERNAL_END
#endif
