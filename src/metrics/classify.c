/* Accuracy, masked/sequence accuracy, confusion matrix with per-class, macro and micro precision/recall/F1
 * (scikit-learn's definitions with zero_division=0), and perplexity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/metrics.h"

static double ratio(int64_t a, int64_t b) { return b ? (double)a / (double)b : 0.0; }
static double fmeasure(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0.0; }

qkv_status qkv_metric_accuracy(const int32_t *pred, const int32_t *gold, size_t n, double *out) {
    if (!pred || !gold || !out) return qkv_error_set(QKV_ERR_INVALID, "accuracy: pred, gold and out must not be NULL");
    if (n == 0) return qkv_error_set(QKV_ERR_INVALID, "accuracy: no examples");
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) ok += pred[i] == gold[i];
    *out = (double)ok / (double)n;
    return QKV_OK;
}

qkv_status qkv_metric_masked_accuracy(const int32_t *pred, const int32_t *gold, const uint8_t *mask, size_t n_seq,
                                      size_t seq_len, int32_t ignore_index, double *token_acc, double *seq_acc) {
    if (!pred || !gold) return qkv_error_set(QKV_ERR_INVALID, "masked accuracy: pred and gold must not be NULL");
    if (n_seq == 0 || seq_len == 0)
        return qkv_error_set(QKV_ERR_INVALID, "masked accuracy: empty input (%zu sequences of %zu)", n_seq, seq_len);
    int64_t tok = 0, tok_ok = 0, seqs = 0, seqs_ok = 0;
    for (size_t s = 0; s < n_seq; s++) {
        int64_t counted = 0;
        bool all = true;
        for (size_t j = 0; j < seq_len; j++) {
            size_t i = s * seq_len + j;
            if ((mask && !mask[i]) || gold[i] == ignore_index) continue;
            counted++;
            if (pred[i] == gold[i]) tok_ok++;
            else all = false;
        }
        tok += counted;
        if (counted) {
            seqs++;
            seqs_ok += all;
        }
    }
    if (tok == 0) return qkv_error_set(QKV_ERR_INVALID, "masked accuracy: every position is masked out");
    if (token_acc) *token_acc = ratio(tok_ok, tok);
    if (seq_acc) *seq_acc = ratio(seqs_ok, seqs);
    return QKV_OK;
}

void qkv_classify_free(qkv_classify_result *r) {
    if (!r) return;
    free(r->confusion);
    free(r->per_class);
    free(r->support);
    memset(r, 0, sizeof *r);
}

qkv_status qkv_metric_classify(const int32_t *pred, const int32_t *gold, size_t n, int n_classes,
                               qkv_classify_result *out) {
    if (!pred || !gold || !out) return qkv_error_set(QKV_ERR_INVALID, "classify: pred, gold and out must not be NULL");
    memset(out, 0, sizeof *out);
    if (n == 0) return qkv_error_set(QKV_ERR_INVALID, "classify: no examples");
    if (n_classes < 1 || n_classes > 65536)
        return qkv_error_set(QKV_ERR_INVALID, "classify: n_classes = %d is outside 1..65536", n_classes);
    for (size_t i = 0; i < n; i++) {
        if (gold[i] < 0 || gold[i] >= n_classes)
            return qkv_error_set(QKV_ERR_RANGE, "classify: gold[%zu] = %d is outside 0..%d", i, gold[i],
                                 n_classes - 1);
        if (pred[i] < 0 || pred[i] >= n_classes)
            return qkv_error_set(QKV_ERR_RANGE, "classify: pred[%zu] = %d is outside 0..%d", i, pred[i],
                                 n_classes - 1);
    }
    size_t K = (size_t)n_classes;
    out->n_classes = n_classes;
    out->confusion = calloc(K * K, sizeof *out->confusion);
    out->per_class = calloc(K, sizeof *out->per_class);
    out->support = calloc(K, sizeof *out->support);
    int64_t *npred = calloc(K, sizeof *npred);
    if (!out->confusion || !out->per_class || !out->support || !npred) {
        free(npred);
        qkv_classify_free(out);
        return qkv_error_set(QKV_ERR_NOMEM, "classify: out of memory for %d classes", n_classes);
    }
    for (size_t i = 0; i < n; i++) {
        out->confusion[(size_t)gold[i] * K + (size_t)pred[i]]++;
        out->support[gold[i]]++;
        npred[pred[i]]++;
    }
    int64_t tp_sum = 0, present = 0;
    qkv_prf macro = {0, 0, 0};
    for (size_t k = 0; k < K; k++) {
        int64_t tp = out->confusion[k * K + k];
        tp_sum += tp;
        qkv_prf *c = &out->per_class[k];
        c->precision = ratio(tp, npred[k]);
        c->recall = ratio(tp, out->support[k]);
        c->f1 = fmeasure(c->precision, c->recall);
        if (npred[k] || out->support[k]) { /* sklearn averages over labels seen in gold or pred */
            present++;
            macro.precision += c->precision;
            macro.recall += c->recall;
            macro.f1 += c->f1;
        }
    }
    free(npred);
    out->macro = (qkv_prf){macro.precision / (double)present, macro.recall / (double)present,
                           macro.f1 / (double)present};
    out->accuracy = ratio(tp_sum, (int64_t)n);
    out->micro = (qkv_prf){out->accuracy, out->accuracy, out->accuracy};
    return QKV_OK;
}

qkv_status qkv_metric_perplexity(double nll_sum, int64_t n_tokens, double *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "perplexity: out is NULL");
    if (n_tokens <= 0) return qkv_error_set(QKV_ERR_INVALID, "perplexity: token count %lld must be positive",
                                            (long long)n_tokens);
    if (!isfinite(nll_sum)) return qkv_error_set(QKV_ERR_NUMERIC, "perplexity: summed NLL is %g", nll_sum);
    if (nll_sum < 0) return qkv_error_set(QKV_ERR_INVALID, "perplexity: summed NLL %g is negative", nll_sum);
    *out = exp(nll_sum / (double)n_tokens);
    return QKV_OK;
}
