/* The reformer_lm model type: a character-level Reformer (LSH attention, two hash rounds, chunked feed-forward,
 * reversible blocks) trained for a few hundred steps on a slice of Jane Austen ($QKV_SHARED/data/lm) brings the
 * dev loss well below the unigram level; mixed full / LSH layers and axial positions build and train; the model
 * keeps activation memory flat in depth; config errors name the key; the cached decoder gives the recomputing
 * decoder's scores (full attention at any length, LSH within one chunk); generation ends cleanly at the context
 * (the start token counts). Learning is skipped (visibly) without the shared data. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "qkv/decode.h"
#include "qkv/model.h"
#include "qkv/reformer.h"
#include "qkv/threads.h"
#include "test.h"

enum { TRAIN_BYTES = 300000, DEV_BYTES = 20000, B = 16, T = 64 };

/* Trains reformer_lm with the model config for `steps` AdamW steps; the dev loss (nats), or NAN; *first_loss the
 * first step's training loss. The model reads its inputs from the targets, so batches carry targets alone. */
static double train_and_eval(const test_char_corpus *c, const char *json, int steps, float lr, double *first_loss) {
    test_char_lm lm;
    test_char_lm_train(&lm, c, "reformer_lm", json, json, steps, lr, B, T, false);
    if (lm.model) *first_loss = lm.first_loss;
    double dev = lm.dev_loss;
    test_char_lm_free(&lm);
    return dev;
}

TEST(char_reformer_learns) {
    test_char_corpus c;
    if (!test_char_corpus_load(&c, TRAIN_BYTES, DEV_BYTES)) {
        test_skip("QKV_SHARED/data/lm/{train,dev}.txt not found (set QKV_SHARED)");
        return;
    }
    double h = test_char_corpus_entropy(&c), first = NAN;
    /* Under the sanitizers (an unoptimised build, ~30x slower) a short run that must only make progress. */
    const bool sanitized = getenv("QKV_SANITIZED") != NULL;
    printf("  unigram entropy of the slice: %.3f nats\n", h);
    double lsh = train_and_eval(&c, "{\"d_model\": 64, \"n_heads\": 2, \"d_head\": 32, \"d_ff\": 128, "
                                    "\"n_layers\": 2, \"chunk_len\": 16, \"n_hashes\": 2, \"ff_chunk\": 256}",
                                sanitized ? 20 : 200, 3e-3f, &first);
    if (sanitized) CHECKF(lsh < first - 0.5, "reformer dev loss %.3f not below its first loss %.3f - 0.5", lsh, first);
    else CHECKF(lsh < h - 0.5, "reformer dev loss %.3f not below unigram %.3f - 0.5", lsh, h);
    double mixed = train_and_eval(&c, "{\"d_model\": 48, \"n_heads\": 2, \"d_head\": 24, \"d_ff\": 96, "
                                      "\"n_layers\": 2, \"chunk_len\": 8, \"attention\": \"full,lsh\", "
                                      "\"positions\": \"axial\"}",
                                  sanitized ? 10 : 60, 3e-3f, &first);
    CHECKF(isfinite(mixed) && mixed < (sanitized ? first : h), "mixed / axial reformer dev loss %.3f too high", mixed);
    test_char_corpus_free(&c);
}

/* Peak arena of one training step with 2 and 8 layers: the reversible blocks keep it nearly flat (the extra
 * layers add their saved generator states, not activations). */
