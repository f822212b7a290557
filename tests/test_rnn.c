/* Recurrent layers and cells: finite-difference gradient checks, packed-sequence semantics on padded batches,
 * dropout between layers, errors, and PyTorch fixtures (tests/ref/rnn.py) for outputs, final states and every
 * gradient of 1- and 2-layer, uni- and bidirectional RNN / GRU / LSTM. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gradcheck.h"
#include "qkv/rnn.h"
#include "test.h"

static const char *KIND_KEY[] = {"rnn_tanh", "rnn_relu", "gru", "lstm"};

static qkv_tensor *flat(qkv_ctx *c, qkv_tensor *t) { return qkv_reshape(c, t, QKV_DIMS(-1)); }

/* ---- gradient checks --------------------------------------------------------------------------------------- */

typedef struct {
    qkv_rnn rnn;
    qkv_tensor *lengths;
    bool h0, c0;
} layer_case;

/* in = [x, h0?, c0?, parameters...]; the output concatenates out, h_n and c_n so all three are checked. */
static qkv_tensor *f_layer(qkv_ctx *c, qkv_tensor **in, void *u) {
    layer_case *lc = u;
    int k = 1;
    qkv_tensor *h0 = lc->h0 ? in[k++] : NULL, *c0 = lc->c0 ? in[k++] : NULL, *out, *hn, *cn;
    if (qkv_rnn_forward(c, &lc->rnn, in[0], lc->lengths, h0, c0, &out, &hn, &cn) != QKV_OK) return NULL;
    qkv_tensor *parts[3] = {flat(c, out), flat(c, hn), cn ? flat(c, cn) : NULL};
    return qkv_concat(c, cn ? 3 : 2, parts, 0);
}

static bool check_layer(const char *name, qkv_rnn_kind kind, int layers, bool bi, bool padded, bool states,
                        float dropout) {
    int64_t B = 3, T = 4, I = 3, H = 3, dirs = bi ? 2 : 1;
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 11);
    layer_case lc = {.h0 = states, .c0 = states && kind == QKV_RNN_LSTM};
    qkv_rnn_config cfg = qkv_rnn_config_default(kind, I, H);
    cfg.num_layers = layers;
    cfg.bidirectional = bi;
    cfg.dropout = dropout;
    if (qkv_rnn_init(&lc.rnn, p, "rnn", &cfg, &rng) != QKV_OK) {
        printf("  init failed: %s\n", qkv_last_error());
        qkv_params_free(p);
        return false;
    }
    if (padded) {
        lc.lengths = qkv_tensor_new(QKV_I32, QKV_DIMS(B));
        int32_t len[3] = {2, 4, 1};
        qkv_tensor_load(lc.lengths, len, sizeof len);
    }
    qkv_tensor *in[64];
    int n = 0;
    in[n++] = gc_rand(1, -1, 1, QKV_DIMS(B, T, I));
    if (lc.h0) in[n++] = gc_rand(2, -0.5f, 0.5f, QKV_DIMS(layers * dirs, B, H));
    if (lc.c0) in[n++] = gc_rand(3, -0.5f, 0.5f, QKV_DIMS(layers * dirs, B, H));
    for (int k = 0; k < n; k++) qkv_tensor_set_requires_grad(in[k], true);
    int first_param = n;
    for (int k = 0; k < qkv_params_count(p); k++) in[n++] = qkv_params_at(p, k);
    bool ok = gradcheck(name, f_layer, n, in, &lc, NULL);
    for (int k = 0; k < first_param; k++) qkv_tensor_free(in[k]);
    qkv_tensor_free(lc.lengths);
    qkv_params_free(p);
    return ok;
}

TEST(gradcheck_layers) {
    CHECK(check_layer("lstm 1 layer", QKV_RNN_LSTM, 1, false, false, false, 0));
    CHECK(check_layer("lstm padded bi 2 layers h0 c0", QKV_RNN_LSTM, 2, true, true, true, 0));
    CHECK(check_layer("gru padded bi h0", QKV_RNN_GRU, 1, true, true, true, 0));
    CHECK(check_layer("gru padded 2 layers", QKV_RNN_GRU, 2, false, true, true, 0));
    CHECK(check_layer("rnn tanh padded bi 2 layers", QKV_RNN_TANH, 2, true, true, true, 0));
    CHECK(check_layer("rnn relu padded", QKV_RNN_RELU, 1, false, true, true, 0));
    CHECK(check_layer("lstm 2 layers dropout", QKV_RNN_LSTM, 2, false, true, false, 0.3f));
}

