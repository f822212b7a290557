/* Repetition control (include/qkv/repeat.h): the n-gram ban on hand-made histories; greedy decoding of fixed logit
 * sequences equal token for token to a re-implementation of Hugging Face's processors (tests/ref/repeat_ref.py), in
 * qkv_generate's loop and in beam.h's greedy search through a prompted decoder; and on random models, every search
 * (greedy, sampling, beam, MBR's samples; qkv_generate and qkv_generate_batch) never repeats an n-gram, batched or
 * one at a time alike, where the same searches without the rule do repeat. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "decode/decode_internal.h"
#include "random_model.h"
#include "qkv/decode.h"
#include "qkv/decode_batch.h"
#include "qkv/model.h"
#include "qkv/prompted.h"
#include "test.h"

/* The tokens banned (as a bit mask over < 32 ids) for a history pre + gen. */
static unsigned banned(int N, const int32_t *pre, int n_pre, const int32_t *gen, int n_gen) {
    float s[32];
    for (int i = 0; i < 32; i++) s[i] = 0.0f;
    decode_history h = {.pre = pre, .n_pre = n_pre, .gen = gen, .n_gen = n_gen};
    int64_t n = qkv__repeat_ban_ngrams(N, &h, s, 32);
    unsigned m = 0;
    for (int i = 0; i < 32; i++)
        if (s[i] == -INFINITY) m |= 1u << i;
    CHECK(n == __builtin_popcount(m));
    return m;
}

TEST(ngram_ban_rule) {
    const int32_t h[] = {1, 2, 3, 1, 2};
    CHECK(banned(3, NULL, 0, h, 5) == 1u << 3);                 /* (1 2) was followed by 3 */
    CHECK(banned(2, NULL, 0, h, 5) == 1u << 3);                 /* (2) was followed by 3 */
    CHECK(banned(1, NULL, 0, h, 5) == ((1u << 1) | (1u << 2) | (1u << 3)));
    CHECK(banned(4, NULL, 0, h, 5) == 0);                        /* (3 1 2) never started a 4-gram before */
    CHECK(banned(5, NULL, 0, h, 5) == 0 && banned(6, NULL, 0, h, 5) == 0);
    CHECK(banned(1, NULL, 0, NULL, 0) == 0 && banned(2, NULL, 0, h, 1) == 0);
    /* The same history cut anywhere into prompt + generated bans the same tokens. */
    for (int cut = 0; cut <= 5; cut++)
        for (int N = 1; N <= 4; N++)
            CHECKF(banned(N, h, cut, h + cut, 5 - cut) == banned(N, NULL, 0, h, 5), "cut %d N %d", cut, N);
    /* Overlapping matches: 7 7 7 bans 7 for N = 2 and 3; several continuations are all banned. */
    const int32_t r[] = {7, 7, 7}, m[] = {4, 5, 4, 6, 4};
    CHECK(banned(2, NULL, 0, r, 3) == 1u << 7 && banned(3, NULL, 0, r, 3) == 1u << 7);
    CHECK(banned(2, NULL, 0, m, 5) == ((1u << 5) | (1u << 6)));
    /* Ids outside the vocabulary are ignored. */
    const int32_t o[] = {40, 1, 40, -1}, o2[] = {1, 40, 1};
    CHECK(banned(2, NULL, 0, o, 3) == 1u << 1 && banned(1, NULL, 0, o, 4) == 1u << 1);
    CHECK(banned(2, NULL, 0, o2, 3) == 0); /* (1 40) would ban 40 */
}

