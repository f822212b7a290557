/* Span loss (extractive QA): gradient check, PyTorch fixtures (tests/ref/ops_span.py), values by hand, bad input. */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "test.h"

static qkv_tensor *f_span(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_span_loss(c, in[0], in[1], in[2], in[3]);
}

TEST(gradcheck_span) {
    qkv_tensor *s = gc_rand(3, -2, 2, QKV_DIMS(3, 7)), *e = gc_rand(4, -2, 2, QKV_DIMS(3, 7));
    qkv_tensor *spans = qkv_tensor_new(QKV_I32, QKV_DIMS(3, 2)), *allowed = qkv_tensor_new(QKV_F32, QKV_DIMS(3, 7));
    int32_t g[6] = {2, 4, 6, 6, 3, 2};
    memcpy(qkv_i32(spans), g, sizeof g);
    for (int i = 0; i < 21; i++) qkv_f32(allowed)[i] = (i % 7) >= 2; /* positions 0, 1: the question */
    qkv_tensor_set_requires_grad(s, true);
    qkv_tensor_set_requires_grad(e, true);
    gc_opts o = gc_defaults();
    CHECK(gradcheck("span", f_span, 4, (qkv_tensor *[]){s, e, spans, allowed}, NULL, &o));
    qkv_tensor_free(s);
    qkv_tensor_free(e);
    qkv_tensor_free(spans);
    qkv_tensor_free(allowed);
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("ops_span.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    CHECK(fixture_check(f, "masked", f_span, NULL, 1e-5, 1e-6));
    CHECK(fixture_check(f, "all", f_span, NULL, 1e-5, 1e-6));
    qkv_st_close(f);
}

/* Equal logits over n allowed positions: each side's loss is log n; disallowed positions change nothing. */
TEST(values_by_hand) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 6)), *spans = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(1, 2));
    qkv_tensor *allowed = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 6));
    for (int j = 2; j < 6; j++) qkv_f32(allowed)[j] = 1;
    qkv_i32(spans)[0] = 2;
    qkv_i32(spans)[1] = 5;
    qkv_f32(x)[0] = 100; /* a huge question logit is outside the softmax */
    qkv_tensor *l = qkv_span_loss(c, x, x, spans, allowed);
    CHECK(l && fabsf(qkv_f32(l)[0] - logf(4)) < 1e-6f);
    qkv_ctx_free(c);
}

TEST(bad_input) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 5)), *spans = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 2));
    qkv_tensor *allowed = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 5));
    qkv_f32(allowed)[1] = 1;
    CHECK(!qkv_span_loss(c, x, x, spans, allowed) && strstr(qkv_last_error(), "row 0: gold start position 0"));
    qkv_i32(spans)[0] = 7;
    CHECK(!qkv_span_loss(c, x, x, spans, NULL) && strstr(qkv_last_error(), "outside [0, 5)"));
    qkv_tensor *y = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 4));
    CHECK(!qkv_span_loss(c, x, y, spans, NULL) && strstr(qkv_last_error(), "[B, T]"));
    CHECK(!qkv_span_loss(c, NULL, x, spans, NULL));
    qkv_ctx_free(c);
}

int main(void) {
    RUN(gradcheck_span);
    RUN(pytorch_fixtures);
    RUN(values_by_hand);
    RUN(bad_input);
    return test_finish();
}
