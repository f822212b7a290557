/* Shape ops. reshape (of contiguous data), transpose, permute, slice and broadcast_to are views: they share data
 * and only change shape and strides. Their common backward scatters dY into dX through the view's strides
 * expressed in X's logical (row-major) index space, so views of views need nothing special. */
#include <string.h>

#include "core/internal.h"
#include "ops/ops_internal.h"
#include "qkv/ops.h"

/* ---- the view backward: dX[offset + sum_d i_d * lstride_d] += dY[i] ------------------------------------------- */

typedef struct {
    int64_t lstride[QKV_MAX_DIMS];
    int64_t offset;
} view_saved;

/* The view walks X's row-major order itself (a reshape of contiguous data): dY is dX element for element. */
static bool identity_map(const qkv_tensor *y, const view_saved *s, int64_t x_numel) {
    if (s->offset != 0 || qkv_numel(y) != x_numel) return false;
    int64_t expect = 1;
    for (int d = y->ndim - 1; d >= 0; d--) {
        if (y->shape[d] != 1 && s->lstride[d] != expect) return false;
        expect *= y->shape[d];
    }
    return true;
}

static qkv_status view_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *x = nd->in[0], *y = nd->out;
    if (!(x->flags & QKV_FLAG_REQUIRES_GRAD)) return QKV_OK;
    const view_saved *s = nd->saved;
    const float *dy = y->grad->data;
    const int64_t n = qkv_numel(x);
    bool fresh = false;
    if (identity_map(y, s, n)) { /* a reshape: hand dY over as dX, or copy / add it in order */
        if (qkv__grad_adopt(ctx, x, y)) return QKV_OK;
        qkv_tensor *gx = qkv__grad_fresh(ctx, x, &fresh);
        if (gx) qkv__move_floats(gx->data, 1.0f, dy, n, !fresh);
        return QKV_OK;
    }
    qkv_tensor v = *y; /* y's shape, walking dX */
    memcpy(v.stride, s->lstride, sizeof v.stride);
    /* A walk reaching every element of X once (a permute) writes a fresh dX whole: no zero-fill first. */
    bool once = s->offset == 0 && qkv_numel(y) == n && qkv__strided_injective(&v);
    qkv_tensor *gx = once ? qkv__grad_fresh(ctx, x, &fresh) : qkv_grad_for(ctx, x);
    if (gx) qkv__scatter_strided((float *)gx->data + s->offset, &v, dy, !fresh);
    return QKV_OK;
}

/* Make y a view of x and record the logical strides that map y's index into x's row-major index. */
static qkv_tensor *record_view(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *y, const char *op,
                               const int64_t *lstride, int64_t offset) {
    qkv_node *nd = qkv_record(ctx, y, op, view_backward, 1, &x);
    if (nd) {
        view_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
        if (!s) return NULL;
        memcpy(s->lstride, lstride, sizeof s->lstride);
        s->offset = offset;
        nd->saved = s;
    }
    return y;
}

qkv_tensor *qkv__transposed_source(const qkv_tensor *t) {
    if (!t || !t->node || t->node->backward != view_backward || strcmp(t->node->op, "permute")) return NULL;
    qkv_tensor *x = t->node->in[0];
    int n = t->ndim;
    if (n < 2 || x->ndim != n || x->dtype != QKV_F32) return NULL;
    for (int d = 0; d < n - 2; d++)
        if (t->shape[d] != x->shape[d] || t->stride[d] != x->stride[d]) return NULL;
    if (t->shape[n - 1] != x->shape[n - 2] || t->shape[n - 2] != x->shape[n - 1] ||
        t->stride[n - 1] != x->stride[n - 2] || t->stride[n - 2] != x->stride[n - 1])
        return NULL;
    return x;
}

/* ---- contiguous (a copy, when needed) -------------------------------------------------------------------------- */

/* dY of a contiguous copy is dX in the same element order: handed over, or copied / added. */
static qkv_status copy_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *x = nd->in[0];
    if (!(x->flags & QKV_FLAG_REQUIRES_GRAD) || qkv__grad_adopt(ctx, x, nd->out)) return QKV_OK;
    bool fresh;
    qkv_tensor *gx = qkv__grad_fresh(ctx, x, &fresh);
    if (gx) qkv__move_floats(gx->data, 1.0f, nd->out->grad->data, qkv_numel(gx), !fresh);
    return QKV_OK;
}

