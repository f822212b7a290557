/* Translating texts with a seq2seq run through batched decoding (greedy, beam, MBR): what `qkv translate` and
 * `qkv serve` share. Errors are library statuses with the message set. */
#ifndef QKV_TRANSLATE_RUN_H
#define QKV_TRANSLATE_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/beam.h"
#include "qkv/decode_batch.h"
#include "qkv/train.h"

typedef struct translate_opts {
    int beam, n_best;      /* beam search when beam > 1; n_best <= beam */
    int mbr;               /* > 0: MBR over this many samples (then temperature, seed, utility) */
    int max_len;           /* target tokens at most; 0 = 2 x source + 10 */
    int batch;             /* sentences per batch */
    int64_t batch_tokens;  /* 0 = off */
    uint64_t seed;
    float alpha, temperature;
    qkv_mbr_utility utility;
    int no_repeat_ngram;          /* every search (repeat.h): 0 = off */
    float repetition_penalty;     /* 1 = off */
    qkv_repeat_scope repeat_scope;
} translate_opts;

/* beam 1, n_best 1, no MBR, max_len 0, batch 32, no token cap, seed 1, alpha 0.6, temperature 1, BLEU, no repetition
 * rules. */
translate_opts translate_defaults(void);

typedef struct translate_job {
    qkv_run *r;
    qkv_decoder dec;
    qkv_decode_opts o;
    qkv_batch_opts bo;
    bool mbr;
    qkv_mbr_utility utility;
    int n;
    int32_t **ids; /* each text's source ids (cut to the run's longest source; an empty text is one pad) */
    int *lens, *max_lens;
} translate_job;

/* Encodes n texts for decoding. QKV_ERR_UNSUPPORTED when the run is not a translation model; on a text that does
 * not encode, its error with *bad set to its index (else -1). translate_free releases the job either way. */
qkv_status translate_prepare(translate_job *j, qkv_run *r, const translate_opts *t, int n, const char *const *texts,
                             int *bad);
/* Decodes the job; emit gets each text's hypotheses in input order (MBR already reduced to its pick, best first). */
qkv_status translate_decode(translate_job *j, qkv_batch_emit_fn emit, void *user);
void translate_free(translate_job *j);

/* Target-side text of tokens (malloc'd), NULL when decoding fails. */
char *translate_text(qkv_run *r, const int32_t *tokens, int len);

#endif
