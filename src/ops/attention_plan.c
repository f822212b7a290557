/* The attention dropout mask of a plan, drawn the same way by the materialising path (attention.c) and the fused
 * kernels (attention_fused.c): weight (bh, i, j) of the [B*H, Tq, Tk] scores takes uniform number idx % 4 of the
 * Philox block base + idx / 4, idx its row-major index, so both paths drop the same weights whatever the thread
 * count. */
#include "ops/attention_plan.h"
#include "qkv/rng.h"

void qkv__sdpa_keep(const sdpa_plan *p, int64_t bh, int64_t i, int64_t j0, int64_t n, float *mult) {
    const float keep = 1.0f / (1.0f - p->dropout);
    uint64_t idx = (uint64_t)((bh * p->Tq + i) * p->Tk + j0);
    uint32_t r[4];
    uint64_t block = UINT64_MAX;
    for (int64_t j = 0; j < n; j++, idx++) {
        /* Same draw as qkv_rng_uniform_at(seed, base, idx), one Philox block per four elements. */
        if (idx / 4 != block) {
            block = idx / 4;
            qkv_philox4x32(p->seed, p->base + block, r);
        }
        float u = (float)(r[idx % 4] >> 8) * (1.0f / 16777216.0f);
        mult[j] = u >= p->dropout ? keep : 0.0f;
    }
}
