/* Unary activations and reductions: gradient checks, PyTorch fixtures (tests/ref/ops_unary.py), extreme values,
 * thread-count independence and error reporting. */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "test.h"

typedef qkv_tensor *(*unary_fn)(qkv_ctx *, qkv_tensor *);

/* A unary op, optionally applied to a transposed view of the input (axes 0 and last). */
typedef struct {
    unary_fn fn;
    bool transpose;
} unary_case;

static qkv_tensor *f_unary(qkv_ctx *c, qkv_tensor **in, void *u) {
    const unary_case *uc = u;
    qkv_tensor *x = uc->transpose ? qkv_transpose(c, in[0], 0, -1) : in[0];
    return uc->fn(c, x);
}

/* R_*_ALL_1: the 0-d result reshaped to [1], the shape the fixtures store it in. */
typedef enum { R_SUM, R_MEAN, R_MAX, R_SUM_ALL, R_MEAN_ALL, R_SUM_ALL_1, R_MEAN_ALL_1 } red_kind;

typedef struct {
    red_kind kind;
    int axis;
    bool keepdim;
    bool transpose; /* reduce a transposed view (axes 1 and last) */
} red_case;

static qkv_tensor *f_reduce(qkv_ctx *c, qkv_tensor **in, void *u) {
    const red_case *r = u;
    qkv_tensor *x = r->transpose ? qkv_transpose(c, in[0], 1, -1) : in[0];
    switch (r->kind) {
    case R_SUM: return qkv_sum(c, x, r->axis, r->keepdim);
    case R_MEAN: return qkv_mean(c, x, r->axis, r->keepdim);
    case R_MAX: return qkv_max(c, x, r->axis, r->keepdim);
    case R_SUM_ALL: return qkv_sum_all(c, x);
    case R_MEAN_ALL: return qkv_mean_all(c, x);
    case R_SUM_ALL_1: return qkv_reshape(c, qkv_sum_all(c, x), QKV_DIMS(1));
    default: return qkv_reshape(c, qkv_mean_all(c, x), QKV_DIMS(1));
    }
}

/* Gradcheck one input, then free it. */
static bool check1(const char *name, gc_fn f, qkv_tensor *x, void *user) {
    qkv_tensor_set_requires_grad(x, true);
    bool ok = gradcheck(name, f, 1, &x, user, NULL);
    qkv_tensor_free(x);
    return ok;
}

/* Random values pushed at least 0.1 away from 0: relu's kink must stay out of the finite-difference step. */
static qkv_tensor *away_from_zero(uint64_t seed, int ndim, const int64_t *shape) {
    qkv_tensor *t = gc_rand(seed, -1, 1, ndim, shape);
    float *p = qkv_f32(t);
    for (int64_t i = 0; i < qkv_numel(t); i++) p[i] = p[i] < 0 ? p[i] - 0.1f : p[i] + 0.1f;
    return t;
}

/* A permutation of well-separated values (steps of 0.05 > the 0.01 step): no ties, no max switching. */
static qkv_tensor *distinct(uint64_t seed, int ndim, const int64_t *shape) {
    qkv_tensor *t = qkv_tensor_new(QKV_F32, ndim, shape);
    float *p = qkv_f32(t);
    int64_t n = qkv_numel(t);
    for (int64_t i = 0; i < n; i++) p[i] = (float)i * 0.05f - (float)n * 0.025f;
    qkv_rng r;
    qkv_rng_init(&r, seed);
    for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = qkv_rng_below(&r, (uint32_t)(i + 1));
        float tmp = p[i];
        p[i] = p[j];
        p[j] = tmp;
    }
    return t;
}

TEST(gradcheck_unary) {
    struct {
        const char *name;
        unary_fn fn;
        float lo, hi;
    } ops[] = {
        {"gelu", qkv_gelu, -3, 3},       {"gelu_tanh", qkv_gelu_tanh, -3, 3}, {"tanh", qkv_tanh, -2, 2},
        {"sigmoid", qkv_sigmoid, -4, 4}, {"exp", qkv_exp, -2, 2},             {"log", qkv_log, 0.5f, 3},
        {"sqrt", qkv_sqrt, 0.5f, 3},
    };
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        unary_case plain = {ops[k].fn, false}, trans = {ops[k].fn, true};
        char name[64];
        snprintf(name, sizeof name, "%s [2,3,4]", ops[k].name);
        CHECK(check1(name, f_unary, gc_rand(100 + k, ops[k].lo, ops[k].hi, QKV_DIMS(2, 3, 4)), &plain));
        snprintf(name, sizeof name, "%s [7]", ops[k].name);
        CHECK(check1(name, f_unary, gc_rand(200 + k, ops[k].lo, ops[k].hi, QKV_DIMS(7)), &plain));
        snprintf(name, sizeof name, "%s transposed", ops[k].name);
        CHECK(check1(name, f_unary, gc_rand(300 + k, ops[k].lo, ops[k].hi, QKV_DIMS(3, 2, 5)), &trans));
    }
    unary_case relu = {qkv_relu, false}, relu_t = {qkv_relu, true};
    CHECK(check1("relu", f_unary, away_from_zero(400, QKV_DIMS(4, 5)), &relu));
    CHECK(check1("relu transposed", f_unary, away_from_zero(401, QKV_DIMS(3, 2, 5)), &relu_t));
}

