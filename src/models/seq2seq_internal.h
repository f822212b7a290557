/* Helpers shared by the translation models (lstm_seq2seq.c, transformer_seq2seq.c, t5.c): the masked loss, the
 * attention maps of an encoder-decoder and the bits of decoding state they keep. Not installed. */
#ifndef QKV_SEQ2SEQ_INTERNAL_H
#define QKV_SEQ2SEQ_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "qkv/model.h"
#include "qkv/ops.h"
#include "qkv/seq2seq.h"
#include "row_moves.h"

/* Mean cross-entropy of logits [B, T, V] against targets [B, T], counting tokens where mask (1 = count) is set,
 * times the optional per-token weights. */
static inline qkv_tensor *s2s_masked_loss(qkv_ctx *ctx, qkv_tensor *logits, const qkv_batch *b) {
    if (!logits) return NULL;
    if (!b->targets) {
        qkv_error_set(QKV_ERR_INVALID, "seq2seq loss: the batch has no targets");
        return NULL;
    }
    qkv_ce_opts o = qkv_ce_defaults();
    qkv_tensor *w = NULL;
    if (b->mask) {
        qkv_tensor *pad = qkv_nn_padding_of(ctx, b->mask);
        w = qkv_affine(ctx, pad, -1.0f, 1.0f);
        if (!w) return NULL;
    }
    if (b->weights) w = w ? qkv_mul(ctx, w, b->weights) : b->weights;
    o.token_weight = w ? qkv_contiguous(ctx, w) : NULL;
    return qkv_cross_entropy(ctx, logits, b->targets, &o);
}

/* One row copy of s2s_move_rows (row_moves.h): rows of `bytes` every `row` floats from base; -1 is aside. */
typedef struct {
    float *base, *aside;
    int64_t row;
    size_t bytes;
} s2s_rows;

static inline void s2s_copy_row(void *user, int dst, int src) {
    s2s_rows *r = user;
    memcpy(dst < 0 ? r->aside : r->base + (int64_t)dst * r->row, src < 0 ? r->aside : r->base + (int64_t)src * r->row,
           r->bytes);
}

/* The attention maps of a Transformer encoder-decoder's forward: cross-attention first (slot l = decoder layer l), so
 * readers that only want the alignments need not know about the others, then the encoder's self-attention and the
 * decoder's causal self-attention. */
static inline void s2s_fill_maps(qkv_attention_maps *maps, int n_enc, int n_dec, qkv_tensor *const *enc,
                                 qkv_tensor *const *dec, qkv_tensor *const *cross) {
    static const char *const what[3] = {"decoder %d cross", "encoder %d self", "decoder %d self"};
    static const char *const kind[3] = {"cross", "self", "causal"};
    qkv_tensor *const *w[3] = {cross, enc, dec};
    memset(maps, 0, sizeof *maps);
    for (int k = 0; k < 3; k++)
        for (int l = 0; l < (k == 1 ? n_enc : n_dec); l++) {
            snprintf(maps->name[maps->n_layers], sizeof maps->name[0], what[k], l + 1);
            maps->kind[maps->n_layers] = kind[k];
            maps->weights[maps->n_layers++] = w[k][l];
        }
}

/* Gathers the rows of a contiguous decoding-state tensor: *view (the first rows of `full` along axis 0) becomes rows
 * from[0..n) of itself (at most full's rows); when the row count changes, *view becomes a new view (in keep) of the
 * first rows of full; scratch goes to work. Rows stay put unless they change: row i
 * is copied only when it is new (i >= rows) or, for a tensor that depends only on a row's source (encoder states,
 * source padding; per_src), when its source changes (src_of[from[i]] != src_of[i], src_of giving the source of each
 * current row), else when from[i] != i. Beam search moves rows only within their sentence, so its reorders copy
 * none of the per-source tensors, and a hypothesis that stays in its row costs nothing. Changed rows are copied in
 * place, each once (row_moves.h). Along axis 1 only the first t1 entries move (0: all). */
