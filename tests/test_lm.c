/* Language models: the GPT-style Transformer LM and the recurrent LM against PyTorch (logits and every parameter
 * gradient, tests/ref/lm.py), finite-difference gradchecks, the model-type interface, and Trax's
 * eval-equals-predict: incremental decoding (KV cache / carried state) gives the full forward's logits at every
 * position. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/decode.h"
#include "qkv/gpt.h"
#include "qkv/rnnlm.h"
#include "test_nn_common.h"

static qkv_gpt_config small_gpt(int64_t V, int64_t n_ctx, int64_t D, int64_t H, int64_t F, int L, bool tied) {
    qkv_gpt_config c = qkv_gpt_config_default();
    c.vocab_size = V;
    c.n_ctx = n_ctx;
    c.d_model = D;
    c.n_heads = H;
    c.d_ff = F;
    c.n_layers = L;
    c.tied = tied;
    return c;
}

static qkv_tensor *gpt_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    return qkv_gpt_forward(ctx, user, in[0], NULL);
}

static qkv_tensor *rnnlm_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    return qkv_rnnlm_forward(ctx, user, in[0]);
}

static qkv_tensor *gpt_loss_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    qkv_batch b = {.ids = in[0], .targets = in[1], .mask = in[2]};
    return qkv_reshape(ctx, qkv_model_gpt.loss(ctx, user, &b), QKV_DIMS(1)); /* the fixture stores [1] */
}

TEST(gpt_matches_torch) {
    qkv_st_file *f = nn_open_fixture("lm.safetensors");
    if (!f) return;
    const char *keys[] = {"gpt_tied", "gpt_untied", "gpt_loss"};
    for (int k = 0; k < 3; k++) {
        qkv_params *p = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 1);
        qkv_gpt_config c = small_gpt(11, 8, 8, 2, 16, 2, k != 1);
        qkv_gpt *m = qkv_gpt_new(&c, p, NULL, &rng);
        CHECK_NN(m);
        if (m) CHECKF(nn_fixture_check(f, keys[k], p, k == 2 ? gpt_loss_fn : gpt_fn, m, 1e-4, 1e-5), "%s", keys[k]);
        qkv_gpt_free(m);
        qkv_params_free(p);
    }
    qkv_st_close(f);
}

TEST(rnnlm_matches_torch) {
    qkv_st_file *f = nn_open_fixture("lm.safetensors");
    if (!f) return;
    const char *keys[] = {"rnnlm_gru", "rnnlm_lstm"};
    for (int k = 0; k < 2; k++) {
        qkv_params *p = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 1);
        qkv_rnnlm_config c = qkv_rnnlm_config_default();
        c.vocab_size = 11;
        c.d_model = 8;
        c.kind = k ? QKV_RNN_LSTM : QKV_RNN_GRU;
        qkv_rnnlm *m = qkv_rnnlm_new(&c, p, &rng);
        CHECK_NN(m);
        if (m) CHECKF(nn_fixture_check(f, keys[k], p, rnnlm_fn, m, 1e-4, 1e-5), "%s", keys[k]);
        qkv_rnnlm_free(m);
        qkv_params_free(p);
    }
    qkv_st_close(f);
}

static qkv_tensor *ids_tensor(int64_t B, int64_t T, int64_t V, uint64_t seed) {
    qkv_tensor *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    qkv_rng rng;
    qkv_rng_init(&rng, seed);
    for (int64_t i = 0; i < B * T; i++) qkv_i32(ids)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)V);
    return ids;
}

TEST(gpt_gradcheck) {
    for (int tied = 0; tied < 2; tied++) {
        qkv_params *p = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 3);
        qkv_gpt_config c = small_gpt(5, 4, 4, 2, 6, 1, tied);
        c.init_std = 0.5f;
        qkv_gpt *m = qkv_gpt_new(&c, p, NULL, &rng);
        qkv_tensor *ids = ids_tensor(2, 4, 5, 4);
        CHECK(nn_gradcheck(tied ? "gpt tied" : "gpt untied", gpt_fn, 1, &ids, p, m));
        qkv_tensor_free(ids);
        qkv_gpt_free(m);
        qkv_params_free(p);
    }
}

