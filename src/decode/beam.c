/* Greedy decoding, ancestral sampling and beam search over a model's incremental decoder (decoder.h, beam.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/beam.h"

qkv_decode_opts qkv_decode_defaults(void) {
    return (qkv_decode_opts){.bos = 1, .eos = 2, .pad = 0, .max_len = 100, .beam = 4, .n_best = 1, .alpha = 0.6f,
                             .temperature = 1.0f, .n_samples = 16, .want_attention = false};
}

double qkv_length_penalty(int len, float alpha) { return alpha == 0.0f ? 1.0 : pow((5.0 + len) / 6.0, alpha); }

void qkv_hyps_free(qkv_hyps *hs) {
    if (!hs) return;
    for (int i = 0; i < hs->n; i++) {
        free(hs->h[i].tokens);
        free(hs->h[i].attn);
    }
    free(hs->h);
    hs->h = NULL;
    hs->n = 0;
}

static qkv_status check_opts(const qkv_decoder *d, const qkv_decode_opts *o, const char *who) {
    if (!d || !d->ops || !d->ops->start || !d->ops->step || !d->ops->reorder || !d->ops->free || d->info.vocab < 1)
        return qkv_error_set(QKV_ERR_INVALID, "%s: incomplete decoder", who);
    if (!o) return qkv_error_set(QKV_ERR_INVALID, "%s: options are required", who);
    if (o->want_attention && !d->info.source_attention)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: this model has no attention over a source to return", who);
    if (o->max_len < 1) return qkv_error_set(QKV_ERR_INVALID, "%s: max_len %d must be >= 1", who, o->max_len);
    if (o->bos < 0 || o->bos >= d->info.vocab || o->eos < 0 || o->eos >= d->info.vocab || o->pad >= d->info.vocab || o->eos == o->bos)
        return qkv_error_set(QKV_ERR_INVALID, "%s: bos %d, eos %d, pad %d must be distinct ids in [0, %lld)", who,
                             o->bos, o->eos, o->pad, (long long)d->info.vocab);
    return QKV_OK;
}

/* One decoder step whose scores are log-probabilities: a decoder that returns raw logits is normalised here. */
static qkv_status step(const qkv_decoder *d, qkv_decoder_state *st, const int32_t *tokens, float *lp, float *attn,
                       int rows) {
    qkv_status rc = d->ops->step(st, tokens, lp, attn);
    if (rc || d->info.log_probs) return rc;
    int64_t V = d->info.vocab;
    for (int r = 0; r < rows; r++) {
        float *x = lp + (int64_t)r * V, mx = -INFINITY;
        for (int64_t v = 0; v < V; v++)
            if (x[v] > mx) mx = x[v];
        double sum = 0;
        for (int64_t v = 0; v < V; v++) sum += exp((double)x[v] - mx);
        float lse = mx + (float)log(sum);
        for (int64_t v = 0; v < V; v++) x[v] -= lse;
    }
    return QKV_OK;
}

/* Whether token v may be generated. */
static inline bool allowed(const qkv_decode_opts *o, int v) { return v != o->bos && v != o->pad; }

/* A hypothesis being built: tokens and attention rows for up to max_len steps. */
typedef struct {
    int32_t *tok;
    float *attn;
    int len;
    double logprob;
    bool done;
} track;

static qkv_status tracks_new(track *t, int n, int max_len, int S, bool attn) {
    for (int i = 0; i < n; i++) {
        t[i] = (track){0};
        t[i].tok = malloc(sizeof(int32_t) * (size_t)max_len);
        t[i].attn = attn ? malloc(sizeof(float) * (size_t)max_len * (size_t)S) : NULL;
        if (!t[i].tok || (attn && !t[i].attn)) return qkv_error_set(QKV_ERR_NOMEM, "decode: out of memory");
    }
    return QKV_OK;
}

static void tracks_free(track *t, int n) {
    for (int i = 0; t && i < n; i++) {
        free(t[i].tok);
        free(t[i].attn);
    }
}

/* Moves a track into a result hypothesis (the track's buffers change owner). */
static void track_to_hyp(track *t, int S, double score, qkv_hyp *h) {
    *h = (qkv_hyp){.tokens = t->tok, .len = t->len, .finished = t->done, .logprob = t->logprob, .score = score,
                   .attn = t->attn, .src_len = t->attn ? S : 0};
    t->tok = NULL;
    t->attn = NULL;
}

