/* Inverted dropout: y = x * keep / (1 - p), keep = (u >= p) with u uniform in [0, 1).
 *
 * The mask comes from the context's generator in counter mode: element i (row-major) uses number i % 4 of the
 * Philox block base + i / 4, where base is the generator's counter, which then advances by ceil(n / 4) blocks.
 * Element i therefore gets the same number as qkv_rng_uniform_at(seed, base, i) whatever the thread count. The
 * mask is kept (one byte per element) for the backward pass: dx = dy * keep / (1 - p).
 */
#include <math.h>

#include "core/internal.h"
#include "core/isa.h"
#include "core/philox_lanes.h"
#include "qkv/ops.h"
#include "qkv/rng.h"

#define PAR_MIN (1 << 15)
#define LANES QKV_PHILOX_LANES /* Philox blocks generated together */
#define BLOCKS_PER_CHUNK 1024  /* 4096 elements per thread work item; a multiple of LANES */
#define GRAD_CHUNK 4096        /* elements per work item of the backward pass */

/* dx = dy * keep / (1 - p) over [0, n), written (fresh) or added. Compiled per instruction set (core/isa.h). */
QKV_KERNEL_BODY void grad_range_body(bool fresh, float *restrict dx, const float *restrict dy,
                                     const unsigned char *restrict keep, int64_t n, float scale) {
    if (fresh)
        for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (keep[i] ? scale : 0.0f);
    else
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i] * (keep[i] ? scale : 0.0f);
}
QKV_ISA_KERNEL_VOID(grad_range,
                    (bool fresh, float *restrict dx, const float *restrict dy, const unsigned char *restrict keep,
                     int64_t n, float scale),
                    (fresh, dx, dy, keep, n, scale))

static qkv_status dropout_backward(qkv_ctx *ctx, qkv_node *nd) {
    bool fresh;
    qkv_tensor *gx = qkv__grad_fresh(ctx, nd->in[0], &fresh);
    if (!gx) return QKV_OK;
    const unsigned char *keep = nd->saved;
    const float *dy = nd->out->grad->data;
    float *dx = gx->data;
    float scale = (float)nd->f[0];
    int64_t n = qkv_numel(gx), nchunks = (n + GRAD_CHUNK - 1) / GRAD_CHUNK;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo = c * GRAD_CHUNK, len = n - lo < GRAD_CHUNK ? n - lo : GRAD_CHUNK;
        grad_range(fresh, dx + lo, dy + lo, keep + lo, len, scale);
    }
    return QKV_OK;
}

/* Mask and output of the blocks [b0, b1) (elements 4 b0 .. 4 b1, clipped to n). Compiled per instruction set
 * (core/isa.h): the Philox lanes are most of the work. */
QKV_KERNEL_BODY void chunk_body(uint64_t seed, uint64_t base, int64_t b0, int64_t b1, int64_t n, float p, float scale,
                                const float *restrict src, float *restrict dst, unsigned char *restrict keep) {
    for (int64_t b = b0; b < b1; b += LANES) {
        uint32_t r[4][LANES];
        qkv__philox_lanes(seed, base + (uint64_t)b, r);
        /* Element 4 * (b + l) + w takes word w of block b + l. */
        float u[4 * LANES];
        for (int l = 0; l < LANES; l++)
            for (int w = 0; w < 4; w++) u[4 * l + w] = qkv__philox_unit(r[w][l]);
        int64_t e0 = 4 * b, len = n - e0 < 4 * LANES ? n - e0 : 4 * LANES;
        for (int64_t k = 0; k < len; k++) {
            keep[e0 + k] = u[k] >= p;
            dst[e0 + k] = src[e0 + k] * (u[k] >= p ? scale : 0.0f); /* a product: NaN/inf propagate as torch */
        }
    }
}
QKV_ISA_KERNEL_VOID(chunk,
                    (uint64_t seed, uint64_t base, int64_t b0, int64_t b1, int64_t n, float p, float scale,
                     const float *restrict src, float *restrict dst, unsigned char *restrict keep),
                    (seed, base, b0, b1, n, p, scale, src, dst, keep))

qkv_tensor *qkv_dropout(qkv_ctx *ctx, qkv_tensor *x, float p) {
    if (!x) return NULL;
    if (!qkv__check_f32("dropout", x, "x")) return NULL;
    if (!(p >= 0.0f && p < 1.0f)) {
        qkv_error_set(QKV_ERR_INVALID, "dropout: probability p must be in [0, 1) (got %g)", (double)p);
        return NULL;
    }
    if (!qkv_ctx_training(ctx) || p == 0.0f) return x;
    const float *src = qkv__contig_data(ctx, x);
    qkv_tensor *out = src ? qkv__out_like(ctx, x) : NULL;
    int64_t n = qkv_numel(x);
    unsigned char *keep = out ? qkv_ctx_alloc(ctx, (size_t)(n ? n : 1)) : NULL;
    if (!keep) return NULL;
    qkv_rng *rng = qkv_ctx_rng(ctx);
    uint64_t seed = rng->seed, base = rng->counter, nblocks = ((uint64_t)n + 3) / 4;
    rng->counter = base + nblocks;
    float scale = 1.0f / (1.0f - p), *dst = out->data;
    int64_t nchunks = (int64_t)((nblocks + BLOCKS_PER_CHUNK - 1) / BLOCKS_PER_CHUNK);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t b1 = (c + 1) * BLOCKS_PER_CHUNK;
        if (b1 > (int64_t)nblocks) b1 = (int64_t)nblocks;
        chunk(seed, base, c * BLOCKS_PER_CHUNK, b1, n, p, scale, src, dst, keep);
    }
    qkv_node *nd = qkv_record(ctx, out, "dropout", dropout_backward, 1, &x);
    if (nd) {
        nd->saved = keep;
        nd->f[0] = scale;
    }
    return out;
}
