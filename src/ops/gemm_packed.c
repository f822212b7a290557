/* Small-M products with a pre-packed weight (see gemm_packed.h).
 *
 * W [N, K] is stored as panels of NR = 16 of its rows, each panel k-major ([K][16], zero past row N), 64-byte
 * aligned: step k of a panel is one 16-float vector, so the kernel broadcasts x[i][k] and does one FMA per row and
 * vector. A tile is MR rows of x against one panel with MR x 16 accumulators in registers (AVX-512: 8 rows, one
 * zmm each, two panels at once where there are two; AVX2: 4 rows, two ymm each; portable C: 4 rows). The loop runs
 * panels outside and row tiles inside, so a panel (16 K floats) stays in L1 while every row tile passes over it and
 * x stays in L2; longer products run as blocks of QKV__PACKED_BLOCK_M rows, each such a pass.
 *
 * Every accumulator starts at zero and adds k = 0..K-1 in order; rows past M read a zero row and are discarded.
 * A row's result is therefore the same whatever M is and wherever the row falls in a tile. Threads split the
 * panels (each output written by one thread), so the thread count does not change the bits either.
 *
 * The per-ISA tiles are functions with target attributes (core/isa.h's QKV_TARGET_*) holding intrinsics; the
 * dispatcher picks one per call from qkv__isa(). */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "core/par.h"
#include "ops/gemm_packed.h"

#if QKV_X86_KERNELS
#include <immintrin.h>
#endif

/* Each tile is a function for its ISA. In a native build (QKV_NATIVE_BUILD) the whole file is already compiled for
 * the building CPU, and a narrower target attribute could not inline the intrinsics: the tiles then carry no
 * attribute and exist only for the ISAs that CPU has. */
#if QKV_X86_KERNELS && !defined(QKV_NATIVE_BUILD)
#define GP_HAVE_AVX2 1
#define GP_HAVE_AVX512 1
#define GP_T2 QKV_TARGET_AVX2
#define GP_T512 QKV_TARGET_AVX512
#elif QKV_X86_KERNELS
#define GP_T2
#define GP_T512
#if defined(__AVX2__) && defined(__FMA__)
#define GP_HAVE_AVX2 1
#else
#define GP_HAVE_AVX2 0
#endif
#if defined(__AVX512F__)
#define GP_HAVE_AVX512 1
#else
#define GP_HAVE_AVX512 0
#endif
#endif
#ifndef GP_HAVE_AVX2
#define GP_HAVE_AVX2 0
#define GP_HAVE_AVX512 0
#endif

#define NR 16
#define MR_MAX 8

struct qkv__pack {
    int64_t n, k, panels;
    float *p;    /* [panels][k][NR] */
    float *zero; /* [k] zeros: the row a tile reads past M */
    int refs;    /* holders: the decoding states' packs and the thread's pack cache (qkv__pack_cache_open) */
};

typedef void (*tile_fn)(const float *const *xr, const float *panel, int64_t K, float *t);

/* t [MR][NR] = rows xr[0..MR) times one panel. Portable C: MR = 4, the j loop vectorised by the compiler. */
static void tile_generic(const float *const *xr, const float *P, int64_t K, float *t) {
    float acc[4][NR] = {{0}};
    for (int64_t k = 0; k < K; k++) {
        const float *b = P + k * NR;
        for (int i = 0; i < 4; i++) {
            float a = xr[i][k];
            for (int j = 0; j < NR; j++) acc[i][j] += a * b[j];
        }
    }
    memcpy(t, acc, sizeof acc);
}

#if GP_HAVE_AVX2
/* AVX2 + FMA: 4 rows x 2 ymm = 8 accumulators, enough to cover the FMA latency on two ports. */
static GP_T2 void tile_avx2(const float *const *xr, const float *P, int64_t K, float *t) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
    for (int64_t k = 0; k < K; k++) {
        __m256 b0 = _mm256_load_ps(P + k * NR), b1 = _mm256_load_ps(P + k * NR + 8), a;
        a = _mm256_broadcast_ss(x0 + k);
        c00 = _mm256_fmadd_ps(a, b0, c00);
        c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(x1 + k);
        c10 = _mm256_fmadd_ps(a, b0, c10);
        c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(x2 + k);
        c20 = _mm256_fmadd_ps(a, b0, c20);
        c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(x3 + k);
        c30 = _mm256_fmadd_ps(a, b0, c30);
        c31 = _mm256_fmadd_ps(a, b1, c31);
    }
    _mm256_storeu_ps(t + 0, c00);
    _mm256_storeu_ps(t + 8, c01);
    _mm256_storeu_ps(t + 16, c10);
    _mm256_storeu_ps(t + 24, c11);
    _mm256_storeu_ps(t + 32, c20);
    _mm256_storeu_ps(t + 40, c21);
    _mm256_storeu_ps(t + 48, c30);
    _mm256_storeu_ps(t + 56, c31);
}