TEST(gradcheck_reduce) {
    for (int kind = R_SUM; kind <= R_MEAN; kind++) {
        const char *nm = kind == R_SUM ? "sum" : "mean";
        int axes[] = {0, 1, 2, -1, -2};
        for (int a = 0; a < 5; a++) {
            for (int keep = 0; keep < 2; keep++) {
                red_case r = {(red_kind)kind, axes[a], keep, false};
                char name[64];
                snprintf(name, sizeof name, "%s axis %d keep %d", nm, axes[a], keep);
                CHECK(check1(name, f_reduce, gc_rand(500 + a, -1, 1, QKV_DIMS(2, 3, 4)), &r));
            }
        }
        red_case t = {(red_kind)kind, 1, false, true};
        CHECK(check1(kind == R_SUM ? "sum transposed" : "mean transposed", f_reduce,
                     gc_rand(510, -1, 1, QKV_DIMS(2, 3, 4)), &t));
    }
    int axes[] = {0, 1, -1};
    for (int a = 0; a < 3; a++) {
        for (int keep = 0; keep < 2; keep++) {
            red_case r = {R_MAX, axes[a], keep, false};
            char name[64];
            snprintf(name, sizeof name, "max axis %d keep %d", axes[a], keep);
            CHECK(check1(name, f_reduce, distinct(600 + a, QKV_DIMS(3, 4, 5)), &r));
        }
    }
    red_case mt = {R_MAX, -2, true, true};
    CHECK(check1("max transposed", f_reduce, distinct(610, QKV_DIMS(3, 4, 5)), &mt));
    red_case sa = {R_SUM_ALL, 0, false, false}, ma = {R_MEAN_ALL, 0, false, false};
    red_case sat = {R_SUM_ALL, 0, false, true};
    CHECK(check1("sum_all", f_reduce, gc_rand(620, -1, 1, QKV_DIMS(3, 5)), &sa));
    CHECK(check1("mean_all", f_reduce, gc_rand(621, -1, 1, QKV_DIMS(2, 3, 4)), &ma));
    CHECK(check1("sum_all transposed", f_reduce, gc_rand(622, -1, 1, QKV_DIMS(2, 3, 4)), &sat));
}

TEST(max_ties_go_to_first) {
    /* torch.max(dim): the gradient goes to the first maximal element only. */
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_tensor_new(QKV_F32, QKV_DIMS(2, 4));
    qkv_tensor_load(x, (const float[]){1, 3, 3, 2, 5, 5, 5, 5}, 8 * sizeof(float));
    qkv_tensor_set_requires_grad(x, true);
    qkv_tensor *m = qkv_max(c, x, 1, false);
    CHECK_NN(m);
    CHECK_OK(qkv_backward(c, qkv_sum_all(c, m)));
    const float want[8] = {0, 1, 0, 0, 1, 0, 0, 0};
    for (int i = 0; i < 8; i++) CHECKF(qkv_f32(x->grad)[i] == want[i], "grad[%d] = %g", i, qkv_f32(x->grad)[i]);
    CHECK(qkv_f32(m)[0] == 3.0f && qkv_f32(m)[1] == 5.0f);
    qkv_tensor_free(x);
    qkv_ctx_free(c);
}

TEST(extreme_values) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(6));
    qkv_tensor_load(x, (const float[]){-10, 10, -100, 100, -1000, 1000}, 6 * sizeof(float));
    qkv_tensor *g = qkv_gelu(c, x), *gt = qkv_gelu_tanh(c, x), *s = qkv_sigmoid(c, x), *t = qkv_tanh(c, x);
    qkv_tensor *e = qkv_exp(c, x);
    CHECK(g && gt && s && t && e);
    for (int i = 0; i < 6; i++) {
        CHECKF(isfinite(qkv_f32(g)[i]) && isfinite(qkv_f32(gt)[i]) && isfinite(qkv_f32(s)[i]),
               "non-finite activation at %d", i);
    }
    CHECK(qkv_f32(g)[1] == 10.0f && fabsf(qkv_f32(g)[0]) < 1e-20f);
    CHECK(qkv_f32(gt)[1] == 10.0f && fabsf(qkv_f32(gt)[0]) < 1e-20f);
    CHECK(qkv_f32(s)[4] == 0.0f && qkv_f32(s)[5] == 1.0f && qkv_f32(t)[5] == 1.0f && qkv_f32(t)[4] == -1.0f);
    CHECK(qkv_f32(e)[2] == expf(-100.0f) && isinf(qkv_f32(e)[3]) && qkv_f32(e)[4] == 0.0f);
    qkv_ctx_free(c);
}

