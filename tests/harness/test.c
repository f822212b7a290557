#include "test.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qkv/rng.h"

static int n_passed, n_failed, n_skipped;
static bool cur_failed, cur_skipped;
static const char *cur_name;

void test_run(const char *name, void (*fn)(void)) {
    cur_name = name;
    cur_failed = cur_skipped = false;
    qkv_error_clear();
    fn();
    if (cur_failed) {
        n_failed++;
        printf("FAIL %s\n", name);
    } else if (cur_skipped) {
        n_skipped++;
    } else {
        n_passed++;
        printf("ok   %s\n", name);
    }
    fflush(stdout);
}

int test_finish(void) {
    if (n_skipped)
        printf("%d passed, %d failed, %d skipped\n", n_passed, n_failed, n_skipped);
    else
        printf("%d passed, %d failed\n", n_passed, n_failed);
    if (n_failed) return 1;
    if (n_passed == 0 && n_skipped > 0) return 77;
    return 0;
}

void test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("SKIP %s: ", cur_name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    cur_skipped = true;
}

void test_fail_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("  %s:%d: [%s] ", file, line, cur_name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    cur_failed = true;
}

static double elem(const qkv_tensor *t, int64_t flat) {
    int64_t off = 0, rem = flat;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (rem % t->shape[d]) * t->stride[d];
        rem /= t->shape[d];
    }
    return t->dtype == QKV_F32 ? (double)((const float *)t->data)[off] : (double)((const int32_t *)t->data)[off];
}

bool test_allclose(const char *what, const qkv_tensor *a, const qkv_tensor *b, double rtol, double atol) {
    char sa[96], sb[96];
    if (!a || !b) {
        printf("  %s: missing tensor (%s)\n", what, qkv_last_error());
        return false;
    }
    if (!qkv_same_shape(a, b)) {
        printf("  %s: shape %s != %s\n", what, qkv_shape_str(a, sa, sizeof sa), qkv_shape_str(b, sb, sizeof sb));
        return false;
    }
    double max_abs = 0, worst = 0;
    int64_t worst_i = -1, n = qkv_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = elem(a, i), y = elem(b, i);
        double d = fabs(x - y);
        if (isnan(x) != isnan(y)) d = INFINITY;
        if (d > max_abs) max_abs = d;
        double excess = d - (atol + rtol * fabs(y));
        if (excess > worst || (isnan(excess) && worst_i < 0)) {
            worst = excess;
            worst_i = i;
        }
    }
    printf("  %-40s max|diff| = %.3g\n", what, max_abs);
    if (worst_i >= 0 && worst > 0) {
        printf("  %s: element %lld: %.8g vs %.8g (rtol %g atol %g)\n", what, (long long)worst_i, elem(a, worst_i),
               elem(b, worst_i), rtol, atol);
        return false;
    }
    return true;
}

bool test_file_exists(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0;
}

char *test_read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)n + 1))) {
        if (fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
        s[n] = '\0';
    }
    fclose(f);
    return s;
}

const char *test_write_file(const char *dir, const char *name, const char *content) {
    static char path[4][4096];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(content, f);
        fclose(f);
    }
    return p;
}

const char *test_fixture_path(const char *name) {
    static char buf[4096];
    const char *dir = getenv("QKV_FIXTURES");
    snprintf(buf, sizeof buf, "%s/%s", dir ? dir : "fixtures", name);
    return buf;
}

const char *test_shared_path(const char *rel) {
    static char buf[4096];
    const char *dir = getenv("QKV_SHARED");
    if (!dir) return NULL;
    snprintf(buf, sizeof buf, "%s/%s", dir, rel);
    return buf;
}

qkv_tensor *test_st_ctx_read(qkv_ctx *ctx, qkv_st_file *f, const char *name) {
    qkv_tensor *t = qkv_st_read(f, name);
    if (!t) return NULL;
    qkv_tensor *c = qkv_ctx_tensor(ctx, t->dtype, t->ndim, t->shape);
    if (c) qkv_tensor_copy(c, t);
    qkv_tensor_free(t);
    return c;
}

void test_fill_uniform(float *v, size_t n, uint64_t seed) {
    qkv_rng r;
    qkv_rng_init(&r, seed);
    for (size_t i = 0; i < n; i++) v[i] = 2.0f * qkv_rng_uniform(&r) - 1.0f;
}

float *test_rand_buf(uint64_t seed, size_t n) {
    float *v = malloc(sizeof(float) * (n ? n : 1));
    if (v) test_fill_uniform(v, n, seed);
    return v;
}
