/* safetensors: round trips, a Hugging Face checkpoint, F16/BF16/I64 conversion, every kind of malformed file
 * (status AND message), and atomic saves (missing directory, replace, a writer SIGKILLed mid-save). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

/* ---- scratch files ------------------------------------------------------------------------------------------ */

static char scratch[512];

static const char *tpath(const char *name) {
    static char buf[4][600];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", scratch, name);
    return buf[k];
}

static void remove_scratch(void) {
    DIR *d = opendir(scratch);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[1100];
        snprintf(p, sizeof p, "%s/%s", scratch, e->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            chmod(p, 0700);
            rmdir(p);
        } else {
            unlink(p);
        }
    }
    closedir(d);
    rmdir(scratch);
}

static void write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        test_fail_at(__FILE__, __LINE__, "cannot create %s", path);
        return;
    }
    if (n) fwrite(bytes, 1, n, fp);
    fclose(fp);
}

/* A safetensors file from a raw header (no padding) and raw data bytes; header_len overrides the length field
 * when non-zero. */
static const char *put_file(const char *name, const char *json, const void *data, size_t dlen, uint64_t header_len) {
    const char *path = tpath(name);
    size_t hl = strlen(json);
    uint64_t field = header_len ? header_len : hl;
    unsigned char *b = malloc(8 + hl + dlen + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(field >> (8 * i));
    memcpy(b + 8, json, hl);
    if (dlen) memcpy(b + 8 + hl, data, dlen);
    write_bytes(path, b, 8 + hl + dlen);
    free(b);
    return path;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Opening must fail with `status` and a message naming the file and containing `what`. */
static void expect_open_fail(int line, const char *path, qkv_status status, const char *what) {
    qkv_error_clear();
    qkv_st_file *f = qkv_st_open(path);
    if (f) {
        test_fail_at(__FILE__, line, "%s opened, expected an error containing '%s'", path, what);
        qkv_st_close(f);
        return;
    }
    const char *msg = qkv_last_error();
    if (qkv_last_status() != status)
        test_fail_at(__FILE__, line, "status %s, expected %s (%s)", qkv_status_name(qkv_last_status()),
                     qkv_status_name(status), msg);
    if (!strstr(msg, path)) test_fail_at(__FILE__, line, "message does not name the file: %s", msg);
    if (!strstr(msg, what)) test_fail_at(__FILE__, line, "message lacks '%s': %s", what, msg);
}
#define EXPECT_OPEN_FAIL(path, status, what) expect_open_fail(__LINE__, path, status, what)

static bool shape_is(const qkv_st_file *f, const char *name, int ndim, const int64_t *shape) {
    const char *dt;
    int nd;
    int64_t s[QKV_MAX_DIMS];
    if (qkv_st_info(f, name, &dt, &nd, s) != QKV_OK || nd != ndim) return false;
    for (int d = 0; d < nd; d++)
        if (s[d] != shape[d]) return false;
    return true;
}

/* ---- round trips ------------------------------------------------------------------------------------------- */

TEST(round_trip) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *a = qkv_tensor_new(QKV_F32, QKV_DIMS(2, 3));
    qkv_tensor *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(4));
    qkv_tensor *m = qkv_tensor_new(QKV_F32, QKV_DIMS(3, 4));
    qkv_tensor *scalar = qkv_tensor_new(QKV_F32, 0, NULL);
    qkv_tensor *empty = qkv_tensor_new(QKV_F32, QKV_DIMS(0, 3));
    for (int i = 0; i < 6; i++) qkv_f32(a)[i] = (float)i * 0.5f - 1.0f;
    for (int i = 0; i < 4; i++) qkv_i32(ids)[i] = i * 1000003 - 7;
    for (int i = 0; i < 12; i++) qkv_f32(m)[i] = (float)i;
    qkv_f32(scalar)[0] = 3.25f;
    qkv_tensor *mt = qkv_transpose(c, m, 0, 1); /* [4, 3], strided */
    CHECK(mt && !qkv_is_contiguous(mt));

    qkv_st_writer *w = qkv_st_writer_new();
    CHECK_OK(qkv_st_writer_add(w, "layer.weight", a));
    CHECK_OK(qkv_st_writer_add(w, "ids", ids));
    CHECK_OK(qkv_st_writer_add(w, "m.T", mt));
    CHECK_OK(qkv_st_writer_add(w, "scalar", scalar));
    CHECK_OK(qkv_st_writer_add(w, "empty", empty));
    CHECK_OK(qkv_st_writer_meta(w, "format", "pt"));
    CHECK_OK(qkv_st_writer_meta(w, "note", "quotes \" and \\ and\nnewline, ünïcödé"));
    CHECK_OK(qkv_st_writer_meta(w, "format", "qkv")); /* replaces */
    CHECK(qkv_st_writer_add(w, "ids", a) == QKV_ERR_INVALID && strstr(qkv_last_error(), "'ids'"));
    CHECK(qkv_st_writer_add(w, "__metadata__", a) == QKV_ERR_INVALID);
    CHECK(qkv_st_writer_add(w, NULL, a) == QKV_ERR_INVALID);
    const char *path = tpath("rt.safetensors");
    CHECK_OK(qkv_st_writer_save(w, path));
    qkv_st_writer_free(w);

    qkv_st_file *f = qkv_st_open(path);
    CHECK_NN(f);
    if (!f) goto out;
    CHECK(strcmp(qkv_st_path(f), path) == 0);
    CHECK(qkv_st_count(f) == 5);
    const char *order[] = {"layer.weight", "ids", "m.T", "scalar", "empty"};
    for (int i = 0; i < 5 && qkv_st_count(f) == 5; i++) {
        CHECK(strcmp(qkv_st_name(f, i), order[i]) == 0);
        CHECK(qkv_st_find(f, order[i]) == i);
    }
    CHECK(qkv_st_find(f, "nope") == -1 && qkv_st_name(f, 5) == NULL);
    CHECK(qkv_st_metadata_count(f) == 2);
    CHECK(qkv_st_metadata(f, "format") && strcmp(qkv_st_metadata(f, "format"), "qkv") == 0);
    const char *note = qkv_st_metadata(f, "note");
    CHECK(note && strcmp(note, "quotes \" and \\ and\nnewline, ünïcödé") == 0);
    CHECK(qkv_st_metadata_key(f, 1) && strcmp(qkv_st_metadata_key(f, 1), "note") == 0);
    CHECK(qkv_st_metadata(f, "absent") == NULL);
    const char *dt = NULL;
    int nd = -1;
    int64_t shp[QKV_MAX_DIMS];
    CHECK_OK(qkv_st_info(f, "ids", &dt, &nd, shp));
    CHECK(dt && strcmp(dt, "I32") == 0 && nd == 1 && shp[0] == 4);
    CHECK(shape_is(f, "m.T", 2, (const int64_t[]){4, 3}));
    CHECK(shape_is(f, "scalar", 0, NULL) && shape_is(f, "empty", 2, (const int64_t[]){0, 3}));

    qkv_tensor *ra = qkv_st_read(f, "layer.weight"), *rids = qkv_st_read(f, "ids"), *rmt = qkv_st_read(f, "m.T");
    qkv_tensor *rs = qkv_st_read(f, "scalar"), *re = qkv_st_read(f, "empty");
    CHECK(test_allclose("f32", ra, a, 0, 0));
    CHECK(rids && rids->dtype == QKV_I32 && test_allclose("i32", rids, ids, 0, 0));
    CHECK(test_allclose("transposed view", rmt, mt, 0, 0));
    CHECK(rmt && qkv_f32(rmt)[1] == 4.0f); /* row-major order of the view: m[1][0] */
    CHECK(rs && rs->ndim == 0 && qkv_f32(rs)[0] == 3.25f);
    CHECK(re && re->ndim == 2 && qkv_numel(re) == 0);

    /* read_into a strided destination. */
    qkv_tensor *dst = qkv_tensor_new(QKV_F32, QKV_DIMS(3, 4));
    qkv_tensor *dview = qkv_transpose(c, dst, 0, 1);
    CHECK_OK(qkv_st_read_into(f, "m.T", dview));
    CHECK(test_allclose("read_into strided", dst, m, 0, 0));
    qkv_tensor *dids = qkv_tensor_new(QKV_I32, QKV_DIMS(4));
    CHECK_OK(qkv_st_read_into(f, "ids", dids));
    CHECK(test_allclose("read_into i32", dids, ids, 0, 0));
    qkv_tensor_free(dst);
    qkv_tensor_free(dids);
    qkv_tensor_free(ra);
    qkv_tensor_free(rids);
    qkv_tensor_free(rmt);
    qkv_tensor_free(rs);
    qkv_tensor_free(re);
    qkv_st_close(f);

    /* Layout: 8 + N (N a multiple of 8, space padded) + exactly the data bytes. */
    FILE *fp = fopen(path, "rb");
    unsigned char len8[8] = {0};
    CHECK(fp && fread(len8, 1, 8, fp) == 8);
    if (fp) fclose(fp);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
    CHECK(n % 8 == 0);
    CHECK(file_size(path) == (long)(8 + n + (6 + 4 + 12 + 1) * 4));
out:
    qkv_tensor_free(a);
    qkv_tensor_free(ids);
    qkv_tensor_free(m);
    qkv_tensor_free(scalar);
    qkv_tensor_free(empty);
    qkv_ctx_free(c);
}

