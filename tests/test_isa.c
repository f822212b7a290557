/* Kernel dispatch: every path this CPU runs (qkv_cpu_set_isa) gives the same results as the portable one, for
 * every dispatched kernel, forward and backward; QKV_ISA is parsed and refused as documented. The PyTorch
 * fixtures are checked on every path too: CMake reruns the op and model tests under QKV_ISA=avx2 and =generic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "test.h"

#define MAX_IN 6

/* A case: builds its output from inputs made afresh from fixed seeds by `make`. */
typedef struct {
    const char *name;
    int n;                                      /* inputs */
    void (*make)(qkv_tensor **in);              /* fills in[0..n) (heap tensors) */
    qkv_tensor *(*f)(qkv_ctx *, qkv_tensor **); /* the op(s) under test */
    double rtol, atol;
} kcase;

/* Output and input gradients of one run. */
typedef struct {
    qkv_tensor *out, *grad[MAX_IN];
} result;

static qkv_tensor *rnd(uint64_t seed, float lo, float hi, int ndim, const int64_t *shape, bool grad) {
    qkv_tensor *t = gc_rand(seed, lo, hi, ndim, shape);
    if (t && grad) qkv_tensor_set_requires_grad(t, true);
    return t;
}

/* Runs c on the current path: loss = sum(f(in) * w), w fixed, then backward. */
static bool run_case(const kcase *c, result *r) {
    qkv_tensor *in[MAX_IN] = {0};
    c->make(in);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *y = ctx ? c->f(ctx, in) : NULL;
    bool ok = y != NULL;
    if (ok) {
        qkv_tensor *w = rnd(99, -1.0f, 1.0f, y->ndim, y->shape, false);
        qkv_tensor *loss = qkv_sum(ctx, qkv_mul(ctx, y, w), -1, false);
        for (int d = y->ndim - 1; loss && loss->ndim > 0; d--) loss = qkv_sum(ctx, loss, -1, false);
        ok = loss && qkv_backward(ctx, loss) == QKV_OK;
        r->out = qkv_tensor_clone(y);
        qkv_tensor_free(w);
    }
    for (int i = 0; i < c->n; i++) {
        r->grad[i] = in[i] && in[i]->grad ? qkv_tensor_clone(in[i]->grad) : NULL;
        qkv_tensor_free(in[i]);
    }
    if (!ok) printf("  %s: %s\n", c->name, qkv_last_error());
    qkv_ctx_free(ctx);
    return ok;
}

static void free_result(result *r) {
    qkv_tensor_free(r->out);
    for (int i = 0; i < MAX_IN; i++) qkv_tensor_free(r->grad[i]);
    memset(r, 0, sizeof *r);
}

/* Every supported path against the portable one. */
static void check_paths(const kcase *c) {
    qkv_isa keep = qkv_cpu_isa();
    result ref = {0};
    CHECK_OK(qkv_cpu_set_isa(QKV_ISA_GENERIC));
    CHECKF(run_case(c, &ref), "%s failed on the generic path", c->name);
    for (int isa = QKV_ISA_AVX2; isa <= QKV_ISA_AVX512; isa++) {
        if (!qkv_cpu_supports((qkv_isa)isa)) {
            printf("  %s: %s not supported here\n", c->name, qkv_cpu_isa_name((qkv_isa)isa));
            continue;
        }
        result r = {0};
        CHECK_OK(qkv_cpu_set_isa((qkv_isa)isa));
        CHECKF(run_case(c, &r), "%s failed on %s", c->name, qkv_cpu_isa_name((qkv_isa)isa));
        char what[128];
        snprintf(what, sizeof what, "%s %s out", c->name, qkv_cpu_isa_name((qkv_isa)isa));
        if (r.out && ref.out) CHECK(test_allclose(what, r.out, ref.out, c->rtol, c->atol));
        for (int i = 0; i < c->n; i++) {
            CHECKF(!r.grad[i] == !ref.grad[i], "%s: gradient %d present on one path only", c->name, i);
            if (!r.grad[i] || !ref.grad[i]) continue;
            snprintf(what, sizeof what, "%s %s grad %d", c->name, qkv_cpu_isa_name((qkv_isa)isa), i);
            CHECK(test_allclose(what, r.grad[i], ref.grad[i], c->rtol, c->atol));
        }
        free_result(&r);
    }
    free_result(&ref);
    CHECK_OK(qkv_cpu_set_isa(keep));
}