TEST(exp_matches_libm) {
    /* The vectorised exp stays within 1e-6 relative of libm over the normal range. */
    qkv_ctx *c = qkv_ctx_new();
    int64_t n = 1 << 18;
    qkv_tensor *x = qkv_ctx_tensor(c, QKV_F32, 1, &n);
    for (int64_t i = 0; i < n; i++) qkv_f32(x)[i] = -87.0f + 175.0f * (float)i / (float)n;
    qkv_tensor *y = qkv_exp(c, x);
    CHECK_NN(y);
    double worst = 0;
    for (int64_t i = 0; y && i < n; i++) {
        double ref = exp((double)qkv_f32(x)[i]), rel = fabs(qkv_f32(y)[i] - ref) / ref;
        if (rel > worst) worst = rel;
    }
    printf("  exp: max relative error vs libm %.3g\n", worst);
    CHECK(worst < 1e-6);
    qkv_ctx_free(c);
}

TEST(gelu_matches_double) {
    /* gelu's own vectorised erf: x * Phi(x) within 1e-6 relative of float64 (tails included, where the textbook
     * 0.5 x (1 + erf(x / sqrt 2)) in float32 cancels to 0), and so is its derivative Phi(x) + x phi(x). */
    qkv_ctx *c = qkv_ctx_new();
    int64_t n = 1 << 16;
    qkv_tensor *x = qkv_tensor_new(QKV_F32, 1, &n);
    for (int64_t i = 0; i < n; i++) qkv_f32(x)[i] = -12.0f + 26.0f * (float)i / (float)n;
    qkv_tensor_set_requires_grad(x, true);
    qkv_tensor *y = qkv_gelu(c, x);
    CHECK_NN(y);
    CHECK_OK(qkv_backward(c, qkv_sum_all(c, y)));
    double worst = 0, worst_d = 0;
    for (int64_t i = 0; y && x->grad && i < n; i++) {
        double v = qkv_f32(x)[i], phi = 0.5 * erfc(-v / sqrt(2.0)), pdf = exp(-0.5 * v * v) / sqrt(2.0 * M_PI);
        double ref = v * phi, dref = phi + v * pdf;
        if (ref != 0) worst = fmax(worst, fabs(qkv_f32(y)[i] - ref) / fabs(ref));
        /* Relative to the size of the terms: the derivative itself crosses 0 at x = -0.75. */
        double dscale = phi + fabs(v) * pdf;
        if (dscale > 1e-30) worst_d = fmax(worst_d, fabs(qkv_f32(x->grad)[i] - dref) / dscale);
    }
    printf("  gelu: max relative error vs float64 %.3g, derivative %.3g\n", worst, worst_d);
    CHECK(worst < 1e-6);
    CHECK(worst_d < 1e-6);
    qkv_tensor_free(x);
    qkv_ctx_free(c);
}

TEST(thread_count_independent) {
    /* Large enough to take the parallel paths; the results must be bit-identical with 1 and 2 threads. */
    qkv_tensor *x = gc_rand(700, -2, 2, QKV_DIMS(96, 1031));
    qkv_tensor *r[2][5];
    qkv_ctx *c[2];
    for (int t = 0; t < 2; t++) {
        qkv_threads_set(t + 1);
        c[t] = qkv_ctx_new();
        r[t][0] = qkv_sum_all(c[t], x);
        r[t][1] = qkv_sum(c[t], x, -1, false);
        r[t][2] = qkv_mean(c[t], x, 0, true);
        r[t][3] = qkv_gelu(c[t], x);
        r[t][4] = qkv_max(c[t], x, 0, false);
    }
    qkv_threads_set(0);
    for (int k = 0; k < 5; k++) {
        CHECK(r[0][k] && r[1][k]);
        if (r[0][k] && r[1][k])
            CHECKF(memcmp(r[0][k]->data, r[1][k]->data, sizeof(float) * (size_t)qkv_numel(r[0][k])) == 0,
                   "result %d differs between 1 and 2 threads", k);
    }
    /* And the chunked sum is accurate: compare with a double-precision sum. */
    double ref = 0;
    for (int64_t i = 0; i < qkv_numel(x); i++) ref += qkv_f32(x)[i];
    if (r[0][0]) CHECKF(fabs(qkv_f32(r[0][0])[0] - ref) < 1e-3, "sum_all %g vs %g", qkv_f32(r[0][0])[0], ref);
    for (int t = 0; t < 2; t++) qkv_ctx_free(c[t]);
    qkv_tensor_free(x);
}