TEST(sampler_bans_and_reports_when_nothing_is_left) {
    qkv_sample_opts o = qkv_sample_defaults();
    o.temperature = 0;
    o.no_repeat_ngram = 2;
    qkv_sampler *s = qkv_sampler_new(4, &o, 1);
    CHECK_NN(s);
    const int32_t h[] = {3, 0, 3};
    float l[4] = {5, 1, 2, 0};
    CHECK(s && qkv_sampler_next(s, l, h, 3) == 2); /* 0 would repeat (3 0) */
    float l1[4] = {5, 1, 2, 0};
    CHECK(s && qkv_sampler_next(s, l1, h, 2) == 0); /* history 3 0: nothing to repeat yet after 0 */
    qkv_sampler_free(s);
    /* Every token banned: -1, greedy or sampled. */
    for (int greedy = 0; greedy < 2; greedy++) {
        o.no_repeat_ngram = 1;
        o.temperature = greedy ? 0.0f : 1.0f;
        o.top_k = greedy ? 0 : 2;
        s = qkv_sampler_new(3, &o, 1);
        const int32_t all[] = {0, 1, 2};
        float x[3] = {1, 2, 3};
        CHECK(s && qkv_sampler_next(s, x, all, 3) == -1);
        float y[3] = {1, 2, 3};
        CHECK(s && qkv_sampler_next(s, y, all, 2) == 2);
        qkv_sampler_free(s);
    }
    o = qkv_sample_defaults();
    o.no_repeat_ngram = -1;
    CHECK(qkv_sampler_new(3, &o, 0) == NULL && strstr(qkv_last_error(), "no_repeat_ngram"));
    o = qkv_sample_defaults();
    o.repeat_scope = (qkv_repeat_scope)7;
    CHECK(qkv_sampler_new(3, &o, 0) == NULL && strstr(qkv_last_error(), "repeat_scope"));
    qkv_repeat_scope sc = QKV_REPEAT_GENERATED;
    CHECK(qkv_repeat_scope_parse("all", &sc) && sc == QKV_REPEAT_ALL);
    CHECK(!qkv_repeat_scope_parse("prompt", &sc) && sc == QKV_REPEAT_ALL);
    CHECK(!strcmp(qkv_repeat_scope_name(QKV_REPEAT_GENERATED), "generated"));
}

/* ---- a "model" whose logits at generated position g are row g of a fixed table, whatever it is fed ---- */
typedef struct {
    int V, S, skip; /* skip: the steps before the first generated position (the prompt but its last token) */
    const float *logits;
} fixed_model;

typedef struct {
    const fixed_model *m;
    int rows;
    int *step;
} fixed_state;

static void fx_info(const qkv_model *m, qkv_decoder_info *out) {
    const fixed_model *f = (const fixed_model *)m;
    *out = (qkv_decoder_info){.vocab = f->V, .capacity = 0, .log_probs = false, .needs_source = false,
                              .source_attention = false, .start_token = -1};
}

static qkv_decoder_state *fx_start(const qkv_model *m, const int32_t *src, const int32_t *lengths, int n_src,
                                   int src_len, int rows_per_src, int max_steps) {
    (void)src, (void)lengths, (void)src_len, (void)max_steps;
    fixed_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->m = (const fixed_model *)m;
    s->rows = n_src * rows_per_src;
    s->step = calloc((size_t)s->rows, sizeof *s->step);
    return (qkv_decoder_state *)s;
}

static qkv_status fx_step(qkv_decoder_state *st, const int32_t *tokens, float *scores, float *attn) {
    (void)tokens, (void)attn;
    fixed_state *s = (fixed_state *)st;
    const fixed_model *f = s->m;
    for (int r = 0; r < s->rows; r++) {
        int k = s->step[r]++ - f->skip;
        for (int v = 0; v < f->V; v++) scores[r * f->V + v] = k >= 0 && k < f->S ? f->logits[k * f->V + v] : 0.0f;
    }
    return QKV_OK;
}

static qkv_status fx_reorder(qkv_decoder_state *st, const int32_t *from, int n_rows) {
    fixed_state *s = (fixed_state *)st;
    int *step = malloc(sizeof *step * (size_t)n_rows);
    if (!step) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n_rows; i++) step[i] = s->step[from[i]];
    free(s->step);
    s->step = step;
    s->rows = n_rows;
    return QKV_OK;
}

static void fx_free(qkv_decoder_state *st) {
    fixed_state *s = (fixed_state *)st;
    if (s) free(s->step);
    free(s);
}

static const qkv_decoder_ops FIXED = {
    .info = fx_info, .start = fx_start, .step = fx_step, .reorder = fx_reorder, .free = fx_free};
static const qkv_model_type FIXED_TYPE = {.name = "fixed_logits", .task = "lm", .decoder = &FIXED};

static int ints(const cJSON *a, int32_t *out, int cap) {
    int n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) if (n < cap) out[n++] = (int32_t)x->valuedouble;
    return n;
}

