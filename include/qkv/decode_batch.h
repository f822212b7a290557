/* Batched decoding of many source sentences: greedy, beam search or sampling over a model's incremental decoder
 * (decoder.h), with the results of each search (beam.h) handed back in input order.
 *
 * Inputs are read ahead in windows, sorted by source length inside a window (longest first, ties in input order)
 * and cut into batches of alike lengths, so little of a batch is padding. A batch is one decoder state: every step
 * feeds one token to every live row and computes all their scores at once (one matrix product per layer instead
 * of one matrix-vector product per sentence). A row that ends (EOS, or its max_len) leaves the batch at once
 * (compaction by the decoder's reorder), so a batch shrinks instead of computing padding. Beam search keeps each
 * sentence's live hypotheses as rows and gathers them after every step; a sentence whose search ends drops its rows.
 *
 * Results do not depend on how inputs are batched: a sentence's search is the same as a batch of one (the scores of
 * a row are computed from that row alone; matrix products over more rows may round in another order, within about
 * 1e-6). Sampling draws row j of input i from its own Philox stream keyed by (seed, i, j), so a batch gives the
 * samples a batch of one gives for the same seed.
 *
 * Streaming: emit() is called for input 0, 1, 2, ... in order, each as soon as it and every input before it have
 * finished. */
#ifndef QKV_DECODE_BATCH_H
#define QKV_DECODE_BATCH_H

#include <stdint.h>

#include "qkv/beam.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_search {
    QKV_SEARCH_GREEDY = 0, /* one hypothesis per input */
    QKV_SEARCH_BEAM,       /* opts->beam, GNMT length penalty opts->alpha; opts->n_best hypotheses, best first */
    QKV_SEARCH_SAMPLE,     /* opts->n_samples samples at opts->temperature, in draw order (MBR's candidates) */
} qkv_search;

typedef struct qkv_batch_opts {
    qkv_search search;
    int batch_size;       /* inputs per batch, >= 1 */
    int64_t batch_tokens; /* > 0: also at most this many decoder rows x padded source tokens per batch; 0 = off */
    int window;           /* inputs read ahead and sorted by length; 0 = 16 x batch_size */
    uint64_t seed;        /* sampling: the streams' seed */
} qkv_batch_opts;

/* Greedy, batch_size 32, no token limit, default window, seed 0. */
qkv_batch_opts qkv_batch_defaults(void);

/* The hypotheses of input `index`, in input order. hs may be taken (moved out, leaving hs->n 0); what is left is
 * freed after the call. A status other than QKV_OK stops decoding and is returned. */
typedef qkv_status (*qkv_batch_emit_fn)(int index, qkv_hyps *hs, void *user);

/* Decodes n inputs. seq2seq: src[i] holds src_len[i] >= 1 tokens. Language model (no source): src and src_len are
 * NULL and every row starts from opts->bos. max_len[i] caps input i's generated tokens (NULL: opts->max_len for
 * all). */
qkv_status qkv_decode_batch(const qkv_decoder *d, int n, const int32_t *const *src, const int *src_len,
                            const int *max_len, const qkv_decode_opts *opts, const qkv_batch_opts *b,
                            qkv_batch_emit_fn emit, void *user);

/* Keeping a decoder's workspaces from one call to the next. Each qkv_decode_batch call packs the weights its batched
 * matrix products use (a copy of most of the decoder's weights, 10-50 MB for the benchmark's models) and maps fresh
 * memory for its decoding states, and releases both when it returns. Between qkv_decode_keep_open() and
 * qkv_decode_keep_close() on a thread, the calls made on that thread keep both for the calls after them instead: a
 * server, a scorer or a benchmark decoding batch after batch with the same model skips the re-packing and the page
 * faults. The results are the same bits either way. Packs are found by the weights' addresses, so the kept ones are
 * no longer used (on this and every other thread) once any parameters are freed (qkv_params_free), stepped by an
 * optimiser (qkv_optim_step) or loaded from a checkpoint (qkv_checkpoint_load): a model built where a freed one was,
 * or reloaded in place, never meets its predecessor's packs. The caller's side of it: no other write into the
 * weights of a model decoded while the scope is open (a qkv_tensor_load or copy into a parameter). Packs of every
 * model decoded in the scope are kept until it closes (10-50 MB each for the benchmark's models). Opens nest; the
 * outermost close releases what was kept. */
void qkv_decode_keep_open(void);
void qkv_decode_keep_close(void);

#ifdef __cplusplus
}
#endif
#endif
