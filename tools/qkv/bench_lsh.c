/* qkv bench lsh: one shared-QK self-attention block of the Reformer, forward + backward of sum(out) with respect to
 * the input and every weight: projections x -> qk, v (no bias), attention, out-projection (with bias).
 *   mode lsh : qkv_lsh_attention (fresh rotations every step, n_buckets = 2 T / chunk_len, factorized hashing above
 *              factorize_above buckets, default QKV_LSH_FACTORIZE_ABOVE, -1 never), memory O(T chunk_len)
 *   mode full: the same projections through qkv_sdpa's fused kernels with q = qk and k = qk normalised as LSH
 *              attention normalises its keys (full causal shared-QK attention): memory O(T), time O(T^2)
 * Both causal. Sizes: configs.json's `lsh` entry when present (n_heads, d_head, batch, chunk_len, n_hashes), else
 * 8 heads of 64, batch 1, chunks of 64, 2 hash rounds. Besides the common fields the line has us_per_token
 * (median step time / tokens) and arena_mib (the context's high-water mark). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "qkv/attention.h"
#include "qkv/lsh_attention.h"
#include "qkv/qkv.h"

typedef struct {
    qkv_ctx *ctx;
    qkv_tensor *x, *w_qk, *w_v, *w_out, *b_out;
    long B, T, H, dh, chunk, n_hashes;
    int n_buckets, n1, n2; /* n1 > 0: factorized, n1 x n2 buckets */
    bool lsh;
} lsh_run;

static qkv_tensor *heads(qkv_ctx *c, qkv_tensor *x, const lsh_run *r) {
    return qkv_permute(c, qkv_reshape(c, x, QKV_DIMS(r->B, r->T, r->H, r->dh)), (const int[]){0, 2, 1, 3});
}

