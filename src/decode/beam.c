/* Decoding options and hypotheses, the pieces every search shares (option checks, a normalised step, token choice,
 * hypotheses under construction), and greedy decoding and ancestral sampling of one source (decoder.h, beam.h). Beam
 * search is batch.c's: one sentence is a batch of one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"
#include "core/isa.h"
#include "ops/log_softmax_rows.h"

qkv_decode_opts qkv_decode_defaults(void) {
    return (qkv_decode_opts){.bos = 1, .eos = 2, .pad = 0, .max_len = 100, .beam = 4, .n_best = 1, .alpha = 0.6f,
                             .temperature = 1.0f, .n_samples = 16, .want_attention = false, .no_repeat_ngram = 0,
                             .repetition_penalty = 1.0f, .repeat_scope = QKV_REPEAT_GENERATED};
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

qkv_status qkv__decode_check_opts(const qkv_decoder *d, const qkv_decode_opts *o, const char *who) {
    if (!d || !d->ops || !d->ops->start || !d->ops->step || !d->ops->reorder || !d->ops->free || d->info.vocab < 1)
        return qkv_error_set(QKV_ERR_INVALID, "%s: incomplete decoder", who);
    if (!o) return qkv_error_set(QKV_ERR_INVALID, "%s: options are required", who);
    if (o->want_attention && !d->info.source_attention)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: this model has no attention over a source to return", who);
    if (o->max_len < 1) return qkv_error_set(QKV_ERR_INVALID, "%s: max_len %d must be >= 1", who, o->max_len);
    if (o->bos < 0 || o->bos >= d->info.vocab || o->eos < 0 || o->eos >= d->info.vocab || o->pad >= d->info.vocab || o->eos == o->bos)
        return qkv_error_set(QKV_ERR_INVALID, "%s: bos %d, eos %d, pad %d must be distinct ids in [0, %lld)", who,
                             o->bos, o->eos, o->pad, (long long)d->info.vocab);
    if (o->no_repeat_ngram < 0)
        return qkv_error_set(QKV_ERR_INVALID, "%s: no_repeat_ngram %d must be >= 0 (0 = off)", who, o->no_repeat_ngram);
    if (!(o->repetition_penalty > 0.0f && isfinite(o->repetition_penalty)))
        return qkv_error_set(QKV_ERR_INVALID, "%s: repetition_penalty %g must be finite and > 0 (1 = off)", who,
                             (double)o->repetition_penalty);
    if (o->repeat_scope != QKV_REPEAT_GENERATED && o->repeat_scope != QKV_REPEAT_ALL)
        return qkv_error_set(QKV_ERR_INVALID, "%s: repeat_scope %d is not generated (0) or all (1)", who,
                             (int)o->repeat_scope);
    return QKV_OK;
}

qkv_status qkv__decode_step(const qkv_decoder *d, qkv_decoder_state *st, const int32_t *tokens, float *lp, float *attn,
                            int rows) {
    qkv_status rc = d->ops->step(st, tokens, lp, attn);
    if (rc || d->info.log_probs) return rc;
    qkv__log_softmax_rows_inplace(lp, rows, d->info.vocab);
    return QKV_OK;
}

qkv_status qkv__decode_tracks_new(decode_track *t, int n, int max_len, int S, bool attn) {
    for (int i = 0; i < n; i++) {
        t[i] = (decode_track){0};
        t[i].tok = malloc(sizeof(int32_t) * (size_t)max_len);
        t[i].attn = attn ? malloc(sizeof(float) * (size_t)max_len * (size_t)S) : NULL;
        if (!t[i].tok || (attn && !t[i].attn)) return qkv_error_set(QKV_ERR_NOMEM, "decode: out of memory");
    }
    return QKV_OK;
}

void qkv__decode_tracks_free(decode_track *t, int n) {
    for (int i = 0; t && i < n; i++) {
        free(t[i].tok);
        free(t[i].attn);
    }
}

void qkv__decode_track_to_hyp(decode_track *t, int S, double score, qkv_hyp *h) {
    *h = (qkv_hyp){.tokens = t->tok, .len = t->len, .finished = t->done, .logprob = t->logprob, .score = score,
                   .attn = t->attn, .src_len = t->attn ? S : 0};
    t->tok = NULL;
    t->attn = NULL;
}

/* Row-by-row decoding where `pick` chooses each row's next token (greedy or sampling); rows_per_src rows per
 * source. */
