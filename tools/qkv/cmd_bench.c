/* qkv bench: speed and memory, printed as the same JSON fields as ../shared/bench/torch_ref.py. */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "commands.h"
#include "qkv/qkv.h"

#define MAX_ENTRIES 32
static const bench_entry *entries[MAX_ENTRIES];
static int n_entries;

void bench_register(const bench_entry *e) {
    if (n_entries < MAX_ENTRIES) entries[n_entries++] = e;
}

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv bench NAME [--mode M] [--model M] [--seq-len T] [--configs FILE] [--threads N]\n"
            "                 [--warmup N] [--max-steps N] [--max-seconds S] [--json]\n\n"
            "Measures speed and peak memory. NAME is an entry of the configs file (default\n"
            "../shared/bench/configs.json, found from the current directory or beside the qkv binary)\n"
            "or one of the benchmarks below. Each measurement runs in its own process and prints one\n"
            "JSON line with the fields of ../shared/bench/torch_ref.py, so the two can be compared\n"
            "side by side in one session (--json is accepted; JSON lines are the only output).\n\n"
            "benchmarks:\n");
    for (int i = 0; i < n_entries; i++)
        fprintf(out, "  %-8s %-22s %s\n", entries[i]->name, entries[i]->modes, entries[i]->summary);
}

/* ---- config access ------------------------------------------------------------------------------------------ */

long bench_cfg_int(const bench_ctx *b, const char *key, long dflt) {
    const cJSON *v = b->cfg ? cJSON_GetObjectItemCaseSensitive(b->cfg, key) : NULL;
    return cJSON_IsNumber(v) ? (long)v->valuedouble : dflt;
}

double bench_cfg_num(const bench_ctx *b, const char *key, double dflt) {
    const cJSON *v = b->cfg ? cJSON_GetObjectItemCaseSensitive(b->cfg, key) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

const char *bench_cfg_str(const bench_ctx *b, const char *key, const char *dflt) {
    const cJSON *v = b->cfg ? cJSON_GetObjectItemCaseSensitive(b->cfg, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

/* ---- timing ------------------------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(const double *v, int n) {
    if (n <= 0) return 0;
    double *s = malloc(sizeof *s * (size_t)n);
    if (!s) return v[0];
    memcpy(s, v, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

int bench_time(const bench_ctx *b, bench_step_fn step, void *user, int warmup, int min_steps, int max_steps,
               double *ms, double *warm_s) {
    if (b->warmup_set || warmup < 0) warmup = b->warmup;
    if (min_steps < 0) min_steps = b->min_steps;
    if (b->max_steps_set || max_steps < 0) max_steps = b->max_steps;
    double t0 = cli_now();
    for (int i = 0; i < warmup; i++) step(user);
    *warm_s = cli_now() - t0;
    int n = 0;
    double start = cli_now();
    while (n < max_steps && (n < min_steps || cli_now() - start < b->max_seconds)) {
        double a = cli_now();
        step(user);
        ms[n++] = (cli_now() - a) * 1e3;
        if (cli_now() - start > b->max_seconds && n >= (min_steps < 3 ? min_steps : 3)) break;
    }
    return n;
}

/* ---- the optimizer object of a configs.json entry ---------------------------------------------------------- */

bool bench_optim_config(const bench_ctx *b, qkv_optim_kind dflt, qkv_optim_config *oc) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(b->cfg, "optimizer");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    qkv_optim_kind kind = dflt;
    if (cJSON_IsString(name) && !qkv_optim_kind_parse(name->valuestring, &kind)) {
        fprintf(stderr, "qkv bench %s: unknown optimizer '%s'\n", b->name, name->valuestring);
        return false;
    }
    *oc = qkv_optim_defaults(kind);
    const cJSON *v;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "lr"))) oc->lr = (float)v->valuedouble;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "eps"))) oc->eps = (float)v->valuedouble;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "weight_decay"))) oc->weight_decay = (float)v->valuedouble;
    if (cJSON_IsArray(v = cJSON_GetObjectItemCaseSensitive(o, "betas")) && cJSON_GetArraySize(v) == 2) {
        oc->beta1 = (float)cJSON_GetArrayItem(v, 0)->valuedouble;
        oc->beta2 = (float)cJSON_GetArrayItem(v, 1)->valuedouble;
    }
    return true;
}

/* ---- results ------------------------------------------------------------------------------------------------ */

static double round_to(double x, double unit) { return (double)(long long)(x / unit + (x >= 0 ? 0.5 : -0.5)) * unit; }

