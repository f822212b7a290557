/* SQuAD v1.1 exact match and token F1 (src/metrics/squad.c) on hand cases. The expected values are what the official
 * evaluate-v1.1.py's normalize_answer / f1_score / exact_match_score give (checked once by running them; the
 * reasons are in the comments). */
#include <math.h>
#include <string.h>

#include "qkv/metrics.h"
#include "test.h"

typedef struct {
    const char *pred;
    const char *golds[3];
    double em, f1;
} squad_case;

TEST(hand_cases) {
    static const squad_case cases[] = {
        {"The Eiffel Tower!", {"eiffel tower"}, 1, 1},                  /* case, article, punctuation */
        {"an apple a day", {"Apple day"}, 1, 1},                         /* all three articles go */
        {"the cat sat on the mat", {"a cat sat", "mat"}, 0, 2.0 / 3},    /* max over golds: 2*(2/4)(2/2)/(1.5) */
        {"Th\u00e9\u00e2tre  de   l'Od\u00e9on", {"TH\u00c9\u00c2TRE DE LOD\u00c9ON"}, 1, 1}, /* Unicode lower, ' */
        {"anna and the thea", {"anna thea"}, 0, 0.8},                    /* "an"/"the" inside words stay */
        {"a_the", {"athe"}, 1, 1},                                       /* '_' is punctuation, removed first */
        {"the", {"a"}, 1, 0},                                            /* both empty: EM 1, F1 0 (v1.1) */
        {"", {""}, 1, 0},
        {"1,000 men", {"1000 men", "thousand men"}, 1, 1},
        {"the the the cat", {"cat cat"}, 0, 2.0 / 3},                    /* multiset: one common "cat" */
        {"\u03a9 the \u03a9", {"\u03c9 \u03c9"}, 1, 1},                  /* Greek capital omega lowercased */
        {"New York City", {"York"}, 0, 0.5},
        {"th\u00e9a", {"a"}, 0, 0},                                      /* no \b between e-acute and a */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const squad_case *c = &cases[i];
        int n = 0;
        while (n < 3 && c->golds[n]) n++;
        double em = -1, f1 = -1;
        CHECK_OK(qkv_squad_score(c->pred, c->golds, n, &em, &f1));
        CHECKF(em == c->em && fabs(f1 - c->f1) < 1e-12, "'%s': em %g f1 %.6f, wanted %g %.6f", c->pred, em, f1, c->em,
               c->f1);
    }
    double em, f1;
    const char *golds[1] = {"x"};
    CHECK(qkv_squad_score("x", golds, 0, &em, &f1) == QKV_ERR_INVALID);
    const char *bad[1] = {"\xff"};
    CHECK(qkv_squad_score("x", bad, 1, &em, &f1) == QKV_ERR_FORMAT);
}

int main(void) {
    RUN(hand_cases);
    return test_finish();
}
