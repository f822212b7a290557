/* Fused scaled-dot-product attention (FlashAttention-2 style) on the CPU.
 *
 * Forward: each task owns one (batch, head, query block). It streams the key blocks through an online softmax
 * (running max m, running sum l, output accumulator rescaled whenever m grows) and keeps only the output and the
 * row's log-sum-exp L = m + log2 l. Key blocks entirely in the causal future are never visited.
 *
 * Backward: each task owns one (batch, head, key block) and loops over the query blocks that can see it,
 * recomputing P = exp2(c S - L) from L, so nothing quadratic in T is stored:
 *     dV += P^T dO,  dP = dO V^T,  dS = P (dP - rowsum(dO O)),  dQ += s dS K,  dK += s dS^T Q.
 * dK and dV rows belong to one task; dQ rows get contributions from every key block, so each thread adds into
 * its own dQ (thread 0 straight into the gradient when it can) and the copies are summed in thread order at the
 * end. Tasks are dealt round-robin (static schedule), so the result is bit-identical for a fixed thread count.
 *
 * Scores are kept in base 2: c = scale * log2(e), so every exponential is an exp2, computed by a vectorised
 * polynomial (relative error ~2e-7). The tile products run in a register-blocked AVX-512 kernel (a plain C loop
 * elsewhere); K and V are repacked per key block as [D][BK] so the kernel reads unit-stride rows. Q, K and V are
 * read in place through their strides (a permuted [B, T, H, D] projection needs no copy).
 *
 * The file is compiled once per instruction-set path (see docs/design.md "Kernel dispatch"): as itself for the
 * portable path, which also holds the dispatcher, and through attention_fused_avx2.c / attention_fused_avx512.c,
 * which define QKV_KERNEL_ISA and get -march=x86-64-v3 / -v4. AVX-512 tiles are 8 x 32 with mask registers for
 * the edges; AVX2 tiles are 6 x 16 (12 of the 16 ymm registers accumulate) with masked loads at the edges.
 *
 * Parallel tasks are whole heads when the heads divide evenly among the threads (each thread then owns its
 * heads' rows of every output, so the result does not depend on scheduling), else query blocks (forward) and key
 * blocks (backward) as described above.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "core/par.h"
#include "ops/attention_fused.h"
#include "ops/fast_exp.h"

/* 0 portable (this file compiled as itself), 1 AVX2 + FMA, 2 AVX-512: the values of qkv_isa. */
#ifndef QKV_KERNEL_ISA
#define QKV_KERNEL_ISA 0
#endif
#if QKV_KERNEL_ISA == 2
#define KNAME(f) f##_avx512
#define KENTRY
#elif QKV_KERNEL_ISA == 1
#define KNAME(f) f##_avx2
#define KENTRY
#else
#define KNAME(f) f##_generic
#define KENTRY static
#endif
#if QKV_KERNEL_ISA > 0
#include <immintrin.h>
#endif

#ifndef QKV_ATTN_BQ
#define QKV_ATTN_BQ 64
#endif
#define BQ QKV_ATTN_BQ /* query rows per block */
#define BK 64          /* keys per block */

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- tile product: C[M,N] (+)= A[M,K] B[K,N], A read through (row, col) strides so A^T costs nothing ------- */

#if QKV_KERNEL_ISA == 2
#if !defined(__AVX512F__)
#error "attention_fused_avx512.c needs -march=x86-64-v4"
#endif
#define MR 8
#define NR 32

static inline __attribute__((always_inline)) void micro(int mr, int K, const float *A, int64_t sam, int64_t sak,
                                                        const float *B, int64_t ldb, float *C, int64_t ldc,
                                                        __mmask16 k0, __mmask16 k1, bool acc) {
    __m512 c0[MR], c1[MR];
    for (int r = 0; r < mr; r++) {
        c0[r] = acc ? _mm512_maskz_loadu_ps(k0, C + r * ldc) : _mm512_setzero_ps();
        c1[r] = acc ? _mm512_maskz_loadu_ps(k1, C + r * ldc + 16) : _mm512_setzero_ps();
    }
    for (int k = 0; k < K; k++) {
        __m512 b0 = _mm512_maskz_loadu_ps(k0, B + k * ldb), b1 = _mm512_maskz_loadu_ps(k1, B + k * ldb + 16);
        const float *a = A + k * sak;
        for (int r = 0; r < mr; r++) {
            __m512 ar = _mm512_set1_ps(a[r * sam]);
            c0[r] = _mm512_fmadd_ps(ar, b0, c0[r]);
            c1[r] = _mm512_fmadd_ps(ar, b1, c1[r]);
        }
    }
    for (int r = 0; r < mr; r++) {
        _mm512_mask_storeu_ps(C + r * ldc, k0, c0[r]);
        _mm512_mask_storeu_ps(C + r * ldc + 16, k1, c1[r]);
    }
}

static void gemm(int M, int N, int K, const float *A, int64_t sam, int64_t sak, const float *B, int64_t ldb,
                 float *C, int64_t ldc, bool acc) {
    for (int n = 0; n < N; n += NR) {
        int w = N - n < NR ? N - n : NR;
        __mmask16 k0 = (__mmask16)(w >= 16 ? 0xFFFF : (1u << w) - 1);
        __mmask16 k1 = (__mmask16)(w >= 32 ? 0xFFFF : w > 16 ? (1u << (w - 16)) - 1 : 0);
        const float *Bn = B + n;
        float *Cn = C + n;
        int m = 0;
        for (; m + MR <= M; m += MR)
            micro(MR, K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, k0, k1, acc);
        switch (M - m) {
        case 7: micro(7, K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, k0, k1, acc); break;
        case 6: micro(6, K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, k0, k1, acc); break;
        case 5: micro(5, K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, k0, k1, acc); break;
        case 4: micro(4, K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, k0, k1, acc); break;
        case 3: micro(3, K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, k0, k1, acc); break;
        case 2: micro(2, K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, k0, k1, acc); break;
        case 1: micro(1, K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, k0, k1, acc); break;
        default: break;
        }
    }
}

