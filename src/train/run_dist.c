/* Starting a data-parallel run (docs/distributed.md): the checks every rank passes before anything is written, and
 * the weights rank 0 hands to the others.
 *
 * A job whose ranks run different builds or configs would train something nobody asked for, silently: the ranks
 * compare a hash of their executable and of their resolved config with rank 0's. A run directory that some rank
 * cannot see (no shared file system) would fail much later, at the first resume: rank 0 leaves a probe file with
 * a random name and content there, and every rank must read it back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "qkv/dist.h"
#include "qkv/fsutil.h"
#include "qkv/qkv.h"
#include "qkv/rng.h"
#include "train_internal.h"

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The running executable's bytes: two builds of different sources (or flags) differ here. */
static uint64_t binary_hash(void) {
    uint64_t h = 0xcbf29ce484222325ull;
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f) return fnv1a(h, QKV_VERSION, sizeof QKV_VERSION);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) h = fnv1a(h, buf, n);
    fclose(f);
    return h;
}

/* The highest rank for which bad is true (0 when none), from every rank's flag. */
static qkv_status first_bad(bool bad, int64_t *who) {
    int64_t v = bad ? qkv_dist_rank() + 1 : 0;
    qkv_status st = qkv_dist_allreduce_max_i64(&v, 1);
    *who = v - 1;
    return st;
}

qkv_status qkv__run_dist_check(const char *dir, const char *cfg_text) {
    if (qkv_dist_size() == 1) return QKV_OK;
    int rank = qkv_dist_rank();
    uint64_t mine[2] = {binary_hash(), fnv1a(0xcbf29ce484222325ull, cfg_text, strlen(cfg_text))}, root[2];
    memcpy(root, mine, sizeof root);
    qkv_status st = qkv_dist_bcast(root, sizeof root, 0);
    int64_t bin_bad, cfg_bad;
    if (st == QKV_OK) st = first_bad(mine[0] != root[0], &bin_bad);
    if (st == QKV_OK) st = first_bad(mine[1] != root[1], &cfg_bad);
    if (st) return st;
    if (bin_bad >= 0)
        return qkv_error_set(QKV_ERR_INVALID, "rank %lld runs a different qkv binary than rank 0 (executable hash "
                             "differs): every rank of a job must run the same build", (long long)bin_bad);
    if (cfg_bad >= 0)
        return qkv_error_set(QKV_ERR_INVALID, "rank %lld has a different config than rank 0 (the resolved config, "
                             "--set included, differs): every rank must train the same config", (long long)cfg_bad);
    size_t bucket;
    bool zero;
    char env_error[512] = "";
    bool env_bad = qkv__grad_sync_bucket_bytes(&bucket) != QKV_OK || qkv__zero_wanted(&zero) != QKV_OK;
    if (env_bad) snprintf(env_error, sizeof env_error, "%s", qkv_last_error());
    int64_t env_who;
    if ((st = first_bad(env_bad, &env_who))) return st;
    if (env_who >= 0 && env_bad) return qkv_error_set(QKV_ERR_INVALID, "%s", env_error);
    if (env_who >= 0)
        return qkv_error_set(QKV_ERR_INVALID, "rank %lld has a bad QKV_DIST_BUCKET_MB or QKV_DIST_ZERO",
                             (long long)env_who);

    /* Rank 0 creates the directory if needed and drops the probe; the others read it back. */
    struct {
        int32_t status, existed;
        char name[64], content[64];
    } probe = {0};
    char path[4200];
    if (rank == 0) {
        struct stat sb;
        probe.existed = stat(dir, &sb) == 0;
        qkv_rng rng;
        qkv_rng_init(&rng, (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
        snprintf(probe.name, sizeof probe.name, ".qkv-probe-%08x%08x", qkv_rng_u32(&rng), qkv_rng_u32(&rng));
        snprintf(probe.content, sizeof probe.content, "%08x%08x\n", qkv_rng_u32(&rng), qkv_rng_u32(&rng));
        snprintf(path, sizeof path, "%s/%s", dir, probe.name);
        probe.status = qkv_fs_mkdirs(dir) == QKV_OK ? qkv_fs_write_atomic(path, probe.content, strlen(probe.content))
                                                     : qkv_last_status();
    }
    st = qkv_dist_bcast(&probe, sizeof probe, 0);
    if (st) return st;
    if (probe.status != QKV_OK)
        return qkv_error_set((qkv_status)probe.status, "%s: rank 0 cannot create the run directory", dir);
    bool seen = true;
    if (rank != 0) {
        snprintf(path, sizeof path, "%s/%s", dir, probe.name);
        FILE *f = fopen(path, "r");
        char got[64] = "";
        seen = f && fgets(got, sizeof got, f) && !strcmp(got, probe.content);
        if (f) fclose(f);
    }
    int64_t blind;
    st = first_bad(!seen, &blind);
    if (rank == 0) { /* the probe goes whatever the outcome; so does a directory this check created */
        unlink(path);
        if (!probe.existed && (st || blind >= 0)) rmdir(dir);
    }
    if (st) return st;
    if (blind >= 0)
        return qkv_error_set(QKV_ERR_INVALID, "%s: the run directory is not visible to rank %lld (rank 0's files do "
                             "not appear there): a data-parallel run needs a directory on a file system every rank "
                             "shares", dir, (long long)blind);
    return QKV_OK;
}

qkv_status qkv__run_dist_share(qkv_run *r) {
    if (qkv_dist_size() == 1) return QKV_OK;
    for (int i = 0; i < qkv_params_count(r->params); i++) {
        qkv_tensor *t = qkv_params_at(r->params, i);
        qkv_status st = qkv_dist_bcast(t->data, (size_t)qkv_numel(t) * qkv_dtype_size(t->dtype), 0);
        if (st) return st;
    }
    /* Dropout masks differ between ranks (each rank's slice is other examples); rank 0 keeps the stream a
     * checkpoint saves. */
    if (qkv_dist_rank() > 0) qkv_ctx_rng(r->ctx)->seed ^= 0x9e3779b97f4a7c15ull * (uint64_t)qkv_dist_rank();
    return QKV_OK;
}
