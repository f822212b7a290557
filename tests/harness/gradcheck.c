#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

gc_opts gc_defaults(void) { return (gc_opts){.eps = 1e-2, .atol = 2e-3, .rtol = 2e-2}; }

qkv_tensor *gc_rand(uint64_t seed, float lo, float hi, int ndim, const int64_t *shape) {
    qkv_tensor *t = qkv_tensor_new(QKV_F32, ndim, shape);
    if (!t) return NULL;
    qkv_rng r;
    qkv_rng_init(&r, seed);
    qkv_rng_fill_uniform(&r, t, lo, hi);
    return t;
}

/* L = sum(w * out) in double; out may be a view. */
static double weighted_sum(const qkv_tensor *out, const qkv_tensor *w) {
    qkv_tensor *c = qkv_tensor_clone(out);
    double s = 0;
    const float *o = c->data, *wp = w->data;
    for (int64_t i = 0; i < qkv_numel(c); i++) s += (double)o[i] * wp[i];
    qkv_tensor_free(c);
    return s;
}

static double eval_loss(qkv_ctx *ctx, gc_fn f, qkv_tensor **in, void *user, const qkv_tensor *w) {
    qkv_ctx_reset(ctx);
    qkv_rng_init(qkv_ctx_rng(ctx), 4242);
    bool prev = qkv_ctx_set_grad(ctx, false);
    qkv_tensor *out = f(ctx, in, user);
    qkv_ctx_set_grad(ctx, prev);
    return out ? weighted_sum(out, w) : NAN;
}

bool gradcheck(const char *name, gc_fn f, int n, qkv_tensor **in, void *user, const gc_opts *opts) {
    gc_opts o = opts ? *opts : gc_defaults();
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_rng_init(qkv_ctx_rng(ctx), 4242);
    for (int i = 0; i < n; i++)
        if (in[i]->grad) qkv_tensor_zero_grad(in[i]);
    qkv_tensor *out = f(ctx, in, user);
    if (!out) {
        printf("  gradcheck %s: forward failed: %s\n", name, qkv_last_error());
        qkv_ctx_free(ctx);
        return false;
    }
    qkv_tensor *w = gc_rand(777, -1.0f, 1.0f, out->ndim, out->shape);
    if (qkv_backward_with(ctx, out, w) != QKV_OK) {
        printf("  gradcheck %s: backward failed: %s\n", name, qkv_last_error());
        qkv_tensor_free(w);
        qkv_ctx_free(ctx);
        return false;
    }
    bool ok = true;
    for (int i = 0; i < n; i++) {
        qkv_tensor *x = in[i];
        if (x->dtype != QKV_F32 || !(x->flags & QKV_FLAG_REQUIRES_GRAD)) continue;
        if (!x->grad) {
            printf("  gradcheck %s: input %d received no gradient\n", name, i);
            ok = false;
            continue;
        }
        qkv_tensor *analytic = qkv_tensor_clone(x->grad);
        float *xp = x->data;
        const float *ap = analytic->data;
        double worst = 0, max_err = 0;
        int64_t worst_j = -1;
        double worst_num = 0;
        for (int64_t j = 0; j < qkv_numel(x); j++) {
            float saved = xp[j];
            xp[j] = saved + (float)o.eps;
            double lp = eval_loss(ctx, f, in, user, w);
            xp[j] = saved - (float)o.eps;
            double lm = eval_loss(ctx, f, in, user, w);
            xp[j] = saved;
            double h = ((double)(saved + (float)o.eps) - (double)(saved - (float)o.eps));
            double num = (lp - lm) / h;
            double err = fabs(num - ap[j]);
            if (err > max_err) max_err = err;
            double excess = err - (o.atol + o.rtol * fabs(num));
            if (excess > worst || isnan(err)) {
                worst = isnan(err) ? INFINITY : excess;
                worst_j = j;
                worst_num = num;
            }
        }
        printf("  gradcheck %-28s input %d: max|analytic-numeric| = %.3g (eps %g, atol %g, rtol %g)\n", name, i,
               max_err, o.eps, o.atol, o.rtol);
        if (worst_j >= 0) {
            printf("  gradcheck %s: input %d element %lld: analytic %.6g numeric %.6g\n", name, i,
                   (long long)worst_j, ap[worst_j], worst_num);
            ok = false;
        }
        qkv_tensor_free(analytic);
    }
    qkv_tensor_free(w);
    qkv_ctx_free(ctx);
    return ok;
}

int fixture_n_inputs(qkv_st_file *file, const char *key) {
    char name[256];
    int n = 0;
    for (;; n++) {
        snprintf(name, sizeof name, "%s.in.%d", key, n);
        if (qkv_st_find(file, name) < 0) return n;
    }
}

bool fixture_check(qkv_st_file *file, const char *key, gc_fn f, void *user, double rtol, double atol) {
    char name[256];
    int n = fixture_n_inputs(file, key);
    qkv_tensor *in[16] = {0};
    bool ok = n > 0 && n <= 16;
    if (!ok) printf("  fixture %s: %d inputs\n", key, n);
    for (int i = 0; ok && i < n; i++) {
        snprintf(name, sizeof name, "%s.in.%d", key, i);
        in[i] = qkv_st_read(file, name);
        if (!in[i]) {
            printf("  fixture %s: %s\n", key, qkv_last_error());
            ok = false;
            break;
        }
        snprintf(name, sizeof name, "%s.grad.%d", key, i);
        if (in[i]->dtype == QKV_F32 && qkv_st_find(file, name) >= 0) qkv_tensor_set_requires_grad(in[i], true);
    }
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *out = ok ? f(ctx, in, user) : NULL;
    snprintf(name, sizeof name, "%s.out", key);
    qkv_tensor *want = ok ? qkv_st_read(file, name) : NULL;
    char what[300];
    snprintf(what, sizeof what, "%s output", key);
    if (ok) ok = test_allclose(what, out, want, rtol, atol);
    snprintf(name, sizeof name, "%s.gout", key);
    qkv_tensor *gout = qkv_st_find(file, name) >= 0 ? qkv_st_read(file, name) : NULL;
    if (ok && gout) {
        if (qkv_backward_with(ctx, out, gout) != QKV_OK) {
            printf("  fixture %s: backward: %s\n", key, qkv_last_error());
            ok = false;
        }
        for (int i = 0; ok && i < n; i++) {
            snprintf(name, sizeof name, "%s.grad.%d", key, i);
            if (qkv_st_find(file, name) < 0) continue;
            qkv_tensor *g = qkv_st_read(file, name);
            snprintf(what, sizeof what, "%s grad of input %d", key, i);
            if (!test_allclose(what, in[i]->grad, g, rtol, atol)) ok = false;
            qkv_tensor_free(g);
        }
    }
    qkv_tensor_free(gout);
    qkv_tensor_free(want);
    for (int i = 0; i < n && i < 16; i++) qkv_tensor_free(in[i]);
    qkv_ctx_free(ctx);
    return ok;
}
