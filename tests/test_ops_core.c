/* Matrix products, elementwise broadcasting and shape ops: gradient checks and PyTorch fixtures
 * (tests/ref/ops_core.py). */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "test.h"

static qkv_tensor *f_matmul(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_matmul(c, in[0], in[1]);
}
static qkv_tensor *f_matmul_bt(qkv_ctx *c, qkv_tensor **in, void *u) { /* a @ b^T through a view */
    (void)u;
    return qkv_matmul(c, in[0], qkv_transpose(c, in[1], -1, -2));
}
static qkv_tensor *f_matmul_at(qkv_ctx *c, qkv_tensor **in, void *u) { /* a^T @ b */
    (void)u;
    return qkv_matmul(c, qkv_transpose(c, in[0], -1, -2), in[1]);
}
static qkv_tensor *f_gram(qkv_ctx *c, qkv_tensor **in, void *u) { /* x @ x^T: both operands from one tensor */
    (void)u;
    return qkv_matmul(c, in[0], qkv_transpose(c, in[0], -1, -2));
}
static qkv_tensor *f_gram_t(qkv_ctx *c, qkv_tensor **in, void *u) { /* x^T @ x, batched */
    (void)u;
    return qkv_matmul(c, qkv_transpose(c, in[0], -1, -2), in[0]);
}
static qkv_tensor *f_linear(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_linear(c, in[0], in[1], in[2]);
}
static qkv_tensor *f_linear_nobias(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_linear(c, in[0], in[1], NULL);
}
static qkv_tensor *f_add(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_add(c, in[0], in[1]);
}
static qkv_tensor *f_sub(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_sub(c, in[0], in[1]);
}
static qkv_tensor *f_mul(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_mul(c, in[0], in[1]);
}
static qkv_tensor *f_div(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_div(c, in[0], in[1]);
}
static qkv_tensor *f_affine(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_affine(c, in[0], -1.5f, 0.25f);
}
static qkv_tensor *f_permute(qkv_ctx *c, qkv_tensor **in, void *u) { /* permute then reshape (forces a copy) */
    (void)u;
    qkv_tensor *p = qkv_permute(c, in[0], (const int[]){2, 0, 1});
    return qkv_reshape(c, p, QKV_DIMS(4, -1));
}
static qkv_tensor *f_slice(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_mul(c, qkv_slice(c, in[0], 1, 1, 5, 2), qkv_slice(c, in[0], 1, -2, 6, 1));
}
static qkv_tensor *f_concat(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    qkv_tensor *xs[3] = {in[0], in[1], in[0]};
    return qkv_concat(c, 3, xs, 1);
}
static qkv_tensor *f_stack(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    qkv_tensor *xs[2] = {in[0], qkv_transpose(c, in[1], 0, 1)};
    return qkv_stack(c, 2, xs, 1);
}
static qkv_tensor *f_split(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    qkv_tensor *parts[3];
    if (qkv_split(c, in[0], 1, 3, (const int64_t[]){2, 1, 3}, parts) != QKV_OK) return NULL;
    /* [2,2] * [2,1] broadcast, concatenated with the [2,3] piece scaled */
    qkv_tensor *xs[2] = {qkv_mul(c, parts[0], parts[1]), qkv_scale(c, parts[2], 2.0f)};
    return qkv_concat(c, 2, xs, 1);
}
static qkv_tensor *f_broadcast(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_mul(c, qkv_broadcast_to(c, in[0], QKV_DIMS(2, 3, 4)), in[1]);
}

static bool check(const char *name, gc_fn f, int n, qkv_tensor **in) {
    for (int i = 0; i < n; i++) qkv_tensor_set_requires_grad(in[i], true);
    bool ok = gradcheck(name, f, n, in, NULL, NULL);
    for (int i = 0; i < n; i++) qkv_tensor_free(in[i]);
    return ok;
}

