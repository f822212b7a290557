/* BERT pretraining data (task "pretrain"): documents (src/io/documents.c) -> WordPiece ids -> each epoch's sequences
 * "[CLS] A [SEP] B [SEP]" with next-sentence labels and masked-LM targets, as the paper's create_pretraining_data.py:
 *
 *   sequences  per document, sentences are gathered until a target length (max_len - 3 tokens; with probability
 *              short_seq_prob a random length in [2, that]); the chunk is cut at a random sentence boundary into A
 *              and B. With probability 1/2 (always for a one-sentence chunk) B is replaced by sentences from a random
 *              other document (label 1, "NotNext"), and the unused sentences of the chunk go back to the document;
 *              else B is the true continuation (label 0). The pair is truncated to fit, one token at a time from the
 *              longer side, front or back at random. Without NSP (data.nsp false) a sequence is one span of
 *              consecutive sentences of a document, "[CLS] A [SEP]" (RoBERTa's DOC-SENTENCES).
 *   masks      15% (data.mask_prob) of the tokens, at least one, at most data.max_predictions, never [CLS] or [SEP]
 *              (padding is added later and never chosen): of those 80% become [MASK], 10% a random token that is not
 *              a special one, 10% stay; the target is the original token, -100 elsewhere.
 *   epochs     each epoch builds new sequences and new masks from a Philox stream keyed by the data seed at block
 *              (epoch + 1) << 36, so a resumed run sees the same data; data.masking "dynamic" keeps the masks out of
 *              the sequences and draws them anew each time a sequence is batched (RoBERTa; not replayed on resume).
 *   held out   data.heldout of the documents (qkv_documents_split, keyed by the run's seed) never train; their
 *              sequences and masks are drawn once with a fixed stream, so every eval scores the same predictions.
 *
 * The corpus (data.train): a directory laid out as ../shared/data (qkv_documents_read_data_dir: the English train
 * splits), a .tsv file (column 0 of each line is a document) or a plain text file (one paragraph a line, a blank line
 * between documents). The tokenizer: data.vocab_file (e.g. the staged bert-base-uncased vocab.txt) or a WordPiece
 * vocabulary of data.wordpiece_vocab_size tokens learned from the training documents; either way saved as the run's
 * vocab.txt. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qkv/documents.h"
#include "qkv/fsutil.h"
#include "qkv/ops.h"
#include "qkv/rng.h"
#include "train_internal.h"

struct pretrain_state {
    qkv_documents *docs[2]; /* read corpus: training and held-out documents (NULL once tokenised) */
    int32_t *pool;          /* token ids of every sentence */
    int64_t pool_n, pool_cap;
    int64_t *sent_off, *sent_len;
    int64_t n_sent, sent_cap;
    int64_t *doc_first[2]; /* per split: n_docs + 1 sentence indices */
    int64_t n_docs[2];
    int32_t cls, sep, mask, pad, unk;
    int64_t max_len, max_pred;
    double mask_prob, short_seq_prob, heldout;
    bool nsp, dynamic;
    uint64_t seed, built_epoch;
    bool built;
    uint64_t batches_made; /* dynamic masking's stream position */
    char corpus[4096];
};

