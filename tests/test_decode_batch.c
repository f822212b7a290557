/* Batched decoding (decode_batch.h) against one sentence at a time, for every model type that generates: greedy
 * and beam search give the same hypotheses (log-probabilities and attention within 1e-5) whatever the batch size,
 * with very short and very long inputs mixed and per-input length limits; inputs that never emit EOS stop at their
 * max_len; sampling gives the same samples in a batch as alone; results arrive in input order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "random_model.h"
#include "qkv/checkpoint.h"
#include "qkv/decode.h"
#include "qkv/decode_batch.h"
#include "qkv/model.h"
#include "qkv/prompted.h"
#include "test.h"

static const char *const TYPES[] = {"lstm_seq2seq", "transformer_seq2seq", "gpt", "rnnlm"};

static const char *small_config(const char *type) {
    if (!strcmp(type, "gpt")) return "{\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, \"n_layers\": 2, \"init_std\": 0.3, \"n_ctx\": 24}";
    if (!strcmp(type, "rnnlm")) return "{\"d_model\": 12, \"n_layers\": 2, \"rnn\": \"lstm\"}";
    if (!strcmp(type, "lstm_seq2seq"))
        return "{\"embed\": 8, \"hidden\": 12, \"n_layers\": 2, \"attention\": \"additive\", \"input_feeding\": true}";
    return "{\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 16, \"n_enc_layers\": 1, \"n_dec_layers\": 2, \"dropout\": 0.0}";
}

enum { V_SRC = 11, V_TGT = 13, MAXLEN = 24, N = 11 };

typedef struct built {
    const qkv_model_type *t;
    qkv_params *p;
    qkv_model *m;
    qkv_decoder d;
} built;

static bool build_seeded(const char *name, uint64_t seed, built *b) {
    memset(b, 0, sizeof *b);
    b->t = qkv_model_type_find(name);
    CHECKF(b->t != NULL, "type %s", name);
    if (!b->t) return false;
    qkv_task_info info = {.vocab_size = V_SRC, .n_classes = 3, .pad_id = 0, .max_len = MAXLEN};
    if (!strcmp(b->t->task, "seq2seq")) info.tgt_vocab_size = V_TGT;
    if (!test_random_model(b->t, small_config(name), &info, seed, &b->p, &b->m)) return false;
    CHECK_OK(qkv_model_decoder(b->t, b->m, &b->d));
    return true;
}

static bool build(const char *name, built *b) { return build_seeded(name, 23, b); }

static void unbuild(built *b) {
    if (b->m) b->t->free(b->m);
    qkv_params_free(b->p);
}

/* Inputs: lengths from 1 to 20 mixed, ids in [3, V_SRC); limits from 1 to 18 generated tokens. */
static const int LEN[N] = {1, 20, 2, 9, 1, 3, 20, 5, 7, 14, 2}, MAX[N] = {12, 18, 1, 6, 18, 3, 9, 14, 12, 18, 2};
static int32_t SRC[N][20];

static void make_sources(void) {
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 20; j++) SRC[i][j] = 3 + (int32_t)qkv_rng_below(&rng, V_SRC - 3);
}

typedef struct {
    qkv_hyps got[N];
    int order[N], n;
} collect;

static qkv_status take(int index, qkv_hyps *hs, void *user) {
    collect *c = user;
    c->order[c->n++] = index;
    c->got[index] = *hs;
    *hs = (qkv_hyps){0};
    return QKV_OK;
}

static void collect_free(collect *c) {
    for (int i = 0; i < N; i++) qkv_hyps_free(&c->got[i]);
}

static qkv_status run_batch(const built *b, const qkv_decode_opts *o, qkv_search search, int batch_size,
                            int64_t batch_tokens, collect *c) {
    memset(c, 0, sizeof *c);
    const int32_t *src[N];
    for (int i = 0; i < N; i++) src[i] = SRC[i];
    qkv_batch_opts bo = qkv_batch_defaults();
    bo.search = search;
    bo.batch_size = batch_size;
    bo.batch_tokens = batch_tokens;
    bo.seed = 99;
    bool s2s = b->d.info.needs_source;
    qkv_status st = qkv_decode_batch(&b->d, N, s2s ? src : NULL, s2s ? LEN : NULL, MAX, o, &bo, take, c);
    CHECKF(st == QKV_OK, "%s batch %d: %s", b->t->name, batch_size, qkv_last_error());
    for (int i = 0; st == QKV_OK && i < N; i++) CHECKF(c->order[i] == i, "emitted %d as #%d", c->order[i], i);
    return st;
}

