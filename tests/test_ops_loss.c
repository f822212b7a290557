/* Losses (cross_entropy, cross_entropy_linear, mse, cosine_similarity): gradient checks over options and reductions, PyTorch fixtures
 * (tests/ref/ops_loss.py), edge cases (all targets ignored, huge logits) and bad inputs. */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "test.h"

static qkv_tensor *ints(int ndim, const int64_t *shape, const int32_t *values) {
    qkv_tensor *t = qkv_tensor_new(QKV_I32, ndim, shape);
    if (t) memcpy(t->data, values, sizeof(int32_t) * (size_t)qkv_numel(t));
    return t;
}
#define INTS(shape_pair, ...) ints(shape_pair, (const int32_t[]){__VA_ARGS__})

/* Gradcheck with gradients on the inputs of `grad_mask` (bit i = input i); frees the inputs. */
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

/* Cross-entropy test arguments: inputs are logits, targets, then class_weight and token_weight when flagged. */
typedef struct {
    int ignore_index;
    float smoothing;
    qkv_reduction reduction;
    bool class_weight, token_weight;
    bool transpose; /* logits given as a transposed view of [C, N] */
} ce_args;

static qkv_tensor *as_1d(qkv_ctx *c, qkv_tensor *y) { /* the fixtures store scalar losses as [1] */
    return y && y->ndim == 0 ? qkv_reshape(c, y, QKV_DIMS(1)) : y;
}

static qkv_tensor *f_ce(qkv_ctx *c, qkv_tensor **in, void *u) {
    const ce_args *a = u;
    qkv_ce_opts o = qkv_ce_defaults();
    o.ignore_index = a->ignore_index;
    o.label_smoothing = a->smoothing;
    o.reduction = a->reduction;
    int k = 2;
    if (a->class_weight) o.class_weight = in[k++];
    if (a->token_weight) o.token_weight = in[k++];
    qkv_tensor *z = a->transpose ? qkv_transpose(c, in[0], 0, 1) : in[0];
    return as_1d(c, qkv_cross_entropy(c, z, in[1], &o));
}

static const qkv_reduction REDS[3] = {QKV_REDUCE_MEAN, QKV_REDUCE_SUM, QKV_REDUCE_NONE};
static const char *const RED_NAMES[3] = {"mean", "sum", "none"};

