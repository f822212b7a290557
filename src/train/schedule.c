/* Multifactor learning-rate schedules (Trax's lr_schedules.multifactor, plus cosine/linear decay and Noam). */
#include <math.h>
#include <string.h>

#include "qkv/schedule.h"

enum { F_CONSTANT, F_WARMUP, F_RSQRT, F_RSQRT_NORM, F_COSINE, F_LINEAR, F_NOAM, N_FACTORS };
static const char *const names[N_FACTORS] = {"constant", "linear_warmup", "rsqrt_decay", "rsqrt_normalized_decay",
                                              "cosine_decay", "linear_decay", "noam"};

qkv_status qkv_schedule_parse(qkv_schedule *s, const char *spec, double base_lr, double warmup_steps,
                              double total_steps, double min_ratio, double d_model) {
    memset(s, 0, sizeof *s);
    s->base_lr = base_lr;
    s->warmup_steps = warmup_steps;
    s->total_steps = total_steps;
    s->min_ratio = min_ratio;
    s->d_model = d_model;
    if (!strcmp(spec, "warmup_cosine")) spec = "constant * linear_warmup * cosine_decay";
    if (!strcmp(spec, "warmup_linear")) spec = "constant * linear_warmup * linear_decay";
    if (!strcmp(spec, "warmup_rsqrt")) spec = "constant * linear_warmup * rsqrt_normalized_decay";
    const char *p = spec;
    while (*p) {
        while (*p == ' ' || *p == '*') p++;
        if (!*p) break;
        size_t len = strcspn(p, " *");
        int f = -1;
        for (int i = 0; i < N_FACTORS; i++)
            if (strlen(names[i]) == len && !strncmp(p, names[i], len)) f = i;
        if (f < 0)
            return qkv_error_set(QKV_ERR_INVALID, "schedule '%s': unknown factor '%.*s' (known: constant, "
                                 "linear_warmup, rsqrt_decay, rsqrt_normalized_decay, cosine_decay, linear_decay, noam)",
                                 spec, (int)len, p);
        if (s->n == QKV_SCHEDULE_MAX_FACTORS) return qkv_error_set(QKV_ERR_INVALID, "schedule '%s': too many factors", spec);
        if ((f == F_WARMUP || f == F_RSQRT_NORM || f == F_NOAM) && !(warmup_steps > 0))
            return qkv_error_set(QKV_ERR_INVALID, "schedule '%s': %s needs warmup_steps > 0", spec, names[f]);
        if ((f == F_COSINE || f == F_LINEAR) && !(total_steps > 0))
            return qkv_error_set(QKV_ERR_INVALID, "schedule '%s': %s needs total_steps > 0", spec, names[f]);
        if (f == F_NOAM && !(d_model > 0))
            return qkv_error_set(QKV_ERR_INVALID, "schedule '%s': noam needs d_model > 0", spec);
        s->factor[s->n++] = f;
        p += len;
    }
    if (s->n == 0) return qkv_error_set(QKV_ERR_INVALID, "schedule: empty specification");
    return QKV_OK;
}

double qkv_schedule_lr(const qkv_schedule *s, long step) {
    double st = (double)step, w = s->warmup_steps, T = s->total_steps, lr = 1.0, w0 = 0;
    for (int i = 0; i < s->n; i++)
        if (s->factor[i] == F_WARMUP && w < T) w0 = w;
    double progress = T > w0 ? fmin(1.0, fmax(0.0, (st - w0) / (T - w0))) : 1.0;
    for (int i = 0; i < s->n; i++) {
        switch (s->factor[i]) {
        case F_CONSTANT: lr *= s->base_lr; break;
        case F_WARMUP: lr *= fmin(1.0, st / w); break;
        case F_RSQRT: lr *= 1.0 / sqrt(fmax(st, w)); break;
        case F_RSQRT_NORM: lr *= sqrt(w) / sqrt(fmax(st, w)); break;
        case F_COSINE: lr *= s->min_ratio + (1.0 - s->min_ratio) * 0.5 * (1.0 + cos(M_PI * progress)); break;
        case F_LINEAR: lr *= 1.0 - progress; break;
        case F_NOAM: {
            double n = fmax(st, 1.0);
            lr *= pow(s->d_model, -0.5) * fmin(pow(n, -0.5), n * pow(w, -1.5));
            break;
        }
        }
    }
    return lr;
}
