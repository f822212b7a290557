/* softmax and log_softmax over any axis, numerically stable (the axis maximum is subtracted before exp).
 *
 * x (made contiguous) is seen as [outer, n, inner] with the softmax taken over n. The common case, the last axis
 * (inner == 1), runs row by row on contiguous memory; otherwise each outer block works on whole rows of length
 * inner at a time (vectorised over inner) with per-column max and sum vectors. Rows are independent, so threads
 * split them and the result does not depend on the thread count.
 *
 * The row and block loops are compiled per instruction set and dispatched at run time (core/isa.h).
 *
 * Backward, with y the output: softmax dx = y * (dy - sum(dy * y)); log_softmax dx = dy - exp(y) * sum(dy).
 */
#include <math.h>

#include "core/internal.h"
#include "core/isa.h"
#include "core/par.h"
#include "ops/row_sum.h"
#include "ops/fast_exp.h"
#include "ops/log_softmax_rows.h"
#include "qkv/ops.h"

#define PAR_MIN (1 << 15)
#define LANES 16

/* ---- contiguous row helpers: LANES partial results in a fixed pattern so gcc vectorises them ------------------- */

QKV_KERNEL_BODY float row_max(const float *restrict x, int64_t n) {
    float acc[LANES];
    for (int l = 0; l < LANES; l++) acc[l] = -INFINITY;
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) acc[l] = x[k + l] > acc[l] ? x[k + l] : acc[l];
    for (int l = 0; k < n; k++, l++) acc[l] = x[k] > acc[l] ? x[k] : acc[l];
    float m = acc[0];
    for (int l = 1; l < LANES; l++) m = acc[l] > m ? acc[l] : m;
    return m;
}


QKV_KERNEL_BODY float row_dot(const float *restrict a, const float *restrict b, int64_t n) {
    float acc[LANES] = {0};
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += a[k + l] * b[k + l];
    for (int l = 0; k < n; k++, l++) acc[l] += a[k] * b[k];
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

/* ---- forward ---------------------------------------------------------------------------------------------------- */

/* One contiguous row: y = softmax(x) or log_softmax(x). */
QKV_KERNEL_BODY void row_forward_body(float *restrict y, const float *restrict x, int64_t n, bool log_form) {
    float m = row_max(x, n);
    for (int64_t k = 0; k < n; k++) y[k] = qkv__expf(x[k] - m);
    float s = qkv__row_sum(y, n);
    if (log_form) {
        float shift = m + logf(s);
        for (int64_t k = 0; k < n; k++) y[k] = x[k] - shift;
    } else {
        float r = 1.0f / s;
        for (int64_t k = 0; k < n; k++) y[k] *= r;
    }
}
QKV_ISA_KERNEL_VOID(row_forward, (float *restrict y, const float *restrict x, int64_t n, bool log_form),
                    (y, x, n, log_form))

/* What a row's log_softmax subtracts, max + log(sum exp(x - max)), the sum in LANES partials combined pairwise;
 * *mx = the max. */
QKV_KERNEL_BODY float row_log_shift_body(const float *restrict x, int64_t n, float *restrict mx) {
    float m = row_max(x, n), acc[LANES] = {0};
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += qkv__expf(x[k + l] - m);
    for (int l = 0; k < n; k++, l++) acc[l] += qkv__expf(x[k] - m);
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    *mx = m;
    return m + logf(acc[0]);
}
QKV_ISA_KERNEL(float, row_log_shift, (const float *restrict x, int64_t n, float *restrict mx), (x, n, mx))

/* One contiguous row in place: x -= its shift. */
QKV_KERNEL_BODY void row_log_inplace_body(float *restrict x, int64_t n) {
    float m, shift = row_log_shift_body(x, n, &m);
    for (int64_t k = 0; k < n; k++) x[k] -= shift;
}
QKV_ISA_KERNEL_VOID(row_log_inplace, (float *restrict x, int64_t n), (x, n))

/* One outer block [n, inner], softmax over n; mx and sm are scratch vectors of length inner. */
QKV_KERNEL_BODY void block_forward_body(float *restrict y, const float *restrict x, int64_t n, int64_t inner,
                                        float *restrict mx, float *restrict sm, bool log_form) {
    for (int64_t j = 0; j < inner; j++) {
        mx[j] = -INFINITY;
        sm[j] = 0.0f;
    }
    for (int64_t k = 0; k < n; k++)
        for (int64_t j = 0; j < inner; j++) mx[j] = x[k * inner + j] > mx[j] ? x[k * inner + j] : mx[j];
    for (int64_t k = 0; k < n; k++)
        for (int64_t j = 0; j < inner; j++) {
            float e = qkv__expf(x[k * inner + j] - mx[j]);
            y[k * inner + j] = e;
            sm[j] += e;
        }
    if (log_form) {
        for (int64_t j = 0; j < inner; j++) mx[j] += logf(sm[j]);
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++) y[k * inner + j] = x[k * inner + j] - mx[j];
    } else {
        for (int64_t j = 0; j < inner; j++) sm[j] = 1.0f / sm[j];
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++) y[k * inner + j] *= sm[j];
    }
}
QKV_ISA_KERNEL_VOID(block_forward,
                    (float *restrict y, const float *restrict x, int64_t n, int64_t inner, float *restrict mx,
                     float *restrict sm, bool log_form),
                    (y, x, n, inner, mx, sm, log_form))

