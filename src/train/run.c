/* A run: its directory, config, task data, model, optimiser and schedule; opening one for evaluation; the
 * evaluator and the predictor. The training loop itself is in loop.c. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qkv/config.h"
#include "qkv/decode_batch.h"
#include "qkv/dist.h"
#include "qkv/fsutil.h"
#include "pairs.h"
#include "qkv/metrics.h"
#include "qkv/safetensors.h"
#include "task_tagging.h"
#include "train_internal.h"

static qkv_status write_config(const char *dir, const cJSON *cfg) {
    char *path = qkv_fs_join(dir, "config.json");
    char *pretty = qkv_config_print(cfg);
    size_t n = pretty ? strlen(pretty) : 0;
    char *text = pretty ? realloc(pretty, n + 2) : NULL;
    qkv_status st = path && text ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (st == QKV_OK) {
        text[n] = '\n';
        st = qkv_fs_write_atomic(path, text, n + 1);
    } else if (!text) {
        free(pretty);
    }
    free(text);
    free(path);
    return st;
}

static qkv_run *run_alloc(const char *dir, const cJSON *cfg) {
    qkv_run *r = calloc(1, sizeof *r);
    if (!r) {
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    r->dir = strdup(dir);
    r->cfg = cJSON_Duplicate(cfg, true);
    r->cfg_text = r->cfg ? cJSON_PrintUnformatted(r->cfg) : NULL;
    r->loop.best = NAN;
    r->loop.best_step = -1;
    if (!r->dir || !r->cfg || !r->cfg_text) {
        qkv_run_free(r);
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (qkv_config_settings(r->cfg, &r->set) != QKV_OK) {
        qkv_run_free(r);
        return NULL;
    }
    return r;
}

/* Model, parameters and context. Seeds: the model's initialisation draws from Philox(seed), dropout from
 * Philox(seed + 1), data order from Philox(seed + 2), so changing one never shifts the others. */
static qkv_status build_model_with(qkv_run *r, qkv_params_check_fn check, void *user) {
    uint64_t seed = (uint64_t)r->set.seed;
    qkv_task_info info;
    qkv__task_info(&r->task, &info);
    qkv_rng init;
    qkv_rng_init(&init, seed);
    r->params = qkv_params_new();
    r->ctx = qkv_ctx_new();
    if (!r->params || !r->ctx) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    qkv_params_set_check(r->params, check, user);
    r->model = r->type->create(cJSON_GetObjectItemCaseSensitive(r->cfg, "model"), &info, r->params, &init);
    qkv_params_set_check(r->params, NULL, NULL);
    if (!r->model) return qkv_last_status();
    if (r->task.kind == TASK_QA) {
        qkv_params_set_check(r->params, check, user);
        qkv_status st = qkv__qa_head_init(r, &init);
        qkv_params_set_check(r->params, NULL, NULL);
        if (st) return st;
    }
    qkv_rng_init(qkv_ctx_rng(r->ctx), seed + 1);
    r->state.rng = *qkv_ctx_rng(r->ctx);
    r->data_seed = seed + 2;
    return QKV_OK;
}

/* The model a config describes, each parameter's shape compared with the checkpoint it will load (when there is
 * one) before its memory is allocated: a config whose sizes do not match its checkpoint (d_model 4096 instead of 64)
 * fails at once, not after building gigabytes of model. */
typedef struct {
    qkv_st_file *f;
    const char *config; /* names the config in messages */
} shape_ref;

static qkv_status check_declared(void *user, const char *name, int ndim, const int64_t *shape) {
    const shape_ref *ref = user;
    const char *dtype;
    qkv_tensor have = {0}, want = {.ndim = ndim};
    if (qkv_st_find(ref->f, name) < 0 || qkv_st_info(ref->f, name, &dtype, &have.ndim, have.shape) != QKV_OK)
        return QKV_OK; /* absent tensors are reported by the checkpoint loader, all together */
    memcpy(want.shape, shape, sizeof *shape * (size_t)ndim);
    bool same = have.ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = have.shape[d] == shape[d];
    if (same) return QKV_OK;
    char a[96], b[96];
    return qkv_error_set(QKV_ERR_FORMAT, "%s: tensor '%s' has shape %s but the model needs %s (the model of %s: "
                         "the config does not match the checkpoint)", qkv_st_path(ref->f), name,
                         qkv_shape_str(&have, a, sizeof a), qkv_shape_str(&want, b, sizeof b), ref->config);
}

