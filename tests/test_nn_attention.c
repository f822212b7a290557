/* Attention modules: torch.nn.MultiheadAttention and the score functions against PyTorch
 * (tests/ref/nn_attention.py), gradient checks for every variant, and errors. */
#include <math.h>
#include <string.h>

#include "test_nn_common.h"

typedef struct mha_case {
    qkv_nn_mha *m;
    bool causal, cross, separate, want_weights;
} mha_case;

/* Inputs: x (self) or q, k, v (cross / separate), then an optional padding mask. */
static qkv_tensor *f_mha(qkv_ctx *c, qkv_tensor **in, void *u) {
    mha_case *mc = u;
    qkv_tensor *w = NULL;
    int n_x = mc->cross || mc->separate ? 3 : 1;
    qkv_nn_mha_opts o = {.causal = mc->causal, .weights = mc->want_weights ? &w : NULL};
    o.key_padding = (in[n_x] && in[n_x]->dtype == QKV_I32) ? in[n_x] : NULL;
    return qkv_nn_mha_forward(c, mc->m, in[0], in[n_x == 3 ? 1 : 0], in[n_x == 3 ? 2 : 0], &o);
}

typedef struct score_case {
    qkv_nn_score_attention *a;
    bool return_weights;
    bool no_pad; /* inputs are (query, keys) only */
} score_case;

static qkv_tensor *f_score(qkv_ctx *c, qkv_tensor **in, void *u) {
    score_case *sc = u;
    qkv_tensor *w = NULL;
    qkv_tensor *ctx = qkv_nn_score_attention_forward(c, sc->a, in[0], in[1], NULL, sc->no_pad ? NULL : in[2], &w);
    return sc->return_weights ? w : ctx;
}

/* Weights of the loaded module for case `key`, compared with the stored "K.weights". */
static bool weights_match(qkv_st_file *f, const char *key, qkv_tensor *(*run)(qkv_ctx *, qkv_tensor **, void *),
                          void *u, int n_in) {
    char name[128];
    qkv_tensor *in[8] = {0};
    for (int i = 0; i < n_in; i++) {
        snprintf(name, sizeof name, "%s.in.%d", key, i);
        in[i] = qkv_st_read(f, name);
    }
    snprintf(name, sizeof name, "%s.weights", key);
    qkv_tensor *want = qkv_st_read(f, name);
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *got = run(c, in, u);
    snprintf(name, sizeof name, "%s weights", key);
    bool ok = got && want && test_allclose(name, got, want, 1e-4, 1e-5);
    qkv_ctx_free(c);
    qkv_tensor_free(want);
    for (int i = 0; i < n_in; i++) qkv_tensor_free(in[i]);
    return ok;
}

static qkv_tensor *mha_weights_of(qkv_ctx *c, qkv_tensor **in, void *u) {
    mha_case *mc = u;
    qkv_tensor *w = NULL;
    qkv_nn_mha_opts o = {.causal = mc->causal, .weights = &w};
    o.key_padding = in[1] && in[1]->dtype == QKV_I32 ? in[1] : NULL;
    return qkv_nn_mha_forward(c, mc->m, in[0], in[0], in[0], &o) ? w : NULL;
}

TEST(mha_matches_torch) {
    qkv_st_file *f = nn_open_fixture("nn_attention.safetensors");
    if (!f) return;
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    qkv_nn_mha m;
    qkv_nn_mha_config cfg = qkv_nn_mha_config_default(8, 2);
    struct {
        const char *key;
        mha_case mc;
        bool check_weights;
    } cases[] = {
        {"mha_self_pad", {&m, false, false, false, false}, true},
        {"mha_causal", {&m, true, false, false, false}, true},
        {"mha_cross", {&m, false, true, false, false}, false},
    };
    for (int i = 0; i < 3; i++) {
        qkv_params *p = qkv_params_new();
        CHECK_OK(qkv_nn_mha_init(&m, p, "", &cfg, &rng));
        CHECKF(nn_fixture_check(f, cases[i].key, p, f_mha, &cases[i].mc, 1e-4, 1e-5), "case %s", cases[i].key);
        if (cases[i].check_weights)
            CHECKF(weights_match(f, cases[i].key, mha_weights_of, &cases[i].mc, i == 0 ? 2 : 1), "case %s",
                   cases[i].key);
        qkv_params_free(p);
    }
    qkv_params *p = qkv_params_new();
    cfg.separate_proj = true;
    cfg.kdim = 6;
    cfg.vdim = 5;
    CHECK_OK(qkv_nn_mha_init(&m, p, "", &cfg, &rng));
    mha_case sep = {&m, false, false, true, false};
    CHECK(nn_fixture_check(f, "mha_separate", p, f_mha, &sep, 1e-4, 1e-5));
    qkv_params_free(p);
    qkv_st_close(f);
}

