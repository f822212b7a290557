/* Corpus and sentence BLEU with sacrebleu's semantics: per segment, hypothesis n-gram counts are clipped by the
 * maximum count over the segment's references, the reference length is the one closest to the hypothesis (ties go
 * to the shorter), and statistics are summed over the corpus before the precisions and brevity penalty. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_internal.h"
#include "qkv/metrics.h"

qkv_bleu_opts qkv_bleu_default_opts(void) {
    return (qkv_bleu_opts){.smooth = QKV_BLEU_SMOOTH_EXP, .smooth_value = -1, .max_order = 4};
}

qkv_bleu_opts qkv_bleu_sentence_opts(void) {
    qkv_bleu_opts o = qkv_bleu_default_opts();
    o.effective_order = true;
    return o;
}

static qkv_status check_opts(const char *fn, const qkv_bleu_opts *in, qkv_bleu_opts *o) {
    *o = *in;
    if (o->max_order == 0) o->max_order = 4;
    if (o->max_order < 1 || o->max_order > QKV_BLEU_MAX_ORDER)
        return qkv_error_set(QKV_ERR_INVALID, "%s: max_order %d is outside 1..%d", fn, in->max_order,
                             QKV_BLEU_MAX_ORDER);
    if ((unsigned)o->smooth > QKV_BLEU_SMOOTH_ADD_K)
        return qkv_error_set(QKV_ERR_INVALID, "%s: unknown smoothing method %d", fn, (int)o->smooth);
    if ((unsigned)o->tokenizer > QKV_BLEU_TOK_NONE)
        return qkv_error_set(QKV_ERR_INVALID, "%s: unknown tokenizer %d", fn, (int)o->tokenizer);
    if (!isfinite(o->smooth_value))
        return qkv_error_set(QKV_ERR_INVALID, "%s: smooth_value is not finite", fn);
    if (o->smooth_value < 0) o->smooth_value = o->smooth == QKV_BLEU_SMOOTH_FLOOR   ? 0.1
                                               : o->smooth == QKV_BLEU_SMOOTH_ADD_K ? 1.0
                                                                                    : 0.0;
    return QKV_OK;
}

/* sacrebleu's my_log: log with log(0) floored to a huge negative number instead of -inf. */
static double floored_log(double x) { return x == 0.0 ? -9999999999.0 : log(x); }

static void compute(const int64_t *counts, const int64_t *totals, int64_t hyp_len, int64_t ref_len,
                    const qkv_bleu_opts *o, qkv_bleu_result *r) {
    int N = o->max_order;
    memset(r, 0, sizeof *r);
    r->max_order = N;
    r->opts = *o;
    r->hyp_len = hyp_len;
    r->ref_len = ref_len;
    r->ratio = ref_len ? (double)hyp_len / (double)ref_len : 0.0;
    memcpy(r->counts, counts, (size_t)N * sizeof *counts);
    memcpy(r->totals, totals, (size_t)N * sizeof *totals);
    r->bp = 1.0;
    if (hyp_len < ref_len) r->bp = hyp_len > 0 ? exp(1.0 - (double)ref_len / (double)hyp_len) : 0.0;

    bool any = false;
    for (int n = 0; n < N; n++) any |= counts[n] != 0;
    if (!any) return; /* no match at any order: 0 whatever the smoothing (sacrebleu #141) */

    double smooth_mteval = 1.0;
    int eff_order = N;
    for (int n = 1; n <= N; n++) {
        double correct = (double)counts[n - 1], total = (double)totals[n - 1];
        if (o->smooth == QKV_BLEU_SMOOTH_ADD_K && n > 1) {
            correct += o->smooth_value;
            total += o->smooth_value;
        }
        if (total == 0) break;
        if (o->effective_order) eff_order = n;
        if (correct == 0) {
            if (o->smooth == QKV_BLEU_SMOOTH_EXP) {
                smooth_mteval *= 2;
                r->precisions[n - 1] = 100.0 / (smooth_mteval * total);
            } else if (o->smooth == QKV_BLEU_SMOOTH_FLOOR) {
                r->precisions[n - 1] = 100.0 * o->smooth_value / total;
            }
        } else {
            r->precisions[n - 1] = 100.0 * correct / total;
        }
    }
    double s = 0;
    for (int n = 0; n < eff_order; n++) s += floored_log(r->precisions[n]);
    r->score = r->bp * exp(s / eff_order);
}

