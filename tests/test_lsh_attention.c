/* LSH self-attention: PyTorch fixtures with the same rotations (tests/ref/lsh_attention.py), gradient checks, one
 * bucket and one chunk against the fused full attention, the same bits at any thread count, memory linear in T, bad
 * input. */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "qkv/attention.h"
#include "qkv/lsh_attention.h"
#include "test.h"

typedef struct {
    qkv_lsh_opts o;
    const qkv_tensor *rot;  /* or NULL */
    bool rot_from_input;    /* fixtures: rotations are input 2 */
    bool pad_from_input;    /* fixtures: the padding mask is input 3 */
} lcfg;

static qkv_tensor *f_lsh(qkv_ctx *c, qkv_tensor **in, void *u) {
    const lcfg *a = u;
    qkv_lsh_opts o = a->o;
    if (a->pad_from_input) o.key_padding = in[3];
    return qkv_lsh_attention(c, in[0], in[1], a->rot_from_input ? in[2] : a->rot, &o);
}

static qkv_tensor *rand_t(uint64_t seed, int64_t b, int64_t h, int64_t t, int64_t d) {
    qkv_tensor *x = gc_rand(seed, -1, 1, QKV_DIMS(b, h, t, d));
    qkv_tensor_set_requires_grad(x, true);
    return x;
}

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("lsh_attention.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    lcfg one = {.o = qkv_lsh_defaults(), .rot_from_input = true};
    one.o.chunk_len = 4;
    CHECK(fixture_check(f, "one_round", f_lsh, &one, 1e-4, 1e-5));
    lcfg causal = one;
    causal.o.causal = true;
    CHECK(fixture_check(f, "causal_3_rounds", f_lsh, &causal, 1e-4, 1e-5));
    lcfg padded = one;
    padded.o.chunk_len = 8;
    padded.pad_from_input = true;
    CHECK(fixture_check(f, "padded_2_rounds", f_lsh, &padded, 1e-4, 1e-5));
    lcfg factored = one;
    factored.o.chunk_len = 8;
    factored.o.bucket_factor = 4;
    CHECK(fixture_check(f, "factorized_2_rounds", f_lsh, &factored, 1e-4, 1e-5));
    qkv_st_close(f);
}

/* Finite differences. The sort is piecewise constant in qk; with one bucket it cannot change, and with rotations
 * the step is small enough that no item changes bucket in these cases (a change would show as a large error). */
TEST(gradcheck_lsh) {
    struct {
        const char *name;
        int n_hashes, n_buckets, factor;
        bool causal, self;
        int64_t T, L;
    } cases[] = {
        {"one_bucket_2_rounds", 2, 0, 0, false, true, 12, 4},
        {"one_bucket_causal", 3, 0, 0, true, true, 8, 2},
        {"hashed_causal", 2, 4, 0, true, true, 12, 4},
        {"hashed_keep_self", 1, 6, 0, false, false, 12, 3},
        {"factorized_causal", 2, 6, 2, true, true, 12, 4}, /* 2 x 4 buckets from 1 + 2 columns */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        qkv_ctx *c = qkv_ctx_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 40 + k);
        lcfg a = {.o = qkv_lsh_defaults()};
        a.o.chunk_len = cases[k].L;
        a.o.causal = cases[k].causal;
        a.o.exclude_self = cases[k].self;
        a.o.n_hashes = cases[k].n_hashes;
        a.o.bucket_factor = cases[k].factor;
        a.rot = cases[k].n_buckets ? qkv_lsh_rotations(c, &rng, 5, cases[k].n_hashes, cases[k].n_buckets) : NULL;
        qkv_tensor *in[2] = {rand_t(100 + k, 2, 1, cases[k].T, 5), rand_t(200 + k, 2, 1, cases[k].T, 3)};
        gc_opts g = gc_defaults();
        g.eps = 1e-3;
        CHECK(gradcheck(cases[k].name, f_lsh, 2, in, &a, &g));
        qkv_tensor_free(in[0]);
        qkv_tensor_free(in[1]);
        qkv_ctx_free(c);
    }
}

