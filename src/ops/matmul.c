/* Matrix products through cblas_sgemm: matmul (batched, broadcast, any transpose) and linear (x W^T + b).
 *
 * C = A B gives dA = dC B^T and dB = A^T dC. Both are GEMMs again; a transposed operand is only a flag to BLAS,
 * so the backward never copies. When B is shared by every batch (a weight) and A's batch rows are contiguous, the
 * batch folds into M and the whole product is one large GEMM, which is where BLAS is fastest.
 */
#include <cblas.h>
#include <string.h>

#include "core/internal.h"
#include "core/isa.h"
#include "core/par.h"
#include "ops/gemm_packed.h"
#include "ops/gemv.h"
#include "ops/linear_rows.h"
#include "ops/ops_internal.h"
#include "qkv/ops.h"

/* A matrix operand: base pointer, transpose flag, leading dimension and per-batch-dim strides (0 = broadcast). */
typedef struct {
    float *p;
    bool t;
    int64_t ld;
    int64_t bs[QKV_MAX_DIMS];
} mat_t;


static void gemm_one(int64_t M, int64_t N, int64_t K, float alpha, const float *A, bool ta, int64_t lda,
                     const float *B, bool tb, int64_t ldb, float beta, float *C, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* Multiply-adds below which a batch of products runs on the calling thread. */
#define GEMM_BATCH_PAR_MIN (1 << 20)

/* C[b] = alpha op(A[b]) op(B[b]) + beta C[b] for every index b of the batch shape. `serial` when several batch
 * entries write the same C block (C broadcast), which must not run concurrently. */
static void gemm_batch(int nb, const int64_t *bshape, int64_t M, int64_t N, int64_t K, float alpha, mat_t A,
                       mat_t B, float beta, mat_t C, bool serial) {
    int64_t count = 1;
    for (int d = 0; d < nb; d++) count *= bshape[d];
    /* Many products: one per thread, each single-threaded inside BLAS (the OpenMP build of OpenBLAS keeps a call
     * made inside a parallel region on its thread). Not for a few tiny ones (a decoding step's attention over a
     * short source: 64 products of 1 x 32 x 256): waking the team costs more than the work, and on a loaded machine
     * a region can wait a whole time slice for its second thread. Each product is one call either way. */
    bool par = !serial && count > 1 && (double)count * (double)M * (double)N * (double)K >= GEMM_BATCH_PAR_MIN;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t b = 0; b < count; b++) {
        int64_t rem = b, oa = 0, ob = 0, oc = 0;
        for (int d = nb - 1; d >= 0; d--) {
            int64_t i = rem % bshape[d];
            rem /= bshape[d];
            oa += i * A.bs[d];
            ob += i * B.bs[d];
            oc += i * C.bs[d];
        }
        gemm_one(M, N, K, alpha, A.p + oa, A.t, A.ld, B.p + ob, B.t, B.ld, beta, C.p + oc, C.ld);
    }
}

/* Describe the last two dims of x as a BLAS operand, or return false if they are neither row- nor column-major
 * (the caller then copies). */
static bool as_operand(const qkv_tensor *x, mat_t *m) {
    int64_t r = x->shape[x->ndim - 2], c = x->shape[x->ndim - 1];
    int64_t sr = x->stride[x->ndim - 2], sc = x->stride[x->ndim - 1];
    memset(m, 0, sizeof *m);
    m->p = x->data;
    if ((sc == 1 || c == 1) && (sr >= c || r == 1)) {
        m->t = false;
        m->ld = (r == 1 || sr < 1) ? (c > 0 ? c : 1) : sr;
        if (m->ld < c) m->ld = c;
        if (m->ld < 1) m->ld = 1;
        return true;
    }
    if ((sr == 1 || r == 1) && (sc >= r || c == 1)) {
        m->t = true;
        m->ld = (c == 1 || sc < 1) ? (r > 0 ? r : 1) : sc;
        if (m->ld < r) m->ld = r;
        if (m->ld < 1) m->ld = 1;
        return true;
    }
    return false;
}