qkv_status qkv_bleu_from_stats(const int64_t *counts, const int64_t *totals, int64_t hyp_len, int64_t ref_len,
                               const qkv_bleu_opts *opts, qkv_bleu_result *out) {
    if (!counts || !totals || !out)
        return qkv_error_set(QKV_ERR_INVALID, "qkv_bleu_from_stats: counts, totals and out must not be NULL");
    qkv_bleu_opts o;
    qkv_bleu_opts def = qkv_bleu_default_opts();
    qkv_status st = check_opts("qkv_bleu_from_stats", opts ? opts : &def, &o);
    if (st) return st;
    if (hyp_len < 0 || ref_len < 0)
        return qkv_error_set(QKV_ERR_INVALID, "qkv_bleu_from_stats: negative length (hyp %lld, ref %lld)",
                             (long long)hyp_len, (long long)ref_len);
    for (int n = 0; n < o.max_order; n++)
        if (counts[n] < 0 || totals[n] < 0 || counts[n] > totals[n])
            return qkv_error_set(QKV_ERR_INVALID, "qkv_bleu_from_stats: order %d has %lld matches of %lld n-grams",
                                 n + 1, (long long)counts[n], (long long)totals[n]);
    compute(counts, totals, hyp_len, ref_len, &o, out);
    out->n_refs = 1;
    return QKV_OK;
}

/* Per-call state: one vocabulary for the whole corpus, reusable tables for one segment. */
typedef struct bleu_ctx {
    const qkv_bleu_opts *o;
    qkv__vocab vocab;
    qkv__ids toks;
    qkv__ngram_map ref, hyp, cur;
} bleu_ctx;

/* Preprocess one segment as sacrebleu does (lowercase, rstrip, tokenize) and leave its token ids in c->toks. */
static qkv_status segment_tokens(bleu_ctx *c, const char *s, const char *what, size_t idx) {
    char name[64];
    snprintf(name, sizeof name, "BLEU: %s %zu", what, idx);
    size_t len = strlen(s);
    char *low = NULL;
    if (c->o->lowercase) {
        low = qkv__py_lower(s, len, &len, name);
        if (!low) return qkv_last_status();
        s = low;
    }
    char *tok = NULL;
    if (c->o->tokenizer == QKV_BLEU_TOK_13A) {
        /* rstrip first, as sacrebleu does before tokenizing */
        char *tmp = malloc(len + 1);
        if (!tmp) {
            free(low);
            return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", name);
        }
        memcpy(tmp, s, len);
        tmp[len] = '\0';
        size_t end = len;
        while (end > 0) { /* strip trailing Python whitespace code points */
            size_t st = end - 1;
            while (st > 0 && ((unsigned char)tmp[st] & 0xc0) == 0x80) st--;
            int32_t cp;
            if (qkv__metrics_utf8_decode((unsigned char *)tmp + st, end - st, &cp) != end - st || !qkv__py_isspace(cp))
                break;
            end = st;
        }
        tmp[end] = '\0';
        tok = qkv_bleu_tokenize_13a(tmp);
        free(tmp);
        if (!tok) {
            free(low);
            return qkv_last_status();
        }
        s = tok;
        len = strlen(tok);
    }
    c->toks.n = 0;
    bool ok = qkv__split_ws(s, len, &c->vocab, &c->toks);
    free(tok);
    free(low);
    return ok ? QKV_OK : qkv_last_status();
}

/* Adds the n-grams of c->toks to m: counter a += 1 per occurrence. */
static qkv_status count_ngrams(bleu_ctx *c, qkv__ngram_map *m) {
    for (int n = 1; n <= c->o->max_order; n++)
        for (size_t i = 0; i + (size_t)n <= c->toks.n; i++) {
            qkv__ngram *e = qkv__ngram_get(m, c->toks.v + i, n, true);
            if (!e) return qkv_last_status();
            e->a++;
        }
    return QKV_OK;
}

