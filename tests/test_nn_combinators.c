/* Trax-style combinators: stack semantics of Serial / Branch / Parallel / Residual / Select / Dup / Drop / fn
 * layers, gradients through a tree, errors, and the seed-style Transformer classifier defined with them and
 * trained a few steps on a toy task. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_nn_common.h"

/* ---- The seed-style classifier: Embedding -> positions -> N encoder blocks -> token 0 -> Dense -> LogSoftmax. */
static qkv_status take_token0(qkv_ctx *c, qkv_tensor **in, qkv_tensor **out, void *user) {
    (void)user;
    qkv_tensor *x = in[0];
    out[0] = qkv_reshape(c, qkv_slice(c, x, 1, 0, 1, 1), QKV_DIMS(x->shape[0], x->shape[2]));
    return out[0] ? QKV_OK : qkv_last_status();
}

static qkv_layer *transformer_classifier(qkv_params *p, int64_t vocab, int64_t d, int64_t heads, int n_layers,
                                         int64_t n_classes, qkv_rng *rng) {
    qkv_nn_block_config blk = qkv_nn_block_config_default(d, heads);
    blk.dim_feedforward = 4 * d;
    blk.norm_first = true;
    blk.dropout = 0.1f;
    qkv_layer *blocks[QKV_NN_MAX_LAYERS];
    for (int i = 0; i < n_layers; i++) {
        char name[64];
        snprintf(name, sizeof name, "encoder.layers.%d", i);
        blocks[i] = qkv_layer_encoder_block(p, name, &blk, false, rng);
    }
    return QKV_SERIAL(qkv_layer_embedding(p, "embed", vocab, d, QKV_NN_NO_PADDING, true, rng),
                      qkv_layer_posenc(p, "pos", QKV_POSENC_SINUSOIDAL, 64, d, 0.1f, rng),
                      qkv_layer_serial(n_layers, blocks),
                      qkv_layer_layer_norm(p, "encoder.norm", d),
                      qkv_layer_fn("TakeToken0", 1, 1, take_token0, NULL),
                      qkv_layer_dense(p, "head", d, n_classes, rng),
                      qkv_layer_log_softmax());
}

TEST(classifier_trains) {
    qkv_rng rng;
    qkv_rng_init(&rng, 42);
    qkv_params *p = qkv_params_new();
    qkv_layer *model = transformer_classifier(p, 10, 16, 2, 2, 2, &rng);
    CHECKF(model != NULL, "building the classifier: %s", qkv_last_error());
    if (!model) {
        qkv_params_free(p);
        return;
    }
    char desc[2048];
    qkv_layer_describe(model, desc, sizeof desc);
    CHECK(strstr(desc, "EncoderBlock 1 -> 1  encoder.layers.1") != NULL && strstr(desc, "TakeToken0") != NULL);
    CHECK(qkv_params_find(p, "encoder.layers.1.self_attn.in_proj_weight") && qkv_params_find(p, "head.bias"));
    CHECK(qkv_params_find(p, "pos.pe") && qkv_params_find(p, "embed.weight"));
    /* Toy task: is token 7 anywhere in the sequence? Needs attention from token 0 to the rest. */
    enum { B = 16, T = 8 };
    qkv_tensor *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T)), *labels = qkv_tensor_new(QKV_I32, QKV_DIMS(B));
    for (int b = 0; b < B; b++) {
        qkv_i32(ids)[b * T] = 0; /* a [CLS] token */
        for (int t = 1; t < T; t++) qkv_i32(ids)[b * T + t] = 1 + (int32_t)qkv_rng_below(&rng, 6);
        if (b % 2) qkv_i32(ids)[b * T + 1 + (int)qkv_rng_below(&rng, T - 1)] = 7;
        qkv_i32(labels)[b] = b % 2;
    }
    qkv_optim_config oc = qkv_optim_defaults(QKV_ADAM);
    oc.lr = 5e-3f;
    qkv_optim *opt = qkv_optim_new(p, &oc);
    qkv_ctx *c = qkv_ctx_new();
    float first = NAN, last = NAN;
    for (int step = 0; step < 60; step++) {
        qkv_ctx_reset(c);
        qkv_optim_zero_grad(opt);
        qkv_tensor *loss = qkv_cross_entropy(c, qkv_layer_call(c, model, ids), labels, NULL);
        if (!loss || qkv_backward(c, loss) || qkv_optim_step(opt)) {
            CHECKF(false, "step %d: %s", step, qkv_last_error());
            break;
        }
        if (step == 0) first = qkv_f32(loss)[0];
        last = qkv_f32(loss)[0];
    }
    printf("  classifier loss %.4f -> %.4f over 60 Adam steps\n", first, last);
    CHECKF(last < 0.5f * first, "loss %g -> %g did not fall", first, last);
    qkv_ctx_free(c);
    qkv_optim_free(opt);
    qkv_tensor_free(ids);
    qkv_tensor_free(labels);
    qkv_layer_free(model);
    qkv_params_free(p);
}

