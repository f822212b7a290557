/* Question-answering data (src/io/qa.c, src/io/cloze.c): SQuAD JSONL read with answers checked at their character
 * offsets (both answer layouts, non-ASCII contexts, errors naming file and line), and cloze questions from text by
 * the documented rules, deterministic under a seed, applied to the shared lm splits. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

static char dir[256];

TEST(reads_both_layouts_with_char_offsets) {
    const char *p = test_write_file(dir, "a.jsonl",
        "{\"id\": \"q1\", \"context\": \"Caf\\u00e9 au lait in Paris.\", \"question\": \"Where?\", "
        "\"answers\": {\"text\": [\"Paris\", \"in Paris\"], \"answer_start\": [16, 13]}}\n"
        "\n"
        "{\"context\": \"abc def\", \"question\": \"?\", \"answers\": [{\"text\": \"def\", \"answer_start\": 4}]}\n");
    qkv_qa_example *e;
    size_t n;
    CHECK_OK(qkv_qa_read(p, &e, &n));
    CHECK(n == 2);
    if (n == 2) {
        CHECK(!strcmp(e[0].id, "q1") && e[0].n_answers == 2 && !strcmp(e[0].answers[0], "Paris"));
        CHECK(e[0].answer_char[0] == 16 && e[0].answer_byte[0] == 17); /* é is two bytes */
        CHECK(!strcmp(e[1].id, "3") && e[1].answer_byte[0] == 4 && e[1].line == 3);
        qkv_qa_free(e, n);
    }
}

TEST(bad_offsets_name_file_and_line) {
    struct { const char *line, *want; } cases[] = {
        {"{\"context\": \"abc def\", \"question\": \"?\", \"answers\": {\"text\": [\"def\"], \"answer_start\": [3]}}",
         "b.jsonl:2: answer 1 'def' at character 3 does not match the context (it reads ' de')"},
        {"{\"context\": \"abc\", \"question\": \"?\", \"answers\": {\"text\": [\"c\"], \"answer_start\": [9]}}",
         "b.jsonl:2: answer 1 'c' at character 9 does not match the context (past its end)"},
        {"{\"context\": \"abc\", \"answers\": []}", "b.jsonl:2: expected string fields"},
        {"{\"context\": \"abc\", \"question\": \"?\", \"answers\": []}", "b.jsonl:2: no answer"},
        {"[1, 2]", "b.jsonl:2: invalid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"context\": \"x\", \"question\": \"?\", \"answers\": {\"text\": [\"x\"], \"answer_start\": [0]}}\n%s\n",
                 cases[i].line);
        const char *p = test_write_file(dir, "b.jsonl", text);
        qkv_qa_example *e = NULL;
        size_t n = 0;
        qkv_status st = qkv_qa_read(p, &e, &n);
        CHECKF(st == QKV_ERR_FORMAT && strstr(qkv_last_error(), cases[i].want), "case %zu: %s", i, qkv_last_error());
    }
}

/* Reads the cloze output of text with the given options back through the validating reader. */
static qkv_qa_example *cloze(const char *text, qkv_cloze_opts o, size_t *n) {
    const char *in = test_write_file(dir, "in.txt", text);
    char out[512];
    snprintf(out, sizeof out, "%s/out.jsonl", dir);
    FILE *f = fopen(out, "w");
    int64_t written = -1;
    qkv_status st = qkv_cloze_qa(in, f, &o, &written);
    fclose(f);
    CHECKF(st == QKV_OK, "%s", qkv_last_error());
    qkv_qa_example *e = NULL;
    *n = 0;
    if (written > 0) CHECK_OK(qkv_qa_read(out, &e, n));
    CHECK((int64_t)*n == (written > 0 ? written : 0));
    return e;
}

