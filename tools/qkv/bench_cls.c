/* qkv bench cls --mode train|infer: the "cls" entry of configs.json built as torch_ref.py builds it (token embedding
 * x sqrt(d) + sinusoidal positions, pre-LN blocks, single-head attention with separate q/k/v/out Linears, ReLU FFN,
 * final LayerNorm, class from token 0), random ids, no padding. train: cross-entropy, backward and an Adam step;
 * infer: eval mode without gradients. Same JSON fields as torch_ref.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "qkv/optim.h"
#include "qkv/qkv.h"
#include "qkv/transformer_classifier.h"

typedef struct {
    qkv_ctx *ctx;
    qkv_params *params;
    qkv_tcls *model;
    qkv_optim *opt;
    qkv_tensor *ids, *labels;
} cls_run;

static void fail(const char *what) {
    fprintf(stderr, "qkv bench cls: %s: %s\n", what, qkv_last_error());
    exit(CLI_RUNTIME);
}

static void train_step(void *u) {
    cls_run *r = u;
    qkv_ctx_reset(r->ctx);
    qkv_optim_zero_grad(r->opt);
    qkv_tensor *loss = qkv_cross_entropy(r->ctx, qkv_tcls_logits(r->ctx, r->model, r->ids, NULL, NULL), r->labels,
                                         NULL);
    if (!loss || qkv_backward(r->ctx, loss) != QKV_OK || qkv_optim_step(r->opt) != QKV_OK) fail("train step");
}

static void infer_step(void *u) {
    cls_run *r = u;
    qkv_ctx_reset(r->ctx);
    if (!qkv_tcls_logits(r->ctx, r->model, r->ids, NULL, NULL)) fail("forward");
}


static int run(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    bool train = !strcmp(mode, "train");
    if (!train && strcmp(mode, "infer")) {
        fprintf(stderr, "qkv bench cls: unknown mode '%s' (train, infer)\n", mode);
        return CLI_USAGE;
    }
    long V = bench_cfg_int(b, "vocab", 20000), B = bench_cfg_int(b, "batch", 32), T = bench_cfg_int(b, "seq_len", 256);
    long C = bench_cfg_int(b, "n_classes", 2);
    qkv_tcls_config c = qkv_tcls_config_default(V, C);
    c.d_model = bench_cfg_int(b, "d_model", 256);
    c.n_layers = bench_cfg_int(b, "n_layers", 2);
    c.n_heads = bench_cfg_int(b, "n_heads", 1);
    c.d_ff = bench_cfg_int(b, "d_ff", 1024);
    c.max_len = bench_cfg_int(b, "max_len", T);
    c.dropout = (float)bench_cfg_num(b, "dropout", 0.1);
    c.attn_dropout = (float)bench_cfg_num(b, "attn_dropout", c.dropout);
    c.norm_first = strcmp(bench_cfg_str(b, "norm", "pre"), "post") != 0;
    c.pos_enc = strcmp(bench_cfg_str(b, "pos_enc", "sinusoidal"), "learned") ? QKV_POSENC_SINUSOIDAL
                                                                           : QKV_POSENC_LEARNED;
    c.emb_scale_sqrt_d = bench_cfg_int(b, "emb_scale_sqrt_d", 1) != 0;
    if (!qkv_activation_parse(bench_cfg_str(b, "activation", "relu"), &c.activation)) {
        fprintf(stderr, "qkv bench cls: unknown activation\n");
        return CLI_USAGE;
    }

    static qkv_tcls model;
    cls_run r = {.ctx = qkv_ctx_new(), .params = qkv_params_new(), .model = &model};
    qkv_rng rng;
    qkv_rng_init(&rng, 1234);
    if (!r.ctx || !r.params || qkv_tcls_init(&model, r.params, &c, &rng) != QKV_OK) fail("model");
    r.ids = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    r.labels = qkv_tensor_new(QKV_I32, QKV_DIMS(B));
    if (!r.ids || !r.labels) fail("inputs");
    for (long i = 0; i < B * T; i++) qkv_i32(r.ids)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)V);
    for (long i = 0; i < B; i++) qkv_i32(r.labels)[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)C);
    if (train) {
        qkv_optim_config oc;
        if (!bench_optim_config(b, QKV_ADAM, &oc)) return CLI_INPUT;
        if (!(r.opt = qkv_optim_new(r.params, &oc))) fail("optimizer");
    } else {
        qkv_ctx_set_training(r.ctx, false);
        qkv_ctx_set_grad(r.ctx, false);
    }

    /* torch_ref.py's count: matmul FLOPs of the full model (even where qkv skips work), training = 3 x forward. */
    double d = (double)c.d_model, f = (double)c.d_ff, L = (double)c.n_layers;
    double mm = L * (4 * d * d + 2 * d * f);
    double fwd = 2 * mm * B * T + L * B * 4.0 * T * T * d + 2 * d * C * B;
    bench_measure bm = {.params = (double)qkv_params_numel(r.params), .matmul_params = mm, .batch = B, .seq_len = T,
                        .tokens = (double)(B * T), .seqs = B, .flops = train ? 3 * fwd : fwd};
    cJSON *o = bench_run_timed(b, mode, train ? train_step : infer_step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    cJSON_AddNumberToObject(o, "arena_mib", (double)qkv_ctx_arena_bytes(r.ctx) / (1 << 20));
    bench_emit(o);
    qkv_optim_free(r.opt);
    qkv_tensor_free(r.ids);
    qkv_tensor_free(r.labels);
    qkv_params_free(r.params);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static const bench_entry cls_entry = {"cls", "train,infer",
                                      "Transformer sentiment classifier (configs.json cls): train step or inference",
                                      run};
BENCH_REGISTER(cls_entry)
