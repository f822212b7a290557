/* Small-M products with a pre-packed weight (see gemm_packed.h).
 *
 * W [N, K] is stored as panels of NR = 16 of its rows, each panel k-major ([K][16], zero past row N), 64-byte
 * aligned: step k of a panel is one 16-float vector, so the kernel broadcasts x[i][k] and does one FMA per row and
 * vector. A tile is MR rows of x against a group of panels with its accumulators in registers (AVX-512: 8 rows x
 * three panels, 24 zmm; AVX2: 4 rows x one panel, 8 ymm; portable C: 4 rows x one panel). The loop runs groups
 * outside and row tiles inside, so a group stays in L1 while every row tile passes over it and x stays in L2. Where
 * a group is longer than GP_BLOCK_BYTES (K large), K is cut into equal blocks, each run over all row tiles before
 * the next, the accumulators parked in a scratch tile in between. While a group computes, its tiles prefetch the
 * next group into L2 (a vocabulary projection's weight is larger than L2 and streams from L3 at every step). The
 * vector tiles write y directly (masked at the last columns); longer products run as blocks of
 * QKV__PACKED_BLOCK_M rows, each such a pass.
 *
 * Every accumulator starts at zero and adds k = 0..K-1 in order (a k-block continues from the value the block
 * before left, stored and reloaded exactly); y gets the sum, or y + sum when accumulating. Rows past M read a zero
 * row and are discarded. A row's result is therefore the same whatever M is and wherever the row falls in a tile.
 * Threads split the groups (each output written by one thread), so the thread count does not change the bits
 * either.
 *
 * The per-ISA tiles are functions with target attributes (core/isa.h's QKV_TARGET_*) holding intrinsics; the
 * dispatcher picks one per call from qkv__isa(). */
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

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
/* Bytes of packed weight one k-block of a group spans: the block stays in L1 (48 KB on the machines measured, 32 KB
 * on older ones) while every row tile passes over it, beside the tile's rows of x. */
#define GP_BLOCK_BYTES (24 * 1024)
#define GP_LINE 64
#define GP_MAX_TILES (QKV__PACKED_BLOCK_M / 4) /* row tiles of a block at the narrowest tile (4 rows) */

struct qkv__pack {
    int64_t n, k, panels;
    float *p;    /* [panels][k][NR] */
    float *zero; /* [k] zeros: the row a tile reads past M */
    int refs;    /* holders: the decoding states' packs and the thread's pack cache (qkv__pack_cache_open) */
};

/* What one call of a group kernel works on: rows [0, M) of x against `np` adjacent panels starting at P, writing
 * the group's ncols columns of y (y points at the first), and the lines of the next group to prefetch (pf,
 * pf_lines: NULL / 0 for the last group). */
typedef struct {
    const qkv__pack *p;
    const float *P, *x;
    float *y;
    int64_t M, ldx, ldy, ncols;
    int np;
    bool accumulate;
    const float *bias; /* the group's first column's bias: y = bias + sum (accumulate is then false), or NULL */
    const char *pf;
    int64_t pf_lines;
} gp_group;

typedef void (*group_fn)(const gp_group *g);

#if GP_HAVE_AVX2 || GP_HAVE_AVX512
/* The k-blocks of a group of `width` panels: as few as keep one block within GP_BLOCK_BYTES, of equal length. */
static int64_t k_block(int64_t K, int width) {
    int64_t most = GP_BLOCK_BYTES / (width * NR * (int64_t)sizeof(float)), blocks = (K + most - 1) / most;
    return (K + blocks - 1) / blocks;
}
#endif

/* The share of the next group's lines that call `c` of `calls` (tile x k-block) prefetches: the lines spread
 * evenly over the group's work, so the next panels reach L2 while this one computes (the weight of a vocabulary
 * projection, 8 MB, comes from L3 or memory at every step, and the hardware prefetcher alone stalls the first
 * row tile of every group). */
