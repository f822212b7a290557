/* Translation models: PyTorch fixtures (tests/ref/seq2seq.py: logits and every parameter gradient on padded
 * sources), incremental decoding against the teacher-forced forward, the registered model types (config errors,
 * masked loss), and a learning test on a slice of ../shared/data/translation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "qkv/model.h"
#include "qkv/optim.h"
#include "qkv/seq2seq.h"
#include "test_nn_common.h"

static qkv_tensor *f_lstm(qkv_ctx *c, qkv_tensor **in, void *u) {
    return qkv_lstm_s2s_forward(c, u, in[0], in[1], in[2], NULL);
}

static qkv_tensor *f_tf(qkv_ctx *c, qkv_tensor **in, void *u) { return qkv_tf_s2s_forward(c, u, in[0], in[1], in[2], NULL); }

static qkv_lstm_s2s_config lstm_cfg(int layers, qkv_score_kind kind, bool feed) {
    return (qkv_lstm_s2s_config){.src_vocab = 11, .tgt_vocab = 13, .embed = 6, .hidden = 5, .num_layers = layers,
                                 .attention = kind, .input_feeding = feed};
}

static qkv_tf_s2s_config tf_cfg(bool pre, qkv_activation act, int enc, int dec) {
    qkv_tf_s2s_config c = {.src_vocab = 11, .tgt_vocab = 13, .block = qkv_nn_block_config_default(8, 2),
                           .n_enc_layers = enc, .n_dec_layers = dec, .max_len = 16};
    c.block.dim_feedforward = 16;
    c.block.dropout = 0.0f;
    c.block.norm_first = pre;
    c.block.activation = act;
    return c;
}

TEST(lstm_matches_torch) {
    qkv_st_file *f = nn_open_fixture("seq2seq.safetensors");
    if (!f) return;
    struct {
        const char *key;
        int layers;
        qkv_score_kind kind;
        bool feed;
    } cases[] = {{"lstm_dot", 1, QKV_SCORE_DOT, false},
                 {"lstm_general_feed", 2, QKV_SCORE_GENERAL, true},
                 {"lstm_additive", 1, QKV_SCORE_ADDITIVE, false},
                 {"lstm_dot_feed", 1, QKV_SCORE_DOT, true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qkv_rng rng;
        qkv_rng_init(&rng, 1);
        qkv_params *p = qkv_params_new();
        qkv_lstm_s2s m;
        qkv_lstm_s2s_config c = lstm_cfg(cases[i].layers, cases[i].kind, cases[i].feed);
        CHECK_OK(qkv_lstm_s2s_init(&m, p, &c, &rng));
        CHECKF(nn_fixture_check(f, cases[i].key, p, f_lstm, &m, 1e-4, 1e-5), "%s", cases[i].key);
        qkv_params_free(p);
    }
    qkv_st_close(f);
}

TEST(transformer_matches_torch) {
    qkv_st_file *f = nn_open_fixture("seq2seq.safetensors");
    if (!f) return;
    struct {
        const char *key;
        bool pre;
        qkv_activation act;
        int enc, dec;
    } cases[] = {{"tf_post", false, QKV_ACT_RELU, 2, 2}, {"tf_pre", true, QKV_ACT_GELU, 1, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qkv_rng rng;
        qkv_rng_init(&rng, 1);
        qkv_params *p = qkv_params_new();
        qkv_tf_s2s m;
        qkv_tf_s2s_config c = tf_cfg(cases[i].pre, cases[i].act, cases[i].enc, cases[i].dec);
        CHECK_OK(qkv_tf_s2s_init(&m, p, &c, &rng));
        CHECKF(nn_fixture_check(f, cases[i].key, p, f_tf, &m, 1e-4, 1e-5), "%s", cases[i].key);
        qkv_params_free(p);
    }
    qkv_st_close(f);
}

/* Feeds the teacher-forced target one token at a time through the decoder (2 rows per source, with a reorder
 * halfway that rotates the rows across sources, so every piece of state must move) and compares every step's log-probabilities and attention with the
 * full forward's. attn_full: [B, T, S] (LSTM) or NULL to skip the attention check. */
