/* Checkpoints: one safetensors file holding a model's parameters, the optimiser's moments, and the training
 * state (step, RNG, data position) and model config as metadata, so a run resumes bit-identically.
 *
 * Tensor names: parameters under their own names (state_dict keys, loadable by PyTorch or Hugging Face tools);
 * optimiser slots under "<optimiser>.<slot>.<param>". Metadata: "format" = "qkv", "qkv.step", "qkv.optim_steps",
 * "qkv.rng_seed", "qkv.rng_counter", "qkv.data_epoch", "qkv.data_pos", "qkv.config" (JSON text), plus any extra
 * key/value pairs the caller passes. Saving is atomic (see safetensors.h). */
#ifndef QKV_CHECKPOINT_H
#define QKV_CHECKPOINT_H

#include <stdint.h>

#include "qkv/optim.h"
#include "qkv/params.h"
#include "qkv/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_train_state {
    long step;            /* training steps completed */
    qkv_rng rng;          /* the generator that drives shuffling and dropout */
    uint64_t data_epoch;  /* passes over the training data completed */
    uint64_t data_pos;    /* position within the current pass */
} qkv_train_state;

/* opt and state may be NULL (weights only); config_json may be NULL. */
qkv_status qkv_checkpoint_save(const char *path, const qkv_params *params, const qkv_optim *opt,
                               const qkv_train_state *state, const char *config_json);

/* The same, plus n_extra metadata pairs keys[i] = values[i] (UTF-8; read them back with qkv_st_metadata). The
 * training loop keeps its own state under "qkv.loop". */
qkv_status qkv_checkpoint_save_ex(const char *path, const qkv_params *params, const qkv_optim *opt,
                                  const qkv_train_state *state, const char *config_json, int n_extra,
                                  const char *const *keys, const char *const *values);

/* Loads into existing tensors: every parameter (and, if opt is given, every optimiser slot) must be in the file
 * with the same shape; a missing tensor, a shape mismatch, or a tensor in the file that nothing here expects is an
 * error naming them (up to 8 names). opt/state/config_json (malloc'd, caller frees) may be NULL. */
qkv_status qkv_checkpoint_load(const char *path, qkv_params *params, qkv_optim *opt, qkv_train_state *state,
                               char **config_json);

#ifdef __cplusplus
}
#endif
#endif