static qkv_status build_model_for(qkv_run *r, const char *checkpoint, const char *config) {
    shape_ref ref = {.f = checkpoint ? qkv_st_open(checkpoint) : NULL, .config = config};
    if (checkpoint && !ref.f) return qkv_last_status();
    qkv_status st = build_model_with(r, ref.f ? check_declared : NULL, &ref);
    qkv_st_close(ref.f);
    return st;
}

static qkv_status build_optimiser(qkv_run *r) {
    const qkv_run_settings *c = &r->set;
    qkv_optim_kind kind;
    if (!qkv_optim_kind_parse(c->train.optimizer.name, &kind))
        return qkv_error_set(QKV_ERR_INVALID, "train.optimizer.name: unknown optimiser");
    qkv_optim_config o = qkv_optim_defaults(kind);
    o.lr = (float)c->train.optimizer.lr;
    o.weight_decay = (float)c->train.optimizer.weight_decay;
    o.decay_exclude_1d = c->train.optimizer.decay_exclude_1d;
    o.momentum = (float)c->train.optimizer.momentum;
    o.dampening = (float)c->train.optimizer.dampening;
    o.nesterov = c->train.optimizer.nesterov;
    o.beta1 = (float)c->train.optimizer.beta1;
    o.beta2 = (float)c->train.optimizer.beta2;
    o.eps = (float)c->train.optimizer.eps;
    o.rho = (float)c->train.optimizer.rho;
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
        return qkv_error_set(QKV_ERR_INVALID, "train.optimizer.nesterov: needs momentum > 0 and dampening 0");
    r->opt = qkv_optim_new(r->params, &o);
    if (!r->opt) return qkv_last_status();
    double total = (double)c->train.schedule.total_steps;
    if (total == 0) total = (double)c->train.steps;
    if (qkv_schedule_parse(&r->sched, c->train.schedule.spec, c->train.optimizer.lr,
                           (double)c->train.schedule.warmup_steps, total, c->train.schedule.min_ratio,
                           c->train.schedule.d_model) != QKV_OK)
        return qkv_error_set(QKV_ERR_INVALID, "train.schedule: %s", qkv_last_error());
    return QKV_OK;
}

/* A counter of the 'qkv.loop' metadata: an integer in [lo, 2^62] (lo when absent); anything else is refused, naming
 * the key, instead of becoming a huge or negative count through a cast. */
static long loop_count(const cJSON *j, const char *key, long lo, const char *path, qkv_status *st) {
    const cJSON *v = cJSON_GetObjectItem(j, key);
    if (!v) return lo;
    double x = cJSON_GetNumberValue(v);
    if (cJSON_IsNumber(v) && x >= (double)lo && x <= 0x1p62 && x == floor(x)) return (long)x;
    if (*st == QKV_OK)
        *st = qkv_error_set(QKV_ERR_FORMAT, "%s: metadata 'qkv.loop' key '%s' is not an integer in [%ld, 2^62]", path,
                            key, lo);
    return lo;
}

