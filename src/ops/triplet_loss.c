/* Triplet loss with mean and closest negatives over a batch of positive pairs (ops.h: qkv_triplet_loss).
 *
 * Forward: s = a b^T in double, then per row i the positive s_ii, the mean of the row's negatives and the closest
 * negative k_i (first maximum of c_i., see ops.h). Only which terms are active and k_i are kept for the backward:
 * with g the upstream gradient and w = g / B, the loss's gradient on s is, per active row,
 *     closest term:  ds_ii -= w,  ds_ik += w            (the latter unless k_i = i: c_ii is a constant)
 *     mean term:     ds_ii -= w,  ds_ij += w / (B - 1)   for every j != i
 * and da = ds b, db = ds^T a. Rows are independent in the forward; the batch sum of the loss and both products of
 * the backward are serial in a fixed order, so results do not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "qkv/ops.h"

typedef struct {
    const float *a, *b; /* contiguous [B, D] */
    int64_t B, D;
    int32_t *closest;   /* k_i, or -1 when the closest term of row i is inactive (or not asked for) */
    uint8_t *mean_on;   /* the mean term of row i is active */
} triplet_saved;

static qkv_status triplet_backward(qkv_ctx *ctx, qkv_node *nd) {
    const triplet_saved *s = nd->saved;
    int64_t B = s->B, D = s->D;
    double w = (double)qkv_f32(nd->out->grad)[0] / (double)B;
    double *ds = qkv_ctx_alloc(ctx, sizeof(double) * (size_t)(B * B));
    if (!ds) return qkv_last_status();
    memset(ds, 0, sizeof(double) * (size_t)(B * B));
    for (int64_t i = 0; i < B; i++) {
        double *row = ds + i * B;
        if (s->closest[i] >= 0) {
            row[i] -= w;
            if (s->closest[i] != i) row[s->closest[i]] += w;
        }
        if (s->mean_on[i]) {
            double share = w / (double)(B - 1);
            for (int64_t j = 0; j < B; j++) row[j] += j == i ? -w : share;
        }
    }
    qkv_tensor *ga = qkv_grad_for(ctx, nd->in[0]), *gb = qkv_grad_for(ctx, nd->in[1]);
    if (ga) {
        float *g = ga->data;
#pragma omp parallel for schedule(static) if (B * B * D > (1 << 16))
        for (int64_t i = 0; i < B; i++)
            for (int64_t d = 0; d < D; d++) {
                double acc = 0;
                for (int64_t j = 0; j < B; j++) acc += ds[i * B + j] * s->b[j * D + d];
                g[i * D + d] += (float)acc;
            }
    }
    if (gb) {
        float *g = gb->data;
#pragma omp parallel for schedule(static) if (B * B * D > (1 << 16))
        for (int64_t j = 0; j < B; j++)
            for (int64_t d = 0; d < D; d++) {
                double acc = 0;
                for (int64_t i = 0; i < B; i++) acc += ds[i * B + j] * s->a[i * D + d];
                g[j * D + d] += (float)acc;
            }
    }
    return QKV_OK;
}

qkv_tensor *qkv_triplet_loss(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, float margin, qkv_triplet_terms terms) {
    if (!a || !b) return NULL;
    if (!qkv__check_f32("triplet_loss", a, "a") || !qkv__check_f32("triplet_loss", b, "b")) return NULL;
    if (a->ndim != 2 || b->ndim != 2 || a->shape[0] != b->shape[0] || a->shape[1] != b->shape[1] ||
        a->shape[0] < 2) {
        qkv_error_set(QKV_ERR_INVALID, "triplet_loss: a and b must both be [B, D] with B >= 2 (got [%lld, %lld] "
                      "and [%lld, %lld])", (long long)a->shape[0], (long long)(a->ndim > 1 ? a->shape[1] : 0),
                      (long long)b->shape[0], (long long)(b->ndim > 1 ? b->shape[1] : 0));
        return NULL;
    }
    if ((unsigned)terms < 1 || (unsigned)terms > QKV_TRIPLET_BOTH || !isfinite(margin)) {
        qkv_error_set(QKV_ERR_INVALID, "triplet_loss: terms %d must be mean (1), closest (2) or both (3), and the "
                      "margin finite (got %g)", (int)terms, (double)margin);
        return NULL;
    }
    if (!(a = qkv_contiguous(ctx, a)) || !(b = qkv_contiguous(ctx, b))) return NULL;
    int64_t B = a->shape[0], D = a->shape[1];
    triplet_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
    double *sim = qkv_ctx_alloc(ctx, sizeof(double) * (size_t)(B * B));
    double *row_loss = qkv_ctx_alloc(ctx, sizeof(double) * (size_t)B);
    if (!s || !sim || !row_loss) return NULL;
    *s = (triplet_saved){.a = a->data, .b = b->data, .B = B, .D = D,
                         .closest = qkv_ctx_alloc(ctx, sizeof(int32_t) * (size_t)B),
                         .mean_on = qkv_ctx_alloc(ctx, (size_t)B)};
    qkv_tensor *out = qkv__out(ctx, QKV_F32, QKV_DIMS(1));
    if (!s->closest || !s->mean_on || !out) return NULL;
    const float *x = s->a, *y = s->b;
#pragma omp parallel for schedule(static) if (B * B * D > (1 << 16))
    for (int64_t i = 0; i < B; i++) {
        double *si = sim + i * B;
        for (int64_t j = 0; j < B; j++) {
            double acc = 0;
            for (int64_t d = 0; d < D; d++) acc += (double)x[i * D + d] * y[j * D + d];
            si[j] = (float)acc; /* float32 cosines, as the reference computes them */
        }
        double pos = si[i], neg_sum = 0, best = -2;
        int64_t k = i;
        for (int64_t j = 0; j < B; j++) {
            if (j == i) continue;
            neg_sum += si[j];
            double c = si[j] <= pos ? si[j] : si[j] - 2;
            if (c > best) {
                best = c;
                k = j;
            }
        }
        double l1 = margin - pos + best, l2 = margin - pos + neg_sum / (double)(B - 1);
        bool closest = (terms & QKV_TRIPLET_CLOSEST_NEGATIVE) && l1 > 0;
        bool mean = (terms & QKV_TRIPLET_MEAN_NEGATIVE) && l2 > 0;
        /* k == i: the maximum is c_ii = -2, a constant; the term's gradient is then -1 on s_ii alone. */
        s->closest[i] = closest ? (int32_t)k : -1;
        s->mean_on[i] = mean;
        row_loss[i] = (closest ? l1 : 0) + (mean ? l2 : 0);
    }
    double total = 0;
    for (int64_t i = 0; i < B; i++) total += row_loss[i];
    qkv_f32(out)[0] = (float)(total / (double)B);
    qkv_tensor *in[2] = {a, b};
    qkv_node *nd = qkv_record(ctx, out, "triplet_loss", triplet_backward, 2, in);
    if (nd) nd->saved = s;
    return out;
}
