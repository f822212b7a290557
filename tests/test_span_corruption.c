/* T5 span corruption: hand-worked inputs and targets, T5's length arithmetic (random_spans_helper and the counts
 * of random_spans_noise_mask, values computed with T5's Python code), and the shape of random noise masks. */
#include <string.h>

#include "qkv/span_corruption.h"
#include "test.h"

static bool same_ids(const char *what, const int32_t *got, int64_t n, const int32_t *want, int64_t m) {
    bool ok = n == m && memcmp(got, want, (size_t)n * sizeof *got) == 0;
    if (!ok) {
        printf("  %s: got", what);
        for (int64_t i = 0; i < n; i++) printf(" %d", got[i]);
        printf(", want");
        for (int64_t i = 0; i < m; i++) printf(" %d", want[i]);
        printf("\n");
    }
    return ok;
}

/* Corrupt tokens under a mask written as a string of '0'/'1' with vocabulary 100 and EOS 1. */
static bool corrupt_case(const char *name, const int32_t *tokens, const char *mask_s, const int32_t *want_in,
                         int64_t n_in, const int32_t *want_tgt, int64_t n_tgt) {
    int64_t n = (int64_t)strlen(mask_s);
    uint8_t mask[64];
    int32_t in[65], tgt[65];
    for (int64_t i = 0; i < n; i++) mask[i] = mask_s[i] == '1';
    int64_t ni = -1, nt = -1;
    if (qkv_span_corrupt(tokens, mask, n, 100, 1, in, &ni, tgt, &nt) != QKV_OK) {
        printf("  %s: %s\n", name, qkv_last_error());
        return false;
    }
    bool a = same_ids(name, in, ni, want_in, n_in), b = same_ids(name, tgt, nt, want_tgt, n_tgt);
    return a && b;
}