/* ---- cases --------------------------------------------------------------------------------------------------- */

/* Attention shapes with ragged edges: T not a multiple of any tile, D not a multiple of 8 or 16. */
static int64_t att_T = 77, att_Tk = 77, att_D = 24;

static void make_qkv(qkv_tensor **in) {
    in[0] = rnd(1, -2.0f, 2.0f, QKV_DIMS(2, 3, att_T, att_D), true);
    in[1] = rnd(2, -2.0f, 2.0f, QKV_DIMS(2, 3, att_Tk, att_D), true);
    in[2] = rnd(3, -1.0f, 1.0f, QKV_DIMS(2, 3, att_Tk, att_D), true);
}

static qkv_tensor *f_sdpa(qkv_ctx *ctx, qkv_tensor **in) { return qkv_sdpa(ctx, in[0], in[1], in[2], NULL); }

static qkv_tensor *f_sdpa_causal(qkv_ctx *ctx, qkv_tensor **in) {
    qkv_sdpa_opts o = qkv_sdpa_defaults();
    o.causal = true;
    return qkv_sdpa(ctx, in[0], in[1], in[2], &o);
}

static void make_x(qkv_tensor **in) { in[0] = rnd(4, -6.0f, 6.0f, QKV_DIMS(37, 133), true); }

static void make_ln(qkv_tensor **in) {
    in[0] = rnd(5, -3.0f, 5.0f, QKV_DIMS(29, 203), true);
    in[1] = rnd(6, 0.5f, 1.5f, QKV_DIMS(203), true);
    in[2] = rnd(7, -0.5f, 0.5f, QKV_DIMS(203), true);
}

static qkv_tensor *f_softmax(qkv_ctx *ctx, qkv_tensor **in) { return qkv_softmax(ctx, in[0], -1); }
static qkv_tensor *f_softmax0(qkv_ctx *ctx, qkv_tensor **in) { return qkv_softmax(ctx, in[0], 0); }
static qkv_tensor *f_log_softmax(qkv_ctx *ctx, qkv_tensor **in) { return qkv_log_softmax(ctx, in[0], -1); }
static qkv_tensor *f_layer_norm(qkv_ctx *ctx, qkv_tensor **in) {
    return qkv_layer_norm(ctx, in[0], in[1], in[2], 1e-5f);
}
static qkv_tensor *f_gelu(qkv_ctx *ctx, qkv_tensor **in) { return qkv_gelu(ctx, in[0]); }
static qkv_tensor *f_gelu_tanh(qkv_ctx *ctx, qkv_tensor **in) { return qkv_gelu_tanh(ctx, in[0]); }
static qkv_tensor *f_sigmoid(qkv_ctx *ctx, qkv_tensor **in) { return qkv_sigmoid(ctx, in[0]); }
static qkv_tensor *f_exp(qkv_ctx *ctx, qkv_tensor **in) { return qkv_exp(ctx, in[0]); }

/* Cross-entropy over 37 rows of 133 classes with label smoothing and class weights, reduction none. */
static void make_ce(qkv_tensor **in) {
    in[0] = rnd(8, -4.0f, 4.0f, QKV_DIMS(37, 133), true);
    in[1] = rnd(9, 0.5f, 2.0f, QKV_DIMS(133), false);
}

/* Integer inputs and modules the tape still reads during backward live for the whole run. */
static qkv_tensor *ce_targets, *emb_ids, *rnn_lens;
static qkv_params *rnn_params;
static qkv_rnn rnn_mod[4];

static qkv_tensor *f_ce(qkv_ctx *ctx, qkv_tensor **in) {
    qkv_ce_opts o = qkv_ce_defaults();
    o.class_weight = in[1];
    o.label_smoothing = 0.1f;
    o.reduction = QKV_REDUCE_NONE;
    qkv_tensor *y = qkv_cross_entropy(ctx, in[0], ce_targets, &o);
    return y ? qkv_mul(ctx, y, y) : NULL;
}

/* Embedding: 300 tokens over 40 ids, so buckets hold several rows. */
static void make_emb(qkv_tensor **in) { in[0] = rnd(10, -1.0f, 1.0f, QKV_DIMS(40, 72), true); }

static qkv_tensor *f_emb(qkv_ctx *ctx, qkv_tensor **in) { return qkv_embedding(ctx, in[0], emb_ids); }

