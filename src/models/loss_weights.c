/* Per-token loss weights of a language-model batch (loss_weights.h). */
#include "loss_weights.h"

#include "qkv/ops.h"

qkv_tensor *qkv__model_loss_weights(qkv_ctx *ctx, const qkv_batch *b, const char *who) {
    qkv_tensor *w = NULL, *parts[2] = {b->mask, b->weights};
    for (int i = 0; i < 2; i++) {
        qkv_tensor *p = parts[i];
        if (!p) continue;
        if (p->dtype == QKV_I32) {
            if (!qkv_is_contiguous(p)) {
                qkv_error_set(QKV_ERR_INVALID, "%s: an int32 loss mask must be contiguous", who);
                return NULL;
            }
            qkv_tensor *f = qkv_ctx_tensor(ctx, QKV_F32, p->ndim, p->shape);
            if (!f) return NULL;
            int64_t n = qkv_numel(p);
            for (int64_t k = 0; k < n; k++) qkv_f32(f)[k] = (float)qkv_i32(p)[k];
            p = f;
        }
        w = w ? qkv_mul(ctx, w, p) : p;
        if (!w) return NULL;
    }
    return w;
}
