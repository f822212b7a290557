/* Reversible residual blocks and chunked layers (qkv/nn_reversible.h) on the autograd's sub-graph hook: PyTorch
 * fixtures (tests/ref/reversible.py), the same outputs and gradients as the ordinary computation of the same
 * function (dropout included), finite differences,
 * activation memory that does not grow with depth, chunks inside reversible blocks, and the tape / arena marks. */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "test.h"

/* A small feed-forward d -> h -> d with its own weights (heap tensors), optional dropout in the middle. */
typedef struct {
    qkv_tensor *w1, *b1, *w2;
    float dropout;
    int64_t chunk; /* > 0: applied through qkv_nn_chunked */
} ff;

static qkv_tensor *ff_plain(qkv_ctx *c, qkv_tensor *x, void *u) {
    const ff *f = u;
    qkv_tensor *h = qkv_tanh(c, qkv_linear(c, x, f->w1, f->b1));
    if (f->dropout > 0) h = qkv_dropout(c, h, f->dropout);
    return qkv_linear(c, h, f->w2, NULL);
}

static qkv_tensor *ff_apply(qkv_ctx *c, qkv_tensor *x, void *u) {
    ff *f = u;
    if (f->chunk <= 0) return ff_plain(c, x, u);
    qkv_tensor *p[3] = {f->w1, f->b1, f->w2};
    return qkv_nn_chunked(c, x, f->chunk, f->w2->shape[0], ff_plain, u, 3, p);
}

static ff ff_make(uint64_t seed, int64_t d, int64_t h, float dropout) {
    ff f = {gc_rand(seed, -0.5f, 0.5f, QKV_DIMS(h, d)), gc_rand(seed + 1, -0.2f, 0.2f, QKV_DIMS(h)),
            gc_rand(seed + 2, -0.5f, 0.5f, QKV_DIMS(d, h)), dropout, 0};
    qkv_tensor_set_requires_grad(f.w1, true);
    qkv_tensor_set_requires_grad(f.b1, true);
    qkv_tensor_set_requires_grad(f.w2, true);
    return f;
}

static void ff_free(ff *f) {
    qkv_tensor_free(f->w1);
    qkv_tensor_free(f->b1);
    qkv_tensor_free(f->w2);
}

#define MAXB 12

typedef struct {
    int n;
    ff f[MAXB], g[MAXB];
    bool reversible;
} stack;

static int stack_params(stack *s, qkv_tensor **p) {
    int k = 0;
    for (int b = 0; b < s->n; b++) {
        p[k++] = s->f[b].w1, p[k++] = s->f[b].b1, p[k++] = s->f[b].w2;
        p[k++] = s->g[b].w1, p[k++] = s->g[b].b1, p[k++] = s->g[b].w2;
    }
    return k;
}

/* The stack, reversible or written out with ordinary ops. */
static qkv_tensor *f_stack(qkv_ctx *c, qkv_tensor **in, void *u) {
    stack *s = u;
    qkv_tensor *x = in[0];
    if (s->reversible) {
        qkv_nn_rev_block blk[MAXB];
        for (int b = 0; b < s->n; b++) blk[b] = (qkv_nn_rev_block){ff_apply, ff_apply, &s->f[b], &s->g[b]};
        qkv_tensor *p[6 * MAXB];
        int np = stack_params(s, p);
        return qkv_nn_reversible(c, x, s->n, blk, np, p);
    }
    int64_t d = x->shape[x->ndim - 1] / 2;
    qkv_tensor *x1 = qkv_slice(c, x, -1, 0, d, 1), *x2 = qkv_slice(c, x, -1, d, 2 * d, 1);
    for (int b = 0; b < s->n; b++) {
        x1 = qkv_add(c, x1, ff_apply(c, x2, &s->f[b]));
        x2 = qkv_add(c, x2, ff_apply(c, x1, &s->g[b]));
    }
    return qkv_concat(c, 2, (qkv_tensor *[]){x1, x2}, -1);
}

static stack stack_make(int n, int64_t d, int64_t h, float dropout, int64_t chunk) {
    stack s = {.n = n};
    for (int b = 0; b < n; b++) {
        s.f[b] = ff_make(100 + 10 * b, d, h, dropout);
        s.g[b] = ff_make(500 + 10 * b, d, h, dropout);
        s.g[b].chunk = chunk;
    }
    return s;
}

static void stack_free(stack *s) {
    for (int b = 0; b < s->n; b++) {
        ff_free(&s->f[b]);
        ff_free(&s->g[b]);
    }
}

/* Output, input gradient and every parameter gradient of one pass (heap copies), the context's RNG seeded alike. */
typedef struct {
    qkv_tensor *out, *gx, *gp[6 * MAXB];
    int np;
} run_result;

