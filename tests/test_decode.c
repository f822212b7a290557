/* Token choice and generation: greedy, temperature, top-k and top-p keep exactly the right sets, the repetition
 * penalty, seeded reproducibility and the sampled distribution; the generation loop's stop tokens, max tokens,
 * streaming callback and context limit, and KV-cached greedy generation equal to argmax over full forwards. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode_internal.h"
#include "ops/log_softmax_rows.h"
#include "qkv/decode.h"
#include "qkv/gpt.h"
#include "test.h"

/* The set of kept (finite) entries as a bit mask over at most 32 tokens. */
static unsigned kept_set(const float *x, int n) {
    unsigned m = 0;
    for (int i = 0; i < n; i++)
        if (x[i] != -INFINITY) m |= 1u << i;
    return m;
}

static qkv_sample_opts opts(float temperature, int64_t top_k, float top_p, float penalty) {
    qkv_sample_opts o = qkv_sample_defaults();
    o.temperature = temperature;
    o.top_k = top_k;
    o.top_p = top_p;
    o.repetition_penalty = penalty;
    return o;
}

/* Runs the filter on a copy of logits and returns the kept set. */
static unsigned filter(const float *logits, int n, qkv_sample_opts o, const int32_t *hist, int nh, float *out) {
    float buf[32];
    memcpy(buf, logits, sizeof(float) * (size_t)n);
    qkv_sampler *s = qkv_sampler_new(n, &o, 1);
    CHECK_NN(s);
    if (!s) return 0;
    int64_t k = qkv_sampler_filter(s, buf, hist, nh);
    qkv_sampler_free(s);
    unsigned m = kept_set(buf, n);
    CHECK(k == __builtin_popcount(m));
    if (out) memcpy(out, buf, sizeof(float) * (size_t)n);
    return m;
}