int qkv__decode_pick_greedy(const float *lp, int64_t V, const qkv_decode_opts *o, qkv_rng *rng) {
    (void)rng;
    /* The first allowed token with the highest score. It runs over every row's whole vocabulary at every step, so
     * the maximum is found first in 16 independent lanes (a loop the compiler vectorises; NaN never wins, as in the
     * scan below), then the first allowed token holding it. Only when no allowed token holds the maximum (it is
     * BOS or padding) or nothing is above -inf does the one-compare-per-token scan decide. */
    float lane[16];
    for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
    int64_t k = 0;
    for (; k + 16 <= V; k += 16)
        for (int l = 0; l < 16; l++) lane[l] = lp[k + l] > lane[l] ? lp[k + l] : lane[l];
    for (int l = 0; k < V; k++, l++) lane[l] = lp[k] > lane[l] ? lp[k] : lane[l];
    float mx = lane[0];
    for (int l = 1; l < 16; l++) mx = lane[l] > mx ? lane[l] : mx;
    if (mx > -INFINITY)
        for (int v = 0; v < V; v++)
            if (lp[v] == mx && decode_allowed(o, v)) return v;
    int best = -1;
    float top = -INFINITY;
    for (int v = 0; v < V; v++)
        if (lp[v] > top && decode_allowed(o, v)) {
            top = lp[v];
            best = v;
        }
    for (int v = 0; best < 0 && v < V; v++) /* nothing above -inf: the first allowed one */
        if (decode_allowed(o, v)) best = v;
    return best;
}

/* The first k >= k0 with x[k] - shift == top, or V. Whole blocks of 16 first, each one vector compare and a test
 * (a block of a bound the compiler knows: with the bound min(16, V - k) it compiled to one scalar compare and
 * branch per token), then the tokens of the block that holds one. */
QKV_KERNEL_BODY int64_t first_equal_body(const float *restrict x, int64_t k0, int64_t V, float shift, float top) {
    int64_t k = k0;
    for (; k + 16 <= V; k += 16) {
        int hit = 0;
        for (int l = 0; l < 16; l++) hit |= x[k + l] - shift == top;
        if (hit) break;
    }
    for (; k < V; k++)
        if (x[k] - shift == top) return k;
    return V;
}
QKV_ISA_KERNEL(int64_t, first_equal, (const float *restrict x, int64_t k0, int64_t V, float shift, float top),
               (x, k0, V, shift, top))

int qkv__decode_pick_greedy_shifted(float *x, int64_t V, float shift, float mx, const qkv_decode_opts *o, float *lp) {
    /* x - shift only rounds, never reorders: the normalised row's maximum is mx - shift, and the tokens holding it
     * are those whose x - shift equals it. */
    float top = mx - shift;
    if (top > -INFINITY)
        for (int64_t v = first_equal(x, 0, V, shift, top); v < V; v = first_equal(x, v + 1, V, shift, top))
            if (decode_allowed(o, (int)v)) {
                *lp = top;
                return (int)v;
            }
    for (int64_t k = 0; k < V; k++) x[k] -= shift;
    int v = qkv__decode_pick_greedy(x, V, o, NULL);
    *lp = v >= 0 ? x[v] : -INFINITY;
    return v;
}

int qkv__decode_pick_sample(const float *lp, int64_t V, const qkv_decode_opts *o, qkv_rng *rng) {
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++)
        if (decode_allowed(o, v) && lp[v] / o->temperature > mx) mx = lp[v] / o->temperature;
    for (int v = 0; v < V; v++)
        if (decode_allowed(o, v)) sum += exp(lp[v] / o->temperature - mx);
    double u = qkv_rng_uniform(rng) * sum, acc = 0;
    int last = -1;
    for (int v = 0; v < V; v++) {
        if (!decode_allowed(o, v)) continue;
        last = v;
        acc += exp(lp[v] / o->temperature - mx);
        if (u < acc) return v;
    }
    return last; /* rounding at the top end */
}

