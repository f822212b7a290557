/* Scaled dot-product attention: gradient checks of both paths, the fused path against the materialising one at
 * sizes spanning several blocks, masks, dropout, determinism, memory, bad input, and PyTorch fixtures
 * (tests/ref/attention.py). */
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "qkv/attention.h"
#include "test.h"

/* How a test calls attention: options, path, and where the padding mask comes from. */
typedef struct {
    qkv_sdpa_opts o;
    bool materialized;
    bool pad_from_input; /* fixtures: the mask is input 3 */
    int bias_in, prefix_in; /* the input holding the additive bias / the prefix lengths, 0 for none */
} acfg;

static qkv_tensor *f_sdpa(qkv_ctx *c, qkv_tensor **in, void *u) {
    const acfg *a = u;
    qkv_sdpa_opts o = a->o;
    if (a->pad_from_input) o.key_padding = in[3];
    if (a->bias_in) o.bias = in[a->bias_in];
    if (a->prefix_in) o.prefix = in[a->prefix_in];
    return a->materialized ? qkv_sdpa_materialized(c, in[0], in[1], in[2], &o) : qkv_sdpa(c, in[0], in[1], in[2], &o);
}

static qkv_tensor *rand_t(uint64_t seed, float lo, float hi, int64_t b, int64_t h, int64_t t, int64_t d) {
    qkv_tensor *x = gc_rand(seed, lo, hi, QKV_DIMS(b, h, t, d));
    qkv_tensor_set_requires_grad(x, true);
    return x;
}

/* A [B, Tk] int32 padding mask: key j of batch b is padded when (j * 7 + b * 3) % 5 == 0, except key 0, so no
 * row is left without keys. */
static qkv_tensor *make_padding(int64_t B, int64_t Tk) {
    qkv_tensor *m = qkv_tensor_new(QKV_I32, QKV_DIMS(B, Tk));
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 1; j < Tk; j++) qkv_i32(m)[b * Tk + j] = (j * 7 + b * 3) % 5 == 0;
    return m;
}

/* ---- gradient checks ----------------------------------------------------------------------------------------- */

static bool gc_case(const char *name, acfg a, int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv,
                    bool pad) {
    qkv_tensor *in[4] = {rand_t(1, -1, 1, B, H, Tq, D), rand_t(2, -1, 1, B, H, Tk, D), rand_t(3, -1, 1, B, H, Tk, Dv),
                         NULL};
    qkv_tensor *m = pad ? make_padding(B, Tk) : NULL;
    a.o.key_padding = m;
    bool ok = true;
    for (int path = 0; path < 2; path++) {
        a.materialized = path == 1;
        char full[128];
        snprintf(full, sizeof full, "%s/%s", name, path ? "mat" : "fused");
        if (!gradcheck(full, f_sdpa, 3, in, &a, NULL)) ok = false;
    }
    for (int i = 0; i < 3; i++) qkv_tensor_free(in[i]);
    qkv_tensor_free(m);
    return ok;
}

TEST(gradcheck_both_paths) {
    acfg a = {.o = qkv_sdpa_defaults()};
    CHECK(gc_case("plain", a, 2, 2, 5, 5, 3, 4, false));
    a.o.causal = true;
    CHECK(gc_case("causal", a, 1, 2, 6, 6, 4, 3, false));
    CHECK(gc_case("cross causal pad", a, 2, 1, 3, 7, 3, 2, true));
    /* Tq > Tk under causality: the first rows see no key at all (output 0, zero gradient). */
    CHECK(gc_case("causal Tq>Tk", a, 1, 1, 7, 4, 2, 3, false));
    a.o.causal = false;
    a.o.scale = 0.7f;
    CHECK(gc_case("pad scale odd", a, 2, 1, 5, 9, 5, 1, true));
    a.o.scale = 0;
    a.o.dropout = 0.3f; /* gradcheck reseeds the context RNG, so every evaluation drops the same weights */
    CHECK(gc_case("dropout", a, 1, 2, 4, 6, 3, 3, false));
    a.o.dropout = 0;
    a.o.causal = true; /* several query and key blocks */
    CHECK(gc_case("blocks", a, 1, 1, 67, 70, 2, 2, true));
}