/* Row-by-row decoding where `pick` chooses each row's next token (greedy or sampling); rows_per_src rows per
 * source. */
typedef int (*pick_fn)(const float *lp, int64_t V, const qkv_decode_opts *o, qkv_rng *rng);

static int pick_greedy(const float *lp, int64_t V, const qkv_decode_opts *o, qkv_rng *rng) {
    (void)rng;
    int best = -1;
    for (int v = 0; v < V; v++)
        if (allowed(o, v) && (best < 0 || lp[v] > lp[best])) best = v;
    return best;
}

static int pick_sample(const float *lp, int64_t V, const qkv_decode_opts *o, qkv_rng *rng) {
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++)
        if (allowed(o, v) && lp[v] / o->temperature > mx) mx = lp[v] / o->temperature;
    for (int v = 0; v < V; v++)
        if (allowed(o, v)) sum += exp(lp[v] / o->temperature - mx);
    double u = qkv_rng_uniform(rng) * sum, acc = 0;
    int last = -1;
    for (int v = 0; v < V; v++) {
        if (!allowed(o, v)) continue;
        last = v;
        acc += exp(lp[v] / o->temperature - mx);
        if (u < acc) return v;
    }
    return last; /* rounding at the top end */
}

static qkv_status run_rows(const qkv_decoder *d, const int32_t *src, const int32_t *lengths, int n_src, int S,
                           int rows_per_src, const qkv_decode_opts *o, pick_fn pick, qkv_rng *rng, qkv_hyps *out) {
    int R = n_src * rows_per_src;
    int64_t V = d->info.vocab;
    out->n = 0;
    out->h = NULL;
    track *tr = calloc((size_t)R, sizeof *tr);
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)R);
    float *lp = malloc(sizeof(float) * (size_t)R * (size_t)V);
    float *attn = o->want_attention ? malloc(sizeof(float) * (size_t)R * (size_t)S) : NULL;
    qkv_decoder_state *st = NULL;
    qkv_status status = QKV_OK;
    if (!tr || !tokens || !lp || (o->want_attention && !attn)) {
        status = qkv_error_set(QKV_ERR_NOMEM, "decode: out of memory");
        goto done;
    }
    if ((status = tracks_new(tr, R, o->max_len, S, o->want_attention))) goto done;
    if (!(st = d->ops->start(d->model, src, lengths, n_src, S, rows_per_src, o->max_len))) {
        status = qkv_last_status();
        goto done;
    }
    for (int r = 0; r < R; r++) tokens[r] = o->bos;
    for (int t = 0, alive = R; t < o->max_len && alive > 0; t++) {
        if ((status = step(d, st, tokens, lp, attn, R))) goto done;
        for (int r = 0; r < R; r++) {
            if (tr[r].done) continue;
            int v = pick(lp + (int64_t)r * V, V, o, rng);
            if (v < 0) {
                status = qkv_error_set(QKV_ERR_INVALID, "decode: every token is banned");
                goto done;
            }
            tr[r].tok[tr[r].len] = v;
            if (attn) memcpy(tr[r].attn + (int64_t)tr[r].len * S, attn + (int64_t)r * S, sizeof(float) * (size_t)S);
            tr[r].len++;
            tr[r].logprob += lp[(int64_t)r * V + v];
            tokens[r] = v;
            if (v == o->eos) {
                tr[r].done = true;
                alive--;
            }
        }
    }
    if (!(out->h = calloc((size_t)R, sizeof *out->h))) {
        status = qkv_error_set(QKV_ERR_NOMEM, "decode: out of memory");
        goto done;
    }
    out->n = R;
    for (int r = 0; r < R; r++) track_to_hyp(&tr[r], S, tr[r].logprob, &out->h[r]);
done:
    if (st) d->ops->free(st);
    tracks_free(tr, R);
    free(tr);
    free(tokens);
    free(lp);
    free(attn);
    if (status) qkv_hyps_free(out);
    return status;
}

qkv_status qkv_decode_greedy(const qkv_decoder *d, const int32_t *src, const int32_t *lengths, int n_src,
                             int src_len, const qkv_decode_opts *opts, qkv_hyps *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "decode greedy: out is required");
    out->n = 0;
    out->h = NULL;
    qkv_status st = check_opts(d, opts, "decode greedy");
    if (st) return st;
    return run_rows(d, src, lengths, n_src, src_len, 1, opts, pick_greedy, NULL, out);
}

