/* The small-M kernel over pre-packed weights (src/ops/gemm_packed.h): equal to cblas_sgemm within rounding on every
 * instruction-set path the CPU runs, for edge sizes (rows past a tile, columns past a panel, strided rows); a row's
 * bits do not depend on the rows beside it nor on the thread count (what lets batched decoding give the tokens of
 * one-at-a-time decoding); and a context's packs are used only for allowed weights. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/par.h"
#include "ops/gemm_packed.h"
#include "test.h"

/* Runs fn once per path this CPU supports, then restores the path in use. */
static void each_isa(void (*fn)(qkv_isa)) {
    qkv_isa was = qkv_cpu_isa();
    for (int i = QKV_ISA_GENERIC; i <= QKV_ISA_AVX512; i++) {
        if (!qkv_cpu_supports((qkv_isa)i)) continue;
        CHECK_OK(qkv_cpu_set_isa((qkv_isa)i));
        fn((qkv_isa)i);
    }
    CHECK_OK(qkv_cpu_set_isa(was));
}

/* Product of one size against BLAS, accumulating into a random y or overwriting it, with row strides wider than
 * the rows; the padding between rows must stay untouched. */
static void one_size(qkv_isa isa, int64_t M, int64_t N, int64_t K, bool accumulate) {
    int64_t ldx = K + 3, ldy = N + 5;
    float *W = test_rand_buf(1 + (uint64_t)(N * 31 + K), (size_t)(N * K)), *x = test_rand_buf(2 + (uint64_t)M, (size_t)(M * ldx));
    float *y = test_rand_buf(3, (size_t)(M * ldy)), *ref = malloc(sizeof(float) * (size_t)(M * ldy + 1));
    qkv__pack *p = qkv__pack_new(W, N, K);
    CHECK(p && W && x && y && ref);
    if (!p || !W || !x || !y || !ref) goto done;
    memcpy(ref, y, sizeof(float) * (size_t)(M * ldy));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x, (int)ldx, W, (int)K,
                accumulate ? 1.0f : 0.0f, ref, (int)ldy);
    float *pad_before = malloc(sizeof(float) * (size_t)(M * ldy));
    memcpy(pad_before, y, sizeof(float) * (size_t)(M * ldy));
    qkv__pack_gemm(p, M, x, ldx, y, ldy, accumulate);
    double worst = 0;
    bool pad_ok = true;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double d = fabs((double)y[i * ldy + j] - (double)ref[i * ldy + j]);
            double tol = 2e-6 * (double)K + 1e-6; /* |x|, |w| <= 1: rounding grows with K at worst */
            if (d - tol > worst) worst = d - tol;
        }
        for (int64_t j = N; j < ldy; j++) pad_ok &= y[i * ldy + j] == pad_before[i * ldy + j];
    }
    CHECKF(worst <= 0, "%s M %lld N %lld K %lld accumulate %d: off by %g beyond tolerance", qkv_cpu_isa_name(isa),
           (long long)M, (long long)N, (long long)K, (int)accumulate, worst);
    CHECKF(pad_ok, "%s M %lld N %lld K %lld: wrote past a row", qkv_cpu_isa_name(isa), (long long)M, (long long)N,
           (long long)K);
    free(pad_before);
done:
    qkv__pack_free(p);
    free(W);
    free(x);
    free(y);
    free(ref);
}

static void sizes_on(qkv_isa isa) {
    static const int64_t Ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 64, 70};
    static const int64_t Ns[] = {1, 15, 16, 17, 40};
    static const int64_t Ks[] = {1, 7, 64, 257};
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) one_size(isa, Ms[a], Ns[b], Ks[c], (a + b + c) % 2);
    one_size(isa, 64, 1000, 256, true); /* large enough for the threaded loop */
    one_size(isa, 9, 40, 700, false);   /* K in several blocks on every vector path */
}

TEST(packed_matches_blas_on_every_path) { each_isa(sizes_on); }