/* Bias [Bb, Hb, Tq, Tk] (input 3, with a gradient) and, when prefix is given, prefix lengths [B] (input 4). */
static bool gc_bias_case(const char *name, acfg a, int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t Bb,
                         int64_t Hb, const int32_t *prefix) {
    qkv_tensor *in[5] = {rand_t(4, -1, 1, B, H, Tq, 3), rand_t(5, -1, 1, B, H, Tk, 3), rand_t(6, -1, 1, B, H, Tk, 2),
                         rand_t(7, -2, 2, Bb, Hb, Tq, Tk), NULL};
    a.bias_in = 3;
    if (prefix) {
        in[4] = qkv_tensor_new(QKV_I32, QKV_DIMS(B));
        memcpy(in[4]->data, prefix, (size_t)B * sizeof(int32_t));
        a.prefix_in = 4;
    }
    bool ok = true;
    for (int path = 0; path < 2; path++) {
        a.materialized = path == 1;
        char full[128];
        snprintf(full, sizeof full, "%s/%s", name, path ? "mat" : "fused");
        if (!gradcheck(full, f_sdpa, prefix ? 5 : 4, in, &a, NULL)) ok = false;
    }
    for (int i = 0; i < 5; i++) qkv_tensor_free(in[i]);
    return ok;
}

TEST(gradcheck_bias_and_prefix) {
    acfg a = {.o = qkv_sdpa_defaults()};
    CHECK(gc_bias_case("bias full", a, 2, 2, 4, 5, 2, 2, NULL));
    CHECK(gc_bias_case("bias over heads", a, 2, 3, 4, 4, 1, 3, NULL));
    CHECK(gc_bias_case("bias over batch", a, 2, 2, 3, 5, 2, 1, NULL));
    CHECK(gc_bias_case("bias scalar-like", a, 2, 2, 3, 3, 1, 1, NULL));
    a.o.causal = true;
    a.o.dropout = 0.2f;
    CHECK(gc_bias_case("bias causal dropout", a, 1, 2, 5, 5, 1, 2, NULL));
    a.o.dropout = 0;
    CHECK(gc_bias_case("prefix bias", a, 2, 2, 6, 6, 1, 2, (const int32_t[]){2, 4}));
    CHECK(gc_bias_case("prefix past the end", a, 2, 1, 4, 4, 2, 1, (const int32_t[]){0, 9}));
}

/* ---- fused == materialised -------------------------------------------------------------------------------------- */

typedef struct {
    qkv_tensor *out, *dq, *dk, *dv;
} run_result;

static void run_free(run_result *r) {
    qkv_tensor_free(r->out);
    qkv_tensor_free(r->dq);
    qkv_tensor_free(r->dk);
    qkv_tensor_free(r->dv);
}

/* Forward + backward with upstream gradient g; results copied to the heap. The RNG is reseeded so dropout repeats. */
static bool run(const acfg *a, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v, const qkv_tensor *g, run_result *r) {
    memset(r, 0, sizeof *r);
    qkv_tensor *in[4] = {q, k, v, NULL};
    for (int i = 0; i < 3; i++)
        if (in[i]->grad) qkv_tensor_zero_grad(in[i]);
    qkv_ctx *c = qkv_ctx_new();
    qkv_rng_init(qkv_ctx_rng(c), 99);
    qkv_tensor *out = f_sdpa(c, in, (void *)a);
    bool ok = out && qkv_backward_with(c, out, g) == QKV_OK;
    if (!ok) printf("  run failed: %s\n", qkv_last_error());
    if (ok) {
        r->out = qkv_tensor_clone(out);
        r->dq = qkv_tensor_clone(q->grad);
        r->dk = qkv_tensor_clone(k->grad);
        r->dv = qkv_tensor_clone(v->grad);
    }
    qkv_ctx_free(c);
    return ok;
}

