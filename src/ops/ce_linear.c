/* Cross-entropy of a linear output layer, computed only on the rows that count.
 *
 * A language model's head (h [N, d] -> logits [N, V]) is the largest GEMM of a step, and its softmax the largest
 * elementwise pass. When a per-token weight is 0 (a summarizer's article, padding) or the target is ignore_index,
 * the row adds exactly 0 to the loss, to its denominator and to every gradient, so those rows are dropped before
 * the projection: index_select gathers the rest (its backward scatters their gradients back into h) and the
 * targets and weights are gathered alike. The loss and the gradients are the dense path's up to the order of
 * floating-point sums over rows. The dense path is kept wherever gathering cannot be exact or gains nothing:
 * reduction none (the result has one entry per token), every row counting, none counting (the dense path defines
 * the NaN of 0 / 0), and any input the dense path would reject (its error message is the one to give). */
#include <stdint.h>

#include "core/internal.h"
#include "qkv/ops.h"

static qkv_tensor *dense(qkv_ctx *ctx, qkv_tensor *h, qkv_tensor *w, qkv_tensor *bias, qkv_tensor *targets,
                         const qkv_ce_opts *o) {
    return qkv_cross_entropy(ctx, qkv_linear(ctx, h, w, bias), targets, o);
}

qkv_tensor *qkv_cross_entropy_linear(qkv_ctx *ctx, qkv_tensor *h, qkv_tensor *w, qkv_tensor *bias,
                                     qkv_tensor *targets, const qkv_ce_opts *opts) {
    if (!h || !w || !targets) return NULL;
    qkv_ce_opts o = opts ? *opts : qkv_ce_defaults();
    if (o.reduction == QKV_REDUCE_NONE || targets->dtype != QKV_I32 || h->dtype != QKV_F32 || w->ndim != 2 ||
        h->ndim < 1 || h->ndim != targets->ndim + 1)
        return dense(ctx, h, w, bias, targets, &o);
    int64_t n = qkv_numel(targets), d = h->shape[h->ndim - 1], c = w->shape[0];
    if (n == 0 || n > INT32_MAX || qkv_numel(h) != n * d) return dense(ctx, h, w, bias, targets, &o);
    const qkv_tensor *tw = o.token_weight;
    if (tw && (tw->dtype != QKV_F32 || qkv_numel(tw) != n)) return dense(ctx, h, w, bias, targets, &o);
    const int32_t *t = (const int32_t *)qkv__contig_data(ctx, targets);
    const float *wt = tw ? qkv__contig_data(ctx, tw) : NULL;
    if (!t || (tw && !wt)) return NULL;
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        if (t[i] != o.ignore_index && (t[i] < 0 || t[i] >= c)) return dense(ctx, h, w, bias, targets, &o);
        kept += t[i] != o.ignore_index && (!wt || wt[i] != 0.0f);
    }
    if (kept == n || kept == 0) return dense(ctx, h, w, bias, targets, &o);
    qkv_tensor *idx = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(kept));
    qkv_tensor *tk = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(kept));
    qkv_tensor *wk = wt ? qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(kept)) : NULL;
    if (!idx || !tk || (wt && !wk)) return NULL;
    for (int64_t i = 0, j = 0; i < n; i++) {
        if (t[i] == o.ignore_index || (wt && wt[i] == 0.0f)) continue;
        qkv_i32(idx)[j] = (int32_t)i;
        qkv_i32(tk)[j] = t[i];
        if (wk) qkv_f32(wk)[j] = wt[i];
        j++;
    }
    qkv_tensor *rows = qkv_index_select(ctx, qkv_reshape(ctx, h, QKV_DIMS(n, d)), 0, idx);
    o.token_weight = wk;
    return qkv_cross_entropy(ctx, qkv_linear(ctx, rows, w, bias), tk, &o);
}