TEST(empty_writer_round_trips) {
    qkv_st_writer *w = qkv_st_writer_new();
    const char *path = tpath("empty.safetensors");
    CHECK_OK(qkv_st_writer_save(w, path));
    qkv_st_writer_free(w);
    qkv_st_file *f = qkv_st_open(path);
    CHECK_NN(f);
    CHECK(qkv_st_count(f) == 0 && qkv_st_metadata_count(f) == 0);
    qkv_st_close(f);
}

/* ---- real files ------------------------------------------------------------------------------------------------ */

static long config_int(const cJSON *cfg, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    return cJSON_IsNumber(v) ? (long)v->valuedouble : -1;
}

TEST(reads_hf_checkpoint) {
    const char *shared = test_shared_path("pretrained/tiny-random-bert/model.safetensors");
    char model[1024];
    snprintf(model, sizeof model, "%s", shared ? shared : "");
    if (!shared || !test_file_exists(model)) {
        test_skip("QKV_SHARED/pretrained/tiny-random-bert not available");
        return;
    }
    char cfg_path[1024];
    snprintf(cfg_path, sizeof cfg_path, "%s", test_shared_path("pretrained/tiny-random-bert/config.json"));
    FILE *fp = fopen(cfg_path, "rb");
    CHECKF(fp != NULL, "cannot open %s", cfg_path);
    if (!fp) return;
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    text[n] = '\0';
    cJSON *cfg = cJSON_Parse(text);
    CHECK_NN(cfg);
    long vocab = config_int(cfg, "vocab_size"), hidden = config_int(cfg, "hidden_size");
    long inter = config_int(cfg, "intermediate_size"), pos = config_int(cfg, "max_position_embeddings");
    long types = config_int(cfg, "type_vocab_size"), layers = config_int(cfg, "num_hidden_layers");
    cJSON_Delete(cfg);
    CHECK(vocab > 0 && hidden > 0 && inter > 0 && pos > 0 && types > 0 && layers > 0);

    qkv_st_file *f = qkv_st_open(model);
    CHECK_NN(f);
    if (!f) return;
    CHECK(qkv_st_count(f) == 5 + 16 * (int)layers + 2);
    CHECK(shape_is(f, "embeddings.word_embeddings.weight", 2, (const int64_t[]){vocab, hidden}));
    CHECK(shape_is(f, "embeddings.position_embeddings.weight", 2, (const int64_t[]){pos, hidden}));
    CHECK(shape_is(f, "embeddings.token_type_embeddings.weight", 2, (const int64_t[]){types, hidden}));
    CHECK(shape_is(f, "encoder.layer.0.intermediate.dense.weight", 2, (const int64_t[]){inter, hidden}));
    CHECK(shape_is(f, "encoder.layer.0.output.dense.weight", 2, (const int64_t[]){hidden, inter}));
    CHECK(shape_is(f, "pooler.dense.bias", 1, (const int64_t[]){hidden}));
    /* Every tensor reads, and holds finite, not-all-zero numbers. */
    for (int i = 0; i < qkv_st_count(f); i++) {
        qkv_tensor *t = qkv_st_read(f, qkv_st_name(f, i));
        CHECK_NN(t);
        if (!t) continue;
        bool finite = true, nonzero = false;
        for (int64_t k = 0; k < qkv_numel(t); k++) {
            finite &= isfinite(qkv_f32(t)[k]) != 0;
            nonzero |= qkv_f32(t)[k] != 0.0f;
        }
        CHECKF(finite && nonzero, "%s: finite %d nonzero %d", qkv_st_name(f, i), finite, nonzero);
        qkv_tensor_free(t);
    }
    qkv_st_close(f);
}

