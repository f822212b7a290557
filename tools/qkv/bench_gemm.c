/* qkv bench gemm: the GEMMs of every configs.json model through the tensor API (qkv_linear / qkv_matmul forward
 * and backward: three GEMMs each) next to the same three raw cblas_sgemm calls, in the same process, interleaved.
 * One JSON line per shape, then a summary line; the API should reach >= 95% of raw cblas. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "qkv/qkv.h"

typedef struct {
    char label[64];
    long batch, M, K, N; /* batch > 0: batched matmul [batch, M, K] @ [batch, K, N]^T-form (attention) */
    bool bt;             /* second operand used transposed (QK^T) */
} gemm_shape;

typedef struct {
    const gemm_shape *s;
    qkv_ctx *ctx;
    qkv_tensor *x, *w, *gout;
    float *dx, *dw, *y;
} gemm_run;

static double shape_flops(const gemm_shape *s) { return 3.0 * 2.0 * (double)(s->batch ? s->batch : 1) * s->M * s->K * s->N; }

/* Tensor API: forward + backward (dX and dW). */
static void api_step(void *u) {
    gemm_run *r = u;
    qkv_ctx_reset(r->ctx);
    r->x->grad = NULL; /* an activation's gradient lives in the arena and dies with the reset */
    qkv_tensor_zero_grad(r->w);
    qkv_tensor *y;
    if (r->s->batch)
        y = qkv_matmul(r->ctx, r->x, r->s->bt ? qkv_transpose(r->ctx, r->w, -1, -2) : r->w);
    else
        y = qkv_linear(r->ctx, r->x, r->w, NULL);
    if (!y || qkv_backward_with(r->ctx, y, r->gout) != QKV_OK) {
        fprintf(stderr, "qkv bench gemm: %s\n", qkv_last_error());
        exit(CLI_RUNTIME);
    }
}

/* The same three products straight through cblas (fresh outputs, beta = 0). */
static void raw_step(void *u) {
    gemm_run *r = u;
    const gemm_shape *s = r->s;
    const float *x = r->x->data, *w = r->w->data, *g = r->gout->data;
    int M = (int)s->M, K = (int)s->K, N = (int)s->N;
    if (!s->batch) { /* y = x W^T; dx = g W; dW = g^T x   (W is [N, K]) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, x, K, w, K, 0, r->y, N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1, g, N, w, K, 0, r->dx, K);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1, g, N, x, K, 0, r->dw, K);
        return;
    }
    long nb = s->batch;
    bool bt = s->bt; /* w stored [nb, N, K] when bt, else [nb, K, N] */
#pragma omp parallel for schedule(static)
    for (long b = 0; b < nb; b++) {
        const float *xb = x + b * M * K, *wb = w + b * K * N, *gb = g + b * M * N;
        float *yb = r->y + b * M * N, *dxb = r->dx + b * M * K, *dwb = r->dw + b * K * N;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, bt ? CblasTrans : CblasNoTrans, M, N, K, 1, xb, K, wb, bt ? K : N,
                    0, yb, N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, bt ? CblasNoTrans : CblasTrans, M, K, N, 1, gb, N, wb,
                    bt ? K : N, 0, dxb, K);
        if (bt) /* d(w)[N,K] = g^T x */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1, gb, N, xb, K, 0, dwb, K);
        else /* d(w)[K,N] = x^T g */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, M, 1, xb, K, gb, N, 0, dwb, N);
    }
}

static int add_shape(gemm_shape *v, int n, const char *cfg, const char *what, long batch, long M, long K, long N,
                     bool bt) {
    if (M <= 0 || K <= 0 || N <= 0) return n;
    snprintf(v[n].label, sizeof v[n].label, "%s.%s", cfg, what);
    v[n].batch = batch;
    v[n].M = M;
    v[n].K = K;
    v[n].N = N;
    v[n].bt = bt;
    return n + 1;
}

static long cfg_int(const cJSON *c, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, k);
    return cJSON_IsNumber(v) ? (long)v->valuedouble : 0;
}