/* Recurrent layers: a bidirectional LSTM and a GRU over padded sequences. */
static qkv_rnn_kind rnn_kind = QKV_RNN_LSTM;

static void make_rnn_x(qkv_tensor **in) { in[0] = rnd(11, -1.0f, 1.0f, QKV_DIMS(5, 9, 13), true); }

static qkv_tensor *f_rnn(qkv_ctx *ctx, qkv_tensor **in) {
    qkv_tensor *out = NULL;
    if (qkv_rnn_forward(ctx, &rnn_mod[rnn_kind], in[0], rnn_lens, NULL, NULL, &out, NULL, NULL) != QKV_OK) return NULL;
    return qkv_mul(ctx, out, out);
}

static bool setup(void) {
    ce_targets = qkv_tensor_new(QKV_I32, QKV_DIMS(37));
    emb_ids = qkv_tensor_new(QKV_I32, QKV_DIMS(300));
    rnn_lens = qkv_tensor_new(QKV_I32, QKV_DIMS(5));
    rnn_params = qkv_params_new();
    if (!ce_targets || !emb_ids || !rnn_lens || !rnn_params) return false;
    for (int i = 0; i < 37; i++) ((int32_t *)ce_targets->data)[i] = (i * 31) % 133;
    for (int i = 0; i < 300; i++) ((int32_t *)emb_ids->data)[i] = (i * 7 + i / 13) % 40;
    for (int b = 0; b < 5; b++) ((int32_t *)rnn_lens->data)[b] = 9 - b;
    const qkv_rnn_kind kinds[] = {QKV_RNN_LSTM, QKV_RNN_GRU};
    const char *names[] = {"lstm", "gru"};
    for (int k = 0; k < 2; k++) {
        qkv_rnn_config cfg = qkv_rnn_config_default(kinds[k], 13, 40);
        cfg.bidirectional = true;
        qkv_rng rng;
        qkv_rng_init(&rng, 5);
        if (qkv_rnn_init(&rnn_mod[kinds[k]], rnn_params, names[k], &cfg, &rng) != QKV_OK) return false;
    }
    return true;
}

static void teardown(void) {
    qkv_tensor_free(ce_targets);
    qkv_tensor_free(emb_ids);
    qkv_tensor_free(rnn_lens);
    qkv_params_free(rnn_params);
}

TEST(attention_paths_agree) {
    const kcase c = {"sdpa", 3, make_qkv, f_sdpa, 1e-4, 1e-5};
    check_paths(&c);
    const kcase cc = {"sdpa causal", 3, make_qkv, f_sdpa_causal, 1e-4, 1e-5};
    check_paths(&cc);
    att_T = 50; /* Tq < Tk: bottom-right causal alignment, whole key blocks skipped */
    att_Tk = 150;
    att_D = 64;
    check_paths(&cc);
    att_T = 77;
    att_Tk = 77;
    att_D = 24;
}