qkv_status qkv_decode_sample(const qkv_decoder *d, const int32_t *src, int src_len, int n,
                             const qkv_decode_opts *opts, qkv_rng *rng, qkv_hyps *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "decode sample: out is required");
    out->n = 0;
    out->h = NULL;
    qkv_status st = check_opts(d, opts, "decode sample");
    if (st) return st;
    if (!rng || n < 1) return qkv_error_set(QKV_ERR_INVALID, "decode sample: need a generator and n >= 1 (got %d)", n);
    if (!(opts->temperature > 0.0f) || !isfinite(opts->temperature))
        return qkv_error_set(QKV_ERR_INVALID, "decode sample: temperature %g must be > 0", (double)opts->temperature);
    return run_rows(d, src, NULL, 1, src_len, n, opts, pick_sample, rng, out);
}

/* ---- beam search ---- */

typedef struct {
    double score; /* accumulated log-probability */
    int row, tok;
} cand;

/* Keeps the best `cap` candidates in c[0..*n) sorted by score, descending (ties: earlier row, smaller token). */
static void cand_push(cand *c, int *n, int cap, cand x) {
    if (*n == cap && !(x.score > c[cap - 1].score)) return;
    int i = *n < cap ? (*n)++ : cap - 1;
    while (i > 0 && x.score > c[i - 1].score) {
        c[i] = c[i - 1];
        i--;
    }
    c[i] = x;
}

static int cmp_hyp(const void *a, const void *b) {
    const qkv_hyp *x = a, *y = b;
    return (x->score < y->score) - (x->score > y->score);
}

/* Appends a copy of track src extended by token v to the finished list. */
static qkv_status finish(qkv_hyps *fin, int *cap, const track *src, int v, const float *attn_row, int S, double lp,
                         bool done, float alpha, int max_len) {
    if (fin->n == *cap) {
        int nc = *cap ? 2 * *cap : 16;
        qkv_hyp *h = realloc(fin->h, sizeof *h * (size_t)nc);
        if (!h) return qkv_error_set(QKV_ERR_NOMEM, "decode beam: out of memory");
        fin->h = h;
        *cap = nc;
    }
    qkv_hyp *h = &fin->h[fin->n];
    int len = src->len + (v >= 0);
    *h = (qkv_hyp){.len = len, .finished = done, .logprob = lp, .score = lp / qkv_length_penalty(len, alpha)};
    h->tokens = malloc(sizeof(int32_t) * (size_t)max_len);
    if (attn_row || (src->attn && len > 0)) h->attn = malloc(sizeof(float) * (size_t)max_len * (size_t)S);
    if (!h->tokens || (src->attn && !h->attn)) {
        free(h->tokens);
        free(h->attn);
        return qkv_error_set(QKV_ERR_NOMEM, "decode beam: out of memory");
    }
    memcpy(h->tokens, src->tok, sizeof(int32_t) * (size_t)src->len);
    if (h->attn) {
        memcpy(h->attn, src->attn, sizeof(float) * (size_t)src->len * (size_t)S);
        h->src_len = S;
    }
    if (v >= 0) {
        h->tokens[src->len] = v;
        if (h->attn && attn_row) memcpy(h->attn + (int64_t)src->len * S, attn_row, sizeof(float) * (size_t)S);
    }
    fin->n++;
    return QKV_OK;
}

/* The n_best-th best finished score, or -inf when fewer are finished. */
static double nth_best(const qkv_hyps *fin, int n_best) {
    if (fin->n < n_best) return -INFINITY;
    qsort(fin->h, (size_t)fin->n, sizeof *fin->h, cmp_hyp);
    return fin->h[n_best - 1].score;
}

