/* Data readers: every format on small files written to a temp dir, every bad-input case, and the shared data sets
 * (record counts from ../shared/data/README.md; skipped visibly without QKV_SHARED). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "qkv/data.h"
#include "test.h"

static char tmpdir[256];

static const char *write_tmp(const char *name, const char *data, size_t len) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    fwrite(data, 1, len, f);
    fclose(f);
    return path;
}
#define WRITE(name, lit) write_tmp(name, lit, sizeof(lit) - 1)

/* Reads a whole file expecting failure; returns the error message. */
static const char *fail_msg(const char *path, qkv_data_opts o, qkv_status want) {
    qkv_dataset *d = qkv_data_read_all(path, &o);
    CHECKF(d == NULL, "%s: expected an error", path);
    qkv_dataset_free(d);
    CHECKF(qkv_last_status() == want, "%s: status %d (%s), wanted %d", path, qkv_last_status(), qkv_last_error(),
           want);
    return qkv_last_error();
}
#define CHECK_MSG(msg, sub) CHECKF(strstr((msg), (sub)) != NULL, "message [%s] lacks [%s]", (msg), (sub))

TEST(tsv_basic) {
    const char *p = WRITE("a.tsv", "1\thello world\n0\tbye\r\n\n1\t\xc3\xa9t\xc3\xa9\n1\tlast no newline");
    qkv_data_opts o = {.format = QKV_DATA_TSV, .n_fields = 2};
    qkv_dataset *d = qkv_data_read_all(p, &o);
    CHECK_NN(d);
    if (!d) return;
    CHECK(d->n_rows == 4);
    CHECK(strcmp(d->rows[0].fields[1], "hello world") == 0 && d->rows[0].line == 1);
    CHECK(strcmp(d->rows[1].fields[1], "bye") == 0); /* CRLF stripped */
    CHECK(strcmp(d->rows[2].fields[1], "\xc3\xa9t\xc3\xa9") == 0 && d->rows[2].line == 4);
    CHECK(strcmp(d->rows[3].fields[1], "last no newline") == 0 && d->rows[3].lens[1] == 15);
    qkv_dataset_free(d);
    /* keep_blank turns the blank line into a 0-field record */
    o.keep_blank = true;
    d = qkv_data_read_all(p, &o);
    CHECK_NN(d);
    if (d) CHECK(d->n_rows == 5 && d->rows[2].n_fields == 0 && d->rows[2].line == 3);
    qkv_dataset_free(d);
}

TEST(tsv_field_count_error) {
    const char *p = WRITE("train.tsv", "a\tb\nc\td\te\n");
    const char *m = fail_msg(p, (qkv_data_opts){.format = QKV_DATA_TSV, .n_fields = 2}, QKV_ERR_FORMAT);
    CHECK_MSG(m, "train.tsv:2: expected 2 fields, found 3");
    /* 17th line, as in the documented example */
    char buf[512] = "";
    for (int i = 0; i < 16; i++) strcat(buf, "x\ty\n");
    strcat(buf, "x\ty\tz\n");
    p = write_tmp("train.tsv", buf, strlen(buf));
    m = fail_msg(p, (qkv_data_opts){.format = QKV_DATA_TSV, .n_fields = 2}, QKV_ERR_FORMAT);
    CHECK_MSG(m, "train.tsv:17: expected 2 fields, found 3");
}

TEST(csv_rfc4180) {
    const char *p = WRITE("q.csv", "name,text\n"
                                   "a,\"hello, world\"\n"
                                   "b,\"she said \"\"hi\"\"\"\n"
                                   "c,\"two\nlines\"\n"
                                   "d,\"\"\n"
                                   "e,plain \"inner\" quote\n"
                                   ",\n");
    qkv_data_opts o = {.format = QKV_DATA_CSV, .n_fields = 2, .skip_header = true};
    qkv_dataset *d = qkv_data_read_all(p, &o);
    CHECK_NN(d);
    if (!d) return;
    CHECK(d->n_rows == 6);
    CHECK(strcmp(d->rows[0].fields[1], "hello, world") == 0 && d->rows[0].line == 2);
    CHECK(strcmp(d->rows[1].fields[1], "she said \"hi\"") == 0);
    CHECK(strcmp(d->rows[2].fields[1], "two\nlines") == 0 && d->rows[2].line == 4);
    CHECK(d->rows[3].lens[1] == 0);
    CHECK(strcmp(d->rows[4].fields[1], "plain \"inner\" quote") == 0 && d->rows[4].line == 7);
    CHECK(d->rows[5].lens[0] == 0 && d->rows[5].lens[1] == 0);
    qkv_dataset_free(d);
    /* a different separator, CRLF inside quotes kept */
    p = WRITE("s.csv", "x;\"a;b\r\nc\"\r\n");
    d = qkv_data_read_all(p, &(qkv_data_opts){.format = QKV_DATA_CSV, .separator = ';', .n_fields = 2});
    CHECK_NN(d);
    if (d) CHECK(d->n_rows == 1 && strcmp(d->rows[0].fields[1], "a;b\r\nc") == 0);
    qkv_dataset_free(d);
}

