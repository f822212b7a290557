/* Inverted dropout: y = x * keep / (1 - p), keep = (u >= p) with u uniform in [0, 1).
 *
 * The mask comes from the context's generator in counter mode: element i (row-major) uses number i % 4 of the
 * Philox block base + i / 4, where base is the generator's counter, which then advances by ceil(n / 4) blocks.
 * Element i therefore gets the same number as qkv_rng_uniform_at(seed, base, i) whatever the thread count. The
 * mask is kept (one byte per element) for the backward pass: dx = dy * keep / (1 - p).
 */
#include <math.h>

#include "core/internal.h"
#include "qkv/ops.h"
#include "qkv/rng.h"

#define PAR_MIN (1 << 15)
#define LANES 16              /* Philox blocks generated together */
#define BLOCKS_PER_CHUNK 1024 /* 4096 elements per thread work item; a multiple of LANES */

/* LANES consecutive Philox4x32-10 blocks (counters ctr, ctr + 1, ...) at once, bit-identical to qkv_philox4x32()
 * in src/core/rng.c (the dropout test checks every element against qkv_rng_uniform_at). Written lane-parallel so
 * gcc vectorises the 32x32->64-bit products; a call per block was most of dropout's time. */
static void philox_lanes(uint64_t key, uint64_t ctr, uint32_t out[4][LANES]) {
    uint32_t c0[LANES], c1[LANES], c2[LANES], c3[LANES];
    for (int l = 0; l < LANES; l++) {
        uint64_t c = ctr + (uint64_t)l;
        c0[l] = (uint32_t)c;
        c1[l] = (uint32_t)(c >> 32);
        c2[l] = 0;
        c3[l] = 0;
    }
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
#pragma omp simd /* without it gcc unrolls the lanes and then fails to vectorise the widening multiplies */
        for (int l = 0; l < LANES; l++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0[l], p1 = (uint64_t)0xCD9E8D57u * c2[l];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
            c1[l] = (uint32_t)p1;
            c3[l] = (uint32_t)p0;
            c0[l] = n0;
            c2[l] = n2;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    for (int l = 0; l < LANES; l++) {
        out[0][l] = c0[l];
        out[1][l] = c1[l];
        out[2][l] = c2[l];
        out[3][l] = c3[l];
    }
}

static qkv_status dropout_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    if (!gx) return QKV_OK;
    const unsigned char *restrict keep = nd->saved;
    const float *restrict dy = nd->out->grad->data;
    float *restrict dx = gx->data;
    float scale = (float)nd->f[0];
    int64_t n = qkv_numel(gx);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] += dy[i] * (keep[i] ? scale : 0.0f);
    return QKV_OK;
}

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
        for (int64_t b = c * BLOCKS_PER_CHUNK; b < b1; b += LANES) {
            uint32_t r[4][LANES];
            philox_lanes(seed, base + (uint64_t)b, r);
            /* Element 4 * (b + l) + w takes word w of block b + l. */
            float u[4 * LANES];
            for (int l = 0; l < LANES; l++)
                for (int w = 0; w < 4; w++) u[4 * l + w] = (float)(r[w][l] >> 8) * (1.0f / 16777216.0f);
            int64_t e0 = 4 * b, len = n - e0 < 4 * LANES ? n - e0 : 4 * LANES;
            for (int64_t k = 0; k < len; k++) {
                keep[e0 + k] = u[k] >= p;
                dst[e0 + k] = src[e0 + k] * (u[k] >= p ? scale : 0.0f); /* a product: NaN/inf propagate as torch */
            }
        }
    }
    qkv_node *nd = qkv_record(ctx, out, "dropout", dropout_backward, 1, &x);
    if (nd) {
        nd->saved = keep;
        nd->f[0] = scale;
    }
    return out;
}