static void check_incremental(const qkv_decoder *d, qkv_tensor *logits, qkv_tensor *attn_full,
                              const int32_t *src, const int32_t *lengths, const int32_t *tgt, int B, int S, int T) {
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *lp = qkv_contiguous(ctx, qkv_log_softmax(ctx, logits, -1));
    int64_t V = d->info.vocab;
    int R = 2 * B;
    qkv_decoder_state *st = d->ops->start(d->model, src, lengths, B, S, 2, T);
    CHECKF(st != NULL, "start: %s", qkv_last_error());
    if (!st || !lp) {
        qkv_ctx_free(ctx);
        return;
    }
    float *out = malloc(sizeof(float) * (size_t)(R * V)), *att = malloc(sizeof(float) * (size_t)(R * S));
    int32_t tok[16], from[16], of[16], moved[16]; /* of[r]: the source row r now belongs to */
    for (int r = 0; r < R; r++) of[r] = r / 2;
    double worst = 0, worst_a = 0;
    for (int t = 0; t < T; t++) {
        for (int r = 0; r < R; r++) tok[r] = tgt[of[r] * T + t];
        CHECK_OK(d->ops->step(st, tok, out, att));
        for (int r = 0; r < R; r++) {
            for (int64_t v = 0; v < V; v++) {
                double e = fabs(out[r * V + v] - qkv_f32(lp)[((int64_t)of[r] * T + t) * V + v]);
                if (e > worst) worst = e;
            }
            for (int s = 0; attn_full && s < S; s++) {
                double e = fabs(att[r * S + s] - qkv_f32(attn_full)[((int64_t)of[r] * T + t) * S + s]);
                if (e > worst_a) worst_a = e;
            }
        }
        if (t == T / 2) {
            for (int r = 0; r < R; r++) from[r] = (r + 3) % R;
            for (int r = 0; r < R; r++) moved[r] = of[from[r]];
            memcpy(of, moved, sizeof of);
            CHECK_OK(d->ops->reorder(st, from, R));
        }
    }
    printf("  incremental decoding: max |logprob diff| %.3g, max |attention diff| %.3g\n", worst, worst_a);
    CHECK(worst < 2e-5);
    CHECK(worst_a < 2e-5);
    d->ops->free(st);
    free(out);
    free(att);
    qkv_ctx_free(ctx);
}

TEST(incremental_decoding_matches_forward) {
    enum { B = 2, S = 5, T = 6 };
    const int32_t src[B * S] = {3, 4, 5, 6, 7, 8, 9, 10, 0, 0}, lengths[B] = {5, 3};
    const int32_t tgt[B * T] = {1, 5, 6, 7, 8, 9, 1, 10, 11, 12, 3, 4};
    qkv_tensor *src_t = qkv_tensor_new(QKV_I32, QKV_DIMS(B, S)), *tgt_t = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    qkv_tensor *pad = qkv_tensor_new(QKV_F32, QKV_DIMS(B, S));
    qkv_tensor_load(src_t, src, sizeof src);
    qkv_tensor_load(tgt_t, tgt, sizeof tgt);
    qkv_f32(pad)[8] = qkv_f32(pad)[9] = 1.0f;
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    for (int feed = 0; feed < 2; feed++) {
        qkv_params *p = qkv_params_new();
        qkv_lstm_s2s m;
        qkv_lstm_s2s_config c = lstm_cfg(2, feed ? QKV_SCORE_ADDITIVE : QKV_SCORE_GENERAL, feed);
        CHECK_OK(qkv_lstm_s2s_init(&m, p, &c, &rng));
        qkv_ctx *ctx = qkv_ctx_new();
        qkv_tensor *attn = NULL;
        qkv_tensor *logits = qkv_lstm_s2s_forward(ctx, &m, src_t, pad, tgt_t, &attn);
        CHECK_NN(logits);
        qkv_decoder d = qkv_lstm_s2s_decoder(&m);
        if (logits) check_incremental(&d, logits, qkv_contiguous(ctx, attn), src, lengths, tgt, B, S, T);
        qkv_ctx_free(ctx);
        qkv_params_free(p);
    }
    for (int pre = 0; pre < 2; pre++) {
        qkv_params *p = qkv_params_new();
        qkv_tf_s2s m;
        qkv_tf_s2s_config c = tf_cfg(pre, QKV_ACT_RELU, 2, 2);
        CHECK_OK(qkv_tf_s2s_init(&m, p, &c, &rng));
        qkv_ctx *ctx = qkv_ctx_new();
        qkv_tensor *cross[2] = {0};
        qkv_tensor *logits = qkv_tf_s2s_forward(ctx, &m, src_t, pad, tgt_t, cross);
        CHECK_NN(logits);
        qkv_tensor *avg = logits ? qkv_contiguous(ctx, qkv_mean(ctx, cross[1], 1, false)) : NULL; /* [B, T, S] */
        qkv_decoder d = qkv_tf_s2s_decoder(&m);
        if (logits) check_incremental(&d, logits, avg, src, lengths, tgt, B, S, T);
        qkv_ctx_free(ctx);
        qkv_params_free(p);
    }
    qkv_tensor_free(src_t);
    qkv_tensor_free(tgt_t);
    qkv_tensor_free(pad);
}

