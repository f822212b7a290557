/* Files and directories (see qkv/fsutil.h). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "qkv/fsutil.h"

qkv_status qkv_fs_mkdirs(const char *dir) {
    if (!dir || !*dir) return qkv_error_set(QKV_ERR_INVALID, "empty directory name");
    char *p = strdup(dir);
    if (!p) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    qkv_status st = QKV_OK;
    /* Each prefix that ends before a '/', then the whole path; "a//b" and a trailing '/' are harmless. */
    for (char *s = p + 1;; s++) {
        bool end = *s == '\0';
        if (*s != '/' && !end) continue;
        char keep = *s;
        *s = '\0';
        struct stat sb;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            st = qkv_error_set(QKV_ERR_IO, "%s: cannot create the directory: %s", p, strerror(errno));
        } else if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            st = qkv_error_set(QKV_ERR_IO, "%s: exists and is not a directory", p);
        }
        *s = keep;
        if (st != QKV_OK || end) break;
    }
    free(p);
    return st;
}

qkv_status qkv_fs_mkdirs_parent(const char *path) {
    if (!path) return qkv_error_set(QKV_ERR_INVALID, "empty file name");
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return QKV_OK;
    size_t n = (size_t)(slash - path);
    char *dir = malloc(n + 1);
    if (!dir) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    memcpy(dir, path, n);
    dir[n] = '\0';
    qkv_status st = qkv_fs_mkdirs(dir);
    free(dir);
    return st;
}

qkv_status qkv_fs_write_atomic(const char *path, const void *data, size_t n) {
    size_t plen = strlen(path) + 32;
    char *tmp = malloc(plen);
    if (!tmp) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    qkv_status st = QKV_OK;
    if (!f) {
        st = qkv_error_set(QKV_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    } else {
        bool bad = n && fwrite(data, 1, n, f) != n;
        bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, path) != 0) {
            st = qkv_error_set(QKV_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
            unlink(tmp);
        }
    }
    free(tmp);
    return st;
}

char *qkv_fs_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    else qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    return p;
}

/* The PID of a writer's temporary "NAME.tmp.PID", or 0 if name is not one. */
static long tmp_pid(const char *name) {
    const char *t = strstr(name, ".tmp.");
    if (!t) return 0;
    for (const char *next; (next = strstr(t + 1, ".tmp."));) t = next;
    const char *d = t + 5;
    if (!*d || t == name) return 0;
    long pid = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || pid > 1L << 30) return 0;
        pid = pid * 10 + (*d - '0');
    }
    return pid;
}

int qkv_fs_remove_stale_tmp(const char *dir, const char *name) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = tmp_pid(e->d_name);
        size_t k = name ? strlen(name) : 0;
        if (name && (strncmp(e->d_name, name, k) || strncmp(e->d_name + k, ".tmp.", 5))) continue;
        /* Only a process that certainly does not exist: EPERM means it exists under another user. */
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char *p = qkv_fs_join(dir, e->d_name);
        if (!p) break;
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && unlink(p) == 0) removed++;
        free(p);
    }
    closedir(d);
    return removed;
}

qkv_status qkv_fs_check_not_dir(const char *path, const char *what) {
    struct stat sb;
    if (path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return qkv_error_set(QKV_ERR_IO, "%s: is a directory, not a %s", path, what ? what : "file");
    return QKV_OK;
}

static const char *mib(uint64_t bytes, char *buf, size_t n) {
    if (bytes >= 1u << 20) snprintf(buf, n, "%llu MiB", (unsigned long long)(bytes >> 20));
    else snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
    return buf;
}

char *qkv_fs_read_capped(const char *path, uint64_t max_bytes, uint64_t max_line, const char *what, size_t *len) {
    if (qkv_fs_check_not_dir(path, what) != QKV_OK) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (!what) what = "file";
    char lim[32];
    struct stat sb = {0};
    /* A regular file's size is known up front: refuse it without reading, and allocate once. */
    size_t cap = 1 << 16;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode)) {
        if ((uint64_t)sb.st_size > max_bytes) {
            fclose(f);
            qkv_error_set(QKV_ERR_RANGE, "%s: %lld bytes, more than a %s may have (%s)", path, (long long)sb.st_size,
                          what, mib(max_bytes, lim, sizeof lim));
            return NULL;
        }
        cap = (size_t)sb.st_size + 1;
    }
    char *buf = NULL;
    size_t n = 0;
    uint64_t line = 0; /* bytes since the last newline */
    qkv_status st = QKV_OK;
    for (;;) {
        if (!buf || n + 1 >= cap) {
            size_t ncap = buf ? cap * 2 : cap;
            if (buf && max_bytes < SIZE_MAX / 4 && ncap > max_bytes + 2) ncap = (size_t)max_bytes + 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                st = qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory reading the %s", path, what);
                break;
            }
            buf = nb, cap = ncap;
        }
        size_t want = cap - 1 - n, got = fread(buf + n, 1, want, f);
        if (max_line && !S_ISREG(sb.st_mode)) {
            for (size_t i = n; i < n + got; i++) line = buf[i] == '\n' ? 0 : line + 1;
            if (line > max_line) {
                st = qkv_error_set(QKV_ERR_RANGE, "%s: a line longer than a %s may have (%s; is this the right file?)",
                                   path, what, mib(max_line, lim, sizeof lim));
                break;
            }
        }
        n += got;
        if (n > max_bytes) {
            st = qkv_error_set(QKV_ERR_RANGE, "%s: more than a %s may have (%s; is this the right file?)", path,
                               what, mib(max_bytes, lim, sizeof lim));
            break;
        }
        if (got < want) break;
        /* A regular file read to its known size: look for more before growing the buffer to twice the file. */
        int c = S_ISREG(sb.st_mode) ? fgetc(f) : 0;
        if (c == EOF) break;
        if (S_ISREG(sb.st_mode)) ungetc(c, f);
    }
    if (st == QKV_OK && ferror(f)) st = qkv_error_set(QKV_ERR_IO, "%s: read error: %s", path, strerror(errno));
    fclose(f);
    if (st != QKV_OK) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