TEST(greedy_and_temperature) {
    const float l[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
    CHECK(qkv_argmax(l, 6) == 1); /* the lower id among equal maxima */
    CHECK(filter(l, 6, opts(0, 0, 1, 1), NULL, 0, NULL) == 1u << 1);
    float out[6];
    CHECK(filter(l, 6, opts(2.0f, 0, 1, 1), NULL, 0, out) == 0x3f);
    for (int i = 0; i < 6; i++) CHECK(out[i] == l[i] / 2.0f);
}

TEST(top_k_keeps_exactly_k) {
    const float l[8] = {0.1f, 3.0f, -2.0f, 2.5f, 3.0f, 0.7f, -INFINITY, 2.9f};
    CHECK(filter(l, 8, opts(1, 1, 1, 1), NULL, 0, NULL) == (1u << 1));                        /* tie: lower id */
    CHECK(filter(l, 8, opts(1, 2, 1, 1), NULL, 0, NULL) == ((1u << 1) | (1u << 4)));
    CHECK(filter(l, 8, opts(1, 3, 1, 1), NULL, 0, NULL) == ((1u << 1) | (1u << 4) | (1u << 7)));
    CHECK(filter(l, 8, opts(1, 4, 1, 1), NULL, 0, NULL) == ((1u << 1) | (1u << 3) | (1u << 4) | (1u << 7)));
    /* k beyond the number of finite logits keeps them all; a masked (-inf) logit never comes back. */
    CHECK(filter(l, 8, opts(1, 20, 1, 1), NULL, 0, NULL) == (0xffu & ~(1u << 6)));
    /* The same sets at another temperature: k ranks logits, the temperature does not change the order. */
    CHECK(filter(l, 8, opts(0.3f, 3, 1, 1), NULL, 0, NULL) == ((1u << 1) | (1u << 4) | (1u << 7)));
}

TEST(top_p_keeps_the_smallest_sufficient_prefix) {
    /* Probabilities 0.05, 0.5, 0.15, 0.2, 0.1 (shuffled): sorted 0.5 (1), 0.2 (3), 0.15 (2), 0.1 (4), 0.05 (0). */
    const float p[5] = {0.05f, 0.5f, 0.15f, 0.2f, 0.1f};
    float l[5];
    for (int i = 0; i < 5; i++) l[i] = logf(p[i]) + 3.0f; /* any shift: softmax is invariant */
    CHECK(filter(l, 5, opts(1, 0, 0.4f, 1), NULL, 0, NULL) == (1u << 1));
    CHECK(filter(l, 5, opts(1, 0, 0.5f, 1), NULL, 0, NULL) == (1u << 1) ||
          filter(l, 5, opts(1, 0, 0.5f, 1), NULL, 0, NULL) == ((1u << 1) | (1u << 3))); /* 0.5 vs 0.5 rounding */
    CHECK(filter(l, 5, opts(1, 0, 0.6f, 1), NULL, 0, NULL) == ((1u << 1) | (1u << 3)));
    CHECK(filter(l, 5, opts(1, 0, 0.8f, 1), NULL, 0, NULL) == ((1u << 1) | (1u << 3) | (1u << 2)));
    CHECK(filter(l, 5, opts(1, 0, 0.9f, 1), NULL, 0, NULL) == ((1u << 1) | (1u << 3) | (1u << 2) | (1u << 4)));
    CHECK(filter(l, 5, opts(1, 0, 0.99f, 1), NULL, 0, NULL) == 0x1f);
    CHECK(filter(l, 5, opts(1, 0, 1e-6f, 1), NULL, 0, NULL) == (1u << 1)); /* at least one */
    /* top-p runs on what top-k left, renormalised: of {0.5, 0.2} (k = 2), 0.5 / 0.7 = 0.71 < 0.75 needs both. */
    CHECK(filter(l, 5, opts(1, 2, 0.75f, 1), NULL, 0, NULL) == ((1u << 1) | (1u << 3)));
    CHECK(filter(l, 5, opts(1, 2, 0.7f, 1), NULL, 0, NULL) == (1u << 1));
    /* Temperature first: at T = 0.25 the top token has 0.5^4 / sum(p^4) = 0.96 of the mass. */
    CHECK(filter(l, 5, opts(0.25f, 0, 0.9f, 1), NULL, 0, NULL) == (1u << 1));
}

TEST(repetition_penalty) {
    const float l[4] = {2.0f, -1.0f, 0.5f, 1.0f};
    const int32_t hist[5] = {0, 1, 0, 99, -3}; /* repeats count once; ids outside the vocabulary are ignored */
    float out[4];
    CHECK(filter(l, 4, opts(1, 0, 1, 2.0f), hist, 5, out) == 0xf);
    CHECK(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0.5f && out[3] == 1.0f);
    /* Greedy after the penalty: token 0 (2.0 -> 1.0) ties with token 3 (1.0): the lower id wins. */
    CHECK(filter(l, 4, opts(0, 0, 1, 2.0f), hist, 5, NULL) == 1u);
    CHECK(filter(l, 4, opts(0, 0, 1, 2.5f), hist, 5, NULL) == 1u << 3);
}

TEST(seed_reproduces_and_distribution_matches) {
    const float p[3] = {0.5f, 0.3f, 0.2f};
    qkv_sample_opts o = opts(1, 0, 1, 1);
    qkv_sampler *a = qkv_sampler_new(3, &o, 42), *b = qkv_sampler_new(3, &o, 42), *c = qkv_sampler_new(3, &o, 43);
    int counts[3] = {0}, same = 0, differ = 0;
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        float la[3], lb[3], lc[3];
        for (int j = 0; j < 3; j++) la[j] = lb[j] = lc[j] = logf(p[j]);
        int32_t ta = qkv_sampler_next(a, la, NULL, 0), tb = qkv_sampler_next(b, lb, NULL, 0);
        int32_t tc = qkv_sampler_next(c, lc, NULL, 0);
        same += ta == tb;
        differ += ta != tc;
        CHECK(ta >= 0 && ta < 3);
        if (ta >= 0 && ta < 3) counts[ta]++;
    }
    CHECK(same == n);
    CHECK(differ > n / 4); /* another seed gives another sequence */
    for (int j = 0; j < 3; j++) {
        double f = (double)counts[j] / n;
        printf("  token %d: frequency %.4f (p %.2f)\n", j, f, p[j]);
        CHECK(fabs(f - p[j]) < 0.015); /* 5 standard deviations */
    }
    /* With top-k 1 sampling is greedy whatever the draw. */
    qkv_sample_opts o1 = opts(1, 1, 1, 1);
    qkv_sampler *g = qkv_sampler_new(3, &o1, 7);
    for (int i = 0; i < 100; i++) {
        float l[3] = {0.1f, 0.2f, 0.15f};
        CHECK(qkv_sampler_next(g, l, NULL, 0) == 1);
    }
    qkv_sampler_free(g);
    qkv_sampler_free(a);
    qkv_sampler_free(b);
    qkv_sampler_free(c);
}

