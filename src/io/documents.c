/* Document corpora for pretraining (documents.h): the per-format document rules, the sentence rule and the seeded
 * held-out split. Files are read through qkv_reader, so their UTF-8 and line checks are the readers'. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/data.h"
#include "qkv/documents.h"
#include "qkv/rng.h"

qkv_documents *qkv_documents_new(void) {
    qkv_documents *d = calloc(1, sizeof *d);
    if (d && !(d->doc_first = calloc(1, sizeof *d->doc_first))) {
        free(d);
        d = NULL;
    }
    if (!d) qkv_error_set(QKV_ERR_NOMEM, "documents: out of memory");
    return d;
}

void qkv_documents_free(qkv_documents *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_sentences; i++) free(d->sentences[i]);
    free(d->sentences);
    free(d->doc_first);
    free(d);
}

static qkv_status push_sentence(qkv_documents *d, const char *s, size_t len) {
    if (d->n_sentences == d->cap_sentences) {
        size_t cap = d->cap_sentences ? 2 * d->cap_sentences : 1024;
        char **p = realloc(d->sentences, cap * sizeof *p);
        if (!p) return qkv_error_set(QKV_ERR_NOMEM, "documents: out of memory");
        d->sentences = p, d->cap_sentences = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return qkv_error_set(QKV_ERR_NOMEM, "documents: out of memory");
    memcpy(c, s, len);
    c[len] = '\0';
    d->sentences[d->n_sentences++] = c;
    return QKV_OK;
}

/* Closes the document being built (the sentences after doc_first[n_docs]); an empty one is not kept. */
static qkv_status end_document(qkv_documents *d) {
    if (d->n_sentences == d->doc_first[d->n_docs]) return QKV_OK;
    if (d->n_docs + 1 >= d->cap_docs) {
        size_t cap = d->cap_docs ? 2 * d->cap_docs : 256;
        size_t *p = realloc(d->doc_first, (cap + 1) * sizeof *p);
        if (!p) return qkv_error_set(QKV_ERR_NOMEM, "documents: out of memory");
        d->doc_first = p, d->cap_docs = cap;
    }
    d->doc_first[++d->n_docs] = d->n_sentences;
    return QKV_OK;
}

qkv_status qkv_documents_add(qkv_documents *d, const char *const *sentences, size_t n) {
    if (!d || (n && !sentences)) return qkv_error_set(QKV_ERR_INVALID, "documents add: NULL corpus or sentences");
    qkv_status st = QKV_OK;
    for (size_t i = 0; i < n && !st; i++) st = push_sentence(d, sentences[i], strlen(sentences[i]));
    return st ? st : end_document(d);
}

/* ---- Sentences ----------------------------------------------------------------------------------------------- */

static bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Byte length of a closing quote or bracket at s (ASCII or the UTF-8 of U+2019 / U+201D), else 0. */
static size_t closer_len(const char *s, size_t left) {
    unsigned char c = (unsigned char)s[0];
    if (c == '"' || c == '\'' || c == ')' || c == ']') return 1;
    if (left >= 3 && c == 0xE2 && (unsigned char)s[1] == 0x80 &&
        ((unsigned char)s[2] == 0x99 || (unsigned char)s[2] == 0x9D))
        return 3;
    return 0;
}

/* Is the word ending just before text[dot] an abbreviation or an initial, so that a single '.' does not end a
 * sentence there? */
static bool abbreviation_before(const char *text, size_t dot) {
    static const char *const abbrev[] = {"Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "Col", "Gen", "Capt", "Lt",
                                         "Rev", "Prof", "Mt", "vs", "etc", "No", NULL};
    size_t b = dot;
    while (b > 0 && !is_space((unsigned char)text[b - 1]) && text[b - 1] != '(' && text[b - 1] != '"') b--;
    size_t n = dot - b;
    if (n == 1 && ((text[b] >= 'A' && text[b] <= 'Z') || (text[b] >= 'a' && text[b] <= 'z'))) return true;
    for (int i = 0; abbrev[i]; i++)
        if (strlen(abbrev[i]) == n && !memcmp(text + b, abbrev[i], n)) return true;
    return false;
}

