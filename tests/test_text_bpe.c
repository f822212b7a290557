/* Byte-level BPE: GPT-2 reference ids and offsets (HF tokenizers, shared/pretrained/gpt2-tokenizer), round trips of
 * arbitrary bytes, special tokens, bad files, and the trainer. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/text.h"
#include "test.h"
#include "test_text_json.h"

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static qkv_bpe *load_gpt2(void) {
    const char *dir = test_shared_path("pretrained/gpt2-tokenizer");
    if (!dir) return NULL;
    char v[4096], m[4096];
    snprintf(v, sizeof v, "%s/vocab.json", dir);
    snprintf(m, sizeof m, "%s/merges.txt", dir);
    if (!test_file_exists(v)) return NULL;
    return qkv_bpe_load(v, m);
}

TEST(gpt2_reference_ids_offsets) {
    qkv_bpe *b = load_gpt2();
    if (!b) {
        test_skip("GPT-2 tokenizer files not found under QKV_SHARED (%s)", qkv_last_error());
        return;
    }
    CHECK(qkv_bpe_vocab_size(b) == 50257);
    size_t len = 0;
    char *ref = tt_slurp(test_shared_path("pretrained/gpt2-tokenizer/reference.jsonl"), &len);
    CHECK_NN(ref);
    int lines = 0;
    for (char *line = ref; ref && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        cJSON *j = cJSON_Parse(line);
        CHECK_NN(j);
        if (!j) break;
        size_t tlen = 0;
        char *text = tt_json_string(line, "text", &tlen);
        CHECK_NN(text);
        if (!text) break;
        qkv_encoding e;
        CHECK_OK(qkv_bpe_encode_full(b, text, tlen, &e));
        cJSON *ids = cJSON_GetObjectItem(j, "ids"), *offs = cJSON_GetObjectItem(j, "offsets");
        size_t n = (size_t)cJSON_GetArraySize(ids);
        CHECKF(e.n == n, "line %d \"%s\": %zu ids, expected %zu", lines + 1, text, e.n, n);
        qkv_utf8_char_offsets(text, tlen, e.offsets, 2 * e.n);
        for (size_t i = 0; i < n && i < e.n; i++) {
            cJSON *o = cJSON_GetArrayItem(offs, (int)i);
            int id = cJSON_GetArrayItem(ids, (int)i)->valueint;
            int s = cJSON_GetArrayItem(o, 0)->valueint, t = cJSON_GetArrayItem(o, 1)->valueint;
            CHECKF(e.ids[i] == id, "line %d \"%s\": id[%zu] = %d, expected %d", lines + 1, text, i, e.ids[i], id);
            CHECKF(e.offsets[2 * i] == (size_t)s && e.offsets[2 * i + 1] == (size_t)t,
                   "line %d \"%s\": offsets[%zu] = (%zu,%zu), expected (%d,%d)", lines + 1, text, i,
                   e.offsets[2 * i], e.offsets[2 * i + 1], s, t);
        }
        char *dec;
        size_t dlen;
        CHECK_OK(qkv_bpe_decode(b, e.ids, e.n, &dec, &dlen));
        CHECKF(dlen == tlen && memcmp(dec, text, tlen) == 0, "line %d: decode(encode(x)) != x", lines + 1);
        free(dec);
        qkv_encoding_free(&e);
        cJSON_Delete(j);
        free(text);
        lines++;
        if (!nl) break;
        line = nl + 1;
    }
    CHECKF(lines == 40, "%d reference lines", lines);
    printf("  %d GPT-2 reference texts compared (ids, offsets, round trip)\n", lines);
    free(ref);
    qkv_bpe_free(b);
}

TEST(gpt2_roundtrip_any_bytes) {
    qkv_bpe *b = load_gpt2();
    if (!b) {
        test_skip("GPT-2 tokenizer files not found under QKV_SHARED");
        return;
    }
    uint64_t s = 12345;
    char buf[300];
    for (int iter = 0; iter < 300; iter++) {
        size_t len = (size_t)(iter % 97) * 3;
        for (size_t i = 0; i < len; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            unsigned r = (unsigned)(s >> 33);
            /* a mix of ASCII letters, spaces, UTF-8 lead/continuation bytes and anything */
            static const char pool[] = "ab \n'\xc3\xa9\xe2\x82\xac\xf0\x9f";
            if (iter % 3 == 0) buf[i] = (char)(r & 0xff);
            else if (iter % 3 == 1) buf[i] = pool[r % 12];
            else buf[i] = (char)(r % 5 ? 'a' + r % 26 : 0x80 + r % 64);
        }
        int32_t *ids;
        size_t n;
        CHECK_OK(qkv_bpe_encode(b, buf, len, &ids, &n));
        char *dec;
        size_t dlen;
        CHECK_OK(qkv_bpe_decode(b, ids, n, &dec, &dlen));
        CHECKF(dlen == len && memcmp(dec, buf, len) == 0, "iteration %d: round trip failed", iter);
        free(ids);
        free(dec);
    }
    /* A lone continuation byte and a truncated sequence between words: every byte survives. */
    const char bad[] = "caf\xc3 \x80x\xff\xfe word \xe2\x82";
    int32_t *ids;
    size_t n;
    CHECK_OK(qkv_bpe_encode(b, bad, sizeof bad - 1, &ids, &n));
    char *dec;
    size_t dlen;
    CHECK_OK(qkv_bpe_decode(b, ids, n, &dec, &dlen));
    CHECK(dlen == sizeof bad - 1 && memcmp(dec, bad, dlen) == 0);
    free(ids);
    free(dec);
    qkv_bpe_free(b);
}