TEST(reads_ops_core_fixture) {
    const char *path = test_fixture_path("ops_core.safetensors");
    if (!test_file_exists(path)) {
        test_skip("%s not found (QKV_FIXTURES unset?)", path);
        return;
    }
    qkv_st_file *f = qkv_st_open(path);
    CHECK_NN(f);
    if (!f) return;
    CHECK(qkv_st_count(f) > 0);
    CHECK(shape_is(f, "matmul_batched.in.0", 4, (const int64_t[]){2, 3, 5, 4}));
    for (int i = 0; i < qkv_st_count(f); i++) {
        qkv_tensor *t = qkv_st_read(f, qkv_st_name(f, i));
        CHECKF(t != NULL, "%s: %s", qkv_st_name(f, i), qkv_last_error());
        qkv_tensor_free(t);
    }
    qkv_st_close(f);
}

/* ---- dtype conversion ------------------------------------------------------------------------------------- */

TEST(f16_bf16_i64_conversion) {
    static const uint16_t f16[] = {0x0000, 0x8000, 0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff,
                                   0x0400, 0x7c00, 0xfc00, 0x7e00, 0x3555, 0x8001};
    const float f16_want[] = {0.0f, -0.0f, 1.0f, -2.0f, 65504.0f, ldexpf(1, -24), ldexpf(1023, -24),
                              ldexpf(1, -14), INFINITY, -INFINITY, NAN, 0.333251953125f, -ldexpf(1, -24)};
    static const uint16_t bf16[] = {0x3f80, 0xc000, 0x0001, 0x7f80, 0xff80, 0x7fc0, 0x4049, 0x8000};
    const float bf16_want[] = {1.0f, -2.0f, ldexpf(1, -133), INFINITY, -INFINITY, NAN, 3.140625f, -0.0f};
    static const int64_t i64[] = {0, -1, INT32_MAX, INT32_MIN, 123456789};
    static const int64_t i64_big[] = {1, (int64_t)INT32_MAX + 1};
    static const double f64[] = {1.5, -2.5};

    unsigned char data[26 + 16 + 40 + 16 + 16];
    size_t o = 0;
    memcpy(data + o, f16, sizeof f16), o += sizeof f16;
    memcpy(data + o, bf16, sizeof bf16), o += sizeof bf16;
    memcpy(data + o, i64, sizeof i64), o += sizeof i64;
    memcpy(data + o, i64_big, sizeof i64_big), o += sizeof i64_big;
    memcpy(data + o, f64, sizeof f64), o += sizeof f64;
    CHECK(o == sizeof data);
    const char *json = "{\"h\":{\"dtype\":\"F16\",\"shape\":[13],\"data_offsets\":[0,26]},"
                       "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,4],\"data_offsets\":[26,42]},"
                       "\"l\":{\"dtype\":\"I64\",\"shape\":[5],\"data_offsets\":[42,82]},"
                       "\"big\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[82,98]},"
                       "\"d\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[98,114]}}";
    const char *path = put_file("conv.safetensors", json, data, sizeof data, 0);
    qkv_st_file *f = qkv_st_open(path);
    CHECK_NN(f);
    if (!f) return;

    qkv_tensor *h = qkv_st_read(f, "h");
    CHECK_NN(h);
    for (int i = 0; h && i < 13; i++) {
        float got = qkv_f32(h)[i], want = f16_want[i];
        bool same = isnan(want) ? isnan(got) : (got == want && signbit(got) == signbit(want));
        CHECKF(same, "F16 0x%04x -> %g, want %g", f16[i], got, want);
    }
    CHECK(h && h->dtype == QKV_F32);
    qkv_tensor *b = qkv_st_read(f, "b");
    CHECK_NN(b);
    CHECK(b && b->ndim == 2 && b->shape[0] == 2 && b->shape[1] == 4);
    for (int i = 0; b && i < 8; i++) {
        float got = qkv_f32(b)[i], want = bf16_want[i];
        bool same = isnan(want) ? isnan(got) : (got == want && signbit(got) == signbit(want));
        CHECKF(same, "BF16 0x%04x -> %g, want %g", bf16[i], got, want);
    }
    qkv_tensor *l = qkv_st_read(f, "l");
    CHECK_NN(l);
    CHECK(l && l->dtype == QKV_I32);
    for (int i = 0; l && i < 5; i++) CHECK(qkv_i32(l)[i] == (int32_t)i64[i]);

    /* An I64 value that does not fit int32 is an error naming the tensor; the destination stays untouched. */
    CHECK(qkv_st_read(f, "big") == NULL && qkv_last_status() == QKV_ERR_RANGE);
    CHECK(strstr(qkv_last_error(), "'big'") && strstr(qkv_last_error(), "2147483648"));
    qkv_tensor *keep = qkv_tensor_new(QKV_I32, QKV_DIMS(2));
    qkv_i32(keep)[0] = 42;
    CHECK(qkv_st_read_into(f, "big", keep) == QKV_ERR_RANGE && qkv_i32(keep)[0] == 42);
    /* A known but unreadable dtype opens fine; only reading it fails. */
    CHECK(qkv_st_read(f, "d") == NULL && qkv_last_status() == QKV_ERR_UNSUPPORTED);
    CHECK(strstr(qkv_last_error(), "F64") && strstr(qkv_last_error(), "'d'") && strstr(qkv_last_error(), path));
    const char *dt = NULL;
    CHECK(qkv_st_info(f, "d", &dt, NULL, NULL) == QKV_OK && dt && strcmp(dt, "F64") == 0);
    /* An integer tensor does not load into a float destination. */
    qkv_tensor *wrong = qkv_tensor_new(QKV_F32, QKV_DIMS(5));
    CHECK(qkv_st_read_into(f, "l", wrong) == QKV_ERR_INVALID && strstr(qkv_last_error(), "int32"));
    qkv_tensor_free(wrong);
    qkv_tensor_free(keep);
    qkv_tensor_free(h);
    qkv_tensor_free(b);
    qkv_tensor_free(l);
    qkv_st_close(f);
}

