/* A row-wise function applied in chunks of rows (qkv/nn_reversible.h: qkv_nn_chunked), the Reformer's chunked
 * feed-forward. Each chunk runs in its own segment (autograd.h, "Sub-graphs"): the forward keeps the output rows
 * and drops the chunk's temporaries; the backward recomputes each chunk with gradients on, from the generator state
 * the forward saw, and backpropagates that chunk's rows of the upstream gradient. Only the input and the output
 * are kept between forward and backward. */
#include <string.h>

#include "core/internal.h"
#include "qkv/nn_reversible.h"
#include "qkv/ops.h"

typedef struct {
    qkv_nn_fn fn;
    void *user;
    int64_t rows, chunk, d_in, d_out;
    const float *x;   /* [rows, d_in] */
    qkv_rng *rng;     /* the generator before each chunk */
} chunked_saved;

/* Rows [r0, r0 + nr) of x as a new [nr, d] context tensor. */
static qkv_tensor *rows_copy(qkv_ctx *ctx, const float *x, int64_t r0, int64_t nr, int64_t d) {
    qkv_tensor *t = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(nr, d));
    if (t) memcpy(t->data, x + r0 * d, sizeof(float) * (size_t)(nr * d));
    return t;
}

static qkv_status bad_output(const qkv_tensor *y, int64_t nr, int64_t d_out) {
    if (!y) return qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_INVALID, "chunked: fn failed");
    if (y->dtype != QKV_F32 || qkv_numel(y) != nr * d_out)
        return qkv_error_set(QKV_ERR_INVALID, "chunked: fn must map [rows, d] to [rows, %lld]", (long long)d_out);
    return QKV_OK;
}

static qkv_status chunked_backward(qkv_ctx *ctx, qkv_node *nd) {
    const chunked_saved *s = nd->saved;
    for (int i = 0; i < nd->n_in; i++) qkv_grad_for(ctx, nd->in[i]); /* before any segment (autograd.h) */
    qkv_tensor *gx = qkv_grad_for(ctx, nd->in[0]);
    const float *dy = qkv__contig_data(ctx, nd->out->grad);
    if (!dy) return qkv_last_status();
    const qkv_rng saved_rng = *qkv_ctx_rng(ctx);
    qkv_status st = QKV_OK;
    for (int64_t c = 0, r0 = 0; r0 < s->rows && st == QKV_OK; c++, r0 += s->chunk) {
        const int64_t nr = s->rows - r0 < s->chunk ? s->rows - r0 : s->chunk;
        qkv_ctx_mark m = qkv_ctx_mark_now(ctx);
        *qkv_ctx_rng(ctx) = s->rng[c];
        qkv_tensor *z = rows_copy(ctx, s->x, r0, nr, s->d_in), *g = rows_copy(ctx, dy, r0, nr, s->d_out);
        if (!z || !g) st = qkv_last_status();
        qkv_tensor *y = NULL;
        if (st == QKV_OK) {
            qkv_tensor_set_requires_grad(z, true);
            bool prev = qkv_ctx_set_grad(ctx, true);
            y = s->fn(ctx, z, s->user);
            qkv_ctx_set_grad(ctx, prev);
            st = bad_output(y, nr, s->d_out);
        }
        if (st == QKV_OK && (y->flags & QKV_FLAG_REQUIRES_GRAD)) {
            if (y->ndim != 2) { /* view the upstream rows in y's own shape */
                qkv_tensor *gv = qkv__view(ctx, y);
                if (!gv) st = qkv_last_status();
                else {
                    qkv__contiguous_strides(gv->ndim, gv->shape, gv->stride);
                    gv->data = g->data;
                    g = gv;
                }
            }
            if (st == QKV_OK) st = qkv_backward_since(ctx, &m, y, g);
        }
        if (st == QKV_OK && gx && z->grad) {
            float *o = qkv_f32(gx) + r0 * s->d_in;
            const float *dz = qkv_f32(z->grad);
            for (int64_t i = 0; i < nr * s->d_in; i++) o[i] += dz[i];
        }
        qkv_ctx_rewind(ctx, &m);
    }
    *qkv_ctx_rng(ctx) = saved_rng;
    return st;
}

qkv_tensor *qkv_nn_chunked(qkv_ctx *ctx, qkv_tensor *x, int64_t chunk, int64_t d_out, qkv_nn_fn fn, void *user,
                           int n_params, qkv_tensor *const *params) {
    if (!x) return NULL;
    if (!qkv__check_f32("chunked", x, "x")) return NULL;
    if (x->ndim < 1 || d_out < 1 || !fn || n_params < 0 || (n_params > 0 && !params)) {
        qkv_error_set(QKV_ERR_INVALID, "chunked: need x [..., D], d_out >= 1 and a function");
        return NULL;
    }
    const int64_t d_in = x->shape[x->ndim - 1], rows = d_in ? qkv_numel(x) / d_in : 0;
    if (chunk <= 0 || chunk > rows) chunk = rows > 0 ? rows : 1;
    const int64_t n_chunks = (rows + chunk - 1) / chunk;
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = d_out;
    chunked_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
    qkv_tensor *out = qkv__out(ctx, QKV_F32, x->ndim, shape);
    const float *xd = qkv__contig_data(ctx, x);
    qkv_rng *rng = qkv_ctx_alloc(ctx, sizeof *rng * (size_t)(n_chunks ? n_chunks : 1));
    if (!s || !out || !xd || !rng) return NULL;
    *s = (chunked_saved){.fn = fn, .user = user, .rows = rows, .chunk = chunk, .d_in = d_in, .d_out = d_out,
                         .x = xd, .rng = rng};
    bool prev = qkv_ctx_set_grad(ctx, false);
    qkv_status st = QKV_OK;
    for (int64_t c = 0, r0 = 0; r0 < rows && st == QKV_OK; c++, r0 += chunk) {
        const int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        rng[c] = *qkv_ctx_rng(ctx);
        qkv_ctx_mark m = qkv_ctx_mark_now(ctx);
        qkv_tensor *z = rows_copy(ctx, xd, r0, nr, d_in);
        qkv_tensor *y = z ? fn(ctx, z, user) : NULL;
        st = bad_output(y, nr, d_out);
        const float *yd = st == QKV_OK ? qkv__contig_data(ctx, y) : NULL;
        if (st == QKV_OK && !yd) st = qkv_last_status();
        if (st == QKV_OK) memcpy(qkv_f32(out) + r0 * d_out, yd, sizeof(float) * (size_t)(nr * d_out));
        qkv_ctx_rewind(ctx, &m);
    }
    qkv_ctx_set_grad(ctx, prev);
    if (st != QKV_OK) return NULL;
    qkv_tensor **in = qkv_ctx_alloc(ctx, sizeof *in * (size_t)(n_params + 1));
    if (!in) return NULL;
    in[0] = x;
    for (int i = 0; i < n_params; i++) in[i + 1] = params[i];
    qkv_node *nd = qkv_record(ctx, out, "chunked", chunked_backward, n_params + 1, in);
    if (nd) nd->saved = s;
    return out;
}