/* ---- backward --------------------------------------------------------------------------------------------------- */

QKV_KERNEL_BODY void row_backward_body(float *restrict dr, const float *restrict yr, const float *restrict gr,
                                       int64_t n, bool log_form) {
    if (log_form) {
        float s = qkv__row_sum(gr, n);
        for (int64_t k = 0; k < n; k++) dr[k] += gr[k] - qkv__expf(yr[k]) * s;
    } else {
        float dot = row_dot(gr, yr, n);
        for (int64_t k = 0; k < n; k++) dr[k] += yr[k] * (gr[k] - dot);
    }
}
QKV_ISA_KERNEL_VOID(row_backward,
                    (float *restrict dr, const float *restrict yr, const float *restrict gr, int64_t n, bool log_form),
                    (dr, yr, gr, n, log_form))

QKV_KERNEL_BODY void block_backward_body(float *restrict db, const float *restrict yb, const float *restrict gb,
                                         int64_t n, int64_t inner, float *restrict acc, bool log_form) {
    for (int64_t j = 0; j < inner; j++) acc[j] = 0.0f;
    if (log_form) {
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++) acc[j] += gb[k * inner + j];
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++)
                db[k * inner + j] += gb[k * inner + j] - qkv__expf(yb[k * inner + j]) * acc[j];
    } else {
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++) acc[j] += gb[k * inner + j] * yb[k * inner + j];
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++) db[k * inner + j] += yb[k * inner + j] * (gb[k * inner + j] - acc[j]);
    }
}
QKV_ISA_KERNEL_VOID(block_backward,
                    (float *restrict db, const float *restrict yb, const float *restrict gb, int64_t n, int64_t inner,
                     float *restrict acc, bool log_form),
                    (db, yb, gb, n, inner, acc, log_form))

static qkv_status softmax_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    if (!gx) return QKV_OK;
    int64_t outer = nd->i[0], n = nd->i[1], inner = nd->i[2];
    bool log_form = nd->i[3];
    const float *y = nd->out->data, *dy = nd->out->grad->data;
    float *dx = gx->data;
    bool par = outer * n * inner > PAR_MIN && outer > 1;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t o = 0; o < outer; o++) {
            row_backward(dx + o * n, y + o * n, dy + o * n, n, log_form);
        }
        return QKV_OK;
    }
    float *scratch = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(outer * inner > 0 ? outer * inner : 1));
    if (!scratch) return qkv_last_status();