TEST(training_memory_flat_in_depth) {
    const qkv_model_type *type = qkv_model_type_find("reformer_lm");
    size_t peak[2];
    for (int k = 0; k < 2; k++) {
        char json[200];
        snprintf(json, sizeof json, "{\"d_model\": 64, \"n_heads\": 2, \"d_head\": 32, \"d_ff\": 128, "
                 "\"n_layers\": %d, \"chunk_len\": 32}", k ? 8 : 2);
        cJSON *cfg = cJSON_Parse(json);
        qkv_task_info info = {.vocab_size = 50, .max_len = 512};
        qkv_params *params = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 5);
        qkv_model *m = type ? type->create(cfg, &info, params, &rng) : NULL;
        CHECKF(m != NULL, "%s", qkv_last_error());
        qkv_ctx *ctx = qkv_ctx_new();
        qkv_tensor *tg = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(2, 512));
        for (int64_t i = 0; i < 1024; i++) qkv_i32(tg)[i] = (int32_t)((i * 7) % 50);
        qkv_batch b = {.targets = tg, .n_tokens = 1024};
        qkv_tensor *loss = m ? type->loss(ctx, m, &b) : NULL;
        CHECK(loss && qkv_backward(ctx, loss) == QKV_OK);
        peak[k] = qkv_ctx_arena_peak(ctx);
        qkv_ctx_free(ctx);
        if (m) type->free(m);
        qkv_params_free(params);
        cJSON_Delete(cfg);
    }
    printf("  peak arena of a step, T = 512: 2 layers %zu bytes, 8 layers %zu bytes\n", peak[0], peak[1]);
    CHECK(peak[1] < peak[0] + 16384);
}

TEST(config_errors_name_the_key) {
    const qkv_model_type *type = qkv_model_type_find("reformer_lm");
    qkv_task_info info = {.vocab_size = 20, .max_len = 64};
    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"attention\": \"lsh,sparse\"}", "model.attention"},
        {"{\"n_buckets\": 3}", "model.n_buckets"},
        {"{\"n_ctx\": 100, \"chunk_len\": 64}", "model.n_ctx"},
        {"{\"positions\": \"axial\", \"axial_shape\": \"3,5\"}", "model.axial_shape"},
    };
    for (size_t i = 0; type && i < sizeof bad / sizeof *bad; i++) {
        cJSON *cfg = cJSON_Parse(bad[i].json);
        qkv_params *params = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 1);
        qkv_model *m = type->create(cfg, &info, params, &rng);
        CHECKF(!m && strstr(qkv_last_error(), bad[i].needle), "%s: %s", bad[i].json, qkv_last_error());
        if (m) type->free(m);
        qkv_params_free(params);
        cJSON_Delete(cfg);
    }
}

/* A model of the given attention pattern with random weights, decoding cache on or off (same weights). */
static qkv_model *small_model(const qkv_model_type *type, const char *attention, bool cache, qkv_params *params) {
    char json[320];
    snprintf(json, sizeof json, "{\"d_model\": 32, \"n_heads\": 2, \"d_head\": 16, \"d_ff\": 64, \"n_layers\": 3, "
             "\"attention\": \"%s\", \"chunk_len\": 16, \"n_hashes\": 2, \"n_ctx\": 64, \"decode_cache\": %s}",
             attention, cache ? "true" : "false");
    cJSON *cfg = cJSON_Parse(json);
    qkv_task_info info = {.vocab_size = 11, .max_len = 64};
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    qkv_model *m = type->create(cfg, &info, params, &rng);
    CHECKF(m != NULL, "%s: %s", json, qkv_last_error());
    cJSON_Delete(cfg);
    return m;
}

/* The cached decoder against the recomputing one, teacher-forced on random tokens (2 rows, then reordered) and
 * greedy: full attention layers agree at every length; a model with LSH layers agrees while the history fits in one
 * chunk (16 positions), beyond which the two choose different keys by design (docs/reformer.md). */
