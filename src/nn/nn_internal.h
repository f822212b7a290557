/* Helpers shared by the layer files of src/nn (not the recurrent ones). Not installed. */
#ifndef QKV_NN_INTERNAL_H
#define QKV_NN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "qkv/error.h"
#include "qkv/tensor.h"

/* "<prefix>.<name>", or "<name>" when prefix is NULL or empty, into buf. An over-long name is an error rather than
 * a silently truncated parameter key. */
static inline qkv_status qkv__nn_join(char *buf, size_t size, const char *prefix, const char *name) {
    int n = (prefix && *prefix) ? snprintf(buf, size, "%s.%s", prefix, name) : snprintf(buf, size, "%s", name);
    if (n < 0 || (size_t)n >= size)
        return qkv_error_set(QKV_ERR_INVALID, "parameter name '%s.%s' is too long", prefix ? prefix : "", name);
    return QKV_OK;
}

#define NN_NAME_MAX 128

/* A padding mask must be int32 or float32 [B, T]; NULL is allowed (no padding). Error names `what`. */
bool qkv__nn_check_pad_mask(const char *what, const qkv_tensor *m, int64_t B, int64_t T);

#endif
