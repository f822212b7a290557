/* BLEU during seq2seq evals: greedy decoding with the model's incremental decoder, then corpus BLEU (word
 * tokens as they are; BPE runs on detokenized text with sacrebleu's 13a tokenizer). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/config.h"
#include "qkv/beam.h"
#include "qkv/metrics.h"
#include "qkv/decode_batch.h"
#include "qkv/decoder.h"
#include "train_internal.h"

/* Tokens of ids joined by spaces (malloc'd). */
static char *join_tokens(const qkv_vocab *v, const int32_t *ids, int64_t n) {
    size_t cap = 64, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = '\0';
    for (int64_t i = 0; i < n; i++) {
        size_t tl = 0;
        const char *tok = qkv_vocab_token(v, ids[i], &tl);
        if (!tok) continue;
        if (len + tl + 2 > cap) {
            while (len + tl + 2 > cap) cap *= 2;
            char *bigger = realloc(out, cap);
            if (!bigger) {
                free(out);
                return NULL;
            }
            out = bigger;
        }
        if (len) out[len++] = ' ';
        memcpy(out + len, tok, tl);
        len += tl;
        out[len] = '\0';
    }
    return out;
}

/* Text of ids up to </s> (malloc'd): BPE ids decoded to text, word tokens joined by spaces. */
char *qkv__run_detokenize(const task *t, const int32_t *ids, int64_t n) {
    int64_t len = 0;
    while (len < n && ids[len] != t->tgt_eos) len++;
    if (t->tok == TOK_BPE) {
        char *text = NULL;
        return qkv__task_decode_target(t, ids, (size_t)len, &text) == QKV_OK ? text : NULL;
    }
    return join_tokens(t->tgt_vocab ? t->tgt_vocab : t->vocab, ids, len);
}

typedef struct {
    int32_t *hyp;
    int64_t cap;
    int32_t pad;
} hyp_rows;

/* Writes example i's hypothesis into its row of hyp (pad after </s>). */
static qkv_status keep_hyp(int i, qkv_hyps *hs, void *user) {
    hyp_rows *o = user;
    int32_t *row = o->hyp + i * o->cap;
    for (int64_t j = 0; j < o->cap; j++) row[j] = o->pad;
    const qkv_hyp *h = hs->n ? &hs->h[0] : NULL;
    for (int j = 0; h && j < h->len && j < o->cap; j++) row[j] = h->tokens[j];
    return QKV_OK;
}

/* Greedy decodes of examples idx[0..B) into hyp[B * cap] (pad after </s>), through the model's incremental decoder
 * (cached state, one token per step) in batches of alike lengths, exactly as `qkv translate` decodes greedily: pad
 * and <s> are never produced. */
qkv_status qkv__run_decode_greedy(qkv_run *r, const split *s, const int64_t *idx, int64_t B, int64_t cap,
                                  int32_t *hyp) {
    const task *t = &r->task;
    qkv_decoder dec;
    if (qkv_model_decoder(r->type, r->model, &dec) != QKV_OK || !dec.info.needs_source)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "BLEU: model type '%s' has no incremental decoder from a source",
                             r->type->name);
    const int32_t **src = malloc(sizeof *src * (size_t)B);
    int *len = malloc(sizeof *len * (size_t)B);
    qkv_status st = src && len ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    int32_t none = t->pad;
    for (int64_t i = 0; st == QKV_OK && i < B; i++) {
        const example *e = &s->ex[idx[i]];
        src[i] = e->n > 0 ? s->pool + e->off : &none;
        len[i] = e->n > 0 ? (int)e->n : 1; /* an empty source still has one (pad) position to attend to */
    }
    qkv_decode_opts o = qkv_decode_defaults();
    o.bos = t->tgt_bos;
    o.eos = t->tgt_eos;
    o.pad = t->tgt_pad;
    o.max_len = (int)cap;
    o.beam = 1;
    o.no_repeat_ngram = (int)r->set.eval.no_repeat_ngram;
    o.repetition_penalty = (float)r->set.eval.repetition_penalty;
    qkv_repeat_scope_parse(r->set.eval.repeat_scope, &o.repeat_scope); /* the schema allows only the two names */
    qkv_batch_opts bo = qkv_batch_defaults();
    bo.batch_size = 64;
    hyp_rows rows = {.hyp = hyp, .cap = cap, .pad = t->tgt_pad};
    if (st == QKV_OK) st = qkv_decode_batch(&dec, (int)B, src, len, NULL, &o, &bo, keep_hyp, &rows);
    free(src);
    free(len);
    return st;
}

qkv_status qkv__run_bleu(qkv_run *r, const split *s, int64_t max_examples, double *bleu) {
    const task *t = &r->task;
    if (t->kind != TASK_SEQ2SEQ || (!t->vocab && !t->bpe)) return qkv_error_set(QKV_ERR_UNSUPPORTED, "BLEU needs seq2seq data");
    int64_t n = max_examples > 0 && max_examples < s->n ? max_examples : s->n;
    int64_t bs = r->set.eval.batch_size, cap = t->max_len + 1;
    char **hyps = calloc((size_t)n, sizeof *hyps), **refs = calloc((size_t)n, sizeof *refs);
    int32_t *hyp = malloc(sizeof *hyp * (size_t)(bs * cap));
    int64_t *idx = malloc(sizeof *idx * (size_t)bs);
    qkv_status st = hyps && refs && hyp && idx ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    for (int64_t start = 0; st == QKV_OK && start < n; start += bs) {
        int64_t B = n - start < bs ? n - start : bs;
        for (int64_t i = 0; i < B; i++) idx[i] = start + i;
        st = qkv__run_decode_greedy(r, s, idx, B, cap, hyp);
        for (int64_t i = 0; st == QKV_OK && i < B; i++) {
            const example *e = &s->ex[start + i];
            hyps[start + i] = qkv__run_detokenize(t, hyp + i * cap, cap);
            qkv__task_hyp_for_scoring(t, hyps[start + i]);
            refs[start + i] = qkv__run_detokenize(t, s->pool + e->toff + 1, e->tn - 1); /* skip <s> */
            if (!hyps[start + i] || !refs[start + i]) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        }
    }
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    if (st == QKV_OK) {
        qkv_bleu_opts o = qkv_bleu_default_opts();
        /* Word runs: both sides are already the tokenizer's words. BPE runs: detokenized text against the
         * reference text (byte-level BPE decodes it exactly), tokenized as sacrebleu does by default. */
        o.tokenizer = t->tok == TOK_BPE ? QKV_BLEU_TOK_13A : QKV_BLEU_TOK_NONE;
        const char **streams[1] = {(const char **)refs};
        qkv_bleu_result res;
        st = qkv_bleu_corpus((const char *const *)hyps, (size_t)n, streams, 1, &o, &res);
        if (st == QKV_OK) *bleu = res.score;
    }
    for (int64_t i = 0; hyps && refs && i < n; i++) {
        free(hyps[i]);
        free(refs[i]);
    }
    free(hyps);
    free(refs);
    free(hyp);
    free(idx);
    return st;
}