qkv_tensor *qkv_contiguous(qkv_ctx *ctx, qkv_tensor *x) {
    if (!x) return NULL;
    if (qkv_is_contiguous(x)) return x;
    qkv_tensor *y = qkv__out_like(ctx, x);
    if (!y) return NULL;
    qkv__gather_strided(y->data, x); /* both dtypes are 4 bytes; y is new arena memory, apart from x */
    if (x->dtype == QKV_F32) qkv_record(ctx, y, "contiguous", copy_backward, 1, &x);
    return y;
}

/* ---- reshape ------------------------------------------------------------------------------------------------ */

qkv_tensor *qkv_reshape(qkv_ctx *ctx, qkv_tensor *x, int ndim, const int64_t *shape) {
    if (!x) return NULL;
    char sx[96];
    if (ndim < 0 || ndim > QKV_MAX_DIMS) {
        qkv_error_set(QKV_ERR_INVALID, "reshape: rank %d outside 0..%d", ndim, QKV_MAX_DIMS);
        return NULL;
    }
    int64_t s[QKV_MAX_DIMS], known = 1, n = qkv_numel(x);
    int infer = -1;
    for (int d = 0; d < ndim; d++) {
        s[d] = shape[d];
        if (shape[d] == -1) {
            if (infer >= 0) {
                qkv_error_set(QKV_ERR_INVALID, "reshape: more than one -1 in the new shape");
                return NULL;
            }
            infer = d;
        } else if (shape[d] < 0) {
            qkv_error_set(QKV_ERR_INVALID, "reshape: negative dimension %lld", (long long)shape[d]);
            return NULL;
        } else {
            known *= shape[d];
        }
    }
    if (infer >= 0) s[infer] = known ? n / known : 0;
    int64_t total = 1;
    for (int d = 0; d < ndim; d++) total *= s[d];
    if (total != n) {
        qkv_error_set(QKV_ERR_INVALID, "reshape: cannot view %s (%lld elements) with %lld elements",
                      qkv_shape_str(x, sx, sizeof sx), (long long)n, (long long)total);
        return NULL;
    }
    qkv_tensor *c = qkv_contiguous(ctx, x);
    if (!c) return NULL;
    qkv_tensor *y = qkv__view(ctx, c);
    if (!y) return NULL;
    y->ndim = ndim;
    memcpy(y->shape, s, sizeof(int64_t) * (size_t)ndim);
    qkv__contiguous_strides(ndim, s, y->stride);
    if (c->dtype != QKV_F32) return y;
    return record_view(ctx, c, y, "reshape", y->stride, 0);
}

/* ---- permute / transpose ------------------------------------------------------------------------------------- */

qkv_tensor *qkv_permute(qkv_ctx *ctx, qkv_tensor *x, const int *perm) {
    if (!x) return NULL;
    bool seen[QKV_MAX_DIMS] = {false};
    int p[QKV_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        int a = qkv_axis(x, perm[d]);
        if (a < 0) return NULL;
        if (seen[a]) {
            qkv_error_set(QKV_ERR_INVALID, "permute: axis %d appears twice", a);
            return NULL;
        }
        seen[a] = true;
        p[d] = a;
    }
    qkv_tensor *y = qkv__view(ctx, x);
    if (!y) return NULL;
    int64_t cs[QKV_MAX_DIMS], ls[QKV_MAX_DIMS];
    qkv__contiguous_strides(x->ndim, x->shape, cs);
    for (int d = 0; d < x->ndim; d++) {
        y->shape[d] = x->shape[p[d]];
        y->stride[d] = x->stride[p[d]];
        ls[d] = cs[p[d]];
    }
    if (x->dtype != QKV_F32) return y;
    return record_view(ctx, x, y, "permute", ls, 0);
}

qkv_tensor *qkv_transpose(qkv_ctx *ctx, qkv_tensor *x, int axis0, int axis1) {
    if (!x) return NULL;
    int a = qkv_axis(x, axis0), b = a < 0 ? -1 : qkv_axis(x, axis1);
    if (a < 0 || b < 0) return NULL;
    int perm[QKV_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) perm[d] = d;
    perm[a] = b;
    perm[b] = a;
    return qkv_permute(ctx, x, perm);
}

