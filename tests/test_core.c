/* Core: errors, tensors, the arena, the Philox generator, determinism. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "test.h"

TEST(philox_known_answer) {
    /* Random123's known-answer vector for philox4x32-10 with zero key and counter. */
    uint32_t r[4];
    qkv_philox4x32(0, 0, r);
    CHECKF(r[0] == 0x6627e8d5u && r[1] == 0xe169c58du && r[2] == 0xbc57ac4cu && r[3] == 0x9b00dbd8u,
           "got %08x %08x %08x %08x", r[0], r[1], r[2], r[3]);
}

TEST(rng_state_round_trip) {
    qkv_rng a, b;
    qkv_rng_init(&a, 99);
    for (int i = 0; i < 10; i++) qkv_rng_u32(&a);
    b = a; /* the whole state is (seed, counter): saving it is copying two integers */
    for (int i = 0; i < 100; i++) CHECK(qkv_rng_u32(&a) == qkv_rng_u32(&b));
    qkv_rng_init(&b, 100);
    int same = 0;
    for (int i = 0; i < 100; i++) same += qkv_rng_u32(&a) == qkv_rng_u32(&b);
    CHECK(same < 3);
}

TEST(rng_distributions) {
    qkv_tensor *t = qkv_tensor_new(QKV_F32, QKV_DIMS(200000));
    qkv_rng r;
    qkv_rng_init(&r, 7);
    qkv_rng_fill_normal(&r, t, 1.0f, 2.0f);
    double s = 0, s2 = 0;
    for (int i = 0; i < 200000; i++) {
        double x = qkv_f32(t)[i];
        s += x;
        s2 += x * x;
    }
    double mean = s / 200000, sd = sqrt(s2 / 200000 - mean * mean);
    CHECKF(fabs(mean - 1.0) < 0.02 && fabs(sd - 2.0) < 0.02, "normal mean %g sd %g", mean, sd);
    qkv_rng_fill_uniform(&r, t, -1.0f, 3.0f);
    float lo = 10, hi = -10;
    s = 0;
    for (int i = 0; i < 200000; i++) {
        float x = qkv_f32(t)[i];
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
        s += x;
    }
    CHECKF(lo >= -1.0f && hi < 3.0f && fabs(s / 200000 - 1.0) < 0.02, "uniform range [%g, %g] mean %g", lo, hi,
           s / 200000);
    int counts[5] = {0};
    for (int i = 0; i < 50000; i++) counts[qkv_rng_below(&r, 5)]++;
    for (int k = 0; k < 5; k++) CHECKF(abs(counts[k] - 10000) < 500, "below(5) bucket %d has %d", k, counts[k]);
    qkv_tensor_free(t);
}

TEST(errors_are_per_call_messages) {
    qkv_error_clear();
    CHECK(qkv_last_status() == QKV_OK && qkv_last_error()[0] == '\0');
    CHECK(qkv_tensor_new(QKV_F32, QKV_DIMS(-3)) == NULL);
    CHECK(qkv_last_status() == QKV_ERR_INVALID && strstr(qkv_last_error(), "-3"));
    CHECK(qkv_tensor_new(QKV_F32, 9, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}) == NULL);
    CHECK(strstr(qkv_last_error(), "rank 9"));
    CHECK(strcmp(qkv_status_name(QKV_ERR_FORMAT), "malformed input") == 0);
    /* A message that quotes the previous one, as every "where: %s" wrapper in the library does. */
    qkv_error_set(QKV_ERR_IO, "cannot open x");
    CHECK(qkv_error_set(QKV_ERR_FORMAT, "data.txt:12: %s", qkv_last_error()) == QKV_ERR_FORMAT);
    CHECKF(strcmp(qkv_last_error(), "data.txt:12: cannot open x") == 0, "got \"%s\"", qkv_last_error());
}

TEST(tensor_basics) {
    qkv_tensor *t = qkv_tensor_new(QKV_F32, QKV_DIMS(2, 3));
    CHECK(t && qkv_numel(t) == 6 && qkv_is_contiguous(t) && t->stride[0] == 3);
    float src[6] = {1, 2, 3, 4, 5, 6};
    CHECK_OK(qkv_tensor_load(t, src, sizeof src));
    CHECK(qkv_tensor_load(t, src, 5) != QKV_OK);
    qkv_tensor *c = qkv_tensor_clone(t);
    CHECK(c && memcmp(c->data, src, sizeof src) == 0);
    char buf[64];
    CHECK(strcmp(qkv_shape_str(t, buf, sizeof buf), "[2, 3]") == 0);
    qkv_tensor *s = qkv_tensor_new(QKV_F32, 0, NULL); /* a scalar */
    CHECK(s && qkv_numel(s) == 1 && s->ndim == 0);
    qkv_tensor_free(s);
    qkv_tensor_free(c);
    qkv_tensor_free(t);
}

/* qkv_tensor_copy between strided views: unit-stride rows (copied row by row), a transposed source (element walk),
 * and a destination overlapping its source (the result is the source as it was before the copy). */
