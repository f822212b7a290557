/* Learning tests: a character-level GPT and GRU LM, built through the model registry, trained for a few hundred
 * steps on a slice of Jane Austen ($QKV_SHARED/data/lm/train.txt), must bring the dev loss well below the unigram
 * level. Skipped (visibly) when the shared data is absent. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/decode.h"
#include "qkv/model.h"
#include "qkv/optim.h"
#include "qkv/threads.h"
#include "test.h"

enum { TRAIN_BYTES = 300000, DEV_BYTES = 20000, B = 16, T = 64 };

typedef struct {
    int32_t *train, *dev;
    int64_t n_train, n_dev, vocab;
    int32_t map[256];
} corpus;

/* Reads up to max bytes of a shared file; NULL (and a SKIP) when absent. */
static unsigned char *read_slice(const char *rel, int64_t max, int64_t *n) {
    const char *path = test_shared_path(rel);
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return NULL;
    unsigned char *buf = malloc((size_t)max);
    *n = buf ? (int64_t)fread(buf, 1, (size_t)max, f) : 0;
    fclose(f);
    return buf;
}

/* Character (byte) vocabulary of the training slice; dev bytes unseen in training map to id 0. */
static bool load_corpus(corpus *c) {
    memset(c, 0, sizeof *c);
    unsigned char *tr = read_slice("data/lm/train.txt", TRAIN_BYTES, &c->n_train);
    unsigned char *dv = read_slice("data/lm/dev.txt", DEV_BYTES, &c->n_dev);
    if (!tr || !dv) {
        free(tr);
        free(dv);
        return false;
    }
    for (int i = 0; i < 256; i++) c->map[i] = -1;
    for (int64_t i = 0; i < c->n_train; i++)
        if (c->map[tr[i]] < 0) c->map[tr[i]] = (int32_t)c->vocab++;
    c->train = malloc(sizeof(int32_t) * (size_t)c->n_train);
    c->dev = malloc(sizeof(int32_t) * (size_t)c->n_dev);
    for (int64_t i = 0; i < c->n_train; i++) c->train[i] = c->map[tr[i]];
    for (int64_t i = 0; i < c->n_dev; i++) c->dev[i] = c->map[dv[i]] < 0 ? 0 : c->map[dv[i]];
    free(tr);
    free(dv);
    return true;
}

/* A batch of B windows: ids = text[s, s+T), targets = text[s+1, s+T+1). */
static void fill_batch(const int32_t *text, int64_t n, qkv_rng *rng, bool sequential, qkv_tensor *ids,
                       qkv_tensor *tg) {
    for (int b = 0; b < B; b++) {
        int64_t s = sequential ? (int64_t)b * T : (int64_t)qkv_rng_below(rng, (uint32_t)(n - T - 1));
        memcpy(qkv_i32(ids) + b * T, text + s, sizeof(int32_t) * T);
        memcpy(qkv_i32(tg) + b * T, text + s + 1, sizeof(int32_t) * T);
    }
}