/* The linear layers and attention products of each model, at its configured batch x sequence length. */
static int model_shapes(const cJSON *configs, gemm_shape *v) {
    int n = 0;
    const cJSON *c;
    if ((c = cJSON_GetObjectItemCaseSensitive(configs, "cls"))) {
        long d = cfg_int(c, "d_model"), f = cfg_int(c, "d_ff"), B = cfg_int(c, "batch"), T = cfg_int(c, "seq_len");
        long H = cfg_int(c, "n_heads"), dh = H ? d / H : d;
        n = add_shape(v, n, "cls", "q/k/v/out", 0, B * T, d, d, false);
        n = add_shape(v, n, "cls", "ffn1", 0, B * T, d, f, false);
        n = add_shape(v, n, "cls", "ffn2", 0, B * T, f, d, false);
        n = add_shape(v, n, "cls", "qk^T", B * H, T, dh, T, true);
        n = add_shape(v, n, "cls", "pv", B * H, T, T, dh, false);
    }
    if ((c = cJSON_GetObjectItemCaseSensitive(configs, "lm"))) {
        long d = cfg_int(c, "d_model"), f = cfg_int(c, "d_ff"), B = cfg_int(c, "batch"), T = cfg_int(c, "seq_len");
        long V = cfg_int(c, "vocab"), H = cfg_int(c, "n_heads"), dh = H ? d / H : d;
        n = add_shape(v, n, "lm", "qkv", 0, B * T, d, 3 * d, false);
        n = add_shape(v, n, "lm", "proj", 0, B * T, d, d, false);
        n = add_shape(v, n, "lm", "fc", 0, B * T, d, f, false);
        n = add_shape(v, n, "lm", "fc_proj", 0, B * T, f, d, false);
        n = add_shape(v, n, "lm", "lm_head", 0, B * T, d, V, false);
        n = add_shape(v, n, "lm", "qk^T", B * H, T, dh, T, true);
    }
    if ((c = cJSON_GetObjectItemCaseSensitive(configs, "nmt"))) {
        long d = cfg_int(c, "d_model"), f = cfg_int(c, "d_ff"), B = cfg_int(c, "batch"), T = cfg_int(c, "tgt_len");
        long V = cfg_int(c, "tgt_vocab");
        n = add_shape(v, n, "nmt", "attn_proj", 0, B * T, d, d, false);
        n = add_shape(v, n, "nmt", "ffn1", 0, B * T, d, f, false);
        n = add_shape(v, n, "nmt", "ffn2", 0, B * T, f, d, false);
        n = add_shape(v, n, "nmt", "generator", 0, B * T, d, V, false);
    }
    if ((c = cJSON_GetObjectItemCaseSensitive(configs, "lstm"))) {
        long e = cfg_int(c, "embed"), h = cfg_int(c, "hidden"), B = cfg_int(c, "batch"), T = cfg_int(c, "tgt_len");
        long V = cfg_int(c, "tgt_vocab");
        n = add_shape(v, n, "lstm", "input_proj", 0, B * T, e, 4 * h, false);
        n = add_shape(v, n, "lstm", "recurrent_step", 0, B, h, 4 * h, false);
        n = add_shape(v, n, "lstm", "attn_combine", 0, B * T, 2 * h, h, false);
        n = add_shape(v, n, "lstm", "generator", 0, B * T, h, V, false);
    }
    return n;
}

