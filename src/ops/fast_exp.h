/* A branch-free expf that gcc can vectorise (libm's expf is a call per element unless -ffast-math, which we do not
 * use). Used by the hot loops of softmax, log_softmax, sigmoid, gelu, gelu_tanh and exp. Not installed.
 *
 * exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln2/2; exp(r) by a degree-7 Taylor polynomial
 * (truncation < 1e-8 relative) and 2^n assembled in the exponent bits. Measured against libm in tests: within
 * 1e-6 relative over the whole normal range; +inf above 88.72, 0 / denormals below -87.3, NaN stays NaN.
 */
#ifndef QKV_OPS_FAST_EXP_H
#define QKV_OPS_FAST_EXP_H

#include <stdint.h>
#include <string.h>

static inline float qkv__f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t qkv__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline __attribute__((always_inline)) float qkv__expf(float x) {
    /* Clamp first so n stays in [-150, 128]; values beyond the clamp are fixed up at the end. Comparisons (not
     * fminf) so a NaN passes through to the final select. */
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 88.75f ? 88.75f : xc;
    /* Adding 1.5 * 2^23 rounds t to an integer held in the low mantissa bits: no float-to-int conversion, which
     * would be undefined for NaN. */
    const float shifter = 12582912.0f;
    float kf = xc * 1.44269504088896341f + shifter;
    int32_t n = (int32_t)(qkv__f32_bits(kf) - qkv__f32_bits(shifter));
    float nf = kf - shifter;
    float r = xc - nf * 0.693145751953125f; /* ln 2 split in a high part exact in float and a low part */
    r = r - nf * 1.428606765330187045e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n as two normal factors so n = 128 (near overflow) and n < -126 (denormal results) both work. */
    int32_t n1 = n >> 1, n2 = n - n1;
    float s1 = qkv__f32_from_bits((uint32_t)(n1 + 127) << 23), s2 = qkv__f32_from_bits((uint32_t)(n2 + 127) << 23);
    float y = p * s1 * s2;
    y = x > 88.7228394f ? __builtin_inff() : y;
    return x != x ? x : y;
}

/* 2^x the same way (the exponent split is exact, so only the polynomial's error remains): the fused attention's
 * portable path keeps its scores in base 2. +inf above 128, 0 / denormals below -126, NaN stays NaN. */
static inline __attribute__((always_inline)) float qkv__exp2f(float x) {
    float xc = x < -150.0f ? -150.0f : x;
    xc = xc > 128.0f ? 128.0f : xc;
    const float shifter = 12582912.0f;
    float kf = xc + shifter;
    int32_t n = (int32_t)(qkv__f32_bits(kf) - qkv__f32_bits(shifter));
    float f = (xc - (kf - shifter)) * 0.693147180559945309f; /* |f| <= ln2 / 2 */
    float p = 1.0f / 5040.0f;
    p = p * f + 1.0f / 720.0f;
    p = p * f + 1.0f / 120.0f;
    p = p * f + 1.0f / 24.0f;
    p = p * f + 1.0f / 6.0f;
    p = p * f + 0.5f;
    p = p * f + 1.0f;
    p = p * f + 1.0f;
    int32_t n1 = n >> 1, n2 = n - n1;
    float s1 = qkv__f32_from_bits((uint32_t)(n1 + 127) << 23), s2 = qkv__f32_from_bits((uint32_t)(n2 + 127) << 23);
    float y = p * s1 * s2;
    y = x > 128.0f ? __builtin_inff() : y;
    return x != x ? x : y;
}

#endif
