/* softmax, log_softmax, layer_norm and dropout: gradient checks, PyTorch fixtures (tests/ref/ops_norm.py),
 * extreme values, dropout's mask properties, thread-count independence and error reporting. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "ops/log_softmax_rows.h"
#include "test.h"

/* ---- functions under test ------------------------------------------------------------------------------------ */

typedef struct {
    bool log_form;
    int axis;
    int transpose[2]; /* swap these axes first (equal: no transpose) */
} sm_case;

static qkv_tensor *f_softmax(qkv_ctx *c, qkv_tensor **in, void *u) {
    const sm_case *s = u;
    qkv_tensor *x = s->transpose[0] != s->transpose[1] ? qkv_transpose(c, in[0], s->transpose[0], s->transpose[1])
                                                         : in[0];
    return s->log_form ? qkv_log_softmax(c, x, s->axis) : qkv_softmax(c, x, s->axis);
}

typedef struct {
    bool gamma, beta; /* which of in[1], in[2] are given (in order) */
    bool transpose;   /* normalise a transposed view (axes 0 and last) */
    float eps;
} ln_case;

static qkv_tensor *f_layer_norm(qkv_ctx *c, qkv_tensor **in, void *u) {
    const ln_case *l = u;
    qkv_tensor *x = l->transpose ? qkv_transpose(c, in[0], 0, -1) : in[0];
    qkv_tensor *g = l->gamma ? in[1] : NULL, *b = l->beta ? in[l->gamma ? 2 : 1] : NULL;
    return qkv_layer_norm(c, x, g, b, l->eps);
}

typedef struct {
    float p;
    bool eval;
    bool transpose;
} do_case;

static qkv_tensor *f_dropout(qkv_ctx *c, qkv_tensor **in, void *u) {
    const do_case *d = u;
    qkv_ctx_set_training(c, !d->eval);
    qkv_tensor *x = d->transpose ? qkv_transpose(c, in[0], 0, -1) : in[0];
    return qkv_dropout(c, x, d->p);
}

static bool check(const char *name, gc_fn f, int n, qkv_tensor **in, void *user) {
    for (int i = 0; i < n; i++) qkv_tensor_set_requires_grad(in[i], true);
    bool ok = gradcheck(name, f, n, in, user, NULL);
    for (int i = 0; i < n; i++) qkv_tensor_free(in[i]);
    return ok;
}

/* ---- gradient checks ------------------------------------------------------------------------------------------ */

TEST(gradcheck_softmax) {
    int axes[] = {0, 1, 2, -1, -2};
    for (int lf = 0; lf < 2; lf++) {
        for (int a = 0; a < 5; a++) {
            sm_case s = {lf, axes[a], {0, 0}};
            char name[64];
            snprintf(name, sizeof name, "%s axis %d", lf ? "log_softmax" : "softmax", axes[a]);
            CHECK(check(name, f_softmax, 1, (qkv_tensor *[]){gc_rand(10 + a, -2, 2, QKV_DIMS(2, 3, 4))}, &s));
        }
        sm_case t = {lf, -1, {0, 2}}, t1 = {lf, 1, {1, 2}}, one = {lf, 1, {0, 0}};
        CHECK(check(lf ? "log_softmax transposed" : "softmax transposed", f_softmax, 1,
                    (qkv_tensor *[]){gc_rand(20, -2, 2, QKV_DIMS(3, 2, 5))}, &t));
        CHECK(check(lf ? "log_softmax transposed mid" : "softmax transposed mid", f_softmax, 1,
                    (qkv_tensor *[]){gc_rand(21, -2, 2, QKV_DIMS(3, 2, 5))}, &t1));
        CHECK(check(lf ? "log_softmax size-1 axis" : "softmax size-1 axis", f_softmax, 1,
                    (qkv_tensor *[]){gc_rand(22, -2, 2, QKV_DIMS(3, 1, 2))}, &one));
        sm_case longrow = {lf, -1, {0, 0}};
        CHECK(check(lf ? "log_softmax row 37" : "softmax row 37", f_softmax, 1,
                    (qkv_tensor *[]){gc_rand(23, -3, 3, QKV_DIMS(2, 37))}, &longrow));
    }
}