static double timed_median(const bench_ctx *b, bench_step_fn fn, void *u, double seconds) {
    bench_ctx t = *b;
    t.max_seconds = seconds;
    double ms[400], warm;
    int n = bench_time(&t, fn, u, 1, 3, 400, ms, &warm);
    return bench_median(ms, n);
}

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    gemm_shape shapes[32];
    int ns = model_shapes(b->configs, shapes);
    double per = b->max_seconds_set ? b->max_seconds : 0.6, log_sum = 0, worst = INFINITY;
    const char *only = getenv("QKV_BENCH_SHAPE"); /* substring filter, for profiling one shape */
    for (int i = 0; i < ns; i++) {
        const gemm_shape *s = &shapes[i];
        if (only && !strstr(s->label, only)) continue;
        long nb = s->batch ? s->batch : 1;
        gemm_run r = {.s = s, .ctx = qkv_ctx_new()};
        if (s->batch) {
            r.x = qkv_tensor_new(QKV_F32, QKV_DIMS(nb, s->M, s->K));
            r.w = s->bt ? qkv_tensor_new(QKV_F32, QKV_DIMS(nb, s->N, s->K)) : qkv_tensor_new(QKV_F32, QKV_DIMS(nb, s->K, s->N));
            r.gout = qkv_tensor_new(QKV_F32, QKV_DIMS(nb, s->M, s->N));
        } else {
            r.x = qkv_tensor_new(QKV_F32, QKV_DIMS(s->M, s->K));
            r.w = qkv_tensor_new(QKV_F32, QKV_DIMS(s->N, s->K));
            r.gout = qkv_tensor_new(QKV_F32, QKV_DIMS(s->M, s->N));
        }
        r.y = malloc(sizeof(float) * (size_t)(nb * s->M * s->N));
        r.dx = malloc(sizeof(float) * (size_t)(nb * s->M * s->K));
        r.dw = malloc(sizeof(float) * (size_t)(nb * s->K * s->N));
        if (!r.ctx || !r.x || !r.w || !r.gout || !r.y || !r.dx || !r.dw) {
            fprintf(stderr, "qkv bench gemm: out of memory\n");
            return CLI_RUNTIME;
        }
        qkv_rng rng;
        qkv_rng_init(&rng, 1234);
        qkv_rng_fill_uniform(&rng, r.x, -1, 1);
        qkv_rng_fill_uniform(&rng, r.w, -1, 1);
        qkv_rng_fill_uniform(&rng, r.gout, -1, 1);
        qkv_tensor_set_requires_grad(r.x, false);
        /* x is an activation (a context tensor in real training); give it a gradient through a leaf flag. */
        qkv_tensor_set_requires_grad(r.w, true);
        qkv_tensor xs = *r.x; /* a non-heap alias so its gradient lives in the arena, as an activation's would */
        xs.flags = QKV_FLAG_REQUIRES_GRAD;
        xs.grad = NULL;
        qkv_tensor *heap_x = r.x;
        r.x = &xs;
        /* Interleave API and raw runs so drift (turbo, the other core's load) hits both alike. */
        double api[3], raw[3];
        for (int k = 0; k < 3; k++) {
            api[k] = timed_median(b, api_step, &r, per / 3);
            raw[k] = timed_median(b, raw_step, &r, per / 3);
        }
        double a = bench_median(api, 3), w = bench_median(raw, 3), fl = shape_flops(s);
        double ratio = w / a;
        log_sum += log(ratio);
        if (ratio < worst) worst = ratio;
        cJSON *o = bench_result(b, mode);
        cJSON_AddStringToObject(o, "shape", s->label);
        cJSON_AddNumberToObject(o, "batch", nb);
        cJSON_AddNumberToObject(o, "M", (double)s->M);
        cJSON_AddNumberToObject(o, "K", (double)s->K);
        cJSON_AddNumberToObject(o, "N", (double)s->N);
        cJSON_AddNumberToObject(o, "ms_api_median", round(a * 1000) / 1000);
        cJSON_AddNumberToObject(o, "ms_cblas_median", round(w * 1000) / 1000);
        cJSON_AddNumberToObject(o, "gflops_api", round(fl / a / 1e6 * 10) / 10);
        cJSON_AddNumberToObject(o, "gflops_cblas", round(fl / w / 1e6 * 10) / 10);
        cJSON_AddNumberToObject(o, "api_vs_cblas", round(ratio * 1000) / 1000);
        bench_emit(o);
        r.x = heap_x;
        qkv_tensor_free(r.x);
        qkv_tensor_free(r.w);
        qkv_tensor_free(r.gout);
        free(r.y);
        free(r.dx);
        free(r.dw);
        qkv_ctx_free(r.ctx);
    }
    cJSON *o = bench_result(b, mode);
    cJSON_AddStringToObject(o, "shape", "summary");
    cJSON_AddNumberToObject(o, "shapes", ns);
    cJSON_AddNumberToObject(o, "api_vs_cblas_geomean", round(exp(log_sum / (ns ? ns : 1)) * 1000) / 1000);
    cJSON_AddNumberToObject(o, "api_vs_cblas_min", round(worst * 1000) / 1000);
    bench_emit(o);
    return CLI_OK;
}

static const bench_entry gemm_entry = {"gemm", "fwdbwd",
                                       "every model's GEMMs (fwd + both bwd) via the tensor API vs raw cblas", run};
BENCH_REGISTER(gemm_entry)