#endif
#if GP_HAVE_AVX512
/* AVX-512: 8 rows x 1 zmm. */
static GP_T512 void tile_avx512(const float *const *xr, const float *P, int64_t K, float *t) {
    __m512 c[MR_MAX];
    for (int i = 0; i < MR_MAX; i++) c[i] = _mm512_setzero_ps();
    const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3], *x4 = xr[4], *x5 = xr[5], *x6 = xr[6],
                *x7 = xr[7];
    for (int64_t k = 0; k < K; k++) {
        __m512 b = _mm512_load_ps(P + k * NR);
        c[0] = _mm512_fmadd_ps(_mm512_set1_ps(x0[k]), b, c[0]);
        c[1] = _mm512_fmadd_ps(_mm512_set1_ps(x1[k]), b, c[1]);
        c[2] = _mm512_fmadd_ps(_mm512_set1_ps(x2[k]), b, c[2]);
        c[3] = _mm512_fmadd_ps(_mm512_set1_ps(x3[k]), b, c[3]);
        c[4] = _mm512_fmadd_ps(_mm512_set1_ps(x4[k]), b, c[4]);
        c[5] = _mm512_fmadd_ps(_mm512_set1_ps(x5[k]), b, c[5]);
        c[6] = _mm512_fmadd_ps(_mm512_set1_ps(x6[k]), b, c[6]);
        c[7] = _mm512_fmadd_ps(_mm512_set1_ps(x7[k]), b, c[7]);
    }
    for (int i = 0; i < MR_MAX; i++) _mm512_storeu_ps(t + i * NR, c[i]);
}

/* AVX-512 over two adjacent panels (P and P + K * NR): 8 rows x 2 zmm = 16 accumulators, 10 loads per 16 FMAs
 * instead of 9 per 8. t is [2][8][NR]. Each output is the same sum in the same order as in tile_avx512. */
static GP_T512 void tile2_avx512(const float *const *xr, const float *P, int64_t K, float *t) {
    __m512 c[MR_MAX], d[MR_MAX];
    for (int i = 0; i < MR_MAX; i++) c[i] = d[i] = _mm512_setzero_ps();
    const float *P1 = P + K * NR;
    const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3], *x4 = xr[4], *x5 = xr[5], *x6 = xr[6],
                *x7 = xr[7];
    for (int64_t k = 0; k < K; k++) {
        __m512 b = _mm512_load_ps(P + k * NR), e = _mm512_load_ps(P1 + k * NR), a;
#define QKV_ROW(i, xi)                                                                                              \
    a = _mm512_set1_ps(xi[k]);                                                                                      \
    c[i] = _mm512_fmadd_ps(a, b, c[i]);                                                                             \
    d[i] = _mm512_fmadd_ps(a, e, d[i]);
        QKV_ROW(0, x0) QKV_ROW(1, x1) QKV_ROW(2, x2) QKV_ROW(3, x3)
        QKV_ROW(4, x4) QKV_ROW(5, x5) QKV_ROW(6, x6) QKV_ROW(7, x7)
#undef QKV_ROW
    }
    for (int i = 0; i < MR_MAX; i++) {
        _mm512_storeu_ps(t + i * NR, c[i]);
        _mm512_storeu_ps(t + (MR_MAX + i) * NR, d[i]);
    }
}
#endif