/* Hypotheses equal: tokens and finished exactly, log-probability, score and attention within 1e-5. */
static void same_hyps(const char *what, const qkv_hyps *a, const qkv_hyps *b, int i) {
    CHECKF(a->n == b->n, "%s #%d: %d vs %d hypotheses", what, i, a->n, b->n);
    for (int k = 0; k < a->n && k < b->n; k++) {
        const qkv_hyp *x = &a->h[k], *y = &b->h[k];
        bool same = x->len == y->len && x->finished == y->finished &&
                    !memcmp(x->tokens, y->tokens, sizeof(int32_t) * (size_t)x->len);
        CHECKF(same, "%s #%d hyp %d: tokens differ (len %d vs %d)", what, i, k, x->len, y->len);
        CHECKF(fabs(x->logprob - y->logprob) < 1e-5 && fabs(x->score - y->score) < 1e-5,
               "%s #%d hyp %d: logprob %.8f vs %.8f", what, i, k, x->logprob, y->logprob);
        CHECKF((x->attn == NULL) == (y->attn == NULL) && x->src_len == y->src_len, "%s #%d: attention shape", what, i);
        for (int j = 0; same && x->attn && y->attn && j < x->len * x->src_len; j++)
            if (fabsf(x->attn[j] - y->attn[j]) > 1e-5f) {
                CHECKF(false, "%s #%d hyp %d: attention %d: %g vs %g", what, i, k, j, (double)x->attn[j],
                       (double)y->attn[j]);
                break;
            }
    }
}

static qkv_decode_opts opts_for(const built *b) {
    qkv_decode_opts o = qkv_decode_defaults();
    o.bos = 1;
    o.eos = 2;
    o.pad = 0;
    o.want_attention = b->d.info.source_attention;
    return o;
}

TEST(greedy_equals_one_at_a_time) {
    for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++) {
        built b;
        if (!build(TYPES[ti], &b)) continue;
        qkv_decode_opts o = opts_for(&b);
        bool s2s = b.d.info.needs_source;
        qkv_hyps one[N] = {0};
        int unfinished = 0;
        for (int i = 0; i < N; i++) {
            o.max_len = MAX[i];
            CHECK_OK(qkv_decode_greedy(&b.d, s2s ? SRC[i] : NULL, s2s ? LEN + i : NULL, 1, s2s ? LEN[i] : 0, &o,
                                       &one[i]));
            const qkv_hyp *h = &one[i].h[0];
            /* An input that has not emitted EOS stops exactly at its limit. */
            if (!h->finished) unfinished++;
            CHECKF(h->finished ? h->tokens[h->len - 1] == 2 && h->len <= MAX[i] : h->len == MAX[i],
                   "%s #%d: len %d, max %d, finished %d", b.t->name, i, h->len, MAX[i], h->finished);
        }
        CHECKF(unfinished > 0, "%s: some input should run to its limit", b.t->name);
        static const int sizes[][2] = {{1, 0}, {3, 0}, {64, 0}, {64, 60}};
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            collect c;
            char what[64];
            snprintf(what, sizeof what, "%s greedy batch %d", b.t->name, sizes[si][0]);
            if (run_batch(&b, &o, QKV_SEARCH_GREEDY, sizes[si][0], sizes[si][1], &c) == QKV_OK)
                for (int i = 0; i < N; i++) same_hyps(what, &c.got[i], &one[i], i);
            collect_free(&c);
        }
        for (int i = 0; i < N; i++) qkv_hyps_free(&one[i]);
        unbuild(&b);
    }
}

