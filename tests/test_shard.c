/* Token shards: round trip at both id widths, and corrupt files rejected with the file named. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "qkv/shard.h"

static void path_for(char *buf, size_t n, const char *tag) { snprintf(buf, n, "shard_%s_%d.bin", tag, (int)getpid()); }

TEST(round_trip) {
    for (int wide = 0; wide < 2; wide++) {
        char path[64];
        path_for(path, sizeof path, wide ? "w" : "n");
        uint64_t vocab = wide ? 100000 : 50257;
        int32_t ids[1000], back[1000];
        for (int i = 0; i < 1000; i++) ids[i] = (int32_t)((i * 7919) % vocab);
        qkv_shard_writer *w = qkv_shard_writer_open(path, vocab);
        CHECK_NN(w);
        if (!w) return;
        CHECK_OK(qkv_shard_writer_add(w, ids, 600));
        CHECK_OK(qkv_shard_writer_add(w, ids + 600, 400));
        int32_t bad = (int32_t)vocab;
        CHECK(qkv_shard_writer_add(w, &bad, 1) == QKV_ERR_RANGE);
        CHECK_OK(qkv_shard_writer_close(w));
        qkv_shard *s = qkv_shard_open(path);
        CHECK_NN(s);
        if (!s) return;
        CHECK(qkv_shard_tokens(s) == 1000 && qkv_shard_vocab(s) == vocab);
        CHECK_OK(qkv_shard_read(s, 0, 1000, back));
        CHECK(memcmp(ids, back, sizeof ids) == 0);
        CHECK(qkv_shard_read(s, 990, 20, back) == QKV_ERR_RANGE);
        qkv_shard_close(s);
        unlink(path);
    }
}

TEST(corrupt_files) {
    char path[64];
    path_for(path, sizeof path, "c");
    qkv_shard_writer *w = qkv_shard_writer_open(path, 300);
    int32_t ids[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 299};
    qkv_shard_writer_add(w, ids, 10);
    qkv_shard_writer_close(w);
    FILE *f = fopen(path, "r+b"); /* truncate the data: count no longer matches the size */
    CHECK(f && ftruncate(fileno(f), 64 + 15) == 0);
    fclose(f);
    CHECK(qkv_shard_open(path) == NULL && qkv_last_status() == QKV_ERR_FORMAT && strstr(qkv_last_error(), path));
    f = fopen(path, "wb");
    fputs("not a shard at all, just some text that is long enough for a header.....", f);
    fclose(f);
    CHECK(qkv_shard_open(path) == NULL && strstr(qkv_last_error(), "magic"));
    f = fopen(path, "wb");
    fputs("tiny", f);
    fclose(f);
    CHECK(qkv_shard_open(path) == NULL && strstr(qkv_last_error(), "header"));
    CHECK(qkv_shard_open("/nonexistent/shard.bin") == NULL && qkv_last_status() == QKV_ERR_IO);
    CHECK(qkv_shard_writer_open("/nonexistent/dir/x.bin", 10) == NULL && qkv_last_status() == QKV_ERR_IO);
    unlink(path);
}

int main(void) {
    RUN(round_trip);
    RUN(corrupt_files);
    return test_finish();
}