/* 2^x for x <= 128: x = n + f, |f| <= 1/2, 2^f by its degree-6 Taylor polynomial in f ln 2 (error < 2e-7).
 * x below -160 (including -inf) gives exactly 0; NaN stays NaN. */
static inline __m512 exp2_ps(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-160.0f), x); /* operand order: a NaN x is returned as is */
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n);
    __m512 y = _mm512_set1_ps(1.5403530e-4f);                      /* ln2^6 / 720 */
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.3333558e-3f));      /* ln2^5 / 120 */
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(9.6181291e-3f));      /* ln2^4 / 24 */
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(5.5504109e-2f));      /* ln2^3 / 6 */
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(2.4022651e-1f));      /* ln2^2 / 2 */
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(6.9314718e-1f));      /* ln2 */
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(y, n);
}

static inline __mmask16 lanes(int64_t n) { return (__mmask16)(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1); }

/* Scaled, masked scores of one row: s[j] = c s[j] + bias[j] for j < nvis, -inf for nvis <= j < n. Returns the
 * row maximum. */
static float scores_row(float *s, int64_t n, int64_t nvis, float c, const float *bias) {
    __m512 vc = _mm512_set1_ps(c), ninf = _mm512_set1_ps(-INFINITY), mx = ninf;
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 in = lanes(n - j), vis = lanes(nvis - j);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(in, s + j), vc);
        if (bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(in, bias + j));
        x = _mm512_mask_blend_ps(vis, ninf, x);
        _mm512_mask_storeu_ps(s + j, in, x);
        mx = _mm512_mask_max_ps(mx, in, mx, x);
    }
    return _mm512_reduce_max_ps(mx);
}

/* s[j] = 2^(s[j] - m) for j < n; returns the sum. */
static float exp2_row(float *s, int64_t n, float m) {
    __m512 vm = _mm512_set1_ps(m), sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 in = lanes(n - j);
        __m512 p = exp2_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, s + j), vm));
        _mm512_mask_storeu_ps(s + j, in, p);
        sum = _mm512_mask_add_ps(sum, in, sum, p);
    }
    return _mm512_reduce_add_ps(sum);
}

/* Backward probabilities: s[j] = 2^(c s[j] + bias[j] - L) for j < nvis, 0 for nvis <= j < n. */
static void prob_row(float *s, int64_t n, int64_t nvis, float c, const float *bias, float L) {
    __m512 vc = _mm512_set1_ps(c), vl = _mm512_set1_ps(L);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 in = lanes(n - j), vis = lanes(nvis - j);
        __m512 x = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(in, s + j), vc, vl);
        if (bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(in, bias + j));
        _mm512_mask_storeu_ps(s + j, in, _mm512_maskz_mov_ps(vis, exp2_ps(x)));
    }
}

/* ds[j] = scale * (pd[j] dp[j] - p[j] d): the softmax backward with dropout folded in (pd = p * keep mult). */
static void dscore_row(float *ds, const float *p, const float *pd, int64_t n, float d, float scale) {
    __m512 vd = _mm512_set1_ps(d), vs = _mm512_set1_ps(scale);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 in = lanes(n - j);
        __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(in, pd + j), _mm512_maskz_loadu_ps(in, ds + j));
        t = _mm512_fnmadd_ps(_mm512_maskz_loadu_ps(in, p + j), vd, t);
        _mm512_mask_storeu_ps(ds + j, in, _mm512_mul_ps(t, vs));
    }
}

#elif QKV_KERNEL_ISA == 1
#if !defined(__AVX2__) || !defined(__FMA__)
#error "attention_fused_avx2.c needs -march=x86-64-v3"
#endif
#define MR 6
#define NR 16

/* All-ones in lanes l < n of 8 (n clamped to [0, 8]). */
static inline __m256i lanes(int64_t n) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)), iota);
}

/* One MR x NR tile; `full` (a constant at every call) drops the edge masks, whose loads never touch memory past
 * the row's last column. */
static inline __attribute__((always_inline)) void micro(int mr, int K, const float *A, int64_t sam, int64_t sak,
                                                        const float *B, int64_t ldb, float *C, int64_t ldc,
                                                        bool full, __m256i k0, __m256i k1, bool acc) {
    __m256 c0[MR], c1[MR];
    for (int r = 0; r < mr; r++) {
        if (!acc) {
            c0[r] = _mm256_setzero_ps();
            c1[r] = _mm256_setzero_ps();
        } else if (full) {
            c0[r] = _mm256_loadu_ps(C + r * ldc);
            c1[r] = _mm256_loadu_ps(C + r * ldc + 8);
        } else {
            c0[r] = _mm256_maskload_ps(C + r * ldc, k0);
            c1[r] = _mm256_maskload_ps(C + r * ldc + 8, k1);
        }
    }
    for (int k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        __m256 b0 = full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, k0);
        __m256 b1 = full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, k1);
        const float *a = A + k * sak;
        for (int r = 0; r < mr; r++) {
            __m256 ar = _mm256_broadcast_ss(a + r * sam);
            c0[r] = _mm256_fmadd_ps(ar, b0, c0[r]);
            c1[r] = _mm256_fmadd_ps(ar, b1, c1[r]);
        }
    }
    for (int r = 0; r < mr; r++) {
        if (full) {
            _mm256_storeu_ps(C + r * ldc, c0[r]);
            _mm256_storeu_ps(C + r * ldc + 8, c1[r]);
        } else {
            _mm256_maskstore_ps(C + r * ldc, k0, c0[r]);
            _mm256_maskstore_ps(C + r * ldc + 8, k1, c1[r]);
        }
    }
}

