/* ROUGE-N, ROUGE-L and ROUGE-Lsum as Google's rouge-score computes them. Tokens are the maximal runs of [a-z0-9]
 * in the Unicode-lowercased text, optionally Porter-stemmed when longer than 3 characters. ROUGE-Lsum takes the
 * union of LCS matches of each target sentence against every prediction sentence, with the reference
 * implementation's backtracking (so ties pick the same subsequence) and its guard against double counting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_internal.h"
#include "qkv/metrics.h"

static double fmeasure(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0.0; }

/* Token ids of s[0..len) appended to out. */
static qkv_status tokenize(const char *s, size_t len, bool stem, qkv__vocab *v, qkv__ids *out, const char *what) {
    size_t n;
    char *low = qkv__py_lower(s, len, &n, what);
    if (!low) return qkv_last_status();
    char *stembuf = NULL;
    size_t stemcap = 0;
    qkv_status st = QKV_OK;
    for (size_t i = 0; i < n && st == QKV_OK;) {
        char c = low[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && ((low[j] >= 'a' && low[j] <= 'z') || (low[j] >= '0' && low[j] <= '9'))) j++;
        const char *tok = low + i;
        size_t tl = j - i;
        if (stem && tl > 3) {
            if (stemcap < tl + 2) {
                free(stembuf);
                stemcap = tl + 2;
                stembuf = malloc(stemcap);
                if (!stembuf) {
                    st = qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", what);
                    break;
                }
            }
            int k = qkv_porter_stem(tok, tl, stembuf, stemcap);
            if (k < 0) {
                st = qkv_last_status();
                break;
            }
            tok = stembuf;
            tl = (size_t)k;
        }
        if (tl > 0) {
            int32_t id = qkv__vocab_id(v, tok, tl);
            if (id < 0 || !qkv__ids_push(out, id)) st = qkv_last_status();
        }
        i = j;
    }
    free(stembuf);
    free(low);
    return st;
}

static qkv_prf score_ngrams(const qkv__ids *t, const qkv__ids *p, int n, qkv__ngram_map *m, qkv_status *st) {
    qkv_prf r = {0, 0, 0};
    qkv__ngram_clear(m);
    int64_t tc = 0, pc = 0, inter = 0;
    for (size_t i = 0; i + (size_t)n <= t->n; i++, tc++) {
        qkv__ngram *e = qkv__ngram_get(m, t->v + i, n, true);
        if (!e) {
            *st = qkv_last_status();
            return r;
        }
        e->a++;
    }
    for (size_t i = 0; i + (size_t)n <= p->n; i++, pc++) {
        qkv__ngram *e = qkv__ngram_get(m, p->v + i, n, true);
        if (!e) {
            *st = qkv_last_status();
            return r;
        }
        e->b++;
    }
    for (size_t k = 0; k < m->cap; k++)
        if (m->slots[k].n) inter += m->slots[k].a < m->slots[k].b ? m->slots[k].a : m->slots[k].b;
    r.precision = (double)inter / (double)(pc > 1 ? pc : 1);
    r.recall = (double)inter / (double)(tc > 1 ? tc : 1);
    r.f1 = fmeasure(r.precision, r.recall);
    return r;
}

/* (rows+1) x (cols+1) LCS length table, row-major; NULL on OOM (error set). */
static int32_t *lcs_table(const int32_t *ref, size_t rows, const int32_t *can, size_t cols) {
    if (rows && cols && (rows + 1) > ((size_t)1 << 31) / (cols + 1)) {
        qkv_error_set(QKV_ERR_RANGE, "ROUGE-L: %zu x %zu token table is too large", rows, cols);
        return NULL;
    }
    int32_t *t = calloc((rows + 1) * (cols + 1), sizeof *t);
    if (!t) {
        qkv_error_set(QKV_ERR_NOMEM, "ROUGE-L: out of memory for a %zu x %zu table", rows, cols);
        return NULL;
    }
    size_t w = cols + 1;
    for (size_t i = 1; i <= rows; i++)
        for (size_t j = 1; j <= cols; j++) {
            if (ref[i - 1] == can[j - 1]) t[i * w + j] = t[(i - 1) * w + j - 1] + 1;
            else t[i * w + j] = t[(i - 1) * w + j] > t[i * w + j - 1] ? t[(i - 1) * w + j] : t[i * w + j - 1];
        }
    return t;
}

