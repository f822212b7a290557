/* data.task "span_corruption": T5's pretraining objective for a seq2seq model (t5) on plain text.
 *
 * The documents come through qkv__docs_each: a plain-text file's lines, or, for a directory laid out as
 * ../shared/data, the English training documents of qkv_documents_read_data_dir (the corpus reader BERT pretraining
 * uses; it never reads a dev or test split), each document's sentences joined by spaces. Every document is encoded with the run's tokenizer and the ids are concatenated
 * (T5's reduce_concat_tokens), then cut into runs of the raw length T5's random_spans_helper gives for an input of
 * data.max_len tokens (128: 141 raw tokens, 29 target tokens); each run is one example, corrupted at load with a
 * generator seeded by the run's seed. With data.span_redraw (the default) the training split keeps its token stream
 * and draws fresh noise at every pass, as T5 does, from a generator seeded by the seed and the pass, so a resumed
 * run sees the same examples; a dev file keeps its load-time draw (comparable dev losses). The sentinels are the
 * data.sentinels ids above the tokenizer's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "qkv/data.h"
#include "qkv/documents.h"
#include "qkv/span_corruption.h"
#include "train_internal.h"

/* One row a document: the sentences of a corpus directory's document joined by spaces. */
static qkv_dataset *corpus_rows(const char *dir) {
    qkv_documents *docs = qkv_documents_new();
    qkv_dataset *d = docs ? calloc(1, sizeof *d) : NULL;
    qkv_status st = docs && d ? qkv_documents_read_data_dir(docs, dir) : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (st == QKV_OK && !(d->rows = calloc(docs->n_docs ? docs->n_docs : 1, sizeof *d->rows)))
        st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == QKV_OK && i < docs->n_docs; i++) {
        size_t n, len = 0;
        char *const *sent = qkv_documents_doc(docs, i, &n);
        for (size_t k = 0; k < n; k++) len += strlen(sent[k]) + 1;
        qkv_row *row = &d->rows[d->n_rows];
        row->fields = malloc(sizeof *row->fields);
        row->lens = malloc(sizeof *row->lens);
        char *text = malloc(len + 1);
        if (!row->fields || !row->lens || !text) {
            free(row->fields);
            free(row->lens);
            free(text);
            row->fields = NULL;
            row->lens = NULL;
            st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            break;
        }
        size_t at = 0;
        for (size_t k = 0; k < n; k++) at += (size_t)sprintf(text + at, "%s%s", k ? " " : "", sent[k]);
        row->fields[0] = text;
        row->lens[0] = at;
        row->n_fields = 1;
        row->line = (int64_t)i + 1;
        d->n_rows++;
    }
    qkv_documents_free(docs);
    if (st != QKV_OK) {
        qkv_dataset_free(d);
        return NULL;
    }
    return d;
}

qkv_dataset *qkv__docs_dataset(const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return corpus_rows(path);
    qkv_data_opts o = {.format = QKV_DATA_LINES};
    return qkv_data_read_all(path, &o);
}

qkv_status qkv__docs_each(const char *path, qkv__doc_fn fn, void *user) {
    qkv_dataset *d = qkv__docs_dataset(path);
    if (!d) return qkv_last_status();
    qkv_status st = QKV_OK;
    for (size_t i = 0; st == QKV_OK && i < d->n_rows; i++)
        if (d->rows[i].lens[0]) st = fn(d->rows[i].fields[0], d->rows[i].lens[0], user);
    qkv_dataset_free(d);
    return st;
}

typedef struct {
    task *t;
    int32_t *ids;
    int64_t n, cap, chars;
} stream;

static qkv_status add_doc(const char *text, size_t len, void *user) {
    stream *s = user;
    int32_t *ids = NULL;
    size_t n = 0;
    qkv_status st = qkv__task_encode_ids(s->t, text, len, &ids, &n);
    if (st == QKV_OK && s->n + (int64_t)n > s->cap) {
        int64_t cap = s->cap ? s->cap : 4096;
        while (cap < s->n + (int64_t)n) cap *= 2;
        int32_t *p = realloc(s->ids, sizeof *p * (size_t)cap);
        if (!p) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        if (p) {
            s->ids = p;
            s->cap = cap;
        }
    }
    if (st == QKV_OK && n) memcpy(s->ids + s->n, ids, sizeof *ids * n);
    if (st == QKV_OK) {
        s->n += (int64_t)n;
        s->chars += (int64_t)qkv_utf8_count(text, len);
    }
    free(ids);
    return st;
}

/* What a training split redraws its noise from: the concatenated ids, cut into runs of `raw` tokens. */
struct span_text {
    int32_t *ids;
    int64_t n, raw;
    uint64_t epoch; /* the pass whose noise the split holds */
};

void qkv__span_text_free(struct span_text *x) {
    if (x) free(x->ids);
    free(x);
}

/* Pass 0 keeps the run's seed (the examples a file has always given); later passes mix the pass in. */
static uint64_t pass_seed(const task *t, uint64_t epoch) {
    return epoch ? t->span_seed ^ (epoch * 0x9E3779B97F4A7C15ULL) : t->span_seed;
}

/* Corrupts every run of x with one generator seeded for `epoch`: appended as new examples, or (redraw) written over
 * the split's examples in place, which fits because a run's input and target lengths depend on its length alone. */