static inline __attribute__((always_inline)) void panel(int M, int K, const float *A, int64_t sam, int64_t sak,
                                                        const float *B, int64_t ldb, float *C, int64_t ldc,
                                                        bool full, __m256i k0, __m256i k1, bool acc) {
    int m = 0;
    for (; m + MR <= M; m += MR) micro(MR, K, A + m * sam, sam, sak, B, ldb, C + m * ldc, ldc, full, k0, k1, acc);
    switch (M - m) {
    case 5: micro(5, K, A + m * sam, sam, sak, B, ldb, C + m * ldc, ldc, full, k0, k1, acc); break;
    case 4: micro(4, K, A + m * sam, sam, sak, B, ldb, C + m * ldc, ldc, full, k0, k1, acc); break;
    case 3: micro(3, K, A + m * sam, sam, sak, B, ldb, C + m * ldc, ldc, full, k0, k1, acc); break;
    case 2: micro(2, K, A + m * sam, sam, sak, B, ldb, C + m * ldc, ldc, full, k0, k1, acc); break;
    case 1: micro(1, K, A + m * sam, sam, sak, B, ldb, C + m * ldc, ldc, full, k0, k1, acc); break;
    default: break;
    }
}

static void gemm(int M, int N, int K, const float *A, int64_t sam, int64_t sak, const float *B, int64_t ldb,
                 float *C, int64_t ldc, bool acc) {
    const __m256i ones = _mm256_set1_epi32(-1);
    for (int n = 0; n < N; n += NR) {
        if (N - n >= NR) {
            if (acc) panel(M, K, A, sam, sak, B + n, ldb, C + n, ldc, true, ones, ones, true);
            else panel(M, K, A, sam, sak, B + n, ldb, C + n, ldc, true, ones, ones, false);
        } else {
            panel(M, K, A, sam, sak, B + n, ldb, C + n, ldc, false, lanes(N - n), lanes(N - n - 8), acc);
        }
    }
}

/* 2^x as in the AVX-512 path; 2^n is applied as two normal factors 2^(n/2) (no scalef), so n down to -160 still
 * gives denormals or exactly 0. */
static inline __m256 exp2_ps(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-160.0f), x); /* operand order: a NaN x is returned as is */
    __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_sub_ps(x, n);
    __m256 y = _mm256_set1_ps(1.5403530e-4f);
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(1.3333558e-3f));
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(9.6181291e-3f));
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(5.5504109e-2f));
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(2.4022651e-1f));
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(6.9314718e-1f));
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
}

static inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

static inline float hsum(__m256 v) {
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

/* The row functions below read and write lanes j < n only (masked at the edge), like the AVX-512 ones. */
static inline __m256 load_n(const float *x, int64_t n, __m256i in) {
    return n >= 8 ? _mm256_loadu_ps(x) : _mm256_maskload_ps(x, in);
}

static inline void store_n(float *x, int64_t n, __m256i in, __m256 v) {
    if (n >= 8) _mm256_storeu_ps(x, v);
    else _mm256_maskstore_ps(x, in, v);
}

static float scores_row(float *s, int64_t n, int64_t nvis, float c, const float *bias) {
    __m256 vc = _mm256_set1_ps(c), ninf = _mm256_set1_ps(-INFINITY), mx = ninf;
    for (int64_t j = 0; j < n; j += 8) {
        __m256i in = lanes(n - j);
        __m256 vis = _mm256_castsi256_ps(lanes(nvis - j));
        __m256 x = _mm256_mul_ps(load_n(s + j, n - j, in), vc);
        if (bias) x = _mm256_add_ps(x, load_n(bias + j, n - j, in));
        x = _mm256_blendv_ps(ninf, x, vis); /* lanes past n are past nvis too: -inf, harmless in the max */
        store_n(s + j, n - j, in, x);
        mx = _mm256_max_ps(mx, x);
    }
    return hmax(mx);
}

static float exp2_row(float *s, int64_t n, float m) {
    __m256 vm = _mm256_set1_ps(m), sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8) {
        __m256i in = lanes(n - j);
        __m256 p = exp2_ps(_mm256_sub_ps(load_n(s + j, n - j, in), vm));
        store_n(s + j, n - j, in, p);
        sum = _mm256_add_ps(sum, _mm256_and_ps(p, _mm256_castsi256_ps(in)));
    }
    return hsum(sum);
}

static void prob_row(float *s, int64_t n, int64_t nvis, float c, const float *bias, float L) {
    __m256 vc = _mm256_set1_ps(c), vl = _mm256_set1_ps(L);
    for (int64_t j = 0; j < n; j += 8) {
        __m256i in = lanes(n - j);
        __m256 x = _mm256_fmsub_ps(load_n(s + j, n - j, in), vc, vl);
        if (bias) x = _mm256_add_ps(x, load_n(bias + j, n - j, in));
        store_n(s + j, n - j, in, _mm256_and_ps(exp2_ps(x), _mm256_castsi256_ps(lanes(nvis - j))));
    }
}