/* Batch strides of x aligned to the output batch shape (nb dims), 0 where x is broadcast or absent. */
static void batch_strides(const qkv_tensor *x, const int64_t *xstride, int nb, int64_t *bs) {
    int xb = x->ndim - 2;
    for (int d = 0; d < nb; d++) {
        int xd = d - (nb - xb);
        bs[d] = (xd < 0 || x->shape[xd] == 1) ? 0 : xstride[xd];
    }
}

/* True when two batch entries write the same block (a broadcast destination): those must run one by one. */
static bool overlapping(int nb, const int64_t *bshape, const int64_t *bs) {
    for (int d = 0; d < nb; d++)
        if (bs[d] == 0 && bshape[d] > 1) return true;
    return false;
}

static bool all_zero(int n, const int64_t *v) {
    for (int i = 0; i < n; i++)
        if (v[i]) return false;
    return true;
}

typedef struct {
    int nb;
    int64_t bshape[QKV_MAX_DIMS], M, N, K;
    bool a_transposed, b_transposed; /* the recorded input is the source of a transpose view */
} mm_saved;

/* Rows of a contiguous-batch operand can be folded into M when every batch entry follows the previous one. */
static bool foldable(const qkv_tensor *a, const mat_t *A, int nb, const int64_t *bshape) {
    if (A->t) return false;
    int64_t expect = A->ld * a->shape[a->ndim - 2];
    for (int d = nb - 1; d >= 0; d--) {
        if (bshape[d] == 1) continue;
        if (A->bs[d] != expect) return false;
        expect *= bshape[d];
    }
    return true;
}

/* The operand an input stands for: the input itself, or its last-two-dims transpose when the forward received a
 * transpose view of it (recorded as the view's source, so its gradient is written directly, never scattered). */
static qkv_tensor operand_of(const qkv_tensor *x, bool transposed) {
    qkv_tensor v = *x;
    if (transposed) {
        int n = x->ndim;
        v.shape[n - 1] = x->shape[n - 2];
        v.shape[n - 2] = x->shape[n - 1];
        v.stride[n - 1] = x->stride[n - 2];
        v.stride[n - 2] = x->stride[n - 1];
    }
    return v;
}

/* D = X Y over the batch (M x N result), or, when D is stored transposed, D^T = Y^T X^T (N x M). */
static void gemm_into(int nb, const int64_t *bshape, int64_t M, int64_t N, int64_t K, mat_t X, mat_t Y, float beta,
                      mat_t D, bool d_transposed, bool serial) {
    if (!d_transposed) {
        gemm_batch(nb, bshape, M, N, K, 1.0f, X, Y, beta, D, serial);
        return;
    }
    X.t = !X.t;
    Y.t = !Y.t;
    gemm_batch(nb, bshape, N, M, K, 1.0f, Y, X, beta, D, serial);
}