TEST(csv_errors) {
    const char *p = WRITE("u.csv", "a,b\nc,\"open\nstill open\n");
    const char *m = fail_msg(p, (qkv_data_opts){.format = QKV_DATA_CSV}, QKV_ERR_FORMAT);
    CHECK_MSG(m, "u.csv:3: unterminated quoted field (opened on line 2, column 3)");
    p = WRITE("v.csv", "a,\"b\"x,c\n");
    m = fail_msg(p, (qkv_data_opts){.format = QKV_DATA_CSV}, QKV_ERR_FORMAT);
    CHECK_MSG(m, "v.csv:1: unexpected character after a closing quote at column 6");
    p = WRITE("w.csv", "a,b\n\"multi\nline\",b,c\n");
    m = fail_msg(p, (qkv_data_opts){.format = QKV_DATA_CSV, .n_fields = 2}, QKV_ERR_FORMAT);
    CHECK_MSG(m, "w.csv:2: expected 2 fields, found 3");
}

TEST(jsonl) {
    const char *p = WRITE("d.jsonl", "{\"text\": \"hi\", \"label\": 1}\n\n  {\"text\": \"caf\xc3\xa9\"}  \n");
    qkv_dataset *d = qkv_data_read_all(p, &(qkv_data_opts){.format = QKV_DATA_JSONL});
    CHECK_NN(d);
    if (!d) return;
    CHECK(d->n_rows == 2);
    CHECK(cJSON_GetObjectItem(d->rows[0].json, "label")->valueint == 1);
    CHECK(strcmp(cJSON_GetObjectItem(d->rows[1].json, "text")->valuestring, "caf\xc3\xa9") == 0);
    CHECK(d->rows[1].line == 3);
    qkv_dataset_free(d);
    /* streaming: the record's json is valid until the next call */
    qkv_reader *r = qkv_reader_open(p, &(qkv_data_opts){.format = QKV_DATA_JSONL});
    CHECK_NN(r);
    const qkv_data_record *rec;
    int n = 0;
    while (r && qkv_reader_next(r, &rec) == QKV_OK && rec) {
        CHECK(rec->json && cJSON_GetObjectItem(rec->json, "text"));
        n++;
    }
    CHECK(n == 2);
    qkv_reader_close(r);
}

TEST(jsonl_errors) {
    const char *p = WRITE("bad.jsonl", "{\"a\": 1}\n{\"a\": }\n");
    const char *m = fail_msg(p, (qkv_data_opts){.format = QKV_DATA_JSONL}, QKV_ERR_FORMAT);
    CHECK_MSG(m, "bad.jsonl:2: invalid JSON at column 7");
    p = WRITE("arr.jsonl", "[1, 2]\n");
    m = fail_msg(p, (qkv_data_opts){.format = QKV_DATA_JSONL}, QKV_ERR_FORMAT);
    CHECK_MSG(m, "arr.jsonl:1: expected a JSON object, found an array");
    p = WRITE("two.jsonl", "{\"a\": 1} {\"b\": 2}\n");
    m = fail_msg(p, (qkv_data_opts){.format = QKV_DATA_JSONL}, QKV_ERR_FORMAT);
    CHECK_MSG(m, "two.jsonl:1: unexpected text after the JSON value at column 10");
}

