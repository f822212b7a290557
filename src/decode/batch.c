/* Batched decoding (decode_batch.h): the row search (greedy, sampling) and beam search over many inputs at once,
 * with finished rows compacted out of the decoder state, and the driver that sorts inputs into batches and hands
 * results back in input order; qkv_decode_beam (beam.h), one sentence as a batch of one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"
#include "core/arena.h"
#include "ops/gemm_packed.h"
#include "ops/log_softmax_rows.h"
#include "qkv/decode_batch.h"

qkv_batch_opts qkv_batch_defaults(void) {
    return (qkv_batch_opts){.search = QKV_SEARCH_GREEDY, .batch_size = 32, .batch_tokens = 0, .window = 0, .seed = 0};
}

qkv_status qkv__decode_check_beam(const qkv_decode_opts *o, const char *who) {
    if (o->beam < 1 || o->n_best < 1 || o->n_best > o->beam)
        return qkv_error_set(QKV_ERR_INVALID, "%s: beam %d and n_best %d need 1 <= n_best <= beam", who, o->beam,
                             o->n_best);
    if (!(o->alpha >= 0.0f) || !isfinite(o->alpha))
        return qkv_error_set(QKV_ERR_INVALID, "%s: alpha %g must be >= 0", who, (double)o->alpha);
    return QKV_OK;
}

/* done() of a one-sentence search: its hypotheses moved into user, a qkv_hyps. */
static qkv_status keep_one(void *user, int index, qkv_hyps *hs) {
    (void)index;
    *(qkv_hyps *)user = *hs;
    *hs = (qkv_hyps){0};
    return QKV_OK;
}

/* The items' sources as one padded matrix [n, S] with their lengths (seq2seq), and the longest max_len. */
typedef struct {
    int32_t *src, *len;
    int S, max_steps;
} padded;

static qkv_status pad_items(const qkv_decoder *d, const decode_item *it, int n, padded *p) {
    *p = (padded){.S = 0, .max_steps = 1};
    for (int i = 0; i < n; i++) {
        if (it[i].max_len > p->max_steps) p->max_steps = it[i].max_len;
        if (it[i].len > p->S) p->S = it[i].len;
    }
    if (!d->info.needs_source) {
        p->S = 0;
        return QKV_OK;
    }
    p->src = malloc(sizeof(int32_t) * (size_t)n * (size_t)p->S);
    p->len = malloc(sizeof(int32_t) * (size_t)n);
    if (!p->src || !p->len) return qkv_error_set(QKV_ERR_NOMEM, "decode: out of memory");
    const int32_t fill = 0; /* under the lengths' mask: any id in range will do */
    for (int i = 0; i < n; i++) {
        memcpy(p->src + (int64_t)i * p->S, it[i].src, sizeof(int32_t) * (size_t)it[i].len);
        for (int j = it[i].len; j < p->S; j++) p->src[(int64_t)i * p->S + j] = fill;
        p->len[i] = it[i].len;
    }
    return QKV_OK;
}

static void padded_free(padded *p) {
    free(p->src);
    free(p->len);
}

static qkv_decoder_state *start(const qkv_decoder *d, const padded *p, int n, int rows_per_item) {
    return d->ops->start(d->model, p->src, p->len, n, p->S, rows_per_item, p->max_steps);
}

/* ---- greedy and sampling: independent rows ---- */

/* Greedy's pick from raw logits, each row as soon as its shift is known (qkv__log_softmax_rows_shift_each): the
 * row is read again while in L1, not after the whole step's logits (2 MB at 64 x 8,000) went past. */
typedef struct {
    int64_t V;
    const qkv_decode_opts *o;
    int32_t *tok;
    float *lp;
} shifted_pick;

/* The step that leaves raw logits in its output: the model's step, or its step_logits when its step normalises; NULL
 * when it has none (the callers then take qkv__decode_step's normalised rows). */
typedef qkv_status (*raw_step_fn)(qkv_decoder_state *, const int32_t *, float *, float *);
static raw_step_fn raw_step_of(const qkv_decoder *d) { return d->info.log_probs ? d->ops->step_logits : d->ops->step; }

