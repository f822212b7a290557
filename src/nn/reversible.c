/* Reversible residual blocks (qkv/nn_reversible.h): a stack that keeps only its output and reconstructs every
 * block's input in the backward.
 *
 * Forward, with gradients off: the two streams live in two buffers made before the loop; each half-block runs
 * between a mark and a rewind of the context (autograd.h, "Sub-graphs"), adding its output into its stream in
 * place, so only one block's temporaries ever exist. The generator's state before each half is kept. Backward,
 * from the last block, with (y1, y2) and (dy1, dy2) in place:
 *     z1 = leaf(y1);  G = g(z1);  backprop dy2 through G -> dz1;   x2 = y2 - G;   dy1 += dz1   (= dx1)
 *     z2 = leaf(x2);  F = f(z2);  backprop dy1 through F -> dz2;   x1 = y1 - F;   dy2 += dz2   (= dx2)
 * each half in its own segment, with the generator restored to its forward state; the parameters' gradients
 * accumulate as the segments run. */
#include <string.h>

#include "core/internal.h"
#include "qkv/nn_reversible.h"
#include "qkv/ops.h"

typedef struct {
    int n;
    qkv_nn_rev_block *blocks;
    qkv_rng *rng_f, *rng_g; /* the generator before f and g of each block */
    int64_t rows, d;        /* the streams as [rows, d] */
} rev_saved;

/* A [.., d] context tensor (x's leading shape) holding a copy of `data`: a leaf of the segment it is made in. */
static qkv_tensor *stream_copy(qkv_ctx *ctx, const qkv_tensor *like, int64_t d, const float *data) {
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, like->shape, sizeof shape);
    shape[like->ndim - 1] = d;
    qkv_tensor *t = qkv_ctx_tensor(ctx, QKV_F32, like->ndim, shape);
    if (t) memcpy(t->data, data, sizeof(float) * (size_t)qkv_numel(t));
    return t;
}

/* Runs fn on a copy of `in` (a stream) inside a segment with gradients off and adds the result into `acc`. */
static qkv_status half_forward(qkv_ctx *ctx, const qkv_tensor *like, int64_t d, qkv_nn_fn fn, void *user,
                               const float *in, float *acc, int64_t n) {
    qkv_ctx_mark m = qkv_ctx_mark_now(ctx);
    qkv_tensor *x = stream_copy(ctx, like, d, in);
    qkv_tensor *y = x ? fn(ctx, x, user) : NULL;
    qkv_status st = QKV_OK;
    if (!y)
        st = qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_INVALID, "reversible: a block failed");
    else if (qkv_numel(y) != n || y->dtype != QKV_F32)
        st = qkv_error_set(QKV_ERR_INVALID, "reversible: a block's function must map [..., %lld] to the same shape",
                           (long long)d);
    else {
        const float *yd = qkv__contig_data(ctx, y);
        if (!yd) st = qkv_last_status();
        else
            for (int64_t i = 0; i < n; i++) acc[i] += yd[i];
    }
    qkv_ctx_rewind(ctx, &m);
    return st;
}

/* One half of a block's backward: z = leaf(in); out = fn(z); backprop dout through it; rec -= out (reconstruct);
 * dacc += dz. */
static qkv_status half_backward(qkv_ctx *ctx, const qkv_tensor *like, int64_t d, qkv_nn_fn fn, void *user,
                                const qkv_rng *rng, const float *in, float *rec, const float *dout, float *dacc,
                                int64_t n) {
    qkv_ctx_mark m = qkv_ctx_mark_now(ctx);
    *qkv_ctx_rng(ctx) = *rng;
    qkv_status st = QKV_OK;
    qkv_tensor *z = stream_copy(ctx, like, d, in);
    qkv_tensor *g = stream_copy(ctx, like, d, dout);
    if (!z || !g) {
        qkv_ctx_rewind(ctx, &m);
        return qkv_last_status();
    }
    qkv_tensor_set_requires_grad(z, true);
    bool prev = qkv_ctx_set_grad(ctx, true);
    qkv_tensor *y = fn(ctx, z, user);
    qkv_ctx_set_grad(ctx, prev);
    if (!y) st = qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_INVALID, "reversible: a block failed");
    const float *yd = st == QKV_OK ? qkv__contig_data(ctx, y) : NULL;
    if (st == QKV_OK && !yd) st = qkv_last_status();
    if (st == QKV_OK && (y->flags & QKV_FLAG_REQUIRES_GRAD)) st = qkv_backward_since(ctx, &m, y, g);
    if (st == QKV_OK) {
        for (int64_t i = 0; i < n; i++) rec[i] -= yd[i];
        if (z->grad)
            for (int64_t i = 0; i < n; i++) dacc[i] += qkv_f32(z->grad)[i];
    }
    qkv_ctx_rewind(ctx, &m);
    return st;
}

