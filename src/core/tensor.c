/* Tensor headers, heap allocation and layout queries. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

size_t qkv_dtype_size(qkv_dtype dtype) { return dtype == QKV_I32 ? 4 : 4; }

int64_t qkv__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    int64_t n = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] < 0) {
            qkv_error_set(QKV_ERR_INVALID, "negative dimension %lld in shape", (long long)shape[d]);
            return -1;
        }
        if (stride) stride[d] = n;
        if (shape[d] > 0 && n > QKV_MAX_NUMEL / shape[d]) {
            qkv_error_set(QKV_ERR_RANGE, "tensor of more than 2^40 elements requested");
            return -1;
        }
        n *= shape[d];
    }
    return n;
}

void qkv__header(qkv_tensor *t, qkv_dtype dtype, int ndim, const int64_t *shape) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    qkv__contiguous_strides(ndim, shape, t->stride);
}

qkv_tensor *qkv_tensor_new(qkv_dtype dtype, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > QKV_MAX_DIMS) {
        qkv_error_set(QKV_ERR_INVALID, "tensor rank %d outside 0..%d", ndim, QKV_MAX_DIMS);
        return NULL;
    }
    int64_t n = qkv__contiguous_strides(ndim, shape, NULL);
    if (n < 0) return NULL;
    qkv_tensor *t = malloc(sizeof *t);
    void *data = calloc((size_t)(n ? n : 1), qkv_dtype_size(dtype));
    if (!t || !data) {
        free(t);
        free(data);
        qkv_error_set(QKV_ERR_NOMEM, "out of memory allocating a tensor of %lld elements", (long long)n);
        return NULL;
    }
    qkv__header(t, dtype, ndim, shape);
    t->data = data;
    t->flags = QKV_FLAG_HEAP | QKV_FLAG_OWNS_DATA;
    return t;
}

qkv_tensor *qkv_tensor_clone(const qkv_tensor *src) {
    qkv_tensor *t = qkv_tensor_new(src->dtype, src->ndim, src->shape);
    if (t && qkv_tensor_copy(t, src) != QKV_OK) {
        qkv_tensor_free(t);
        return NULL;
    }
    return t;
}

void qkv_tensor_free(qkv_tensor *t) {
    if (!t) return;
    if (t->grad && (t->flags & QKV_FLAG_HEAP)) qkv_tensor_free(t->grad);
    if (t->flags & QKV_FLAG_OWNS_DATA) free(t->data);
    free(t);
}

int64_t qkv_numel(const qkv_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

bool qkv_is_contiguous(const qkv_tensor *t) {
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != expect) return false;
        expect *= t->shape[d];
    }
    return true;
}

bool qkv_same_shape(const qkv_tensor *a, const qkv_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

int qkv_axis(const qkv_tensor *t, int axis) {
    int a = axis < 0 ? axis + t->ndim : axis;
    if (a < 0 || a >= t->ndim) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "axis %d out of range for a tensor of shape %s", axis,
                      qkv_shape_str(t, s, sizeof s));
        return -1;
    }
    return a;
}

const char *qkv_shape_str(const qkv_tensor *t, char *buf, size_t size) {
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < t->ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

void qkv_tensor_set_name(qkv_tensor *t, const char *name) {
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
}

void qkv_tensor_set_requires_grad(qkv_tensor *t, bool on) {
    if (on)
        t->flags |= QKV_FLAG_REQUIRES_GRAD;
    else
        t->flags &= ~(uint32_t)QKV_FLAG_REQUIRES_GRAD;
}

void qkv_tensor_retain_grad(qkv_tensor *t) { t->flags |= QKV_FLAG_RETAIN_GRAD; }

void qkv_tensor_zero_grad(qkv_tensor *t) {
    if (t->grad) qkv__zero_floats(t->grad->data, qkv_numel(t->grad));
}

void qkv_tensor_fill(qkv_tensor *t, float value) {
    if (t->dtype == QKV_F32) {
        float *p = t->data;
        QKV_FOR_EACH_OFFSET(t, off, p[off] = value);
    } else {
        int32_t *p = t->data;
        QKV_FOR_EACH_OFFSET(t, off, p[off] = (int32_t)value);
    }
}

/* The lowest and one past the highest element offset t's strides reach (t not empty). */
static void extent(const qkv_tensor *t, int64_t *lo, int64_t *hi) {
    *lo = 0;
    *hi = 1;
    for (int d = 0; d < t->ndim; d++) {
        int64_t reach = (t->shape[d] - 1) * t->stride[d];
        if (reach < 0) *lo += reach;
        else *hi += reach;
    }
}

