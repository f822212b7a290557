/* Data-parallel gradient averaging (docs/distributed.md): the trainable parameters' gradients, in buckets of
 * contiguous memory, summed over ranks with non-blocking allreduces that start while backward is still running.
 *
 * Buckets hold parameters in reverse collection order, the order in which backward finishes them (a model's last
 * layers come last in its collection and first in backward). A bucket's allreduce starts when the autograd hook
 * (qkv_ctx_set_grad_ready) has reported every parameter in it and every bucket before it has started (the same
 * order on every rank, as MPI requires); whatever backward never reported is sent at the end.
 * Each rank's gradient is that of the mean loss over its own slice, so it is scaled by its share of the global
 * batch's loss weight (tokens, or examples) before the sum: the result is the gradient of the mean over the global
 * batch, as one process with the whole batch would compute it. Summation in rank order (qkv_dist) makes the bits
 * the same on every rank, so every rank's optimiser makes the same step. */
#include <stdlib.h>
#include <string.h>

#include "qkv/dist.h"
#include "qkv/params.h"
#include "train_internal.h"

typedef struct bucket {
    int first, count;      /* entries [first, first + count) of gs->order */
    int64_t numel;
    int ready;             /* parameters of this bucket reported so far this step */
    qkv_dist_request req;
    float *buf;
} bucket;

struct grad_sync {
    qkv_params *params;
    int n;                 /* trainable parameters */
    qkv_tensor **order;    /* trainable parameters, reverse collection order */
    int *bucket_of;        /* by position in order */
    int64_t *offset;       /* of each parameter inside its bucket's buffer */
    qkv_tensor **sorted;   /* order's tensors by address, for the hook's lookup */
    int *sorted_pos;
    bool *reported;
    bucket *b;
    int n_buckets;
    int next;              /* the bucket to issue next: all ranks issue them in index order */
    float scale;
    qkv_status st;
};

static int by_address(const void *a, const void *b) {
    const qkv_tensor *const *x = a, *const *y = b;
    return (uintptr_t)*x < (uintptr_t)*y ? -1 : (uintptr_t)*x > (uintptr_t)*y;
}

void qkv__grad_sync_free(grad_sync *gs) {
    if (!gs) return;
    for (int i = 0; i < gs->n_buckets; i++) free(gs->b[i].buf);
    free(gs->b);
    free(gs->order);
    free(gs->bucket_of);
    free(gs->offset);
    free(gs->sorted);
    free(gs->sorted_pos);
    free(gs->reported);
    free(gs);
}

grad_sync *qkv__grad_sync_new(qkv_params *p, size_t bucket_bytes) {
    grad_sync *gs = calloc(1, sizeof *gs);
    int total = qkv_params_count(p);
    if (gs) {
        gs->params = p;
        gs->order = malloc(sizeof *gs->order * (size_t)(total + 1));
        gs->bucket_of = malloc(sizeof *gs->bucket_of * (size_t)(total + 1));
        gs->offset = malloc(sizeof *gs->offset * (size_t)(total + 1));
        gs->sorted = malloc(sizeof *gs->sorted * (size_t)(total + 1));
        gs->sorted_pos = malloc(sizeof *gs->sorted_pos * (size_t)(total + 1));
        gs->reported = calloc((size_t)(total + 1), sizeof *gs->reported);
        gs->b = calloc((size_t)(total + 1), sizeof *gs->b);
    }
    if (!gs || !gs->order || !gs->bucket_of || !gs->offset || !gs->sorted || !gs->sorted_pos || !gs->reported ||
        !gs->b) {
        qkv__grad_sync_free(gs);
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = total; i-- > 0;) {
        qkv_tensor *t = qkv_params_at(p, i);
        if (t->flags & QKV_FLAG_REQUIRES_GRAD) gs->order[gs->n++] = t;
    }
    /* bucket_bytes 0: one bucket, sent after backward (no overlap). */
    int64_t limit = bucket_bytes ? (int64_t)(bucket_bytes / sizeof(float)) : INT64_MAX;
    for (int j = 0; j < gs->n; j++) {
        int64_t numel = qkv_numel(gs->order[j]);
        bucket *cur = gs->n_buckets ? &gs->b[gs->n_buckets - 1] : NULL;
        if (!cur || (cur->numel > 0 && cur->numel + numel > limit)) {
            cur = &gs->b[gs->n_buckets++];
            cur->first = j;
        }
        gs->bucket_of[j] = gs->n_buckets - 1;
        gs->offset[j] = cur->numel;
        cur->numel += numel;
        cur->count++;
    }
    for (int i = 0; i < gs->n_buckets; i++) {
        gs->b[i].buf = malloc(sizeof(float) * (size_t)(gs->b[i].numel ? gs->b[i].numel : 1));
        if (!gs->b[i].buf) {
            qkv__grad_sync_free(gs);
            qkv_error_set(QKV_ERR_NOMEM, "out of memory for the gradient buckets");
            return NULL;
        }
    }
    for (int j = 0; j < gs->n; j++) gs->sorted[j] = gs->order[j];
    qsort(gs->sorted, (size_t)gs->n, sizeof *gs->sorted, by_address);
    for (int j = 0; j < gs->n; j++) {
        int at = 0;
        while (gs->order[at] != gs->sorted[j]) at++;
        gs->sorted_pos[j] = at;
    }
    return gs;
}