TEST(gradcheck_cross_entropy) {
    char name[64];
    ce_args plain = {.ignore_index = -100};
    CHECK(check("ce 2-d mean", f_ce, 2,
                (qkv_tensor *[]){gc_rand(1, -2, 2, QKV_DIMS(4, 5)), INTS(QKV_DIMS(4), 0, 4, 2, 4)}, &plain, 1));
    CHECK(check("ce 3-d ignore -100", f_ce, 2,
                (qkv_tensor *[]){gc_rand(2, -2, 2, QKV_DIMS(2, 3, 4)), INTS(QKV_DIMS(2, 3), 3, -100, 0, 1, 1, -100)},
                &plain, 1));
    ce_args ign0 = {.ignore_index = 0, .reduction = QKV_REDUCE_MEAN};
    CHECK(check("ce ignore_index 0", f_ce, 2,
                (qkv_tensor *[]){gc_rand(3, -2, 2, QKV_DIMS(5, 3)), INTS(QKV_DIMS(5), 0, 2, 1, 0, 2)}, &ign0, 1));
    qkv_tensor *t0d = qkv_tensor_new(QKV_I32, 0, (const int64_t[]){1}); /* one token: logits [C], target 0-d */
    if (t0d) qkv_i32(t0d)[0] = 2;
    ce_args none = {.ignore_index = -100, .reduction = QKV_REDUCE_NONE};
    CHECK(check("ce 1-d logits", f_ce, 2, (qkv_tensor *[]){gc_rand(5, -2, 2, QKV_DIMS(4)), t0d}, &none, 1));
    ce_args tr = {.ignore_index = -100, .transpose = true};
    CHECK(check("ce transposed logits", f_ce, 2,
                (qkv_tensor *[]){gc_rand(4, -2, 2, QKV_DIMS(6, 3)), INTS(QKV_DIMS(3), 5, 0, 2)}, &tr, 1));
    for (int r = 0; r < 3; r++) {
        ce_args ws = {.ignore_index = -1, .smoothing = 0.15f, .reduction = REDS[r], .class_weight = true};
        snprintf(name, sizeof name, "ce weight+smooth %s", RED_NAMES[r]);
        CHECK(check(name, f_ce, 3,
                    (qkv_tensor *[]){gc_rand(10 + r, -2, 2, QKV_DIMS(2, 3, 4)),
                                     INTS(QKV_DIMS(2, 3), 3, -1, 0, 1, 1, 2), gc_rand(20 + r, 0.2f, 2, QKV_DIMS(4))},
                    &ws, 1));
        ce_args sm = {.ignore_index = -100, .smoothing = 0.3f, .reduction = REDS[r]};
        snprintf(name, sizeof name, "ce smooth %s", RED_NAMES[r]);
        CHECK(check(name, f_ce, 2,
                    (qkv_tensor *[]){gc_rand(30 + r, -2, 2, QKV_DIMS(4, 5)), INTS(QKV_DIMS(4), 1, -100, 4, 4)}, &sm,
                    1));
        ce_args tw = {.ignore_index = -1, .smoothing = 0.1f, .reduction = REDS[r], .class_weight = true,
                      .token_weight = true};
        snprintf(name, sizeof name, "ce token weight %s", RED_NAMES[r]);
        CHECK(check(name, f_ce, 4,
                    (qkv_tensor *[]){gc_rand(40 + r, -2, 2, QKV_DIMS(2, 3, 4)),
                                     INTS(QKV_DIMS(2, 3), 3, -1, 0, 1, 1, 2), gc_rand(50 + r, 0.2f, 2, QKV_DIMS(4)),
                                     gc_rand(60 + r, 0, 1, QKV_DIMS(2, 3))},
                    &tw, 1));
    }
}

static qkv_tensor *f_mse(qkv_ctx *c, qkv_tensor **in, void *u) {
    return as_1d(c, qkv_mse(c, in[0], in[1], *(const qkv_reduction *)u));
}

typedef struct {
    int axis;
    float eps;
} cos_args;

static qkv_tensor *f_cos(qkv_ctx *c, qkv_tensor **in, void *u) {
    const cos_args *a = u;
    return qkv_cosine_similarity(c, in[0], in[1], a->axis, a->eps);
}

TEST(gradcheck_mse_cosine) {
    char name[64];
    for (int r = 0; r < 3; r++) {
        snprintf(name, sizeof name, "mse broadcast %s", RED_NAMES[r]);
        CHECK(check(name, f_mse, 2,
                    (qkv_tensor *[]){gc_rand(70 + r, -1, 1, QKV_DIMS(2, 3, 4)), gc_rand(80 + r, -1, 1, QKV_DIMS(3, 1))},
                    (void *)&REDS[r], 3));
    }
    cos_args last = {.axis = -1, .eps = 1e-8f}, mid = {.axis = 1, .eps = 1e-8f}, first = {.axis = 0, .eps = 1e-8f};
    CHECK(check("cosine last axis", f_cos, 2,
                (qkv_tensor *[]){gc_rand(90, -1, 1, QKV_DIMS(3, 5)), gc_rand(91, -1, 1, QKV_DIMS(3, 5))}, &last, 3));
    CHECK(check("cosine axis 1 broadcast", f_cos, 2,
                (qkv_tensor *[]){gc_rand(92, -1, 1, QKV_DIMS(2, 4, 3)), gc_rand(93, -1, 1, QKV_DIMS(4, 1))}, &mid, 3));
    CHECK(check("cosine axis 0", f_cos, 2,
                (qkv_tensor *[]){gc_rand(94, -1, 1, QKV_DIMS(4, 2)), gc_rand(95, -1, 1, QKV_DIMS(4, 2))}, &first, 3));
}

static bool has(const char *needle) {
    if (strstr(qkv_last_error(), needle)) return true;
    printf("  expected \"%s\" in the error: %s\n", needle, qkv_last_error());
    return false;
}