static bool fused_matches(const char *name, qkv_sdpa_opts o, int64_t B, int64_t H, int64_t Tq, int64_t Tk,
                          int64_t D, int64_t Dv, bool pad, float qrange) {
    qkv_tensor *q = rand_t(11, -qrange, qrange, B, H, Tq, D), *k = rand_t(12, -1, 1, B, H, Tk, D);
    qkv_tensor *v = rand_t(13, -1, 1, B, H, Tk, Dv), *g = gc_rand(14, -1, 1, QKV_DIMS(B, H, Tq, Dv));
    qkv_tensor *m = pad ? make_padding(B, Tk) : NULL;
    o.key_padding = m;
    acfg fa = {.o = o}, ma = {.o = o, .materialized = true};
    run_result rf = {0}, rm = {0};
    bool ok = run(&fa, q, k, v, g, &rf) && run(&ma, q, k, v, g, &rm);
    printf("  %s:\n", name);
    if (ok) {
        /* every comparison runs (and prints), then all must hold */
        bool o = test_allclose("    out", rf.out, rm.out, 1e-4, 1e-4), q_ = test_allclose("    dq", rf.dq, rm.dq, 1e-4, 1e-4);
        bool k_ = test_allclose("    dk", rf.dk, rm.dk, 1e-4, 1e-4), v_ = test_allclose("    dv", rf.dv, rm.dv, 1e-4, 1e-4);
        ok = o && q_ && k_ && v_;
    }
    run_free(&rf);
    run_free(&rm);
    qkv_tensor_free(q);
    qkv_tensor_free(k);
    qkv_tensor_free(v);
    qkv_tensor_free(g);
    qkv_tensor_free(m);
    return ok;
}

TEST(fused_equals_materialized) {
    qkv_sdpa_opts o = qkv_sdpa_defaults(), oc = o;
    oc.causal = true;
    CHECK(fused_matches("T=1024 D=64", o, 1, 2, 1024, 1024, 64, 64, false, 1));
    CHECK(fused_matches("T=1024 D=64 causal", oc, 1, 2, 1024, 1024, 64, 64, false, 1));
    CHECK(fused_matches("T=1000 D=64 padding, peaky scores", o, 2, 1, 1000, 1000, 64, 64, true, 4));
    CHECK(fused_matches("T=333 D=32 causal padding", oc, 2, 2, 333, 333, 32, 32, true, 3));
    CHECK(fused_matches("Tq=130 Tk=301 D=17 Dv=20 causal padding", oc, 1, 3, 130, 301, 17, 20, true, 2));
    CHECK(fused_matches("Tq=200 Tk=70 causal (empty rows)", oc, 1, 1, 200, 70, 8, 5, false, 1));
    qkv_sdpa_opts od = oc;
    od.dropout = 0.25f;
    CHECK(fused_matches("T=300 D=64 causal dropout", od, 1, 2, 300, 300, 64, 64, false, 1));
}

TEST(one_query_equals_materialized) {
    /* A decoding step: one query per head against Tk cached keys (the unpacked one-query path), edges included:
     * a single key, D and Dv off the vector width, keys spanning several blocks, padding, and enough heads for
     * the path to run on several threads. */
    qkv_sdpa_opts o = qkv_sdpa_defaults(), oc = o;
    oc.causal = true;
    CHECK(fused_matches("Tq=1 Tk=1", o, 2, 2, 1, 1, 8, 8, false, 1));
    CHECK(fused_matches("Tq=1 Tk=37 D=17 Dv=20 padding", o, 3, 2, 1, 37, 17, 20, true, 2));
    CHECK(fused_matches("Tq=1 Tk=130 D=64 causal padding", oc, 2, 4, 1, 130, 64, 64, true, 3));
    CHECK(fused_matches("Tq=1 Tk=300 D=64 many heads", oc, 64, 4, 1, 300, 64, 64, false, 1));
}

