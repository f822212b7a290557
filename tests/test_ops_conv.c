/* Conv1d (channels last) and max-over-time pooling: PyTorch fixtures (tests/ref/ops_conv.py), finite differences,
 * a hand-computed case, the module's output mask and bad input. */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "qkv/nn.h"
#include "test.h"

typedef struct {
    int64_t padding;
    bool bias;
} conv_opts;

static qkv_tensor *f_conv(qkv_ctx *c, qkv_tensor **in, void *u) {
    const conv_opts *o = u;
    return qkv_conv1d(c, in[0], in[1], o->bias ? in[2] : NULL, o->padding);
}

static qkv_tensor *f_max(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_nn_masked_max(c, in[0], in[1]);
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("ops_conv.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    conv_opts valid = {0, true}, padded = {2, true}, wide = {4, false}, one = {1, true};
    CHECK(fixture_check(f, "valid", f_conv, &valid, 1e-4, 1e-5));
    CHECK(fixture_check(f, "padded", f_conv, &padded, 1e-4, 1e-5));
    CHECK(fixture_check(f, "wide_nobias", f_conv, &wide, 1e-4, 1e-5));
    CHECK(fixture_check(f, "one_row", f_conv, &one, 1e-4, 1e-5));
    CHECK(fixture_check(f, "width_is_length", f_conv, &valid, 1e-4, 1e-5));
    CHECK(fixture_check(f, "masked_max", f_max, NULL, 1e-6, 1e-7));
    qkv_st_close(f);
}

TEST(gradcheck_conv) {
    const conv_opts cases[] = {{0, true}, {2, true}, {3, false}};
    const int64_t widths[] = {3, 2, 4};
    for (int i = 0; i < 3; i++) {
        qkv_tensor *x = gc_rand(40 + i, -1, 1, QKV_DIMS(2, 5, 3));
        qkv_tensor *w = gc_rand(50 + i, -1, 1, QKV_DIMS(4, 3, widths[i]));
        qkv_tensor *b = gc_rand(60 + i, -1, 1, QKV_DIMS(4));
        qkv_tensor_set_requires_grad(x, true);
        qkv_tensor_set_requires_grad(w, true);
        qkv_tensor_set_requires_grad(b, true);
        gc_opts g = gc_defaults();
        g.eps = 1e-2;
        CHECK(gradcheck("conv1d", f_conv, cases[i].bias ? 3 : 2, (qkv_tensor *[]){x, w, b}, (void *)&cases[i], &g));
        qkv_tensor_free(x);
        qkv_tensor_free(w);
        qkv_tensor_free(b);
    }
}

TEST(gradcheck_masked_max) {
    /* Distinct values spaced far beyond eps, so no difference crosses a tie. */
    qkv_tensor *x = qkv_tensor_new(QKV_F32, QKV_DIMS(2, 4, 3));
    for (int i = 0; i < 24; i++) qkv_f32(x)[i] = (float)((i * 7) % 24) * 0.25f - 3.0f;
    qkv_tensor *pad = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 4));
    const int32_t pv[] = {0, 0, 0, 0, 0, 1, 0, 1};
    qkv_tensor_load(pad, pv, sizeof pv);
    qkv_tensor_set_requires_grad(x, true);
    gc_opts g = gc_defaults();
    CHECK(gradcheck("masked_max", f_max, 2, (qkv_tensor *[]){x, pad}, NULL, &g));
    qkv_tensor_free(x);
    qkv_tensor_free(pad);
}