static qkv_status corrupt(const task *t, const char *path, const struct span_text *x, uint64_t epoch, bool redraw,
                          split *out) {
    uint8_t *mask = malloc((size_t)x->raw);
    int32_t *in = mask ? malloc(sizeof *in * (size_t)(x->raw + 1)) : NULL;
    int32_t *tg = in ? malloc(sizeof *tg * (size_t)(x->raw + 2)) : NULL;
    qkv_status st = tg ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    qkv_rng rng;
    qkv_rng_init(&rng, pass_seed(t, epoch));
    int64_t k = 0;
    for (int64_t start = 0; st == QKV_OK && start + 1 < x->n; start += x->raw, k++) {
        int64_t len = x->n - start < x->raw ? x->n - start : x->raw, ni = 0, nt = 0;
        st = qkv_span_noise_mask(len, t->noise_density, t->mean_span, &rng, mask);
        if (st == QKV_OK)
            st = qkv_span_corrupt(x->ids + start, mask, len, (int32_t)t->vocab_size, t->eos, in, &ni, tg + 1, &nt);
        if (st != QKV_OK) {
            st = qkv_error_set(st, "%s: %s (data.max_len %lld, data.sentinels %lld)", path, qkv_last_error(),
                               (long long)t->max_len, (long long)(t->vocab_size - t->base_vocab));
            break;
        }
        tg[0] = t->tgt_bos;
        if (redraw) {
            example *e = k < out->n ? &out->ex[k] : NULL;
            if (!e || e->n != ni || e->tn != nt + 1) {
                st = qkv_error_set(QKV_ERR_INVALID, "span corruption: pass %llu changed run %lld's lengths",
                                   (unsigned long long)epoch, (long long)k);
                break;
            }
            memcpy(out->pool + e->off, in, sizeof *in * (size_t)ni);
            memcpy(out->pool + e->toff, tg, sizeof *tg * (size_t)(nt + 1));
            continue;
        }
        example *e = qkv__split_example(out);
        if (!e) {
            st = qkv_last_status();
            break;
        }
        e->off = out->pool_n;
        e->n = ni;
        st = qkv__split_append(out, in, ni);
        e->toff = out->pool_n;
        e->tn = nt + 1;
        if (st == QKV_OK) st = qkv__split_append(out, tg, nt + 1);
    }
    free(mask);
    free(in);
    free(tg);
    return st;
}

qkv_status qkv__span_load(task *t, const char *path, split *out) {
    stream s = {.t = t};
    int64_t raw = 0, tgt_len = 0;
    qkv_status st = qkv_span_lengths(t->max_len, t->noise_density, t->mean_span, &raw, &tgt_len);
    if (st != QKV_OK) return qkv_error_set(st, "data.max_len: %s", qkv_last_error());
    st = qkv__docs_each(path, add_doc, &s);
    if (st != QKV_OK && !strstr(qkv_last_error(), path)) st = qkv_error_set(st, "%s: %s", path, qkv_last_error());
    struct span_text *x = st == QKV_OK ? calloc(1, sizeof *x) : NULL;
    if (st == QKV_OK && !x) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (x) *x = (struct span_text){.ids = s.ids, .n = s.n, .raw = raw};
    else free(s.ids);
    if (st == QKV_OK) st = corrupt(t, path, x, 0, false, out);
    out->n_chars = s.chars;
    if (st == QKV_OK && out->n == 0) st = qkv_error_set(QKV_ERR_FORMAT, "%s: no text to corrupt", path);
    if (st == QKV_OK && t->span_redraw) out->span = x;
    else qkv__span_text_free(x);
    return st;
}

qkv_status qkv__span_epoch(const task *t, split *s, uint64_t epoch) {
    if (!s->span || s->span->epoch == epoch) return QKV_OK;
    qkv_status st = corrupt(t, "the training text", s->span, epoch, true, s);
    if (st == QKV_OK) s->span->epoch = epoch;
    return st;
}

qkv_status qkv__span_decode(const task *t, const int32_t *ids, size_t n,
                            qkv_status (*decode)(const task *, const int32_t *, size_t, char **), char **text) {
    size_t cap = 64, used = 0;
    char *buf = malloc(cap);
    if (!buf) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    buf[0] = '\0';
    qkv_status st = QKV_OK;
    for (size_t i = 0; st == QKV_OK && i < n;) {
        char *piece = NULL, tag[32];
        size_t j = i;
        if (ids[i] >= t->base_vocab && ids[i] < t->vocab_size) {
            snprintf(tag, sizeof tag, "<extra_id_%lld>", (long long)(t->vocab_size - 1 - ids[i]));
            j = i + 1;
        } else {
            while (j < n && !(ids[j] >= t->base_vocab && ids[j] < t->vocab_size)) j++;
            st = decode(t, ids + i, j - i, &piece);
        }
        const char *add = piece ? piece : tag;
        size_t al = st == QKV_OK ? strlen(add) : 0;
        if (al && used + al + 2 > cap) {
            while (used + al + 2 > cap) cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            else buf = nb;
        }
        if (st == QKV_OK && al) {
            if (used && buf[used - 1] != ' ' && add[0] != ' ') buf[used++] = ' ';
            memcpy(buf + used, add, al + 1);
            used += al;
        }
        free(piece);
        i = j;
    }
    if (st != QKV_OK) {
        free(buf);
        return st;
    }
    *text = buf;
    return QKV_OK;
}