TEST(beam_equals_one_at_a_time) {
    for (size_t ti = 0; ti < 2; ti++) { /* the seq2seq types: beam search is for translation */
        built b;
        if (!build(TYPES[ti], &b)) continue;
        qkv_decode_opts o = opts_for(&b);
        o.beam = 4;
        o.n_best = 2;
        qkv_hyps one[N] = {0};
        for (int i = 0; i < N; i++) {
            o.max_len = MAX[i];
            CHECK_OK(qkv_decode_beam(&b.d, SRC[i], LEN[i], &o, &one[i]));
            CHECKF(one[i].n == 2 || (MAX[i] == 1 && one[i].n >= 1), "%s #%d: %d best", b.t->name, i, one[i].n);
        }
        for (int bs = 1; bs <= 64; bs *= 4) {
            collect c;
            char what[64];
            snprintf(what, sizeof what, "%s beam batch %d", b.t->name, bs);
            if (run_batch(&b, &o, QKV_SEARCH_BEAM, bs, 0, &c) == QKV_OK)
                for (int i = 0; i < N; i++) same_hyps(what, &c.got[i], &one[i], i);
            collect_free(&c);
        }
        for (int i = 0; i < N; i++) qkv_hyps_free(&one[i]);
        unbuild(&b);
    }
}

TEST(sampling_does_not_depend_on_the_batch) {
    for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++) {
        built b;
        if (!build(TYPES[ti], &b)) continue;
        qkv_decode_opts o = opts_for(&b);
        o.n_samples = 3;
        o.temperature = 1.5f;
        collect alone, all;
        if (run_batch(&b, &o, QKV_SEARCH_SAMPLE, 1, 0, &alone) == QKV_OK &&
            run_batch(&b, &o, QKV_SEARCH_SAMPLE, 64, 0, &all) == QKV_OK) {
            int differ = 0;
            for (int i = 0; i < N; i++) {
                same_hyps(b.t->name, &all.got[i], &alone.got[i], i);
                const qkv_hyp *h = alone.got[i].h;
                for (int k = 1; k < alone.got[i].n; k++)
                    differ += h[k].len != h[0].len ||
                              memcmp(h[k].tokens, h[0].tokens, sizeof(int32_t) * (size_t)h[0].len) != 0;
            }
            CHECKF(differ > 0, "%s: a sentence's samples come from different streams", b.t->name);
        }
        collect_free(&alone);
        collect_free(&all);
        unbuild(&b);
    }
}

typedef struct {
    int32_t tok[N][32];
    int64_t n[N];
    qkv_gen_end end[N];
    int order[N], count;
} gen_collect;

static qkv_status gen_take(int index, const int32_t *tokens, int64_t n, qkv_gen_end end, void *user) {
    gen_collect *c = user;
    c->order[c->count++] = index;
    memcpy(c->tok[index], tokens, sizeof(int32_t) * (size_t)n);
    c->n[index] = n;
    c->end[index] = end;
    return QKV_OK;
}

/* Prompts of 1 to 20 tokens, greedy and sampled, a stop token, and a context that fills up (the GPT holds 24
 * positions): every prompt ends as qkv_generate ends it alone, in input order. */
TEST(generate_batch_equals_one_prompt_at_a_time) {
    for (size_t ti = 2; ti < 4; ti++) {
        built b;
        if (!build(TYPES[ti], &b)) continue;
        qkv_lm_decoder *one = qkv_lm_decoder_new(b.t, b.m);
        CHECK(one != NULL);
        const int32_t *prompts[N];
        int64_t lens[N];
        for (int i = 0; i < N; i++) {
            prompts[i] = SRC[i];
            lens[i] = LEN[i];
        }
        int32_t stop = 0;
        for (int variant = 0; one && variant < 3; variant++) {
            qkv_gen_opts o = qkv_gen_defaults();
            o.max_new_tokens = 10;
            if (variant == 1) {
                o.sample.temperature = 1.2f;
                o.sample.top_k = 6;
                o.seed = 11;
            }
            if (variant == 2) { /* greedy again, stopping at the third token prompt 1 chose */
                o.stop = &stop;
                o.n_stop = 1;
            }
            gen_collect c = {0};
            CHECK_OK(qkv_generate_batch(b.t, b.m, N, prompts, lens, &o, 4, gen_take, &c));
            int ended[4] = {0};
            for (int i = 0; i < N; i++) {
                CHECKF(c.order[i] == i, "emitted %d as #%d", c.order[i], i);
                int32_t out[32];
                qkv_gen_end end;
                int64_t n = qkv_generate(one, prompts[i], lens[i], &o, out, 32, &end);
                CHECKF(n == c.n[i] && end == c.end[i] && !memcmp(out, c.tok[i], sizeof(int32_t) * (size_t)n),
                       "%s variant %d prompt %d: %lld tokens (end %d) alone, %lld (end %d) batched", b.t->name,
                       variant, i, (long long)n, (int)end, (long long)c.n[i], (int)c.end[i]);
                ended[c.end[i]]++;
            }
            if (variant == 0) stop = c.n[1] >= 3 ? c.tok[1][2] : 0;
            if (variant == 2) CHECKF(ended[QKV_GEN_STOP_TOKEN] > 0, "%s: some prompt should stop", b.t->name);
            if (ti == 2 && variant == 0) CHECKF(ended[QKV_GEN_CONTEXT_FULL] > 0, "gpt: the long prompts fill the context");
        }
        qkv_lm_decoder_free(one);
        unbuild(&b);
    }
}

