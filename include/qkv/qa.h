/* Question-answering data: SQuAD-format JSONL (read and validated) and cloze questions made from plain text in the
 * style of the Children's Book Test (docs/qa.md has the exact rules).
 *
 * A line of SQuAD JSONL:
 *     {"id": "...", "context": "...", "question": "...", "answers": {"text": ["w"], "answer_start": [17]}}
 * answer_start counts characters (Unicode code points, as Python's str indexes the SQuAD files); the list form
 * "answers": [{"text": "w", "answer_start": 17}] is read too.
 *
 * Ownership: qkv_qa_read returns malloc'd examples freed with qkv_qa_free. */
#ifndef QKV_QA_H
#define QKV_QA_H

#include <stdint.h>
#include <stdio.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_QA_MAX_ANSWERS 16

typedef struct qkv_qa_example {
    char *id, *context, *question;
    int n_answers;
    char *answers[QKV_QA_MAX_ANSWERS];
    int64_t answer_char[QKV_QA_MAX_ANSWERS]; /* offset in characters, as in the file */
    int64_t answer_byte[QKV_QA_MAX_ANSWERS]; /* the same offset in bytes of context */
    int64_t line;                            /* line of the file */
} qkv_qa_example;

/* Every line of a SQuAD JSONL file (blank lines skipped). Each answer must be found at its offset: an answer that
 * does not match its context, a missing field or invalid JSON is QKV_ERR_FORMAT naming the file and line. */
qkv_status qkv_qa_read(const char *path, qkv_qa_example **out, size_t *n);
void qkv_qa_free(qkv_qa_example *e, size_t n);

/* Cloze questions from plain text (one paragraph a line), as `qkv data cloze-qa` makes them. */
typedef struct qkv_cloze_opts {
    int context_sentences; /* N: sentences of context before the question sentence (CBT: 20) */
    uint64_t seed;         /* picks the blanked word among the candidates */
    bool named, nouns;     /* candidate kinds: named words, common nouns */
    int64_t max_examples;  /* 0 = all */
    const char *blank;     /* what stands for the word in the question (default "XXXXX"; 1-64 bytes, no newline) */
} qkv_cloze_opts;
/* N 20, seed 1, both kinds, all examples. */
qkv_cloze_opts qkv_cloze_defaults(void);
/* Reads path, writes one SQuAD JSONL line per question to out; *written receives the count. */
qkv_status qkv_cloze_qa(const char *path, FILE *out, const qkv_cloze_opts *o, int64_t *written);

#ifdef __cplusplus
}
#endif
#endif
