/* Basic nn layers: PyTorch fixtures (tests/ref/nn_layers.py) with parameters loaded by state_dict name, gradient
 * checks over inputs and parameters, initialisation, utilities and errors. */
#include <math.h>
#include <string.h>

#include "test_nn_common.h"

static qkv_tensor *f_linear(qkv_ctx *c, qkv_tensor **in, void *u) { return qkv_nn_linear_forward(c, u, in[0]); }
static qkv_tensor *f_embedding(qkv_ctx *c, qkv_tensor **in, void *u) {
    return qkv_nn_embedding_forward(c, u, in[0]);
}
static qkv_tensor *f_layer_norm(qkv_ctx *c, qkv_tensor **in, void *u) {
    return qkv_nn_layer_norm_forward(c, u, in[0]);
}
static qkv_tensor *f_l2(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_nn_l2_normalize(c, in[0], 1e-6f);
}
static qkv_tensor *f_masked_mean(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_nn_masked_mean(c, in[0], in[1]);
}
static qkv_tensor *f_posenc(qkv_ctx *c, qkv_tensor **in, void *u) { return qkv_nn_posenc_forward(c, u, in[0], 2); }
static qkv_tensor *f_shift(qkv_ctx *c, qkv_tensor **in, void *u) {
    (void)u;
    return qkv_nn_shift_right(c, in[0], 0.5f);
}
static qkv_tensor *f_head(qkv_ctx *c, qkv_tensor **in, void *u) {
    return qkv_nn_logsoftmax_head_forward(c, u, in[0]);
}
static qkv_tensor *f_act(qkv_ctx *c, qkv_tensor **in, void *u) {
    return qkv_nn_activate(c, *(qkv_activation *)u, in[0]);
}

TEST(fixtures_match_torch) {
    qkv_st_file *f = nn_open_fixture("nn_layers.safetensors");
    if (!f) return;
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    qkv_params *p = qkv_params_new();
    qkv_nn_linear lin;
    CHECK_OK(qkv_nn_linear_init(&lin, p, "", 5, 4, true, &rng));
    CHECK(nn_fixture_check(f, "linear", p, f_linear, &lin, 1e-4, 1e-5));
    qkv_params_free(p);

    p = qkv_params_new();
    CHECK_OK(qkv_nn_linear_init(&lin, p, NULL, 6, 3, false, &rng));
    CHECK(lin.bias == NULL && qkv_params_count(p) == 1);
    CHECK(nn_fixture_check(f, "linear_nobias", p, f_linear, &lin, 1e-4, 1e-5));
    qkv_params_free(p);

    p = qkv_params_new();
    qkv_nn_embedding emb;
    CHECK_OK(qkv_nn_embedding_init(&emb, p, "", 10, 4, 1, false, &rng));
    CHECK(nn_fixture_check(f, "embedding_pad", p, f_embedding, &emb, 1e-4, 1e-5));
    qkv_params_free(p);

    p = qkv_params_new();
    CHECK_OK(qkv_nn_embedding_init(&emb, p, "", 7, 6, QKV_NN_NO_PADDING, true, &rng));
    CHECK(nn_fixture_check(f, "embedding_scaled", p, f_embedding, &emb, 1e-4, 1e-5));
    qkv_params_free(p);

    p = qkv_params_new();
    qkv_nn_layer_norm ln;
    CHECK_OK(qkv_nn_layer_norm_init(&ln, p, "", 6, 1e-5f, true));
    CHECK(nn_fixture_check(f, "layer_norm", p, f_layer_norm, &ln, 1e-4, 1e-5));
    qkv_params_free(p);

    CHECK(fixture_check(f, "l2_normalize", f_l2, NULL, 1e-4, 1e-5));
    CHECK(fixture_check(f, "masked_mean", f_masked_mean, NULL, 1e-4, 1e-5));

    p = qkv_params_new();
    qkv_nn_posenc pe;
    CHECK_OK(qkv_nn_posenc_init(&pe, p, "pos", QKV_POSENC_SINUSOIDAL, 64, 16, 0.0f, 0.0f, &rng));
    qkv_tensor *want = qkv_st_read(f, "posenc.pe");
    CHECK(want && test_allclose("sinusoidal table", pe.table, want, 1e-4, 1e-5));
    CHECK(qkv_params_find(p, "pos.pe") == pe.table && !(pe.table->flags & QKV_FLAG_REQUIRES_GRAD));
    CHECK(qkv_params_numel(p) == 0); /* a buffer, not trained */
    qkv_tensor_free(want);
    qkv_params_free(p);
    qkv_st_close(f);
}

