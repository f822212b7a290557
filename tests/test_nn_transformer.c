/* Transformer blocks and stacks: torch.nn.TransformerEncoderLayer / DecoderLayer / Transformer fixtures
 * (tests/ref/nn_transformer.py) loaded by state_dict name, gradient checks, per-layer weights and errors. */
#include <math.h>
#include <string.h>

#include "test_nn_common.h"

static qkv_tensor *causal_or_pad(qkv_tensor *m, qkv_nn_attn_mask *out, bool causal) {
    *out = (qkv_nn_attn_mask){.causal = causal, .key_padding = (m && m->dtype == QKV_I32) ? m : NULL};
    return m;
}

typedef struct enc_case {
    qkv_nn_encoder_layer *l;
    bool causal, padded;
} enc_case;

static qkv_tensor *f_enc(qkv_ctx *c, qkv_tensor **in, void *u) {
    enc_case *e = u;
    qkv_nn_attn_mask m;
    causal_or_pad(e->padded ? in[1] : NULL, &m, e->causal);
    return qkv_nn_encoder_layer_forward(c, e->l, in[0], &m, NULL);
}

/* Decoder: tgt causal, memory padded by in[2]. */
static qkv_tensor *f_dec(qkv_ctx *c, qkv_tensor **in, void *u) {
    qkv_nn_attn_mask tm = {.causal = true}, mm = {.key_padding = in[2]};
    return qkv_nn_decoder_layer_forward(c, u, in[0], in[1], &tm, &mm, NULL, NULL);
}

static qkv_tensor *f_transformer(qkv_ctx *c, qkv_tensor **in, void *u) {
    qkv_nn_attn_mask sm = {.key_padding = in[2]}, tm = {.causal = true};
    return qkv_nn_transformer_forward(c, u, in[0], in[1], &sm, &tm, &sm);
}

static qkv_nn_block_config block(int64_t d, int64_t h, int64_t ff, bool norm_first, qkv_activation act) {
    qkv_nn_block_config cfg = qkv_nn_block_config_default(d, h);
    cfg.dim_feedforward = ff;
    cfg.dropout = 0.0f;
    cfg.norm_first = norm_first;
    cfg.activation = act;
    return cfg;
}

TEST(blocks_match_torch) {
    qkv_st_file *f = nn_open_fixture("nn_transformer.safetensors");
    if (!f) return;
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    qkv_nn_encoder_layer enc;
    qkv_params *p = qkv_params_new();
    qkv_nn_block_config cfg = block(8, 2, 16, false, QKV_ACT_RELU);
    CHECK_OK(qkv_nn_encoder_layer_init(&enc, p, "", &cfg, &rng));
    enc_case ec = {&enc, false, true};
    CHECK(nn_fixture_check(f, "enc_post_relu", p, f_enc, &ec, 1e-4, 1e-5));
    qkv_params_free(p);

    p = qkv_params_new();
    cfg = block(8, 2, 16, true, QKV_ACT_GELU);
    CHECK_OK(qkv_nn_encoder_layer_init(&enc, p, "", &cfg, &rng));
    ec = (enc_case){&enc, true, false};
    CHECK(nn_fixture_check(f, "enc_pre_gelu_causal", p, f_enc, &ec, 1e-4, 1e-5));
    qkv_params_free(p);

    qkv_nn_decoder_layer dec;
    p = qkv_params_new();
    cfg = block(8, 2, 16, false, QKV_ACT_RELU);
    CHECK_OK(qkv_nn_decoder_layer_init(&dec, p, "", &cfg, &rng));
    CHECK(nn_fixture_check(f, "dec_post_relu", p, f_dec, &dec, 1e-4, 1e-5));
    qkv_params_free(p);

    p = qkv_params_new();
    cfg = block(8, 2, 16, true, QKV_ACT_GELU);
    CHECK_OK(qkv_nn_decoder_layer_init(&dec, p, "", &cfg, &rng));
    CHECK(nn_fixture_check(f, "dec_pre_gelu", p, f_dec, &dec, 1e-4, 1e-5));
    qkv_params_free(p);
    qkv_st_close(f);
}

TEST(transformer_matches_torch) {
    qkv_st_file *f = nn_open_fixture("nn_transformer.safetensors");
    if (!f) return;
    qkv_rng rng;
    qkv_rng_init(&rng, 2);
    static qkv_nn_transformer tr; /* large: 64-layer capacity per stack */
    qkv_params *p = qkv_params_new();
    qkv_nn_block_config cfg = block(8, 2, 16, false, QKV_ACT_RELU);
    CHECK_OK(qkv_nn_transformer_init(&tr, p, "", &cfg, 2, 2, &rng));
    CHECK(qkv_params_find(p, "encoder.layers.1.self_attn.in_proj_weight") != NULL);
    CHECK(qkv_params_find(p, "decoder.layers.0.multihead_attn.out_proj.bias") != NULL);
    CHECK(qkv_params_find(p, "decoder.norm.weight") != NULL && qkv_params_find(p, "encoder.norm.bias") != NULL);
    CHECK(nn_fixture_check(f, "transformer", p, f_transformer, &tr, 1e-4, 1e-5));
    qkv_params_free(p);
    qkv_st_close(f);
}