#ifdef __FLT16_MAX__
/* Every one of the 65536 half-precision patterns against the compiler's own _Float16 -> float conversion. */
TEST(f16_exhaustive) {
    uint16_t *all = malloc(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    const char *path = put_file("f16all.safetensors",
                                "{\"all\":{\"dtype\":\"F16\",\"shape\":[65536],\"data_offsets\":[0,131072]}}",
                                all, 65536 * 2, 0);
    qkv_st_file *f = qkv_st_open(path);
    qkv_tensor *t = f ? qkv_st_read(f, "all") : NULL;
    CHECK_NN(t);
    int bad = 0;
    for (uint32_t i = 0; t && i < 65536; i++) {
        _Float16 h;
        memcpy(&h, &all[i], 2);
        float want = (float)h, got = qkv_f32(t)[i];
        bool same = isnan(want) ? isnan(got) != 0 : memcmp(&want, &got, 4) == 0;
        if (!same && bad++ < 5) test_fail_at(__FILE__, __LINE__, "F16 0x%04x -> %a, want %a", i, got, want);
    }
    qkv_tensor_free(t);
    qkv_st_close(f);
    free(all);
}
#endif

/* ---- malformed files ---------------------------------------------------------------------------------------- */

TEST(bad_files) {
    const unsigned char zeros[128] = {0};
    write_bytes(tpath("empty"), "", 0);
    EXPECT_OPEN_FAIL(tpath("empty"), QKV_ERR_FORMAT, "too short");
    write_bytes(tpath("five"), "\x01\x02\x03\x04\x05", 5);
    EXPECT_OPEN_FAIL(tpath("five"), QKV_ERR_FORMAT, "too short");
    EXPECT_OPEN_FAIL(tpath("does-not-exist"), QKV_ERR_IO, "No such file");
    EXPECT_OPEN_FAIL(scratch, QKV_ERR_IO, "not a regular file");

    EXPECT_OPEN_FAIL(put_file("past_eof", "{}", NULL, 0, 100), QKV_ERR_FORMAT, "past the end");
    EXPECT_OPEN_FAIL(put_file("absurd", "{}", NULL, 0, (uint64_t)1 << 63), QKV_ERR_RANGE, "absurd");
    EXPECT_OPEN_FAIL(put_file("zero_len", "", NULL, 0, 0), QKV_ERR_FORMAT, "length is 0");
    EXPECT_OPEN_FAIL(put_file("not_json", "{\"a\": nope}", NULL, 0, 0), QKV_ERR_FORMAT, "not valid JSON");
    EXPECT_OPEN_FAIL(put_file("trailing", "{}  x", NULL, 0, 0), QKV_ERR_FORMAT, "trailing");
    EXPECT_OPEN_FAIL(put_file("not_object", "[1, 2]", NULL, 0, 0), QKV_ERR_FORMAT, "not an object");
    EXPECT_OPEN_FAIL(put_file("bad_utf8", "{\"\xc3\x28\":{}}", NULL, 0, 0), QKV_ERR_FORMAT, "UTF-8");
    EXPECT_OPEN_FAIL(put_file("entry_not_object", "{\"w\":3}", NULL, 0, 0), QKV_ERR_FORMAT, "'w': entry is not");
    EXPECT_OPEN_FAIL(put_file("no_dtype", "{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", zeros, 8, 0),
                     QKV_ERR_FORMAT, "tensor 'w': missing \"dtype\"");
    EXPECT_OPEN_FAIL(put_file("no_shape", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", zeros, 8, 0),
                     QKV_ERR_FORMAT, "missing \"shape\"");
    EXPECT_OPEN_FAIL(put_file("no_offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", zeros, 8, 0),
                     QKV_ERR_FORMAT, "missing \"data_offsets\"");
    EXPECT_OPEN_FAIL(put_file("unknown_dtype", "{\"w\":{\"dtype\":\"Q4_K\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                              zeros, 8, 0),
                     QKV_ERR_UNSUPPORTED, "Q4_K");
    EXPECT_OPEN_FAIL(put_file("neg_dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,8]}}",
                              zeros, 8, 0),
                     QKV_ERR_FORMAT, "negative dimension -3");
    EXPECT_OPEN_FAIL(put_file("frac_dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}",
                              zeros, 8, 0),
                     QKV_ERR_FORMAT, "integer");
    EXPECT_OPEN_FAIL(put_file("overflow",
                              "{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],"
                              "\"data_offsets\":[0,8]}}",
                              zeros, 8, 0),
                     QKV_ERR_RANGE, "2^40");
    EXPECT_OPEN_FAIL(put_file("huge_dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,8]}}",
                              zeros, 8, 0),
                     QKV_ERR_RANGE, "2^40");
    EXPECT_OPEN_FAIL(put_file("rank9",
                              "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
                              zeros, 4, 0),
                     QKV_ERR_UNSUPPORTED, "rank 9");
    EXPECT_OPEN_FAIL(put_file("out_of_range", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                              zeros, 12, 0),
                     QKV_ERR_FORMAT, "data_offsets [0, 16] run past the data section of 12 bytes");
    EXPECT_OPEN_FAIL(put_file("reversed", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}",
                              zeros, 12, 0),
                     QKV_ERR_FORMAT, "end before");
    EXPECT_OPEN_FAIL(put_file("bad_offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}",
                              zeros, 4, 0),
                     QKV_ERR_FORMAT, "[begin, end]");
    EXPECT_OPEN_FAIL(put_file("overlap",
                              "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                              "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
                              zeros, 24, 0),
                     QKV_ERR_FORMAT, "overlap tensor 'a'");
    EXPECT_OPEN_FAIL(put_file("length",
                              "{\"wte.weight\":{\"dtype\":\"F32\",\"shape\":[4,6],\"data_offsets\":[0,100]}}",
                              zeros, 100, 0),
                     QKV_ERR_FORMAT,
                     "tensor 'wte.weight': data_offsets [0, 100] hold 100 bytes but F32 [4, 6] needs 96");
    EXPECT_OPEN_FAIL(put_file("meta_not_string", "{\"__metadata__\":{\"epoch\":3}}", NULL, 0, 0), QKV_ERR_FORMAT,
                     "'epoch' is not a string");
    EXPECT_OPEN_FAIL(put_file("meta_not_object", "{\"__metadata__\":[\"x\"]}", NULL, 0, 0), QKV_ERR_FORMAT,
                     "\"__metadata__\" is not an object");
    EXPECT_OPEN_FAIL(put_file("meta_dup", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", NULL, 0, 0),
                     QKV_ERR_FORMAT, "duplicate \"__metadata__\" key 'k'");
    EXPECT_OPEN_FAIL(put_file("dup",
                              "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                              "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                              zeros, 8, 0),
                     QKV_ERR_FORMAT, "tensor 'w': duplicate");

    /* Truncated data section: a valid file cut short by 4 bytes. */
    qkv_tensor *t = qkv_tensor_new(QKV_F32, QKV_DIMS(16));
    qkv_st_writer *w = qkv_st_writer_new();
    CHECK_OK(qkv_st_writer_add(w, "a", t));
    CHECK_OK(qkv_st_writer_add(w, "last", t));
    const char *cut = tpath("cut.safetensors");
    CHECK_OK(qkv_st_writer_save(w, cut));
    qkv_st_writer_free(w);
    qkv_tensor_free(t);
    CHECK(truncate(cut, file_size(cut) - 4) == 0);
    EXPECT_OPEN_FAIL(cut, QKV_ERR_FORMAT, "tensor 'last': data_offsets [64, 128] run past the data section");

    /* Empty tensors may share an offset with anything; a tensor that is fine otherwise opens. */
    qkv_st_file *f = qkv_st_open(put_file("empties_ok",
                                          "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                          "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
                                          "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12],"
                                          "\"extra\":1}}   ",
                                          zeros, 12, 0));
    CHECK_NN(f);
    qkv_st_close(f);
}

TEST(read_errors) {
    static const float v[6] = {1, 2, 3, 4, 5, 6};
    const char *path = put_file("six.safetensors",
                                "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", v, sizeof v, 0);
    qkv_st_file *f = qkv_st_open(path);
    CHECK_NN(f);
    if (!f) return;
    qkv_tensor *dst = qkv_tensor_new(QKV_F32, QKV_DIMS(3, 2));
    qkv_f32(dst)[0] = -1;
    CHECK(qkv_st_read_into(f, "w", dst) == QKV_ERR_INVALID);
    const char *msg = qkv_last_error();
    CHECKF(strstr(msg, path) && strstr(msg, "'w'") && strstr(msg, "[2, 3]") && strstr(msg, "[3, 2]"), "%s", msg);
    CHECK(qkv_f32(dst)[0] == -1);
    qkv_tensor *i32 = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 3));
    CHECK(qkv_st_read_into(f, "w", i32) == QKV_ERR_INVALID && strstr(qkv_last_error(), "float32"));
    CHECK(qkv_st_read(f, "missing") == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "'missing'") && strstr(qkv_last_error(), path));
    CHECK(qkv_st_info(f, "missing", NULL, NULL, NULL) == QKV_ERR_INVALID);
    CHECK(qkv_st_read_into(f, "w", NULL) == QKV_ERR_INVALID);
    qkv_tensor_free(dst);
    qkv_tensor_free(i32);
    qkv_st_close(f);
    CHECK(qkv_st_open(NULL) == NULL && qkv_last_status() == QKV_ERR_INVALID);
}

