/* qkv bench decode --model lstm|transformer|gpt --mode greedy|beam: decoding throughput of batched incremental
 * decoding (decode_batch.h) against one sentence at a time, on random weights with the length forced (EOS can never
 * be chosen, so every sentence generates exactly seq_len tokens and the work is fixed). The seq2seq models are
 * bench/quality/translation.json's (shared 8k vocabulary), the GPT is configs.json's "lm". One JSON line per batch
 * size (1, then 64) with sentences/s and target tokens/s; the batch-64 line adds speedup_vs_batch1. The calls keep
 * their workspaces from one to the next (qkv_decode_keep_open), so a timed call repacks no weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cli.h"
#include "qkv/decode_batch.h"
#include "qkv/model.h"
#include "qkv/qkv.h"

/* bench/quality/translation.json's models (dropout is off at inference). */
static const char *const LSTM_JSON = "{\"type\": \"lstm_seq2seq\", \"embed\": 256, \"hidden\": 256, \"n_layers\": 1, "
                                     "\"attention\": \"general\", \"input_feeding\": false, \"dropout\": 0.0}";
static const char *const TF_JSON = "{\"type\": \"transformer_seq2seq\", \"d_model\": 256, \"n_heads\": 4, \"d_ff\": 1024, "
                                   "\"n_enc_layers\": 3, \"n_dec_layers\": 3, \"activation\": \"relu\", \"norm\": "
                                   "\"pre\", \"dropout\": 0.1, \"max_len\": 130, \"share_embeddings\": false}";

typedef struct dec_run {
    qkv_decoder d;
    qkv_decode_opts o;
    qkv_batch_opts bo;
    int n;                 /* sentences per timed step */
    const int32_t **src;
    const int *len;
    double *cpu_ms; /* process CPU time of each call, warm-up included (the timed calls are the last ones) */
    int n_calls, cap_calls;
} dec_run;

/* Process CPU seconds (every thread): beside wall-clock, it shows a side whose "1 thread" used more than one core. */
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static qkv_status drop(int index, qkv_hyps *hs, void *user) {
    (void)index;
    (void)hs;
    (void)user;
    return QKV_OK;
}

static void step(void *u) {
    dec_run *r = u;
    double c0 = cpu_now();
    if (qkv_decode_batch(&r->d, r->n, r->d.info.needs_source ? r->src : NULL, r->d.info.needs_source ? r->len : NULL,
                         NULL, &r->o, &r->bo, drop, NULL) != QKV_OK) {
        fprintf(stderr, "qkv bench decode: %s\n", qkv_last_error());
        exit(CLI_RUNTIME);
    }
    if (r->n_calls < r->cap_calls) r->cpu_ms[r->n_calls++] = (cpu_now() - c0) * 1e3;
}

/* A gpt config from configs.json's "lm" (its sizes, a context long enough for T tokens). */
static cJSON *lm_config(const bench_ctx *b, long T) {
    const cJSON *lm = cJSON_GetObjectItemCaseSensitive(b->configs, "lm");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", "gpt");
    static const char *const keys[] = {"d_model", "n_layers", "n_heads", "d_ff"};
    static const double dflt[] = {384, 6, 6, 1536};
    for (int i = 0; i < 4; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(lm, keys[i]);
        cJSON_AddNumberToObject(c, keys[i], cJSON_IsNumber(v) ? v->valuedouble : dflt[i]);
    }
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(lm, "seq_len");
    double n_ctx = cJSON_IsNumber(ctx) ? ctx->valuedouble : 256;
    cJSON_AddNumberToObject(c, "n_ctx", n_ctx > T + 1 ? n_ctx : (double)(T + 1));
    return c;
}

/* The benchmark's models by --model name: a fixed model config (its "type" picks the model type), or configs.json's
 * "lm" (vocabulary included). The bench knows its configs, not the models: creation and decoding go through the
 * type. */
static const struct {
    const char *name, *json;
} MODELS[] = {{"lstm", LSTM_JSON}, {"transformer", TF_JSON}, {"gpt", NULL}};

