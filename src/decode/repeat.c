/* Repetition control (include/qkv/repeat.h): the no-repeat n-gram ban and the repetition penalty over a
 * hypothesis's history, written as HF's _get_ngrams / _calc_banned_ngram_tokens and RepetitionPenaltyLogitsProcessor
 * compute them. A history is two pieces (a prompt, then the generated tokens), so no caller copies them together. */
#include <math.h>
#include <string.h>

#include "decode_internal.h"
#include "qkv/repeat.h"

bool qkv_repeat_scope_parse(const char *name, qkv_repeat_scope *scope) {
    if (name && !strcmp(name, "generated")) *scope = QKV_REPEAT_GENERATED;
    else if (name && !strcmp(name, "all")) *scope = QKV_REPEAT_ALL;
    else return false;
    return true;
}

const char *qkv_repeat_scope_name(qkv_repeat_scope scope) {
    return scope == QKV_REPEAT_GENERATED ? "generated" : scope == QKV_REPEAT_ALL ? "all" : "?";
}

static inline int32_t at(const decode_history *h, int64_t i) { return i < h->n_pre ? h->pre[i] : h->gen[i - h->n_pre]; }

int64_t qkv__repeat_ban_ngrams(int N, const decode_history *h, float *scores, int64_t V) {
    int64_t L = h->n_pre + h->n_gen, banned = 0;
    if (N < 1 || L < N) return 0; /* no complete n-gram yet (HF: cur_len + 1 < n returns nothing) */
    /* The last N - 1 tokens are the prefix the next token would complete; every earlier n-gram that starts with it
     * bans its last token. A scan of the history: as cheap as a hash of its n-grams at summary lengths, and it keeps
     * no state beyond the tokens a hypothesis carries anyway. */
    int64_t p0 = L - (N - 1);
    for (int64_t i = 0; i + N <= L; i++) {
        int k = 0;
        while (k < N - 1 && at(h, i + k) == at(h, p0 + k)) k++;
        if (k < N - 1) continue;
        int32_t t = at(h, i + N - 1);
        if (t < 0 || t >= V || scores[t] == -INFINITY) continue;
        scores[t] = -INFINITY;
        banned++;
    }
    return banned;
}

void qkv__repeat_penalise(float r, const decode_history *h, float *scores, int64_t V, uint8_t *seen) {
    if (r == 1.0f) return;
    int64_t L = h->n_pre + h->n_gen;
    /* Each distinct token once, however often it occurred (HF gathers every occurrence's original score). */
    for (int64_t i = 0; i < L; i++) {
        int32_t t = at(h, i);
        if (t < 0 || t >= V || seen[t]) continue;
        seen[t] = 1;
        scores[t] = scores[t] > 0.0f ? scores[t] / r : scores[t] * r;
    }
    for (int64_t i = 0; i < L; i++) {
        int32_t t = at(h, i);
        if (t >= 0 && t < V) seen[t] = 0;
    }
}

void qkv__decode_constrain(const qkv_decode_opts *o, const decode_history *h, float *lp, int64_t V, uint8_t *seen) {
    qkv__repeat_penalise(o->repetition_penalty, h, lp, V, seen);
    if (o->no_repeat_ngram < 1) return;
    float eos = lp[o->eos];
    if (qkv__repeat_ban_ngrams(o->no_repeat_ngram, h, lp, V) == 0) return;
    for (int64_t v = 0; v < V; v++)
        if (lp[v] > -INFINITY && decode_allowed(o, (int)v)) return;
    lp[o->eos] = eos; /* every token is banned: the hypothesis may still end */
}
