/* Run configurations: the JSON file `qkv train` reads.
 *
 *     {"model": {"type": "embmean", ...}, "data": {...}, "train": {...}, "eval": {...}, "seed": 1}
 *
 * Every field has a default (docs/training.md lists them; `qkv config show TYPE` prints them all). A user config
 * is resolved by merging it over the defaults: the "model" defaults come from the model type's default_config,
 * the rest from qkv_config_defaults(). Resolution is strict: an unknown key, a value of the wrong JSON type, or a
 * value out of range is an error naming the key path, e.g.
 *     train.optimizer.lr: expected a number > 0, got -1
 *     data.tokenizr: unknown key (known: train, dev, test, format, tokenizer, ...)
 *
 * Ownership: every function returning a cJSON* returns a new tree the caller frees with cJSON_Delete. */
#ifndef QKV_CONFIG_H
#define QKV_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/error.h"
#include "qkv/model.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/* Parse a JSON file; the top level must be an object. Errors name the file and the line of a syntax error. */
struct cJSON *qkv_config_read(const char *path);
/* Parse JSON text (name is used in messages). */
struct cJSON *qkv_config_parse(const char *name, const char *text);

/* Apply one "key.path=value" override in place (the CLI's --set). The value is read as JSON when it parses as
 * JSON (numbers, true/false, null, "quoted", objects, arrays), otherwise as a plain string. Missing intermediate
 * objects are created; whether the key is valid is decided by qkv_config_resolve. */
qkv_status qkv_config_set(struct cJSON *cfg, const char *assignment);

/* The complete default config for a model type: {"model": {"type": name, <its defaults>}, "data", "train",
 * "eval", "seed"}. NULL (error) if the type's default_config is not valid JSON. */
struct cJSON *qkv_config_defaults(const qkv_model_type *type);

/* Merge `user` over the defaults of the model type it names (model.type is required) and validate everything.
 * Returns the complete config, or NULL with an error naming the key path. *type (optional) receives the type. */
struct cJSON *qkv_config_resolve(const struct cJSON *user, const qkv_model_type **type);

/* Lookups in a resolved config by dotted path ("train.optimizer.lr"). Missing keys or other types give the
 * fallback; strings are owned by the tree. */
double qkv_config_num(const struct cJSON *cfg, const char *path, double fallback);
int64_t qkv_config_int(const struct cJSON *cfg, const char *path, int64_t fallback);
bool qkv_config_bool(const struct cJSON *cfg, const char *path, bool fallback);
const char *qkv_config_str(const struct cJSON *cfg, const char *path, const char *fallback);
const struct cJSON *qkv_config_get(const struct cJSON *cfg, const char *path);

/* Pretty JSON text of a config (malloc'd, caller frees), keys in the defaults' order. */
char *qkv_config_print(const struct cJSON *cfg);

#ifdef __cplusplus
}
#endif
#endif
