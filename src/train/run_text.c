/* A trained run's model and tokenizer, for decoding outside the training loop (`qkv generate`, `qkv translate`). */
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"
#include "train/train_internal.h"

qkv_model *qkv_run_model(qkv_run *r) { return r->model; }
qkv_params *qkv_run_params(qkv_run *r) { return r ? r->params : NULL; }

qkv_status qkv_run_encode(qkv_run *r, const char *text, int32_t **ids, size_t *n) {
    return qkv__task_encode_ids(&r->task, text, strlen(text), ids, n);
}

static qkv_status decode_with(const task *t, bool target, const int32_t *ids, size_t n, char **text);

qkv_status qkv_run_decode(qkv_run *r, const int32_t *ids, size_t n, char **text) {
    return decode_with(&r->task, false, ids, n, text);
}

char *qkv_run_token(qkv_run *r, int32_t id) {
    if (!r) return NULL;
    const task *t = &r->task;
    if (t->wp) {
        const char *s = id >= 0 && (int64_t)id < t->vocab_size ? qkv_wordpiece_token(t->wp, id) : NULL;
        return s ? strdup(s) : NULL;
    }
    if (t->vocab && t->tok == TOK_WORD && id >= 0 && (size_t)id < qkv_vocab_size(t->vocab)) {
        size_t len = 0;
        const char *s = qkv_vocab_token(t->vocab, id, &len);
        return s ? strndup(s, len) : NULL;
    }
    return NULL;
}

qkv_status qkv_run_decode_target(qkv_run *r, const int32_t *ids, size_t n, char **text) {
    return qkv__task_decode_target(&r->task, ids, n, text);
}

void qkv_run_target_ids(const qkv_run *r, int32_t *bos, int32_t *eos, int32_t *pad, int64_t *max_len) {
    *bos = r->task.tgt_bos;
    *eos = r->task.tgt_eos;
    *pad = r->task.tgt_pad;
    *max_len = r->task.max_len;
}

/* The pipeline's own <s> </s> <pad> of one side (with separate BPEs the sides' ids differ, and one side's special
 * id is an ordinary token of the other). A BPE has them only for seq2seq (an lm's pad id 0 is a real token). */
static bool is_special(const task *t, bool target, int32_t id) {
    if (t->kind != TASK_SEQ2SEQ && t->kind != TASK_SUMMARIZE && t->tok == TOK_BPE) return false;
    if (target) return id == t->tgt_bos || id == t->tgt_eos || id == t->tgt_pad;
    return id == t->pad || id == t->bos || id == t->eos;
}

/* Text with every invalid UTF-8 byte replaced by U+FFFD, as Python's errors="replace" (one per byte), so metrics
 * that need UTF-8 accept any decode. Takes ownership of text. */
static qkv_status make_utf8(char **text, size_t len) {
    size_t bad = 0;
    const unsigned char *s = (const unsigned char *)*text;
    int32_t cp;
    for (size_t i = 0; i < len;) {
        int k = qkv__utf8_decode(s + i, len - i, &cp);
        bad += k == 0;
        i += k ? (size_t)k : 1;
    }
    if (!bad) return QKV_OK;
    char *out = malloc(len + 2 * bad + 1), *o = out;
    if (!out) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < len;) {
        int k = qkv__utf8_decode(s + i, len - i, &cp);
        if (k) {
            memcpy(o, s + i, (size_t)k);
            o += k;
            i += (size_t)k;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    *o = '\0';
    free(*text);
    *text = out;
    return QKV_OK;
}

/* BPE ids to bytes, the side's specials skipped; a target's invalid UTF-8 replaced (see make_utf8). */
static qkv_status decode_bpe(const task *t, bool target, const int32_t *ids, size_t n, char **text) {
    const qkv_bpe *b = target && t->tgt_bpe ? t->tgt_bpe : t->bpe;
    *text = NULL;
    int32_t *kept = malloc(sizeof *kept * (n ? n : 1));
    if (!kept) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    size_t k = 0, len = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_special(t, target, ids[i])) kept[k++] = ids[i];
    qkv_status st = qkv_bpe_decode(b, kept, k, text, &len);
    free(kept);
    if (st == QKV_OK && target) st = make_utf8(text, len);
    if (st != QKV_OK) {
        free(*text);
        *text = NULL;
    }
    return st;
}

static qkv_status decode_target_plain(const task *t, const int32_t *ids, size_t n, char **text) {
    if (t->tok == TOK_BPE) return decode_bpe(t, true, ids, n, text);
    return decode_with(t, true, ids, n, text);
}

qkv_status qkv__task_decode_target(const task *t, const int32_t *ids, size_t n, char **text) {
    if (t->span) return qkv__span_decode(t, ids, n, decode_target_plain, text);
    return decode_target_plain(t, ids, n, text);
}

void qkv__task_hyp_for_scoring(const task *t, char *text) {
    if (!text || t->tok != TOK_WORD) return; /* BPE has no unknown ids; WordPiece and characters keep theirs */
    const char *unk = "<unk>";
    size_t ul = strlen(unk), w = 0;
    for (size_t r = 0; text[r];) {
        size_t e = r;
        while (text[e] && text[e] != ' ') e++;
        if (!(e - r == ul && !memcmp(text + r, unk, ul))) {
            if (w) text[w++] = ' ';
            memmove(text + w, text + r, e - r);
            w += e - r;
        }
        r = text[e] ? e + 1 : e;
    }
    text[w] = '\0';
}

static qkv_status decode_with(const task *t, bool target, const int32_t *ids, size_t n, char **text) {
    size_t len = 0;
    if (t->tok == TOK_BPE) return decode_bpe(t, false, ids, n, text);
    if (t->tok == TOK_WORDPIECE) return qkv_wordpiece_decode(t->wp, ids, n, text, &len);
    const qkv_vocab *vocab = target && t->tgt_vocab ? t->tgt_vocab : t->vocab;
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
        if (is_special(t, target, ids[i])) continue;
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