qkv_status qkv__grad_sync_bucket_bytes(size_t *bytes) {
    const char *v = getenv("QKV_DIST_BUCKET_MB");
    char *end = NULL;
    double mb = v && *v ? strtod(v, &end) : 4;
    if (v && *v && (*end || !(mb >= 0) || mb > 1048576))
        return qkv_error_set(QKV_ERR_INVALID, "QKV_DIST_BUCKET_MB: '%s' is not a size in MiB (0 .. 1048576; 0 = one "
                             "bucket after backward)", v);
    *bytes = (size_t)(mb * 1048576.0);
    return QKV_OK;
}

int qkv__grad_sync_buckets(const grad_sync *gs) { return gs->n_buckets; }

void qkv__grad_sync_begin(grad_sync *gs, float scale) {
    gs->scale = scale;
    gs->st = QKV_OK;
    gs->next = 0;
    memset(gs->reported, 0, sizeof *gs->reported * (size_t)gs->n);
    for (int i = 0; i < gs->n_buckets; i++) {
        gs->b[i].ready = 0;
        gs->b[i].req = -1;
    }
}

static void issue(grad_sync *gs, int i) {
    bucket *b = &gs->b[i];
    for (int j = b->first; j < b->first + b->count; j++) {
        const qkv_tensor *t = gs->order[j];
        float *dst = b->buf + gs->offset[j];
        int64_t n = qkv_numel(t);
        if (!t->grad) {
            memset(dst, 0, sizeof *dst * (size_t)n);
            continue;
        }
        const float *g = qkv_f32(t->grad);
        for (int64_t k = 0; k < n; k++) dst[k] = g[k] * gs->scale;
    }
    if (gs->st == QKV_OK) gs->st = qkv_dist_iallreduce_f32(b->buf, (size_t)b->numel, &b->req);
}

void qkv__grad_sync_ready(void *user, qkv_tensor *t) {
    grad_sync *gs = user;
    qkv_tensor **hit = bsearch(&t, gs->sorted, (size_t)gs->n, sizeof *gs->sorted, by_address);
    if (!hit) return;
    int j = gs->sorted_pos[hit - gs->sorted];
    if (gs->reported[j]) return;
    gs->reported[j] = true;
    gs->b[gs->bucket_of[j]].ready++;
    /* Non-blocking collectives must start in the same order on every rank, and the order in which backward finishes
     * parameters can differ between ranks (their slices differ): a complete bucket waits for those before it. */
    while (gs->next < gs->n_buckets && gs->b[gs->next].ready == gs->b[gs->next].count) issue(gs, gs->next++);
    qkv_dist_progress(); /* lets MPI move the buckets already issued */
}

qkv_status qkv__grad_sync_finish(grad_sync *gs, qkv_ctx *ctx) {
    while (gs->next < gs->n_buckets) issue(gs, gs->next++);
    qkv_status st = gs->st;
    for (int i = 0; i < gs->n_buckets; i++) {
        qkv_status w = qkv_dist_wait(gs->b[i].req);
        if (st == QKV_OK) st = w;
    }
    if (st) return st;
    for (int j = 0; j < gs->n; j++) {
        qkv_tensor *t = gs->order[j];
        const float *sum = gs->b[gs->bucket_of[j]].buf + gs->offset[j];
        int64_t n = qkv_numel(t), k = 0;
        if (!t->grad) /* no gradient on this rank: stays without one if no rank had one, as in one process */
            while (k < n && sum[k] == 0.0f) k++;
        if (k == n) continue;
        qkv_tensor *g = qkv_grad_for(ctx, t);
        if (!g) return qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        memcpy(g->data, sum, sizeof(float) * (size_t)n);
    }
    return QKV_OK;
}
