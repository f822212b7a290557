/* Helpers shared by the nn tests: PyTorch module fixtures (tests/ref/nn_common.py) loaded into a qkv_params by
 * state_dict name, and gradchecks over a layer's inputs and all of its parameters. */
#ifndef QKV_TEST_NN_COMMON_H
#define QKV_TEST_NN_COMMON_H

#include <stdio.h>
#include <string.h>

#include "gradcheck.h"
#include "qkv/nn.h"
#include "test.h"

#define NN_MAX_INPUTS 64

/* Copies every "K.param.<name>" into the parameter of that name; every trainable parameter must be given and every
 * stored one must exist, so the names match torch's state_dict one to one. */
static inline bool nn_load_params(qkv_st_file *f, const char *key, qkv_params *params) {
    char name[256], prefix[128];
    bool ok = true;
    snprintf(prefix, sizeof prefix, "%s.param.", key);
    for (int i = 0; i < qkv_params_count(params); i++) {
        qkv_tensor *p = qkv_params_at(params, i);
        if (!(p->flags & QKV_FLAG_REQUIRES_GRAD)) continue;
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        if (qkv_st_read_into(f, name, p) != QKV_OK) {
            printf("  %s: parameter %s not loaded: %s\n", key, p->name, qkv_last_error());
            ok = false;
        }
        qkv_tensor_zero_grad(p);
    }
    for (int i = 0; i < qkv_st_count(f); i++) {
        const char *n = qkv_st_name(f, i);
        if (strncmp(n, prefix, strlen(prefix)) == 0 && !qkv_params_find(params, n + strlen(prefix))) {
            printf("  %s: torch parameter %s has no qkv counterpart\n", key, n + strlen(prefix));
            ok = false;
        }
    }
    return ok;
}

/* Runs case K with the module's parameters from the file: compares the output, the input gradients and every
 * parameter gradient ("K.pgrad.<name>"). Training mode (dropout is 0 in the fixtures). */
static inline bool nn_fixture_check(qkv_st_file *f, const char *key, qkv_params *params, gc_fn fn, void *user,
                                    double rtol, double atol) {
    char name[256], what[300];
    bool ok = nn_load_params(f, key, params);
    int n = fixture_n_inputs(f, key);
    qkv_tensor *in[NN_MAX_INPUTS] = {0};
    for (int i = 0; i < n && i < NN_MAX_INPUTS; i++) {
        snprintf(name, sizeof name, "%s.in.%d", key, i);
        in[i] = qkv_st_read(f, name);
        snprintf(name, sizeof name, "%s.grad.%d", key, i);
        if (in[i] && qkv_st_find(f, name) >= 0) qkv_tensor_set_requires_grad(in[i], true);
    }
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *out = fn(ctx, in, user);
    snprintf(name, sizeof name, "%s.out", key);
    qkv_tensor *want = qkv_st_read(f, name);
    snprintf(name, sizeof name, "%s.gout", key);
    qkv_tensor *gout = qkv_st_read(f, name);
    if (!out || !want || !gout) {
        printf("  %s: forward failed: %s\n", key, qkv_last_error());
        ok = false;
        goto done;
    }
    snprintf(what, sizeof what, "%s out", key);
    ok &= test_allclose(what, out, want, rtol, atol);
    if (qkv_backward_with(ctx, out, gout) != QKV_OK) {
        printf("  %s: backward failed: %s\n", key, qkv_last_error());
        ok = false;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s.grad.%d", key, i);
        if (qkv_st_find(f, name) < 0) continue;
        qkv_tensor *g = qkv_st_read(f, name);
        snprintf(what, sizeof what, "%s grad input %d", key, i);
        if (!in[i]->grad) {
            printf("  %s: no gradient\n", what);
            ok = false;
        } else {
            ok &= test_allclose(what, in[i]->grad, g, rtol, atol);
        }
        qkv_tensor_free(g);
    }
    for (int i = 0; i < qkv_params_count(params); i++) {
        qkv_tensor *p = qkv_params_at(params, i);
        if (!(p->flags & QKV_FLAG_REQUIRES_GRAD)) continue;
        snprintf(name, sizeof name, "%s.pgrad.%s", key, p->name);
        qkv_tensor *g = qkv_st_read(f, name);
        snprintf(what, sizeof what, "%s grad %s", key, p->name);
        if (!g || !p->grad) {
            printf("  %s: missing (%s)\n", what, g ? "qkv computed none" : qkv_last_error());
            ok = false;
        } else {
            ok &= test_allclose(what, p->grad, g, rtol, atol);
        }
        qkv_tensor_free(g);
    }
done:
    qkv_tensor_free(want);
    qkv_tensor_free(gout);
    for (int i = 0; i < n && i < NN_MAX_INPUTS; i++) qkv_tensor_free(in[i]);
    qkv_ctx_free(ctx);
    return ok;
}

/* gradcheck of fn over its n inputs and every trainable parameter of params (appended after the inputs; fn
 * reaches them through its layer). */
static inline bool nn_gradcheck_opts(const char *name, gc_fn fn, int n, qkv_tensor **inputs, qkv_params *params,
                                     void *user, const gc_opts *opts) {
    qkv_tensor *all[NN_MAX_INPUTS];
    int k = 0;
    for (int i = 0; i < n && k < NN_MAX_INPUTS; i++) all[k++] = inputs[i];
    for (int i = 0; params && i < qkv_params_count(params) && k < NN_MAX_INPUTS; i++)
        if (qkv_params_at(params, i)->flags & QKV_FLAG_REQUIRES_GRAD) all[k++] = qkv_params_at(params, i);
    return gradcheck(name, fn, k, all, user, opts);
}

static inline bool nn_gradcheck(const char *name, gc_fn fn, int n, qkv_tensor **inputs, qkv_params *params,
                                void *user) {
    return nn_gradcheck_opts(name, fn, n, inputs, params, user, NULL);
}

/* The fixture file or NULL (with a failure) if it is missing. */
static inline qkv_st_file *nn_open_fixture(const char *name) {
    qkv_st_file *f = qkv_st_open(test_fixture_path(name));
    CHECKF(f != NULL, "fixture %s: %s (run /usr/bin/python3 tests/ref/%.*s.py)", name, qkv_last_error(),
           (int)(strlen(name) - strlen(".safetensors")), name);
    return f;
}

#endif
