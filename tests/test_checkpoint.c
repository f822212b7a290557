/* Checkpoints: exact resume (2N steps == N + save + load + N, bit for bit), and bad files change nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "qkv/checkpoint.h"
#include "qkv/embmean.h"

#define V 50
#define T 7
#define B 8

typedef struct {
    qkv_params *params;
    qkv_optim *opt;
    qkv_embmean m;
    qkv_train_state state;
    qkv_ctx *ctx;
} run_t;

static void run_init(run_t *r) {
    memset(r, 0, sizeof *r);
    r->params = qkv_params_new();
    qkv_rng init;
    qkv_rng_init(&init, 11);
    qkv_embmean_init(&r->m, r->params, V, 16, 2, &init);
    qkv_optim_config c = qkv_optim_defaults(QKV_ADAMW);
    c.lr = 0.05f;
    r->opt = qkv_optim_new(r->params, &c);
    qkv_rng_init(&r->state.rng, 99);
    r->ctx = qkv_ctx_new();
}

static void run_free(run_t *r) {
    qkv_ctx_free(r->ctx);
    qkv_optim_free(r->opt);
    qkv_params_free(r->params);
}

/* One step on a batch drawn from the run's generator (the data position is the generator's counter). */
static float step(run_t *r) {
    qkv_ctx_reset(r->ctx);
    qkv_tensor *ids = qkv_ctx_tensor(r->ctx, QKV_I32, QKV_DIMS(B, T));
    qkv_tensor *mask = qkv_ctx_tensor(r->ctx, QKV_F32, QKV_DIMS(B, T));
    qkv_tensor *y = qkv_ctx_tensor(r->ctx, QKV_I32, QKV_DIMS(B));
    for (int i = 0; i < B * T; i++) {
        qkv_i32(ids)[i] = (int32_t)qkv_rng_below(&r->state.rng, V);
        qkv_f32(mask)[i] = (i % T) < 3 + (i / T) % 4;
    }
    for (int b = 0; b < B; b++) qkv_i32(y)[b] = qkv_i32(ids)[b * T] % 2;
    qkv_tensor *loss = qkv_cross_entropy(r->ctx, qkv_embmean_forward(r->ctx, &r->m, ids, mask), y, NULL);
    qkv_optim_zero_grad(r->opt);
    if (!loss || qkv_backward(r->ctx, loss) || qkv_optim_step(r->opt)) return NAN;
    r->state.step++;
    return qkv_f32(loss)[0];
}

static bool same_params(const qkv_params *a, const qkv_params *b) {
    for (int i = 0; i < qkv_params_count(a); i++) {
        const qkv_tensor *x = qkv_params_at(a, i), *y = qkv_params_at(b, i);
        if (memcmp(x->data, y->data, (size_t)qkv_numel(x) * 4)) return false;
    }
    return true;
}

TEST(resume_is_bit_identical) {
    enum { N = 20 };
    char path[64];
    snprintf(path, sizeof path, "ckpt_test_%d.safetensors", (int)getpid());
    run_t a, b;
    run_init(&a);
    float la[2 * N], lb[2 * N];
    for (int s = 0; s < 2 * N; s++) la[s] = step(&a);
    float first = 0, last = 0;
    for (int s = 0; s < 5; s++) {
        first += la[s];
        last += la[2 * N - 1 - s];
    }
    CHECKF(last < first, "loss did not fall: first steps %.3f, last steps %.3f", first / 5, last / 5);

    run_init(&b);
    for (int s = 0; s < N; s++) lb[s] = step(&b);
    CHECK_OK(qkv_checkpoint_save(path, b.params, b.opt, &b.state, "{\"model\":\"embmean\"}"));
    run_free(&b);

    run_t c; /* a fresh process's view: new model and optimiser, different init, then load */
    run_init(&c);
    qkv_rng_init(&c.state.rng, 12345);
    char *config = NULL;
    CHECK_OK(qkv_checkpoint_load(path, c.params, c.opt, &c.state, &config));
    CHECK(config && !strcmp(config, "{\"model\":\"embmean\"}"));
    free(config);
    CHECK(c.state.step == N && qkv_optim_steps(c.opt) == N);
    for (int s = N; s < 2 * N; s++) lb[s] = step(&c);
    CHECKF(memcmp(la, lb, sizeof la) == 0, "losses differ after resume");
    CHECKF(same_params(a.params, c.params), "weights differ after resume");
    for (int i = 0; i < qkv_optim_state_count(a.opt); i++)
        CHECK(!memcmp(qkv_optim_state_at(a.opt, i)->data, qkv_optim_state_at(c.opt, i)->data,
                      (size_t)qkv_numel(qkv_optim_state_at(a.opt, i)) * 4));
    run_free(&a);
    run_free(&c);
    unlink(path);
}

TEST(bad_checkpoints_change_nothing) {
    char path[64];
    snprintf(path, sizeof path, "ckpt_bad_%d.safetensors", (int)getpid());
    run_t a;
    run_init(&a);
    step(&a);
    CHECK_OK(qkv_checkpoint_save(path, a.params, a.opt, &a.state, NULL));

    /* A model of another size: shape mismatch named, target untouched. */
    qkv_params *p = qkv_params_new();
    qkv_embmean m;
    qkv_rng r;
    qkv_rng_init(&r, 1);
    qkv_embmean_init(&m, p, V + 1, 16, 2, &r);
    qkv_tensor *before = qkv_tensor_clone(m.w);
    CHECK(qkv_checkpoint_load(path, p, NULL, NULL, NULL) == QKV_ERR_FORMAT);
    CHECK(strstr(qkv_last_error(), "embedding.weight") && strstr(qkv_last_error(), "[50, 16]"));
    CHECK(!memcmp(before->data, m.w->data, (size_t)qkv_numel(before) * 4));
    qkv_tensor_free(before);
    qkv_params_free(p);

    /* A parameter the file lacks, and one the model lacks. */
    p = qkv_params_new();
    qkv_params_add(p, NULL, "embedding.weight", QKV_DIMS(V, 16));
    qkv_params_add(p, NULL, "extra.weight", QKV_DIMS(3));
    CHECK(qkv_checkpoint_load(path, p, NULL, NULL, NULL) == QKV_ERR_FORMAT);
    CHECK(strstr(qkv_last_error(), "'extra.weight'") && strstr(qkv_last_error(), "'classifier.bias'"));
    qkv_params_free(p);

    /* Truncated file. */
    FILE *f = fopen(path, "r+b");
    CHECK(f && ftruncate(fileno(f), 100) == 0);
    if (f) fclose(f);
    CHECK(qkv_checkpoint_load(path, a.params, a.opt, &a.state, NULL) != QKV_OK);
    CHECK(strstr(qkv_last_error(), path));
    CHECK(qkv_checkpoint_load("/nonexistent/dir/x.safetensors", a.params, NULL, NULL, NULL) == QKV_ERR_IO);
    run_free(&a);
    unlink(path);
}

int main(void) {
    RUN(resume_is_bit_identical);
    RUN(bad_checkpoints_change_nothing);
    return test_finish();
}
