/* A small test harness: each test_*.c defines TEST functions and a main that RUNs them. The last line printed is
 * "N passed, N failed[, N skipped]"; the exit status is 0 when nothing failed, 77 (ctest: skipped) when every
 * test skipped, 1 otherwise. */
#ifndef QKV_TEST_H
#define QKV_TEST_H

#include <stdbool.h>
#include <stdio.h>

#include "qkv/qkv.h"

#define TEST(name) static void name(void)
#define RUN(name) test_run(#name, name)

void test_run(const char *name, void (*fn)(void));
int test_finish(void);
/* Marks the running test skipped; prints a visible "SKIP: ..." line. The caller returns. */
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void test_fail_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) test_fail_at(__FILE__, __LINE__, "CHECK(%s) failed", #cond);       \
    } while (0)
#define CHECKF(cond, ...)                                                              \
    do {                                                                               \
        if (!(cond)) test_fail_at(__FILE__, __LINE__, __VA_ARGS__);                    \
    } while (0)
/* Checks a call returned non-NULL / QKV_OK, printing qkv_last_error() otherwise. */
#define CHECK_OK(expr)                                                                 \
    do {                                                                               \
        if ((expr) != QKV_OK)                                                          \
            test_fail_at(__FILE__, __LINE__, "%s: %s", #expr, qkv_last_error());       \
    } while (0)
#define CHECK_NN(expr)                                                                 \
    do {                                                                               \
        if ((expr) == NULL)                                                            \
            test_fail_at(__FILE__, __LINE__, "%s returned NULL: %s", #expr, qkv_last_error()); \
    } while (0)

/* Largest |a-b| - (atol + rtol*|b|) violation between two tensors of the same shape (any strides). Prints the
 * max abs difference with `what`; returns true when within tolerance. */
bool test_allclose(const char *what, const qkv_tensor *a, const qkv_tensor *b, double rtol, double atol);
/* v[0..n) uniform in [-1, 1) from a generator seeded with seed (the same values for the same seed). */
void test_fill_uniform(float *v, size_t n, uint64_t seed);
/* A malloc'd buffer of n such values (at least one element; the caller frees), NULL when out of memory. */
float *test_rand_buf(uint64_t seed, size_t n);
/* True when the file exists. */
bool test_file_exists(const char *path);
/* The whole file as a NUL-terminated malloc'd string (the caller frees), or NULL when it cannot be read. */
char *test_read_file(const char *path);
/* Writes content to dir/name and returns that path (one of 4 rotating static buffers: valid for the next 3 calls). */
const char *test_write_file(const char *dir, const char *name, const char *content);
/* Path of a fixture file (QKV_FIXTURES/name) in a static buffer. */
const char *test_fixture_path(const char *name);
/* Path under the shared folder (QKV_SHARED/rel), or NULL if QKV_SHARED is unset. Static buffer. */
const char *test_shared_path(const char *rel);
/* Tensor `name` of a safetensors fixture, copied into the context (it lives until the context's reset); NULL when
 * the file lacks it. */
qkv_tensor *test_st_ctx_read(qkv_ctx *ctx, qkv_st_file *f, const char *name);

#endif
