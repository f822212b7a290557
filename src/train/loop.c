/* The training loop: steps (optimiser + schedule + clipping), non-finite checks, periodic logs, evals on dev with
 * best-checkpoint tracking and early stopping, checkpoints with rotation, the run's log and plot. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "qkv/config.h"
#include "qkv/dist.h"
#include "qkv/plot.h"
#include "task_tagging.h"
#include "train_internal.h"


static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void path_of(char *out, size_t size, const char *dir, const char *name) {
    snprintf(out, size, "%s/%s", dir, name);
}

/* ---- curves for the plot --------------------------------------------------------------------------------------- */

typedef struct curve {
    double *x, *y;
    size_t n, cap;
} curve;

typedef struct curves {
    curve train, dev, metric;
    char metric_name[32];
} curves;

static void curve_add(curve *c, double x, double y) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        double *nx = realloc(c->x, sizeof *nx * cap), *ny = nx ? realloc(c->y, sizeof *ny * cap) : NULL;
        if (nx) c->x = nx;
        if (!nx || !ny) return; /* a plot with a point missing is better than no training */
        c->y = ny;
        c->cap = cap;
    }
    c->x[c->n] = x;
    c->y[c->n++] = y;
}

static void curves_free(curves *c) {
    curve *all[] = {&c->train, &c->dev, &c->metric};
    for (int i = 0; i < 3; i++) {
        free(all[i]->x);
        free(all[i]->y);
    }
}

static void curves_note(curves *c, const cJSON *rec) {
    const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(rec, "kind"));
    double step = cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "step"));
    if (!kind) return;
    if (!strcmp(kind, "train")) curve_add(&c->train, step, cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "loss")));
    if (!strcmp(kind, "eval")) {
        curve_add(&c->dev, step, cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "loss")));
        if (strcmp(c->metric_name, "loss"))
            curve_add(&c->metric, step, cJSON_GetNumberValue(cJSON_GetObjectItem(rec, c->metric_name)));
    }
}

static qkv_status curves_plot(const curves *c, const char *dir) {
    char path[4096];
    path_of(path, sizeof path, dir, "plot.svg");
    qkv_plot_series loss[2] = {{.label = "train loss", .x = c->train.x, .y = c->train.y, .n = c->train.n},
                               {.label = "dev loss", .x = c->dev.x, .y = c->dev.y, .n = c->dev.n}};
    char title[64];
    snprintf(title, sizeof title, "dev %s", c->metric_name);
    qkv_plot_series metric = {.label = title, .x = c->metric.x, .y = c->metric.y, .n = c->metric.n,
                              .color = "#2ca02c"};
    qkv_plot_panel panels[2] = {
        {.title = "loss", .xlabel = "step", .ylabel = "loss", .series = loss, .n_series = 2},
        {.title = title, .xlabel = "step", .ylabel = c->metric_name, .series = &metric, .n_series = 1},
    };
    return qkv_plot_write(path, panels, strcmp(c->metric_name, "loss") ? 2 : 1, 480, 320);
}

/* ---- the log ------------------------------------------------------------------------------------------------ */

/* Keeps the records of steps <= step (a resumed run redoes the later ones) and feeds them to the curves. */
static qkv_status log_restore(const char *dir, long step, curves *c) {
    char path[4096], tmp[4200];
    path_of(path, sizeof path, dir, "log.jsonl");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *in = fopen(path, "r");
    if (!in) return QKV_OK; /* no log yet */
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return qkv_error_set(QKV_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, in)) > 0) {
        cJSON *rec = cJSON_Parse(line);
        if (rec && cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "step")) <= (double)step) {
            fputs(line, out);
            curves_note(c, rec);
        }
        cJSON_Delete(rec);
    }
    free(line);
    fclose(in);
    if (fclose(out) || rename(tmp, path)) {
        unlink(tmp);
        return qkv_error_set(QKV_ERR_IO, "%s: cannot rewrite the log", path);
    }
    return QKV_OK;
}

typedef struct loop_ctx {
    qkv_run *r;
    const qkv_train_hooks *hooks;
    FILE *log;
    curves curves;
    const char *metric;
    bool maximise;
    double t0;
    double paused;  /* seconds spent in dev evaluations and checkpoints: not training time */
    /* Data-parallel (docs/distributed.md): this rank, the number of ranks, and the gradient buckets. Rank 0 alone
     * writes the log, evaluates and checkpoints; the others have no log (emit writes nothing). */
    int rank, world;
    grad_sync *sync;
    zero_shard *zero; /* QKV_DIST_ZERO=1: optimiser state sharded (zero.c) instead of replicated */
} loop_ctx;