static void dscore_row(float *ds, const float *p, const float *pd, int64_t n, float d, float scale) {
    __m256 vd = _mm256_set1_ps(d), vs = _mm256_set1_ps(scale);
    for (int64_t j = 0; j < n; j += 8) {
        __m256i in = lanes(n - j);
        __m256 t = _mm256_mul_ps(load_n(pd + j, n - j, in), load_n(ds + j, n - j, in));
        t = _mm256_fnmadd_ps(load_n(p + j, n - j, in), vd, t);
        store_n(ds + j, n - j, in, _mm256_mul_ps(t, vs));
    }
}

#else /* portable path: the same computations as plain loops the compiler vectorises (no libm inside) */

/* Rows [m0, m1) x columns [n0, n1) of C, one row at a time (the edges of the tiled product below). */
static void gemm_rows(int m0, int m1, int n0, int n1, int K, const float *A, int64_t sam, int64_t sak,
                      const float *B, int64_t ldb, float *C, int64_t ldc, bool acc) {
    for (int m = m0; m < m1; m++) {
        float *c = C + m * ldc;
        if (!acc)
            for (int n = n0; n < n1; n++) c[n] = 0.0f;
        for (int k = 0; k < K; k++) {
            float a = A[m * sam + k * sak];
            const float *b = B + k * ldb;
            for (int n = n0; n < n1; n++) c[n] += a * b[n];
        }
    }
}

/* Tiles of 4 rows x GTN columns held in a local array: the column loop outside the rows under `omp simd` makes the
 * compiler keep the tile in vector registers for its target (a row at a time, every k step loaded and stored a
 * row of C). Each element still adds a * b for k in order onto its start (0 or C), as the edges do. */
#define GTM 4
#if defined(__aarch64__) || defined(__AVX512F__)
#define GTN 16 /* 32 vector registers: 16 accumulators */
#else
#define GTN 8 /* SSE2's 16 registers: 8 accumulators beside the operands */
#endif
static void gemm(int M, int N, int K, const float *A, int64_t sam, int64_t sak, const float *B, int64_t ldb,
                 float *C, int64_t ldc, bool acc) {
    int m = 0, nfull = N / GTN * GTN;
    for (; m + GTM <= M; m += GTM) {
        const float *a0 = A + m * sam, *a1 = a0 + sam, *a2 = a1 + sam, *a3 = a2 + sam;
        for (int n = 0; n < nfull; n += GTN) {
            float t[GTM][GTN];
            for (int i = 0; i < GTM; i++)
                for (int j = 0; j < GTN; j++) t[i][j] = acc ? C[(m + i) * ldc + n + j] : 0.0f;
            for (int k = 0; k < K; k++) {
                const float *b = B + k * ldb + n;
                float x0 = a0[k * sak], x1 = a1[k * sak], x2 = a2[k * sak], x3 = a3[k * sak];
#pragma omp simd
                for (int j = 0; j < GTN; j++) {
                    t[0][j] += x0 * b[j];
                    t[1][j] += x1 * b[j];
                    t[2][j] += x2 * b[j];
                    t[3][j] += x3 * b[j];
                }
            }
            for (int i = 0; i < GTM; i++)
                for (int j = 0; j < GTN; j++) C[(m + i) * ldc + n + j] = t[i][j];
        }
        if (nfull < N) gemm_rows(m, m + GTM, nfull, N, K, A, sam, sak, B, ldb, C, ldc, acc);
    }
    if (m < M) gemm_rows(m, M, 0, N, K, A, sam, sak, B, ldb, C, ldc, acc);
}
#undef GTM
#undef GTN

/* Eight partial maxima and sums, so the reductions vectorise without reassociation flags. */
static float scores_row(float *s, int64_t n, int64_t nvis, float c, const float *bias) {
    for (int64_t j = 0; j < n; j++) s[j] = j < nvis ? c * s[j] + (bias ? bias[j] : 0.0f) : -INFINITY;
    float mx[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) mx[l] = s[j + l] > mx[l] ? s[j + l] : mx[l];
    for (; j < n; j++) mx[0] = s[j] > mx[0] ? s[j] : mx[0];
    for (int l = 1; l < 8; l++) mx[0] = mx[l] > mx[0] ? mx[l] : mx[0];
    return mx[0];
}

static float exp2_row(float *s, int64_t n, float m) {
    float sum[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) sum[l] += s[j + l] = qkv__exp2f(s[j + l] - m);
    for (; j < n; j++) sum[0] += s[j] = qkv__exp2f(s[j] - m);
    return ((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7]));
}

static void prob_row(float *s, int64_t n, int64_t nvis, float c, const float *bias, float L) {
    for (int64_t j = 0; j < n; j++) s[j] = j < nvis ? qkv__exp2f(c * s[j] - L + (bias ? bias[j] : 0.0f)) : 0.0f;
}

static void dscore_row(float *ds, const float *p, const float *pd, int64_t n, float d, float scale) {
    for (int64_t j = 0; j < n; j++) ds[j] = scale * (pd[j] * ds[j] - p[j] * d);
}
#endif

/* ---- packing --------------------------------------------------------------------------------------------- */

static inline const float *row_of(const sdpa_rows *x, const sdpa_plan *p, int64_t bh, int64_t t) {
    return x->p + (bh / p->H) * x->sb + (bh % p->H) * x->sh + t * x->st;
}

/* Keys [j0, j0 + n) of head bh transposed into xt [D][BK], zero-padded past n (padding must be finite: the
 * scores it produces are masked, but 0 * NaN would not be). */