TEST(lines_and_validation) {
    const char *p = WRITE("t.txt", "first\nsecond\n\nfourth");
    qkv_dataset *d = qkv_data_read_all(p, NULL);
    CHECK_NN(d);
    if (d) CHECK(d->n_rows == 3 && d->rows[2].line == 4 && strcmp(d->rows[2].fields[0], "fourth") == 0);
    qkv_dataset_free(d);
    /* invalid UTF-8: overlong, lone continuation, truncated, surrogate */
    const char *bad[] = {"ok\nab\xc0\xafz\n", "ok\nabc\x80\n", "ok\nabcd\xe2\x82", "ok\nx\xed\xa0\x80\n"};
    const char *col[] = {"t.txt:2: invalid UTF-8 at byte 3", "t.txt:2: invalid UTF-8 at byte 4",
                         "t.txt:2: invalid UTF-8 at byte 5", "t.txt:2: invalid UTF-8 at byte 2"};
    for (int i = 0; i < 4; i++) {
        p = write_tmp("t.txt", bad[i], strlen(bad[i]));
        const char *m = fail_msg(p, (qkv_data_opts){0}, QKV_ERR_FORMAT);
        CHECK_MSG(m, col[i]);
    }
    p = write_tmp("n.txt", "ab\ncd\0ef\n", 9);
    CHECK_MSG(fail_msg(p, (qkv_data_opts){0}, QKV_ERR_FORMAT), "n.txt:2: NUL byte at column 3");
    p = WRITE("long.txt", "short\n0123456789\nx\n");
    CHECK_MSG(fail_msg(p, (qkv_data_opts){.max_line = 8}, QKV_ERR_RANGE), "long.txt:2: line longer than 8 bytes");
    qkv_dataset *ok = qkv_data_read_all(p, &(qkv_data_opts){.max_line = 10});
    CHECK_NN(ok);
    qkv_dataset_free(ok);
    /* a line longer than the default 1 MiB limit, spread over several read chunks */
    size_t big = ((size_t)1 << 20) + 10;
    char *s = malloc(big + 1);
    memset(s, 'a', big);
    s[big] = '\n';
    p = write_tmp("big.txt", s, big + 1);
    free(s);
    CHECK_MSG(fail_msg(p, (qkv_data_opts){0}, QKV_ERR_RANGE), "big.txt:1: line longer than 1048576 bytes");
    CHECK(qkv_reader_open("/nonexistent/x.tsv", NULL) == NULL && qkv_last_status() == QKV_ERR_IO);
    CHECK_MSG(qkv_last_error(), "/nonexistent/x.tsv: cannot open");
    CHECK(qkv_reader_open(p, &(qkv_data_opts){.format = (qkv_data_format)9}) == NULL);
    CHECK(qkv_reader_open(p, &(qkv_data_opts){.separator = '"'}) == NULL);
    CHECK(qkv_reader_open(p, &(qkv_data_opts){.n_fields = -1}) == NULL);
}

TEST(memory_reader_and_utf8) {
    const char data[] = "a\tb\nc\td\n";
    qkv_reader *r = qkv_reader_open_mem("mem.tsv", data, sizeof data - 1, &(qkv_data_opts){.format = QKV_DATA_TSV});
    CHECK_NN(r);
    const qkv_data_record *rec;
    int n = 0;
    while (r && qkv_reader_next(r, &rec) == QKV_OK && rec) n += rec->n_fields;
    CHECK(n == 4 && qkv_reader_line(r) == 2);
    qkv_reader_close(r);
    size_t off = 99;
    CHECK(qkv_utf8_valid("\xf0\x9f\x98\x80", 4, &off));
    CHECK(!qkv_utf8_valid("\xf4\x90\x80\x80", 4, &off) && off == 0); /* above U+10FFFF */
    CHECK(!qkv_utf8_valid("ab\xf5", 3, &off) && off == 2);
    /* "año 😀": 5 characters in 9 bytes; a prefix counts the characters it starts */
    CHECK(qkv_utf8_count("a\xc3\xb1o \xf0\x9f\x98\x80", 9) == 5);
    CHECK(qkv_utf8_count("a\xc3\xb1o \xf0\x9f\x98\x80", 2) == 2 && qkv_utf8_count("", 0) == 0);
}

static qkv_status count_cb(const qkv_data_record *rec, void *user) {
    (void)rec;
    (*(int64_t *)user)++;
    return QKV_OK;
}

