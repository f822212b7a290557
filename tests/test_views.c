/* The attention maps the viewer pages show (`qkv generate --view`, `qkv translate --view`, `qkv attend --run`) are the
 * models' own: a GPT's captured maps equal attention recomputed from the plain ops, every map's rows are
 * distributions, nothing looks ahead in causal maps, padded source positions get no attention, and capturing the
 * maps leaves the model's outputs unchanged. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "qkv/gpt.h"
#include "qkv/ops.h"
#include "qkv/seq2seq.h"
#include "test.h"

/* Row sums of w [B, H, R, C] are 1, and, for causal maps, w[.., i, j > i] is exactly 0; padded key columns
 * (pad[b * C + j] != 0, pad may be NULL) exactly 0. */
static bool maps_ok(const qkv_tensor *w, bool causal, const float *pad, const char *what) {
    if (!w || w->ndim != 4 || !qkv_is_contiguous(w)) {
        test_fail_at(__FILE__, __LINE__, "%s: not a contiguous [B, H, R, C] map", what);
        return false;
    }
    int64_t B = w->shape[0], H = w->shape[1], R = w->shape[2], C = w->shape[3];
    const float *p = qkv_f32(w);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < R; i++) {
                const float *row = p + ((b * H + h) * R + i) * C;
                double sum = 0;
                for (int64_t j = 0; j < C; j++) {
                    sum += row[j];
                    bool must_be_zero = (causal && j > i) || (pad && pad[b * C + j] != 0.0f);
                    if (must_be_zero && row[j] != 0.0f) {
                        test_fail_at(__FILE__, __LINE__, "%s: w[%lld,%lld,%lld,%lld] = %g, want 0", what, (long long)b,
                                     (long long)h, (long long)i, (long long)j, row[j]);
                        return false;
                    }
                }
                if (fabs(sum - 1) > 1e-5) {
                    test_fail_at(__FILE__, __LINE__, "%s: row %lld of head %lld sums to %.7f", what, (long long)i,
                                 (long long)h, sum);
                    return false;
                }
            }
    return true;
}

static double max_diff(const qkv_tensor *a, const qkv_tensor *b) {
    if (!a || !b || qkv_numel(a) != qkv_numel(b)) return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < qkv_numel(a); i++) m = fmax(m, fabs((double)qkv_f32(a)[i] - qkv_f32(b)[i]));
    return m;
}

static qkv_tensor *ids_of(qkv_ctx *ctx, const int32_t *v, int64_t B, int64_t T) {
    qkv_tensor *t = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T));
    if (t) qkv_tensor_load(t, v, sizeof(int32_t) * (size_t)(B * T));
    return t;
}

TEST(gpt_maps_equal_plain_attention) {
    enum { B = 2, T = 6, V = 11, D = 8, NH = 2, L = 2 };
    qkv_gpt_config c = qkv_gpt_config_default();
    c.vocab_size = V, c.n_ctx = 8, c.d_model = D, c.n_heads = NH, c.d_ff = 16, c.n_layers = L;
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    qkv_gpt *m = qkv_gpt_new(&c, p, NULL, &rng);
    CHECKF(m != NULL, "gpt: %s", qkv_last_error());
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_grad(ctx, false);
    qkv_ctx_set_training(ctx, false);
    int32_t v[B * T] = {1, 4, 2, 9, 3, 3, 10, 0, 5, 5, 7, 2};
    qkv_tensor *ids = ids_of(ctx, v, B, T);
    qkv_attention_maps maps;
    memset(&maps, 0, sizeof maps);
    qkv_tensor *with = m ? qkv_contiguous(ctx, qkv_gpt_forward(ctx, m, ids, &maps)) : NULL;
    qkv_tensor *without = m ? qkv_contiguous(ctx, qkv_gpt_forward(ctx, m, ids, NULL)) : NULL;
    CHECKF(with && without, "gpt forward: %s", qkv_last_error());
    CHECKF(max_diff(with, without) < 1e-5, "capturing the maps changed the logits by %g", max_diff(with, without));
    CHECK(maps.n_layers == L);
    for (int l = 0; l < maps.n_layers; l++) {
        CHECK(maps.kind[l] && !strcmp(maps.kind[l], "causal"));
        qkv_tensor *w = qkv_contiguous(ctx, maps.weights[l]);
        CHECK(w && w->shape[0] == B && w->shape[1] == NH && w->shape[2] == T && w->shape[3] == T);
        maps_ok(w, true, NULL, l ? "gpt layer 2" : "gpt layer 1");
    }
    /* Layer 1 by hand: q, k from c_attn(ln_1(wte[ids] + wpe)), softmax(q k^T / sqrt(dh)) over keys j <= i. */
    if (m && maps.n_layers == L) {
        const qkv_gpt_block *b0 = &m->h[0];
        qkv_tensor *x = qkv_add(ctx, qkv_embedding(ctx, m->wte, ids), qkv_slice(ctx, m->wpe, 0, 0, T, 1));
        qkv_tensor *qkv = qkv_contiguous(
            ctx, qkv_linear(ctx, qkv_layer_norm(ctx, x, b0->ln1_w, b0->ln1_b, c.ln_eps), b0->attn_w, b0->attn_b));
        qkv_tensor *w = qkv_contiguous(ctx, maps.weights[0]);
        CHECKF(qkv && w, "%s", qkv_last_error());
        double worst = 0;
        int dh = D / NH;
        for (int b = 0; qkv && w && b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < T; i++) {
                    double s[T], mx = -INFINITY, z = 0;
                    const float *q = qkv_f32(qkv) + (b * T + i) * 3 * D + h * dh;
                    for (int j = 0; j <= i; j++) {
                        const float *k = qkv_f32(qkv) + (b * T + j) * 3 * D + D + h * dh;
                        s[j] = 0;
                        for (int e = 0; e < dh; e++) s[j] += (double)q[e] * k[e];
                        s[j] /= sqrt(dh);
                        mx = fmax(mx, s[j]);
                    }
                    for (int j = 0; j <= i; j++) z += exp(s[j] - mx);
                    for (int j = 0; j < T; j++) {
                        double want = j <= i ? exp(s[j] - mx) / z : 0;
                        worst = fmax(worst, fabs(want - qkv_f32(w)[((b * NH + h) * T + i) * T + j]));
                    }
                }
        CHECKF(worst < 1e-5, "layer 1 map differs from the plain-ops attention by %g", worst);
    }
    qkv_ctx_free(ctx);
    qkv_gpt_free(m);
    qkv_params_free(p);
}