TEST(gradcheck_matmul) {
    CHECK(check("matmul 2d", f_matmul, 2,
                (qkv_tensor *[]){gc_rand(1, -1, 1, QKV_DIMS(3, 4)), gc_rand(2, -1, 1, QKV_DIMS(4, 5))}));
    CHECK(check("matmul batched", f_matmul, 2,
                (qkv_tensor *[]){gc_rand(3, -1, 1, QKV_DIMS(2, 3, 4)), gc_rand(4, -1, 1, QKV_DIMS(2, 4, 2))}));
    CHECK(check("matmul broadcast b (folded)", f_matmul, 2,
                (qkv_tensor *[]){gc_rand(5, -1, 1, QKV_DIMS(2, 3, 4)), gc_rand(6, -1, 1, QKV_DIMS(4, 3))}));
    CHECK(check("matmul broadcast a", f_matmul, 2,
                (qkv_tensor *[]){gc_rand(7, -1, 1, QKV_DIMS(1, 3, 4)), gc_rand(8, -1, 1, QKV_DIMS(2, 1, 4, 2))}));
    CHECK(check("matmul a @ b^T view", f_matmul_bt, 2,
                (qkv_tensor *[]){gc_rand(9, -1, 1, QKV_DIMS(2, 3, 4)), gc_rand(10, -1, 1, QKV_DIMS(2, 5, 4))}));
    CHECK(check("matmul x @ x^T", f_gram, 1, (qkv_tensor *[]){gc_rand(18, -1, 1, QKV_DIMS(3, 4))}));
    CHECK(check("matmul x^T @ x batched", f_gram_t, 1, (qkv_tensor *[]){gc_rand(19, -1, 1, QKV_DIMS(2, 3, 4))}));
    CHECK(check("matmul a^T @ b view", f_matmul_at, 2,
                (qkv_tensor *[]){gc_rand(11, -1, 1, QKV_DIMS(4, 3)), gc_rand(12, -1, 1, QKV_DIMS(4, 2))}));
}

TEST(gradcheck_linear) {
    CHECK(check("linear", f_linear, 3,
                (qkv_tensor *[]){gc_rand(13, -1, 1, QKV_DIMS(2, 3, 4)), gc_rand(14, -1, 1, QKV_DIMS(5, 4)),
                                 gc_rand(15, -1, 1, QKV_DIMS(5))}));
    CHECK(check("linear no bias", f_linear_nobias, 2,
                (qkv_tensor *[]){gc_rand(16, -1, 1, QKV_DIMS(3, 4)), gc_rand(17, -1, 1, QKV_DIMS(2, 4))}));
}

TEST(gradcheck_elementwise) {
    CHECK(check("add broadcast", f_add, 2,
                (qkv_tensor *[]){gc_rand(20, -1, 1, QKV_DIMS(2, 3, 4)), gc_rand(21, -1, 1, QKV_DIMS(3, 1))}));
    CHECK(check("sub broadcast", f_sub, 2,
                (qkv_tensor *[]){gc_rand(22, -1, 1, QKV_DIMS(4)), gc_rand(23, -1, 1, QKV_DIMS(2, 3, 4))}));
    CHECK(check("mul broadcast", f_mul, 2,
                (qkv_tensor *[]){gc_rand(24, -1, 1, QKV_DIMS(2, 1, 4)), gc_rand(25, -1, 1, QKV_DIMS(3, 1))}));
    CHECK(check("div broadcast", f_div, 2,
                (qkv_tensor *[]){gc_rand(26, -1, 1, QKV_DIMS(2, 3)), gc_rand(27, 0.5f, 2, QKV_DIMS(3))}));
    CHECK(check("affine", f_affine, 1, (qkv_tensor *[]){gc_rand(28, -1, 1, QKV_DIMS(3, 2))}));
}

