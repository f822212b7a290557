/* Best answer span from start and end scores (include/qkv/span.h), as BERT's run_squad post-processing picks it. */
#include <stdlib.h>

#include "core/internal.h"
#include "qkv/span.h"

/* The indices of the k highest allowed scores, best first (ties: lower position first); returns how many. */
static int top(const float *x, const float *allowed, int64_t T, int k, int64_t *idx) {
    int n = 0;
    for (int64_t j = 0; j < T; j++) {
        if (allowed && allowed[j] == 0) continue;
        int at = n < k ? n : k; /* insertion point from the end */
        while (at > 0 && x[idx[at - 1]] < x[j]) at--;
        if (at >= k) continue;
        for (int m = (n < k ? n : k - 1); m > at; m--) idx[m] = idx[m - 1];
        idx[at] = j;
        if (n < k) n++;
    }
    return n;
}

qkv_status qkv_span_decode(const float *start, const float *end, const float *allowed, int64_t T, int top_n,
                           int64_t max_answer_len, qkv_span *out) {
    out->start = out->end = -1;
    out->score = 0;
    if (!start || !end || T < 0 || top_n < 1 || max_answer_len < 1)
        return qkv_error_set(QKV_ERR_INVALID, "span_decode: scores, T >= 0, top_n >= 1 and max_answer_len >= 1");
    int64_t *s = malloc(sizeof *s * (size_t)top_n * 2);
    if (!s) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    int64_t *e = s + top_n;
    int ns = top(start, allowed, T, top_n, s), ne = top(end, allowed, T, top_n, e);
    for (int i = 0; i < ns; i++)
        for (int k = 0; k < ne; k++) {
            if (e[k] < s[i] || e[k] - s[i] + 1 > max_answer_len) continue;
            float score = start[s[i]] + end[e[k]];
            if (out->start < 0 || score > out->score) *out = (qkv_span){s[i], e[k], score};
        }
    free(s);
    return QKV_OK;
}