TEST(gpt2_specials_and_errors) {
    qkv_bpe *b = load_gpt2();
    if (!b) {
        test_skip("GPT-2 tokenizer files not found under QKV_SHARED");
        return;
    }
    int32_t *ids;
    size_t n;
    CHECK_OK(qkv_bpe_encode(b, "a<|endoftext|>b", 15, &ids, &n));
    CHECK(n == 3 && ids[1] == 50256);
    free(ids);
    qkv_bpe_set_specials_enabled(b, false);
    CHECK_OK(qkv_bpe_encode(b, "a<|endoftext|>b", 15, &ids, &n));
    CHECK(n > 3);
    for (size_t i = 0; i < n; i++) CHECK(ids[i] != 50256);
    free(ids);
    qkv_bpe_set_specials_enabled(b, true);
    /* A new special token gets the next id and decodes to itself. */
    CHECK_OK(qkv_bpe_add_special(b, "<|pad|>"));
    CHECK(qkv_bpe_vocab_size(b) == 50258);
    CHECK_OK(qkv_bpe_encode(b, "<|pad|> hi", 10, &ids, &n));
    CHECK(n == 2 && ids[0] == 50257);
    char *dec;
    size_t dlen;
    CHECK_OK(qkv_bpe_decode(b, ids, n, &dec, &dlen));
    CHECK(dlen == 10 && memcmp(dec, "<|pad|> hi", 10) == 0);
    free(dec);
    free(ids);
    /* Several specials, interleaved and adjacent. */
    const char *mix = "<|pad|><|endoftext|><|pad|>x<|endoftext|>";
    CHECK_OK(qkv_bpe_encode(b, mix, strlen(mix), &ids, &n));
    int32_t want[] = {50257, 50256, 50257, qkv_bpe_id(b, "x"), 50256};
    CHECK(n == 5 && memcmp(ids, want, sizeof want) == 0);
    free(ids);
    int32_t badids[] = {15496, 60000};
    CHECK(qkv_bpe_decode(b, badids, 2, &dec, &dlen) == QKV_ERR_RANGE);
    CHECK(strstr(qkv_last_error(), "60000") && strstr(qkv_last_error(), "position 1"));
    badids[1] = -1;
    CHECK(qkv_bpe_decode(b, badids, 2, &dec, &dlen) != QKV_OK);
    qkv_bpe_free(b);
}

