/* Reductions: sum, mean and max over one axis (keepdim or not), and sum / mean of all elements.
 *
 * An axis reduction sees x (made contiguous) as [outer, n, inner] and reduces the middle index. With inner == 1
 * (the last axis) each output is a contiguous row sum, taken with 16 independent partial sums in a fixed pattern
 * so gcc vectorises it and the result never depends on threads. With inner > 1 the rows of the middle index are
 * added into the output vector, vectorised over inner. sum_all reduces fixed-size chunks (in parallel) and then
 * adds the chunk sums in order, so it too is bit-identical for any thread count.
 */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "ops/row_sum.h"
#include "qkv/ops.h"

#define PAR_MIN (1 << 15)
#define LANES 16
#define SUM_CHUNK 8192


/* ---- shared axis plumbing ------------------------------------------------------------------------------------ */

typedef struct {
    int axis;
    int64_t outer, n, inner;
    int ndim;
    int64_t shape[QKV_MAX_DIMS];
} reduce_geom;

static bool geometry(const char *op, const qkv_tensor *x, int axis, bool keepdim, reduce_geom *g) {
    if (!qkv__check_f32(op, x, "x")) return false;
    int a = x->ndim == 0 ? -1 : qkv_axis(x, axis);
    if (a < 0) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "%s: axis %d out of range for a tensor of shape %s", op, axis,
                      qkv_shape_str(x, s, sizeof s));
        return false;
    }
    g->axis = a;
    g->outer = 1;
    g->inner = 1;
    g->n = x->shape[a];
    for (int d = 0; d < a; d++) g->outer *= x->shape[d];
    for (int d = a + 1; d < x->ndim; d++) g->inner *= x->shape[d];
    g->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d != a)
            g->shape[g->ndim++] = x->shape[d];
        else if (keepdim)
            g->shape[g->ndim++] = 1;
    }
    return true;
}

/* out[o, j] = sum_k x[o, k, j], divided by n for a mean (a division, as torch, not a multiply by 1/n) */
static void sum_kernel(float *restrict out, const float *restrict x, const reduce_geom *g, bool mean) {
    int64_t outer = g->outer, n = g->n, inner = g->inner;
    bool par = outer * n * inner > PAR_MIN;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (par && outer > 1)
        for (int64_t o = 0; o < outer; o++) {
            float s = qkv__row_sum(x + o * n, n);
            out[o] = mean ? s / (float)n : s;
        }
        return;
    }
#pragma omp parallel for schedule(static) if (par)
    for (int64_t o = 0; o < outer; o++) {
        float *restrict dst = out + o * inner;
        const float *src = x + o * n * inner;
        memset(dst, 0, sizeof(float) * (size_t)inner);
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++) dst[j] += src[k * inner + j];
        if (mean)
            for (int64_t j = 0; j < inner; j++) dst[j] /= (float)n;
    }
}

/* ---- sum / mean over an axis ---------------------------------------------------------------------------------- */

/* dx[o, k, j] += scale * dy[o, j] */
static qkv_status sum_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    if (!gx) return QKV_OK;
    int64_t outer = nd->i[0], n = nd->i[1], inner = nd->i[2];
    float scale = (float)nd->f[0];
    const float *dy = nd->out->grad->data;
    float *dx = gx->data;
#pragma omp parallel for schedule(static) if (outer * n * inner > PAR_MIN && outer > 1)
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t k = 0; k < n; k++) {
            float *restrict d = dx + (o * n + k) * inner;
            const float *restrict s = dy + o * inner;
            for (int64_t j = 0; j < inner; j++) d[j] += scale * s[j];
        }
    }
    return QKV_OK;
}

static qkv_tensor *sum_or_mean(qkv_ctx *ctx, const char *op, qkv_tensor *x, int axis, bool keepdim, bool mean) {
    if (!x) return NULL;
    reduce_geom g;
    if (!geometry(op, x, axis, keepdim, &g)) return NULL;
    const float *src = qkv__contig_data(ctx, x);
    qkv_tensor *out = src ? qkv__out(ctx, QKV_F32, g.ndim, g.shape) : NULL;
    if (!out) return NULL;
    sum_kernel(out->data, src, &g, mean);
    qkv_node *nd = qkv_record(ctx, out, op, sum_backward, 1, &x);
    if (nd) {
        nd->i[0] = g.outer;
        nd->i[1] = g.n;
        nd->i[2] = g.inner;
        nd->f[0] = mean ? 1.0 / (double)g.n : 1.0;
    }
    return out;
}