static run_result run_stack(stack *s, qkv_tensor *x, const qkv_tensor *gout, bool reversible) {
    run_result r = {0};
    qkv_ctx *c = qkv_ctx_new();
    qkv_rng_init(qkv_ctx_rng(c), 77);
    qkv_tensor *p[6 * MAXB];
    r.np = stack_params(s, p);
    for (int i = 0; i < r.np; i++) qkv_tensor_zero_grad(p[i]);
    qkv_tensor_zero_grad(x);
    s->reversible = reversible;
    qkv_tensor *y = f_stack(c, &x, s);
    CHECK_NN(y);
    if (y) {
        CHECK_OK(qkv_backward_with(c, y, gout));
        r.out = qkv_tensor_clone(y);
    }
    r.gx = x->grad ? qkv_tensor_clone(x->grad) : NULL;
    for (int i = 0; i < r.np; i++) r.gp[i] = p[i]->grad ? qkv_tensor_clone(p[i]->grad) : NULL;
    qkv_ctx_free(c);
    return r;
}

static void result_free(run_result *r) {
    qkv_tensor_free(r->out);
    qkv_tensor_free(r->gx);
    for (int i = 0; i < r->np; i++) qkv_tensor_free(r->gp[i]);
}

static void compare_runs(const char *name, int n, float dropout, int64_t chunk) {
    const int64_t B = 2, T = 7, d = 6, h = 10;
    stack s = stack_make(n, d, h, dropout, chunk);
    qkv_tensor *x = gc_rand(1, -1, 1, QKV_DIMS(B, T, 2 * d));
    qkv_tensor_set_requires_grad(x, true);
    qkv_tensor *gout = gc_rand(2, -1, 1, QKV_DIMS(B, T, 2 * d));
    run_result a = run_stack(&s, x, gout, true), b = run_stack(&s, x, gout, false);
    char what[96];
    if (a.out && b.out) {
        snprintf(what, sizeof what, "%s: output", name);
        CHECK(test_allclose(what, a.out, b.out, 1e-5, 1e-5));
        snprintf(what, sizeof what, "%s: d input", name);
        CHECK(a.gx && b.gx && test_allclose(what, a.gx, b.gx, 1e-5, 1e-5));
        double worst = 0;
        for (int i = 0; i < a.np; i++) {
            CHECK(a.gp[i] && b.gp[i]);
            if (!a.gp[i] || !b.gp[i]) continue;
            for (int64_t k = 0; k < qkv_numel(a.gp[i]); k++) {
                double e = fabs(qkv_f32(a.gp[i])[k] - qkv_f32(b.gp[i])[k]) - 1e-5 * fabs(qkv_f32(b.gp[i])[k]);
                worst = e > worst ? e : worst;
            }
        }
        printf("  %-40s params: worst excess %.3g\n", name, worst);
        CHECK(worst <= 1e-5);
    }
    result_free(&a);
    result_free(&b);
    qkv_tensor_free(x);
    qkv_tensor_free(gout);
    stack_free(&s);
}

TEST(equals_plain_computation) {
    compare_runs("1 block", 1, 0.0f, 0);
    compare_runs("4 blocks", 4, 0.0f, 0);
    compare_runs("4 blocks, dropout", 4, 0.3f, 0);
    compare_runs("3 blocks, chunked g (5 rows)", 3, 0.0f, 5);
    compare_runs("3 blocks, chunked g, dropout", 3, 0.2f, 4);
}

/* The fixture's stack: inputs x then, per block, f's and g's (w1, b1, w2). The backward runs after this function
 * returns (fixture_check differentiates the output), so the blocks' user data must outlive the call: static. */
static ff fixture_f[MAXB], fixture_g[MAXB];

static qkv_tensor *f_fixture(qkv_ctx *c, qkv_tensor **in, void *u) {
    int n = *(const int *)u;
    qkv_nn_rev_block blk[MAXB];
    for (int b = 0; b < n; b++) {
        qkv_tensor **w = in + 1 + 6 * b;
        fixture_f[b] = (ff){w[0], w[1], w[2], 0.0f, 0};
        fixture_g[b] = (ff){w[3], w[4], w[5], 0.0f, 0};
        blk[b] = (qkv_nn_rev_block){ff_apply, ff_apply, &fixture_f[b], &fixture_g[b]};
    }
    return qkv_nn_reversible(c, in[0], n, blk, 6 * n, in + 1);
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("reversible.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    int one = 1, two = 2;
    CHECK(fixture_check(f, "one_block", f_fixture, &one, 1e-5, 1e-6));
    CHECK(fixture_check(f, "two_blocks", f_fixture, &two, 1e-5, 1e-6));
    qkv_st_close(f);
}

TEST(gradcheck_reversible) {
    stack s = stack_make(2, 3, 4, 0.0f, 2);
    s.reversible = true;
    qkv_tensor *x = gc_rand(3, -1, 1, QKV_DIMS(2, 3, 6));
    qkv_tensor_set_requires_grad(x, true);
    CHECK(gradcheck("reversible", f_stack, 1, &x, &s, NULL));
    qkv_tensor_free(x);
    stack_free(&s);
}

/* Peak arena bytes of one forward + backward of n blocks. */
static size_t peak_of(int n, bool reversible, int64_t chunk) {
    const int64_t B = 4, T = 256, d = 32, h = 128;
    stack s = stack_make(n, d, h, 0.1f, chunk);
    for (int b = 0; b < n; b++) s.f[b].chunk = chunk;
    s.reversible = reversible;
    qkv_tensor *x = gc_rand(4, -1, 1, QKV_DIMS(B, T, 2 * d));
    qkv_tensor_set_requires_grad(x, true);
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *y = f_stack(c, &x, &s);
    CHECK_NN(y);
    if (y) CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_mul(c, y, y))));
    size_t peak = qkv_ctx_arena_peak(c);
    qkv_ctx_free(c);
    qkv_tensor_free(x);
    stack_free(&s);
    return peak;
}