/* k^ = k / sqrt(mean(k^2) + 1e-6) through the ordinary ops, so gradients flow through it. */
static qkv_tensor *normalised(qkv_ctx *c, qkv_tensor *k) {
    qkv_tensor *ms = qkv_mean(c, qkv_mul(c, k, k), -1, true);
    return qkv_div(c, k, qkv_sqrt(c, qkv_affine(c, ms, 1.0f, 1e-6f)));
}

/* One bucket, one round, one chunk covering the sequence and no self mask: every query sees every key (twice: the
 * chunk before a lone chunk is itself, which leaves the softmax unchanged), i.e. full shared-QK attention. */
TEST(one_chunk_equals_full_attention) {
    const int64_t B = 2, H = 3, T = 24, D = 8, Dv = 5;
    qkv_tensor *pad = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    for (int64_t j = 1; j < T; j++) qkv_i32(pad)[T + j] = j % 5 == 0;
    for (int variant = 0; variant < 3; variant++) {
        qkv_ctx *c = qkv_ctx_new();
        qkv_tensor *qk = rand_t(7, B, H, T, D), *v = rand_t(8, B, H, T, Dv);
        qkv_tensor *gout = gc_rand(9, -1, 1, QKV_DIMS(B, H, T, Dv));
        qkv_lsh_opts o = qkv_lsh_defaults();
        o.chunk_len = T;
        o.exclude_self = false;
        o.causal = variant == 1;
        o.key_padding = variant == 2 ? pad : NULL;
        qkv_tensor *y = qkv_lsh_attention(c, qk, v, NULL, &o);
        CHECK_NN(y);
        CHECK_OK(qkv_backward_with(c, y, gout));
        qkv_tensor *gqk = qkv_tensor_clone(qk->grad), *gv = qkv_tensor_clone(v->grad);
        qkv_tensor_zero_grad(qk);
        qkv_tensor_zero_grad(v);
        qkv_sdpa_opts so = qkv_sdpa_defaults();
        so.causal = o.causal;
        so.key_padding = o.key_padding;
        qkv_tensor *ref = qkv_sdpa(c, qk, normalised(c, qk), v, &so);
        CHECK_NN(ref);
        CHECK_OK(qkv_backward_with(c, ref, gout));
        CHECK(test_allclose("out vs fused", y, ref, 1e-5, 1e-5));
        CHECK(test_allclose("dqk vs fused", gqk, qk->grad, 1e-4, 1e-5));
        CHECK(test_allclose("dv vs fused", gv, v->grad, 1e-4, 1e-5));
        qkv_tensor_free(gqk);
        qkv_tensor_free(gv);
        qkv_tensor_free(qk);
        qkv_tensor_free(v);
        qkv_tensor_free(gout);
        qkv_ctx_free(c);
    }
    qkv_tensor_free(pad);
}

/* Output and gradients bit for bit at 1 and 3 threads; an item's own position outranks nothing else. */
TEST(thread_count_does_not_change_bits) {
    const int64_t B = 2, H = 2, T = 64, D = 16;
    qkv_tensor *res[2][3];
    int saved = qkv_threads_get();
    for (int run = 0; run < 2; run++) {
        qkv_threads_set(run ? 3 : 1);
        qkv_ctx *c = qkv_ctx_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 3);
        qkv_tensor *qk = rand_t(1, B, H, T, D), *v = rand_t(2, B, H, T, D);
        qkv_lsh_opts o = qkv_lsh_defaults();
        o.chunk_len = 8;
        o.causal = true;
        qkv_tensor *y = qkv_lsh_attention(c, qk, v, qkv_lsh_rotations(c, &rng, D, 2, 8), &o);
        CHECK_NN(y);
        CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_mul(c, y, y))));
        res[run][0] = qkv_tensor_clone(y);
        res[run][1] = qkv_tensor_clone(qk->grad);
        res[run][2] = qkv_tensor_clone(v->grad);
        qkv_tensor_free(qk);
        qkv_tensor_free(v);
        qkv_ctx_free(c);
    }
    qkv_threads_set(saved);
    for (int i = 0; i < 3; i++) {
        CHECK(memcmp(res[0][i]->data, res[1][i]->data, sizeof(float) * (size_t)qkv_numel(res[0][i])) == 0);
        qkv_tensor_free(res[0][i]);
        qkv_tensor_free(res[1][i]);
    }
}

