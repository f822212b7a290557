/* The smallest complete qkv program: a two-layer network learns XOR.
 *
 *     cc xor.c -lqkv ...   (built by CMake as build/examples/xor)
 *
 * It shows the whole life cycle: parameters in a qkv_params collection, a context per step, ops that return NULL on
 * error (checked once), backward, an optimiser, and explicit freeing. */
#include <stdio.h>

#include "qkv/qkv.h"

int main(void) {
    static const float X[4][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
    static const int32_t Y[4] = {0, 1, 1, 0};

    qkv_params *params = qkv_params_new();
    qkv_tensor *w1 = qkv_params_add(params, "hidden", "weight", QKV_DIMS(8, 2));
    qkv_tensor *b1 = qkv_params_add(params, "hidden", "bias", QKV_DIMS(8));
    qkv_tensor *w2 = qkv_params_add(params, "out", "weight", QKV_DIMS(2, 8));
    qkv_tensor *b2 = qkv_params_add(params, "out", "bias", QKV_DIMS(2));
    qkv_rng rng;
    qkv_rng_init(&rng, 42);
    qkv_rng_fill_uniform(&rng, w1, -1, 1);
    qkv_rng_fill_uniform(&rng, w2, -1, 1);

    qkv_optim_config oc = qkv_optim_defaults(QKV_ADAM);
    oc.lr = 0.05f;
    qkv_optim *opt = qkv_optim_new(params, &oc);
    qkv_ctx *ctx = qkv_ctx_new();
    float loss_value = 0;
    for (int step = 1; step <= 300; step++) {
        qkv_ctx_reset(ctx); /* last step's tensors are gone; their memory is reused */
        qkv_tensor *x = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(4, 2));
        qkv_tensor *y = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(4));
        qkv_tensor_load(x, X, sizeof X);
        qkv_tensor_load(y, Y, sizeof Y);

        qkv_tensor *h = qkv_tanh(ctx, qkv_linear(ctx, x, w1, b1));
        qkv_tensor *loss = qkv_cross_entropy(ctx, qkv_linear(ctx, h, w2, b2), y, NULL);
        qkv_optim_zero_grad(opt);
        if (!loss || qkv_backward(ctx, loss) != QKV_OK || qkv_optim_step(opt) != QKV_OK) {
            fprintf(stderr, "xor: %s\n", qkv_last_error());
            return 1;
        }
        loss_value = qkv_f32(loss)[0];
        if (step % 100 == 0) printf("step %d  loss %.4f\n", step, loss_value);
    }
    qkv_ctx_free(ctx);
    qkv_optim_free(opt);
    qkv_params_free(params); /* frees w1, b1, w2, b2 and their gradients */
    printf("%s\n", loss_value < 0.05f ? "learned XOR" : "did not learn XOR");
    return loss_value < 0.05f ? 0 : 1;
}