/* Bias and prefix at sizes spanning several query and key blocks, with whole-head and key-block tasks. */
static bool fused_matches_bias(const char *name, qkv_sdpa_opts o, int64_t B, int64_t H, int64_t T, int64_t Bb,
                               int64_t Hb, const int32_t *prefix) {
    qkv_tensor *q = rand_t(15, -2, 2, B, H, T, 16), *k = rand_t(16, -2, 2, B, H, T, 16);
    qkv_tensor *v = rand_t(17, -1, 1, B, H, T, 16), *g = gc_rand(18, -1, 1, QKV_DIMS(B, H, T, 16));
    qkv_tensor *bias = rand_t(19, -3, 3, Bb, Hb, T, T), *pre = NULL;
    if (prefix) {
        pre = qkv_tensor_new(QKV_I32, QKV_DIMS(B));
        memcpy(pre->data, prefix, (size_t)B * sizeof(int32_t));
    }
    o.bias = bias;
    o.prefix = pre;
    acfg fa = {.o = o}, ma = {.o = o, .materialized = true};
    run_result rf = {0}, rm = {0};
    qkv_tensor *gb[2] = {NULL, NULL};
    bool ok = run(&fa, q, k, v, g, &rf);
    if (ok) gb[0] = qkv_tensor_clone(bias->grad);
    qkv_tensor_zero_grad(bias);
    ok = ok && run(&ma, q, k, v, g, &rm);
    if (ok) gb[1] = qkv_tensor_clone(bias->grad);
    printf("  %s:\n", name);
    if (ok) {
        bool o_ = test_allclose("    out", rf.out, rm.out, 1e-4, 1e-4), q_ = test_allclose("    dq", rf.dq, rm.dq, 1e-4, 1e-4);
        bool k_ = test_allclose("    dk", rf.dk, rm.dk, 1e-4, 1e-4), v_ = test_allclose("    dv", rf.dv, rm.dv, 1e-4, 1e-4);
        bool b_ = test_allclose("    dbias", gb[0], gb[1], 1e-4, 1e-5);
        ok = o_ && q_ && k_ && v_ && b_;
    }
    run_free(&rf);
    run_free(&rm);
    qkv_tensor *all[7] = {q, k, v, g, bias, pre, gb[0]};
    for (int i = 0; i < 7; i++) qkv_tensor_free(all[i]);
    qkv_tensor_free(gb[1]);
    return ok;
}

TEST(fused_equals_materialized_bias_prefix) {
    qkv_sdpa_opts o = qkv_sdpa_defaults(), oc = o;
    oc.causal = true;
    CHECK(fused_matches_bias("T=200 bias [1, H] (4 heads)", o, 1, 4, 200, 1, 4, NULL));
    CHECK(fused_matches_bias("T=200 bias [B, 1] causal (3 heads)", oc, 2, 3, 200, 2, 1, NULL));
    CHECK(fused_matches_bias("T=200 bias [B, H] causal prefix", oc, 2, 2, 200, 2, 2, (const int32_t[]){70, 150}));
    CHECK(fused_matches_bias("T=130 bias [1, 1] causal prefix", oc, 2, 1, 130, 1, 1, (const int32_t[]){129, 1}));
}

TEST(prefix_mask_semantics) {
    /* Prefix 0 is plain causality; a prefix of Tk makes every key visible (the non-causal result); without causal
     * the prefix changes nothing. */
    const int64_t B = 2, H = 2, T = 90, D = 8;
    qkv_tensor *q = rand_t(71, -1, 1, B, H, T, D), *k = rand_t(72, -1, 1, B, H, T, D), *v = rand_t(73, -1, 1, B, H, T, D);
    qkv_tensor *pre = qkv_tensor_new(QKV_I32, QKV_DIMS(B));
    qkv_ctx *c = qkv_ctx_new();
    qkv_sdpa_opts causal = qkv_sdpa_defaults(), plain = causal, pc = causal;
    causal.causal = true;
    pc.causal = true;
    pc.prefix = pre;
    qkv_tensor *yc = qkv_sdpa(c, q, k, v, &causal), *yp = qkv_sdpa(c, q, k, v, &plain);
    qkv_tensor *y0 = qkv_sdpa(c, q, k, v, &pc);
    qkv_i32(pre)[0] = qkv_i32(pre)[1] = (int32_t)T;
    qkv_tensor *yT = qkv_sdpa(c, q, k, v, &pc);
    plain.prefix = pre;
    qkv_tensor *yn = qkv_sdpa(c, q, k, v, &plain);
    CHECK(yc && yp && y0 && yT && yn);
    if (yc && yp && y0 && yT && yn) {
        size_t bytes = (size_t)qkv_numel(yc) * sizeof(float);
        CHECK(memcmp(y0->data, yc->data, bytes) == 0);
        CHECK(memcmp(yT->data, yp->data, bytes) == 0);
        CHECK(memcmp(yn->data, yp->data, bytes) == 0);
    }
    qkv_ctx_free(c);
    qkv_tensor_free(q);
    qkv_tensor_free(k);
    qkv_tensor_free(v);
    qkv_tensor_free(pre);
}

/* ---- behaviour ------------------------------------------------------------------------------------------------ */

