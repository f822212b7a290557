/* Files and directories (qkv/fsutil.h): mkdir -p, atomic writes, stale temporaries of dead writers removed (a live
 * writer's kept), capped reads (a directory, a size cap, an endless device), and the declared-shape check and NaN
 * search of parameter collections that loaders build on. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qkv/fsutil.h"
#include "qkv/params.h"
#include "test.h"

static char root[256];

static const char *in_root(const char *rel) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
    return buf[k];
}

static bool is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static void touch(const char *p) {
    FILE *f = fopen(p, "w");
    if (f) fclose(f);
}

/* A PID no process has: a child that has exited and been waited for. */
static pid_t dead_pid(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return p;
}

TEST(mkdirs_like_mkdir_p) {
    CHECK_OK(qkv_fs_mkdirs(in_root("a/b/c")));
    CHECK(is_dir(in_root("a/b/c")));
    CHECK_OK(qkv_fs_mkdirs(in_root("a/b/c/"))); /* existing, trailing slash */
    CHECK_OK(qkv_fs_mkdirs_parent(in_root("p/q/file.txt")));
    CHECK(is_dir(in_root("p/q")) && !exists(in_root("p/q/file.txt")));
    CHECK_OK(qkv_fs_mkdirs_parent("bare-name.txt")); /* nothing to create */
    touch(in_root("plain"));
    CHECK(qkv_fs_mkdirs(in_root("plain/sub")) == QKV_ERR_IO);
    CHECKF(strstr(qkv_last_error(), "plain: exists and is not a directory"), "%s", qkv_last_error());
}

TEST(atomic_write_leaves_no_temporary) {
    const char *p = in_root("atomic.txt");
    CHECK_OK(qkv_fs_write_atomic(p, "one\n", 4));
    CHECK_OK(qkv_fs_write_atomic(p, "two!\n", 5));
    size_t n = 0;
    char *text = qkv_fs_read_capped(p, 100, 0, "test file", &n);
    CHECK(text && n == 5 && !strcmp(text, "two!\n"));
    free(text);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    CHECK(!exists(tmp));
    CHECK(qkv_fs_write_atomic(in_root("no/such/dir/x"), "x", 1) == QKV_ERR_IO);
}

TEST(stale_temporaries_of_dead_writers_only) {
    CHECK_OK(qkv_fs_mkdirs(in_root("run")));
    char dead[600], live[600], mine[600], other[600], odd[600];
    long d = (long)dead_pid();
    snprintf(dead, sizeof dead, "%s/ckpt-8.safetensors.tmp.%ld", in_root("run"), d);
    snprintf(live, sizeof live, "%s/ckpt-9.safetensors.tmp.%ld", in_root("run"), (long)getppid());
    snprintf(mine, sizeof mine, "%s/config.json.tmp.%ld", in_root("run"), (long)getpid());
    snprintf(other, sizeof other, "%s/notes.tmp.%ld", in_root("run"), d);
    snprintf(odd, sizeof odd, "%s/x.tmp.12ab", in_root("run"));
    touch(dead), touch(live), touch(mine), touch(other), touch(odd);
    /* With a name, only that file's temporaries. */
    CHECK(qkv_fs_remove_stale_tmp(in_root("run"), "ckpt-8.safetensors") == 1);
    CHECK(!exists(dead) && exists(other));
    touch(dead);
    CHECK(qkv_fs_remove_stale_tmp(in_root("run"), NULL) == 2);
    CHECK(!exists(dead) && !exists(other));
    CHECK(exists(live) && exists(mine) && exists(odd)); /* live writers (the parent, us) and non-PID tails stay */
    CHECK(qkv_fs_remove_stale_tmp(in_root("missing"), NULL) == 0);
}

TEST(capped_reads) {
    size_t n;
    CHECK(qkv_fs_read_capped(root, 100, 0, "vectors file", &n) == NULL && qkv_last_status() == QKV_ERR_IO);
    CHECKF(strstr(qkv_last_error(), "is a directory, not a vectors file"), "%s", qkv_last_error());
    CHECK_OK(qkv_fs_check_not_dir(in_root("atomic.txt"), "file"));
    CHECK_OK(qkv_fs_check_not_dir(in_root("does-not-exist"), "file"));
    CHECK_OK(qkv_fs_write_atomic(in_root("big"), "0123456789", 10));
    CHECK(qkv_fs_read_capped(in_root("big"), 9, 0, "test file", &n) == NULL && qkv_last_status() == QKV_ERR_RANGE);
    char *ok = qkv_fs_read_capped(in_root("big"), 10, 4, "test file", &n); /* regular files: no line cap */
    CHECK(ok && n == 10);
    free(ok);
    if (exists("/dev/zero")) {
        CHECK(qkv_fs_read_capped("/dev/zero", (uint64_t)1 << 40, 1 << 20, "vectors file", &n) == NULL);
        CHECKF(qkv_last_status() == QKV_ERR_RANGE && strstr(qkv_last_error(), "a line longer than a vectors file"),
               "%s", qkv_last_error());
        CHECK(qkv_fs_read_capped("/dev/zero", 1 << 20, 0, "tokenizer file", &n) == NULL);
        CHECKF(strstr(qkv_last_error(), "more than a tokenizer file may have (1 MiB"), "%s", qkv_last_error());
    }
}