static qkv_status take_one(int index, qkv_hyps *hs, void *user) {
    (void)index;
    *(qkv_hyps *)user = *hs;
    *hs = (qkv_hyps){0};
    return QKV_OK;
}

static qkv_status gen_keep(int index, const int32_t *tokens, int64_t n, qkv_gen_end end, void *user) {
    (void)index;
    int32_t *o = user;
    o[0] = (int32_t)n;
    o[1] = (int32_t)end;
    memcpy(o + 2, tokens, sizeof(int32_t) * (size_t)n);
    return QKV_OK;
}

TEST(matches_the_hugging_face_reference) {
    char *text = test_read_file(test_fixture_path("repeat_ref.jsonl"));
    CHECKF(text != NULL, "tests/fixtures/repeat_ref.jsonl (tests/ref/repeat_ref.py) is missing");
    if (!text) return;
    int cases = 0, all_banned = 0, fallbacks = 0, differ_from_plain = 0, with_rules = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *c = cJSON_Parse(line);
        CHECK_NN(c);
        if (!c) continue;
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        int V = cJSON_GetObjectItem(c, "V")->valueint, N = cJSON_GetObjectItem(c, "N")->valueint;
        float penalty = (float)cJSON_GetObjectItem(c, "penalty")->valuedouble;
        bool all = !strcmp(cJSON_GetObjectItem(c, "scope")->valuestring, "all");
        int32_t eos = cJSON_GetObjectItem(c, "eos")->valueint, pad = cJSON_GetObjectItem(c, "pad")->valueint;
        int32_t prompt[16], want_g[64], want_d[64];
        int np = ints(cJSON_GetObjectItem(c, "prompt"), prompt, 16);
        const cJSON *gj = cJSON_GetObjectItem(c, "generate"), *dj = cJSON_GetObjectItem(c, "decode");
        int ng = ints(cJSON_GetObjectItem(gj, "tokens"), want_g, 64);
        int nd = ints(cJSON_GetObjectItem(dj, "tokens"), want_d, 64);
        bool want_stop = !strcmp(cJSON_GetObjectItem(gj, "end")->valuestring, "stop");
        bool want_fin = cJSON_IsTrue(cJSON_GetObjectItem(dj, "finished"));
        const cJSON *rows = cJSON_GetObjectItem(c, "logits");
        int S = cJSON_GetArraySize(rows);
        float *logits = malloc(sizeof(float) * (size_t)S * (size_t)V);
        for (int t = 0; logits && t < S; t++) {
            const cJSON *row = cJSON_GetArrayItem(rows, t);
            for (int v = 0; v < V; v++) logits[t * V + v] = (float)cJSON_GetArrayItem(row, v)->valuedouble;
        }
        fixed_model fm = {.V = V, .S = S, .skip = np - 1, .logits = logits};
        const qkv_model *m = (const qkv_model *)&fm;

        /* qkv_generate's loop and qkv_generate_batch's: processors on raw logits, EOS a stop token. */
        qkv_gen_opts o = qkv_gen_defaults();
        o.sample.no_repeat_ngram = N;
        o.sample.repetition_penalty = penalty;
        o.sample.repeat_scope = all ? QKV_REPEAT_ALL : QKV_REPEAT_GENERATED;
        o.max_new_tokens = S;
        o.stop = &eos;
        o.n_stop = 1;
        qkv_lm_decoder *d = qkv_lm_decoder_new(&FIXED_TYPE, (qkv_model *)m);
        CHECK_NN(d);
        int32_t out[64];
        qkv_gen_end end = QKV_GEN_MAX_TOKENS;
        int64_t n = d ? qkv_generate(d, prompt, np, &o, out, 64, &end) : -1;
        CHECKF(n == ng && !memcmp(out, want_g, sizeof(int32_t) * (size_t)ng) &&
                   (end == QKV_GEN_STOP_TOKEN) == want_stop,
               "%s generate: %lld tokens (end %d), the reference %d", name, (long long)n, (int)end, ng);
        qkv_lm_decoder_free(d);
        int32_t b[2 + 64];
        const int32_t *pp = prompt;
        int64_t npl = np;
        CHECK_OK(qkv_generate_batch(&FIXED_TYPE, (qkv_model *)m, 1, &pp, &npl, &o, 1, gen_keep, b));
        CHECKF(b[0] == ng && !memcmp(b + 2, want_g, sizeof(int32_t) * (size_t)ng), "%s generate batch", name);
        if (N > 0 || penalty != 1.0f) { /* the same logits without the rules choose otherwise */
            qkv_gen_opts plain = o;
            plain.sample.no_repeat_ngram = 0;
            plain.sample.repetition_penalty = 1.0f;
            CHECK_OK(qkv_generate_batch(&FIXED_TYPE, (qkv_model *)m, 1, &pp, &npl, &plain, 1, gen_keep, b));
            differ_from_plain += b[0] != ng || memcmp(b + 2, want_g, sizeof(int32_t) * (size_t)ng) != 0;
            with_rules++;
        }

        /* beam.h's greedy search through the prompted decoder: processors on log-probabilities, BOS the prompt's
         * last token, EOS back when everything else is banned. Both entry points. */
        qkv_decoder lm, pd;
        qkv_prompted p;
        CHECK_OK(qkv_model_decoder(&FIXED_TYPE, m, &lm));
        CHECK_OK(qkv_prompted_decoder(&lm, &p, &pd));
        qkv_decode_opts dopt = qkv_decode_defaults();
        dopt.bos = prompt[np - 1];
        dopt.eos = eos;
        dopt.pad = pad;
        dopt.max_len = S;
        dopt.no_repeat_ngram = N;
        dopt.repetition_penalty = penalty;
        dopt.repeat_scope = all ? QKV_REPEAT_ALL : QKV_REPEAT_GENERATED;
        qkv_hyps hs = {0};
        int32_t len = np;
        CHECK_OK(qkv_decode_greedy(&pd, prompt, &len, 1, np, &dopt, &hs));
        bool ok = hs.n == 1 && hs.h[0].len == nd && hs.h[0].finished == want_fin &&
                  !memcmp(hs.h[0].tokens, want_d, sizeof(int32_t) * (size_t)nd);
        CHECKF(ok, "%s decode greedy: %d tokens, the reference %d", name, hs.n ? hs.h[0].len : -1, nd);
        qkv_hyps_free(&hs);
        qkv_batch_opts bo = qkv_batch_defaults();
        int lens = np;
        CHECK_OK(qkv_decode_batch(&pd, 1, &pp, &lens, NULL, &dopt, &bo, take_one, &hs));
        ok = hs.n == 1 && hs.h[0].len == nd && !memcmp(hs.h[0].tokens, want_d, sizeof(int32_t) * (size_t)nd);
        CHECKF(ok, "%s decode batch: differs from the reference", name);
        qkv_hyps_free(&hs);
        all_banned += cJSON_IsTrue(cJSON_GetObjectItem(gj, "all_banned"));
        fallbacks += cJSON_IsTrue(cJSON_GetObjectItem(dj, "fallback"));
        free(logits);
        cJSON_Delete(c);
        cases++;
    }
    free(text);
    printf("  %d reference cases: %d of %d with rules differ from plain greedy; every token banned: %d generate, "
           "%d decode (EOS back)\n", cases, differ_from_plain, with_rules, all_banned, fallbacks);
    CHECK(cases >= 16);
    CHECK(2 * differ_from_plain > with_rules); /* the rules change what is chosen on these logits */
    CHECK(all_banned > 0 && fallbacks > 0);  /* the fixture reaches both ends */
}