cJSON *bench_result(const bench_ctx *b, const char *mode) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "bench", "qkv");
    cJSON_AddStringToObject(o, "config", b->name);
    cJSON_AddStringToObject(o, "mode", mode);
    cJSON_AddNumberToObject(o, "threads", b->threads);
    cJSON_AddStringToObject(o, "qkv", QKV_VERSION);
    char blas[160];
    const char *core = openblas_get_corename();
    snprintf(blas, sizeof blas, "openblas-%s", core ? core : "?");
    cJSON_AddStringToObject(o, "blas", blas);
    cJSON_AddStringToObject(o, "isa", qkv_cpu_isa_name(qkv_cpu_isa()));
    const char *ct = getenv("OPENBLAS_CORETYPE");
    if (ct)
        cJSON_AddStringToObject(o, "OPENBLAS_CORETYPE", ct);
    else
        cJSON_AddNullToObject(o, "OPENBLAS_CORETYPE");
    return o;
}

void bench_add_times(const bench_ctx *b, cJSON *o, const double *ms, int n, double warm_s, double tokens,
                     double seqs, double flops) {
    double mn = ms[0], sum = 0;
    for (int i = 0; i < n; i++) {
        if (ms[i] < mn) mn = ms[i];
        sum += ms[i];
    }
    double med = bench_median(ms, n);
    cJSON_AddNumberToObject(o, "steps", n);
    cJSON_AddNumberToObject(o, "ms_step_min", round_to(mn, 1e-3));
    cJSON_AddNumberToObject(o, "ms_step_median", round_to(med, 1e-3));
    cJSON_AddNumberToObject(o, "ms_step_mean", round_to(sum / n, 1e-3));
    if (tokens > 0) {
        cJSON_AddNumberToObject(o, "tokens_per_step", tokens);
        cJSON_AddNumberToObject(o, "tokens_per_s_median", round_to(tokens / med * 1e3, 0.1));
        cJSON_AddNumberToObject(o, "tokens_per_s_best", round_to(tokens / mn * 1e3, 0.1));
    }
    if (seqs > 0) {
        cJSON_AddNumberToObject(o, "seqs_per_s_median", round_to(seqs / med * 1e3, 0.01));
        cJSON_AddNumberToObject(o, "seqs_per_s_best", round_to(seqs / mn * 1e3, 0.01));
    }
    if (flops > 0) {
        cJSON_AddNumberToObject(o, "flops_per_step", flops);
        double gf = flops / (med / 1e3) / 1e9;
        cJSON_AddNumberToObject(o, "gflops_median", round_to(gf, 0.01));
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(b->configs, "machine_ref");
        char key[64];
        snprintf(key, sizeof key, "sgemm_peak_gflops_%dt", b->threads);
        const cJSON *pk = ref ? cJSON_GetObjectItemCaseSensitive(ref, key) : NULL;
        if (cJSON_IsNumber(pk) && pk->valuedouble > 0)
            cJSON_AddNumberToObject(o, "frac_sgemm_peak", round_to(gf / pk->valuedouble, 1e-3));
    }
    cJSON_AddNumberToObject(o, "warmup_s", round_to(warm_s, 0.01));
}

void bench_emit(cJSON *o) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    cJSON_AddNumberToObject(o, "peak_rss_mib", round_to((double)ru.ru_maxrss / 1024.0, 0.1));
    char *s = cJSON_PrintUnformatted(o);
    if (s) printf("%s\n", s);
    fflush(stdout);
    free(s);
    cJSON_Delete(o);
}

cJSON *bench_run_timed(const bench_ctx *b, const char *mode, bench_step_fn step, void *user, bench_measure *m) {
    /* bench_time's own rule for which bound applies, so the array holds every step it may time */
    int max_steps = b->max_steps_set || m->max_steps <= 0 ? b->max_steps : m->max_steps;
    double *ms = malloc(sizeof *ms * (size_t)(max_steps > 0 ? max_steps : 1)), warm = 0;
    if (!ms) {
        fprintf(stderr, "qkv bench %s: out of memory\n", b->name);
        return NULL;
    }
    int n = bench_time(b, step, user, m->warmup > 0 ? m->warmup : -1, m->min_steps > 0 ? m->min_steps : -1,
                       m->max_steps > 0 ? m->max_steps : -1, ms, &warm);
    m->median_ms = bench_median(ms, n);
    cJSON *o = bench_result(b, mode);
    if (m->params) cJSON_AddNumberToObject(o, "params", m->params);
    if (m->matmul_params) cJSON_AddNumberToObject(o, "matmul_params", m->matmul_params);
    if (m->batch) cJSON_AddNumberToObject(o, "batch", m->batch);
    if (m->seq_len) cJSON_AddNumberToObject(o, "seq_len", m->seq_len);
    bench_add_times(b, o, ms, n, warm, m->tokens, m->seqs, m->flops);
    free(ms);
    return o;
}