/* Random corruption of a valid file (flipped header bytes, truncation) must give a clean error or a file whose
 * every tensor reads: never a crash or an out-of-bounds read (run under ASan to see the latter). */
TEST(corruption_never_crashes) {
    static const float v[6] = {1, 2, 3, 4, 5, 6};
    static const int64_t l[2] = {7, 8};
    const char *json = "{\"__metadata__\":{\"a\":\"b\"},"
                       "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[24,28]},"
                       "\"l\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[28,44]}}";
    unsigned char data[44];
    memcpy(data, v, 24);
    memset(data + 24, 0x3c, 4);
    memcpy(data + 28, l, 16);
    const char *path = put_file("fuzz_src", json, data, sizeof data, 0);
    long n = file_size(path);
    unsigned char *orig = malloc((size_t)n), *buf = malloc((size_t)n);
    FILE *fp = fopen(path, "rb");
    CHECK(fp && fread(orig, 1, (size_t)n, fp) == (size_t)n);
    if (fp) fclose(fp);
    /* An in-memory file: thousands of rewrites of a real file cost seconds of disk time on a busy machine. */
    int mfd = memfd_create("qkv-st-fuzz", 0);
    CHECK(mfd >= 0);
    if (mfd < 0) return;
    char mpath[64];
    snprintf(mpath, sizeof mpath, "/proc/self/fd/%d", mfd);
    static const char alphabet[] = "{}[],:\"0123456789-.eE \\ax";
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int opened = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, orig, (size_t)n);
        long len = n;
        int edits = 1 + (int)(rng % 3);
        for (int k = 0; k < edits; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t r = rng >> 33;
            if (r % 10 == 0) len = (long)(r / 10 % (uint64_t)n);
            else if (r % 10 == 1) buf[r / 10 % 8] = (unsigned char)(r >> 8); /* the length field */
            else buf[8 + r / 10 % strlen(json)] = (unsigned char)alphabet[(r >> 12) % (sizeof alphabet - 1)];
        }
        if (ftruncate(mfd, 0) != 0 || pwrite(mfd, buf, (size_t)len, 0) != (ssize_t)len) {
            test_fail_at(__FILE__, __LINE__, "cannot write the in-memory file: %s", strerror(errno));
            break;
        }
        qkv_st_file *f = qkv_st_open(mpath);
        if (!f) {
            CHECKF(strstr(qkv_last_error(), mpath) != NULL, "message does not name the file: %s", qkv_last_error());
            continue;
        }
        opened++;
        for (int i = 0; i < qkv_st_count(f); i++) qkv_tensor_free(qkv_st_read(f, qkv_st_name(f, i)));
        qkv_st_close(f);
    }
    printf("  %d of 3000 corrupted files still opened\n", opened);
    close(mfd);
    free(orig);
    free(buf);
}

