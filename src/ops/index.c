/* Indexing and masking: embedding, index_select, gather (int32 indices) and masked_fill, where (masks).
 *
 * Index tensors are validated in full before any work, so a bad id is reported (with its value, position and the
 * valid range) instead of reading out of bounds. Backward passes scatter-add; each is partitioned so that no two
 * threads write one gradient element and every element sums its contributions in a fixed order, which keeps the
 * results bit-identical for any thread count.
 *
 * Masks (float32 or int32, non-zero = true) are first expanded to one byte per output element: the forward reads
 * them in a flat loop and the backward reuses them.
 */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "ops/ops_internal.h"
#include "qkv/ops.h"

#define PAR_MIN (1 << 15) /* elements below which a kernel is not worth threading */

/* ---- helpers ------------------------------------------------------------------------------------------------ */

/* "[1, 4]": the multi-index of flat position `flat` in a row-major shape. */
static const char *position_str(int ndim, const int64_t *shape, int64_t flat, char *buf, size_t size) {
    int64_t idx[QKV_MAX_DIMS];
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? flat % shape[d] : 0;
        flat = shape[d] ? flat / shape[d] : 0;
    }
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, d ? ", %lld" : "%lld", (long long)idx[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

/* Every entry of idx (row-major, in `of`'s shape) must lie in [0, n); the error names the first one that does
 * not. */
static bool check_range(const char *op, const char *what, const int32_t *idx, const qkv_tensor *of, int64_t n) {
    int64_t count = qkv_numel(of);
    for (int64_t i = 0; i < count; i++) {
        if (idx[i] >= 0 && idx[i] < n) continue;
        char pos[128], shp[96];
        qkv_error_set(QKV_ERR_RANGE, "%s: %s %d at position %s of %s %s is outside the valid range [0, %lld)", op,
                      what, idx[i], position_str(of->ndim, of->shape, i, pos, sizeof pos), what,
                      qkv_shape_str(of, shp, sizeof shp), (long long)n);
        return false;
    }
    return true;
}

static bool check_i32(const char *op, const qkv_tensor *t, const char *arg) {
    if (t->dtype == QKV_I32) return true;
    qkv_error_set(QKV_ERR_INVALID, "%s: %s must be int32", op, arg);
    return false;
}

static int64_t prod(const int64_t *shape, int from, int to) {
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= shape[d];
    return p;
}

/* ---- embedding ---------------------------------------------------------------------------------------------- */

/* row += the rows g[idx[j]] (D floats each), in order: one bucket of the embedding gradient. Compiled per
 * instruction set and dispatched at run time (core/isa.h). */
QKV_KERNEL_BODY void gather_add_body(float *restrict row, const float *restrict g, const int64_t *idx, int64_t m,
                                     int64_t D) {
    for (int64_t j = 0; j < m; j++) {
        const float *restrict src = g + idx[j] * D;
        for (int64_t c = 0; c < D; c++) row[c] += src[c];
    }
}
QKV_ISA_KERNEL_VOID(gather_add,
                    (float *restrict row, const float *restrict g, const int64_t *idx, int64_t m, int64_t D),
                    (row, g, idx, m, D))

static qkv_status embedding_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gw = qkv_grad_for(ctx, nd->in[0]);
    if (!gw) return QKV_OK;
    const int32_t *ids = nd->saved;
    const float *g = nd->out->grad->data;
    float *dw = gw->data;
    int64_t n = nd->i[0], V = gw->shape[0], D = gw->shape[1];
    /* Bucket the token positions by id with a stable counting sort: every row of dweight then sums its tokens in
     * token order, in one thread, whatever the thread count. */
    int64_t *end = qkv_ctx_alloc(ctx, sizeof(int64_t) * (size_t)(V + 1));
    int64_t *order = qkv_ctx_alloc(ctx, sizeof(int64_t) * (size_t)(n ? n : 1));
    int32_t *used = qkv_ctx_alloc(ctx, sizeof(int32_t) * (size_t)(V ? V : 1));
    if (!end || !order || !used) return qkv_last_status();
    memset(end, 0, sizeof(int64_t) * (size_t)(V + 1));
    for (int64_t t = 0; t < n; t++) end[ids[t] + 1]++;
    int64_t n_used = 0;
    for (int64_t v = 0; v < V; v++) {
        if (end[v + 1]) used[n_used++] = (int32_t)v;
        end[v + 1] += end[v];
    }
    /* end[v] is now the start of bucket v; filling advances it to the bucket's end (= start of v + 1). */
    for (int64_t t = 0; t < n; t++) order[end[ids[t]]++] = t;
#pragma omp parallel for schedule(dynamic, 16) if (n * D > PAR_MIN && n_used > 1)
    for (int64_t k = 0; k < n_used; k++) {
        int32_t v = used[k];
        gather_add(dw + (int64_t)v * D, g, order + (v ? end[v - 1] : 0), end[v] - (v ? end[v - 1] : 0), D);
    }
    return QKV_OK;
}