/* qkv_generate_batch starts one decoder state for all its batches when the type can restart one (the GPT), and a
 * state per batch otherwise; both give the same tokens, greedy and sampled, at batch sizes that leave a last batch
 * of one, two or more rows. */
static const qkv_decoder_ops *counted_inner;
static int counted_starts;

static qkv_decoder_state *counted_start(const qkv_model *m, const int32_t *src, const int32_t *lengths, int n_src,
                                        int src_len, int rows_per_src, int max_steps) {
    counted_starts++;
    return counted_inner->start(m, src, lengths, n_src, src_len, rows_per_src, max_steps);
}

TEST(generate_batch_restarts_one_state) {
    built b;
    if (!build("gpt", &b)) return;
    CHECK(b.t->decoder->restart != NULL);
    counted_inner = b.t->decoder;
    qkv_decoder_ops counted = *b.t->decoder, fresh = *b.t->decoder;
    counted.start = fresh.start = counted_start;
    fresh.restart = NULL;
    qkv_model_type reuse_type = *b.t, fresh_type = *b.t;
    reuse_type.decoder = &counted;
    fresh_type.decoder = &fresh;
    const int32_t *prompts[N];
    int64_t lens[N];
    for (int i = 0; i < N; i++) {
        prompts[i] = SRC[i];
        lens[i] = LEN[i];
    }
    static const int sizes[] = {2, 3, 5};
    for (int variant = 0; variant < 2; variant++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            qkv_gen_opts o = qkv_gen_defaults();
            o.max_new_tokens = 6;
            if (variant == 1) {
                o.sample.temperature = 1.0f;
                o.seed = 3;
            }
            gen_collect r = {0}, f = {0};
            counted_starts = 0;
            CHECK_OK(qkv_generate_batch(&reuse_type, b.m, N, prompts, lens, &o, sizes[si], gen_take, &r));
            CHECKF(counted_starts == 1, "batch %d: %d states started, expected one", sizes[si], counted_starts);
            counted_starts = 0;
            CHECK_OK(qkv_generate_batch(&fresh_type, b.m, N, prompts, lens, &o, sizes[si], gen_take, &f));
            CHECKF(counted_starts == (N + sizes[si] - 1) / sizes[si], "batch %d: %d states without restart",
                   sizes[si], counted_starts);
            for (int i = 0; i < N; i++)
                CHECKF(r.order[i] == i && r.n[i] == f.n[i] && r.end[i] == f.end[i] &&
                           !memcmp(r.tok[i], f.tok[i], sizeof(int32_t) * (size_t)r.n[i]),
                       "variant %d batch %d prompt %d: %lld tokens restarted, %lld fresh", variant, sizes[si], i,
                       (long long)r.n[i], (long long)f.n[i]);
        }
    unbuild(&b);
}

/* The GPT's prefill (a prompt but its last token in one batched pass, no output projection) changes no bit of what
 * generation returns: qkv_generate_batch at several batch sizes, qkv_generate (its last logits too) and beam search
 * through the prompted decoder give what the same model gives when every prompt token is a step (its type with the
 * prefill taken out). */
