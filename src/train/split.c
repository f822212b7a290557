/* A split: the encoded examples of one data file, their token ids in one pool, and what a task keeps beside them
 * (qa: the texts and spans that map predictions back to answers). Every task's loader grows splits through these. */
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

qkv_status qkv__split_reserve(split *s, int64_t more) {
    if (s->pool_n + more <= s->pool_cap) return QKV_OK;
    int64_t cap = s->pool_cap ? s->pool_cap : 4096;
    while (cap < s->pool_n + more) cap *= 2;
    int32_t *p = realloc(s->pool, sizeof *p * (size_t)cap);
    if (!p) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    s->pool = p;
    s->pool_cap = cap;
    return QKV_OK;
}

qkv_status qkv__split_append(split *s, const int32_t *ids, int64_t n) {
    qkv_status st = qkv__split_reserve(s, n);
    if (st == QKV_OK && n) memcpy(s->pool + s->pool_n, ids, sizeof *ids * (size_t)n);
    if (st == QKV_OK) s->pool_n += n;
    return st;
}

example *qkv__split_example(split *s) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 1024;
        example *e = realloc(s->ex, sizeof *e * (size_t)cap);
        if (!e) {
            qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            return NULL;
        }
        s->ex = e;
        s->cap = cap;
    }
    example *e = &s->ex[s->n++];
    memset(e, 0, sizeof *e);
    return e;
}

static void qa_split_free(struct qa_split *q) {
    if (!q) return;
    for (int64_t i = 0; i < q->n; i++) {
        free(q->context[i]);
        for (int k = 0; k < q->n_answers[i]; k++) free(q->answers[i][k]);
        free(q->answers[i]);
        free(q->tok_span[i]);
    }
    free(q->context);
    free(q->answers);
    free(q->n_answers);
    free(q->tok_span);
    free(q->gold);
    free(q);
}

void qkv__split_free(split *s) {
    qa_split_free(s->qa);
    qkv__span_text_free(s->span);
    free(s->pool);
    free(s->ex);
    memset(s, 0, sizeof *s);
}
