/* Vocabulary (build with min-frequency / max-size and deterministic ties, specials, save/load, bad files),
 * word-level and character-level tokenizers, and byte -> character offsets. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_text_json.h"

static void write_file(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(text, 1, len, f);
    fclose(f);
}

static bool tok_is(const qkv_vocab *v, int32_t id, const char *want) {
    const char *t = qkv_vocab_token(v, id, NULL);
    return t && strcmp(t, want) == 0;
}

TEST(vocab_build_save_load) {
    qkv_token_counter *c = qkv_token_counter_new();
    CHECK_NN(c);
    /* counts: the 4, cat 2, dog 2, bird 2, ant 1, zebra 1 */
    const char *words[] = {"the", "cat", "the", "dog", "bird", "the", "ant", "dog", "cat", "the", "zebra", "bird"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        CHECK_OK(qkv_token_counter_add(c, words[i], strlen(words[i])));
    qkv_vocab *v = qkv_vocab_build(c, QKV_SPECIAL_PAD | QKV_SPECIAL_UNK | QKV_SPECIAL_MASK, 2, 2, 0);
    CHECK_NN(v);
    /* specials in flag order, sentinels, then count desc, ties by bytes asc (bird < cat < dog) */
    const char *want[] = {"<pad>", "<unk>", "[MASK]", "<X0>", "<X1>", "the", "bird", "cat", "dog"};
    CHECK(qkv_vocab_size(v) == 9);
    for (int i = 0; i < 9; i++) CHECKF(tok_is(v, i, want[i]), "id %d is not %s", i, want[i]);
    CHECK(qkv_vocab_id(v, "ant", 3) == -1);
    CHECK(qkv_vocab_token(v, 9, NULL) == NULL && qkv_last_status() == QKV_ERR_RANGE);
    /* max_size counts the specials */
    qkv_vocab *small = qkv_vocab_build(c, QKV_SPECIAL_UNK, 0, 1, 4);
    CHECK(qkv_vocab_size(small) == 4 && tok_is(small, 1, "the") && tok_is(small, 3, "cat"));
    qkv_vocab_free(small);

    char *toks[] = {"the", "ant", "dog"};
    int32_t ids[3];
    CHECK_OK(qkv_vocab_encode(v, toks, 3, 1, ids));
    CHECK(ids[0] == 5 && ids[1] == 1 && ids[2] == 8);
    CHECK(qkv_vocab_encode(v, toks, 3, -1, ids) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "\"ant\"") != NULL);

    CHECK_OK(qkv_vocab_save(v, "tt_vocab.txt"));
    qkv_vocab *w = qkv_vocab_load("tt_vocab.txt");
    CHECK_NN(w);
    CHECK(qkv_vocab_size(w) == 9);
    for (int i = 0; i < 9 && w; i++) CHECK(tok_is(w, i, want[i]));
    qkv_vocab_free(w);

    /* UTF-8 tokens survive; duplicates, empty lines and invalid UTF-8 are errors naming file and line. */
    write_file("tt_vocab_u.txt", "naïve\n北京\n🙂\n", strlen("naïve\n北京\n🙂\n"));
    w = qkv_vocab_load("tt_vocab_u.txt");
    CHECK(w && qkv_vocab_size(w) == 3 && qkv_vocab_id(w, "北京", strlen("北京")) == 1);
    qkv_vocab_free(w);
    write_file("tt_vocab_dup.txt", "a\nb\nc\nb\n", 8);
    CHECK(qkv_vocab_load("tt_vocab_dup.txt") == NULL);
    CHECKF(strstr(qkv_last_error(), "tt_vocab_dup.txt:4") && strstr(qkv_last_error(), "line 2"), "got: %s",
           qkv_last_error());
    write_file("tt_vocab_bad.txt", "a\n\nb\n", 5);
    CHECK(qkv_vocab_load("tt_vocab_bad.txt") == NULL && strstr(qkv_last_error(), "tt_vocab_bad.txt:2"));
    write_file("tt_vocab_bad.txt", "a\nb\xff\n", 5);
    CHECK(qkv_vocab_load("tt_vocab_bad.txt") == NULL && strstr(qkv_last_error(), "tt_vocab_bad.txt:2"));
    CHECK(qkv_vocab_load("tt_no_such_vocab.txt") == NULL && qkv_last_status() == QKV_ERR_IO);
    /* A token with a line break cannot be saved. */
    CHECK(qkv_vocab_add(v, "a\nb", 3) == 9);
    CHECK(qkv_vocab_save(v, "tt_vocab.txt") == QKV_ERR_INVALID);
    CHECK(qkv_vocab_add(v, "", 0) == -1);
    remove("tt_vocab.txt");
    remove("tt_vocab_u.txt");
    remove("tt_vocab_dup.txt");
    remove("tt_vocab_bad.txt");
    qkv_vocab_free(v);
    qkv_token_counter_free(c);
}

