/* Binary cross-entropy on logits: gradient checks and PyTorch fixtures (tests/ref/ops_bce.py). */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "test.h"

static qkv_reduction red_of(void *u) { return u ? *(qkv_reduction *)u : QKV_REDUCE_MEAN; }

static qkv_tensor *f_bce(qkv_ctx *c, qkv_tensor **in, void *u) {
    qkv_tensor *l = qkv_bce_with_logits(c, in[0], in[1], NULL, red_of(u));
    return red_of(u) == QKV_REDUCE_NONE ? l : qkv_reshape(c, l, QKV_DIMS(1));
}
static qkv_tensor *f_bce_pw(qkv_ctx *c, qkv_tensor **in, void *u) {
    qkv_tensor *l = qkv_bce_with_logits(c, in[0], in[1], in[2], red_of(u));
    return red_of(u) == QKV_REDUCE_NONE ? l : qkv_reshape(c, l, QKV_DIMS(1));
}

TEST(gradcheck_bce) {
    qkv_reduction reds[3] = {QKV_REDUCE_MEAN, QKV_REDUCE_SUM, QKV_REDUCE_NONE};
    for (int r = 0; r < 3; r++) {
        qkv_tensor *x = gc_rand(1, -3, 3, QKV_DIMS(3, 4)), *y = gc_rand(2, 0, 1, QKV_DIMS(3, 4));
        qkv_tensor *pw = gc_rand(3, 0.5f, 2, QKV_DIMS(4));
        qkv_tensor_set_requires_grad(x, true);
        qkv_tensor_set_requires_grad(y, true);
        CHECK(gradcheck("bce", f_bce, 2, (qkv_tensor *[]){x, y}, &reds[r], NULL));
        qkv_tensor_zero_grad(x);
        qkv_tensor_zero_grad(y);
        CHECK(gradcheck("bce pos_weight", f_bce_pw, 3, (qkv_tensor *[]){x, y, pw}, &reds[r], NULL));
        qkv_tensor_free(x);
        qkv_tensor_free(y);
        qkv_tensor_free(pw);
    }
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("ops_bce.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    qkv_reduction sum = QKV_REDUCE_SUM, none = QKV_REDUCE_NONE;
    CHECK(fixture_check(f, "mean", f_bce, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "sum_pos_weight", f_bce_pw, &sum, 1e-4, 1e-5));
    CHECK(fixture_check(f, "none", f_bce, &none, 1e-4, 1e-5));
    CHECK(fixture_check(f, "extreme", f_bce, &none, 1e-4, 1e-5));
    qkv_st_close(f);
}

TEST(bad_input) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3)), *y = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 4));
    CHECK(qkv_bce_with_logits(c, x, y, NULL, QKV_REDUCE_MEAN) == NULL && strstr(qkv_last_error(), "broadcast"));
    qkv_tensor *pw = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(5));
    CHECK(qkv_bce_with_logits(c, x, x, pw, QKV_REDUCE_MEAN) == NULL);
    qkv_tensor *yi = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 3));
    CHECK(qkv_bce_with_logits(c, x, yi, NULL, QKV_REDUCE_MEAN) == NULL && strstr(qkv_last_error(), "float32"));
    qkv_ctx_free(c);
}

int main(void) {
    RUN(gradcheck_bce);
    RUN(pytorch_fixtures);
    RUN(bad_input);
    return test_finish();
}