/* A registered model built from a config, its masked loss equals the mean over counted tokens. */
static void check_model_type(const char *name, const char *json) {
    const qkv_model_type *t = qkv_model_type_find(name);
    CHECKF(t != NULL, "%s: %s", name, qkv_last_error());
    if (!t) return;
    CHECK(!strcmp(t->task, "seq2seq"));
    cJSON *def = cJSON_Parse(t->default_config);
    CHECKF(def != NULL, "%s: default_config is not JSON", name);
    cJSON_Delete(def);
    cJSON *cfg = cJSON_Parse(json);
    qkv_task_info info = {.vocab_size = 11, .tgt_vocab_size = 13, .pad_id = 0, .max_len = 16};
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 3);
    qkv_model *m = t->create(cfg, &info, p, &rng);
    CHECKF(m != NULL, "%s create: %s", name, qkv_last_error());
    if (m) {
        enum { B = 2, S = 4, T = 3 };
        int32_t src[B * S] = {3, 4, 5, 6, 7, 8, 0, 0}, ids[B * T] = {1, 5, 6, 1, 7, 0}, tg[B * T] = {5, 6, 2, 7, 2, 0};
        float sm[B * S] = {1, 1, 1, 1, 1, 1, 0, 0}, tm[B * T] = {1, 1, 1, 1, 1, 0};
        qkv_ctx *ctx = qkv_ctx_new();
        qkv_batch b = {.src_ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, S)),
                       .src_mask = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(B, S)),
                       .ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T)),
                       .targets = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T)),
                       .mask = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(B, T)), .n_tokens = 5};
        qkv_tensor_load(b.src_ids, src, sizeof src);
        qkv_tensor_load(b.src_mask, sm, sizeof sm);
        qkv_tensor_load(b.ids, ids, sizeof ids);
        qkv_tensor_load(b.targets, tg, sizeof tg);
        qkv_tensor_load(b.mask, tm, sizeof tm);
        qkv_ctx_set_training(ctx, false);
        qkv_tensor *loss = t->loss(ctx, m, &b);
        qkv_attention_maps maps = {0};
        qkv_tensor *lp = qkv_log_softmax(ctx, t->forward(ctx, m, &b, &maps), -1);
        CHECKF(loss && lp, "%s loss/forward: %s", name, qkv_last_error());
        CHECK(maps.n_layers >= 1 && maps.weights[0] && maps.weights[0]->ndim == 4);
        if (loss && lp) {
            double want = 0;
            for (int i = 0; i < B * T; i++)
                if (tm[i] != 0) want -= qkv_f32(lp)[i * 13 + tg[i]];
            want /= 5;
            CHECKF(fabs(qkv_f32(loss)[0] - want) < 1e-5, "%s masked loss %g, want %g", name, qkv_f32(loss)[0], want);
            CHECK_OK(qkv_backward(ctx, loss));
        }
        qkv_decoder d;
        CHECK(qkv_model_decoder(t, m, &d) == QKV_OK && d.info.vocab == 13 && d.info.needs_source);
        qkv_ctx_free(ctx);
        t->free(m);
    }
    cJSON_Delete(cfg);
    qkv_params_free(p);
}