qkv_tensor *qkv_embedding(qkv_ctx *ctx, qkv_tensor *weight, qkv_tensor *ids) {
    if (!weight || !ids) return NULL;
    char s[96];
    if (!qkv__check_f32("embedding", weight, "weight") || !check_i32("embedding", ids, "ids")) return NULL;
    if (weight->ndim != 2) {
        qkv_error_set(QKV_ERR_INVALID, "embedding: weight must be 2-D [V, D], got %s",
                      qkv_shape_str(weight, s, sizeof s));
        return NULL;
    }
    if (ids->ndim >= QKV_MAX_DIMS) {
        qkv_error_set(QKV_ERR_INVALID, "embedding: ids of rank %d leave no room for the embedding dimension",
                      ids->ndim);
        return NULL;
    }
    int64_t V = weight->shape[0], D = weight->shape[1], n = qkv_numel(ids);
    const int32_t *id = (const int32_t *)qkv__contig_data(ctx, ids);
    if (!id || !check_range("embedding", "id", id, ids, V)) return NULL;
    const float *w = qkv__contig_data(ctx, weight);
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    shape[ids->ndim] = D;
    qkv_tensor *out = w ? qkv__out(ctx, QKV_F32, ids->ndim + 1, shape) : NULL;
    if (!out) return NULL;
    float *o = out->data;
#pragma omp parallel for schedule(static) if (n * D > PAR_MIN)
    for (int64_t t = 0; t < n; t++) memcpy(o + t * D, w + (int64_t)id[t] * D, sizeof(float) * (size_t)D);
    qkv_node *nd = qkv_record(ctx, out, "embedding", embedding_backward, 1, &weight);
    if (nd) {
        nd->saved = (void *)id;
        nd->i[0] = n;
    }
    return out;
}

/* ---- index_select --------------------------------------------------------------------------------------------
 * x viewed as [outer, nx, inner] and the result as [outer, k, inner]: out[o, j, :] = x[o, index[j], :]. */

#define COL_BLOCK 256 /* backward: columns of `inner` per task when there are few outer slices */

static qkv_status index_select_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    if (!gx) return QKV_OK;
    const int32_t *idx = nd->saved;
    const float *g = nd->out->grad->data;
    float *dx = gx->data;
    int64_t outer = nd->i[0], nx = nd->i[1], k = nd->i[2], inner = nd->i[3];
    /* Tasks are (outer slice, column block): disjoint in dx, and each adds its rows in index order. */
    int64_t nb = (inner + COL_BLOCK - 1) / COL_BLOCK, tasks = outer * nb;
#pragma omp parallel for schedule(static) if (outer * k * inner > PAR_MIN && tasks > 1)
    for (int64_t task = 0; task < tasks; task++) {
        int64_t o = task / nb, c0 = (task % nb) * COL_BLOCK, c1 = c0 + COL_BLOCK < inner ? c0 + COL_BLOCK : inner;
        for (int64_t j = 0; j < k; j++) {
            float *dst = dx + (o * nx + idx[j]) * inner;
            const float *src = g + (o * k + j) * inner;
            for (int64_t c = c0; c < c1; c++) dst[c] += src[c];
        }
    }
    return QKV_OK;
}