TEST(gradcheck_layer_norm) {
    ln_case full = {true, true, false, 1e-5f}, plain = {false, false, false, 1e-5f};
    ln_case gonly = {true, false, false, 1e-5f}, bonly = {false, true, false, 1e-5f};
    ln_case trans = {true, true, true, 1e-5f}, big_eps = {true, true, false, 0.5f};
    CHECK(check("layer_norm", f_layer_norm, 3,
                (qkv_tensor *[]){gc_rand(30, -2, 2, QKV_DIMS(2, 3, 6)), gc_rand(31, 0.5f, 1.5f, QKV_DIMS(6)),
                                 gc_rand(32, -1, 1, QKV_DIMS(6))},
                &full));
    CHECK(check("layer_norm plain", f_layer_norm, 1, (qkv_tensor *[]){gc_rand(33, -2, 2, QKV_DIMS(4, 5))}, &plain));
    CHECK(check("layer_norm gamma only", f_layer_norm, 2,
                (qkv_tensor *[]){gc_rand(34, -2, 2, QKV_DIMS(3, 5)), gc_rand(35, 0.5f, 1.5f, QKV_DIMS(5))}, &gonly));
    CHECK(check("layer_norm beta only", f_layer_norm, 2,
                (qkv_tensor *[]){gc_rand(36, -2, 2, QKV_DIMS(3, 5)), gc_rand(37, -1, 1, QKV_DIMS(5))}, &bonly));
    CHECK(check("layer_norm transposed", f_layer_norm, 3,
                (qkv_tensor *[]){gc_rand(38, -2, 2, QKV_DIMS(5, 3, 2)), gc_rand(39, 0.5f, 1.5f, QKV_DIMS(5)),
                                 gc_rand(40, -1, 1, QKV_DIMS(5))},
                &trans));
    CHECK(check("layer_norm eps 0.5", f_layer_norm, 3,
                (qkv_tensor *[]){gc_rand(41, -1, 1, QKV_DIMS(3, 4)), gc_rand(42, 0.5f, 1.5f, QKV_DIMS(4)),
                                 gc_rand(43, -1, 1, QKV_DIMS(4))},
                &big_eps));
    CHECK(check("layer_norm D=70", f_layer_norm, 3,
                (qkv_tensor *[]){gc_rand(44, -2, 2, QKV_DIMS(2, 70)), gc_rand(45, 0.5f, 1.5f, QKV_DIMS(70)),
                                 gc_rand(46, -1, 1, QKV_DIMS(70))},
                &full));
}

TEST(gradcheck_dropout) {
    /* gradcheck reseeds the context's generator before every evaluation, so the mask is the same each time. */
    do_case d = {0.3f, false, false}, t = {0.5f, false, true};
    CHECK(check("dropout p=0.3", f_dropout, 1, (qkv_tensor *[]){gc_rand(50, -1, 1, QKV_DIMS(4, 5))}, &d));
    CHECK(check("dropout transposed", f_dropout, 1, (qkv_tensor *[]){gc_rand(51, -1, 1, QKV_DIMS(3, 2, 4))}, &t));
}

/* ---- forward properties ---------------------------------------------------------------------------------------- */