TEST(model_types) {
    check_model_type("lstm_seq2seq", "{\"embed\": 8, \"hidden\": 6, \"n_layers\": 2, \"attention\": \"additive\", "
                                     "\"input_feeding\": true}");
    check_model_type("transformer_seq2seq", "{\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_enc_layers\": 1, "
                                            "\"n_dec_layers\": 2, \"dropout\": 0.0, \"norm\": \"pre\"}");
}

TEST(bad_configs_are_errors) {
    struct {
        const char *type, *json, *needle;
    } bad[] = {{"lstm_seq2seq", "{\"attention\": \"cosine\"}", "attention"},
               {"lstm_seq2seq", "{\"hidden\": -3}", "hidden"},
               {"lstm_seq2seq", "{\"input_feeding\": 1}", "input_feeding"},
               {"transformer_seq2seq", "{\"d_model\": 10, \"n_heads\": 4}", "divisible"},
               {"transformer_seq2seq", "{\"norm\": \"middle\"}", "norm"},
               {"transformer_seq2seq", "{\"dropout\": 1.5}", "dropout"},
               {"transformer_seq2seq", "{\"activation\": \"swish\"}", "activation"}};
    qkv_task_info info = {.vocab_size = 11};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const qkv_model_type *t = qkv_model_type_find(bad[i].type);
        if (!t) {
            CHECKF(false, "%s not registered", bad[i].type);
            continue;
        }
        cJSON *cfg = cJSON_Parse(bad[i].json);
        qkv_params *p = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 3);
        qkv_model *m = t->create(cfg, &info, p, &rng);
        CHECKF(m == NULL && strstr(qkv_last_error(), bad[i].needle), "%s %s: %s", bad[i].type, bad[i].json,
               m ? "accepted" : qkv_last_error());
        if (m) t->free(m);
        qkv_params_free(p);
        cJSON_Delete(cfg);
    }
    /* bad inputs to the forwards */
    qkv_rng rng;
    qkv_rng_init(&rng, 3);
    qkv_params *p = qkv_params_new();
    qkv_lstm_s2s m;
    qkv_lstm_s2s_config c = lstm_cfg(1, QKV_SCORE_DOT, false);
    CHECK_OK(qkv_lstm_s2s_init(&m, p, &c, &rng));
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *src = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(2, 3)), *tgt = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(3, 3));
    CHECK(qkv_lstm_s2s_forward(ctx, &m, src, NULL, tgt, NULL) == NULL && strstr(qkv_last_error(), "batch"));
    qkv_tensor *pad = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(2, 3));
    qkv_f32(pad)[0] = 1.0f; /* left padding */
    tgt = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(2, 3));
    CHECK(qkv_lstm_s2s_forward(ctx, &m, src, pad, tgt, NULL) == NULL && strstr(qkv_last_error(), "right-padded"));
    qkv_i32(src)[1] = 11; /* out of the source vocabulary */
    CHECK(qkv_lstm_s2s_forward(ctx, &m, src, NULL, tgt, NULL) == NULL);
    qkv_decoder d = qkv_lstm_s2s_decoder(&m);
    int32_t s2[3] = {3, 99, 4};
    CHECK(d.ops->start(d.model, s2, NULL, 1, 3, 1, 4) == NULL && strstr(qkv_last_error(), "99"));
    qkv_ctx_free(ctx);
    qkv_params_free(p);
}

/* ---- learning on real data: bytes of the first verses, a few dozen Adam steps ---- */

enum { LB = 32, LS = 24, LT = 24 };