/* ---- atomic saves ------------------------------------------------------------------------------------------- */

/* A file holding one F32 tensor "v" of n copies of `value` and metadata version=tag. */
static qkv_status save_version(const char *path, const char *tag, float value, int64_t n) {
    qkv_tensor *t = qkv_tensor_new(QKV_F32, 1, &n);
    qkv_tensor_fill(t, value);
    qkv_st_writer *w = qkv_st_writer_new();
    qkv_status s = qkv_st_writer_add(w, "v", t);
    if (s == QKV_OK) s = qkv_st_writer_meta(w, "version", tag);
    if (s == QKV_OK) s = qkv_st_writer_save(w, path);
    qkv_st_writer_free(w);
    qkv_tensor_free(t);
    return s;
}

/* The file at path is a valid save_version(tag, value) file. */
static bool is_version(const char *path, const char *tag, float value) {
    qkv_st_file *f = qkv_st_open(path);
    if (!f) {
        printf("  %s\n", qkv_last_error());
        return false;
    }
    const char *got = qkv_st_metadata(f, "version");
    qkv_tensor *t = qkv_st_read(f, "v");
    bool ok = got && strcmp(got, tag) == 0 && t;
    for (int64_t i = 0; ok && i < qkv_numel(t); i++) ok = qkv_f32(t)[i] == value;
    qkv_tensor_free(t);
    qkv_st_close(f);
    return ok;
}