/* What a refused command made is taken back: the directories of the path it created with everything in them, or in
 * a directory that was there the new entries alone (files, directories and their insides), a live writer's
 * temporary and everything that was there before kept; an undo freed without rollback keeps all. */
TEST(undo_takes_back_what_was_created) {
    CHECK_OK(qkv_fs_mkdirs(in_root("u")));
    qkv_fs_undo *u = qkv_fs_undo_begin(in_root("u/new/deeper/run"));
    CHECK_NN(u);
    CHECK_OK(qkv_fs_mkdirs(in_root("u/new/deeper/run/sub")));
    touch(in_root("u/new/deeper/run/sub/file"));
    touch(in_root("u/new/deeper/run/vocab.txt"));
    qkv_error_set(QKV_ERR_IO, "the command's own message");
    qkv_fs_undo_rollback(u);
    CHECK(!exists(in_root("u/new")) && is_dir(in_root("u")));
    CHECKF(!strcmp(qkv_last_error(), "the command's own message"), "%s", qkv_last_error());

    CHECK_OK(qkv_fs_mkdirs(in_root("u/have/old_dir")));
    touch(in_root("u/have/old_file"));
    u = qkv_fs_undo_begin(in_root("u/have"));
    CHECK_NN(u);
    touch(in_root("u/have/new_file"));
    touch(in_root("u/have/old_dir/new_inside")); /* inside an entry that was there: that entry stays whole */
    CHECK_OK(qkv_fs_mkdirs(in_root("u/have/new_dir/x")));
    char live[96], dead[96]; /* a running writer's temporary (our parent's PID) and a dead one's */
    snprintf(live, sizeof live, "u/have/ckpt-9.safetensors.tmp.%d", (int)getppid());
    snprintf(dead, sizeof dead, "u/have/ckpt-8.safetensors.tmp.%d", (int)dead_pid());
    touch(in_root(live));
    touch(in_root(dead));
    qkv_fs_undo_rollback(u);
    CHECK(!exists(in_root("u/have/new_file")) && !exists(in_root("u/have/new_dir")) && !exists(in_root(dead)));
    CHECK(exists(in_root(live)));
    CHECK(exists(in_root("u/have/old_file")) && exists(in_root("u/have/old_dir/new_inside")));

    u = qkv_fs_undo_begin(in_root("u/kept"));
    CHECK_OK(qkv_fs_mkdirs(in_root("u/kept")));
    qkv_fs_undo_free(u);
    CHECK(is_dir(in_root("u/kept")));
    qkv_fs_undo_rollback(NULL);
}

/* A copy holds the same bytes; a missing source or an uncreatable target is named. */
TEST(copy_names_what_fails) {
    CHECK_OK(qkv_fs_write_atomic(in_root("src.txt"), "abc\n", 4));
    CHECK_OK(qkv_fs_copy(in_root("src.txt"), in_root("dst.txt")));
    char *t = test_read_file(in_root("dst.txt"));
    CHECK(t && !strcmp(t, "abc\n"));
    free(t);
    CHECK(qkv_fs_copy(in_root("nosuch"), in_root("x")) == QKV_ERR_IO);
    CHECK(strstr(qkv_last_error(), "nosuch: cannot open"));
    CHECK(qkv_fs_copy(in_root("src.txt"), in_root("no/dir/x")) == QKV_ERR_IO);
    CHECK(strstr(qkv_last_error(), "cannot create"));
}

static int calls;
static qkv_status refuse_wide(void *user, const char *name, int ndim, const int64_t *shape) {
    (void)user;
    calls++;
    if (ndim == 2 && shape[1] > 1000) return qkv_error_set(QKV_ERR_FORMAT, "'%s' too wide", name);
    return QKV_OK;
}

TEST(params_check_before_allocation) {
    qkv_params *p = qkv_params_new();
    qkv_params_set_check(p, refuse_wide, NULL);
    CHECK_NN(qkv_params_add(p, "emb", "weight", QKV_DIMS(4, 8)));
    /* 1e6 x 1e6 floats would be 4 TB: refused by the check, never allocated. */
    CHECK(qkv_params_add(p, "big", "weight", QKV_DIMS(1000000, 1000000)) == NULL);
    CHECKF(strstr(qkv_last_error(), "'big.weight' too wide"), "%s", qkv_last_error());
    CHECK(calls == 2 && qkv_params_count(p) == 1);
    qkv_params_set_check(p, NULL, NULL);
    CHECK_NN(qkv_params_add(p, "w", "bias", QKV_DIMS(3)));
    CHECK(qkv_params_find_nan(p, NULL) == NULL);
    qkv_tensor *b = qkv_params_find(p, "w.bias");
    ((float *)b->data)[2] = NAN;
    int64_t at = -1;
    CHECK(qkv_params_find_nan(p, &at) == b && at == 2);
    qkv_params_free(p);
}

int main(void) {
    snprintf(root, sizeof root, "fsutil_%d", (int)getpid());
    RUN(mkdirs_like_mkdir_p);
    RUN(atomic_write_leaves_no_temporary);
    RUN(stale_temporaries_of_dead_writers_only);
    RUN(capped_reads);
    RUN(undo_takes_back_what_was_created);
    RUN(copy_names_what_fails);
    RUN(params_check_before_allocation);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return test_finish();
}
