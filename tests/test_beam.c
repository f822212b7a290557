/* Decoding: beam search against brute-force enumeration on a tiny model, beam 1 == greedy, scores are the model's
 * log-probabilities, sampling, MBR consensus, attention alignments and bad options. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/beam.h"
#include "qkv/seq2seq.h"
#include "test.h"

typedef struct tiny {
    qkv_params *p;
    qkv_tf_s2s m;
    qkv_decoder d;
} tiny;

/* Transformer with target vocabulary V (0 pad, 1 BOS, 2 EOS, the rest words); generator sharpened so the
 * distributions are far from uniform. */
static void tiny_init(tiny *t, int64_t V, uint64_t seed, float sharpen) {
    qkv_tf_s2s_config c = {.src_vocab = 9, .tgt_vocab = V, .block = qkv_nn_block_config_default(8, 2),
                           .n_enc_layers = 1, .n_dec_layers = 2, .max_len = 16};
    c.block.dim_feedforward = 16;
    c.block.dropout = 0.0f;
    qkv_rng rng;
    qkv_rng_init(&rng, seed);
    t->p = qkv_params_new();
    CHECK_OK(qkv_tf_s2s_init(&t->m, t->p, &c, &rng));
    float *w = qkv_f32(t->m.gen.weight);
    for (int64_t i = 0; i < qkv_numel(t->m.gen.weight); i++) w[i] *= sharpen;
    t->d = qkv_tf_s2s_decoder(&t->m);
}

static void tiny_free(tiny *t) { qkv_params_free(t->p); }

/* log p(seq | src) by the teacher-forced forward (no banning: banned tokens never appear in seq). */
static double seq_logprob(tiny *t, const int32_t *src, int S, const int32_t *seq, int len) {
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_grad(ctx, false);
    qkv_tensor *s = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, S)), *y = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, len));
    memcpy(s->data, src, sizeof(int32_t) * (size_t)S);
    qkv_i32(y)[0] = 1;
    for (int i = 1; i < len; i++) qkv_i32(y)[i] = seq[i - 1];
    qkv_tensor *lp = qkv_contiguous(ctx, qkv_log_softmax(ctx, qkv_tf_s2s_forward(ctx, &t->m, s, NULL, y, NULL), -1));
    double sum = 0;
    for (int i = 0; lp && i < len; i++) sum += qkv_f32(lp)[i * t->d.info.vocab + seq[i]];
    qkv_ctx_free(ctx);
    return lp ? sum : NAN;
}

typedef struct {
    int32_t tok[8];
    int len;
    double logprob, score;
} seq;

static int cmp_seq(const void *a, const void *b) {
    const seq *x = a, *y = b;
    return (x->score < y->score) - (x->score > y->score);
}

/* Every sequence beam search can produce over words {2, 3, 4}: EOS-terminated ones of length 1..L and unfinished
 * ones of exactly length L. */
static int enumerate(tiny *t, const int32_t *src, int S, int L, float alpha, seq *out) {
    int n = 0;
    for (int len = 1; len <= L; len++) {
        int words = len - 1, count = 1;
        for (int i = 0; i < words; i++) count *= 2;
        for (int k = 0; k < count; k++) {
            seq s = {.len = len};
            for (int i = 0; i < words; i++) s.tok[i] = 3 + ((k >> i) & 1);
            s.tok[words] = 2;
            out[n++] = s;
            if (len == L) { /* the same prefix + a last word, unfinished */
                for (int last = 3; last <= 4; last++) {
                    seq u = s;
                    u.tok[words] = last;
                    out[n++] = u;
                }
            }
        }
    }
    for (int i = 0; i < n; i++) {
        out[i].logprob = seq_logprob(t, src, S, out[i].tok, out[i].len);
        out[i].score = out[i].logprob / qkv_length_penalty(out[i].len, alpha);
    }
    qsort(out, (size_t)n, sizeof *out, cmp_seq);
    return n;
}

TEST(beam_equals_brute_force) {
    tiny t;
    tiny_init(&t, 5, 11, 4.0f); /* words 3, 4 plus EOS: 2 choices + EOS per step */
    const int32_t src[4] = {3, 5, 7, 4};
    enum { L = 4 };
    seq all[64];
    for (int a = 0; a < 2; a++) {
        float alpha = a ? 0.6f : 0.0f;
        int n = enumerate(&t, src, 4, L, alpha, all);
        qkv_decode_opts o = qkv_decode_defaults();
        o.max_len = L;
        o.beam = 8; /* >= 2^(L-1) live prefixes: the search is exhaustive */
        o.n_best = 8;
        o.alpha = alpha;
        qkv_hyps hs;
        CHECK_OK(qkv_decode_beam(&t.d, src, 4, &o, &hs));
        CHECK(hs.n == 8 && n >= 8);
        double worst = 0;
        for (int i = 0; i < hs.n && i < n; i++) {
            const qkv_hyp *h = &hs.h[i];
            bool same = h->len == all[i].len && !memcmp(h->tokens, all[i].tok, sizeof(int32_t) * (size_t)h->len);
            CHECKF(same, "alpha %g: hypothesis %d differs from brute force", (double)alpha, i);
            CHECK(h->finished == (h->tokens[h->len - 1] == 2));
            double e = fmax(fabs(h->logprob - all[i].logprob), fabs(h->score - all[i].score));
            if (e > worst) worst = e;
        }
        printf("  alpha %.1f: %d sequences enumerated, best %.4f (len %d); max |score diff| %.2g\n", (double)alpha, n,
               all[0].score, all[0].len, worst);
        CHECK(worst < 1e-4);
        qkv_hyps_free(&hs);
    }
    tiny_free(&t);
}