void qkv__pretrain_free(pretrain_state *p) {
    if (!p) return;
    qkv_documents_free(p->docs[0]);
    qkv_documents_free(p->docs[1]);
    free(p->pool);
    free(p->sent_off);
    free(p->sent_len);
    free(p->doc_first[0]);
    free(p->doc_first[1]);
    free(p);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static qkv_status read_corpus(pretrain_state *p) {
    qkv_documents *all = qkv_documents_new();
    if (!all) return qkv_last_status();
    struct stat sb;
    qkv_status st;
    if (stat(p->corpus, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        st = qkv_documents_read_data_dir(all, p->corpus);
    } else {
        qkv_documents_source s = {.path = p->corpus, .format = ends_with(p->corpus, ".tsv") ? QKV_DOCS_TSV : QKV_DOCS_TEXT};
        st = qkv_documents_read(all, &s);
    }
    if (!st && p->nsp) st = qkv_documents_check_nsp(all, p->corpus);
    if (!st && !all->n_docs) st = qkv_error_set(QKV_ERR_INVALID, "%s: the corpus holds no text", p->corpus);
    if (!st) st = qkv_documents_split(all, p->heldout, p->seed, &p->docs[0], &p->docs[1]);
    if (!st && p->nsp) st = qkv_documents_check_nsp(p->docs[0], "data.train (its training documents)");
    qkv_documents_free(all);
    return st;
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", dir, name);
    else qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    return s;
}

static qkv_status train_vocab(pretrain_state *p, const qkv_run_settings *rs, const char *path) {
    const qkv_documents *d = p->docs[0];
    const char **texts = malloc(sizeof *texts * (d->n_sentences + 1));
    size_t *lens = malloc(sizeof *lens * (d->n_sentences + 1));
    if (!texts || !lens) {
        free(texts);
        free(lens);
        return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < d->n_sentences; i++) texts[i] = d->sentences[i], lens[i] = strlen(d->sentences[i]);
    qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
    o.lowercase = rs->data.lowercase;
    qkv_status st = qkv_wordpiece_train(texts, lens, d->n_sentences, (size_t)rs->data.wordpiece_vocab_size, 2, 1000,
                                        &o, path);
    free(texts);
    free(lens);
    return st;
}

qkv_status qkv__pretrain_prepare(task *t, const qkv_run_settings *rs, const char *dir, bool fresh) {
    pretrain_state *p = calloc(1, sizeof *p);
    if (!p) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    t->pre = p;
    t->tok = TOK_WORDPIECE;
    t->max_len = rs->data.max_len;
    t->n_labels = 0;
    p->max_len = rs->data.max_len, p->max_pred = rs->data.max_predictions;
    p->mask_prob = rs->data.mask_prob, p->short_seq_prob = rs->data.short_seq_prob, p->heldout = rs->data.heldout;
    p->nsp = rs->data.nsp, p->dynamic = !strcmp(rs->data.masking, "dynamic");
    p->seed = rs->seed;
    snprintf(p->corpus, sizeof p->corpus, "%s", rs->data.train);
    if (p->max_len < (p->nsp ? 5 : 3))
        return qkv_error_set(QKV_ERR_INVALID, "data.max_len %lld is too short for [CLS] A [SEP]%s",
                             (long long)p->max_len, p->nsp ? " B [SEP]" : "");
    char *vocab_path = join(dir, "vocab.txt");
    if (!vocab_path) return qkv_last_status();
    qkv_status st = QKV_OK;
    if (fresh) {
        if (*rs->data.vocab_file) {
            st = qkv_fs_copy(rs->data.vocab_file, vocab_path);
        } else {
            st = read_corpus(p);
            if (!st) st = train_vocab(p, rs, vocab_path);
        }
    }
    qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
    o.lowercase = rs->data.lowercase;
    if (!st && !(t->wp = qkv_wordpiece_load(vocab_path, &o))) st = qkv_last_status();
    if (!st) {
        t->vocab_size = (int64_t)qkv_wordpiece_vocab_size(t->wp);
        p->cls = qkv_wordpiece_id(t->wp, "[CLS]"), p->sep = qkv_wordpiece_id(t->wp, "[SEP]");
        p->mask = qkv_wordpiece_id(t->wp, "[MASK]"), p->pad = qkv_wordpiece_id(t->wp, "[PAD]");
        p->unk = qkv_wordpiece_id(t->wp, "[UNK]");
        if (p->cls < 0 || p->sep < 0 || p->mask < 0 || p->pad < 0)
            st = qkv_error_set(QKV_ERR_INVALID, "%s: pretraining needs [PAD], [CLS], [SEP] and [MASK] in the vocabulary",
                               *rs->data.vocab_file ? rs->data.vocab_file : vocab_path);
        t->pad = p->pad, t->unk = p->unk;
    }
    free(vocab_path);
    return st;
}

/* ---- tokenised corpus ------------------------------------------------------------------------------------------ */

static qkv_status add_sentence(pretrain_state *p, const int32_t *ids, int64_t n) {
    if (p->pool_n + n > p->pool_cap) {
        int64_t cap = p->pool_cap ? p->pool_cap : 1 << 20;
        while (cap < p->pool_n + n) cap *= 2;
        int32_t *q = realloc(p->pool, sizeof *q * (size_t)cap);
        if (!q) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        p->pool = q, p->pool_cap = cap;
    }
    if (p->n_sent == p->sent_cap) {
        int64_t cap = p->sent_cap ? 2 * p->sent_cap : 1 << 16;
        int64_t *a = realloc(p->sent_off, sizeof *a * (size_t)cap);
        if (a) p->sent_off = a;
        int64_t *b = realloc(p->sent_len, sizeof *b * (size_t)cap);
        if (b) p->sent_len = b;
        if (!a || !b) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        p->sent_cap = cap;
    }
    memcpy(p->pool + p->pool_n, ids, sizeof *ids * (size_t)n);
    p->sent_off[p->n_sent] = p->pool_n, p->sent_len[p->n_sent++] = n;
    p->pool_n += n;
    return QKV_OK;
}

/* Documents of split k into token ids; sentences without tokens are dropped, then documents without sentences. */
static qkv_status tokenise(task *t, int k) {
    pretrain_state *p = t->pre;
    const qkv_documents *d = p->docs[k];
    p->doc_first[k] = malloc(sizeof *p->doc_first[k] * (d->n_docs + 1));
    if (!p->doc_first[k]) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    p->n_docs[k] = 0;
    p->doc_first[k][0] = p->n_sent;
    qkv_status st = QKV_OK;
    for (size_t i = 0; i < d->n_docs && !st; i++) {
        size_t n;
        char *const *s = qkv_documents_doc(d, i, &n);
        for (size_t j = 0; j < n && !st; j++) {
            qkv_encoding e = {0};
            st = qkv_wordpiece_encode(t->wp, s[j], strlen(s[j]), NULL, 0, false, &e);
            if (!st && e.n) st = add_sentence(p, e.ids, (int64_t)e.n);
            qkv_encoding_free(&e);
        }
        if (p->n_sent > p->doc_first[k][p->n_docs[k]]) p->doc_first[k][++p->n_docs[k]] = p->n_sent;
    }
    return st;
}

/* ---- sequences ------------------------------------------------------------------------------------------------- */

typedef struct ibuf {
    int32_t *v;
    int64_t n, cap;
} ibuf;

static bool ibuf_put(ibuf *b, const int32_t *x, int64_t n) {
    if (b->n + n > b->cap) {
        int64_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        int32_t *q = realloc(b->v, sizeof *q * (size_t)cap);
        if (!q) return false;
        b->v = q, b->cap = cap;
    }
    memcpy(b->v + b->n, x, sizeof *x * (size_t)n);
    b->n += n;
    return true;
}

static int64_t below(qkv_rng *rng, int64_t n) { return n <= 1 ? 0 : (int64_t)qkv_rng_below(rng, (uint32_t)n); }

static bool is_special(const pretrain_state *p, int32_t id) {
    return id == p->cls || id == p->sep || id == p->mask || id == p->pad || id == p->unk;
}

/* Mask one sequence in place (ids -> inputs; tgt: the original at predicted positions, -100 elsewhere). */
static void mask_sequence(const pretrain_state *p, int64_t vocab, int32_t *ids, int32_t *tgt, int64_t n, qkv_rng *rng,
                          int64_t *cand) {
    int64_t nc = 0;
    for (int64_t i = 0; i < n; i++) {
        tgt[i] = -100;
        if (ids[i] != p->cls && ids[i] != p->sep && ids[i] != p->pad) cand[nc++] = i;
    }
    for (int64_t i = nc - 1; i > 0; i--) {
        int64_t j = below(rng, i + 1), x = cand[i];
        cand[i] = cand[j], cand[j] = x;
    }
    int64_t k = (int64_t)llround((double)n * p->mask_prob);
    if (k < 1) k = 1;
    if (k > p->max_pred) k = p->max_pred;
    if (k > nc) k = nc;
    for (int64_t i = 0; i < k; i++) {
        int64_t at = cand[i];
        tgt[at] = ids[at];
        float u = qkv_rng_uniform(rng);
        if (u < 0.8f) {
            ids[at] = p->mask;
        } else if (u < 0.9f) {
            int32_t r;
            do r = (int32_t)below(rng, vocab);
            while (is_special(p, r) && vocab > 5);
            ids[at] = r;
        }
    }
}

typedef struct builder {
    const task *t;
    split *s;
    qkv_rng *rng;
    bool mask_now;
    ibuf a, b, seq, tgt;
    int64_t *cand;
} builder;

static qkv_status emit(builder *B, int32_t label, int64_t a_len_with_cls_sep) {
    const pretrain_state *p = B->t->pre;
    int64_t n = B->seq.n;
    B->tgt.n = 0;
    if (!ibuf_put(&B->tgt, B->seq.v, n)) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (B->mask_now) mask_sequence(p, B->t->vocab_size, B->seq.v, B->tgt.v, n, B->rng, B->cand);
    else for (int64_t i = 0; i < n; i++) B->tgt.v[i] = -100;
    int64_t off = B->s->pool_n;
    qkv_status st = qkv__split_append(B->s, B->seq.v, n);
    if (!st) st = qkv__split_append(B->s, B->tgt.v, n);
    example *e = st ? NULL : qkv__split_example(B->s);
    if (!e) return qkv_last_status();
    e->off = off, e->n = n, e->toff = off + n, e->tn = n, e->label = label, e->prompt = a_len_with_cls_sep;
    return QKV_OK;
}

static void put_sentences(const pretrain_state *p, ibuf *dst, int64_t from, int64_t to, bool *ok) {
    for (int64_t i = from; i < to && *ok; i++) *ok = ibuf_put(dst, p->pool + p->sent_off[i], p->sent_len[i]);
}

/* Sequences of document d of split k (sentences first .. end-1 of the pool), the paper's
 * create_instances_from_document. */
static qkv_status document_instances(builder *B, int k, int64_t d) {
    const pretrain_state *p = B->t->pre;
    int64_t first = p->doc_first[k][d], end = p->doc_first[k][d + 1];
    int64_t max_tokens = p->max_len - (p->nsp ? 3 : 2);
    int64_t target = max_tokens;
    if (qkv_rng_uniform(B->rng) < p->short_seq_prob) target = 2 + below(B->rng, max_tokens - 1);
    int64_t chunk0 = first, cur = 0;
    bool ok = true;
    for (int64_t i = first; i < end; i++) {
        cur += p->sent_len[i];
        if (i != end - 1 && cur < target) continue;
        int64_t n_chunk = i + 1 - chunk0;
        B->a.n = B->b.n = 0;
        int32_t label = 0;
        int64_t a_end = chunk0 + 1;
        if (!p->nsp) {
            put_sentences(p, &B->a, chunk0, i + 1, &ok);
        } else {
            if (n_chunk >= 2) a_end = chunk0 + 1 + below(B->rng, n_chunk - 1);
            put_sentences(p, &B->a, chunk0, a_end, &ok);
            if (n_chunk == 1 || qkv_rng_uniform(B->rng) < 0.5f) {
                label = 1;
                int64_t target_b = target - B->a.n, other = d;
                for (int tries = 0; tries < 10 && other == d; tries++) other = below(B->rng, p->n_docs[k]);
                if (other == d) other = (d + 1) % p->n_docs[k];
                int64_t of = p->doc_first[k][other], oe = p->doc_first[k][other + 1];
                for (int64_t j = of + below(B->rng, oe - of); j < oe && ok; j++) { /* at least one sentence */
                    put_sentences(p, &B->b, j, j + 1, &ok);
                    if (B->b.n >= target_b) break;
                }
                i = a_end - 1; /* the chunk's unused sentences go back to the document */
            } else {
                put_sentences(p, &B->b, a_end, i + 1, &ok);
            }
        }
        if (!ok) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        /* Truncate the pair to max_tokens, a token at a time from the longer side's front or back. */
        int64_t as = 0, ae = B->a.n, bs = 0, be = B->b.n;
        while ((ae - as) + (be - bs) > max_tokens) {
            bool from_a = ae - as > be - bs;
            bool front = qkv_rng_uniform(B->rng) < 0.5f;
            if (from_a) front ? as++ : ae--;
            else front ? bs++ : be--;
        }
        if (ae > as && (!p->nsp || be > bs)) {
            B->seq.n = 0;
            ok = ibuf_put(&B->seq, &p->cls, 1) && ibuf_put(&B->seq, B->a.v + as, ae - as) && ibuf_put(&B->seq, &p->sep, 1);
            int64_t a_part = B->seq.n;
            if (ok && p->nsp) ok = ibuf_put(&B->seq, B->b.v + bs, be - bs) && ibuf_put(&B->seq, &p->sep, 1);
            if (!ok) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            qkv_status st = emit(B, label, a_part);
            if (st) return st;
        }
        chunk0 = i + 1, cur = 0;
        target = max_tokens;
        if (qkv_rng_uniform(B->rng) < p->short_seq_prob) target = 2 + below(B->rng, max_tokens - 1);
    }
    return QKV_OK;
}

/* The sequences of split k drawn from the stream (seed, block), masked unless masking is dynamic (never for held-out
 * sequences: they are always masked once). */
static qkv_status build(task *t, int k, split *s, uint64_t seed, uint64_t block, bool mask_now) {
    qkv__split_free(s);
    memset(s, 0, sizeof *s);
    qkv_rng rng;
    qkv_rng_init(&rng, seed);
    rng.counter = block;
    builder B = {.t = t, .s = s, .rng = &rng, .mask_now = mask_now};
    B.cand = malloc(sizeof *B.cand * (size_t)(t->pre->max_len + 1));
    qkv_status st = B.cand ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int64_t d = 0; d < t->pre->n_docs[k] && !st; d++) st = document_instances(&B, k, d);
    free(B.a.v), free(B.b.v), free(B.seq.v), free(B.tgt.v), free(B.cand);
    if (!st && !s->n) st = qkv_error_set(QKV_ERR_INVALID, "pretrain: the %s documents give no sequence",
                                         k ? "held-out" : "training");
    return st;
}

static uint64_t data_seed(const pretrain_state *p) { return p->seed * 0x9E3779B97F4A7C15ULL + 2; }

qkv_status qkv__pretrain_epoch(task *t, split *train, uint64_t epoch) {
    pretrain_state *p = t->pre;
    if (p->built && p->built_epoch == epoch) return QKV_OK;
    qkv_status st = build(t, 0, train, data_seed(p), (epoch + 1) << 36, !p->dynamic);
    p->built = st == QKV_OK, p->built_epoch = epoch;
    return st;
}

qkv_status qkv__pretrain_load(task *t, split *train, split *heldout, bool *have_heldout) {
    pretrain_state *p = t->pre;
    qkv_status st = p->docs[0] ? QKV_OK : read_corpus(p);
    if (!st) st = tokenise(t, 0);
    if (!st) st = tokenise(t, 1);
    qkv_documents_free(p->docs[0]), qkv_documents_free(p->docs[1]);
    p->docs[0] = p->docs[1] = NULL;
    if (!st && p->nsp && p->n_docs[0] < 2)
        st = qkv_error_set(QKV_ERR_INVALID, "%s: next-sentence prediction needs two or more training documents",
                           p->corpus);
    if (!st) st = qkv__pretrain_epoch(t, train, 0);
    *have_heldout = false;
    if (!st && p->n_docs[1] >= (p->nsp ? 2 : 1)) {
        st = build(t, 1, heldout, data_seed(p) ^ 0x5EEDULL, 0, true);
        *have_heldout = st == QKV_OK;
    }
    return st;
}

/* ---- batches and evaluation ------------------------------------------------------------------------------------ */

qkv_status qkv__pretrain_batch_make(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t B,
                                    qkv_batch *b, int64_t *tokens) {
    pretrain_state *p = t->pre;
    memset(b, 0, sizeof *b);
    int64_t T = 1, real = 0;
    for (int64_t i = 0; i < B; i++)
        if (s->ex[idx[i]].n > T) T = s->ex[idx[i]].n;
    b->ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T));
    b->mask = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, T));
    b->type_ids = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(B, T));
    b->targets = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T));
    if (p->nsp) b->labels = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B));
    int64_t *cand = malloc(sizeof *cand * (size_t)(T + 1));
    if (!b->ids || !b->mask || !b->type_ids || !b->targets || (p->nsp && !b->labels) || !cand) {
        free(cand);
        return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    }
    int32_t *ids = qkv_i32(b->ids), *tg = qkv_i32(b->targets), *ty = qkv_i32(b->type_ids);
    float *mask = qkv_f32(b->mask);
    qkv_rng rng;
    bool rng_ready = false;
    int64_t predicted = 0;
    for (int64_t i = 0; i < B; i++) {
        const example *e = &s->ex[idx[i]];
        int32_t *row = ids + i * T, *trow = tg + i * T;
        for (int64_t j = 0; j < T; j++) row[j] = p->pad, trow[j] = -100;
        memcpy(row, s->pool + e->off, sizeof *row * (size_t)e->n);
        memcpy(trow, s->pool + e->toff, sizeof *trow * (size_t)e->n);
        /* Dynamic masking: a training sequence carries no targets; held-out ones always carry their fixed masks. */
        bool dyn = p->dynamic;
        for (int64_t j = 0; dyn && j < e->n; j++) dyn = trow[j] == -100;
        if (dyn && !rng_ready) {
            qkv_rng_init(&rng, data_seed(p) ^ 0xD1CEULL);
            rng.counter = p->batches_made++ << 20;
            rng_ready = true;
        }
        if (dyn) mask_sequence(p, t->vocab_size, row, trow, e->n, &rng, cand);
        for (int64_t j = 0; j < e->n; j++) {
            mask[i * T + j] = 1.0f;
            ty[i * T + j] = j >= e->prompt;
            predicted += trow[j] != -100;
        }
        if (p->nsp) qkv_i32(b->labels)[i] = e->label;
        real += e->n;
    }
    free(cand);
    b->n_tokens = predicted;
    if (tokens) *tokens = real;
    return QKV_OK;
}

