/* ZeRO-1 (docs/distributed.md): the optimiser's state sharded over ranks. Each trainable parameter has one owner
 * rank, which alone keeps its optimiser state (Adam's two moments: twice the model's size) and updates it; a step
 * is a reduce-scatter of the gradients (each rank receives the summed gradients of what it owns), the owners'
 * updates, and an allgather of the updated parameters. Memory for optimiser state falls to ~1/N per rank.
 *
 * Ownership is by whole parameters (as FairScale's OSS shards), so the optimiser's per-tensor rules (weight decay
 * off for 1-d tensors, per-prefix learning rates) apply unchanged. Parameters go, largest first, to the least loaded
 * rank; every rank's share is one block of a flat buffer, padded to the largest share, which is the layout
 * MPI_Reduce_scatter_block and MPI_Allgather need. Sums are rank-ordered as in the replicated mode, so a sharded
 * run follows one process to rounding (the gradient norm's terms are added in another order). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/dist.h"
#include "train_internal.h"

struct zero_shard {
    qkv_optim *opt;
    int n, rank, world;
    int *owner;      /* by optimiser slot */
    int64_t *offset; /* in its owner's block */
    int64_t *load;   /* floats each rank owns */
    int64_t block;
    float *full;     /* world x block */
    float *mine;     /* block */
    float *scratch;  /* the largest parameter, for broadcasts this rank neither sends nor keeps */
    int64_t largest;
};

qkv_status qkv__zero_wanted(bool *on) {
    const char *v = getenv("QKV_DIST_ZERO");
    *on = v && !strcmp(v, "1");
    if (v && *v && strcmp(v, "0") && strcmp(v, "1"))
        return qkv_error_set(QKV_ERR_INVALID, "QKV_DIST_ZERO: '%s' is not 0 or 1", v);
    return QKV_OK;
}

void qkv__zero_free(zero_shard *z) {
    if (!z) return;
    free(z->owner);
    free(z->offset);
    free(z->load);
    free(z->full);
    free(z->mine);
    free(z->scratch);
    free(z);
}

zero_shard *qkv__zero_new(qkv_params *p, qkv_optim *o) {
    (void)p;
    zero_shard *z = calloc(1, sizeof *z);
    if (!z) goto nomem;
    z->opt = o;
    z->n = qkv__optim_slots(o);
    z->rank = qkv_dist_rank();
    z->world = qkv_dist_size();
    z->owner = malloc(sizeof *z->owner * (size_t)(z->n + 1));
    z->offset = malloc(sizeof *z->offset * (size_t)(z->n + 1));
    z->load = calloc((size_t)z->world, sizeof *z->load);
    int *by_size = malloc(sizeof *by_size * (size_t)(z->n + 1));
    if (!z->owner || !z->offset || !z->load || !by_size) {
        free(by_size);
        goto nomem;
    }
    /* Largest first (ties: collection order) to the least loaded rank (ties: the lowest): the same on every rank. */
    for (int i = 0; i < z->n; i++) by_size[i] = i;
    for (int i = 1; i < z->n; i++)
        for (int j = i; j > 0; j--) {
            int64_t a = qkv_numel(qkv__optim_slot_param(o, by_size[j - 1]));
            int64_t b = qkv_numel(qkv__optim_slot_param(o, by_size[j]));
            if (a >= b) break;
            int t = by_size[j];
            by_size[j] = by_size[j - 1];
            by_size[j - 1] = t;
        }
    for (int k = 0; k < z->n; k++) {
        int i = by_size[k], best = 0;
        for (int q = 1; q < z->world; q++)
            if (z->load[q] < z->load[best]) best = q;
        z->owner[i] = best;
        z->load[best] += qkv_numel(qkv__optim_slot_param(o, i));
    }
    free(by_size);
    memset(z->load, 0, sizeof *z->load * (size_t)z->world);
    for (int i = 0; i < z->n; i++) { /* offsets in collection order inside each block */
        int64_t m = qkv_numel(qkv__optim_slot_param(o, i));
        z->offset[i] = z->load[z->owner[i]];
        z->load[z->owner[i]] += m;
        if (m > z->largest) z->largest = m;
    }
    for (int q = 0; q < z->world; q++)
        if (z->load[q] > z->block) z->block = z->load[q];
    z->full = malloc(sizeof(float) * (size_t)(z->block * z->world + 1));
    z->mine = malloc(sizeof(float) * (size_t)(z->block + 1));
    z->scratch = malloc(sizeof(float) * (size_t)(z->largest + 1));
    if (!z->full || !z->mine || !z->scratch) goto nomem;
    for (int i = 0; i < z->n; i++)
        if (z->owner[i] != z->rank) qkv__optim_slot_set_remote(o, i, true);
    return z;
nomem:
    qkv__zero_free(z);
    qkv_error_set(QKV_ERR_NOMEM, "out of memory for ZeRO-1 buffers");
    return NULL;
}

static float *place(zero_shard *z, int i) { return z->full + (int64_t)z->owner[i] * z->block + z->offset[i]; }