/* Row r of a product alone, at another place in a batch, or with another thread count: the same bits. */
static void rows_alone_on(qkv_isa isa) {
    int64_t M = 64, N = 300, K = 200;
    float *W = test_rand_buf(11, (size_t)(N * K)), *x = test_rand_buf(12, (size_t)(M * K));
    float *all = malloc(sizeof(float) * (size_t)(M * N)), *part = malloc(sizeof(float) * (size_t)(M * N));
    qkv__pack *p = qkv__pack_new(W, N, K);
    CHECK(p && W && x && all && part);
    if (p && W && x && all && part) {
        int threads = qkv_threads_get();
        qkv_threads_set(1);
        qkv__pack_gemm(p, M, x, K, all, N, false);
        bool same = true;
        for (int64_t r = 0; r < M; r += 7) { /* one row alone */
            qkv__pack_gemm(p, 1, x + r * K, K, part, N, false);
            same &= !memcmp(part, all + r * N, sizeof(float) * (size_t)N);
        }
        qkv__pack_gemm(p, 13, x + 5 * K, K, part, N, false); /* rows 5..17: other positions within the tiles */
        same &= !memcmp(part, all + 5 * N, sizeof(float) * 13 * (size_t)N);
        CHECKF(same, "%s: a row's result depends on the rows beside it", qkv_cpu_isa_name(isa));
        qkv_threads_set(2);
        qkv__par_set_cores_free(2); /* threaded even on a machine whose other core is busy */
        CHECK(qkv__par_gemm_work(M, N, K) >= QKV__PAR_MIN); /* large enough to be split at all */
        qkv__pack_gemm(p, M, x, K, part, N, false);
        CHECKF(!memcmp(part, all, sizeof(float) * (size_t)(M * N)), "%s: 2 threads differ from 1",
               qkv_cpu_isa_name(isa));
        qkv__par_set_cores_free(0);
        qkv_threads_set(threads);
    }
    qkv__pack_free(p);
    free(W);
    free(x);
    free(all);
    free(part);
}

TEST(rows_do_not_depend_on_their_batch) { each_isa(rows_alone_on); }

/* On the vector paths every output is one FMA chain over k = 0..K-1 in order from zero (y += it when accumulating),
 * whatever the k-blocking and the tile: the bits of fmaf applied in a loop. */
static void chain_on(qkv_isa isa) {
    if (isa == QKV_ISA_GENERIC) return; /* portable C: a * b + c, rounded twice */
    static const int64_t sizes[][3] = {{8, 32, 256}, {13, 47, 700}, {3, 17, 1000}, {64, 40, 129}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
        float *W = test_rand_buf(51 + s, (size_t)(N * K)), *x = test_rand_buf(61 + s, (size_t)(M * K));
        float *y = test_rand_buf(71 + s, (size_t)(M * N)), *y0 = malloc(sizeof(float) * (size_t)(M * N));
        qkv__pack *p = qkv__pack_new(W, N, K);
        CHECK(W && x && y && y0 && p);
        if (W && x && y && y0 && p) {
            memcpy(y0, y, sizeof(float) * (size_t)(M * N));
            bool acc = s % 2 == 1;
            qkv__pack_gemm(p, M, x, K, y, N, acc);
            int64_t bad = 0;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    float c = 0.0f;
                    for (int64_t k = 0; k < K; k++) c = fmaf(x[i * K + k], W[j * K + k], c);
                    float want = acc ? y0[i * N + j] + c : c;
                    bad += memcmp(&want, &y[i * N + j], sizeof want) != 0;
                }
            CHECKF(bad == 0, "%s M %lld N %lld K %lld: %lld outputs are not the in-order FMA chain",
                   qkv_cpu_isa_name(isa), (long long)M, (long long)N, (long long)K, (long long)bad);
        }
        qkv__pack_free(p);
        free(W);
        free(x);
        free(y);
        free(y0);
    }
}

TEST(vector_paths_sum_k_in_order) { each_isa(chain_on); }

/* Beyond one block of rows (a beam over many sentences) the product runs block by block: every row still gets the
 * bits it gets alone, including the rows either side of a block boundary. */
TEST(row_blocks_keep_each_row_alone) {
    int64_t M = 2 * QKV__PACKED_BLOCK_M + 37, N = 40, K = 24;
    float *W = test_rand_buf(31, (size_t)(N * K)), *x = test_rand_buf(32, (size_t)(M * K));
    float *all = malloc(sizeof(float) * (size_t)(M * N)), part[40];
    qkv__pack *p = qkv__pack_new(W, N, K);
    CHECK(p && W && x && all);
    if (p && W && x && all) {
        qkv__pack_gemm(p, M, x, K, all, N, false);
        const int64_t rows[] = {0, QKV__PACKED_BLOCK_M - 1, QKV__PACKED_BLOCK_M, 2 * QKV__PACKED_BLOCK_M + 1, M - 1};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            qkv__pack_gemm(p, 1, x + rows[i] * K, K, part, N, false);
            CHECKF(!memcmp(part, all + rows[i] * N, sizeof part), "row %lld of %lld differs from the row alone",
                   (long long)rows[i], (long long)M);
        }
        double worst = 0; /* and the product is right: against a plain sum */
        for (int64_t i = 0; i < M; i += 29)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += (double)x[i * K + k] * W[j * K + k];
                worst = fmax(worst, fabs(s - all[i * N + j]));
            }
        CHECKF(worst < 1e-4, "blocked product off by %g", worst);
    }
    qkv__pack_free(p);
    free(W);
    free(x);
    free(all);
}