static inline qkv_status s2s_move_rows(qkv_ctx *keep, qkv_ctx *work, qkv_tensor *full, qkv_tensor **view,
                                       const int32_t *from, int n, int rows, int64_t t1, bool per_src,
                                       const int32_t *src_of) {
    int64_t d1 = full->ndim > 1 ? full->shape[1] : 1, inner = qkv_numel(full) / (full->shape[0] * (d1 ? d1 : 1));
    int64_t row = d1 * inner, block = (t1 > 0 && t1 < d1 ? t1 : d1) * inner;
#define S2S_CHANGED(i) ((i) >= rows || (per_src ? src_of[from[i]] != src_of[i] : from[i] != (i)))
    bool any = false;
    for (int i = 0; i < n && !any; i++) any = S2S_CHANGED(i);
    if (any) {
        int span = n > rows ? n : rows; /* row indices either side of the move */
        int64_t n_idx = 3 * (int64_t)span;
        qkv_tensor *idx = qkv_ctx_tensor(work, QKV_I32, 1, &n_idx), *aside = qkv_ctx_tensor(work, QKV_F32, 1, &block);
        if (!idx || !aside) return qkv_last_status();
        int32_t *todo = qkv_i32(idx);
        memset(todo, 0, sizeof(int32_t) * (size_t)span);
        for (int i = 0; i < n; i++) todo[i] = S2S_CHANGED(i);
        s2s_rows r = {qkv_f32(full), qkv_f32(aside), row, sizeof(float) * (size_t)block};
        row_moves(from, n, todo, todo + span, todo + 2 * span, span, s2s_copy_row, &r);
    }
#undef S2S_CHANGED
    if (n != (*view)->shape[0]) {
        qkv_tensor *v = n == full->shape[0] ? full : qkv_slice(keep, full, 0, 0, n, 1);
        if (!v) return qkv_last_status();
        *view = v;
    }
    return QKV_OK;
}

/* src_of[i] becomes src_of[from[i]] for the n new rows (tmp: scratch of n entries). */
static inline void s2s_move_src_of(int32_t *src_of, int32_t *tmp, const int32_t *from, int n) {
    for (int i = 0; i < n; i++) tmp[i] = src_of[from[i]];
    memcpy(src_of, tmp, sizeof(int32_t) * (size_t)n);
}

/* Checks a reorder's row count and indices against the rows a state holds now (rows) and at most (cap). */
static inline qkv_status s2s_check_reorder(const int32_t *from, int n_rows, int rows, int cap) {
    if (n_rows < 1 || n_rows > cap)
        return qkv_error_set(QKV_ERR_RANGE, "decode reorder: %d rows (the state holds 1..%d)", n_rows, cap);
    for (int r = 0; r < n_rows; r++)
        if (from[r] < 0 || from[r] >= rows)
            return qkv_error_set(QKV_ERR_RANGE, "decode reorder: row %d out of [0, %d)", from[r], rows);
    return QKV_OK;
}

/* int32 [n] context tensor holding a copy of v. */
static inline qkv_tensor *s2s_ids(qkv_ctx *ctx, const int32_t *v, int64_t n) {
    qkv_tensor *t = qkv_ctx_tensor(ctx, QKV_I32, 1, &n);
    if (t) memcpy(t->data, v, sizeof(int32_t) * (size_t)n);
    return t;
}

/* Source ids [n_src, S] and the padding mask (1 = padded) from lengths, both in ctx; also the row -> source map
 * (rows_per_src consecutive rows per source) as an int32 [rows] index. */
static inline qkv_status s2s_source(qkv_ctx *ctx, const int32_t *src, const int32_t *lengths, int n_src, int S,
                                   int rows_per_src, qkv_tensor **ids, qkv_tensor **pad, qkv_tensor **row_src) {
    if (!src || n_src < 1 || S < 1 || rows_per_src < 1)
        return qkv_error_set(QKV_ERR_INVALID, "decode: need at least one source sentence of length >= 1 (got %d x %d, "
                             "%d rows each)", n_src, S, rows_per_src);
    *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(n_src, S));
    *pad = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(n_src, S));
    *row_src = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS((int64_t)n_src * rows_per_src));
    if (!*ids || !*pad || !*row_src) return qkv_last_status();
    memcpy((*ids)->data, src, sizeof(int32_t) * (size_t)n_src * (size_t)S);
    for (int i = 0; i < n_src; i++) {
        int len = lengths ? lengths[i] : S;
        if (len < 1 || len > S)
            return qkv_error_set(QKV_ERR_INVALID, "decode: source %d has length %d (need 1..%d)", i, len, S);
        for (int t = len; t < S; t++) qkv_f32(*pad)[(int64_t)i * S + t] = 1.0f;
        for (int r = 0; r < rows_per_src; r++) qkv_i32(*row_src)[i * rows_per_src + r] = i;
    }
    return QKV_OK;
}

/* Contexts a decoding state uses: `keep` holds what lives across steps, `work` is reset at every step. Both in
 * inference mode (no tape, no dropout). */
static inline qkv_status s2s_contexts(qkv_ctx **keep, qkv_ctx **work) {
    *keep = qkv_ctx_new();
    *work = qkv_ctx_new();
    if (!*keep || !*work) {
        qkv_ctx_free(*keep);
        qkv_ctx_free(*work);
        return qkv_error_set(QKV_ERR_NOMEM, "decode: out of memory");
    }
    qkv_ctx_set_grad(*keep, false);
    qkv_ctx_set_grad(*work, false);
    qkv_ctx_set_training(*keep, false);
    qkv_ctx_set_training(*work, false);
    return QKV_OK;
}

#endif
