/* Elementwise binary ops with NumPy broadcasting (add, sub, mul, div) and the affine map x*s + c.
 *
 * One kernel walks the output in row-major order with each input read through its own strides (0 along a
 * broadcast dimension), so views need no copy. Backward reduces the upstream gradient over the dimensions an
 * input was broadcast along.
 */
#include <string.h>

#include "core/internal.h"
#include "ops/ops_internal.h"
#include "qkv/ops.h"

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV } binop;

bool qkv__broadcast_shape(const char *op, const qkv_tensor *a, const qkv_tensor *b, int *ndim, int64_t *shape) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < n; d++) {
        int da = d - (n - a->ndim), db = d - (n - b->ndim);
        int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
        if (x != y && x != 1 && y != 1) {
            char sa[96], sb[96];
            qkv_error_set(QKV_ERR_INVALID, "%s: shapes %s and %s do not broadcast", op,
                          qkv_shape_str(a, sa, sizeof sa), qkv_shape_str(b, sb, sizeof sb));
            return false;
        }
        shape[d] = x == 1 ? y : x;
    }
    *ndim = n;
    return true;
}

/* Strides of t aligned to an n-dim output shape, 0 where t is broadcast. */
static void aligned_strides(const qkv_tensor *t, const int64_t *tstride, int n, int64_t *s) {
    for (int d = 0; d < n; d++) {
        int td = d - (n - t->ndim);
        s[d] = (td < 0 || t->shape[td] == 1) ? 0 : tstride[td];
    }
}

static inline float apply(binop op, float x, float y) {
    switch (op) {
    case OP_ADD: return x + y;
    case OP_SUB: return x - y;
    case OP_MUL: return x * y;
    default: return x / y;
    }
}

/* out (contiguous, n-dim shape) = a op b, a and b read through aligned strides sa, sb. */
static void binary_kernel(binop op, float *out, int n, const int64_t *shape, const float *a, const int64_t *sa,
                          const float *b, const int64_t *sb) {
    int64_t inner = n ? shape[n - 1] : 1, outer = 1;
    for (int d = 0; d < n - 1; d++) outer *= shape[d];
    int64_t ia = n ? sa[n - 1] : 0, ib = n ? sb[n - 1] : 0;
#pragma omp parallel for schedule(static) if (outer * inner > (1 << 15) && outer > 1)
    for (int64_t o = 0; o < outer; o++) {
        int64_t rem = o, oa = 0, ob = 0;
        for (int d = n - 2; d >= 0; d--) {
            int64_t i = rem % shape[d];
            rem /= shape[d];
            oa += i * sa[d];
            ob += i * sb[d];
        }
        float *dst = out + o * inner;
        const float *pa = a + oa, *pb = b + ob;
        if (ia == 1 && ib == 1) {
            for (int64_t j = 0; j < inner; j++) dst[j] = apply(op, pa[j], pb[j]);
        } else if (ia == 1 && ib == 0) {
            float y = pb[0];
            for (int64_t j = 0; j < inner; j++) dst[j] = apply(op, pa[j], y);
        } else if (ia == 0 && ib == 1) {
            float x = pa[0];
            for (int64_t j = 0; j < inner; j++) dst[j] = apply(op, x, pb[j]);
        } else {
            for (int64_t j = 0; j < inner; j++) dst[j] = apply(op, pa[j * ia], pb[j * ib]);
        }
    }
}

void qkv__reduce_broadcast_add(float *dst, const qkv_tensor *like, const float *g, int n, const int64_t *gshape) {
    int64_t cstride[QKV_MAX_DIMS], s[QKV_MAX_DIMS];
    qkv__contiguous_strides(like->ndim, like->shape, cstride);
    aligned_strides(like, cstride, n, s);
    int64_t inner = n ? gshape[n - 1] : 1, outer = 1;
    for (int d = 0; d < n - 1; d++) outer *= gshape[d];
    int64_t is = n ? s[n - 1] : 0;
    /* Serial: many g rows may land on one dst row. */
    for (int64_t o = 0; o < outer; o++) {
        int64_t rem = o, off = 0;
        for (int d = n - 2; d >= 0; d--) {
            off += (rem % gshape[d]) * s[d];
            rem /= gshape[d];
        }
        const float *src = g + o * inner;
        float *p = dst + off;
        if (is == 1) {
            for (int64_t j = 0; j < inner; j++) p[j] += src[j];
        } else {
            float acc = 0;
            for (int64_t j = 0; j < inner; j++) acc += src[j];
            p[0] += acc;
        }
    }
}

/* Input x's share of the gradient, s * src (src contiguous in out's shape). An input of out's own shape takes it
 * straight: as out's buffer itself when `may_adopt` (src is out's gradient, s = 1), else written into a fresh
 * gradient or added, over threads. A broadcast input sums it over the broadcast dimensions. */
static void grad_side(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *out, const float *src, float s, bool may_adopt,
                      float *scratch) {
    int64_t numel = qkv_numel(out);
    if (qkv_same_shape(x, out)) {
        if (may_adopt && qkv__grad_adopt(ctx, x, out)) return;
        bool fresh;
        qkv_tensor *gx = qkv__grad_fresh(ctx, x, &fresh);
        if (gx) qkv__move_floats(gx->data, s, src, numel, !fresh);
        return;
    }
    qkv_tensor *gx = qkv_grad_for(ctx, x);
    if (!gx) return;
    if (s != 1.0f) {
        for (int64_t i = 0; i < numel; i++) scratch[i] = s * src[i];
        src = scratch;
    }
    qkv__reduce_broadcast_add(gx->data, x, src, out->ndim, out->shape);
}

