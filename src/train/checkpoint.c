/* Checkpoints on top of safetensors: tensors by name, training state as metadata strings. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "qkv/checkpoint.h"
#include "qkv/safetensors.h"

qkv_status qkv_checkpoint_save(const char *path, const qkv_params *params, const qkv_optim *opt,
                               const qkv_train_state *state, const char *config_json) {
    return qkv_checkpoint_save_ex(path, params, opt, state, config_json, 0, NULL, NULL);
}

qkv_status qkv_checkpoint_save_ex(const char *path, const qkv_params *params, const qkv_optim *opt,
                                  const qkv_train_state *state, const char *config_json, int n_extra,
                                  const char *const *keys, const char *const *values) {
    qkv_st_writer *w = qkv_st_writer_new();
    if (!w) return qkv_last_status();
    qkv_status st = qkv_st_writer_meta(w, "format", "qkv");
    for (int i = 0; st == QKV_OK && i < n_extra; i++) st = qkv_st_writer_meta(w, keys[i], values[i]);
    for (int i = 0; st == QKV_OK && i < qkv_params_count(params); i++) {
        qkv_tensor *t = qkv_params_at(params, i);
        st = qkv_st_writer_add(w, t->name, t);
    }
    for (int i = 0; st == QKV_OK && opt && i < qkv_optim_state_count(opt); i++) {
        qkv_tensor *t = qkv_optim_state_at(opt, i);
        st = qkv_st_writer_add(w, t->name, t);
    }
    char buf[64];
#define META(key, fmt, val)                                  \
    if (st == QKV_OK) {                                      \
        snprintf(buf, sizeof buf, fmt, val);                 \
        st = qkv_st_writer_meta(w, key, buf);                \
    }
    if (opt) META("qkv.optim_steps", "%ld", qkv_optim_steps(opt));
    if (state) {
        META("qkv.step", "%ld", state->step);
        META("qkv.rng_seed", "%" PRIu64, state->rng.seed);
        META("qkv.rng_counter", "%" PRIu64, state->rng.counter);
        META("qkv.data_epoch", "%" PRIu64, state->data_epoch);
        META("qkv.data_pos", "%" PRIu64, state->data_pos);
    }
#undef META
    if (st == QKV_OK && config_json) st = qkv_st_writer_meta(w, "qkv.config", config_json);
    if (st == QKV_OK) st = qkv_st_writer_save(w, path);
    qkv_st_writer_free(w);
    return st;
}

/* An integer in [0, max]; strtoull alone would take "-5" as 2^64 - 5, which a resumed run then uses as a step, an
 * epoch or an index. */
static bool meta_u64(const qkv_st_file *f, const char *key, uint64_t max, uint64_t *out) {
    const char *v = qkv_st_metadata(f, key);
    char *end;
    if (!v) {
        qkv_error_set(QKV_ERR_FORMAT, "%s: checkpoint metadata has no '%s'", qkv_st_path(f), key);
        return false;
    }
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end || errno == ERANGE || x > max) {
        qkv_error_set(QKV_ERR_FORMAT, "%s: metadata '%s' = '%s' is not an integer in [0, %" PRIu64 "]",
                      qkv_st_path(f), key, v, max);
        return false;
    }
    *out = x;
    return true;
}

/* Appends a name to a bounded, comma-separated list for error messages. */
static void note(char *list, size_t size, int *count, const char *name) {
    if (*count < 8) {
        size_t len = strlen(list);
        snprintf(list + len, size - len, "%s'%s'", len ? ", " : "", name);
    }
    (*count)++;
}

/* Pass 1 checks presence and shape of every expected tensor (so a bad file changes nothing); pass 2 reads. */
static qkv_status check_tensor(const qkv_st_file *f, const qkv_tensor *t, char *missing, size_t size,
                               int *n_missing) {
    const char *dtype;
    int ndim;
    int64_t shape[QKV_MAX_DIMS];
    if (qkv_st_find(f, t->name) < 0) {
        note(missing, size, n_missing, t->name);
        return QKV_OK;
    }
    if (qkv_st_info(f, t->name, &dtype, &ndim, shape) != QKV_OK) return qkv_last_status();
    bool same = ndim == t->ndim;
    for (int d = 0; same && d < ndim; d++) same = shape[d] == t->shape[d];
    if (!same) {
        char want[96], have[96];
        qkv_tensor h = {.ndim = ndim};
        memcpy(h.shape, shape, sizeof shape);
        return qkv_error_set(QKV_ERR_FORMAT, "%s: tensor '%s' has shape %s but the model needs %s", qkv_st_path(f),
                             t->name, qkv_shape_str(&h, have, sizeof have), qkv_shape_str(t, want, sizeof want));
    }
    return QKV_OK;
}