TEST(bad_files) {
    write_file("tt_bpe_vocab_array.json", "[1, 2, 3]");
    write_file("tt_bpe_merges.txt", "#version: 0.2\na b\n");
    CHECK(qkv_bpe_load("tt_bpe_vocab_array.json", "tt_bpe_merges.txt") == NULL);
    CHECKF(qkv_last_status() == QKV_ERR_FORMAT && strstr(qkv_last_error(), "tt_bpe_vocab_array.json") &&
               strstr(qkv_last_error(), "object"),
           "got: %s", qkv_last_error());
    write_file("tt_bpe_vocab_bad.json", "{\"a\": 0, \"b\": ");
    CHECK(qkv_bpe_load("tt_bpe_vocab_bad.json", "tt_bpe_merges.txt") == NULL);
    CHECK(strstr(qkv_last_error(), "JSON") != NULL);
    write_file("tt_bpe_vocab_str.json", "{\"a\": \"zero\"}");
    CHECK(qkv_bpe_load("tt_bpe_vocab_str.json", "tt_bpe_merges.txt") == NULL);
    CHECK(strstr(qkv_last_error(), "\"a\"") != NULL);
    CHECK(qkv_bpe_load("tt_no_such_file.json", "tt_bpe_merges.txt") == NULL);
    CHECK(qkv_last_status() == QKV_ERR_IO && strstr(qkv_last_error(), "tt_no_such_file.json"));

    /* A valid small byte-level vocabulary: train one, then corrupt its merges. */
    const char *texts[] = {"aaa bbb aaa bbb ab ab ab"};
    size_t lens[] = {strlen(texts[0])};
    CHECK_OK(qkv_bpe_train(texts, lens, 1, 260, 1, NULL, "tt_bpe_v.json", "tt_bpe_m.txt"));
    qkv_bpe *b = qkv_bpe_load("tt_bpe_v.json", "tt_bpe_m.txt");
    CHECK_NN(b);
    qkv_bpe_free(b);
    /* The first learned merge, then a line without a separator. */
    size_t mlen = 0;
    char *learned = tt_slurp("tt_bpe_m.txt", &mlen), first[64] = "";
    CHECK_NN(learned);
    if (learned) sscanf(learned, "#version: 0.2\n%63[^\n]", first);
    free(learned);
    CHECK(strchr(first, ' ') != NULL);
    char bad[256];
    snprintf(bad, sizeof bad, "#version: 0.2\n%s\nab\n", first);
    write_file("tt_bpe_m_bad.txt", bad);
    CHECK(qkv_bpe_load("tt_bpe_v.json", "tt_bpe_m_bad.txt") == NULL);
    CHECKF(strstr(qkv_last_error(), "tt_bpe_m_bad.txt:3") != NULL, "got: %s", qkv_last_error());
    snprintf(bad, sizeof bad, "%s\nq z\n", first);
    write_file("tt_bpe_m_bad.txt", bad);
    CHECK(qkv_bpe_load("tt_bpe_v.json", "tt_bpe_m_bad.txt") == NULL);
    CHECKF(strstr(qkv_last_error(), "tt_bpe_m_bad.txt:2") && strstr(qkv_last_error(), "qz"), "got: %s",
           qkv_last_error());
    write_file("tt_bpe_m_bad.txt", "a  b\n");
    CHECK(qkv_bpe_load("tt_bpe_v.json", "tt_bpe_m_bad.txt") == NULL);
    CHECK(strstr(qkv_last_error(), "tt_bpe_m_bad.txt:1") != NULL);
    remove("tt_bpe_vocab_array.json");
    remove("tt_bpe_vocab_bad.json");
    remove("tt_bpe_vocab_str.json");
    remove("tt_bpe_merges.txt");
    remove("tt_bpe_m_bad.txt");
    remove("tt_bpe_v.json");
    remove("tt_bpe_m.txt");
}

