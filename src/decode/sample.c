/* Choosing the next token from logits: repetition penalty and no-repeat n-grams (repeat.c), greedy, temperature,
 * top-k, top-p, then a draw from a seeded Philox generator. The order and tie rules are in include/qkv/decode.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"
#include "qkv/decode.h"

struct qkv_sampler {
    qkv_sample_opts o;
    int64_t vocab;
    qkv_rng rng;
    uint8_t *seen;            /* [vocab] tokens of the history, for the penalty */
    struct cand { float v; int32_t id; } *cand; /* [vocab] candidates sorted for top-k / top-p */
};

qkv_sample_opts qkv_sample_defaults(void) {
    return (qkv_sample_opts){.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .repetition_penalty = 1.0f,
                             .no_repeat_ngram = 0, .repeat_scope = QKV_REPEAT_GENERATED};
}

qkv_status qkv_sample_check(const qkv_sample_opts *o) {
    if (!(o->temperature >= 0.0f && isfinite(o->temperature)))
        return qkv_error_set(QKV_ERR_INVALID, "sampling: temperature %g must be finite and >= 0 (0 = greedy)",
                             (double)o->temperature);
    if (o->top_k < 0) return qkv_error_set(QKV_ERR_INVALID, "sampling: top_k %lld must be >= 0 (0 = off)",
                                           (long long)o->top_k);
    if (!(o->top_p > 0.0f && o->top_p <= 1.0f))
        return qkv_error_set(QKV_ERR_INVALID, "sampling: top_p %g must be in (0, 1] (1 = off)", (double)o->top_p);
    if (!(o->repetition_penalty > 0.0f && isfinite(o->repetition_penalty)))
        return qkv_error_set(QKV_ERR_INVALID, "sampling: repetition_penalty %g must be finite and > 0 (1 = off)",
                             (double)o->repetition_penalty);
    if (o->no_repeat_ngram < 0)
        return qkv_error_set(QKV_ERR_INVALID, "sampling: no_repeat_ngram %d must be >= 0 (0 = off)",
                             o->no_repeat_ngram);
    if (o->repeat_scope != QKV_REPEAT_GENERATED && o->repeat_scope != QKV_REPEAT_ALL)
        return qkv_error_set(QKV_ERR_INVALID, "sampling: repeat_scope %d is not generated (0) or all (1)",
                             (int)o->repeat_scope);
    return QKV_OK;
}

qkv_sampler *qkv_sampler_new(int64_t vocab, const qkv_sample_opts *o, uint64_t seed) {
    qkv_sample_opts def = qkv_sample_defaults();
    if (!o) o = &def;
    if (qkv_sample_check(o) != QKV_OK) return NULL;
    if (vocab < 1 || vocab > INT32_MAX) {
        qkv_error_set(QKV_ERR_INVALID, "sampling: vocabulary size %lld outside 1..2^31-1", (long long)vocab);
        return NULL;
    }
    qkv_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->seen = calloc((size_t)vocab, 1);
        s->cand = malloc(sizeof *s->cand * (size_t)vocab);
    }
    if (!s || !s->seen || !s->cand) {
        qkv_sampler_free(s);
        qkv_error_set(QKV_ERR_NOMEM, "sampling: out of memory");
        return NULL;
    }
    s->o = *o;
    s->vocab = vocab;
    qkv_rng_init(&s->rng, seed);
    return s;
}

void qkv_sampler_free(qkv_sampler *s) {
    if (!s) return;
    free(s->seen);
    free(s->cand);
    free(s);
}

int64_t qkv_argmax(const float *x, int64_t n) {
    if (n < 1) return -1;
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best] || (isnan(x[best]) && !isnan(x[i]))) best = i;
    return best;
}

/* Descending by value, then ascending by id: a total order, so the kept sets never depend on qsort's whims. */
static int cand_cmp(const void *a, const void *b) {
    const struct cand *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int64_t qkv_sampler_filter(qkv_sampler *s, float *logits, const int32_t *history, int64_t n_history) {
    int64_t V = s->vocab;
    decode_history h = {.gen = history, .n_gen = history ? n_history : 0};
    qkv__repeat_penalise(s->o.repetition_penalty, &h, logits, V, s->seen);
    if (s->o.no_repeat_ngram > 0) qkv__repeat_ban_ngrams(s->o.no_repeat_ngram, &h, logits, V);
    for (int64_t i = 0; i < V; i++)
        if (isnan(logits[i])) logits[i] = -INFINITY;
    if (s->o.temperature == 0.0f) {
        int64_t best = qkv_argmax(logits, V);
        if (s->o.no_repeat_ngram > 0 && logits[best] == -INFINITY) return 0; /* all banned */
        for (int64_t i = 0; i < V; i++)
            if (i != best) logits[i] = -INFINITY;
        return 1;
    }
    float inv_t = 1.0f / s->o.temperature;
    int64_t n = 0;
    for (int64_t i = 0; i < V; i++) {
        if (logits[i] == -INFINITY) continue;
        logits[i] *= inv_t;
        s->cand[n++] = (struct cand){logits[i], (int32_t)i};
    }
    bool topk = s->o.top_k > 0 && s->o.top_k < n, topp = s->o.top_p < 1.0f;
    if (!topk && !topp) return n;
    qsort(s->cand, (size_t)n, sizeof *s->cand, cand_cmp);
    int64_t keep = topk ? s->o.top_k : n;
    if (topp && keep > 0) {
        double mx = s->cand[0].v, total = 0.0, cum = 0.0;
        for (int64_t i = 0; i < keep; i++) total += exp((double)s->cand[i].v - mx);
        double target = (double)s->o.top_p * total;
        int64_t m = 0;
        while (m < keep) {
            cum += exp((double)s->cand[m].v - mx);
            m++;
            if (cum >= target) break;
        }
        keep = m;
    }
    for (int64_t i = keep; i < n; i++) logits[s->cand[i].id] = -INFINITY;
    return keep;
}

int32_t qkv_sampler_next(qkv_sampler *s, float *logits, const int32_t *history, int64_t n_history) {
    int64_t V = s->vocab;
    int64_t kept = qkv_sampler_filter(s, logits, history, n_history);
    if (kept == 0 && s->o.no_repeat_ngram > 0) return -1;
    int64_t best = qkv_argmax(logits, V);
    if (s->o.temperature == 0.0f || kept <= 1) return (int32_t)best;
    double mx = logits[best], total = 0.0;
    for (int64_t i = 0; i < V; i++)
        if (logits[i] != -INFINITY) total += exp((double)logits[i] - mx);
    double target = (double)qkv_rng_uniform(&s->rng) * total, cum = 0.0;
    int64_t last = best;
    for (int64_t i = 0; i < V; i++) {
        if (logits[i] == -INFINITY) continue;
        cum += exp((double)logits[i] - mx);
        last = i;
        if (cum > target) return (int32_t)i;
    }
    return (int32_t)last; /* rounding left target just above the total */
}