qkv_status qkv_documents_sentence_split(const char *text, size_t len, size_t **spans, size_t *n) {
    if (!spans || !n || (len && !text)) return qkv_error_set(QKV_ERR_INVALID, "sentence split: NULL argument");
    *spans = NULL, *n = 0;
    size_t cap = 0, start = 0;
#define EMIT(a, b)                                                                                                  \
    do {                                                                                                            \
        size_t s0 = (a), e0 = (b);                                                                                  \
        while (s0 < e0 && is_space((unsigned char)text[s0])) s0++;                                                  \
        while (e0 > s0 && is_space((unsigned char)text[e0 - 1])) e0--;                                              \
        if (e0 > s0) {                                                                                              \
            if (*n == cap) {                                                                                        \
                cap = cap ? 2 * cap : 8;                                                                            \
                size_t *p = realloc(*spans, 2 * cap * sizeof *p);                                                   \
                if (!p) {                                                                                           \
                    free(*spans);                                                                                   \
                    *spans = NULL, *n = 0;                                                                          \
                    return qkv_error_set(QKV_ERR_NOMEM, "sentence split: out of memory");                           \
                }                                                                                                   \
                *spans = p;                                                                                         \
            }                                                                                                       \
            (*spans)[2 * *n] = s0, (*spans)[2 * *n + 1] = e0, (*n)++;                                               \
        }                                                                                                           \
    } while (0)
    size_t i = 0;
    while (i < len) {
        char c = text[i];
        if (c != '.' && c != '!' && c != '?') {
            i++;
            continue;
        }
        size_t run = i;
        while (i < len && (text[i] == '.' || text[i] == '!' || text[i] == '?')) i++;
        bool single_dot = i - run == 1 && c == '.';
        size_t k;
        while (i < len && (k = closer_len(text + i, len - i))) i += k;
        if (i >= len || !is_space((unsigned char)text[i])) continue;
        size_t next = i;
        while (next < len && is_space((unsigned char)text[next])) next++;
        if (next < len && text[next] >= 'a' && text[next] <= 'z') continue;
        if (single_dot && abbreviation_before(text, run)) continue;
        EMIT(start, i);
        start = i;
    }
    EMIT(start, len);
#undef EMIT
    return QKV_OK;
}

static qkv_status add_sentences(qkv_documents *d, const char *text, size_t len) {
    size_t *spans, n;
    qkv_status st = qkv_documents_sentence_split(text, len, &spans, &n);
    for (size_t i = 0; i < n && !st; i++) st = push_sentence(d, text + spans[2 * i], spans[2 * i + 1] - spans[2 * i]);
    free(spans);
    return st;
}

/* ---- Sources ------------------------------------------------------------------------------------------------- */

static bool eval_split_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return (!strncmp(base, "dev", 3) && (base[3] == '.' || !base[3])) ||
           (!strncmp(base, "test", 4) && (base[4] == '.' || !base[4]));
}

static qkv_status source_error(const char *path, const qkv_data_record *rec, const char *msg) {
    return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: %s", path, (long long)rec->line, msg);
}

qkv_status qkv_documents_read(qkv_documents *d, const qkv_documents_source *src) {
    if (!d || !src || !src->path) return qkv_error_set(QKV_ERR_INVALID, "documents read: NULL corpus or source");
    const char *path = src->path;
    if (eval_split_name(path))
        return qkv_error_set(QKV_ERR_INVALID, "%s: a dev or test split is never pretraining text (held-out documents "
                             "come from the training files)", path);
    if (src->format == QKV_DOCS_TSV && src->column < 0)
        return qkv_error_set(QKV_ERR_INVALID, "%s: TSV column %d must be >= 0", path, src->column);
    if (src->format == QKV_DOCS_TOKENS && src->group < 2)
        return qkv_error_set(QKV_ERR_INVALID, "%s: token-per-line documents need group >= 2 sentences, got %d", path,
                             src->group);
    qkv_data_opts o = {.format = src->format == QKV_DOCS_TEXT ? QKV_DATA_LINES : QKV_DATA_TSV, .keep_blank = true};
    qkv_reader *r = qkv_reader_open(path, &o);
    if (!r) return qkv_last_status();
    const char *doc_start = src->doc_start && src->doc_start[0] ? src->doc_start : NULL;
    size_t ds_len = doc_start ? strlen(doc_start) : 0;
    /* TOKENS: the sentence being assembled and the sentences of the current group. */
    char *sent = NULL;
    size_t sent_len = 0, sent_cap = 0;
    int in_group = 0;
    qkv_status st;
    const qkv_data_record *rec;
    while (!(st = qkv_reader_next(r, &rec)) && rec) {
        bool blank = rec->n_fields == 0 || (rec->n_fields == 1 && rec->lens[0] == 0);
        if (src->format == QKV_DOCS_TEXT) {
            if (blank) st = end_document(d);
            else if (doc_start && !strncmp(rec->fields[0], doc_start, ds_len)) st = end_document(d);
            else st = add_sentences(d, rec->fields[0], rec->lens[0]);
        } else if (src->format == QKV_DOCS_TSV) {
            if (blank) continue;
            if (rec->n_fields <= src->column) {
                char msg[96];
                snprintf(msg, sizeof msg, "expected at least %d tab-separated fields, found %d", src->column + 1,
                         rec->n_fields);
                st = source_error(path, rec, msg);
            } else if (!(st = add_sentences(d, rec->fields[src->column], rec->lens[src->column]))) {
                st = end_document(d);
            }
        } else {
            if (blank) {
                if (sent_len && !(st = push_sentence(d, sent, sent_len)) && ++in_group == src->group) {
                    st = end_document(d);
                    in_group = 0;
                }
                sent_len = 0;
                continue;
            }
            size_t need = sent_len + rec->lens[0] + 2;
            if (need > sent_cap) {
                char *p = realloc(sent, need * 2);
                if (!p) {
                    st = qkv_error_set(QKV_ERR_NOMEM, "documents: out of memory");
                    break;
                }
                sent = p, sent_cap = need * 2;
            }
            if (sent_len) sent[sent_len++] = ' ';
            memcpy(sent + sent_len, rec->fields[0], rec->lens[0]);
            sent_len += rec->lens[0];
        }
        if (st) break;
    }
    if (!st && sent_len) st = push_sentence(d, sent, sent_len);
    if (!st) st = end_document(d);
    free(sent);
    qkv_reader_close(r);
    return st;
}