/* The arena a forward + backward needs grows linearly in T: doubling T at a fixed chunk roughly doubles it (a
 * [T, T] buffer would quadruple it). */
TEST(memory_linear_in_length) {
    size_t bytes[2];
    for (int k = 0; k < 2; k++) {
        const int64_t T = k ? 8192 : 4096, D = 16;
        qkv_ctx *c = qkv_ctx_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 1);
        qkv_tensor *qk = rand_t(1, 1, 1, T, D), *v = rand_t(2, 1, 1, T, D);
        qkv_lsh_opts o = qkv_lsh_defaults();
        o.chunk_len = 32;
        qkv_tensor *y = qkv_lsh_attention(c, qk, v, qkv_lsh_rotations(c, &rng, D, 2, qkv_lsh_default_buckets(T, 32)),
                                          &o);
        CHECK_OK(qkv_backward(c, qkv_sum_all(c, y)));
        qkv_ctx_reset(c); /* the arena shrinks to one chunk sized to the step's high-water mark */
        bytes[k] = qkv_ctx_arena_bytes(c);
        qkv_tensor_free(qk);
        qkv_tensor_free(v);
        qkv_ctx_free(c);
    }
    printf("  arena bytes T=4096: %zu, T=8192: %zu\n", bytes[0], bytes[1]);
    CHECK(bytes[1] > 1.5 * (double)bytes[0] && bytes[1] < 2.6 * (double)bytes[0]);
}

TEST(hash_buckets_follow_the_rotation) {
    /* D = 2, one rotation column (2 buckets): bucket 0 when x . r > 0. Items of bucket 0 sort first, so with
     * chunks of 2 and the self mask, position 0's partner in its chunk is the other bucket-0 item. */
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *rot = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 1, 1));
    qkv_f32(rot)[0] = 1;
    qkv_tensor *qk = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 1, 4, 2)), *v = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 1, 4, 1));
    float xs[4] = {1, -1, 2, -2}, vs[4] = {0, 10, 20, 100};
    for (int t = 0; t < 4; t++) {
        qkv_f32(qk)[t * 2] = xs[t];
        qkv_f32(v)[t] = vs[t];
    }
    qkv_lsh_opts o = qkv_lsh_defaults();
    o.chunk_len = 2;
    qkv_tensor *y = qkv_lsh_attention(c, qk, v, rot, &o);
    CHECK_NN(y);
    /* Sorted: [0, 2 | 1, 3]. Chunk 0's keys are chunk 1 (wrapped) and itself; position 0 attends to 1 and 3 (score
     * -1: unit keys, scale 1/sqrt(2) times |k^| sqrt(2)) and 2 (score +1), its own score less 1e5 (weight 0). */
    if (y) {
        double e = exp(1.0), z = e + 2 / e, want = ((vs[1] + vs[3]) / e + vs[2] * e) / z;
        CHECKF(fabs(qkv_f32(y)[0] - want) < 1e-3, "y0 %g, want %g", (double)qkv_f32(y)[0], want);
    }
    qkv_ctx_free(c);
}

TEST(bad_input) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *qk = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 1, 10, 4)), *v = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 1, 10, 4));
    qkv_lsh_opts o = qkv_lsh_defaults();
    o.chunk_len = 4;
    CHECK(!qkv_lsh_attention(c, qk, v, NULL, &o) && strstr(qkv_last_error(), "multiple of chunk_len"));
    o.chunk_len = 5;
    qkv_tensor *rot = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(3, 1, 2));
    CHECK(!qkv_lsh_attention(c, qk, v, rot, &o) && strstr(qkv_last_error(), "rotations"));
    qkv_tensor *v3 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 1, 9, 4));
    CHECK(!qkv_lsh_attention(c, qk, v3, NULL, &o) && strstr(qkv_last_error(), "[B, H, T, Dv]"));
    qkv_tensor *pad = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(1, 9));
    o.key_padding = pad;
    CHECK(!qkv_lsh_attention(c, qk, v, NULL, &o) && strstr(qkv_last_error(), "key_padding"));
    CHECK(!qkv_lsh_attention(c, NULL, v, NULL, &o));
    CHECK(!qkv_lsh_rotations(c, qkv_ctx_rng(c), 4, 1, 3) && strstr(qkv_last_error(), "even"));
    CHECK(qkv_lsh_default_buckets(1024, 64) == 32 && qkv_lsh_default_buckets(8, 64) == 2);
    o.key_padding = NULL;
    o.bucket_factor = 4;
    CHECK(!qkv_lsh_attention(c, qk, v, NULL, &o) && strstr(qkv_last_error(), "needs rotations"));
    qkv_tensor *rot4 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(4, 1, 2));
    CHECK(!qkv_lsh_attention(c, qk, v, rot4, &o) && strstr(qkv_last_error(), "bucket_factor"));
    o.bucket_factor = 3;
    CHECK(!qkv_lsh_attention(c, qk, v, rot4, &o) && strstr(qkv_last_error(), "bucket_factor"));
    qkv_ctx_free(c);
}