static void pick_shifted_row(void *user, int64_t r, float *row, float shift, float mx) {
    const shifted_pick *sp = user;
    sp->tok[r] = qkv__decode_pick_greedy_shifted(row, sp->V, shift, mx, sp->o, &sp->lp[r]);
}

qkv_status qkv__decode_rows_batch(const qkv_decoder *d, const decode_item *items, int n, int rows_per_item,
                                  const qkv_decode_opts *o, decode_pick_fn pick, qkv_rng *rngs, decode_done_fn done,
                             void *user) {
    int R = n * rows_per_item;
    int64_t V = d->info.vocab;
    padded p;
    qkv_status status = pad_items(d, items, n, &p);
    decode_track *tr = calloc((size_t)R, sizeof *tr);
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)R), *row = malloc(sizeof(int32_t) * (size_t)R),
            *from = malloc(sizeof(int32_t) * (size_t)R), *left = malloc(sizeof(int32_t) * (size_t)n);
    float *lp = malloc(sizeof(float) * (size_t)R * (size_t)V);
    float *attn = o->want_attention ? malloc(sizeof(float) * (size_t)R * (size_t)(p.S ? p.S : 1)) : NULL;
    /* Repetition rules: a row's history is its track (after its prompt, when the scope counts a prompt). */
    bool constrained = decode_constrained(o), prompt = o->repeat_scope == QKV_REPEAT_ALL && qkv__decode_prompted(d);
    uint8_t *seen = constrained ? calloc((size_t)V, 1) : NULL;
    /* Greedy with no rule to apply needs of each row only its best token and that token's log-probability: from raw
     * logits (the model's step, or its step_logits when its step normalises), the rows' log_softmax shifts and no
     * normalised rows (decode_internal.h). */
    raw_step_fn raw_step = raw_step_of(d);
    bool fused = pick == qkv__decode_pick_greedy && !constrained && raw_step;
    float *pick_lp = fused ? malloc(sizeof(float) * (size_t)R) : NULL;
    int32_t *picked = fused ? malloc(sizeof(int32_t) * (size_t)R) : NULL;
    shifted_pick sp = {.V = V, .o = o, .tok = picked, .lp = pick_lp};
    qkv_hyps hs = {0};
    qkv_decoder_state *st = NULL;
    if (status) goto done;
    if (!tr || !tokens || !row || !from || !left || !lp || (o->want_attention && !attn) || (constrained && !seen) ||
        (fused && (!pick_lp || !picked))) {
        status = qkv_error_set(QKV_ERR_NOMEM, "decode: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if ((status = qkv__decode_tracks_new(tr + (int64_t)i * rows_per_item, rows_per_item, items[i].max_len,
                                             items[i].len, o->want_attention)))
            goto done;
        left[i] = rows_per_item;
    }
    if (!(st = start(d, &p, n, rows_per_item))) {
        status = qkv_last_status();
        goto done;
    }
    /* row[r]: which of the R tracks the decoder's row r extends (rows leave as they finish). */
    int alive = R;
    for (int r = 0; r < R; r++) {
        tokens[r] = o->bos;
        row[r] = r;
    }
    while (alive > 0) {
        if (fused) {
            if ((status = raw_step(st, tokens, lp, attn))) goto done;
            qkv__log_softmax_rows_shift_each(lp, alive, V, pick_shifted_row, &sp);
        } else if ((status = qkv__decode_step(d, st, tokens, lp, attn, alive)))
            goto done;
        int kept = 0;
        for (int r = 0; r < alive; r++) {
            int k = row[r], i = k / rows_per_item;
            decode_track *t = &tr[k];
            if (constrained) {
                decode_history h = {.pre = prompt ? items[i].src : NULL, .n_pre = prompt ? items[i].len : 0,
                                    .gen = t->tok, .n_gen = t->len};
                qkv__decode_constrain(o, &h, lp + (int64_t)r * V, V, seen);
            }
            float lpv = 0;
            if (fused) lpv = pick_lp[r];
            int v = fused ? picked[r] : pick(lp + (int64_t)r * V, V, o, rngs ? &rngs[k] : NULL);
            if (v < 0) {
                status = qkv_error_set(QKV_ERR_INVALID, "decode: every token is banned");
                goto done;
            }
            t->tok[t->len] = v;
            if (attn)
                memcpy(t->attn + (int64_t)t->len * items[i].len, attn + (int64_t)r * p.S,
                       sizeof(float) * (size_t)items[i].len);
            t->len++;
            t->logprob += fused ? lpv : lp[(int64_t)r * V + v];
            t->done = v == o->eos;
            if (!t->done && t->len < items[i].max_len) {
                tokens[kept] = v;
                from[kept] = r;
                row[kept++] = k;
                continue;
            }
            if (--left[i] > 0) continue;
            /* The item's last row ended: hand its hypotheses over. */
            if (!(hs.h = calloc((size_t)rows_per_item, sizeof *hs.h))) {
                status = qkv_error_set(QKV_ERR_NOMEM, "decode: out of memory");
                goto done;
            }
            hs.n = rows_per_item;
            for (int j = 0; j < rows_per_item; j++) {
                decode_track *u = &tr[(int64_t)i * rows_per_item + j];
                qkv__decode_track_to_hyp(u, items[i].len, u->logprob, &hs.h[j]);
            }
            if ((status = done(user, items[i].index, &hs))) goto done;
            qkv_hyps_free(&hs);
        }
        if (kept < alive && kept > 0 && (status = d->ops->reorder(st, from, kept))) goto done;
        alive = kept;
    }
