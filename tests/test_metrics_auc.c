/* ROC AUC and the most accurate threshold, on hand-worked examples. */
#include <math.h>
#include <string.h>

#include "test.h"

TEST(auc_by_hand) {
    /* Positives 0.9, 0.4, 0.3; negatives 0.8, 0.3, 0.1. Pairs (pos, neg) ordered right: 0.9 beats all three (3),
     * 0.4 beats 0.3 and 0.1 (2), 0.3 beats 0.1 and ties 0.3 (1.5): 6.5 / 9. */
    float s[6] = {0.9f, 0.8f, 0.4f, 0.3f, 0.3f, 0.1f};
    int32_t y[6] = {1, 0, 1, 1, 0, 0};
    double auc = 0;
    CHECK_OK(qkv_metric_auc(s, y, 6, &auc));
    CHECK(fabs(auc - 6.5 / 9.0) < 1e-12);
    int32_t perfect[6] = {1, 1, 1, 0, 0, 0};
    float distinct[6] = {6, 5, 4, 3, 2, 1};
    CHECK_OK(qkv_metric_auc(distinct, perfect, 6, &auc));
    CHECK(auc == 1.0);
    int32_t one_class[2] = {1, 1};
    CHECK(qkv_metric_auc(s, one_class, 2, &auc) == QKV_ERR_INVALID && strstr(qkv_last_error(), "negatives"));
    int32_t bad[1] = {2};
    CHECK(qkv_metric_auc(s, bad, 1, &auc) == QKV_ERR_INVALID);
}

TEST(best_threshold_by_hand) {
    /* Sorted: 0.9+ 0.8- 0.4+ 0.3+ 0.3- 0.1-. Cuts: above 0.9 -> 3/6; below 0.9 -> 4; below 0.8 -> 3; below 0.4 -> 4;
     * below the 0.3s -> 4 (+1 -1); below 0.1 -> 3. First best: between 0.9 and 0.8. */
    float s[6] = {0.9f, 0.8f, 0.4f, 0.3f, 0.3f, 0.1f};
    int32_t y[6] = {1, 0, 1, 1, 0, 0};
    double t = 0, acc = 0;
    CHECK_OK(qkv_metric_best_threshold(s, y, 6, &t, &acc));
    CHECK(fabs(t - 0.85) < 1e-6 && fabs(acc - 4.0 / 6.0) < 1e-12);
    int32_t all_pos[3] = {1, 1, 1};
    CHECK_OK(qkv_metric_best_threshold(s, all_pos, 3, &t, &acc));
    CHECK(t < 0.4 && acc == 1.0); /* below the lowest score: everything positive */
    int32_t all_neg[3] = {0, 0, 0};
    CHECK_OK(qkv_metric_best_threshold(s, all_neg, 3, &t, &acc));
    CHECK(t > 0.9 && acc == 1.0);
}

int main(void) {
    RUN(auc_by_hand);
    RUN(best_threshold_by_hand);
    return test_finish();
}
