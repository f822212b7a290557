/* Allocation failure injection (issue 29): the library's malloc, calloc, realloc, strdup and posix_memalign (and
 * cJSON's, through its hooks) are routed here by the linker (--wrap), and the n-th one fails. For every n up to the
 * number of allocations an operation makes, the operation must fail cleanly: an error status with a message, no
 * crash; leaks show under ASan/LSan at exit. Usage: alloc_fail [OPERATION...] (default: all), run from ctest with
 * QKV_FIXTURES set. */
#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cjson/cJSON.h"
#include "qkv/checkpoint.h"
#include "qkv/config.h"
#include "qkv/data.h"
#include "qkv/glove.h"
#include "qkv/hf.h"
#include "qkv/optim.h"
#include "qkv/params.h"
#include "qkv/safetensors.h"
#include "qkv/shard.h"
#include "qkv/text.h"
#include "qkv/train.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);

/* Under ASan with QKV_ALLOC_FAIL_LEAKS=1: a leak check after every run names the allocation whose failure leaked
 * (slow: each check scans the heap). Without it, LSan's report at exit fails the test. */
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

static long fail_at = -1; /* the allocation (0-based) that fails; -1: none */
static long count;        /* allocations since arm() */

static bool fail_now(void) { return count++ == fail_at; }
void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { return fail_now() ? NULL : __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return fail_now() ? NULL : __real_strndup(s, n); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) { return fail_now() ? ENOMEM : __real_posix_memalign(p, a, n); }

static void arm(long n) {
    fail_at = n;
    count = 0;
}

static char tmp[256], fixtures[1024];

static const char *scratch(const char *name, const char *text) {
    static char path[8][512];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", tmp, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(1);
    }
    return p;
}

static const char *fixture(const char *rel) {
    static char p[2048];
    snprintf(p, sizeof p, "%s/%s", fixtures, rel);
    return p;
}

/* Each operation returns 0 on success, non-zero (error set) on failure, and frees everything either way. */
static int op_safetensors(void) {
    qkv_st_file *f = qkv_st_open(fixture("ops_bce.safetensors"));
    if (!f) return 1;
    int rc = 0;
    for (int i = 0; i < qkv_st_count(f) && !rc; i++) {
        qkv_tensor *t = qkv_st_read(f, qkv_st_name(f, i));
        rc = !t;
        qkv_tensor_free(t);
    }
    qkv_st_close(f);
    return rc;
}

static int op_hf(void) {
    qkv_hf_model *m = qkv_hf_load(fixture("hf/bert_hub"));
    qkv_hf_free(m);
    return !m;
}

static int op_wordpiece(void) {
    const char *p = scratch("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nun\n##aff\n##able\nhello\n,\n");
    qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
    qkv_wordpiece *w = qkv_wordpiece_load(p, &o);
    if (!w) return 1;
    qkv_encoding e = {0};
    int rc = qkv_wordpiece_encode(w, "Hello, unaffable!", 17, "the", 3, true, &e) != QKV_OK;
    qkv_encoding_free(&e);
    qkv_wordpiece_free(w);
    return rc;
}

static int op_bpe(void) {
    char v[600], m[600];
    snprintf(v, sizeof v, "%s/bpe-vocab.json", tmp); /* written by main */
    snprintf(m, sizeof m, "%s/bpe-merges.txt", tmp);
    qkv_bpe *b = qkv_bpe_load(v, m);
    if (!b) return 1;
    int32_t *ids = NULL;
    size_t n;
    int rc = qkv_bpe_encode(b, "abc ab", 6, &ids, &n) != QKV_OK;
    free(ids);
    qkv_bpe_free(b);
    return rc;
}

static int op_glove(void) {
    const char *path = scratch("vec.txt", "the 0.1 0.2 0.3\ncat 0.4 0.5 0.6\nmat 1 2 3\n");
    qkv_vectors *v = qkv_vectors_load(path, QKV_VEC_AUTO);
    if (!v) return 1;
    qkv_vec_hit hits[2];
    int n, rc = qkv_vectors_similar(v, "cat", 2, hits, &n) != QKV_OK;
    qkv_vectors_free(v);
    return rc;
}

static int op_data(void) {
    qkv_data_opts o = {.format = QKV_DATA_JSONL};
    qkv_dataset *d = qkv_data_read_all(scratch("d.jsonl", "{\"a\": 1}\n{\"b\": [1, 2]}\n"), &o);
    qkv_dataset_free(d);
    if (!d) return 1;
    o.format = QKV_DATA_CSV;
    d = qkv_data_read_all(scratch("d.csv", "a,b\n\"x, y\",2\n"), &o);
    qkv_dataset_free(d);
    return !d;
}

static int op_config(void) {
    cJSON *user = qkv_config_parse("cfg", "{\"model\": {\"type\": \"gpt\", \"d_model\": 32, \"n_heads\": 4}, "
                                          "\"data\": {\"train\": \"a.txt\"}}");
    if (!user) return 1;
    int rc = qkv_config_set(user, "train.steps=5") != QKV_OK;
    const qkv_model_type *type;
    cJSON *cfg = rc ? NULL : qkv_config_resolve(user, &type);
    char *text = cfg ? qkv_config_print(cfg) : NULL;
    rc = rc || !text;
    free(text);
    cJSON_Delete(cfg);
    cJSON_Delete(user);
    return rc;
}

