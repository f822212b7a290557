/* One text to token ids with a task's tokenizer (word, char, byte-level BPE or WordPiece), for the task's own
 * loaders and for every task_*.c that encodes text fields of its own. */
#include <stdlib.h>

#include "train_internal.h"

qkv_status qkv__task_words(const task *t, const char *text, size_t len, char ***toks, size_t *n) {
    if (t->tok == TOK_CHAR) return qkv_char_split(text, len, toks, n);
    return qkv_word_split(text, len, &t->wopts, toks, n);
}

qkv_status qkv__task_encode(task *t, bool target, const char *text, size_t len, int32_t **ids, size_t *n) {
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

qkv_status qkv__task_encode_ids(task *t, const char *text, size_t len, int32_t **ids, size_t *n) {
    if (t->tok == TOK_NONE) return qkv__task_no_tokenizer();
    return qkv__task_encode(t, false, text, len, ids, n);
}