qkv_tensor *qkv_index_select(qkv_ctx *ctx, qkv_tensor *x, int axis, qkv_tensor *index) {
    if (!x || !index) return NULL;
    char s[96];
    if (!qkv__check_f32("index_select", x, "x") || !check_i32("index_select", index, "index")) return NULL;
    if (index->ndim != 1) {
        qkv_error_set(QKV_ERR_INVALID, "index_select: index must be 1-D, got %s", qkv_shape_str(index, s, sizeof s));
        return NULL;
    }
    int a = qkv_axis(x, axis);
    if (a < 0) return NULL;
    const int32_t *idx = (const int32_t *)qkv__contig_data(ctx, index);
    if (!idx || !check_range("index_select", "index", idx, index, x->shape[a])) return NULL;
    const float *xd = qkv__contig_data(ctx, x);
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[a] = index->shape[0];
    qkv_tensor *out = xd ? qkv__out(ctx, QKV_F32, x->ndim, shape) : NULL;
    if (!out) return NULL;
    int64_t outer = prod(x->shape, 0, a), nx = x->shape[a], k = shape[a], inner = prod(x->shape, a + 1, x->ndim);
    float *o = out->data;
#pragma omp parallel for schedule(static) if (outer * k * inner > PAR_MIN)
    for (int64_t r = 0; r < outer * k; r++) {
        int64_t oi = r / k, j = r % k;
        memcpy(o + r * inner, xd + (oi * nx + idx[j]) * inner, sizeof(float) * (size_t)inner);
    }
    qkv_node *nd = qkv_record(ctx, out, "index_select", index_select_backward, 1, &x);
    if (nd) {
        nd->saved = (void *)idx;
        nd->i[0] = outer;
        nd->i[1] = nx;
        nd->i[2] = k;
        nd->i[3] = inner;
    }
    return out;
}

/* ---- gather ----------------------------------------------------------------------------------------------------
 * The forward computes, for every output element, its offset in (contiguous) x; the backward scatter-adds
 * through the same offsets. Output elements that share their coordinates before `axis` form a block; blocks write
 * disjoint parts of dx, so they run in parallel while each block adds in row-major order. */

static qkv_status gather_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    if (!gx) return QKV_OK;
    const int64_t *offs = nd->saved;
    const float *g = nd->out->grad->data;
    float *dx = gx->data;
    int64_t blocks = nd->i[0], per = nd->i[1];
#pragma omp parallel for schedule(static) if (blocks * per > PAR_MIN && blocks > 1)
    for (int64_t b = 0; b < blocks; b++)
        for (int64_t e = b * per; e < (b + 1) * per; e++) dx[offs[e]] += g[e];
    return QKV_OK;
}

qkv_tensor *qkv_gather(qkv_ctx *ctx, qkv_tensor *x, int axis, qkv_tensor *index) {
    if (!x || !index) return NULL;
    char sx[96], si[96];
    if (!qkv__check_f32("gather", x, "x") || !check_i32("gather", index, "index")) return NULL;
    int a = qkv_axis(x, axis);
    if (a < 0) return NULL;
    bool fits = index->ndim == x->ndim;
    for (int d = 0; fits && d < x->ndim; d++) fits = d == a || index->shape[d] <= x->shape[d];
    if (!fits) {
        qkv_error_set(QKV_ERR_INVALID, "gather: index %s must have the rank of x %s and no larger size outside "
                      "axis %d", qkv_shape_str(index, si, sizeof si), qkv_shape_str(x, sx, sizeof sx), a);
        return NULL;
    }
    const int32_t *idx = (const int32_t *)qkv__contig_data(ctx, index);
    if (!idx || !check_range("gather", "index", idx, index, x->shape[a])) return NULL;
    const float *xd = qkv__contig_data(ctx, x);
    qkv_tensor *out = xd ? qkv__out(ctx, QKV_F32, index->ndim, index->shape) : NULL;
    int64_t count = qkv_numel(index);
    int64_t *offs = out ? qkv_ctx_alloc(ctx, sizeof(int64_t) * (size_t)(count ? count : 1)) : NULL;
    if (!offs) return NULL;
    int n = x->ndim;
    int64_t xs[QKV_MAX_DIMS];
    qkv__contiguous_strides(n, x->shape, xs);
    int64_t len = index->shape[n - 1], rows = len ? count / len : 0;
    float *o = out->data;
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r, base = 0;
        for (int d = n - 2; d >= 0; d--) {
            if (d != a) base += (rem % index->shape[d]) * xs[d];
            rem /= index->shape[d];
        }
        int64_t step = a == n - 1 ? 0 : 1; /* the last coordinate counts unless it is the gathered one */
        for (int64_t j = 0; j < len; j++) {
            int64_t e = r * len + j, off = base + j * step + (int64_t)idx[e] * xs[a];
            offs[e] = off;
            o[e] = xd[off];
        }
    }
    qkv_node *nd = qkv_record(ctx, out, "gather", gather_backward, 1, &x);
    if (nd) {
        nd->saved = offs;
        nd->i[0] = prod(index->shape, 0, a);
        nd->i[1] = prod(index->shape, a, n);
    }
    return out;
}