TEST(gradcheck_layers) {
    qkv_rng rng;
    qkv_rng_init(&rng, 2);
    qkv_params *p = qkv_params_new();
    qkv_nn_linear lin;
    CHECK_OK(qkv_nn_linear_init(&lin, p, "l", 4, 3, true, &rng));
    qkv_tensor *x = gc_rand(1, -1, 1, QKV_DIMS(2, 3, 4));
    qkv_tensor_set_requires_grad(x, true);
    CHECK(nn_gradcheck("linear", f_linear, 1, &x, p, &lin));
    qkv_params_free(p);

    p = qkv_params_new();
    qkv_nn_layer_norm ln;
    CHECK_OK(qkv_nn_layer_norm_init(&ln, p, "n", 4, 1e-5f, true));
    qkv_rng_fill_uniform(&rng, ln.weight, 0.5f, 1.5f);
    qkv_rng_fill_uniform(&rng, ln.bias, -0.5f, 0.5f);
    CHECK(nn_gradcheck("layer_norm", f_layer_norm, 1, &x, p, &ln));
    qkv_params_free(p);

    p = qkv_params_new();
    qkv_nn_logsoftmax_head head;
    CHECK_OK(qkv_nn_logsoftmax_head_init(&head, p, "head", 4, 5, &rng));
    CHECK(qkv_params_find(p, "head.weight") && qkv_params_find(p, "head.bias"));
    CHECK(nn_gradcheck("logsoftmax head", f_head, 1, &x, p, &head));
    qkv_params_free(p);

    p = qkv_params_new();
    qkv_nn_posenc pe;
    CHECK_OK(qkv_nn_posenc_init(&pe, p, "wpe", QKV_POSENC_LEARNED, 8, 4, 0.0f, 0.02f, &rng));
    CHECK(qkv_params_find(p, "wpe.weight") == pe.table);
    CHECK(nn_gradcheck("learned positions (offset 2)", f_posenc, 1, &x, p, &pe));
    qkv_params_free(p);

    CHECK(gradcheck("shift_right float", f_shift, 1, &x, NULL, NULL));
    CHECK(gradcheck("l2_normalize", f_l2, 1, &x, NULL, NULL));
    qkv_activation acts[] = {QKV_ACT_RELU, QKV_ACT_GELU, QKV_ACT_GELU_TANH, QKV_ACT_TANH};
    for (int i = 0; i < 4; i++) CHECK(gradcheck(qkv_activation_name(acts[i]), f_act, 1, &x, &acts[i], NULL));

    qkv_tensor *mask = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 3));
    qkv_i32(mask)[1] = 1;
    qkv_i32(mask)[3] = qkv_i32(mask)[4] = qkv_i32(mask)[5] = 1; /* second sequence fully padded: zeros */
    CHECK(gradcheck("masked_mean", f_masked_mean, 2, (qkv_tensor *[]){x, mask}, NULL, NULL));
    qkv_tensor_free(mask);
    qkv_tensor_free(x);
}