TEST(gradcheck_shape) {
    CHECK(check("permute+reshape", f_permute, 1, (qkv_tensor *[]){gc_rand(30, -1, 1, QKV_DIMS(2, 3, 4))}));
    CHECK(check("slice", f_slice, 1, (qkv_tensor *[]){gc_rand(31, -1, 1, QKV_DIMS(3, 6, 2))}));
    CHECK(check("concat", f_concat, 2,
                (qkv_tensor *[]){gc_rand(32, -1, 1, QKV_DIMS(2, 3, 2)), gc_rand(33, -1, 1, QKV_DIMS(2, 1, 2))}));
    CHECK(check("stack", f_stack, 2,
                (qkv_tensor *[]){gc_rand(34, -1, 1, QKV_DIMS(2, 3)), gc_rand(35, -1, 1, QKV_DIMS(3, 2))}));
    CHECK(check("split", f_split, 1, (qkv_tensor *[]){gc_rand(36, -1, 1, QKV_DIMS(2, 6))}));
    CHECK(check("broadcast_to", f_broadcast, 2,
                (qkv_tensor *[]){gc_rand(37, -1, 1, QKV_DIMS(3, 1)), gc_rand(38, -1, 1, QKV_DIMS(2, 3, 4))}));
}

TEST(views_share_data) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 4));
    qkv_tensor *t = qkv_transpose(c, x, 0, 2), *s = qkv_slice(c, x, 1, 1, 3, 1), *r = qkv_reshape(c, x, QKV_DIMS(6, 4));
    CHECK(t && s && r);
    CHECK(t->data == x->data && r->data == x->data);
    CHECK(t->shape[0] == 4 && t->shape[2] == 2 && !qkv_is_contiguous(t));
    CHECK((float *)s->data == qkv_f32(x) + 4);
    qkv_ctx_free(c);
}

TEST(bad_shapes_are_errors) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *a = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3)), *b = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(4, 5));
    CHECK(qkv_matmul(c, a, b) == NULL);
    CHECK(strstr(qkv_last_error(), "[2, 3]") != NULL);
    CHECK(qkv_add(c, a, b) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(qkv_reshape(c, a, QKV_DIMS(5, -1)) == NULL);
    CHECK(qkv_slice(c, a, 5, 0, 1, 1) == NULL);
    CHECK(qkv_transpose(c, a, 0, 7) == NULL);
    CHECK(qkv_add(c, NULL, a) == NULL); /* NULL propagates */
    CHECK(qkv_tensor_new(QKV_F32, QKV_DIMS(1 << 30, 1 << 30, 1 << 30)) == NULL);
    CHECK(qkv_last_status() == QKV_ERR_RANGE);
    qkv_ctx_free(c);
}

TEST(no_grad_records_nothing) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *w = gc_rand(40, -1, 1, QKV_DIMS(3, 3));
    qkv_tensor_set_requires_grad(w, true);
    qkv_tensor *y = qkv_matmul(c, w, w);
    CHECK(qkv_ctx_tape_length(c) == 1 && y->node != NULL);
    qkv_ctx_reset(c);
    qkv_ctx_set_grad(c, false);
    y = qkv_matmul(c, w, w);
    CHECK(qkv_ctx_tape_length(c) == 0 && y->node == NULL && !(y->flags & QKV_FLAG_REQUIRES_GRAD));
    qkv_tensor_free(w);
    qkv_ctx_free(c);
}

TEST(steady_state_allocates_nothing) {
    /* A training-like step repeated: after the first iteration the arena asks the system for no more memory. */
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *w = gc_rand(41, -1, 1, QKV_DIMS(64, 128)), *x = gc_rand(42, -1, 1, QKV_DIMS(8, 300, 128));
    qkv_tensor_set_requires_grad(w, true);
    size_t after_first = 0;
    for (int step = 0; step < 5; step++) {
        qkv_ctx_reset(c);
        qkv_tensor *y = qkv_linear(c, x, w, NULL);
        qkv_tensor *z = qkv_mul(c, y, y);
        qkv_tensor *l = qkv_sum_all(c, qkv_reshape(c, z, QKV_DIMS(-1)));
        CHECK_OK(qkv_backward(c, l));
        if (step == 1) after_first = qkv_ctx_arena_allocs(c);
    }
    CHECKF(qkv_ctx_arena_allocs(c) == after_first, "arena allocated %zu times after step 1 (had %zu)",
           qkv_ctx_arena_allocs(c), after_first);
    qkv_tensor_free(w);
    qkv_tensor_free(x);
    qkv_ctx_free(c);
}

