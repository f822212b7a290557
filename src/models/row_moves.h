/* Rows of a decoding state moved in place, each copied once (the seq2seq states' reorders, seq2seq_internal.h; the
 * GPT's KV cache, gpt.c). Not installed.
 *
 * A reorder makes row i hold what row from[i] held. Copying the changed rows straight over one another would read
 * rows already overwritten; a gather into a buffer of all of them copies each twice. Instead a row is overwritten
 * only after every changed row that reads it has been written (a hypothesis's children before the row it moves out
 * of), which settles everything but cycles of rows trading places; each cycle sets one row aside. */
#ifndef QKV_MODELS_ROW_MOVES_H
#define QKV_MODELS_ROW_MOVES_H

#include <stdint.h>
#include <string.h>

/* Copies one row to another; -1 names the row set aside (one at a time). */
typedef void (*row_copy_fn)(void *user, int dst, int src);

/* Makes row i hold old row from[i] for every i < n with todo[i] != 0 (from[i] != i there; every from[i] < span).
 * todo, readers and stack are scratch of span entries each (n <= span); todo comes in marking the rows to write and
 * leaves all zero. */
static inline void row_moves(const int32_t *from, int n, int32_t *todo, int32_t *readers, int32_t *stack, int span,
                             row_copy_fn copy, void *user) {
    memset(readers, 0, sizeof(int32_t) * (size_t)span);
    for (int i = 0; i < n; i++)
        if (todo[i]) readers[from[i]]++;
    int top = 0;
    for (int i = 0; i < n; i++)
        if (todo[i] && readers[i] == 0) stack[top++] = i;
    while (top > 0) {
        int i = stack[--top], f = from[i];
        copy(user, i, f);
        todo[i] = 0;
        if (--readers[f] == 0 && todo[f]) stack[top++] = f;
    }
    /* Left over: cycles (every row in one is read by the next). Row i0 goes aside, the others shift along it. */
    for (int i0 = 0; i0 < n; i0++) {
        if (!todo[i0]) continue;
        copy(user, -1, i0);
        int j = i0;
        for (; from[j] != i0; j = from[j]) {
            copy(user, j, from[j]);
            todo[j] = 0;
        }
        copy(user, j, -1);
        todo[j] = 0;
    }
}

#endif