TEST(bad_inputs_are_errors) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3)), *ids = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 3));
    qkv_tensor *s = qkv_ctx_zeros(c, QKV_F32, 0, NULL), *e = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 0));
    CHECK(qkv_gelu(c, ids) == NULL && strstr(qkv_last_error(), "gelu") && strstr(qkv_last_error(), "float32"));
    CHECK(qkv_sqrt(c, ids) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(qkv_sum(c, x, 2, false) == NULL && strstr(qkv_last_error(), "sum: axis 2"));
    CHECK(qkv_mean(c, x, -3, true) == NULL && strstr(qkv_last_error(), "mean: axis -3"));
    CHECK(qkv_max(c, x, 5, false) == NULL && strstr(qkv_last_error(), "[2, 3]"));
    CHECK(qkv_max(c, e, 1, false) == NULL && strstr(qkv_last_error(), "empty"));
    CHECK(qkv_sum(c, s, 0, false) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(qkv_sum_all(c, ids) == NULL && strstr(qkv_last_error(), "sum_all"));
    /* NULL propagates without touching the error. */
    qkv_error_clear();
    CHECK(qkv_relu(c, NULL) == NULL && qkv_log(c, NULL) == NULL && qkv_sum(c, NULL, 0, false) == NULL);
    CHECK(qkv_max(c, NULL, 0, true) == NULL && qkv_mean_all(c, NULL) == NULL);
    CHECK(qkv_last_status() == QKV_OK);
    /* Edge shapes: an empty axis sums to 0, the sum of a scalar is itself. */
    qkv_tensor *z = qkv_sum(c, e, 1, false), *ss = qkv_sum_all(c, s);
    CHECK(z && z->ndim == 1 && z->shape[0] == 2 && qkv_f32(z)[0] == 0.0f);
    CHECK(ss && ss->ndim == 0 && qkv_f32(ss)[0] == 0.0f);
    qkv_ctx_free(c);
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("ops_unary.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    struct {
        const char *key;
        unary_case u;
    } un[] = {
        {"relu", {qkv_relu, false}},
        {"gelu", {qkv_gelu, false}},
        {"gelu_tanh", {qkv_gelu_tanh, false}},
        {"tanh", {qkv_tanh, false}},
        {"sigmoid", {qkv_sigmoid, false}},
        {"exp", {qkv_exp, false}},
        {"log", {qkv_log, false}},
        {"sqrt", {qkv_sqrt, false}},
        {"gelu_tails", {qkv_gelu, false}},
        {"gelu_tanh_tails", {qkv_gelu_tanh, false}},
        {"sigmoid_tails", {qkv_sigmoid, false}},
        {"gelu_transposed", {qkv_gelu, true}},
    };
    for (size_t k = 0; k < sizeof un / sizeof un[0]; k++)
        CHECKF(fixture_check(f, un[k].key, f_unary, &un[k].u, 1e-4, 1e-5), "fixture %s", un[k].key);
    struct {
        const char *key;
        red_case r;
    } rd[] = {
        {"sum_axis1_keep", {R_SUM, 1, true, false}},
        {"sum_last", {R_SUM, -1, false, false}},
        {"mean_axis0", {R_MEAN, 0, false, false}},
        {"mean_last_keep", {R_MEAN, -1, true, false}},
        {"max_axis2", {R_MAX, 2, false, false}},
        {"max_last_keep", {R_MAX, -1, true, false}},
        {"sum_transposed", {R_SUM, 1, false, true}},
        {"sum_all", {R_SUM_ALL_1, 0, false, false}},
        {"mean_all", {R_MEAN_ALL_1, 0, false, false}},
        {"sum_all_big", {R_SUM_ALL_1, 0, false, false}},
        {"sum_rows_long", {R_SUM, -1, false, false}},
    };
    for (size_t k = 0; k < sizeof rd / sizeof rd[0]; k++)
        CHECKF(fixture_check(f, rd[k].key, f_reduce, &rd[k].r, 1e-4, 1e-5), "fixture %s", rd[k].key);
    qkv_st_close(f);
}

int main(void) {
    RUN(gradcheck_unary);
    RUN(gradcheck_reduce);
    RUN(max_ties_go_to_first);
    RUN(extreme_values);
    RUN(exp_matches_libm);
    RUN(gelu_matches_double);
    RUN(thread_count_independent);
    RUN(bad_inputs_are_errors);
    RUN(pytorch_fixtures);
    return test_finish();
}