done:
    if (st) d->ops->free(st);
    qkv_hyps_free(&hs);
    qkv__decode_tracks_free(tr, R);
    free(tr);
    free(tokens);
    free(row);
    free(from);
    free(left);
    free(lp);
    free(attn);
    free(seen);
    free(pick_lp);
    free(picked);
    padded_free(&p);
    return status;
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

/* Tokens per block of the beam's candidate scan. */
#define CAND_BLOCK 64

/* The largest of x[0..n) (n <= CAND_BLOCK), in 16 lanes the compiler vectorises; NaN never wins (cand_push never
 * keeps a NaN score in a full list either), -inf when nothing else is there. */
static float block_max(const float *x, int64_t n) {
    float lane[16];
    for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
    int64_t k = 0;
    for (; k + 16 <= n; k += 16)
        for (int l = 0; l < 16; l++) lane[l] = x[k + l] > lane[l] ? x[k + l] : lane[l];
    for (int l = 0; k < n; k++, l++) lane[l] = x[k] > lane[l] ? x[k] : lane[l];
    float m = lane[0];
    for (int l = 1; l < 16; l++) m = lane[l] > m ? lane[l] : m;
    return m;
}

static int cmp_hyp(const void *a, const void *b) {
    const qkv_hyp *x = a, *y = b;
    return (x->score < y->score) - (x->score > y->score);
}

/* Appends a copy of track src extended by token v (none if v < 0) to the finished list; attn_row is v's attention
 * over the S source positions. */