/* A registered seq2seq model on a batch whose second source is padded. */
typedef struct s2s_case {
    const qkv_model_type *t;
    qkv_params *p;
    qkv_model *m;
    qkv_ctx *ctx;
    qkv_batch b;
} s2s_case;

enum { SB = 2, SS = 4, ST = 3 };
static const float src_mask[SB * SS] = {1, 1, 1, 1, 1, 1, 0, 0};
static const float src_pad[SB * SS] = {0, 0, 0, 0, 0, 0, 1, 1};

static bool s2s_open(s2s_case *c, const char *type, const char *json) {
    memset(c, 0, sizeof *c);
    c->t = qkv_model_type_find(type);
    cJSON *cfg = cJSON_Parse(json);
    qkv_task_info info = {.vocab_size = 11, .tgt_vocab_size = 13, .pad_id = 0, .max_len = 16};
    qkv_rng rng;
    qkv_rng_init(&rng, 9);
    c->p = qkv_params_new();
    c->m = c->t && cfg ? c->t->create(cfg, &info, c->p, &rng) : NULL;
    cJSON_Delete(cfg);
    CHECKF(c->m != NULL, "%s: %s", type, qkv_last_error());
    if (!c->m) return false;
    c->ctx = qkv_ctx_new();
    qkv_ctx_set_grad(c->ctx, false);
    qkv_ctx_set_training(c->ctx, false);
    int32_t src[SB * SS] = {3, 4, 5, 6, 7, 8, 0, 0}, ids[SB * ST] = {1, 5, 6, 1, 7, 9};
    c->b = (qkv_batch){.src_ids = ids_of(c->ctx, src, SB, SS), .ids = ids_of(c->ctx, ids, SB, ST),
                       .src_mask = qkv_ctx_tensor(c->ctx, QKV_F32, QKV_DIMS(SB, SS))};
    qkv_tensor_load(c->b.src_mask, src_mask, sizeof src_mask);
    return true;
}

static void s2s_close(s2s_case *c) {
    qkv_ctx_free(c->ctx);
    if (c->m) c->t->free(c->m);
    qkv_params_free(c->p);
}

