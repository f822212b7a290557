/* Parameter initialisers: gains and fans as torch.nn.init, distribution statistics on large tensors,
 * orthogonality, errors, and the recurrent modules' initialisation options. */
#include <math.h>
#include <string.h>

#include "qkv/init.h"
#include "qkv/rnn.h"
#include "test.h"

static void stats(const qkv_tensor *t, double *mean, double *std, double *lo, double *hi) {
    const float *p = t->data;
    int64_t n = qkv_numel(t);
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        s += p[i];
        s2 += (double)p[i] * p[i];
        if (p[i] < *lo) *lo = p[i];
        if (p[i] > *hi) *hi = p[i];
    }
    *mean = s / (double)n;
    *std = sqrt(s2 / (double)n - *mean * *mean);
}

TEST(gains_and_fans) {
    CHECK(qkv_init_gain(QKV_GAIN_LINEAR, 0) == 1.0f && qkv_init_gain(QKV_GAIN_SIGMOID, 0) == 1.0f);
    CHECK(fabsf(qkv_init_gain(QKV_GAIN_TANH, 0) - 5.0f / 3.0f) < 1e-7f);
    CHECK(fabsf(qkv_init_gain(QKV_GAIN_RELU, 0) - 1.41421356f) < 1e-6f);
    CHECK(fabsf(qkv_init_gain(QKV_GAIN_LEAKY_RELU, 0.01f) - 1.41414285f) < 1e-6f); /* torch: 1.4141428569978354 */
    CHECK(qkv_init_gain(QKV_GAIN_SELU, 0) == 0.75f);
    int64_t fi, fo;
    qkv_tensor *w = qkv_tensor_new(QKV_F32, QKV_DIMS(6, 4, 3, 2));
    CHECK_OK(qkv_init_fans(w, &fi, &fo));
    CHECK(fi == 24 && fo == 36);
    qkv_tensor *v = qkv_tensor_new(QKV_F32, QKV_DIMS(5));
    CHECK(qkv_init_fans(v, &fi, &fo) == QKV_ERR_INVALID && strstr(qkv_last_error(), "[5]"));
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    CHECK(qkv_init_xavier_uniform(v, 1, &rng) == QKV_ERR_INVALID);
    CHECK(qkv_init_orthogonal(v, 1, &rng) == QKV_ERR_INVALID);
    CHECK(qkv_init_uniform(v, 1, -1, &rng) == QKV_ERR_INVALID);
    CHECK(qkv_init_normal(v, 0, -1, &rng) == QKV_ERR_INVALID);
    CHECK(qkv_init_uniform(v, -1, 1, NULL) == QKV_ERR_INVALID);
    qkv_tensor *iv = qkv_tensor_new(QKV_I32, QKV_DIMS(3, 3));
    CHECK(qkv_init_constant(iv, 1) == QKV_ERR_INVALID && strstr(qkv_last_error(), "float32"));
    qkv_tensor_free(iv);
    qkv_tensor_free(v);
    qkv_tensor_free(w);
}

/* Sample statistics of 256k draws: the standard error of the mean is std/512, of the std about std/724. */
TEST(distribution_statistics) {
    qkv_rng rng;
    qkv_rng_init(&rng, 7);
    qkv_tensor *w = qkv_tensor_new(QKV_F32, QKV_DIMS(512, 512));
    double m, s, lo, hi;
    CHECK_OK(qkv_init_uniform(w, -2, 3, &rng));
    stats(w, &m, &s, &lo, &hi);
    CHECKF(fabs(m - 0.5) < 0.02 && fabs(s - 5 / sqrt(12)) < 0.02 && lo >= -2 && hi < 3, "uniform %g %g", m, s);
    CHECK_OK(qkv_init_normal(w, 1, 2, &rng));
    stats(w, &m, &s, &lo, &hi);
    CHECKF(fabs(m - 1) < 0.02 && fabs(s - 2) < 0.02, "normal mean %g std %g", m, s);
    double xs = sqrt(2.0 / 1024);
    CHECK_OK(qkv_init_xavier_uniform(w, 2, &rng));
    stats(w, &m, &s, &lo, &hi);
    CHECKF(fabs(m) < 4 * 2 * xs / 512 && fabs(s / (2 * xs) - 1) < 0.01 && hi <= 2 * xs * sqrt(3) + 1e-6,
           "xavier_uniform mean %g std %g (want %g)", m, s, 2 * xs);
    CHECK_OK(qkv_init_xavier_normal(w, 1, &rng));
    stats(w, &m, &s, &lo, &hi);
    CHECKF(fabs(s / xs - 1) < 0.01, "xavier_normal std %g (want %g)", s, xs);
    /* a [512, 256] weight: fan_in 256, fan_out 512 */
    qkv_tensor *k = qkv_tensor_new(QKV_F32, QKV_DIMS(512, 256));
    CHECK_OK(qkv_init_kaiming_uniform(k, 0, QKV_FAN_IN, QKV_GAIN_RELU, &rng));
    stats(k, &m, &s, &lo, &hi);
    CHECKF(fabs(s / sqrt(2.0 / 256) - 1) < 0.01 && hi <= sqrt(6.0 / 256) + 1e-6, "kaiming_uniform std %g", s);
    CHECK_OK(qkv_init_kaiming_normal(k, 0, QKV_FAN_OUT, QKV_GAIN_LINEAR, &rng));
    stats(k, &m, &s, &lo, &hi);
    CHECKF(fabs(s / sqrt(1.0 / 512) - 1) < 0.01, "kaiming_normal fan_out std %g", s);
    CHECK_OK(qkv_init_constant(k, 0.25f));
    stats(k, &m, &s, &lo, &hi);
    CHECK(lo == 0.25 && hi == 0.25);
    qkv_tensor_free(k);
    qkv_tensor_free(w);
}

