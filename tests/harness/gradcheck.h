/* Finite-difference gradient checks and PyTorch fixture comparisons for ops and layers. */
#ifndef QKV_GRADCHECK_H
#define QKV_GRADCHECK_H

#include <stdbool.h>

#include "qkv/qkv.h"

/* The function under test: builds its output from the inputs in ctx. `user` is passed through. */
typedef qkv_tensor *(*gc_fn)(qkv_ctx *ctx, qkv_tensor **inputs, void *user);

typedef struct gc_opts {
    double eps;  /* central-difference step */
    double atol; /* |analytic - numeric| <= atol + rtol * |numeric| */
    double rtol;
} gc_opts;

/* Defaults: eps 1e-2 on float32 inputs, atol 2e-3, rtol 2e-2 (float32 forward passes: the truncation and
 * rounding error of a central difference is ~1e-4 relative to the loss, far below an actual backward bug). */
gc_opts gc_defaults(void);

/* Checks the gradient of L = sum(w * f(inputs)) (w fixed random weights) with respect to every float32 input that
 * requires grad, element by element, against central differences computed in double. Inputs are heap tensors;
 * their .grad is overwritten. The context's RNG is reseeded before each evaluation so dropout masks repeat.
 * Prints the largest error per input; returns true when all are within tolerance. */
bool gradcheck(const char *name, gc_fn f, int n, qkv_tensor **inputs, void *user, const gc_opts *opts);

/* Heap float32 tensor of the given shape filled with uniform values in [lo, hi) from a fixed seed. */
qkv_tensor *gc_rand(uint64_t seed, float lo, float hi, int ndim, const int64_t *shape);

/* PyTorch fixtures. A fixture file (tests/fixtures/NAME.safetensors, written by a script in tests/ref) holds, for each
 * case K: inputs "K.in.<i>", the output "K.out", the upstream gradient "K.gout" and the input gradients
 * "K.grad.<i>" (absent for inputs without a gradient). fixture_check() loads case K's inputs, runs f, compares
 * the output, backpropagates gout and compares every gradient (rtol, atol); returns true when all match.
 * Int32 inputs are loaded as int32 (no gradient). */
typedef struct qkv_st_file qkv_st_file;
bool fixture_check(qkv_st_file *file, const char *key, gc_fn f, void *user, double rtol, double atol);
/* Number of inputs "K.in.<i>" stored for case K. */
int fixture_n_inputs(qkv_st_file *file, const char *key);

#endif
