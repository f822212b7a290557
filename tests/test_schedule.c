/* Learning-rate schedules against torch.optim.lr_scheduler / HF formulas (fixtures: tests/ref/schedule.py). */
#include <math.h>
#include <string.h>

#include "test.h"
#include "qkv/schedule.h"

static bool same_curve(qkv_st_file *f, const char *key, const char *spec, double min_ratio, double d_model,
                       double base) {
    qkv_tensor *want = qkv_st_read(f, key);
    qkv_schedule s;
    if (!want || qkv_schedule_parse(&s, spec, base, 10, 100, min_ratio, d_model) != QKV_OK) {
        printf("  %s: %s\n", key, qkv_last_error());
        qkv_tensor_free(want);
        return false;
    }
    double worst = 0;
    for (long t = 0; t < qkv_numel(want); t++) {
        double w = qkv_f32(want)[t], got = qkv_schedule_lr(&s, t);
        double err = fabs(got - w) / (fabs(w) + 1e-12);
        if (err > worst && fabs(w) > 1e-9) worst = err;
        if (fabs(w) <= 1e-9 && fabs(got) > 1e-7) worst = INFINITY;
    }
    printf("  %-14s \"%s\": max relative difference %.2g\n", key, spec, worst);
    qkv_tensor_free(want);
    return worst < 1e-6;
}

TEST(matches_torch) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("schedule.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    CHECK(same_curve(f, "constant", "constant", 0, 0, 0.5));
    CHECK(same_curve(f, "cosine", "constant * cosine_decay", 0.1, 0, 0.5));
    CHECK(same_curve(f, "linear", "constant * linear_decay", 0, 0, 0.5));
    CHECK(same_curve(f, "warmup_linear", "warmup_linear", 0, 0, 0.5));
    CHECK(same_curve(f, "warmup_cosine", "constant*linear_warmup*cosine_decay", 0, 0, 0.5));
    CHECK(same_curve(f, "noam", "constant * noam", 0, 64, 0.5));
    qkv_st_close(f);
}

TEST(trax_rsqrt) {
    qkv_schedule s;
    CHECK_OK(qkv_schedule_parse(&s, "constant * linear_warmup * rsqrt_normalized_decay", 2.0, 100, 0, 0, 0));
    CHECK(fabs(qkv_schedule_lr(&s, 50) - 1.0) < 1e-12);
    CHECK(fabs(qkv_schedule_lr(&s, 100) - 2.0) < 1e-12);
    CHECK(fabs(qkv_schedule_lr(&s, 400) - 1.0) < 1e-12);
}

TEST(bad_specs) {
    qkv_schedule s;
    CHECK(qkv_schedule_parse(&s, "constant * warp_speed", 1, 10, 100, 0, 0) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "warp_speed"));
    CHECK(qkv_schedule_parse(&s, "linear_warmup", 1, 0, 100, 0, 0) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "warmup_steps"));
    CHECK(qkv_schedule_parse(&s, "cosine_decay", 1, 0, 0, 0, 0) == QKV_ERR_INVALID);
    CHECK(qkv_schedule_parse(&s, "  ", 1, 0, 0, 0, 0) == QKV_ERR_INVALID);
}

int main(void) {
    RUN(matches_torch);
    RUN(trax_rsqrt);
    RUN(bad_specs);
    return test_finish();
}
