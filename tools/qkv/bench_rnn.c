/* qkv bench lstm2 / gru2: forward + backward of sum(out) through a 2-layer recurrent stack (input 512, hidden 512,
 * batch 64, 32 steps by default; configs.json entries of the same name override them). bench/rnn_ref.py is the
 * PyTorch side with the same fields. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cli.h"
#include "qkv/qkv.h"
#include "qkv/rnn.h"

typedef struct {
    qkv_ctx *ctx;
    qkv_params *params;
    qkv_rnn rnn;
    qkv_tensor *x;
} rnn_run;

static void step(void *u) {
    rnn_run *r = u;
    qkv_ctx_reset(r->ctx);
    qkv_params_zero_grad(r->params);
    qkv_tensor *out;
    if (qkv_rnn_forward(r->ctx, &r->rnn, r->x, NULL, NULL, NULL, &out, NULL, NULL) != QKV_OK ||
        qkv_backward(r->ctx, qkv_sum_all(r->ctx, out)) != QKV_OK) {
        fprintf(stderr, "qkv bench rnn: %s\n", qkv_last_error());
        exit(CLI_RUNTIME);
    }
}

static int run_kind(const bench_ctx *b, const char *mode, qkv_rnn_kind kind) {
    long I = bench_cfg_int(b, "input", 512), H = bench_cfg_int(b, "hidden", 512);
    long L = bench_cfg_int(b, "n_layers", 2), B = bench_cfg_int(b, "batch", 64), T = bench_cfg_int(b, "seq_len", 32);
    rnn_run r = {.ctx = qkv_ctx_new(), .params = qkv_params_new()};
    qkv_rng rng;
    qkv_rng_init(&rng, 1234);
    qkv_rnn_config cfg = qkv_rnn_config_default(kind, I, H);
    cfg.num_layers = (int)L;
    r.x = qkv_tensor_new(QKV_F32, QKV_DIMS(B, T, I));
    if (!r.ctx || !r.params || !r.x || qkv_rnn_init(&r.rnn, r.params, NULL, &cfg, &rng) != QKV_OK) {
        fprintf(stderr, "qkv bench rnn: %s\n", qkv_last_error());
        return CLI_RUNTIME;
    }
    qkv_rng_fill_normal(&rng, r.x, 0, 1);
    int gates = kind == QKV_RNN_LSTM ? 4 : 3;
    double flops = 0; /* matmul FLOPs, training = 3 x forward, as torch_ref.py counts */
    for (long l = 0; l < L; l++) flops += 3.0 * 2.0 * (double)(B * T) * gates * H * ((l ? H : I) + H);
    bench_measure bm = {.params = (double)qkv_params_numel(r.params), .batch = B, .seq_len = T,
                        .tokens = (double)(B * T), .seqs = B, .flops = flops};
    cJSON *o = bench_run_timed(b, mode, step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    bench_emit(o);
    qkv_tensor_free(r.x);
    qkv_params_free(r.params);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static int run_lstm(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    return run_kind(b, mode, QKV_RNN_LSTM);
}

static int run_gru(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    return run_kind(b, mode, QKV_RNN_GRU);
}

static const bench_entry lstm2_entry = {"lstm2", "fwdbwd",
                                        "2-layer LSTM (512 -> 512, batch 64, 32 steps): forward + backward", run_lstm};
static const bench_entry gru2_entry = {"gru2", "fwdbwd",
                                       "2-layer GRU (512 -> 512, batch 64, 32 steps): forward + backward", run_gru};
BENCH_REGISTER(lstm2_entry)
BENCH_REGISTER(gru2_entry)
