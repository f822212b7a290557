/* Files and directories, the same way for every command: parents created as `mkdir -p` does, whole files written
 * atomically (temporary file + rename, so a reader or a crash never sees half a file), temporary files of writers
 * that died removed by the next writer, and reads capped so a wrong path (a directory, /dev/zero, a huge file) is a
 * clear error before gigabytes are read. */
#ifndef QKV_FSUTIL_H
#define QKV_FSUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates dir and every missing parent (mode 0777 before umask); an existing directory is fine. */
qkv_status qkv_fs_mkdirs(const char *dir);
/* Creates the missing parents of the file path (nothing to do for a bare file name). */
qkv_status qkv_fs_mkdirs_parent(const char *path);
/* Writes n bytes to path through path.tmp.PID and rename; on failure path is untouched and no temporary is left. */
qkv_status qkv_fs_write_atomic(const char *path, const void *data, size_t n);
/* Removes the files NAME.tmp.PID in dir whose PID is no live process (writers killed mid-write); a live writer's
 * file is never touched. With a name, only that file's temporaries (NAME.tmp.PID). Returns the number removed (0
 * if dir cannot be read). */
int qkv_fs_remove_stale_tmp(const char *dir, const char *name);
/* The path, if it names a directory: a QKV_ERR_IO error "PATH: is a directory" (what = "vectors file", ... for the
 * message); QKV_OK otherwise, including for paths that do not exist (opening them reports that). */
qkv_status qkv_fs_check_not_dir(const char *path, const char *what);
/* The whole file, NUL-terminated, *len bytes (without the NUL). Refuses (QKV_ERR_RANGE, before reading further) a
 * file longer than max_bytes, naming the file, the limit and `what`; a directory is a QKV_ERR_IO "is a directory".
 * Works for pipes and devices too: as their size is not known up front, they are also refused as soon as a line
 * grows past max_line bytes (0: no line limit), so /dev/zero fails at once. */
char *qkv_fs_read_capped(const char *path, uint64_t max_bytes, uint64_t max_line, const char *what, size_t *len);
/* "dir/name", malloc'd (the caller frees it); NULL (QKV_ERR_NOMEM set) when out of memory. */
char *qkv_fs_join(const char *dir, const char *name);
/* Copies the file from to the file to (created or replaced; "FROM: cannot open", "TO: cannot create", "TO: write
 * error"). */
qkv_status qkv_fs_copy(const char *from, const char *to);

/* A command that fills a directory and may fail before it has made anything worth keeping (qkv train refused for a
 * bad config value or an unreadable data file) takes back what it created: begin notes, before anything is written,
 * which directories of the path do not exist yet or, for an existing directory, which entries it holds; rollback
 * then removes the directories it made with everything in them, or the entries that were not there (a live writer's
 * NAME.tmp.PID excepted). Entries that were there stay as they are. NULL from begin only when out of memory. */
typedef struct qkv_fs_undo qkv_fs_undo;
qkv_fs_undo *qkv_fs_undo_begin(const char *dir);
/* Removes what appeared since begin and frees u; leaves qkv_last_error() as it was. NULL is a no-op. */
void qkv_fs_undo_rollback(qkv_fs_undo *u);
/* Keeps everything and frees u. */
void qkv_fs_undo_free(qkv_fs_undo *u);

#ifdef __cplusplus
}
#endif
#endif
