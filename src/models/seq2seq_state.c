/* Incremental decoding state of the Transformer encoder-decoders (seq2seq_state.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "seq2seq_internal.h"
#include "seq2seq_state.h"
#include "ops/log_softmax_rows.h"
#include "ops/row_attention.h"

qkv_status qkv__s2s_state_init(s2s_kv_state *s, int n_src, int rows_per_src, int src_len, int max_steps,
                               int n_layers, const char *who) {
    *s = (s2s_kv_state){.rows = n_src * rows_per_src, .cap = n_src * rows_per_src, .S = src_len,
                        .max_steps = max_steps, .n_layers = n_layers};
    qkv_status st = s2s_contexts(&s->keep, &s->work);
    if (st) {
        s->keep = s->work = NULL; /* s2s_contexts freed them */
        return st;
    }
    s->src_of = malloc(sizeof(int32_t) * (size_t)(s->cap > 0 ? s->cap : 1));
    s->src_tmp = malloc(sizeof(int32_t) * (size_t)(s->cap > 0 ? s->cap : 1));
    if (!s->src_of || !s->src_tmp) return qkv_error_set(QKV_ERR_NOMEM, "%s decode: out of memory", who);
    for (int r = 0; r < s->cap; r++) s->src_of[r] = r / rows_per_src;
    return QKV_OK;
}

void qkv__s2s_state_release(s2s_kv_state *s) {
    qkv_ctx_free(s->keep);
    qkv_ctx_free(s->work);
    free(s->src_of);
    free(s->src_tmp);
    s->keep = s->work = NULL;
    s->src_of = s->src_tmp = NULL;
}

qkv_status qkv__s2s_state_pad(s2s_kv_state *s, qkv_tensor *pad, int64_t H, int64_t dk) {
    /* One row of padding per (source, head): the cross-attention treats each head of each source as one source
     * (ops/row_attention.h) */
    const int64_t n_src = pad->shape[0], S = s->S;
    s->H = H;
    s->dk = dk;
    s->pad = qkv_ctx_tensor(s->keep, QKV_F32, QKV_DIMS(n_src * H, S));
    qkv_tensor *p = qkv_contiguous(s->work, pad);
    if (!s->pad || !p) return qkv_last_status();
    for (int64_t i = 0; i < n_src; i++)
        for (int64_t h = 0; h < H; h++)
            memcpy(qkv_f32(s->pad) + (i * H + h) * S, qkv_f32(p) + i * S, sizeof(float) * (size_t)S);
    return QKV_OK;
}

qkv_status qkv__s2s_state_layer(s2s_kv_state *s, int l, qkv_tensor *kk, qkv_tensor *vv) {
    qkv_ctx *k = s->keep;
    if (!kk || !vv) return qkv_last_status();
    s->ck[l] = qkv_ctx_tensor(k, QKV_F32, 4, kk->shape);
    s->cv[l] = qkv_ctx_tensor(k, QKV_F32, 4, vv->shape);
    s->kc[l] = qkv_ctx_zeros(k, QKV_F32, QKV_DIMS(s->rows, s->max_steps, s->H, s->dk));
    s->vc[l] = qkv_ctx_zeros(k, QKV_F32, QKV_DIMS(s->rows, s->max_steps, s->H, s->dk));
    if (!s->ck[l] || !s->cv[l] || !s->kc[l] || !s->vc[l] || qkv_tensor_copy(s->ck[l], kk) ||
        qkv_tensor_copy(s->cv[l], vv))
        return qkv_last_status();
    return QKV_OK;
}

/* The state's per-row tensors as slots: each layer's self-attention kc, vc. */
static int slots(s2s_kv_state *s, qkv_tensor **slot[S2S_SLOTS]) {
    int n = 0;
    for (int l = 0; l < s->n_layers; l++) {
        slot[n++] = &s->kc[l];
        slot[n++] = &s->vc[l];
    }
    return n;
}

void qkv__s2s_state_seal(s2s_kv_state *s) {
    qkv_tensor **slot[S2S_SLOTS];
    for (int i = 0, n = slots(s, slot); i < n; i++) s->full[i] = *slot[i];
}