qkv_tensor *bench_random_ids(qkv_rng *rng, long vocab, long B, long T) {
    qkv_tensor *t = qkv_tensor_new(QKV_I32, QKV_DIMS(B, T));
    for (int64_t i = 0; t && i < B * T; i++) qkv_i32(t)[i] = (int32_t)qkv_rng_below(rng, (uint32_t)vocab);
    return t;
}

uint64_t bench_seed(const bench_ctx *b) {
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b->configs, "bench"), "seed");
    return cJSON_IsNumber(seed) ? (uint64_t)seed->valuedouble : 1234;
}

double bench_s2s_train_flops(long B, long S, long T, long d, long f, long ne, long nd, long V, double *matmul_params) {
    /* nd_s: the decoder's cross-attention K/V projections, which run on source tokens */
    double nenc = ne * (4.0 * d * d + 2.0 * d * f), nd_t = nd * (6.0 * d * d + 2.0 * d * f) + (double)d * V;
    double nd_s = nd * 2.0 * d * d, attn = B * (ne * 4.0 * S * S * d + nd * (4.0 * T * T * d + 4.0 * T * S * d));
    *matmul_params = ne * (4.0 * d * d + 2.0 * d * f) + nd * (8.0 * d * d + 2.0 * d * f) + (double)d * V;
    return 3 * (2 * nenc * B * S + 2 * nd_s * B * S + 2 * nd_t * B * T + attn);
}

/* ---- the command ---------------------------------------------------------------------------------------- */

static char *read_file(const char *path, long max) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc((size_t)max + 1);
    size_t n = buf ? fread(buf, 1, (size_t)max, f) : 0;
    fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    return buf;
}


static bool has_mode(const char *modes, const char *m) {
    size_t ml = strlen(m);
    for (const char *p = modes; *p;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == ml && !strncmp(p, m, l)) return true;
        p += l + (c ? 1 : 0);
    }
    return false;
}

static int run_child(const bench_entry *e, const bench_ctx *b, const char *mode, long T) {
    fflush(stdout);
    pid_t pid = getenv("QKV_BENCH_NOFORK") ? -1 : fork();
    if (pid < 0) return e->run(b, mode, T);
    if (pid == 0) _exit(e->run(b, mode, T));
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    fprintf(stderr, "qkv bench: %s %s died with signal %d\n", e->name, mode, WTERMSIG(st));
    return CLI_RUNTIME;
}

