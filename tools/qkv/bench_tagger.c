/* qkv bench tagger: one training step (forward, masked loss, backward, Adam) of the tagger on a batch of random
 * sentences: BiLSTM (d_model 128, 1 layer) over a 20,000-word vocabulary, 12 tags, batch 32, 32 tokens, every token
 * real. A configs entry "tagger" overrides vocab, n_tags, d_model, n_layers, encoder, batch, seq_len and the
 * optimizer. bench/tagger_ref.py is the PyTorch side with the same fields. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "qkv/qkv.h"
#include "qkv/tagger.h"

typedef struct {
    qkv_ctx *ctx;
    qkv_params *params;
    qkv_tagger *m;
    qkv_optim *opt;
    qkv_tensor *ids, *mask, *tags;
} tagger_run;

static void step(void *u) {
    tagger_run *r = u;
    qkv_ctx_reset(r->ctx);
    qkv_optim_zero_grad(r->opt);
    qkv_tensor *loss = qkv_tagger_loss(r->ctx, r->m, r->ids, r->mask, r->tags);
    if (!loss || qkv_backward(r->ctx, loss) != QKV_OK || qkv_optim_step(r->opt) != QKV_OK) {
        fprintf(stderr, "qkv bench tagger: %s\n", qkv_last_error());
        exit(CLI_RUNTIME);
    }
}

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    long V = bench_cfg_int(b, "vocab", 20000), C = bench_cfg_int(b, "n_tags", 12);
    long B = bench_cfg_int(b, "batch", 32), T = seq_len > 0 ? seq_len : bench_cfg_int(b, "seq_len", 32);
    qkv_tagger_config c = qkv_tagger_config_default(V, C);
    c.d_model = bench_cfg_int(b, "d_model", 128);
    c.n_layers = bench_cfg_int(b, "n_layers", 1);
    c.encoder = !strcmp(bench_cfg_str(b, "encoder", "lstm"), "transformer") ? QKV_TAGGER_TRANSFORMER : QKV_TAGGER_LSTM;
    tagger_run r = {.ctx = qkv_ctx_new(), .params = qkv_params_new()};
    qkv_rng rng;
    qkv_rng_init(&rng, 1234);
    qkv_optim_config oc;
    if (!bench_optim_config(b, QKV_ADAM, &oc)) return CLI_INPUT;
    r.ids = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    r.tags = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    r.mask = qkv_tensor_new(QKV_F32, QKV_DIMS(B, T));
    if (!r.ctx || !r.params || !r.ids || !r.tags || !r.mask || !(r.m = qkv_tagger_new(&c, r.params, &rng)) ||
        !(r.opt = qkv_optim_new(r.params, &oc))) {
        fprintf(stderr, "qkv bench tagger: %s\n", qkv_last_error());
        return CLI_RUNTIME;
    }
    for (long i = 0; i < B * T; i++) {
        qkv_i32(r.ids)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)V);
        qkv_i32(r.tags)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)C);
        qkv_f32(r.mask)[i] = 1.0f;
    }
    double d = (double)c.d_model, flops = 0; /* matmul FLOPs, training = 3 x forward */
    if (c.encoder == QKV_TAGGER_LSTM) {
        int dirs = c.bidirectional ? 2 : 1;
        for (long l = 0; l < c.n_layers; l++)
            flops += 3.0 * 2.0 * (double)(B * T) * dirs * 4 * d * ((l ? dirs * d : d) + d);
        flops += 3.0 * 2.0 * (double)(B * T) * dirs * d * (double)C;
    }
    bench_measure bm = {.params = (double)qkv_params_numel(r.params), .batch = B, .seq_len = T,
                        .tokens = (double)(B * T), .seqs = B, .flops = flops};
    cJSON *o = bench_run_timed(b, mode, step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    bench_emit(o);
    qkv_optim_free(r.opt);
    qkv_tagger_free(r.m);
    qkv_tensor_free(r.ids);
    qkv_tensor_free(r.tags);
    qkv_tensor_free(r.mask);
    qkv_params_free(r.params);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static const bench_entry tagger_entry = {"tagger", "train",
                                         "BiLSTM tagger (d 128, vocab 20k, 12 tags, batch 32 x 32): train step",
                                         run};
BENCH_REGISTER(tagger_entry)
