#ifndef QKV_CORE_ARENA_H
#define QKV_CORE_ARENA_H

#include <stddef.h>

#include "core/visibility.h"

QKV_INTERNAL_BEGIN

typedef struct qkv_arena_chunk {
    unsigned char *base;
    size_t size, used;
    struct qkv_arena_chunk *next;
} qkv_arena_chunk;

typedef struct qkv_arena {
    qkv_arena_chunk *head, *cur;
    size_t in_use, high_water, system_allocs;
} qkv_arena;

/* NULL (error set) when the system refuses memory. Memory is 64-byte aligned and uninitialised. */
void *qkv__arena_alloc(qkv_arena *a, size_t bytes);
void qkv__arena_reset(qkv_arena *a);
void qkv__arena_free(qkv_arena *a);
size_t qkv__arena_capacity(const qkv_arena *a);
/* Position of the arena (its current chunk and fill) and a return to it: what was allocated since is reused. */
typedef struct {
    qkv_arena_chunk *cur;
    size_t used, in_use;
} qkv_arena_mark;
qkv_arena_mark qkv__arena_mark(const qkv_arena *a);
void qkv__arena_rewind(qkv_arena *a, const qkv_arena_mark *m);
/* A chunk cache on the calling thread, for a stretch of work that makes and frees many contexts of alike sizes (the
 * decoding state of each batch of qkv_decode_batch): while one is open, freed chunks are kept and the next context
 * on the thread takes them, so it writes to pages already mapped instead of faulting in fresh ones. Opens nest;
 * the outermost close frees what is kept. */
void qkv__arena_cache_open(void);
void qkv__arena_cache_close(void);

QKV_INTERNAL_END
#endif