/* The plain scan greedy picking must agree with: the first allowed token with the highest score. */
static int pick_ref(const float *lp, int V, const qkv_decode_opts *o) {
    int best = -1;
    float top = -INFINITY;
    for (int v = 0; v < V; v++)
        if (lp[v] > top && v != o->bos && v != o->pad) {
            top = lp[v];
            best = v;
        }
    for (int v = 0; best < 0 && v < V; v++)
        if (v != o->bos && v != o->pad) best = v;
    return best;
}

TEST(greedy_pick_edges) {
    qkv_decode_opts o = qkv_decode_defaults();
    o.bos = 1;
    o.pad = 0;
    float lp[53];
    int bad = 0, cases = 0;
    for (int V = 1; V <= 53; V += 13)
        for (int c = 0; c < 6; c++) {
            for (int v = 0; v < V; v++) lp[v] = -(float)((v * 7 + c * 3) % 11);
            if (c == 1) lp[V - 1] = 5.0f;                   /* the last entry, past the 16-lane blocks */
            if (c == 2) lp[0] = 9.0f;                       /* the maximum is padding */
            if (c == 3 && V > 1) lp[1] = lp[V - 1] = 9.0f;  /* BOS ties an allowed token */
            if (c == 4)
                for (int v = 0; v < V; v++) lp[v] = -INFINITY; /* nothing above -inf */
            if (c == 5) lp[V / 2] = NAN;                    /* NaN never wins */
            int got = qkv__decode_pick_greedy(lp, V, &o, NULL), want = pick_ref(lp, V, &o);
            cases++;
            if (got != want) {
                bad++;
                printf("  V=%d case %d: picked %d, want %d\n", V, c, got, want);
            }
        }
    CHECKF(bad == 0, "%d of %d greedy picks differ from the plain scan", bad, cases);
}

/* Greedy from raw logits and their log_softmax shift (what batched greedy decoding of a GPT does) picks the token and
 * the log-probability bits that normalising the row and picking give, including where rounding makes logits that
 * differ equal once normalised (the first of them wins, not the largest logit), where the best is BOS or padding,
 * and rows of -inf or with NaN. */
typedef struct {
    const qkv_decode_opts *o;
    int64_t V;
    int tok[5];
    float lp[5], sh[5], mx[5]; /* the shifts each row's pick was handed */
} each_pick;

static void pick_each(void *user, int64_t r, float *row, float shift, float mx) {
    each_pick *e = user;
    e->sh[r] = shift;
    e->mx[r] = mx;
    e->tok[r] = qkv__decode_pick_greedy_shifted(row, e->V, shift, mx, e->o, &e->lp[r]);
}

/* The rows' shifts with a pick on each row as its shift is done (what greedy batches run) give the shifts and the
 * picks of the shift pass followed by one pick per row: rows of 8,003 tokens (a tail past the 16-token blocks), a
 * best token that is BOS, a tie in the tail, two values equal only once normalised. */
