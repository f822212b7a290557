/* The context arena: bump allocation in 64-byte-aligned chunks. Reset rewinds it; if a step needed more than one
 * chunk, the chunks are merged into one big enough for the whole step, so steady-state steps allocate nothing. */
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "qkv/error.h"

#define ARENA_ALIGN 64
#define ARENA_MIN_CHUNK ((size_t)1 << 22)

/* Chunks set aside while a chunk cache is open on this thread (arena.h): the smallest that holds a request is
 * handed out again before the system is asked. */
static _Thread_local struct {
    int depth;
    qkv_arena_chunk *list;
} parked;

void qkv__arena_cache_open(void) { parked.depth++; }

void qkv__arena_cache_close(void) {
    if (parked.depth < 1 || --parked.depth > 0) return;
    while (parked.list) {
        qkv_arena_chunk *c = parked.list;
        parked.list = c->next;
        free(c->base);
        free(c);
    }
}

/* A parked chunk of at least `size` bytes (the smallest), taken off the list; NULL when none. */
static qkv_arena_chunk *unpark(size_t size) {
    qkv_arena_chunk **best = NULL;
    for (qkv_arena_chunk **p = &parked.list; *p; p = &(*p)->next)
        if ((*p)->size >= size && (!best || (*p)->size < (*best)->size)) best = p;
    if (!best) return NULL;
    qkv_arena_chunk *c = *best;
    *best = c->next;
    return c;
}

static qkv_arena_chunk *chunk_new(qkv_arena *a, size_t size) {
    qkv_arena_chunk *kept = parked.depth > 0 ? unpark(size) : NULL;
    if (kept) {
        kept->used = 0;
        kept->next = NULL;
        a->system_allocs++;
        return kept;
    }
    qkv_arena_chunk *c = malloc(sizeof *c);
    void *mem = NULL;
    if (!c || posix_memalign(&mem, ARENA_ALIGN, size) != 0) {
        free(c);
        return NULL;
    }
    c->base = mem;
    c->size = size;
    c->used = 0;
    c->next = NULL;
    a->system_allocs++;
    return c;
}

void *qkv__arena_alloc(qkv_arena *a, size_t bytes) {
    size_t need = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need == 0) need = ARENA_ALIGN;
    qkv_arena_chunk *c = a->cur;
    while (c && c->used + need > c->size) {
        c = c->next; /* chunks kept from before a reset */
        if (c) c->used = 0;
    }
    if (!c) {
        size_t size = need > ARENA_MIN_CHUNK ? need : ARENA_MIN_CHUNK;
        if (a->cur && a->cur->size * 2 > size && need <= a->cur->size * 2) size = a->cur->size * 2;
        c = chunk_new(a, size);
        if (!c) {
            qkv_error_set(QKV_ERR_NOMEM, "out of memory: the context arena needs %zu more bytes", need);
            return NULL;
        }
        if (a->cur) {
            c->next = a->cur->next;
            a->cur->next = c;
        } else {
            a->head = c;
        }
    }
    a->cur = c;
    void *p = c->base + c->used;
    c->used += need;
    a->in_use += need;
    if (a->in_use > a->high_water) a->high_water = a->in_use;
    return p;
}

void qkv__arena_reset(qkv_arena *a) {
    size_t total = 0, n = 0;
    for (qkv_arena_chunk *c = a->head; c; c = c->next) {
        total += c->size;
        n++;
    }
    if (n > 1 && a->high_water > a->head->size) {
        /* Merge into one chunk that holds the largest step seen. */
        qkv__arena_free(a);
        size_t size = a->high_water + a->high_water / 8;
        a->head = chunk_new(a, size);
        (void)total;
    }
    for (qkv_arena_chunk *c = a->head; c; c = c->next) c->used = 0;
    a->cur = a->head;
    a->in_use = 0;
}

void qkv__arena_free(qkv_arena *a) {
    qkv_arena_chunk *c = a->head;
    while (c) {
        qkv_arena_chunk *next = c->next;
        if (parked.depth > 0) { /* the next context on this thread takes it */
            c->next = parked.list;
            parked.list = c;
        } else {
            free(c->base);
            free(c);
        }
        c = next;
    }
    a->head = a->cur = NULL;
    a->in_use = 0;
}

size_t qkv__arena_capacity(const qkv_arena *a) {
    size_t total = 0;
    for (const qkv_arena_chunk *c = a->head; c; c = c->next) total += c->size;
    return total;
}

qkv_arena_mark qkv__arena_mark(const qkv_arena *a) {
    return (qkv_arena_mark){a->cur, a->cur ? a->cur->used : 0, a->in_use};
}

void qkv__arena_rewind(qkv_arena *a, const qkv_arena_mark *m) {
    /* Chunks after the marked one stay in the list; alloc moves on to them (resetting their fill) as before a
     * reset. With no chunk at the mark, the first chunk made since is the start. */
    a->cur = m->cur ? m->cur : a->head;
    if (a->cur) a->cur->used = m->cur ? m->used : 0;
    a->in_use = m->in_use;
}
