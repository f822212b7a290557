/* qkv bench attn: one multi-head self-attention block as torch_ref.py's `attn` mode measures it
 * (torch.nn.MultiheadAttention, batch_first, need_weights=False): in-projection of q, k, v, scaled dot-product
 * attention, out-projection, then forward + backward of sum(out) with respect to the input and every weight.
 * Here the attention is qkv_sdpa's fused path, so memory stays linear in T where PyTorch 1.13 materialises
 * [H, T, T]. Sizes come from configs.json's `attn` entry (n_heads, d_head, batch, causal, seq_lens). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cli.h"
#include "qkv/attention.h"
#include "qkv/qkv.h"

typedef struct {
    qkv_ctx *ctx;
    qkv_tensor *x, *w_in, *b_in, *w_out, *b_out;
    long B, T, H, dh;
    bool causal;
} attn_run;

/* [B, T, E] -> [B, H, T, dh]: a reshape and a permute, both views. */
static qkv_tensor *heads(qkv_ctx *c, qkv_tensor *x, const attn_run *r) {
    return qkv_permute(c, qkv_reshape(c, x, QKV_DIMS(r->B, r->T, r->H, r->dh)), (const int[]){0, 2, 1, 3});
}

static void step(void *u) {
    attn_run *r = u;
    qkv_ctx *c = r->ctx;
    long E = r->H * r->dh;
    qkv_ctx_reset(c);
    qkv_tensor *params[5] = {r->x, r->w_in, r->b_in, r->w_out, r->b_out};
    for (int i = 0; i < 5; i++) qkv_tensor_zero_grad(params[i]);
    /* in_proj_weight [3E, E] holds Wq, Wk, Wv stacked: row slices of it are contiguous, so each projection is one
     * GEMM on its own slice. */
    qkv_tensor *proj[3];
    for (int i = 0; i < 3; i++) {
        qkv_tensor *w = qkv_slice(c, r->w_in, 0, i * E, (i + 1) * E, 1);
        qkv_tensor *b = qkv_slice(c, r->b_in, 0, i * E, (i + 1) * E, 1);
        proj[i] = heads(c, qkv_linear(c, r->x, w, b), r);
    }
    qkv_sdpa_opts o = qkv_sdpa_defaults();
    o.causal = r->causal;
    qkv_tensor *a = qkv_sdpa(c, proj[0], proj[1], proj[2], &o);
    qkv_tensor *merged = qkv_reshape(c, qkv_permute(c, a, (const int[]){0, 2, 1, 3}), QKV_DIMS(r->B, r->T, E));
    qkv_tensor *y = qkv_linear(c, merged, r->w_out, r->b_out);
    qkv_tensor *loss = qkv_sum_all(c, y);
    if (!loss || qkv_backward(c, loss) != QKV_OK) {
        fprintf(stderr, "qkv bench attn: %s\n", qkv_last_error());
        exit(CLI_RUNTIME);
    }
}

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    attn_run r = {.ctx = qkv_ctx_new()};
    r.H = bench_cfg_int(b, "n_heads", 8);
    r.dh = bench_cfg_int(b, "d_head", 64);
    r.B = bench_cfg_int(b, "batch", 1);
    r.T = seq_len > 0 ? seq_len : 1024;
    r.causal = bench_cfg_int(b, "causal", 0) != 0;
    long E = r.H * r.dh;
    r.x = qkv_tensor_new(QKV_F32, QKV_DIMS(r.B, r.T, E));
    r.w_in = qkv_tensor_new(QKV_F32, QKV_DIMS(3 * E, E));
    r.b_in = qkv_tensor_new(QKV_F32, QKV_DIMS(3 * E));
    r.w_out = qkv_tensor_new(QKV_F32, QKV_DIMS(E, E));
    r.b_out = qkv_tensor_new(QKV_F32, QKV_DIMS(E));
    if (!r.ctx || !r.x || !r.w_in || !r.b_in || !r.w_out || !r.b_out) {
        fprintf(stderr, "qkv bench attn: %s\n", qkv_last_error());
        return CLI_RUNTIME;
    }
    qkv_rng rng;
    qkv_rng_init(&rng, 1234);
    qkv_rng_fill_normal(&rng, r.x, 0, 1);
    float lim = 1.0f / sqrtf((float)E);
    qkv_rng_fill_uniform(&rng, r.w_in, -lim, lim);
    qkv_rng_fill_uniform(&rng, r.w_out, -lim, lim);
    qkv_tensor *all[5] = {r.x, r.w_in, r.b_in, r.w_out, r.b_out};
    for (int i = 0; i < 5; i++) qkv_tensor_set_requires_grad(all[i], true);

    /* Matmul FLOPs as torch_ref.py counts them: 4 projections + QK^T and PV, training = 3 x forward. */
    double fwd = 2.0 * 4 * E * E * r.B * r.T + (double)r.B * 4 * r.T * r.T * E;
    bench_measure bm = {.batch = r.B, .seq_len = r.T, .tokens = (double)(r.B * r.T), .seqs = r.B, .flops = 3 * fwd};
    cJSON *o = bench_run_timed(b, mode, step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    cJSON_AddNumberToObject(o, "attn_core_flops_per_step", 3.0 * r.B * 4 * r.T * r.T * E);
    cJSON_AddStringToObject(o, "attention", "fused");
    cJSON_AddNumberToObject(o, "arena_mib", (double)qkv_ctx_arena_bytes(r.ctx) / (1 << 20));
    cJSON_AddStringToObject(o, "status", "ok");
    bench_emit(o);
    for (int i = 0; i < 5; i++) qkv_tensor_free(all[i]);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static const bench_entry attn_entry = {
    "attn", "fwdbwd", "one multi-head self-attention block (in-proj, fused sdpa, out-proj): forward + backward",
    run};
BENCH_REGISTER(attn_entry)