static void pack_block(const sdpa_rows *x, const sdpa_plan *p, int64_t bh, int64_t j0, int64_t n, int64_t D,
                       float *xt) {
    const float *src = row_of(x, p, bh, j0);
    for (int64_t d = 0; d < D; d++) {
        float *dst = xt + d * BK;
        for (int64_t j = 0; j < n; j++) dst[j] = src[j * x->st + d];
        for (int64_t j = n; j < BK; j++) dst[j] = 0.0f;
    }
}

/* Every key block of head bh: xt [nkb][D][BK]. */
static void pack_head(const sdpa_rows *x, const sdpa_plan *p, int64_t bh, int64_t T, int64_t D, float *xt) {
    for (int64_t j0 = 0, b = 0; j0 < T; j0 += BK, b++) pack_block(x, p, bh, j0, min64(BK, T - j0), D, xt + b * D * BK);
}

/* The bias the row kernels add to keys [j0, j0 + n) of row (bh, i): the padding row kb alone, or with an additive
 * bias, kb + log2(e) * bias written into comb (the kernels' scores are in base 2). */
static const float *row_bias(const sdpa_plan *p, int64_t bh, int64_t i, int64_t j0, int64_t n, const float *kb,
                             float *comb) {
    if (!p->abias) return kb;
    const float *ab = qkv__sdpa_bias_row(p, bh, i) + j0;
    const float l2e = (float)M_LOG2E;
    if (kb) {
        for (int64_t j = 0; j < n; j++) comb[j] = l2e * ab[j] + kb[j];
    } else {
        for (int64_t j = 0; j < n; j++) comb[j] = l2e * ab[j];
    }
    return comb;
}

static int max_threads(void) {
    int n = omp_get_max_threads();
    return n < 1 ? 1 : n;
}

/* Whole heads per task when they divide evenly among the threads: no shared writes, no copies of dQ, and K^T
 * packed per head in thread scratch. Otherwise (fewer heads than threads, or uneven) finer tasks. */
static bool head_tasks(int64_t BH, int nth) { return BH >= nth && BH % nth == 0; }

/* ---- forward ----------------------------------------------------------------------------------------------- */

/* Scratch of one forward task: scores [BQ, BK], accumulator [BQ, Dv], m and l [BQ], dropout multipliers [BK], a
 * bias row [BK]. */
static int64_t fwd_scratch(int64_t Dv) { return BQ * BK + BQ * Dv + 2 * BQ + 2 * BK + 16; }