TEST(intermediate_gradients_are_readable) {
    /* y = 2x, z = sum(y^2): dz/dy = 2y is kept on y after backward (until the context is reset). */
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = gc_rand(44, -1, 1, QKV_DIMS(3));
    qkv_tensor_set_requires_grad(x, true);
    qkv_tensor *y = qkv_scale(c, x, 2.0f);
    qkv_tensor_retain_grad(y);
    CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_mul(c, y, y))));
    CHECK(y->grad != NULL);
    for (int i = 0; y->grad && i < 3; i++) CHECK(qkv_f32(y->grad)[i] == 2.0f * qkv_f32(y)[i]);
    qkv_tensor_free(x);
    qkv_ctx_free(c);
}

TEST(backward_recycles_intermediate_gradients) {
    /* A chain of 64 tanh layers of 256 KB each. Backward frees each layer's output gradient once that layer has run,
     * so the step needs its activations plus a few gradient buffers, not twice the activations (the arena keeps the
     * largest step's size after a reset). The gradient stays exact: d x = prod (1 - h_i^2) elementwise. */
    enum { DEPTH = 64, N = 256 * 256 };
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = gc_rand(47, -1, 1, QKV_DIMS(256, 256));
    qkv_tensor_set_requires_grad(x, true);
    qkv_tensor *h[DEPTH];
    for (int step = 0; step < 2; step++) {
        qkv_ctx_reset(c);
        qkv_tensor_zero_grad(x);
        qkv_tensor *prev = x;
        for (int i = 0; i < DEPTH; i++) prev = h[i] = qkv_tanh(c, prev);
        CHECK_OK(qkv_backward(c, qkv_sum_all(c, prev)));
    }
    size_t acts = (size_t)DEPTH * N * sizeof(float);
    CHECKF(qkv_ctx_arena_bytes(c) < acts + acts / 2, "arena holds %zu bytes for %zu of activations",
           qkv_ctx_arena_bytes(c), acts);
    CHECK(h[DEPTH / 2]->grad == NULL); /* not retained: its buffer went to a later gradient */
    double worst = 0;
    for (int64_t k = 0; x->grad && k < N; k++) {
        double d = 1;
        for (int i = 0; i < DEPTH; i++) d *= 1.0 - (double)qkv_f32(h[i])[k] * qkv_f32(h[i])[k];
        double e = fabs(qkv_f32(x->grad)[k] - d) / (fabs(d) + 1e-6);
        if (e > worst) worst = e;
    }
    CHECK(x->grad != NULL);
    CHECKF(worst < 1e-3, "relative error %g", worst);
    qkv_tensor_free(x);
    qkv_ctx_free(c);
}

TEST(large_view_and_add_gradients) {
    /* Big enough (49,152 elements) for the threaded copies, and shaped so that every way a backward hands a
     * gradient on is taken: reshapes and a contiguous copy take their output's buffer over, a permute writes a
     * fresh gradient through its strides, sub gives one side the buffer and the other -g, x + x adds twice into one
     * buffer, and a (an intermediate) collects from two paths. e = 2 (c - a'/2) with c = a' = permute(a), so
     * dL/da = permute^-1(w) and dL/dx = (1 - a^2) permute^-1(w). */
    enum { P = 64, Q = 32, R = 24 };
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = gc_rand(48, -2, 2, QKV_DIMS(P, Q, R)), *w = gc_rand(49, -1, 1, QKV_DIMS(R, P, Q));
    qkv_tensor_set_requires_grad(x, true);
    for (int pass = 0; pass < 2; pass++) { /* the second pass runs on recycled buffers */
        qkv_ctx_reset(c);
        qkv_tensor_zero_grad(x);
        qkv_tensor *a = qkv_tanh(c, x);
        qkv_tensor *r = qkv_reshape(c, qkv_reshape(c, a, QKV_DIMS(P, Q * R)), QKV_DIMS(P, Q, R));
        qkv_tensor *cp = qkv_contiguous(c, qkv_permute(c, r, (const int[]){2, 0, 1}));
        qkv_tensor *s = qkv_sub(c, cp, qkv_scale(c, qkv_permute(c, a, (const int[]){2, 0, 1}), 0.5f));
        qkv_tensor *e = qkv_add(c, s, s);
        CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_mul(c, e, w))));
    }
    int64_t bad = 0;
    for (int64_t i = 0; x->grad && i < P; i++)
        for (int64_t j = 0; j < Q; j++)
            for (int64_t k = 0; k < R; k++) {
                float t = tanhf(qkv_f32(x)[(i * Q + j) * R + k]);
                float expect = (1.0f - t * t) * qkv_f32(w)[(k * P + i) * Q + j];
                bad += fabsf(qkv_f32(x->grad)[(i * Q + j) * R + k] - expect) > 1e-5f;
            }
    CHECK(x->grad != NULL);
    CHECKF(bad == 0, "%lld gradient elements differ from (1 - tanh^2) w", (long long)bad);
    qkv_tensor_free(x);
    qkv_tensor_free(w);
    qkv_ctx_free(c);
}