TEST(cross_entropy_edge_cases) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *z = gc_rand(100, -1, 1, QKV_DIMS(3, 4));
    qkv_tensor *all_ignored = INTS(QKV_DIMS(3), -100, -100, -100);
    qkv_tensor_set_requires_grad(z, true);
    qkv_ce_opts o = qkv_ce_defaults();
    CHECK(o.ignore_index == -100 && o.reduction == QKV_REDUCE_MEAN && o.label_smoothing == 0.0f);
    o.label_smoothing = 0.1f;
    /* torch: the mean over no tokens is NaN (0 / 0); the gradient stays zero. */
    qkv_tensor *l = qkv_cross_entropy(c, z, all_ignored, &o);
    CHECK(l && l->ndim == 0 && isnan(qkv_f32(l)[0]));
    if (l) CHECK_OK(qkv_backward(c, l));
    CHECK(z->grad != NULL);
    for (int i = 0; z->grad && i < 12; i++) CHECK(qkv_f32(z->grad)[i] == 0.0f);
    o.reduction = QKV_REDUCE_SUM;
    l = qkv_cross_entropy(c, z, all_ignored, &o);
    CHECK(l && qkv_f32(l)[0] == 0.0f);
    o.reduction = QKV_REDUCE_NONE;
    l = qkv_cross_entropy(c, z, all_ignored, &o);
    CHECK(l && l->ndim == 1 && l->shape[0] == 3 && qkv_f32(l)[0] == 0.0f && qkv_f32(l)[2] == 0.0f);

    /* Huge logits: the loss is finite and exact (the max is subtracted first). */
    qkv_tensor *big = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3));
    float *b = big->data;
    b[0] = 1000.0f; /* row 0: [1000, 0, 0], target 0: loss ~ 2 e^-1000 = 0 */
    b[3] = -1000.0f; b[4] = 1000.0f; b[5] = 1000.0f; /* row 1: target 0: loss = 2000 + log 2 */
    qkv_tensor *t0 = INTS(QKV_DIMS(2), 0, 0);
    l = qkv_cross_entropy(c, big, t0, &(qkv_ce_opts){.ignore_index = -100, .reduction = QKV_REDUCE_NONE});
    CHECK(l && fabsf(qkv_f32(l)[0]) < 1e-6f && fabsf(qkv_f32(l)[1] - (2000.0f + logf(2.0f))) < 1e-2f);

    /* NULL options are the defaults. */
    qkv_tensor *t = INTS(QKV_DIMS(3), 1, -100, 3);
    qkv_tensor *l1 = qkv_cross_entropy(c, z, t, NULL);
    qkv_tensor *l2 = qkv_cross_entropy(c, z, t, &(qkv_ce_opts){.ignore_index = -100});
    CHECK(l1 && l2 && qkv_f32(l1)[0] == qkv_f32(l2)[0]);

    qkv_tensor_free(z);
    qkv_tensor_free(all_ignored);
    qkv_tensor_free(t0);
    qkv_tensor_free(t);
    qkv_ctx_free(c);
}