static qkv_status run_rows(const qkv_decoder *d, const int32_t *src, const int32_t *lengths, int n_src, int S,
                           int rows_per_src, const qkv_decode_opts *o, decode_pick_fn pick, qkv_rng *rng, qkv_hyps *out) {
    int R = n_src * rows_per_src;
    int64_t V = d->info.vocab;
    out->n = 0;
    out->h = NULL;
    decode_track *tr = calloc((size_t)R, sizeof *tr);
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)R);
    float *lp = malloc(sizeof(float) * (size_t)R * (size_t)V);
    float *attn = o->want_attention ? malloc(sizeof(float) * (size_t)R * (size_t)S) : NULL;
    /* Repetition rules: a row's history is its track (after its prompt, when the scope counts a prompt). */
    bool constrained = decode_constrained(o), prompt = o->repeat_scope == QKV_REPEAT_ALL && qkv__decode_prompted(d);
    uint8_t *seen = constrained ? calloc((size_t)V, 1) : NULL;
    qkv_decoder_state *st = NULL;
    qkv_status status = QKV_OK;
    if (!tr || !tokens || !lp || (o->want_attention && !attn) || (constrained && !seen)) {
        status = qkv_error_set(QKV_ERR_NOMEM, "decode: out of memory");
        goto done;
    }
    if ((status = qkv__decode_tracks_new(tr, R, o->max_len, S, o->want_attention))) goto done;
    if (!(st = d->ops->start(d->model, src, lengths, n_src, S, rows_per_src, o->max_len))) {
        status = qkv_last_status();
        goto done;
    }
    for (int r = 0; r < R; r++) tokens[r] = o->bos;
    for (int t = 0, alive = R; t < o->max_len && alive > 0; t++) {
        if ((status = qkv__decode_step(d, st, tokens, lp, attn, R))) goto done;
        for (int r = 0; r < R; r++) {
            if (tr[r].done) continue;
            if (constrained) {
                int i = r / rows_per_src;
                decode_history h = {.pre = prompt ? src + (int64_t)i * S : NULL,
                                    .n_pre = prompt ? (lengths ? lengths[i] : S) : 0,
                                    .gen = tr[r].tok,
                                    .n_gen = tr[r].len};
                qkv__decode_constrain(o, &h, lp + (int64_t)r * V, V, seen);
            }
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
    for (int r = 0; r < R; r++) qkv__decode_track_to_hyp(&tr[r], S, tr[r].logprob, &out->h[r]);
done:
    if (st) d->ops->free(st);
    qkv__decode_tracks_free(tr, R);
    free(tr);
    free(tokens);
    free(lp);
    free(attn);
    free(seen);
    if (status) qkv_hyps_free(out);
    return status;
}

qkv_status qkv_decode_greedy(const qkv_decoder *d, const int32_t *src, const int32_t *lengths, int n_src,
                             int src_len, const qkv_decode_opts *opts, qkv_hyps *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "decode greedy: out is required");
    out->n = 0;
    out->h = NULL;
    qkv_status st = qkv__decode_check_opts(d, opts, "decode greedy");
    if (st) return st;
    return run_rows(d, src, lengths, n_src, src_len, 1, opts, qkv__decode_pick_greedy, NULL, out);
}

qkv_status qkv_decode_sample(const qkv_decoder *d, const int32_t *src, int src_len, int n,
                             const qkv_decode_opts *opts, qkv_rng *rng, qkv_hyps *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "decode sample: out is required");
    out->n = 0;
    out->h = NULL;
    qkv_status st = qkv__decode_check_opts(d, opts, "decode sample");
    if (st) return st;
    if (!rng || n < 1) return qkv_error_set(QKV_ERR_INVALID, "decode sample: need a generator and n >= 1 (got %d)", n);
    if (!(opts->temperature > 0.0f) || !isfinite(opts->temperature))
        return qkv_error_set(QKV_ERR_INVALID, "decode sample: temperature %g must be > 0", (double)opts->temperature);
    return run_rows(d, src, NULL, 1, src_len, n, opts, qkv__decode_pick_sample, rng, out);
}
