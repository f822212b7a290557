/* Span (extractive QA) loss (ops.h: qkv_span_loss): the mean of the start and end cross-entropies, each a softmax
 * over the positions a row allows (its context), averaged over the batch.
 *
 * Forward per row and side: lse = log sum_{j allowed} exp(x_j) (max-shifted, accumulated in double), loss = lse -
 * x_gold. Backward: d x_j = g / (2B) * (exp(x_j - lse) - [j = gold]) at allowed j, 0 elsewhere. Rows are independent
 * and the batch sum is serial, so results do not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "qkv/ops.h"

typedef struct {
    const float *x[2];    /* contiguous start / end logits [B, T] */
    const float *allowed; /* [B, T] float mask, or NULL */
    const int32_t *gold;  /* [B, 2] */
    double *lse;          /* [2, B] */
    int64_t B, T;
} span_saved;

static bool allowed_at(const span_saved *s, int64_t b, int64_t j) { return !s->allowed || s->allowed[b * s->T + j] != 0; }

static qkv_status span_backward(qkv_ctx *ctx, qkv_node *nd) {
    const span_saved *s = nd->saved;
    double w = (double)qkv_f32(nd->out->grad)[0] / (2.0 * (double)s->B);
    for (int side = 0; side < 2; side++) {
        qkv_tensor *g = qkv_grad_for(ctx, nd->in[side]);
        if (!g) continue;
        float *gd = g->data;
#pragma omp parallel for schedule(static) if (s->B * s->T > (1 << 15))
        for (int64_t b = 0; b < s->B; b++) {
            const float *x = s->x[side] + b * s->T;
            double lse = s->lse[side * s->B + b];
            int32_t gold = s->gold[b * 2 + side];
            for (int64_t j = 0; j < s->T; j++) {
                if (!allowed_at(s, b, j)) continue;
                double d = exp((double)x[j] - lse) - (j == gold ? 1.0 : 0.0);
                gd[b * s->T + j] += (float)(w * d);
            }
        }
    }
    return QKV_OK;
}

qkv_tensor *qkv_span_loss(qkv_ctx *ctx, qkv_tensor *start_logits, qkv_tensor *end_logits, const qkv_tensor *spans,
                          const qkv_tensor *allowed) {
    if (!start_logits || !end_logits || !spans) return NULL;
    if (!qkv__check_f32("span_loss", start_logits, "start_logits") ||
        !qkv__check_f32("span_loss", end_logits, "end_logits"))
        return NULL;
    int64_t B = start_logits->ndim == 2 ? start_logits->shape[0] : 0, T = B ? start_logits->shape[1] : 0;
    bool ok = B > 0 && T > 0 && end_logits->ndim == 2 && end_logits->shape[0] == B && end_logits->shape[1] == T &&
              spans->dtype == QKV_I32 && spans->ndim == 2 && spans->shape[0] == B && spans->shape[1] == 2 &&
              (!allowed || (allowed->dtype == QKV_F32 && allowed->ndim == 2 && allowed->shape[0] == B &&
                            allowed->shape[1] == T));
    if (!ok) {
        qkv_error_set(QKV_ERR_INVALID, "span_loss: expected start and end logits [B, T] (float32), int32 spans [B, 2] "
                      "and an optional float32 allowed mask [B, T]");
        return NULL;
    }
    if (!(start_logits = qkv_contiguous(ctx, start_logits)) || !(end_logits = qkv_contiguous(ctx, end_logits)))
        return NULL;
    const qkv_tensor *sp = spans, *al = allowed;
    if (!qkv_is_contiguous(sp) && !(sp = qkv_contiguous(ctx, (qkv_tensor *)spans))) return NULL;
    if (al && !qkv_is_contiguous(al) && !(al = qkv_contiguous(ctx, (qkv_tensor *)allowed))) return NULL;
    span_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
    double *lse = qkv_ctx_alloc(ctx, sizeof(double) * (size_t)(2 * B));
    qkv_tensor *out = qkv__out(ctx, QKV_F32, QKV_DIMS(1));
    if (!s || !lse || !out) return NULL;
    *s = (span_saved){.x = {start_logits->data, end_logits->data}, .allowed = al ? al->data : NULL, .gold = sp->data,
                      .lse = lse, .B = B, .T = T};
    for (int64_t b = 0; b < B; b++)
        for (int side = 0; side < 2; side++) {
            int32_t g = s->gold[b * 2 + side];
            if (g < 0 || g >= T || !allowed_at(s, b, g)) {
                qkv_error_set(QKV_ERR_RANGE, "span_loss: row %lld: gold %s position %d is outside [0, %lld) or not an "
                              "allowed position", (long long)b, side ? "end" : "start", g, (long long)T);
                return NULL;
            }
        }
    double total = 0;
    for (int side = 0; side < 2; side++)
        for (int64_t b = 0; b < B; b++) {
            const float *x = s->x[side] + b * T;
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < T; j++)
                if (allowed_at(s, b, j) && x[j] > m) m = x[j];
            for (int64_t j = 0; j < T; j++)
                if (allowed_at(s, b, j)) sum += exp((double)x[j] - m);
            lse[side * B + b] = m + log(sum);
            total += lse[side * B + b] - (double)x[s->gold[b * 2 + side]];
        }
    qkv_f32(out)[0] = (float)(total / (2.0 * (double)B));
    qkv_tensor *in[2] = {start_logits, end_logits};
    qkv_node *nd = qkv_record(ctx, out, "span_loss", span_backward, 2, in);
    if (nd) nd->saved = s;
    return out;
}