TEST(embedding_padding_row_gets_no_gradient) {
    qkv_rng rng;
    qkv_rng_init(&rng, 3);
    qkv_params *p = qkv_params_new();
    qkv_nn_embedding e;
    CHECK_OK(qkv_nn_embedding_init(&e, p, "embed", 6, 3, -1, false, &rng)); /* -1 -> row 5, as torch */
    CHECK(e.padding_idx == 5);
    for (int j = 0; j < 3; j++) CHECK(qkv_f32(e.weight)[15 + j] == 0.0f);
    qkv_tensor *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 3));
    /* The padding row is output as it is but deliberately not differentiated, so finite differences only apply to
     * batches without the padding id; with it, the row's gradient must stay exactly zero. */
    int32_t clean[] = {0, 1, 2, 3, 1, 0}, v[] = {5, 1, 2, 5, 5, 0};
    memcpy(ids->data, clean, sizeof clean);
    CHECK(nn_gradcheck("embedding weight", f_embedding, 1, &ids, p, &e));
    memcpy(ids->data, v, sizeof v);
    qkv_params_zero_grad(p);
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *y = qkv_nn_embedding_forward(c, &e, ids);
    CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_mul(c, y, y))));
    qkv_f32(e.weight)[15] = 3.0f; /* even a non-zero padding row gets none */
    qkv_ctx_reset(c);
    y = qkv_nn_embedding_forward(c, &e, ids);
    CHECK(y && qkv_f32(y)[0] == 3.0f);
    CHECK_OK(qkv_backward(c, qkv_sum_all(c, qkv_mul(c, y, y))));
    for (int j = 0; j < 3; j++) CHECK(qkv_f32(e.weight->grad)[15 + j] == 0.0f);
    CHECK(qkv_f32(e.weight->grad)[3] != 0.0f); /* row 1 did get one */
    qkv_ctx_free(c);
    qkv_tensor_free(ids);
    qkv_params_free(p);
}

TEST(embedding_from_pretrained) {
    qkv_tensor *m = gc_rand(4, -1, 1, QKV_DIMS(5, 2));
    qkv_params *p = qkv_params_new();
    qkv_nn_embedding frozen, tuned;
    CHECK_OK(qkv_nn_embedding_init_from(&frozen, p, "glove", m, true, QKV_NN_NO_PADDING, false));
    CHECK_OK(qkv_nn_embedding_init_from(&tuned, p, "tuned", m, false, 0, false));
    CHECK(!(frozen.weight->flags & QKV_FLAG_REQUIRES_GRAD) && (tuned.weight->flags & QKV_FLAG_REQUIRES_GRAD));
    CHECK(memcmp(frozen.weight->data, m->data, sizeof(float) * 10) == 0);
    CHECK(qkv_params_numel(p) == 10);
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *ids = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(1, 2));
    qkv_i32(ids)[1] = 3;
    qkv_tensor *y = qkv_nn_embedding_forward(c, &frozen, ids);
    CHECK(y && y->node == NULL && qkv_f32(y)[2] == qkv_f32(m)[6]);
    qkv_tensor *z = qkv_nn_embedding_forward(c, &tuned, ids); /* padding row 0 is output as given */
    CHECK(z && qkv_f32(z)[0] == qkv_f32(m)[0]);
    qkv_ctx_free(c);
    qkv_params_free(p);
    qkv_tensor_free(m);
}

TEST(linear_init_is_torch_default) {
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    qkv_params *p = qkv_params_new();
    qkv_nn_linear l;
    CHECK_OK(qkv_nn_linear_init(&l, p, "fc", 64, 32, true, &rng));
    float bound = 1.0f / 8.0f, wmax = 0, bmax = 0;
    for (int i = 0; i < 64 * 32; i++) wmax = fmaxf(wmax, fabsf(qkv_f32(l.weight)[i]));
    for (int i = 0; i < 32; i++) bmax = fmaxf(bmax, fabsf(qkv_f32(l.bias)[i]));
    CHECKF(wmax <= bound && wmax > 0.9f * bound, "weight max %g, bound %g", wmax, bound);
    CHECKF(bmax <= bound && bmax > 0.5f * bound, "bias max %g, bound %g", bmax, bound);
    CHECK(strcmp(l.weight->name, "fc.weight") == 0 && strcmp(l.bias->name, "fc.bias") == 0);
    qkv_params_free(p);
}