TEST(beam1_equals_greedy) {
    tiny t;
    tiny_init(&t, 20, 12, 3.0f);
    qkv_f32(t.m.gen.bias)[2] += 2.5f; /* EOS likely enough that some outputs finish early and some do not */
    enum { N = 4, S = 5 };
    const int32_t src[N * S] = {3, 4, 5, 6, 7, 8, 2, 3, 0, 0, 5, 5, 5, 5, 1, 7, 6, 5, 4, 3};
    const int32_t lengths[N] = {5, 3, 5, 5};
    qkv_decode_opts o = qkv_decode_defaults();
    o.max_len = 12;
    o.beam = 1;
    o.alpha = 0.0f;
    o.want_attention = true;
    qkv_hyps g;
    CHECK_OK(qkv_decode_greedy(&t.d, src, lengths, N, S, &o, &g));
    CHECK(g.n == N);
    int finished = 0;
    for (int i = 0; i < N && i < g.n; i++) {
        qkv_hyps b;
        CHECK_OK(qkv_decode_beam(&t.d, src + i * S, lengths[i], &o, &b));
        CHECK(b.n == 1);
        if (b.n != 1) continue;
        CHECKF(b.h[0].len == g.h[i].len && !memcmp(b.h[0].tokens, g.h[i].tokens, sizeof(int32_t) * (size_t)b.h[0].len),
               "sentence %d: beam 1 differs from greedy", i);
        CHECK(fabs(b.h[0].logprob - g.h[i].logprob) < 1e-5);
        /* the score is the model's log-probability */
        double lp = seq_logprob(&t, src + i * S, lengths[i], g.h[i].tokens, g.h[i].len);
        CHECKF(fabs(lp - g.h[i].logprob) < 1e-4, "sentence %d: logprob %g, teacher-forced %g", i, g.h[i].logprob, lp);
        finished += g.h[i].finished;
        /* alignments: one row per token, a distribution over the unpadded source */
        CHECK(g.h[i].attn && g.h[i].src_len == S && b.h[0].attn);
        for (int k = 0; g.h[i].attn && k < g.h[i].len; k++) {
            double sum = 0;
            for (int s = 0; s < S; s++) sum += g.h[i].attn[k * S + s];
            CHECK(fabs(sum - 1) < 1e-5);
            if (i == 1) CHECK(g.h[i].attn[k * S + 3] == 0.0f && g.h[i].attn[k * S + 4] == 0.0f);
        }
        qkv_hyps_free(&b);
    }
    printf("  %d of %d greedy outputs ended with EOS\n", finished, N);
    CHECK(finished > 0);
    qkv_hyps_free(&g);
    tiny_free(&t);
}

TEST(sampling) {
    tiny t;
    tiny_init(&t, 12, 13, 3.0f);
    const int32_t src[4] = {3, 4, 5, 6};
    qkv_decode_opts o = qkv_decode_defaults();
    o.max_len = 8;
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    qkv_hyps g, s;
    CHECK_OK(qkv_decode_greedy(&t.d, src, NULL, 1, 4, &o, &g));
    o.temperature = 1e-3f; /* ~argmax */
    CHECK_OK(qkv_decode_sample(&t.d, src, 4, 3, &o, &rng, &s));
    for (int i = 0; i < s.n; i++)
        CHECK(s.h[i].len == g.h[0].len && !memcmp(s.h[i].tokens, g.h[0].tokens, sizeof(int32_t) * (size_t)s.h[i].len));
    qkv_hyps_free(&s);
    o.temperature = 1.0f;
    CHECK_OK(qkv_decode_sample(&t.d, src, 4, 32, &o, &rng, &s));
    int distinct = 0;
    for (int i = 0; i < s.n; i++) {
        CHECK(fabs(seq_logprob(&t, src, 4, s.h[i].tokens, s.h[i].len) - s.h[i].logprob) < 1e-4);
        for (int k = 0; k < s.h[i].len; k++) CHECK(s.h[i].tokens[k] != 0 && s.h[i].tokens[k] != 1);
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = s.h[j].len == s.h[i].len && !memcmp(s.h[j].tokens, s.h[i].tokens, sizeof(int32_t) * (size_t)s.h[i].len);
        distinct += !seen;
    }
    printf("  32 samples at temperature 1: %d distinct\n", distinct);
    CHECK(distinct > 1);
    qkv_hyps_free(&s);
    qkv_hyps_free(&g);
    tiny_free(&t);
}

