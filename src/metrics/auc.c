/* Metrics of scores for a binary decision: ROC AUC and the most accurate threshold. Both sort the scores once
 * (descending, ties kept together) and walk the distinct values. */
#include <stdlib.h>

#include "qkv/metrics.h"

typedef struct {
    float s;
    int32_t y;
} scored;

static int by_score_desc(const void *a, const void *b) {
    float x = ((const scored *)a)->s, y = ((const scored *)b)->s;
    return (x < y) - (x > y);
}

/* Sorted copy; counts of positives and negatives. Labels must be 0 or 1, scores finite. */
static qkv_status sorted(const char *what, const float *scores, const int32_t *labels, size_t n, scored **out,
                         int64_t *pos, int64_t *neg) {
    if (!scores || !labels || !out)
        return qkv_error_set(QKV_ERR_INVALID, "%s: scores and labels must not be NULL", what);
    if (n == 0) return qkv_error_set(QKV_ERR_INVALID, "%s: no examples", what);
    scored *v = malloc(sizeof *v * n);
    if (!v) return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", what);
    *pos = *neg = 0;
    for (size_t i = 0; i < n; i++) {
        if ((labels[i] != 0 && labels[i] != 1) || !(scores[i] == scores[i]) || scores[i] - scores[i] != 0) {
            free(v);
            return qkv_error_set(QKV_ERR_INVALID, "%s: example %zu has label %d and score %g (expected 0 or 1 and a "
                                 "finite score)", what, i, (int)labels[i], (double)scores[i]);
        }
        v[i] = (scored){scores[i], labels[i]};
        *pos += labels[i];
    }
    *neg = (int64_t)n - *pos;
    qsort(v, n, sizeof *v, by_score_desc);
    *out = v;
    return QKV_OK;
}

qkv_status qkv_metric_auc(const float *scores, const int32_t *labels, size_t n, double *auc) {
    scored *v;
    int64_t pos, neg;
    qkv_status st = sorted("auc", scores, labels, n, &v, &pos, &neg);
    if (st) return st;
    if (!pos || !neg) {
        free(v);
        return qkv_error_set(QKV_ERR_INVALID, "auc: needs positives and negatives (got %lld and %lld)",
                             (long long)pos, (long long)neg);
    }
    /* Walking down the scores: each positive outranks the negatives below it; a tie group counts half. */
    double wins = 0;
    int64_t neg_below = neg;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        int64_t p = 0, q = 0;
        for (; j < n && v[j].s == v[i].s; j++) *(v[j].y ? &p : &q) += 1;
        neg_below -= q;
        wins += (double)p * ((double)neg_below + 0.5 * (double)q);
        i = j;
    }
    *auc = wins / ((double)pos * (double)neg);
    free(v);
    return QKV_OK;
}

qkv_status qkv_metric_best_threshold(const float *scores, const int32_t *labels, size_t n, double *threshold,
                                     double *accuracy) {
    scored *v;
    int64_t pos, neg;
    qkv_status st = sorted("best threshold", scores, labels, n, &v, &pos, &neg);
    if (st) return st;
    if (!threshold) {
        free(v);
        return qkv_error_set(QKV_ERR_INVALID, "best threshold: threshold must not be NULL");
    }
    /* Cut above everything: all negative, correct = neg. Lowering the cut past a tie group adds its positives and
     * loses its negatives. */
    int64_t correct = neg, best = neg;
    double best_t = (double)v[0].s + 1.0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        for (; j < n && v[j].s == v[i].s; j++) correct += v[j].y ? 1 : -1;
        if (correct > best) {
            best = correct;
            best_t = j < n ? 0.5 * ((double)v[i].s + (double)v[j].s) : (double)v[i].s - 1.0;
        }
        i = j;
    }
    *threshold = best_t;
    if (accuracy) *accuracy = (double)best / (double)n;
    free(v);
    return QKV_OK;
}