/* y[t] = sum_k x[t + k - p] w[k] with one channel, written out. */
TEST(values_by_hand) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(1, 4, 1)), *w = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(1, 1, 2));
    const float xv[] = {1, 2, 3, 4}, wv[] = {10, 1};
    memcpy(qkv_f32(x), xv, sizeof xv);
    memcpy(qkv_f32(w), wv, sizeof wv);
    qkv_tensor *y = qkv_conv1d(c, x, w, NULL, 1); /* [0 1 2 3 4 0] -> 1, 12, 23, 34, 40 */
    const float want[] = {1, 12, 23, 34, 40};
    CHECK(y && y->shape[1] == 5);
    for (int t = 0; y && t < 5; t++) CHECKF(qkv_f32(y)[t] == want[t], "y[%d] = %g, want %g", t, qkv_f32(y)[t], want[t]);
    /* Pooling: the unpadded maximum; a row of padding alone gives 0. */
    qkv_tensor *v = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(2, 3, 1)), *pad = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 3));
    const float vv[] = {-5, 9, -1, 3, 3, 3};
    memcpy(qkv_f32(v), vv, sizeof vv);
    qkv_i32(pad)[1] = 1;
    qkv_i32(pad)[3] = qkv_i32(pad)[4] = qkv_i32(pad)[5] = 1;
    qkv_tensor *m = qkv_nn_masked_max(c, v, pad);
    CHECK(m && qkv_f32(m)[0] == -1.0f && qkv_f32(m)[1] == 0.0f);
    qkv_ctx_free(c);
}

/* The module reads padded steps as zeros: a short sentence padded in a batch gives its own outputs, and the output
 * mask marks the windows holding no token. */
TEST(module_padding) {
    qkv_rng rng;
    qkv_rng_init(&rng, 9);
    qkv_params *p = qkv_params_new();
    qkv_nn_conv1d conv;
    CHECK_OK(qkv_nn_conv1d_init(&conv, p, "conv", 3, 4, 3, 2, &rng));
    qkv_tensor *w = qkv_params_find(p, "conv.weight");
    CHECK(w && w->shape[0] == 4 && w->shape[1] == 3 && w->shape[2] == 3);
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(1, 5, 3));
    for (int i = 0; i < 15; i++) qkv_f32(x)[i] = sinf((float)i);
    qkv_tensor *pad = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 5));
    qkv_f32(pad)[3] = qkv_f32(pad)[4] = 1;
    qkv_tensor *op = NULL;
    qkv_tensor *y = qkv_nn_conv1d_forward(c, &conv, x, pad, &op);
    qkv_tensor *x2 = qkv_slice(c, x, 1, 0, 3, 1);
    qkv_tensor *y2 = qkv_nn_conv1d_forward(c, &conv, x2, NULL, NULL);
    CHECK(y && y2 && op && y->shape[1] == 7 && y2->shape[1] == 5);
    for (int i = 0; y && y2 && i < 5 * 4; i++) CHECK(fabsf(qkv_f32(y)[i] - qkv_f32(y2)[i]) < 1e-6f);
    /* Windows start at t - 2: outputs 0..4 touch tokens 0..2, outputs 5 and 6 only padding. */
    const float want[] = {0, 0, 0, 0, 0, 1, 1};
    for (int t = 0; op && t < 7; t++) CHECK(qkv_f32(op)[t] == want[t]);
    qkv_ctx_free(c);
    qkv_params_free(p);
}

TEST(bad_input) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 4)), *w = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(5, 4, 4));
    CHECK(qkv_conv1d(c, x, w, NULL, 0) == NULL && strstr(qkv_last_error(), "width"));
    CHECK(qkv_conv1d(c, x, w, NULL, 1) != NULL);
    qkv_tensor *w2 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(5, 3, 2));
    CHECK(qkv_conv1d(c, x, w2, NULL, 0) == NULL && strstr(qkv_last_error(), "[out, in, width]"));
    qkv_tensor *b = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(4));
    CHECK(qkv_conv1d(c, x, w, b, 1) == NULL && strstr(qkv_last_error(), "bias"));
    CHECK(qkv_conv1d(c, x, w, NULL, -1) == NULL && strstr(qkv_last_error(), "padding"));
    CHECK(qkv_conv1d(c, NULL, w, NULL, 0) == NULL);
    qkv_tensor *x2 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(3, 4));
    CHECK(qkv_nn_masked_max(c, x2, NULL) == NULL && strstr(qkv_last_error(), "[B, T, D]"));
    qkv_tensor *badpad = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 4));
    CHECK(qkv_nn_masked_max(c, x, badpad) == NULL && strstr(qkv_last_error(), "padding mask"));
    qkv_ctx_free(c);
}

int main(void) {
    RUN(pytorch_fixtures);
    RUN(gradcheck_conv);
    RUN(gradcheck_masked_max);
    RUN(values_by_hand);
    RUN(module_padding);
    RUN(bad_input);
    return test_finish();
}