/* ---- random models: the rule holds in every search ---- */
enum { V_SRC = 11, V_TGT = 9, NIN = 6, MAXLEN = 24 };

typedef struct built {
    const qkv_model_type *t;
    qkv_params *p;
    qkv_model *m;
    qkv_decoder d;
} built;

static bool build(const char *name, const char *over_json, built *b) {
    memset(b, 0, sizeof *b);
    b->t = qkv_model_type_find(name);
    CHECKF(b->t != NULL, "type %s", name);
    if (!b->t) return false;
    qkv_task_info info = {.vocab_size = V_SRC, .n_classes = 3, .pad_id = 0, .max_len = MAXLEN};
    if (!strcmp(b->t->task, "seq2seq")) info.tgt_vocab_size = V_TGT;
    if (!test_random_model(b->t, over_json, &info, 29, &b->p, &b->m)) return false;
    CHECK_OK(qkv_model_decoder(b->t, b->m, &b->d));
    return true;
}

static void unbuild(built *b) {
    if (b->m) b->t->free(b->m);
    qkv_params_free(b->p);
}

/* Whether some n-gram of N tokens ending in gen[] (after the prompt pre[], when given) occurs earlier in pre + gen.
 * A final EOS is left out: it is what a hypothesis ends with when every token is banned. */