TEST(gradcheck_blocks) {
    qkv_rng rng;
    qkv_rng_init(&rng, 3);
    qkv_tensor *x = gc_rand(1, -1, 1, QKV_DIMS(2, 3, 4)), *mem = gc_rand(2, -1, 1, QKV_DIMS(2, 4, 4));
    qkv_tensor_set_requires_grad(x, true);
    qkv_tensor_set_requires_grad(mem, true);
    qkv_tensor *pad3 = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 3)), *pad4 = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 4));
    qkv_i32(pad3)[5] = 1;
    qkv_i32(pad4)[6] = qkv_i32(pad4)[7] = 1;
    /* GELU rather than ReLU: finite differences across a ReLU kink are meaningless (ReLU blocks are compared with
     * torch above); a smaller step because LayerNorm over 4 features is strongly curved. */
    gc_opts o = gc_defaults();
    o.eps = 2e-3;
    for (int norm_first = 0; norm_first < 2; norm_first++) {
        qkv_nn_block_config cfg = block(4, 2, 6, norm_first, QKV_ACT_GELU);
        qkv_params *p = qkv_params_new();
        qkv_nn_encoder_layer enc;
        CHECK_OK(qkv_nn_encoder_layer_init(&enc, p, "enc", &cfg, &rng));
        enc_case pc = {&enc, false, true}, cc = {&enc, true, false};
        CHECK(nn_gradcheck_opts(norm_first ? "pre-norm encoder padded" : "post-norm encoder padded", f_enc, 2,
                           (qkv_tensor *[]){x, pad3}, p, &pc, &o));
        CHECK(nn_gradcheck_opts(norm_first ? "pre-norm encoder causal" : "post-norm encoder causal", f_enc, 1, &x, p,
                                &cc, &o));
        qkv_params_free(p);

        p = qkv_params_new();
        qkv_nn_decoder_layer dec;
        CHECK_OK(qkv_nn_decoder_layer_init(&dec, p, "dec", &cfg, &rng));
        CHECK(nn_gradcheck_opts(norm_first ? "pre-norm decoder" : "post-norm decoder", f_dec, 3,
                           (qkv_tensor *[]){x, mem, pad4}, p, &dec, &o));
        qkv_params_free(p);
    }
    static qkv_nn_transformer tr;
    qkv_params *p = qkv_params_new();
    qkv_nn_block_config cfg = block(4, 2, 6, false, QKV_ACT_GELU);
    CHECK_OK(qkv_nn_transformer_init(&tr, p, "", &cfg, 1, 1, &rng));
    CHECK(nn_gradcheck_opts("transformer 1+1", f_transformer, 3, (qkv_tensor *[]){mem, x, pad4}, p, &tr, &o));
    qkv_params_free(p);
    qkv_tensor_free(x);
    qkv_tensor_free(mem);
    qkv_tensor_free(pad3);
    qkv_tensor_free(pad4);
}

TEST(stack_returns_weights_per_layer_and_head) {
    qkv_rng rng;
    qkv_rng_init(&rng, 4);
    static qkv_nn_encoder enc;
    qkv_params *p = qkv_params_new();
    qkv_nn_block_config cfg = block(8, 4, 16, true, QKV_ACT_RELU);
    CHECK_OK(qkv_nn_encoder_init(&enc, p, "encoder", &cfg, 3, true, &rng));
    CHECK(qkv_params_find(p, "encoder.layers.2.linear2.bias") != NULL && qkv_params_find(p, "encoder.norm.weight"));
    qkv_tensor *x = gc_rand(5, -1, 1, QKV_DIMS(2, 6, 8));
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *w[3] = {0};
    qkv_nn_attn_mask m = {.causal = true};
    qkv_tensor *y = qkv_nn_encoder_forward(c, &enc, x, &m, w), *y2 = qkv_nn_encoder_forward(c, &enc, x, &m, NULL);
    CHECK(y && y2 && test_allclose("encoder with and without weights", y, y2, 1e-4, 1e-5));
    for (int i = 0; i < 3; i++) {
        CHECK(w[i] && w[i]->ndim == 4 && w[i]->shape[1] == 4 && w[i]->shape[3] == 6);
        double row = 0;
        for (int j = 0; j < 6 && w[i]; j++) row += qkv_f32(w[i])[5 * 6 + j]; /* query 5 of head 0 */
        CHECKF(fabs(row - 1.0) < 1e-5, "layer %d weights row sums to %g", i, row);
    }
    qkv_ctx_free(c);
    qkv_tensor_free(x);
    qkv_params_free(p);
}