TEST(activation_memory_does_not_grow_with_depth) {
    size_t r2 = peak_of(2, true, 0), r12 = peak_of(12, true, 0), p2 = peak_of(2, false, 0),
           p12 = peak_of(12, false, 0), c12 = peak_of(12, true, 128);
    printf("  peak arena bytes: reversible 2 blocks %zu, 12 blocks %zu; plain 2 %zu, 12 %zu; reversible 12 with "
           "chunked f and g %zu\n", r2, r12, p2, p12, c12);
    /* The 10 extra blocks cost their saved generator states and block table: well under 4 KiB. One block's
     * activations here are ~1 MiB. */
    CHECK(r12 >= r2 && r12 - r2 < 4096);
    CHECK(p12 > p2 + (size_t)8 * 1024 * 1024);
    CHECK(c12 < r12);
}

TEST(marks_rewind_tape_and_arena) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *w = gc_rand(5, -1, 1, QKV_DIMS(3, 3));
    qkv_tensor_set_requires_grad(w, true);
    qkv_tensor *a = qkv_tanh(c, w);
    size_t tape = qkv_ctx_tape_length(c);
    qkv_ctx_mark m = qkv_ctx_mark_now(c);
    qkv_tensor *leaf = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(3, 3));
    memcpy(leaf->data, a->data, sizeof(float) * 9);
    qkv_tensor_set_requires_grad(leaf, true);
    qkv_tensor *y = qkv_mul(c, leaf, w);
    qkv_tensor *g = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(3, 3));
    qkv_tensor_fill(g, 1.0f);
    CHECK_OK(qkv_backward_since(c, &m, y, g));
    /* d/dleaf = w, and w's own gradient = leaf; the tanh node before the mark did not run. */
    CHECK(leaf->grad && fabsf(qkv_f32(leaf->grad)[4] - qkv_f32(w)[4]) < 1e-7f);
    CHECK(w->grad && fabsf(qkv_f32(w->grad)[4] - qkv_f32(a)[4]) < 1e-7f);
    CHECK(!a->grad);
    qkv_ctx_rewind(c, &m);
    CHECK(qkv_ctx_tape_length(c) == tape);
    CHECK(qkv_backward_since(c, &m, a, g) != QKV_OK && strstr(qkv_last_error(), "after the mark"));
    /* Memory made after the rewind starts where the mark was. */
    qkv_tensor *again = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(3, 3));
    CHECK(again == leaf);
    qkv_tensor_free(w);
    qkv_ctx_free(c);
}

TEST(bad_input) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 5));
    qkv_nn_rev_block blk = {ff_plain, ff_plain, NULL, NULL};
    CHECK(!qkv_nn_reversible(c, x, 1, &blk, 0, NULL) && strstr(qkv_last_error(), "even"));
    qkv_nn_rev_block half = {ff_plain, NULL, NULL, NULL};
    qkv_tensor *x4 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 4));
    CHECK(!qkv_nn_reversible(c, x4, 1, &half, 0, NULL) && strstr(qkv_last_error(), "lacks"));
    CHECK(!qkv_nn_chunked(c, x4, 1, 0, ff_plain, NULL, 0, NULL) && strstr(qkv_last_error(), "d_out"));
    CHECK(!qkv_nn_reversible(c, NULL, 1, &blk, 0, NULL));
    qkv_ctx_free(c);
}

int main(void) {
    RUN(equals_plain_computation);
    RUN(pytorch_fixtures);
    RUN(gradcheck_reversible);
    RUN(activation_memory_does_not_grow_with_depth);
    RUN(marks_rewind_tape_and_arena);
    RUN(bad_input);
    return test_finish();
}