TEST(transformer_seq2seq_maps) {
    s2s_case c;
    if (!s2s_open(&c, "transformer_seq2seq", "{\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_enc_layers\": 1, "
                                             "\"n_dec_layers\": 2, \"dropout\": 0.0}"))
        return;
    qkv_attention_maps maps;
    memset(&maps, 0, sizeof maps);
    qkv_tensor *with = qkv_contiguous(c.ctx, c.t->forward(c.ctx, c.m, &c.b, &maps));
    qkv_tensor *without = qkv_contiguous(c.ctx, c.t->forward(c.ctx, c.m, &c.b, NULL));
    CHECKF(with && without, "forward: %s", qkv_last_error());
    CHECKF(max_diff(with, without) < 1e-6, "capturing the maps changed the logits by %g", max_diff(with, without));
    /* Cross maps first (one per decoder layer), then the encoder's, then the decoder's self-attention. */
    const char *kinds[] = {"cross", "cross", "self", "causal", "causal"};
    int64_t rows[] = {ST, ST, SS, ST, ST}, cols[] = {SS, SS, SS, ST, ST};
    CHECKF(maps.n_layers == 5, "%d maps, want 5", maps.n_layers);
    for (int k = 0; k < maps.n_layers && k < 5; k++) {
        CHECKF(maps.kind[k] && !strcmp(maps.kind[k], kinds[k]), "map %d is '%s', want '%s'", k,
               maps.kind[k] ? maps.kind[k] : "(null)", kinds[k]);
        qkv_tensor *w = qkv_contiguous(c.ctx, maps.weights[k]);
        CHECKF(w && w->shape[0] == SB && w->shape[1] == 2 && w->shape[2] == rows[k] && w->shape[3] == cols[k],
               "map %d has the wrong shape", k);
        char what[32];
        snprintf(what, sizeof what, "map %d (%s)", k, kinds[k]);
        if (w) maps_ok(w, !strcmp(kinds[k], "causal"), cols[k] == SS ? src_pad : NULL, what);
    }
    /* The model type's cross maps are those of the model's own forward (the one decoding uses). */
    const qkv_tf_s2s *tf = (const qkv_tf_s2s *)c.m;
    qkv_tensor *pad = qkv_ctx_tensor(c.ctx, QKV_F32, QKV_DIMS(SB, SS));
    qkv_tensor_load(pad, src_pad, sizeof src_pad);
    qkv_tensor *cross[2] = {0};
    CHECK(qkv_tf_s2s_forward(c.ctx, tf, c.b.src_ids, pad, c.b.ids, cross) != NULL);
    /* Equal up to rounding: with the self-attention maps requested, those layers take the materialising path. */
    for (int l = 0; l < 2 && maps.n_layers == 5; l++) {
        double diff = max_diff(qkv_contiguous(c.ctx, cross[l]), qkv_contiguous(c.ctx, maps.weights[l]));
        CHECKF(diff < 1e-6, "cross map %d differs from the model's own forward by %g", l, diff);
    }
    s2s_close(&c);
}

TEST(transformer_seq2seq_many_layers_keeps_all_maps) {
    s2s_case c; /* 12 + 12 + 12 maps: more than the 32 slots of old, all kept in order */
    if (!s2s_open(&c, "transformer_seq2seq", "{\"d_model\": 4, \"n_heads\": 1, \"d_ff\": 4, \"n_enc_layers\": 12, "
                                             "\"n_dec_layers\": 12, \"dropout\": 0.0}"))
        return;
    qkv_attention_maps maps;
    memset(&maps, 0, sizeof maps);
    CHECKF(c.t->forward(c.ctx, c.m, &c.b, &maps) != NULL, "forward: %s", qkv_last_error());
    CHECKF(maps.n_layers == 36, "%d maps, want 36", maps.n_layers);
    for (int k = 0; k < maps.n_layers && k < 36; k++) {
        const char *want = k < 12 ? "cross" : k < 24 ? "self" : "causal";
        CHECKF(maps.kind[k] && !strcmp(maps.kind[k], want) && maps.weights[k], "map %d is not a %s map", k, want);
    }
    s2s_close(&c);
}

TEST(lstm_seq2seq_alignment) {
    s2s_case c;
    if (!s2s_open(&c, "lstm_seq2seq", "{\"embed\": 6, \"hidden\": 6, \"attention\": \"general\"}")) return;
    qkv_attention_maps maps;
    memset(&maps, 0, sizeof maps);
    CHECKF(c.t->forward(c.ctx, c.m, &c.b, &maps) != NULL, "forward: %s", qkv_last_error());
    CHECK(maps.n_layers == 1 && maps.kind[0] && !strcmp(maps.kind[0], "cross"));
    qkv_tensor *w = maps.n_layers ? qkv_contiguous(c.ctx, maps.weights[0]) : NULL;
    CHECK(w && w->shape[0] == SB && w->shape[1] == 1 && w->shape[2] == ST && w->shape[3] == SS);
    if (w) maps_ok(w, false, src_pad, "lstm attention");
    s2s_close(&c);
}

int main(void) {
    RUN(gpt_maps_equal_plain_attention);
    RUN(transformer_seq2seq_maps);
    RUN(transformer_seq2seq_many_layers_keeps_all_maps);
    RUN(lstm_seq2seq_alignment);
    return test_finish();
}
