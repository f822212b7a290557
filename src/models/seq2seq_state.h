/* The decoding state the two Transformer encoder-decoders (transformer_seq2seq.c, t5.c) keep for incremental
 * decoding (src/models/seq2seq_state.c): per decoder layer a self-attention K/V cache [rows, Tmax, H, dk] written
 * one step at a time, and the cross-attention K/V of the encoder states kept once per source sentence [n_src, H, S,
 * dk] (projected once at start; each row attends to its own source's through the row -> source map, so a beam's
 * rows share them and reorders never move them), the source padding, and the row -> source map that reorders
 * follow. Each model embeds one and adds what is its own (weights, packs). Not installed. */
#ifndef QKV_SEQ2SEQ_STATE_H
#define QKV_SEQ2SEQ_STATE_H

#include "core/visibility.h"
#include "qkv/nn_layers.h"
#include "qkv/ops.h"

QKV_INTERNAL_BEGIN

#define S2S_SLOTS (2 * QKV_NN_MAX_LAYERS)

typedef struct s2s_kv_state {
    qkv_ctx *keep, *work;                                      /* across steps / reset at every step */
    int rows, cap, S, t, max_steps, n_layers;                  /* rows now / prepared by start */
    int64_t H, dk;                                             /* heads and their width (cross-attention) */
    qkv_tensor *pad;                                           /* [n_src * H, S]: each source's padding per head */
    qkv_tensor *kc[QKV_NN_MAX_LAYERS], *vc[QKV_NN_MAX_LAYERS]; /* self-attention cache */
    qkv_tensor *ck[QKV_NN_MAX_LAYERS], *cv[QKV_NN_MAX_LAYERS]; /* cross-attention keys / values [n_src, H, S, dk] */
    qkv_tensor *full[S2S_SLOTS]; /* what each cache above views the first rows of, in slot order */
    int32_t *src_of, *src_tmp;   /* [cap]: the source of each row; scratch */
    bool raw;                    /* emit copies the logits instead of their log_softmax (a model's step_logits) */
} s2s_kv_state;

/* Contexts and the row -> source map of n_src sources with rows_per_src rows each; `who` names the model in
 * messages. On failure the state holds only what release frees. */
qkv_status qkv__s2s_state_init(s2s_kv_state *s, int n_src, int rows_per_src, int src_len, int max_steps,
                               int n_layers, const char *who);
void qkv__s2s_state_release(s2s_kv_state *s);
/* The sources' padding pad [n_src, S] (1 = padded), for H heads of width dk. */
qkv_status qkv__s2s_state_pad(s2s_kv_state *s, qkv_tensor *pad, int64_t H, int64_t dk);
/* Layer l's cross-attention keys/values copied in (kk, vv [n_src, H, S, dk], any strides) and its empty
 * self-attention cache. */
qkv_status qkv__s2s_state_layer(s2s_kv_state *s, int l, qkv_tensor *kk, qkv_tensor *vv);
/* After the last layer: remembers the full caches that reorders gather rows of. */
void qkv__s2s_state_seal(s2s_kv_state *s);
/* Writes the step's k, v (anything reshapeable to [rows, 1, H, dk]) into layer l's cache at position t, and gives
 * the cached steps 0..t as K, V [rows, H, t + 1, dk] (views in work). */
qkv_status qkv__s2s_state_self_kv(s2s_kv_state *s, int l, qkv_tensor *k, qkv_tensor *v, int64_t H, int64_t dk,
                                  qkv_tensor **K, qkv_tensor **V);
/* Layer l's cross-attention for the step's queries q [rows, 1, H * dk] (heads side by side, any strides): each row
 * attends to its own source's keys and values with scores scale * q . k over the unpadded positions. The context
 * [rows, 1, H * dk] (in work); *weights, when asked, gets the attention weights [rows, H, 1, S]. */
qkv_tensor *qkv__s2s_state_cross(s2s_kv_state *s, int l, qkv_tensor *q, float scale, qkv_tensor **weights);
/* Beam search's reorder: row i becomes old row from[i], for n_rows rows. */
qkv_status qkv__s2s_state_reorder(s2s_kv_state *s, const int32_t *from, int n_rows);

/* The end of a decoding step: log_softmax of logits [rows, vocab] into logprobs (the logits themselves when raw, or
 * nothing when raw and logits is NULL: the step wrote them there), the head-mean of the last layer's
 * cross-attention weights cw [rows, H, 1, S] into attn (when asked), and one more step cached. */
qkv_status qkv__s2s_state_emit(s2s_kv_state *s, qkv_ctx *w, qkv_tensor *logits, qkv_tensor *cw, float *logprobs,
                               float *attn);

QKV_INTERNAL_END
#endif