cJSON *qkv__pretrain_evaluate(qkv_run *r, const split *s, int64_t max_batches) {
    int64_t bs = r->set.eval.batch_size;
    int64_t nb = (s->n + bs - 1) / bs;
    if (max_batches > 0 && max_batches < nb) nb = max_batches;
    int64_t *idx = malloc(sizeof *idx * (size_t)bs);
    qkv_status st = idx ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    double mlm_nll = 0, nsp_nll = 0;
    int64_t mlm_n = 0, mlm_right = 0, nsp_n = 0, nsp_right = 0, examples = 0;
    for (int64_t bi = 0; !st && bi < nb; bi++) {
        int64_t start = bi * bs, count = s->n - start < bs ? s->n - start : bs;
        for (int64_t i = 0; i < count; i++) idx[i] = start + i;
        qkv_ctx_reset(r->ctx);
        qkv_batch batch;
        if ((st = qkv__pretrain_batch_make(r->ctx, &r->task, s, idx, count, &batch, NULL))) break;
        qkv_tensor *logits = batch.n_tokens ? r->type->forward(r->ctx, r->model, &batch, NULL) : NULL;
        if (batch.n_tokens && !logits) {
            st = qkv_last_status();
            break;
        }
        if (logits) {
            qkv_tensor *lp = qkv_log_softmax(r->ctx, logits, 1);
            if (!lp) {
                st = qkv_last_status();
                break;
            }
            int64_t V = lp->shape[1], k = 0;
            const int32_t *tg = qkv_i32(batch.targets);
            for (int64_t i = 0; i < batch.targets->shape[0] * batch.targets->shape[1]; i++) {
                if (tg[i] == -100) continue;
                const float *row = qkv_f32(lp) + k++ * V;
                int64_t best = 0;
                for (int64_t v = 1; v < V; v++)
                    if (row[v] > row[best]) best = v;
                mlm_nll -= row[tg[i]];
                mlm_right += best == tg[i];
                mlm_n++;
            }
        }
        if (batch.labels) {
            qkv_batch plain = batch;
            plain.targets = NULL;
            qkv_tensor *ns = r->type->forward(r->ctx, r->model, &plain, NULL);
            qkv_tensor *lp = ns && ns->ndim == 2 && ns->shape[1] == 2 ? qkv_log_softmax(r->ctx, ns, 1) : NULL;
            if (!lp) {
                st = ns ? qkv_error_set(QKV_ERR_INVALID, "pretrain eval: the model gives no NSP logits (set data.nsp "
                                        "false for a model without the NSP head)")
                        : qkv_last_status();
                break;
            }
            for (int64_t i = 0; i < count; i++) {
                const float *row = qkv_f32(lp) + 2 * i;
                int32_t y = qkv_i32(batch.labels)[i];
                nsp_nll -= row[y];
                nsp_right += (row[1] > row[0]) == (y == 1);
                nsp_n++;
            }
        }
        examples += count;
    }
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    free(idx);
    if (!st && !mlm_n) st = qkv_error_set(QKV_ERR_INVALID, "pretrain eval: no masked token to score");
    if (st) return NULL;
    cJSON *out = cJSON_CreateObject();
    double mlm_loss = mlm_nll / (double)mlm_n, nsp_loss = nsp_n ? nsp_nll / (double)nsp_n : 0;
    cJSON_AddNumberToObject(out, "loss", mlm_loss + nsp_loss);
    cJSON_AddNumberToObject(out, "mlm_loss", mlm_loss);
    cJSON_AddNumberToObject(out, "mlm_accuracy", (double)mlm_right / (double)mlm_n);
    cJSON_AddNumberToObject(out, "mlm_perplexity", exp(mlm_loss));
    if (nsp_n) {
        cJSON_AddNumberToObject(out, "nsp_loss", nsp_loss);
        cJSON_AddNumberToObject(out, "nsp_accuracy", (double)nsp_right / (double)nsp_n);
    }
    cJSON_AddNumberToObject(out, "masked_tokens", (double)mlm_n);
    cJSON_AddNumberToObject(out, "examples", (double)examples);
    return out;
}