/* Seconds of training proper since the loop started: train.max_seconds is a budget of these, so how often a run
 * evaluates or checkpoints does not change how much it learns in an equal-time comparison. */
static double train_seconds(const loop_ctx *L) { return now() - L->t0 - L->paused; }

/* Writes a record (and frees it). Timing fields go last so tools can strip them to compare runs. */
static qkv_status emit(loop_ctx *L, cJSON *rec) {
    if (!L->log) {
        cJSON_Delete(rec);
        return QKV_OK;
    }
    char *s = cJSON_PrintUnformatted(rec);
    cJSON_Delete(rec);
    if (!s) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    bool bad = fprintf(L->log, "%s\n", s) < 0 || fflush(L->log) != 0;
    if (L->hooks && L->hooks->on_record) L->hooks->on_record(L->hooks->user, s);
    cJSON_free(s);
    return bad ? qkv_error_set(QKV_ERR_IO, "%s/log.jsonl: write error", L->r->dir) : QKV_OK;
}

/* ---- checkpoints ---------------------------------------------------------------------------------------------- */

static qkv_status save(loop_ctx *L, const char *name) {
    qkv_run *r = L->r;
    char path[4096], best[32], acc[32], loop[512];
    path_of(path, sizeof path, r->dir, name);
    r->state.rng = *qkv_ctx_rng(r->ctx);
    snprintf(best, sizeof best, "%.17g", r->loop.best);
    snprintf(acc, sizeof acc, "%.17g", r->loop.acc_loss);
    snprintf(loop, sizeof loop,
             "{\"best\":\"%s\",\"best_step\":%ld,\"bad_evals\":%ld,\"acc_loss\":\"%s\",\"acc_steps\":%ld,"
             "\"nonfinite_skips\":%ld}",
             best, r->loop.best_step, r->loop.bad_evals, acc, r->loop.acc_steps, r->loop.nonfinite_skips);
    const char *keys[] = {"qkv.loop"}, *values[] = {loop};
    return qkv_checkpoint_save_ex(path, r->params, r->opt, &r->state, r->cfg_text, 1, keys, values);
}

/* Deletes all but the newest `keep` ckpt-<step> files. */
static void prune(const char *dir, long keep) {
    for (;;) {
        DIR *d = opendir(dir);
        if (!d) return;
        long oldest = -1, count = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            char tail[32];
            long step;
            if (sscanf(e->d_name, "ckpt-%ld%31s", &step, tail) == 2 && !strcmp(tail, ".safetensors")) {
                count++;
                if (oldest < 0 || step < oldest) oldest = step;
            }
        }
        closedir(d);
        if (count <= keep) return;
        char name[64], path[4096];
        snprintf(name, sizeof name, "ckpt-%ld.safetensors", oldest);
        path_of(path, sizeof path, dir, name);
        if (unlink(path)) return;
    }
}

static qkv_status checkpoint(loop_ctx *L) {
    double t_start = now();
    char name[64];
    snprintf(name, sizeof name, "ckpt-%ld.safetensors", L->r->state.step);
    qkv_status st = save(L, name);
    if (st == QKV_OK) prune(L->r->dir, L->r->set.train.keep_checkpoints);
    L->paused += now() - t_start;
    return st;
}

/* ---- one eval on dev ------------------------------------------------------------------------------------------ */