typedef struct {
    qkv_rnn_kind kind;
    bool with_state;
} cell_case;

/* in = [x, h, c?, w_ih, w_hh, b_ih, b_hh] */
static qkv_tensor *f_cell(qkv_ctx *c, qkv_tensor **in, void *u) {
    cell_case *cc = u;
    bool lstm = cc->kind == QKV_RNN_LSTM;
    qkv_tensor *x = in[0], *h = cc->with_state ? in[1] : NULL, *cs = lstm && cc->with_state ? in[2] : NULL;
    qkv_tensor **w = in + (lstm ? 3 : 2);
    if (lstm) {
        qkv_tensor *h1, *c1;
        if (qkv_lstm_cell(c, x, h, cs, w[0], w[1], w[2], w[3], &h1, &c1) != QKV_OK) return NULL;
        return qkv_concat(c, 2, (qkv_tensor *[]){h1, c1}, 1);
    }
    if (cc->kind == QKV_RNN_GRU) return qkv_gru_cell(c, x, h, w[0], w[1], w[2], w[3]);
    return qkv_rnn_cell(c, x, h, w[0], w[1], w[2], w[3], cc->kind == QKV_RNN_RELU);
}

static bool check_cell(const char *name, qkv_rnn_kind kind) {
    int64_t B = 2, I = 3, H = 4, G = (kind == QKV_RNN_LSTM ? 4 : kind == QKV_RNN_GRU ? 3 : 1) * H;
    cell_case cc = {.kind = kind, .with_state = true};
    qkv_tensor *in[7];
    int n = 0;
    in[n++] = gc_rand(21, -1, 1, QKV_DIMS(B, I));
    in[n++] = gc_rand(22, -1, 1, QKV_DIMS(B, H));
    if (kind == QKV_RNN_LSTM) in[n++] = gc_rand(23, -1, 1, QKV_DIMS(B, H));
    in[n++] = gc_rand(24, -0.7f, 0.7f, QKV_DIMS(G, I));
    in[n++] = gc_rand(25, -0.7f, 0.7f, QKV_DIMS(G, H));
    in[n++] = gc_rand(26, -0.7f, 0.7f, QKV_DIMS(G));
    in[n++] = gc_rand(27, -0.7f, 0.7f, QKV_DIMS(G));
    for (int k = 0; k < n; k++) qkv_tensor_set_requires_grad(in[k], true);
    bool ok = gradcheck(name, f_cell, n, in, &cc, NULL);
    for (int k = 0; k < n; k++) qkv_tensor_free(in[k]);
    return ok;
}

TEST(gradcheck_cells) {
    CHECK(check_cell("rnn_cell tanh", QKV_RNN_TANH));
    CHECK(check_cell("rnn_cell relu", QKV_RNN_RELU));
    CHECK(check_cell("gru_cell", QKV_RNN_GRU));
    CHECK(check_cell("lstm_cell", QKV_RNN_LSTM));
}

/* ---- packed-sequence semantics --------------------------------------------------------------------------- */

/* Each sequence of a padded batch must give exactly what it gives alone, truncated to its length; padded steps
 * output 0 and receive no gradient. */