/* Query block qb of head bh against the head's packed keys kt [nkb][D][BK]. */
static void fwd_block(const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *v, const float *kt, int64_t bh,
                      int64_t qb, float *out, float *lse, float *w) {
    const int64_t Tq = p->Tq, Tk = p->Tk, D = p->D, Dv = p->Dv, nkb = cdiv(Tk, BK);
    const int64_t i0 = qb * BQ, nq = min64(BQ, Tq - i0);
    const float c = p->scale * (float)M_LOG2E;
    float *S = w, *acc = S + BQ * BK, *m = acc + BQ * Dv, *l = m + BQ, *mult = l + BQ, *comb = mult + BK;
    const float *Q = row_of(q, p, bh, i0);
    const float *bias = p->kbias ? p->kbias + (bh / p->H) * Tk : NULL;
    /* Key blocks past the last row's horizon (causal, or the prefix) are skipped entirely. */
    int64_t jb_end = nkb;
    if (p->causal) {
        int64_t last = qkv__sdpa_horizon(p, bh / p->H, i0 + nq - 1) - 1;
        jb_end = last < 0 ? 0 : min64(nkb, last / BK + 1);
    }
    for (int64_t r = 0; r < nq; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    memset(acc, 0, (size_t)(nq * Dv) * sizeof(float));
    for (int64_t jb = 0; jb < jb_end; jb++) {
        const int64_t j0 = jb * BK, nk = min64(BK, Tk - j0);
        gemm((int)nq, (int)nk, (int)D, Q, q->st, 1, kt + jb * D * BK, BK, S, BK, false);
        for (int64_t r = 0; r < nq; r++) {
            float *s = S + r * BK;
            int64_t nvis = qkv__sdpa_visible(p, bh / p->H, i0 + r, j0, nk);
            float mx = scores_row(s, nk, nvis, c, row_bias(p, bh, i0 + r, j0, nk, bias ? bias + j0 : NULL, comb));
            float mnew = mx > m[r] ? mx : m[r];
            if (mnew == -INFINITY) { /* nothing visible yet in this row */
                memset(s, 0, (size_t)nk * sizeof(float));
                continue;
            }
            float sum = exp2_row(s, nk, mnew);
            if (mnew != m[r]) {
                float alpha = exp2f(m[r] - mnew);
                float *a = acc + r * Dv;
                for (int64_t d = 0; d < Dv; d++) a[d] *= alpha;
                l[r] *= alpha;
                m[r] = mnew;
            }
            l[r] += sum;
            if (p->dropout > 0) {
                qkv__sdpa_keep(p, bh, i0 + r, j0, nk, mult);
                for (int64_t j = 0; j < nk; j++) s[j] *= mult[j];
            }
        }
        gemm((int)nq, (int)Dv, (int)nk, S, BK, 1, row_of(v, p, bh, j0), v->st, acc, Dv, true);
    }
    for (int64_t r = 0; r < nq; r++) {
        float *o = out + (bh * Tq + i0 + r) * Dv, inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
        const float *a = acc + r * Dv;
        for (int64_t d = 0; d < Dv; d++) o[d] = a[d] * inv;
        if (lse) lse[bh * Tq + i0 + r] = l[r] > 0 ? m[r] + log2f(l[r]) : INFINITY;
    }
}

/* ---- one query per head (an incremental decoding step) ------------------------------------------------------
 * A decoding step asks for one query row against the cache. Packing K^T per call would then cost as much as the
 * product itself (every cached key copied to score it once), so this path reads the keys where they are: a score
 * is a dot product along the key's own row, and the output sums the value rows weighted by the probabilities.
 * Nothing is packed and the cache needs no particular layout beyond unit-stride rows. */

/* Eight partial sums over d, combined in a fixed order: vectorises without reassociation flags, and the result
 * depends only on a and b (not on the row's neighbours). */
static inline float dot_row(const float *a, const float *b, int64_t n) {
    float acc[8] = {0};
    int64_t d = 0;
    for (; d + 8 <= n; d += 8)
        for (int l = 0; l < 8; l++) acc[l] += a[d + l] * b[d + l];
    for (; d < n; d++) acc[0] += a[d] * b[d];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* Scratch of one one-query task: scores [Tk], bias row [Tk], accumulator [Dv]. */
static int64_t one_scratch(int64_t Tk, int64_t Dv) { return 2 * (Tk + 16) + Dv + 16; }

static void fwd_one(const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k, const sdpa_rows *v, int64_t bh,
                    float *out, float *lse, float *w) {
    const int64_t Tk = p->Tk, D = p->D, Dv = p->Dv, b = bh / p->H;
    const float c = p->scale * (float)M_LOG2E;
    float *s = w, *comb = s + Tk + 16, *acc = comb + Tk + 16;
    const float *Q = row_of(q, p, bh, 0);
    const int64_t nvis = qkv__sdpa_visible(p, b, 0, 0, Tk);
    for (int64_t j = 0; j < nvis; j++) s[j] = dot_row(Q, row_of(k, p, bh, j), D);
    for (int64_t j = nvis; j < Tk; j++) s[j] = 0.0f;
    const float *bias = p->kbias ? p->kbias + b * Tk : NULL;
    float mx = scores_row(s, Tk, nvis, c, row_bias(p, bh, 0, 0, Tk, bias, comb));
    float *o = out + bh * Dv;
    if (mx == -INFINITY) { /* every key masked */
        memset(o, 0, (size_t)Dv * sizeof(float));
        if (lse) lse[bh] = INFINITY;
        return;
    }
    float l = exp2_row(s, Tk, mx);
    memset(acc, 0, (size_t)Dv * sizeof(float));
    for (int64_t j = 0; j < nvis; j++) {
        const float pj = s[j], *vr = row_of(v, p, bh, j);
        for (int64_t d = 0; d < Dv; d++) acc[d] += pj * vr[d];
    }
    float inv = l > 0 ? 1.0f / l : 0.0f;
    for (int64_t d = 0; d < Dv; d++) o[d] = acc[d] * inv;
    if (lse) lse[bh] = l > 0 ? mx + log2f(l) : INFINITY;
}

static qkv_status fwd_one_all(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                              const sdpa_rows *v, float *out, float *lse) {
    const int64_t BH = p->B * p->H, per = one_scratch(p->Tk, p->Dv);
    /* each (batch, head) computed whole by one thread, over keys and values read once */
    const int nth = qkv__par_threads((1.0 + QKV__PAR_STREAM) * (double)BH * (double)p->Tk * (double)(p->D + p->Dv));
    float *ws = qkv_ctx_alloc(ctx, (size_t)(nth * per) * sizeof(float));
    if (!ws) return qkv_last_status();
    if (nth == 1) {
        for (int64_t bh = 0; bh < BH; bh++) fwd_one(p, q, k, v, bh, out, lse, ws);
        return QKV_OK;
    }
#pragma omp parallel num_threads(nth)
    {
        float *w = ws + omp_get_thread_num() * per;
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < BH; bh++) fwd_one(p, q, k, v, bh, out, lse, w);
    }
    return QKV_OK;
}

KENTRY qkv_status KNAME(qkv__sdpa_fused_forward)(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q,
                                                 const sdpa_rows *k, const sdpa_rows *v, float *out, float *lse) {
    if (p->Tq == 1 && !(p->dropout > 0)) return fwd_one_all(ctx, p, q, k, v, out, lse);
    const int64_t BH = p->B * p->H, Tk = p->Tk, D = p->D, nqb = cdiv(p->Tq, BQ), nkb = cdiv(Tk, BK);
    const int nth = max_threads();
    const bool by_head = head_tasks(BH, nth);
    const int64_t head_kt = nkb * D * BK, per = fwd_scratch(p->Dv) + (by_head ? head_kt : 0);
    float *ws = qkv_ctx_alloc(ctx, (size_t)(nth * per) * sizeof(float));
    float *kt = by_head ? NULL : qkv_ctx_alloc(ctx, (size_t)(BH * head_kt + 1) * sizeof(float));
    if (!ws || (!by_head && !kt)) return qkv_last_status();
    if (by_head) {
#pragma omp parallel num_threads(nth)
        {
            float *w = ws + omp_get_thread_num() * per, *ktw = w + fwd_scratch(p->Dv);
#pragma omp for schedule(dynamic, 1)
            for (int64_t bh = 0; bh < BH; bh++) {
                pack_head(k, p, bh, Tk, D, ktw);
                for (int64_t qb = 0; qb < nqb; qb++) fwd_block(p, q, v, ktw, bh, qb, out, lse, w);
            }
        }
        return QKV_OK;
    }
#pragma omp parallel for schedule(static)
    for (int64_t bh = 0; bh < BH; bh++) pack_head(k, p, bh, Tk, D, kt + bh * head_kt);
#pragma omp parallel num_threads(nth)
    {
        float *w = ws + omp_get_thread_num() * per;
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < BH * nqb; task++)
            fwd_block(p, q, v, kt + (task / nqb) * head_kt, task / nqb, task % nqb, out, lse, w);
    }
    return QKV_OK;
}

