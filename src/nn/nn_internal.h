/* Helpers shared by the layer files of src/nn (not the recurrent ones). Not installed. */
#ifndef QKV_NN_INTERNAL_H
#define QKV_NN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/visibility.h"
#include "qkv/error.h"
#include "qkv/tensor.h"

QKV_INTERNAL_BEGIN

/* Room for a parameter key (qkv_params_join), as a tensor's name holds. */
#define NN_NAME_MAX 128

/* A padding mask must be int32 or float32 [B, T]; NULL is allowed (no padding). Error names `what`. */
bool qkv__nn_check_pad_mask(const char *what, const qkv_tensor *m, int64_t B, int64_t T);

QKV_INTERNAL_END
#endif