TEST(cached_decoding_matches_recompute) {
    const qkv_model_type *type = qkv_model_type_find("reformer_lm");
    const char *patterns[] = {"full", "full,lsh"};
    for (int pi = 0; type && pi < 2; pi++) {
        const int steps = pi == 0 ? 48 : 16, V = 11;
        qkv_params *pa = qkv_params_new(), *pb = qkv_params_new();
        qkv_model *ma = small_model(type, patterns[pi], true, pa), *mb = small_model(type, patterns[pi], false, pb);
        if (!ma || !mb) break;
        qkv_decoder_state *da = type->decoder->start(ma, NULL, NULL, 2, 0, 1, 64);
        qkv_decoder_state *db = type->decoder->start(mb, NULL, NULL, 2, 0, 1, 64);
        CHECK_NN(da);
        CHECK_NN(db);
        qkv_rng rng;
        qkv_rng_init(&rng, 17);
        float sa[22], sb[22];
        double worst = 0;
        int32_t tok[2] = {0, 0}, greedy_a[2], greedy_b[2];
        int same_greedy = 0;
        for (int s = 0; da && db && s < steps; s++) {
            if (s == steps / 2) { /* beam-style reorder: both rows take row 1's history */
                const int32_t from[2] = {1, 1};
                CHECK_OK(type->decoder->reorder(da, from, 2));
                CHECK_OK(type->decoder->reorder(db, from, 2));
            }
            CHECK_OK(type->decoder->step(da, tok, sa, NULL));
            CHECK_OK(type->decoder->step(db, tok, sb, NULL));
            for (int r = 0; r < 2; r++) {
                int ba = 0, bb = 0;
                for (int v = 0; v < V; v++) {
                    double e = fabs(sa[r * V + v] - sb[r * V + v]);
                    worst = e > worst ? e : worst;
                    if (sa[r * V + v] > sa[r * V + ba]) ba = v;
                    if (sb[r * V + v] > sb[r * V + bb]) bb = v;
                }
                greedy_a[r] = ba, greedy_b[r] = bb;
                same_greedy += ba == bb;
            }
            /* row 0 follows its greedy token, row 1 random tokens */
            tok[0] = greedy_a[0];
            tok[1] = (int32_t)qkv_rng_below(&rng, (uint32_t)V);
        }
        printf("  %s: %d steps, max |cached - recomputed| logit %.2g, greedy equal %d / %d\n", patterns[pi], steps,
               worst, same_greedy, 2 * steps);
        CHECKF(worst < 1e-4, "%s: %g", patterns[pi], worst);
        CHECK(same_greedy == 2 * steps);
        (void)greedy_b;
        type->decoder->free(da);
        type->decoder->free(db);
        type->free(ma);
        type->free(mb);
        qkv_params_free(pa);
        qkv_params_free(pb);
    }
}

/* Beyond one chunk an LSH model's cached decoder still gives finite scores and keeps going to the capacity. */
TEST(cached_lsh_decoding_runs_to_capacity) {
    const qkv_model_type *type = qkv_model_type_find("reformer_lm");
    qkv_params *pa = qkv_params_new();
    qkv_model *m = type ? small_model(type, "lsh", true, pa) : NULL;
    qkv_decoder_state *d = m ? type->decoder->start(m, NULL, NULL, 1, 0, 1, 0) : NULL;
    CHECK_NN(d);
    float sc[11];
    int32_t tok = 3;
    bool finite = true;
    for (int s = 0; d && s < 64; s++) {
        CHECK_OK(type->decoder->step(d, &tok, sc, NULL));
        for (int v = 0; v < 11; v++) finite &= isfinite(sc[v]) != 0;
        tok = (tok * 7 + 1) % 11;
    }
    CHECK(finite);
    CHECK(d && type->decoder->step(d, &tok, sc, NULL) == QKV_ERR_RANGE);
    if (d) type->decoder->free(d);
    if (m) type->free(m);
    qkv_params_free(pa);
}

typedef struct {
    int64_t n;
    qkv_gen_end end;
} batch_result;

static qkv_status keep_result(int index, const int32_t *tokens, int64_t n, qkv_gen_end end, void *user) {
    (void)tokens;
    ((batch_result *)user)[index] = (batch_result){n, end};
    return QKV_OK;
}

/* The start token (ShiftRight) takes one of the 64 positions: a generation longer than the context ends with
 * QKV_GEN_CONTEXT_FULL when the positions are used up (1 + 2 prompt + 61 fed, 62 tokens), not with an error one step
 * later, in qkv_generate and qkv_generate_batch alike; a prompt of 63 tokens still gets its one token, 64 are
 * refused before any work. (qkv chat --max-tokens beyond the context ran into that error.) */