TEST(backward_with_never_writes_its_argument) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *w = gc_rand(45, -1, 1, QKV_DIMS(2, 2)), *g = gc_rand(46, -1, 1, QKV_DIMS(2, 2));
    qkv_tensor *g0 = qkv_tensor_clone(g);
    qkv_tensor_set_requires_grad(w, true);
    qkv_tensor *y = qkv_scale(c, w, 2.0f);
    CHECK_OK(qkv_backward_with(c, y, g));
    CHECK_OK(qkv_backward_with(c, y, g)); /* twice on one graph: the leaf's gradients add, as in PyTorch */
    CHECK(memcmp(g->data, g0->data, 4 * sizeof(float)) == 0);
    for (int i = 0; i < 4; i++) CHECK(qkv_f32(w->grad)[i] == 2.0f * (2.0f * qkv_f32(g)[i]));
    qkv_tensor *z = qkv_sum_all(c, qkv_mul(c, y, y)); /* and a scalar backward twice: 2 * dz/dw */
    qkv_tensor_zero_grad(w);
    CHECK_OK(qkv_backward(c, z));
    CHECK_OK(qkv_backward(c, z));
    for (int i = 0; i < 4; i++) CHECK(fabsf(qkv_f32(w->grad)[i] - 2.0f * 8.0f * qkv_f32(w)[i]) < 1e-5f);
    qkv_tensor_free(w);
    qkv_tensor_free(g);
    qkv_tensor_free(g0);
    qkv_ctx_free(c);
}

TEST(gradients_accumulate) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *w = gc_rand(43, -1, 1, QKV_DIMS(2, 2));
    qkv_tensor_set_requires_grad(w, true);
    for (int k = 0; k < 2; k++) {
        qkv_ctx_reset(c);
        CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_reshape(c, qkv_scale(c, w, 3.0f), QKV_DIMS(-1)))));
    }
    CHECK(qkv_f32(w->grad)[0] == 6.0f && qkv_f32(w->grad)[3] == 6.0f);
    qkv_tensor_zero_grad(w);
    CHECK(qkv_f32(w->grad)[0] == 0.0f);
    qkv_tensor_free(w);
    qkv_ctx_free(c);
}

/* The grad-ready hook: each parameter reported once per pass, when no later node adds into its gradient (the value
 * it holds then is the final one), in the order backward finishes them; a parameter the pass never reaches is not
 * reported. */
typedef struct {
    qkv_tensor *seen[4];
    float grad0[4];
    int n;
} ready_log;

static void note_ready(void *user, qkv_tensor *leaf) {
    ready_log *l = user;
    if (l->n < 4) {
        l->grad0[l->n] = qkv_f32(leaf->grad)[0];
        l->seen[l->n++] = leaf;
    }
}