static bool repeats(int N, const int32_t *pre, int n_pre, const int32_t *gen, int n_gen, int32_t eos) {
    if (n_gen > 0 && gen[n_gen - 1] == eos) n_gen--;
    int L = n_pre + n_gen;
    int32_t *h = malloc(sizeof *h * (size_t)(L ? L : 1));
    if (n_pre) memcpy(h, pre, sizeof *h * (size_t)n_pre);
    if (n_gen) memcpy(h + n_pre, gen, sizeof *h * (size_t)n_gen);
    bool rep = false;
    for (int e = (n_pre > N - 1 ? n_pre : N - 1); e < L && !rep; e++) /* the n-gram h[e-N+1..e] */
        for (int s = N - 1; s < e && !rep; s++)
            rep = !memcmp(h + s - N + 1, h + e - N + 1, sizeof *h * (size_t)N);
    free(h);
    return rep;
}

static int32_t SRC[NIN][8];

typedef struct {
    qkv_hyps got[NIN];
} collect;

static qkv_status take(int index, qkv_hyps *hs, void *user) {
    collect *c = user;
    c->got[index] = *hs;
    *hs = (qkv_hyps){0};
    return QKV_OK;
}

static void collect_free(collect *c) {
    for (int i = 0; i < NIN; i++) qkv_hyps_free(&c->got[i]);
}

static bool same(const qkv_hyps *a, const qkv_hyps *b) {
    if (a->n != b->n) return false;
    for (int k = 0; k < a->n; k++)
        if (a->h[k].len != b->h[k].len || a->h[k].finished != b->h[k].finished ||
            memcmp(a->h[k].tokens, b->h[k].tokens, sizeof(int32_t) * (size_t)a->h[k].len) ||
            fabs(a->h[k].logprob - b->h[k].logprob) > 1e-5)
            return false;
    return true;
}

/* Decodes the inputs with search s at batch sizes 1 and NIN; checks they agree and counts outputs that repeat an
 * n-gram of N (as the rule under scope `all` sees them: after the prompt when the decoder is prompted). */
static int decode_and_count(const qkv_decoder *d, const int32_t *const *src, const int *len, qkv_decode_opts *o,
                            qkv_search s, int N, bool prompt_counts, const char *what) {
    collect one = {0}, many = {0};
    qkv_batch_opts bo = qkv_batch_defaults();
    bo.search = s;
    bo.seed = 5;
    int reps = 0;
    bo.batch_size = 1;
    CHECK_OK(qkv_decode_batch(d, NIN, src, len, NULL, o, &bo, take, &one));
    bo.batch_size = NIN;
    CHECK_OK(qkv_decode_batch(d, NIN, src, len, NULL, o, &bo, take, &many));
    for (int i = 0; i < NIN; i++) {
        CHECKF(same(&one.got[i], &many.got[i]), "%s input %d: batched and one at a time differ", what, i);
        for (int k = 0; k < one.got[i].n; k++) {
            const qkv_hyp *h = &one.got[i].h[k];
            reps += repeats(N, prompt_counts ? src[i] : NULL, prompt_counts ? len[i] : 0, h->tokens, h->len, o->eos);
        }
    }
    /* One sentence at a time through the searches' own entry points gives the same. */
    for (int i = 0; i < NIN && s != QKV_SEARCH_SAMPLE; i++) {
        qkv_hyps h = {0};
        if (s == QKV_SEARCH_BEAM) CHECK_OK(qkv_decode_beam(d, src[i], len[i], o, &h));
        else CHECK_OK(qkv_decode_greedy(d, src[i], len + i, 1, len[i], o, &h));
        CHECKF(same(&h, &one.got[i]), "%s input %d: the one-sentence call differs", what, i);
        qkv_hyps_free(&h);
    }
    collect_free(&one);
    collect_free(&many);
    return reps;
}