TEST(score_attention_matches_torch) {
    qkv_st_file *f = nn_open_fixture("nn_attention.safetensors");
    if (!f) return;
    qkv_rng rng;
    qkv_rng_init(&rng, 2);
    struct {
        const char *key;
        qkv_score_kind kind;
        int64_t dq, da;
        bool bias;
    } cases[] = {{"score_dot", QKV_SCORE_DOT, 6, 0, false},
                 {"score_general", QKV_SCORE_GENERAL, 4, 0, false},
                 {"score_additive", QKV_SCORE_ADDITIVE, 4, 7, true},
                 {"score_scaled_dot", QKV_SCORE_SCALED_DOT, 6, 0, false}};
    for (int i = 0; i < 4; i++) {
        qkv_params *p = qkv_params_new();
        qkv_nn_score_attention a;
        CHECK_OK(qkv_nn_score_attention_init(&a, p, "", cases[i].kind, cases[i].dq, 6, cases[i].da, cases[i].bias,
                                             &rng));
        score_case sc = {&a, false, false}, sw = {&a, true, false};
        CHECKF(nn_fixture_check(f, cases[i].key, p, f_score, &sc, 1e-4, 1e-5), "case %s", cases[i].key);
        CHECKF(weights_match(f, cases[i].key, f_score, &sw, 3), "case %s", cases[i].key);
        qkv_params_free(p);
    }
    qkv_st_close(f);
}

static qkv_tensor *mask_i32(int64_t B, int64_t T, const int32_t *v) {
    qkv_tensor *m = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    memcpy(m->data, v, sizeof(int32_t) * (size_t)(B * T));
    return m;
}

TEST(gradcheck_score_functions) {
    qkv_rng rng;
    qkv_rng_init(&rng, 3);
    /* Second sequence fully padded: zero context and zero gradients. */
    qkv_tensor *pad = mask_i32(2, 4, (const int32_t[]){0, 0, 1, 0, 1, 1, 1, 1});
    qkv_score_kind kinds[] = {QKV_SCORE_DOT, QKV_SCORE_GENERAL, QKV_SCORE_ADDITIVE, QKV_SCORE_SCALED_DOT};
    const char *names[] = {"dot", "general", "additive", "scaled_dot"};
    for (int i = 0; i < 4; i++) {
        qkv_params *p = qkv_params_new();
        qkv_nn_score_attention a;
        int64_t dq = kinds[i] == QKV_SCORE_GENERAL || kinds[i] == QKV_SCORE_ADDITIVE ? 3 : 5;
        CHECK_OK(qkv_nn_score_attention_init(&a, p, "attn", kinds[i], dq, 5, 4, true, &rng));
        qkv_tensor *s3 = gc_rand(10 + (uint64_t)i, -1, 1, QKV_DIMS(2, 3, dq));
        qkv_tensor *s2 = gc_rand(20, -1, 1, QKV_DIMS(2, dq));
        qkv_tensor *h = gc_rand(30, -1, 1, QKV_DIMS(2, 4, 5));
        qkv_tensor_set_requires_grad(s3, true);
        qkv_tensor_set_requires_grad(s2, true);
        qkv_tensor_set_requires_grad(h, true);
        score_case sc = {&a, false, false}, sw = {&a, true, false}, step = {&a, false, true};
        char name[64];
        snprintf(name, sizeof name, "score %s padded", names[i]);
        CHECK(nn_gradcheck(name, f_score, 3, (qkv_tensor *[]){s3, h, pad}, p, &sc));
        snprintf(name, sizeof name, "score %s weights", names[i]);
        CHECK(nn_gradcheck(name, f_score, 3, (qkv_tensor *[]){s3, h, pad}, p, &sw));
        snprintf(name, sizeof name, "score %s one step", names[i]);
        CHECK(nn_gradcheck(name, f_score, 2, (qkv_tensor *[]){s2, h}, p, &step));
        /* the fully padded sequence: zero output */
        qkv_ctx *c = qkv_ctx_new();
        qkv_tensor *w = NULL, *y = qkv_nn_score_attention_forward(c, &a, s3, h, NULL, pad, &w);
        CHECK(y && w && qkv_f32(y)[15] == 0.0f && qkv_f32(w)[12] == 0.0f && isfinite(qkv_f32(y)[0]));
        qkv_ctx_free(c);
        qkv_tensor_free(s3);
        qkv_tensor_free(s2);
        qkv_tensor_free(h);
        qkv_params_free(p);
    }
    qkv_tensor_free(pad);
}

