/* Indexing and masking ops (embedding, index_select, gather, masked_fill, where): gradient checks, PyTorch
 * fixtures (tests/ref/ops_index.py), thread-count determinism of the embedding backward, and bad inputs. */
#include <string.h>

#include "gradcheck.h"
#include "test.h"

/* Heap int32 tensor from a flat list of values. */
static qkv_tensor *ints(int ndim, const int64_t *shape, const int32_t *values) {
    qkv_tensor *t = qkv_tensor_new(QKV_I32, ndim, shape);
    if (t) memcpy(t->data, values, sizeof(int32_t) * (size_t)qkv_numel(t));
    return t;
}
#define INTS(shape_pair, ...) ints(shape_pair, (const int32_t[]){__VA_ARGS__})

/* Gradcheck with gradients on the float inputs listed in `grad_mask` (bit i = input i); frees the inputs. */
static bool check(const char *name, gc_fn f, int n, qkv_tensor **in, void *user, unsigned grad_mask) {
    bool built = true;
    for (int i = 0; i < n; i++) {
        if (!in[i]) built = false;
        else if (in[i]->dtype == QKV_F32 && (grad_mask >> i & 1u)) qkv_tensor_set_requires_grad(in[i], true);
    }
    bool ok = built && gradcheck(name, f, n, in, user, NULL);
    for (int i = 0; i < n; i++) qkv_tensor_free(in[i]);
    return ok;
}

typedef struct {
    int axis;
    float value;
    bool transpose; /* feed x through a transposed (non-contiguous) view */
} args;

static qkv_tensor *maybe_t(qkv_ctx *c, qkv_tensor *x, const args *a) {
    return a && a->transpose ? qkv_transpose(c, x, 0, 1) : x;
}

static qkv_tensor *f_embedding(qkv_ctx *c, qkv_tensor **in, void *u) {
    return qkv_embedding(c, maybe_t(c, in[0], u), in[1]);
}
static qkv_tensor *f_index_select(qkv_ctx *c, qkv_tensor **in, void *u) {
    const args *a = u;
    return qkv_index_select(c, maybe_t(c, in[0], a), a->axis, in[1]);
}
static qkv_tensor *f_gather(qkv_ctx *c, qkv_tensor **in, void *u) {
    const args *a = u;
    return qkv_gather(c, maybe_t(c, in[0], a), a->axis, in[1]);
}
static qkv_tensor *f_masked_fill(qkv_ctx *c, qkv_tensor **in, void *u) {
    const args *a = u;
    return qkv_masked_fill(c, maybe_t(c, in[0], a), in[1], a->value);
}
static qkv_tensor *f_where(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_where(c, in[0], in[1], in[2]);
}

TEST(gradcheck_embedding) {
    CHECK(check("embedding repeated ids", f_embedding, 2,
                (qkv_tensor *[]){gc_rand(1, -1, 1, QKV_DIMS(7, 3)), INTS(QKV_DIMS(2, 4), 3, 0, 3, 6, 6, 3, 1, 3)},
                NULL, 1));
    CHECK(check("embedding 1-d ids", f_embedding, 2,
                (qkv_tensor *[]){gc_rand(2, -1, 1, QKV_DIMS(5, 4)), INTS(QKV_DIMS(3), 4, 4, 2)}, NULL, 1));
    args t = {.transpose = true}; /* weight given as a transposed view of a [3, 6] tensor */
    CHECK(check("embedding weight view", f_embedding, 2,
                (qkv_tensor *[]){gc_rand(3, -1, 1, QKV_DIMS(3, 6)), INTS(QKV_DIMS(2, 2), 5, 0, 5, 2)}, &t, 1));
}

TEST(gradcheck_index_select) {
    args a0 = {.axis = 0}, a1 = {.axis = 1}, al = {.axis = -1}, at = {.axis = 0, .transpose = true};
    CHECK(check("index_select axis 0", f_index_select, 2,
                (qkv_tensor *[]){gc_rand(4, -1, 1, QKV_DIMS(5, 3)), INTS(QKV_DIMS(4), 4, 1, 4, 0)}, &a0, 1));
    CHECK(check("index_select axis 1", f_index_select, 2,
                (qkv_tensor *[]){gc_rand(5, -1, 1, QKV_DIMS(2, 5, 3)), INTS(QKV_DIMS(3), 2, 2, 0)}, &a1, 1));
    CHECK(check("index_select axis -1", f_index_select, 2,
                (qkv_tensor *[]){gc_rand(6, -1, 1, QKV_DIMS(2, 3, 4)), INTS(QKV_DIMS(5), 3, 0, 3, 1, 3)}, &al, 1));
    CHECK(check("index_select view", f_index_select, 2,
                (qkv_tensor *[]){gc_rand(7, -1, 1, QKV_DIMS(3, 4)), INTS(QKV_DIMS(2), 1, 1)}, &at, 1));
}