static bool no_temp_files(void) {
    DIR *d = opendir(scratch);
    bool clean = true;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) {
            printf("  leftover temporary file %s\n", e->d_name);
            clean = false;
        }
    if (d) closedir(d);
    return clean;
}

TEST(save_errors_and_replace) {
    const char *missing = tpath("no/such/dir/x.safetensors");
    qkv_error_clear();
    CHECK(save_version(missing, "x", 1, 4) == QKV_ERR_IO);
    CHECKF(strstr(qkv_last_error(), missing) && strstr(qkv_last_error(), "No such file or directory"), "%s",
           qkv_last_error());

    const char *path = tpath("replace.safetensors");
    CHECK_OK(save_version(path, "old", 1.0f, 100));
    CHECK(is_version(path, "old", 1.0f));
    CHECK_OK(save_version(path, "new", 2.0f, 7));
    CHECK(is_version(path, "new", 2.0f));
    CHECK(no_temp_files());

    /* Permissions only bind a non-root user. */
    if (geteuid() != 0) {
        const char *ro = tpath("readonly");
        CHECK(mkdir(ro, 0500) == 0);
        char p[700];
        snprintf(p, sizeof p, "%s/x.safetensors", ro);
        CHECK(save_version(p, "x", 1, 4) == QKV_ERR_IO && strstr(qkv_last_error(), "Permission denied"));
    }
}