TEST(shift_each_equals_shift_then_pick) {
    enum { ROWS = 5, V = 8003 };
    qkv_decode_opts o = qkv_decode_defaults();
    float *x = malloc(sizeof(float) * ROWS * V), *y = malloc(sizeof(float) * ROWS * V);
    float sh2[ROWS], mx2[ROWS];
    each_pick e = {.o = &o, .V = V};
    qkv_rng r;
    qkv_rng_init(&r, 11);
    CHECK(x && y);
    if (!x || !y) goto done;
    for (int i = 0; i < ROWS * V; i++) x[i] = 8.0f * qkv_rng_uniform(&r) - 4.0f;
    x[1 * V + o.bos] = 40.0f;
    x[2 * V + V - 1] = x[2 * V + V - 3] = 30.0f;
    for (int v = 0; v < V; v++) x[3 * V + v] = v == 100 ? 1e-7f : v == 7000 ? 2e-7f : 0.0f;
    memcpy(y, x, sizeof(float) * ROWS * V);
    qkv__log_softmax_rows_shift_each(x, ROWS, V, pick_each, &e);
    qkv__log_softmax_rows_shift(y, ROWS, V, sh2, mx2);
    for (int i = 0; i < ROWS; i++) {
        float lp = 0;
        int want = qkv__decode_pick_greedy_shifted(y + (int64_t)i * V, V, sh2[i], mx2[i], &o, &lp);
        CHECKF(e.sh[i] == sh2[i] && e.mx[i] == mx2[i], "row %d: shift %g / %g", i, (double)e.sh[i], (double)sh2[i]);
        CHECKF(e.tok[i] == want && e.lp[i] == lp, "row %d: token %d (lp %.9g), want %d (%.9g)", i, e.tok[i],
               (double)e.lp[i], want, (double)lp);
    }
    CHECK(e.tok[2] == V - 3 && e.tok[1] != o.bos);
done:
    free(x);
    free(y);
}

TEST(greedy_from_logits_equals_normalised) {
    qkv_decode_opts o = qkv_decode_defaults();
    enum { VMAX = 8000 };
    float *x = malloc(sizeof(float) * VMAX), *a = malloc(sizeof(float) * VMAX), *b = malloc(sizeof(float) * VMAX);
    float *c2 = malloc(sizeof(float) * VMAX);
    qkv_rng r;
    qkv_rng_init(&r, 7);
    int bad = 0, cases = 0, oop_differs = 0;
    static const int Vs[] = {1, 3, 17, 53, VMAX};
    for (size_t vi = 0; x && a && b && c2 && vi < sizeof Vs / sizeof *Vs; vi++)
        for (int c = 0; c < 7; c++) {
            int V = Vs[vi];
            for (int v = 0; v < V; v++) x[v] = 8.0f * qkv_rng_uniform(&r) - 4.0f;
            if (c == 1) /* all but two equal: 1e-7 apart, the later one larger, equal after subtracting log(V) */
                for (int v = 0; v < V; v++) x[v] = v == V / 3 ? 1e-7f : v == V / 2 ? 2e-7f : 0.0f;
            if (c == 2 && V > o.bos) x[o.bos] = 50.0f; /* the best is BOS */
            if (c == 3) x[o.pad] = 50.0f; /* the best is padding */
            if (c == 4)
                for (int v = 0; v < V; v++) x[v] = -INFINITY;
            if (c == 5) x[V / 2] = NAN;
            if (c == 6 && V > 2) x[V - 1] = x[V - 2] = 60.0f; /* a tie past the 16-token blocks */
            memcpy(a, x, sizeof(float) * (size_t)V);
            memcpy(b, x, sizeof(float) * (size_t)V);
            qkv__log_softmax_rows_inplace(a, 1, V);
            qkv__log_softmax_rows(c2, x, 1, V); /* what a seq2seq step returns: the same bits */
            oop_differs += memcmp(a, c2, sizeof(float) * (size_t)V) != 0;
            int want = qkv__decode_pick_greedy(a, V, &o, NULL);
            float shift, mx, got_lp = 0;
            qkv__log_softmax_rows_shift(x, 1, V, &shift, &mx);
            int got = qkv__decode_pick_greedy_shifted(b, V, shift, mx, &o, &got_lp);
            cases++;
            if (got != want || (want >= 0 && memcmp(&got_lp, &a[want], sizeof got_lp))) {
                bad++;
                printf("  V=%d case %d: picked %d (lp %.9g), want %d (lp %.9g)\n", V, c, got, (double)got_lp, want,
                       want >= 0 ? (double)a[want] : 0.0);
            }
        }
    CHECK(x && a && b && c2);
    CHECKF(bad == 0, "%d of %d greedy picks from logits differ from picks from log-probabilities", bad, cases);
    CHECKF(oop_differs == 0, "%d of %d rows: in-place log_softmax differs from the out-of-place one", oop_differs, cases);
    free(c2);
    free(x);
    free(a);
    free(b);
}

