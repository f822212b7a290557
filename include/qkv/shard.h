/* Token shards: a corpus already tokenised, as a flat binary file the trainer streams (memory-mapped), so corpora
 * larger than memory train without re-tokenising.
 *
 * Layout (little-endian): a 64-byte header
 *     0  magic "QKVTOKS\0"      8 bytes
 *     8  version (1)            u32
 *    12  id width in bytes      u32 (2 or 4)
 *    16  vocabulary size        u64 (every id is below it)
 *    24  token count            u64
 *    32  reserved (zero)        32 bytes
 * then token count ids of the given width. Writing is atomic (temp file, fsync, rename). */
#ifndef QKV_SHARD_H
#define QKV_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_SHARD_HEADER 64

typedef struct qkv_shard_writer qkv_shard_writer;
/* Ids are stored as uint16 when vocab_size <= 65536, else uint32. */
qkv_shard_writer *qkv_shard_writer_open(const char *path, uint64_t vocab_size);
/* Appends n ids; an id outside [0, vocab_size) is an error naming it. */
qkv_status qkv_shard_writer_add(qkv_shard_writer *w, const int32_t *ids, size_t n);
/* Finishes the file (header, fsync, rename) and frees w; on error the target is left untouched. */
qkv_status qkv_shard_writer_close(qkv_shard_writer *w);
/* Abandons the file (removes the temporary) and frees w. */
void qkv_shard_writer_abort(qkv_shard_writer *w);

typedef struct qkv_shard qkv_shard;
/* Maps and validates (magic, version, width, size = header + count * width, ids checked lazily on read). */
qkv_shard *qkv_shard_open(const char *path);
void qkv_shard_close(qkv_shard *s);
uint64_t qkv_shard_tokens(const qkv_shard *s);
uint64_t qkv_shard_vocab(const qkv_shard *s);
/* Copies ids [start, start + n) into out as int32; an id >= vocab size (a corrupted file) is an error. */
qkv_status qkv_shard_read(const qkv_shard *s, uint64_t start, size_t n, int32_t *out);

#ifdef __cplusplus
}
#endif
#endif