TEST(softmax_extremes) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(3, 3));
    qkv_tensor_load(x, (const float[]){1000, 0, -1000, -1e4f, 1e4f, 0, 0, -INFINITY, 1}, 9 * sizeof(float));
    qkv_tensor *y = qkv_softmax(c, x, -1), *ly = qkv_log_softmax(c, x, -1);
    CHECK(y && ly);
    if (!y || !ly) goto done;
    const float *p = qkv_f32(y), *lp = qkv_f32(ly);
    for (int i = 0; i < 9; i++) CHECKF(isfinite(p[i]), "softmax[%d] = %g", i, p[i]);
    for (int i = 0; i < 6; i++) CHECKF(isfinite(lp[i]), "log_softmax[%d] = %g", i, lp[i]);
    CHECK(p[0] == 1.0f && p[1] == 0.0f && p[2] == 0.0f && p[4] == 1.0f);
    CHECK(p[7] == 0.0f && isinf(lp[7]) && lp[7] < 0); /* a masked (-inf) logit gets probability 0 */
    CHECK(lp[0] == 0.0f && lp[1] == -1000.0f && lp[2] == -2000.0f && lp[3] == -2e4f);
    for (int r = 0; r < 3; r++) {
        float s = p[3 * r] + p[3 * r + 1] + p[3 * r + 2];
        CHECKF(fabsf(s - 1.0f) < 1e-6f, "row %d sums to %g", r, s);
    }
done:
    qkv_ctx_free(c);
}

TEST(log_softmax_rows_into_a_buffer) {
    /* The decoders' form: out of place bit-identical to qkv_log_softmax; in place within rounding. Rows off the
     * vector width, enough of them for the threaded path, a peaky row and a -inf entry. */
    enum { R = 40, N = 1037 };
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(R, N));
    float *y = malloc(sizeof(float) * R * N), *z = malloc(sizeof(float) * R * N);
    CHECK(x && y && z);
    if (!x || !y || !z) goto done;
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    float *xs = qkv_f32(x);
    for (int i = 0; i < R * N; i++) xs[i] = 8.0f * (qkv_rng_uniform(&rng) - 0.5f);
    xs[3 * N + 17] = 60.0f;
    xs[5 * N + 2] = -INFINITY;
    qkv_tensor *ref = qkv_log_softmax(c, x, -1);
    CHECK(ref != NULL);
    if (!ref) goto done;
    qkv__log_softmax_rows(y, xs, R, N);
    memcpy(z, xs, sizeof(float) * R * N);
    qkv__log_softmax_rows_inplace(z, R, N);
    CHECK(memcmp(y, qkv_f32(ref), sizeof(float) * R * N) == 0);
    double worst = 0;
    for (int i = 0; i < R * N; i++)
        if (isfinite(y[i]) || isfinite(z[i])) {
            double d = fabs((double)y[i] - z[i]);
            worst = isnan(d) ? INFINITY : d > worst ? d : worst;
        }
    CHECK(isinf(z[5 * N + 2]) && z[5 * N + 2] < 0);
    CHECKF(worst < 1e-5, "in place vs out of place: max |diff| %g", worst);
done:
    free(y);
    free(z);
    qkv_ctx_free(c);
}

TEST(layer_norm_statistics) {
    /* Without gamma/beta (and eps 0) each row has mean 0 and biased variance 1, even for data far from 0. */
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = gc_rand(60, 999.0f, 1001.0f, QKV_DIMS(4, 256));
    qkv_tensor *y = qkv_layer_norm(c, x, NULL, NULL, 0.0f);
    CHECK_NN(y);
    for (int r = 0; y && r < 4; r++) {
        double m = 0, v = 0;
        for (int d = 0; d < 256; d++) m += qkv_f32(y)[r * 256 + d];
        m /= 256;
        for (int d = 0; d < 256; d++) v += pow(qkv_f32(y)[r * 256 + d] - m, 2);
        v /= 256;
        CHECKF(fabs(m) < 1e-5 && fabs(v - 1) < 1e-4, "row %d: mean %g var %g", r, m, v);
    }
    qkv_tensor_free(x);
    qkv_ctx_free(c);
}

/* ---- dropout ---------------------------------------------------------------------------------------------------- */