/* ---- backward ---------------------------------------------------------------------------------------------- */

/* Scratch of one backward task: P, dropped P, dS [BQ, BK], dK [BK, D], dV [BK, Dv], K^T [D, BK], V^T [Dv, BK], a
 * bias row [BK]. */
static int64_t bwd_scratch(int64_t D, int64_t Dv) { return 3 * BQ * BK + 2 * BK * D + 2 * BK * Dv + BK + 16; }

typedef struct {
    const sdpa_plan *p;
    const sdpa_rows *q, *k, *v;
    const float *dout, *lse, *drow;
    float *dk, *dv;
    float *dbias; /* [BH, Tq, Tk]: gradient of the additive bias, added into; NULL to skip */
} bwd_args;

/* Key block jb of head bh against every query block that can see it; dQ is added into dq_acc ([BH, Tq, D],
 * NULL to skip), dK and dV rows of the block into a->dk, a->dv. */
static void bwd_block(const bwd_args *a, int64_t bh, int64_t jb, float *dq_acc, float *w) {
    const sdpa_plan *p = a->p;
    const int64_t Tq = p->Tq, Tk = p->Tk, D = p->D, Dv = p->Dv, nqb = cdiv(Tq, BQ);
    const int64_t j0 = jb * BK, nk = min64(BK, Tk - j0);
    const float c = p->scale * (float)M_LOG2E, scale = p->scale;
    const bool drop = p->dropout > 0;
    float *P = w, *Pd = drop ? P + BQ * BK : P, *dS = P + 2 * BQ * BK;
    float *dKa = P + 3 * BQ * BK, *dVa = dKa + BK * D, *Kt = dVa + BK * Dv, *Vt = Kt + BK * D, *comb = Vt + BK * Dv;
    const float *Kr = row_of(a->k, p, bh, j0);
    const float *bias = p->kbias ? p->kbias + (bh / p->H) * Tk + j0 : NULL;
    pack_block(a->k, p, bh, j0, nk, D, Kt);
    pack_block(a->v, p, bh, j0, nk, Dv, Vt);
    memset(dKa, 0, (size_t)(nk * D) * sizeof(float));
    memset(dVa, 0, (size_t)(nk * Dv) * sizeof(float));
    /* Query rows before j0 - (Tk - Tq) cannot see this block under causality, unless it starts in the prefix. */
    int64_t qb0 = 0;
    if (p->causal && !(p->prefix && p->prefix[bh / p->H] > j0)) qb0 = j0 - (Tk - Tq) <= 0 ? 0 : (j0 - (Tk - Tq)) / BQ;
    for (int64_t qb = qb0; qb < nqb; qb++) {
        const int64_t i0 = qb * BQ, nq = min64(BQ, Tq - i0);
        const float *Q = row_of(a->q, p, bh, i0), *dO = a->dout + (bh * Tq + i0) * Dv;
        gemm((int)nq, (int)nk, (int)D, Q, a->q->st, 1, Kt, BK, P, BK, false);
        for (int64_t r = 0; r < nq; r++) {
            const int64_t i = i0 + r;
            prob_row(P + r * BK, nk, qkv__sdpa_visible(p, bh / p->H, i, j0, nk), c,
                     row_bias(p, bh, i, j0, nk, bias, comb), a->lse[bh * Tq + i]);
            if (drop) {
                qkv__sdpa_keep(p, bh, i, j0, nk, Pd + r * BK);
                for (int64_t j = 0; j < nk; j++) Pd[r * BK + j] *= P[r * BK + j];
            }
        }
        if (a->dv) /* dV[nk, Dv] += Pd^T dO */
            gemm((int)nk, (int)Dv, (int)nq, Pd, 1, BK, dO, Dv, dVa, Dv, true);
        if (!dq_acc && !a->dk && !a->dbias) continue;
        /* dP = dO V^T, then dS in place */
        gemm((int)nq, (int)nk, (int)Dv, dO, Dv, 1, Vt, BK, dS, BK, false);
        for (int64_t r = 0; r < nq; r++)
            dscore_row(dS + r * BK, P + r * BK, Pd + r * BK, nk, a->drow[bh * Tq + i0 + r], a->dbias ? 1.0f : scale);
        if (a->dbias) /* the bias gradient is dS before the scale of Q K^T (this task owns these entries) */
            for (int64_t r = 0; r < nq; r++) {
                float *g = a->dbias + (bh * Tq + i0 + r) * Tk + j0, *ds = dS + r * BK;
                for (int64_t j = 0; j < nk; j++) {
                    g[j] += ds[j];
                    ds[j] *= scale;
                }
            }
        if (dq_acc) /* dQ[nq, D] += dS K */
            gemm((int)nq, (int)D, (int)nk, dS, BK, 1, Kr, a->k->st, dq_acc + (bh * Tq + i0) * D, D, true);
        if (a->dk) /* dK[nk, D] += dS^T Q */
            gemm((int)nk, (int)D, (int)nq, dS, 1, BK, Q, a->q->st, dKa, D, true);
    }
    if (a->dk) {
        float *g = a->dk + (bh * Tk + j0) * D;
        for (int64_t x = 0; x < nk * D; x++) g[x] += dKa[x];
    }
    if (a->dv) {
        float *g = a->dv + (bh * Tk + j0) * Dv;
        for (int64_t x = 0; x < nk * Dv; x++) g[x] += dVa[x];
    }
}