qkv_status qkv_documents_read_data_dir(qkv_documents *d, const char *dir) {
    if (!d || !dir) return qkv_error_set(QKV_ERR_INVALID, "documents read: NULL corpus or directory");
    static const struct {
        const char *rel;
        qkv_documents_format format;
        int column, group;
        const char *doc_start;
    } parts[] = {
        {"lm/train.txt", QKV_DOCS_TEXT, 0, 0, "CHAPTER"},
        {"translation/train.tsv", QKV_DOCS_TSV, 0, 0, NULL},
        {"paraphrase/train.tsv", QKV_DOCS_TSV, 2, 0, NULL},
        {"pos/train.tsv", QKV_DOCS_TOKENS, 0, 20, NULL},
        {"summarization/train.tsv", QKV_DOCS_TSV, 0, 0, NULL},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, parts[i].rel);
        qkv_documents_source s = {.path = path, .format = parts[i].format, .column = parts[i].column,
                                  .group = parts[i].group, .doc_start = parts[i].doc_start};
        qkv_status st = qkv_documents_read(d, &s);
        if (st) return st;
    }
    return QKV_OK;
}

size_t qkv_documents_multi(const qkv_documents *d) {
    size_t m = 0;
    for (size_t i = 0; d && i < d->n_docs; i++) m += d->doc_first[i + 1] - d->doc_first[i] >= 2;
    return m;
}

qkv_status qkv_documents_check_nsp(const qkv_documents *d, const char *what) {
    const char *w = what ? what : "corpus";
    if (!d || d->n_docs < 2)
        return qkv_error_set(QKV_ERR_INVALID, "%s: next-sentence prediction needs at least two documents (a random "
                             "next segment comes from another document), found %zu", w, d ? d->n_docs : 0);
    if (!qkv_documents_multi(d))
        return qkv_error_set(QKV_ERR_INVALID, "%s: next-sentence prediction is impossible: none of its %zu documents "
                             "has two or more sentences (plain text: a blank line ends a document, so put a "
                             "document's sentences on consecutive lines; or turn NSP off)", w, d->n_docs);
    return QKV_OK;
}

static qkv_status copy_doc(qkv_documents *to, const qkv_documents *from, size_t i) {
    size_t n;
    char *const *s = qkv_documents_doc(from, i, &n);
    return qkv_documents_add(to, (const char *const *)s, n);
}

qkv_status qkv_documents_split(const qkv_documents *all, double frac, uint64_t seed, qkv_documents **train,
                               qkv_documents **heldout) {
    if (!all || !train || !heldout) return qkv_error_set(QKV_ERR_INVALID, "documents split: NULL argument");
    *train = *heldout = NULL;
    if (!(frac >= 0.0 && frac < 1.0))
        return qkv_error_set(QKV_ERR_INVALID, "documents split: held-out fraction %g outside [0, 1)", frac);
    size_t n = all->n_docs;
    char *pick = calloc(n ? n : 1, 1);
    if (!pick) return qkv_error_set(QKV_ERR_NOMEM, "documents split: out of memory");
    size_t lo = 0, hi = 0, picked = 0;
    float ulo = 2.0f, uhi = -1.0f;
    for (size_t i = 0; i < n; i++) {
        float u = qkv_rng_uniform_at(seed, 0, i);
        pick[i] = u < frac;
        picked += pick[i];
        if (u < ulo) ulo = u, lo = i;
        if (u > uhi) uhi = u, hi = i;
    }
    if (n >= 2 && frac > 0.0 && !picked) pick[lo] = 1;
    if (n >= 1) pick[hi] = 0;
    qkv_documents *a = qkv_documents_new(), *b = qkv_documents_new();
    qkv_status st = a && b ? QKV_OK : qkv_last_status();
    for (size_t i = 0; i < n && !st; i++) st = copy_doc(pick[i] ? b : a, all, i);
    free(pick);
    if (st) {
        qkv_documents_free(a);
        qkv_documents_free(b);
        return st;
    }
    *train = a, *heldout = b;
    return QKV_OK;
}