TEST(padding_matches_sequences_alone) {
    for (int kind = QKV_RNN_TANH; kind <= QKV_RNN_LSTM; kind++) {
        int64_t B = 3, T = 5, I = 3, H = 4, L = 2;
        bool lstm = kind == QKV_RNN_LSTM;
        int32_t len[3] = {2, 5, 3};
        qkv_params *p = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 3);
        qkv_rnn rnn;
        qkv_rnn_config cfg = qkv_rnn_config_default((qkv_rnn_kind)kind, I, H);
        cfg.num_layers = (int)L;
        cfg.bidirectional = true;
        CHECK_OK(qkv_rnn_init(&rnn, p, "m", &cfg, &rng));
        qkv_tensor *x = gc_rand(4, -1, 1, QKV_DIMS(B, T, I)), *h0 = gc_rand(5, -1, 1, QKV_DIMS(2 * L, B, H));
        qkv_tensor *c0 = gc_rand(6, -1, 1, QKV_DIMS(2 * L, B, H)), *lengths = qkv_tensor_new(QKV_I32, QKV_DIMS(B));
        qkv_tensor_load(lengths, len, sizeof len);
        qkv_tensor_set_requires_grad(x, true);
        qkv_ctx *c = qkv_ctx_new();
        qkv_tensor *out, *hn, *cn;
        CHECK_OK(qkv_rnn_forward(c, &rnn, x, lengths, h0, lstm ? c0 : NULL, &out, &hn, &cn));
        CHECK(qkv_backward(c, qkv_sum_all(c, out)) == QKV_OK);
        for (int64_t b = 0; b < B && out; b++) {
            qkv_tensor *xb = qkv_contiguous(c, qkv_slice(c, qkv_slice(c, x, 0, b, b + 1, 1), 1, 0, len[b], 1));
            qkv_tensor *h0b = qkv_contiguous(c, qkv_slice(c, h0, 1, b, b + 1, 1));
            qkv_tensor *c0b = lstm ? qkv_contiguous(c, qkv_slice(c, c0, 1, b, b + 1, 1)) : NULL;
            qkv_tensor *ob, *hb, *cb;
            CHECK_OK(qkv_rnn_forward(c, &rnn, xb, NULL, h0b, c0b, &ob, &hb, &cb));
            if (!ob) break;
            qkv_tensor *valid = qkv_slice(c, qkv_slice(c, out, 0, b, b + 1, 1), 1, 0, len[b], 1);
            CHECK(test_allclose("sequence alone: out", valid, ob, 1e-5, 1e-6));
            CHECK(test_allclose("sequence alone: h_n", qkv_slice(c, hn, 1, b, b + 1, 1), hb, 1e-5, 1e-6));
            if (lstm) CHECK(test_allclose("sequence alone: c_n", qkv_slice(c, cn, 1, b, b + 1, 1), cb, 1e-5, 1e-6));
            for (int64_t t = len[b]; t < T; t++)
                for (int64_t j = 0; j < 2 * H; j++) {
                    CHECKF(qkv_f32(out)[(b * T + t) * 2 * H + j] == 0.0f, "padded output (%lld,%lld) not 0",
                           (long long)b, (long long)t);
                    if (j < I)
                        CHECKF(qkv_f32(x->grad)[(b * T + t) * I + j] == 0.0f, "padded input got a gradient");
                }
        }
        qkv_ctx_free(c);
        qkv_tensor_free(x);
        qkv_tensor_free(h0);
        qkv_tensor_free(c0);
        qkv_tensor_free(lengths);
        qkv_params_free(p);
    }
}

TEST(dropout_between_layers) {
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 9);
    qkv_rnn rnn;
    qkv_rnn_config cfg = qkv_rnn_config_default(QKV_RNN_GRU, 3, 8);
    cfg.num_layers = 2;
    cfg.dropout = 0.5f;
    CHECK_OK(qkv_rnn_init(&rnn, p, NULL, &cfg, &rng));
    qkv_rnn plain = rnn;
    plain.cfg.dropout = 0.0f;
    qkv_tensor *x = gc_rand(4, -1, 1, QKV_DIMS(2, 6, 3));
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *a, *b, *e;
    CHECK_OK(qkv_rnn_forward(c, &rnn, x, NULL, NULL, NULL, &a, NULL, NULL));
    CHECK_OK(qkv_rnn_forward(c, &plain, x, NULL, NULL, NULL, &b, NULL, NULL));
    qkv_ctx_set_training(c, false);
    CHECK_OK(qkv_rnn_forward(c, &rnn, x, NULL, NULL, NULL, &e, NULL, NULL));
    if (a && b && e) {
        double diff = 0;
        for (int64_t k = 0; k < qkv_numel(a); k++) diff += fabs(qkv_f32(a)[k] - qkv_f32(b)[k]);
        CHECKF(diff > 1e-3, "dropout in training mode changed nothing");
        CHECK(test_allclose("eval mode = no dropout", e, b, 0, 0));
    }
    qkv_ctx_free(c);
    qkv_tensor_free(x);
    qkv_params_free(p);
}

