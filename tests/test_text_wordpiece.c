/* WordPiece (BERT): bert-base-uncased reference ids, offsets, special-token ids, pair type ids and decoded text
 * (HF tokenizers, shared/pretrained/bert-base-uncased-tokenizer), options, and bad input. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_text_json.h"

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static qkv_wordpiece *load_bert(void) {
    const char *p = test_shared_path("pretrained/bert-base-uncased-tokenizer/vocab.txt");
    if (!p || !test_file_exists(p)) return NULL;
    return qkv_wordpiece_load(p, NULL);
}

static bool same_ids(const cJSON *arr, const int32_t *ids, size_t n) {
    if ((size_t)cJSON_GetArraySize(arr) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (cJSON_GetArrayItem(arr, (int)i)->valueint != ids[i]) return false;
    return true;
}

TEST(bert_reference) {
    qkv_wordpiece *w = load_bert();
    if (!w) {
        test_skip("BERT vocab.txt not found under QKV_SHARED");
        return;
    }
    CHECK(qkv_wordpiece_vocab_size(w) == 30522);
    size_t len = 0;
    char *ref = tt_slurp(test_shared_path("pretrained/bert-base-uncased-tokenizer/reference.jsonl"), &len);
    CHECK_NN(ref);
    int lines = 0;
    for (char *line = ref; ref && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        lines++;
        cJSON *j = cJSON_Parse(line);
        size_t tlen = 0, dlen_ref = 0;
        char *text = tt_json_string(line, "text", &tlen), *dec_ref = tt_json_string(line, "decoded", &dlen_ref);
        CHECK(j && text && dec_ref);
        if (!j || !text || !dec_ref) break;
        qkv_encoding e, es;
        CHECK_OK(qkv_wordpiece_encode(w, text, tlen, NULL, 0, false, &e));
        CHECK_OK(qkv_wordpiece_encode(w, text, tlen, NULL, 0, true, &es));
        CHECKF(same_ids(cJSON_GetObjectItem(j, "ids"), e.ids, e.n), "line %d \"%s\": ids differ (%zu ids)", lines,
               text, e.n);
        CHECKF(same_ids(cJSON_GetObjectItem(j, "ids_with_special"), es.ids, es.n),
               "line %d: ids with [CLS]/[SEP] differ", lines);
        qkv_utf8_char_offsets(text, tlen, e.offsets, 2 * e.n);
        cJSON *offs = cJSON_GetObjectItem(j, "offsets");
        for (size_t i = 0; i < e.n && i < (size_t)cJSON_GetArraySize(offs); i++) {
            cJSON *o = cJSON_GetArrayItem(offs, (int)i);
            size_t s = (size_t)cJSON_GetArrayItem(o, 0)->valueint, t = (size_t)cJSON_GetArrayItem(o, 1)->valueint;
            CHECKF(e.offsets[2 * i] == s && e.offsets[2 * i + 1] == t,
                   "line %d \"%s\": offsets[%zu] = (%zu,%zu), expected (%zu,%zu)", lines, text, i, e.offsets[2 * i],
                   e.offsets[2 * i + 1], s, t);
        }
        char *dec;
        size_t dlen;
        CHECK_OK(qkv_wordpiece_decode(w, e.ids, e.n, &dec, &dlen));
        CHECKF(dlen == dlen_ref && memcmp(dec, dec_ref, dlen) == 0, "line %d: decoded \"%s\", expected \"%s\"", lines,
               dec, dec_ref);
        free(dec);
        free(text);
        free(dec_ref);
        qkv_encoding_free(&e);
        qkv_encoding_free(&es);
        cJSON_Delete(j);
        if (!nl) break;
        line = nl + 1;
    }
    CHECKF(lines == 40, "%d reference lines", lines);
    printf("  %d BERT reference texts compared (ids, ids with specials, offsets, decoded)\n", lines);
    free(ref);

    /* Pair: [CLS] a [SEP] b [SEP] with token type ids. */
    char *pair = tt_slurp(test_shared_path("pretrained/bert-base-uncased-tokenizer/reference_pair.json"), &len);
    cJSON *p = pair ? cJSON_Parse(pair) : NULL;
    CHECK_NN(p);
    if (p) {
        const char *a = cJSON_GetObjectItem(p, "a")->valuestring, *b = cJSON_GetObjectItem(p, "b")->valuestring;
        qkv_encoding e;
        CHECK_OK(qkv_wordpiece_encode(w, a, strlen(a), b, strlen(b), true, &e));
        CHECK(same_ids(cJSON_GetObjectItem(p, "ids"), e.ids, e.n));
        CHECK(same_ids(cJSON_GetObjectItem(p, "type_ids"), e.type_ids, e.n));
        /* offsets of b's tokens are into b: "I" is b[0..1) */
        CHECK(e.n == 12 && e.offsets[14] == 0 && e.offsets[15] == 1);
        qkv_encoding_free(&e);
        cJSON_Delete(p);
    }
    free(pair);
    qkv_wordpiece_free(w);
}

