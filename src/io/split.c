/* Seeded (and optionally stratified) train/dev/test splits. */
#include <stdlib.h>
#include <string.h>

#include "qkv/data.h"
#include "qkv/rng.h"

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

qkv_status qkv_data_split(size_t n, const int32_t *labels, double dev_frac, double test_frac, uint64_t seed,
                          uint8_t *out) {
    if (!(dev_frac >= 0 && test_frac >= 0 && dev_frac + test_frac <= 1))
        return qkv_error_set(QKV_ERR_INVALID, "split: dev %g and test %g must be >= 0 and sum to at most 1", dev_frac,
                             test_frac);
    size_t *idx = malloc(sizeof *idx * (n ? n : 1));
    int32_t *keys = malloc(sizeof *keys * (n ? n : 1));
    if (!idx || !keys) {
        free(idx);
        free(keys);
        return qkv_error_set(QKV_ERR_NOMEM, "split: out of memory");
    }
    /* Distinct labels in sorted order (one group when unstratified). */
    size_t n_groups = 1;
    if (labels && n) {
        memcpy(keys, labels, sizeof *keys * n);
        qsort(keys, n, sizeof *keys, cmp_i32);
        n_groups = 0;
        for (size_t i = 0; i < n; i++)
            if (i == 0 || keys[i] != keys[i - 1]) keys[n_groups++] = keys[i];
    }
    qkv_rng rng;
    qkv_rng_init(&rng, seed);
    for (size_t g = 0; g < n_groups; g++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (!labels || labels[i] == keys[g]) idx[m++] = i;
        for (size_t i = m; i > 1; i--) { /* Fisher-Yates */
            size_t j = qkv_rng_below(&rng, (uint32_t)i), t = idx[i - 1];
            idx[i - 1] = idx[j];
            idx[j] = t;
        }
        size_t n_dev = (size_t)(dev_frac * (double)m + 0.5), n_test = (size_t)(test_frac * (double)m + 0.5);
        if (n_dev + n_test > m) n_test = m - n_dev;
        for (size_t k = 0; k < m; k++) out[idx[k]] = k < n_dev ? 1 : (k < n_dev + n_test ? 2 : 0);
    }
    free(idx);
    free(keys);
    return QKV_OK;
}
