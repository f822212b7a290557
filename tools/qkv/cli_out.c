/* Where commands write (-o FILE, --out DIR, --run DIR, --svg DIR): missing parent directories are created, as
 * `mkdir -p` does, so an example's `runs/cls` works on a fresh checkout. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "qkv/fsutil.h"

int cli_prepare_out(const char *cmd, const char *path, bool is_dir) {
    if (!path) return CLI_OK;
    qkv_status st = is_dir ? qkv_fs_mkdirs(path) : qkv_fs_mkdirs_parent(path);
    if (st != QKV_OK) return cli_error(cmd, cli_status_exit(st), "%s", qkv_last_error());
    if (!is_dir) { /* temporaries of this output that a killed earlier run left */
        const char *slash = strrchr(path, '/');
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        if (slash == path) snprintf(dir, sizeof dir, "/");
        qkv_fs_remove_stale_tmp(dir, slash ? slash + 1 : path);
    }
    return CLI_OK;
}

FILE *cli_out_open(const char *cmd, const char *path, char *tmp, size_t tmp_size) {
    if (!path) return stdout;
    if ((size_t)snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid()) >= tmp_size) {
        cli_error(cmd, CLI_INPUT, "%s: path too long", path);
        return NULL;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) cli_error(cmd, CLI_INPUT, "%s: cannot write: %s", path, strerror(errno));
    return f;
}

int cli_out_close(const char *cmd, FILE *f, const char *path, const char *tmp, int rc) {
    if (!path) return fflush(f) != 0 && rc == CLI_OK ? cli_error(cmd, CLI_RUNTIME, "cannot write standard output") : rc;
    bool bad = ferror(f) != 0;
    bad = fclose(f) != 0 || bad;
    if (rc == CLI_OK && bad) rc = cli_error(cmd, CLI_RUNTIME, "%s: write error", path);
    if (rc == CLI_OK && rename(tmp, path) != 0) rc = cli_error(cmd, CLI_RUNTIME, "%s: cannot write: %s", path, strerror(errno));
    if (rc != CLI_OK) unlink(tmp);
    return rc;
}