qkv_status qkv_decode_beam(const qkv_decoder *d, const int32_t *src, int src_len, const qkv_decode_opts *opts,
                           qkv_hyps *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "decode beam: out is required");
    out->n = 0;
    out->h = NULL;
    qkv_status status = check_opts(d, opts, "decode beam");
    if (status) return status;
    const qkv_decode_opts *o = opts;
    int K = o->beam, S = src_len;
    if (K < 1 || o->n_best < 1 || o->n_best > K)
        return qkv_error_set(QKV_ERR_INVALID, "decode beam: beam %d and n_best %d need 1 <= n_best <= beam", K,
                             o->n_best);
    if (!(o->alpha >= 0.0f) || !isfinite(o->alpha))
        return qkv_error_set(QKV_ERR_INVALID, "decode beam: alpha %g must be >= 0", (double)o->alpha);
    int64_t V = d->info.vocab;
    track *live = calloc((size_t)K, sizeof *live), *next = calloc((size_t)K, sizeof *next);
    cand *c = malloc(sizeof(cand) * (size_t)(2 * K));
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)K), *from = malloc(sizeof(int32_t) * (size_t)K);
    float *lp = malloc(sizeof(float) * (size_t)K * (size_t)V);
    float *attn = o->want_attention ? malloc(sizeof(float) * (size_t)K * (size_t)S) : NULL;
    qkv_hyps fin = {0};
    int fin_cap = 0, n_live = 1;
    qkv_decoder_state *st = NULL;
    if (!live || !next || !c || !tokens || !from || !lp || (o->want_attention && !attn)) {
        status = qkv_error_set(QKV_ERR_NOMEM, "decode beam: out of memory");
        goto done;
    }
    if ((status = tracks_new(live, K, o->max_len, S, o->want_attention)) ||
        (status = tracks_new(next, K, o->max_len, S, o->want_attention)))
        goto done;
    if (!(st = d->ops->start(d->model, src, NULL, 1, S, K, o->max_len))) {
        status = qkv_last_status();
        goto done;
    }
    for (int t = 0; t < o->max_len && n_live > 0; t++) {
        for (int r = 0; r < K; r++) tokens[r] = r < n_live && t > 0 ? live[r].tok[t - 1] : o->bos;
        if ((status = step(d, st, tokens, lp, attn, K))) goto done;
        /* Each row has one EOS, so among the best 2K candidates at least K continue: the selection is exact. */
        int nc = 0;
        for (int r = 0; r < n_live; r++)
            for (int v = 0; v < V; v++)
                if (allowed(o, v)) cand_push(c, &nc, 2 * K, (cand){live[r].logprob + lp[(int64_t)r * V + v], r, v});
        int n_next = 0;
        for (int i = 0; i < nc && n_next < K; i++) {
            const track *p = &live[c[i].row];
            const float *arow = attn ? attn + (int64_t)c[i].row * S : NULL;
            if (c[i].tok == o->eos) {
                if ((status = finish(&fin, &fin_cap, p, o->eos, arow, S, c[i].score, true, o->alpha, o->max_len)))
                    goto done;
                continue;
            }
            track *q = &next[n_next];
            memcpy(q->tok, p->tok, sizeof(int32_t) * (size_t)p->len);
            q->tok[p->len] = c[i].tok;
            if (q->attn) {
                memcpy(q->attn, p->attn, sizeof(float) * (size_t)p->len * (size_t)S);
                memcpy(q->attn + (int64_t)p->len * S, arow, sizeof(float) * (size_t)S);
            }
            q->len = p->len + 1;
            q->logprob = c[i].score;
            from[n_next++] = c[i].row;
        }
        for (int r = n_next; r < K; r++) from[r] = 0;
        track *tmp = live;
        live = next;
        next = tmp;
        n_live = n_next;
        if (n_live > 0 && t + 1 < o->max_len && (status = d->ops->reorder(st, from, K))) goto done;
        /* Stop once no live hypothesis can still enter the n-best: its normalised score can at most reach
         * logprob / lp(max_len) since log-probabilities only fall and the penalty only grows. */
        double worst = nth_best(&fin, o->n_best), bound = -INFINITY;
        for (int r = 0; r < n_live; r++) {
            double b = live[r].logprob / qkv_length_penalty(o->max_len, o->alpha);
            if (b > bound) bound = b;
        }
        if (bound <= worst) {
            n_live = 0;
            break;
        }
    }
    for (int r = 0; r < n_live; r++)
        if ((status = finish(&fin, &fin_cap, &live[r], -1, NULL, S, live[r].logprob, false, o->alpha, o->max_len)))
            goto done;
    qsort(fin.h, (size_t)fin.n, sizeof *fin.h, cmp_hyp);
    while (fin.n > o->n_best) {
        fin.n--;
        free(fin.h[fin.n].tokens);
        free(fin.h[fin.n].attn);
    }
    *out = fin;
    fin = (qkv_hyps){0};
done:
    if (st) d->ops->free(st);
    qkv_hyps_free(&fin);
    tracks_free(live, K);
    tracks_free(next, K);
    free(live);
    free(next);
    free(c);
    free(tokens);
    free(from);
    free(lp);
    free(attn);
    return status;
}