static bool all_zero(const qkv_tensor *t, int64_t from, int64_t to) {
    for (int64_t i = from; i < to; i++)
        if (qkv_f32(t)[i] != 0.0f) return false;
    return true;
}

TEST(fully_masked_rows_are_zero) {
    /* Every key of batch 1 is padded: its output and all its gradients are exactly 0, batch 0 is unaffected. */
    const int64_t B = 2, H = 2, T = 80, D = 8;
    qkv_tensor *q = rand_t(21, -1, 1, B, H, T, D), *k = rand_t(22, -1, 1, B, H, T, D);
    qkv_tensor *v = rand_t(23, -1, 1, B, H, T, D);
    qkv_tensor *g = gc_rand(24, -1, 1, QKV_DIMS(B, H, T, D)), *m = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    for (int64_t j = 0; j < T; j++) qkv_i32(m)[T + j] = 1;
    int64_t half = H * T * D;
    for (int path = 0; path < 2; path++) {
        acfg a = {.o = qkv_sdpa_defaults(), .materialized = path == 1};
        a.o.key_padding = m;
        run_result r;
        CHECK(run(&a, q, k, v, g, &r));
        if (!r.out) continue;
        CHECK(all_zero(r.out, half, 2 * half) && all_zero(r.dq, half, 2 * half));
        CHECK(all_zero(r.dk, half, 2 * half) && all_zero(r.dv, half, 2 * half));
        CHECK(!all_zero(r.out, 0, half) && !all_zero(r.dq, 0, half));
        bool finite = true;
        for (int64_t i = 0; i < 2 * half; i++) finite &= isfinite(qkv_f32(r.out)[i]) && isfinite(qkv_f32(r.dk)[i]);
        CHECK(finite);
        run_free(&r);
    }
    qkv_tensor_free(q);
    qkv_tensor_free(k);
    qkv_tensor_free(v);
    qkv_tensor_free(g);
    qkv_tensor_free(m);
}

TEST(views_and_weights) {
    /* q, k, v as permuted views of a [B, T, H, D] projection; the weights path returns softmax rows. */
    const int64_t B = 2, T = 70, H = 3, D = 16;
    qkv_tensor *x = gc_rand(31, -1, 1, QKV_DIMS(B, T, H, D));
    qkv_tensor_set_requires_grad(x, true);
    const int perm[4] = {0, 2, 1, 3};
    qkv_tensor *grads[2] = {NULL, NULL}, *outs[2] = {NULL, NULL};
    for (int path = 0; path < 2; path++) {
        qkv_ctx *c = qkv_ctx_new();
        qkv_tensor *xv = qkv_permute(c, x, perm);
        qkv_tensor *w = NULL;
        qkv_sdpa_opts o = qkv_sdpa_defaults();
        o.causal = true;
        if (path == 1) o.weights = &w;
        qkv_tensor *y = qkv_sdpa(c, xv, xv, xv, &o);
        CHECK_NN(y);
        if (path == 1) {
            CHECK(w && w->ndim == 4 && w->shape[2] == T && w->shape[3] == T);
            double worst = 0;
            for (int64_t r = 0; w && r < B * H * T; r++) {
                double s = 0;
                for (int64_t j = 0; j < T; j++) s += qkv_f32(w)[r * T + j];
                worst = fmax(worst, fabs(s - 1.0));
                /* causal: the last key is seen by the last row only */
                CHECK(r % T == T - 1 || qkv_f32(w)[r * T + T - 1] == 0.0f);
            }
            CHECKF(worst < 1e-5, "weights rows sum to 1 within %g", worst);
        }
        if (y) {
            CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_mul(c, y, y))));
            outs[path] = qkv_tensor_clone(y);
            grads[path] = qkv_tensor_clone(x->grad);
            qkv_tensor_zero_grad(x);
        }
        qkv_ctx_free(c);
    }
    if (outs[0] && outs[1]) {
        CHECK(test_allclose("views out fused vs weights path", outs[0], outs[1], 1e-4, 1e-5));
        CHECK(test_allclose("views grad fused vs weights path", grads[0], grads[1], 1e-4, 1e-5));
    }
    for (int i = 0; i < 2; i++) {
        qkv_tensor_free(outs[i]);
        qkv_tensor_free(grads[i]);
    }
    qkv_tensor_free(x);
}