static qkv_status read_loop_state(const char *path, qkv_loop_state *loop) {
    qkv_st_file *f = qkv_st_open(path);
    if (!f) return qkv_last_status();
    const char *text = qkv_st_metadata(f, "qkv.loop");
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    qkv_status st = QKV_OK;
    if (!j) {
        st = qkv_error_set(QKV_ERR_FORMAT, "%s: no valid 'qkv.loop' metadata (not a training checkpoint)", path);
    } else {
        /* Doubles travel as %.17g strings so they come back bit for bit. */
        const char *best = cJSON_GetStringValue(cJSON_GetObjectItem(j, "best"));
        const char *acc = cJSON_GetStringValue(cJSON_GetObjectItem(j, "acc_loss"));
        loop->best = best ? strtod(best, NULL) : NAN;
        loop->acc_loss = acc ? strtod(acc, NULL) : 0;
        loop->best_step = loop_count(j, "best_step", -1, path, &st);
        loop->bad_evals = loop_count(j, "bad_evals", 0, path, &st);
        loop->acc_steps = loop_count(j, "acc_steps", 0, path, &st);
        loop->nonfinite_skips = loop_count(j, "nonfinite_skips", 0, path, &st);
        if (!best || !acc) st = qkv_error_set(QKV_ERR_FORMAT, "%s: 'qkv.loop' metadata is incomplete", path);
    }
    cJSON_Delete(j);
    qkv_st_close(f);
    return st;
}

/* Ranks other than 0 of a data-parallel job: the run rank 0 has just prepared, read from its directory (tokenizer
 * files, the checkpoint to resume) without writing anything; dev data stays with rank 0, which alone evaluates. */
static qkv_status open_follower(qkv_run *r, bool resume, long newest, bool have_dev) {
    qkv_status st = qkv__run_pretrained_check(r);
    if (st == QKV_OK) st = qkv__mt_open(r, false);
    if (st == QKV_OK) st = qkv__task_prepare(&r->task, qkv__mt_task_config(r), r->type->task, r->dir, false);
    if (st == QKV_OK) st = qkv__task_load(&r->task, r->set.data.train, &r->train);
    if (st == QKV_OK) st = qkv__mt_check_split(r, &r->train, r->set.data.train);
    if (st == QKV_OK && r->task.kind == TASK_PAIRS) st = qkv__pairs_keep_duplicates(&r->train, r->set.data.train);
    r->have_train = st == QKV_OK;
    r->have_dev = have_dev;
    char name[64];
    snprintf(name, sizeof name, "ckpt-%ld.safetensors", newest);
    char *from = resume ? qkv_fs_join(r->dir, name) : NULL;
    if (st == QKV_OK) st = resume && !from ? qkv_last_status() : build_model_for(r, from, "the config given");
    if (st == QKV_OK) st = qkv__run_pretrained_init(r, false); /* vectors come with rank 0's weights */
    if (st == QKV_OK) st = build_optimiser(r);
    if (st == QKV_OK && resume) st = qkv_checkpoint_load(from, r->params, r->opt, &r->state, NULL);
    if (st == QKV_OK && resume) st = read_loop_state(from, &r->loop);
    if (st == QKV_OK && resume) *qkv_ctx_rng(r->ctx) = r->state.rng;
    free(from);
    return st;
}

static qkv_status open_writer(qkv_run *r, bool resume, long *newest);

qkv_run *qkv_run_new(const char *dir, const cJSON *cfg, bool resume) {
    const qkv_model_type *type;
    cJSON *resolved = qkv_config_resolve(cfg, &type); /* re-checks a config that did not come from resolve */
    if (!resolved) return NULL;
    qkv_run *r = run_alloc(dir, resolved);
    cJSON_Delete(resolved);
    if (!r) return NULL;
    r->type = type;
    /* Data-parallel (docs/distributed.md): checks on every rank before anything is written; rank 0 prepares the run
     * as a single process would, then the others open what it wrote and take its weights. */
    qkv_status st = qkv__run_dist_check(dir, r->cfg_text); /* fails on every rank alike */
    bool checked = st == QKV_OK;
    long newest = -1;
    if (checked && qkv_dist_rank() == 0) st = open_writer(r, resume, &newest);
    if (checked && qkv_dist_size() > 1) {
        struct {
            int32_t status, have_dev;
            int64_t newest;
            char message[480];
        } root = {.status = st, .have_dev = r->have_dev, .newest = newest};
        if (st) snprintf(root.message, sizeof root.message, "%s", qkv_last_error());
        qkv_status b = qkv_dist_bcast(&root, sizeof root, 0);
        if (b) st = b;
        else if (qkv_dist_rank() != 0 && root.status)
            st = qkv_error_set((qkv_status)root.status, "%s", root.message);
        else if (qkv_dist_rank() != 0) st = open_follower(r, resume, (long)root.newest, root.have_dev);
        if (b == QKV_OK && root.status == QKV_OK) { /* every rank learns whether all opened */
            int64_t failed = st ? qkv_dist_rank() + 1 : 0;
            b = qkv_dist_allreduce_max_i64(&failed, 1);
            if (b) st = b;
            else if (failed && st == QKV_OK)
                st = qkv_error_set(QKV_ERR_INVALID, "rank %lld could not open the run (see its message)",
                                   (long long)failed - 1);
        }
        if (st == QKV_OK) st = qkv__run_dist_share(r);
    }
    if (st != QKV_OK) {
        qkv_run_free(r);
        return NULL;
    }
    return r;
}