static qkv_status stop_cb(const qkv_data_record *rec, void *user) {
    (void)user;
    return rec->line >= 2 ? qkv_error_set(QKV_ERR_INVALID, "stop at line %lld", (long long)rec->line) : QKV_OK;
}

TEST(foreach) {
    const char *p = WRITE("f.txt", "1\n2\n3\n");
    int64_t n = 0;
    CHECK_OK(qkv_data_foreach(p, NULL, count_cb, &n));
    CHECK(n == 3);
    CHECK(qkv_data_foreach(p, NULL, stop_cb, NULL) == QKV_ERR_INVALID);
    CHECK_MSG(qkv_last_error(), "stop at line 2");
}

typedef struct shared_stats {
    int64_t rows, words, bytes, bad_label;
} shared_stats;

static qkv_status stats_cb(const qkv_data_record *rec, void *user) {
    shared_stats *s = user;
    s->rows++;
    for (int f = 0; f < rec->n_fields; f++) {
        s->bytes += (int64_t)rec->lens[f] + 1;
        bool in = false;
        for (size_t i = 0; i < rec->lens[f]; i++) {
            bool sp = rec->fields[f][i] == ' ';
            if (!sp && !in) s->words++;
            in = !sp;
        }
    }
    if (rec->n_fields == 2 && strcmp(rec->fields[0], "0") != 0 && strcmp(rec->fields[0], "1") != 0) s->bad_label++;
    return QKV_OK;
}

TEST(shared_data) {
    const char *p = test_shared_path("data/sentiment/train.tsv");
    if (!p || !test_file_exists(p)) {
        test_skip("QKV_SHARED data not found");
        return;
    }
    shared_stats s = {0};
    CHECK_OK(qkv_data_foreach(p, &(qkv_data_opts){.format = QKV_DATA_TSV, .n_fields = 2}, stats_cb, &s));
    CHECKF(s.rows == 1983 && s.bad_label == 0, "sentiment/train.tsv: %lld rows, %lld bad labels", (long long)s.rows,
           (long long)s.bad_label);
    memset(&s, 0, sizeof s);
    p = test_shared_path("data/translation/dev.tsv");
    qkv_dataset *d = qkv_data_read_all(p, &(qkv_data_opts){.format = QKV_DATA_TSV, .n_fields = 2});
    CHECK_NN(d);
    if (d) CHECKF(d->n_rows == 1337, "translation/dev.tsv: %zu rows", d->n_rows);
    qkv_dataset_free(d);
    p = test_shared_path("data/lm/dev.txt");
    CHECK_OK(qkv_data_foreach(p, NULL, stats_cb, &s));
    /* README: 199 KB / 36k words */
    CHECKF(s.words > 35000 && s.words < 37000, "lm/dev.txt: %lld words", (long long)s.words);
    CHECKF(s.bytes > 190000 && s.bytes < 210000, "lm/dev.txt: %lld bytes", (long long)s.bytes);
    CHECKF(s.rows == 480, "lm/dev.txt: %lld lines", (long long)s.rows);
    /* POS data: 3 fields, blank lines between sentences kept as 0-field records */
    p = test_shared_path("data/pos/dev.tsv");
    qkv_reader *r = qkv_reader_open(p, &(qkv_data_opts){.format = QKV_DATA_TSV, .n_fields = 3, .keep_blank = true});
    CHECK_NN(r);
    int64_t sents = 0, toks = 0;
    const qkv_data_record *rec;
    qkv_status st = QKV_OK;
    while (r && (st = qkv_reader_next(r, &rec)) == QKV_OK && rec) {
        if (rec->n_fields == 0) sents++;
        else toks++;
    }
    CHECK_OK(st);
    qkv_reader_close(r);
    CHECKF(sents == 5120 && toks > 100000 && toks < 110000, "pos/dev.tsv: %lld sentences, %lld tokens",
           (long long)sents, (long long)toks);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/qkv_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("cannot create a temp dir\n");
        return 1;
    }
    RUN(tsv_basic);
    RUN(tsv_field_count_error);
    RUN(csv_rfc4180);
    RUN(csv_errors);
    RUN(jsonl);
    RUN(jsonl_errors);
    RUN(lines_and_validation);
    RUN(memory_reader_and_utf8);
    RUN(foreach);
    RUN(shared_data);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("could not remove %s\n", tmpdir);
    return test_finish();
}