static qkv_status matmul_backward(qkv_ctx *ctx, qkv_node *n) {
    mm_saved *s = n->saved;
    bool ta = s->a_transposed, tb = s->b_transposed;
    qkv_tensor a = operand_of(n->in[0], ta), b = operand_of(n->in[1], tb);
    int nb = s->nb;
    mat_t A, B, G;
    as_operand(&a, &A);
    as_operand(&b, &B);
    batch_strides(&a, a.stride, nb, A.bs);
    batch_strides(&b, b.stride, nb, B.bs);
    memset(&G, 0, sizeof G);
    G.p = n->out->grad->data;
    G.ld = s->N;
    batch_strides(n->out, n->out->grad->stride, nb, G.bs);
    bool fa, fb;
    qkv_tensor *ga = qkv__grad_fresh(ctx, n->in[0], &fa), *gb = qkv__grad_fresh(ctx, n->in[1], &fb);
    bool fold = all_zero(nb, B.bs) && foldable(&a, &A, nb, s->bshape);
    int64_t rows = s->M;
    for (int d = 0; d < nb; d++) rows *= s->bshape[d];
    if (ga) { /* dA = dC B^T  (M x K; stored K x M when a was a transpose view) */
        mat_t D = {.p = ga->data, .t = false, .ld = ta ? s->M : s->K};
        batch_strides(n->in[0], ga->stride, nb, D.bs);
        mat_t Bt = B;
        Bt.t = !B.t;
        bool serial = overlapping(nb, s->bshape, D.bs);
        if (fa && (serial || s->N == 0)) memset(D.p, 0, (size_t)qkv_numel(ga) * sizeof(float));
        float beta = (fa && !serial && s->N > 0) ? 0.0f : 1.0f;
        if (fold) /* fold implies a is a plain row-major operand (not transposed) */
            gemm_one(rows, s->K, s->N, 1.0f, G.p, false, G.ld, Bt.p, Bt.t, Bt.ld, beta, D.p, D.ld);
        else
            gemm_into(nb, s->bshape, s->M, s->K, s->N, G, Bt, beta, D, ta, serial);
    }
    if (gb) { /* dB = A^T dC  (K x N; stored N x K when b was a transpose view) */
        mat_t D = {.p = gb->data, .t = false, .ld = tb ? s->K : s->N};
        batch_strides(n->in[1], gb->stride, nb, D.bs);
        mat_t At = A;
        At.t = !A.t;
        bool serial = fold || overlapping(nb, s->bshape, D.bs);
        int64_t inner = fold ? rows : s->M;
        if (fb && (serial && !fold)) memset(D.p, 0, (size_t)qkv_numel(gb) * sizeof(float));
        if (fb && inner == 0) memset(D.p, 0, (size_t)qkv_numel(gb) * sizeof(float));
        float beta = (fb && !(serial && !fold) && inner > 0) ? 0.0f : 1.0f;
        if (fold && !tb)
            gemm_one(s->K, s->N, rows, 1.0f, At.p, true, At.ld, G.p, false, G.ld, beta, D.p, D.ld);
        else if (fold) /* d(b source) = dC^T A, one GEMM over all rows */
            gemm_one(s->N, s->K, rows, 1.0f, G.p, true, G.ld, A.p, false, A.ld, beta, D.p, D.ld);
        else
            gemm_into(nb, s->bshape, s->K, s->N, s->M, At, G, beta, D, tb, serial);
    }
    return QKV_OK;
}

qkv_tensor *qkv_matmul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) {
    if (!a || !b) return NULL;
    char sa[96], sb[96];
    if (!qkv__check_f32("matmul", a, "a") || !qkv__check_f32("matmul", b, "b")) return NULL;
    if (a->ndim < 2 || b->ndim < 2 || a->shape[a->ndim - 1] != b->shape[b->ndim - 2]) {
        qkv_error_set(QKV_ERR_INVALID, "matmul: shapes %s and %s do not multiply ([..., M, K] @ [..., K, N])",
                      qkv_shape_str(a, sa, sizeof sa), qkv_shape_str(b, sb, sizeof sb));
        return NULL;
    }
    /* Operands BLAS cannot read directly are copied (rare: only odd views). */
    mat_t A, B;
    if (!as_operand(a, &A)) a = qkv_contiguous(ctx, a);
    if (!as_operand(b, &B)) b = qkv_contiguous(ctx, b);
    if (!a || !b) return NULL;
    as_operand(a, &A);
    as_operand(b, &B);
    /* Broadcast batch dims. */
    int na = a->ndim - 2, nbb = b->ndim - 2, nb = na > nbb ? na : nbb;
    int64_t shape[QKV_MAX_DIMS];
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - na), db = d - (nb - nbb);
        int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
        if (x != y && x != 1 && y != 1) {
            qkv_error_set(QKV_ERR_INVALID, "matmul: batch dimensions of %s and %s do not broadcast",
                          qkv_shape_str(a, sa, sizeof sa), qkv_shape_str(b, sb, sizeof sb));
            return NULL;
        }
        shape[d] = x > y ? x : y;
    }
    int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1], N = b->shape[b->ndim - 1];
    shape[nb] = M;
    shape[nb + 1] = N;
    qkv_tensor *c = qkv__out(ctx, QKV_F32, nb + 2, shape);
    if (!c) return NULL;
    batch_strides(a, a->stride, nb, A.bs);
    batch_strides(b, b->stride, nb, B.bs);
    mat_t C = {.p = c->data, .t = false, .ld = N};
    batch_strides(c, c->stride, nb, C.bs);
    if (K == 0) {
        memset(c->data, 0, (size_t)qkv_numel(c) * sizeof(float));
    } else if (all_zero(nb, B.bs) && foldable(a, &A, nb, shape)) {
        int64_t rows = M;
        for (int d = 0; d < nb; d++) rows *= shape[d];
        gemm_one(rows, N, K, 1.0f, A.p, false, A.ld, B.p, B.t, B.ld, 0.0f, C.p, C.ld);
    } else {
        gemm_batch(nb, shape, M, N, K, 1.0f, A, B, 0.0f, C, false);
    }
    /* Record a transpose view's source instead of the view: the backward then writes the source's gradient
     * with one GEMM instead of writing the view's gradient and scattering it through transposed strides. */
    qkv_tensor *src_a = qkv__transposed_source(a), *src_b = qkv__transposed_source(b);
    qkv_tensor *in[2] = {src_a ? src_a : a, src_b ? src_b : b};
    qkv_node *n = qkv_record(ctx, c, "matmul", matmul_backward, 2, in);
    if (n) {
        mm_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
        if (!s) return NULL;
        s->a_transposed = src_a != NULL;
        s->b_transposed = src_b != NULL;
        s->nb = nb;
        memcpy(s->bshape, shape, sizeof s->bshape);
        s->M = M;
        s->N = N;
        s->K = K;
        n->saved = s;
    }
    return c;
}