TEST(seq2seq_searches_never_repeat) {
    built b;
    if (!build("transformer_seq2seq",
               "{\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 16, \"n_enc_layers\": 1, \"n_dec_layers\": 1, "
               "\"dropout\": 0.0}",
               &b))
        return;
    const int32_t *src[NIN];
    int len[NIN];
    for (int i = 0; i < NIN; i++) {
        src[i] = SRC[i];
        len[i] = 3 + i;
    }
    static const qkv_search searches[] = {QKV_SEARCH_GREEDY, QKV_SEARCH_BEAM, QKV_SEARCH_SAMPLE};
    static const char *const names[] = {"greedy", "beam", "sample"};
    for (int si = 0; si < 3; si++)
        for (int N = 1; N <= 3; N++) {
            qkv_decode_opts o = qkv_decode_defaults();
            o.max_len = 20;
            o.beam = 3;
            o.n_best = 2;
            o.n_samples = 3;
            o.temperature = 1.3f;
            o.eos = 3; /* a token this random model seldom picks: outputs run long */
            char what[64];
            snprintf(what, sizeof what, "seq2seq %s N %d", names[si], N);
            int before = decode_and_count(&b.d, src, len, &o, searches[si], N, false, what);
            o.no_repeat_ngram = N;
            o.repetition_penalty = N == 2 ? 1.2f : 1.0f;
            int after = decode_and_count(&b.d, src, len, &o, searches[si], N, false, what);
            printf("  %s: %d outputs repeat an n-gram without the rule, %d with it\n", what, before, after);
            CHECKF(after == 0, "%s: %d outputs repeat", what, after);
            if (N >= 2) CHECKF(before > 0, "%s: the plain search should repeat on this model", what);
        }
    /* MBR picks among samples that all obey the rule. */
    qkv_decode_opts o = qkv_decode_defaults();
    o.max_len = 20;
    o.eos = 3;
    o.n_samples = 4;
    o.no_repeat_ngram = 2;
    for (int i = 0; i < NIN; i++) {
        qkv_rng rng;
        qkv_rng_init(&rng, 3);
        qkv_hyps h = {0};
        CHECK_OK(qkv_decode_mbr(&b.d, src[i], len[i], &o, QKV_MBR_ROUGE_L, NULL, NULL, &rng, &h));
        CHECK(h.n == 1 && !repeats(2, NULL, 0, h.h[0].tokens, h.h[0].len, o.eos));
        qkv_hyps_free(&h);
    }
    unbuild(&b);
}

typedef struct {
    int32_t tok[NIN][32];
    int64_t n[NIN];
} gen_collect;

static qkv_status gen_take(int index, const int32_t *tokens, int64_t n, qkv_gen_end end, void *user) {
    (void)end;
    gen_collect *c = user;
    memcpy(c->tok[index], tokens, sizeof(int32_t) * (size_t)n);
    c->n[index] = n;
    return QKV_OK;
}