/* The run as one process (or rank 0) prepares it. */
static qkv_status open_writer(qkv_run *r, bool resume, long *newest_out) {
    const char *dir = r->dir;
    const qkv_model_type *type = r->type;
    qkv_status st = QKV_OK;
    if (qkv_fs_mkdirs(dir) != QKV_OK)
        st = qkv_error_set(QKV_ERR_IO, "%s: cannot create the run directory: %s", dir, qkv_last_error());
    long newest = qkv__run_newest_checkpoint(dir);
    *newest_out = newest;
    if (st == QKV_OK && !resume && newest >= 0)
        st = qkv_error_set(QKV_ERR_INVALID, "%s: the run directory already has checkpoints (use --resume, or a new "
                           "directory)", dir);
    if (st == QKV_OK && resume && newest < 0)
        st = qkv_error_set(QKV_ERR_INVALID, "%s: no ckpt-<step>.safetensors to resume from", dir);
    if (st == QKV_OK) st = qkv__run_pretrained_check(r);
    if (st == QKV_OK) st = qkv__mt_open(r, true);
    if (st == QKV_OK) st = qkv__task_prepare(&r->task, qkv__mt_task_config(r), type->task, dir, !resume);
    bool pretrain = st == QKV_OK && r->task.kind == TASK_PRETRAIN;
    if (pretrain) st = qkv__pretrain_load(&r->task, &r->train, &r->dev, &r->have_dev);
    else if (st == QKV_OK)
        st = r->task.kind == TASK_QA ? qkv__qa_load(&r->task, r->set.data.train, &r->train, true)
                                     : qkv__task_load(&r->task, r->set.data.train, &r->train);
    if (st == QKV_OK && r->task.kind == TASK_PAIRS) st = qkv__pairs_keep_duplicates(&r->train, r->set.data.train);
    if (st == QKV_OK) st = qkv__mt_check_split(r, &r->train, r->set.data.train);
    if (st == QKV_OK) r->have_train = true;
    const char *dev = r->set.data.dev;
    if (st == QKV_OK && *dev && !pretrain) {
        st = qkv__task_load(&r->task, dev, &r->dev);
        if (st == QKV_OK) st = qkv__mt_check_split(r, &r->dev, dev);
        r->have_dev = st == QKV_OK;
    }
    if (st == QKV_OK && !resume && r->task.kind == TASK_SUMMARIZE)
        st = qkv__summ_log_truncation(dir, r->task.n_truncated, r->train.n + r->dev.n);
    if (st == QKV_OK) {
        char name[64];
        snprintf(name, sizeof name, "ckpt-%ld.safetensors", newest);
        char *from = resume ? qkv_fs_join(dir, name) : NULL;
        st = resume && !from ? qkv_last_status() : build_model_for(r, from, "the config given");
        free(from);
    }
    /* Between the model's own init and the optimiser: frozen matrices must be out of the optimiser's list. */
    if (st == QKV_OK && !resume) st = qkv__finetune_init_from(r);
    if (st == QKV_OK) st = qkv__run_pretrained_init(r, !resume);
    if (st == QKV_OK) st = build_optimiser(r);
    if (st == QKV_OK && resume) {
        char name[64];
        snprintf(name, sizeof name, "ckpt-%ld.safetensors", newest);
        char *p = qkv_fs_join(dir, name);
        if (!p) st = qkv_last_status();
        if (st == QKV_OK) st = qkv_checkpoint_load(p, r->params, r->opt, &r->state, NULL);
        if (st == QKV_OK) st = read_loop_state(p, &r->loop);
        if (st == QKV_OK) *qkv_ctx_rng(r->ctx) = r->state.rng;
        free(p);
    }
    if (st == QKV_OK) st = qkv__finetune_apply(r, r->state.step, !resume);
    /* Last, once every check passed, so a failed command leaves the run directory as it was: the config, and the
     * cleanup of temporaries that writers killed mid-write (kill -9, a crash) left. */
    if (st == QKV_OK) st = write_config(dir, r->cfg);
    if (st == QKV_OK) qkv_fs_remove_stale_tmp(dir, NULL);
    return st;
}