TEST(hand_worked_examples) {
    /* The usual shape: non-noise first, noise last. "The cat sat on the mat ." with "cat" and "." dropped. */
    CHECK(corrupt_case("usual", (const int32_t[]){5, 6, 7, 8, 9, 10, 11}, "0110001",
                       (const int32_t[]){5, 99, 8, 9, 10, 98, 1}, 7, (const int32_t[]){99, 6, 7, 98, 11, 1}, 6));
    /* Ending in non-noise (possible when a mask is cut): the target replaces the last non-noise span as well. */
    CHECK(corrupt_case("ends clean", (const int32_t[]){10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, "0011000100",
                       (const int32_t[]){10, 11, 99, 14, 15, 16, 98, 18, 19, 1}, 10,
                       (const int32_t[]){99, 12, 13, 98, 17, 97, 1}, 7));
    /* Starting with noise: each side counts its own sentinels from <extra_id_0>, as T5 does. */
    CHECK(corrupt_case("starts noisy", (const int32_t[]){3, 4, 5, 6}, "1100", (const int32_t[]){99, 5, 6, 1}, 4,
                       (const int32_t[]){3, 4, 99, 1}, 4));
    /* One noise token in the middle. */
    CHECK(corrupt_case("single", (const int32_t[]){20, 21, 22}, "010", (const int32_t[]){20, 99, 22, 1}, 4,
                       (const int32_t[]){99, 21, 98, 1}, 4));
}

TEST(t5_length_arithmetic) {
    /* (inputs_length, density, mean span) -> (raw tokens, target length), from T5's random_spans_helper. */
    struct {
        int64_t in;
        double density, mean;
        int64_t tokens, targets;
    } cases[] = {{128, 0.15, 3, 141, 29}, {512, 0.15, 3, 568, 114}, {114, 0.15, 3, 126, 26},
                 {64, 0.5, 3, 94, 64},    {256, 0.3, 8, 346, 118},  {10, 0.15, 3, 10, 4}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t t = 0, g = 0;
        CHECK_OK(qkv_span_lengths(cases[k].in, cases[k].density, cases[k].mean, &t, &g));
        CHECKF(t == cases[k].tokens && g == cases[k].targets, "inputs %lld: got %lld tokens, %lld targets",
               (long long)cases[k].in, (long long)t, (long long)g);
    }
    qkv_span_counts c = qkv_span_count(141, 0.15f, 3.0f);
    CHECK(c.noise == 21 && c.nonnoise == 120 && c.spans == 7);
    c = qkv_span_count(1, 0.15f, 3.0f); /* raised to 2: one noise, one non-noise token */
    CHECK(c.noise == 1 && c.nonnoise == 1 && c.spans == 1);
    c = qkv_span_count(10, 0.15f, 3.0f); /* 1.5 rounds to 2 (half to even), 2/3 to 1 */
    CHECK(c.noise == 2 && c.spans == 1);
    c = qkv_span_count(50, 0.5f, 10.0f); /* 25 / 10 = 2.5 rounds to 2 */
    CHECK(c.noise == 25 && c.spans == 2);
    int64_t t, g;
    CHECK(qkv_span_lengths(128, 0.0, 3, &t, &g) == QKV_ERR_INVALID);
    CHECK(qkv_span_lengths(128, 0.15, 0.5, &t, &g) == QKV_ERR_INVALID);
}

/* Spans of 1s in a mask, and whether it alternates non-noise first, noise last. */
static int64_t noise_spans(const uint8_t *m, int64_t n) {
    int64_t s = 0;
    for (int64_t i = 0; i < n; i++) s += m[i] && (i == 0 || !m[i - 1]);
    return s;
}

TEST(random_masks_have_t5_shape) {
    /* 141 raw tokens -> 21 noise tokens in 7 spans, starting clean and ending noisy; corrupted: 128 + 29 tokens. */
    enum { N = 141 };
    qkv_rng rng;
    qkv_rng_init(&rng, 26);
    int32_t tokens[N], in[N + 1], tgt[N + 1];
    for (int i = 0; i < N; i++) tokens[i] = 2 + i;
    uint8_t mask[N], first[N];
    int64_t total_spans = 0, total_noise = 0, differ = 0;
    for (int trial = 0; trial < 200; trial++) {
        CHECK_OK(qkv_span_noise_mask(N, 0.15f, 3.0f, &rng, mask));
        if (trial == 0) memcpy(first, mask, N);
        differ += memcmp(first, mask, N) != 0;
        int64_t noise = 0;
        for (int i = 0; i < N; i++) noise += mask[i];
        int64_t spans = noise_spans(mask, N);
        total_spans += spans;
        total_noise += noise;
        CHECK(noise == 21 && spans == 7 && mask[0] == 0 && mask[N - 1] == 1);
        int64_t ni, nt;
        CHECK_OK(qkv_span_corrupt(tokens, mask, N, 32000, 1, in, &ni, tgt, &nt));
        CHECK(ni == 128 && nt == 29);
        CHECK(tgt[0] == 31999 && in[ni - 2] == 31999 - 6 && tgt[nt - 1] == 1); /* <extra_id_0> .. <extra_id_6> */
    }
    CHECK(differ > 190); /* random: almost every mask differs from the first */
    CHECK(total_noise == 200 * 21 && total_spans == 200 * 7);
    /* The same generator state gives the same mask. */
    qkv_rng a, b;
    qkv_rng_init(&a, 5);
    qkv_rng_init(&b, 5);
    uint8_t m1[N], m2[N];
    CHECK_OK(qkv_span_noise_mask(N, 0.15f, 3.0f, &a, m1));
    CHECK_OK(qkv_span_noise_mask(N, 0.15f, 3.0f, &b, m2));
    CHECK(memcmp(m1, m2, N) == 0);
    /* Degenerate lengths: one token is kept clean (T5 masks two and cuts back to one). */
    uint8_t one[1] = {7};
    CHECK_OK(qkv_span_noise_mask(1, 0.15f, 3.0f, &a, one));
    CHECK(one[0] == 0);
    uint8_t two[2];
    CHECK_OK(qkv_span_noise_mask(2, 0.15f, 3.0f, &a, two));
    CHECK(two[0] == 0 && two[1] == 1);
    CHECK(qkv_span_noise_mask(10, 1.0f, 3.0f, &a, m1) == QKV_ERR_INVALID);
}

TEST(sentinel_collisions_are_errors) {
    const int32_t tokens[4] = {3, 98, 5, 6};
    const uint8_t mask[4] = {0, 0, 1, 0};
    int32_t in[5], tgt[5];
    int64_t ni, nt;
    /* Two non-noise spans in the target: sentinels 99 and 98, and 98 is a token. */
    CHECK(qkv_span_corrupt(tokens, mask, 4, 100, 1, in, &ni, tgt, &nt) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "sentinel") != NULL);
    CHECK_OK(qkv_span_corrupt(tokens, mask, 4, 101, 1, in, &ni, tgt, &nt));
}

int main(void) {
    RUN(hand_worked_examples);
    RUN(t5_length_arithmetic);
    RUN(random_masks_have_t5_shape);
    RUN(sentinel_collisions_are_errors);
    return test_finish();
}
