/* Accuracy, masked/sequence accuracy, confusion matrix + P/R/F1, conlleval entity F1 and perplexity on
 * hand-computed cases (each expected value is worked out in the comment next to it). */
#include <math.h>
#include <string.h>

#include "qkv/metrics.h"
#include "test.h"

#define NEAR(a, b) CHECKF(fabs((a) - (b)) < 1e-12, "%s = %.12f, expected %.12f", #a, (double)(a), (double)(b))

TEST(accuracy) {
    int32_t p[] = {1, 2, 3, 4}, g[] = {1, 2, 0, 4};
    double a;
    CHECK_OK(qkv_metric_accuracy(p, g, 4, &a));
    NEAR(a, 0.75);
    CHECK(qkv_metric_accuracy(p, g, 0, &a) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "no examples") != NULL);
    CHECK(qkv_metric_accuracy(NULL, g, 4, &a) == QKV_ERR_INVALID);
}

TEST(masked_accuracy) {
    /* ignore_index -100: counted tokens 1,2,3(wrong) | 1 -> 3/4; sequences: first wrong, second right -> 1/2 */
    int32_t p[] = {1, 2, 3, 1, 0, 0}, g[] = {1, 2, 4, 1, -100, -100};
    double tok, seq;
    CHECK_OK(qkv_metric_masked_accuracy(p, g, NULL, 2, 3, -100, &tok, &seq));
    NEAR(tok, 0.75);
    NEAR(seq, 0.5);
    /* an explicit mask hiding the wrong token: 3/3 and 2/2 */
    uint8_t m[] = {1, 1, 0, 1, 1, 1};
    CHECK_OK(qkv_metric_masked_accuracy(p, g, m, 2, 3, -100, &tok, &seq));
    NEAR(tok, 1.0);
    NEAR(seq, 1.0);
    uint8_t none[6] = {0};
    CHECK(qkv_metric_masked_accuracy(p, g, none, 2, 3, -100, &tok, &seq) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "masked out") != NULL);
}

TEST(classify_prf) {
    /* gold 0 0 1 1 2 2, pred 0 0 1 2 2 1, 4 classes (3 never seen: left out of the macro mean, as sklearn)
     * class 0: P 1 R 1; class 1: tp 1 of 2 predicted, 2 gold -> .5/.5; class 2: .5/.5; macro F1 = 2/3 */
    int32_t g[] = {0, 0, 1, 1, 2, 2}, p[] = {0, 0, 1, 2, 2, 1};
    qkv_classify_result r;
    CHECK_OK(qkv_metric_classify(p, g, 6, 4, &r));
    CHECK(r.confusion[0 * 4 + 0] == 2 && r.confusion[1 * 4 + 2] == 1 && r.confusion[2 * 4 + 1] == 1);
    CHECK(r.support[0] == 2 && r.support[3] == 0);
    NEAR(r.per_class[1].f1, 0.5);
    NEAR(r.per_class[3].f1, 0.0);
    NEAR(r.macro.f1, 2.0 / 3);
    NEAR(r.macro.precision, 2.0 / 3);
    NEAR(r.micro.f1, 4.0 / 6);
    NEAR(r.accuracy, 4.0 / 6);
    qkv_classify_free(&r);
    /* macro F1 is the mean of per-class F1, not F1 of the macro P/R: gold 0 0 0 1, pred 0 1 1 1
     * class 0: P 1 R 1/3 F .5; class 1: P 1/3 R 1 F .5 -> macro F1 .5 while F1(macro P, macro R) = 2/3 */
    int32_t g2[] = {0, 0, 0, 1}, p2[] = {0, 1, 1, 1};
    CHECK_OK(qkv_metric_classify(p2, g2, 4, 2, &r));
    NEAR(r.macro.f1, 0.5);
    NEAR(r.macro.precision, 2.0 / 3);
    qkv_classify_free(&r);
    int32_t bad[] = {0, 5};
    CHECK(qkv_metric_classify(bad, g2, 2, 2, &r) == QKV_ERR_RANGE);
    CHECKF(strstr(qkv_last_error(), "pred[1] = 5 is outside 0..1") != NULL, "%s", qkv_last_error());
    CHECK(qkv_metric_classify(p2, g2, 4, 0, &r) == QKV_ERR_INVALID);
}