qkv__pack *qkv__pack_new(const float *W, int64_t N, int64_t K) {
    if (!W || N < 1 || K < 1) {
        qkv_error_set(QKV_ERR_INVALID, "pack: weight [%lld, %lld] must be non-empty", (long long)N, (long long)K);
        return NULL;
    }
    qkv__pack *p = calloc(1, sizeof *p);
    int64_t panels = (N + NR - 1) / NR;
    size_t bytes = sizeof(float) * (size_t)panels * (size_t)K * NR;
    void *mem = NULL;
    if (!p || posix_memalign(&mem, 64, bytes) != 0 || !(p->zero = calloc((size_t)K, sizeof(float)))) {
        free(mem);
        if (p) free(p->zero);
        free(p);
        qkv_error_set(QKV_ERR_NOMEM, "pack: out of memory for a [%lld, %lld] weight", (long long)N, (long long)K);
        return NULL;
    }
    p->n = N;
    p->k = K;
    p->panels = panels;
    p->refs = 1;
    p->p = mem;
    for (int64_t q = 0; q < panels; q++) {
        float *P = p->p + q * K * NR;
        for (int j = 0; j < NR; j++) {
            int64_t n = q * NR + j;
            const float *w = W + n * K;
            if (n < N)
                for (int64_t k = 0; k < K; k++) P[k * NR + j] = w[k];
            else
                for (int64_t k = 0; k < K; k++) P[k * NR + j] = 0.0f;
        }
    }
    return p;
}

void qkv__pack_free(qkv__pack *p) {
    if (!p || --p->refs > 0) return;
    free(p->p);
    free(p->zero);
    free(p);
}

/* One pass of the panels over M (1..QKV__PACKED_BLOCK_M) rows of x. */
static void gemm_block(const qkv__pack *p, int64_t M, const float *x, int64_t ldx, float *y, int64_t ldy,
                       bool accumulate) {
    tile_fn tile = tile_generic, tile2 = NULL; /* tile2: two adjacent panels at once, where the path has it */
    int mr = 4;
#if QKV_X86_KERNELS
    switch (qkv__isa()) {
#if GP_HAVE_AVX512
    case QKV_ISA_AVX512: tile = tile_avx512, tile2 = tile2_avx512, mr = 8; break;
#endif
#if GP_HAVE_AVX2
    case QKV_ISA_AVX2: tile = tile_avx2, mr = 4; break;
#endif
    default: break;
    }
#endif
    int64_t N = p->n, K = p->k, panels = p->panels, gw = tile2 ? 2 : 1, groups = (panels + gw - 1) / gw;
    int nth = qkv__par_threads(qkv__par_gemm_work(M, N, K)); /* panels are split whole: any count, the same bits */
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
    for (int64_t g = 0; g < groups; g++) {
        int64_t q0 = g * gw, np = panels - q0 < gw ? panels - q0 : gw;
        const float *P = p->p + q0 * K * NR;
        float t[2 * MR_MAX * NR];
        const float *xr[MR_MAX];
        for (int64_t i0 = 0; i0 < M; i0 += mr) {
            int64_t rows = M - i0 < mr ? M - i0 : mr;
            for (int i = 0; i < mr; i++) xr[i] = i < rows ? x + (i0 + i) * ldx : p->zero;
            (np == 2 ? tile2 : tile)(xr, P, K, t);
            for (int64_t h = 0; h < np; h++) {
                int64_t n0 = (q0 + h) * NR, nr = N - n0 < NR ? N - n0 : NR;
                for (int64_t i = 0; i < rows; i++) {
                    float *yr = y + (i0 + i) * ldy + n0;
                    const float *tr = t + (h * mr + i) * NR;
                    if (accumulate)
                        for (int64_t j = 0; j < nr; j++) yr[j] += tr[j];
                    else
                        for (int64_t j = 0; j < nr; j++) yr[j] = tr[j];
                }
            }
        }
    }
}

void qkv__pack_gemm(const qkv__pack *p, int64_t M, const float *x, int64_t ldx, float *y, int64_t ldy,
                    bool accumulate) {
    for (int64_t i0 = 0; i0 < M; i0 += QKV__PACKED_BLOCK_M) {
        int64_t m = M - i0 < QKV__PACKED_BLOCK_M ? M - i0 : QKV__PACKED_BLOCK_M;
        gemm_block(p, m, x + i0 * ldx, ldx, y + i0 * ldy, ldy, accumulate);
    }
}

/* ---- a decoding state's packs ---- */

typedef struct {
    const float *lo, *hi; /* an allowed weight's data [lo, hi) */
} span;

typedef struct {
    const float *w;
    int64_t n, k;
    qkv__pack *p;
} entry;

struct qkv__packs {
    span *allow;
    int n_allow, cap_allow;
    entry *e;
    int n_e, cap_e;
};

