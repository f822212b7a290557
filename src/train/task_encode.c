/* One text to token ids with a task's tokenizer (word, char, byte-level BPE or WordPiece), for the task's own
 * loaders and for every task_*.c that encodes text fields of its own. */
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

qkv_status qkv__task_words(const task *t, const char *text, size_t len, char ***toks, size_t *n) {
    if (t->tok == TOK_CHAR) return qkv_char_split(text, len, toks, n);
    return qkv_word_split(text, len, &t->wopts, toks, n);
}

static qkv_status encode_plain(task *t, bool target, const char *text, size_t len, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    const qkv_vocab *vocab = target && t->tgt_vocab ? t->tgt_vocab : t->vocab;
    if (t->tok == TOK_BPE) return qkv_bpe_encode(target && t->tgt_bpe ? t->tgt_bpe : t->bpe, text, len, ids, n);
    if (t->tok == TOK_WORDPIECE) {
        qkv_encoding e = {0};
        qkv_status st = qkv_wordpiece_encode(t->wp, text, len, NULL, 0, true, &e);
        if (st) return st;
        *ids = e.ids;
        *n = e.n;
        e.ids = NULL;
        qkv_encoding_free(&e);
        return QKV_OK;
    }
    char **toks = NULL;
    size_t nt = 0;
    qkv_status st = qkv__task_words(t, text, len, &toks, &nt);
    if (st == QKV_OK && nt) {
        *ids = malloc(sizeof **ids * nt);
        if (!*ids) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        if (st == QKV_OK) st = qkv_vocab_encode(vocab, toks, nt, t->unk, *ids);
        if (st == QKV_OK) *n = nt;
    }
    free(toks);
    return st;
}

/* The sentinel a text spells at p ("<extra_id_K>" with K below the run's sentinel count): its id, and its length in
 * *span; -1 when p starts no sentinel. */
static int32_t sentinel_at(const task *t, const char *p, size_t left, size_t *span) {
    static const char tag[] = "<extra_id_";
    const size_t tl = sizeof tag - 1;
    if (left < tl + 2 || memcmp(p, tag, tl)) return -1;
    int64_t k = 0;
    size_t i = tl;
    while (i < left && i < tl + 6 && p[i] >= '0' && p[i] <= '9') k = 10 * k + (p[i++] - '0');
    if (i == tl || i >= left || p[i] != '>' || k >= t->vocab_size - t->base_vocab) return -1;
    *span = i + 1;
    return (int32_t)(t->vocab_size - 1 - k);
}

/* A run with sentinel ids (span corruption, data.keep_sentinels) reads "<extra_id_K>" in a text as sentinel K, as T5's
 * tokenizer does, so a prompt or a task's input can hold the blanks pretraining filled ("The <extra_id_0> walks in
 * <extra_id_1> park"); the text between is encoded as usual. */
qkv_status qkv__task_encode(task *t, bool target, const char *text, size_t len, int32_t **ids, size_t *n) {
    static const char tag[] = "<extra_id_";
    bool sentinels = t->base_vocab > 0 && t->vocab_size > t->base_vocab;
    const char *hit = sentinels ? memmem(text, len, tag, sizeof tag - 1) : NULL;
    if (!hit) return encode_plain(t, target, text, len, ids, n);
    *ids = NULL;
    *n = 0;
    int32_t *out = NULL;
    size_t used = 0;
    qkv_status st = QKV_OK;
    /* Each round: the plain text up to the next sentinel (or the end), then that sentinel's id. */
    for (size_t from = 0; st == QKV_OK;) {
        size_t span = 0;
        int32_t sid = -1;
        while (hit && (sid = sentinel_at(t, hit, len - (size_t)(hit - text), &span)) < 0)
            hit = memmem(hit + 1, len - (size_t)(hit + 1 - text), tag, sizeof tag - 1);
        size_t end = hit ? (size_t)(hit - text) : len, np = 0;
        int32_t *piece = NULL, *grown = NULL;
        if (end > from) st = encode_plain(t, target, text + from, end - from, &piece, &np);
        if (st == QKV_OK && !(grown = realloc(out, sizeof *out * (used + np + 1))))
            st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        if (grown) out = grown;
        if (st == QKV_OK && np) memcpy(out + used, piece, sizeof *piece * np);
        free(piece);
        if (st != QKV_OK) break;
        used += np;
        if (!hit) break;
        out[used++] = sid;
        from = end + span;
        hit = memmem(text + from, len - from, tag, sizeof tag - 1);
    }
    if (st != QKV_OK) {
        free(out);
        return st;
    }
    *ids = out;
    *n = used;
    return QKV_OK;
}

qkv_status qkv__task_encode_ids(task *t, const char *text, size_t len, int32_t **ids, size_t *n) {
    if (t->tok == TOK_NONE) return qkv__task_no_tokenizer();
    return qkv__task_encode(t, false, text, len, ids, n);
}