static int run(const bench_ctx *bc, const char *mode, long seq_len) {
    const char *model = bc->model ? bc->model : "lstm";
    int k = 0, n_models = (int)(sizeof MODELS / sizeof MODELS[0]);
    while (k < n_models && strcmp(model, MODELS[k].name)) k++;
    if (k == n_models) {
        fprintf(stderr, "qkv bench decode: --model takes lstm, transformer or gpt, not '%s'\n", model);
        return CLI_USAGE;
    }
    long T = seq_len > 0 ? seq_len : 32, V = 8000;
    bool beam = !strcmp(mode, "beam");
    cJSON *cfg = MODELS[k].json ? cJSON_Parse(MODELS[k].json) : lm_config(bc, T);
    if (!MODELS[k].json) {
        const cJSON *lv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(bc->configs, "lm"), "vocab");
        if (cJSON_IsNumber(lv)) V = (long)lv->valuedouble;
    }
    const qkv_model_type *t = cfg ? qkv_model_type_find(cJSON_GetStringValue(cJSON_GetObjectItem(cfg, "type"))) : NULL;
    const cJSON *ml = cJSON_GetObjectItemCaseSensitive(cfg, "max_len");
    qkv_task_info info = {.vocab_size = V, .pad_id = 0, .max_len = cJSON_IsNumber(ml) ? (long)ml->valuedouble : T + 1};
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 1234);
    qkv_model *m = t && cfg && p ? t->create(cfg, &info, p, &rng) : NULL;
    cJSON_Delete(cfg);
    dec_run r = {.o = qkv_decode_defaults(), .bo = qkv_batch_defaults()};
    if (!m || qkv_model_decoder(t, m, &r.d) != QKV_OK) {
        fprintf(stderr, "qkv bench decode: %s\n", qkv_last_error());
        return CLI_RUNTIME;
    }
    /* EOS is the banned pad id: no row ever ends early. */
    r.o.bos = 1;
    r.o.eos = 0;
    r.o.pad = 0;
    r.o.max_len = (int)T;
    r.o.beam = 4;
    r.o.n_best = 1;
    r.bo.search = beam ? QKV_SEARCH_BEAM : QKV_SEARCH_GREEDY;
    enum { MAX_N = 64 };
    int32_t *ids = malloc(sizeof *ids * (size_t)(MAX_N * T));
    const int32_t *src[MAX_N];
    int len[MAX_N];
    for (int i = 0; ids && i < MAX_N; i++) {
        for (long j = 0; j < T; j++) ids[i * T + j] = 3 + (int32_t)qkv_rng_below(&rng, (uint32_t)(V - 3));
        src[i] = ids + i * T;
        len[i] = (int)T;
    }
    r.src = src;
    r.len = len;
    bench_ctx b = *bc;
    if (!b.max_seconds_set) b.max_seconds = 5;
    double *ms = malloc(sizeof *ms * (size_t)(b.max_steps > 0 ? b.max_steps : 1)), warm, rate1 = 0;
    r.cap_calls = (b.max_steps > 0 ? b.max_steps : 1) + (b.warmup_set && b.warmup > 1 ? b.warmup : 1);
    r.cpu_ms = malloc(sizeof *r.cpu_ms * (size_t)r.cap_calls);
    if (!ids || !ms || !r.cpu_ms) return CLI_RUNTIME;
    static const int batches[] = {1, 64};
    /* The calls keep their packed weights and state memory for the next (decode_batch.h), as a server decoding
     * request after request does: a timed call is the steady state, its first (warm-up) call packs. */
    qkv_decode_keep_open();
    for (int k = 0; k < 2; k++) {
        r.bo.batch_size = batches[k];
        r.n = batches[k] == 1 ? (beam ? 2 : 4) : MAX_N; /* one at a time: a few sentences per timed step */
        r.n_calls = 0;
        int n = bench_time(&b, step, &r, 1, 3, -1, ms, &warm);
        char name[64];
        snprintf(name, sizeof name, "decode-%s", model);
        b.name = name;
        cJSON *o = bench_result(&b, mode);
        b.name = bc->name;
        cJSON_AddStringToObject(o, "model", model);
        cJSON_AddNumberToObject(o, "params", (double)qkv_params_numel(p));
        cJSON_AddNumberToObject(o, "batch", batches[k]);
        cJSON_AddNumberToObject(o, "beam", beam ? r.o.beam : 1);
        cJSON_AddNumberToObject(o, "sentences", r.n);
        cJSON_AddNumberToObject(o, "src_len", r.d.info.needs_source ? (double)T : 0);
        cJSON_AddNumberToObject(o, "seq_len", (double)T);
        double med = bench_median(ms, n), rate = med > 0 ? r.n * 1e3 / med : 0;
        if (k == 0) rate1 = rate;
        else cJSON_AddNumberToObject(o, "speedup_vs_batch1", rate1 > 0 ? rate / rate1 : 0);
        bench_add_times(&b, o, ms, n, warm, (double)(r.n * T), (double)r.n, 0);
        if (n > 0 && r.n_calls >= n)
            cJSON_AddNumberToObject(o, "cpu_ms_step_median",
                                    (double)(long long)(bench_median(r.cpu_ms + r.n_calls - n, n) * 1e3 + 0.5) / 1e3);
        cJSON_AddBoolToObject(o, "kept_workspaces", true);
        bench_emit(o);
    }
    qkv_decode_keep_close();
    free(ms);
    free(r.cpu_ms);
    free(ids);
    t->free(m);
    qkv_params_free(p);
    return CLI_OK;
}

static const bench_entry decode_entry = {"decode", "greedy,beam",
                                         "decoding throughput, batch 64 vs one at a time (--model lstm|transformer|gpt, "
                                         "random weights, forced length --seq-len, default 32)",
                                         run};
BENCH_REGISTER(decode_entry)