static const char *pf_share(const gp_group *g, int64_t c, int64_t calls, int64_t *lines) {
    int64_t share = (g->pf_lines + calls - 1) / calls, lo = c * share;
    *lines = lo < g->pf_lines ? (g->pf_lines - lo < share ? g->pf_lines - lo : share) : 0;
    return *lines > 0 ? g->pf + lo * GP_LINE : NULL;
}

/* Portable C: tiles of 4 rows x one panel into a scratch tile, then copied out. The column loop runs outside the
 * row loop under `omp simd`: the compiler then vectorises across the panel's 16 columns for whatever vectors the
 * target has (SSE2, NEON, ...) and keeps the tile's accumulators in registers (the rows inside the columns written
 * the other way round, gcc vectorised along k instead and kept the whole tile on the stack: 4-6x slower). Each
 * accumulator still adds k = 0..K-1 in order, a * b then + (the bits are those of the plain loop). */
static void tile_generic(const float *const *xr, const float *restrict P, int64_t K, float *restrict t) {
    float acc[4][NR] = {{0}};
    const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
    for (int64_t k = 0; k < K; k++) {
        const float *b = P + k * NR;
        float a0 = x0[k], a1 = x1[k], a2 = x2[k], a3 = x3[k];
#pragma omp simd
        for (int j = 0; j < NR; j++) {
            acc[0][j] += a0 * b[j];
            acc[1][j] += a1 * b[j];
            acc[2][j] += a2 * b[j];
            acc[3][j] += a3 * b[j];
        }
    }
    memcpy(t, acc, sizeof acc);
}

/* Rows i0 .. i0 + mr of a row tile: pointers into x (the pack's zero row past the last real row, so a tile always
 * reads mr rows) and, when yr is given, into y (NULL past the last). Returns how many rows are real. */
static inline int64_t tile_rows(const gp_group *g, int64_t i0, int mr, const float **xr, float **yr) {
    int64_t rows = g->M - i0 < mr ? g->M - i0 : mr;
    for (int i = 0; i < mr; i++) {
        xr[i] = i < rows ? g->x + (i0 + i) * g->ldx : g->p->zero;
        if (yr) yr[i] = i < rows ? g->y + (i0 + i) * g->ldy : NULL;
    }
    return rows;
}

static void group_generic(const gp_group *g) {
    int64_t K = g->p->k;
    int64_t tiles = (g->M + 3) / 4;
    for (int64_t i0 = 0; i0 < g->M; i0 += 4) {
        const float *xr[4];
        float t[4 * NR];
        int64_t rows = tile_rows(g, i0, 4, xr, NULL), lines;
        const char *pf = pf_share(g, i0 / 4, tiles, &lines);
        for (int64_t l = 0; l < lines; l++) __builtin_prefetch(pf + l * GP_LINE, 0, 2); /* into L2, as the others */
        tile_generic(xr, g->P, K, t);
        for (int64_t i = 0; i < rows; i++) {
            float *yr = g->y + (i0 + i) * g->ldy;
            const float *tr = t + i * NR;
            if (g->bias)
                for (int64_t j = 0; j < g->ncols; j++) yr[j] = g->bias[j] + tr[j];
            else if (g->accumulate)
                for (int64_t j = 0; j < g->ncols; j++) yr[j] += tr[j];
            else
                for (int64_t j = 0; j < g->ncols; j++) yr[j] = tr[j];
        }
    }
}

/* Issues the prefetches due after a k step: `lines` over `steps` steps, evenly (Bresenham: acc counts lines owed). */
#define GP_PREFETCH(pf, acc, lines, steps)                                                                          \
    do {                                                                                                            \
        (acc) += (lines);                                                                                           \
        while ((acc) >= (steps)) {                                                                                  \
            _mm_prefetch((pf), _MM_HINT_T1);                                                                        \
            (pf) += GP_LINE;                                                                                        \
            (acc) -= (steps);                                                                                       \
        }                                                                                                           \
    } while (0)

#if GP_HAVE_AVX2
/* AVX2 + FMA: 4 rows x one panel (2 ymm) = 8 accumulators, enough to cover the FMA latency on two ports. k runs
 * [k0, k1); the accumulators start at zero (first) or from part, and end in part or, at the last block, in y. */
