/* Deterministic, counter-based random numbers (Philox4x32-10).
 *
 * A generator is (seed, counter): each draw of n numbers uses the next ceil(n/4) counter values, so the numbers
 * a kernel gets depend only on the seed and how many were drawn before, never on thread count or scheduling. The
 * whole state is two integers; save and restore it to reproduce a run bit for bit.
 */
#ifndef QKV_RNG_H
#define QKV_RNG_H

#include <stdint.h>

#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_rng {
    uint64_t seed;
    uint64_t counter; /* number of 128-bit Philox blocks consumed */
} qkv_rng;

void qkv_rng_init(qkv_rng *rng, uint64_t seed);
/* One Philox4x32-10 block for (key, counter): the primitive everything else is built on. */
void qkv_philox4x32(uint64_t key, uint64_t counter, uint32_t out[4]);

uint32_t qkv_rng_u32(qkv_rng *rng);
/* Uniform in [0, 1) with 24 random bits. */
float qkv_rng_uniform(qkv_rng *rng);
/* Standard normal (Box-Muller). */
float qkv_rng_normal(qkv_rng *rng);
/* Uniform integer in [0, n). */
uint32_t qkv_rng_below(qkv_rng *rng, uint32_t n);

/* Fill a float32 tensor (any layout). Element i of the row-major order gets the i-th number of the block that
 * starts at the current counter, so the result does not depend on the thread count. */
void qkv_rng_fill_uniform(qkv_rng *rng, qkv_tensor *t, float lo, float hi);
void qkv_rng_fill_normal(qkv_rng *rng, qkv_tensor *t, float mean, float std);

/* Counter-mode access for parallel kernels: the i-th uniform in [0,1) of a stream starting at block `base`. */
static inline float qkv_rng_uniform_at(uint64_t seed, uint64_t base, uint64_t i) {
    uint32_t r[4];
    qkv_philox4x32(seed, base + i / 4, r);
    return (float)(r[i % 4] >> 8) * (1.0f / 16777216.0f);
}

#ifdef __cplusplus
}
#endif
#endif