/* ---- masked_fill and where -------------------------------------------------------------------------------------- */

/* Broadcast shape of k tensors (NumPy rules); false with an error naming the op and the shapes. */
static bool broadcast_k(const char *op, int k, qkv_tensor *const *ts, int *ndim, int64_t *shape) {
    int n = 0;
    for (int i = 0; i < k; i++) n = ts[i]->ndim > n ? ts[i]->ndim : n;
    for (int d = 0; d < n; d++) {
        int64_t size = 1;
        for (int i = 0; i < k; i++) {
            int td = d - (n - ts[i]->ndim);
            int64_t s = td >= 0 ? ts[i]->shape[td] : 1;
            if (s == 1 || s == size) continue;
            if (size != 1) {
                char buf[3][96];
                qkv_error_set(QKV_ERR_INVALID, "%s: shapes %s%s%s%s%s do not broadcast", op,
                              qkv_shape_str(ts[0], buf[0], sizeof buf[0]), k > 1 ? " and " : "",
                              k > 1 ? qkv_shape_str(ts[1], buf[1], sizeof buf[1]) : "", k > 2 ? " and " : "",
                              k > 2 ? qkv_shape_str(ts[2], buf[2], sizeof buf[2]) : "");
                return false;
            }
            size = s;
        }
        shape[d] = size;
    }
    *ndim = n;
    return true;
}

/* Strides of t aligned to an n-dim shape, 0 along broadcast dimensions. */
static void aligned_strides(const qkv_tensor *t, int n, int64_t *s) {
    for (int d = 0; d < n; d++) {
        int td = d - (n - t->ndim);
        s[d] = (td < 0 || t->shape[td] == 1) ? 0 : t->stride[td];
    }
}

/* Offset of the first element of row r (all dims but the last) through strides s. */
static inline int64_t row_base(int64_t r, int n, const int64_t *shape, const int64_t *s) {
    int64_t off = 0;
    for (int d = n - 2; d >= 0; d--) {
        off += (r % shape[d]) * s[d];
        r /= shape[d];
    }
    return off;
}

/* One byte per element of the n-dim shape: 1 where the broadcast mask is non-zero. */
static unsigned char *expand_mask(qkv_ctx *ctx, const char *op, const qkv_tensor *m, int n, const int64_t *shape) {
    if (m->dtype != QKV_F32 && m->dtype != QKV_I32) {
        qkv_error_set(QKV_ERR_INVALID, "%s: mask must be float32 or int32", op);
        return NULL;
    }
    int64_t count = prod(shape, 0, n), inner = n ? shape[n - 1] : 1, rows = inner ? count / inner : 0;
    unsigned char *dst = qkv_ctx_alloc(ctx, (size_t)(count ? count : 1));
    if (!dst) return NULL;
    int64_t s[QKV_MAX_DIMS];
    aligned_strides(m, n, s);
    int64_t is = n ? s[n - 1] : 0;
    bool f32 = m->dtype == QKV_F32;
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = row_base(r, n, shape, s);
        unsigned char *d = dst + r * inner;
        if (f32) {
            const float *p = (const float *)m->data + base;
            for (int64_t j = 0; j < inner; j++) d[j] = p[j * is] != 0.0f;
        } else {
            const int32_t *p = (const int32_t *)m->data + base;
            for (int64_t j = 0; j < inner; j++) d[j] = p[j * is] != 0;
        }
    }
    return dst;
}

