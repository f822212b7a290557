/* The `qkv bench` frame. A benchmark is a bench_entry registered from its own bench_<name>.c with BENCH_REGISTER;
 * the frame reads ../shared/bench/configs.json (or --configs FILE), runs each (entry, mode, seq_len) measurement
 * in its own child process (so peak_rss_mib is that measurement's own high-water mark, as torch_ref.py does) and
 * prints one JSON line per measurement with the same fields as ../shared/bench/torch_ref.py.
 *
 * Timing follows torch_ref.py exactly: `warmup` untimed steps, then timed steps until max_seconds (at least
 * min_steps, at most max_steps), reported as min/median/mean. */
#ifndef QKV_BENCH_H
#define QKV_BENCH_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "qkv/optim.h"
#include "qkv/rng.h"
#include "qkv/tensor.h"

typedef struct bench_ctx {
    const char *name;        /* entry name (and configs.json key when it has one) */
    const cJSON *cfg;        /* configs.json entry, or NULL */
    const cJSON *configs;    /* the whole file */
    const char *shared_dir;  /* the folder holding bench/configs.json's bench/ (../shared), for data files */
    const char *model;       /* --model: which model a benchmark of several measures (NULL: its default) */
    int threads, warmup, min_steps, max_steps;
    double max_seconds;
    bool warmup_set, max_steps_set, max_seconds_set; /* given on the command line */
} bench_ctx;

typedef struct bench_entry {
    const char *name;
    const char *modes;   /* comma-separated modes it supports, the first is the default when configs.json has none */
    const char *summary;
    /* Run one measurement and print its JSON line with bench_emit(); return 0 or a CLI exit code. */
    int (*run)(const bench_ctx *b, const char *mode, long seq_len);
} bench_entry;

void bench_register(const bench_entry *e);
#define BENCH_REGISTER(entry) \
    __attribute__((constructor)) static void bench_register_##entry(void) { bench_register(&entry); }

/* Integer / number field of the entry's config (error message + exit if missing when required). */
long bench_cfg_int(const bench_ctx *b, const char *key, long dflt);
double bench_cfg_num(const bench_ctx *b, const char *key, double dflt);
const char *bench_cfg_str(const bench_ctx *b, const char *key, const char *dflt);

/* Time `step` with the context's settings (warmup/min_steps overrides <0 mean "use the configured value").
 * Fills ms[] (caller-provided, max_steps entries) and returns the number of timed steps. */
typedef void (*bench_step_fn)(void *user);
int bench_time(const bench_ctx *b, bench_step_fn step, void *user, int warmup, int min_steps, int max_steps,
               double *ms, double *warm_s);

/* The entry's "optimizer" object (name, lr, betas, eps, weight_decay, as torch_ref.py reads it) over
 * torch.optim's defaults for its kind (dflt when the name is absent). false, with a message, for an unknown name. */
bool bench_optim_config(const bench_ctx *b, qkv_optim_kind dflt, qkv_optim_config *oc);

/* A result object with the common fields: bench, config, mode, threads, blas, OPENBLAS_CORETYPE. */
cJSON *bench_result(const bench_ctx *b, const char *mode);
/* Adds steps, ms_step_min/median/mean, tokens_per_s_median/best, seqs_per_s_median/best (if seqs > 0),
 * flops_per_step, gflops_median, frac_sgemm_peak, warmup_s. */
void bench_add_times(const bench_ctx *b, cJSON *o, const double *ms, int n, double warm_s, double tokens,
                     double seqs, double flops);
/* Adds peak_rss_mib, prints the line to stdout, frees o. */
void bench_emit(cJSON *o);
double bench_median(const double *v, int n);

/* What a timed measurement reports besides its timings. params, matmul_params, batch and seq_len go into the line
 * in torch_ref.py's order, each left out when 0; tokens, seqs and flops per step are bench_add_times's.
 * warmup, min_steps and max_steps override the configured values unless 0 (--warmup / --max-steps still win). */
typedef struct bench_measure {
    double params, matmul_params, batch, seq_len;
    double tokens, seqs, flops;
    int warmup, min_steps, max_steps;
    double median_ms; /* set by bench_run_timed: the median step time, unrounded */
} bench_measure;

/* The tail every timed entry shares: times step, then returns bench_result's object with m's fields and the timing
 * fields, for the entry to add its own and bench_emit. NULL, with a message, when out of memory. */
cJSON *bench_run_timed(const bench_ctx *b, const char *mode, bench_step_fn step, void *user, bench_measure *m);

/* B x T token ids drawn uniformly from [0, vocab) (a heap tensor; NULL when out of memory). */
qkv_tensor *bench_random_ids(qkv_rng *rng, long vocab, long B, long T);
/* configs.json's bench.seed, 1234 when absent. */
uint64_t bench_seed(const bench_ctx *b);
/* torch_ref.py's flops("nmt"): matmul FLOPs of one training step (3 x forward) of an encoder-decoder Transformer,
 * B x S source and B x T target tokens, width d, feed-forward f, ne + nd layers, V output words;
 * *matmul_params gets the weights those products use. */
double bench_s2s_train_flops(long B, long S, long T, long d, long f, long ne, long nd, long V, double *matmul_params);

#endif