TEST(grad_ready_hook_reports_final_gradients) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *a = gc_rand(44, -1, 1, QKV_DIMS(2, 2)), *b = gc_rand(45, -1, 1, QKV_DIMS(2, 2));
    qkv_tensor *unused = gc_rand(46, -1, 1, QKV_DIMS(2, 2));
    qkv_tensor_set_requires_grad(a, true);
    qkv_tensor_set_requires_grad(b, true);
    qkv_tensor_set_requires_grad(unused, true);
    ready_log log = {0};
    qkv_ctx_set_grad_ready(c, note_ready, &log);
    /* a is used first (early on the tape) and again last; b only in the middle: b is final before a. */
    qkv_tensor *h = qkv_scale(c, a, 2.0f);
    h = qkv_mul(c, h, b);
    h = qkv_add(c, h, a);
    CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_reshape(c, h, QKV_DIMS(-1)))));
    CHECK(log.n == 2);
    CHECK(log.seen[0] == b && log.seen[1] == a);
    for (int i = 0; i < log.n && i < 2; i++) CHECK(log.grad0[i] == qkv_f32(log.seen[i]->grad)[0]);
    CHECK(qkv_f32(a->grad)[0] == 2.0f * qkv_f32(b)[0] + 1.0f);
    qkv_ctx_set_grad_ready(c, NULL, NULL);
    qkv_ctx_reset(c);
    log.n = 0;
    CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_reshape(c, qkv_scale(c, a, 3.0f), QKV_DIMS(-1)))));
    CHECK(log.n == 0); /* removed */
    qkv_tensor_free(a);
    qkv_tensor_free(b);
    qkv_tensor_free(unused);
    qkv_ctx_free(c);
}

static qkv_tensor *fx_matmul(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_matmul(c, in[0], in[1]);
}
static qkv_tensor *fx_linear(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_linear(c, in[0], in[1], in[2]);
}
static qkv_tensor *fx_ew(qkv_ctx *c, qkv_tensor **in, void *u) { /* (a + b) * a / b - a */
    (void)u;
    return qkv_sub(c, qkv_div(c, qkv_mul(c, qkv_add(c, in[0], in[1]), in[0]), in[1]), in[0]);
}
static qkv_tensor *fx_shape(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    qkv_tensor *p = qkv_permute(c, in[0], (const int[]){1, 2, 0});
    qkv_tensor *s = qkv_slice(c, p, 0, 1, 4, 2);
    qkv_tensor *xs[2] = {s, s};
    return qkv_concat(c, 2, xs, -1);
}

static qkv_tensor *fx_affine(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_affine(c, in[0], -1.5f, 0.25f);
}
static qkv_tensor *fx_reshape_transpose(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_scale(c, qkv_reshape(c, qkv_transpose(c, in[0], 0, 2), QKV_DIMS(4, -1)), 2.0f);
}
static qkv_tensor *fx_stack_split(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    qkv_tensor *xs[2] = {in[0], in[1]}, *parts[2];
    qkv_tensor *s = qkv_stack(c, 2, xs, 1);
    if (qkv_split(c, s, 2, 2, (const int64_t[]){1, 2}, parts) != QKV_OK) return NULL;
    return qkv_scale(c, parts[1], 3.0f);
}
static qkv_tensor *fx_broadcast_to(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_mul(c, qkv_broadcast_to(c, in[0], QKV_DIMS(2, 3, 4)), in[1]);
}

TEST(pytorch_fixtures) {
    const char *path = test_fixture_path("ops_core.safetensors");
    qkv_st_file *f = qkv_st_open(path);
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    CHECK(fixture_check(f, "matmul_batched", fx_matmul, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "matmul_broadcast", fx_matmul, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "linear", fx_linear, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "elementwise", fx_ew, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "shape", fx_shape, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "affine", fx_affine, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "reshape_transpose", fx_reshape_transpose, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "stack_split", fx_stack_split, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "broadcast_to", fx_broadcast_to, NULL, 1e-4, 1e-5));
    qkv_st_close(f);
}

int main(void) {
    RUN(gradcheck_matmul);
    RUN(gradcheck_linear);
    RUN(gradcheck_elementwise);
    RUN(gradcheck_shape);
    RUN(views_share_data);
    RUN(bad_shapes_are_errors);
    RUN(no_grad_records_nothing);
    RUN(grad_ready_hook_reports_final_gradients);
    RUN(steady_state_allocates_nothing);
    RUN(gradients_accumulate);
    RUN(backward_recycles_intermediate_gradients);
    RUN(large_view_and_add_gradients);
    RUN(backward_with_never_writes_its_argument);
    RUN(intermediate_gradients_are_readable);
    RUN(pytorch_fixtures);
    return test_finish();
}
