/* Parameter initialisers (torch.nn.init semantics), drawing from Philox so a seed fixes a model's start. */
#include <math.h>
#include <stdlib.h>

#include "core/internal.h"
#include "qkv/init.h"

static qkv_status check_f32(const char *fn, const qkv_tensor *t) {
    if (!t) return qkv_error_set(QKV_ERR_INVALID, "%s: tensor is NULL", fn);
    if (t->dtype != QKV_F32) return qkv_error_set(QKV_ERR_INVALID, "%s: tensor must be float32", fn);
    return QKV_OK;
}

static qkv_status check_rng(const char *fn, const qkv_tensor *t, const qkv_rng *rng) {
    qkv_status st = check_f32(fn, t);
    if (st) return st;
    if (!rng) return qkv_error_set(QKV_ERR_INVALID, "%s: generator is NULL", fn);
    return QKV_OK;
}

float qkv_init_gain(qkv_nonlinearity nl, float param) {
    switch (nl) {
    case QKV_GAIN_TANH: return 5.0f / 3.0f;
    case QKV_GAIN_RELU: return sqrtf(2.0f);
    case QKV_GAIN_LEAKY_RELU: return sqrtf(2.0f / (1.0f + param * param));
    case QKV_GAIN_SELU: return 0.75f;
    case QKV_GAIN_LINEAR:
    case QKV_GAIN_SIGMOID:
    default: return 1.0f;
    }
}

qkv_status qkv_init_fans(const qkv_tensor *t, int64_t *fan_in, int64_t *fan_out) {
    char s[96];
    if (!t) return qkv_error_set(QKV_ERR_INVALID, "init fans: tensor is NULL");
    if (t->ndim < 2)
        return qkv_error_set(QKV_ERR_INVALID, "init: fan in and fan out need a tensor of rank >= 2, got %s",
                             qkv_shape_str(t, s, sizeof s));
    int64_t receptive = 1;
    for (int d = 2; d < t->ndim; d++) receptive *= t->shape[d];
    if (fan_in) *fan_in = t->shape[1] * receptive;
    if (fan_out) *fan_out = t->shape[0] * receptive;
    return QKV_OK;
}

qkv_status qkv_init_constant(qkv_tensor *t, float value) {
    qkv_status st = check_f32("init constant", t);
    if (st) return st;
    qkv_tensor_fill(t, value);
    return QKV_OK;
}

qkv_status qkv_init_uniform(qkv_tensor *t, float lo, float hi, qkv_rng *rng) {
    qkv_status st = check_rng("init uniform", t, rng);
    if (st) return st;
    if (!(lo <= hi)) return qkv_error_set(QKV_ERR_INVALID, "init uniform: lower bound %g above upper %g", lo, hi);
    qkv_rng_fill_uniform(rng, t, lo, hi);
    return QKV_OK;
}

qkv_status qkv_init_normal(qkv_tensor *t, float mean, float std, qkv_rng *rng) {
    qkv_status st = check_rng("init normal", t, rng);
    if (st) return st;
    if (!(std >= 0) || !isfinite(std) || !isfinite(mean))
        return qkv_error_set(QKV_ERR_INVALID, "init normal: needs a finite mean and std >= 0 (got %g, %g)", mean,
                             std);
    qkv_rng_fill_normal(rng, t, mean, std);
    return QKV_OK;
}

static qkv_status xavier_std(const char *fn, const qkv_tensor *t, float gain, const qkv_rng *rng, float *std) {
    qkv_status st = check_rng(fn, t, rng);
    int64_t fi = 0, fo = 0;
    if (st || (st = qkv_init_fans(t, &fi, &fo))) return st;
    if (fi + fo == 0) return qkv_error_set(QKV_ERR_INVALID, "%s: tensor has no elements", fn);
    *std = gain * (float)sqrt(2.0 / (double)(fi + fo));
    return QKV_OK;
}

qkv_status qkv_init_xavier_uniform(qkv_tensor *t, float gain, qkv_rng *rng) {
    float std = 0.0f;
    qkv_status st = xavier_std("init xavier_uniform", t, gain, rng, &std);
    if (st) return st;
    float a = sqrtf(3.0f) * std;
    qkv_rng_fill_uniform(rng, t, -a, a);
    return QKV_OK;
}

qkv_status qkv_init_xavier_normal(qkv_tensor *t, float gain, qkv_rng *rng) {
    float std = 0.0f;
    qkv_status st = xavier_std("init xavier_normal", t, gain, rng, &std);
    if (st) return st;
    qkv_rng_fill_normal(rng, t, 0.0f, std);
    return QKV_OK;
}