TEST(prefill_changes_nothing) {
    built b;
    if (!build("gpt", &b)) return;
    CHECK(b.t->decoder->prefill != NULL);
    qkv_decoder_ops no_prefill = *b.t->decoder;
    no_prefill.prefill = NULL;
    qkv_model_type stepped = *b.t;
    stepped.decoder = &no_prefill;
    const int32_t *prompts[N];
    int64_t lens[N];
    for (int i = 0; i < N; i++) {
        prompts[i] = SRC[i];
        lens[i] = LEN[i];
    }
    qkv_gen_opts o = qkv_gen_defaults();
    o.max_new_tokens = 3;
    static const int sizes[] = {1, 4, N};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        gen_collect a = {0}, s = {0};
        CHECK_OK(qkv_generate_batch(b.t, b.m, N, prompts, lens, &o, sizes[si], gen_take, &a));
        CHECK_OK(qkv_generate_batch(&stepped, b.m, N, prompts, lens, &o, sizes[si], gen_take, &s));
        for (int i = 0; i < N; i++)
            CHECKF(a.n[i] == s.n[i] && a.end[i] == s.end[i] &&
                       !memcmp(a.tok[i], s.tok[i], sizeof(int32_t) * (size_t)a.n[i]),
                   "batch %d prompt %d: %lld tokens with the prefill, %lld without", sizes[si], i, (long long)a.n[i],
                   (long long)s.n[i]);
    }
    qkv_lm_decoder *one = qkv_lm_decoder_new(b.t, b.m), *one_stepped = qkv_lm_decoder_new(&stepped, b.m);
    CHECK(one && one_stepped);
    for (int i = 0; one && one_stepped && i < N; i++) {
        int32_t x[32], y[32];
        int64_t nx = qkv_generate(one, prompts[i], lens[i], &o, x, 32, NULL);
        int64_t ny = qkv_generate(one_stepped, prompts[i], lens[i], &o, y, 32, NULL);
        CHECKF(nx == ny && nx >= 0 && !memcmp(x, y, sizeof(int32_t) * (size_t)nx) &&
                   !memcmp(qkv_lm_decoder_logits(one), qkv_lm_decoder_logits(one_stepped),
                           sizeof(float) * (size_t)b.d.info.vocab),
               "generate prompt %d: %lld tokens with the prefill, %lld without, or other logits", i, (long long)nx,
               (long long)ny);
    }
    qkv_lm_decoder_free(one);
    qkv_lm_decoder_free(one_stepped);
    qkv_decoder lm, with, without;
    qkv_prompted pw, pn;
    CHECK_OK(qkv_model_decoder(&stepped, b.m, &lm));
    CHECK_OK(qkv_prompted_decoder(&b.d, &pw, &with));
    CHECK_OK(qkv_prompted_decoder(&lm, &pn, &without));
    qkv_decode_opts d = opts_for(&b);
    d.beam = 3;
    d.n_best = 2;
    d.max_len = 4;
    for (int i = 0; i < N; i++) {
        d.bos = SRC[i][LEN[i] - 1]; /* the prompt's last token, fed by the search's first step */
        qkv_hyps hw = {0}, hn = {0};
        CHECK_OK(qkv_decode_beam(&with, SRC[i], LEN[i], &d, &hw));
        CHECK_OK(qkv_decode_beam(&without, SRC[i], LEN[i], &d, &hn));
        CHECKF(hw.n == hn.n, "beam prompt %d: %d and %d hypotheses", i, hw.n, hn.n);
        for (int k = 0; k < hw.n && k < hn.n; k++)
            CHECKF(hw.h[k].len == hn.h[k].len && hw.h[k].logprob == hn.h[k].logprob &&
                       !memcmp(hw.h[k].tokens, hn.h[k].tokens, sizeof(int32_t) * (size_t)hw.h[k].len),
                   "beam prompt %d hypothesis %d differs with the prefill", i, k);
        qkv_hyps_free(&hw);
        qkv_hyps_free(&hn);
    }
    unbuild(&b);
}

/* Bit for bit: log-probabilities and scores too, not within a tolerance. */
static void identical_hyps(const char *what, const qkv_hyps *a, const qkv_hyps *b, int i) {
    same_hyps(what, a, b, i);
    for (int k = 0; k < a->n && k < b->n; k++)
        CHECKF(a->h[k].logprob == b->h[k].logprob && a->h[k].score == b->h[k].score,
               "%s #%d hyp %d: logprob %.9g vs %.9g", what, i, k, a->h[k].logprob, b->h[k].logprob);
}