/* qkv__gemm_xwt takes the packed path for allowed weights (and row blocks of them) only, packs on the first
 * product with several rows, and then serves single rows from the pack. */
TEST(context_packs_only_allowed_weights) {
    int64_t N = 48, K = 32;
    qkv_tensor *w = qkv_tensor_new(QKV_F32, QKV_DIMS(N, K)), *other = qkv_tensor_new(QKV_F32, QKV_DIMS(N, K));
    float *x = test_rand_buf(21, (size_t)(4 * K)), y[4 * 48], ref[4 * 48];
    qkv_ctx *ctx = qkv_ctx_new();
    qkv__packs *ps = qkv__packs_new();
    CHECK(w && other && x && ctx && ps);
    if (!w || !other || !x || !ctx || !ps) goto done;
    float *wd = w->data;
    for (int64_t i = 0; i < N * K; i++) wd[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    CHECK(!qkv__gemm_xwt(ctx, 4, N, K, x, K, wd, y, N, false)); /* no packs on the context */
    qkv__ctx_set_packs(ctx, ps);
    CHECK_OK(qkv__packs_allow(ps, w));
    CHECK(!qkv__gemm_xwt(ctx, 4, N, K, x, K, other->data, y, N, false)); /* not allowed */
    CHECK_OK(qkv__packs_allow(ps, qkv_transpose(ctx, other, 0, 1)));      /* not contiguous: ignored */
    CHECK(!qkv__gemm_xwt(ctx, 4, N, K, x, K, other->data, y, N, false));
    CHECK(!qkv__gemm_xwt(ctx, 1, N, K, x, K, wd, y, N, false));          /* one row, nothing packed yet */
    CHECK(qkv__gemm_xwt(ctx, 4, N, K, x, K, wd, y, N, false));           /* packs now */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 4, (int)N, (int)K, 1.0f, x, (int)K, wd, (int)K, 0.0f, ref,
                (int)N);
    double worst = 0;
    for (int i = 0; i < 4 * N; i++) worst = fmax(worst, fabs((double)y[i] - (double)ref[i]));
    CHECKF(worst < 1e-4, "packed product off by %g", worst);
    float row[48];
    CHECK(qkv__gemm_xwt(ctx, 1, N, K, x + K, K, wd, row, N, false)); /* the pack now serves one row */
    CHECK(!memcmp(row, y + N, sizeof row));
    /* the middle 16 rows of w (a block such as a fused projection's k part) */
    CHECK(qkv__gemm_xwt(ctx, 2, 16, K, x, K, wd + 16 * K, y, 16, false));
    CHECK(!qkv__gemm_xwt(ctx, 2, 16, K, x, K, wd + 40 * K, y, 16, false)); /* runs past w's end */
    float *big = calloc((size_t)(QKV__PACKED_MAX_M + 1) * (size_t)(K + N), sizeof(float));
    CHECK(big && !qkv__gemm_xwt(ctx, QKV__PACKED_MAX_M + 1, N, K, big, K, wd, big + (QKV__PACKED_MAX_M + 1) * K, N,
                                false)); /* many rows: BLAS */
    free(big);
done:
    qkv_ctx_free(ctx);
    qkv__packs_free(ps);
    qkv_tensor_free(w);
    qkv_tensor_free(other);
    free(x);
}

/* qkv__gemm_xwt_bias gives the bits of the bias copied into each row and an accumulating product, on every path,
 * for edge sizes (rows past a tile, columns past a panel: masked loads of the bias), writing nothing past a row; it
 * declines where qkv__gemm_xwt does, leaving y as it was. */