TEST(dropout_mask) {
    int64_t n = 100003; /* not a multiple of 4 */
    qkv_tensor *x = qkv_tensor_new(QKV_F32, 1, &n);
    qkv_tensor_fill(x, 1.0f);
    qkv_ctx *a = qkv_ctx_new(), *b = qkv_ctx_new();
    qkv_rng_init(qkv_ctx_rng(a), 7);
    qkv_rng_init(qkv_ctx_rng(b), 7);
    qkv_tensor *ya = qkv_dropout(a, x, 0.25f), *yb = qkv_dropout(b, x, 0.25f);
    CHECK(ya && yb);
    if (!ya || !yb) goto done;
    CHECK(memcmp(ya->data, yb->data, sizeof(float) * (size_t)n) == 0); /* same seed, same mask */
    /* The generator advanced by ceil(n / 4) blocks, and element i used qkv_rng_uniform_at(seed, 0, i). */
    CHECK(qkv_ctx_rng(a)->counter == (uint64_t)(n + 3) / 4);
    int64_t kept = 0, mismatches = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = qkv_f32(ya)[i];
        bool keep = qkv_rng_uniform_at(7, 0, (uint64_t)i) >= 0.25f;
        kept += v != 0.0f;
        mismatches += keep != (v != 0.0f) || (keep && v != 1.0f / 0.75f);
    }
    CHECKF(mismatches == 0, "%lld elements differ from the counter-mode stream", (long long)mismatches);
    double frac = (double)kept / (double)n;
    CHECKF(fabs(frac - 0.75) < 0.01, "kept fraction %g, expected ~0.75", frac);
    /* Same agreement with a 64-bit seed and a counter that crosses 2^32 part-way (both halves of the Philox counter
     * and key in use), at a base that is not a multiple of the kernel's block group. */
    qkv_ctx *h = qkv_ctx_new();
    qkv_rng_init(qkv_ctx_rng(h), 0x123456789abcdefULL);
    qkv_ctx_rng(h)->counter = ((uint64_t)1 << 32) - 1001;
    qkv_tensor *yh = qkv_dropout(h, x, 0.5f);
    mismatches = 0;
    for (int64_t i = 0; yh && i < n; i++)
        mismatches += (qkv_rng_uniform_at(0x123456789abcdefULL, ((uint64_t)1 << 32) - 1001, (uint64_t)i) >= 0.5f) !=
                      (qkv_f32(yh)[i] != 0.0f);
    CHECKF(yh && mismatches == 0, "%lld elements differ across the 2^32 counter boundary", (long long)mismatches);
    qkv_ctx_free(h);
    /* A second call continues the stream: a different mask. */
    qkv_tensor *ya2 = qkv_dropout(a, x, 0.25f);
    CHECK(ya2 && memcmp(ya->data, ya2->data, sizeof(float) * (size_t)n) != 0);
    /* A different seed gives a different mask. */
    qkv_ctx_reset(b);
    qkv_rng_init(qkv_ctx_rng(b), 8);
    yb = qkv_dropout(b, x, 0.25f);
    CHECK(yb && memcmp(ya->data, yb->data, sizeof(float) * (size_t)n) != 0);
done:
    qkv_ctx_free(a);
    qkv_ctx_free(b);
    qkv_tensor_free(x);
}

TEST(dropout_identity) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = gc_rand(70, -1, 1, QKV_DIMS(3, 4));
    qkv_tensor_set_requires_grad(x, true);
    CHECK(qkv_dropout(c, x, 0.0f) == x);
    CHECK(qkv_ctx_tape_length(c) == 0 && qkv_ctx_rng(c)->counter == 0);
    qkv_ctx_set_training(c, false);
    CHECK(qkv_dropout(c, x, 0.9f) == x);
    CHECK(qkv_ctx_tape_length(c) == 0 && qkv_ctx_rng(c)->counter == 0);
    /* Bad p is an error in both modes. */
    CHECK(qkv_dropout(c, x, 1.0f) == NULL && strstr(qkv_last_error(), "dropout") && strstr(qkv_last_error(), "[0, 1)"));
    qkv_ctx_set_training(c, true);
    CHECK(qkv_dropout(c, x, -0.1f) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(qkv_dropout(c, x, NAN) == NULL);
    qkv_tensor_free(x);
    qkv_ctx_free(c);
}

