/* Philox4x32-10 for QKV_PHILOX_LANES consecutive counters at once, bit-identical to qkv_philox4x32() (src/core/rng.c)
 * block by block: lane l of out[w] is word w of the block at counter ctr + l. Written lane-parallel so compilers
 * vectorise it; one call per block was most of a dropout mask's time. The 32-bit words are held in 64-bit lanes and
 * masked to 32 bits before each product, the form x86 compilers turn into one 32 x 32 -> 64-bit multiply per lane
 * (pmuludq) instead of widening both operands to a full 64 x 64 multiply. Always inlined, so a caller compiled per
 * instruction set (core/isa.h) gets it in that set. Not installed. */
#ifndef QKV_CORE_PHILOX_LANES_H
#define QKV_CORE_PHILOX_LANES_H

#include <stdint.h>

#define QKV_PHILOX_LANES 16

static inline __attribute__((always_inline)) void qkv__philox_lanes(uint64_t key, uint64_t ctr,
                                                                     uint32_t out[4][QKV_PHILOX_LANES]) {
    const uint64_t lo32 = 0xFFFFFFFFu;
    uint64_t c0[QKV_PHILOX_LANES], c1[QKV_PHILOX_LANES], c2[QKV_PHILOX_LANES], c3[QKV_PHILOX_LANES];
    for (int l = 0; l < QKV_PHILOX_LANES; l++) {
        uint64_t c = ctr + (uint64_t)l;
        c0[l] = c & lo32;
        c1[l] = c >> 32;
        c2[l] = 0;
        c3[l] = 0;
    }
    uint64_t k0 = key & lo32, k1 = key >> 32;
    for (int r = 0; r < 10; r++) {
#pragma omp simd
        for (int l = 0; l < QKV_PHILOX_LANES; l++) {
            uint64_t p0 = (c0[l] & lo32) * 0xD2511F53u, p1 = (c2[l] & lo32) * 0xCD9E8D57u;
            uint64_t n0 = (p1 >> 32) ^ c1[l] ^ k0, n2 = (p0 >> 32) ^ c3[l] ^ k1;
            c1[l] = p1 & lo32;
            c3[l] = p0 & lo32;
            c0[l] = n0;
            c2[l] = n2;
        }
        k0 = (k0 + 0x9E3779B9u) & lo32;
        k1 = (k1 + 0xBB67AE85u) & lo32;
    }
    for (int l = 0; l < QKV_PHILOX_LANES; l++) {
        out[0][l] = (uint32_t)c0[l];
        out[1][l] = (uint32_t)c1[l];
        out[2][l] = (uint32_t)c2[l];
        out[3][l] = (uint32_t)c3[l];
    }
}

/* The uniform float in [0, 1) of a 32-bit draw, as qkv_rng_uniform(): its top 24 bits. */
static inline float qkv__philox_unit(uint32_t r) { return (float)(r >> 8) * (1.0f / 16777216.0f); }

#endif