TEST(generation_ends_at_capacity_after_start_token) {
    const qkv_model_type *type = qkv_model_type_find("reformer_lm");
    qkv_params *pa = qkv_params_new();
    qkv_model *m = type ? small_model(type, "full,lsh", true, pa) : NULL;
    qkv_lm_decoder *d = m ? qkv_lm_decoder_new(type, m) : NULL;
    CHECK_NN(d);
    int32_t prompt[64], out[101];
    for (int i = 0; i < 64; i++) prompt[i] = (int32_t)(i * 5 % 11);
    qkv_gen_opts o = qkv_gen_defaults();
    o.max_new_tokens = 100;
    qkv_gen_end end = QKV_GEN_MAX_TOKENS;
    int64_t n = d ? qkv_generate(d, prompt, 2, &o, out, 100, &end) : -1;
    CHECKF(n == 62 && end == QKV_GEN_CONTEXT_FULL, "got %lld tokens, end %d: %s", (long long)n, (int)end,
           n < 0 ? qkv_last_error() : "");
    n = d ? qkv_generate(d, prompt, 63, &o, out, 100, &end) : -1;
    CHECKF(n == 1 && end == QKV_GEN_CONTEXT_FULL, "63-token prompt: %lld tokens", (long long)n);
    CHECK(d && qkv_generate(d, prompt, 64, &o, out, 100, &end) < 0 && strstr(qkv_last_error(), "start token"));
    const int32_t *prompts[2] = {prompt, prompt};
    const int64_t lens[2] = {2, 63};
    batch_result got[2] = {{-1, QKV_GEN_MAX_TOKENS}, {-1, QKV_GEN_MAX_TOKENS}};
    if (m) CHECKF(qkv_generate_batch(type, m, 2, prompts, lens, &o, 2, keep_result, got) == QKV_OK, "%s",
                  qkv_last_error());
    CHECKF(got[0].n == 62 && got[0].end == QKV_GEN_CONTEXT_FULL && got[1].n == 1 && got[1].end == QKV_GEN_CONTEXT_FULL,
           "batch: %lld (end %d), %lld (end %d)", (long long)got[0].n, (int)got[0].end, (long long)got[1].n,
           (int)got[1].end);
    const int64_t too_long[1] = {64};
    CHECK(m && qkv_generate_batch(type, m, 1, prompts, too_long, &o, 1, keep_result, got) != QKV_OK);
    qkv_lm_decoder_free(d);
    if (m) type->free(m);
    qkv_params_free(pa);
}

/* The public options: the defaults are the schema's, a config built from them creates the model, a bad value or a
 * broken rule names its key. */
TEST(public_options) {
    qkv_reformer_opts o = qkv_reformer_defaults();
    CHECK(o.d_model == 256 && o.chunk_len == 64 && o.n_hashes == 1 && o.decode_cache && o.shift_right &&
          o.factorize_above == QKV_LSH_FACTORIZE_ABOVE && !strcmp(o.attention, "lsh"));
    o.d_model = 16, o.d_head = 8, o.d_ff = 32, o.n_ctx = 128, o.chunk_len = 32, o.attention = "full,lsh";
    cJSON *cfg = qkv_reformer_config(&o);
    CHECKF(cfg != NULL, "%s", qkv_last_error());
    const qkv_model_type *type = qkv_reformer_model_type();
    CHECK(type == qkv_model_type_find(type->name));
    qkv_task_info info = {.vocab_size = 7, .max_len = 128};
    qkv_params *params = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 2);
    qkv_model *m = cfg ? type->create(cfg, &info, params, &rng) : NULL;
    CHECKF(m != NULL, "%s", qkv_last_error());
    qkv_model_info mi = {0};
    if (m) type->info(m, &mi);
    CHECK(mi.max_positions == 128);
    if (m) type->free(m);
    cJSON_Delete(cfg);
    o.n_buckets = 3;
    CHECK(!qkv_reformer_config(&o) && strstr(qkv_last_error(), "model.n_buckets"));
    o.n_buckets = 0;
    o.n_ctx = 100;
    CHECK(!qkv_reformer_config(&o) && strstr(qkv_last_error(), "model.n_ctx"));
    o.n_ctx = 128;
    o.n_hashes = 0;
    CHECK(!qkv_reformer_config(&o) && strstr(qkv_last_error(), "n_hashes"));
    qkv_params_free(params);
}

int main(void) {
    qkv_threads_set(1); /* small models: threads gain nothing and the machine is shared */
    RUN(char_reformer_learns);
    RUN(training_memory_flat_in_depth);
    RUN(config_errors_name_the_key);
    RUN(cached_decoding_matches_recompute);
    RUN(cached_lsh_decoding_runs_to_capacity);
    RUN(generation_ends_at_capacity_after_start_token);
    RUN(public_options);
    return test_finish();
}
