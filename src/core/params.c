/* Named parameter collections. A flat array: models have at most a few hundred tensors, and order matters (it
 * is the order of checkpoints and of optimiser state). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "qkv/params.h"

struct qkv_params {
    qkv_tensor **t;
    int n, cap;
    qkv_params_check_fn check;
    void *check_user;
};

void qkv_params_set_check(qkv_params *p, qkv_params_check_fn fn, void *user) {
    p->check = fn;
    p->check_user = user;
}

qkv_params *qkv_params_new(void) {
    qkv_params *p = calloc(1, sizeof *p);
    if (!p) qkv_error_set(QKV_ERR_NOMEM, "out of memory creating a parameter collection");
    return p;
}

static uint64_t weights_epoch;

uint64_t qkv__weights_epoch(void) { return __atomic_load_n(&weights_epoch, __ATOMIC_ACQUIRE); }

void qkv__weights_changed(void) { __atomic_fetch_add(&weights_epoch, 1, __ATOMIC_ACQ_REL); }

void qkv_params_free(qkv_params *p) {
    if (!p) return;
    qkv__weights_changed();
    for (int i = 0; i < p->n; i++) qkv_tensor_free(p->t[i]);
    free(p->t);
    free(p);
}

qkv_status qkv_params_join(char *buf, size_t size, const char *prefix, const char *name) {
    int len = (prefix && *prefix) ? snprintf(buf, size, "%s.%s", prefix, name) : snprintf(buf, size, "%s", name);
    if (len < 0 || (size_t)len >= size)
        return qkv_error_set(QKV_ERR_INVALID, "parameter name '%s%s%s' longer than %zu characters",
                             prefix ? prefix : "", prefix && *prefix ? "." : "", name, size ? size - 1 : 0);
    return QKV_OK;
}

static qkv_tensor *add(qkv_params *p, const char *prefix, const char *name, int ndim, const int64_t *shape,
                       bool trainable) {
    char full[sizeof(((qkv_tensor *)0)->name)];
    if (qkv_params_join(full, sizeof full, prefix, name)) return NULL;
    if (qkv_params_find(p, full)) {
        qkv_error_set(QKV_ERR_INVALID, "parameter '%s' defined twice", full);
        return NULL;
    }
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 32;
        qkv_tensor **t = realloc(p->t, sizeof *t * (size_t)cap);
        if (!t) {
            qkv_error_set(QKV_ERR_NOMEM, "out of memory adding parameter '%s'", full);
            return NULL;
        }
        p->t = t;
        p->cap = cap;
    }
    if (p->check && p->check(p->check_user, full, ndim, shape) != QKV_OK) return NULL;
    qkv_tensor *t = qkv_tensor_new(QKV_F32, ndim, shape);
    if (!t) return NULL;
    qkv_tensor_set_name(t, full);
    qkv_tensor_set_requires_grad(t, trainable);
    p->t[p->n++] = t;
    return t;
}

qkv_tensor *qkv_params_add(qkv_params *p, const char *prefix, const char *name, int ndim, const int64_t *shape) {
    return add(p, prefix, name, ndim, shape, true);
}

qkv_tensor *qkv_params_add_buffer(qkv_params *p, const char *prefix, const char *name, int ndim,
                                  const int64_t *shape) {
    return add(p, prefix, name, ndim, shape, false);
}

int qkv_params_count(const qkv_params *p) { return p->n; }
qkv_tensor *qkv_params_at(const qkv_params *p, int i) { return (i >= 0 && i < p->n) ? p->t[i] : NULL; }

qkv_tensor *qkv_params_find(const qkv_params *p, const char *name) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->t[i]->name, name) == 0) return p->t[i];
    return NULL;
}

int64_t qkv_params_numel(const qkv_params *p) {
    int64_t n = 0;
    for (int i = 0; i < p->n; i++)
        if (p->t[i]->flags & QKV_FLAG_REQUIRES_GRAD) n += qkv_numel(p->t[i]);
    return n;
}

void qkv_params_zero_grad(qkv_params *p) {
    for (int i = 0; i < p->n; i++) qkv_tensor_zero_grad(p->t[i]);
}

int64_t qkv_tensor_find_nan(const qkv_tensor *t) {
    if (!t || t->dtype != QKV_F32 || !t->data || !qkv_is_contiguous(t)) return -1;
    const float *x = t->data;
    int64_t n = qkv_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (x[i] != x[i]) return i;
    return -1;
}

qkv_tensor *qkv_params_find_nan(const qkv_params *p, int64_t *index) {
    for (int i = 0; p && i < p->n; i++) {
        int64_t k = qkv_tensor_find_nan(p->t[i]);
        if (k >= 0) {
            if (index) *index = k;
            return p->t[i];
        }
    }
    return NULL;
}
