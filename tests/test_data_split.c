/* Seeded, stratified splits. */
#include <string.h>

#include "test.h"
#include "qkv/data.h"

TEST(stratified_and_deterministic) {
    enum { N = 1000 };
    int32_t labels[N];
    uint8_t a[N], b[N], c[N];
    for (int i = 0; i < N; i++) labels[i] = i % 10 < 3 ? 1 : 0; /* 30% positive */
    CHECK_OK(qkv_data_split(N, labels, 0.1, 0.2, 7, a));
    CHECK_OK(qkv_data_split(N, labels, 0.1, 0.2, 7, b));
    CHECK_OK(qkv_data_split(N, labels, 0.1, 0.2, 8, c));
    CHECK(memcmp(a, b, N) == 0 && memcmp(a, c, N) != 0);
    int count[3][2] = {{0}};
    for (int i = 0; i < N; i++) count[a[i]][labels[i]]++;
    CHECKF(count[1][1] == 30 && count[1][0] == 70, "dev has %d positives, %d negatives", count[1][1], count[1][0]);
    CHECKF(count[2][1] == 60 && count[2][0] == 140, "test has %d positives, %d negatives", count[2][1], count[2][0]);
    CHECK(count[0][1] == 210 && count[0][0] == 490);
}

TEST(unstratified_and_bad_fractions) {
    uint8_t out[10];
    CHECK_OK(qkv_data_split(10, NULL, 0.5, 0.5, 1, out));
    int n[3] = {0};
    for (int i = 0; i < 10; i++) n[out[i]]++;
    CHECK(n[0] == 0 && n[1] == 5 && n[2] == 5);
    CHECK(qkv_data_split(10, NULL, 0.7, 0.5, 1, out) == QKV_ERR_INVALID);
    CHECK(qkv_data_split(10, NULL, -0.1, 0.5, 1, out) == QKV_ERR_INVALID);
    CHECK_OK(qkv_data_split(0, NULL, 0.1, 0.1, 1, out));
}

int main(void) {
    RUN(stratified_and_deterministic);
    RUN(unstratified_and_bad_fractions);
    return test_finish();
}