/* ---- Stack semantics ---- */
static qkv_status times(qkv_ctx *c, qkv_tensor **in, qkv_tensor **out, void *user) {
    out[0] = qkv_scale(c, in[0], *(float *)user);
    return out[0] ? QKV_OK : qkv_last_status();
}
static qkv_status sub(qkv_ctx *c, qkv_tensor **in, qkv_tensor **out, void *user) {
    (void)user;
    out[0] = qkv_sub(c, in[0], in[1]);
    return out[0] ? QKV_OK : qkv_last_status();
}

static qkv_tensor *scalar(qkv_ctx *c, float v) {
    qkv_tensor *t = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(1));
    qkv_f32(t)[0] = v;
    return t;
}

TEST(stack_semantics) {
    static float two = 2, ten = 10;
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *in[4] = {scalar(c, 3), scalar(c, 5), scalar(c, 7)}, *out[8] = {0};
    /* Serial(Dup, Fn*2, Sub): x -> 2x - x = x; arity 1 -> 1 */
    qkv_layer *s = QKV_SERIAL(qkv_layer_dup(), qkv_layer_fn("x2", 1, 1, times, &two),
                              qkv_layer_fn("Sub", 2, 1, sub, NULL));
    CHECK(s && s->n_in == 1 && s->n_out == 1);
    CHECK_OK(qkv_layer_apply(c, s, 1, in, out));
    CHECK(qkv_f32(out[0])[0] == 3.0f);
    qkv_layer_free(s);
    /* Serial(Sub, Sub) takes three: (a - b) - c */
    s = QKV_SERIAL(qkv_layer_fn("Sub", 2, 1, sub, NULL), qkv_layer_fn("Sub", 2, 1, sub, NULL));
    CHECK(s && s->n_in == 3 && s->n_out == 1);
    CHECK_OK(qkv_layer_apply(c, s, 3, in, out));
    CHECK(qkv_f32(out[0])[0] == 3.0f - 5.0f - 7.0f);
    qkv_layer_free(s);
    /* Branch(x2, x10, Sub): n_in 2; outputs 2a, 10a, a - b */
    s = QKV_BRANCH(qkv_layer_fn("x2", 1, 1, times, &two), qkv_layer_fn("x10", 1, 1, times, &ten),
                   qkv_layer_fn("Sub", 2, 1, sub, NULL));
    CHECK(s && s->n_in == 2 && s->n_out == 3);
    CHECK_OK(qkv_layer_apply(c, s, 2, in, out));
    CHECK(qkv_f32(out[0])[0] == 6.0f && qkv_f32(out[1])[0] == 30.0f && qkv_f32(out[2])[0] == -2.0f);
    qkv_layer_free(s);
    /* Parallel(x2, Sub): (a, b, c) -> (2a, b - c) */
    s = QKV_PARALLEL(qkv_layer_fn("x2", 1, 1, times, &two), qkv_layer_fn("Sub", 2, 1, sub, NULL));
    CHECK(s && s->n_in == 3 && s->n_out == 2);
    CHECK_OK(qkv_layer_apply(c, s, 3, in, out));
    CHECK(qkv_f32(out[0])[0] == 6.0f && qkv_f32(out[1])[0] == -2.0f);
    qkv_layer_free(s);
    /* Select(3 -> [2, 0, 0]) then Drop: (c, a, a) minus the top -> (a, a) */
    s = QKV_SERIAL(qkv_layer_select(3, 3, (const int[]){2, 0, 0}), qkv_layer_drop());
    CHECK(s && s->n_in == 3 && s->n_out == 2);
    CHECK_OK(qkv_layer_apply(c, s, 3, in, out));
    CHECK(out[0] == in[0] && out[1] == in[0]);
    qkv_layer_free(s);
    /* Residual(x2, x10): x + 20x */
    s = QKV_RESIDUAL(qkv_layer_fn("x2", 1, 1, times, &two), qkv_layer_fn("x10", 1, 1, times, &ten));
    CHECK(s && s->n_in == 1 && s->n_out == 1);
    qkv_tensor *r = qkv_layer_call(c, s, in[1]);
    CHECK(r && qkv_f32(r)[0] == 105.0f);
    qkv_layer_free(s);
    /* Serial(Add) on (a, b, c) leaves c below: (a + b, c) */
    s = QKV_SERIAL(qkv_layer_add(), qkv_layer_identity());
    CHECK(s && s->n_in == 2 && s->n_out == 1);
    qkv_layer_free(s);
    qkv_ctx_free(c);
}