TEST(small_vocab_and_options) {
    write_file("tt_wp_vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\nhello\n,\n!\ncafe\ncafé\n"
                                  "Hello\n");
    qkv_wordpiece *w = qkv_wordpiece_load("tt_wp_vocab.txt", NULL);
    CHECK_NN(w);
    if (!w) return;
    qkv_encoding e;
    CHECK_OK(qkv_wordpiece_encode(w, "UnAffable, HELLO!", 17, NULL, 0, false, &e));
    int32_t want[] = {5, 6, 7, 9, 8, 10};
    CHECK(e.n == 6 && memcmp(e.ids, want, sizeof want) == 0);
    /* "##aff" covers "Aff" = bytes 2..5 */
    CHECK(e.n == 6 && e.offsets[2] == 2 && e.offsets[3] == 5);
    qkv_encoding_free(&e);
    /* Accents stripped (NFD + drop Mn) when lowercasing; a word that cannot be split is one [UNK]. */
    CHECK_OK(qkv_wordpiece_encode(w, "Café unxyz", 11, NULL, 0, false, &e));
    CHECK(e.n == 2 && e.ids[0] == 11 && e.ids[1] == 1);
    CHECK(e.n == 2 && e.offsets[0] == 0 && e.offsets[1] == 5 && e.offsets[2] == 6 && e.offsets[3] == 11);
    qkv_encoding_free(&e);
    qkv_wordpiece_free(w);
    /* Cased: no lowercasing, accents kept. */
    qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
    o.lowercase = false;
    w = qkv_wordpiece_load("tt_wp_vocab.txt", &o);
    CHECK_NN(w);
    CHECK_OK(qkv_wordpiece_encode(w, "Hello café", 11, NULL, 0, false, &e));
    CHECK(e.n == 2 && e.ids[0] == 13 && e.ids[1] == 12);
    qkv_encoding_free(&e);
    /* Bad input: invalid UTF-8 is an error naming the byte offset; a NUL byte is dropped as HF's clean_text does. */
    CHECK(qkv_wordpiece_encode(w, "ab\xff", 3, NULL, 0, false, &e) == QKV_ERR_FORMAT);
    CHECKF(strstr(qkv_last_error(), "byte offset 2") != NULL, "got: %s", qkv_last_error());
    CHECK(qkv_wordpiece_encode(w, "xx", 2, "a\xc3(", 3, true, &e) == QKV_ERR_FORMAT);
    CHECK(strstr(qkv_last_error(), "byte offset 1") != NULL);
    CHECK_OK(qkv_wordpiece_encode(w, "Hel\0lo", 6, NULL, 0, false, &e));
    CHECK(e.n == 1 && e.ids[0] == 13 && e.offsets[0] == 0 && e.offsets[1] == 6);
    qkv_encoding_free(&e);
    int32_t bad[] = {8, 99};
    char *dec;
    size_t dl;
    CHECK(qkv_wordpiece_decode(w, bad, 2, &dec, &dl) == QKV_ERR_RANGE);
    CHECK(strstr(qkv_last_error(), "99") != NULL);
    qkv_wordpiece_free(w);

    write_file("tt_wp_dup.txt", "[UNK]\n[CLS]\n[SEP]\nab\ncd\nab\n");
    CHECK(qkv_wordpiece_load("tt_wp_dup.txt", NULL) == NULL);
    CHECKF(strstr(qkv_last_error(), "tt_wp_dup.txt:6") && strstr(qkv_last_error(), "duplicate"), "got: %s",
           qkv_last_error());
    write_file("tt_wp_nounk.txt", "[CLS]\n[SEP]\nab\n");
    CHECK(qkv_wordpiece_load("tt_wp_nounk.txt", NULL) == NULL);
    CHECK(strstr(qkv_last_error(), "[UNK]") != NULL);
    remove("tt_wp_vocab.txt");
    remove("tt_wp_dup.txt");
    remove("tt_wp_nounk.txt");
}

int main(void) {
    RUN(bert_reference);
    RUN(small_vocab_and_options);
    return test_finish();
}