/* Beam search without repetition rules scans the raw logits minus each row's log_softmax shift; with a rule it scans
 * the normalised rows. A rule that can never fire (no n-gram longer than any hypothesis repeats) takes the second
 * path with nothing banned: every hypothesis, log-probability and score the same bits as the first. */
TEST(beam_from_raw_logits_equals_normalised) {
    for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++) {
        built b;
        if (!build(TYPES[ti], &b)) continue;
        qkv_decode_opts o = opts_for(&b);
        o.beam = 3;
        o.n_best = 3;
        collect raw, norm;
        if (run_batch(&b, &o, QKV_SEARCH_BEAM, 4, 0, &raw) == QKV_OK) {
            o.no_repeat_ngram = 2 * MAXLEN + 40; /* longer than any prompt plus hypothesis */
            if (run_batch(&b, &o, QKV_SEARCH_BEAM, 4, 0, &norm) == QKV_OK) {
                for (int i = 0; i < N; i++) identical_hyps(b.t->name, &raw.got[i], &norm.got[i], i);
                collect_free(&norm);
            }
            collect_free(&raw);
        }
        unbuild(&b);
    }
}

/* Calls inside a keep scope reuse the packs and state memory of the calls before them (and of each other's
 * batches): every hypothesis is the one a call outside the scope gives, for greedy and beam, and after the scope
 * closes (nested opens: the inner close keeps) calls still give it. */
TEST(kept_workspaces_change_nothing) {
    for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++) {
        built b;
        if (!build(TYPES[ti], &b)) continue;
        qkv_decode_opts o = opts_for(&b);
        o.beam = 3;
        o.n_best = 2;
        for (int s = 0; s < 2; s++) {
            qkv_search search = s ? QKV_SEARCH_BEAM : QKV_SEARCH_GREEDY;
            /* Each call inside the scope against a call outside it with the same batch size: batches of 3 and of 4
             * compact differently, and a row left alone in its batch is a GEMV, not the packed product, so two batch
             * sizes may differ in the last bit (decode_batch.h). */
            collect ref, ref3, kept[3], after;
            if (run_batch(&b, &o, search, 4, 0, &ref)) continue;
            if (run_batch(&b, &o, search, 3, 0, &ref3)) {
                collect_free(&ref);
                continue;
            }
            qkv_decode_keep_open();
            qkv_decode_keep_open();
            for (int r = 0; r < 3; r++) run_batch(&b, &o, search, r == 1 ? 3 : 4, 0, &kept[r]);
            qkv_decode_keep_close();
            run_batch(&b, &o, search, 4, 0, &after);
            qkv_decode_keep_close();
            for (int i = 0; i < N; i++) {
                for (int r = 0; r < 3; r++) identical_hyps(b.t->name, r == 1 ? &ref3.got[i] : &ref.got[i], &kept[r].got[i], i);
                identical_hyps(b.t->name, &ref.got[i], &after.got[i], i);
            }
            collect_free(&ref);
            collect_free(&ref3);
            for (int r = 0; r < 3; r++) collect_free(&kept[r]);
            collect_free(&after);
            run_batch(&b, &o, search, 4, 0, &ref); /* closed: packs made and released within the call again */
            collect_free(&ref);
        }
        unbuild(&b);
    }
}

/* The kept packs belong to their model's weights as they are now. Inside one open scope: two models of the same
 * shapes decoded in turn each give their own hypotheses; a model whose weights are replaced in place (a checkpoint
 * loaded into it: the same addresses, where packs are looked up) gives the new weights' hypotheses; and so does a
 * model built after another was freed (the allocator may hand it the freed one's addresses). */