/* ---- threads, errors, fixtures ---------------------------------------------------------------------------------- */

TEST(thread_count_independent) {
    /* Forward and backward through the parallel paths, bit-identical with 1 and 2 threads. */
    qkv_tensor *x = gc_rand(80, -3, 3, QKV_DIMS(64, 3, 257)), *g = gc_rand(81, 0.5f, 1.5f, QKV_DIMS(257));
    qkv_tensor *b = gc_rand(82, -1, 1, QKV_DIMS(257));
    qkv_tensor *xg[2] = {0}, *gg[2] = {0}, *out[2][4] = {{0}};
    qkv_tensor *ins[3] = {x, g, b};
    for (int t = 0; t < 2; t++) {
        qkv_threads_set(t + 1);
        qkv_ctx *c = qkv_ctx_new();
        for (int i = 0; i < 3; i++) {
            qkv_tensor_set_requires_grad(ins[i], true);
            qkv_tensor_zero_grad(ins[i]);
        }
        qkv_tensor *y[4] = {qkv_softmax(c, x, -1), qkv_log_softmax(c, x, 1), qkv_layer_norm(c, x, g, b, 1e-5f),
                            qkv_dropout(c, x, 0.1f)};
        qkv_tensor *loss = NULL;
        for (int k = 0; k < 4; k++) {
            CHECK_NN(y[k]);
            out[t][k] = y[k] ? qkv_tensor_clone(y[k]) : NULL;
            qkv_tensor *term = qkv_sum_all(c, qkv_mul(c, y[k], y[k]));
            loss = k ? qkv_add(c, loss, term) : term;
        }
        CHECK_OK(qkv_backward(c, loss));
        xg[t] = x->grad ? qkv_tensor_clone(x->grad) : NULL;
        gg[t] = g->grad ? qkv_tensor_clone(g->grad) : NULL;
        qkv_ctx_free(c);
    }
    qkv_threads_set(0);
    for (int k = 0; k < 4; k++)
        CHECKF(out[0][k] && out[1][k] &&
                   memcmp(out[0][k]->data, out[1][k]->data, sizeof(float) * (size_t)qkv_numel(out[0][k])) == 0,
               "output %d differs between 1 and 2 threads", k);
    CHECK(xg[0] && xg[1] && memcmp(xg[0]->data, xg[1]->data, sizeof(float) * (size_t)qkv_numel(x)) == 0);
    CHECK(gg[0] && gg[1] && memcmp(gg[0]->data, gg[1]->data, sizeof(float) * 257) == 0);
    for (int t = 0; t < 2; t++) {
        for (int k = 0; k < 4; k++) qkv_tensor_free(out[t][k]);
        qkv_tensor_free(xg[t]);
        qkv_tensor_free(gg[t]);
    }
    for (int i = 0; i < 3; i++) qkv_tensor_free(ins[i]);
}