KENTRY qkv_status KNAME(qkv__sdpa_fused_backward)(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q,
                                                  const sdpa_rows *k, const sdpa_rows *v, const float *out,
                                                  const float *dout, const float *lse, float *dq, float *dk,
                                                  float *dv, float *dbias) {
    const int64_t BH = p->B * p->H, Tq = p->Tq, Dv = p->Dv, nkb = cdiv(p->Tk, BK), qsize = BH * Tq * p->D;
    const int nth = max_threads();
    if (!dq && !dk && !dv && !dbias) return QKV_OK;
    const int64_t per = bwd_scratch(p->D, Dv);
    const bool by_head = head_tasks(BH, nth);
    /* Block tasks: thread 0 adds dQ straight into dq, the others into private copies summed at the end; but when
     * q is also k or v (one tensor passed twice) dq is the buffer other threads write dK or dV into, so thread 0
     * needs a copy too. Head tasks write only their own heads' rows and need none. */
    const bool direct = by_head || (dq != dk && dq != dv);
    const int ncopies = dq && !by_head ? nth - (direct ? 1 : 0) : 0;
    float *drow = qkv_ctx_alloc(ctx, (size_t)(BH * Tq + 1) * sizeof(float));
    float *ws = qkv_ctx_alloc(ctx, (size_t)(nth * per) * sizeof(float));
    float *dqx = ncopies ? qkv_ctx_alloc(ctx, (size_t)(ncopies * qsize + 1) * sizeof(float)) : NULL;
    if (!drow || !ws || (ncopies && !dqx)) return qkv_last_status();
    if (dqx) memset(dqx, 0, (size_t)(ncopies * qsize) * sizeof(float));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < BH * Tq; i++) { /* rowsum(dO * O) */
        const float *o = out + i * Dv, *g = dout + i * Dv;
        float s = 0;
        for (int64_t d = 0; d < Dv; d++) s += o[d] * g[d];
        drow[i] = s;
    }
    const bwd_args a = {.p = p, .q = q, .k = k, .v = v, .dout = dout, .lse = lse, .drow = drow, .dk = dk, .dv = dv,
                        .dbias = dbias};
    if (by_head) {
#pragma omp parallel num_threads(nth)
        {
            float *w = ws + omp_get_thread_num() * per;
#pragma omp for schedule(dynamic, 1)
            for (int64_t bh = 0; bh < BH; bh++)
                for (int64_t jb = 0; jb < nkb; jb++) bwd_block(&a, bh, jb, dq, w);
        }
        return QKV_OK;
    }
#pragma omp parallel num_threads(nth)
    {
        const int tid = omp_get_thread_num();
        float *w = ws + tid * per;
        float *dq_acc = !dq ? NULL : direct ? (tid == 0 ? dq : dqx + (int64_t)(tid - 1) * qsize) : dqx + tid * qsize;
#pragma omp for schedule(static, 1)
        for (int64_t task = 0; task < BH * nkb; task++) bwd_block(&a, task / nkb, task % nkb, dq_acc, w);
    }
    if (dqx) {
#pragma omp parallel for schedule(static)
        for (int64_t x = 0; x < qsize; x++) {
            float s = dq[x];
            for (int t = 0; t < ncopies; t++) s += dqx[t * qsize + x];
            dq[x] = s;
        }
    }
    return QKV_OK;
}

/* ---- dispatch (in the portable instance only) ------------------------------------------------------------- */

#if QKV_KERNEL_ISA == 0
#if QKV_X86_KERNELS
qkv_status qkv__sdpa_fused_forward_avx512(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                                          const sdpa_rows *v, float *out, float *lse);
qkv_status qkv__sdpa_fused_forward_avx2(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                                        const sdpa_rows *v, float *out, float *lse);
qkv_status qkv__sdpa_fused_backward_avx512(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                                           const sdpa_rows *v, const float *out, const float *dout,
                                           const float *lse, float *dq, float *dk, float *dv, float *dbias);
qkv_status qkv__sdpa_fused_backward_avx2(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                                         const sdpa_rows *v, const float *out, const float *dout, const float *lse,
                                         float *dq, float *dk, float *dv, float *dbias);
#endif

qkv_status qkv__sdpa_fused_forward(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                                   const sdpa_rows *v, float *out, float *lse) {
#if QKV_X86_KERNELS
    switch (qkv__isa()) {
    case QKV_ISA_AVX512: return qkv__sdpa_fused_forward_avx512(ctx, p, q, k, v, out, lse);
    case QKV_ISA_AVX2: return qkv__sdpa_fused_forward_avx2(ctx, p, q, k, v, out, lse);
    default: break;
    }
#endif
    return qkv__sdpa_fused_forward_generic(ctx, p, q, k, v, out, lse);
}

qkv_status qkv__sdpa_fused_backward(qkv_ctx *ctx, const sdpa_plan *p, const sdpa_rows *q, const sdpa_rows *k,
                                    const sdpa_rows *v, const float *out, const float *dout, const float *lse,
                                    float *dq, float *dk, float *dv, float *dbias) {
#if QKV_X86_KERNELS
    switch (qkv__isa()) {
    case QKV_ISA_AVX512: return qkv__sdpa_fused_backward_avx512(ctx, p, q, k, v, out, dout, lse, dq, dk, dv, dbias);
    case QKV_ISA_AVX2: return qkv__sdpa_fused_backward_avx2(ctx, p, q, k, v, out, dout, lse, dq, dk, dv, dbias);
    default: break;
    }
#endif
    return qkv__sdpa_fused_backward_generic(ctx, p, q, k, v, out, dout, lse, dq, dk, dv, dbias);
}
#endif
