/* Triplet loss (mean and closest negatives): gradient checks, PyTorch fixtures (tests/ref/ops_triplet.py), bad
 * input. */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "test.h"

typedef struct {
    float margin;
    qkv_triplet_terms terms;
    bool normalise;
} opts;

static qkv_tensor *f_triplet(qkv_ctx *c, qkv_tensor **in, void *u) {
    const opts *o = u;
    qkv_tensor *a = in[0], *b = in[1];
    if (o->normalise) {
        a = qkv_nn_l2_normalize(c, a, 1e-12f);
        b = qkv_nn_l2_normalize(c, b, 1e-12f);
    }
    return qkv_triplet_loss(c, a, b, o->margin, o->terms);
}

TEST(gradcheck_triplet) {
    qkv_triplet_terms terms[3] = {QKV_TRIPLET_MEAN_NEGATIVE, QKV_TRIPLET_CLOSEST_NEGATIVE, QKV_TRIPLET_BOTH};
    for (int t = 0; t < 3; t++)
        for (int norm = 0; norm < 2; norm++) {
            /* A large margin keeps every row away from the relu's kink, where a central difference is wrong. */
            opts o = {.margin = 3.0f, .terms = terms[t], .normalise = norm};
            qkv_tensor *a = gc_rand(11 + t, -1, 1, QKV_DIMS(6, 5)), *b = gc_rand(21 + t, -1, 1, QKV_DIMS(6, 5));
            qkv_tensor_set_requires_grad(a, true);
            qkv_tensor_set_requires_grad(b, true);
            gc_opts g = gc_defaults();
            g.eps = 1e-3;
            CHECK(gradcheck("triplet", f_triplet, 2, (qkv_tensor *[]){a, b}, &o, &g));
            qkv_tensor_free(a);
            qkv_tensor_free(b);
        }
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("ops_triplet.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    opts mean = {0.25f, QKV_TRIPLET_MEAN_NEGATIVE, true}, closest = {0.25f, QKV_TRIPLET_CLOSEST_NEGATIVE, true};
    opts both = {0.25f, QKV_TRIPLET_BOTH, true}, raw = {1.0f, QKV_TRIPLET_BOTH, false};
    CHECK(fixture_check(f, "mean", f_triplet, &mean, 1e-4, 1e-5));
    CHECK(fixture_check(f, "closest", f_triplet, &closest, 1e-4, 1e-5));
    CHECK(fixture_check(f, "both", f_triplet, &both, 1e-4, 1e-5));
    CHECK(fixture_check(f, "raw_margin", f_triplet, &raw, 1e-4, 1e-5));
    qkv_st_close(f);
}

/* Identical pairs far apart from each other: nothing to learn, loss 0 (and one term alone is half the sum when
 * each is active). */
TEST(values_by_hand) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *a = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 2));
    qkv_f32(a)[0] = 1; /* a = b = identity rows: s = I */
    qkv_f32(a)[3] = 1;
    qkv_tensor *l = qkv_triplet_loss(c, a, a, 0.25f, QKV_TRIPLET_BOTH);
    CHECK(l && fabsf(qkv_f32(l)[0]) < 1e-7f);
    /* Margin 1.5: each row's mean term = 1.5 - 1 + 0 = 0.5, closest term = 1.5 - 1 + 0 = 0.5 (s_ij = 0 <= 1). */
    l = qkv_triplet_loss(c, a, a, 1.5f, QKV_TRIPLET_MEAN_NEGATIVE);
    CHECK(l && fabsf(qkv_f32(l)[0] - 0.5f) < 1e-6f);
    l = qkv_triplet_loss(c, a, a, 1.5f, QKV_TRIPLET_BOTH);
    CHECK(l && fabsf(qkv_f32(l)[0] - 1.0f) < 1e-6f);
    qkv_ctx_free(c);
}

TEST(bad_input) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(3, 4)), *y = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(3, 5));
    CHECK(qkv_triplet_loss(c, x, y, 0.25f, QKV_TRIPLET_BOTH) == NULL && strstr(qkv_last_error(), "[B, D]"));
    qkv_tensor *one = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 4));
    CHECK(qkv_triplet_loss(c, one, one, 0.25f, QKV_TRIPLET_BOTH) == NULL && strstr(qkv_last_error(), "B >= 2"));
    CHECK(qkv_triplet_loss(c, x, x, 0.25f, (qkv_triplet_terms)0) == NULL && strstr(qkv_last_error(), "terms"));
    qkv_tensor *xi = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(3, 4));
    CHECK(qkv_triplet_loss(c, xi, xi, 0.25f, QKV_TRIPLET_BOTH) == NULL && strstr(qkv_last_error(), "float32"));
    CHECK(qkv_triplet_loss(c, NULL, x, 0.25f, QKV_TRIPLET_BOTH) == NULL);
    qkv_ctx_free(c);
}

int main(void) {
    RUN(gradcheck_triplet);
    RUN(pytorch_fixtures);
    RUN(values_by_hand);
    RUN(bad_input);
    return test_finish();
}
