/* The "pairs" task's data: rows of two texts and a duplicate label, the training split of duplicates, batches. */
#include <stdlib.h>
#include <string.h>

#include "pairs.h"
#include "qkv/data.h"

/* Ids of one text (cut to max_len) appended to the pool; *n their count. */
static qkv_status add_text(task *t, const char *path, const qkv_row *row, int field, split *s, int64_t *off,
                           int64_t *n) {
    int32_t *ids = NULL;
    size_t len = 0;
    qkv_status st = qkv__task_encode_ids(t, row->fields[field], row->lens[field], &ids, &len);
    if (st != QKV_OK) {
        free(ids);
        return qkv_error_set(st, "%s:%lld: %s", path, (long long)row->line, qkv_last_error());
    }
    if (len == 0) {
        free(ids);
        return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: text %d is empty (expected label<TAB>text1<TAB>text2 with "
                             "two non-empty texts)", path, (long long)row->line, field);
    }
    *off = s->pool_n;
    *n = (int64_t)len < t->max_len ? (int64_t)len : t->max_len;
    st = qkv__split_append(s, ids, *n);
    free(ids);
    return st;
}

qkv_status qkv__pairs_add_row(task *t, const char *path, const qkv_row *row, split *s) {
    if (row->n_fields != 3)
        return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: %d field(s), expected 3: label<TAB>text1<TAB>text2", path,
                             (long long)row->line, row->n_fields);
    const char *label = row->fields[0];
    if (strcmp(label, "0") && strcmp(label, "1"))
        return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: label '%s' must be 1 (duplicate) or 0", path,
                             (long long)row->line, label);
    int64_t off, n, toff, tn;
    qkv_status st = add_text(t, path, row, 1, s, &off, &n);
    if (st == QKV_OK) st = add_text(t, path, row, 2, s, &toff, &tn);
    example *e = st == QKV_OK ? qkv__split_example(s) : NULL;
    if (!e) return qkv_last_status();
    *e = (example){.off = off, .n = n, .toff = toff, .tn = tn, .label = label[0] == '1'};
    s->n_chars += (int64_t)(qkv_utf8_count(row->fields[1], row->lens[1]) + qkv_utf8_count(row->fields[2],
                                                                                             row->lens[2]));
    return QKV_OK;
}

qkv_status qkv__pairs_keep_duplicates(split *s, const char *path) {
    int64_t k = 0;
    for (int64_t i = 0; i < s->n; i++)
        if (s->ex[i].label == 1) s->ex[k++] = s->ex[i];
    s->n = k;
    if (k < 2)
        return qkv_error_set(QKV_ERR_FORMAT, "%s: %lld duplicate pair(s) (label 1); training needs at least 2, "
                             "each batch's pairs being one another's negatives", path, (long long)k);
    return QKV_OK;
}

/* Token ids [B, W] and mask of one side: pool[off .. off + n) of each example, pad after. Both sides are padded to
 * one width W (the longest text of either side), so that a shared encoder can take both as one stacked batch
 * (Parallel of a shared layer); the mask keeps the padding out of every result. */
static qkv_status side(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t B, bool second,
                       qkv_tensor **ids, qkv_tensor **mask, int64_t *real) {
    int64_t W = 1;
    for (int64_t i = 0; i < B; i++) {
        const example *e = &s->ex[idx[i]];
        if (e->n > W) W = e->n;
        if (e->tn > W) W = e->tn;
    }
    *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, W));
    *mask = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, W));
    if (!*ids || !*mask) return qkv_last_status();
    int32_t *id = qkv_i32(*ids);
    float *m = qkv_f32(*mask);
    for (int64_t i = 0; i < B * W; i++) id[i] = t->pad;
    for (int64_t i = 0; i < B; i++) {
        const example *e = &s->ex[idx[i]];
        int64_t n = second ? e->tn : e->n;
        const int32_t *x = s->pool + (second ? e->toff : e->off);
        for (int64_t j = 0; j < n; j++) {
            id[i * W + j] = x[j];
            m[i * W + j] = 1.0f;
        }
        *real += n;
    }
    return QKV_OK;
}

qkv_status qkv__pairs_batch_make(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t B,
                                 qkv_batch *b, int64_t *tokens) {
    memset(b, 0, sizeof *b);
    int64_t real = 0;
    bool pairs = B > 0 && s->ex[idx[0]].tn > 0;
    qkv_status st = side(ctx, t, s, idx, B, false, &b->ids, &b->mask, &real);
    if (st == QKV_OK && pairs) st = side(ctx, t, s, idx, B, true, &b->src_ids, &b->src_mask, &real);
    if (st == QKV_OK && !(b->labels = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B)))) st = qkv_last_status();
    if (st != QKV_OK) return st;
    for (int64_t i = 0; i < B; i++) qkv_i32(b->labels)[i] = s->ex[idx[i]].label;
    b->n_tokens = B;
    if (tokens) *tokens = real;
    return QKV_OK;
}