TEST(gradcheck_gather) {
    args a0 = {.axis = 0}, a1 = {.axis = 1}, a2 = {.axis = -1}, at = {.axis = 1, .transpose = true};
    CHECK(check("gather axis 0", f_gather, 2,
                (qkv_tensor *[]){gc_rand(8, -1, 1, QKV_DIMS(3, 4)), INTS(QKV_DIMS(4, 3), 0, 2, 2, 1, 1, 1, 2, 0, 0,
                                                                          2, 2, 2)},
                &a0, 1));
    CHECK(check("gather axis 1 (index smaller)", f_gather, 2,
                (qkv_tensor *[]){gc_rand(9, -1, 1, QKV_DIMS(2, 4, 3)),
                                 INTS(QKV_DIMS(2, 3, 2), 3, 0, 3, 3, 1, 0, 2, 2, 0, 1, 2, 3)},
                &a1, 1));
    CHECK(check("gather axis -1", f_gather, 2,
                (qkv_tensor *[]){gc_rand(10, -1, 1, QKV_DIMS(2, 5)), INTS(QKV_DIMS(2, 6), 4, 4, 0, 1, 4, 2, 0, 0, 0,
                                                                           3, 1, 2)},
                &a2, 1));
    CHECK(check("gather view", f_gather, 2,
                (qkv_tensor *[]){gc_rand(11, -1, 1, QKV_DIMS(4, 3)), INTS(QKV_DIMS(3, 2), 3, 0, 1, 1, 2, 3)}, &at,
                1));
}

TEST(gradcheck_masks) {
    args v = {.value = -3.0f}, vt = {.value = 9.0f, .transpose = true};
    CHECK(check("masked_fill i32 [3,1]", f_masked_fill, 2,
                (qkv_tensor *[]){gc_rand(12, -1, 1, QKV_DIMS(2, 3, 4)), INTS(QKV_DIMS(3, 1), 1, 0, 1)}, &v, 1));
    qkv_tensor *fm = qkv_tensor_new(QKV_F32, QKV_DIMS(4));
    if (fm) memcpy(fm->data, (const float[]){0.0f, 0.25f, 0.0f, -1.0f}, sizeof(float) * 4);
    CHECK(check("masked_fill f32 [4]", f_masked_fill, 2, (qkv_tensor *[]){gc_rand(13, -1, 1, QKV_DIMS(2, 3, 4)), fm},
                &v, 1));
    CHECK(check("masked_fill x broadcast", f_masked_fill, 2,
                (qkv_tensor *[]){gc_rand(14, -1, 1, QKV_DIMS(3, 1)),
                                 INTS(QKV_DIMS(2, 3, 2), 1, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1)},
                &v, 1));
    CHECK(check("masked_fill view", f_masked_fill, 2,
                (qkv_tensor *[]){gc_rand(15, -1, 1, QKV_DIMS(3, 2)), INTS(QKV_DIMS(2, 3), 0, 1, 1, 0, 0, 1)}, &vt,
                1));
    CHECK(check("where broadcast", f_where, 3,
                (qkv_tensor *[]){INTS(QKV_DIMS(2, 1, 4), 1, 0, 0, 1, 0, 1, 1, 0), gc_rand(16, -1, 1, QKV_DIMS(3, 4)),
                                 gc_rand(17, -1, 1, QKV_DIMS(2, 3, 1))},
                NULL, 6));
    qkv_tensor *fc = gc_rand(18, -1, 1, QKV_DIMS(3, 4)); /* float condition; only b needs a gradient */
    CHECK(check("where f32 cond, grad b only", f_where, 3,
                (qkv_tensor *[]){fc, gc_rand(19, -1, 1, QKV_DIMS(3, 4)), gc_rand(20, -1, 1, QKV_DIMS(4))}, NULL, 4));
}