/* A write that fails part-way (here: the file size limit, EFBIG, standing in for a full disk) reports the path and
 * the system's reason, removes its temporary file and leaves the previous file as it was. Runs in a child so the
 * limit does not outlive it. */
TEST(failed_write_cleans_up) {
    const char *path = tpath("efbig.safetensors");
    CHECK_OK(save_version(path, "old", 1.0f, 1000));
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid < 0) return;
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {1 << 16, 1 << 16};
        setrlimit(RLIMIT_FSIZE, &lim);
        qkv_status s = save_version(path, "new", 2.0f, 1 << 16);
        bool named = strstr(qkv_last_error(), path) && strstr(qkv_last_error(), strerror(EFBIG));
        if (!named) printf("  unexpected message: %s\n", qkv_last_error());
        fflush(stdout);
        _exit(s == QKV_ERR_IO && named ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    CHECK(is_version(path, "old", 1.0f));
    CHECK(no_temp_files());
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A child saves a ~200 MB file over an existing one in a loop and is SIGKILLed mid-write: the target must still be
 * the previous, valid file. The big tensor is a stride-0 view of one float, so the child needs no 200 MB of RAM;
 * the kill comes as soon as the temporary file is a few MB long, far from complete. */
TEST(killed_writer_leaves_old_file) {
    const char *path = tpath("crash.safetensors");
    CHECK_OK(save_version(path, "old", 1.0f, 1000));
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid < 0) return;
    if (pid == 0) {
        float one = 5.0f;
        qkv_tensor big;
        memset(&big, 0, sizeof big);
        big.dtype = QKV_F32;
        big.ndim = 1;
        big.shape[0] = 50 * 1000 * 1000;
        big.stride[0] = 0;
        big.data = &one;
        qkv_st_writer *w = qkv_st_writer_new();
        qkv_st_writer_add(w, "v", &big);
        qkv_st_writer_meta(w, "version", "new");
        for (;;) qkv_st_writer_save(w, path);
    }
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
    long waited = 0;
    while (file_size(tmp) < (4L << 20) && waited < 10000) {
        sleep_ms(1);
        waited++;
    }
    long seen = file_size(tmp);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECKF(seen >= (4L << 20), "child's temporary file reached only %ld bytes in 10 s", seen);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK(is_version(path, "old", 1.0f));
    /* The interrupted temporary file is not a valid safetensors file, and is the only debris. */
    qkv_st_file *partial = qkv_st_open(tmp);
    CHECK(partial == NULL);
    qkv_st_close(partial);
    unlink(tmp);
    CHECK(no_temp_files());
}

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/qkv-st-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(scratch)) {
        printf("cannot create a scratch directory under %s: %s\n", base ? base : "/tmp", strerror(errno));
        return 1;
    }
    RUN(round_trip);
    RUN(empty_writer_round_trips);
    RUN(reads_hf_checkpoint);
    RUN(reads_ops_core_fixture);
    RUN(f16_bf16_i64_conversion);
#ifdef __FLT16_MAX__
    RUN(f16_exhaustive);
#endif
    RUN(bad_files);
    RUN(read_errors);
    RUN(corruption_never_crashes);
    RUN(save_errors_and_replace);
    RUN(failed_write_cleans_up);
    RUN(killed_writer_leaves_old_file);
    remove_scratch();
    return test_finish();
}
