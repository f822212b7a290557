/* Batching: an epoch's order of examples and the padded tensors of one batch.
 *
 * The order of epoch e is a pure function of (seed, e): a Philox stream keyed by the data seed starting at block
 * e << 32 drives a Fisher-Yates shuffle. So the data position of a run is just (epoch, batch index), and resuming
 * rebuilds the same plan. Bucketing sorts windows of 32 batches by length (ties by shuffled position), cuts them
 * into batches, then shuffles the batches, so padding is small while batch order stays random. */
#include <stdlib.h>
#include <string.h>

#include "pairs.h"
#include "qkv/rng.h"
#include "train_internal.h"

void qkv__batch_plan_free(batch_plan *p) {
    free(p->order);
    free(p->starts);
    memset(p, 0, sizeof *p);
}

static void shuffle(int64_t *a, int64_t n, qkv_rng *rng) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)qkv_rng_below(rng, (uint32_t)(i + 1));
        int64_t tmp = a[i];
        a[i] = a[j];
        a[j] = tmp;
    }
}

typedef struct {
    int64_t len, pos, idx;
} keyed;

static int cmp_keyed(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

qkv_status qkv__batch_plan_build(batch_plan *p, const split *s, int64_t batch, bool shuffled, bool bucket,
                                 uint64_t seed, uint64_t epoch) {
    qkv__batch_plan_free(p);
    int64_t n = s->n, nb = (n + batch - 1) / batch;
    p->order = malloc(sizeof *p->order * (size_t)(n ? n : 1));
    p->starts = malloc(sizeof *p->starts * (size_t)(nb + 1));
    int64_t *border = malloc(sizeof *border * (size_t)(nb ? nb : 1));
    keyed *k = malloc(sizeof *k * (size_t)(n ? n : 1));
    int64_t *tmp = malloc(sizeof *tmp * (size_t)(n ? n : 1));
    if (!p->order || !p->starts || !border || !k || !tmp) {
        free(border);
        free(k);
        free(tmp);
        qkv__batch_plan_free(p);
        return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    }
    qkv_rng rng = {.seed = seed, .counter = epoch << 32};
    for (int64_t i = 0; i < n; i++) p->order[i] = i;
    if (shuffled && n > (int64_t)UINT32_MAX) shuffled = false; /* qkv_rng_below takes 32-bit bounds */
    if (shuffled) shuffle(p->order, n, &rng);
    if (shuffled && bucket) {
        int64_t window = batch * 32;
        for (int64_t w = 0; w < n; w += window) {
            int64_t m = n - w < window ? n - w : window;
            for (int64_t i = 0; i < m; i++) {
                const example *e = &s->ex[p->order[w + i]];
                k[i] = (keyed){.len = e->n + e->tn, .pos = i, .idx = p->order[w + i]};
            }
            qsort(k, (size_t)m, sizeof *k, cmp_keyed);
            for (int64_t i = 0; i < m; i++) p->order[w + i] = k[i].idx;
        }
        /* Shuffle whole batches; the last (possibly short) batch moves like the others. */
        for (int64_t b = 0; b < nb; b++) border[b] = b;
        shuffle(border, nb, &rng);
        int64_t at = 0;
        for (int64_t b = 0; b < nb; b++) {
            int64_t from = border[b] * batch, cnt = n - from < batch ? n - from : batch;
            p->starts[b] = at;
            memcpy(tmp + at, p->order + from, sizeof *tmp * (size_t)cnt);
            at += cnt;
        }
        memcpy(p->order, tmp, sizeof *tmp * (size_t)n);
    } else {
        for (int64_t b = 0; b < nb; b++) p->starts[b] = b * batch;
    }
    p->starts[nb] = n;
    p->n_batches = nb;
    free(border);
    free(k);
    free(tmp);
    return QKV_OK;
}

qkv_status qkv__batch_make(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t B, qkv_batch *b,
                           int64_t *tokens) {
    if (t->kind == TASK_PAIRS) return qkv__pairs_batch_make(ctx, t, s, idx, B, b, tokens);
    if (t->kind == TASK_SUMMARIZE) return qkv__summ_batch_make(ctx, t, s, idx, B, b, tokens);
    if (t->kind == TASK_QA) return qkv__qa_batch_make(ctx, t, s, idx, B, b, tokens);
    if (t->kind == TASK_PRETRAIN) return qkv__pretrain_batch_make(ctx, t, s, idx, B, b, tokens);
    memset(b, 0, sizeof *b);
    int64_t T = 1, S = 1, real = 0;
    for (int64_t i = 0; i < B; i++) {
        const example *e = &s->ex[idx[i]];
        int64_t len = t->kind == TASK_LM ? e->n - 1 : t->kind == TASK_SEQ2SEQ ? e->tn - 1 : e->n; /* tagging: n */
        if (len > T) T = len;
        if (t->kind == TASK_SEQ2SEQ && e->n > S) S = e->n;
    }
    b->ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T));
    b->mask = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, T));
    if (!b->ids || !b->mask) return qkv_last_status();
    int32_t *ids = qkv_i32(b->ids), *tg = NULL, *sids = NULL;
    float *mask = qkv_f32(b->mask), *smask = NULL;
    for (int64_t i = 0; i < B * T; i++) ids[i] = t->kind == TASK_SEQ2SEQ ? t->tgt_pad : t->pad;
    if (t->kind == TASK_CLASSIFY) {
        b->labels = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B));
        if (!b->labels) return qkv_last_status();
        bool pairs = false;
        for (int64_t i = 0; i < B; i++) pairs |= s->ex[idx[i]].seg > 0;
        if (pairs && !(b->type_ids = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(B, T)))) return qkv_last_status();
    } else {
        b->targets = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T));
        if (!b->targets) return qkv_last_status();
        tg = qkv_i32(b->targets);
        for (int64_t i = 0; i < B * T; i++) tg[i] = t->kind == TASK_SEQ2SEQ ? t->tgt_pad : t->pad;
    }
    if (t->kind == TASK_SEQ2SEQ && t->per_example) {
        /* The loss is sum(w l) / sum(w) over target tokens: weights 1/n_i make it the mean of example means. */
        b->weights = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, T));
        if (!b->weights) return qkv_last_status();
    }
    if (t->kind == TASK_SEQ2SEQ) {
        b->src_ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, S));
        b->src_mask = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, S));
        if (!b->src_ids || !b->src_mask) return qkv_last_status();
        sids = qkv_i32(b->src_ids);
        smask = qkv_f32(b->src_mask);
        for (int64_t i = 0; i < B * S; i++) sids[i] = t->pad;
    }
    int64_t counted = 0;
    for (int64_t i = 0; i < B; i++) {
        const example *e = &s->ex[idx[i]];
        const int32_t *x = s->pool + e->off;
        switch (t->kind) {
        case TASK_CLASSIFY:
            for (int64_t j = 0; j < e->n; j++) {
                ids[i * T + j] = x[j];
                mask[i * T + j] = 1.0f;
                if (b->type_ids) qkv_i32(b->type_ids)[i * T + j] = e->seg > 0 && j >= e->seg;
            }
            qkv_i32(b->labels)[i] = e->label;
            real += e->n;
            counted++;
            break;
        case TASK_LM:
            for (int64_t j = 0; j + 1 < e->n; j++) {
                ids[i * T + j] = x[j];
                tg[i * T + j] = x[j + 1];
                mask[i * T + j] = 1.0f;
            }
            real += e->n - 1;
            counted += e->n - 1;
            break;
        case TASK_TAGGING: /* tag ids at the sentence's tokens; padded targets stay in range, masked out */
            for (int64_t j = 0; j < e->n; j++) {
                ids[i * T + j] = x[j];
                tg[i * T + j] = s->pool[e->toff + j];
                mask[i * T + j] = 1.0f;
            }
            for (int64_t j = e->n; j < T; j++) tg[i * T + j] = 0;
            real += e->n;
            counted += e->n;
            break;
        case TASK_SEQ2SEQ: {
            const int32_t *y = s->pool + e->toff;
            for (int64_t j = 0; j < e->n; j++) {
                sids[i * S + j] = x[j];
                smask[i * S + j] = 1.0f;
            }
            for (int64_t j = 0; j + 1 < e->tn; j++) {
                ids[i * T + j] = y[j];
                tg[i * T + j] = y[j + 1];
                mask[i * T + j] = 1.0f;
                if (b->weights) qkv_f32(b->weights)[i * T + j] = 1.0f / (float)(e->tn - 1);
            }
            real += e->n + e->tn - 1;
            counted += e->tn - 1;
            break;
        }
        case TASK_PAIRS: break; /* made by qkv__pairs_batch_make */
        case TASK_SUMMARIZE: break; /* qkv__summ_batch_make */
        case TASK_QA: break;        /* qkv__qa_batch_make */
        case TASK_PRETRAIN: break;  /* qkv__pretrain_batch_make */
        }
    }
    b->n_tokens = counted;
    if (tokens) *tokens = real;
    return QKV_OK;
}