TEST(masked_fill_values) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = gc_rand(21, -1, 1, QKV_DIMS(2, 3));
    qkv_tensor *m = INTS(QKV_DIMS(3), 0, 7, 0);
    qkv_tensor *y = qkv_masked_fill(c, x, m, -1e9f);
    CHECK_NN(y);
    if (y) {
        const float *xp = x->data, *yp = y->data;
        for (int i = 0; i < 6; i++) CHECK(yp[i] == (i % 3 == 1 ? -1e9f : xp[i]));
    }
    qkv_tensor_free(x);
    qkv_tensor_free(m);
    qkv_ctx_free(c);
}

/* The embedding backward sums repeated ids in a fixed order: the same bits for 1 and 2 threads. */
TEST(embedding_backward_deterministic) {
    int64_t V = 50, D = 257, N = 3000;
    qkv_tensor *w = gc_rand(22, -1, 1, QKV_DIMS(V, D)), *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(N));
    qkv_tensor *g = gc_rand(23, -1, 1, QKV_DIMS(N, D));
    qkv_rng r;
    qkv_rng_init(&r, 5);
    for (int64_t i = 0; i < N; i++) qkv_i32(ids)[i] = (int32_t)qkv_rng_below(&r, (uint32_t)(i % 3 ? V : 3));
    qkv_tensor_set_requires_grad(w, true);
    qkv_tensor *grads[2] = {NULL, NULL};
    int prev = qkv_threads_get();
    for (int k = 0; k < 2; k++) {
        qkv_threads_set(k + 1);
        qkv_ctx *c = qkv_ctx_new();
        qkv_tensor_zero_grad(w);
        qkv_tensor *y = qkv_embedding(c, w, ids);
        CHECK_NN(y);
        if (y) {
            CHECK(memcmp(qkv_f32(y) + 5 * D, qkv_f32(w) + qkv_i32(ids)[5] * D, sizeof(float) * (size_t)D) == 0);
            CHECK_OK(qkv_backward_with(c, y, g));
        }
        if (w->grad) grads[k] = qkv_tensor_clone(w->grad);
        qkv_ctx_free(c);
    }
    qkv_threads_set(prev);
    CHECK(grads[0] && grads[1]);
    if (grads[0] && grads[1])
        CHECK(memcmp(grads[0]->data, grads[1]->data, sizeof(float) * (size_t)(V * D)) == 0);
    /* Row 0 of dweight is the sum of the gradient rows of its tokens, in token order. */
    if (grads[0]) {
        float want = 0;
        for (int64_t i = 0; i < N; i++)
            if (qkv_i32(ids)[i] == 0) want += qkv_f32(g)[i * D + 7];
        CHECK(qkv_f32(grads[0])[7] == want);
    }
    qkv_tensor_free(grads[0]);
    qkv_tensor_free(grads[1]);
    qkv_tensor_free(w);
    qkv_tensor_free(ids);
    qkv_tensor_free(g);
}

static bool has(const char *needle) {
    if (strstr(qkv_last_error(), needle)) return true;
    printf("  expected \"%s\" in the error: %s\n", needle, qkv_last_error());
    return false;
}