TEST(rnnlm_gradcheck) {
    for (int k = 0; k < 2; k++) {
        qkv_params *p = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 5);
        qkv_rnnlm_config c = qkv_rnnlm_config_default();
        c.vocab_size = 5;
        c.d_model = 3;
        c.kind = k ? QKV_RNN_LSTM : QKV_RNN_GRU;
        qkv_rnnlm *m = qkv_rnnlm_new(&c, p, &rng);
        qkv_tensor *ids = ids_tensor(2, 3, 5, 6);
        CHECK(nn_gradcheck(k ? "rnnlm lstm" : "rnnlm gru", rnnlm_fn, 1, &ids, p, m));
        qkv_tensor_free(ids);
        qkv_rnnlm_free(m);
        qkv_params_free(p);
    }
}

/* Largest |a - b| over n floats. */
static double max_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* Trax's eval-equals-predict: feed ids one position at a time through the KV cache, for batch 1 (the GEMV path)
 * and batch 3 (GEMM), and compare with the full causal forward at every position. */
TEST(gpt_cached_decoding_equals_forward) {
    for (int tied = 0; tied < 2; tied++) {
        qkv_params *p = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 7);
        qkv_gpt_config c = small_gpt(37, 24, 32, 4, 48, 3, tied);
        c.init_std = 0.1f;
        qkv_gpt *m = qkv_gpt_new(&c, p, NULL, &rng);
        CHECK_NN(m);
        for (int B = 1; B <= 3; B += 2) {
            int64_t T = c.n_ctx, V = c.vocab_size;
            qkv_tensor *ids = ids_tensor(B, T, V, 8 + B);
            qkv_ctx *ctx = qkv_ctx_new();
            qkv_ctx_set_grad(ctx, false);
            qkv_tensor *full = qkv_contiguous(ctx, qkv_gpt_forward(ctx, m, ids, NULL));
            CHECK_NN(full);
            qkv_gpt_decoder *d = qkv_gpt_decoder_new(m, B);
            CHECK_NN(d);
            float logits[3 * 37];
            double worst = 0, scale = 0;
            for (int64_t t = 0; t < T && full && d; t++) {
                int32_t tok[3];
                for (int b = 0; b < B; b++) tok[b] = qkv_i32(ids)[b * T + t];
                CHECK_OK(qkv_gpt_decoder_step(d, tok, logits));
                for (int b = 0; b < B; b++) {
                    const float *want = qkv_f32(full) + (b * T + t) * V;
                    worst = fmax(worst, max_diff(logits + b * V, want, V));
                    for (int64_t v = 0; v < V; v++) scale = fmax(scale, fabs(want[v]));
                }
            }
            printf("  gpt %s batch %d: max |cached - full| %.2e over %lld positions (logits up to %.2f)\n",
                   tied ? "tied" : "untied", B, worst, (long long)T, scale);
            CHECK(worst <= 1e-5);
            CHECK(scale > 0.1); /* the comparison is not between near-zero logits */
            /* The context is full now: one more step is an error that changes nothing. */
            int32_t zero[3] = {0, 0, 0};
            CHECK(qkv_gpt_decoder_step(d, zero, logits) == QKV_ERR_RANGE);
            CHECK(strstr(qkv_last_error(), "full") != NULL);
            qkv_gpt_decoder_reset(d);
            CHECK(qkv_gpt_decoder_pos(d) == 0);
            int32_t bad[3] = {37, 0, 0};
            CHECK(qkv_gpt_decoder_step(d, bad, logits) == QKV_ERR_RANGE);
            CHECK(qkv_gpt_decoder_pos(d) == 0);
            qkv_gpt_decoder_free(d);
            qkv_ctx_free(ctx);
            qkv_tensor_free(ids);
        }
        qkv_gpt_free(m);
        qkv_params_free(p);
    }
}