/* ---- linear: y = x W^T + b, x folded to [R, in] ------------------------------------------------------------ */

/* db[j] += sum over rows of dy[r, j], the rows in order for every j. Threads take blocks of columns, so each sum
 * is the serial loop's whatever the thread count. A block is 128 columns: its partial sums stay in L1 while the
 * rows are read in 512-byte runs (64 columns had every row's 256 bytes behind a page-sized stride, which the
 * prefetchers do not follow, on the 8000-wide output layers). Compiled per instruction set (core/isa.h). */
#define BIAS_COLS 128
QKV_KERNEL_BODY void bias_block_body(float *restrict g, const float *restrict dy, int64_t R, int64_t out, int64_t w) {
    for (int64_t r = 0; r < R; r++) {
        const float *row = dy + r * out;
        for (int64_t j = 0; j < w; j++) g[j] += row[j];
    }
}
QKV_ISA_KERNEL_VOID(bias_block, (float *restrict g, const float *restrict dy, int64_t R, int64_t out, int64_t w),
                    (g, dy, R, out, w))

static void bias_grad(float *restrict db, const float *restrict dy, int64_t R, int64_t out) {
    int64_t nblocks = (out + BIAS_COLS - 1) / BIAS_COLS;
#pragma omp parallel for schedule(static) if (R * out > (1 << 15) && nblocks > 1)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t lo = blk * BIAS_COLS, w = out - lo < BIAS_COLS ? out - lo : BIAS_COLS;
        bias_block(db + lo, dy + lo, R, out, w);
    }
}

static qkv_status linear_backward(qkv_ctx *ctx, qkv_node *n) {
    qkv_tensor *x = n->in[0], *w = n->in[1], *bias = n->n_in > 2 ? n->in[2] : NULL;
    int64_t R = n->i[0], in = n->i[1], out = n->i[2];
    const float *dy = n->out->grad->data;
    bool fx, fw;
    qkv_tensor *gx = qkv__grad_fresh(ctx, x, &fx), *gw = qkv__grad_fresh(ctx, w, &fw), *gb = qkv_grad_for(ctx, bias);
    if (gx) /* dx[R,in] += dy[R,out] W[out,in] */
        gemm_one(R, in, out, 1.0f, dy, false, out, w->data, false, in, fx ? 0.0f : 1.0f, gx->data, in);
    if (gw) /* dW[out,in] += dy^T[out,R] x[R,in] */
        gemm_one(out, in, R, 1.0f, dy, true, out, x->data, false, in, fw ? 0.0f : 1.0f, gw->data, in);
    if (gb) bias_grad(gb->data, dy, R, out);
    return QKV_OK;
}

/* yp [R, out] = x W^T (+ bias), x and w contiguous; w_own is w's data when the caller's w was contiguous (only a
 * parameter's own memory can have a pack). The one path of qkv_linear and qkv__linear_rows. */
