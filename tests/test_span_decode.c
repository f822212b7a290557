/* The answer-span decoder (src/decode/span.c) on hand cases: best start <= end, the length limit, the top-n cut,
 * ties, the allowed mask, and bad arguments. */
#include <string.h>

#include "qkv/span.h"
#include "test.h"

static qkv_span dec(const float *s, const float *e, const float *allowed, int T, int top_n, int max_len) {
    qkv_span sp;
    CHECK_OK(qkv_span_decode(s, e, allowed, T, top_n, max_len, &sp));
    return sp;
}

TEST(hand_cases) {
    qkv_span sp = dec((float[]){0, 5, 1, 0}, (float[]){0, 1, 6, 0}, NULL, 4, 20, 30);
    CHECK(sp.start == 1 && sp.end == 2 && sp.score == 11);
    /* The best end (1) lies before the best start (2): the next end that follows it wins. */
    sp = dec((float[]){0, 0, 9, 0}, (float[]){0, 8, 0, 1}, NULL, 4, 2, 30);
    CHECK(sp.start == 2 && sp.end == 3 && sp.score == 10);
    /* Too long (0..3 with max 2): the best short span, ties to the higher-ranked end (0 before 1, 2). */
    sp = dec((float[]){9, 0, 0, 0}, (float[]){0, 0, 0, 9}, NULL, 4, 4, 2);
    CHECK(sp.start == 0 && sp.end == 0 && sp.score == 9);
    /* top_n 1: the only pair is (1, 0), invalid: no span; top_n 2 finds (1, 1). */
    sp = dec((float[]){1, 5, 0}, (float[]){4, 0, 0}, NULL, 3, 1, 30);
    CHECK(sp.start == -1 && sp.end == -1);
    sp = dec((float[]){1, 5, 0}, (float[]){4, 0, 0}, NULL, 3, 2, 30);
    CHECK(sp.start == 1 && sp.end == 1);
    /* Positions outside the context are never chosen, however high their scores. */
    sp = dec((float[]){9, 1, 2, 0}, (float[]){9, 0, 3, 1}, (float[]){0, 1, 1, 1}, 4, 20, 30);
    CHECK(sp.start == 2 && sp.end == 2 && sp.score == 5);
    qkv_span bad;
    CHECK(qkv_span_decode((float[]){0}, (float[]){0}, NULL, 1, 0, 3, &bad) == QKV_ERR_INVALID);
    CHECK(qkv_span_decode((float[]){0}, (float[]){0}, NULL, 1, 1, 0, &bad) == QKV_ERR_INVALID);
}

int main(void) {
    RUN(hand_cases);
    return test_finish();
}