static qkv_status kaiming_std(const char *fn, const qkv_tensor *t, float slope, qkv_fan_mode mode,
                              qkv_nonlinearity nl, const qkv_rng *rng, float *std) {
    qkv_status st = check_rng(fn, t, rng);
    int64_t fi = 0, fo = 0;
    if (st || (st = qkv_init_fans(t, &fi, &fo))) return st;
    if (mode != QKV_FAN_IN && mode != QKV_FAN_OUT)
        return qkv_error_set(QKV_ERR_INVALID, "%s: bad fan mode %d", fn, (int)mode);
    int64_t fan = mode == QKV_FAN_IN ? fi : fo;
    if (fan == 0) return qkv_error_set(QKV_ERR_INVALID, "%s: tensor has a zero fan", fn);
    *std = qkv_init_gain(nl, slope) / sqrtf((float)fan);
    return QKV_OK;
}

qkv_status qkv_init_kaiming_uniform(qkv_tensor *t, float slope, qkv_fan_mode mode, qkv_nonlinearity nl,
                                    qkv_rng *rng) {
    float std = 0.0f;
    qkv_status st = kaiming_std("init kaiming_uniform", t, slope, mode, nl, rng, &std);
    if (st) return st;
    float a = sqrtf(3.0f) * std;
    qkv_rng_fill_uniform(rng, t, -a, a);
    return QKV_OK;
}

qkv_status qkv_init_kaiming_normal(qkv_tensor *t, float slope, qkv_fan_mode mode, qkv_nonlinearity nl,
                                   qkv_rng *rng) {
    float std = 0.0f;
    qkv_status st = kaiming_std("init kaiming_normal", t, slope, mode, nl, rng, &std);
    if (st) return st;
    qkv_rng_fill_normal(rng, t, 0.0f, std);
    return QKV_OK;
}

/* Orthonormalise the n columns of the column-major m x n matrix a (m >= n) in place by modified Gram-Schmidt,
 * each column projected twice ("twice is enough") so the result is orthogonal to double rounding even for a
 * badly conditioned draw. Every R diagonal entry is the positive norm, i.e. this is exactly the sign-corrected Q
 * torch computes from Householder QR. A (numerically) dependent column is an error, not a silent NaN. */
static bool gram_schmidt(double *a, int64_t m, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double *v = a + j * m;
        for (int pass = 0; pass < 2; pass++) {
            for (int64_t k = 0; k < j; k++) {
                const double *q = a + k * m;
                double r = 0;
                for (int64_t i = 0; i < m; i++) r += q[i] * v[i];
                for (int64_t i = 0; i < m; i++) v[i] -= r * q[i];
            }
        }
        double norm = 0;
        for (int64_t i = 0; i < m; i++) norm += v[i] * v[i];
        norm = sqrt(norm);
        if (!(norm > 1e-300)) return false;
        for (int64_t i = 0; i < m; i++) v[i] /= norm;
    }
    return true;
}

qkv_status qkv_init_orthogonal(qkv_tensor *t, float gain, qkv_rng *rng) {
    char s[96];
    qkv_status st = check_rng("init orthogonal", t, rng);
    if (st) return st;
    if (t->ndim < 2)
        return qkv_error_set(QKV_ERR_INVALID, "init orthogonal: needs a tensor of rank >= 2, got %s",
                             qkv_shape_str(t, s, sizeof s));
    int64_t rows = t->shape[0], numel = qkv_numel(t);
    if (numel == 0) return QKV_OK;
    int64_t cols = numel / rows;
    /* Draw the [rows, cols] normal matrix row-major, then hand Gram-Schmidt the tall orientation: column-major
     * [rows, cols] when rows >= cols, otherwise column-major [cols, rows] (the transpose). */
    float *draw = malloc((size_t)numel * sizeof *draw);
    double *a = malloc((size_t)numel * sizeof *a);
    if (!draw || !a) {
        free(draw);
        free(a);
        return qkv_error_set(QKV_ERR_NOMEM, "init orthogonal: out of memory for %s", qkv_shape_str(t, s, sizeof s));
    }
    qkv_tensor flat;
    qkv__header(&flat, QKV_F32, 2, (const int64_t[]){rows, cols});
    flat.data = draw;
    qkv_rng_fill_normal(rng, &flat, 0.0f, 1.0f);
    bool tall = rows >= cols;
    int64_t m = tall ? rows : cols, n = tall ? cols : rows;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            /* element (r, c) of the drawn matrix; in the tall orientation it is (r, c), else (c, r) */
            int64_t i = tall ? r : c, j = tall ? c : r;
            a[j * m + i] = draw[r * cols + c];
        }
    bool ok = gram_schmidt(a, m, n);
    if (ok)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                int64_t i = tall ? r : c, j = tall ? c : r;
                draw[r * cols + c] = (float)(gain * a[j * m + i]);
            }
    free(a);
    st = ok ? qkv_tensor_load(t, draw, (size_t)numel * sizeof *draw)
            : qkv_error_set(QKV_ERR_NUMERIC, "init orthogonal: random matrix %s was rank deficient",
                            qkv_shape_str(t, s, sizeof s));
    free(draw);
    return st;
}
