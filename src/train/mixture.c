/* Multi-task mixing rates and draws (include/qkv/mixture.h). The sums run in double in task order, so rates are
 * the same on every machine. */
#include "qkv/mixture.h"

#include <math.h>
#include <string.h>

qkv_status qkv_mix_parse(const char *name, qkv_mix_kind *kind) {
    if (name && !strcmp(name, "proportional")) *kind = QKV_MIX_PROPORTIONAL;
    else if (name && !strcmp(name, "temperature")) *kind = QKV_MIX_TEMPERATURE;
    else if (name && !strcmp(name, "equal")) *kind = QKV_MIX_EQUAL;
    else
        return qkv_error_set(QKV_ERR_INVALID, "mixing '%s': expected proportional, temperature or equal",
                             name ? name : "(null)");
    return QKV_OK;
}

qkv_status qkv_mix_rates(const int64_t *examples, int n, const qkv_mix_opts *o, double *rates) {
    if (n < 1) return qkv_error_set(QKV_ERR_INVALID, "mixing: no tasks");
    if (!(o->cap >= 0) || isinf(o->cap))
        return qkv_error_set(QKV_ERR_INVALID, "mixing: cap %g must be finite and >= 0 (0: none)", o->cap);
    if (o->kind == QKV_MIX_TEMPERATURE && !(o->temperature >= 1.0 && isfinite(o->temperature)))
        return qkv_error_set(QKV_ERR_INVALID, "mixing: temperature %g must be finite and >= 1", o->temperature);
    for (int m = 0; m < n; m++)
        if (examples[m] < 0)
            return qkv_error_set(QKV_ERR_INVALID, "mixing: task %d has %lld examples", m, (long long)examples[m]);
    if (o->kind == QKV_MIX_EQUAL) {
        for (int m = 0; m < n; m++) rates[m] = 1.0 / n;
        return QKV_OK;
    }
    double sum = 0;
    for (int m = 0; m < n; m++) {
        double e = (double)examples[m];
        rates[m] = o->cap > 0 && e > o->cap ? o->cap : e;
        sum += rates[m];
    }
    if (sum <= 0) return qkv_error_set(QKV_ERR_INVALID, "mixing: the tasks have no examples");
    for (int m = 0; m < n; m++) rates[m] /= sum;
    if (o->kind == QKV_MIX_TEMPERATURE && o->temperature != 1.0) {
        sum = 0;
        for (int m = 0; m < n; m++) sum += rates[m] = pow(rates[m], 1.0 / o->temperature);
        for (int m = 0; m < n; m++) rates[m] /= sum;
    }
    return QKV_OK;
}

int qkv_mix_pick(const double *rates, int n, qkv_rng *rng) {
    double u = (double)qkv_rng_uniform(rng), acc = 0;
    int last = 0;
    for (int m = 0; m < n; m++) {
        if (rates[m] <= 0) continue;
        last = m;
        acc += rates[m];
        if (u < acc) return m;
    }
    return last;
}
