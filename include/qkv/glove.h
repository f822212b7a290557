/* Pretrained word vectors: GloVe / word2vec text files (with or without word2vec's "N D" header line) and word2vec
 * binary files; cosine similarity, nearest neighbours, analogies, and an Embedding's initial weights.
 *
 * Formats. Text: one "word v1 ... vD" a line, separated by spaces or tabs, '\n' or "\r\n" line ends, an optional
 * first line "N D" (word2vec). Binary (word2vec): "N D\n", then N records "word " + D little-endian float32 (+ an
 * optional '\n'). QKV_VEC_AUTO tells them apart by the bytes after the first word. Every error names the file and
 * the line (text) or record (binary): malformed numbers, a line whose dimension differs from the first line's or
 * the header's, a duplicate word, a count that disagrees with the header, a truncated binary record.
 *
 * Scores are computed in double from the float32 vectors. Rankings are by score, highest first, ties by row
 * (file order). Ownership: qkv_vectors is owned by the caller (qkv_vectors_free); the matrix, words and vocabulary
 * it hands out are owned by it and valid until it is freed.
 */
#ifndef QKV_GLOVE_H
#define QKV_GLOVE_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/nn_layers.h"
#include "qkv/rng.h"
#include "qkv/tensor.h"
#include "qkv/text.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_vec_format { QKV_VEC_AUTO = 0, QKV_VEC_TEXT = 1, QKV_VEC_BINARY = 2 } qkv_vec_format;

typedef struct qkv_vectors qkv_vectors;

/* Load a vector file. NULL (error naming file and line) on any malformed content. */
qkv_vectors *qkv_vectors_load(const char *path, qkv_vec_format format);
void qkv_vectors_free(qkv_vectors *v);

int64_t qkv_vectors_count(const qkv_vectors *v);
int64_t qkv_vectors_dim(const qkv_vectors *v);
/* The [count, dim] float32 matrix (row i = word i). */
const qkv_tensor *qkv_vectors_matrix(const qkv_vectors *v);
/* The words as a vocabulary (id = row). */
const qkv_vocab *qkv_vectors_vocab(const qkv_vectors *v);
/* Word of row i (NULL with an error if out of range); row of a word, or -1 (no error) if absent. */
const char *qkv_vectors_word(const qkv_vectors *v, int64_t i);
int64_t qkv_vectors_find(const qkv_vectors *v, const char *word);
/* Row of a token given as bytes (not NUL-terminated): the exact form, else (lowercase_fallback) its lowercased form
 * (utf8proc's simple per-code-point mapping); -1 (no error) when neither is in the file. */
int64_t qkv_vectors_lookup(const qkv_vectors *v, const char *tok, size_t len, bool lowercase_fallback);

typedef struct qkv_vec_hit {
    int64_t row;
    double score; /* cosine similarity */
} qkv_vec_hit;

/* Cosine similarity of two words. An unknown word is a QKV_ERR_INVALID error naming it. */
qkv_status qkv_vectors_cosine(const qkv_vectors *v, const char *a, const char *b, double *out);
/* The k words closest to `word` by cosine (the word itself excluded): hits[0..*n), *n = min(k, count - 1). */
qkv_status qkv_vectors_similar(const qkv_vectors *v, const char *word, int k, qkv_vec_hit *hits, int *n);
/* The k words closest to query [dim] (any vector), excluding the n_exclude rows listed. */
qkv_status qkv_vectors_nearest(const qkv_vectors *v, const float *query, const int64_t *exclude, int n_exclude,
                               int k, qkv_vec_hit *hits, int *n);
/* Analogy "a - b + c" (king - man + woman -> queen), a, b and c excluded from the answers. unit = false uses the
 * raw vectors (3CosAdd on the stored values); unit = true first scales each of a, b, c to unit length, as gensim's
 * most_similar(positive=[a, c], negative=[b]) does. */
qkv_status qkv_vectors_analogy(const qkv_vectors *v, const char *a, const char *b, const char *c, bool unit, int k,
                               qkv_vec_hit *hits, int *n);

/* An embedding matrix [vocab size, dim] for a model's vocabulary: row i is the vector of token i when the file has
 * it (else, if lowercase_fallback, of its lowercased form), otherwise drawn from normal(0, oov_std) with rng (zero
 * when oov_std is 0). dim must equal the vectors' dimension (an error naming both otherwise), so a config whose
 * embedding size differs from the file fails clearly. *found (optional) receives the number of rows taken from the
 * file. Returns a heap tensor the caller frees; pass it to qkv_nn_embedding_init_from (frozen or tuned). */
qkv_tensor *qkv_vectors_vocab_matrix(const qkv_vectors *v, const qkv_vocab *vocab, int64_t dim,
                                     bool lowercase_fallback, float oov_std, qkv_rng *rng, int64_t *found);

/* Shortcut: qkv_vectors_vocab_matrix (lowercase fallback on; rows not in the file normal(0, 1) from rng as torch's
 * Embedding, or zero when rng is NULL) then qkv_nn_embedding_init_from (padding row kept as built). */
qkv_status qkv_vectors_embedding_init(qkv_nn_embedding *e, qkv_params *params, const char *prefix,
                                      const qkv_vectors *v, const qkv_vocab *vocab, int64_t dim, bool frozen,
                                      int64_t padding_idx, qkv_rng *rng, int64_t *found);

#ifdef __cplusplus
}
#endif
#endif