/* The first n_queries rows alone, pre- and post-norm, with padding: the full forward's rows, and its weights' rows. */
TEST(query_subset_is_the_full_rows) {
    for (int pre = 0; pre < 2; pre++) {
        qkv_rng rng;
        qkv_rng_init(&rng, 8);
        static qkv_nn_encoder enc;
        qkv_params *p = qkv_params_new();
        qkv_nn_block_config cfg = block(8, 2, 16, pre, QKV_ACT_GELU);
        CHECK_OK(qkv_nn_encoder_init(&enc, p, "encoder", &cfg, 2, pre, &rng));
        qkv_tensor *x = gc_rand(11, -1, 1, QKV_DIMS(2, 5, 8));
        qkv_ctx *c = qkv_ctx_new();
        qkv_tensor *pad = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 5));
        qkv_i32(pad)[9] = 1; /* last key of the second sequence */
        qkv_nn_attn_mask m = {.key_padding = pad};
        qkv_tensor *w_full[2] = {0}, *w_sub[2] = {0};
        qkv_tensor *full = qkv_nn_encoder_forward(c, &enc, x, &m, w_full);
        qkv_tensor *sub = qkv_nn_encoder_forward_queries(c, &enc, x, 2, &m, w_sub);
        CHECK(full && sub && sub->shape[1] == 2 && w_sub[1] && w_sub[1]->shape[2] == 2);
        if (full && sub && w_sub[1]) {
            CHECK(test_allclose("first two rows", sub, qkv_contiguous(c, qkv_slice(c, full, 1, 0, 2, 1)), 1e-5, 1e-6));
            CHECK(test_allclose("their weights", w_sub[1], qkv_contiguous(c, qkv_slice(c, w_full[1], 2, 0, 2, 1)),
                                1e-5, 1e-6));
        }
        CHECK(qkv_nn_encoder_forward_queries(c, &enc, x, 6, &m, NULL) == NULL &&
              strstr(qkv_last_error(), "n_queries 6") != NULL);
        CHECK(qkv_nn_encoder_layer_forward_queries(c, &enc.layers[0], x, 0, NULL, NULL) == NULL);
        qkv_ctx_free(c);
        qkv_tensor_free(x);
        qkv_params_free(p);
    }
}

TEST(transformer_init_is_xavier) {
    qkv_rng rng;
    qkv_rng_init(&rng, 6);
    static qkv_nn_transformer tr;
    qkv_params *p = qkv_params_new();
    qkv_nn_block_config cfg = block(32, 4, 64, false, QKV_ACT_RELU);
    CHECK_OK(qkv_nn_transformer_init(&tr, p, "model", &cfg, 1, 1, &rng));
    qkv_tensor *w = qkv_params_find(p, "model.encoder.layers.0.linear1.weight"); /* [64, 32]: bound sqrt(6/96) */
    float mx = 0;
    for (int i = 0; w && i < 64 * 32; i++) mx = fmaxf(mx, fabsf(qkv_f32(w)[i]));
    CHECKF(w && mx <= sqrtf(6.0f / 96.0f) && mx > 0.9f * sqrtf(6.0f / 96.0f), "linear1 max %g", mx);
    qkv_tensor *ln = qkv_params_find(p, "model.decoder.norm.weight");
    CHECK(ln && qkv_f32(ln)[0] == 1.0f);
    qkv_params_free(p);
}

TEST(bad_input_is_an_error) {
    qkv_rng rng;
    qkv_rng_init(&rng, 7);
    qkv_params *p = qkv_params_new();
    qkv_nn_encoder_layer enc;
    qkv_nn_block_config cfg = block(8, 3, 16, false, QKV_ACT_RELU);
    CHECK(qkv_nn_encoder_layer_init(&enc, p, "enc", &cfg, &rng) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "nhead 3") != NULL);
    cfg = block(8, 2, 16, false, QKV_ACT_TANH);
    CHECK(qkv_nn_encoder_layer_init(&enc, p, "enc", &cfg, &rng) == QKV_ERR_INVALID);
    static qkv_nn_encoder stack;
    cfg = block(8, 2, 16, false, QKV_ACT_RELU);
    CHECK(qkv_nn_encoder_init(&stack, p, "enc", &cfg, 0, true, &rng) == QKV_ERR_INVALID);
    CHECK_OK(qkv_nn_encoder_layer_init(&enc, p, "enc", &cfg, &rng));
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 6));
    CHECK(qkv_nn_encoder_layer_forward(c, &enc, x, NULL, NULL) == NULL);
    CHECK(strstr(qkv_last_error(), "[2, 3, 6]") != NULL);
    CHECK(qkv_nn_encoder_forward(c, &stack, x, NULL, NULL) == NULL); /* never initialised */
    qkv_ctx_free(c);
    qkv_params_free(p);
}

int main(void) {
    RUN(blocks_match_torch);
    RUN(transformer_matches_torch);
    RUN(gradcheck_blocks);
    RUN(stack_returns_weights_per_layer_and_head);
    RUN(query_subset_is_the_full_rows);
    RUN(transformer_init_is_xavier);
    RUN(bad_input_is_an_error);
    return test_finish();
}