TEST(one_tensor_as_q_k_v) {
    /* Self-attention on one tensor: its single gradient buffer receives dQ, dK and dV, from several threads.
     * 4 heads run as whole-head tasks, 3 heads as key-block tasks (with 2 threads). */
    for (int64_t H = 3; H <= 4; H++) {
        qkv_tensor *x = rand_t(35, -1, 1, 1, H, 500, 32), *g = gc_rand(36, -1, 1, QKV_DIMS(1, H, 500, 32));
        acfg f = {.o = qkv_sdpa_defaults()}, m = f;
        m.materialized = true;
        run_result rf = {0}, rm = {0};
        CHECK(run(&f, x, x, x, g, &rf) && run(&m, x, x, x, g, &rm));
        if (rf.dq && rm.dq) CHECK(test_allclose("same tensor: grad fused vs materialized", rf.dq, rm.dq, 1e-4, 1e-4));
        run_free(&rf);
        run_free(&rm);
        qkv_tensor_free(x);
        qkv_tensor_free(g);
    }
}

static qkv_tensor *f_sdpa_qt(qkv_ctx *c, qkv_tensor **in, void *u) { /* q given as [B, H, D, Tq], transposed */
    return f_sdpa(c, (qkv_tensor *[]){qkv_transpose(c, in[0], 2, 3), in[1], in[2], NULL}, u);
}

TEST(strided_last_dim) {
    /* A q whose last dimension is not unit-stride goes through a copy; gradients still reach it. */
    qkv_tensor *in[3] = {rand_t(37, -1, 1, 1, 2, 3, 6), rand_t(38, -1, 1, 1, 2, 5, 3), rand_t(39, -1, 1, 1, 2, 5, 2)};
    acfg a = {.o = qkv_sdpa_defaults()};
    a.o.causal = true;
    CHECK(gradcheck("transposed q", f_sdpa_qt, 3, in, &a, NULL));
    for (int i = 0; i < 3; i++) qkv_tensor_free(in[i]);
}

TEST(dropout_semantics) {
    const int64_t B = 1, H = 2, Tq = 50, Tk = 90, D = 8;
    qkv_tensor *q = rand_t(41, -1, 1, B, H, Tq, D), *k = rand_t(42, -1, 1, B, H, Tk, D);
    qkv_tensor *v = rand_t(43, -1, 1, B, H, Tk, D);
    qkv_ctx *c = qkv_ctx_new();
    qkv_sdpa_opts o = qkv_sdpa_defaults();
    qkv_tensor *w = NULL;
    o.weights = &w;
    o.dropout = 0.4f;
    qkv_rng_init(qkv_ctx_rng(c), 5);
    qkv_tensor *y = qkv_sdpa(c, q, k, v, &o);
    CHECK_NN(y);
    CHECK(qkv_ctx_rng(c)->counter == (uint64_t)(B * H * Tq * Tk + 3) / 4);
    int64_t zeros = 0, n = B * H * Tq * Tk, off_stream = 0;
    for (int64_t i = 0; w && i < n; i++) {
        zeros += qkv_f32(w)[i] == 0.0f;
        /* weight i (row-major) dropped exactly when number i of the counter-mode stream is below p; rows of 90 keys
         * start mid-block, so the mask kernel's block alignment is exercised */
        off_stream += (qkv_f32(w)[i] == 0.0f) != (qkv_rng_uniform_at(5, 0, (uint64_t)i) < 0.4f);
    }
    CHECKF(off_stream == 0, "%lld weights differ from the counter-mode stream", (long long)off_stream);
    double frac = (double)zeros / (double)n;
    CHECKF(fabs(frac - 0.4) < 0.03, "dropped fraction %.3f, expected 0.4", frac);
    /* Eval mode: no dropout, no RNG use; equal to p = 0. */
    qkv_ctx_set_training(c, false);
    uint64_t before = qkv_ctx_rng(c)->counter;
    o.weights = NULL;
    qkv_tensor *ye = qkv_sdpa(c, q, k, v, &o);
    o.dropout = 0;
    qkv_tensor *y0 = qkv_sdpa(c, q, k, v, &o);
    CHECK(ye && y0 && qkv_ctx_rng(c)->counter == before);
    if (ye && y0) CHECK(memcmp(ye->data, y0->data, (size_t)qkv_numel(y0) * sizeof(float)) == 0);
    qkv_ctx_free(c);
    qkv_tensor_free(q);
    qkv_tensor_free(k);
    qkv_tensor_free(v);
}

