/* qkv bench summarize: the decoder-only summarizer's two costs, on a GPT of configs.json's `summarize` entry (the
 * `lm` sizes when absent).
 *   train: AdamW steps on batch x seq_len random ids with the summarize task's loss weights: 0 on the first
 *          seq_len - summary_len predictions (the article), 1 on the last summary_len, through the model's
 *          loss path (qkv_cross_entropy_linear: the head and softmax only on the weighted positions).
 *   gen:   greedy summaries of `batch` random articles of prompt_len tokens, summary_len new tokens each, all rows at
 *          once through qkv_generate_batch (KV cache, no stop token so every row runs to the end). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "qkv/decode.h"
#include "qkv/gpt.h"
#include "qkv/optim.h"
#include "qkv/qkv.h"

typedef struct {
    qkv_ctx *ctx;
    qkv_params *params;
    qkv_gpt *model;
    qkv_optim *opt;
    qkv_tensor *x, *y, *w;
    int32_t **prompts;
    int64_t *n_prompt;
    int batch;
    long new_tokens;
} summ_run;

static void die(const char *what) {
    fprintf(stderr, "qkv bench summarize: %s: %s\n", what, qkv_last_error());
    exit(CLI_RUNTIME);
}

static void train_step(void *u) {
    summ_run *r = u;
    qkv_ctx_reset(r->ctx);
    qkv_optim_zero_grad(r->opt);
    qkv_ce_opts o = qkv_ce_defaults();
    o.token_weight = r->w;
    qkv_tensor *loss = qkv_cross_entropy_linear(r->ctx, qkv_gpt_hidden(r->ctx, r->model, r->x, NULL),
                                                r->model->head, NULL, r->y, &o);
    if (!loss || qkv_backward(r->ctx, loss) != QKV_OK || qkv_optim_step(r->opt) != QKV_OK) die("train step");
}

static qkv_status ignore(int index, const int32_t *tokens, int64_t n, qkv_gen_end end, void *user) {
    (void)index, (void)tokens, (void)end;
    long *count = user;
    *count += (long)n;
    return QKV_OK;
}

static void gen_step(void *u) {
    summ_run *r = u;
    qkv_gen_opts o = qkv_gen_defaults();
    o.max_new_tokens = r->new_tokens;
    long count = 0;
    if (qkv_generate_batch(&qkv_model_gpt, (qkv_model *)r->model, r->batch, (const int32_t *const *)r->prompts,
                           r->n_prompt, &o, r->batch, ignore, &count) != QKV_OK ||
        count != r->batch * r->new_tokens)
        die("generate");
}

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    bool gen = !strcmp(mode, "gen");
    qkv_gpt_config c = qkv_gpt_config_default();
    c.vocab_size = bench_cfg_int(b, "vocab", 8192);
    c.d_model = bench_cfg_int(b, "d_model", 256);
    c.n_layers = (int)bench_cfg_int(b, "n_layers", 4);
    c.n_heads = bench_cfg_int(b, "n_heads", 4);
    c.d_ff = bench_cfg_int(b, "d_ff", 1024);
    c.n_ctx = bench_cfg_int(b, "seq_len", 192);
    c.tied = true;
    long B = bench_cfg_int(b, "batch", 32), T = c.n_ctx, S = bench_cfg_int(b, "summary_len", 32);
    if (S < 1 || S >= T) {
        fprintf(stderr, "qkv bench summarize: summary_len %ld must be in 1..seq_len-1 (%ld)\n", S, T - 1);
        return CLI_INPUT;
    }
    summ_run r = {.ctx = qkv_ctx_new(), .params = qkv_params_new(), .batch = (int)B, .new_tokens = S};
    qkv_rng rng;
    qkv_rng_init(&rng, (uint64_t)bench_cfg_int(b, "seed", 1234));
    if (!r.ctx || !r.params || !(r.model = qkv_gpt_new(&c, r.params, NULL, &rng))) die("model");
    bench_measure bm = {.seqs = B};
    long P = T - S; /* prompt tokens: the article and its </s> <sep> */
    if (gen) {
        r.prompts = calloc((size_t)B, sizeof *r.prompts);
        r.n_prompt = calloc((size_t)B, sizeof *r.n_prompt);
        for (long i = 0; r.prompts && r.n_prompt && i < B; i++) {
            r.prompts[i] = malloc(sizeof(int32_t) * (size_t)P);
            r.n_prompt[i] = P;
            for (long j = 0; r.prompts[i] && j < P; j++)
                r.prompts[i][j] = (int32_t)qkv_rng_below(&rng, (uint32_t)c.vocab_size);
            if (!r.prompts[i]) die("prompts");
        }
        if (!r.prompts || !r.n_prompt) die("prompts");
        bm.warmup = 1;
        bm.max_steps = 5;
        bm.tokens = (double)(B * S);
    } else {
        r.x = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
        r.y = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
        r.w = qkv_tensor_new(QKV_F32, QKV_DIMS(B, T));
        qkv_optim_config oc;
        if (!bench_optim_config(b, QKV_ADAMW, &oc)) return CLI_INPUT;
        if (!r.x || !r.y || !r.w || !(r.opt = qkv_optim_new(r.params, &oc))) die("setup");
        for (long i = 0; i < B * T; i++) {
            qkv_i32(r.x)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)c.vocab_size);
            qkv_i32(r.y)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)c.vocab_size);
            qkv_f32(r.w)[i] = i % T >= P - 1 ? 1.0f : 0.0f;
        }
        bm.tokens = (double)(B * T);
    }
    bm.params = (double)qkv_params_numel(r.params), bm.batch = B, bm.seq_len = T;
    cJSON *o = bench_run_timed(b, mode, gen ? gen_step : train_step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    cJSON_AddNumberToObject(o, "summary_len", (double)S);
    cJSON_AddStringToObject(o, "status", "ok");
    bench_emit(o);
    for (long i = 0; r.prompts && i < B; i++) free(r.prompts[i]);
    free(r.prompts);
    free(r.n_prompt);
    qkv_optim_free(r.opt);
    qkv_tensor_free(r.x);
    qkv_tensor_free(r.y);
    qkv_tensor_free(r.w);
    qkv_gpt_free(r.model);
    qkv_params_free(r.params);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static const bench_entry summ_entry = {
    "summarize", "train,gen",
    "decoder-only summarizer (configs.json `summarize`): weighted-loss AdamW steps, or batched greedy summaries",
    run};
BENCH_REGISTER(summ_entry)
