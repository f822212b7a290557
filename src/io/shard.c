/* Token shards (see qkv/shard.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qkv/shard.h"

static const char MAGIC[8] = {'Q', 'K', 'V', 'T', 'O', 'K', 'S', '\0'};

struct qkv_shard_writer {
    FILE *f;
    char *path, *tmp;
    uint64_t vocab, count;
    uint32_t width;
};

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void header(unsigned char h[QKV_SHARD_HEADER], uint32_t width, uint64_t vocab, uint64_t count) {
    memset(h, 0, QKV_SHARD_HEADER);
    memcpy(h, MAGIC, 8);
    put_u32(h + 8, 1);
    put_u32(h + 12, width);
    put_u64(h + 16, vocab);
    put_u64(h + 24, count);
}

qkv_shard_writer *qkv_shard_writer_open(const char *path, uint64_t vocab_size) {
    if (vocab_size == 0 || vocab_size > (1ull << 31)) {
        qkv_error_set(QKV_ERR_INVALID, "%s: vocabulary size %llu out of range (1..2^31)", path,
                      (unsigned long long)vocab_size);
        return NULL;
    }
    qkv_shard_writer *w = calloc(1, sizeof *w);
    size_t n = strlen(path) + 32;
    if (!w || !(w->path = strdup(path)) || !(w->tmp = malloc(n))) goto oom;
    snprintf(w->tmp, n, "%s.tmp.%d", path, (int)getpid());
    w->vocab = vocab_size;
    w->width = vocab_size <= 65536 ? 2 : 4;
    if (!(w->f = fopen(w->tmp, "wb"))) {
        qkv_error_set(QKV_ERR_IO, "%s: cannot create: %s", w->tmp, strerror(errno));
        qkv_shard_writer_abort(w);
        return NULL;
    }
    unsigned char h[QKV_SHARD_HEADER];
    header(h, w->width, w->vocab, 0); /* count patched at close */
    if (fwrite(h, 1, sizeof h, w->f) != sizeof h) {
        qkv_error_set(QKV_ERR_IO, "%s: write failed: %s", w->tmp, strerror(errno));
        qkv_shard_writer_abort(w);
        return NULL;
    }
    return w;
oom:
    qkv_shard_writer_abort(w);
    qkv_error_set(QKV_ERR_NOMEM, "out of memory opening %s", path);
    return NULL;
}

qkv_status qkv_shard_writer_add(qkv_shard_writer *w, const int32_t *ids, size_t n) {
    unsigned char buf[4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint64_t)ids[i] >= w->vocab)
            return qkv_error_set(QKV_ERR_RANGE, "%s: token id %d at position %llu is outside the vocabulary (%llu)",
                                 w->path, ids[i], (unsigned long long)(w->count + i), (unsigned long long)w->vocab);
        uint32_t v = (uint32_t)ids[i];
        for (uint32_t b = 0; b < w->width; b++) buf[k++] = (unsigned char)(v >> (8 * b));
        if (k + 4 > sizeof buf || i + 1 == n) {
            if (fwrite(buf, 1, k, w->f) != k)
                return qkv_error_set(QKV_ERR_IO, "%s: write failed: %s", w->tmp, strerror(errno));
            k = 0;
        }
    }
    w->count += n;
    return QKV_OK;
}

void qkv_shard_writer_abort(qkv_shard_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    if (w->tmp) unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    free(w);
}

qkv_status qkv_shard_writer_close(qkv_shard_writer *w) {
    unsigned char h[QKV_SHARD_HEADER];
    header(h, w->width, w->vocab, w->count);
    qkv_status st = QKV_OK;
    if (fseek(w->f, 0, SEEK_SET) || fwrite(h, 1, sizeof h, w->f) != sizeof h || fflush(w->f) ||
        fsync(fileno(w->f)))
        st = qkv_error_set(QKV_ERR_IO, "%s: write failed: %s", w->tmp, strerror(errno));
    if (fclose(w->f) && st == QKV_OK) st = qkv_error_set(QKV_ERR_IO, "%s: close failed: %s", w->tmp, strerror(errno));
    w->f = NULL;
    if (st == QKV_OK && rename(w->tmp, w->path))
        st = qkv_error_set(QKV_ERR_IO, "%s: cannot rename into place: %s", w->path, strerror(errno));
    if (st == QKV_OK) {
        free(w->tmp);
        w->tmp = NULL; /* nothing to remove */
    }
    qkv_shard_writer_abort(w);
    return st;
}