TEST(language_model_searches_never_repeat) {
    built b;
    if (!build("gpt", "{\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, \"n_layers\": 2, \"init_std\": 0.3, "
                      "\"n_ctx\": 40}", &b))
        return;
    /* Prompts of one length (the prompted decoder batches equal lengths), with repeats of their own. */
    const int32_t *src[NIN];
    int len[NIN];
    int64_t len64[NIN];
    for (int i = 0; i < NIN; i++) {
        src[i] = SRC[i];
        len[i] = 6;
        len64[i] = 6;
    }
    qkv_lm_decoder *one = qkv_lm_decoder_new(b.t, b.m);
    CHECK_NN(one);
    for (int all = 0; one && all < 2; all++)
        for (int N = 1; N <= 3; N++)
            for (int sample = 0; sample < 2; sample++) {
                qkv_gen_opts o = qkv_gen_defaults();
                o.max_new_tokens = 24;
                o.sample.temperature = sample ? 1.2f : 0.0f;
                o.seed = 4;
                int before = 0, after = 0;
                for (int rule = 0; rule < 2; rule++) {
                    o.sample.no_repeat_ngram = rule ? N : 0;
                    o.sample.repeat_scope = all ? QKV_REPEAT_ALL : QKV_REPEAT_GENERATED;
                    gen_collect c = {0};
                    CHECK_OK(qkv_generate_batch(b.t, b.m, NIN, src, len64, &o, 4, gen_take, &c));
                    for (int i = 0; i < NIN; i++) {
                        int32_t out[32];
                        int64_t n = qkv_generate(one, src[i], len64[i], &o, out, 32, NULL);
                        CHECKF(n == c.n[i] && !memcmp(out, c.tok[i], sizeof(int32_t) * (size_t)n),
                               "gpt generate N %d scope %d sample %d prompt %d: batch and alone differ", N, all,
                               sample, i);
                        int r = repeats(N, all ? src[i] : NULL, all ? 6 : 0, out, (int)n, -1);
                        if (rule) after += r;
                        else before += r;
                    }
                }
                printf("  gpt generate N %d scope %s %s: %d repeat without the rule, %d with it\n", N,
                       all ? "all" : "generated", sample ? "sampled" : "greedy", before, after);
                CHECKF(after == 0, "gpt generate N %d scope %d sample %d: %d outputs repeat", N, all, sample, after);
                if (N >= 2 && !sample) CHECKF(before > 0, "gpt greedy N %d: the plain search should repeat", N);
            }
    qkv_lm_decoder_free(one);
    /* Beam search and greedy through the prompted decoder, both scopes. */
    qkv_decoder pd;
    qkv_prompted p;
    CHECK_OK(qkv_prompted_decoder(&b.d, &p, &pd));
    for (int i = 0; i < NIN; i++) SRC[i][5] = 1; /* every prompt ends with the BOS the search feeds */
    for (int all = 0; all < 2; all++)
        for (int N = 1; N <= 3; N++)
            for (int beam = 0; beam < 2; beam++) {
                qkv_decode_opts o = qkv_decode_defaults();
                o.max_len = 16;
                o.beam = 3;
                o.n_best = 2;
                o.eos = 2;
                o.no_repeat_ngram = N;
                o.repeat_scope = all ? QKV_REPEAT_ALL : QKV_REPEAT_GENERATED;
                char what[64];
                snprintf(what, sizeof what, "gpt prompted %s N %d scope %d", beam ? "beam" : "greedy", N, all);
                int r = decode_and_count(&pd, src, len, &o, beam ? QKV_SEARCH_BEAM : QKV_SEARCH_GREEDY, N, all, what);
                CHECKF(r == 0, "%s: %d outputs repeat", what, r);
            }
    unbuild(&b);
}

TEST(bad_options_are_errors) {
    built b;
    if (!build("transformer_seq2seq", "{\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 8, \"n_enc_layers\": 1, "
                                      "\"n_dec_layers\": 1}", &b))
        return;
    qkv_decode_opts o = qkv_decode_defaults();
    qkv_hyps h = {0};
    o.no_repeat_ngram = -2;
    CHECK(qkv_decode_greedy(&b.d, SRC[0], NULL, 1, 3, &o, &h) == QKV_ERR_INVALID &&
          strstr(qkv_last_error(), "no_repeat_ngram"));
    o = qkv_decode_defaults();
    o.repetition_penalty = 0;
    CHECK(qkv_decode_beam(&b.d, SRC[0], 3, &o, &h) == QKV_ERR_INVALID && strstr(qkv_last_error(), "repetition"));
    o = qkv_decode_defaults();
    o.repeat_scope = (qkv_repeat_scope)3;
    CHECK(qkv_decode_greedy(&b.d, SRC[0], NULL, 1, 3, &o, &h) == QKV_ERR_INVALID &&
          strstr(qkv_last_error(), "repeat_scope"));
    unbuild(&b);
}

int main(void) {
    qkv_rng rng;
    qkv_rng_init(&rng, 8);
    for (int i = 0; i < NIN; i++)
        for (int j = 0; j < 8; j++) SRC[i][j] = 3 + (int32_t)qkv_rng_below(&rng, V_SRC - 3);
    RUN(ngram_ban_rule);
    RUN(sampler_bans_and_reports_when_nothing_is_left);
    RUN(matches_the_hugging_face_reference);
    RUN(seq2seq_searches_never_repeat);
    RUN(language_model_searches_never_repeat);
    RUN(bad_options_are_errors);
    return test_finish();
}