static GP_T2 void tile_avx2(const gp_group *g, const float *const *xr, float *const *yr, int rows, int64_t k0,
                            int64_t k1, float *part, bool first, bool last, const char *pf, int64_t pf_lines) {
    __m256 c[8];
    for (int i = 0; i < 8; i++) c[i] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(part + i * 8);
    const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3], *P = g->P;
    int64_t owed = 0, steps = k1 - k0;
    for (int64_t k = k0; k < k1; k++) {
        __m256 b0 = _mm256_load_ps(P + k * NR), b1 = _mm256_load_ps(P + k * NR + 8), a;
        a = _mm256_broadcast_ss(x0 + k);
        c[0] = _mm256_fmadd_ps(a, b0, c[0]);
        c[1] = _mm256_fmadd_ps(a, b1, c[1]);
        a = _mm256_broadcast_ss(x1 + k);
        c[2] = _mm256_fmadd_ps(a, b0, c[2]);
        c[3] = _mm256_fmadd_ps(a, b1, c[3]);
        a = _mm256_broadcast_ss(x2 + k);
        c[4] = _mm256_fmadd_ps(a, b0, c[4]);
        c[5] = _mm256_fmadd_ps(a, b1, c[5]);
        a = _mm256_broadcast_ss(x3 + k);
        c[6] = _mm256_fmadd_ps(a, b0, c[6]);
        c[7] = _mm256_fmadd_ps(a, b1, c[7]);
        if (pf_lines) GP_PREFETCH(pf, owed, pf_lines, steps);
    }
    /* The accumulators leave through memory with constant indices (a row loop over c[] itself would keep c in
     * memory during the k loop). */
    float t[4 * NR] __attribute__((aligned(32)));
    for (int i = 0; i < 8; i++) _mm256_storeu_ps((last ? t : part) + i * 8, c[i]);
    if (!last) return;
    int64_t n = g->ncols;
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)), lane);
    __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n > 8 ? n - 8 : 0)), lane);
    for (int i = 0; i < rows; i++) {
        __m256 v0 = _mm256_load_ps(t + i * NR), v1 = _mm256_load_ps(t + i * NR + 8);
        if (n == NR) {
            if (g->bias || g->accumulate) {
                const float *a = g->bias ? g->bias : yr[i];
                v0 = _mm256_add_ps(_mm256_loadu_ps(a), v0);
                v1 = _mm256_add_ps(_mm256_loadu_ps(a + 8), v1);
            }
            _mm256_storeu_ps(yr[i], v0);
            _mm256_storeu_ps(yr[i] + 8, v1);
        } else {
            if (g->bias || g->accumulate) {
                const float *a = g->bias ? g->bias : yr[i];
                v0 = _mm256_add_ps(_mm256_maskload_ps(a, m0), v0);
                v1 = _mm256_add_ps(_mm256_maskload_ps(a + 8, m1), v1);
            }
            _mm256_maskstore_ps(yr[i], m0, v0);
            _mm256_maskstore_ps(yr[i] + 8, m1, v1);
        }
    }
}

static GP_T2 void group_avx2(const gp_group *g) {
    int64_t K = g->p->k, kc = k_block(K, 1), blocks = (K + kc - 1) / kc, tiles = (g->M + 3) / 4, c = 0;
    float part[GP_MAX_TILES * 4 * NR] __attribute__((aligned(64)));
    for (int64_t kb = 0; kb < blocks; kb++) {
        int64_t k0 = kb * kc, k1 = k0 + kc < K ? k0 + kc : K;
        for (int64_t t = 0; t < tiles; t++, c++) {
            const float *xr[4];
            float *yr[4];
            int64_t rows = tile_rows(g, t * 4, 4, xr, yr), lines;
            const char *pf = pf_share(g, c, blocks * tiles, &lines);
            tile_avx2(g, xr, yr, (int)rows, k0, k1, part + t * 4 * NR, kb == 0, kb == blocks - 1, pf, lines);
        }
    }
}
#endif

