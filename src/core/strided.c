/* Bulk moves of float buffers that the backward passes and contiguous copies share: fill with zero, copy or add,
 * gather a strided view into row-major order and scatter row-major data back through a view's strides.
 *
 * Why a file of its own: each was a serial loop inside an op (a zero-fill before every accumulated gradient, the
 * view backward walking element by element), which at two threads costs twice its share of the step. Here each
 * runs over threads when large, and every element is written by exactly one thread with the same arithmetic as the
 * serial loop, so the results do not depend on the thread count. */
#include <string.h>

#include "core/internal.h"

#define PAR_MIN (1 << 15)   /* elements below which a move stays on the calling thread */
#define ZERO_CHUNK (1 << 14) /* floats per work item of a parallel zero-fill */

void qkv__zero_floats(float *dst, int64_t n) {
    if (n <= 0) return;
    if (n <= PAR_MIN) {
        memset(dst, 0, (size_t)n * sizeof(float));
        return;
    }
    int64_t chunks = (n + ZERO_CHUNK - 1) / ZERO_CHUNK;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t lo = c * ZERO_CHUNK, len = n - lo < ZERO_CHUNK ? n - lo : ZERO_CHUNK;
        memset(dst + lo, 0, (size_t)len * sizeof(float));
    }
}

void qkv__move_floats(float *restrict dst, float s, const float *restrict src, int64_t n, bool accumulate) {
    if (accumulate) {
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++) dst[i] += s * src[i];
    } else {
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++) dst[i] = s * src[i];
    }
}

/* Offset of the first element of row r (all dimensions but the last) of a (shape, stride) walk. */
static inline int64_t row_offset(const qkv_tensor *v, int64_t r) {
    int64_t off = 0;
    for (int d = v->ndim - 2; d >= 0; d--) {
        off += (r % v->shape[d]) * v->stride[d];
        r /= v->shape[d];
    }
    return off;
}

/* Rows and row length of a row-major walk over v's shape (0 rows when v is empty). */
static int64_t walk_rows(const qkv_tensor *v, int64_t *inner, int64_t *istride) {
    *inner = v->ndim ? v->shape[v->ndim - 1] : 1;
    *istride = v->ndim ? v->stride[v->ndim - 1] : 0;
    int64_t rows = *inner ? 1 : 0;
    for (int d = 0; d < v->ndim - 1; d++) rows *= v->shape[d];
    return rows;
}

void qkv__gather_strided(void *dst, const qkv_tensor *v) {
    int64_t inner, is, rows = walk_rows(v, &inner, &is);
    const uint32_t *src = v->data;
    uint32_t *out = dst;
#pragma omp parallel for schedule(static) if (rows * inner > PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++) {
        const uint32_t *s = src + row_offset(v, r);
        uint32_t *o = out + r * inner;
        if (is == 1) {
            memcpy(o, s, (size_t)inner * sizeof *o);
        } else {
            for (int64_t j = 0; j < inner; j++) o[j] = s[j * is];
        }
    }
}

/* True when no two indices of the walk reach the same offset: sorted by stride, each dimension must step over
 * everything the smaller ones cover (a permute, reshape or slice does; a broadcast does not). */
bool qkv__strided_injective(const qkv_tensor *v) {
    int64_t st[QKV_MAX_DIMS] = {0}, sh[QKV_MAX_DIMS] = {0};
    int m = 0;
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] <= 1) continue;
        if (v->stride[d] <= 0) return false;
        int k = m++;
        for (; k > 0 && st[k - 1] > v->stride[d]; k--) { /* insertion sort by stride */
            st[k] = st[k - 1];
            sh[k] = sh[k - 1];
        }
        st[k] = v->stride[d];
        sh[k] = v->shape[d];
    }
    int64_t covered = 1; /* one past the largest offset the smaller dimensions reach */
    for (int k = 0; k < m; k++) {
        if (st[k] < covered) return false;
        covered = st[k] * (sh[k] - 1) + covered;
    }
    return true;
}

void qkv__scatter_strided(float *base, const qkv_tensor *map, const float *src, bool accumulate) {
    int64_t inner, is, rows = walk_rows(map, &inner, &is);
    /* Rows of a walk that may revisit an offset (a broadcast's gradient) must be added one after another. */
    bool par = rows * inner > PAR_MIN && rows > 1 && qkv__strided_injective(map);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t r = 0; r < rows; r++) {
        float *restrict d = base + row_offset(map, r);
        const float *restrict s = src + r * inner;
        if (is == 1 && accumulate) {
            for (int64_t j = 0; j < inner; j++) d[j] += s[j];
        } else if (is == 1) {
            memcpy(d, s, (size_t)inner * sizeof *d);
        } else if (accumulate) {
            for (int64_t j = 0; j < inner; j++) d[j * is] += s[j];
        } else {
            for (int64_t j = 0; j < inner; j++) d[j * is] = s[j];
        }
    }
}