qkv__packs *qkv__packs_new(void) {
    qkv__packs *ps = calloc(1, sizeof *ps);
    if (!ps) qkv_error_set(QKV_ERR_NOMEM, "packs: out of memory");
    return ps;
}

void qkv__packs_forget(qkv__packs *ps) {
    for (int i = 0; ps && i < ps->n_e; i++) qkv__pack_free(ps->e[i].p);
    if (ps) ps->n_e = 0;
}

void qkv__packs_free(qkv__packs *ps) {
    if (!ps) return;
    qkv__packs_forget(ps);
    free(ps->e);
    free(ps->allow);
    free(ps);
}

/* Grows an array of `size`-byte items to hold one more. */
static bool grow(void **v, int n, int *cap, size_t size) {
    if (n < *cap) return true;
    int c = *cap ? *cap * 2 : 16;
    void *nv = realloc(*v, size * (size_t)c);
    if (!nv) return false;
    *v = nv;
    *cap = c;
    return true;
}

qkv_status qkv__packs_allow(qkv__packs *ps, const qkv_tensor *w) {
    /* A weight the kernel could not read as [N, K] rows is simply never packed: its products stay with BLAS. */
    if (!ps || !w || w->dtype != QKV_F32 || !qkv_is_contiguous(w)) return QKV_OK;
    if (!grow((void **)&ps->allow, ps->n_allow, &ps->cap_allow, sizeof *ps->allow))
        return qkv_error_set(QKV_ERR_NOMEM, "packs: out of memory");
    const float *lo = w->data;
    ps->allow[ps->n_allow++] = (span){lo, lo + qkv_numel(w)};
    return QKV_OK;
}

/* ---- the thread's pack cache ---- */

/* Packs kept across decoding states while a cache is open on this thread (gemm_packed.h). Per thread, so no lock:
 * a decoding state lives on the thread that steps it. */
static _Thread_local struct {
    int depth;
    entry *e;
    int n_e, cap_e;
} cache;

void qkv__pack_cache_open(void) { cache.depth++; }

void qkv__pack_cache_close(void) {
    if (cache.depth < 1 || --cache.depth > 0) return;
    for (int i = 0; i < cache.n_e; i++) qkv__pack_free(cache.e[i].p);
    free(cache.e);
    cache.e = NULL;
    cache.n_e = cache.cap_e = 0;
}

/* The pack of W [N, K]: the open cache's, else a new one (kept in the open cache too). One reference for the caller.
 * NULL when out of memory. */
static qkv__pack *pack_for(const float *W, int64_t N, int64_t K) {
    for (int i = 0; cache.depth > 0 && i < cache.n_e; i++)
        if (cache.e[i].w == W && cache.e[i].n == N && cache.e[i].k == K) {
            cache.e[i].p->refs++;
            return cache.e[i].p;
        }
    qkv__pack *p = qkv__pack_new(W, N, K);
    if (p && cache.depth > 0 && grow((void **)&cache.e, cache.n_e, &cache.cap_e, sizeof *cache.e)) {
        p->refs++;
        cache.e[cache.n_e++] = (entry){W, N, K, p};
    }
    return p;
}

bool qkv__gemm_xwt(const qkv_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, int64_t ldx, const float *W,
                   float *y, int64_t ldy, bool accumulate) {
    qkv__packs *ps = qkv__ctx_packs(ctx);
    if (!ps || M < 1 || M > QKV__PACKED_MAX_M || N < 1 || K < 1) return false;
    const qkv__pack *p = NULL;
    for (int i = 0; i < ps->n_e && !p; i++)
        if (ps->e[i].w == W && ps->e[i].n == N && ps->e[i].k == K) p = ps->e[i].p;
    if (!p) {
        if (M < 2) return false;
        bool allowed = false;
        for (int i = 0; i < ps->n_allow && !allowed; i++)
            allowed = W >= ps->allow[i].lo && W + N * K <= ps->allow[i].hi;
        if (!allowed || !grow((void **)&ps->e, ps->n_e, &ps->cap_e, sizeof *ps->e)) return false;
        qkv__pack *np = pack_for(W, N, K);
        if (!np) return false;
        ps->e[ps->n_e++] = (entry){W, N, K, np};
        p = np;
    }
    qkv__pack_gemm(p, M, x, ldx, y, ldy, accumulate);
    return true;
}