/* Gradients flow through a tree: Residual(Dense -> relu -> Dense) then LayerNorm, against a gradcheck. */
static qkv_tensor *f_tree(qkv_ctx *c, qkv_tensor **in, void *u) { return qkv_layer_call(c, u, in[0]); }

TEST(gradients_through_a_tree) {
    qkv_rng rng;
    qkv_rng_init(&rng, 9);
    qkv_params *p = qkv_params_new();
    qkv_layer *m = QKV_SERIAL(QKV_RESIDUAL(qkv_layer_dense(p, "ff.0", 4, 6, &rng), qkv_layer_activation(QKV_ACT_GELU),
                                           qkv_layer_dense(p, "ff.2", 6, 4, &rng)),
                              QKV_BRANCH(qkv_layer_layer_norm(p, "ln", 4), qkv_layer_identity()), qkv_layer_add());
    CHECK(m != NULL);
    qkv_tensor *x = gc_rand(3, -1, 1, QKV_DIMS(2, 3, 4));
    qkv_tensor_set_requires_grad(x, true);
    if (m) CHECK(nn_gradcheck("combinator tree", f_tree, 1, &x, p, m));
    qkv_tensor_free(x);
    qkv_layer_free(m);
    qkv_params_free(p);
}

/* The RNN leaf is its module, bit for bit: a GRU layer tree against qkv_rnn_forward on the same weights. */
TEST(rnn_leaf_is_its_module) {
    qkv_rng rng;
    qkv_rng_init(&rng, 4);
    qkv_params *p = qkv_params_new();
    qkv_rnn_config rc = qkv_rnn_config_default(QKV_RNN_GRU, 3, 5);
    rc.num_layers = 2;
    qkv_layer *l = qkv_layer_rnn(p, "rnn", &rc, &rng);
    CHECK(l != NULL && strcmp(l->name, "GRU") == 0 && qkv_params_find(p, "rnn.weight_hh_l1") != NULL);
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = gc_rand(5, -1, 1, QKV_DIMS(2, 4, 3)), *want = NULL;
    qkv_tensor *got = l ? qkv_layer_call(c, l, x) : NULL;
    CHECK_OK(l ? qkv_rnn_forward(c, l->state, x, NULL, NULL, NULL, &want, NULL, NULL) : QKV_ERR_INVALID);
    CHECK(got && want && got->shape[2] == 5 && test_allclose("rnn leaf", got, want, 0, 0));
    rc.num_layers = 0;
    CHECK(qkv_layer_rnn(p, "bad", &rc, &rng) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    qkv_tensor_free(x);
    qkv_ctx_free(c);
    qkv_layer_free(l);
    qkv_params_free(p);
}

/* A shared layer is one set of weights applied twice: Parallel(enc, share(enc)) of the Siamese network gives each
 * input what enc alone gives it, the weight's gradient is the sum of both uses, and the tree frees once. */
TEST(shared_layer_in_parallel) {
    qkv_rng rng;
    qkv_rng_init(&rng, 12);
    qkv_params *p = qkv_params_new();
    qkv_rnn_config rc = qkv_rnn_config_default(QKV_RNN_LSTM, 4, 4);
    qkv_layer *enc = QKV_SERIAL(qkv_layer_embedding(p, "embedding", 7, 4, QKV_NN_NO_PADDING, false, &rng),
                                qkv_layer_rnn(p, "rnn", &rc, &rng), qkv_layer_masked_mean(),
                                qkv_layer_l2_normalize(1e-12f));
    CHECK(enc != NULL && enc->n_in == 2 && enc->n_out == 1);
    qkv_layer *net = QKV_PARALLEL(enc, qkv_layer_share(enc));
    CHECK(net != NULL && net->n_in == 4 && net->n_out == 2 && qkv_params_count(p) == 5);
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *ids1 = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 3)), *ids2 = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 3));
    qkv_tensor *m1 = qkv_tensor_new(QKV_F32, QKV_DIMS(2, 3)), *m2 = qkv_tensor_new(QKV_F32, QKV_DIMS(2, 3));
    for (int i = 0; i < 6; i++) {
        qkv_i32(ids1)[i] = i % 7;
        qkv_i32(ids2)[i] = (3 * i + 1) % 7;
        qkv_f32(m1)[i] = i != 5; /* row 1 of the first input has two tokens and a pad */
        qkv_f32(m2)[i] = 1;
    }
    qkv_tensor *out[2] = {0}, *alone1 = NULL, *alone2 = NULL;
    if (net) {
        CHECK_OK(qkv_layer_apply(c, net, 4, (qkv_tensor *[]){ids1, m1, ids2, m2}, out));
        qkv_tensor *o[1];
        CHECK_OK(qkv_layer_apply(c, enc, 2, (qkv_tensor *[]){ids1, m1}, o));
        alone1 = o[0];
        CHECK_OK(qkv_layer_apply(c, enc, 2, (qkv_tensor *[]){ids2, m2}, o));
        alone2 = o[0];
    }
    CHECK(out[0] && alone1 && test_allclose("share: first", out[0], alone1, 0, 0));
    CHECK(out[1] && alone2 && test_allclose("share: second", out[1], alone2, 0, 0));
    for (int b = 0; out[0] && b < 2; b++) { /* unit rows */
        double n = 0;
        for (int d = 0; d < 4; d++) n += qkv_f32(out[0])[b * 4 + d] * qkv_f32(out[0])[b * 4 + d];
        CHECK(fabs(n - 1) < 1e-5);
    }
    /* Gradient of sum(out1 * out2) on the embedding: both uses add into the one matrix, so it differs from what
     * either use alone contributes. */
    qkv_tensor *w = qkv_params_find(p, "embedding.weight");
    double g_both = 0, g_first = 0;
    for (int pass = 0; w && net && pass < 2; pass++) {
        qkv_params_zero_grad(p);
        qkv_ctx_reset(c);
        qkv_ctx_set_grad(c, true);
        qkv_tensor *o2[2];
        CHECK_OK(qkv_layer_apply(c, net, 4, (qkv_tensor *[]){ids1, m1, ids2, m2}, o2));
        qkv_tensor *other = o2[1];
        if (pass) { /* a constant copy: the gradient then comes from the first use alone */
            other = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(2, 4));
            memcpy(other->data, qkv_contiguous(c, o2[1])->data, sizeof(float) * 8);
        }
        CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_mul(c, o2[0], other))));
        double g = 0;
        for (int64_t k = 0; w->grad && k < qkv_numel(w); k++) g += fabs(qkv_f32(w->grad)[k]);
        *(pass ? &g_first : &g_both) = g;
    }
    CHECK(g_both > 0 && g_first > 0 && fabs(g_both - g_first) > 1e-6);
    /* Inputs of equal shapes run as one stacked batch: every weight's gradient equals that of the two uses applied
     * one after the other (enc twice, by hand); and a second input of another width still runs, copy by copy. */
    CHECK(enc->batchwise && net->batchwise);
    for (int k = 0; net && k < qkv_params_count(p); k++) {
        qkv_tensor *pw = qkv_params_at(p, k);
        float *stacked = NULL, *apart = NULL;
        for (int pass = 0; pass < 2; pass++) {
            qkv_params_zero_grad(p);
            qkv_ctx_reset(c);
            qkv_ctx_set_grad(c, true);
            qkv_tensor *o2[2], *o1[1];
            if (pass == 0) {
                CHECK_OK(qkv_layer_apply(c, net, 4, (qkv_tensor *[]){ids1, m1, ids2, m2}, o2));
            } else {
                CHECK_OK(qkv_layer_apply(c, enc, 2, (qkv_tensor *[]){ids1, m1}, o1));
                o2[0] = o1[0];
                CHECK_OK(qkv_layer_apply(c, enc, 2, (qkv_tensor *[]){ids2, m2}, o1));
                o2[1] = o1[0];
            }
            CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_mul(c, o2[0], o2[1]))));
            float *g = malloc(sizeof(float) * (size_t)qkv_numel(pw));
            memcpy(g, qkv_f32(pw->grad), sizeof(float) * (size_t)qkv_numel(pw));
            *(pass ? &apart : &stacked) = g;
        }
        for (int64_t e = 0; e < qkv_numel(pw); e++) CHECK(fabs(stacked[e] - apart[e]) <= 1e-6 + 1e-5 * fabs(apart[e]));
        free(stacked);
        free(apart);
    }
    qkv_tensor *ids3 = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 2)), *m3 = qkv_tensor_new(QKV_F32, QKV_DIMS(2, 2));
    for (int i = 0; i < 4; i++) {
        qkv_i32(ids3)[i] = (i + 2) % 7;
        qkv_f32(m3)[i] = 1;
    }
    qkv_ctx_reset(c);
    qkv_tensor *o3[2] = {0}, *o4[1] = {0};
    CHECK_OK(qkv_layer_apply(c, net, 4, (qkv_tensor *[]){ids1, m1, ids3, m3}, o3));
    CHECK_OK(qkv_layer_apply(c, enc, 2, (qkv_tensor *[]){ids3, m3}, o4));
    CHECK(o3[1] && o4[0] && test_allclose("share: other width", o3[1], o4[0], 0, 0));
    qkv_tensor_free(ids3);
    qkv_tensor_free(m3);
    qkv_ctx_free(c);
    qkv_tensor *heap[] = {ids1, ids2, m1, m2};
    for (int i = 0; i < 4; i++) qkv_tensor_free(heap[i]);
    qkv_layer_free(net); /* frees enc once, through its last reference */
    qkv_params_free(p);
}

