/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011). */
#include <math.h>

#include "core/internal.h"
#include "qkv/rng.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void qkv_philox4x32(uint64_t key, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void qkv_rng_init(qkv_rng *rng, uint64_t seed) {
    rng->seed = seed;
    rng->counter = 0;
}

uint32_t qkv_rng_u32(qkv_rng *rng) {
    uint32_t r[4];
    qkv_philox4x32(rng->seed, rng->counter++, r);
    return r[0];
}

float qkv_rng_uniform(qkv_rng *rng) { return (float)(qkv_rng_u32(rng) >> 8) * (1.0f / 16777216.0f); }

float qkv_rng_normal(qkv_rng *rng) {
    uint32_t r[4];
    qkv_philox4x32(rng->seed, rng->counter++, r);
    /* u1 in (0, 1] so the log is finite. */
    double u1 = ((double)(r[0] >> 8) + 1.0) / 16777216.0, u2 = (double)(r[1] >> 8) / 16777216.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint32_t qkv_rng_below(qkv_rng *rng, uint32_t n) {
    if (n <= 1) return 0;
    /* Rejection sampling removes modulo bias. */
    uint32_t limit = UINT32_MAX - UINT32_MAX % n;
    for (;;) {
        uint32_t x = qkv_rng_u32(rng);
        if (x < limit) return x % n;
    }
}

void qkv_rng_fill_uniform(qkv_rng *rng, qkv_tensor *t, float lo, float hi) {
    uint64_t base = rng->counter, n = (uint64_t)qkv_numel(t), k = 0;
    float *p = t->data;
    QKV_FOR_EACH_OFFSET(t, off, {
        p[off] = lo + (hi - lo) * qkv_rng_uniform_at(rng->seed, base, k);
        k++;
    });
    rng->counter = base + (n + 3) / 4;
}

void qkv_rng_fill_normal(qkv_rng *rng, qkv_tensor *t, float mean, float std) {
    uint64_t base = rng->counter, n = (uint64_t)qkv_numel(t), k = 0;
    float *p = t->data;
    QKV_FOR_EACH_OFFSET(t, off, {
        uint32_t r[4];
        qkv_philox4x32(rng->seed, base + k / 2, r);
        int j = (int)(k % 2) * 2;
        double u1 = ((double)(r[j] >> 8) + 1.0) / 16777216.0, u2 = (double)(r[j + 1] >> 8) / 16777216.0;
        p[off] = mean + std * (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
        k++;
    });
    rng->counter = base + (n + 1) / 2;
}