/* Runs ids [B, T] through a fresh decoder made for `cap` rows (cap > B: one step of all cap rows first, then a
 * reorder down to B, so that the weights are packed before a batch of one). The first k1 positions, then the next
 * k2, go in through qkv_gpt_decoder_prefill (prefill) or as steps; then, if shrink, a reorder keeps the last row
 * alone; the remaining positions are steps whose logits go to out [T - k1 - k2, rows, V]. */
static bool gpt_feed(const qkv_gpt *m, int cap, int B, const int32_t *ids, int64_t T, int64_t k1, int64_t k2,
                     bool prefill, bool shrink, float *out) {
    int64_t V = m->cfg.vocab_size;
    qkv_gpt_decoder *d = qkv_gpt_decoder_new(m, cap);
    float *logits = malloc(sizeof(float) * (size_t)(cap * V));
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(cap * T));
    bool ok = d && logits && tok;
    if (ok && cap > B) {
        for (int b = 0; b < cap; b++) tok[b] = ids[(b % B) * T];
        ok = qkv_gpt_decoder_step(d, tok, logits) == QKV_OK;
        for (int b = 0; b < B; b++) tok[b] = cap - 1 - b;
        ok = ok && qkv_gpt_decoder_reorder(d, tok, B) == QKV_OK;
    }
    int64_t parts[2][2] = {{0, k1}, {k1, k2}};
    for (int p = 0; ok && p < 2; p++) {
        int64_t t0 = parts[p][0], n = parts[p][1];
        for (int b = 0; b < B; b++)
            for (int64_t t = 0; t < n; t++) tok[b * n + t] = ids[b * T + t0 + t];
        ok = !prefill || qkv_gpt_decoder_prefill(d, tok, n) == QKV_OK;
        for (int64_t t = 0; ok && !prefill && t < n; t++) {
            for (int b = 0; b < B; b++) tok[b] = ids[b * T + t0 + t];
            ok = qkv_gpt_decoder_step(d, tok, logits) == QKV_OK;
        }
    }
    int rows = shrink ? 1 : B, last = B - 1;
    ok = ok && (!shrink || qkv_gpt_decoder_reorder(d, &last, 1) == QKV_OK);
    for (int64_t t = k1 + k2; ok && t < T; t++) {
        for (int b = 0; b < rows; b++) tok[b] = ids[(shrink ? last : b) * T + t];
        ok = qkv_gpt_decoder_step(d, tok, logits) == QKV_OK;
        memcpy(out + (t - k1 - k2) * rows * V, logits, sizeof(float) * (size_t)(rows * V));
    }
    CHECKF(ok, "gpt feed (%d of %d rows, %s %lld + %lld): %s", B, cap, prefill ? "prefill" : "steps", (long long)k1,
           (long long)k2, qkv_last_error());
    qkv_gpt_decoder_free(d);
    free(logits);
    free(tok);
    return ok;
}

/* A prefill is n steps without their logits: later steps give the same bits, for a batch of one (GEMV), a few rows
 * (packed weights), one row after a wider batch packed them, more rows than the packed path takes (BLAS), a batch
 * that shrinks to one row after the prefill (the output projection must be packed as steps would have packed it),
 * prefills in several groups and one after another, and queries past 16 keys (the attention's blocked loop). */