static qkv_status finish(qkv_hyps *fin, int *cap, const decode_track *src, int v, const float *attn_row, int S,
                         double lp, bool done, float alpha, int max_len) {
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

/* One item's search: its live hypotheses (rows of the decoder state, in order) and the finished ones. */
typedef struct {
    decode_track *live, *next;
    qkv_hyps fin;
    int fin_cap, n_live;
    bool active;
} beam_item;

qkv_status qkv__decode_beam_batch(const qkv_decoder *d, const decode_item *items, int n, const qkv_decode_opts *o,
                                  decode_done_fn done, void *user) {
    qkv_status status = qkv__decode_check_beam(o, "decode beam");
    if (status) return status;
    int K = o->beam, R = n * K;
    int64_t V = d->info.vocab;
    padded p;
    status = pad_items(d, items, n, &p);
    int S = p.S;
    beam_item *b = calloc((size_t)n, sizeof *b);
    cand *c = malloc(sizeof(cand) * (size_t)(2 * K));
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)R), *from = malloc(sizeof(int32_t) * (size_t)R);
    float *lp = malloc(sizeof(float) * (size_t)R * (size_t)V);
    float *attn = o->want_attention ? malloc(sizeof(float) * (size_t)R * (size_t)(S ? S : 1)) : NULL;
    /* Repetition rules: a hypothesis's history is its track (after its prompt, when the scope counts a prompt); a
     * banned token (-inf) never becomes a candidate. */
    bool constrained = decode_constrained(o), prompt = o->repeat_scope == QKV_REPEAT_ALL && qkv__decode_prompted(d);
    bool skip_banned = o->no_repeat_ngram > 0;
    uint8_t *seen = constrained ? calloc((size_t)V, 1) : NULL;
    /* With no rule to apply, the scan reads the raw logits (the model's step, or its step_logits when its step
     * normalises) and subtracts each row's log_softmax shift as it goes: x - shift is bit for bit the normalised
     * entry (ops/log_softmax_rows.h), and the pass that would write all R x V of them is skipped. */
    raw_step_fn raw_step = raw_step_of(d);
    bool raw = !constrained && raw_step;
    /* Without the raw scan every shift stays 0: x - 0 is x, bit for bit (-0 and NaN too). */
    float *shift = calloc((size_t)R, sizeof(float)), *row_max = raw ? malloc(sizeof(float) * (size_t)R) : NULL;
    qkv_decoder_state *st = NULL;
    if (status) goto done;
    if (!b || !c || !tokens || !from || !lp || (o->want_attention && !attn) || (constrained && !seen) || !shift ||
        (raw && !row_max)) {
        status = qkv_error_set(QKV_ERR_NOMEM, "decode beam: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        b[i].live = calloc((size_t)K, sizeof *b[i].live);
        b[i].next = calloc((size_t)K, sizeof *b[i].next);
        if (!b[i].live || !b[i].next) {
            status = qkv_error_set(QKV_ERR_NOMEM, "decode beam: out of memory");
            goto done;
        }
        if ((status = qkv__decode_tracks_new(b[i].live, K, items[i].max_len, items[i].len, o->want_attention)) ||
            (status = qkv__decode_tracks_new(b[i].next, K, items[i].max_len, items[i].len, o->want_attention)))
            goto done;
        b[i].n_live = 1;
        b[i].active = true;
    }
    /* K rows per item are prepared (the most a beam holds); the search starts from one of them. */
    if (!(st = start(d, &p, n, K))) {
        status = qkv_last_status();
        goto done;
    }
    for (int i = 0; i < n; i++) from[i] = i * K;
    if (K > 1 && (status = d->ops->reorder(st, from, n))) goto done;
    int rows = n;
    for (int t = 0; rows > 0; t++) {
        for (int i = 0, r = 0; i < n; i++)
            for (int k = 0; b[i].active && k < b[i].n_live; k++) tokens[r++] = t > 0 ? b[i].live[k].tok[t - 1] : o->bos;
        if (raw) {
            if ((status = raw_step(st, tokens, lp, attn))) goto done;
            qkv__log_softmax_rows_shift(lp, rows, V, shift, row_max);
        } else if ((status = qkv__decode_step(d, st, tokens, lp, attn, rows))) {
            goto done;
        }
        int base = 0, n_from = 0;
        for (int i = 0; i < n; i++) {
            beam_item *it = &b[i];
            if (!it->active) continue;
            int Si = items[i].len, ml = items[i].max_len;
            /* Each row has one EOS, so among the best 2K candidates at least K continue: the selection is exact. */
            int nc = 0;
            for (int r = 0; r < it->n_live; r++) {
                float *x = lp + (int64_t)(base + r) * V, sh = shift[base + r];
                double lpr = it->live[r].logprob;
                if (constrained) {
                    decode_history h = {.pre = prompt ? items[i].src : NULL, .n_pre = prompt ? items[i].len : 0,
                                        .gen = it->live[r].tok, .n_gen = it->live[r].len};
                    qkv__decode_constrain(o, &h, x, V, seen);
                }
                for (int64_t v0 = 0; v0 < V; v0 += CAND_BLOCK) {
                    int64_t v1 = v0 + CAND_BLOCK < V ? v0 + CAND_BLOCK : V;
                    /* Once the list is full, a block whose best score cannot beat its last entry is skipped: the
                     * sum (and x - shift) is monotonic in x, so no entry of the block would have been kept (exact). */
                    if (nc == 2 * K && !(lpr + (block_max(x + v0, v1 - v0) - sh) > c[2 * K - 1].score)) continue;
                    for (int64_t v = v0; v < v1; v++)
                        if (decode_allowed(o, (int)v) && !(skip_banned && x[v] == -INFINITY))
                            cand_push(c, &nc, 2 * K, (cand){lpr + (x[v] - sh), r, (int)v});
                }
            }
            int n_next = 0, first = n_from;
            for (int j = 0; j < nc && n_next < K; j++) {
                const decode_track *q0 = &it->live[c[j].row];
                const float *arow = attn ? attn + (int64_t)(base + c[j].row) * S : NULL;
                if (c[j].tok == o->eos) {
                    if ((status = finish(&it->fin, &it->fin_cap, q0, o->eos, arow, Si, c[j].score, true, o->alpha,
                                         ml)))
                        goto done;
                    continue;
                }
                decode_track *q = &it->next[n_next++];
                memcpy(q->tok, q0->tok, sizeof(int32_t) * (size_t)q0->len);
                q->tok[q0->len] = c[j].tok;
                if (q->attn) {
                    memcpy(q->attn, q0->attn, sizeof(float) * (size_t)q0->len * (size_t)Si);
                    memcpy(q->attn + (int64_t)q0->len * Si, arow, sizeof(float) * (size_t)Si);
                }
                q->len = q0->len + 1;
                q->logprob = c[j].score;
                from[n_from++] = base + c[j].row;
            }
            base += it->n_live;
            decode_track *tmp = it->live;
            it->live = it->next;
            it->next = tmp;
            it->n_live = n_next;
            /* Stop once no live hypothesis can still enter the n-best: its normalised score can at most reach
             * logprob / lp(max_len) since log-probabilities only fall and the penalty only grows. */
            double worst = nth_best(&it->fin, o->n_best), bound = -INFINITY;
            for (int r = 0; r < it->n_live; r++) {
                double bd = it->live[r].logprob / qkv_length_penalty(ml, o->alpha);
                if (bd > bound) bound = bd;
            }
            if (bound <= worst) it->n_live = 0;
            if (it->n_live > 0 && t + 1 < ml) continue;
            /* The search of item i ends: live hypotheses enter the n-best unfinished; its rows leave the batch. */
            for (int r = 0; r < it->n_live; r++)
                if ((status = finish(&it->fin, &it->fin_cap, &it->live[r], -1, NULL, Si, it->live[r].logprob, false,
                                     o->alpha, ml)))
                    goto done;
            n_from = first;
            it->n_live = 0;
            it->active = false;
            qsort(it->fin.h, (size_t)it->fin.n, sizeof *it->fin.h, cmp_hyp);
            while (it->fin.n > o->n_best) {
                it->fin.n--;
                free(it->fin.h[it->fin.n].tokens);
                free(it->fin.h[it->fin.n].attn);
            }
            if ((status = done(user, items[i].index, &it->fin))) goto done;
            qkv_hyps_free(&it->fin);
            it->fin_cap = 0;
        }
        rows = n_from;
        if (rows > 0 && (status = d->ops->reorder(st, from, rows))) goto done;
    }
done:
    if (st) d->ops->free(st);
    for (int i = 0; b && i < n; i++) {
        qkv_hyps_free(&b[i].fin);
        qkv__decode_tracks_free(b[i].live, K);
        qkv__decode_tracks_free(b[i].next, K);
        free(b[i].live);
        free(b[i].next);
    }
    free(b);
    free(c);
    free(tokens);
    free(from);
    free(lp);
    free(attn);
    free(seen);
    free(shift);
    free(row_max);
    padded_free(&p);
    return status;
}