TEST(bad_options) {
    qkv_sample_opts o = opts(-1, 0, 1, 1);
    CHECK(qkv_sampler_new(5, &o, 0) == NULL && strstr(qkv_last_error(), "temperature"));
    o = opts(1, -2, 1, 1);
    CHECK(qkv_sampler_new(5, &o, 0) == NULL && strstr(qkv_last_error(), "top_k"));
    o = opts(1, 0, 0, 1);
    CHECK(qkv_sampler_new(5, &o, 0) == NULL && strstr(qkv_last_error(), "top_p"));
    o = opts(1, 0, 1.5f, 1);
    CHECK(qkv_sampler_new(5, &o, 0) == NULL && strstr(qkv_last_error(), "top_p"));
    o = opts(1, 0, 1, 0);
    CHECK(qkv_sampler_new(5, &o, 0) == NULL && strstr(qkv_last_error(), "repetition_penalty"));
    o = opts(NAN, 0, 1, 1);
    CHECK(qkv_sampler_new(5, &o, 0) == NULL);
    CHECK(qkv_sampler_new(0, NULL, 0) == NULL && strstr(qkv_last_error(), "vocabulary"));
}

/* ---- Generation with a small GPT ---- */

typedef struct {
    const qkv_model_type *type;
    qkv_params *params;
    qkv_model *model;
    qkv_lm_decoder *dec;
} lm_fixture;

static bool make_lm(lm_fixture *f, int64_t vocab, int64_t n_ctx) {
    f->type = qkv_model_type_find("gpt");
    cJSON *cfg = cJSON_Parse("{\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, \"n_layers\": 2, \"init_std\": 0.3}");
    qkv_task_info info = {.vocab_size = vocab, .max_len = n_ctx};
    f->params = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 21);
    f->model = f->type ? f->type->create(cfg, &info, f->params, &rng) : NULL;
    f->dec = f->model ? qkv_lm_decoder_new(f->type, f->model) : NULL;
    cJSON_Delete(cfg);
    CHECK_NN(f->dec);
    return f->dec != NULL;
}

static void free_lm(lm_fixture *f) {
    qkv_lm_decoder_free(f->dec);
    if (f->model) f->type->free(f->model);
    qkv_params_free(f->params);
}

typedef struct {
    int32_t seen[64];
    int n, stop_after;
} stream_log;

static int on_token(int32_t t, void *user) {
    stream_log *s = user;
    s->seen[s->n++] = t;
    return s->stop_after && s->n >= s->stop_after;
}

/* Greedy generation through the KV cache equals argmax over a full forward of the growing sequence. */
TEST(greedy_generation_equals_full_forward_argmax) {
    lm_fixture f = {0};
    if (!make_lm(&f, 17, 16)) {
        free_lm(&f);
        return;
    }
    int32_t prompt[3] = {3, 9, 4}, out[12];
    qkv_gen_opts o = qkv_gen_defaults();
    o.max_new_tokens = 12;
    stream_log log = {0};
    o.on_token = on_token;
    o.user = &log;
    qkv_gen_end end;
    CHECK(qkv_generate(f.dec, prompt, 3, &o, out, 12, &end) == 12);
    CHECK(end == QKV_GEN_MAX_TOKENS);
    CHECK(log.n == 12 && !memcmp(log.seen, out, sizeof out)); /* streamed as produced */
    int32_t seq[16];
    memcpy(seq, prompt, sizeof prompt);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_grad(ctx, false);
    for (int i = 0; i < 12; i++) {
        int64_t T = 3 + i;
        qkv_tensor *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, T));
        memcpy(ids->data, seq, sizeof(int32_t) * (size_t)T);
        qkv_batch b = {.ids = ids};
        qkv_tensor *logits = qkv_contiguous(ctx, f.type->forward(ctx, f.model, &b, NULL));
        CHECK_NN(logits);
        if (!logits) break;
        seq[T] = (int32_t)qkv_argmax(qkv_f32(logits) + (T - 1) * 17, 17);
        CHECKF(seq[T] == out[i], "token %d: full forward %d, cached %d", i, seq[T], out[i]);
        qkv_ctx_reset(ctx);
    }
    /* Not all the same token: the comparison is not trivial. */
    bool varied = false;
    for (int i = 1; i < 12; i++) varied |= out[i] != out[0];
    CHECK(varied);
    qkv_ctx_free(ctx);
    free_lm(&f);
}

