/* Document corpora for pretraining (BERT's next-sentence prediction, T5's span corruption): a corpus is a list of
 * documents, each a list of sentences, read from plain text, TSV or token-per-line files with one rule per format.
 *
 * Formats (qkv_documents_source.format):
 *   QKV_DOCS_TEXT    one paragraph a line. A blank line ends a document; so does a line starting with doc_start
 *                    when it is set (the Austen text: "CHAPTER" makes each chapter a document; the heading line
 *                    itself is dropped). Each paragraph is cut into sentences by qkv_documents_sentence_split.
 *   QKV_DOCS_TSV     tab-separated records: field `column` (0-based) of each record is one document, cut into
 *                    sentences by the same rule (a Bible verse, a Debian package description). A record with fewer
 *                    fields is an error naming the file and line.
 *   QKV_DOCS_TOKENS  one token a line in the first tab-separated field, a blank line after each sentence (CoNLL:
 *                    the Brown corpus of ../shared/data/pos). A sentence is its tokens joined by single spaces;
 *                    every `group` consecutive sentences form a document (the file keeps sentences in document
 *                    order but not where documents end, so a group can straddle two of them).
 *
 * Sentence rule (qkv_documents_sentence_split): a sentence ends after a run of '.', '!' or '?' and any closing
 * quotes or brackets (" ' ) ] and the curly quotes) that is followed by whitespace and then by a character that is
 * not a lowercase ASCII letter, unless the run is a single '.' closing a known abbreviation (Mr Mrs Ms Dr St Jr Sr
 * Col Gen Capt Lt Rev Prof Mt vs etc No) or a single letter (an initial: "J. L. Schafer"). Whitespace around
 * sentences is trimmed; the end of the text ends the last sentence.
 *
 * Evaluation splits are never read: a source whose file is named dev or test (any extension) is refused (held-out text
 * comes from the training files through qkv_documents_split).
 *
 * Ownership: a qkv_documents owns its sentence text; the caller frees it with qkv_documents_free. Sentences are
 * NUL-terminated UTF-8 (inputs are validated as qkv_reader does).
 */
#ifndef QKV_DOCUMENTS_H
#define QKV_DOCUMENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_documents_format { QKV_DOCS_TEXT = 0, QKV_DOCS_TSV, QKV_DOCS_TOKENS } qkv_documents_format;

typedef struct qkv_documents_source {
    const char *path;
    qkv_documents_format format;
    int column;            /* TSV: the field read (0-based) */
    const char *doc_start; /* TEXT: a line starting with this also starts a document (NULL or "": blank lines only) */
    int group;             /* TOKENS: sentences per document (>= 2) */
} qkv_documents_source;

/* Read-only for callers: document d holds sentences doc_first[d] .. doc_first[d + 1] - 1. */
typedef struct qkv_documents {
    size_t n_docs, n_sentences;
    size_t *doc_first; /* n_docs + 1 entries */
    char **sentences;  /* n_sentences NUL-terminated strings */
    size_t cap_docs, cap_sentences;
} qkv_documents;

qkv_documents *qkv_documents_new(void);
void qkv_documents_free(qkv_documents *d);
/* Append a source's documents (empty documents are skipped). Errors name the file (and line). */
qkv_status qkv_documents_read(qkv_documents *d, const qkv_documents_source *src);
/* The English training text of a data directory laid out as ../shared/data (its README): lm/train.txt (TEXT,
 * doc_start "CHAPTER"), the English column of translation/train.tsv (TSV column 0), the World English Bible side of
 * paraphrase/train.tsv (column 2; column 1 is the KJV text translation/ already holds), pos/train.tsv (TOKENS, 20
 * sentences a document) and the descriptions of summarization/train.tsv (column 0). Missing files are an error. */
qkv_status qkv_documents_read_data_dir(qkv_documents *d, const char *dir);
/* Append one document of n sentences (copied). */
qkv_status qkv_documents_add(qkv_documents *d, const char *const *sentences, size_t n);

/* Sentences of document i (i < n_docs) and their count. */
static inline char *const *qkv_documents_doc(const qkv_documents *d, size_t i, size_t *n) {
    *n = d->doc_first[i + 1] - d->doc_first[i];
    return d->sentences + d->doc_first[i];
}
/* Documents with at least two sentences (those that can give a sentence and its true successor). */
size_t qkv_documents_multi(const qkv_documents *d);
/* QKV_OK when next-sentence prediction can be trained: at least one document of two or more sentences and at least
 * two documents; else an error naming `what` (e.g. the corpus path) and what is missing. */
qkv_status qkv_documents_check_nsp(const qkv_documents *d, const char *what);

/* Held-out documents by a seeded rule: document i goes to *heldout when u(seed, i) < frac, u a uniform draw of
 * Philox keyed by the seed at counter i (so the choice of a document does not depend on the others). If frac > 0
 * and the draw picks none, the document with the smallest u is held out; every document is never held out (the one
 * with the largest u stays in training). frac outside [0, 1): an error. Both outputs are new corpora. */
qkv_status qkv_documents_split(const qkv_documents *all, double frac, uint64_t seed, qkv_documents **train,
                               qkv_documents **heldout);

/* Sentence spans of text[0..len) by the rule above: *spans receives 2 * *n byte offsets [start, end) (malloc'd, the
 * caller frees; NULL when *n == 0). */
qkv_status qkv_documents_sentence_split(const char *text, size_t len, size_t **spans, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