qkv_run *qkv_run_open(const char *dir, const char *checkpoint) {
    char *cfg_path = qkv_fs_join(dir, "config.json");
    if (!cfg_path) return NULL;
    cJSON *cfg = qkv_config_read(cfg_path);
    free(cfg_path);
    if (!cfg) return NULL;
    const qkv_model_type *type;
    cJSON *resolved = qkv_config_resolve(cfg, &type);
    cJSON_Delete(cfg);
    if (!resolved) return NULL;
    qkv_run *r = run_alloc(dir, resolved);
    cJSON_Delete(resolved);
    if (!r) return NULL;
    r->type = type;
    qkv_status st = qkv__mt_open(r, false);
    if (st == QKV_OK) st = qkv__task_prepare(&r->task, qkv__mt_task_config(r), type->task, dir, false);
    char *ck = NULL;
    if (st == QKV_OK) {
        if (checkpoint) {
            ck = strdup(checkpoint);
        } else {
            ck = qkv_fs_join(dir, "best.safetensors");
            struct stat sb;
            if (ck && stat(ck, &sb) != 0) {
                free(ck);
                long newest = qkv__run_newest_checkpoint(dir);
                char name[64];
                snprintf(name, sizeof name, "ckpt-%ld.safetensors", newest);
                ck = newest >= 0 ? qkv_fs_join(dir, name) : NULL;
                if (newest < 0) st = qkv_error_set(QKV_ERR_IO, "%s: the run has no checkpoint yet", dir);
            }
        }
        if (st == QKV_OK && !ck) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    }
    char *cfg_name = st == QKV_OK ? qkv_fs_join(dir, "config.json") : NULL;
    if (st == QKV_OK) st = cfg_name ? build_model_for(r, ck, cfg_name) : qkv_last_status();
    free(cfg_name);
    if (st == QKV_OK && qkv_checkpoint_load(ck, r->params, NULL, &r->state, NULL) != QKV_OK) {
        /* Weights without training state (exported, or written by other tools) are fine for scoring. */
        char first[1024];
        qkv_status first_st = qkv_last_status();
        snprintf(first, sizeof first, "%s", qkv_last_error());
        qkv_st_file *f = qkv_st_open(ck);
        bool has_state = f && qkv_st_metadata(f, "qkv.step");
        qkv_st_close(f);
        if (has_state || qkv_checkpoint_load(ck, r->params, NULL, NULL, NULL) != QKV_OK)
            st = qkv_error_set(has_state ? first_st : qkv_last_status(), "%s", has_state ? first : qkv_last_error());
    }
    free(ck);
    if (st != QKV_OK) {
        qkv_run_free(r);
        return NULL;
    }
    return r;
}

