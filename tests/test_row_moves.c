/* In-place row moves of the decoding states' reorders (src/models/row_moves.h): against a plain gather into a new
 * buffer, over random reorders (rows repeated, dropped, fanned out, swapped, cycles), each changed row written once
 * and unchanged rows never touched. */
#include <stdlib.h>
#include <string.h>

#include "models/row_moves.h"
#include "test.h"

enum { CAP = 24 };

typedef struct {
    int rows[CAP + 1]; /* [CAP] is the row set aside */
    int writes[CAP];
} table;

static void copy_row(void *user, int dst, int src) {
    table *t = user;
    t->rows[dst < 0 ? CAP : dst] = t->rows[src < 0 ? CAP : src];
    if (dst >= 0) t->writes[dst]++;
}

TEST(moves_match_a_gather) {
    qkv_rng rng;
    qkv_rng_init(&rng, 7);
    int bad = 0, extra = 0;
    for (int trial = 0; trial < 2000; trial++) {
        int rows = 1 + (int)qkv_rng_below(&rng, CAP), n = 1 + (int)qkv_rng_below(&rng, CAP);
        int32_t from[CAP], todo[CAP], readers[CAP], stack[CAP];
        int kind = trial % 3;
        for (int i = 0; i < n; i++) {
            if (kind == 0) from[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)rows); /* anything */
            else from[i] = i < rows ? i : (int32_t)qkv_rng_below(&rng, (uint32_t)rows);
        }
        if (kind == 1) /* a permutation of the first min(n, rows) rows: cycles */
            for (int i = (n < rows ? n : rows) - 1; i > 0; i--) {
                int j = (int)qkv_rng_below(&rng, (uint32_t)(i + 1));
                int32_t x = from[i];
                from[i] = from[j];
                from[j] = x;
            }
        table t;
        int want[CAP];
        for (int r = 0; r < CAP; r++) t.rows[r] = r < rows ? 100 + r : -1;
        for (int i = 0; i < n; i++) want[i] = t.rows[from[i]];
        memset(t.writes, 0, sizeof t.writes);
        memset(todo, 0, sizeof todo);
        for (int i = 0; i < n; i++) todo[i] = i >= rows || from[i] != i;
        row_moves(from, n, todo, readers, stack, CAP, copy_row, &t);
        for (int i = 0; i < n; i++) {
            bad += t.rows[i] != want[i];
            extra += t.writes[i] != (i >= rows || from[i] != i);
        }
        for (int i = 0; i < CAP; i++) bad += todo[i] != 0;
    }
    CHECKF(bad == 0, "%d rows differ from the gather", bad);
    CHECKF(extra == 0, "%d rows written other than once when changed, never otherwise", extra);
}

int main(void) {
    RUN(moves_match_a_gather);
    return test_finish();
}
