/* qkv bench t5 (mode train): one training step (forward, cross-entropy, backward, Adam) of the "t5" model type on
 * random token ids, the sizes of configs.json's "nmt" entry by default (d 256, 3 + 3 layers, 4 heads, d_ff 1024,
 * 8,000 tokens, 32 x 64 source and target tokens) with T5's own choices (shared vocabulary, 32 relative position
 * buckets, RMS norm, no biases), dropout 0. bench/t5_torch.py times the same architecture in PyTorch
 * (tests/ref/t5_arch.py) and prints the same fields. Throughput is in target tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "qkv/model.h"
#include "qkv/optim.h"
#include "qkv/qkv.h"

typedef struct t5_run {
    const qkv_model_type *type;
    qkv_model *m;
    qkv_ctx *ctx;
    qkv_params *params;
    qkv_optim *opt;
    qkv_tensor *src, *tin, *tout;
} t5_run;

static void step(void *u) {
    t5_run *r = u;
    qkv_ctx_reset(r->ctx);
    qkv_optim_zero_grad(r->opt);
    qkv_batch b = {.src_ids = r->src, .ids = r->tin, .targets = r->tout};
    qkv_tensor *loss = r->type->loss(r->ctx, r->m, &b);
    if (!loss || qkv_backward(r->ctx, loss) != QKV_OK || qkv_optim_step(r->opt) != QKV_OK) {
        fprintf(stderr, "qkv bench t5: %s\n", qkv_last_error());
        exit(CLI_RUNTIME);
    }
}

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    long B = bench_cfg_int(b, "batch", 32), S = bench_cfg_int(b, "src_len", 64), T = bench_cfg_int(b, "tgt_len", 64);
    long V = bench_cfg_int(b, "vocab", 8000), d = bench_cfg_int(b, "d_model", 256), f = bench_cfg_int(b, "d_ff", 1024);
    long ne = bench_cfg_int(b, "n_enc_layers", 3), nd = bench_cfg_int(b, "n_dec_layers", 3);
    long H = bench_cfg_int(b, "n_heads", 4);
    t5_run r = {.type = qkv_model_type_find("t5"), .ctx = qkv_ctx_new(), .params = qkv_params_new()};
    qkv_rng rng;
    qkv_rng_init(&rng, bench_seed(b));
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddNumberToObject(cfg, "d_model", (double)d);
    cJSON_AddNumberToObject(cfg, "n_heads", (double)H);
    cJSON_AddNumberToObject(cfg, "d_ff", (double)f);
    cJSON_AddNumberToObject(cfg, "n_enc_layers", (double)ne);
    cJSON_AddNumberToObject(cfg, "n_dec_layers", (double)nd);
    cJSON_AddNumberToObject(cfg, "dropout", bench_cfg_num(b, "dropout", 0.0));
    qkv_task_info info = {.vocab_size = V, .max_len = S > T ? S : T};
    r.m = r.type && cfg ? r.type->create(cfg, &info, r.params, &rng) : NULL;
    cJSON_Delete(cfg);
    /* torch_ref.py's flops("nmt"): the same matrix products (T5 has no biases, its norms are not counted) */
    double matmul_params, flops = bench_s2s_train_flops(B, S, T, d, f, ne, nd, V, &matmul_params);
    qkv_optim_config oc;
    if (!bench_optim_config(b, QKV_ADAM, &oc)) return CLI_INPUT;
    r.src = bench_random_ids(&rng, V, B, S);
    r.tin = bench_random_ids(&rng, V, B, T);
    r.tout = bench_random_ids(&rng, V, B, T);
    if (!r.m || !r.ctx || !r.params || !r.src || !r.tin || !r.tout || !(r.opt = qkv_optim_new(r.params, &oc))) {
        fprintf(stderr, "qkv bench t5: %s\n", qkv_last_error());
        return CLI_RUNTIME;
    }
    bench_measure bm = {.params = (double)qkv_params_numel(r.params), .matmul_params = matmul_params, .batch = B,
                        .seq_len = T, .tokens = (double)(B * T), .seqs = B, .flops = flops};
    cJSON *o = bench_run_timed(b, mode, step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    bench_emit(o);
    r.type->free(r.m);
    qkv_optim_free(r.opt);
    qkv_tensor_free(r.src);
    qkv_tensor_free(r.tin);
    qkv_tensor_free(r.tout);
    qkv_params_free(r.params);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static const bench_entry t5_entry = {"t5", "train",
                                     "T5 encoder-decoder (relative position bias, RMS norm, tied embedding; d 256, "
                                     "3+3 layers): one training step with Adam",
                                     run};
BENCH_REGISTER(t5_entry)