qkv_status qkv_checkpoint_load(const char *path, qkv_params *params, qkv_optim *opt, qkv_train_state *state,
                               char **config_json) {
    qkv_st_file *f = qkv_st_open(path);
    if (!f) return qkv_last_status();
    char missing[512] = "", unknown[512] = "";
    int n_missing = 0, n_unknown = 0;
    qkv_status st = QKV_OK;
    for (int i = 0; st == QKV_OK && i < qkv_params_count(params); i++)
        st = check_tensor(f, qkv_params_at(params, i), missing, sizeof missing, &n_missing);
    for (int i = 0; st == QKV_OK && opt && i < qkv_optim_state_count(opt); i++)
        st = check_tensor(f, qkv_optim_state_at(opt, i), missing, sizeof missing, &n_missing);
    /* Tensors in the file nothing here expects (optimiser slots are ignored when no optimiser is loaded). */
    for (int i = 0; st == QKV_OK && i < qkv_st_count(f); i++) {
        const char *name = qkv_st_name(f, i);
        bool known = qkv_params_find(params, name) != NULL;
        for (int k = 0; !known && opt && k < qkv_optim_state_count(opt); k++)
            known = !strcmp(qkv_optim_state_at(opt, k)->name, name);
        if (!known && !opt && (!strncmp(name, "sgd.", 4) || !strncmp(name, "adam.", 5) ||
                               !strncmp(name, "adamw.", 6) || !strncmp(name, "adadelta.", 9)))
            known = true;
        if (!known) note(unknown, sizeof unknown, &n_unknown, name);
    }
    if (st == QKV_OK && (n_missing || n_unknown)) {
        st = qkv_error_set(QKV_ERR_FORMAT, "%s: %d tensor(s) missing%s%s%s; %d unexpected%s%s%s", path, n_missing,
                           n_missing ? " (" : "", missing, n_missing ? (n_missing > 8 ? ", ...)" : ")") : "",
                           n_unknown, n_unknown ? " (" : "", unknown,
                           n_unknown ? (n_unknown > 8 ? ", ...)" : ")") : "");
    }
    /* Metadata next, still before any tensor is touched. */
    uint64_t v = 0, step = 0, seed = 0, counter = 0, epoch = 0, pos = 0;
    /* Steps, epochs and positions become longs and int64 indices: at most 2^62 keeps their arithmetic exact. */
    const uint64_t count_max = (uint64_t)1 << 62;
    if (st == QKV_OK && opt && !meta_u64(f, "qkv.optim_steps", count_max, &v)) st = qkv_last_status();
    if (st == QKV_OK && state &&
        !(meta_u64(f, "qkv.step", count_max, &step) && meta_u64(f, "qkv.rng_seed", UINT64_MAX, &seed) &&
          meta_u64(f, "qkv.rng_counter", UINT64_MAX, &counter) && meta_u64(f, "qkv.data_epoch", count_max, &epoch) &&
          meta_u64(f, "qkv.data_pos", count_max, &pos)))
        st = qkv_last_status();
    if (st == QKV_OK) qkv__weights_changed();
    for (int i = 0; st == QKV_OK && i < qkv_params_count(params); i++) {
        qkv_tensor *t = qkv_params_at(params, i);
        st = qkv_st_read_into(f, t->name, t);
    }
    for (int i = 0; st == QKV_OK && opt && i < qkv_optim_state_count(opt); i++) {
        qkv_tensor *t = qkv_optim_state_at(opt, i);
        st = qkv_st_read_into(f, t->name, t);
    }
    /* A NaN read into a model shows only later, as nan losses and blank attention maps: name the tensor now. */
    int64_t at = -1;
    const qkv_tensor *bad = st == QKV_OK ? qkv_params_find_nan(params, &at) : NULL;
    for (int i = 0; st == QKV_OK && !bad && opt && i < qkv_optim_state_count(opt); i++)
        if ((at = qkv_tensor_find_nan(qkv_optim_state_at(opt, i))) >= 0) bad = qkv_optim_state_at(opt, i);
    if (bad)
        st = qkv_error_set(QKV_ERR_FORMAT, "%s: tensor '%s' holds NaN (element %lld): a corrupt checkpoint, or one "
                           "saved after training diverged", path, bad->name, (long long)at);
    if (st == QKV_OK && opt) qkv_optim_set_steps(opt, (long)v);
    if (st == QKV_OK && state) {
        state->step = (long)step;
        state->rng.seed = seed;
        state->rng.counter = counter;
        state->data_epoch = epoch;
        state->data_pos = pos;
    }
    if (st == QKV_OK && config_json) {
        const char *c = qkv_st_metadata(f, "qkv.config");
        *config_json = c ? strdup(c) : NULL;
    }
    qkv_st_close(f);
    return st;
}