/* ---- slice ----------------------------------------------------------------------------------------------- */

qkv_tensor *qkv_slice(qkv_ctx *ctx, qkv_tensor *x, int axis, int64_t start, int64_t end, int64_t step) {
    if (!x) return NULL;
    int a = qkv_axis(x, axis);
    if (a < 0) return NULL;
    int64_t len = x->shape[a];
    if (start < 0) start += len;
    if (end < 0) end += len;
    if (end > len) end = len;
    if (step < 1 || start < 0 || start > len || end < start) {
        qkv_error_set(QKV_ERR_INVALID, "slice: [%lld:%lld:%lld] out of range for axis %d of length %lld",
                      (long long)start, (long long)end, (long long)step, a, (long long)len);
        return NULL;
    }
    qkv_tensor *y = qkv__view(ctx, x);
    if (!y) return NULL;
    y->shape[a] = (end - start + step - 1) / step;
    y->stride[a] = x->stride[a] * step;
    y->data = (char *)x->data + (size_t)(start * x->stride[a]) * qkv_dtype_size(x->dtype);
    if (x->dtype != QKV_F32) return y;
    int64_t ls[QKV_MAX_DIMS];
    qkv__contiguous_strides(x->ndim, x->shape, ls);
    int64_t offset = start * ls[a];
    ls[a] *= step;
    return record_view(ctx, x, y, "slice", ls, offset);
}

/* ---- broadcast_to ---------------------------------------------------------------------------------------- */

qkv_tensor *qkv_broadcast_to(qkv_ctx *ctx, qkv_tensor *x, int ndim, const int64_t *shape) {
    if (!x) return NULL;
    char sx[96];
    if (ndim < x->ndim || ndim > QKV_MAX_DIMS) goto bad;
    qkv_tensor *y = qkv__view(ctx, x);
    if (!y) return NULL;
    int64_t cs[QKV_MAX_DIMS], ls[QKV_MAX_DIMS];
    qkv__contiguous_strides(x->ndim, x->shape, cs);
    y->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        int xd = d - (ndim - x->ndim);
        int64_t xs = xd >= 0 ? x->shape[xd] : 1;
        if (xs != shape[d] && xs != 1) goto bad;
        y->shape[d] = shape[d];
        bool bc = xd < 0 || (xs == 1 && shape[d] != 1);
        y->stride[d] = bc ? 0 : x->stride[xd];
        ls[d] = bc ? 0 : cs[xd];
    }
    if (x->dtype != QKV_F32) return y;
    return record_view(ctx, x, y, "broadcast_to", ls, 0);
bad:
    qkv_error_set(QKV_ERR_INVALID, "broadcast_to: %s cannot broadcast to the requested rank-%d shape",
                  qkv_shape_str(x, sx, sizeof sx), ndim);
    return NULL;
}

/* ---- concat / stack / split -------------------------------------------------------------------------------- */

static qkv_status concat_backward(qkv_ctx *ctx, qkv_node *nd) {
    int a = (int)nd->i[0];
    const qkv_tensor *y = nd->out;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < a; d++) outer *= y->shape[d];
    for (int d = a + 1; d < y->ndim; d++) inner *= y->shape[d];
    int64_t row = y->shape[a] * inner, pos = 0;
    const float *dy = y->grad->data;
    for (int k = 0; k < nd->n_in; k++) {
        qkv_tensor *x = nd->in[k];
        int64_t w = x->shape[a] * inner;
        qkv_tensor *gx = qkv_grad_for(ctx, x);
        if (gx) {
            float *dx = gx->data;
            for (int64_t o = 0; o < outer; o++)
                for (int64_t j = 0; j < w; j++) dx[o * w + j] += dy[o * row + pos + j];
        }
        pos += w;
    }
    return QKV_OK;
}

