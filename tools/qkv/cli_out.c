/* Where commands write (-o FILE, --out DIR, --run DIR, --svg DIR): missing parent directories are created, as
 * `mkdir -p` does, so an example's `runs/cls` works on a fresh checkout. */
#include "cli.h"
#include "qkv/fsutil.h"

int cli_prepare_out(const char *cmd, const char *path, bool is_dir) {
    if (!path) return CLI_OK;
    qkv_status st = is_dir ? qkv_fs_mkdirs(path) : qkv_fs_mkdirs_parent(path);
    return st == QKV_OK ? CLI_OK : cli_error(cmd, cli_status_exit(st), "%s", qkv_last_error());
}