TEST(cloze_rules) {
    qkv_cloze_opts o = qkv_cloze_defaults();
    o.context_sentences = 2;
    /* Sentences: "Mr. Darcy ..." is one (abbreviation), '"Oh!" said she' is one; windows of 3 sentences. The
     * question of the first window has one named candidate (Emma; Mr is a title, She starts the sentence) and no
     * noun (the garden is not in the context). */
    const char *text = "Mr. Darcy met Emma in the house. \"Oh!\" said she, and left the house.\n"
                       "She saw Emma walk to the garden with Mr. Darcy at noon.\n"
                       "The dog slept. A cat sat. The cat looked at the dog.\n";
    size_t n;
    qkv_qa_example *e = cloze(text, o, &n);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(!strcmp(e[0].context, "Mr. Darcy met Emma in the house. \"Oh!\" said she, and left the house."));
        /* Candidates: Emma (named), Darcy (named) — "house" is not in the question. */
        CHECK(!strcmp(e[0].answers[0], "Emma") || !strcmp(e[0].answers[0], "Darcy"));
        CHECK(strstr(e[0].question, "XXXXX") && !strstr(e[0].question, e[0].answers[0]));
        /* The second window: "the dog." is a noun before punctuation, "the cat" before "looked" is not. */
        CHECK(!strcmp(e[1].answers[0], "dog") && !strcmp(e[1].question, "The cat looked at the XXXXX."));
        CHECK(e[1].answer_byte[0] == 4);
    }
    qkv_qa_free(e, n);
    /* --blank: the same questions with another blank, longer than the word and twice in one question. */
    o.blank = "<extra_id_0>";
    e = cloze("Ann saw a dog. A cat sat.\nThe dog met the dog.\n", o, &n);
    CHECK(n == 1 && !strcmp(e[0].question, "The <extra_id_0> met the <extra_id_0>."));
    qkv_qa_free(e, n);
    o.blank = "two\nlines";
    const char *in = test_write_file(dir, "in.txt", text);
    FILE *f = fopen("/dev/null", "w");
    CHECK(qkv_cloze_qa(in, f, &o, NULL) == QKV_ERR_INVALID && strstr(qkv_last_error(), "blank"));
    fclose(f);
    o.blank = "XXXXX";
    /* Named words only: the second window has none. */
    o.nouns = false;
    e = cloze(text, o, &n);
    CHECK(n == 1);
    qkv_qa_free(e, n);
}

TEST(cloze_is_seeded) {
    const char *text = "Anna met Bob and Carl and Dora. Eve saw Anna.\nAnna, Bob, Carl and Dora ran.\n";
    qkv_cloze_opts o = qkv_cloze_defaults();
    o.context_sentences = 2;
    char seen[8][16];
    int distinct = 0;
    for (uint64_t s = 1; s <= 8; s++) {
        o.seed = s;
        size_t n, n2;
        qkv_qa_example *a = cloze(text, o, &n), *b = cloze(text, o, &n2);
        CHECK(n == 1 && n2 == 1);
        if (n == 1 && n2 == 1) {
            CHECK(!strcmp(a[0].answers[0], b[0].answers[0]));
            bool dup = false;
            for (int k = 0; k < distinct; k++) dup = dup || !strcmp(seen[k], a[0].answers[0]);
            if (!dup) snprintf(seen[distinct++], sizeof seen[0], "%s", a[0].answers[0]);
        }
        qkv_qa_free(a, n);
        qkv_qa_free(b, n2);
    }
    CHECKF(distinct >= 3, "seeds picked only %d distinct words", distinct); /* Anna is not a candidate: it starts */
}

TEST(cloze_on_the_shared_lm_splits) {
    const char *splits[] = {"data/lm/dev.txt", "data/lm/test.txt"};
    for (int i = 0; i < 2; i++) {
        const char *in = test_shared_path(splits[i]);
        if (!in || access(in, R_OK)) {
            test_skip("shared lm data not found (%s)", splits[i]);
            return;
        }
        char out[512];
        snprintf(out, sizeof out, "%s/lm%d.jsonl", dir, i);
        FILE *f = fopen(out, "w");
        qkv_cloze_opts o = qkv_cloze_defaults();
        int64_t written = 0;
        CHECK_OK(qkv_cloze_qa(in, f, &o, &written));
        fclose(f);
        qkv_qa_example *e;
        size_t n = 0;
        CHECK_OK(qkv_qa_read(out, &e, &n));
        /* 36k words of Austen: ~70 windows of 21 sentences, 30-35 of them with a candidate. */
        CHECKF(n == (size_t)written && n >= 25, "%s: %zu questions", splits[i], n);
        printf("  %s: %zu questions\n", splits[i], n);
        qkv_qa_free(e, n);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/qkv_qa_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(reads_both_layouts_with_char_offsets);
    RUN(bad_offsets_name_file_and_line);
    RUN(cloze_rules);
    RUN(cloze_is_seeded);
    RUN(cloze_on_the_shared_lm_splits);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish();
}