qkv_status qkv_decode_beam(const qkv_decoder *d, const int32_t *src, int src_len, const qkv_decode_opts *opts,
                           qkv_hyps *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "decode beam: out is required");
    out->n = 0;
    out->h = NULL;
    qkv_status status = qkv__decode_check_opts(d, opts, "decode beam");
    if (status) return status;
    /* One sentence is a batch of one: the same search as qkv_decode_batch's. */
    decode_item it = {.index = 0, .src = src, .len = src_len, .max_len = opts->max_len};
    return qkv__decode_beam_batch(d, &it, 1, opts, keep_one, out);
}

/* ---- kept workspaces: the thread's pack and arena chunk caches, open across calls ---- */

void qkv_decode_keep_open(void) {
    qkv__pack_cache_open();
    qkv__arena_cache_open();
}

void qkv_decode_keep_close(void) {
    qkv__arena_cache_close();
    qkv__pack_cache_close();
}

/* ---- the driver: windows, batches, input order ---- */

typedef struct {
    qkv_batch_emit_fn emit;
    void *user;
    qkv_hyps *res; /* the window's results, by position in the window */
    bool *ready;
    int w0, n, next; /* the window's first input, its size, the next input to emit */
} order;

static qkv_status hold(void *user, int index, qkv_hyps *hs) {
    order *ord = user;
    ord->res[index - ord->w0] = *hs;
    ord->ready[index - ord->w0] = true;
    *hs = (qkv_hyps){0};
    while (ord->next < ord->w0 + ord->n && ord->ready[ord->next - ord->w0]) {
        qkv_hyps *h = &ord->res[ord->next - ord->w0];
        qkv_status st = ord->emit(ord->next, h, ord->user);
        qkv_hyps_free(h);
        ord->next++;
        if (st) return st;
    }
    return QKV_OK;
}