void qkv_run_free(qkv_run *r) {
    if (!r) return;
    if (r->model) r->type->free(r->model);
    qkv_optim_free(r->opt);
    qkv_params_free(r->params);
    qkv_ctx_free(r->ctx);
    qkv__task_free(&r->task);
    qkv__split_free(&r->train);
    qkv__split_free(&r->dev);
    qkv__batch_plan_free(&r->plan);
    qkv__mt_free(&r->mt);
    cJSON_Delete(r->cfg);
    cJSON_free(r->cfg_text);
    free(r->dir);
    free(r);
}

const qkv_model_type *qkv_run_model_type(const qkv_run *r) { return r->type; }
const cJSON *qkv_run_config(const qkv_run *r) { return r->cfg; }
long qkv_run_step(const qkv_run *r) { return r->state.step; }

/* ---- evaluation ----------------------------------------------------------------------------------------------- */

static int argmax(const float *x, int64_t n) {
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = (int)i;
    return best;
}

cJSON *qkv__run_evaluate(qkv_run *r, const split *s, int64_t max_batches) {
    if (r->task.kind == TASK_TAGGING) return qkv__tagging_evaluate(r, s, max_batches);
    if (r->task.kind == TASK_QA) return qkv__qa_evaluate(r, s, max_batches);
    if (r->task.kind == TASK_PAIRS) return qkv__pairs_evaluate(r, s, max_batches, NAN);
    if (r->task.kind == TASK_PRETRAIN) return qkv__pretrain_evaluate(r, s, max_batches);
    int64_t bs = r->set.eval.batch_size;
    int64_t nb = (s->n + bs - 1) / bs;
    if (max_batches > 0 && max_batches < nb) nb = max_batches;
    int64_t n_ex = s->n < nb * bs ? s->n : nb * bs;
    bool classify = r->task.kind == TASK_CLASSIFY;
    int32_t *pred = classify ? malloc(sizeof *pred * (size_t)(n_ex ? n_ex : 1)) : NULL;
    int32_t *gold = classify ? malloc(sizeof *gold * (size_t)(n_ex ? n_ex : 1)) : NULL;
    int64_t *idx = malloc(sizeof *idx * (size_t)bs);
    qkv_status st = (!classify || (pred && gold)) && idx ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    double nll = 0;
    int64_t counted = 0;
    /* A summarize eval scores the summary alone whatever the article's training weight, so its loss (a mean over
     * the summary's tokens) compares across weights and with an encoder-decoder's. */
    task scored = r->task;
    scored.article_weight = 0;
    for (int64_t b = 0; st == QKV_OK && b < nb; b++) {
        int64_t start = b * bs, count = s->n - start < bs ? s->n - start : bs;
        for (int64_t i = 0; i < count; i++) idx[i] = start + i;
        qkv_ctx_reset(r->ctx);
        qkv_batch batch;
        st = qkv__batch_make(r->ctx, &scored, s, idx, count, &batch, NULL);
        if (st != QKV_OK) break;
        if (classify) {
            qkv_tensor *lp = r->type->forward(r->ctx, r->model, &batch, NULL);
            if (!lp) {
                st = qkv_last_status();
                break;
            }
            int64_t C = lp->shape[lp->ndim - 1];
            for (int64_t i = 0; i < count; i++) {
                const float *row = qkv_f32(lp) + i * C;
                int32_t y = qkv_i32(batch.labels)[i];
                nll -= row[y];
                pred[start + i] = argmax(row, C);
                gold[start + i] = y;
            }
            counted += count;
        } else {
            qkv_tensor *loss = r->type->loss(r->ctx, r->model, &batch);
            if (!loss) {
                st = qkv_last_status();
                break;
            }
            nll += (double)qkv_f32(loss)[0] * (double)batch.n_tokens;
            counted += batch.n_tokens;
        }
    }
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    free(idx);
    cJSON *out = NULL;
    if (st == QKV_OK && counted == 0) st = qkv_error_set(QKV_ERR_INVALID, "evaluation: no examples to score");
    if (st == QKV_OK) {
        out = cJSON_CreateObject();
        double loss = nll / (double)counted;
        cJSON_AddNumberToObject(out, "loss", loss);
        if (classify) {
            qkv_classify_result cr;
            st = qkv_metric_classify(pred, gold, (size_t)n_ex, r->task.n_labels, &cr);
            if (st == QKV_OK) {
                cJSON_AddNumberToObject(out, "accuracy", cr.accuracy);
                cJSON_AddNumberToObject(out, "macro_f1", cr.macro.f1);
                cJSON *conf = cJSON_AddArrayToObject(out, "confusion");
                for (int i = 0; i < cr.n_classes; i++) {
                    cJSON *row = cJSON_CreateArray();
                    for (int k = 0; k < cr.n_classes; k++)
                        cJSON_AddItemToArray(row, cJSON_CreateNumber((double)cr.confusion[i * cr.n_classes + k]));
                    cJSON_AddItemToArray(conf, row);
                }
                cJSON_AddItemToObject(out, "labels",
                                      cJSON_CreateStringArray((const char *const *)r->task.labels, r->task.n_labels));
                qkv_classify_free(&cr);
            }
            cJSON_AddNumberToObject(out, "examples", (double)n_ex);
        } else {
            cJSON_AddNumberToObject(out, "perplexity", exp(loss));
            if (r->task.kind == TASK_LM) {
                cJSON_AddNumberToObject(out, "bits_per_token", loss / log(2.0));
                if (s->n_chars > 0 && n_ex == s->n)
                    cJSON_AddNumberToObject(out, "bits_per_char", nll / log(2.0) / (double)s->n_chars);
            }
            cJSON_AddNumberToObject(out, "tokens", (double)counted);
            double bleu = 0;
            /* BLEU, the tasks' metrics and ROUGE decode batch after batch (eval.batch_size examples a call) with
             * weights that stay put until the evaluation ends: one packing of them serves every call
             * (decode_batch.h). */
            qkv_decode_keep_open();
            if (r->task.kind == TASK_SEQ2SEQ && r->set.eval.bleu) {
                st = qkv__run_bleu(r, s, r->set.eval.bleu_max_examples, &bleu);
                if (st == QKV_OK) cJSON_AddNumberToObject(out, "bleu", bleu);
            }
            if (st == QKV_OK && r->task.kind == TASK_SEQ2SEQ && s->task_starts)
                st = qkv__run_task_metrics_mt(r, s, out);
            else if (st == QKV_OK && r->task.kind == TASK_SEQ2SEQ && *r->set.eval.tasks)
                st = qkv__run_task_metrics(r, s, r->set.eval.tasks, 0, out);
            if (r->task.kind == TASK_SUMMARIZE && r->set.eval.rouge)
                st = qkv__run_rouge(r, s, r->set.eval.rouge_max_examples, out);
            qkv_decode_keep_close();
        }
        if (st != QKV_OK) {
            cJSON_Delete(out);
            out = NULL;
        }
    }
    free(pred);
    free(gold);
    return out;
}

