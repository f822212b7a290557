/* Learning-rate schedules: the learning rate as a function of the step s = the number of updates already made
 * (0 for the first update), the counter of torch.optim.lr_scheduler and of Hugging Face's schedules.
 *
 * A schedule is a product of factors, written as Trax's multifactor strings:
 *     "constant * linear_warmup * rsqrt_decay"
 * Factors (w = warmup_steps, T = total_steps, s = step):
 *     constant                base_lr
 *     linear_warmup           min(1, s / w)
 *     rsqrt_decay             1 / sqrt(max(s, w))
 *     rsqrt_normalized_decay  sqrt(w) / sqrt(max(s, w))            (1 at the end of warmup)
 *     cosine_decay            min_ratio + (1 - min_ratio) * 0.5 * (1 + cos(pi * p)),  p = clamp((s - w0) / (T - w0))
 *     linear_decay            max(0, 1 - p)
 *                             where w0 = w when the spec also has linear_warmup (decay starts after warmup, as
 *                             HF's get_{cosine,linear}_schedule_with_warmup), else 0 (torch's CosineAnnealingLR
 *                             with eta_min = min_ratio * base_lr, LinearLR to 0)
 *     noam                    d_model^-0.5 * min(n^-0.5, n * w^-1.5), n = max(s, 1)  (Attention Is All You Need)
 * Named presets expand to products: "constant", "warmup_cosine" = constant * linear_warmup * cosine_decay, ... */
#ifndef QKV_SCHEDULE_H
#define QKV_SCHEDULE_H

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_SCHEDULE_MAX_FACTORS 8

typedef struct qkv_schedule {
    int n;
    int factor[QKV_SCHEDULE_MAX_FACTORS];
    double base_lr, warmup_steps, total_steps, min_ratio, d_model;
} qkv_schedule;

/* Parse a spec (factors joined by '*', spaces allowed) with its parameters. Errors name the unknown factor or the
 * missing parameter (warmup factors need warmup_steps > 0, decays over T need total_steps > 0). */
qkv_status qkv_schedule_parse(qkv_schedule *s, const char *spec, double base_lr, double warmup_steps,
                              double total_steps, double min_ratio, double d_model);
double qkv_schedule_lr(const qkv_schedule *s, long step);

#ifdef __cplusplus
}
#endif
#endif