TEST(stop_tokens_callback_and_limits) {
    lm_fixture f = {0};
    if (!make_lm(&f, 17, 16)) {
        free_lm(&f);
        return;
    }
    int32_t prompt[2] = {1, 2}, out[40], ref[10];
    qkv_gen_opts o = qkv_gen_defaults();
    o.max_new_tokens = 10;
    CHECK(qkv_generate(f.dec, prompt, 2, &o, ref, 10, NULL) == 10);
    /* Stop on the 4th greedy token: 3 are emitted, the stop token is not. */
    int32_t stop[2] = {-5, ref[3]};
    int first = 0;
    while (first < 3 && ref[first] != ref[3]) first++;
    o.stop = stop;
    o.n_stop = 2;
    qkv_gen_end end;
    int64_t n = qkv_generate(f.dec, prompt, 2, &o, out, 10, &end);
    CHECK(n == first && end == QKV_GEN_STOP_TOKEN);
    /* The callback ends generation after 5 tokens. */
    o.n_stop = 0;
    stream_log log = {.stop_after = 5};
    o.on_token = on_token;
    o.user = &log;
    CHECK(qkv_generate(f.dec, prompt, 2, &o, out, 10, &end) == 5 && end == QKV_GEN_CALLBACK);
    /* The context (16 positions) ends a long generation: 2 prompt + 14 fed + 1 last = 15 tokens. */
    o.on_token = NULL;
    o.max_new_tokens = 40;
    CHECK(qkv_generate(f.dec, prompt, 2, &o, out, 40, &end) == 15 && end == QKV_GEN_CONTEXT_FULL);
    /* Sampling with a seed repeats; the decoder is reset by every call. */
    int32_t s1[10], s2[10];
    o.max_new_tokens = 10;
    o.sample = qkv_sample_defaults();
    o.sample.temperature = 1.5f;
    o.seed = 5;
    CHECK(qkv_generate(f.dec, prompt, 2, &o, s1, 10, NULL) == 10);
    CHECK(qkv_generate(f.dec, prompt, 2, &o, s2, 10, NULL) == 10);
    CHECK(!memcmp(s1, s2, sizeof s1));
    /* Bad calls: no prompt for a model without a start token, a prompt longer than the context, a token outside
     * the vocabulary, an output too small. */
    CHECK(qkv_generate(f.dec, prompt, 0, &o, out, 40, NULL) == -1 && strstr(qkv_last_error(), "prompt"));
    int32_t long_prompt[20] = {0};
    CHECK(qkv_generate(f.dec, long_prompt, 20, &o, out, 40, NULL) == -1 && strstr(qkv_last_error(), "context"));
    int32_t bad[1] = {17};
    CHECK(qkv_generate(f.dec, bad, 1, &o, out, 40, NULL) == -1 && strstr(qkv_last_error(), "outside"));
    CHECK(qkv_generate(f.dec, prompt, 2, &o, out, 3, NULL) == -1);
    free_lm(&f);
}

int main(void) {
    RUN(greedy_and_temperature);
    RUN(top_k_keeps_exactly_k);
    RUN(top_p_keeps_the_smallest_sufficient_prefix);
    RUN(repetition_penalty);
    RUN(seed_reproduces_and_distribution_matches);
    RUN(greedy_pick_edges);
    RUN(greedy_from_logits_equals_normalised);
    RUN(shift_each_equals_shift_then_pick);
    RUN(bad_options);
    RUN(greedy_generation_equals_full_forward_argmax);
    RUN(stop_tokens_callback_and_limits);
    return test_finish();
}
