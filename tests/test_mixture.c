/* T5's multi-task mixing rates, worked by hand, and draws that follow them. */
#include <math.h>
#include <string.h>

#include "qkv/mixture.h"
#include "test.h"

static bool near(const double *got, const double *want, int n, double tol) {
    bool ok = true;
    for (int m = 0; m < n; m++) ok &= fabs(got[m] - want[m]) <= tol;
    if (!ok) {
        printf("  got");
        for (int m = 0; m < n; m++) printf(" %.9f", got[m]);
        printf("\n");
    }
    return ok;
}

TEST(rates_by_hand) {
    const int64_t e[3] = {1000, 100, 10};
    double r[3];
    qkv_mix_opts o = {.kind = QKV_MIX_PROPORTIONAL};
    CHECK_OK(qkv_mix_rates(e, 3, &o, r));
    CHECK(near(r, (const double[]){1000.0 / 1110, 100.0 / 1110, 10.0 / 1110}, 3, 1e-12));
    o.cap = 500; /* min(e, K) = 500, 100, 10 */
    CHECK_OK(qkv_mix_rates(e, 3, &o, r));
    CHECK(near(r, (const double[]){500.0 / 610, 100.0 / 610, 10.0 / 610}, 3, 1e-12));
    o.kind = QKV_MIX_TEMPERATURE;
    o.temperature = 2; /* sqrt of 500/610, 100/610, 10/610 renormalised = sqrt(500), sqrt(100), sqrt(10) / sum */
    CHECK_OK(qkv_mix_rates(e, 3, &o, r));
    double s = sqrt(500.0) + 10.0 + sqrt(10.0);
    CHECK(near(r, (const double[]){sqrt(500.0) / s, 10.0 / s, sqrt(10.0) / s}, 3, 1e-12));
    o.temperature = 1; /* T = 1 is proportional */
    double p[3];
    CHECK_OK(qkv_mix_rates(e, 3, &o, r));
    o.kind = QKV_MIX_PROPORTIONAL;
    CHECK_OK(qkv_mix_rates(e, 3, &o, p));
    CHECK(near(r, p, 3, 0));
    o.kind = QKV_MIX_TEMPERATURE;
    o.temperature = 1e6; /* very hot: close to equal */
    CHECK_OK(qkv_mix_rates(e, 3, &o, r));
    CHECK(near(r, (const double[]){1.0 / 3, 1.0 / 3, 1.0 / 3}, 3, 1e-5));
    o.kind = QKV_MIX_EQUAL;
    CHECK_OK(qkv_mix_rates(e, 3, &o, r));
    CHECK(near(r, (const double[]){1.0 / 3, 1.0 / 3, 1.0 / 3}, 3, 0));
}

TEST(bad_settings_are_errors) {
    double r[2];
    qkv_mix_opts o = {.kind = QKV_MIX_TEMPERATURE, .temperature = 0.5};
    CHECK(qkv_mix_rates((const int64_t[]){1, 2}, 2, &o, r) == QKV_ERR_INVALID && strstr(qkv_last_error(), "temperature"));
    o = (qkv_mix_opts){.kind = QKV_MIX_PROPORTIONAL, .cap = -1};
    CHECK(qkv_mix_rates((const int64_t[]){1, 2}, 2, &o, r) == QKV_ERR_INVALID && strstr(qkv_last_error(), "cap"));
    o.cap = 0;
    CHECK(qkv_mix_rates((const int64_t[]){0, 0}, 2, &o, r) == QKV_ERR_INVALID);
    CHECK(qkv_mix_rates((const int64_t[]){3, -1}, 2, &o, r) == QKV_ERR_INVALID);
    CHECK(qkv_mix_rates(NULL, 0, &o, r) == QKV_ERR_INVALID);
    qkv_mix_kind k;
    CHECK_OK(qkv_mix_parse("temperature", &k));
    CHECK(k == QKV_MIX_TEMPERATURE);
    CHECK(qkv_mix_parse("uniform", &k) == QKV_ERR_INVALID && strstr(qkv_last_error(), "proportional"));
}

TEST(draws_follow_the_rates) {
    const double rates[4] = {0.5, 0.0, 0.3, 0.2};
    int64_t count[4] = {0};
    qkv_rng rng, again;
    qkv_rng_init(&rng, 26);
    qkv_rng_init(&again, 26);
    bool same = true;
    const int N = 200000;
    for (int i = 0; i < N; i++) {
        int m = qkv_mix_pick(rates, 4, &rng);
        count[m]++;
        same &= m == qkv_mix_pick(rates, 4, &again);
    }
    CHECK(same);
    CHECK(count[1] == 0);
    for (int m = 0; m < 4; m++)
        CHECKF(fabs((double)count[m] / N - rates[m]) < 0.005, "task %d drawn %.4f of the time, rate %.2f", m,
               (double)count[m] / N, rates[m]);
}

int main(void) {
    RUN(rates_by_hand);
    RUN(bad_settings_are_errors);
    RUN(draws_follow_the_rates);
    return test_finish();
}