static bool load_pairs(int32_t *src, float *smask, int32_t *in, int32_t *out, float *tmask) {
    const char *path = test_shared_path("data/translation/train.tsv");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return false;
    char line[4096];
    for (int b = 0; b < LB && fgets(line, sizeof line, f); b++) {
        char *tab = strchr(line, '\t');
        if (!tab) {
            fclose(f);
            return false;
        }
        *tab = '\0';
        const unsigned char *e = (const unsigned char *)line, *s = (const unsigned char *)tab + 1;
        for (int t = 0; t < LS; t++) {
            bool tok = e[t] && e[t] != '\n';
            src[b * LS + t] = tok ? e[t] + 3 : 0;
            smask[b * LS + t] = tok;
            if (!tok) e = (const unsigned char *)"";
        }
        /* target: BOS y_0 .. y_{T-2} -> y_0 .. y_{T-1} (bytes; 1 = BOS, 0 = pad) */
        int n = 0;
        while (n < LT && s[n] && s[n] != '\n') n++;
        for (int t = 0; t < LT; t++) {
            in[b * LT + t] = t == 0 ? 1 : (t - 1 < n ? s[t - 1] + 3 : 0);
            out[b * LT + t] = t < n ? s[t] + 3 : 0;
            tmask[b * LT + t] = t < n;
        }
    }
    fclose(f);
    return true;
}

static void learn(const char *type, const char *json) {
    static int32_t src[LB * LS], in[LB * LT], out[LB * LT];
    static float sm[LB * LS], tm[LB * LT];
    if (!load_pairs(src, sm, in, out, tm)) {
        test_skip("QKV_SHARED/data/translation/train.tsv not available");
        return;
    }
    const qkv_model_type *t = qkv_model_type_find(type);
    CHECK(t != NULL);
    if (!t) return;
    cJSON *cfg = cJSON_Parse(json);
    qkv_task_info info = {.vocab_size = 259, .max_len = 32};
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 9);
    qkv_model *m = t->create(cfg, &info, p, &rng);
    cJSON_Delete(cfg);
    CHECKF(m != NULL, "%s: %s", type, qkv_last_error());
    qkv_optim_config oc = qkv_optim_defaults(QKV_ADAM);
    oc.lr = 3e-3f;
    qkv_optim *opt = qkv_optim_new(p, &oc);
    qkv_ctx *ctx = qkv_ctx_new();
    float first = 0, last = 0;
    for (int step = 0; m && step < 40; step++) {
        qkv_ctx_reset(ctx);
        qkv_optim_zero_grad(opt);
        qkv_batch b = {.src_ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(LB, LS)),
                       .src_mask = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(LB, LS)),
                       .ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(LB, LT)),
                       .targets = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(LB, LT)),
                       .mask = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(LB, LT))};
        qkv_tensor_load(b.src_ids, src, sizeof src);
        qkv_tensor_load(b.src_mask, sm, sizeof sm);
        qkv_tensor_load(b.ids, in, sizeof in);
        qkv_tensor_load(b.targets, out, sizeof out);
        qkv_tensor_load(b.mask, tm, sizeof tm);
        qkv_tensor *loss = t->loss(ctx, m, &b);
        if (!loss || qkv_backward(ctx, loss) != QKV_OK || qkv_optim_step(opt) != QKV_OK) {
            CHECKF(false, "%s step %d: %s", type, step, qkv_last_error());
            break;
        }
        if (step == 0) first = qkv_f32(loss)[0];
        last = qkv_f32(loss)[0];
    }
    printf("  %s: loss %.3f -> %.3f after 40 steps\n", type, first, last);
    CHECKF(last < 0.6f * first, "%s: loss did not fall (%.3f -> %.3f)", type, first, last);
    qkv_ctx_free(ctx);
    qkv_optim_free(opt);
    if (m) t->free(m);
    qkv_params_free(p);
}

TEST(lstm_learns_translation_slice) {
    learn("lstm_seq2seq", "{\"embed\": 32, \"hidden\": 64, \"attention\": \"general\", \"input_feeding\": true}");
}

TEST(transformer_learns_translation_slice) {
    learn("transformer_seq2seq", "{\"d_model\": 32, \"n_heads\": 2, \"d_ff\": 64, \"n_enc_layers\": 1, "
                                 "\"n_dec_layers\": 1, \"dropout\": 0.0, \"max_len\": 32}");
}

int main(void) {
    RUN(lstm_matches_torch);
    RUN(transformer_matches_torch);
    RUN(incremental_decoding_matches_forward);
    RUN(model_types);
    RUN(bad_configs_are_errors);
    RUN(lstm_learns_translation_slice);
    RUN(transformer_learns_translation_slice);
    return test_finish();
}
