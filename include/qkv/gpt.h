/* A GPT-2-style decoder-only Transformer language model, and its incremental (KV-cached) decoder.
 *
 *     x = wte[ids] + wpe[0..T)
 *     per block:  x = x + c_proj(causal_mha(c_attn(ln_1(x))))        c_attn: one Linear d -> 3d (q | k | v)
 *                 x = x + mlp.c_proj(gelu_tanh(mlp.c_fc(ln_2(x))))
 *     logits = ln_f(x) @ wte^T   (tied; or a separate lm_head.weight [V, d] without bias)
 *
 * Parameter names are Hugging Face GPT-2's, with torch Linear layout [out, in] (HF's Conv1D stores the transpose,
 * [in, out]: load c_attn / c_proj / c_fc weights from an HF checkpoint transposed):
 *     transformer.wte.weight [V, d]                  transformer.wpe.weight [n_ctx, d]
 *     transformer.h.<i>.ln_1.{weight,bias} [d]       transformer.h.<i>.attn.c_attn.{weight [3d, d], bias [3d]}
 *     transformer.h.<i>.attn.c_proj.{weight [d, d], bias [d]}
 *     transformer.h.<i>.ln_2.{weight,bias} [d]       transformer.h.<i>.mlp.c_fc.{weight [f, d], bias [f]}
 *     transformer.h.<i>.mlp.c_proj.{weight [d, f], bias [d]}
 *     transformer.ln_f.{weight,bias} [d]             lm_head.weight [V, d]   (only when untied)
 * Initialisation as ../shared/bench/torch_ref.py's model: every matrix normal(0, 0.02), biases as torch's Linear
 * (uniform +-1/sqrt(in)), LayerNorms ones / zeros.
 *
 * Ownership: the model borrows its parameters from the qkv_params given to create (which must outlive it); a
 * decoder borrows the model and owns its caches. */
#ifndef QKV_GPT_H
#define QKV_GPT_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/attention.h"
#include "qkv/autograd.h"
#include "qkv/model.h"
#include "qkv/params.h"
#include "qkv/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_GPT_MAX_LAYERS 64

typedef struct qkv_gpt_config {
    int64_t vocab_size, n_ctx, d_model, n_heads, d_ff;
    int n_layers;
    bool tied;       /* LM head = wte (no lm_head.weight) */
    float dropout;   /* residual / embedding / attention dropout in training mode (0 = none, as the bench) */
    float ln_eps;    /* 1e-5 */
    float init_std;  /* 0.02 */
} qkv_gpt_config;

/* The bench's `lm` sizes except vocab / n_ctx, which the caller sets. */
qkv_gpt_config qkv_gpt_config_default(void);

typedef struct qkv_gpt_block {
    qkv_tensor *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
    qkv_tensor *ln2_w, *ln2_b, *fc_w, *fc_b, *mproj_w, *mproj_b;
} qkv_gpt_block;

typedef struct qkv_gpt {
    qkv_gpt_config cfg;
    qkv_tensor *wte, *wpe, *lnf_w, *lnf_b, *head; /* head == wte when tied */
    qkv_gpt_block h[QKV_GPT_MAX_LAYERS];
} qkv_gpt;

/* Validate cfg, add and initialise the parameters. NULL (error naming the field) on a bad config. Free with
 * qkv_gpt_free (the parameters stay in params). */
qkv_gpt *qkv_gpt_new(const qkv_gpt_config *cfg, qkv_params *params, const char *prefix, qkv_rng *rng);
void qkv_gpt_free(qkv_gpt *m);

/* ids int32 [B, T] (T <= n_ctx, ids in [0, V)) -> logits [B, T, V]. If maps is non-NULL, per-layer causal
 * attention weights [B, H, T, T] are returned in it (the materialising attention path runs). */
qkv_tensor *qkv_gpt_forward(qkv_ctx *ctx, const qkv_gpt *m, qkv_tensor *ids, qkv_attention_maps *maps);
/* The same without the output projection: the final layer norm's output [B, T, d], whose product with m->head
 * is the logits (for qkv_cross_entropy_linear, which projects only the positions that count). */
qkv_tensor *qkv_gpt_hidden(qkv_ctx *ctx, const qkv_gpt *m, qkv_tensor *ids, qkv_attention_maps *maps);

/* ---- Incremental decoding with a KV cache ------------------------------------------------------------------
 * The decoder keeps, per layer, K and V for every position seen so far (n_ctx * d_model floats per sequence each),
 * so a step feeds one new token per sequence and computes only that position: no recomputation, no allocation after
 * creation but the weights' packed copies, made by the first step with several rows, and the work memory of the
 * largest step or prefill group. The model's weights must not change while a decoder lives. Inference only (no
 * autograd, dropout off). */
typedef struct qkv_gpt_decoder qkv_gpt_decoder;

qkv_gpt_decoder *qkv_gpt_decoder_new(const qkv_gpt *m, int batch);
void qkv_gpt_decoder_free(qkv_gpt_decoder *d);
/* Forget the cache (position back to 0). */
void qkv_gpt_decoder_reset(qkv_gpt_decoder *d);
/* Number of positions already in the cache. */
int64_t qkv_gpt_decoder_pos(const qkv_gpt_decoder *d);
/* Feed tokens[0..batch) at the next position; logits [batch, V] receive that position's output. Error (nothing
 * changed) when the context is full or a token is out of range. */
qkv_status qkv_gpt_decoder_step(qkv_gpt_decoder *d, const int32_t *tokens, float *logits);
/* Feed n tokens to every sequence at once without computing logits, tokens [batch, n] row-major (sequence b's
 * tokens at b * n): a prompt before its last token. The positions run through the blocks as one batch (groups of
 * positions x sequences fill whole matrix products; no output projection), and the cache ends bit for bit as n
 * calls of qkv_gpt_decoder_step leave it: later steps return the same logits. Error (nothing changed) when the
 * tokens do not fit the context or one is out of range. */
qkv_status qkv_gpt_decoder_prefill(qkv_gpt_decoder *d, const int32_t *tokens, int64_t n);
/* The decoder then holds n_rows sequences (1..the batch it was made for): sequence b becomes old sequence from[b]
 * (each in [0, current count)); beam search keeps its surviving hypotheses, batched decoding drops finished ones.
 * Only the cached positions move. Later steps take n_rows tokens. Error (nothing changed) on an index out of
 * range. */
qkv_status qkv_gpt_decoder_reorder(qkv_gpt_decoder *d, const int32_t *from, int n_rows);

/* The model type registered as "gpt" (task "lm"). Its create() returns a qkv_model that is a qkv_gpt; its decoder
 * (decoder.h) is this KV-cached one, with raw logits as scores and n_ctx as capacity. */
extern const qkv_model_type qkv_model_gpt;

#ifdef __cplusplus
}
#endif
#endif
