/* One-query attention of decoding rows over per-source keys and values (src/ops/row_attention.h): against a plain
 * double-precision softmax attention for each row, with padded positions, rows sharing a source in any order, a
 * fully padded source, and the same bits for a row alone as in a batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/row_attention.h"
#include "test.h"

enum { N_SRC = 3, S = 7, D = 20, DV = 12, R = 5 };

TEST(rows_attend_to_their_own_source) {
    static float q[R * D], keys[N_SRC * S * D], vals[N_SRC * S * DV], pad[N_SRC * S], out[R * DV], w[R * S];
    test_fill_uniform(q, R * D, 1);
    test_fill_uniform(keys, N_SRC * S * D, 2);
    test_fill_uniform(vals, N_SRC * S * DV, 3);
    memset(pad, 0, sizeof pad);
    for (int j = 4; j < S; j++) pad[0 * S + j] = 1.0f; /* source 0: 4 tokens */
    for (int j = 0; j < S; j++) pad[2 * S + j] = 1.0f; /* source 2: nothing to attend to */
    const int32_t src_of[R] = {1, 0, 1, 2, 0};
    const float scale = 0.3f;
    qkv__row_attention(q, R, D, src_of, keys, vals, DV, pad, S, scale, out, w);
    double worst = 0;
    for (int r = 0; r < R; r++) {
        int s = src_of[r];
        double e[S], m = -INFINITY, sum = 0;
        for (int j = 0; j < S; j++) {
            e[j] = -INFINITY;
            if (pad[s * S + j] != 0.0f) continue;
            double d = 0;
            for (int k = 0; k < D; k++) d += (double)keys[(s * S + j) * D + k] * q[r * D + k];
            e[j] = scale * d;
            m = fmax(m, e[j]);
        }
        for (int j = 0; j < S; j++) sum += e[j] == -INFINITY ? 0 : exp(e[j] - m);
        for (int j = 0; j < S; j++) {
            double a = e[j] == -INFINITY || sum == 0 ? 0 : exp(e[j] - m) / sum;
            worst = fmax(worst, fabs(a - w[r * S + j]));
        }
        for (int k = 0; k < DV; k++) {
            double c = 0;
            for (int j = 0; j < S; j++)
                if (e[j] != -INFINITY) c += exp(e[j] - m) / sum * vals[(s * S + j) * DV + k];
            worst = fmax(worst, fabs(c - out[r * DV + k]));
        }
    }
    CHECKF(worst < 1e-5, "row attention off by %g", worst);
    for (int j = 0; j < S; j++) CHECK(w[3 * S + j] == 0.0f); /* the fully padded source */
    for (int k = 0; k < DV; k++) CHECK(out[3 * DV + k] == 0.0f);
    for (int j = 4; j < S; j++) CHECK(w[1 * S + j] == 0.0f && w[4 * S + j] == 0.0f);
    /* a row alone gives the bits it gets in the batch */
    float one[DV], wone[S];
    qkv__row_attention(q + 2 * D, 1, D, &src_of[2], keys, vals, DV, pad, S, scale, one, wone);
    CHECK(!memcmp(one, out + 2 * DV, sizeof one) && !memcmp(wone, w + 2 * S, sizeof wone));
}

int main(void) {
    RUN(rows_attend_to_their_own_source);
    return test_finish();
}