TEST(gpt_prefill_equals_steps) {
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 9);
    qkv_gpt_config c = small_gpt(37, 40, 32, 4, 48, 2, true);
    c.init_std = 0.1f;
    qkv_gpt *m = qkv_gpt_new(&c, p, NULL, &rng);
    CHECK_NN(m);
    static const int shapes[][2] = {{1, 1}, {3, 3}, {5, 5}, {3, 1}, {130, 130}}; /* {rows made for, rows fed} */
    static const int64_t splits[][2] = {{1, 0}, {17, 0}, {9, 13}, {38, 0}};
    int64_t T = c.n_ctx - 1, V = c.vocab_size;
    for (size_t si = 0; m && si < sizeof shapes / sizeof shapes[0]; si++) {
        int cap = shapes[si][0], B = shapes[si][1];
        qkv_tensor *ids = ids_tensor(B, T, V, 40 + si);
        float *ref = malloc(sizeof(float) * (size_t)(T * B * V)), *got = malloc(sizeof(float) * (size_t)(T * B * V));
        for (size_t k = 0; ids && ref && got && k < sizeof splits / sizeof splits[0]; k++)
            for (int shrink = 0; shrink < 2; shrink++) {
                int64_t k1 = splits[k][0], k2 = splits[k][1];
                if (!gpt_feed(m, cap, B, qkv_i32(ids), T, k1, k2, false, shrink, ref) ||
                    !gpt_feed(m, cap, B, qkv_i32(ids), T, k1, k2, true, shrink, got))
                    continue;
                size_t n = (size_t)((T - k1 - k2) * (shrink ? 1 : B) * V);
                CHECKF(!memcmp(got, ref, sizeof(float) * n),
                       "%d of %d rows, prefill %lld + %lld%s: logits differ from the steps'", B, cap, (long long)k1,
                       (long long)k2, shrink ? ", then one row" : "");
            }
        free(ref);
        free(got);
        qkv_tensor_free(ids);
    }
    /* Errors change nothing: too many tokens for the context, a token out of range. */
    qkv_gpt_decoder *d = m ? qkv_gpt_decoder_new(m, 2) : NULL;
    int32_t tok[2 * 41] = {0};
    if (d) {
        CHECK_OK(qkv_gpt_decoder_prefill(d, tok, 30));
        CHECK(qkv_gpt_decoder_prefill(d, tok, 11) == QKV_ERR_RANGE && strstr(qkv_last_error(), "context"));
        tok[4] = 37;
        CHECK(qkv_gpt_decoder_prefill(d, tok, 3) == QKV_ERR_RANGE && strstr(qkv_last_error(), "outside"));
        CHECK(qkv_gpt_decoder_pos(d) == 30);
        CHECK_OK(qkv_gpt_decoder_prefill(d, tok, 0));
        CHECK(qkv_gpt_decoder_pos(d) == 30);
    }
    qkv_gpt_decoder_free(d);
    qkv_gpt_free(m);
    qkv_params_free(p);
}

TEST(rnnlm_stateful_decoding_equals_forward) {
    for (int k = 0; k < 2; k++) {
        qkv_params *p = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 9);
        qkv_rnnlm_config c = qkv_rnnlm_config_default();
        c.vocab_size = 29;
        c.d_model = 24;
        c.n_layers = 3;
        c.kind = k ? QKV_RNN_LSTM : QKV_RNN_GRU;
        qkv_rnnlm *m = qkv_rnnlm_new(&c, p, &rng);
        CHECK_NN(m);
        int B = 2;
        int64_t T = 20, V = c.vocab_size;
        qkv_tensor *ids = ids_tensor(B, T, V, 10);
        qkv_ctx *ctx = qkv_ctx_new();
        qkv_ctx_set_grad(ctx, false);
        qkv_tensor *full = qkv_contiguous(ctx, qkv_rnnlm_forward(ctx, m, ids));
        qkv_rnnlm_decoder *d = qkv_rnnlm_decoder_new(m, B);
        CHECK_NN(full);
        CHECK_NN(d);
        float lp[2 * 29];
        double worst = 0;
        for (int64_t t = 0; t < T && full && d; t++) {
            int32_t tok[2] = {qkv_i32(ids)[t], qkv_i32(ids)[T + t]};
            CHECK_OK(qkv_rnnlm_decoder_step(d, tok, lp));
            for (int b = 0; b < B; b++) worst = fmax(worst, max_diff(lp + b * V, qkv_f32(full) + (b * T + t) * V, V));
        }
        printf("  rnnlm %s: max |stepped - full| %.2e over %lld positions\n", k ? "lstm" : "gru", worst, (long long)T);
        CHECK(worst <= 1e-5);
        qkv_rnnlm_decoder_free(d);
        qkv_ctx_free(ctx);
        qkv_tensor_free(ids);
        qkv_rnnlm_free(m);
        qkv_params_free(p);
    }
}