static bool toks_are(char **t, size_t n, const char *const *want, size_t nw) {
    if (n != nw) return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i], want[i]) != 0) return false;
    return t[n] == NULL;
}

TEST(word_and_char_split) {
    const char *text = "The QUICK, brown Fox!\tÉCOLE  naïve… it's\u3000ÀB";
    char **t;
    size_t n;
    CHECK_OK(qkv_word_split(text, strlen(text), NULL, &t, &n));
    const char *plain[] = {"The", "QUICK,", "brown", "Fox!", "ÉCOLE", "naïve…", "it's", "ÀB"};
    CHECK(toks_are(t, n, plain, 8));
    free(t);
    qkv_word_opts o = {.lowercase = true};
    CHECK_OK(qkv_word_split(text, strlen(text), &o, &t, &n));
    const char *lower[] = {"the", "quick,", "brown", "fox!", "école", "naïve…", "it's", "àb"};
    CHECK(toks_are(t, n, lower, 8));
    free(t);
    o = (qkv_word_opts){.lowercase = true, .strip_punct = true, .drop_stopwords = true};
    CHECK_OK(qkv_word_split(text, strlen(text), &o, &t, &n));
    const char *all[] = {"quick", "brown", "fox", "école", "naïve", "àb"}; /* "its" is a stop word */
    CHECK(toks_are(t, n, all, 6));
    free(t);
    o = (qkv_word_opts){.strip_punct = true};
    CHECK_OK(qkv_word_split("... -- !", 8, &o, &t, &n)); /* all-punctuation words vanish */
    CHECK(n == 0 && t[0] == NULL);
    free(t);
    CHECK(qkv_word_split("ab\xc3", 3, NULL, &t, &n) == QKV_ERR_FORMAT && strstr(qkv_last_error(), "offset 2"));
    CHECK(qkv_word_split("ab\0c", 4, NULL, &t, &n) != QKV_OK && strstr(qkv_last_error(), "NUL"));
    CHECK(qkv_stopwords()[0] != NULL);

    CHECK_OK(qkv_char_split("a é北🙂", strlen("a é北🙂"), &t, &n));
    const char *chars[] = {"a", " ", "é", "北", "🙂"};
    CHECK(toks_are(t, n, chars, 5));
    free(t);
    CHECK_OK(qkv_char_split("", 0, &t, &n));
    CHECK(n == 0);
    free(t);
    CHECK(qkv_char_split("a\xe2\x82", 3, &t, &n) == QKV_ERR_FORMAT && strstr(qkv_last_error(), "offset 1"));
}

TEST(char_offsets) {
    const char *s = "aé北🙂\xff" "b"; /* bytes: a 0, é 1-2, 北 3-5, 🙂 6-9, \xff 10, b 11 */
    size_t off[] = {0, 1, 1, 3, 2, 3, 3, 6, 6, 8, 8, 10, 10, 11, 11, 12, 12, 12};
    size_t want[] = {0, 1, 1, 2, 1, 2, 2, 3, 3, 4, 3, 4, 4, 5, 5, 6, 6, 6};
    qkv_utf8_char_offsets(s, 12, off, 18);
    for (int i = 0; i < 18; i++) CHECKF(off[i] == want[i], "offset %d: %zu, expected %zu", i, off[i], want[i]);
}

int main(void) {
    RUN(vocab_build_save_load);
    RUN(word_and_char_split);
    RUN(char_offsets);
    return test_finish();
}