TEST(gradcheck_multi_head) {
    qkv_rng rng;
    qkv_rng_init(&rng, 4);
    qkv_params *p = qkv_params_new();
    qkv_nn_mha m;
    qkv_nn_mha_config cfg = qkv_nn_mha_config_default(4, 2);
    CHECK_OK(qkv_nn_mha_init(&m, p, "attn", &cfg, &rng));
    qkv_rng_fill_uniform(&rng, m.in_proj_bias, -0.3f, 0.3f);
    qkv_tensor *x = gc_rand(1, -1, 1, QKV_DIMS(2, 3, 4)), *mem = gc_rand(2, -1, 1, QKV_DIMS(2, 5, 4));
    qkv_tensor_set_requires_grad(x, true);
    qkv_tensor_set_requires_grad(mem, true);
    qkv_tensor *pad3 = mask_i32(2, 3, (const int32_t[]){0, 0, 1, 0, 0, 0});
    qkv_tensor *pad5 = mask_i32(2, 5, (const int32_t[]){0, 0, 0, 1, 1, 0, 1, 0, 0, 0});
    mha_case plain = {&m, false, false, false, false}, causal = {&m, true, false, false, false};
    mha_case cross = {&m, false, true, false, false}, weights = {&m, true, false, false, true};
    CHECK(nn_gradcheck("mha self", f_mha, 1, &x, p, &plain));
    CHECK(nn_gradcheck("mha causal", f_mha, 1, &x, p, &causal));
    CHECK(nn_gradcheck("mha padded", f_mha, 2, (qkv_tensor *[]){x, pad3}, p, &plain));
    CHECK(nn_gradcheck("mha causal+padded, weights path", f_mha, 2, (qkv_tensor *[]){x, pad3}, p, &weights));
    CHECK(nn_gradcheck("mha cross padded", f_mha, 4, (qkv_tensor *[]){x, mem, mem, pad5}, p, &cross));
    qkv_params_free(p);

    p = qkv_params_new();
    cfg.separate_proj = true;
    cfg.kdim = 3;
    cfg.vdim = 2;
    CHECK_OK(qkv_nn_mha_init(&m, p, "attn", &cfg, &rng));
    CHECK(qkv_params_find(p, "attn.k_proj.weight") && qkv_params_find(p, "attn.out_proj.bias"));
    qkv_tensor *k = gc_rand(3, -1, 1, QKV_DIMS(2, 5, 3)), *v = gc_rand(4, -1, 1, QKV_DIMS(2, 5, 2));
    qkv_tensor_set_requires_grad(k, true);
    qkv_tensor_set_requires_grad(v, true);
    mha_case sep = {&m, false, false, true, false};
    CHECK(nn_gradcheck("mha separate projections", f_mha, 4, (qkv_tensor *[]){x, k, v, pad5}, p, &sep));
    qkv_params_free(p);
    qkv_tensor_free(k);
    qkv_tensor_free(v);
    qkv_tensor_free(x);
    qkv_tensor_free(mem);
    qkv_tensor_free(pad3);
    qkv_tensor_free(pad5);
}