qkv_tensor *qkv_sum(qkv_ctx *ctx, qkv_tensor *x, int axis, bool keepdim) {
    return sum_or_mean(ctx, "sum", x, axis, keepdim, false);
}

qkv_tensor *qkv_mean(qkv_ctx *ctx, qkv_tensor *x, int axis, bool keepdim) {
    return sum_or_mean(ctx, "mean", x, axis, keepdim, true);
}

/* ---- max over an axis ----------------------------------------------------------------------------------------- */

/* The gradient goes to the element whose index along the axis was saved in the forward pass. */
static qkv_status max_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    if (!gx) return QKV_OK;
    int64_t outer = nd->i[0], n = nd->i[1], inner = nd->i[2];
    const int64_t *arg = nd->saved;
    const float *dy = nd->out->grad->data;
    float *dx = gx->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) dx[(o * n + arg[o * inner + j]) * inner + j] += dy[o * inner + j];
    return QKV_OK;
}

qkv_tensor *qkv_max(qkv_ctx *ctx, qkv_tensor *x, int axis, bool keepdim) {
    if (!x) return NULL;
    reduce_geom g;
    if (!geometry("max", x, axis, keepdim, &g)) return NULL;
    if (g.n == 0) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "max: axis %d of shape %s is empty", axis, qkv_shape_str(x, s, sizeof s));
        return NULL;
    }
    const float *src = qkv__contig_data(ctx, x);
    qkv_tensor *out = src ? qkv__out(ctx, QKV_F32, g.ndim, g.shape) : NULL;
    int64_t m = g.outer * g.inner;
    int64_t *arg = out ? qkv_ctx_alloc(ctx, sizeof(int64_t) * (size_t)(m ? m : 1)) : NULL;
    if (!arg) return NULL;
    float *dst = out->data;
    int64_t n = g.n, inner = g.inner;
#pragma omp parallel for schedule(static) if (m * n > PAR_MIN && g.outer > 1)
    for (int64_t o = 0; o < g.outer; o++) {
        for (int64_t j = 0; j < inner; j++) {
            const float *p = src + o * n * inner + j;
            float best = p[0];
            int64_t bi = 0;
            /* Strictly greater keeps the first maximum; a NaN wins (and stays) as in torch.max. */
            for (int64_t k = 1; k < n && best == best; k++) {
                float v = p[k * inner];
                if (v > best || v != v) {
                    best = v;
                    bi = k;
                }
            }
            dst[o * inner + j] = best;
            arg[o * inner + j] = bi;
        }
    }
    qkv_node *nd = qkv_record(ctx, out, "max", max_backward, 1, &x);
    if (nd) {
        nd->i[0] = g.outer;
        nd->i[1] = g.n;
        nd->i[2] = g.inner;
        nd->saved = arg;
    }
    return out;
}

/* ---- sum / mean of everything --------------------------------------------------------------------------------- */

static qkv_status sum_all_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    if (!gx) return QKV_OK;
    float g = qkv_f32(nd->out->grad)[0] * (float)nd->f[0];
    float *restrict dx = gx->data;
    int64_t n = qkv_numel(gx);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] += g;
    return QKV_OK;
}

static qkv_tensor *reduce_all(qkv_ctx *ctx, const char *op, qkv_tensor *x, bool mean) {
    if (!x) return NULL;
    if (!qkv__check_f32(op, x, "x")) return NULL;
    const float *src = qkv__contig_data(ctx, x);
    qkv_tensor *out = src ? qkv__out(ctx, QKV_F32, 0, NULL) : NULL;
    int64_t n = qkv_numel(x), nchunks = (n + SUM_CHUNK - 1) / SUM_CHUNK;
    float *part = out ? qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(nchunks ? nchunks : 1)) : NULL;
    if (!part) return NULL;
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo = c * SUM_CHUNK;
        part[c] = qkv__row_sum(src + lo, n - lo < SUM_CHUNK ? n - lo : SUM_CHUNK);
    }
    float s = qkv__row_sum(part, nchunks);
    qkv_f32(out)[0] = mean ? s / (float)n : s; /* mean of nothing is NaN, as torch */
    qkv_node *nd = qkv_record(ctx, out, op, sum_all_backward, 1, &x);
    if (nd) nd->f[0] = mean ? 1.0 / (double)n : 1.0;
    return out;
}

qkv_tensor *qkv_sum_all(qkv_ctx *ctx, qkv_tensor *x) { return reduce_all(ctx, "sum_all", x, false); }
qkv_tensor *qkv_mean_all(qkv_ctx *ctx, qkv_tensor *x) { return reduce_all(ctx, "mean_all", x, true); }