static int cmp_longest(const void *a, const void *b) {
    const decode_item *x = a, *y = b;
    if (x->len != y->len) return (x->len < y->len) - (x->len > y->len);
    return (x->index > y->index) - (x->index < y->index);
}

/* Row j of input i draws from its own stream: a key derived from (seed, i, j), independent of the batching. */
static void row_stream(qkv_rng *rng, uint64_t seed, int i, int j) {
    uint32_t k[4];
    qkv_philox4x32(seed, ((uint64_t)1 << 63) | ((uint64_t)(uint32_t)i << 16) | (uint64_t)(uint16_t)j, k);
    qkv_rng_init(rng, (uint64_t)k[0] | (uint64_t)k[1] << 32);
}

qkv_status qkv_decode_batch(const qkv_decoder *d, int n, const int32_t *const *src, const int *src_len,
                            const int *max_len, const qkv_decode_opts *opts, const qkv_batch_opts *b,
                            qkv_batch_emit_fn emit, void *user) {
    qkv_status status = qkv__decode_check_opts(d, opts, "decode batch");
    if (status) return status;
    if (!b || !emit || n < 0 || b->batch_size < 1 || b->batch_tokens < 0 || b->window < 0)
        return qkv_error_set(QKV_ERR_INVALID, "decode batch: need options with batch_size >= 1, batch_tokens >= 0, "
                             "window >= 0, an emit callback and n >= 0 (got %d)", n);
    if (d->info.needs_source && (!src || !src_len))
        return qkv_error_set(QKV_ERR_INVALID, "decode batch: this model decodes from source sentences");
    if (!d->info.needs_source && (src || src_len))
        return qkv_error_set(QKV_ERR_INVALID, "decode batch: a language model takes no source");
    int per = 1;
    if (b->search == QKV_SEARCH_BEAM) {
        if ((status = qkv__decode_check_beam(opts, "decode batch"))) return status;
        per = opts->beam;
    } else if (b->search == QKV_SEARCH_SAMPLE) {
        if (opts->n_samples < 1 || opts->n_samples > 65536 || !(opts->temperature > 0.0f) ||
            !isfinite(opts->temperature))
            return qkv_error_set(QKV_ERR_INVALID, "decode batch: sampling needs 1 <= n_samples <= 65536 (got %d) "
                                 "and temperature > 0 (got %g)", opts->n_samples, (double)opts->temperature);
        per = opts->n_samples;
    } else if (b->search != QKV_SEARCH_GREEDY) {
        return qkv_error_set(QKV_ERR_INVALID, "decode batch: unknown search %d", (int)b->search);
    }
    for (int i = 0; i < n; i++) {
        int ml = max_len ? max_len[i] : opts->max_len;
        if (ml < 1) return qkv_error_set(QKV_ERR_INVALID, "decode batch: input %d: max_len %d must be >= 1", i, ml);
        if (d->info.needs_source && (!src[i] || src_len[i] < 1))
            return qkv_error_set(QKV_ERR_INVALID, "decode batch: input %d has no source tokens", i);
    }
    int W = b->window ? b->window : (b->batch_size > (1 << 26) ? 1 << 30 : 16 * b->batch_size);
    if (W < b->batch_size) W = b->batch_size;
    if (W > n) W = n;
    decode_item *it = malloc(sizeof *it * (size_t)(W ? W : 1));
    order ord = {.emit = emit, .user = user, .res = calloc((size_t)(W ? W : 1), sizeof(qkv_hyps)),
                 .ready = calloc((size_t)(W ? W : 1), sizeof(bool))};
    qkv_rng *rngs = b->search == QKV_SEARCH_SAMPLE ? malloc(sizeof(qkv_rng) * (size_t)b->batch_size * (size_t)per)
                                                    : NULL;
    if (!it || !ord.res || !ord.ready || (b->search == QKV_SEARCH_SAMPLE && !rngs)) {
        status = qkv_error_set(QKV_ERR_NOMEM, "decode batch: out of memory");
        goto done;
    }
    /* Each batch starts a decoding state over the same borrowed model: the weights are packed for the first batch
     * and reused by the others (ops/gemm_packed.h), and each state's memory is the last one's (core/arena.h). */
    qkv__pack_cache_open();
    qkv__arena_cache_open();
    for (int w0 = 0; w0 < n && !status; w0 += W) {
        int wn = n - w0 < W ? n - w0 : W;
        ord.w0 = ord.next = w0;
        ord.n = wn;
        for (int i = 0; i < wn; i++) {
            int k = w0 + i;
            it[i] = (decode_item){.index = k, .src = src ? src[k] : NULL, .len = src_len ? src_len[k] : 0,
                                  .max_len = max_len ? max_len[k] : opts->max_len};
            ord.ready[i] = false;
        }
        qsort(it, (size_t)wn, sizeof *it, cmp_longest);
        for (int i0 = 0; i0 < wn && !status;) {
            /* Longest first: the first item's length is the batch's padded length. */
            int m = 1;
            int64_t cost = (int64_t)per * (it[i0].len > 0 ? it[i0].len : 1);
            while (m < b->batch_size && i0 + m < wn && (!b->batch_tokens || (int64_t)(m + 1) * cost <= b->batch_tokens))
                m++;
            if (b->search == QKV_SEARCH_BEAM) {
                status = qkv__decode_beam_batch(d, it + i0, m, opts, hold, &ord);
            } else {
                for (int i = 0; rngs && i < m; i++)
                    for (int j = 0; j < per; j++) row_stream(&rngs[i * per + j], b->seed, it[i0 + i].index, j);
                status = qkv__decode_rows_batch(d, it + i0, m, per, opts,
                                                b->search == QKV_SEARCH_SAMPLE ? qkv__decode_pick_sample : qkv__decode_pick_greedy,
                                           rngs, hold, &ord);
            }
            i0 += m;
        }
        for (int i = 0; i < wn; i++) qkv_hyps_free(&ord.res[i]);
    }
    qkv__arena_cache_close();
    qkv__pack_cache_close();
done:
    free(it);
    free(ord.res);
    free(ord.ready);
    free(rngs);
    return status;
}