/* Through the registry: create from JSON config, loss and forward through the table, and the generic decoder
 * (which feeds rnnlm its start id, so its logits follow ShiftRight(targets)). */
TEST(model_types_and_generic_decoder) {
    const char *names[] = {"gpt", "rnnlm"};
    for (int k = 0; k < 2; k++) {
        const qkv_model_type *type = qkv_model_type_find(names[k]);
        CHECK_NN(type);
        if (!type) continue;
        CHECK(!strcmp(type->task, "lm"));
        cJSON *def = cJSON_Parse(type->default_config);
        CHECK_NN(def);
        cJSON *cfg = cJSON_Parse(k == 0 ? "{\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, \"n_layers\": 2}"
                                        : "{\"d_model\": 16, \"n_layers\": 2, \"rnn\": \"lstm\"}");
        qkv_task_info info = {.vocab_size = 13, .max_len = 10};
        qkv_params *p = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 11);
        qkv_model *m = type->create(cfg, &info, p, &rng);
        CHECK_NN(m);
        qkv_tensor *ids = ids_tensor(1, 10, 13, 12), *tg = ids_tensor(1, 10, 13, 13);
        qkv_ctx *ctx = qkv_ctx_new();
        qkv_batch b = {.ids = ids, .targets = tg, .n_tokens = 10};
        qkv_tensor *loss = m ? type->loss(ctx, m, &b) : NULL;
        CHECK_NN(loss);
        if (loss) CHECKF(fabsf(qkv_f32(loss)[0] - logf(13.0f)) < 0.5f, "initial loss %g vs ln 13", qkv_f32(loss)[0]);
        qkv_tensor *logits = m ? qkv_contiguous(ctx, type->forward(ctx, m, &b, NULL)) : NULL;
        CHECK_NN(logits);
        qkv_lm_decoder *d = m ? qkv_lm_decoder_new(type, m) : NULL;
        CHECK_NN(d);
        if (d && logits) {
            CHECK(qkv_lm_decoder_primed(d) == (k == 1));
            /* The model's input at position t: ids[t] for gpt, targets[t - 1] (start id at 0) for rnnlm. */
            double worst = 0;
            for (int64_t t = 0; t < 10; t++) {
                if (k == 0) CHECK_OK(qkv_lm_decoder_step(d, qkv_i32(ids)[t]));
                else if (t > 0) CHECK_OK(qkv_lm_decoder_step(d, qkv_i32(tg)[t - 1]));
                worst = fmax(worst, max_diff(qkv_lm_decoder_logits(d), qkv_f32(logits) + t * 13, 13));
            }
            printf("  %s via registry: max |decoder - forward| %.2e\n", names[k], worst);
            CHECK(worst <= 1e-5);
        }
        /* A bad config names its key. */
        cJSON *bad = cJSON_Parse(k == 0 ? "{\"n_heads\": 5}" : "{\"rnn\": \"transformer\"}");
        qkv_params *p2 = qkv_params_new();
        CHECK(type->create(bad, &info, p2, &rng) == NULL);
        CHECKF(strstr(qkv_last_error(), k == 0 ? "n_heads" : "model.rnn") != NULL, "%s", qkv_last_error());
        qkv_params_free(p2);
        cJSON_Delete(bad);
        qkv_lm_decoder_free(d);
        qkv_ctx_free(ctx);
        qkv_tensor_free(ids);
        qkv_tensor_free(tg);
        if (m) type->free(m);
        qkv_params_free(p);
        cJSON_Delete(cfg);
        cJSON_Delete(def);
    }
}