TEST(backward_is_deterministic) {
    for (int64_t H = 3; H <= 4; H++) { /* key-block tasks, whole-head tasks */
        qkv_tensor *q = rand_t(51, -1, 1, 1, H, 300, 32), *k = rand_t(52, -1, 1, 1, H, 300, 32);
        qkv_tensor *v = rand_t(53, -1, 1, 1, H, 300, 32), *g = gc_rand(54, -1, 1, QKV_DIMS(1, H, 300, 32));
        acfg a = {.o = qkv_sdpa_defaults()};
        a.o.causal = true;
        run_result r1 = {0}, r2 = {0};
        CHECK(run(&a, q, k, v, g, &r1) && run(&a, q, k, v, g, &r2));
        if (r1.dq && r2.dq) {
            size_t bytes = (size_t)qkv_numel(r1.dq) * sizeof(float);
            CHECK(memcmp(r1.dq->data, r2.dq->data, bytes) == 0 && memcmp(r1.dk->data, r2.dk->data, bytes) == 0);
            CHECK(memcmp(r1.out->data, r2.out->data, bytes) == 0);
        }
        run_free(&r1);
        run_free(&r2);
        qkv_tensor_free(q);
        qkv_tensor_free(k);
        qkv_tensor_free(v);
        qkv_tensor_free(g);
    }
}

TEST(fused_memory_is_linear) {
    /* T = 4096: a score matrix would be 64 MiB; the fused forward + backward must stay far below it. */
    const int64_t T = 4096, D = 64;
    qkv_tensor *q = rand_t(61, -1, 1, 1, 1, T, D), *k = rand_t(62, -1, 1, 1, 1, T, D);
    qkv_tensor *v = rand_t(63, -1, 1, 1, 1, T, D);
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *y = qkv_sdpa(c, q, k, v, NULL);
    CHECK_NN(y);
    if (y) CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_reshape(c, y, QKV_DIMS(-1)))));
    size_t bytes = qkv_ctx_arena_bytes(c), scores = (size_t)(T * T) * sizeof(float);
    CHECKF(bytes < scores / 4, "arena %zu bytes, scores would be %zu", bytes, scores);
    printf("  T=%lld fused fwd+bwd arena: %.1f MiB (scores: %.0f MiB)\n", (long long)T, bytes / 1048576.0,
           scores / 1048576.0);
    qkv_ctx_free(c);
    qkv_tensor_free(q);
    qkv_tensor_free(k);
    qkv_tensor_free(v);
}

TEST(bad_input_is_an_error) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *q = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 5, 8));
    qkv_tensor *k = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 6, 8));
    qkv_tensor *v = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 6, 4));
    qkv_tensor *k_badd = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 6, 7));
    qkv_tensor *v_badt = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 5, 4));
    qkv_tensor *k_badh = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 2, 6, 8));
    qkv_tensor *q3 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(3, 5, 8));
    qkv_tensor *qi = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 3, 5, 8));
    qkv_tensor *pad_bad = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 5));
    qkv_tensor *pad_3d = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 1, 6));
    CHECK(qkv_sdpa(c, q, k_badd, v, NULL) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "[2, 3, 6, 7]") != NULL);
    CHECK(qkv_sdpa(c, q, k, v_badt, NULL) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(qkv_sdpa_materialized(c, q, k_badh, v, NULL) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    CHECK(qkv_sdpa(c, q3, k, v, NULL) == NULL && strstr(qkv_last_error(), "4-D") != NULL);
    CHECK(qkv_sdpa(c, qi, k, v, NULL) == NULL);
    qkv_sdpa_opts o = qkv_sdpa_defaults();
    o.key_padding = pad_bad;
    CHECK(qkv_sdpa(c, q, k, v, &o) == NULL && strstr(qkv_last_error(), "key_padding") != NULL);
    o.key_padding = pad_3d;
    CHECK(qkv_sdpa_materialized(c, q, k, v, &o) == NULL && strstr(qkv_last_error(), "key_padding") != NULL);
    o = qkv_sdpa_defaults();
    o.dropout = 1.0f;
    CHECK(qkv_sdpa(c, q, k, v, &o) == NULL && strstr(qkv_last_error(), "dropout") != NULL);
    o.dropout = -0.1f;
    CHECK(qkv_sdpa(c, q, k, v, &o) == NULL);
    o.dropout = 0;
    o.scale = NAN;
    CHECK(qkv_sdpa(c, q, k, v, &o) == NULL && strstr(qkv_last_error(), "scale") != NULL);
    o = qkv_sdpa_defaults();
    o.bias = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 3, 5, 5));
    CHECK(qkv_sdpa(c, q, k, v, &o) == NULL && strstr(qkv_last_error(), "bias") != NULL);
    o.bias = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 2, 5, 6));
    CHECK(qkv_sdpa_materialized(c, q, k, v, &o) == NULL && strstr(qkv_last_error(), "bias") != NULL);
    o.bias = NULL;
    o.prefix = pad_bad;
    CHECK(qkv_sdpa(c, q, k, v, &o) == NULL && strstr(qkv_last_error(), "prefix") != NULL);
    qkv_error_clear();
    CHECK(qkv_sdpa(c, NULL, k, v, NULL) == NULL && qkv_last_status() == QKV_OK); /* NULL propagates silently */
    CHECK_NN(qkv_sdpa(c, q, k, v, NULL));                                         /* the good call still works */
    qkv_ctx_free(c);
}