static qkv_status eval_dev(loop_ctx *L, bool *stop) {
    qkv_run *r = L->r;
    double t_start = now();
    cJSON *m = qkv__run_evaluate(r, &r->dev, r->set.eval.max_batches);
    if (!m) return qkv_last_status();
    double v = cJSON_GetNumberValue(cJSON_GetObjectItem(m, L->metric));
    bool better = isnan(r->loop.best) || (L->maximise ? v > r->loop.best : v < r->loop.best);
    if (better) {
        r->loop.best = v;
        r->loop.best_step = r->state.step;
        r->loop.bad_evals = 0;
    } else {
        r->loop.bad_evals++;
    }
    long patience = (long)r->set.eval.patience;
    *stop = patience > 0 && r->loop.bad_evals >= patience;
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "kind", "eval");
    cJSON_AddStringToObject(rec, "split", "dev");
    cJSON_AddNumberToObject(rec, "step", (double)r->state.step);
    for (cJSON *it = m->child; it; it = it->next)
        cJSON_AddItemToObject(rec, it->string, cJSON_Duplicate(it, true));
    cJSON_AddStringToObject(rec, "metric", L->metric);
    cJSON_AddBoolToObject(rec, "best", better);
    cJSON_AddNumberToObject(rec, "best_step", (double)r->loop.best_step);
    if (*stop) cJSON_AddBoolToObject(rec, "early_stop", true);
    cJSON_Delete(m);
    cJSON_AddNumberToObject(rec, "train_seconds", t_start - L->t0 - L->paused);
    cJSON_AddNumberToObject(rec, "elapsed", now() - L->t0);
    curves_note(&L->curves, rec);
    qkv_status st = emit(L, rec);
    if (st == QKV_OK && better) st = save(L, "best.safetensors");
    if (st == QKV_OK) st = curves_plot(&L->curves, r->dir);
    L->paused += now() - t_start;
    return st;
}

/* ---- non-finite checks ------------------------------------------------------------------------------------------ */

/* The first parameter whose gradient holds NaN/inf (NULL when all are finite), and the gradients' global norm. */
static const char *grad_check(qkv_params *p, double *norm) {
    double sq = 0;
    const char *bad = NULL;
    for (int i = 0; i < qkv_params_count(p); i++) {
        qkv_tensor *t = qkv_params_at(p, i);
        if (!t->grad) continue;
        const float *g = qkv_f32(t->grad);
        int64_t n = qkv_numel(t->grad);
        for (int64_t k = 0; k < n; k++) {
            if (!isfinite(g[k]) && !bad) bad = t->name;
            sq += (double)g[k] * g[k];
        }
    }
    *norm = sqrt(sq);
    return bad;
}

/* The first parameter holding NaN/inf values (what made a loss non-finite, when the weights blew up). */
static const char *weight_check(qkv_params *p) {
    for (int i = 0; i < qkv_params_count(p); i++) {
        qkv_tensor *t = qkv_params_at(p, i);
        const float *w = qkv_f32(t);
        for (int64_t k = 0, n = qkv_numel(t); t->dtype == QKV_F32 && k < n; k++)
            if (!isfinite(w[k])) return t->name;
    }
    return NULL;
}

/* param: the parameter with a non-finite gradient, or NULL when the loss itself is not finite. */
static qkv_status nonfinite(loop_ctx *L, double loss, const char *param) {
    qkv_run *r = L->r;
    const char *weight = param ? NULL : weight_check(r->params);
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "kind", "nonfinite");
    cJSON_AddNumberToObject(rec, "step", (double)r->state.step + 1);
    cJSON_AddStringToObject(rec, "what", param ? "gradient" : "loss");
    if (param) cJSON_AddStringToObject(rec, "param", param);
    if (weight) cJSON_AddStringToObject(rec, "nonfinite_weight", weight);
    cJSON_AddStringToObject(rec, "loss", isnan(loss) ? "nan" : isfinite(loss) ? "finite" : "inf");
    cJSON_AddBoolToObject(rec, "applied", false);
    qkv_status st = emit(L, rec);
    r->loop.nonfinite_skips++;
    long max = (long)r->set.train.max_nan_skips;
    if (st == QKV_OK && r->loop.nonfinite_skips > max)
        st = qkv_error_set(QKV_ERR_NUMERIC,
                           "step %ld: non-finite %s%s%s%s%s, %ld steps in a row (train.max_nan_skips = %ld); stopping",
                           r->state.step + 1, param ? "gradient of " : "loss", param ? param : "",
                           weight ? " (non-finite values in " : "", weight ? weight : "", weight ? ")" : "",
                           r->loop.nonfinite_skips, max);
    return st;
}

/* ---- the loop ------------------------------------------------------------------------------------------------- */

