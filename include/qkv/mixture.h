/* Multi-task mixing as T5 defines it (Raffel et al. 2020, section 3.5.2): the rate at which examples of each task
 * are drawn during multi-task training, from each task's number of examples e_m.
 *
 *   examples-proportional with cap K:  r_m = min(e_m, K) / sum_n min(e_n, K)   (K = 0: no cap)
 *   temperature scaling:               the capped proportional rates raised to 1/T, renormalised (T = 1 is
 *                                      proportional, T -> inf approaches equal)
 *   equal:                             r_m = 1 / M
 *
 * Drawing: qkv_mix_pick maps one uniform number to a task through the cumulative rates, so a draw depends only on
 * the generator's state (a run with the same seed sees the same task sequence).
 */
#ifndef QKV_MIXTURE_H
#define QKV_MIXTURE_H

#include <stdint.h>

#include "qkv/error.h"
#include "qkv/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_mix_kind { QKV_MIX_PROPORTIONAL = 0, QKV_MIX_TEMPERATURE, QKV_MIX_EQUAL } qkv_mix_kind;

typedef struct qkv_mix_opts {
    qkv_mix_kind kind;
    double cap;         /* K: examples counted per task at most, 0 = no cap (proportional and temperature) */
    double temperature; /* T >= 1 (temperature) */
} qkv_mix_opts;

/* "proportional", "temperature" or "equal"; QKV_ERR_INVALID naming the choices otherwise. */
qkv_status qkv_mix_parse(const char *name, qkv_mix_kind *kind);

/* rates[n] from examples[n]. QKV_ERR_INVALID for n < 1, a negative count, no examples at all (but equal mixing),
 * a negative cap or a temperature below 1. */
qkv_status qkv_mix_rates(const int64_t *examples, int n, const qkv_mix_opts *o, double *rates);

/* The task of the next example: the first m with u < rates[0] + ... + rates[m], u uniform in [0, 1) from rng
 * (rates that sum to less than 1 by rounding give the last task with a positive rate). */
int qkv_mix_pick(const double *rates, int n, qkv_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
