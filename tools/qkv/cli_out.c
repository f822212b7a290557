/* Where commands write (-o FILE, --out DIR, --run DIR, --svg DIR): missing parent directories are created, as
 * `mkdir -p` does, so an example's `runs/cls` works on a fresh checkout. */
#include <stdio.h>
#include <string.h>

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