static qkv_prf score_lcs(const qkv__ids *t, const qkv__ids *p, qkv_status *st) {
    qkv_prf r = {0, 0, 0};
    if (!t->n || !p->n) return r;
    int32_t *tab = lcs_table(t->v, t->n, p->v, p->n);
    if (!tab) {
        *st = qkv_last_status();
        return r;
    }
    double lcs = tab[t->n * (p->n + 1) + p->n];
    free(tab);
    r.precision = lcs / (double)p->n;
    r.recall = lcs / (double)t->n;
    r.f1 = fmeasure(r.precision, r.recall);
    return r;
}

/* Sentences of a text for ROUGE-Lsum: split on '\n', empty pieces dropped, each tokenized. */
typedef struct sents {
    qkv__ids *s;
    size_t n;
} sents;

static void sents_free(sents *s) {
    for (size_t i = 0; i < s->n; i++) qkv__ids_free(&s->s[i]);
    free(s->s);
}

static qkv_status split_sents(const char *text, bool stem, qkv__vocab *v, sents *out, const char *what) {
    size_t cap = 1;
    for (const char *c = text; *c; c++) cap += *c == '\n';
    out->s = calloc(cap, sizeof *out->s);
    out->n = 0;
    if (!out->s) return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", what);
    for (const char *c = text;;) {
        const char *e = strchr(c, '\n');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        if (len) {
            qkv_status st = tokenize(c, len, stem, v, &out->s[out->n++], what);
            if (st) return st;
        }
        if (!e) break;
        c = e + 1;
    }
    return QKV_OK;
}

static qkv_prf score_lsum(const sents *ref, const sents *can, qkv_status *st) {
    qkv_prf r = {0, 0, 0};
    if (!ref->n || !can->n) return r;
    size_t m = 0, n = 0;
    int32_t maxid = 0;
    for (size_t i = 0; i < ref->n; i++) {
        m += ref->s[i].n;
        for (size_t k = 0; k < ref->s[i].n; k++) maxid = ref->s[i].v[k] > maxid ? ref->s[i].v[k] : maxid;
    }
    for (size_t i = 0; i < can->n; i++) {
        n += can->s[i].n;
        for (size_t k = 0; k < can->s[i].n; k++) maxid = can->s[i].v[k] > maxid ? can->s[i].v[k] : maxid;
    }
    if (!m || !n) return r;
    int64_t *cnt_r = calloc((size_t)maxid + 1, sizeof *cnt_r), *cnt_c = calloc((size_t)maxid + 1, sizeof *cnt_c);
    size_t maxlen = 0;
    for (size_t i = 0; i < ref->n; i++) maxlen = ref->s[i].n > maxlen ? ref->s[i].n : maxlen;
    uint8_t *hit = malloc(maxlen + 1);
    if (!cnt_r || !cnt_c || !hit) {
        *st = qkv_error_set(QKV_ERR_NOMEM, "ROUGE-Lsum: out of memory");
        goto done;
    }
    for (size_t i = 0; i < ref->n; i++)
        for (size_t k = 0; k < ref->s[i].n; k++) cnt_r[ref->s[i].v[k]]++;
    for (size_t i = 0; i < can->n; i++)
        for (size_t k = 0; k < can->s[i].n; k++) cnt_c[can->s[i].v[k]]++;
    int64_t hits = 0;
    for (size_t i = 0; i < ref->n; i++) {
        const qkv__ids *rs = &ref->s[i];
        memset(hit, 0, rs->n + 1);
        for (size_t c = 0; c < can->n; c++) {
            const qkv__ids *cs = &can->s[c];
            int32_t *t = lcs_table(rs->v, rs->n, cs->v, cs->n);
            if (!t) {
                *st = qkv_last_status();
                goto done;
            }
            /* rouge-score's _backtrack_norec: on a tie, step back in the reference */
            size_t a = rs->n, b = cs->n, w = cs->n + 1;
            while (a > 0 && b > 0) {
                if (rs->v[a - 1] == cs->v[b - 1]) {
                    hit[a - 1] = 1;
                    a--;
                    b--;
                } else if (t[a * w + b - 1] > t[(a - 1) * w + b]) {
                    b--;
                } else {
                    a--;
                }
            }
            free(t);
        }
        for (size_t k = 0; k < rs->n; k++) {
            int32_t id = rs->v[k];
            if (hit[k] && cnt_c[id] > 0 && cnt_r[id] > 0) {
                hits++;
                cnt_c[id]--;
                cnt_r[id]--;
            }
        }
    }
    r.recall = (double)hits / (double)m;
    r.precision = (double)hits / (double)n;
    r.f1 = fmeasure(r.precision, r.recall);
done:
    free(cnt_r);
    free(cnt_c);
    free(hit);
    return r;
}

