/* Elementwise unary ops: relu, gelu (erf and tanh forms), tanh, sigmoid, exp, log, sqrt.
 *
 * Every op has the same shape: y = f(x) over a contiguous copy of x, and dx += dy * f'(x, y). Each kernel is one
 * flat loop per op (the switch sits outside the loop) so gcc vectorises it: exp, sigmoid, gelu and gelu_tanh use
 * the vectorisable qkv__expf (and gelu its own erf); only tanh, log and sqrt call libm. Large tensors are split
 * into fixed chunks across threads; every element is computed independently, so the result does not depend on the
 * thread count. The chunk loops are compiled per instruction set and dispatched at run time (core/isa.h).
 */
#include <math.h>

#include "core/internal.h"
#include "core/isa.h"
#include "ops/fast_exp.h"
#include "qkv/ops.h"

typedef enum { U_RELU, U_GELU, U_GELU_TANH, U_TANH, U_SIGMOID, U_EXP, U_LOG, U_SQRT } unop;

static const char *const unop_names[] = {"relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "exp", "log", "sqrt"};

#define CHUNK 4096
#define PAR_MIN (1 << 15)

#define SQRT1_2 0.70710678118654752f
#define INV_SQRT_2PI 0.39894228040143268f
#define SQRT_2_OVER_PI 0.79788456080286536f
#define GELU_C 0.044715f

/* Phi(x), the standard normal CDF, for gelu(x) = x * Phi(x); also returns exp(-x^2 / 2) for the derivative
 * x * phi(x). libm's erff is a call per element, so this is a branch-free (vectorisable) version:
 *   |z| < 0.9 (z = x / sqrt 2):  erf(z) = z P(z^2), P a degree-5 least-squares fit (relative error 1.3e-8);
 *   otherwise:                    erfc(|z|) = exp(-z^2) Q(t), t = 1 / (1 + |z| / 2), Q of degree 8 (1.6e-8),
 * both fitted in float64 at Chebyshev nodes. Phi(x) = 1 - erfc(|z|)/2 for x > 0 and erfc(|z|)/2 for x < 0, so the
 * negative tail keeps its relative accuracy (torch's 0.5 (1 + erf(z)) cancels to 0 there). exp(-x^2/2) uses the
 * exact square x^2 = s + e (fma), since the rounding of x^2 alone would cost 1e-5 relative at x = 10. Measured
 * against float64: Phi within 7e-7 relative for x in [-12, 14]; |x| is clamped at 14, where Phi is denormal. */
QKV_KERNEL_BODY float gelu_phi(float x, float *gauss) {
    float ax = fabsf(x);
    float xc = ax > 14.0f ? 14.0f : ax; /* a comparison, not fminf, so NaN propagates */
    float z = xc * SQRT1_2, z2 = z * z;
    float p = -6.123287666e-04f;
    p = p * z2 + 5.019129570e-03f;
    p = p * z2 - 2.678451551e-02f;
    p = p * z2 + 1.128232844e-01f;
    p = p * z2 - 3.761254760e-01f;
    p = p * z2 + 1.128379161e+00f;
    float erf_small = z * p;
    float phi_small = 0.5f + 0.5f * (x < 0.0f ? -erf_small : erf_small);
    float sx = xc * xc, ex = fmaf(xc, xc, -sx);
    float g = qkv__expf(-0.5f * sx) * (1.0f - 0.5f * ex);
    float t = 1.0f / (1.0f + 0.5f * z);
    float q = 7.659149779e-02f;
    q = q * t - 1.727751441e-01f;
    q = q * t + 1.045467559e-02f;
    q = q * t + 1.147580329e-01f;
    q = q * t + 1.544819556e-01f;
    q = q * t + 2.537638238e-01f;
    q = q * t + 2.808903339e-01f;
    q = q * t + 2.822055814e-01f;
    q = q * t - 4.221849663e-06f;
    float half_erfc = 0.5f * g * q;
    float phi_big = x < 0.0f ? half_erfc : 1.0f - half_erfc;
    *gauss = g;
    return z < 0.9f ? phi_small : phi_big;
}

/* gelu_tanh(x) = 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + c x^3). Since 1 + tanh(u) = 2 sigmoid(2u), this is
 * x * sigmoid(2u): no cancellation for negative x, where 1 + tanh(u) would lose every digit. */
QKV_KERNEL_BODY float gelu_tanh_sig(float x) {
    float u = SQRT_2_OVER_PI * (x + GELU_C * x * x * x);
    return 1.0f / (1.0f + qkv__expf(-2.0f * u));
}

QKV_KERNEL_BODY void forward_range_body(unop op, float *restrict y, const float *restrict x, int64_t n) {
    switch (op) {
    case U_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i]; /* NaN stays NaN, as torch */
        break;
    case U_GELU:
        for (int64_t i = 0; i < n; i++) {
            float g;
            y[i] = x[i] * gelu_phi(x[i], &g);
        }
        break;
    case U_GELU_TANH:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * gelu_tanh_sig(x[i]);
        break;
    case U_TANH:
        for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
        break;
    case U_SIGMOID:
        for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + qkv__expf(-x[i]));
        break;
    case U_EXP:
        for (int64_t i = 0; i < n; i++) y[i] = qkv__expf(x[i]);
        break;
    case U_LOG:
        for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]);
        break;
    case U_SQRT:
        for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]);
        break;
    }
}
QKV_ISA_KERNEL_VOID(forward_range, (unop op, float *restrict y, const float *restrict x, int64_t n), (op, y, x, n))

