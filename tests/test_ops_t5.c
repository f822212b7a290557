/* T5's ops: relative position buckets (against T5's own function over offsets -1000..1000), the relative position
 * bias and its table gradient, RMS norm, and attention with the bias added to unscaled scores: gradient checks and
 * PyTorch fixtures (tests/ref/ops_t5.py). */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "qkv/attention.h"
#include "test.h"

typedef struct {
    int64_t Tq, Tk, q_offset;
    bool bidirectional;
    int max_distance;
} rpb_case;

static qkv_tensor *f_rpb(qkv_ctx *c, qkv_tensor **in, void *u) {
    const rpb_case *r = u;
    return qkv_relative_position_bias(c, in[0], r->Tq, r->Tk, r->q_offset, r->bidirectional, r->max_distance);
}

typedef struct {
    bool gamma, transpose;
    float eps;
} rms_case;

static qkv_tensor *f_rms(qkv_ctx *c, qkv_tensor **in, void *u) {
    const rms_case *r = u;
    qkv_tensor *x = r->transpose ? qkv_transpose(c, in[0], 0, 1) : in[0];
    return qkv_rms_norm(c, x, r->gamma ? in[1] : NULL, r->eps);
}

/* softmax(Q K^T + bias(table)) V, no scaling, as T5's attention. */
static qkv_tensor *f_t5_attention(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    qkv_sdpa_opts o = qkv_sdpa_defaults();
    o.scale = 1.0f;
    o.bias = qkv_relative_position_bias(c, in[3], in[0]->shape[2], in[1]->shape[2], 0, true, 32);
    return o.bias ? qkv_sdpa(c, in[0], in[1], in[2], &o) : NULL;
}

static qkv_tensor *grad_rand(uint64_t seed, float lo, float hi, int ndim, const int64_t *shape) {
    qkv_tensor *t = gc_rand(seed, lo, hi, ndim, shape);
    qkv_tensor_set_requires_grad(t, true);
    return t;
}

TEST(buckets_match_t5) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("ops_t5.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    struct {
        const char *key;
        bool bidirectional;
        int nb, md;
    } cfg[] = {{"bucket_bi_32_128", true, 32, 128},
               {"bucket_causal_32_128", false, 32, 128},
               {"bucket_bi_8_20", true, 8, 20},
               {"bucket_causal_16_50", false, 16, 50},
               {"bucket_bi_64_7", true, 64, 17}};
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        qkv_tensor *want = qkv_st_read(f, cfg[k].key);
        CHECK_NN(want);
        if (!want) continue;
        int64_t bad = 0, first = 0;
        for (int64_t x = 0; x < qkv_numel(want); x++) {
            int b = qkv_relative_position_bucket(x - 1000, cfg[k].bidirectional, cfg[k].nb, cfg[k].md);
            if (b != qkv_i32(want)[x] && bad++ == 0) first = x - 1000;
        }
        CHECKF(bad == 0, "%s: %lld offsets in other buckets than T5's (first: %lld)", cfg[k].key, (long long)bad,
               (long long)first);
        qkv_tensor_free(want);
    }
    /* Hand-checked values of T5's default encoder (bidirectional, 32 buckets, max distance 128): exact buckets
     * 0..7 for keys at or before the query, 16.. for keys after, and the far end shares bucket 15 / 31. */
    CHECK(qkv_relative_position_bucket(0, true, 32, 128) == 0);
    CHECK(qkv_relative_position_bucket(-3, true, 32, 128) == 3);
    CHECK(qkv_relative_position_bucket(3, true, 32, 128) == 19);
    CHECK(qkv_relative_position_bucket(-8, true, 32, 128) == 8);
    CHECK(qkv_relative_position_bucket(-1000, true, 32, 128) == 15);
    CHECK(qkv_relative_position_bucket(1000, true, 32, 128) == 31);
    /* Causal: keys after the query all fall in bucket 0 (they are masked anyway). */
    CHECK(qkv_relative_position_bucket(5, false, 32, 128) == 0);
    CHECK(qkv_relative_position_bucket(-5, false, 32, 128) == 5);
    qkv_st_close(f);
}

TEST(gradcheck_ops) {
    rpb_case r = {5, 7, 2, true, 10};
    qkv_tensor *t = grad_rand(1, -1, 1, QKV_DIMS(8, 3));
    CHECK(gradcheck("relative_position_bias bi", f_rpb, 1, &t, &r, NULL));
    r.bidirectional = false;
    CHECK(gradcheck("relative_position_bias causal", f_rpb, 1, &t, &r, NULL));
    qkv_tensor_free(t);
    qkv_tensor *in[2] = {grad_rand(2, -2, 2, QKV_DIMS(3, 4, 9)), grad_rand(3, 0.5f, 1.5f, QKV_DIMS(9))};
    rms_case rc = {true, false, 1e-6f};
    CHECK(gradcheck("rms_norm", f_rms, 2, in, &rc, NULL));
    rc.gamma = false;
    CHECK(gradcheck("rms_norm plain", f_rms, 1, in, &rc, NULL));
    qkv_tensor_free(in[0]);
    qkv_tensor_free(in[1]);
    qkv_tensor *a[4] = {grad_rand(4, -1, 1, QKV_DIMS(2, 2, 6, 3)), grad_rand(5, -1, 1, QKV_DIMS(2, 2, 6, 3)),
                        grad_rand(6, -1, 1, QKV_DIMS(2, 2, 6, 4)), grad_rand(7, -1, 1, QKV_DIMS(16, 2))};
    CHECK(gradcheck("t5 attention", f_t5_attention, 4, a, NULL, NULL));
    for (int i = 0; i < 4; i++) qkv_tensor_free(a[i]);
}