TEST(fused_and_materialised_paths_agree) {
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    qkv_params *p = qkv_params_new();
    qkv_nn_mha m;
    qkv_nn_mha_config cfg = qkv_nn_mha_config_default(16, 4);
    CHECK_OK(qkv_nn_mha_init(&m, p, "", &cfg, &rng));
    qkv_tensor *x = gc_rand(6, -1, 1, QKV_DIMS(2, 37, 16));
    qkv_tensor *pad = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 37));
    for (int t = 30; t < 37; t++) qkv_i32(pad)[37 + t] = 1;
    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *w = NULL;
    qkv_nn_mha_opts fused = {.causal = true, .key_padding = pad};
    qkv_nn_mha_opts mat = {.causal = true, .key_padding = pad, .weights = &w};
    qkv_tensor *a = qkv_nn_mha_forward(c, &m, x, x, x, &fused), *b = qkv_nn_mha_forward(c, &m, x, x, x, &mat);
    CHECK(a && b && w && test_allclose("fused vs materialised", a, b, 1e-4, 1e-5));
    CHECK(w && w->ndim == 4 && w->shape[1] == 4 && w->shape[2] == 37 && w->shape[3] == 37);
    CHECK(w && qkv_f32(w)[1] == 0.0f); /* causal: query 0 does not see key 1 */
    qkv_ctx_free(c);
    qkv_tensor_free(x);
    qkv_tensor_free(pad);
    qkv_params_free(p);
}

TEST(bad_input_is_an_error) {
    qkv_rng rng;
    qkv_rng_init(&rng, 7);
    qkv_params *p = qkv_params_new();
    qkv_nn_mha m;
    qkv_nn_mha_config cfg = qkv_nn_mha_config_default(6, 4);
    CHECK(qkv_nn_mha_init(&m, p, "attn", &cfg, &rng) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "num_heads 4") != NULL);
    cfg = qkv_nn_mha_config_default(8, 2);
    cfg.kdim = 3;
    CHECK(qkv_nn_mha_init(&m, p, "attn", &cfg, &rng) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "separate_proj") != NULL);
    cfg.kdim = 0;
    CHECK_OK(qkv_nn_mha_init(&m, p, "attn", &cfg, &rng));
    qkv_nn_score_attention a;
    CHECK(qkv_nn_score_attention_init(&a, p, "s", QKV_SCORE_DOT, 3, 4, 0, false, &rng) == QKV_ERR_INVALID);
    qkv_score_kind k;
    CHECK(qkv_score_kind_parse("bahdanau", &k) && k == QKV_SCORE_ADDITIVE && !qkv_score_kind_parse("cosine", &k));

    qkv_ctx *c = qkv_ctx_new();
    qkv_tensor *x = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 8)), *bad = qkv_ctx_zeros(c, QKV_F32, QKV_DIMS(2, 3, 7));
    CHECK(qkv_nn_mha_forward(c, &m, x, bad, bad, NULL) == NULL && strstr(qkv_last_error(), "[2, 3, 7]") != NULL);
    qkv_tensor *pad = qkv_ctx_zeros(c, QKV_I32, QKV_DIMS(2, 4));
    qkv_nn_mha_opts o = {.key_padding = pad};
    CHECK(qkv_nn_mha_forward(c, &m, x, x, x, &o) == NULL && strstr(qkv_last_error(), "padding mask") != NULL);
    CHECK(qkv_nn_mha_forward(c, &m, NULL, x, x, NULL) == NULL);
    CHECK_OK(qkv_nn_score_attention_init(&a, p, "s", QKV_SCORE_GENERAL, 8, 4, 0, false, &rng));
    CHECK(qkv_nn_score_attention_forward(c, &a, x, x, NULL, NULL, NULL) == NULL);
    CHECK(strstr(qkv_last_error(), "general") != NULL);
    qkv_ctx_free(c);
    qkv_params_free(p);
}

int main(void) {
    RUN(mha_matches_torch);
    RUN(score_attention_matches_torch);
    RUN(gradcheck_score_functions);
    RUN(gradcheck_multi_head);
    RUN(fused_and_materialised_paths_agree);
    RUN(bad_input_is_an_error);
    return test_finish();
}