TEST(bad_inputs_are_errors) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *z = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 5));
    qkv_tensor *t = INTS(QKV_DIMS(2, 3), 0, 1, 2, 3, 4, 0), *out_of_range = INTS(QKV_DIMS(2, 3), 0, 1, 2, 3, 5, 0);
    qkv_tensor *negative = INTS(QKV_DIMS(2, 3), 0, -7, 2, 3, 4, 0);
    qkv_tensor *t_short = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 2)), *t_f32 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3));
    qkv_tensor *w4 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(4)), *tw = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(3, 2));

    CHECK(qkv_cross_entropy(c, z, t, NULL) != NULL);
    CHECK(qkv_cross_entropy(c, z, out_of_range, NULL) == NULL && qkv_last_status() == QKV_ERR_RANGE);
    CHECK(has("target 5") && has("[1, 1]") && has("[0, 5)"));
    CHECK(qkv_cross_entropy(c, z, negative, NULL) == NULL && qkv_last_status() == QKV_ERR_RANGE && has("-7"));
    CHECK(qkv_cross_entropy(c, z, t_short, NULL) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(has("[2, 3, 5]") && has("[2, 2]"));
    CHECK(qkv_cross_entropy(c, z, t_f32, NULL) == NULL && qkv_last_status() == QKV_ERR_INVALID && has("int32"));
    CHECK(qkv_cross_entropy(c, t_f32, t, NULL) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    qkv_ce_opts o = qkv_ce_defaults();
    o.class_weight = w4;
    CHECK(qkv_cross_entropy(c, z, t, &o) == NULL && has("class_weight") && has("[5]"));
    o = qkv_ce_defaults();
    o.token_weight = tw;
    CHECK(qkv_cross_entropy(c, z, t, &o) == NULL && has("token_weight") && has("[3, 2]"));
    o = qkv_ce_defaults();
    o.label_smoothing = 1.0f;
    CHECK(qkv_cross_entropy(c, z, t, &o) == NULL && has("label_smoothing"));
    o = qkv_ce_defaults();
    o.reduction = (qkv_reduction)7;
    CHECK(qkv_cross_entropy(c, z, t, &o) == NULL && has("reduction"));

    qkv_tensor *a = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3)), *b = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(4));
    CHECK(qkv_mse(c, a, b, QKV_REDUCE_MEAN) == NULL && qkv_last_status() == QKV_ERR_INVALID && has("[4]"));
    CHECK(qkv_mse(c, a, t, QKV_REDUCE_MEAN) == NULL && has("float32"));
    CHECK(qkv_mse(c, a, a, (qkv_reduction)-1) == NULL && has("reduction"));
    CHECK(qkv_cosine_similarity(c, a, b, 1, 1e-8f) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(qkv_cosine_similarity(c, a, a, 2, 1e-8f) == NULL && has("axis 2"));
    CHECK(qkv_cosine_similarity(c, a, a, 1, -1.0f) == NULL && has("eps"));

    qkv_error_clear();
    CHECK(qkv_cross_entropy(c, NULL, t, NULL) == NULL && qkv_mse(c, a, NULL, QKV_REDUCE_SUM) == NULL);
    CHECK(qkv_cosine_similarity(c, NULL, a, 0, 1e-8f) == NULL && qkv_last_status() == QKV_OK);

    qkv_tensor_free(t);
    qkv_tensor_free(out_of_range);
    qkv_tensor_free(negative);
    qkv_ctx_free(c);
}

/* ---- fixtures ------------------------------------------------------------------------------------------------ */