qkv_status qkv__zero_reduce(zero_shard *z, qkv_ctx *ctx, float scale) {
    for (int q = 0; q < z->world; q++) /* padding */
        memset(z->full + q * z->block + z->load[q], 0, sizeof(float) * (size_t)(z->block - z->load[q]));
    for (int i = 0; i < z->n; i++) {
        const qkv_tensor *t = qkv__optim_slot_param(z->opt, i);
        float *dst = place(z, i);
        int64_t m = qkv_numel(t);
        if (!t->grad) {
            memset(dst, 0, sizeof *dst * (size_t)m);
            continue;
        }
        const float *g = qkv_f32(t->grad);
        for (int64_t k = 0; k < m; k++) dst[k] = g[k] * scale;
    }
    qkv_status st = qkv_dist_reduce_scatter_f32(z->full, z->mine, (size_t)z->block);
    if (st) return st;
    for (int i = 0; i < z->n; i++) {
        if (z->owner[i] != z->rank) continue;
        qkv_tensor *t = qkv__optim_slot_param(z->opt, i);
        const float *sum = z->mine + z->offset[i];
        int64_t m = qkv_numel(t), k = 0;
        if (!t->grad) /* as one process: no gradient anywhere, none here */
            while (k < m && sum[k] == 0.0f) k++;
        if (k == m) continue;
        qkv_tensor *g = qkv_grad_for(ctx, t);
        if (!g) return qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        memcpy(g->data, sum, sizeof(float) * (size_t)m);
    }
    return QKV_OK;
}

qkv_status qkv__zero_grad_check(zero_shard *z, double *norm, const char **bad) {
    double sq = 0;
    int64_t first = 0; /* n - index of the first bad owned parameter, 0 none: the maximum over ranks is the first */
    for (int i = 0; i < z->n; i++) {
        const qkv_tensor *t = qkv__optim_slot_param(z->opt, i);
        if (z->owner[i] != z->rank || !t->grad) continue;
        const float *g = qkv_f32(t->grad);
        for (int64_t k = 0, m = qkv_numel(t); k < m; k++) {
            if (!isfinite(g[k]) && !first) first = z->n - i;
            sq += (double)g[k] * g[k];
        }
    }
    qkv_status st = qkv_dist_allreduce_f64(&sq, 1);
    if (st == QKV_OK) st = qkv_dist_allreduce_max_i64(&first, 1);
    *norm = sqrt(sq);
    *bad = first ? qkv__optim_slot_param(z->opt, (int)(z->n - first))->name : NULL;
    return st;
}

qkv_status qkv__zero_clip_norm(zero_shard *z, float max_norm) {
    double total_sq = 0; /* qkv_clip_grad_norm's arithmetic, over the shards */
    for (int i = 0; i < z->n; i++) {
        const qkv_tensor *t = qkv__optim_slot_param(z->opt, i);
        if (z->owner[i] != z->rank || !t->grad) continue;
        const float *g = qkv_f32(t->grad);
        double s = 0;
        for (int64_t k = 0, m = qkv_numel(t); k < m; k++) s += (double)g[k] * g[k];
        float norm_i = (float)sqrt(s);
        total_sq += (double)norm_i * norm_i;
    }
    qkv_status st = qkv_dist_allreduce_f64(&total_sq, 1);
    if (st) return st;
    float total = (float)sqrt(total_sq);
    float coef = max_norm / (total + 1e-6f);
    if (!isfinite(total) || coef >= 1.0f) return QKV_OK;
    for (int i = 0; i < z->n; i++) {
        qkv_tensor *t = qkv__optim_slot_param(z->opt, i);
        if (z->owner[i] != z->rank || !t->grad) continue;
        float *g = qkv_f32(t->grad);
        for (int64_t k = 0, m = qkv_numel(t); k < m; k++) g[k] *= coef;
    }
    return QKV_OK;
}

qkv_status qkv__zero_gather(zero_shard *z) {
    for (int i = 0; i < z->n; i++)
        if (z->owner[i] == z->rank)
            memcpy(z->mine + z->offset[i], qkv__optim_slot_param(z->opt, i)->data,
                   sizeof(float) * (size_t)qkv_numel(qkv__optim_slot_param(z->opt, i)));
    memset(z->mine + z->load[z->rank], 0, sizeof(float) * (size_t)(z->block - z->load[z->rank]));
    qkv_status st = qkv_dist_allgather(z->mine, z->full, sizeof(float) * (size_t)z->block);
    if (st) return st;
    for (int i = 0; i < z->n; i++) {
        qkv_tensor *t = qkv__optim_slot_param(z->opt, i);
        memcpy(t->data, place(z, i), sizeof(float) * (size_t)qkv_numel(t));
    }
    return QKV_OK;
}

qkv_status qkv__zero_collect(zero_shard *z, bool collect) {
    for (int i = 0; i < z->n; i++) {
        if (z->owner[i] == 0) continue;
        if (!collect) {
            if (z->rank == 0) qkv__optim_slot_set_remote(z->opt, i, true);
            continue;
        }
        if (z->rank == 0) {
            qkv_status st = qkv__optim_slot_set_remote(z->opt, i, false);
            if (st) return st; /* rank 0 out of memory: the others time out; nothing better to do mid-collective */
        }
        int64_t m = qkv_numel(qkv__optim_slot_param(z->opt, i));
        for (int which = 0; which < qkv__optim_states_per_slot(z->opt); which++) {
            /* Into rank 0's fresh state from the owner's; ranks that keep neither receive into scratch. */
            qkv_tensor *s = qkv__optim_slot_state(z->opt, i, which);
            qkv_status st = qkv_dist_bcast(s ? s->data : z->scratch, sizeof(float) * (size_t)m, z->owner[i]);
            if (st) return st;
        }
    }
    return QKV_OK;
}
