/* qkv bench layers: one layer of each kind the lesson compares (docs/lessons.md), forward + backward of sum(y) with
 * respect to the input and every weight, at width D, batch B, length T: vanilla RNN, LSTM and GRU (src/nn/rnn.c),
 * Conv1d of width 3 (padding 1) and multi-head self-attention (in-projections, fused sdpa, out-projection, D / 64
 * heads). configs.json's `layers` entry may set width, batch and seq_lens; defaults 256, 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lesson.h"
#include "qkv/attention.h"
#include "qkv/qkv.h"

typedef struct {
    const char *kind;
    qkv_ctx *ctx;
    qkv_params *params;
    qkv_tensor *x;
    qkv_rnn rnn;
    qkv_nn_conv1d conv;
    qkv_nn_linear q, k, v, o;
    long B, T, D;
    bool failed;
} layer_run;

static void step(void *u) {
    layer_run *r = u;
    qkv_ctx *c = r->ctx;
    qkv_ctx_reset(c);
    qkv_params_zero_grad(r->params);
    qkv_tensor_zero_grad(r->x);
    qkv_tensor *y = NULL;
    if (!strcmp(r->kind, "cnn")) {
        y = qkv_nn_conv1d_forward(c, &r->conv, r->x, NULL, NULL);
    } else if (!strcmp(r->kind, "attn")) {
        long H = r->D >= 64 ? r->D / 64 : 1, dh = r->D / H;
        qkv_tensor *p[3];
        const qkv_nn_linear *lin[3] = {&r->q, &r->k, &r->v};
        for (int i = 0; i < 3; i++)
            p[i] = qkv_permute(c, qkv_reshape(c, qkv_nn_linear_forward(c, lin[i], r->x), QKV_DIMS(r->B, r->T, H, dh)),
                               (const int[]){0, 2, 1, 3});
        qkv_sdpa_opts o = qkv_sdpa_defaults();
        qkv_tensor *a = qkv_sdpa(c, p[0], p[1], p[2], &o);
        y = qkv_nn_linear_forward(c, &r->o, qkv_reshape(c, qkv_permute(c, a, (const int[]){0, 2, 1, 3}),
                                                        QKV_DIMS(r->B, r->T, r->D)));
    } else if (qkv_rnn_forward(c, &r->rnn, r->x, NULL, NULL, NULL, &y, NULL, NULL)) {
        y = NULL;
    }
    qkv_tensor *loss = qkv_sum_all(c, y);
    if (!loss || qkv_backward(c, loss)) {
        if (!r->failed) fprintf(stderr, "qkv bench layers %s: %s\n", r->kind, qkv_last_error());
        r->failed = true;
    }
}

static bool setup(layer_run *r, const char *kind, long D, long B, long T) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->D = D;
    r->B = B;
    r->T = T;
    r->ctx = qkv_ctx_new();
    r->params = qkv_params_new();
    r->x = qkv_tensor_new(QKV_F32, QKV_DIMS(B, T, D));
    if (!r->ctx || !r->params || !r->x) return false;
    qkv_rng rng;
    qkv_rng_init(&rng, 1234);
    qkv_rng_fill_normal(&rng, r->x, 0, 1);
    qkv_tensor_set_requires_grad(r->x, true);
    if (!strcmp(kind, "cnn")) return !qkv_nn_conv1d_init(&r->conv, r->params, "conv", D, D, 3, 1, &rng);
    if (!strcmp(kind, "attn"))
        return !qkv_nn_linear_init(&r->q, r->params, "q", D, D, true, &rng) &&
               !qkv_nn_linear_init(&r->k, r->params, "k", D, D, true, &rng) &&
               !qkv_nn_linear_init(&r->v, r->params, "v", D, D, true, &rng) &&
               !qkv_nn_linear_init(&r->o, r->params, "o", D, D, true, &rng);
    qkv_rnn_kind rk = !strcmp(kind, "rnn") ? QKV_RNN_TANH : !strcmp(kind, "gru") ? QKV_RNN_GRU : QKV_RNN_LSTM;
    qkv_rnn_config rc = qkv_rnn_config_default(rk, D, D);
    return !qkv_rnn_init(&r->rnn, r->params, "rnn", &rc, &rng);
}

static void teardown(layer_run *r) {
    qkv_tensor_free(r->x);
    qkv_params_free(r->params);
    qkv_ctx_free(r->ctx);
}

double bench_layer_ms(const bench_ctx *b, const char *kind, long D, long B, long T) {
    layer_run r;
    double *ms = malloc(sizeof *ms * (size_t)(b->max_steps > 0 ? b->max_steps : 1)), warm = 0, med = -1;
    if (ms && setup(&r, kind, D, B, T)) {
        int n = bench_time(b, step, &r, -1, -1, -1, ms, &warm);
        if (!r.failed && n > 0) med = bench_median(ms, n);
    } else {
        fprintf(stderr, "qkv bench layers %s: %s\n", kind, qkv_last_error());
    }
    teardown(&r);
    free(ms);
    return med;
}

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    long D = bench_cfg_int(b, "width", 256), B = bench_cfg_int(b, "batch", 1), T = seq_len > 0 ? seq_len : 1024;
    layer_run r;
    if (!setup(&r, mode, D, B, T)) {
        fprintf(stderr, "qkv bench layers: %s\n", qkv_last_error());
        return CLI_RUNTIME;
    }
    bench_measure bm = {.batch = B, .seq_len = T, .tokens = (double)(B * T), .seqs = B};
    cJSON *o = bench_run_timed(b, mode, step, &r, &bm);
    int rc = !o || r.failed ? CLI_RUNTIME : CLI_OK;
    if (!rc) {
        cJSON_AddNumberToObject(o, "width", (double)D);
        cJSON_AddStringToObject(o, "status", "ok");
        bench_emit(o);
    } else {
        cJSON_Delete(o);
    }
    teardown(&r);
    return rc;
}

static const bench_entry layers_entry = {
    "layers", LAYER_KINDS, "one RNN / LSTM / GRU / Conv1d / self-attention layer of equal width: forward + backward",
    run};
BENCH_REGISTER(layers_entry)