TEST(bad_inputs_are_errors) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3)), *ids = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 3));
    qkv_tensor *g4 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(4)), *g23 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3));
    qkv_tensor *s = qkv_ctx_zeros(c, QKV_F32, 0, NULL);
    CHECK(qkv_softmax(c, x, 2) == NULL && strstr(qkv_last_error(), "softmax: axis 2"));
    CHECK(qkv_log_softmax(c, x, -3) == NULL && strstr(qkv_last_error(), "log_softmax"));
    CHECK(qkv_softmax(c, ids, -1) == NULL && strstr(qkv_last_error(), "float32"));
    CHECK(qkv_softmax(c, s, 0) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(qkv_layer_norm(c, x, g4, NULL, 1e-5f) == NULL && strstr(qkv_last_error(), "gamma") &&
          strstr(qkv_last_error(), "[4]") && strstr(qkv_last_error(), "[3]"));
    CHECK(qkv_layer_norm(c, x, NULL, g23, 1e-5f) == NULL && strstr(qkv_last_error(), "beta"));
    CHECK(qkv_layer_norm(c, x, NULL, NULL, -1.0f) == NULL && strstr(qkv_last_error(), "eps"));
    CHECK(qkv_layer_norm(c, ids, NULL, NULL, 1e-5f) == NULL && strstr(qkv_last_error(), "layer_norm"));
    CHECK(qkv_layer_norm(c, s, NULL, NULL, 1e-5f) == NULL && strstr(qkv_last_error(), "scalar"));
    CHECK(qkv_dropout(c, ids, 0.5f) == NULL && strstr(qkv_last_error(), "float32"));
    qkv_error_clear();
    CHECK(qkv_softmax(c, NULL, -1) == NULL && qkv_log_softmax(c, NULL, 0) == NULL);
    CHECK(qkv_layer_norm(c, NULL, g4, NULL, 1e-5f) == NULL && qkv_dropout(c, NULL, 0.5f) == NULL);
    CHECK(qkv_last_status() == QKV_OK);
    qkv_ctx_free(c);
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("ops_norm.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    struct {
        const char *key;
        sm_case s;
    } sm[] = {
        {"softmax_last", {false, -1, {0, 0}}},        {"softmax_axis1", {false, 1, {0, 0}}},
        {"softmax_axis0", {false, 0, {0, 0}}},        {"softmax_transposed", {false, -1, {0, 2}}},
        {"log_softmax_last", {true, -1, {0, 0}}},     {"log_softmax_axis1", {true, -2, {0, 0}}},
        {"log_softmax_transposed", {true, 0, {0, 2}}}, {"softmax_long_row", {false, -1, {0, 0}}},
        {"softmax_extreme", {false, -1, {0, 0}}},     {"log_softmax_extreme", {true, -1, {0, 0}}},
    };
    for (size_t k = 0; k < sizeof sm / sizeof sm[0]; k++)
        CHECKF(fixture_check(f, sm[k].key, f_softmax, &sm[k].s, 1e-4, 1e-5), "fixture %s", sm[k].key);
    struct {
        const char *key;
        ln_case l;
    } ln[] = {
        {"layer_norm", {true, true, false, 1e-5f}},         {"layer_norm_plain", {false, false, false, 1e-5f}},
        {"layer_norm_gamma", {true, false, false, 1e-6f}},  {"layer_norm_beta", {false, true, false, 1e-5f}},
        {"layer_norm_transposed", {true, true, true, 1e-5f}}, {"layer_norm_offset", {true, true, false, 1e-5f}},
        {"layer_norm_wide", {true, true, false, 1e-5f}},
    };
    for (size_t k = 0; k < sizeof ln / sizeof ln[0]; k++)
        CHECKF(fixture_check(f, ln[k].key, f_layer_norm, &ln[k].l, 1e-4, 1e-5), "fixture %s", ln[k].key);
    do_case p0 = {0.0f, false, false}, ev = {0.5f, true, false};
    CHECK(fixture_check(f, "dropout_p0", f_dropout, &p0, 1e-4, 1e-5));
    CHECK(fixture_check(f, "dropout_eval", f_dropout, &ev, 1e-4, 1e-5));
    qkv_st_close(f);
}

int main(void) {
    RUN(gradcheck_softmax);
    RUN(gradcheck_layer_norm);
    RUN(gradcheck_dropout);
    RUN(softmax_extremes);
    RUN(log_softmax_rows_into_a_buffer);
    RUN(layer_norm_statistics);
    RUN(dropout_mask);
    RUN(dropout_identity);
    RUN(thread_count_independent);
    RUN(bad_inputs_are_errors);
    RUN(pytorch_fixtures);
    return test_finish();
}
