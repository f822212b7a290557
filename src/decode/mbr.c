/* Minimum Bayes Risk decoding (Kumar & Byrne 2004; Eikema & Aziz 2020's sampling-based form): draw samples from
 * the model, use them both as candidates and as pseudo-references, return the candidate with the highest mean
 * utility against the others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/beam.h"

bool qkv_mbr_utility_parse(const char *name, qkv_mbr_utility *u) {
    static const char *const names[] = {"bleu", "rougeL", "rouge1", "rouge2"};
    for (int i = 0; name && i < 4; i++)
        if (!strcmp(name, names[i])) {
            *u = (qkv_mbr_utility)i;
            return true;
        }
    return false;
}

/* u(hyp, ref) on a 0..1 scale. */
static qkv_status utility(const char *hyp, const char *ref, qkv_mbr_utility u, double *out) {
    if (u == QKV_MBR_BLEU) {
        qkv_bleu_result r;
        qkv_status st = qkv_bleu_sentence(hyp, &ref, 1, NULL, &r);
        *out = r.score / 100.0;
        return st;
    }
    qkv_rouge_result r;
    qkv_status st = qkv_rouge_score(ref, hyp, NULL, &r);
    *out = u == QKV_MBR_ROUGE_L ? r.rougeL.f1 : u == QKV_MBR_ROUGE_1 ? r.rouge1.f1 : r.rouge2.f1;
    return st;
}

qkv_status qkv_mbr_select(const char *const *cands, int n, qkv_mbr_utility u, int *best, double *expected) {
    if (!cands || n < 1 || !best) return qkv_error_set(QKV_ERR_INVALID, "mbr: need n >= 1 candidates (got %d)", n);
    if ((unsigned)u > QKV_MBR_ROUGE_2) return qkv_error_set(QKV_ERR_INVALID, "mbr: unknown utility %d", (int)u);
    for (int i = 0; i < n; i++)
        if (!cands[i]) return qkv_error_set(QKV_ERR_INVALID, "mbr: candidate %d is NULL", i);
    double best_e = -1.0;
    *best = 0;
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            double v;
            qkv_status st = utility(cands[i], cands[j], u, &v);
            if (st) return st;
            sum += v;
        }
        double e = n > 1 ? sum / (n - 1) : 0.0;
        if (expected) expected[i] = e;
        if (e > best_e + 1e-12) { /* sums of the same terms in another order must not break the tie */
            best_e = e;
            *best = i;
        }
    }
    return QKV_OK;
}

static char *ids_text(const int32_t *tok, int len) {
    size_t cap = (size_t)len * 12 + 1;
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t at = 0;
    s[0] = '\0';
    for (int i = 0; i < len; i++) at += (size_t)snprintf(s + at, cap - at, i ? " %d" : "%d", tok[i]);
    return s;
}

qkv_status qkv_mbr_reduce(qkv_hyps *samples, qkv_mbr_utility u, qkv_detok_fn detok, void *user) {
    if (!samples || samples->n < 1) return qkv_error_set(QKV_ERR_INVALID, "mbr: no samples to choose from");
    int n = samples->n, best = 0;
    qkv_status st = QKV_OK;
    char **text = calloc((size_t)n, sizeof *text);
    double *exp_u = malloc(sizeof(double) * (size_t)n);
    if (!text || !exp_u) {
        st = qkv_error_set(QKV_ERR_NOMEM, "decode mbr: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const qkv_hyp *h = &samples->h[i];
        int len = h->len - (h->finished ? 1 : 0); /* without EOS */
        text[i] = detok ? detok(h->tokens, len, user) : ids_text(h->tokens, len);
        if (!text[i]) {
            st = qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_NOMEM, "decode mbr: detokenising failed");
            goto done;
        }
    }
    if ((st = qkv_mbr_select((const char *const *)text, n, u, &best, exp_u))) goto done;
    /* Keep the winner: swap it to the front and drop the rest. */
    qkv_hyp win = samples->h[best];
    samples->h[best] = samples->h[0];
    samples->h[0] = win;
    samples->h[0].score = exp_u[best];
    for (int i = 1; i < n; i++) {
        free(samples->h[i].tokens);
        free(samples->h[i].attn);
    }
    samples->n = 1;
done:
    for (int i = 0; text && i < n; i++) free(text[i]);
    free(text);
    free(exp_u);
    return st;
}

qkv_status qkv_decode_mbr(const qkv_decoder *d, const int32_t *src, int src_len, const qkv_decode_opts *opts,
                          qkv_mbr_utility u, qkv_detok_fn detok, void *user, qkv_rng *rng, qkv_hyps *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "decode mbr: out is required");
    out->n = 0;
    out->h = NULL;
    if (!opts || opts->n_samples < 1)
        return qkv_error_set(QKV_ERR_INVALID, "decode mbr: n_samples must be >= 1 (got %d)", opts ? opts->n_samples : 0);
    qkv_hyps samples;
    qkv_status st = qkv_decode_sample(d, src, src_len, opts->n_samples, opts, rng, &samples);
    if (st) return st;
    if ((st = qkv_mbr_reduce(&samples, u, detok, user))) {
        qkv_hyps_free(&samples);
        return st;
    }
    *out = samples;
    return QKV_OK;
}