TEST(row_ops_paths_agree) {
    const kcase cs[] = {
        {"softmax", 1, make_x, f_softmax, 1e-5, 1e-7},     {"softmax axis 0", 1, make_x, f_softmax0, 1e-5, 1e-7},
        {"log_softmax", 1, make_x, f_log_softmax, 1e-5, 1e-6}, {"layer_norm", 3, make_ln, f_layer_norm, 1e-5, 1e-6},
        {"cross_entropy", 2, make_ce, f_ce, 1e-5, 1e-6},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_paths(&cs[i]);
}

TEST(elementwise_paths_agree) {
    const kcase cs[] = {
        {"gelu", 1, make_x, f_gelu, 1e-5, 1e-7},       {"gelu_tanh", 1, make_x, f_gelu_tanh, 1e-5, 1e-7},
        {"sigmoid", 1, make_x, f_sigmoid, 1e-5, 1e-7}, {"exp", 1, make_x, f_exp, 1e-5, 1e-7},
        {"embedding", 1, make_emb, f_emb, 1e-6, 1e-7},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_paths(&cs[i]);
}

TEST(rnn_paths_agree) {
    const kcase c = {"lstm", 1, make_rnn_x, f_rnn, 1e-4, 1e-6};
    rnn_kind = QKV_RNN_LSTM;
    check_paths(&c);
    const kcase g = {"gru", 1, make_rnn_x, f_rnn, 1e-4, 1e-6};
    rnn_kind = QKV_RNN_GRU;
    check_paths(&g);
}

/* Three AdamW steps and three SGD-with-momentum steps on the same parameters on each path. */
static void optim_steps(qkv_optim_kind kind, float *out, int64_t n) {
    qkv_params *p = qkv_params_new();
    qkv_tensor *w = p ? qkv_params_add(p, "", "w", QKV_DIMS(n)) : NULL;
    qkv_optim_config cfg = qkv_optim_defaults(kind);
    cfg.weight_decay = 0.01f;
    cfg.momentum = 0.9f;
    cfg.nesterov = kind == QKV_SGD;
    qkv_optim *o = w ? qkv_optim_new(p, &cfg) : NULL;
    CHECK_NN(o);
    if (o) {
        qkv_tensor *g = qkv_tensor_new(QKV_F32, QKV_DIMS(n));
        for (int64_t i = 0; i < n; i++) ((float *)w->data)[i] = sinf((float)i * 0.37f);
        for (int step = 0; step < 3; step++) {
            for (int64_t i = 0; i < n; i++) ((float *)g->data)[i] = cosf((float)(i + step) * 0.11f);
            qkv_tensor_set_requires_grad(w, true);
            qkv_tensor_zero_grad(w);
            if (!w->grad) break;
            qkv_tensor_copy(w->grad, g);
            CHECK_OK(qkv_optim_step(o));
        }
        memcpy(out, w->data, sizeof(float) * (size_t)n);
        qkv_tensor_free(g);
    }
    qkv_optim_free(o);
    qkv_params_free(p);
}

TEST(optimiser_paths_agree) {
    const int64_t n = 70001; /* more than one chunk, threaded, ragged end */
    float *ref = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
    qkv_isa keep = qkv_cpu_isa();
    const qkv_optim_kind kinds[] = {QKV_ADAMW, QKV_ADAM, QKV_SGD, QKV_ADADELTA};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        CHECK_OK(qkv_cpu_set_isa(QKV_ISA_GENERIC));
        optim_steps(kinds[k], ref, n);
        for (int isa = QKV_ISA_AVX2; isa <= QKV_ISA_AVX512; isa++) {
            if (!qkv_cpu_supports((qkv_isa)isa)) continue;
            CHECK_OK(qkv_cpu_set_isa((qkv_isa)isa));
            optim_steps(kinds[k], got, n);
            double worst = 0;
            for (int64_t i = 0; i < n; i++) {
                double d = fabs((double)got[i] - ref[i]) - 1e-6 * fabs((double)ref[i]);
                worst = d > worst ? d : worst;
            }
            CHECKF(worst <= 1e-7, "optimiser %d on %s differs from generic by %g", (int)kinds[k],
                   qkv_cpu_isa_name((qkv_isa)isa), worst);
        }
    }
    CHECK_OK(qkv_cpu_set_isa(keep));
    free(ref);
    free(got);
}

TEST(isa_selection) {
    CHECK(qkv_cpu_supports(QKV_ISA_GENERIC));
    CHECK(qkv_cpu_supports(qkv_cpu_isa()));
    CHECK(!strcmp(qkv_cpu_isa_name(QKV_ISA_AVX2), "avx2"));
    CHECK(strlen(qkv_cpu_blas_core()) > 0);
    const char *env = getenv("QKV_ISA");
    char *saved = env ? strdup(env) : NULL;
    setenv("QKV_ISA", "sse9", 1);
    CHECK(qkv_cpu_check() == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "QKV_ISA") != NULL);
    setenv("QKV_ISA", "generic", 1);
    CHECK_OK(qkv_cpu_check());
    setenv("QKV_ISA", "avx512", 1);
    CHECK(qkv_cpu_check() == (qkv_cpu_supports(QKV_ISA_AVX512) ? QKV_OK : QKV_ERR_UNSUPPORTED));
    if (saved) setenv("QKV_ISA", saved, 1);
    else unsetenv("QKV_ISA");
    free(saved);
    qkv_error_clear();
    CHECK(qkv_cpu_set_isa((qkv_isa)7) == QKV_ERR_UNSUPPORTED);
    qkv_error_clear();
}

int main(void) {
    if (!setup()) {
        printf("setup failed: %s\n", qkv_last_error());
        return 1;
    }
    RUN(isa_selection);
    RUN(attention_paths_agree);
    RUN(row_ops_paths_agree);
    RUN(elementwise_paths_agree);
    RUN(rnn_paths_agree);
    RUN(optimiser_paths_agree);
    teardown();
    return test_finish();
}
