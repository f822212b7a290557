/* qkv bench siamese: training steps of the Siamese duplicate detector (the siamese model type's network: one
 * Embedding -> LSTM -> masked mean -> L2 normalise encoder applied to both texts, triplet loss, Adam) on random
 * token ids, vocab 8192, d_model 128, batch 32 pairs of 32 tokens by default (a configs entry "siamese" overrides
 * vocab, d_model, n_layers, batch, seq_len). bench/siamese_ref.py is the PyTorch side with the same fields. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cli.h"
#include "qkv/optim.h"
#include "qkv/qkv.h"
#include "qkv/siamese.h"

typedef struct {
    qkv_ctx *ctx;
    qkv_params *params;
    qkv_siamese *model;
    qkv_optim *opt;
    qkv_tensor *a, *b, *mask;
} siamese_run;

static void die(const char *what) {
    fprintf(stderr, "qkv bench siamese: %s: %s\n", what, qkv_last_error());
    exit(CLI_RUNTIME);
}

static void train_step(void *u) {
    siamese_run *r = u;
    qkv_ctx_reset(r->ctx);
    qkv_optim_zero_grad(r->opt);
    qkv_tensor *v1 = NULL, *v2 = NULL;
    if (qkv_siamese_forward(r->ctx, r->model, r->a, r->mask, r->b, r->mask, &v1, &v2) != QKV_OK) die("forward");
    qkv_tensor *loss = qkv_triplet_loss(r->ctx, v1, v2, r->model->cfg.margin, r->model->cfg.terms);
    if (!loss || qkv_backward(r->ctx, loss) != QKV_OK || qkv_optim_step(r->opt) != QKV_OK) die("train step");
}

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    qkv_siamese_config c = qkv_siamese_config_default();
    c.vocab_size = bench_cfg_int(b, "vocab", 8192);
    c.d_model = bench_cfg_int(b, "d_model", 128);
    c.n_layers = (int)bench_cfg_int(b, "n_layers", 1);
    c.margin = (float)bench_cfg_num(b, "margin", c.margin);
    long B = bench_cfg_int(b, "batch", 32), T = seq_len > 0 ? seq_len : bench_cfg_int(b, "seq_len", 32);
    siamese_run r = {.ctx = qkv_ctx_new(), .params = qkv_params_new()};
    qkv_rng rng;
    qkv_rng_init(&rng, (uint64_t)bench_cfg_int(b, "seed", 1234));
    qkv_optim_config oc;
    if (!bench_optim_config(b, QKV_ADAM, &oc)) return CLI_INPUT;
    if (!r.ctx || !r.params || !(r.model = qkv_siamese_new(&c, r.params, &rng))) die("model");
    r.a = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    r.b = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    r.mask = qkv_tensor_new(QKV_F32, QKV_DIMS(B, T));
    if (!r.a || !r.b || !r.mask || !(r.opt = qkv_optim_new(r.params, &oc))) die("setup");
    for (long i = 0; i < B * T; i++) {
        qkv_i32(r.a)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)c.vocab_size);
        qkv_i32(r.b)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)c.vocab_size);
        qkv_f32(r.mask)[i] = 1.0f;
    }
    /* LSTM matmul FLOPs of both texts, training = 3 x forward, as torch_ref.py counts. */
    double H = (double)c.d_model, flops = 0;
    for (int l = 0; l < c.n_layers; l++) flops += 2 * 3.0 * 2.0 * (double)(B * T) * 4 * H * (H + H);
    /* tokens: both texts of every pair; sequences: pairs */
    bench_measure bm = {.params = (double)qkv_params_numel(r.params), .batch = B, .seq_len = T,
                        .tokens = (double)(2 * B * T), .seqs = B, .flops = flops};
    cJSON *o = bench_run_timed(b, mode, train_step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    cJSON_AddStringToObject(o, "status", "ok");
    bench_emit(o);
    qkv_optim_free(r.opt);
    qkv_tensor_free(r.a);
    qkv_tensor_free(r.b);
    qkv_tensor_free(r.mask);
    qkv_siamese_free(r.model);
    qkv_params_free(r.params);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static const bench_entry siamese_entry = {
    "siamese", "train", "Siamese LSTM (vocab 8192, d 128, 32 pairs x 32 tokens): triplet-loss Adam steps", run};
BENCH_REGISTER(siamese_entry)