static qkv_tensor *fx_cos(qkv_ctx *c, qkv_tensor **in, void *u) {
    const cos_args *a = u;
    return qkv_cosine_similarity(c, in[0], in[1], a->axis, a->eps);
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("ops_loss.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    const double rtol = 1e-4, atol = 1e-5;
    ce_args plain = {.ignore_index = -100}, ign0 = {.ignore_index = 0};
    CHECK(fixture_check(f, "ce_basic", f_ce, &plain, rtol, atol));
    CHECK(fixture_check(f, "ce_3d", f_ce, &plain, rtol, atol));
    CHECK(fixture_check(f, "ce_ignore0", f_ce, &ign0, rtol, atol));
    CHECK(fixture_check(f, "ce_big", f_ce, &plain, rtol, atol));
    char key[64];
    for (int r = 0; r < 3; r++) {
        ce_args ws = {.ignore_index = -1, .smoothing = 0.1f, .reduction = REDS[r], .class_weight = true};
        snprintf(key, sizeof key, "ce_ws_%s", RED_NAMES[r]);
        CHECK(fixture_check(f, key, f_ce, &ws, rtol, atol));
        ce_args sm = {.ignore_index = -100, .smoothing = 0.25f, .reduction = REDS[r]};
        snprintf(key, sizeof key, "ce_smooth_%s", RED_NAMES[r]);
        CHECK(fixture_check(f, key, f_ce, &sm, rtol, atol));
        ce_args tw = {.ignore_index = -1, .smoothing = 0.1f, .reduction = REDS[r], .class_weight = true,
                      .token_weight = true};
        snprintf(key, sizeof key, "ce_tw_%s", RED_NAMES[r]);
        CHECK(fixture_check(f, key, f_ce, &tw, rtol, atol));
        snprintf(key, sizeof key, "mse_%s", RED_NAMES[r]);
        CHECK(fixture_check(f, key, f_mse, (void *)&REDS[r], rtol, atol));
    }
    cos_args last = {.axis = -1, .eps = 1e-8f}, mid = {.axis = 1, .eps = 1e-8f}, clamp = {.axis = 1, .eps = 0.1f};
    CHECK(fixture_check(f, "cos_last", fx_cos, &last, rtol, atol));
    CHECK(fixture_check(f, "cos_axis1", fx_cos, &mid, rtol, atol));
    CHECK(fixture_check(f, "cos_eps", fx_cos, &clamp, rtol, atol)); /* norms below eps: torch's clamped gradient */
    qkv_st_close(f);
}

/* cross_entropy_linear against the dense composition it replaces: the same loss and the same gradients to h, w and
 * bias with rows dropped (weight 0, ignore_index), for each reduction, smoothing and class weights. Each side runs
 * on its own copies of the leaves, in its own context. */
static qkv_tensor *ce_linear_side(qkv_ctx *c, bool gathered, qkv_tensor **leaf, qkv_tensor *t, const qkv_ce_opts *o) {
    if (gathered) return qkv_cross_entropy_linear(c, leaf[0], leaf[1], leaf[2], t, o);
    return qkv_cross_entropy(c, qkv_linear(c, leaf[0], leaf[1], leaf[2]), t, o);
}

/* cross_entropy_linear by finite differences: h [2, 4, 3], w [5, 3], bias [5], with zero-weight rows gathered out. */
static qkv_tensor *f_ce_linear(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    qkv_ce_opts o = qkv_ce_defaults();
    o.token_weight = in[4];
    return as_1d(c, qkv_cross_entropy_linear(c, in[0], in[1], in[2], in[3], &o));
}

TEST(gradcheck_cross_entropy_linear) {
    qkv_tensor *tw = qkv_tensor_new(QKV_F32, QKV_DIMS(2, 4));
    if (tw)
        for (int i = 0; i < 8; i++) qkv_f32(tw)[i] = i % 4 < 2 ? 0.0f : 0.5f + 0.25f * (float)i; /* a prompt each */
    CHECK(check("ce_linear gathered rows", f_ce_linear, 5,
                (qkv_tensor *[]){gc_rand(11, -1, 1, QKV_DIMS(2, 4, 3)), gc_rand(12, -1, 1, QKV_DIMS(5, 3)),
                                 gc_rand(13, -1, 1, QKV_DIMS(5)), INTS(QKV_DIMS(2, 4), 0, 1, 2, 3, 4, 0, -100, 2), tw},
                NULL, 7));
}

TEST(cross_entropy_linear_matches_dense) {
    enum { B = 3, T = 7, D = 6, C = 11 };
    for (int cfg = 0; cfg < 16; cfg++) {
        bool sum = cfg & 1, smooth = cfg & 2, cw = cfg & 4, bias = cfg & 8;
        qkv_tensor *leaf[2][3], *tw = gc_rand(7, 0.5, 2, QKV_DIMS(B, T)), *cwt = gc_rand(8, 0.2, 1.5, QKV_DIMS(C));
        qkv_tensor *t = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
        float *w = qkv_f32(tw);
        for (int i = 0; i < B * T; i++) {
            qkv_i32(t)[i] = (i * 5 + cfg) % C;
            if (i % T < 4) w[i] = 0.0f; /* a prompt */
        }
        qkv_i32(t)[T + 5] = -100; /* an ignored counted position */
        for (int s = 0; s < 2; s++) {
            leaf[s][0] = gc_rand(1, -1, 1, QKV_DIMS(B, T, D));
            leaf[s][1] = gc_rand(2, -1, 1, QKV_DIMS(C, D));
            leaf[s][2] = bias ? gc_rand(3, -1, 1, QKV_DIMS(C)) : NULL;
            for (int k = 0; k < 3; k++)
                if (leaf[s][k]) qkv_tensor_set_requires_grad(leaf[s][k], true);
        }
        qkv_ce_opts o = qkv_ce_defaults();
        o.reduction = sum ? QKV_REDUCE_SUM : QKV_REDUCE_MEAN;
        o.label_smoothing = smooth ? 0.1f : 0.0f;
        o.class_weight = cw ? cwt : NULL;
        o.token_weight = tw;
        qkv_ctx *c[2] = {qkv_ctx_new(), qkv_ctx_new()};
        qkv_tensor *l[2];
        size_t tape[2];
        for (int s = 0; s < 2; s++) {
            l[s] = ce_linear_side(c[s], s == 1, leaf[s], t, &o);
            CHECK_NN(l[s]);
            tape[s] = qkv_ctx_tape_length(c[s]);
            if (l[s]) CHECK_OK(qkv_backward(c[s], l[s]));
        }
        CHECKF(tape[1] != tape[0], "cfg %d: the rows were not gathered", cfg);
        if (l[0] && l[1]) {
            CHECKF(fabsf(qkv_f32(l[1])[0] - qkv_f32(l[0])[0]) <= 1e-6f * fabsf(qkv_f32(l[0])[0]),
                   "cfg %d: loss %.9g, dense %.9g", cfg, qkv_f32(l[1])[0], qkv_f32(l[0])[0]);
            const char *names[3] = {"d h", "d w", "d bias"};
            for (int k = 0; k < 3; k++) {
                if (!leaf[0][k]) continue;
                CHECK(leaf[0][k]->grad && leaf[1][k]->grad);
                if (leaf[0][k]->grad && leaf[1][k]->grad)
                    CHECKF(test_allclose(names[k], leaf[1][k]->grad, leaf[0][k]->grad, 1e-5, 1e-7), "cfg %d: %s",
                           cfg, names[k]);
            }
            /* a dropped row gets exactly zero gradient, a kept one does not */
            CHECK(leaf[1][0]->grad && qkv_f32(leaf[1][0]->grad)[0] == 0.0f &&
                  qkv_f32(leaf[1][0]->grad)[(T + 4) * D] != 0.0f);
        }
        for (int s = 0; s < 2; s++) {
            qkv_ctx_free(c[s]);
            for (int k = 0; k < 3; k++) qkv_tensor_free(leaf[s][k]);
        }
        qkv_tensor_free(tw);
        qkv_tensor_free(cwt);
        qkv_tensor_free(t);
    }
    /* Nothing to drop, or reduction none: exactly the dense path (no gather on the tape). */
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *h = gc_rand(4, -1, 1, QKV_DIMS(2, 3)), *w = gc_rand(5, -1, 1, QKV_DIMS(4, 3));
    qkv_tensor *t = INTS(QKV_DIMS(2), 1, 3);
    qkv_tensor_set_requires_grad(h, true);
    qkv_ce_opts o = qkv_ce_defaults();
    qkv_tensor *a = qkv_cross_entropy_linear(c, h, w, NULL, t, &o);
    size_t n1 = qkv_ctx_tape_length(c);
    qkv_tensor *b = qkv_cross_entropy(c, qkv_linear(c, h, w, NULL), t, &o);
    CHECK(a && b && qkv_f32(a)[0] == qkv_f32(b)[0] && qkv_ctx_tape_length(c) == 2 * n1);
    /* a bad target among dropped rows is still the dense path's error */
    qkv_tensor *tw = gc_rand(6, 1, 1, QKV_DIMS(2));
    qkv_f32(tw)[0] = 0.0f;
    qkv_i32(t)[0] = 4;
    o.token_weight = tw;
    CHECK(!qkv_cross_entropy_linear(c, h, w, NULL, t, &o) && qkv_last_status() == QKV_ERR_RANGE);
    qkv_ctx_free(c);
    qkv_tensor_free(h);
    qkv_tensor_free(w);
    qkv_tensor_free(t);
    qkv_tensor_free(tw);
}

int main(void) {
    RUN(gradcheck_cross_entropy);
    RUN(gradcheck_mse_cosine);
    RUN(cross_entropy_edge_cases);
    RUN(gradcheck_cross_entropy_linear);
    RUN(cross_entropy_linear_matches_dense);
    RUN(bad_inputs_are_errors);
    RUN(pytorch_fixtures);
    return test_finish();
}
