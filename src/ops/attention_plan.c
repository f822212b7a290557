/* The attention dropout mask of a plan, drawn the same way by the materialising path (attention.c) and the fused
 * kernels (attention_fused.c): weight (bh, i, j) of the [B*H, Tq, Tk] scores takes uniform number idx % 4 of the
 * Philox block base + idx / 4, idx its row-major index, so both paths drop the same weights whatever the thread
 * count. The blocks of a row segment are generated QKV_PHILOX_LANES at a time (core/philox_lanes.h) in code compiled
 * per instruction set: a scalar Philox call per four weights, twice per weight (forward and backward), was a
 * visible share of a BERT training step. */
#include "core/isa.h"
#include "core/philox_lanes.h"
#include "ops/attention_plan.h"

QKV_KERNEL_BODY void keep_mask_body(const sdpa_plan *p, int64_t bh, int64_t i, int64_t j0, int64_t n, float *mult) {
    if (n <= 0) return;
    const float keep = 1.0f / (1.0f - p->dropout), drop = p->dropout;
    const uint64_t idx0 = (uint64_t)((bh * p->Tq + i) * p->Tk + j0);
    const uint64_t first = idx0 / 4, last = (idx0 + (uint64_t)n - 1) / 4; /* blocks holding the segment */
    for (uint64_t b = first; b <= last; b += QKV_PHILOX_LANES) {
        uint32_t r[4][QKV_PHILOX_LANES];
        qkv__philox_lanes(p->seed, p->base + b, r);
        float u[4 * QKV_PHILOX_LANES];
        for (int l = 0; l < QKV_PHILOX_LANES; l++)
            for (int w = 0; w < 4; w++) u[4 * l + w] = qkv__philox_unit(r[w][l]);
        /* u[k] is the number of index 4 b + k, element 4 b + k - idx0 of the segment. */
        int64_t off = (int64_t)(4 * b) - (int64_t)idx0;
        int64_t k0 = off < 0 ? -off : 0, k1 = n - off < 4 * QKV_PHILOX_LANES ? n - off : 4 * QKV_PHILOX_LANES;
        for (int64_t k = k0; k < k1; k++) mult[off + k] = u[k] >= drop ? keep : 0.0f;
    }
}
QKV_ISA_KERNEL_VOID(keep_mask, (const sdpa_plan *p, int64_t bh, int64_t i, int64_t j0, int64_t n, float *mult),
                    (p, bh, i, j0, n, mult))

void qkv__sdpa_keep(const sdpa_plan *p, int64_t bh, int64_t i, int64_t j0, int64_t n, float *mult) {
    keep_mask(p, bh, i, j0, n, mult);
}