/* The factorization: exact divisors near the square root when they exist, else a cover with n1 n2 >= n; none at or
 * below the threshold. */
TEST(factor_choice) {
    int n2 = 0;
    CHECK(qkv_lsh_factor(8192, QKV_LSH_FACTORIZE_ABOVE, &n2) == 64 && n2 == 128);
    CHECK(qkv_lsh_factor(2048, QKV_LSH_FACTORIZE_ABOVE, &n2) == 32 && n2 == 64);
    CHECK(qkv_lsh_factor(1024, QKV_LSH_FACTORIZE_ABOVE, &n2) == 0 && n2 == 1024);
    CHECK(qkv_lsh_factor(1024, 512, &n2) == 32 && n2 == 32);
    CHECK(qkv_lsh_factor(8192, -1, &n2) == 0 && n2 == 8192);
    for (int n = 1026; n < 5000; n += 2) {
        int f = qkv_lsh_factor(n, 1024, &n2);
        CHECKF(f >= 2 && f % 2 == 0 && n2 % 2 == 0 && f <= n2 && (int64_t)f * n2 >= n && (int64_t)f * n2 < 2 * n,
               "n %d -> %d x %d", n, f, n2);
    }
}

/* Factorized buckets are b1 + n1 b2: with the second factor's columns zero every item has b2 = 0 and the hash is
 * the first factor's direct hash, so the two paths give the same bits. */
TEST(factorized_reduces_to_direct) {
    const int64_t T = 32, D = 8;
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *qk = rand_t(31, 1, 2, T, D), *v = rand_t(32, 1, 2, T, D);
    qkv_rng rng;
    qkv_rng_init(&rng, 9);
    qkv_tensor *rd = qkv_lsh_rotations(c, &rng, D, 2, 6);
    qkv_tensor *rf = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(D, 2, 4));
    for (int64_t d = 0; d < D; d++)
        for (int64_t r = 0; r < 2; r++)
            for (int64_t j = 0; j < 3; j++) qkv_f32(rf)[(d * 2 + r) * 4 + j] = qkv_f32(rd)[(d * 2 + r) * 3 + j];
    qkv_lsh_opts o = qkv_lsh_defaults();
    o.chunk_len = 8;
    o.causal = true;
    qkv_tensor *a = qkv_lsh_attention(c, qk, v, rd, &o);
    o.bucket_factor = 6;
    qkv_tensor *b = qkv_lsh_attention(c, qk, v, rf, &o);
    CHECK_NN(a);
    CHECK_NN(b);
    if (a && b) CHECK(!memcmp(a->data, b->data, sizeof(float) * (size_t)qkv_numel(a)));
    qkv_tensor_free(qk);
    qkv_tensor_free(v);
    qkv_ctx_free(c);
}

int main(void) {
    RUN(pytorch_fixtures);
    RUN(gradcheck_lsh);
    RUN(one_chunk_equals_full_attention);
    RUN(thread_count_does_not_change_bits);
    RUN(memory_linear_in_length);
    RUN(hash_buckets_follow_the_rotation);
    RUN(bad_input);
    RUN(factor_choice);
    RUN(factorized_reduces_to_direct);
    return test_finish();
}