TEST(bad_inputs_are_errors) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *w = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(10, 4)), *x3 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 4));
    qkv_tensor *ids = INTS(QKV_DIMS(2, 3), 1, 2, 3, 4, 10, 5), *neg = INTS(QKV_DIMS(2), 0, -1);
    qkv_tensor *good = INTS(QKV_DIMS(2), 0, 1), *fids = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2));

    CHECK(qkv_embedding(c, w, ids) == NULL && qkv_last_status() == QKV_ERR_RANGE);
    CHECK(has("id 10") && has("[1, 1]") && has("[0, 10)"));
    CHECK(qkv_embedding(c, w, neg) == NULL && qkv_last_status() == QKV_ERR_RANGE && has("id -1"));
    CHECK(qkv_embedding(c, w, fids) == NULL && qkv_last_status() == QKV_ERR_INVALID && has("int32"));
    CHECK(qkv_embedding(c, x3, good) == NULL && qkv_last_status() == QKV_ERR_INVALID && has("[2, 3, 4]"));
    CHECK(qkv_embedding(c, good, good) == NULL && qkv_last_status() == QKV_ERR_INVALID);

    CHECK(qkv_index_select(c, x3, 1, good) != NULL);
    CHECK(qkv_index_select(c, x3, 1, neg) == NULL && qkv_last_status() == QKV_ERR_RANGE && has("[0, 3)"));
    CHECK(qkv_index_select(c, x3, 3, good) == NULL && qkv_last_status() == QKV_ERR_INVALID && has("axis"));
    CHECK(qkv_index_select(c, x3, 0, ids) == NULL && qkv_last_status() == QKV_ERR_INVALID && has("1-D"));

    qkv_tensor *gi = INTS(QKV_DIMS(2, 2, 1), 0, 1, 2, 3);
    CHECK(qkv_gather(c, x3, 1, gi) == NULL && qkv_last_status() == QKV_ERR_RANGE && has("index 3"));
    CHECK(qkv_gather(c, x3, 0, gi) == NULL && qkv_last_status() == QKV_ERR_RANGE); /* 2 and 3 >= 2 */
    CHECK(qkv_gather(c, x3, 2, gi) != NULL);
    CHECK(qkv_gather(c, x3, 1, good) == NULL && qkv_last_status() == QKV_ERR_INVALID && has("rank"));
    qkv_tensor *wide = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(3, 1, 1)); /* dim 0 larger than x's */
    CHECK(qkv_gather(c, x3, 1, wide) == NULL && qkv_last_status() == QKV_ERR_INVALID);

    qkv_tensor *m5 = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(5));
    CHECK(qkv_masked_fill(c, x3, m5, 0) == NULL && qkv_last_status() == QKV_ERR_INVALID && has("[5]"));
    CHECK(qkv_masked_fill(c, good, good, 0) == NULL && qkv_last_status() == QKV_ERR_INVALID && has("float32"));
    CHECK(qkv_where(c, m5, x3, x3) == NULL && qkv_last_status() == QKV_ERR_INVALID && has("broadcast"));
    CHECK(qkv_where(c, good, good, fids) == NULL && qkv_last_status() == QKV_ERR_INVALID);

    /* NULL inputs propagate without touching the error. */
    qkv_error_clear();
    CHECK(qkv_embedding(c, NULL, ids) == NULL && qkv_gather(c, x3, 0, NULL) == NULL);
    CHECK(qkv_index_select(c, NULL, 0, good) == NULL && qkv_masked_fill(c, x3, NULL, 0) == NULL);
    CHECK(qkv_where(c, NULL, x3, x3) == NULL && qkv_last_status() == QKV_OK);

    qkv_tensor_free(ids);
    qkv_tensor_free(neg);
    qkv_tensor_free(good);
    qkv_tensor_free(gi);
    qkv_ctx_free(c);
}

static qkv_tensor *fx_embedding(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_embedding(c, in[0], in[1]);
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("ops_index.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    args a0 = {.axis = 0}, a1 = {.axis = 1}, al = {.axis = -1};
    args v1 = {.value = -2.5f}, v2 = {.value = 7.0f}, v3 = {.value = 0.0f};
    CHECK(fixture_check(f, "embedding", fx_embedding, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "index_select_1", f_index_select, &a1, 1e-4, 1e-5));
    CHECK(fixture_check(f, "index_select_0", f_index_select, &a0, 1e-4, 1e-5));
    CHECK(fixture_check(f, "gather_1", f_gather, &a1, 1e-4, 1e-5));
    CHECK(fixture_check(f, "gather_last", f_gather, &al, 1e-4, 1e-5));
    CHECK(fixture_check(f, "masked_fill_i32", f_masked_fill, &v1, 1e-4, 1e-5));
    CHECK(fixture_check(f, "masked_fill_f32", f_masked_fill, &v2, 1e-4, 1e-5));
    CHECK(fixture_check(f, "masked_fill_bx", f_masked_fill, &v3, 1e-4, 1e-5));
    CHECK(fixture_check(f, "where", f_where, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "where_f32", f_where, NULL, 1e-4, 1e-5));
    qkv_st_close(f);
}

int main(void) {
    RUN(gradcheck_embedding);
    RUN(gradcheck_index_select);
    RUN(gradcheck_gather);
    RUN(gradcheck_masks);
    RUN(masked_fill_values);
    RUN(embedding_backward_deterministic);
    RUN(bad_inputs_are_errors);
    RUN(pytorch_fixtures);
    return test_finish();
}