/* grad(t) += (mask == keep ? g : 0), reduced over the dimensions t was broadcast along. */
static qkv_status masked_grad(qkv_ctx *ctx, qkv_tensor *t, const qkv_tensor *out, const unsigned char *mask,
                              unsigned char keep) {
    qkv_tensor *gt = qkv_grad_for(ctx, t);
    if (!gt) return QKV_OK;
    const float *g = out->grad->data;
    int64_t count = qkv_numel(out);
    float *dst = gt->data;
    if (qkv_same_shape(t, out)) {
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
        for (int64_t i = 0; i < count; i++) dst[i] += mask[i] == keep ? g[i] : 0.0f;
        return QKV_OK;
    }
    float *tmp = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(count ? count : 1));
    if (!tmp) return qkv_last_status();
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
    for (int64_t i = 0; i < count; i++) tmp[i] = mask[i] == keep ? g[i] : 0.0f;
    qkv__reduce_broadcast_add(dst, t, tmp, out->ndim, out->shape);
    return QKV_OK;
}

static qkv_status masked_fill_backward(qkv_ctx *ctx, qkv_node *nd) {
    return masked_grad(ctx, nd->in[0], nd->out, nd->saved, 0);
}

qkv_tensor *qkv_masked_fill(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *mask, float value) {
    if (!x || !mask) return NULL;
    if (!qkv__check_f32("masked_fill", x, "x")) return NULL;
    int n;
    int64_t shape[QKV_MAX_DIMS], sx[QKV_MAX_DIMS];
    qkv_tensor *both[2] = {x, mask};
    if (!broadcast_k("masked_fill", 2, both, &n, shape)) return NULL;
    unsigned char *m = expand_mask(ctx, "masked_fill", mask, n, shape);
    qkv_tensor *out = m ? qkv__out(ctx, QKV_F32, n, shape) : NULL;
    if (!out) return NULL;
    aligned_strides(x, n, sx);
    int64_t count = qkv_numel(out), inner = n ? shape[n - 1] : 1, rows = inner ? count / inner : 0;
    int64_t is = n ? sx[n - 1] : 0;
    float *o = out->data;
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *p = (const float *)x->data + row_base(r, n, shape, sx);
        const unsigned char *mr = m + r * inner;
        float *d = o + r * inner;
        for (int64_t j = 0; j < inner; j++) d[j] = mr[j] ? value : p[j * is];
    }
    qkv_node *nd = qkv_record(ctx, out, "masked_fill", masked_fill_backward, 1, &x);
    if (nd) nd->saved = m;
    return out;
}

static qkv_status where_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_status st = masked_grad(ctx, nd->in[0], nd->out, nd->saved, 1);
    return st ? st : masked_grad(ctx, nd->in[1], nd->out, nd->saved, 0);
}

qkv_tensor *qkv_where(qkv_ctx *ctx, qkv_tensor *cond, qkv_tensor *a, qkv_tensor *b) {
    if (!cond || !a || !b) return NULL;
    if (!qkv__check_f32("where", a, "a") || !qkv__check_f32("where", b, "b")) return NULL;
    int n;
    int64_t shape[QKV_MAX_DIMS], sa[QKV_MAX_DIMS], sb[QKV_MAX_DIMS];
    qkv_tensor *all[3] = {cond, a, b};
    if (!broadcast_k("where", 3, all, &n, shape)) return NULL;
    unsigned char *m = expand_mask(ctx, "where", cond, n, shape);
    qkv_tensor *out = m ? qkv__out(ctx, QKV_F32, n, shape) : NULL;
    if (!out) return NULL;
    aligned_strides(a, n, sa);
    aligned_strides(b, n, sb);
    int64_t count = qkv_numel(out), inner = n ? shape[n - 1] : 1, rows = inner ? count / inner : 0;
    int64_t ia = n ? sa[n - 1] : 0, ib = n ? sb[n - 1] : 0;
    float *o = out->data;
#pragma omp parallel for schedule(static) if (count > PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *pa = (const float *)a->data + row_base(r, n, shape, sa);
        const float *pb = (const float *)b->data + row_base(r, n, shape, sb);
        const unsigned char *mr = m + r * inner;
        float *d = o + r * inner;
        for (int64_t j = 0; j < inner; j++) d[j] = mr[j] ? pa[j * ia] : pb[j * ib];
    }
    qkv_tensor *in[2] = {a, b};
    qkv_node *nd = qkv_record(ctx, out, "where", where_backward, 2, in);
    if (nd) nd->saved = m;
    return out;
}