static qkv_params *ck_params;
static qkv_optim *ck_opt;
static int op_checkpoint(void) {
    char *config = NULL;
    qkv_train_state st;
    int rc = qkv_checkpoint_load(fixture("../fuzz/corpus/checkpoint/valid.safetensors"), ck_params, ck_opt, &st,
                                 &config) != QKV_OK;
    free(config);
    return rc;
}

static int op_shard(void) {
    qkv_shard *s = qkv_shard_open(fixture("../fuzz/corpus/shard/u16"));
    if (!s) return 1;
    int32_t ids[4];
    int rc = qkv_shard_read(s, 0, 4, ids) != QKV_OK;
    qkv_shard_close(s);
    return rc;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static cJSON *train_cfg; /* resolved by main, outside the injection */
static int op_train(void) {
    char run[600];
    snprintf(run, sizeof run, "%s/run", tmp);
    nftw(run, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    qkv_run *r = qkv_run_new(run, train_cfg, false);
    qkv_train_outcome out;
    int rc = !r || qkv_run_train(r, NULL, &out) != QKV_OK;
    qkv_run_free(r);
    return rc;
}

static const struct {
    const char *name;
    int (*fn)(void);
} ops[] = {
    {"safetensors", op_safetensors}, {"hf", op_hf},         {"wordpiece", op_wordpiece}, {"bpe", op_bpe},
    {"glove", op_glove},             {"data", op_data},     {"config", op_config},       {"checkpoint", op_checkpoint},
    {"shard", op_shard},             {"train", op_train},
};

int main(int argc, char **argv) {
    const char *fx = getenv("QKV_FIXTURES");
    if (!fx) {
        fprintf(stderr, "QKV_FIXTURES not set\n");
        return 77;
    }
    snprintf(fixtures, sizeof fixtures, "%s", fx);
    snprintf(tmp, sizeof tmp, "/tmp/qkv_alloc_fail.%ld", (long)getpid());
    if (mkdir(tmp, 0700)) return 1;
    cJSON_Hooks hooks = {__wrap_malloc, free};
    cJSON_InitHooks(&hooks);
    ck_params = qkv_params_new();
    const int64_t w[2] = {4, 3}, b[1] = {3};
    qkv_params_add(ck_params, "enc", "weight", 2, w);
    qkv_params_add(ck_params, "enc", "bias", 1, b);
    qkv_optim_config oc = qkv_optim_defaults(QKV_ADAM);
    ck_opt = qkv_optim_new(ck_params, &oc);
    char v[600], m[600];
    snprintf(v, sizeof v, "%s/bpe-vocab.json", tmp);
    snprintf(m, sizeof m, "%s/bpe-merges.txt", tmp);
    const char *texts[] = {"abc ab abc abd the cat the mat"}, *specials[] = {"<|endoftext|>", NULL};
    const size_t lens[] = {strlen(texts[0])};
    if (qkv_bpe_train(texts, lens, 1, 270, 1, specials, v, m) != QKV_OK) {
        fprintf(stderr, "bpe_train: %s\n", qkv_last_error());
        return 1;
    }
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"model\": {\"type\": \"embmean\", \"dim\": 8}, \"data\": {\"train\": \"%s\"}, "
             "\"train\": {\"steps\": 2, \"batch_size\": 2, \"checkpoint_every\": 2}, \"eval\": {\"every\": 0}}",
             scratch("train.tsv", "pos\tgood film\nneg\tbad plot\npos\tgreat\nneg\tawful\n"));
    cJSON *user = qkv_config_parse("cfg", cfg);
    const qkv_model_type *type;
    train_cfg = user ? qkv_config_resolve(user, &type) : NULL;
    cJSON_Delete(user);
    if (!train_cfg) {
        fprintf(stderr, "train config: %s\n", qkv_last_error());
        return 1;
    }
    int bad = 0;
    bool leaked = false, check_leaks = __lsan_do_recoverable_leak_check && getenv("QKV_ALLOC_FAIL_LEAKS");
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        bool want = argc < 2;
        for (int i = 1; i < argc; i++) want |= !strcmp(argv[i], ops[k].name);
        if (!want) continue;
        arm(-1);
        if (ops[k].fn() != 0) {
            fprintf(stderr, "%s: fails without injection: %s\n", ops[k].name, qkv_last_error());
            bad = 1;
            continue;
        }
        long total = count, silent = 0; /* failures without a message, or with a leak */
        for (long n = 0; n < total; n++) {
            qkv_error_clear();
            arm(n);
            int rc = ops[k].fn();
            long made = count;
            arm(-1);
            /* An allocation whose failure the operation survives (a cache, a best-effort path) may succeed. */
            /* Leaked memory stays reported: only the first leak is news. */
            if (check_leaks && !leaked && __lsan_do_recoverable_leak_check()) {
                fprintf(stderr, "%s: allocation %ld of %ld failed: leak (the first; later ones not checked)\n",
                        ops[k].name, n, made);
                leaked = true;
                silent++;
            }
            if (rc && !*qkv_last_error()) {
                fprintf(stderr, "%s: allocation %ld of %ld failed without an error message\n", ops[k].name, n, made);
                silent++;
            }
        }
        printf("%-12s %6ld allocations, each failed once: %s\n", ops[k].name, total, silent ? "FAIL" : "ok");
        fflush(stdout);
        bad |= silent != 0;
    }
    arm(-1);
    cJSON_Delete(train_cfg);
    qkv_optim_free(ck_opt);
    qkv_params_free(ck_params);
    nftw(tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return bad;
}