static qkv_status binary_backward(qkv_ctx *ctx, qkv_node *nd) {
    binop op = (binop)nd->i[0];
    qkv_tensor *a = nd->in[0], *b = nd->in[1], *out = nd->out;
    bool want_a = a->flags & QKV_FLAG_REQUIRES_GRAD, want_b = b->flags & QKV_FLAG_REQUIRES_GRAD;
    const float *g = out->grad->data;
    int n = out->ndim;
    int64_t numel = qkv_numel(out), sa[QKV_MAX_DIMS], sb[QKV_MAX_DIMS], sg[QKV_MAX_DIMS];
    aligned_strides(a, a->stride, n, sa);
    aligned_strides(b, b->stride, n, sb);
    aligned_strides(out, out->grad->stride, n, sg);
    float *tmp = NULL;
    if (op != OP_ADD && (want_a || want_b)) { /* products, quotients, a negated broadcast share */
        tmp = qkv_ctx_alloc(ctx, (size_t)(numel ? numel : 1) * sizeof(float));
        if (!tmp) return qkv_last_status();
    }
    /* Of add and sub, a takes out's gradient buffer when it can (x + x adds twice into one buffer: no hand-over). */
    if (want_a) {
        const float *src = g;
        if (op == OP_MUL) { /* g * b */
            binary_kernel(OP_MUL, tmp, n, out->shape, g, sg, b->data, sb);
            src = tmp;
        } else if (op == OP_DIV) { /* g / b */
            binary_kernel(OP_DIV, tmp, n, out->shape, g, sg, b->data, sb);
            src = tmp;
        }
        grad_side(ctx, a, out, src, 1.0f, src == g && a != b, tmp);
    }
    if (want_b) {
        const float *src = g;
        float s = 1.0f;
        if (op == OP_MUL) { /* g * a */
            binary_kernel(OP_MUL, tmp, n, out->shape, g, sg, a->data, sa);
            src = tmp;
        } else if (op == OP_DIV) { /* -g * out / b  (= -g a / b^2) */
            int64_t so[QKV_MAX_DIMS];
            aligned_strides(out, out->stride, n, so);
            binary_kernel(OP_MUL, tmp, n, out->shape, g, sg, out->data, so);
            binary_kernel(OP_DIV, tmp, n, out->shape, tmp, sg, b->data, sb);
            for (int64_t i = 0; i < numel; i++) tmp[i] = -tmp[i];
            src = tmp;
        } else if (op == OP_SUB) {
            s = -1.0f;
        }
        grad_side(ctx, b, out, src, s, op == OP_ADD && a != b, tmp);
    }
    return QKV_OK;
}

static qkv_tensor *binary(qkv_ctx *ctx, binop op, const char *name, qkv_tensor *a, qkv_tensor *b) {
    if (!a || !b) return NULL;
    if (!qkv__check_f32(name, a, "a") || !qkv__check_f32(name, b, "b")) return NULL;
    int n;
    int64_t shape[QKV_MAX_DIMS], sa[QKV_MAX_DIMS], sb[QKV_MAX_DIMS];
    if (!qkv__broadcast_shape(name, a, b, &n, shape)) return NULL;
    qkv_tensor *out = qkv__out(ctx, QKV_F32, n, shape);
    if (!out) return NULL;
    aligned_strides(a, a->stride, n, sa);
    aligned_strides(b, b->stride, n, sb);
    binary_kernel(op, out->data, n, shape, a->data, sa, b->data, sb);
    qkv_tensor *in[2] = {a, b};
    qkv_node *nd = qkv_record(ctx, out, name, binary_backward, 2, in);
    if (nd) nd->i[0] = op;
    return out;
}

qkv_tensor *qkv_add(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) { return binary(ctx, OP_ADD, "add", a, b); }
qkv_tensor *qkv_sub(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) { return binary(ctx, OP_SUB, "sub", a, b); }
qkv_tensor *qkv_mul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) { return binary(ctx, OP_MUL, "mul", a, b); }
qkv_tensor *qkv_div(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) { return binary(ctx, OP_DIV, "div", a, b); }

/* ---- affine: x * s + c ------------------------------------------------------------------------------------- */

static qkv_status affine_backward(qkv_ctx *ctx, qkv_node *nd) {
    bool fresh;
    qkv_tensor *gx = qkv__grad_fresh(ctx, nd->in[0], &fresh);
    if (gx) qkv__move_floats(gx->data, (float)nd->f[0], nd->out->grad->data, qkv_numel(gx), !fresh);
    return QKV_OK;
}

qkv_tensor *qkv_affine(qkv_ctx *ctx, qkv_tensor *x, float s, float c) {
    if (!x) return NULL;
    if (!qkv__check_f32("affine", x, "x")) return NULL;
    const float *src = qkv__contig_data(ctx, x);
    qkv_tensor *out = qkv__out_like(ctx, x);
    if (!src || !out) return NULL;
    float *d = out->data;
    int64_t n = qkv_numel(x);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; i++) d[i] = src[i] * s + c;
    qkv_node *nd = qkv_record(ctx, out, "affine", affine_backward, 1, &x);
    if (nd) nd->f[0] = s;
    return out;
}