struct qkv_shard {
    const unsigned char *map;
    size_t size;
    uint32_t width;
    uint64_t vocab, count;
    char *path;
};

qkv_shard *qkv_shard_open(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    qkv_shard *s = calloc(1, sizeof *s);
    if (!s || fstat(fd, &st) || !(s->path = strdup(path))) {
        qkv_error_set(s ? QKV_ERR_IO : QKV_ERR_NOMEM, "%s: cannot read", path);
        goto fail;
    }
    s->size = (size_t)st.st_size;
    if (s->size < QKV_SHARD_HEADER) {
        qkv_error_set(QKV_ERR_FORMAT, "%s: %zu bytes is shorter than the %d-byte token-shard header", path, s->size,
                      QKV_SHARD_HEADER);
        goto fail;
    }
    void *m = mmap(NULL, s->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        qkv_error_set(QKV_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        goto fail;
    }
    s->map = m;
    close(fd);
    fd = -1;
    if (memcmp(s->map, MAGIC, 8)) {
        qkv_error_set(QKV_ERR_FORMAT, "%s: not a qkv token shard (bad magic)", path);
        goto fail;
    }
    uint32_t version = get_u32(s->map + 8);
    s->width = get_u32(s->map + 12);
    s->vocab = get_u64(s->map + 16);
    s->count = get_u64(s->map + 24);
    if (version != 1 || (s->width != 2 && s->width != 4) || s->vocab == 0 || s->vocab > (1ull << 31) ||
        (s->width == 2 && s->vocab > 65536)) {
        qkv_error_set(QKV_ERR_FORMAT, "%s: unsupported header (version %u, id width %u, vocabulary %llu)", path,
                      version, s->width, (unsigned long long)s->vocab);
        goto fail;
    }
    if (s->count > (s->size - QKV_SHARD_HEADER) / s->width ||
        QKV_SHARD_HEADER + s->count * s->width != s->size) {
        qkv_error_set(QKV_ERR_FORMAT, "%s: header says %llu tokens (%llu bytes) but the file has %zu bytes", path,
                      (unsigned long long)s->count, (unsigned long long)(QKV_SHARD_HEADER + s->count * s->width),
                      s->size);
        goto fail;
    }
    return s;
fail:
    if (fd >= 0) close(fd);
    qkv_shard_close(s);
    return NULL;
}

void qkv_shard_close(qkv_shard *s) {
    if (!s) return;
    if (s->map) munmap((void *)s->map, s->size);
    free(s->path);
    free(s);
}

uint64_t qkv_shard_tokens(const qkv_shard *s) { return s->count; }
uint64_t qkv_shard_vocab(const qkv_shard *s) { return s->vocab; }

qkv_status qkv_shard_read(const qkv_shard *s, uint64_t start, size_t n, int32_t *out) {
    if (start > s->count || n > s->count - start)
        return qkv_error_set(QKV_ERR_RANGE, "%s: tokens [%llu, %llu) requested, the shard has %llu", s->path,
                             (unsigned long long)start, (unsigned long long)(start + n),
                             (unsigned long long)s->count);
    const unsigned char *p = s->map + QKV_SHARD_HEADER + start * s->width;
    for (size_t i = 0; i < n; i++, p += s->width) {
        uint32_t v = s->width == 2 ? (uint32_t)(p[0] | p[1] << 8) : get_u32(p);
        if (v >= s->vocab)
            return qkv_error_set(QKV_ERR_FORMAT, "%s: token %llu has id %u, outside the vocabulary (%llu)", s->path,
                                 (unsigned long long)(start + i), v, (unsigned long long)s->vocab);
        out[i] = (int32_t)v;
    }
    return QKV_OK;
}