static void step(void *u) {
    lsh_run *r = u;
    qkv_ctx *c = r->ctx;
    qkv_ctx_reset(c);
    qkv_tensor *params[5] = {r->x, r->w_qk, r->w_v, r->w_out, r->b_out};
    for (int i = 0; i < 5; i++) qkv_tensor_zero_grad(params[i]);
    qkv_tensor *qk = heads(c, qkv_linear(c, r->x, r->w_qk, NULL), r), *v = heads(c, qkv_linear(c, r->x, r->w_v, NULL), r);
    qkv_tensor *a;
    if (r->lsh) {
        qkv_lsh_opts o = qkv_lsh_defaults();
        o.chunk_len = r->chunk;
        o.causal = true;
        o.bucket_factor = r->n1;
        qkv_tensor *rot = qkv_lsh_rotations(c, qkv_ctx_rng(c), r->dh, (int)r->n_hashes,
                                            r->n1 ? r->n1 + r->n2 : r->n_buckets);
        a = qkv_lsh_attention(c, qk, v, rot, &o);
    } else {
        qkv_tensor *ms = qkv_mean(c, qkv_mul(c, qk, qk), -1, true);
        qkv_tensor *k = qkv_div(c, qk, qkv_sqrt(c, qkv_affine(c, ms, 1.0f, 1e-6f)));
        qkv_sdpa_opts o = qkv_sdpa_defaults();
        o.causal = true;
        a = qkv_sdpa(c, qk, k, v, &o);
    }
    long E = r->H * r->dh;
    qkv_tensor *merged = qkv_reshape(c, qkv_contiguous(c, qkv_permute(c, a, (const int[]){0, 2, 1, 3})),
                                     QKV_DIMS(r->B, r->T, E));
    qkv_tensor *loss = qkv_sum_all(c, qkv_linear(c, merged, r->w_out, r->b_out));
    if (!loss || qkv_backward(c, loss) != QKV_OK) {
        fprintf(stderr, "qkv bench lsh: %s\n", qkv_last_error());
        exit(CLI_RUNTIME);
    }
}

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    lsh_run r = {.ctx = qkv_ctx_new(), .lsh = !strcmp(mode, "lsh")};
    r.H = bench_cfg_int(b, "n_heads", 8);
    r.dh = bench_cfg_int(b, "d_head", 64);
    r.B = bench_cfg_int(b, "batch", 1);
    r.chunk = bench_cfg_int(b, "chunk_len", 64);
    r.n_hashes = bench_cfg_int(b, "n_hashes", 2);
    r.T = seq_len > 0 ? seq_len : 4096;
    r.n_buckets = qkv_lsh_default_buckets(r.T, r.chunk);
    r.n1 = qkv_lsh_factor(r.n_buckets, (int)bench_cfg_int(b, "factorize_above", QKV_LSH_FACTORIZE_ABOVE), &r.n2);
    if (r.T % r.chunk) {
        fprintf(stderr, "qkv bench lsh: --seq-len %ld must be a multiple of chunk_len %ld\n", r.T, r.chunk);
        return CLI_USAGE;
    }
    long E = r.H * r.dh;
    r.x = qkv_tensor_new(QKV_F32, QKV_DIMS(r.B, r.T, E));
    r.w_qk = qkv_tensor_new(QKV_F32, QKV_DIMS(E, E));
    r.w_v = qkv_tensor_new(QKV_F32, QKV_DIMS(E, E));
    r.w_out = qkv_tensor_new(QKV_F32, QKV_DIMS(E, E));
    r.b_out = qkv_tensor_new(QKV_F32, QKV_DIMS(E));
    if (!r.ctx || !r.x || !r.w_qk || !r.w_v || !r.w_out || !r.b_out) {
        fprintf(stderr, "qkv bench lsh: %s\n", qkv_last_error());
        return CLI_RUNTIME;
    }
    qkv_rng rng;
    qkv_rng_init(&rng, 1234);
    qkv_rng_fill_normal(&rng, r.x, 0, 1);
    float lim = 1.0f / sqrtf((float)E);
    qkv_rng_fill_uniform(&rng, r.w_qk, -lim, lim);
    qkv_rng_fill_uniform(&rng, r.w_v, -lim, lim);
    qkv_rng_fill_uniform(&rng, r.w_out, -lim, lim);
    qkv_tensor *all[5] = {r.x, r.w_qk, r.w_v, r.w_out, r.b_out};
    for (int i = 0; i < 5; i++) qkv_tensor_set_requires_grad(all[i], true);

    /* Matmul FLOPs: 3 projections, then QK^T and PV over each query's keys (2 chunks per hash round for LSH, the
     * whole sequence for full attention, as torch_ref.py counts a causal model); training = 3 x forward. */
    double keys = r.lsh ? 2.0 * r.chunk * r.n_hashes : (double)r.T;
    double fwd = 2.0 * 3 * E * E * r.B * r.T + (double)r.B * 4 * r.T * keys * E;
    bench_measure bm = {.batch = r.B, .seq_len = r.T, .tokens = (double)(r.B * r.T), .seqs = r.B, .flops = 3 * fwd};
    cJSON *o = bench_run_timed(b, mode, step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    cJSON_AddNumberToObject(o, "us_per_token", 1000.0 * bm.median_ms / (double)(r.B * r.T));
    cJSON_AddStringToObject(o, "attention", r.lsh ? "lsh" : "fused");
    if (r.lsh) {
        cJSON_AddNumberToObject(o, "chunk_len", (double)r.chunk);
        cJSON_AddNumberToObject(o, "n_hashes", (double)r.n_hashes);
        cJSON_AddNumberToObject(o, "n_buckets", (double)(r.n1 ? r.n1 * r.n2 : r.n_buckets));
        if (r.n1) {
            cJSON *f = cJSON_AddArrayToObject(o, "bucket_factors");
            cJSON_AddItemToArray(f, cJSON_CreateNumber(r.n1));
            cJSON_AddItemToArray(f, cJSON_CreateNumber(r.n2));
        }
    }
    cJSON_AddNumberToObject(o, "arena_mib", (double)qkv_ctx_arena_peak(r.ctx) / (1 << 20));
    cJSON_AddStringToObject(o, "status", "ok");
    bench_emit(o);
    for (int i = 0; i < 5; i++) qkv_tensor_free(all[i]);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

static const bench_entry lsh_entry = {
    "lsh", "lsh,full",
    "one shared-QK self-attention block, causal: LSH attention (mode lsh) or fused full attention (mode full), "
    "forward + backward",
    run};
BENCH_REGISTER(lsh_entry)