TEST(kept_workspaces_follow_the_model) {
    char path[64];
    snprintf(path, sizeof path, "decode_batch_keep_%d.safetensors", (int)getpid());
    for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++) {
        for (int s = 0; s < 2; s++) {
            qkv_search search = s ? QKV_SEARCH_BEAM : QKV_SEARCH_GREEDY;
            built a, b;
            if (!build_seeded(TYPES[ti], 23, &a)) continue;
            if (!build_seeded(TYPES[ti], 31, &b)) {
                unbuild(&a);
                continue;
            }
            qkv_decode_opts o = opts_for(&a);
            o.beam = 3;
            o.n_best = 2;
            collect ref_a, ref_b, got_a, got_b, again_a, loaded, rebuilt;
            run_batch(&a, &o, search, 4, 0, &ref_a);
            run_batch(&b, &o, search, 4, 0, &ref_b);
            bool differ = false;
            for (int i = 0; i < N; i++)
                for (int k = 0; k < ref_a.got[i].n && k < ref_b.got[i].n; k++)
                    differ |= ref_a.got[i].h[k].logprob != ref_b.got[i].h[k].logprob;
            CHECKF(differ, "%s: the two seeds' models decode alike: a mix-up would go unseen", TYPES[ti]);
            CHECK_OK(qkv_checkpoint_save(path, b.p, NULL, NULL, NULL));
            qkv_decode_keep_open();
            run_batch(&a, &o, search, 4, 0, &got_a);
            run_batch(&b, &o, search, 4, 0, &got_b);
            run_batch(&a, &o, search, 4, 0, &again_a);
            CHECK_OK(qkv_checkpoint_load(path, a.p, NULL, NULL, NULL)); /* a now holds b's weights */
            run_batch(&a, &o, search, 4, 0, &loaded);
            unbuild(&a);
            built c;
            bool built_c = build_seeded(TYPES[ti], 31, &c);
            if (built_c) run_batch(&c, &o, search, 4, 0, &rebuilt);
            qkv_decode_keep_close();
            for (int i = 0; i < N; i++) {
                identical_hyps("first model in the scope", &ref_a.got[i], &got_a.got[i], i);
                identical_hyps("second model in the scope", &ref_b.got[i], &got_b.got[i], i);
                identical_hyps("first model again", &ref_a.got[i], &again_a.got[i], i);
                identical_hyps("weights loaded in place", &ref_b.got[i], &loaded.got[i], i);
                if (built_c) identical_hyps("model built after a free", &ref_b.got[i], &rebuilt.got[i], i);
            }
            collect_free(&ref_a);
            collect_free(&ref_b);
            collect_free(&got_a);
            collect_free(&got_b);
            collect_free(&again_a);
            collect_free(&loaded);
            if (built_c) {
                collect_free(&rebuilt);
                unbuild(&c);
            }
            unbuild(&b);
        }
    }
    remove(path);
}

TEST(bad_input_is_an_error) {
    built b;
    if (!build("transformer_seq2seq", &b)) return;
    qkv_decode_opts o = opts_for(&b);
    qkv_batch_opts bo = qkv_batch_defaults();
    collect c = {0};
    int len = 0;
    const int32_t *src[1] = {SRC[0]};
    CHECK(qkv_decode_batch(&b.d, 1, NULL, NULL, NULL, &o, &bo, take, &c) == QKV_ERR_INVALID);
    CHECK(qkv_decode_batch(&b.d, 1, src, &len, NULL, &o, &bo, take, &c) == QKV_ERR_INVALID);
    bo.batch_size = 0;
    len = 1;
    CHECK(qkv_decode_batch(&b.d, 1, src, &len, NULL, &o, &bo, take, &c) == QKV_ERR_INVALID);
    bo = qkv_batch_defaults();
    bo.search = QKV_SEARCH_BEAM;
    o.n_best = 5;
    CHECK(qkv_decode_batch(&b.d, 1, src, &len, NULL, &o, &bo, take, &c) == QKV_ERR_INVALID);
    CHECK(c.n == 0);
    unbuild(&b);
}

int main(void) {
    make_sources();
    RUN(greedy_equals_one_at_a_time);
    RUN(beam_equals_one_at_a_time);
    RUN(sampling_does_not_depend_on_the_batch);
    RUN(generate_batch_equals_one_prompt_at_a_time);
    RUN(generate_batch_restarts_one_state);
    RUN(prefill_changes_nothing);
    RUN(beam_from_raw_logits_equals_normalised);
    RUN(kept_workspaces_change_nothing);
    RUN(kept_workspaces_follow_the_model);
    RUN(bad_input_is_an_error);
    return test_finish();
}