/* max |Q Q^T - gain^2 I| over the smaller side (rows of a wide matrix, columns of a tall one) */
static double orthogonality_error(const qkv_tensor *t, double gain) {
    int64_t r = t->shape[0], c = qkv_numel(t) / r;
    const float *p = t->data;
    bool wide = r <= c;
    int64_t n = wide ? r : c, m = wide ? c : r;
    double worst = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t k = 0; k < m; k++)
                s += wide ? (double)p[i * c + k] * p[j * c + k] : (double)p[k * c + i] * p[k * c + j];
            double e = fabs(s - (i == j ? gain * gain : 0));
            if (e > worst) worst = e;
        }
    return worst;
}

TEST(orthogonal) {
    qkv_rng rng;
    qkv_rng_init(&rng, 3);
    int64_t shapes[4][3] = {{64, 64, 1}, {40, 100, 1}, {100, 40, 1}, {8, 3, 5}};
    for (int s = 0; s < 4; s++) {
        qkv_tensor *w = shapes[s][2] == 1 ? qkv_tensor_new(QKV_F32, QKV_DIMS(shapes[s][0], shapes[s][1]))
                                          : qkv_tensor_new(QKV_F32, QKV_DIMS(shapes[s][0], shapes[s][1], shapes[s][2]));
        CHECK_OK(qkv_init_orthogonal(w, 1, &rng));
        double e = orthogonality_error(w, 1);
        CHECKF(e < 1e-5, "orthogonal %lldx%lld: |WW^T - I| = %g", (long long)shapes[s][0], (long long)shapes[s][1], e);
        CHECK_OK(qkv_init_orthogonal(w, 2, &rng));
        e = orthogonality_error(w, 2);
        CHECKF(e < 4e-5, "orthogonal gain 2: |WW^T - 4I| = %g", e);
        qkv_tensor_free(w);
    }
    /* different seeds, different matrices; same seed, same matrix */
    qkv_tensor *a = qkv_tensor_new(QKV_F32, QKV_DIMS(16, 16)), *b = qkv_tensor_new(QKV_F32, QKV_DIMS(16, 16));
    qkv_rng_init(&rng, 5);
    qkv_init_orthogonal(a, 1, &rng);
    qkv_rng_init(&rng, 5);
    qkv_init_orthogonal(b, 1, &rng);
    CHECK(memcmp(a->data, b->data, 16 * 16 * sizeof(float)) == 0);
    qkv_init_orthogonal(b, 1, &rng);
    CHECK(memcmp(a->data, b->data, 16 * 16 * sizeof(float)) != 0);
    qkv_tensor_free(a);
    qkv_tensor_free(b);
}

TEST(rnn_parameters) {
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 2);
    qkv_rnn rnn;
    qkv_rnn_config cfg = qkv_rnn_config_default(QKV_RNN_LSTM, 10, 32);
    cfg.num_layers = 2;
    cfg.bidirectional = true;
    CHECK_OK(qkv_rnn_init(&rnn, p, "enc.lstm", &cfg, &rng));
    const char *names[] = {"enc.lstm.weight_ih_l0", "enc.lstm.weight_hh_l0", "enc.lstm.bias_ih_l0",
                           "enc.lstm.bias_hh_l0", "enc.lstm.weight_ih_l0_reverse", "enc.lstm.weight_hh_l0_reverse",
                           "enc.lstm.bias_ih_l0_reverse", "enc.lstm.bias_hh_l0_reverse", "enc.lstm.weight_ih_l1"};
    CHECK(qkv_params_count(p) == 16);
    for (int k = 0; k < 9; k++) CHECKF(strcmp(qkv_params_at(p, k)->name, names[k]) == 0, "param %d is %s", k,
                                       qkv_params_at(p, k)->name);
    qkv_tensor *w1 = qkv_params_find(p, "enc.lstm.weight_ih_l1");
    CHECK(w1 && w1->shape[0] == 128 && w1->shape[1] == 64 && rnn.w_ih[1][0] == w1);
    double m, s, lo, hi, k = 1 / sqrt(32.0);
    stats(rnn.w_hh[0][1], &m, &s, &lo, &hi);
    CHECKF(lo >= -k && hi <= k && fabs(s - k / sqrt(3)) < 0.01, "default init not U(+-1/sqrt(H)): %g %g", lo, hi);
    qkv_params_free(p);

    p = qkv_params_new();
    cfg.orthogonal_hh = true;
    cfg.forget_bias_one = true;
    CHECK_OK(qkv_rnn_init(&rnn, p, NULL, &cfg, &rng));
    for (int g = 0; g < 4; g++) {
        qkv_tensor block = *rnn.w_hh[1][1];
        block.shape[0] = 32;
        block.data = qkv_f32(rnn.w_hh[1][1]) + g * 32 * 32;
        CHECKF(orthogonality_error(&block, 1) < 1e-5, "gate block %d of weight_hh not orthogonal", g);
    }
    for (int j = 0; j < 128; j++) {
        float bi = qkv_f32(rnn.b_ih[0][0])[j], bh = qkv_f32(rnn.b_hh[0][0])[j];
        if (j >= 32 && j < 64)
            CHECKF(bi == 1.0f && bh == 0.0f, "forget bias %d: %g + %g", j, bi, bh);
        else
            CHECK(fabs(bi) <= k && bi != 1.0f);
    }
    qkv_params_free(p);
}

int main(void) {
    RUN(gains_and_fans);
    RUN(distribution_statistics);
    RUN(orthogonal);
    RUN(rnn_parameters);
    return test_finish();
}