TEST(mbr_picks_consensus) {
    const char *cands[] = {"a dog ran away", "the cat sat on a mat", "the cat sat on the mat",
                           "the cat sat on the mat today", "completely unrelated words here", "the cat sat on the mat"};
    int n = 6;
    for (int u = QKV_MBR_BLEU; u <= QKV_MBR_ROUGE_2; u++) {
        int best = -1;
        double e[6];
        CHECK_OK(qkv_mbr_select(cands, n, (qkv_mbr_utility)u, &best, e));
        printf("  utility %d: best %d (expected %.3f; outlier %.3f)\n", u, best, best >= 0 ? e[best] : 0.0, e[4]);
        CHECKF(best == 2, "utility %d picked %d", u, best);
    }
    int best = -1;
    CHECK_OK(qkv_mbr_select(cands, 1, QKV_MBR_BLEU, &best, NULL));
    CHECK(best == 0);
    qkv_mbr_utility u;
    CHECK(qkv_mbr_utility_parse("rougeL", &u) && u == QKV_MBR_ROUGE_L && !qkv_mbr_utility_parse("meteor", &u));
    CHECK(qkv_mbr_select(cands, 0, QKV_MBR_BLEU, &best, NULL) != QKV_OK);

    /* MBR decoding with near-greedy samples returns the greedy output */
    tiny t;
    tiny_init(&t, 12, 14, 3.0f);
    const int32_t src[4] = {3, 4, 5, 6};
    qkv_decode_opts o = qkv_decode_defaults();
    o.max_len = 8;
    o.n_samples = 6;
    o.temperature = 1e-3f;
    qkv_rng rng;
    qkv_rng_init(&rng, 2);
    qkv_hyps g, m;
    CHECK_OK(qkv_decode_greedy(&t.d, src, NULL, 1, 4, &o, &g));
    CHECK_OK(qkv_decode_mbr(&t.d, src, 4, &o, QKV_MBR_BLEU, NULL, NULL, &rng, &m));
    CHECK(m.n == 1 && m.h[0].len == g.h[0].len &&
          !memcmp(m.h[0].tokens, g.h[0].tokens, sizeof(int32_t) * (size_t)m.h[0].len));
    qkv_hyps_free(&m);
    o.temperature = 1.0f;
    o.n_samples = 10;
    CHECK_OK(qkv_decode_mbr(&t.d, src, 4, &o, QKV_MBR_ROUGE_L, NULL, NULL, &rng, &m));
    CHECK(m.n == 1 && m.h[0].score >= 0 && m.h[0].score <= 1);
    qkv_hyps_free(&m);
    qkv_hyps_free(&g);
    tiny_free(&t);
}

TEST(bad_options_are_errors) {
    tiny t;
    tiny_init(&t, 12, 15, 1.0f);
    const int32_t src[3] = {3, 4, 5}, bad_src[3] = {3, 40, 5};
    qkv_hyps h;
    qkv_rng rng;
    qkv_rng_init(&rng, 3);
    qkv_decode_opts o = qkv_decode_defaults();
    o.n_best = 5;
    CHECK(qkv_decode_beam(&t.d, src, 3, &o, &h) != QKV_OK && strstr(qkv_last_error(), "n_best"));
    o = qkv_decode_defaults();
    o.max_len = 0;
    CHECK(qkv_decode_greedy(&t.d, src, NULL, 1, 3, &o, &h) != QKV_OK && strstr(qkv_last_error(), "max_len"));
    o = qkv_decode_defaults();
    o.eos = o.bos;
    CHECK(qkv_decode_beam(&t.d, src, 3, &o, &h) != QKV_OK && strstr(qkv_last_error(), "distinct"));
    o = qkv_decode_defaults();
    o.eos = 12;
    CHECK(qkv_decode_beam(&t.d, src, 3, &o, &h) != QKV_OK);
    o = qkv_decode_defaults();
    o.temperature = 0.0f;
    CHECK(qkv_decode_sample(&t.d, src, 3, 2, &o, &rng, &h) != QKV_OK && strstr(qkv_last_error(), "temperature"));
    o = qkv_decode_defaults();
    o.alpha = -1.0f;
    CHECK(qkv_decode_beam(&t.d, src, 3, &o, &h) != QKV_OK && strstr(qkv_last_error(), "alpha"));
    o = qkv_decode_defaults();
    o.max_len = 12;
    CHECK(qkv_decode_beam(&t.d, bad_src, 3, &o, &h) != QKV_OK && strstr(qkv_last_error(), "40"));
    o.max_len = 100; /* beyond the model's positions table */
    CHECK(qkv_decode_greedy(&t.d, src, NULL, 1, 3, &o, &h) != QKV_OK && strstr(qkv_last_error(), "max_len"));
    CHECK(h.n == 0 && h.h == NULL);
    tiny_free(&t);
}

int main(void) {
    RUN(beam_equals_brute_force);
    RUN(beam1_equals_greedy);
    RUN(sampling);
    RUN(mbr_picks_consensus);
    RUN(bad_options_are_errors);
    return test_finish();
}