TEST(bad_inputs_are_errors) {
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    qkv_rnn rnn;
    qkv_rnn_config cfg = qkv_rnn_config_default(QKV_RNN_GRU, 3, 4);
    cfg.num_layers = 0;
    CHECK(qkv_rnn_init(&rnn, p, NULL, &cfg, &rng) == QKV_ERR_INVALID && strstr(qkv_last_error(), "num_layers"));
    cfg.num_layers = 1;
    cfg.forget_bias_one = true;
    CHECK(qkv_rnn_init(&rnn, p, NULL, &cfg, &rng) == QKV_ERR_INVALID && strstr(qkv_last_error(), "forget"));
    cfg.forget_bias_one = false;
    cfg.dropout = 1.0f;
    CHECK(qkv_rnn_init(&rnn, p, NULL, &cfg, &rng) == QKV_ERR_INVALID && strstr(qkv_last_error(), "dropout"));
    cfg.dropout = 0.0f;
    CHECK_OK(qkv_rnn_init(&rnn, p, NULL, &cfg, &rng));
    qkv_rnn twice;
    CHECK(qkv_rnn_init(&twice, p, NULL, &cfg, &rng) != QKV_OK && strstr(qkv_last_error(), "weight_ih_l0"));
    CHECK(twice.w_ih[0][0] == NULL);
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *out;
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 5, 3)), *bad = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 5, 4));
    CHECK(qkv_rnn_forward(c, &rnn, bad, NULL, NULL, NULL, &out, NULL, NULL) == QKV_ERR_INVALID);
    CHECK(out == NULL && strstr(qkv_last_error(), "[2, 5, 4]"));
    qkv_tensor *len = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2));
    qkv_i32(len)[1] = 6;
    CHECK(qkv_rnn_forward(c, &rnn, x, len, NULL, NULL, &out, NULL, NULL) == QKV_ERR_RANGE);
    CHECK(strstr(qkv_last_error(), "lengths[1] = 6") != NULL);
    qkv_tensor *flen = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2));
    CHECK(qkv_rnn_forward(c, &rnn, x, flen, NULL, NULL, &out, NULL, NULL) == QKV_ERR_INVALID);
    qkv_tensor *h0 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 2, 4));
    CHECK(qkv_rnn_forward(c, &rnn, x, NULL, h0, NULL, &out, NULL, NULL) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "h0") != NULL);
    qkv_tensor *c0 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 2, 4));
    CHECK(qkv_rnn_forward(c, &rnn, x, NULL, NULL, c0, &out, NULL, NULL) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "c0") != NULL);
    qkv_rnn blank;
    memset(&blank, 0, sizeof blank);
    CHECK(qkv_rnn_forward(c, &blank, x, NULL, NULL, NULL, &out, NULL, NULL) == QKV_ERR_INVALID);
    /* cells */
    qkv_tensor *xc = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3)), *h = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 5));
    CHECK(qkv_gru_cell(c, xc, h, rnn.w_ih[0][0], rnn.w_hh[0][0], NULL, NULL) == NULL);
    CHECK(strstr(qkv_last_error(), "state h") != NULL);
    CHECK(qkv_rnn_cell(c, xc, NULL, rnn.w_ih[0][0], rnn.w_hh[0][0], NULL, NULL, false) == NULL); /* 3H rows */
    CHECK(strstr(qkv_last_error(), "weight_hh") != NULL);
    qkv_tensor *h1, *c1;
    CHECK(qkv_lstm_cell(c, xc, NULL, NULL, rnn.w_ih[0][0], rnn.w_hh[0][0], NULL, NULL, &h1, &c1) != QKV_OK);
    CHECK(h1 == NULL && c1 == NULL);
    qkv_ctx_free(c);
    qkv_params_free(p);
}

/* ---- PyTorch fixtures ------------------------------------------------------------------------------------ */

static qkv_tensor *fixture_read(qkv_st_file *f, const char *key, const char *what) {
    char name[256];
    snprintf(name, sizeof name, "%s.%s", key, what);
    qkv_tensor *t = qkv_st_read(f, name);
    if (!t) printf("  fixture: %s\n", qkv_last_error());
    return t;
}

