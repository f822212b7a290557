/* qkv bench hf: the pretrained-interop speeds, measured as bench/hf_ref.py measures PyTorch. Modes:
 *   glove         parse the staged GloVe 6B 100d subset (20,000 x 100 text) into a matrix + vocabulary.
 *   tiny          forward (inference, batch 1) of ../shared/pretrained/tiny-random-bert at min(128, its 64
 *                 positions) tokens;
 *   base          the same with a BERT-base-sized random checkpoint (hidden 768, 12 layers, 12 heads, 3072)
 *                 written by `bench/hf_ref.py --make-base DIR` (default DIR /tmp/qkv-bert-base, or $QKV_BERT_BASE),
 *                 128 tokens. Attention weights are not requested, so the fused attention kernel runs. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "qkv/glove.h"
#include "qkv/hf.h"
#include "qkv/qkv.h"


/* ---- glove ---- */

typedef struct {
    const char *path;
    int64_t words, dim;
} glove_run;

static void glove_step(void *u) {
    glove_run *r = u;
    qkv_vectors *v = qkv_vectors_load(r->path, QKV_VEC_AUTO);
    if (!v) {
        fprintf(stderr, "qkv bench hf: %s\n", qkv_last_error());
        exit(CLI_INPUT);
    }
    r->words = qkv_vectors_count(v), r->dim = qkv_vectors_dim(v);
    qkv_vectors_free(v);
}

static int run_glove(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    char buf[PATH_MAX];
    glove_run r = {
        .path = cli_shared_path("pretrained/glove-6B-100d-top20k/glove.6B.100d.top20k.txt", buf, sizeof buf)};
    if (!r.path) return cli_error("bench", CLI_INPUT, "glove: ../shared/pretrained/glove-6B-100d-top20k not found");
    cJSON *o = bench_run_timed(b, mode, glove_step, &r, &(bench_measure){0});
    if (!o) return CLI_RUNTIME;
    cJSON_AddNumberToObject(o, "words", (double)r.words);
    cJSON_AddNumberToObject(o, "dim", (double)r.dim);
    bench_emit(o);
    return CLI_OK;
}

/* ---- bert ---- */

typedef struct {
    qkv_ctx *ctx;
    qkv_hf_model *m;
    qkv_tensor *ids, *mask;
} bert_run;

static void bert_step(void *u) {
    bert_run *r = u;
    qkv_ctx_reset(r->ctx);
    qkv_hf_outputs out;
    if (qkv_hf_forward(r->ctx, r->m, &(qkv_hf_inputs){.input_ids = r->ids, .attention_mask = r->mask}, false, &out)) {
        fprintf(stderr, "qkv bench hf: %s\n", qkv_last_error());
        exit(CLI_RUNTIME);
    }
}

static int run_bert(const bench_ctx *b, const char *mode, long seq_len) {
    char buf[PATH_MAX];
    const char *dir;
    if (!strcmp(mode, "tiny")) {
        dir = cli_shared_path("pretrained/tiny-random-bert", buf, sizeof buf);
        if (!dir) return cli_error("bench", CLI_INPUT, "bert: ../shared/pretrained/tiny-random-bert not found");
    } else {
        dir = getenv("QKV_BERT_BASE");
        if (!dir || !*dir) dir = "/tmp/qkv-bert-base";
        snprintf(buf, sizeof buf, "%s/config.json", dir);
        if (access(buf, R_OK))
            return cli_error("bench", CLI_INPUT, "bert base: %s not found; write it with "
                             "/usr/bin/python3 bench/hf_ref.py --make-base %s", buf, dir);
    }
    double t0 = cli_now();
    bert_run r = {.ctx = qkv_ctx_new(), .m = qkv_hf_load(dir)};
    double load_s = cli_now() - t0;
    if (!r.ctx || !r.m) return cli_error("bench", CLI_INPUT, "bert: %s", qkv_last_error());
    const qkv_hf_config *c = qkv_hf_config_of(r.m);
    long T = seq_len > 0 ? seq_len : bench_cfg_int(b, "seq_len", 128);
    if (T > c->max_positions) T = (long)c->max_positions;
    r.ids = qkv_tensor_new(QKV_I32, QKV_DIMS(1, T));
    r.mask = qkv_tensor_new(QKV_I32, QKV_DIMS(1, T));
    if (!r.ids || !r.mask) return CLI_RUNTIME;
    /* Ids as the PyTorch side draws them: a fixed pattern over the vocabulary, [CLS]-like 101 first. */
    for (long t = 0; t < T; t++) {
        qkv_i32(r.ids)[t] = (int32_t)((t * 7919 + 101) % c->vocab_size);
        qkv_i32(r.mask)[t] = 1;
    }
    qkv_ctx_set_grad(r.ctx, false);
    qkv_ctx_set_training(r.ctx, false);
    double E = (double)c->hidden_size, I = (double)c->intermediate_size, L = (double)c->num_layers;
    double flops = L * (2.0 * T * (4 * E * E + 2 * E * I) + 4.0 * T * T * E) + 2.0 * E * E;
    bench_measure bm = {.params = (double)qkv_params_numel(qkv_hf_params(r.m)), .batch = 1, .seq_len = T, .tokens = T,
                        .seqs = 1, .flops = flops};
    cJSON *o = bench_run_timed(b, mode, bert_step, &r, &bm);
    if (!o) return CLI_RUNTIME;
    cJSON_AddNumberToObject(o, "load_s", (double)(long long)(load_s * 1e3 + 0.5) / 1e3);
    bench_emit(o);
    qkv_tensor_free(r.ids);
    qkv_tensor_free(r.mask);
    qkv_hf_free(r.m);
    qkv_ctx_free(r.ctx);
    return CLI_OK;
}

/* One entry, as the issue names it: `qkv bench hf --mode glove|tiny|base`. */
static int run_hf(const bench_ctx *b, const char *mode, long seq_len) {
    return !strcmp(mode, "glove") ? run_glove(b, mode, seq_len) : run_bert(b, mode, seq_len);
}

static const bench_entry hf_entry = {"hf", "glove,tiny,base",
                                     "GloVe 20k x 100 load; BERT forward, batch 1, 128 tokens (tiny-random-bert: its "
                                     "64) / BERT-base size",
                                     run_hf};
BENCH_REGISTER(hf_entry)