#if GP_HAVE_AVX512
/* Panels an AVX-512 group takes at once: 8 rows x GP512_PANELS zmm accumulators. */
#define GP512_PANELS 3

/* AVX-512: 8 rows x np panels (np zmm per row: up to 8 x GP512_PANELS accumulators; per k, np weight loads and 8
 * broadcasts for 8 np FMAs). k runs [k0, k1); the accumulators start at zero (first) or from part, and end in part
 * or, at the last block, in y (masked at the weight's last columns). Always inlined into one function per np, so np
 * is a constant there and the accumulators stay in registers. */
static inline __attribute__((always_inline)) GP_T512 void
tile_avx512(const gp_group *g, const float *const *xr, float *const *yr, int rows, int64_t k0, int64_t k1,
            float *part, bool first, bool last, const char *pf, int64_t pf_lines, const int np) {
    __m512 c[GP512_PANELS][8];
    const float *P[GP512_PANELS];
    for (int h = 0; h < np; h++) {
        P[h] = g->P + h * g->p->k * NR;
        for (int i = 0; i < 8; i++) c[h][i] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(part + (h * 8 + i) * NR);
    }
    const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3], *x4 = xr[4], *x5 = xr[5], *x6 = xr[6],
                *x7 = xr[7];
    int64_t owed = 0, steps = k1 - k0;
    for (int64_t k = k0; k < k1; k++) {
        __m512 b[GP512_PANELS], a;
        for (int h = 0; h < np; h++) b[h] = _mm512_load_ps(P[h] + k * NR);
#define QKV_ROW(i, xi)                                                                                              \
    a = _mm512_set1_ps(xi[k]);                                                                                      \
    for (int h = 0; h < np; h++) c[h][i] = _mm512_fmadd_ps(a, b[h], c[h][i]);
        QKV_ROW(0, x0) QKV_ROW(1, x1) QKV_ROW(2, x2) QKV_ROW(3, x3)
        QKV_ROW(4, x4) QKV_ROW(5, x5) QKV_ROW(6, x6) QKV_ROW(7, x7)
#undef QKV_ROW
        if (pf_lines) GP_PREFETCH(pf, owed, pf_lines, steps);
    }
    if (!last) {
        for (int h = 0; h < np; h++)
            for (int i = 0; i < 8; i++) _mm512_storeu_ps(part + (h * 8 + i) * NR, c[h][i]);
        return;
    }
    __mmask16 m[GP512_PANELS];
    for (int h = 0; h < np; h++) {
        int64_t n = g->ncols - h * NR; /* columns of panel h (>= 1: only the group's last panel is short) */
        m[h] = n >= NR ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
    }
    for (int i = 0; i < rows; i++)
        for (int h = 0; h < np; h++) {
            __m512 v = c[h][i];
            if (g->bias || g->accumulate)
                v = _mm512_add_ps(_mm512_maskz_loadu_ps(m[h], (g->bias ? g->bias : yr[i]) + h * NR), v);
            _mm512_mask_storeu_ps(yr[i] + h * NR, m[h], v);
        }
}

typedef void (*tile512_fn)(const gp_group *g, const float *const *xr, float *const *yr, int rows, int64_t k0,
                           int64_t k1, float *part, bool first, bool last, const char *pf, int64_t pf_lines);
#define GP_TILE512(np)                                                                                              \
    static GP_T512 void tile##np##_avx512(const gp_group *g, const float *const *xr, float *const *yr, int rows,    \
                                          int64_t k0, int64_t k1, float *part, bool first, bool last,               \
                                          const char *pf, int64_t pf_lines) {                                       \
        tile_avx512(g, xr, yr, rows, k0, k1, part, first, last, pf, pf_lines, np);                                  \
    }
GP_TILE512(1)
GP_TILE512(2)
#if GP512_PANELS > 2
GP_TILE512(3)
#endif
#undef GP_TILE512