static void bias_on(qkv_isa isa) {
    static const int64_t sizes[][3] = {{2, 16, 64}, {9, 17, 33}, {13, 40, 257}, {64, 1000, 256}, {3, 7, 700}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2], ldy = N + 3;
        qkv_tensor *w = qkv_tensor_new(QKV_F32, QKV_DIMS(N, K));
        float *x = test_rand_buf(31 + (uint64_t)s, (size_t)(M * K)), *b = test_rand_buf(41 + (uint64_t)s, (size_t)N);
        float *y = test_rand_buf(51, (size_t)(M * ldy)), *ref = malloc(sizeof(float) * (size_t)(M * ldy));
        qkv_ctx *ctx = qkv_ctx_new();
        qkv__packs *ps = qkv__packs_new();
        CHECK(w && x && b && y && ref && ctx && ps);
        if (w && x && b && y && ref && ctx && ps) {
            float *wd = w->data, *r = test_rand_buf(61 + (uint64_t)s, (size_t)(N * K));
            memcpy(wd, r, sizeof(float) * (size_t)(N * K));
            free(r);
            qkv__ctx_set_packs(ctx, ps);
            CHECK(!qkv__gemm_xwt_bias(ctx, M, N, K, x, K, wd, b, y, ldy)); /* not allowed: declines */
            memcpy(ref, y, sizeof(float) * (size_t)(M * ldy));
            CHECK_OK(qkv__packs_allow(ps, w));
            for (int64_t i = 0; i < M; i++) memcpy(ref + i * ldy, b, sizeof(float) * (size_t)N);
            CHECK(qkv__gemm_xwt(ctx, M, N, K, x, K, wd, ref, ldy, true));
            CHECK(qkv__gemm_xwt_bias(ctx, M, N, K, x, K, wd, b, y, ldy));
            CHECKF(!memcmp(y, ref, sizeof(float) * (size_t)(M * ldy)), "%s M %lld N %lld K %lld: bias store differs "
                   "from bias rows + accumulate (or wrote past a row)", qkv_cpu_isa_name(isa), (long long)M,
                   (long long)N, (long long)K);
        }
        qkv_ctx_free(ctx);
        qkv__packs_free(ps);
        qkv_tensor_free(w);
        free(x);
        free(b);
        free(y);
        free(ref);
    }
}

TEST(bias_store_equals_bias_rows_plus_accumulate) { each_isa(bias_on); }

/* While a pack cache is open, a second decoding state's packs take the pack the first state made (seen here by
 * changing the weight in between, which the contract forbids: the second product still uses the old values); a
 * state holding a pack keeps it valid past the cache's close; after the outermost close, weights are packed anew. */
TEST(pack_cache_shares_packs_between_states) {
    int64_t N = 20, K = 12;
    qkv_tensor *w = qkv_tensor_new(QKV_F32, QKV_DIMS(N, K));
    float *x = test_rand_buf(41, (size_t)(3 * K)), y0[3 * 20], y1[3 * 20], y2[3 * 20], y3[3 * 20];
    qkv_ctx *ctx = qkv_ctx_new();
    qkv__packs *a = qkv__packs_new(), *b = qkv__packs_new(), *c = qkv__packs_new();
    CHECK(w && x && ctx && a && b && c);
    if (!w || !x || !ctx || !a || !b || !c) goto done;
    float *wd = w->data;
    for (int64_t i = 0; i < N * K; i++) wd[i] = (float)((i * 13) % 7) / 7.0f - 0.5f;
    CHECK_OK(qkv__packs_allow(a, w));
    CHECK_OK(qkv__packs_allow(b, w));
    CHECK_OK(qkv__packs_allow(c, w));
    qkv__pack_cache_open();
    qkv__pack_cache_open(); /* nested: the inner close keeps the cache */
    qkv__ctx_set_packs(ctx, a);
    CHECK(qkv__gemm_xwt(ctx, 3, N, K, x, K, wd, y0, N, false));
    qkv__packs_free(a); /* the first state ends; its pack stays in the cache */
    a = NULL;
    qkv__pack_cache_close();
    for (int64_t i = 0; i < N * K; i++) wd[i] += 1.0f;
    qkv__ctx_set_packs(ctx, b);
    CHECK(qkv__gemm_xwt(ctx, 3, N, K, x, K, wd, y1, N, false));
    CHECK(!memcmp(y0, y1, sizeof y0)); /* the cached pack, made before the change */
    qkv__pack_cache_close();
    CHECK(qkv__gemm_xwt(ctx, 3, N, K, x, K, wd, y2, N, false)); /* b still holds its pack after the close */
    CHECK(!memcmp(y0, y2, sizeof y0));
    qkv__ctx_set_packs(ctx, c);
    CHECK(qkv__gemm_xwt(ctx, 3, N, K, x, K, wd, y3, N, false)); /* no cache open: packed from the new values */
    double s = 0;
    for (int64_t k = 0; k < K; k++) s += (double)x[k] * wd[k];
    CHECKF(fabs(y3[0] - s) < 1e-4 && memcmp(y0, y3, sizeof y0), "after the close the weight was not packed anew");
    qkv__ctx_set_packs(ctx, NULL);
done:
    qkv__packs_free(a);
    qkv__packs_free(b);
    qkv__packs_free(c);
    qkv_ctx_free(ctx);
    qkv_tensor_free(w);
    free(x);
}

int main(void) {
    RUN(packed_matches_blas_on_every_path);
    RUN(rows_do_not_depend_on_their_batch);
    RUN(vector_paths_sum_k_in_order);
    RUN(row_blocks_keep_each_row_alone);
    RUN(context_packs_only_allowed_weights);
    RUN(pack_cache_shares_packs_between_states);
    RUN(bias_store_equals_bias_rows_plus_accumulate);
    return test_finish();
}