/* dx[i] = v, or dx[i] += v with acc, for v as the statements given compute it from element i (two loops, so each
 * vectorises with its own store). */
#define DX_LOOP(...)                                                                                              \
    do {                                                                                                          \
        if (acc) {                                                                                                \
            for (int64_t i = 0; i < n; i++) {                                                                     \
                float v;                                                                                          \
                __VA_ARGS__;                                                                                      \
                dx[i] += v;                                                                                       \
            }                                                                                                     \
        } else {                                                                                                  \
            for (int64_t i = 0; i < n; i++) {                                                                     \
                float v;                                                                                          \
                __VA_ARGS__;                                                                                      \
                dx[i] = v;                                                                                        \
            }                                                                                                     \
        }                                                                                                         \
    } while (0)

/* dx (+)= dy * f'(x), with y = f(x) at hand for the ops whose derivative is cheapest in terms of y; acc false
 * writes a fresh gradient. */
QKV_KERNEL_BODY void backward_range_body(unop op, bool acc, float *restrict dx, const float *restrict dy,
                                         const float *restrict x, const float *restrict y, int64_t n) {
    switch (op) {
    case U_RELU:
        DX_LOOP(v = y[i] > 0.0f ? dy[i] : 0.0f);
        break;
    case U_GELU:
        DX_LOOP(float g; float cdf = gelu_phi(x[i], &g); v = dy[i] * (cdf + x[i] * INV_SQRT_2PI * g));
        break;
    case U_GELU_TANH:
        DX_LOOP(float s = gelu_tanh_sig(x[i]); float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_C * x[i] * x[i]);
                v = dy[i] * (s + x[i] * s * (1.0f - s) * 2.0f * du));
        break;
    case U_TANH:
        DX_LOOP(v = dy[i] * (1.0f - y[i] * y[i]));
        break;
    case U_SIGMOID:
        DX_LOOP(v = dy[i] * y[i] * (1.0f - y[i]));
        break;
    case U_EXP:
        DX_LOOP(v = dy[i] * y[i]);
        break;
    case U_LOG:
        DX_LOOP(v = dy[i] / x[i]);
        break;
    case U_SQRT:
        DX_LOOP(v = dy[i] / (2.0f * y[i]));
        break;
    }
}
QKV_ISA_KERNEL_VOID(backward_range,
                    (unop op, bool acc, float *restrict dx, const float *restrict dy, const float *restrict x,
                     const float *restrict y, int64_t n),
                    (op, acc, dx, dy, x, y, n))

static qkv_status unary_backward(qkv_ctx *ctx, qkv_node *nd) {
    bool fresh;
    qkv_tensor *gx = qkv__grad_fresh(ctx, nd->in[0], &fresh);
    if (!gx) return QKV_OK;
    unop op = (unop)nd->i[0];
    const float *x = nd->saved, *y = nd->out->data, *dy = nd->out->grad->data;
    float *dx = gx->data;
    int64_t n = qkv_numel(gx), nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo = c * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
        backward_range(op, !fresh, dx + lo, dy + lo, x + lo, y + lo, len);
    }
    return QKV_OK;
}

static qkv_tensor *unary(qkv_ctx *ctx, unop op, qkv_tensor *x) {
    if (!x) return NULL;
    const char *name = unop_names[op];
    if (!qkv__check_f32(name, x, "x")) return NULL;
    const float *src = qkv__contig_data(ctx, x);
    qkv_tensor *out = src ? qkv__out_like(ctx, x) : NULL;
    if (!out) return NULL;
    float *dst = out->data;
    int64_t n = qkv_numel(x), nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo = c * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
        forward_range(op, dst + lo, src + lo, len);
    }
    qkv_node *nd = qkv_record(ctx, out, name, unary_backward, 1, &x);
    if (nd) {
        nd->i[0] = op;
        nd->saved = (void *)src; /* x in row-major order: x's own data or an arena copy, alive until reset */
    }
    return out;
}

qkv_tensor *qkv_relu(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, U_RELU, x); }
qkv_tensor *qkv_gelu(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, U_GELU, x); }
qkv_tensor *qkv_gelu_tanh(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, U_GELU_TANH, x); }
qkv_tensor *qkv_tanh(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, U_TANH, x); }
qkv_tensor *qkv_sigmoid(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, U_SIGMOID, x); }
qkv_tensor *qkv_exp(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, U_EXP, x); }
qkv_tensor *qkv_log(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, U_LOG, x); }
qkv_tensor *qkv_sqrt(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, U_SQRT, x); }