/* A copy between non-overlapping tensors whose last dimensions are both unit-stride, row by row with memcpy: what
 * the element walk below writes, in the same order (a decoding step's keys and values into a slot of its cache
 * take this path every step). False when it does not apply. */
static bool copy_rows(qkv_tensor *dst, const qkv_tensor *src) {
    int nd = src->ndim;
    if (nd < 1 || src->stride[nd - 1] != 1 || dst->stride[nd - 1] != 1) return false;
    int64_t slo, shi, dlo, dhi;
    extent(src, &slo, &shi);
    extent(dst, &dlo, &dhi);
    const uint32_t *s = src->data;
    uint32_t *d = dst->data;
    uintptr_t sa = (uintptr_t)src->data, da = (uintptr_t)dst->data; /* addresses: the two may be distinct objects */
    if (da + (uintptr_t)(dlo * 4) < sa + (uintptr_t)(shi * 4) && sa + (uintptr_t)(slo * 4) < da + (uintptr_t)(dhi * 4))
        return false; /* overlapping: the walk's temporary copy keeps that exact */
    int64_t idx[QKV_MAX_DIMS] = {0}, inner = src->shape[nd - 1], rows = qkv_numel(src) / inner;
    for (int64_t r = 0; r < rows; r++) {
        int64_t so = 0, dof = 0;
        for (int k = 0; k < nd - 1; k++) {
            so += idx[k] * src->stride[k];
            dof += idx[k] * dst->stride[k];
        }
        memcpy(d + dof, s + so, (size_t)inner * 4);
        for (int k = nd - 2; k >= 0; k--) {
            if (++idx[k] < src->shape[k]) break;
            idx[k] = 0;
        }
    }
    return true;
}

qkv_status qkv_tensor_copy(qkv_tensor *dst, const qkv_tensor *src) {
    char a[96], b[96];
    if (!qkv_same_shape(dst, src) || dst->dtype != src->dtype)
        return qkv_error_set(QKV_ERR_INVALID, "copy: destination %s does not match source %s (or dtypes differ)",
                             qkv_shape_str(dst, a, sizeof a), qkv_shape_str(src, b, sizeof b));
    int64_t n = qkv_numel(src);
    if (qkv_is_contiguous(dst) && qkv_is_contiguous(src)) {
        memmove(dst->data, src->data, (size_t)n * 4);
        return QKV_OK;
    }
    if (n > 0 && copy_rows(dst, src)) return QKV_OK;
    /* Walk src in row-major order, writing dst through its own strides. */
    const uint32_t *s = src->data;
    uint32_t *d = dst->data;
    int64_t k = 0;
    uint32_t *tmp = malloc((size_t)(n ? n : 1) * 4);
    if (!tmp) return qkv_error_set(QKV_ERR_NOMEM, "copy: out of memory");
    QKV_FOR_EACH_OFFSET(src, off, tmp[k++] = s[off]);
    k = 0;
    QKV_FOR_EACH_OFFSET(dst, off, d[off] = tmp[k++]);
    free(tmp);
    return QKV_OK;
}

qkv_status qkv_tensor_load(qkv_tensor *t, const void *src, size_t bytes) {
    int64_t n = qkv_numel(t);
    if (bytes != (size_t)n * 4)
        return qkv_error_set(QKV_ERR_INVALID, "load: %zu bytes given for a tensor of %lld elements", bytes,
                             (long long)n);
    qkv_tensor flat;
    qkv__header(&flat, t->dtype, t->ndim, t->shape);
    flat.data = (void *)src;
    return qkv_tensor_copy(t, &flat);
}

void qkv__strided_add(float *dst, const qkv_tensor *v) {
    /* dst is contiguous in v's shape order; v->data points into the gradient being read. */
    const float *s = v->data;
    int64_t k = 0;
    QKV_FOR_EACH_OFFSET(v, off, dst[k++] += s[off]);
}

bool qkv__check_f32(const char *op, const qkv_tensor *t, const char *arg) {
    if (t->dtype != QKV_F32) {
        qkv_error_set(QKV_ERR_INVALID, "%s: %s must be float32", op, arg);
        return false;
    }
    return true;
}