cJSON *qkv_run_eval(qkv_run *r, const char *split_name, const char *file) {
    const char *path = file;
    if (!path) {
        if (!split_name || (strcmp(split_name, "dev") && strcmp(split_name, "test"))) {
            qkv_error_set(QKV_ERR_INVALID, "split must be 'dev' or 'test', got '%s'", split_name ? split_name : "");
            return NULL;
        }
        char key[16];
        snprintf(key, sizeof key, "data.%s", split_name);
        path = !strcmp(split_name, "dev") ? r->set.data.dev : r->set.data.test;
        if (!*path) {
            qkv_error_set(QKV_ERR_INVALID, "%s: the run's config has no %s file", key, split_name);
            return NULL;
        }
    }
    split s;
    if (qkv__task_load(&r->task, path, &s) != QKV_OK) return NULL;
    if (qkv__mt_check_split(r, &s, path) != QKV_OK) {
        qkv__split_free(&s);
        return NULL;
    }
    cJSON *out = r->task.kind == TASK_PAIRS ? qkv__pairs_evaluate_at_dev_threshold(r, &s)
                                            : qkv__run_evaluate(r, &s, 0);
    qkv__split_free(&s);
    if (out) {
        cJSON_AddStringToObject(out, file ? "file" : "split", file ? file : split_name);
        cJSON_AddNumberToObject(out, "step", (double)r->state.step);
    }
    return out;
}

