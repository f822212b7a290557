/* The LSH bucket of one rotated vector, shared by qkv_lsh_attention and the cached Reformer decoder so that a
 * decoding step hashes exactly as the forward does. */
#ifndef QKV_OPS_LSH_HASH_H
#define QKV_OPS_LSH_HASH_H

#include <stdint.h>

#include "core/visibility.h"

QKV_INTERNAL_BEGIN
/* row: one round's rotated vector x R_r (rc columns). h1 = 0: argmax([row ; -row]) in [0, 2 rc); h1 = n1 / 2 > 0
 * (factorized): b1 + n1 b2 with b1 the argmax over the first h1 columns, b2 over the rest. First maximum on ties. */
int64_t qkv__lsh_bucket(const float *row, int64_t rc, int64_t h1);
QKV_INTERNAL_END

#endif
