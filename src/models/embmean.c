/* Embedding -> masked mean -> Dense -> LogSoftmax. */
#include <math.h>

#include "qkv/embmean.h"
#include "qkv/ops.h"

qkv_status qkv_embmean_init(qkv_embmean *m, qkv_params *params, int64_t vocab, int64_t dim, int64_t classes,
                            qkv_rng *rng) {
    if (vocab < 1 || dim < 1 || classes < 2)
        return qkv_error_set(QKV_ERR_INVALID, "embmean: vocab %lld, dim %lld, classes %lld (need >= 1, >= 1, >= 2)",
                             (long long)vocab, (long long)dim, (long long)classes);
    m->vocab = vocab;
    m->dim = dim;
    m->classes = classes;
    m->emb = qkv_params_add(params, "embedding", "weight", QKV_DIMS(vocab, dim));
    m->w = qkv_params_add(params, "classifier", "weight", QKV_DIMS(classes, dim));
    m->b = qkv_params_add(params, "classifier", "bias", QKV_DIMS(classes));
    if (!m->emb || !m->w || !m->b) return qkv_last_status();
    float bound = 1.0f / sqrtf((float)dim);
    qkv_rng_fill_normal(rng, m->emb, 0.0f, 1.0f);
    qkv_rng_fill_uniform(rng, m->w, -bound, bound);
    qkv_rng_fill_uniform(rng, m->b, -bound, bound);
    return QKV_OK;
}

qkv_tensor *qkv_embmean_forward(qkv_ctx *ctx, const qkv_embmean *m, qkv_tensor *ids, qkv_tensor *mask) {
    if (!ids || !mask) return NULL;
    if (ids->ndim != 2 || mask->ndim != 2 || ids->shape[0] != mask->shape[0] || ids->shape[1] != mask->shape[1]) {
        qkv_error_set(QKV_ERR_INVALID, "embmean: ids and mask must both be [batch, time]");
        return NULL;
    }
    int64_t B = ids->shape[0], T = ids->shape[1];
    qkv_tensor *e = qkv_embedding(ctx, m->emb, ids);                     /* [B, T, D] */
    qkv_tensor *mk = qkv_reshape(ctx, mask, QKV_DIMS(B, T, 1));          /* [B, T, 1] */
    qkv_tensor *sum = qkv_sum(ctx, qkv_mul(ctx, e, mk), 1, false);       /* [B, D] */
    qkv_tensor *count = qkv_affine(ctx, qkv_sum(ctx, mask, 1, true), 1.0f, 1e-9f); /* [B, 1], no 0/0 */
    qkv_tensor *mean = qkv_div(ctx, sum, count);
    return qkv_log_softmax(ctx, qkv_linear(ctx, mean, m->w, m->b), -1); /* [B, C] */
}

void qkv_embmean_word_scores(const qkv_embmean *m, const int32_t *ids, int n, float *out) {
    const float *E = m->emb->data, *W = m->w->data;
    for (int t = 0; t < n; t++) {
        const float *e = E + (int64_t)ids[t] * m->dim;
        double s = 0;
        for (int64_t d = 0; d < m->dim; d++) s += (double)(W[m->dim + d] - W[d]) * e[d];
        out[t] = (float)(s / n);
    }
}