static void linear_rows(const qkv_ctx *ctx, const qkv_tensor *x, const float *w_own, const qkv_tensor *w,
                        const qkv_tensor *bias, int64_t R, float *yp) {
    int64_t in = w->shape[1], out = w->shape[0];
    /* The packed path adds the bias as it stores each sum (the bits of the copy below plus accumulating). */
    if (bias && R > 0 && out > 0 && w_own && qkv__gemm_xwt_bias(ctx, R, out, in, x->data, in, w_own, bias->data, yp, out))
        return;
    if (bias) {
        const float *bp = bias->data;
        int nth = qkv__par_threads((double)R * (double)out * 2.0 * QKV__PAR_STREAM); /* written: read in, then out */
#pragma omp parallel for schedule(static) num_threads(nth)
        for (int64_t r = 0; r < R; r++) memcpy(yp + r * out, bp, (size_t)out * sizeof(float));
    }
    /* A decoding step's few rows by a weight its state packed (gemm_packed.h), or its single row by our GEMV
     * (gemv.h), whose threads follow the work and the idle cores: OpenBLAS would spread a 1 x 8000 x 256 product
     * over every thread. Everything else goes to BLAS. */
    if (R > 0 && out > 0 && !(w_own && qkv__gemm_xwt(ctx, R, out, in, x->data, in, w_own, yp, out, bias != NULL))) {
        if (R == 1 && qkv__ctx_packs(ctx))
            qkv__gemv_xwt(1, out, in, x->data, w->data, bias ? bias->data : NULL, yp);
        else
            gemm_one(R, out, in, 1.0f, x->data, false, in, w->data, true, in, bias ? 1.0f : 0.0f, yp, out);
    }
}

/* qkv_linear's checks; x and w made contiguous (w_own: the caller's w's data, or NULL when it was copied), *R the
 * rows of x (its elements when in == 0). */
static bool linear_args(qkv_ctx *ctx, qkv_tensor **x, qkv_tensor **w, const qkv_tensor *bias, const float **w_own,
                        int64_t *R) {
    char sx[96], sw[96];
    if (!qkv__check_f32("linear", *x, "x") || !qkv__check_f32("linear", *w, "weight")) return false;
    if (bias && !qkv__check_f32("linear", bias, "bias")) return false;
    if ((*x)->ndim < 1 || (*w)->ndim != 2 || (*x)->shape[(*x)->ndim - 1] != (*w)->shape[1] ||
        (bias && (bias->ndim != 1 || bias->shape[0] != (*w)->shape[0]))) {
        qkv_error_set(QKV_ERR_INVALID, "linear: input %s does not fit weight %s ([out, in]) or bias",
                      qkv_shape_str(*x, sx, sizeof sx), qkv_shape_str(*w, sw, sizeof sw));
        return false;
    }
    *x = qkv_contiguous(ctx, *x);
    *w_own = qkv_is_contiguous(*w) ? (*w)->data : NULL; /* a copy made here could not have a pack */
    *w = qkv_contiguous(ctx, *w);
    if (!*x || !*w) return false;
    int64_t in = (*w)->shape[1];
    *R = in ? qkv_numel(*x) / in : qkv_numel(*x);
    return true;
}

qkv_status qkv__linear_rows(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *w, qkv_tensor *bias, float *y) {
    const float *w_own = NULL;
    if (!x || !w) return qkv_error_set(QKV_ERR_INVALID, "linear: input or weight is NULL");
    int64_t R;
    if (!linear_args(ctx, &x, &w, bias, &w_own, &R)) return qkv_last_status();
    linear_rows(ctx, x, w_own, w, bias, R, y);
    return QKV_OK;
}

qkv_tensor *qkv_linear(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *w, qkv_tensor *bias) {
    if (!x || !w) return NULL;
    const float *w_own = NULL;
    int64_t R, shape[QKV_MAX_DIMS];
    if (!linear_args(ctx, &x, &w, bias, &w_own, &R)) return NULL;
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = w->shape[0];
    qkv_tensor *y = qkv__out(ctx, QKV_F32, x->ndim, shape);
    if (!y) return NULL;
    linear_rows(ctx, x, w_own, w, bias, R, y->data);
    qkv_tensor *ins[3] = {x, w, bias};
    qkv_node *n = qkv_record(ctx, y, "linear", linear_backward, bias ? 3 : 2, ins);
    if (n) {
        n->i[0] = R;
        n->i[1] = w->shape[1];
        n->i[2] = w->shape[0];
    }
    return y;
}