TEST(rms_norm_thread_count_independent) {
    qkv_tensor *x = grad_rand(8, -3, 3, QKV_DIMS(300, 257)), *g = grad_rand(9, 0.5f, 1.5f, QKV_DIMS(257));
    qkv_tensor *res[2][3] = {{NULL}};
    int saved = qkv_threads_get();
    for (int run = 0; run < 2; run++) {
        qkv_threads_set(run == 0 ? 1 : 2);
        qkv_ctx *c = qkv_ctx_new();
        qkv_tensor *y = qkv_rms_norm(c, x, g, 1e-6f);
        CHECK_NN(y);
        if (y) {
            CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_mul(c, y, y))));
            res[run][0] = qkv_tensor_clone(y);
            res[run][1] = qkv_tensor_clone(x->grad);
            res[run][2] = qkv_tensor_clone(g->grad);
        }
        qkv_tensor_zero_grad(x);
        qkv_tensor_zero_grad(g);
        qkv_ctx_free(c);
    }
    qkv_threads_set(saved);
    for (int i = 0; i < 3; i++) {
        if (res[0][i] && res[1][i])
            CHECK(memcmp(res[0][i]->data, res[1][i]->data, (size_t)qkv_numel(res[0][i]) * sizeof(float)) == 0);
        qkv_tensor_free(res[0][i]);
        qkv_tensor_free(res[1][i]);
    }
    qkv_tensor_free(x);
    qkv_tensor_free(g);
}

TEST(bad_inputs_are_errors) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *t3 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(3, 2)), *t1 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(32));
    CHECK(qkv_relative_position_bias(c, t3, 4, 4, 0, true, 128) == NULL && strstr(qkv_last_error(), "buckets"));
    CHECK(qkv_relative_position_bias(c, t1, 4, 4, 0, true, 128) == NULL && strstr(qkv_last_error(), "table"));
    qkv_tensor *t32 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(32, 2));
    CHECK(qkv_relative_position_bias(c, t32, 4, 4, 0, true, 8) == NULL && strstr(qkv_last_error(), "max_distance"));
    CHECK_NN(qkv_relative_position_bias(c, t32, 4, 4, 0, true, 9));
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 5)), *g4 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(4));
    CHECK(qkv_rms_norm(c, x, g4, 1e-6f) == NULL && strstr(qkv_last_error(), "gamma"));
    CHECK(qkv_rms_norm(c, x, NULL, -1.0f) == NULL && strstr(qkv_last_error(), "eps"));
    /* An all-zero row with eps 0 is 0 * inf: not an error, as in torch (NaN); with eps > 0 it is 0. */
    qkv_tensor *y = qkv_rms_norm(c, x, NULL, 1e-6f);
    CHECK(y && qkv_f32(y)[0] == 0.0f);
    qkv_error_clear();
    CHECK(qkv_rms_norm(c, NULL, NULL, 1e-6f) == NULL && qkv_last_status() == QKV_OK);
    qkv_ctx_free(c);
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("ops_t5.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    rpb_case bi = {7, 9, 0, true, 128}, causal = {12, 12, 0, false, 20}, step = {1, 40, 39, false, 128};
    rpb_case lng = {150, 150, 0, true, 64};
    CHECK(fixture_check(f, "rpb_bi", f_rpb, &bi, 1e-6, 1e-7));
    CHECK(fixture_check(f, "rpb_causal", f_rpb, &causal, 1e-6, 1e-7));
    CHECK(fixture_check(f, "rpb_step", f_rpb, &step, 1e-6, 1e-7));
    CHECK(fixture_check(f, "rpb_long", f_rpb, &lng, 1e-5, 1e-5));
    rms_case g = {true, false, 1e-6f}, p = {false, false, 1e-5f}, tr = {true, true, 1e-6f};
    CHECK(fixture_check(f, "rms", f_rms, &g, 1e-4, 1e-5));
    CHECK(fixture_check(f, "rms_plain", f_rms, &p, 1e-4, 1e-5));
    CHECK(fixture_check(f, "rms_wide", f_rms, &g, 1e-4, 1e-5));
    CHECK(fixture_check(f, "rms_transposed", f_rms, &tr, 1e-4, 1e-5));
    CHECK(fixture_check(f, "t5_attention", f_t5_attention, NULL, 1e-4, 1e-5));
    qkv_st_close(f);
}

int main(void) {
    RUN(buckets_match_t5);
    RUN(gradcheck_ops);
    RUN(rms_norm_thread_count_independent);
    RUN(bad_inputs_are_errors);
    RUN(pytorch_fixtures);
    return test_finish();
}
