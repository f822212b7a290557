/* Tiny corpora for the learning tests, cut from the shared data ($QKV_SHARED/data/lm: Jane Austen), and the
 * character-level language-model run several of them train on it. Every loader returns false / NULL when the shared
 * data is absent, so the caller can skip visibly. */
#ifndef QKV_TEST_CORPUS_H
#define QKV_TEST_CORPUS_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/qkv.h"

/* Byte-level text: ids in order of first appearance in the training slice; dev bytes unseen in training map to 0. */
typedef struct test_char_corpus {
    int32_t *train, *dev;
    int64_t n_train, n_dev, vocab;
    int32_t map[256]; /* byte -> id, -1 for bytes the training slice lacks */
} test_char_corpus;

/* The first train_bytes of data/lm/train.txt and dev_bytes of data/lm/dev.txt. */
bool test_char_corpus_load(test_char_corpus *c, int64_t train_bytes, int64_t dev_bytes);
void test_char_corpus_free(test_char_corpus *c);
/* The unigram entropy of the training slice (nats): a model that learnt nothing about context cannot beat it. */
double test_char_corpus_entropy(const test_char_corpus *c);
/* B windows of T tokens: ids = text[s, s+T) (ids may be NULL), targets = text[s+1, s+T+1); s is b * T when
 * sequential, else drawn from rng. */
void test_char_windows(const int32_t *text, int64_t n, qkv_rng *rng, bool sequential, int B, int T, qkv_tensor *ids,
                       qkv_tensor *targets);

/* A model of a registered type trained on a test_char_corpus (test_char_lm_train), kept for the caller to look at. */
typedef struct test_char_lm {
    const qkv_model_type *type;
    qkv_model *model; /* NULL when the type or config did not build */
    qkv_params *params;
    struct cJSON *cfg; /* the parsed model config, which the model may point into */
    double first_loss, dev_loss; /* the first training step's loss, the dev loss after training; NAN when not reached */
} test_char_lm;

/* Builds type_name from the JSON model config (vocabulary the corpus's, max_len T, seed 99), trains it for `steps`
 * AdamW steps (lr, weight decay 0.01, gradients clipped to norm 1) on random B x T windows, then takes the loss on
 * the first B dev windows in eval mode and prints both losses under `label`. with_ids: batches carry input ids as
 * well as targets (a model that shifts its targets itself takes targets alone). Failures are test failures. */
void test_char_lm_train(test_char_lm *lm, const test_char_corpus *c, const char *type_name, const char *json,
                        const char *label, int steps, float lr, int B, int T, bool with_ids);
void test_char_lm_free(test_char_lm *lm);

/* dir/austen.txt: the first 2,500 non-empty lines of data/lm/train.txt with a blank line for every CHAPTER heading,
 * so chapters are the documents (BERT's sentence pairs). Its path (a static buffer), or NULL. */
const char *test_austen_documents(const char *dir);

#endif