/* ---- taking back what a failed command created ---------------------------------------------------------------- */

struct qkv_fs_undo {
    char *dir;
    char *created;  /* the top-most directory of dir's path that did not exist at begin, or NULL */
    bool existed;   /* dir existed at begin: names are its entries then */
    char **names;
    size_t n_names;
};

static void free_names(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* The entries of dir without . and .. (*n of them; NULL when there are none or dir cannot be read). Read whole
 * before anyone removes an entry, since readdir's view of a directory that changes under it is unspecified. */
static char **list_names(const char *dir, size_t *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = NULL;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (*n == cap) {
            char **grown = realloc(names, sizeof *names * (cap = cap ? 2 * cap : 16));
            if (!grown) break;
            names = grown;
        }
        if (!(names[*n] = strdup(e->d_name))) break;
        (*n)++;
    }
    closedir(d);
    return names;
}

/* path and, for a directory (not a link to one), everything in it. */
static void remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    size_t n;
    char **names = list_names(path, &n);
    for (size_t i = 0; i < n; i++) {
        char *p = qkv_fs_join(path, names[i]);
        if (p) remove_tree(p);
        free(p);
    }
    free_names(names, n);
    rmdir(path);
}

qkv_fs_undo *qkv_fs_undo_begin(const char *dir) {
    qkv_fs_undo *u = calloc(1, sizeof *u);
    if (!u || !dir || !(u->dir = strdup(dir))) {
        free(u);
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    struct stat sb;
    if (!*dir) return u; /* nothing qkv_fs_mkdirs would create */
    if (stat(dir, &sb) == 0) {
        u->existed = true;
        u->names = list_names(dir, &u->n_names);
        return u;
    }
    /* The first prefix qkv_fs_mkdirs would create. Only a prefix that certainly does not exist counts: one that
     * cannot be looked at (EACCES) may well be someone's. */
    char *p = strdup(dir);
    for (char *s = p ? p + 1 : NULL; s; s++) {
        bool end = *s == '\0';
        if (*s != '/' && !end) continue;
        char keep = *s;
        *s = '\0';
        if (stat(p, &sb) != 0) {
            if (errno == ENOENT) u->created = p, p = NULL;
            break;
        }
        *s = keep;
        if (end) break;
    }
    free(p);
    return u;
}

void qkv_fs_undo_rollback(qkv_fs_undo *u) {
    if (!u) return;
    if (u->created) {
        remove_tree(u->created);
    } else if (u->existed) {
        size_t n;
        char **now = list_names(u->dir, &n);
        for (size_t i = 0; i < n; i++) {
            bool old = false;
            for (size_t k = 0; k < u->n_names && !old; k++) old = !strcmp(now[i], u->names[k]);
            long pid = tmp_pid(now[i]);
            bool live_writer = pid > 0 && pid != (long)getpid() && (kill((pid_t)pid, 0) == 0 || errno != ESRCH);
            char *p = old || live_writer ? NULL : qkv_fs_join(u->dir, now[i]);
            if (p) remove_tree(p);
            free(p);
        }
        free_names(now, n);
    }
    qkv_fs_undo_free(u);
}

void qkv_fs_undo_free(qkv_fs_undo *u) {
    if (!u) return;
    free_names(u->names, u->n_names);
    free(u->dir);
    free(u->created);
    free(u);
}

qkv_status qkv_fs_copy(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) return qkv_error_set(QKV_ERR_IO, "%s: cannot open", from);
    FILE *out = fopen(to, "wb");
    if (!out) {
        fclose(in);
        return qkv_error_set(QKV_ERR_IO, "%s: cannot create", to);
    }
    char buf[65536];
    size_t n;
    bool ok = true;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) ok &= fwrite(buf, 1, n, out) == n;
    fclose(in);
    ok &= fclose(out) == 0;
    return ok ? QKV_OK : qkv_error_set(QKV_ERR_IO, "%s: write error", to);
}