TEST(gpt_bad_inputs) {
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    qkv_gpt_config c = small_gpt(5, 4, 6, 4, 8, 1, true);
    CHECK(qkv_gpt_new(&c, p, NULL, &rng) == NULL); /* 6 is not a multiple of 4 heads */
    CHECK(strstr(qkv_last_error(), "n_heads") != NULL);
    c.n_heads = 2;
    c.n_layers = 0;
    CHECK(qkv_gpt_new(&c, p, NULL, &rng) == NULL);
    CHECK(strstr(qkv_last_error(), "n_layers") != NULL);
    c.n_layers = 1;
    qkv_gpt *m = qkv_gpt_new(&c, p, NULL, &rng);
    CHECK_NN(m);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *long_ids = ids_tensor(1, 5, 5, 1);
    CHECK(qkv_gpt_forward(ctx, m, long_ids, NULL) == NULL);
    CHECK(strstr(qkv_last_error(), "n_ctx") != NULL);
    qkv_i32(long_ids)[0] = 7;
    qkv_tensor *bad = qkv_reshape(ctx, qkv_slice(ctx, long_ids, 1, 0, 4, 1), QKV_DIMS(1, 4));
    CHECK(qkv_gpt_forward(ctx, m, bad, NULL) == NULL); /* id 7 outside the vocabulary of 5 */
    CHECK(qkv_gpt_forward(ctx, m, NULL, NULL) == NULL);
    CHECK(qkv_gpt_decoder_new(m, 0) == NULL);
    qkv_tensor_free(long_ids);
    qkv_ctx_free(ctx);
    qkv_gpt_free(m);
    qkv_params_free(p);
}

TEST(attention_maps_are_causal) {
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 2);
    qkv_gpt_config c = small_gpt(7, 6, 8, 2, 8, 2, true);
    qkv_gpt *m = qkv_gpt_new(&c, p, NULL, &rng);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *ids = ids_tensor(1, 6, 7, 3);
    qkv_attention_maps maps;
    CHECK_NN(qkv_gpt_forward(ctx, m, ids, &maps));
    CHECK(maps.n_layers == 2);
    for (int l = 0; l < maps.n_layers; l++) {
        qkv_tensor *w = qkv_contiguous(ctx, maps.weights[l]);
        CHECK_NN(w);
        if (!w) continue;
        CHECK(!strcmp(maps.kind[l], "causal") && w->ndim == 4 && w->shape[1] == 2 && w->shape[3] == 6);
        for (int64_t h = 0; h < 2; h++)
            for (int64_t i = 0; i < 6; i++) {
                double row = 0;
                for (int64_t j = 0; j < 6; j++) {
                    float a = qkv_f32(w)[(h * 6 + i) * 6 + j];
                    if (j > i) CHECK(a == 0.0f);
                    row += a;
                }
                CHECK(fabs(row - 1.0) < 1e-5);
            }
    }
    qkv_tensor_free(ids);
    qkv_ctx_free(ctx);
    qkv_gpt_free(m);
    qkv_params_free(p);
}

int main(void) {
    RUN(gpt_matches_torch);
    RUN(rnnlm_matches_torch);
    RUN(gpt_gradcheck);
    RUN(rnnlm_gradcheck);
    RUN(gpt_cached_decoding_equals_forward);
    RUN(gpt_prefill_equals_steps);
    RUN(rnnlm_stateful_decoding_equals_forward);
    RUN(model_types_and_generic_decoder);
    RUN(gpt_bad_inputs);
    RUN(attention_maps_are_causal);
    return test_finish();
}