/* ---- PyTorch fixtures ------------------------------------------------------------------------------------------ */

TEST(pytorch_fixtures) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("attention.safetensors"));
    if (!f) {
        CHECKF(false, "%s", qkv_last_error());
        return;
    }
    for (int path = 0; path < 2; path++) {
        acfg plain = {.o = qkv_sdpa_defaults(), .materialized = path == 1};
        acfg causal = plain, cross = plain, pad = plain;
        causal.o.causal = true;
        cross.o.causal = true;
        cross.pad_from_input = true;
        pad.pad_from_input = true;
        pad.o.scale = 0.3f;
        CHECK(fixture_check(f, "basic", f_sdpa, &plain, 1e-4, 1e-5));
        CHECK(fixture_check(f, "causal", f_sdpa, &causal, 1e-4, 1e-5));
        CHECK(fixture_check(f, "cross_causal_pad", f_sdpa, &cross, 1e-4, 1e-5));
        CHECK(fixture_check(f, "padding_scale", f_sdpa, &pad, 1e-4, 1e-5));
        CHECK(fixture_check(f, "blocks_causal", f_sdpa, &causal, 1e-4, 1e-5));
        acfg bias = plain, bias_cp = cross, bias_c = causal, pre = causal, pre_b = causal;
        bias.bias_in = 3;
        bias_cp.bias_in = 4;
        bias_c.bias_in = 3;
        pre.prefix_in = 3;
        pre_b.prefix_in = 3;
        pre_b.bias_in = 4;
        CHECK(fixture_check(f, "bias_heads", f_sdpa, &bias, 1e-4, 1e-5));
        CHECK(fixture_check(f, "bias_full_causal_pad", f_sdpa, &bias_cp, 1e-4, 1e-5));
        CHECK(fixture_check(f, "bias_blocks_causal", f_sdpa, &bias_c, 1e-4, 1e-5));
        CHECK(fixture_check(f, "prefix", f_sdpa, &pre, 1e-4, 1e-5));
        CHECK(fixture_check(f, "prefix_bias_blocks", f_sdpa, &pre_b, 1e-4, 1e-5));
    }
    qkv_st_close(f);
}

int main(void) {
    RUN(gradcheck_both_paths);
    RUN(gradcheck_bias_and_prefix);
    RUN(fused_equals_materialized);
    RUN(one_query_equals_materialized);
    RUN(fused_equals_materialized_bias_prefix);
    RUN(prefix_mask_semantics);
    RUN(fully_masked_rows_are_zero);
    RUN(views_and_weights);
    RUN(one_tensor_as_q_k_v);
    RUN(strided_last_dim);
    RUN(dropout_semantics);
    RUN(backward_is_deterministic);
    RUN(fused_memory_is_linear);
    RUN(bad_input_is_an_error);
    RUN(pytorch_fixtures);
    return test_finish();
}
