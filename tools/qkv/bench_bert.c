/* qkv bench bert --mode pretrain: one BERT pretraining step (forward, masked-LM + next-sentence loss, backward,
 * AdamW) of the bert_small shape: d 256, 4 layers, 4 heads, d_ff 1024, a 16,000-token vocabulary, batch 32 x 128
 * tokens, 20 masked positions a sequence (the MLM head runs on those alone, as BERT's gather), dropout 0.1 in
 * training mode. A configs entry "bert" overrides vocab, d_model, n_layers, n_heads, d_ff, batch, seq_len,
 * max_predictions and the optimizer. bench/bert_ref.py is the PyTorch side with the same fields. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "qkv/bert.h"
#include "qkv/qkv.h"

typedef struct {
    qkv_ctx *ctx;
    qkv_params *params;
    qkv_bert *m;
    qkv_optim *opt;
    qkv_tensor *ids, *types, *mask, *labels, *nsp;
} bert_run;

static void step(void *u) {
    bert_run *r = u;
    qkv_ctx_reset(r->ctx);
    qkv_optim_zero_grad(r->opt);
    qkv_bert_inputs in = {.ids = r->ids, .type_ids = r->types, .mask = r->mask, .mlm_labels = r->labels};
    qkv_tensor *loss = qkv_bert_pretrain_loss(r->ctx, r->m, &in, r->nsp, NULL, NULL);
    if (!loss || qkv_backward(r->ctx, loss) != QKV_OK || qkv_optim_step(r->opt) != QKV_OK) {
        fprintf(stderr, "qkv bench bert: %s\n", qkv_last_error());
        exit(CLI_RUNTIME);
    }
}

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    long V = bench_cfg_int(b, "vocab", 16000), d = bench_cfg_int(b, "d_model", 256);
    long L = bench_cfg_int(b, "n_layers", 4), H = bench_cfg_int(b, "n_heads", 4), F = bench_cfg_int(b, "d_ff", 1024);
    long B = bench_cfg_int(b, "batch", 32), T = seq_len > 0 ? seq_len : bench_cfg_int(b, "seq_len", 128);
    long P = bench_cfg_int(b, "max_predictions", 20);
    if (P > T - 3) P = T - 3;
    qkv_bert_config c = qkv_bert_config_default(V, d, L, H);
    c.intermediate_size = F, c.max_positions = T;
    bert_run r = {.ctx = qkv_ctx_new(), .params = qkv_params_new()};
    qkv_rng rng;
    qkv_rng_init(&rng, 1234);
    qkv_optim_config oc;
    if (!bench_optim_config(b, QKV_ADAMW, &oc)) return CLI_INPUT;
    r.ids = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    r.types = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    r.mask = qkv_tensor_new(QKV_F32, QKV_DIMS(B, T));
    r.labels = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    r.nsp = qkv_tensor_new(QKV_I32, QKV_DIMS(B));
    if (!r.ctx || !r.params || !r.ids || !r.types || !r.mask || !r.labels || !r.nsp ||
        !(r.m = qkv_bert_new(&c, r.params, &rng)) || !(r.opt = qkv_optim_new(r.params, &oc))) {
        fprintf(stderr, "qkv bench bert: %s\n", qkv_last_error());
        return CLI_RUNTIME;
    }
    /* [CLS] A [SEP] B [SEP] with random tokens, B starting half way; P labelled positions a row, every token real. */
    for (long i = 0; i < B; i++) {
        qkv_i32(r.nsp)[i] = (int32_t)(i % 2);
        for (long t = 0; t < T; t++) {
            long k = i * T + t;
            qkv_i32(r.ids)[k] = t == 0 ? 2 : (t == T / 2 || t == T - 1) ? 3 : 5 + (int32_t)qkv_rng_below(&rng, (uint32_t)(V - 5));
            qkv_i32(r.types)[k] = t > T / 2;
            qkv_f32(r.mask)[k] = 1.0f;
            qkv_i32(r.labels)[k] = -100;
        }
        for (long p = 0; p < P; p++) {
            long k = i * T + 1 + p * (T - 2) / P;
            qkv_i32(r.labels)[k] = qkv_i32(r.ids)[k];
            qkv_i32(r.ids)[k] = 4;
        }
    }
    qkv_ctx_set_grad(r.ctx, true);
    qkv_ctx_set_training(r.ctx, true);
    /* matmul FLOPs, training = 3 x forward: the blocks on every token, the attention core, the MLM head (transform
     * and tied decoder) on the masked positions, pooler and NSP on [CLS]. */
    double D = (double)d, n_blk = (double)L * (4 * D * D + 2 * D * (double)F);
    double fwd = 2 * n_blk * (double)(B * T) + (double)L * (double)B * 4 * (double)T * (double)T * D +
                 2 * (double)(B * P) * (D * D + D * (double)V) + 2 * (double)B * (D * D + 2 * D);
    bench_measure bm = {.params = (double)qkv_params_numel(r.params), .batch = B, .seq_len = T,
                        .tokens = (double)(B * T), .seqs = B, .flops = 3 * fwd};
    cJSON *o = bench_run_timed(b, mode, step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    cJSON_AddNumberToObject(o, "max_predictions", (double)P);
    bench_emit(o);
    qkv_optim_free(r.opt);
    qkv_bert_free(r.m);
    qkv_tensor_free(r.ids), qkv_tensor_free(r.types), qkv_tensor_free(r.mask), qkv_tensor_free(r.labels);
    qkv_tensor_free(r.nsp);
    qkv_params_free(r.params);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static const bench_entry bert_entry = {"bert", "pretrain",
                                       "BERT pretraining step (d 256, 4 layers, vocab 16k, batch 32 x 128, MLM+NSP)",
                                       run};
BENCH_REGISTER(bert_entry)
