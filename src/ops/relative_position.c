/* T5's relative position bias: a learned table [num_buckets, H] looked up by the bucket of each (query, key)
 * offset, giving an additive attention bias [1, H, Tq, Tk] (qkv_sdpa_opts.bias).
 *
 * Buckets follow T5's _relative_position_bucket (Hugging Face transformers, modeling_t5.py) step by step, in the
 * same float32 arithmetic, so the same offsets land in the same buckets: with rel = key - query,
 *   bidirectional: half the buckets for rel > 0, the other half for rel <= 0, on |rel|;
 *   causal: only -min(rel, 0) (keys in the past), all buckets;
 * then n = num_buckets (halved if bidirectional), exact buckets for distances below n / 2 and logarithmically
 * wider ones up to max_distance, beyond which everything shares the last bucket.
 *
 * Backward: dtable[bucket(i, j), h] += dout[h, i, j]; each head is one task summing its (i, j) in order, so the
 * result does not depend on the thread count.
 */
#include <math.h>

#include "core/internal.h"
#include "qkv/attention.h"

int qkv_relative_position_bucket(int64_t rel, bool bidirectional, int num_buckets, int max_distance) {
    int bucket = 0, n = num_buckets;
    int64_t pos;
    if (bidirectional) {
        n /= 2;
        if (rel > 0) bucket += n;
        pos = rel < 0 ? -rel : rel;
    } else {
        pos = rel < 0 ? -rel : 0;
    }
    const int max_exact = n / 2;
    if (pos < max_exact) return bucket + (int)pos;
    /* torch: log(pos.float() / max_exact) / math.log(max_distance / max_exact) * (n - max_exact), in float32 with
     * the Python scalars rounded to float32, then truncated to an integer. */
    float r = logf((float)pos / (float)max_exact) / (float)log((double)max_distance / (double)max_exact);
    int64_t large = max_exact + (int64_t)(r * (float)(n - max_exact));
    if (large > n - 1) large = n - 1;
    return bucket + (int)large;
}

typedef struct {
    int32_t *bucket; /* [Tq * Tk] */
} rpb_saved;

static qkv_status rpb_backward(qkv_ctx *ctx, qkv_node *nd) {
    qkv_tensor *gt = qkv_grad_for(ctx, nd->in[0]);
    if (!gt) return QKV_OK;
    const rpb_saved *s = nd->saved;
    const int64_t H = nd->i[0], TT = nd->i[1];
    const float *dy = nd->out->grad->data;
    float *g = gt->data;
#pragma omp parallel for schedule(static) if (H * TT > (1 << 15))
    for (int64_t h = 0; h < H; h++) {
        const float *d = dy + h * TT;
        for (int64_t x = 0; x < TT; x++) g[(int64_t)s->bucket[x] * H + h] += d[x];
    }
    return QKV_OK;
}

qkv_tensor *qkv_relative_position_bias(qkv_ctx *ctx, qkv_tensor *table, int64_t Tq, int64_t Tk, int64_t q_offset,
                                       bool bidirectional, int max_distance) {
    if (!table) return NULL;
    if (!qkv__check_f32("relative_position_bias", table, "table")) return NULL;
    char sh[96];
    if (table->ndim != 2) {
        qkv_error_set(QKV_ERR_INVALID, "relative_position_bias: table %s should be [num_buckets, heads]",
                      qkv_shape_str(table, sh, sizeof sh));
        return NULL;
    }
    const int64_t nb = table->shape[0], H = table->shape[1];
    /* The exact range n / 2 (n halved when bidirectional) must hold one bucket, and the log range must be wider. */
    const int64_t max_exact = (bidirectional ? nb / 2 : nb) / 2;
    if (nb > 1 << 20 || max_exact < 1 || max_distance <= max_exact) {
        qkv_error_set(QKV_ERR_INVALID,
                      "relative_position_bias: %lld buckets (%s) with max_distance %d: need at least %d buckets and "
                      "max_distance > %lld",
                      (long long)nb, bidirectional ? "bidirectional" : "causal", max_distance, bidirectional ? 4 : 2,
                      (long long)max_exact);
        return NULL;
    }
    if (Tq < 0 || Tk < 0) {
        qkv_error_set(QKV_ERR_INVALID, "relative_position_bias: negative length Tq %lld, Tk %lld", (long long)Tq,
                      (long long)Tk);
        return NULL;
    }
    const float *t = qkv__contig_data(ctx, table);
    qkv_tensor *out = t ? qkv__out(ctx, QKV_F32, 4, (const int64_t[]){1, H, Tq, Tk}) : NULL;
    int32_t *bucket = out ? qkv_ctx_alloc(ctx, (size_t)(Tq * Tk + 1) * sizeof(int32_t)) : NULL;
    /* A bucket depends on j - i alone: one per offset, from -(Tq - 1 + q_offset) to Tk - 1 - q_offset. */
    int32_t *by_rel = bucket ? qkv_ctx_alloc(ctx, (size_t)(Tq + Tk) * sizeof(int32_t)) : NULL;
    if (!by_rel) return NULL;
    const int64_t rel0 = -(Tq - 1 + q_offset);
    for (int64_t r = 0; r + 1 < Tq + Tk; r++)
        by_rel[r] = qkv_relative_position_bucket(rel0 + r, bidirectional, (int)nb, max_distance);
    for (int64_t i = 0; i < Tq; i++)
        for (int64_t j = 0; j < Tk; j++) bucket[i * Tk + j] = by_rel[j - i + (Tq - 1)];
    float *y = out->data;
    for (int64_t h = 0; h < H; h++)
        for (int64_t x = 0; x < Tq * Tk; x++) y[h * Tq * Tk + x] = t[(int64_t)bucket[x] * H + h];
    qkv_node *nd = qkv_record(ctx, out, "relative_position_bias", rpb_backward, 1, &table);
    if (nd) {
        rpb_saved *s = qkv_ctx_alloc(ctx, sizeof *s);
        if (!s) return NULL;
        s->bucket = bucket;
        nd->saved = s;
        nd->i[0] = H;
        nd->i[1] = Tq * Tk;
    }
    return out;
}
