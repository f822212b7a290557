/* Small-M products with a fixed weight: y [M, N] (+)= x [M, K] W^T for W [N, K] packed once into panels.
 * Not installed.
 *
 * A decoding step multiplies a few dozen rows by the same weights at every step. BLAS re-packs W on every call
 * (at M <= 64 that copy costs as much as the product), so a decoding state packs each weight once and its steps
 * run a kernel over the packed panels. Each output row is computed alone, over k in order, whatever M and the
 * row's position in the tile: a row's result does not depend on what it is batched with (the same bits for M = 1
 * and M = 256). Paths per instruction set (core/isa.h) agree to rounding.
 *
 * Use from a model: a decoding state makes a qkv__packs, names the weights its steps may multiply by
 * (qkv__packs_allow: parameters, never per-step data, since a pack is made once and trusted until freed) and hangs
 * it on its work context (qkv__ctx_set_packs); qkv_linear and the recurrent cell then take the packed path for an
 * allowed weight, packing it on its first product with M >= 2 (a batch of one stays a GEMV and never packs). */
#ifndef QKV_OPS_GEMM_PACKED_H
#define QKV_OPS_GEMM_PACKED_H

#include <stdbool.h>
#include <stdint.h>

#include "core/visibility.h"
#include "qkv/autograd.h"
#include "qkv/error.h"
#include "qkv/tensor.h"

QKV_INTERNAL_BEGIN

/* One packed weight. */
typedef struct qkv__pack qkv__pack;

/* Packs W [N, K] (row-major, contiguous). NULL with an error when out of memory or N, K < 1. */
qkv__pack *qkv__pack_new(const float *W, int64_t N, int64_t K);
void qkv__pack_free(qkv__pack *p);
/* y [M, N] (row stride ldy) = x [M, K] (row stride ldx) W^T, or y += it when accumulate. M >= 0. */
void qkv__pack_gemm(const qkv__pack *p, int64_t M, const float *x, int64_t ldx, float *y, int64_t ldy,
                    bool accumulate);

/* Rows of x one pass over the packed panels takes (qkv__pack_gemm runs longer products as blocks of this many rows,
 * so a block of x stays in L2 while the panels stream past it). */
#define QKV__PACKED_BLOCK_M 128
/* Most rows a context's product takes the packed path for: a beam of 4 over 64 sentences. On one AVX-512 core
 * (CPU time, loaded machine) the packed passes match BLAS at 256 rows (8000 x 256 weight: 163 against 168 GFLOP/s;
 * 1024 x 256: 182 against 171) and fall behind at 512 (135 against 165), where BLAS's per-call packing is
 * amortised. */
#define QKV__PACKED_MAX_M 256

/* The packs of one decoding state: which weights may be packed, and the packs made so far. */
typedef struct qkv__packs qkv__packs;

qkv__packs *qkv__packs_new(void);
void qkv__packs_free(qkv__packs *ps);
/* Drops the packs made so far (the weights stay allowed): later products behave as in a new qkv__packs, and one
 * that packs again takes the open pack cache's copy if there is one. */
void qkv__packs_forget(qkv__packs *ps);
/* Lets products by w (a parameter that does not change while ps lives), or by any block of its rows, be packed.
 * NULL w, and a w that is not contiguous float32, are ignored (never packed). Error only when out of memory. */
qkv_status qkv__packs_allow(qkv__packs *ps, const qkv_tensor *w);
/* The packed path for ctx's packs: y [M, N] (+)= x W^T when W [N, K] (contiguous) lies in an allowed weight and is
 * packed or M >= 2 (it is packed now). False when the caller must use BLAS (nothing written): no packs on ctx, W
 * not allowed, M < 2 with no pack yet, M > QKV__PACKED_MAX_M, or out of memory. */
bool qkv__gemm_xwt(const qkv_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, int64_t ldx, const float *W,
                   float *y, int64_t ldy, bool accumulate);
/* The same with a bias [N] (not NULL): y = bias + x W^T, the bits of the bias copied into y and then accumulated
 * into, without the copy (a decoding step's vocabulary projection is 64 x 8,000 floats of y). False as above, y then
 * untouched. */
bool qkv__gemm_xwt_bias(const qkv_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, int64_t ldx,
                        const float *W, const float *bias, float *y, int64_t ldy);

/* A pack cache on the calling thread, for a stretch of work that starts many decoding states over the same weights
 * (qkv_decode_batch's batches): while one is open, a state packing a weight that an earlier state packed takes
 * that pack (same bits) instead of copying the weight again; close releases what the states no longer hold. The
 * cached packs are dropped when the weights' epoch moves (core/internal.h: parameters freed, stepped or loaded), so
 * a weight at a recycled address is packed afresh; any other write into a cached weight is the caller's to avoid.
 * Opens nest; the outermost close empties the cache. */
void qkv__pack_cache_open(void);
void qkv__pack_cache_close(void);

QKV_INTERNAL_END
#endif
