/* The summarize task: a decoder-only language model trained on "article </s> <sep> summary </s>".
 *
 * Data is TSV "article<TAB>summary". Both sides are encoded with one byte-level BPE trained on both columns of the
 * training split; <pad>, </s> and <sep> get ids after it, and are never matched in text (a "</s>" inside an article
 * is ordinary bytes), so only the pipeline produces them. Lengths: the summary keeps data.summary_max_len tokens,
 * the article what is left of data.max_len after the summary's room and the three specials; a longer article is cut
 * (counted in n_truncated, which training logs as a warning), an empty side is an error naming file:line.
 *
 * The loss is the language model's own, with per-token weights (qkv_batch.weights, i.e. qkv_cross_entropy's
 * token_weight): data.article_weight on predictions of the prompt's tokens (article, </s>, <sep>), 1 on the summary
 * and its </s>. With the default 0 the model is trained on the summary given the article, as an encoder-decoder
 * is, while the article still passes through the same causal stack; a weight > 0 also trains it as a language model
 * of articles, which helps when summaries are few. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "qkv/fsutil.h"

static const char *const SPECIALS[] = {"<pad>", "</s>", "<sep>", NULL};

static qkv_status train_bpe(const qkv_run_settings *rs, const qkv_dataset *train, const char *v, const char *m) {
    size_t n = train->n_rows * 2;
    const char **texts = malloc(sizeof *texts * (n + 1));
    size_t *lens = malloc(sizeof *lens * (n + 1));
    qkv_status st = texts && lens ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == QKV_OK && i < n; i++) {
        texts[i] = train->rows[i / 2].fields[i % 2];
        lens[i] = train->rows[i / 2].lens[i % 2];
    }
    if (st == QKV_OK)
        st = qkv_bpe_train(texts, lens, n, (size_t)rs->data.bpe_vocab_size, rs->data.bpe_min_freq, SPECIALS, v, m);
    if (st != QKV_OK) st = qkv_error_set(st, "data: training the BPE tokenizer: %s", qkv_last_error());
    free(texts);
    free(lens);
    return st;
}

qkv_status qkv__summ_prepare(task *t, const qkv_run_settings *rs, const qkv_dataset *train, const char *dir,
                             bool fresh) {
    const char *vf = rs->data.vocab_file, *mf = rs->data.merges_file;
    if ((*vf || *mf) && (!*vf || !*mf))
        return qkv_error_set(QKV_ERR_INVALID, "data: the bpe tokenizer needs both vocab_file and merges_file");
    if (rs->data.max_len < rs->data.summary_max_len + 4)
        return qkv_error_set(QKV_ERR_INVALID, "data.max_len: %lld leaves no room for an article (summarize needs at "
                             "least data.summary_max_len + 4 = %lld)", (long long)rs->data.max_len,
                             (long long)rs->data.summary_max_len + 4);
    char *v = *vf ? strdup(vf) : qkv_fs_join(dir, "vocab.json"), *m = *mf ? strdup(mf) : qkv_fs_join(dir, "merges.txt");
    qkv_status st = v && m ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (st == QKV_OK && fresh && !*vf) st = train_bpe(rs, train, v, m);
    if (st == QKV_OK && !(t->bpe = qkv_bpe_load(v, m))) st = qkv_last_status();
    for (int i = 0; st == QKV_OK && SPECIALS[i]; i++) st = qkv_bpe_add_special(t->bpe, SPECIALS[i]);
    free(v);
    free(m);
    if (st != QKV_OK) return st;
    qkv_bpe_set_specials_enabled(t->bpe, false);
    t->vocab_size = (int64_t)qkv_bpe_vocab_size(t->bpe);
    t->pad = t->tgt_pad = qkv_bpe_id(t->bpe, "<pad>");
    t->eos = t->tgt_eos = qkv_bpe_id(t->bpe, "</s>");
    t->sep = t->tgt_bos = qkv_bpe_id(t->bpe, "<sep>");
    t->bos = -1;
    t->unk = -1; /* byte-level: every text has ids */
    t->article_weight = (float)rs->data.article_weight;
    t->summary_max_len = rs->data.summary_max_len;
    return QKV_OK;
}

qkv_status qkv__summ_prompt(task *t, const char *article, size_t len, int32_t **ids, size_t *n, bool *truncated) {
    *ids = NULL;
    *n = 0;
    int32_t *a = NULL;
    size_t na = 0;
    qkv_status st = qkv_bpe_encode(t->bpe, article, len, &a, &na);
    if (st != QKV_OK) return st;
    size_t room = (size_t)(t->max_len - t->summary_max_len - 3);
    if (truncated) *truncated = na > room;
    if (na > room) na = room;
    int32_t *out = realloc(a, sizeof *out * (na + 2));
    if (!out) {
        free(a);
        return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    }
    out[na] = t->eos;
    out[na + 1] = t->sep;
    *ids = out;
    *n = na + 2;
    return QKV_OK;
}