static qkv_status next_batch(loop_ctx *L, const int64_t **idx, int64_t *count) {
    qkv_run *r = L->r;
    int64_t bs = r->set.train.batch_size;
    bool shuffle = r->set.data.shuffle, bucket = r->set.data.bucket;
    if (r->mt.n) return qkv__mt_next_batch(r, idx, count); /* multi-task: drawn by the mixing rates */
    for (int tries = 0; tries < 2; tries++) {
        if (!r->plan_valid || r->plan_epoch != r->state.data_epoch) {
            /* Pretraining draws each epoch's sequences and masks anew (task_pretrain.c), span corruption its noise
             * (task_span.c): both a function of the epoch, so a resumed run sees the same data. */
            qkv_status st = r->task.kind == TASK_PRETRAIN ? qkv__pretrain_epoch(&r->task, &r->train, r->state.data_epoch)
                            : r->task.span                ? qkv__span_epoch(&r->task, &r->train, r->state.data_epoch)
                                                          : QKV_OK;
            if (st) return st;
            st = qkv__batch_plan_build(&r->plan, &r->train, bs, shuffle, bucket, r->data_seed,
                                                  r->state.data_epoch);
            if (st) return st;
            r->plan_valid = true;
            r->plan_epoch = r->state.data_epoch;
        }
        if ((int64_t)r->state.data_pos < r->plan.n_batches) {
            int64_t b = (int64_t)r->state.data_pos;
            *idx = r->plan.order + r->plan.starts[b];
            *count = r->plan.starts[b + 1] - r->plan.starts[b];
            return QKV_OK;
        }
        r->state.data_epoch++;
        r->state.data_pos = 0;
    }
    return qkv_error_set(QKV_ERR_INVALID, "the training data has no batches");
}

/* The training loss of one batch: the task's own head where the engine owns it (extractive QA), else the model's. */
static qkv_tensor *batch_loss(qkv_run *r, const qkv_batch *b) {
    return r->task.kind == TASK_QA ? qkv__qa_loss(r, b) : r->type->loss(r->ctx, r->model, b);
}

/* One step's forward and backward in a single process on the batch idx[0..count): its gradients, *loss its mean
 * loss, *real its real tokens. */
static qkv_status local_step(loop_ctx *L, const int64_t *idx, int64_t count, double *loss, double *real) {
    qkv_run *r = L->r;
    qkv_ctx_reset(r->ctx);
    qkv_ctx_set_training(r->ctx, true);
    qkv_ctx_set_grad(r->ctx, true);
    qkv_batch b;
    int64_t mine = 0;
    qkv_status st = qkv__batch_make(r->ctx, &r->task, &r->train, idx, count, &b, &mine);
    qkv_tensor *loss_t = st != QKV_OK ? NULL : batch_loss(r, &b);
    if (!loss_t || qkv_backward(r->ctx, loss_t) != QKV_OK)
        return qkv_error_set(qkv_last_status() ? qkv_last_status() : QKV_ERR_INVALID, "step %ld: %s",
                             r->state.step + 1, qkv_last_error());
    *loss = qkv_f32(loss_t)[0];
    *real = (double)mine;
    return QKV_OK;
}

/* ---- data-parallel steps ----------------------------------------------------------------------------------------- */

/* Rank 0's status after what it alone does (log, eval, checkpoint), and its early-stopping decision, to every rank:
 * the others stop with it and with its message. */
static qkv_status share_outcome(loop_ctx *L, qkv_status st, bool *stop) {
    if (L->world == 1) return st;
    struct {
        int32_t status, stop;
        char message[480];
    } root = {.status = st, .stop = stop && *stop};
    if (st) snprintf(root.message, sizeof root.message, "%s", qkv_last_error());
    qkv_status b = qkv_dist_bcast(&root, sizeof root, 0);
    if (b) return b;
    if (stop) *stop = root.stop;
    if (L->rank != 0 && root.status)
        return qkv_error_set((qkv_status)root.status, "rank 0 stopped: %s", root.message);
    return st;
}

/* One step's forward and backward on this rank's slice of the global batch idx[0..count): rank r takes examples
 * [count r / N, count (r + 1) / N), so N ranks see the batch one process would, whatever N. Ends with every
 * gradient and *loss those of the global batch's mean loss, identical on every rank. *halt: a stop request or the
 * time limit (rank 0's clock) seen by any rank; nothing was computed. */
