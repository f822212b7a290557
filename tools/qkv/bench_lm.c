/* qkv bench lm: the GPT-2-style LM of configs.json's `lm` entry, measured as torch_ref.py measures it.
 *   train: AdamW steps on batch x seq_len random token ids (inputs and targets drawn independently), tied head.
 *   gen:   greedy generation at batch 1 from a 1-token prompt, new_tokens tokens through the KV cache
 *          (qkv_generate over the gpt decoder: one GEMV per weight matrix per token, no allocation per token). */
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
    qkv_tensor *x, *y;
    qkv_lm_decoder *dec;
    int32_t prompt[1024];
    long prompt_len, new_tokens;
    int32_t *out;
} lm_run;

static void die(const char *what) {
    fprintf(stderr, "qkv bench lm: %s: %s\n", what, qkv_last_error());
    exit(CLI_RUNTIME);
}

static void train_step(void *u) {
    lm_run *r = u;
    qkv_ctx_reset(r->ctx);
    qkv_optim_zero_grad(r->opt);
    qkv_tensor *loss = qkv_cross_entropy(r->ctx, qkv_gpt_forward(r->ctx, r->model, r->x, NULL), r->y, NULL);
    if (!loss || qkv_backward(r->ctx, loss) != QKV_OK || qkv_optim_step(r->opt) != QKV_OK) die("train step");
}

static void gen_step(void *u) {
    lm_run *r = u;
    qkv_gen_opts o = qkv_gen_defaults();
    o.max_new_tokens = r->new_tokens;
    if (qkv_generate(r->dec, r->prompt, r->prompt_len, &o, r->out, r->new_tokens, NULL) != r->new_tokens)
        die("generate");
}


static int run(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    bool gen = !strcmp(mode, "gen");
    qkv_gpt_config c = qkv_gpt_config_default();
    c.vocab_size = bench_cfg_int(b, "vocab", 8192);
    c.d_model = bench_cfg_int(b, "d_model", 384);
    c.n_layers = (int)bench_cfg_int(b, "n_layers", 6);
    c.n_heads = bench_cfg_int(b, "n_heads", 6);
    c.d_ff = bench_cfg_int(b, "d_ff", 1536);
    c.n_ctx = bench_cfg_int(b, "seq_len", 256);
    c.tied = bench_cfg_int(b, "tied_embeddings", 1) != 0;
    c.dropout = (float)bench_cfg_num(b, "dropout", 0.0);
    long B = bench_cfg_int(b, "batch", 8), T = c.n_ctx;
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(b->cfg, "gen");
    const cJSON *v;
    long repeats = 5;
    lm_run r = {.ctx = qkv_ctx_new(), .params = qkv_params_new(), .prompt_len = 1, .new_tokens = 256};
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(g, "prompt_len"))) r.prompt_len = (long)v->valuedouble;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(g, "new_tokens"))) r.new_tokens = (long)v->valuedouble;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(g, "repeats"))) repeats = (long)v->valuedouble;
    if (r.prompt_len < 1 || r.prompt_len > 1024 || r.new_tokens < 1 || r.prompt_len - 1 + r.new_tokens > T) {
        fprintf(stderr, "qkv bench lm: gen.prompt_len %ld + new_tokens %ld must fit seq_len %ld\n", r.prompt_len,
                r.new_tokens, T);
        return CLI_INPUT;
    }
    qkv_rng rng;
    qkv_rng_init(&rng, (uint64_t)bench_cfg_int(b, "seed", 1234));
    if (!r.ctx || !r.params || !(r.model = qkv_gpt_new(&c, r.params, NULL, &rng))) die("model");
    bench_measure bm = {0};
    long L = c.n_layers, d = c.d_model;
    double nmat = (double)L * (4.0 * d * d + 2.0 * d * c.d_ff) + (double)d * c.vocab_size;
    if (gen) {
        B = 1;
        for (long i = 0; i < r.prompt_len; i++) r.prompt[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)c.vocab_size);
        r.out = malloc(sizeof(int32_t) * (size_t)r.new_tokens);
        if (!(r.dec = qkv_lm_decoder_new(&qkv_model_gpt, (qkv_model *)r.model)) || !r.out) die("decoder");
        bm.warmup = 1;
        bm.max_steps = (int)repeats;
        bm.tokens = (double)r.new_tokens;
        for (long p = r.prompt_len - 1; p < r.prompt_len - 1 + r.new_tokens; p++)
            bm.flops += 2 * nmat + (double)L * 4 * (p + 1) * d;
        T = r.new_tokens;
    } else {
        r.x = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
        r.y = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
        qkv_optim_config oc;
        if (!bench_optim_config(b, QKV_ADAMW, &oc)) return CLI_INPUT;
        if (!r.x || !r.y || !(r.opt = qkv_optim_new(r.params, &oc))) die("setup");
        for (long i = 0; i < B * T; i++) qkv_i32(r.x)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)c.vocab_size);
        for (long i = 0; i < B * T; i++) qkv_i32(r.y)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)c.vocab_size);
        bm.tokens = (double)(B * T);
        bm.seqs = B;
        bm.flops = 3 * (2 * nmat * B * T + (double)L * B * 4 * T * T * d);
    }
    bm.params = (double)qkv_params_numel(r.params), bm.matmul_params = nmat, bm.batch = B, bm.seq_len = T;
    cJSON *o = bench_run_timed(b, mode, gen ? gen_step : train_step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    if (gen) cJSON_AddNumberToObject(o, "ms_per_token_median", round(bm.median_ms / bm.tokens * 1e3) / 1e3);
    if (!gen) cJSON_AddNumberToObject(o, "arena_mib", (double)qkv_ctx_arena_bytes(r.ctx) / (1 << 20));
    cJSON_AddStringToObject(o, "status", "ok");
    bench_emit(o);
    free(r.out);
    qkv_lm_decoder_free(r.dec);
    qkv_optim_free(r.opt);
    qkv_tensor_free(r.x);
    qkv_tensor_free(r.y);
    qkv_gpt_free(r.model);
    qkv_params_free(r.params);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static const bench_entry lm_entry = {
    "lm", "train,gen", "GPT-2-style LM (configs.json `lm`): AdamW training steps, or greedy KV-cached generation", run};
BENCH_REGISTER(lm_entry)