static int run(int argc, char **argv) {
    const char *name = NULL, *mode = NULL, *configs_path = NULL, *model = NULL;
    long seq_len = 0, threads = 0, warmup = -1, max_steps = -1;
    double max_seconds = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) continue; /* JSON lines are the only output format */
        if (!strcmp(a, "--mode") && v) mode = argv[++i];
        else if (!strcmp(a, "--model") && v) model = argv[++i];
        else if (!strcmp(a, "--seq-len") && v) {
            if (!cli_parse_int("bench", a, argv[++i], 1, 1 << 24, &seq_len)) return CLI_USAGE;
        } else if (!strcmp(a, "--configs") && v) configs_path = argv[++i];
        else if (!strcmp(a, "--threads") && v) {
            if (!cli_parse_int("bench", a, argv[++i], 1, 1024, &threads)) return CLI_USAGE;
        } else if (!strcmp(a, "--warmup") && v) {
            if (!cli_parse_int("bench", a, argv[++i], 0, 1000, &warmup)) return CLI_USAGE;
        } else if (!strcmp(a, "--max-steps") && v) {
            if (!cli_parse_int("bench", a, argv[++i], 1, 1000000, &max_steps)) return CLI_USAGE;
        } else if (!strcmp(a, "--max-seconds") && v) {
            if (!cli_parse_double("bench", a, argv[++i], 0, 1e6, &max_seconds)) return CLI_USAGE;
        } else if (a[0] != '-' && !name) name = a;
        else return cli_error("bench", CLI_USAGE, "unexpected argument '%s' (see qkv bench --help)", a);
    }
    if (!name) return cli_error("bench", CLI_USAGE, "which benchmark? (see qkv bench --help)");
    const bench_entry *e = NULL;
    for (int i = 0; i < n_entries; i++)
        if (!strcmp(entries[i]->name, name)) e = entries[i];
    if (!e) return cli_error("bench", CLI_USAGE, "unknown benchmark '%s' (see qkv bench --help)", name);

    char pathbuf[PATH_MAX];
    if (!configs_path) {
        cli_shared_path("bench/configs.json", pathbuf, sizeof pathbuf);
        configs_path = pathbuf;
    }
    char *text = read_file(configs_path, 16 << 20);
    if (!text) return cli_error("bench", CLI_INPUT, "%s: cannot read the benchmark configs", configs_path);
    cJSON *configs = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(configs)) {
        cJSON_Delete(configs);
        return cli_error("bench", CLI_INPUT, "%s: not a JSON object", configs_path);
    }
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(configs, "bench");
#define BNUM(k, d) (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(bs, k)) ? cJSON_GetObjectItemCaseSensitive(bs, k)->valuedouble : (d))
    bench_ctx b = {
        .name = name,
        .cfg = cJSON_GetObjectItemCaseSensitive(configs, name),
        .configs = configs,
        .threads = threads ? (int)threads : (int)BNUM("threads", 2),
        .warmup = warmup >= 0 ? (int)warmup : (int)BNUM("warmup_steps", 3),
        .min_steps = (int)BNUM("min_steps", 5),
        .max_steps = max_steps > 0 ? (int)max_steps : (int)BNUM("max_steps", 200),
        .max_seconds = max_seconds >= 0 ? max_seconds : BNUM("max_seconds", 40),
        .warmup_set = warmup >= 0,
        .max_steps_set = max_steps > 0,
        .max_seconds_set = max_seconds >= 0,
        .model = model,
    };
#undef BNUM
    /* ../shared/bench/configs.json -> ../shared */
    char shared[PATH_MAX];
    snprintf(shared, sizeof shared, "%s", configs_path);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(shared, '/');
        if (slash) *slash = '\0';
        else snprintf(shared, sizeof shared, "%s", up ? ".." : ".");
    }
    b.shared_dir = shared;
    if (b.cfg) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(b.cfg, "min_steps");
        if (cJSON_IsNumber(ms)) b.min_steps = (int)ms->valuedouble;
    }
    qkv_threads_set(b.threads);

    /* Modes: the one asked for, else the config's list, else the entry's default. */
    const char *modes[8];
    int n_modes = 0;
    const cJSON *cm = b.cfg ? cJSON_GetObjectItemCaseSensitive(b.cfg, "modes") : NULL;
    if (mode) {
        modes[n_modes++] = mode;
    } else if (cJSON_IsArray(cm)) {
        const cJSON *m;
        cJSON_ArrayForEach(m, cm) if (cJSON_IsString(m) && n_modes < 8) modes[n_modes++] = m->valuestring;
    } else {
        static char first[32];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(e->modes, ","), e->modes);
        modes[n_modes++] = first;
    }
    /* Sequence lengths: --seq-len, else the config's seq_lens list (attn), else 0 = the config's own. */
    long lens[16];
    int n_lens = 0;
    const cJSON *sl = b.cfg ? cJSON_GetObjectItemCaseSensitive(b.cfg, "seq_lens") : NULL;
    if (seq_len) {
        lens[n_lens++] = seq_len;
    } else if (cJSON_IsArray(sl)) {
        const cJSON *x;
        cJSON_ArrayForEach(x, sl) if (cJSON_IsNumber(x) && n_lens < 16) lens[n_lens++] = (long)x->valuedouble;
    } else {
        lens[n_lens++] = 0;
    }
    int rc = CLI_OK;
    for (int m = 0; m < n_modes; m++) {
        if (!has_mode(e->modes, modes[m])) {
            rc = cli_error("bench", CLI_USAGE, "%s has no mode '%s' (modes: %s)", name, modes[m], e->modes);
            continue;
        }
        for (int l = 0; l < n_lens; l++) {
            int r = run_child(e, &b, modes[m], lens[l]);
            if (r) rc = r;
        }
    }
    cJSON_Delete(configs);
    return rc;
}

const cli_command cmd_bench = {"bench", "measure speed and memory (JSON lines, comparable with torch_ref.py)", run,
                               help};