TEST(trainer) {
    /* "hug" and " hug" dominate: the first merges must build them, in a fixed order. */
    const char *texts[] = {"hug hug hug pug pun bun hugs", "hug pug hug hugs bun bun", "<|endoftext|>"};
    size_t lens[3];
    for (int i = 0; i < 3; i++) lens[i] = strlen(texts[i]);
    const char *specials[] = {"<|endoftext|>", NULL};
    CHECK_OK(qkv_bpe_train(texts, lens, 2, 256 + 6, 2, specials, "tt_train_v.json", "tt_train_m.txt"));
    size_t len = 0;
    char *merges = tt_slurp("tt_train_m.txt", &len);
    CHECK_NN(merges);
    /* Counted by hand: "u g" occurs 9 times (hug, " hug", " pug", " hugs"), "h u" 7, " h" 5: "u g" first. */
    CHECKF(merges && strncmp(merges, "#version: 0.2\nu g\n", 18) == 0, "merges: %s", merges ? merges : "");
    free(merges);
    qkv_bpe *b = qkv_bpe_load("tt_train_v.json", "tt_train_m.txt");
    CHECK_NN(b);
    if (b) {
        CHECK(qkv_bpe_vocab_size(b) == 256 + 6 + 1);
        CHECK(qkv_bpe_id(b, "ug") == 256);
        int32_t *ids;
        size_t n;
        CHECK_OK(qkv_bpe_encode(b, "hug<|endoftext|>", 16, &ids, &n));
        CHECK(n >= 2 && ids[n - 1] == 256 + 6);
        free(ids);
        /* Deterministic: training twice gives the same files. */
        CHECK_OK(qkv_bpe_train(texts, lens, 2, 256 + 6, 2, specials, "tt_train_v2.json", "tt_train_m2.txt"));
        size_t l1 = 0, l2 = 0;
        char *a = tt_slurp("tt_train_m.txt", &l1), *c = tt_slurp("tt_train_m2.txt", &l2);
        CHECK(a && c && l1 == l2 && memcmp(a, c, l1) == 0);
        free(a);
        free(c);
        qkv_bpe_free(b);
    }
    CHECK(qkv_bpe_train(texts, lens, 2, 100, 1, NULL, "tt_train_v.json", "tt_train_m.txt") == QKV_ERR_INVALID);
    remove("tt_train_v.json");
    remove("tt_train_m.txt");
    remove("tt_train_v2.json");
    remove("tt_train_m2.txt");
}

TEST(trainer_on_real_text) {
    const char *path = test_shared_path("data/lm/dev.txt");
    size_t len = 0;
    char *text = path ? tt_slurp(path, &len) : NULL;
    if (!text) {
        test_skip("shared/data/lm/dev.txt not found (QKV_SHARED)");
        return;
    }
    const char *texts[] = {text};
    CHECK_OK(qkv_bpe_train(texts, &len, 1, 256 + 2000, 2, NULL, "tt_real_v.json", "tt_real_m.txt"));
    qkv_bpe *b = qkv_bpe_load("tt_real_v.json", "tt_real_m.txt");
    CHECK_NN(b);
    if (b) {
        int32_t *ids;
        size_t n;
        CHECK_OK(qkv_bpe_encode(b, text, len, &ids, &n));
        char *dec;
        size_t dlen;
        CHECK_OK(qkv_bpe_decode(b, ids, n, &dec, &dlen));
        CHECK(dlen == len && memcmp(dec, text, len) == 0);
        /* 2000 merges learned on this very text: well over 3 bytes per token (800 give ~2.97) */
        CHECKF(n * 3 < len, "%zu tokens for %zu bytes", n, len);
        printf("  trained 2000 merges on lm/dev.txt: %zu bytes -> %zu tokens\n", len, n);
        free(ids);
        free(dec);
        qkv_bpe_free(b);
    }
    free(text);
    remove("tt_real_v.json");
    remove("tt_real_m.txt");
}

int main(void) {
    RUN(gpt2_reference_ids_offsets);
    RUN(gpt2_roundtrip_any_bytes);
    RUN(gpt2_specials_and_errors);
    RUN(bad_files);
    RUN(trainer);
    RUN(trainer_on_real_text);
    return test_finish();
}
