/* qkv bench nmt / lstm (mode train): one training step (forward, cross-entropy, backward, Adam) of the translation
 * models of configs.json's "nmt" and "lstm" entries on random token ids, as ../shared/bench/torch_ref.py measures
 * them: teacher forcing with decoder input tgt_in, loss against a second random tgt_out, no padding. Throughput is
 * in target tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "qkv/optim.h"
#include "qkv/qkv.h"
#include "qkv/seq2seq.h"

typedef struct nmt_run {
    qkv_ctx *ctx;
    qkv_params *params;
    qkv_optim *opt;
    bool lstm;
    qkv_lstm_s2s lm;
    qkv_tf_s2s tm;
    qkv_tensor *src, *tin, *tout;
} nmt_run;

static void step(void *u) {
    nmt_run *r = u;
    qkv_ctx_reset(r->ctx);
    qkv_optim_zero_grad(r->opt);
    qkv_tensor *logits = r->lstm ? qkv_lstm_s2s_forward(r->ctx, &r->lm, r->src, NULL, r->tin, NULL)
                                 : qkv_tf_s2s_forward(r->ctx, &r->tm, r->src, NULL, r->tin, NULL);
    qkv_tensor *loss = qkv_cross_entropy(r->ctx, logits, r->tout, NULL);
    if (!loss || qkv_backward(r->ctx, loss) != QKV_OK || qkv_optim_step(r->opt) != QKV_OK) {
        fprintf(stderr, "qkv bench %s: %s\n", r->lstm ? "lstm" : "nmt", qkv_last_error());
        exit(CLI_RUNTIME);
    }
}

static int run(const bench_ctx *b, const char *mode, bool lstm) {
    long B = bench_cfg_int(b, "batch", lstm ? 64 : 32), S = bench_cfg_int(b, "src_len", lstm ? 32 : 64);
    long T = bench_cfg_int(b, "tgt_len", lstm ? 32 : 64), Vs = bench_cfg_int(b, "src_vocab", 8000);
    long Vt = bench_cfg_int(b, "tgt_vocab", 8000);
    nmt_run r = {.ctx = qkv_ctx_new(), .params = qkv_params_new(), .lstm = lstm};
    qkv_rng rng;
    qkv_rng_init(&rng, bench_seed(b));
    qkv_status st;
    double flops, matmul_params;
    if (lstm) {
        long E = bench_cfg_int(b, "embed", 256), H = bench_cfg_int(b, "hidden", 256);
        qkv_lstm_s2s_config c = {.src_vocab = Vs, .tgt_vocab = Vt, .embed = E, .hidden = H,
                                 .num_layers = (int)bench_cfg_int(b, "n_layers", 1)};
        if (!qkv_score_kind_parse(bench_cfg_str(b, "attention", "dot"), &c.attention)) {
            fprintf(stderr, "qkv bench lstm: unknown attention '%s'\n", bench_cfg_str(b, "attention", "dot"));
            return CLI_USAGE;
        }
        const cJSON *feed = cJSON_GetObjectItemCaseSensitive(b->cfg, "input_feeding");
        c.input_feeding = cJSON_IsTrue(feed);
        st = qkv_lstm_s2s_init(&r.lm, r.params, &c, &rng);
        double p_lstm = 4.0 * H * (E + H); /* torch_ref.py's flops("lstm") */
        flops = 3 * (2 * p_lstm * B * S + 2 * (p_lstm + 2.0 * H * H + (double)H * Vt) * B * T + B * 4.0 * T * S * H);
        matmul_params = 2 * 4.0 * H * (E + H) + 2.0 * H * H + (double)H * Vt;
    } else {
        long d = bench_cfg_int(b, "d_model", 256), f = bench_cfg_int(b, "d_ff", 1024);
        long ne = bench_cfg_int(b, "n_enc_layers", 3), nd = bench_cfg_int(b, "n_dec_layers", 3);
        qkv_tf_s2s_config c = {.src_vocab = Vs, .tgt_vocab = Vt,
                               .block = qkv_nn_block_config_default(d, bench_cfg_int(b, "n_heads", 4)),
                               .n_enc_layers = (int)ne, .n_dec_layers = (int)nd, .max_len = S > T ? S : T};
        c.block.dim_feedforward = f;
        c.block.dropout = (float)bench_cfg_num(b, "dropout", 0.1);
        c.block.norm_first = !strcmp(bench_cfg_str(b, "norm", "post"), "pre");
        if (!qkv_activation_parse(bench_cfg_str(b, "activation", "relu"), &c.block.activation)) {
            fprintf(stderr, "qkv bench nmt: unknown activation '%s'\n", bench_cfg_str(b, "activation", "relu"));
            return CLI_USAGE;
        }
        st = qkv_tf_s2s_init(&r.tm, r.params, &c, &rng);
        flops = bench_s2s_train_flops(B, S, T, d, f, ne, nd, Vt, &matmul_params);
    }
    qkv_optim_config oc;
    if (!bench_optim_config(b, QKV_ADAM, &oc)) return CLI_INPUT;
    r.src = bench_random_ids(&rng, Vs, B, S);
    r.tin = bench_random_ids(&rng, Vt, B, T);
    r.tout = bench_random_ids(&rng, Vt, B, T);
    if (st != QKV_OK || !r.ctx || !r.params || !r.src || !r.tin || !r.tout || !(r.opt = qkv_optim_new(r.params, &oc))) {
        fprintf(stderr, "qkv bench %s: %s\n", b->name, qkv_last_error());
        return CLI_RUNTIME;
    }
    bench_measure bm = {.params = (double)qkv_params_numel(r.params), .matmul_params = matmul_params, .batch = B,
                        .seq_len = T, .tokens = (double)(B * T), .seqs = B, .flops = flops};
    cJSON *o = bench_run_timed(b, mode, step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    bench_emit(o);
    qkv_optim_free(r.opt);
    qkv_tensor_free(r.src);
    qkv_tensor_free(r.tin);
    qkv_tensor_free(r.tout);
    qkv_params_free(r.params);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static int run_nmt(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    return run(b, mode, false);
}

static int run_lstm(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    return run(b, mode, true);
}

static const bench_entry nmt_entry = {"nmt", "train",
                                      "encoder-decoder Transformer (torch.nn.Transformer defaults, 3+3 layers, d 256): "
                                      "one training step with Adam",
                                      run_nmt};
static const bench_entry lstm_entry = {"lstm", "train",
                                       "LSTM seq2seq with Luong dot attention (emb 256, hidden 256): one training step "
                                       "with Adam",
                                       run_lstm};
BENCH_REGISTER(nmt_entry)
BENCH_REGISTER(lstm_entry)