qkv_status qkv__s2s_state_self_kv(s2s_kv_state *s, int l, qkv_tensor *k, qkv_tensor *v, int64_t H, int64_t dk,
                                  qkv_tensor **K, qkv_tensor **V) {
    qkv_ctx *w = s->work;
    const int64_t R = s->rows;
    qkv_tensor *kslot = qkv_slice(w, s->kc[l], 1, s->t, s->t + 1, 1), *vslot = qkv_slice(w, s->vc[l], 1, s->t, s->t + 1, 1);
    if (!kslot || !vslot || qkv_tensor_copy(kslot, qkv_reshape(w, k, QKV_DIMS(R, 1, H, dk))) ||
        qkv_tensor_copy(vslot, qkv_reshape(w, v, QKV_DIMS(R, 1, H, dk))))
        return qkv_last_status();
    const int perm[4] = {0, 2, 1, 3};
    *K = qkv_permute(w, qkv_slice(w, s->kc[l], 1, 0, s->t + 1, 1), perm);
    *V = qkv_permute(w, qkv_slice(w, s->vc[l], 1, 0, s->t + 1, 1), perm);
    return *K && *V ? QKV_OK : qkv_last_status();
}

qkv_tensor *qkv__s2s_state_cross(s2s_kv_state *s, int l, qkv_tensor *q, float scale, qkv_tensor **weights) {
    qkv_ctx *w = s->work;
    const int64_t R = s->rows, H = s->H, dk = s->dk, S = s->S;
    q = qkv_contiguous(w, q);
    if (!q) return NULL;
    if (qkv_numel(q) != R * H * dk) {
        qkv_error_set(QKV_ERR_INVALID, "seq2seq decode: cross-attention query of %lld values for %lld rows of %lld x "
                      "%lld", (long long)qkv_numel(q), (long long)R, (long long)H, (long long)dk);
        return NULL;
    }
    qkv_tensor *out = qkv_ctx_tensor(w, QKV_F32, QKV_DIMS(R, 1, H * dk));
    qkv_tensor *wt = qkv_ctx_tensor(w, QKV_F32, QKV_DIMS(R, H, 1, S));
    qkv_tensor *src = qkv_ctx_tensor(w, QKV_I32, QKV_DIMS(R * H));
    if (!out || !wt || !src) return NULL;
    /* Head h of row r reads head h of its source: (source, head) s * H + h of keys [n_src * H, S, dk]. */
    int32_t *sh = qkv_i32(src);
    for (int64_t r = 0; r < R; r++)
        for (int64_t h = 0; h < H; h++) sh[r * H + h] = (int32_t)(s->src_of[r] * H + h);
    qkv__row_attention(qkv_f32(q), R * H, dk, sh, qkv_f32(s->ck[l]), qkv_f32(s->cv[l]), dk, qkv_f32(s->pad), S,
                       scale, qkv_f32(out), qkv_f32(wt));
    if (weights) *weights = wt;
    return out;
}

qkv_status qkv__s2s_state_reorder(s2s_kv_state *s, const int32_t *from, int n_rows) {
    qkv_ctx_reset(s->work);
    qkv_status rc = s2s_check_reorder(from, n_rows, s->rows, s->cap);
    if (rc) return rc;
    qkv_tensor **slot[S2S_SLOTS];
    for (int i = 0, n = slots(s, slot); i < n; i++) {
        /* only the first t steps of the self-attention caches hold anything */
        rc = s2s_move_rows(s->keep, s->work, s->full[i], slot[i], from, n_rows, s->rows, s->t > 0 ? s->t : 1, false,
                           s->src_of);
        if (rc) return rc;
    }
    s2s_move_src_of(s->src_of, s->src_tmp, from, n_rows);
    s->rows = n_rows;
    return QKV_OK;
}

qkv_status qkv__s2s_state_emit(s2s_kv_state *s, qkv_ctx *w, qkv_tensor *logits, qkv_tensor *cw, float *logprobs,
                               float *attn) {
    if (logits || !s->raw) {
        logits = qkv_contiguous(w, logits);
        if (!logits) return qkv_last_status();
        int64_t V = logits->shape[logits->ndim - 1];
        if (s->raw)
            memcpy(logprobs, logits->data, sizeof(float) * (size_t)s->rows * (size_t)V);
        else
            qkv__log_softmax_rows(logprobs, logits->data, s->rows, V);
    }
    if (attn) {
        qkv_tensor *a = qkv_contiguous(w, qkv_mean(w, cw, 1, false));
        if (!a) return qkv_last_status();
        memcpy(attn, a->data, sizeof(float) * (size_t)s->rows * (size_t)s->S);
    }
    s->t++;
    return QKV_OK;
}