/* The classifier's answer for each example of s, one forward over all of them, into out[0..s->n). */
static qkv_status classify_split(qkv_run *r, const split *s, cJSON **out) {
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    qkv_ctx_reset(r->ctx);
    int64_t *idx = malloc(sizeof *idx * (size_t)(s->n ? s->n : 1));
    qkv_status st = idx ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; idx && i < s->n; i++) idx[i] = i;
    qkv_batch b;
    qkv_tensor *lp = NULL;
    if (st == QKV_OK && qkv__batch_make(r->ctx, &r->task, s, idx, s->n, &b, NULL) == QKV_OK)
        lp = r->type->forward(r->ctx, r->model, &b, NULL);
    if (st == QKV_OK && !lp) st = qkv_last_status();
    for (int64_t i = 0; st == QKV_OK && i < s->n; i++) {
        int64_t C = lp->shape[lp->ndim - 1];
        const float *row = qkv_f32(lp) + i * C;
        int best = argmax(row, C);
        cJSON *o = out[i] = cJSON_CreateObject();
        cJSON *probs = o ? cJSON_CreateObject() : NULL;
        if (!probs || !cJSON_AddStringToObject(o, "label", r->task.labels[best]) ||
            !cJSON_AddNumberToObject(o, "prob", exp(row[best])) || !cJSON_AddItemToObject(o, "probs", probs)) {
            cJSON_Delete(probs);
            st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t c = 0; c < C && c < r->task.n_labels; c++)
            cJSON_AddNumberToObject(probs, r->task.labels[c], exp(row[c]));
    }
    free(idx);
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    return st;
}

cJSON *qkv_run_predict(qkv_run *r, const char *text) {
    if (r->task.kind == TASK_TAGGING) return qkv__tagging_tag(r, text);
    split s;
    if (qkv__task_encode_text(&r->task, text, &s) != QKV_OK) return NULL;
    cJSON *out = NULL;
    if (r->task.kind == TASK_CLASSIFY) {
        if (classify_split(r, &s, &out) != QKV_OK) {
            cJSON_Delete(out);
            out = NULL;
        }
    } else {
        out = qkv__run_evaluate(r, &s, 0); /* lm: the text's own loss over its windows */
    }
    qkv__split_free(&s);
    return out;
}

cJSON *qkv_run_predict_batch(qkv_run *r, const char *const *texts, size_t n) {
    if (r->task.kind != TASK_CLASSIFY) {
        cJSON *all = cJSON_CreateArray();
        for (size_t i = 0; all && i < n; i++) {
            cJSON *one = qkv_run_predict(r, texts[i]);
            if (!one) {
                cJSON_Delete(all);
                return NULL;
            }
            cJSON_AddItemToArray(all, one);
        }
        if (!all) qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return all;
    }
    split s;
    if (qkv__task_encode_texts(&r->task, texts, n, &s) != QKV_OK) return NULL;
    cJSON **one = calloc(n ? n : 1, sizeof *one);
    cJSON *all = one ? cJSON_CreateArray() : NULL;
    qkv_status st = all ? classify_split(r, &s, one) : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (size_t i = 0; one && i < n; i++) {
        if (st == QKV_OK) cJSON_AddItemToArray(all, one[i]);
        else cJSON_Delete(one[i]);
    }
    free(one);
    qkv__split_free(&s);
    if (st != QKV_OK) {
        cJSON_Delete(all);
        return NULL;
    }
    return all;
}

cJSON *qkv_run_answer(qkv_run *r, const char *context, const char *question) {
    return qkv__qa_answer(r, context, question);
}