TEST(strided_copy) {
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *a = qkv_tensor_new(QKV_F32, QKV_DIMS(3, 4, 5)), *b = qkv_tensor_new(QKV_F32, QKV_DIMS(3, 6, 5));
    float *pa = qkv_f32(a), *pb = qkv_f32(b), old[60];
    for (int i = 0; i < 60; i++) pa[i] = (float)i;
    for (int i = 0; i < 90; i++) pb[i] = -1.0f;
    CHECK_OK(qkv_tensor_copy(qkv_slice(ctx, b, 1, 2, 4, 1), qkv_slice(ctx, a, 1, 1, 3, 1)));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 6; j++)
            for (int k = 0; k < 5; k++) {
                float want = j >= 2 && j < 4 ? pa[(i * 4 + j - 1) * 5 + k] : -1.0f;
                CHECKF(pb[(i * 6 + j) * 5 + k] == want, "rows: b[%d,%d,%d] = %g, want %g", i, j, k,
                       (double)pb[(i * 6 + j) * 5 + k], (double)want);
            }
    qkv_tensor *t = qkv_tensor_new(QKV_F32, QKV_DIMS(3, 5, 4));
    CHECK_OK(qkv_tensor_copy(t, qkv_transpose(ctx, a, 1, 2)));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++)
            for (int k = 0; k < 4; k++) CHECK(qkv_f32(t)[(i * 5 + j) * 4 + k] == pa[(i * 4 + k) * 5 + j]);
    memcpy(old, pa, sizeof old);
    CHECK_OK(qkv_tensor_copy(qkv_slice(ctx, a, 2, 1, 5, 1), qkv_slice(ctx, a, 2, 0, 4, 1)));
    for (int i = 0; i < 12; i++)
        for (int k = 0; k < 5; k++) {
            float want = k == 0 ? old[i * 5] : old[i * 5 + k - 1];
            CHECKF(pa[i * 5 + k] == want, "overlap: a[%d][%d] = %g, want %g", i, k, (double)pa[i * 5 + k],
                   (double)want);
        }
    qkv_tensor_free(t);
    qkv_tensor_free(a);
    qkv_tensor_free(b);
    qkv_ctx_free(ctx);
}

TEST(params_collection) {
    qkv_params *p = qkv_params_new();
    qkv_tensor *w = qkv_params_add(p, "enc.layer0", "weight", QKV_DIMS(4, 3));
    qkv_tensor *b = qkv_params_add_buffer(p, "enc", "pe", QKV_DIMS(8));
    CHECK(w && b && strcmp(w->name, "enc.layer0.weight") == 0);
    CHECK(qkv_params_find(p, "enc.pe") == b && qkv_params_count(p) == 2 && qkv_params_numel(p) == 12);
    CHECK(qkv_params_add(p, "enc.layer0", "weight", QKV_DIMS(1)) == NULL && strstr(qkv_last_error(), "twice"));
    char key[12];
    CHECK(qkv_params_join(key, sizeof key, "enc", "pe") == QKV_OK && strcmp(key, "enc.pe") == 0);
    CHECK(qkv_params_join(key, sizeof key, NULL, "weight") == QKV_OK && strcmp(key, "weight") == 0);
    CHECK(qkv_params_join(key, sizeof key, "encoder", "weight") == QKV_ERR_INVALID &&
          strstr(qkv_last_error(), "'encoder.weight' longer than 11"));
    CHECK(qkv_params_add(p, "a-prefix-of-more-than-one-hundred-and-twenty-seven-characters-is-refused-not-cut-short-"
                         "as-a-silently-truncated-key-would-be", "weight", QKV_DIMS(1)) == NULL &&
          qkv_last_status() == QKV_ERR_INVALID);
    qkv_params_free(p);
}

/* A small forward/backward whose result must repeat bit for bit with the same seed (dropout included). */
static void run_once(uint64_t seed, float *out_loss, float *out_grad) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_rng_init(qkv_ctx_rng(c), seed);
    qkv_tensor *w = gc_rand(seed, -1, 1, QKV_DIMS(64, 64)), *x = gc_rand(seed + 1, -1, 1, QKV_DIMS(16, 33, 64));
    qkv_tensor_set_requires_grad(w, true);
    qkv_tensor *h = qkv_dropout(c, qkv_gelu(c, qkv_linear(c, x, w, NULL)), 0.1f);
    qkv_tensor *l = qkv_mean_all(c, qkv_softmax(c, qkv_linear(c, h, w, NULL), -1));
    *out_loss = l ? qkv_f32(l)[0] : NAN;
    if (l) qkv_backward(c, l);
    memcpy(out_grad, w->grad ? w->grad->data : w->data, 64 * 64 * sizeof(float));
    qkv_tensor_free(w);
    qkv_tensor_free(x);
    qkv_ctx_free(c);
}

TEST(same_seed_same_bits) {
    static float g1[64 * 64], g2[64 * 64];
    float l1, l2;
    run_once(5, &l1, g1);
    run_once(5, &l2, g2);
    CHECK(!isnan(l1));
    CHECK(memcmp(&l1, &l2, sizeof l1) == 0 && memcmp(g1, g2, sizeof g1) == 0);
}

int main(void) {
    RUN(philox_known_answer);
    RUN(rng_state_round_trip);
    RUN(rng_distributions);
    RUN(errors_are_per_call_messages);
    RUN(tensor_basics);
    RUN(strided_copy);
    RUN(params_collection);
    RUN(same_seed_same_bits);
    return test_finish();
}