static bool compare(qkv_st_file *f, const char *key, const char *what, const qkv_tensor *got) {
    char label[256];
    snprintf(label, sizeof label, "%s %s", key, what);
    qkv_tensor *want = fixture_read(f, key, what);
    bool ok = want && got && test_allclose(label, got, want, 1e-4, 1e-5);
    if (!got) printf("  %s: missing result\n", label);
    qkv_tensor_free(want);
    return ok;
}

/* Loss = sum(out * gout) + sum(h_n * gh_n) [+ sum(c_n * gc_n)], as in tests/ref/rnn.py. */
static qkv_tensor *dot(qkv_ctx *c, qkv_tensor *a, qkv_tensor *g) { return qkv_sum_all(c, qkv_mul(c, a, g)); }

static bool fixture_layer(qkv_st_file *f, int kind, int layers, bool bi) {
    char key[64];
    snprintf(key, sizeof key, "%s_l%d_%s", KIND_KEY[kind], layers, bi ? "bi" : "uni");
    bool lstm = kind == QKV_RNN_LSTM, ok = true;
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 0);
    qkv_rnn rnn;
    qkv_rnn_config cfg = qkv_rnn_config_default((qkv_rnn_kind)kind, 3, 4);
    cfg.num_layers = layers;
    cfg.bidirectional = bi;
    if (qkv_rnn_init(&rnn, p, NULL, &cfg, &rng) != QKV_OK) return false;
    for (int k = 0; k < qkv_params_count(p); k++) { /* torch's weights into qkv's tensors, by state_dict name */
        qkv_tensor *t = qkv_params_at(p, k);
        char name[256];
        snprintf(name, sizeof name, "%s.p.%s", key, t->name);
        if (qkv_st_read_into(f, name, t) != QKV_OK) {
            printf("  %s: %s\n", key, qkv_last_error());
            ok = false;
        }
    }
    qkv_tensor *x = fixture_read(f, key, "x"), *len = fixture_read(f, key, "lengths"), *h0 = fixture_read(f, key, "h0");
    qkv_tensor *c0 = lstm ? fixture_read(f, key, "c0") : NULL, *gout = fixture_read(f, key, "gout"), *ghn = fixture_read(f, key, "gh_n");
    qkv_tensor *gcn = lstm ? fixture_read(f, key, "gc_n") : NULL;
    qkv_ctx *c = qkv_ctx_new();
    if (ok && x && len && h0 && gout && ghn && (!lstm || (c0 && gcn))) {
        qkv_tensor_set_requires_grad(x, true);
        qkv_tensor_set_requires_grad(h0, true);
        if (c0) qkv_tensor_set_requires_grad(c0, true);
        qkv_tensor *out, *hn, *cn;
        ok = qkv_rnn_forward(c, &rnn, x, len, h0, c0, &out, &hn, &cn) == QKV_OK;
        if (ok) {
            qkv_tensor *loss = qkv_add(c, dot(c, out, gout), dot(c, hn, ghn));
            if (lstm) loss = qkv_add(c, loss, dot(c, cn, gcn));
            ok = qkv_backward(c, loss) == QKV_OK;
        }
        if (!ok) printf("  %s: %s\n", key, qkv_last_error());
        if (ok) { /* every comparison runs (and prints), then all must hold */
            bool a = compare(f, key, "out", out), b = compare(f, key, "h_n", hn);
            bool c_ = !lstm || compare(f, key, "c_n", cn), d = compare(f, key, "grad.x", x->grad);
            bool e = compare(f, key, "grad.h0", h0->grad), g = !lstm || compare(f, key, "grad.c0", c0->grad);
            ok = a && b && c_ && d && e && g;
        }
        for (int k = 0; ok && k < qkv_params_count(p); k++) {
            qkv_tensor *t = qkv_params_at(p, k);
            char what[256];
            snprintf(what, sizeof what, "grad.p.%s", t->name);
            ok = compare(f, key, what, t->grad);
        }
    } else {
        ok = false;
    }
    qkv_ctx_free(c);
    qkv_tensor *all[] = {x, len, h0, c0, gout, ghn, gcn};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) qkv_tensor_free(all[k]);
    qkv_params_free(p);
    return ok;
}