static qkv_status check_text(const char *fn, const char *target, const char *prediction) {
    if (!target || !prediction) return qkv_error_set(QKV_ERR_INVALID, "%s: target and prediction must not be NULL", fn);
    return QKV_OK;
}

qkv_status qkv_rouge_n(const char *target, const char *prediction, int n, const qkv_rouge_opts *opts, qkv_prf *out) {
    qkv_status st = check_text("qkv_rouge_n", target, prediction);
    if (st) return st;
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "qkv_rouge_n: out is NULL");
    if (n < 1 || n > QKV__MAX_NGRAM)
        return qkv_error_set(QKV_ERR_INVALID, "qkv_rouge_n: n = %d is outside 1..%d", n, QKV__MAX_NGRAM);
    bool stem = opts && opts->use_stemmer;
    qkv__vocab v = {0};
    qkv__ids t = {0}, p = {0};
    qkv__ngram_map m = {0};
    st = tokenize(target, strlen(target), stem, &v, &t, "ROUGE target");
    if (!st) st = tokenize(prediction, strlen(prediction), stem, &v, &p, "ROUGE prediction");
    if (!st) *out = score_ngrams(&t, &p, n, &m, &st);
    qkv__ngram_free(&m);
    qkv__ids_free(&t);
    qkv__ids_free(&p);
    qkv__vocab_free(&v);
    return st;
}

qkv_status qkv_rouge_score(const char *target, const char *prediction, const qkv_rouge_opts *opts,
                           qkv_rouge_result *out) {
    qkv_status st = check_text("qkv_rouge_score", target, prediction);
    if (st) return st;
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "qkv_rouge_score: out is NULL");
    bool stem = opts && opts->use_stemmer;
    qkv__vocab v = {0};
    qkv__ids t = {0}, p = {0};
    qkv__ngram_map m = {0};
    sents ts = {0}, ps = {0};
    memset(out, 0, sizeof *out);
    st = tokenize(target, strlen(target), stem, &v, &t, "ROUGE target");
    if (!st) st = tokenize(prediction, strlen(prediction), stem, &v, &p, "ROUGE prediction");
    if (!st) out->rouge1 = score_ngrams(&t, &p, 1, &m, &st);
    if (!st) out->rouge2 = score_ngrams(&t, &p, 2, &m, &st);
    if (!st) out->rougeL = score_lcs(&t, &p, &st);
    if (!st) st = split_sents(target, stem, &v, &ts, "ROUGE target");
    if (!st) st = split_sents(prediction, stem, &v, &ps, "ROUGE prediction");
    if (!st) out->rougeLsum = score_lsum(&ts, &ps, &st);
    sents_free(&ts);
    sents_free(&ps);
    qkv__ngram_free(&m);
    qkv__ids_free(&t);
    qkv__ids_free(&p);
    qkv__vocab_free(&v);
    return st;
}

qkv_status qkv_rouge_mean(const char *const *targets, const char *const *predictions, size_t n,
                          const qkv_rouge_opts *opts, qkv_rouge_result *out) {
    if (!targets || !predictions || !out)
        return qkv_error_set(QKV_ERR_INVALID, "qkv_rouge_mean: targets, predictions and out must not be NULL");
    if (n == 0) return qkv_error_set(QKV_ERR_INVALID, "qkv_rouge_mean: no pairs");
    qkv_rouge_result sum = {0};
    for (size_t i = 0; i < n; i++) {
        qkv_rouge_result r;
        qkv_status st = qkv_rouge_score(targets[i], predictions[i], opts, &r);
        if (st) return qkv_error_set(st, "pair %zu: %s", i, qkv_last_error());
        qkv_prf *s = &sum.rouge1, *x = &r.rouge1;
        for (int k = 0; k < 4; k++) {
            s[k].precision += x[k].precision;
            s[k].recall += x[k].recall;
            s[k].f1 += x[k].f1;
        }
    }
    qkv_prf *s = &sum.rouge1;
    for (int k = 0; k < 4; k++) {
        s[k].precision /= (double)n;
        s[k].recall /= (double)n;
        s[k].f1 /= (double)n;
    }
    *out = sum;
    return QKV_OK;
}

int qkv_rouge_signature(const qkv_rouge_opts *opts, char *buf, size_t size) {
    return snprintf(buf, size, "rouge:1,2,L,Lsum|tok:rouge-score|stem:%s|agg:mean|version:0.1.x",
                    opts && opts->use_stemmer ? "porter" : "no");
}