/* Trains `type` with the JSON model config for `steps` AdamW steps; returns the mean dev loss (nats). */
static double train_and_eval(const corpus *c, const char *type_name, const char *json, int steps, float lr) {
    const qkv_model_type *type = qkv_model_type_find(type_name);
    CHECK_NN(type);
    if (!type) return NAN;
    cJSON *cfg = cJSON_Parse(json);
    qkv_task_info info = {.vocab_size = c->vocab, .max_len = T};
    qkv_params *params = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 99);
    qkv_model *m = type->create(cfg, &info, params, &rng);
    CHECK_NN(m);
    qkv_optim_config oc = qkv_optim_defaults(QKV_ADAMW);
    oc.lr = lr;
    oc.weight_decay = 0.01f;
    qkv_optim *opt = qkv_optim_new(params, &oc);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T)), *tg = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    double first = NAN, dev = NAN;
    for (int s = 0; m && s < steps; s++) {
        qkv_ctx_reset(ctx);
        qkv_optim_zero_grad(opt);
        fill_batch(c->train, c->n_train, &rng, false, ids, tg);
        qkv_batch b = {.ids = ids, .targets = tg, .n_tokens = B * T};
        qkv_tensor *loss = type->loss(ctx, m, &b);
        if (!loss || qkv_backward(ctx, loss) != QKV_OK) {
            CHECKF(false, "%s step %d: %s", type_name, s, qkv_last_error());
            break;
        }
        if (s == 0) first = qkv_f32(loss)[0];
        qkv_clip_grad_norm(params, 1.0f);
        CHECK_OK(qkv_optim_step(opt));
    }
    if (m) {
        qkv_ctx_reset(ctx);
        qkv_ctx_set_grad(ctx, false);
        qkv_ctx_set_training(ctx, false);
        fill_batch(c->dev, c->n_dev, &rng, true, ids, tg);
        qkv_batch b = {.ids = ids, .targets = tg, .n_tokens = B * T};
        qkv_tensor *loss = type->loss(ctx, m, &b);
        CHECK_NN(loss);
        if (loss) dev = qkv_f32(loss)[0];
        printf("  %s: first train loss %.3f, dev loss after %d steps %.3f nats (%.3f bits/char), vocab %lld\n",
               type_name, first, steps, dev, dev / log(2.0), (long long)c->vocab);
        /* A short greedy sample, for the eye. */
        qkv_lm_decoder *d = qkv_lm_decoder_new(type, m);
        int32_t prompt[1] = {c->map['T'] >= 0 ? c->map['T'] : 0}, out[60];
        qkv_gen_opts o = qkv_gen_defaults();
        o.max_new_tokens = 60;
        int64_t n = d ? qkv_generate(d, prompt, 1, &o, out, 60, NULL) : -1;
        CHECK(n == 60);
        char text[64] = "";
        for (int64_t i = 0; i < n; i++)
            for (int ch = 0; ch < 256; ch++)
                if (c->map[ch] == out[i]) text[i] = ch == '\n' ? ' ' : (char)ch;
        printf("  %s sample: T%s\n", type_name, text);
        qkv_lm_decoder_free(d);
        type->free(m);
    }
    qkv_tensor_free(ids);
    qkv_tensor_free(tg);
    qkv_ctx_free(ctx);
    qkv_optim_free(opt);
    qkv_params_free(params);
    cJSON_Delete(cfg);
    return dev;
}

/* The unigram entropy of the training slice (nats): a model that learnt nothing about context cannot beat it. */
static double unigram_entropy(const corpus *c) {
    double h = 0, *p = calloc((size_t)c->vocab, sizeof(double));
    for (int64_t i = 0; i < c->n_train; i++) p[c->train[i]] += 1.0 / (double)c->n_train;
    for (int64_t v = 0; v < c->vocab; v++)
        if (p[v] > 0) h -= p[v] * log(p[v]);
    free(p);
    return h;
}

TEST(char_gpt_and_gru_learn) {
    corpus c;
    if (!load_corpus(&c)) {
        test_skip("QKV_SHARED/data/lm/{train,dev}.txt not found (set QKV_SHARED)");
        return;
    }
    double h = unigram_entropy(&c);
    printf("  unigram entropy of the slice: %.3f nats\n", h);
    double gpt = train_and_eval(&c, "gpt", "{\"d_model\": 64, \"n_heads\": 4, \"d_ff\": 256, \"n_layers\": 2}", 200,
                                3e-3f);
    double gru = train_and_eval(&c, "rnnlm", "{\"rnn\": \"gru\", \"d_model\": 96, \"n_layers\": 1}", 200, 5e-3f);
    /* Both must use context: clearly below the unigram entropy (about 3.1 nats for this text). */
    CHECKF(gpt < h - 0.5, "gpt dev loss %.3f not below unigram %.3f - 0.5", gpt, h);
    CHECKF(gru < h - 0.5, "gru dev loss %.3f not below unigram %.3f - 0.5", gru, h);
    free(c.train);
    free(c.dev);
}

int main(void) {
    qkv_threads_set(1); /* models this small gain nothing from threads and keep the test quick on a busy machine */
    RUN(char_gpt_and_gru_learn);
    return test_finish();
}