TEST(chunk_f1_conlleval) {
    /* gold: PER(0-1) LOC(3) | ORG(5-6, an I- after the boundary starts a chunk); pred: PER(0-1) ORG(3) | ORG(5-6)
     * correct: PER and the second ORG -> P = R = 2/3; tags: positions 3 and 5 differ -> 5/7 */
    const char *g[] = {"B-PER", "I-PER", "O", "B-LOC", "", "I-ORG", "I-ORG", "O"};
    const char *p[] = {"B-PER", "I-PER", "O", "B-ORG", "", "B-ORG", "I-ORG", "O"};
    qkv_chunk_result r;
    CHECK_OK(qkv_metric_chunk_f1(g, p, 8, QKV_TAGS_IOB2, &r));
    CHECK(r.n_gold == 3 && r.n_pred == 3 && r.n_correct == 2);
    NEAR(r.prf.f1, 2.0 / 3);
    CHECK(r.n_tokens == 7 && r.n_correct_tags == 5);
    CHECK(r.n_types == 3 && strcmp(r.types[0].type, "LOC") == 0 && strcmp(r.types[1].type, "ORG") == 0);
    CHECK(r.types[1].n_gold == 1 && r.types[1].n_pred == 2 && r.types[1].n_correct == 1);
    NEAR(r.types[1].prf.precision, 0.5);
    NEAR(r.types[0].prf.f1, 0.0);
    qkv_chunk_free(&r);
    /* IOB1: B- separates adjacent chunks. gold I I B = two chunks, pred I I I = one -> 0 correct */
    const char *g1[] = {"I-PER", "I-PER", "B-PER"}, *p1[] = {"I-PER", "I-PER", "I-PER"};
    CHECK_OK(qkv_metric_chunk_f1(g1, p1, 3, QKV_TAGS_IOB1, &r));
    CHECK(r.n_gold == 2 && r.n_pred == 1 && r.n_correct == 0);
    qkv_chunk_free(&r);
    /* a type change inside I- tags ends one chunk and starts another; a chunk open at the end is closed */
    const char *g2[] = {"B-PER", "I-LOC", "I-LOC"}, *p2[] = {"B-PER", "I-LOC", "I-LOC"};
    CHECK_OK(qkv_metric_chunk_f1(g2, p2, 3, QKV_TAGS_IOB2, &r));
    CHECK(r.n_gold == 2 && r.n_correct == 2);
    NEAR(r.prf.f1, 1.0);
    qkv_chunk_free(&r);
    /* a prediction that ends a chunk early is wrong even though it starts right */
    const char *g3[] = {"B-X", "I-X", "O"}, *p3[] = {"B-X", "O", "O"};
    CHECK_OK(qkv_metric_chunk_f1(g3, p3, 3, QKV_TAGS_IOB2, &r));
    CHECK(r.n_correct == 0 && r.n_gold == 1 && r.n_pred == 1);
    qkv_chunk_free(&r);
}

TEST(chunk_f1_errors) {
    qkv_chunk_result r;
    const char *g[] = {"B-PER", "X-PER"}, *p[] = {"B-PER", "O"};
    CHECK(qkv_metric_chunk_f1(g, p, 2, QKV_TAGS_IOB2, &r) == QKV_ERR_INVALID);
    CHECKF(strstr(qkv_last_error(), "gold tag 1 \"X-PER\"") != NULL, "%s", qkv_last_error());
    const char *g2[] = {"B-PER", ""}, *p2[] = {"B-PER", "O"};
    CHECK(qkv_metric_chunk_f1(g2, p2, 2, QKV_TAGS_IOB2, &r) == QKV_ERR_INVALID);
    CHECKF(strstr(qkv_last_error(), "boundary in gold only") != NULL, "%s", qkv_last_error());
    const char *g3[] = {"B-"}, *p3[] = {"O"};
    CHECK(qkv_metric_chunk_f1(g3, p3, 1, QKV_TAGS_IOB2, &r) == QKV_ERR_INVALID);
    CHECKF(strstr(qkv_last_error(), "has no type") != NULL, "%s", qkv_last_error());
    CHECK(qkv_metric_chunk_f1(g3, p3, 1, (qkv_tag_scheme)7, &r) == QKV_ERR_INVALID);
}

TEST(perplexity) {
    double p;
    CHECK_OK(qkv_metric_perplexity(10 * log(2.0), 10, &p));
    NEAR(p, 2.0);
    CHECK_OK(qkv_metric_perplexity(0, 5, &p));
    NEAR(p, 1.0);
    CHECK(qkv_metric_perplexity(1.0, 0, &p) == QKV_ERR_INVALID);
    CHECK(qkv_metric_perplexity(NAN, 3, &p) == QKV_ERR_NUMERIC);
    CHECK(qkv_metric_perplexity(-1.0, 3, &p) == QKV_ERR_INVALID);
}

int main(void) {
    RUN(accuracy);
    RUN(masked_accuracy);
    RUN(classify_prf);
    RUN(chunk_f1_conlleval);
    RUN(chunk_f1_errors);
    RUN(perplexity);
    return test_finish();
}