static qkv_status dist_step(loop_ctx *L, const int64_t *idx, int64_t count, bool want_stop, bool out_of_time,
                            double *loss, double *real, bool *halt, qkv_train_outcome *why) {
    qkv_run *r = L->r;
    int64_t lo = count * L->rank / L->world, hi = count * (L->rank + 1) / L->world;
    qkv_ctx_reset(r->ctx);
    qkv_ctx_set_training(r->ctx, true);
    qkv_ctx_set_grad(r->ctx, true);
    qkv_batch b;
    memset(&b, 0, sizeof b);
    int64_t mine = 0;
    qkv_status local = hi > lo ? qkv__batch_make(r->ctx, &r->task, &r->train, idx + lo, hi - lo, &b, &mine) : QKV_OK;
    /* The loss is a mean over the slice's tokens (examples for classifiers): weights make the sum over ranks the
     * mean over the global batch. */
    double weight = local == QKV_OK && hi > lo ? (double)b.n_tokens : 0;
    double ctl[5] = {want_stop, out_of_time && L->rank == 0, weight, (double)mine, local != QKV_OK};
    qkv_status st = qkv_dist_allreduce_f64(ctl, 5);
    if (st) return st;
    if (ctl[4] > 0)
        return local ? qkv_error_set(local, "step %ld: %s", r->state.step + 1, qkv_last_error())
                     : qkv_error_set(QKV_ERR_INVALID, "step %ld: another rank could not make its batch",
                                     r->state.step + 1);
    *halt = ctl[0] > 0 || ctl[1] > 0;
    if (*halt) {
        *why = ctl[0] > 0 ? QKV_TRAIN_STOPPED : QKV_TRAIN_TIME_LIMIT;
        return QKV_OK;
    }
    double share = ctl[2] > 0 ? weight / ctl[2] : 0;
    *real = ctl[3];
    if (!L->zero) qkv__grad_sync_begin(L->sync, (float)share);
    if (!L->zero && qkv__grad_sync_buckets(L->sync) > 1)
        qkv_ctx_set_grad_ready(r->ctx, qkv__grad_sync_ready, L->sync);
    qkv_tensor *loss_t = hi > lo ? batch_loss(r, &b) : NULL;
    bool failed = hi > lo && (!loss_t || qkv_backward(r->ctx, loss_t) != QKV_OK);
    char message[480] = "";
    qkv_status fst = failed ? (qkv_last_status() ? qkv_last_status() : QKV_ERR_INVALID) : QKV_OK;
    if (failed) snprintf(message, sizeof message, "%s", qkv_last_error());
    qkv_ctx_set_grad_ready(r->ctx, NULL, NULL);
    /* Every rank takes part in the sums even when its own step failed, so none waits for it. */
    st = L->zero ? qkv__zero_reduce(L->zero, r->ctx, (float)share) : qkv__grad_sync_finish(L->sync, r->ctx);
    double sums[2] = {loss_t && !failed ? (double)qkv_f32(loss_t)[0] * share : 0, failed};
    qkv_status s2 = qkv_dist_allreduce_f64(sums, 2);
    if (!st) st = s2;
    if (failed) return qkv_error_set(fst, "step %ld: %s", r->state.step + 1, message);
    if (st) return st;
    if (sums[1] > 0) return qkv_error_set(QKV_ERR_INVALID, "step %ld: another rank failed", r->state.step + 1);
    *loss = sums[0];
    return QKV_OK;
}

/* The "train" record of the steps since the last one (tokens of them since *t_log, which moves to now); "ranks" only
 * when distributed. */
static qkv_status log_train(loop_ctx *L, double lr, double grad_norm, double tokens, double *t_log) {
    qkv_run *r = L->r;
    double t = now();
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "kind", "train");
    cJSON_AddNumberToObject(rec, "step", (double)r->state.step);
    cJSON_AddNumberToObject(rec, "epoch", (double)r->state.data_epoch);
    cJSON_AddNumberToObject(rec, "loss", r->loop.acc_steps ? r->loop.acc_loss / (double)r->loop.acc_steps : NAN);
    cJSON_AddNumberToObject(rec, "lr", lr);
    cJSON_AddNumberToObject(rec, "grad_norm", grad_norm);
    if (L->world > 1) cJSON_AddNumberToObject(rec, "ranks", L->world);
    cJSON_AddNumberToObject(rec, "tok_per_s", t > *t_log ? tokens / (t - *t_log) : 0);
    cJSON_AddNumberToObject(rec, "train_seconds", t - L->t0 - L->paused);
    cJSON_AddNumberToObject(rec, "elapsed", t - L->t0);
    if (r->mt.n && qkv__mt_log(r, rec) != QKV_OK) {
        cJSON_Delete(rec);
        return qkv_last_status();
    }
    curves_note(&L->curves, rec);
    r->loop.acc_loss = 0;
    r->loop.acc_steps = 0;
    *t_log = t;
    return emit(L, rec);
}