static qkv_status validate_utf8(const char *s, const char *what, size_t idx) {
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) {
        int32_t cp;
        size_t k = qkv__metrics_utf8_decode(u + i, len - i, &cp);
        if (!k) return qkv_error_set(QKV_ERR_FORMAT, "BLEU: %s %zu: invalid UTF-8 at byte %zu", what, idx, i + 1);
        i += k;
    }
    return QKV_OK;
}

/* Statistics of segment i, added into counts/totals/lens. */
static qkv_status segment_stats(bleu_ctx *c, const char *hyp, const char *const *seg_refs, int n_refs, size_t i,
                                int64_t *counts, int64_t *totals, int64_t *hyp_len, int64_t *ref_len,
                                int *n_present) {
    qkv_status st;
    qkv__ngram_clear(&c->ref);
    int64_t best_len = -1, best_diff = -1;
    int present = 0;
    int64_t hlen;
    if ((st = validate_utf8(hyp, "hypothesis", i))) return st;
    if ((st = segment_tokens(c, hyp, "hypothesis", i))) return st;
    hlen = (int64_t)c->toks.n;
    qkv__ngram_clear(&c->hyp);
    if ((st = count_ngrams(c, &c->hyp))) return st;
    for (int r = 0; r < n_refs; r++) {
        if (!seg_refs[r]) continue;
        present++;
        if ((st = validate_utf8(seg_refs[r], "reference", i))) return st;
        if ((st = segment_tokens(c, seg_refs[r], "reference", i))) return st;
        int64_t rlen = (int64_t)c->toks.n, diff = llabs(hlen - rlen);
        if (best_diff < 0 || diff < best_diff || (diff == best_diff && rlen < best_len)) {
            best_diff = diff;
            best_len = rlen;
        }
        /* clip counts are the maximum count over the references */
        qkv__ngram_clear(&c->cur);
        if ((st = count_ngrams(c, &c->cur))) return st;
        for (size_t k = 0; k < c->cur.cap; k++) {
            qkv__ngram *e = &c->cur.slots[k];
            if (!e->n) continue;
            qkv__ngram *m = qkv__ngram_get(&c->ref, e->ids, e->n, true);
            if (!m) return qkv_last_status();
            if (e->a > m->a) m->a = e->a;
        }
    }
    if (present == 0) return qkv_error_set(QKV_ERR_INVALID, "BLEU: segment %zu has no reference", i);
    for (size_t k = 0; k < c->hyp.cap; k++) {
        qkv__ngram *e = &c->hyp.slots[k];
        if (!e->n) continue;
        totals[e->n - 1] += e->a;
        qkv__ngram *r = qkv__ngram_get(&c->ref, e->ids, e->n, false);
        if (r) counts[e->n - 1] += e->a < r->a ? e->a : r->a;
    }
    *hyp_len += hlen;
    *ref_len += best_len;
    *n_present = present;
    return QKV_OK;
}

static qkv_status bleu_run(const char *fn, const char *const *hyps, size_t n, const char **const *refs,
                           int n_refs, const char *const *sent_refs, const qkv_bleu_opts *opts,
                           qkv_bleu_result *out) {
    qkv_bleu_opts o;
    qkv_status st = check_opts(fn, opts, &o);
    if (st) return st;
    if (n_refs < 1) return qkv_error_set(QKV_ERR_INVALID, "%s: need at least one reference (n_refs = %d)", fn, n_refs);
    if (n_refs > 1024) return qkv_error_set(QKV_ERR_RANGE, "%s: %d reference streams is too many", fn, n_refs);
    const char **seg_refs = malloc((size_t)n_refs * sizeof *seg_refs);
    if (!seg_refs) return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", fn);
    bleu_ctx c = {.o = &o};
    int64_t counts[QKV_BLEU_MAX_ORDER] = {0}, totals[QKV_BLEU_MAX_ORDER] = {0}, hyp_len = 0, ref_len = 0;
    int nrefs_seen = 0;
    for (size_t i = 0; i < n && st == QKV_OK; i++) {
        if (!hyps[i]) {
            st = qkv_error_set(QKV_ERR_INVALID, "%s: hypothesis %zu is NULL", fn, i);
            break;
        }
        for (int r = 0; r < n_refs; r++) seg_refs[r] = sent_refs ? sent_refs[r] : refs[r][i];
        int present = 0;
        st = segment_stats(&c, hyps[i], seg_refs, n_refs, i, counts, totals, &hyp_len, &ref_len, &present);
        if (st == QKV_OK) {
            if (i == 0) nrefs_seen = present;
            else if (nrefs_seen != present) nrefs_seen = -1;
        }
    }
    free(seg_refs);
    qkv__vocab_free(&c.vocab);
    qkv__ids_free(&c.toks);
    qkv__ngram_free(&c.ref);
    qkv__ngram_free(&c.hyp);
    qkv__ngram_free(&c.cur);
    if (st) return st;
    compute(counts, totals, hyp_len, ref_len, &o, out);
    out->n_refs = nrefs_seen;
    return QKV_OK;
}