qkv_tensor *qkv_concat(qkv_ctx *ctx, int n, qkv_tensor *const *xs, int axis) {
    if (n < 1) {
        qkv_error_set(QKV_ERR_INVALID, "concat: no tensors given");
        return NULL;
    }
    for (int k = 0; k < n; k++)
        if (!xs[k]) return NULL;
    int a = qkv_axis(xs[0], axis);
    if (a < 0) return NULL;
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, xs[0]->shape, sizeof shape);
    shape[a] = 0;
    for (int k = 0; k < n; k++) {
        const qkv_tensor *x = xs[k];
        bool ok = x->ndim == xs[0]->ndim && x->dtype == xs[0]->dtype;
        for (int d = 0; ok && d < x->ndim; d++)
            if (d != a && x->shape[d] != xs[0]->shape[d]) ok = false;
        if (!ok) {
            char s0[96], sk[96];
            qkv_error_set(QKV_ERR_INVALID, "concat: tensor %d of shape %s does not match %s outside axis %d", k,
                          qkv_shape_str(x, sk, sizeof sk), qkv_shape_str(xs[0], s0, sizeof s0), a);
            return NULL;
        }
        shape[a] += x->shape[a];
    }
    qkv_tensor *y = qkv__out(ctx, xs[0]->dtype, xs[0]->ndim, shape);
    qkv_tensor **cs = qkv_ctx_alloc(ctx, sizeof *cs * (size_t)n);
    if (!y || !cs) return NULL;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < a; d++) outer *= shape[d];
    for (int d = a + 1; d < y->ndim; d++) inner *= shape[d];
    int64_t row = shape[a] * inner, pos = 0;
    for (int k = 0; k < n; k++) {
        cs[k] = qkv_contiguous(ctx, xs[k]);
        if (!cs[k]) return NULL;
        int64_t w = cs[k]->shape[a] * inner;
        const uint32_t *src = cs[k]->data;
        uint32_t *dst = y->data;
        for (int64_t o = 0; o < outer; o++) memcpy(dst + o * row + pos, src + o * w, (size_t)w * 4);
        pos += w;
    }
    if (y->dtype != QKV_F32) return y;
    qkv_node *nd = qkv_record(ctx, y, "concat", concat_backward, n, cs);
    if (nd) nd->i[0] = a;
    return y;
}

qkv_tensor *qkv_stack(qkv_ctx *ctx, int n, qkv_tensor *const *xs, int axis) {
    if (n < 1) {
        qkv_error_set(QKV_ERR_INVALID, "stack: no tensors given");
        return NULL;
    }
    if (!xs[0]) return NULL;
    int nd = xs[0]->ndim + 1;
    int a = axis < 0 ? axis + nd : axis;
    if (a < 0 || a >= nd) {
        qkv_error_set(QKV_ERR_INVALID, "stack: axis %d out of range for rank %d", axis, nd);
        return NULL;
    }
    qkv_tensor **us = qkv_ctx_alloc(ctx, sizeof *us * (size_t)n);
    if (!us) return NULL;
    for (int k = 0; k < n; k++) {
        if (!xs[k]) return NULL;
        if (!qkv_same_shape(xs[k], xs[0])) {
            char s0[96], sk[96];
            qkv_error_set(QKV_ERR_INVALID, "stack: tensor %d has shape %s, tensor 0 has %s", k,
                          qkv_shape_str(xs[k], sk, sizeof sk), qkv_shape_str(xs[0], s0, sizeof s0));
            return NULL;
        }
        int64_t shape[QKV_MAX_DIMS];
        for (int d = 0, j = 0; d < nd; d++) shape[d] = d == a ? 1 : xs[k]->shape[j++];
        us[k] = qkv_reshape(ctx, xs[k], nd, shape);
        if (!us[k]) return NULL;
    }
    return qkv_concat(ctx, n, us, a);
}

qkv_status qkv_split(qkv_ctx *ctx, qkv_tensor *x, int axis, int n, const int64_t *sizes, qkv_tensor **out) {
    if (!x) return qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_INVALID, "split: no input");
    int a = qkv_axis(x, axis);
    if (a < 0) return QKV_ERR_INVALID;
    int64_t total = 0;
    for (int k = 0; k < n; k++) total += sizes[k] < 0 ? x->shape[a] + 1 : sizes[k];
    if (n < 1 || total != x->shape[a])
        return qkv_error_set(QKV_ERR_INVALID, "split: sizes sum to %lld, axis %d has length %lld",
                             (long long)total, a, (long long)x->shape[a]);
    int64_t pos = 0;
    for (int k = 0; k < n; k++) {
        out[k] = qkv_slice(ctx, x, a, pos, pos + sizes[k], 1);
        if (!out[k]) return qkv_last_status();
        pos += sizes[k];
    }
    return QKV_OK;
}