static GP_T512 void group_avx512(const gp_group *g) {
    static const tile512_fn tiles_by_np[] = {NULL, tile1_avx512, tile2_avx512,
#if GP512_PANELS > 2
                                             tile3_avx512
#endif
    };
    tile512_fn tile = tiles_by_np[g->np];
    int64_t K = g->p->k, kc = k_block(K, GP512_PANELS), blocks = (K + kc - 1) / kc, tiles = (g->M + 7) / 8, c = 0;
    float part[QKV__PACKED_BLOCK_M / 8 * GP512_PANELS * 8 * NR] __attribute__((aligned(64)));
    for (int64_t kb = 0; kb < blocks; kb++) {
        int64_t k0 = kb * kc, k1 = k0 + kc < K ? k0 + kc : K;
        for (int64_t t = 0; t < tiles; t++, c++) {
            const float *xr[8];
            float *yr[8];
            int64_t rows = tile_rows(g, t * 8, 8, xr, yr), lines;
            const char *pf = pf_share(g, c, blocks * tiles, &lines);
            tile(g, xr, yr, (int)rows, k0, k1, part + t * GP512_PANELS * 8 * NR, kb == 0, kb == blocks - 1, pf,
                 lines);
        }
    }
}
#endif

/* A pack of 2 MB or more (a vocabulary projection: 8 MB) lies on whole 2 MB pages and asks the kernel for huge ones
 * where it gives them on request (Linux's transparent huge pages in "madvise" mode): the kernel streams the whole
 * pack at every step, and 4 KB pages would cost a TLB miss every 4 KB and a page fault each while packing. */
#define GP_HUGE ((size_t)2 << 20)
static void pack_huge(void *mem, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(mem, bytes, MADV_HUGEPAGE); /* advice only: without huge pages the pack works the same */
#else
    (void)mem;
    (void)bytes;
#endif
}

