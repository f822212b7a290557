/* Conversations from quoted speech (qkv/dialogue.h): each part of the rule on a made-up text, curly quotes, turn
 * limits, and the Austen novels (when the shared data is there) giving many multi-turn conversations. */
#include <stdlib.h>
#include <string.h>

#include "qkv/dialogue.h"
#include "test.h"

typedef struct {
    char out[8][512];
    int turns[8];
    int n;
} got;

static qkv_status collect(const char *text, int turns, void *user) {
    got *g = user;
    if (g->n < 8) {
        snprintf(g->out[g->n], sizeof g->out[0], "%s", text);
        g->turns[g->n] = turns;
    }
    g->n++;
    return QKV_OK;
}

static got run(const char *text, int min_turns, int max_turns) {
    got g = {0};
    qkv_dialogue_opts o = qkv_dialogue_defaults();
    o.min_turns = min_turns;
    o.max_turns = max_turns;
    CHECK_OK(qkv_dialogue_extract(text, strlen(text), &o, collect, &g));
    return g;
}

#define LQ "\xE2\x80\x9C" /* U+201C and U+201D in UTF-8 */
#define RQ "\xE2\x80\x9D"

TEST(the_rule) {
    const char *text =
        "CHAPTER 1\n"
        "\"Is it true?\" asked Emma, turning round. \"Tell me  at once.\"\n"
        "\"It is,\" said he.\n"
        "\"Then I must go. I have\n"         /* a quote left open: the same speaker goes on */
        "\"so much to do.\"\n"
        "\"Go, then.\"\n"
        "They parted without another word.\n"
        "\"Alone?\"\n"                         /* one turn: below min_turns */
        "\n"
        LQ "Curly," RQ " she said. " LQ "Quotes." RQ "\n"
        LQ "Indeed." RQ;
    got g = run(text, 2, 0);
    CHECK(g.n == 2);
    CHECKF(!strcmp(g.out[0], "Person 1: Is it true? Tell me at once. Person 2: It is, Person 1: Then I must go. I "
                             "have so much to do. Person 2: Go, then."), "%s", g.out[0]);
    CHECK(g.turns[0] == 4);
    CHECKF(!strcmp(g.out[1], "Person 1: Curly, Quotes. Person 2: Indeed."), "%s", g.out[1]);
    got one = run(text, 1, 0);
    CHECK(one.n == 3 && !strcmp(one.out[1], "Person 1: Alone?"));
    /* Pieces of at most 3 turns, each starting again at Person 1: the first conversation's fourth turn is a piece
     * of its own. */
    got cut = run(text, 1, 3);
    CHECK(cut.n == 4);
    CHECKF(!strcmp(cut.out[1], "Person 1: Go, then."), "%s", cut.out[1]);
}

TEST(bad_options) {
    qkv_dialogue_opts o = qkv_dialogue_defaults();
    o.min_turns = 0;
    got g = {0};
    CHECK(qkv_dialogue_extract("x", 1, &o, collect, &g) == QKV_ERR_INVALID && strstr(qkv_last_error(), "min_turns"));
    o = qkv_dialogue_defaults();
    o.max_turns = 1;
    CHECK(qkv_dialogue_extract("x", 1, &o, collect, &g) == QKV_ERR_INVALID);
}

static qkv_status count(const char *text, int turns, void *user) {
    long *c = user;
    c[0]++;
    c[1] += turns;
    CHECK(!strncmp(text, "Person 1: ", 10));
    return QKV_OK;
}

TEST(austen_has_conversations) {
    const char *path = test_shared_path("data/lm/dev.txt");
    char *text = path ? test_read_file(path) : NULL;
    if (!text) {
        test_skip("QKV_SHARED/data/lm/dev.txt not found (set QKV_SHARED)");
        return;
    }
    long c[2] = {0, 0};
    CHECK_OK(qkv_dialogue_extract(text, strlen(text), NULL, count, c));
    printf("  dev.txt: %ld conversations, %ld turns\n", c[0], c[1]);
    CHECK(c[0] > 20 && c[1] >= 2 * c[0]);
    free(text);
}

int main(void) {
    RUN(the_rule);
    RUN(bad_options);
    RUN(austen_has_conversations);
    return test_finish();
}