TEST(bad_input_is_an_error) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_layer *s = QKV_SERIAL(qkv_layer_dup(), qkv_layer_dense(NULL, "x", 1, 1, NULL)); /* a failing child */
    CHECK(s == NULL && qkv_last_status() != QKV_OK);
    CHECK(qkv_layer_select(2, 1, (const int[]){3}) == NULL && strstr(qkv_last_error(), "index 3") != NULL);
    CHECK(qkv_layer_fn("f", 1, 1, NULL, NULL) == NULL);
    CHECK(qkv_layer_serial(0, NULL) == NULL);
    s = QKV_SERIAL(qkv_layer_add());
    qkv_tensor *in[2] = {scalar(c, 1), scalar(c, 2)}, *out[2];
    CHECK(qkv_layer_apply(c, s, 1, in, out) == QKV_ERR_INVALID && strstr(qkv_last_error(), "takes 2") != NULL);
    CHECK(qkv_layer_call(c, s, in[0]) == NULL);
    qkv_layer_free(s);
    s = QKV_RESIDUAL(qkv_layer_drop());
    CHECK(s == NULL && strstr(qkv_last_error(), "Residual") != NULL);
    qkv_ctx_free(c);
}

int main(void) {
    RUN(stack_semantics);
    RUN(gradients_through_a_tree);
    RUN(classifier_trains);
    RUN(rnn_leaf_is_its_module);
    RUN(shared_layer_in_parallel);
    RUN(bad_input_is_an_error);
    return test_finish();
}