#pragma omp parallel for schedule(static) if (par)
    for (int64_t o = 0; o < outer; o++) {
        block_backward(dx + o * n * inner, y + o * n * inner, dy + o * n * inner, n, inner, scratch + o * inner,
                       log_form);
    }
    return QKV_OK;
}

/* ---- entry points ----------------------------------------------------------------------------------------------- */

static qkv_tensor *softmax_any(qkv_ctx *ctx, const char *op, qkv_tensor *x, int axis, bool log_form) {
    if (!x) return NULL;
    if (!qkv__check_f32(op, x, "x")) return NULL;
    int a = x->ndim == 0 ? -1 : qkv_axis(x, axis);
    if (a < 0) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "%s: axis %d out of range for a tensor of shape %s", op, axis,
                      qkv_shape_str(x, s, sizeof s));
        return NULL;
    }
    int64_t outer = 1, n = x->shape[a], inner = 1;
    for (int d = 0; d < a; d++) outer *= x->shape[d];
    for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
    const float *src = qkv__contig_data(ctx, x);
    qkv_tensor *out = src ? qkv__out_like(ctx, x) : NULL;
    if (!out) return NULL;
    float *dst = out->data;
    bool par = outer * n * inner > PAR_MIN && outer > 1;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t o = 0; o < outer; o++) row_forward(dst + o * n, src + o * n, n, log_form);
    } else {
        float *scratch = qkv_ctx_alloc(ctx, sizeof(float) * 2 * (size_t)(outer * inner > 0 ? outer * inner : 1));
        if (!scratch) return NULL;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t o = 0; o < outer; o++)
            block_forward(dst + o * n * inner, src + o * n * inner, n, inner, scratch + 2 * o * inner,
                          scratch + (2 * o + 1) * inner, log_form);
    }
    qkv_node *nd = qkv_record(ctx, out, op, softmax_backward, 1, &x);
    if (nd) {
        nd->i[0] = outer;
        nd->i[1] = n;
        nd->i[2] = inner;
        nd->i[3] = log_form;
    }
    return out;
}

qkv_tensor *qkv_softmax(qkv_ctx *ctx, qkv_tensor *x, int axis) { return softmax_any(ctx, "softmax", x, axis, false); }

qkv_tensor *qkv_log_softmax(qkv_ctx *ctx, qkv_tensor *x, int axis) {
    return softmax_any(ctx, "log_softmax", x, axis, true);
}

/* Threads for log_softmax over rows x n: an element takes about as long as 64 units of work (three passes and an
 * exp: 0.75 ns an element on one core, where a packed GEMM does a million units in 8-12 us). Rows
 * are independent, so any count gives the same bits. */
static int rows_threads(int64_t rows, int64_t n) {
    return rows > 1 ? qkv__par_threads(64.0 * (double)rows * (double)n) : 1;
}

void qkv__log_softmax_rows(float *y, const float *x, int64_t rows, int64_t n) {
    int nth = rows_threads(rows, n);
#pragma omp parallel for schedule(static) num_threads(nth)
    for (int64_t r = 0; r < rows; r++) row_forward(y + r * n, x + r * n, n, true);
}

void qkv__log_softmax_rows_inplace(float *x, int64_t rows, int64_t n) {
    int nth = rows_threads(rows, n);
#pragma omp parallel for schedule(static) num_threads(nth)
    for (int64_t r = 0; r < rows; r++) row_log_inplace(x + r * n, n);
}

void qkv__log_softmax_rows_shift(const float *x, int64_t rows, int64_t n, float *shift, float *mx) {
#pragma omp parallel for schedule(static) if (rows * n > PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++) shift[r] = row_log_shift(x + r * n, n, mx + r);
}

void qkv__log_softmax_rows_shift_each(float *x, int64_t rows, int64_t n, qkv__row_shift_fn each, void *user) {
#pragma omp parallel for schedule(static) if (rows * n > PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++) {
        float mx;
        float shift = row_log_shift(x + r * n, n, &mx);
        each(user, r, x + r * n, shift, mx);
    }
}
