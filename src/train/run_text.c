/* A trained run's model and tokenizer, for decoding outside the training loop (`qkv generate`). */
#include <stdlib.h>
#include <string.h>

#include "train/train_internal.h"

qkv_model *qkv_run_model(qkv_run *r) { return r->model; }

qkv_status qkv_run_encode(qkv_run *r, const char *text, int32_t **ids, size_t *n) {
    return task_encode_ids(&r->task, text, strlen(text), ids, n);
}

static qkv_status decode_with(const task *t, const qkv_vocab *vocab, const int32_t *ids, size_t n, char **text);

qkv_status qkv_run_decode(qkv_run *r, const int32_t *ids, size_t n, char **text) {
    return decode_with(&r->task, r->task.vocab, ids, n, text);
}

qkv_status qkv_run_decode_target(qkv_run *r, const int32_t *ids, size_t n, char **text) {
    return decode_with(&r->task, r->task.tgt_vocab ? r->task.tgt_vocab : r->task.vocab, ids, n, text);
}

void qkv_run_target_ids(const qkv_run *r, int32_t *bos, int32_t *eos, int32_t *pad, int64_t *max_len) {
    *bos = r->task.tgt_bos;
    *eos = r->task.tgt_eos;
    *pad = r->task.tgt_pad;
    *max_len = r->task.max_len;
}

static qkv_status decode_with(const task *t, const qkv_vocab *vocab, const int32_t *ids, size_t n, char **text) {
    size_t len = 0;
    if (t->tok == TOK_BPE) return qkv_bpe_decode(t->bpe, ids, n, text, &len);
    if (t->tok == TOK_WORDPIECE) return qkv_wordpiece_decode(t->wp, ids, n, text, &len);
    const char *sep = t->tok == TOK_WORD ? " " : "";
    size_t cap = 64, used = 0;
    char *out = malloc(cap);
    if (!out) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t tl = 0;
        const char *tok = qkv_vocab_token(vocab, ids[i], &tl);
        if (!tok) {
            free(out);
            return qkv_error_set(QKV_ERR_RANGE, "decode: token id %d at position %zu is not in the vocabulary", ids[i], i);
        }
        if (ids[i] == t->pad || ids[i] == t->bos || ids[i] == t->eos || ids[i] == t->tgt_bos ||
            ids[i] == t->tgt_eos || ids[i] == t->tgt_pad)
            continue;
        size_t need = used + tl + strlen(sep) + 1;
        if (need > cap) {
            while (cap < need) cap *= 2;
            char *nb = realloc(out, cap);
            if (!nb) {
                free(out);
                return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            }
            out = nb;
        }
        if (used && *sep) {
            memcpy(out + used, sep, strlen(sep));
            used += strlen(sep);
        }
        memcpy(out + used, tok, tl);
        used += tl;
        out[used] = '\0';
    }
    *text = out;
    return QKV_OK;
}
