/* Decoding an extractive answer from start and end scores (BERT's SQuAD post-processing): the best span
 * start <= end, at most max_answer_len positions long, both ends among the allowed positions, searched over the
 * top_n starts and top_n ends by score; a span's score is start[s] + end[e]. A pure function of its inputs. */
#ifndef QKV_SPAN_H
#define QKV_SPAN_H

#include <stdint.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_span {
    int64_t start, end; /* inclusive positions; -1 when no pair qualifies */
    float score;
} qkv_span;

/* start, end: [T] scores (logits); allowed: [T], non-zero where an answer may be (the context), or NULL for every
 * position. Ties go to the higher-ranked start, then end (equal scores rank by position). top_n and max_answer_len
 * must be >= 1. */
qkv_status qkv_span_decode(const float *start, const float *end, const float *allowed, int64_t T, int top_n,
                           int64_t max_answer_len, qkv_span *out);

#ifdef __cplusplus
}
#endif
#endif