qkv_status qkv_bleu_corpus(const char *const *hyps, size_t n, const char **const *refs, int n_refs,
                           const qkv_bleu_opts *opts, qkv_bleu_result *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "qkv_bleu_corpus: out is NULL");
    if (n == 0) return qkv_error_set(QKV_ERR_INVALID, "qkv_bleu_corpus: no hypotheses");
    if (!hyps || !refs) return qkv_error_set(QKV_ERR_INVALID, "qkv_bleu_corpus: hyps and refs must not be NULL");
    for (int r = 0; r < n_refs; r++)
        if (!refs[r]) return qkv_error_set(QKV_ERR_INVALID, "qkv_bleu_corpus: reference stream %d is NULL", r);
    qkv_bleu_opts def = qkv_bleu_default_opts();
    return bleu_run("qkv_bleu_corpus", hyps, n, refs, n_refs, NULL, opts ? opts : &def, out);
}

qkv_status qkv_bleu_sentence(const char *hyp, const char *const *refs, int n_refs, const qkv_bleu_opts *opts,
                             qkv_bleu_result *out) {
    if (!out || !hyp || !refs)
        return qkv_error_set(QKV_ERR_INVALID, "qkv_bleu_sentence: hyp, refs and out must not be NULL");
    qkv_bleu_opts def = qkv_bleu_sentence_opts();
    return bleu_run("qkv_bleu_sentence", &hyp, 1, NULL, n_refs, refs, opts ? opts : &def, out);
}

int qkv_bleu_format(const qkv_bleu_result *r, char *buf, size_t size) {
    char prec[QKV_BLEU_MAX_ORDER * 16] = "";
    size_t o = 0;
    for (int n = 0; n < r->max_order; n++)
        o += (size_t)snprintf(prec + o, sizeof prec - o, "%s%.1f", n ? "/" : "", r->precisions[n]);
    return snprintf(buf, size, "BLEU = %.2f %s (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", r->score,
                    prec, r->bp, r->ratio, (long long)r->hyp_len, (long long)r->ref_len);
}

int qkv_bleu_signature(const qkv_bleu_result *r, char *buf, size_t size) {
    static const char *names[] = {"exp", "none", "floor", "add-k"};
    char nrefs[16], smooth[48];
    if (r->n_refs < 0) snprintf(nrefs, sizeof nrefs, "var");
    else snprintf(nrefs, sizeof nrefs, "%d", r->n_refs);
    const qkv_bleu_opts *o = &r->opts;
    unsigned sm = (unsigned)o->smooth <= QKV_BLEU_SMOOTH_ADD_K ? (unsigned)o->smooth : 0;
    if (o->smooth == QKV_BLEU_SMOOTH_FLOOR || o->smooth == QKV_BLEU_SMOOTH_ADD_K)
        snprintf(smooth, sizeof smooth, "%s[%.2f]", names[sm], o->smooth_value);
    else
        snprintf(smooth, sizeof smooth, "%s", names[sm]);
    return snprintf(buf, size, "nrefs:%s|case:%s|eff:%s|tok:%s|smooth:%s|version:2.x", nrefs,
                    o->lowercase ? "lc" : "mixed", o->effective_order ? "yes" : "no",
                    o->tokenizer == QKV_BLEU_TOK_NONE ? "none" : "13a", smooth);
}