static bool fixture_cell(qkv_st_file *f, int kind) {
    char key[64];
    snprintf(key, sizeof key, "cell_%s", KIND_KEY[kind]);
    bool lstm = kind == QKV_RNN_LSTM, ok = true;
    const char *pn[4] = {"p.weight_ih", "p.weight_hh", "p.bias_ih", "p.bias_hh"};
    qkv_tensor *w[4], *x = fixture_read(f, key, "x"), *h = fixture_read(f, key, "h"), *cs = lstm ? fixture_read(f, key, "c") : NULL;
    for (int k = 0; k < 4; k++) {
        w[k] = fixture_read(f, key, pn[k]);
        if (w[k]) qkv_tensor_set_requires_grad(w[k], true);
        ok = ok && w[k];
    }
    qkv_tensor *gh = fixture_read(f, key, "gh_out"), *gc = lstm ? fixture_read(f, key, "gc_out") : NULL;
    qkv_ctx *c = qkv_ctx_new();
    if (ok && x && h && gh && (!lstm || (cs && gc))) {
        qkv_tensor_set_requires_grad(x, true);
        qkv_tensor_set_requires_grad(h, true);
        if (cs) qkv_tensor_set_requires_grad(cs, true);
        qkv_tensor *h1 = NULL, *c1 = NULL, *loss;
        if (lstm)
            qkv_lstm_cell(c, x, h, cs, w[0], w[1], w[2], w[3], &h1, &c1);
        else if (kind == QKV_RNN_GRU)
            h1 = qkv_gru_cell(c, x, h, w[0], w[1], w[2], w[3]);
        else
            h1 = qkv_rnn_cell(c, x, h, w[0], w[1], w[2], w[3], false);
        loss = dot(c, h1, gh);
        if (lstm) loss = qkv_add(c, loss, dot(c, c1, gc));
        ok = qkv_backward(c, loss) == QKV_OK;
        if (!ok) printf("  %s: %s\n", key, qkv_last_error());
        if (ok) { /* every comparison runs (and prints), then all must hold */
            bool a = compare(f, key, "h_out", h1), b = !lstm || compare(f, key, "c_out", c1);
            bool d = compare(f, key, "grad.x", x->grad), e = compare(f, key, "grad.h", h->grad);
            bool g = !lstm || compare(f, key, "grad.c", cs->grad);
            ok = a && b && d && e && g;
        }
        for (int k = 0; ok && k < 4; k++) {
            char what[64];
            snprintf(what, sizeof what, "grad.%s", pn[k]);
            ok = compare(f, key, what, w[k]->grad);
        }
    } else {
        ok = false;
    }
    qkv_ctx_free(c);
    qkv_tensor *all[] = {x, h, cs, gh, gc, w[0], w[1], w[2], w[3]};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) qkv_tensor_free(all[k]);
    return ok;
}

TEST(pytorch_fixtures) {
    const char *path = test_fixture_path("rnn.safetensors");
    if (!test_file_exists(path)) {
        test_skip("%s missing (run tests/ref/rnn.py)", path);
        return;
    }
    qkv_st_file *f = qkv_st_open(path);
    CHECK_NN(f);
    if (!f) return;
    for (int kind = QKV_RNN_TANH; kind <= QKV_RNN_LSTM; kind++)
        for (int layers = 1; layers <= 2; layers++)
            for (int bi = 0; bi <= 1; bi++)
                CHECKF(fixture_layer(f, kind, layers, bi), "%s %d layer(s) %s differs from PyTorch", KIND_KEY[kind],
                       layers, bi ? "bidirectional" : "unidirectional");
    CHECK(fixture_cell(f, QKV_RNN_TANH));
    CHECK(fixture_cell(f, QKV_RNN_GRU));
    CHECK(fixture_cell(f, QKV_RNN_LSTM));
    qkv_st_close(f);
}

int main(void) {
    RUN(gradcheck_cells);
    RUN(gradcheck_layers);
    RUN(padding_matches_sequences_alone);
    RUN(dropout_between_layers);
    RUN(bad_inputs_are_errors);
    RUN(pytorch_fixtures);
    return test_finish();
}