qkv__pack *qkv__pack_new(const float *W, int64_t N, int64_t K) {
    if (!W || N < 1 || K < 1) {
        qkv_error_set(QKV_ERR_INVALID, "pack: weight [%lld, %lld] must be non-empty", (long long)N, (long long)K);
        return NULL;
    }
    qkv__pack *p = calloc(1, sizeof *p);
    int64_t panels = (N + NR - 1) / NR;
    size_t bytes = sizeof(float) * (size_t)panels * (size_t)K * NR, align = 64;
    if (bytes >= GP_HUGE) { /* whole huge pages (see pack_huge) */
        align = GP_HUGE;
        bytes = (bytes + GP_HUGE - 1) / GP_HUGE * GP_HUGE;
    }
    void *mem = NULL;
    if (!p || posix_memalign(&mem, align, bytes) != 0 || !(p->zero = calloc((size_t)K, sizeof(float)))) {
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
    if (align == GP_HUGE) pack_huge(mem, bytes);
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

/* One pass of the panels over M (1..QKV__PACKED_BLOCK_M) rows of x: groups of gw adjacent panels, each group
 * computed for all M rows while it is in L1, the next group prefetched meanwhile. */
static void gemm_block(const qkv__pack *p, int64_t M, const float *x, int64_t ldx, float *y, int64_t ldy,
                       bool accumulate, const float *bias) {
    group_fn group = group_generic;
    int64_t gw = 1; /* panels a group kernel takes at once */
#if QKV_X86_KERNELS
    switch (qkv__isa()) {
#if GP_HAVE_AVX512
    case QKV_ISA_AVX512: group = group_avx512, gw = GP512_PANELS; break;
#endif
#if GP_HAVE_AVX2
    case QKV_ISA_AVX2: group = group_avx2, gw = 1; break;
#endif
    default: break;
    }
#endif
    int64_t N = p->n, K = p->k, panels = p->panels, groups = (panels + gw - 1) / gw;
    int nth = qkv__par_threads(qkv__par_gemm_work(M, N, K)); /* panels are split whole: any count, the same bits */
#pragma omp parallel for schedule(static) num_threads(nth)
    for (int64_t g = 0; g < groups; g++) {
        int64_t q0 = g * gw, np = panels - q0 < gw ? panels - q0 : gw, q1 = q0 + np;
        int64_t nq = panels - q1 < gw ? panels - q1 : gw; /* panels of the next group */
        gp_group gr = {.p = p, .P = p->p + q0 * K * NR, .x = x, .y = y + q0 * NR, .M = M, .ldx = ldx, .ldy = ldy,
                       .ncols = N - q0 * NR < np * NR ? N - q0 * NR : np * NR, .np = (int)np,
                       .accumulate = accumulate && !bias, .bias = bias ? bias + q0 * NR : NULL, .pf = nq > 0 ? (const char *)(p->p + q1 * K * NR) : NULL,
                       .pf_lines = nq > 0 ? nq * K * NR * (int64_t)sizeof(float) / GP_LINE : 0};
        group(&gr);
    }
}

/* qkv__pack_gemm, or y = bias + x W^T when bias is given: the sum a bias row in y and an accumulating product give,
 * bit for bit (one addition of the same two numbers), without writing y twice. */
static void pack_gemm(const qkv__pack *p, int64_t M, const float *x, int64_t ldx, float *y, int64_t ldy,
                      bool accumulate, const float *bias) {
    for (int64_t i0 = 0; i0 < M; i0 += QKV__PACKED_BLOCK_M) {
        int64_t m = M - i0 < QKV__PACKED_BLOCK_M ? M - i0 : QKV__PACKED_BLOCK_M;
        gemm_block(p, m, x + i0 * ldx, ldx, y + i0 * ldy, ldy, accumulate, bias);
    }
}

void qkv__pack_gemm(const qkv__pack *p, int64_t M, const float *x, int64_t ldx, float *y, int64_t ldy,
                    bool accumulate) {
    pack_gemm(p, M, x, ldx, y, ldy, accumulate, NULL);
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
 * a decoding state lives on the thread that steps it. The packs are found by their weight's address, so they are
 * dropped when the weights' epoch (core/internal.h) has moved since they were made: a model freed while the cache
 * is open, and another allocated where it was, must not meet its predecessor's packs. */
static _Thread_local struct {
    int depth;
    entry *e;
    int n_e, cap_e;
    uint64_t epoch; /* qkv__weights_epoch() when the cached packs were made */
} cache;

void qkv__pack_cache_open(void) { cache.depth++; }

/* Releases the cache's references (a state still holding a pack keeps it until it is freed). */
static void cache_drop(void) {
    for (int i = 0; i < cache.n_e; i++) qkv__pack_free(cache.e[i].p);
    cache.n_e = 0;
}

void qkv__pack_cache_close(void) {
    if (cache.depth < 1 || --cache.depth > 0) return;
    cache_drop();
    free(cache.e);
    cache.e = NULL;
    cache.cap_e = 0;
}

/* The pack of W [N, K]: the open cache's, else a new one (kept in the open cache too). One reference for the caller.
 * NULL when out of memory. */
static qkv__pack *pack_for(const float *W, int64_t N, int64_t K) {
    if (cache.depth > 0) {
        uint64_t now = qkv__weights_epoch();
        if (now != cache.epoch) {
            cache_drop();
            cache.epoch = now;
        }
    }
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

static bool gemm_xwt(const qkv_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, int64_t ldx, const float *W,
                     float *y, int64_t ldy, bool accumulate, const float *bias) {
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
    pack_gemm(p, M, x, ldx, y, ldy, accumulate, bias);
    return true;
}

bool qkv__gemm_xwt(const qkv_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, int64_t ldx, const float *W,
                   float *y, int64_t ldy, bool accumulate) {
    return gemm_xwt(ctx, M, N, K, x, ldx, W, y, ldy, accumulate, NULL);
}

bool qkv__gemm_xwt_bias(const qkv_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, int64_t ldx,
                        const float *W, const float *bias, float *y, int64_t ldy) {
    return gemm_xwt(ctx, M, N, K, x, ldx, W, y, ldy, false, bias);
}