static bool blank(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

qkv_status qkv__summ_add_row(task *t, const char *path, const qkv_row *row, split *s) {
    for (int f = 0; f < 2; f++)
        if (blank(row->fields[f], row->lens[f]))
            return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: empty %s (expected article<TAB>summary)", path,
                                 (long long)row->line, f ? "summary" : "article");
    int32_t *p = NULL, *y = NULL;
    size_t np = 0, ny = 0;
    bool cut = false;
    qkv_status st = qkv__summ_prompt(t, row->fields[0], row->lens[0], &p, &np, &cut);
    if (st == QKV_OK) st = qkv_bpe_encode(t->bpe, row->fields[1], row->lens[1], &y, &ny);
    if (st != QKV_OK) {
        free(p);
        free(y);
        return qkv_error_set(st, "%s:%lld: %s", path, (long long)row->line, qkv_last_error());
    }
    if (ny > (size_t)t->summary_max_len) ny = (size_t)t->summary_max_len;
    t->n_truncated += cut;
    example *e = qkv__split_example(s);
    if (!e) st = qkv_last_status();
    if (st == QKV_OK) {
        e->off = s->pool_n;
        e->prompt = (int64_t)np;
        e->n = (int64_t)(np + ny + 1);
        st = qkv__split_append(s, p, (int64_t)np);
    }
    if (st == QKV_OK) st = qkv__split_append(s, y, (int64_t)ny);
    if (st == QKV_OK) st = qkv__split_append(s, &t->eos, 1);
    s->n_chars += (int64_t)qkv_utf8_count(row->fields[1], row->lens[1]);
    free(p);
    free(y);
    return st;
}

qkv_status qkv__summ_batch_make(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t B,
                                qkv_batch *b, int64_t *tokens) {
    memset(b, 0, sizeof *b);
    int64_t T = 1, real = 0, counted = 0;
    for (int64_t i = 0; i < B; i++)
        if (s->ex[idx[i]].n - 1 > T) T = s->ex[idx[i]].n - 1;
    b->ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T));
    b->targets = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T));
    b->mask = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, T));
    b->weights = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, T));
    if (!b->ids || !b->targets || !b->mask || !b->weights) return qkv_last_status();
    int32_t *ids = qkv_i32(b->ids), *tg = qkv_i32(b->targets);
    float *mask = qkv_f32(b->mask), *w = qkv_f32(b->weights);
    for (int64_t i = 0; i < B * T; i++) ids[i] = tg[i] = t->pad;
    for (int64_t i = 0; i < B; i++) {
        const example *e = &s->ex[idx[i]];
        const int32_t *x = s->pool + e->off;
        for (int64_t j = 0; j + 1 < e->n; j++) {
            ids[i * T + j] = x[j];
            tg[i * T + j] = x[j + 1];
            mask[i * T + j] = 1.0f;
            /* the token at j + 1 belongs to the summary (or its </s>) from position `prompt` on */
            w[i * T + j] = j + 1 >= e->prompt ? 1.0f : t->article_weight;
        }
        real += e->n - 1;
        counted += e->n - e->prompt;
    }
    b->n_tokens = counted;
    if (tokens) *tokens = real;
    return QKV_OK;
}

qkv_status qkv__summ_log_truncation(const char *dir, int64_t truncated, int64_t examples) {
    if (truncated == 0) return QKV_OK;
    char *path = qkv_fs_join(dir, "log.jsonl");
    FILE *f = path ? fopen(path, "a") : NULL;
    qkv_status st = QKV_OK;
    if (!path)
        st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    else if (!f)
        st = qkv_error_set(QKV_ERR_IO, "%s: cannot open", path);
    else {
        bool bad = fprintf(f, "{\"kind\":\"warning\",\"step\":0,\"truncated\":%lld,\"examples\":%lld,\"message\":"
                           "\"%lld of %lld articles are longer than data.max_len - data.summary_max_len - 3 tokens "
                           "and were cut\"}\n", (long long)truncated, (long long)examples, (long long)truncated,
                           (long long)examples) < 0;
        if (fclose(f) != 0 || bad) st = qkv_error_set(QKV_ERR_IO, "%s: write error", path);
    }
    free(path);
    return st;
}