static void pick_metric(loop_ctx *L) {
    const char *m = L->r->set.eval.metric;
    task_kind k = L->r->task.kind;
    if (!strcmp(m, "auto")) m = k == TASK_CLASSIFY || k == TASK_TAGGING ? "accuracy" : k == TASK_QA ? "f1" : "loss";
    const char *mode = L->r->set.eval.mode;
    L->metric = m;
    L->maximise = !strcmp(mode, "max") ||
                  (!strcmp(mode, "auto") && (!strcmp(m, "accuracy") || !strcmp(m, "macro_f1") || !strcmp(m, "bleu") ||
                                             !strcmp(m, "entity_f1") || !strcmp(m, "rougeL") || !strcmp(m, "f1") ||
                                             !strcmp(m, "exact_match")));
    snprintf(L->curves.metric_name, sizeof L->curves.metric_name, "%s", m);
}

qkv_status qkv_run_train(qkv_run *r, const qkv_train_hooks *hooks, qkv_train_outcome *outcome) {
    if (!r->have_train || !r->opt) return qkv_error_set(QKV_ERR_INVALID, "this run was not opened for training");
    loop_ctx L = {.r = r, .hooks = hooks, .t0 = now(), .rank = qkv_dist_rank(), .world = qkv_dist_size()};
    pick_metric(&L);
    if (r->have_dev && r->task.kind == TASK_CLASSIFY && strcmp(L.metric, "loss") && strcmp(L.metric, "accuracy") &&
        strcmp(L.metric, "macro_f1"))
        return qkv_error_set(QKV_ERR_INVALID, "eval.metric: '%s' is not a classify metric", L.metric);
    if (r->have_dev && r->task.kind != TASK_CLASSIFY &&
        (!strcmp(L.metric, "macro_f1") || (!strcmp(L.metric, "accuracy") && r->task.kind != TASK_TAGGING)))
        return qkv_error_set(QKV_ERR_INVALID, "eval.metric: '%s' is only for classify tasks", L.metric);
    if (r->have_dev && r->task.kind == TASK_TAGGING && strcmp(L.metric, "loss") && strcmp(L.metric, "accuracy") &&
        strcmp(L.metric, "entity_f1"))
        return qkv_error_set(QKV_ERR_INVALID, "eval.metric: '%s' is not a tagging metric (loss, accuracy, entity_f1)",
                             L.metric);
    if (r->have_dev && !strcmp(L.metric, "entity_f1") &&
        (r->task.kind != TASK_TAGGING || !qkv__tagging_is_bio(&r->task)))
        return qkv_error_set(QKV_ERR_INVALID, "eval.metric: 'entity_f1' needs a tagging task with BIO tags "
                             "(data.tagset names)");
    if (r->have_dev && !strcmp(L.metric, "bleu") &&
        (r->task.kind != TASK_SEQ2SEQ || !r->set.eval.bleu))
        return qkv_error_set(QKV_ERR_INVALID, "eval.metric: 'bleu' needs a seq2seq task and eval.bleu = true");
    if (r->have_dev && !strcmp(L.metric, "rougeL") && (r->task.kind != TASK_SUMMARIZE || !r->set.eval.rouge))
        return qkv_error_set(QKV_ERR_INVALID, "eval.metric: 'rougeL' needs data.task summarize and eval.rouge = true");
    if (r->have_dev && (r->task.kind == TASK_QA) != (!strcmp(L.metric, "f1") || !strcmp(L.metric, "exact_match")) &&
        strcmp(L.metric, "loss"))
        return qkv_error_set(QKV_ERR_INVALID, "eval.metric: qa runs follow loss, f1 or exact_match, and those two are "
                             "qa metrics");
    if (r->have_dev && r->task.kind != TASK_LM && (!strcmp(L.metric, "bits_per_token")))
        return qkv_error_set(QKV_ERR_INVALID, "eval.metric: 'bits_per_token' is only for lm tasks");
    /* Data-parallel: buckets for replicated optimisers, or ZeRO-1's shards (QKV_DIST_ZERO=1). */
    size_t bucket = 0;
    bool zero = false;
    if (L.world > 1 && (qkv__grad_sync_bucket_bytes(&bucket) != QKV_OK || qkv__zero_wanted(&zero) != QKV_OK))
        return qkv_last_status(); /* checked at start-up already, the same on every rank */
    if (L.world > 1 && !zero && !(L.sync = qkv__grad_sync_new(r->params, bucket))) return qkv_last_status();
    if (L.world > 1 && zero && !(L.zero = qkv__zero_new(r->params, r->opt))) return qkv_last_status();
    qkv_status st = L.rank == 0 ? log_restore(r->dir, r->state.step, &L.curves) : QKV_OK;
    char path[4096];
    path_of(path, sizeof path, r->dir, "log.jsonl");
    if (st == QKV_OK && L.rank == 0 && !(L.log = fopen(path, "a")))
        st = qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    st = share_outcome(&L, st, NULL);
    if (st == QKV_OK && r->state.step > 0) {
        cJSON *rec = cJSON_CreateObject();
        cJSON_AddStringToObject(rec, "kind", "resume");
        cJSON_AddNumberToObject(rec, "step", (double)r->state.step);
        st = emit(&L, rec);
    }
    long total = (long)r->set.train.steps;
    long log_every = (long)r->set.train.log_every;
    long ckpt_every = (long)r->set.train.checkpoint_every;
    long eval_every = (long)r->set.eval.every;
    double clip_norm = r->set.train.clip_norm;
    double clip_value = r->set.train.clip_value;
    double max_seconds = r->set.train.max_seconds; /* 0: no time budget */
    qkv_train_outcome out = QKV_TRAIN_FINISHED;
    double tokens = 0, grad_norm = 0, t_log = now();
    bool saved = false;
    /* eval.every_seconds: the next eval is due when training proper reaches next_eval_s (evals pause the clock, so
     * curves against training time have points at the same times on every machine load and engine). One process
     * only: ranks' clocks differ, and an eval must be a decision every rank takes at the same step. */
    double every_s = L.world == 1 ? r->set.eval.every_seconds : 0, next_eval_s = every_s;
    long last_eval_step = -1;
    while (st == QKV_OK && r->state.step < total) {
        bool want_stop = hooks && hooks->stop && *hooks->stop;
        bool out_of_time = max_seconds > 0 && train_seconds(&L) >= max_seconds; /* equal-wall-clock comparisons */
        if (L.world == 1 && (want_stop || out_of_time)) { /* ranks decide it together, in dist_step */
            out = want_stop ? QKV_TRAIN_STOPPED : QKV_TRAIN_TIME_LIMIT;
            break;
        }
        const int64_t *idx = NULL;
        int64_t count = 0;
        st = next_batch(&L, &idx, &count);
        if (st) break;
        if (qkv__finetune_due(r, r->state.step) && (st = qkv__finetune_apply(r, r->state.step, false))) break;
        bool halt = false;
        double loss = 0, real = 0;
        st = L.world > 1 ? dist_step(&L, idx, count, want_stop, out_of_time, &loss, &real, &halt, &out)
                         : local_step(&L, idx, count, &loss, &real);
        if (st || halt) break;
        r->state.data_pos++;
        const char *bad = NULL;
        if (L.zero) st = qkv__zero_grad_check(L.zero, &grad_norm, &bad);
        else bad = grad_check(r->params, &grad_norm);
        if (st) break;
        double lr = qkv_schedule_lr(&r->sched, r->state.step);
        if (!isfinite(loss) || bad) { /* every rank sees the same sums, so all come here together */
            st = share_outcome(&L, nonfinite(&L, loss, isfinite(loss) ? bad : NULL), NULL);
            qkv_optim_zero_grad(r->opt);
        } else {
            if (clip_value > 0) qkv_clip_grad_value(r->params, (float)clip_value);
            if (clip_norm > 0 && L.zero) st = qkv__zero_clip_norm(L.zero, (float)clip_norm);
            else if (clip_norm > 0) qkv_clip_grad_norm(r->params, (float)clip_norm);
            qkv_optim_set_lr(r->opt, (float)lr);
            if (st == QKV_OK) st = qkv_optim_step(r->opt); /* ZeRO-1: the parameters this rank owns */
            if (st == QKV_OK && L.zero) st = qkv__zero_gather(L.zero);
            qkv_optim_zero_grad(r->opt);
            r->loop.nonfinite_skips = 0;
            r->loop.acc_loss += loss;
            r->loop.acc_steps++;
        }
        if (st) break;
        r->state.step++;
        saved = false;
        tokens += real;
        if (hooks && hooks->on_step) hooks->on_step(hooks->user, r->state.step, total, loss, lr, real);
        /* Logs and evals keep their cadence even at the last step, so a run that is later extended with --resume
         * logs exactly what one run of the full length would have. The "end" record marks where a run stopped. */
        bool logged = r->state.step % log_every == 0;
        if (logged) {
            st = log_train(&L, lr, grad_norm, tokens, &t_log);
            tokens = 0;
        }
        bool stop = false;
        bool timed = every_s > 0 && train_seconds(&L) >= next_eval_s;
        while (every_s > 0 && train_seconds(&L) >= next_eval_s) next_eval_s += every_s;
        bool evaluate = r->have_dev && ((eval_every > 0 && r->state.step % eval_every == 0) || timed);
        if (evaluate) last_eval_step = r->state.step;
        /* ZeRO-1: rank 0 writes one process's checkpoints (best.safetensors at an eval too), so it holds every
         * optimiser state while it may write. */
        if (st == QKV_OK && evaluate && L.zero) st = qkv__zero_collect(L.zero, true);
        if (st == QKV_OK && evaluate && L.rank == 0) st = eval_dev(&L, &stop);
        if (logged || evaluate) st = share_outcome(&L, st, &stop);
        bool ckpt = (ckpt_every > 0 && r->state.step % ckpt_every == 0) || r->state.step == total || stop;
        if (st == QKV_OK && ckpt) {
            if (L.zero && !evaluate) st = qkv__zero_collect(L.zero, true);
            if (st == QKV_OK && L.rank == 0) st = checkpoint(&L);
            st = share_outcome(&L, st, NULL);
            saved = true;
        }
        if (st == QKV_OK && L.zero && (evaluate || ckpt)) st = qkv__zero_collect(L.zero, false);
        if (stop) out = QKV_TRAIN_EARLY_STOP;
        if (stop) break;
    }
    /* Either cadence may have scored the last step already (eval.every and eval.every_seconds together): once. */
    bool last_eval = out == QKV_TRAIN_TIME_LIMIT && r->have_dev && (eval_every > 0 || every_s > 0) &&
                     last_eval_step != r->state.step;
    bool last_save = (out == QKV_TRAIN_STOPPED || out == QKV_TRAIN_TIME_LIMIT) && !saved;
    if (st == QKV_OK && L.zero && (last_eval || last_save)) st = qkv__zero_collect(L.zero, true);
    if (st == QKV_OK && last_eval && L.rank == 0) {
        bool ignored;
        st = eval_dev(&L, &ignored); /* the last steps count too: score them before stopping */
    }
    if (st == QKV_OK && last_save && L.rank == 0) st = checkpoint(&L);
    if (st == QKV_OK && L.log) {
        cJSON *rec = cJSON_CreateObject();
        cJSON_AddStringToObject(rec, "kind", "end");
        cJSON_AddNumberToObject(rec, "step", (double)r->state.step);
        cJSON_AddStringToObject(rec, "outcome", out == QKV_TRAIN_FINISHED     ? "finished"
                                                : out == QKV_TRAIN_EARLY_STOP ? "early_stop"
                                                : out == QKV_TRAIN_TIME_LIMIT ? "time_limit"
                                                                              : "stopped");
        cJSON_AddNumberToObject(rec, "best_step", (double)r->loop.best_step);
        if (r->loop.best_step >= 0) cJSON_AddNumberToObject(rec, "best", r->loop.best);
        cJSON_AddNumberToObject(rec, "train_seconds", train_seconds(&L));
        cJSON_AddNumberToObject(rec, "elapsed", now() - L.t0);
        st = emit(&L, rec);
    }
    if (st == QKV_OK && !r->have_dev && L.curves.train.n && L.rank == 0) st = curves_plot(&L.curves, r->dir);
    if (L.world > 1) { /* every rank leaves with rank 0's outcome (or its own error) */
        qkv_status shared = share_outcome(&L, st, NULL);
        if (st == QKV_OK) st = shared;
    }
    if (L.log) fclose(L.log);
    qkv__grad_sync_free(L.sync);
    qkv__zero_free(L.zero);
    curves_free(&L.curves);
    if (outcome) *outcome = out;
    return st;
}