TEST(shift_right_and_dropout) {
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *ids = qkv_ctx_tensor(c, QKV_I32, QKV_DIMS(2, 3));
    int32_t v[] = {7, 8, 9, 4, 5, 6};
    memcpy(ids->data, v, sizeof v);
    qkv_tensor *s = qkv_nn_shift_right(c, ids, 0);
    int32_t want[] = {0, 7, 8, 0, 4, 5};
    CHECK(s && memcmp(s->data, want, sizeof want) == 0);
    qkv_tensor *t = qkv_nn_shift_right(c, qkv_transpose(c, ids, 0, 1), 1); /* strided [3, 2] */
    int32_t want_t[] = {1, 7, 1, 8, 1, 9};
    CHECK(t && memcmp(t->data, want_t, sizeof want_t) == 0);

    qkv_nn_dropout d;
    CHECK_OK(qkv_nn_dropout_init(&d, 0.5f));
    qkv_tensor *x = qkv_ctx_tensor(c, QKV_F32, QKV_DIMS(1000));
    qkv_tensor_fill(x, 1.0f);
    qkv_tensor *y = qkv_nn_dropout_forward(c, &d, x);
    int zeros = 0;
    for (int i = 0; i < 1000; i++) zeros += qkv_f32(y)[i] == 0.0f;
    CHECKF(zeros > 400 && zeros < 600, "%d of 1000 dropped at p = 0.5", zeros);
    qkv_ctx_set_training(c, false);
    y = qkv_nn_dropout_forward(c, &d, x);
    for (int i = 0; i < 1000; i++) CHECK(qkv_f32(y)[i] == 1.0f);
    qkv_ctx_free(c);
}

TEST(bad_input_is_an_error) {
    qkv_rng rng;
    qkv_rng_init(&rng, 6);
    qkv_params *p = qkv_params_new();
    qkv_nn_linear l;
    CHECK(qkv_nn_linear_init(&l, p, "bad", 0, 3, true, &rng) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "in_features") != NULL);
    CHECK_OK(qkv_nn_linear_init(&l, p, "fc", 4, 3, true, &rng));
    CHECK(qkv_nn_linear_init(&l, p, "fc", 4, 3, true, &rng) != QKV_OK); /* duplicate names */
    CHECK_OK(qkv_nn_linear_init(&l, p, "fc2", 4, 3, true, &rng));
    qkv_nn_embedding e;
    CHECK(qkv_nn_embedding_init(&e, p, "e", 4, 2, 4, false, &rng) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "padding_idx 4") != NULL);
    qkv_nn_dropout d;
    CHECK(qkv_nn_dropout_init(&d, 1.0f) == QKV_ERR_INVALID);
    qkv_nn_layer_norm n;
    CHECK(qkv_nn_layer_norm_init(&n, p, "n", 4, 0.0f, true) == QKV_ERR_INVALID);
    qkv_nn_posenc pe;
    CHECK_OK(qkv_nn_posenc_init(&pe, p, "pe", QKV_POSENC_SINUSOIDAL, 4, 4, 0.0f, 0.0f, &rng));

    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 5));
    CHECK(qkv_nn_linear_forward(c, &l, x) == NULL && strstr(qkv_last_error(), "fc2.weight") != NULL);
    CHECK(qkv_nn_linear_forward(c, &l, NULL) == NULL);
    qkv_tensor *x3 = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(1, 5, 4));
    CHECK(qkv_nn_posenc_forward(c, &pe, x3, 0) == NULL && qkv_last_status() == QKV_ERR_RANGE);
    CHECK(qkv_nn_posenc_forward(c, &pe, x, 0) == NULL && qkv_last_status() == QKV_ERR_INVALID);
    qkv_tensor *m = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(1, 4));
    CHECK(qkv_nn_masked_mean(c, x3, m) == NULL && strstr(qkv_last_error(), "[1, 5]") != NULL);
    CHECK(qkv_nn_shift_right(c, qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(3)), 0) == NULL);
    qkv_activation a;
    CHECK(qkv_activation_parse("gelu_new", &a) && a == QKV_ACT_GELU_TANH && !qkv_activation_parse("swish", &a));
    qkv_ctx_free(c);
    qkv_params_free(p);
}

int main(void) {
    RUN(fixtures_match_torch);
    RUN(gradcheck_layers);
    RUN(embedding_padding_row_gets_no_gradient);
    RUN(embedding_from_pretrained);
    RUN(linear_init_is_torch_default);
    RUN(shift_right_and_dropout);
    RUN(bad_input_is_an_error);
    return test_finish();
}