static qkv_status rev_backward(qkv_ctx *ctx, qkv_node *nd) {
    const rev_saved *s = nd->saved;
    const int64_t R = s->rows, d = s->d, n = R * d;
    qkv_tensor *x = nd->in[0];
    /* Gradient buffers of context tensors among the inputs exist before any segment (autograd.h). */
    for (int i = 0; i < nd->n_in; i++) qkv_grad_for(ctx, nd->in[i]);
    float *y1 = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)n), *y2 = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)n);
    float *d1 = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)n), *d2 = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)n);
    const float *y = nd->out->data, *dy = qkv__contig_data(ctx, nd->out->grad);
    if (!y1 || !y2 || !d1 || !d2 || !dy) return qkv_last_status();
    for (int64_t r = 0; r < R; r++) {
        memcpy(y1 + r * d, y + r * 2 * d, sizeof(float) * (size_t)d);
        memcpy(y2 + r * d, y + r * 2 * d + d, sizeof(float) * (size_t)d);
        memcpy(d1 + r * d, dy + r * 2 * d, sizeof(float) * (size_t)d);
        memcpy(d2 + r * d, dy + r * 2 * d + d, sizeof(float) * (size_t)d);
    }
    const qkv_rng saved_rng = *qkv_ctx_rng(ctx);
    qkv_status st = QKV_OK;
    for (int b = s->n - 1; b >= 0 && st == QKV_OK; b--) {
        const qkv_nn_rev_block *blk = &s->blocks[b];
        st = half_backward(ctx, x, d, blk->g, blk->g_user, &s->rng_g[b], y1, y2, d2, d1, n);
        if (st == QKV_OK) st = half_backward(ctx, x, d, blk->f, blk->f_user, &s->rng_f[b], y2, y1, d1, d2, n);
    }
    *qkv_ctx_rng(ctx) = saved_rng;
    if (st != QKV_OK) return st;
    qkv_tensor *gx = qkv_grad_for(ctx, x);
    if (gx)
        for (int64_t r = 0; r < R; r++) {
            float *o = qkv_f32(gx) + r * 2 * d;
            for (int64_t j = 0; j < d; j++) {
                o[j] += d1[r * d + j];
                o[d + j] += d2[r * d + j];
            }
        }
    return QKV_OK;
}

qkv_tensor *qkv_nn_reversible(qkv_ctx *ctx, qkv_tensor *x, int n, const qkv_nn_rev_block *blocks, int n_params,
                              qkv_tensor *const *params) {
    if (!x) return NULL;
    if (!qkv__check_f32("reversible", x, "x")) return NULL;
    if (x->ndim < 1 || x->shape[x->ndim - 1] % 2 || n < 0 || (n > 0 && !blocks) || n_params < 0 ||
        (n_params > 0 && !params)) {
        char sh[96];
        qkv_error_set(QKV_ERR_INVALID, "reversible: x %s must end in an even axis [..., 2D] (two streams), with "
                      "n >= 0 blocks", qkv_shape_str(x, sh, sizeof sh));
        return NULL;
    }
    for (int b = 0; b < n; b++)
        if (!blocks[b].f || !blocks[b].g) {
            qkv_error_set(QKV_ERR_INVALID, "reversible: block %d lacks a function", b);
            return NULL;
        }
    const int64_t d = x->shape[x->ndim - 1] / 2, R = d ? qkv_numel(x) / (2 * d) : 0, N = R * d;
    rev_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
    qkv_tensor *out = qkv__out_like(ctx, x);
    float *s1 = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(N + 1)), *s2 = qkv_ctx_alloc(ctx, sizeof(float) * (size_t)(N + 1));
    const float *xd = qkv__contig_data(ctx, x);
    if (!s || !out || !s1 || !s2 || !xd) return NULL;
    *s = (rev_saved){.n = n, .rows = R, .d = d,
                     .blocks = qkv_ctx_alloc(ctx, sizeof *s->blocks * (size_t)(n ? n : 1)),
                     .rng_f = qkv_ctx_alloc(ctx, sizeof *s->rng_f * (size_t)(n ? n : 1)),
                     .rng_g = qkv_ctx_alloc(ctx, sizeof *s->rng_g * (size_t)(n ? n : 1))};
    if (!s->blocks || !s->rng_f || !s->rng_g) return NULL;
    if (n) memcpy(s->blocks, blocks, sizeof *blocks * (size_t)n);
    for (int64_t r = 0; r < R; r++) {
        memcpy(s1 + r * d, xd + r * 2 * d, sizeof(float) * (size_t)d);
        memcpy(s2 + r * d, xd + r * 2 * d + d, sizeof(float) * (size_t)d);
    }
    bool prev = qkv_ctx_set_grad(ctx, false);
    qkv_status st = QKV_OK;
    for (int b = 0; b < n && st == QKV_OK; b++) {
        s->rng_f[b] = *qkv_ctx_rng(ctx);
        st = half_forward(ctx, x, d, blocks[b].f, blocks[b].f_user, s2, s1, N);
        s->rng_g[b] = *qkv_ctx_rng(ctx);
        if (st == QKV_OK) st = half_forward(ctx, x, d, blocks[b].g, blocks[b].g_user, s1, s2, N);
    }
    qkv_ctx_set_grad(ctx, prev);
    if (st != QKV_OK) return NULL;
    float *o = out->data;
    for (int64_t r = 0; r < R; r++) {
        memcpy(o + r * 2 * d, s1 + r * d, sizeof(float) * (size_t)d);
        memcpy(o + r * 2 * d + d, s2 + r * d, sizeof(float) * (size_t)d);
    }
    qkv_tensor **in = qkv_ctx_alloc(ctx, sizeof *in * (size_t)(n_params + 1));
    if (!in) return NULL;
    in[0] = x;
    for (int i = 0; i < n_params; i++) in[i + 1] = params[i];
    qkv_node *nd = qkv_record(ctx, out, "reversible", rev_backward, n_params + 1, in);
    if (nd) nd->saved = s;
    return out;
}
