/* A model of a registered type with random weights, for the decoding tests: the type's default config with small
 * sizes merged over it (create() expects a complete "model" object). */
#ifndef QKV_TEST_RANDOM_MODEL_H
#define QKV_TEST_RANDOM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/qkv.h"

/* *p and *m are the caller's to free (t->free(*m), qkv_params_free(*p)), also when false is returned (*m NULL then).
 * over_json: a JSON object of model keys replacing the defaults. */
bool test_random_model(const qkv_model_type *t, const char *over_json, const qkv_task_info *info, uint64_t seed,
                       qkv_params **p, qkv_model **m);

#endif
