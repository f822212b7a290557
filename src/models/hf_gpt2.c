/* GPT-2 base model (HF GPT2Model, eval mode) with its tied LM head, from qkv's nn layers: token + learned position
 * embeddings, pre-norm causal blocks (ln_1, fused c_attn projection, c_proj; ln_2, c_fc, gelu_new, c_proj), the
 * final ln_f, and logits h @ wte^T. */
#include <stdio.h>

#include "models/hf_internal.h"
#include "qkv/ops.h"

qkv_status qkv__hf_gpt2_build(qkv_hf_model *m) {
    const qkv_hf_config *c = &m->cfg;
    int64_t E = c->hidden_size, I = c->intermediate_size;
    qkv_status st;
    if ((st = qkv__hf_add_embedding(m, &m->word, "wte", c->vocab_size, E)) ||
        (st = qkv__hf_add_embedding(m, &m->position, "wpe", c->max_positions, E)))
        return st;
    for (int i = 0; i < c->num_layers; i++) {
        hf_gpt2_layer *l = &m->gpt2[i];
        char p[6][64];
        const char *names[6] = {"ln_1", "ln_2", "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
        for (int k = 0; k < 6; k++) snprintf(p[k], sizeof p[k], "h.%d.%s", i, names[k]);
        if ((st = qkv__hf_add_layer_norm(m, &l->ln_1, p[0], E)) ||
            (st = qkv__hf_add_layer_norm(m, &l->ln_2, p[1], E)) ||
            (st = qkv__hf_add_linear(m, &l->c_attn, p[2], E, 3 * E, true)) ||
            (st = qkv__hf_add_linear(m, &l->attn_proj, p[3], E, E, true)) ||
            (st = qkv__hf_add_linear(m, &l->c_fc, p[4], E, I, true)) ||
            (st = qkv__hf_add_linear(m, &l->mlp_proj, p[5], I, E, true)))
            return st;
    }
    if ((st = qkv__hf_add_layer_norm(m, &m->ln_f, "ln_f", E))) return st;
    if (!c->tie_word_embeddings) return qkv__hf_add_linear(m, &m->lm_head, "lm_head", E, c->vocab_size, false);
    return QKV_OK;
}

qkv_status qkv__hf_gpt2_forward(qkv_ctx *ctx, const qkv_hf_model *m, const hf_batch *b, bool output_attentions,
                                qkv_hf_outputs *out) {
    int64_t E = m->cfg.hidden_size;
    if (b->T > m->cfg.max_positions)
        return qkv_error_set(QKV_ERR_RANGE, "hf forward: sequence of %lld tokens exceeds n_positions %lld",
                             (long long)b->T, (long long)m->cfg.max_positions);
    qkv_tensor *pos = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(b->T));
    if (!pos) return qkv_last_status();
    for (int64_t t = 0; t < b->T; t++) qkv_i32(pos)[t] = (int32_t)t;
    qkv_tensor *x = qkv_add(ctx, qkv_nn_embedding_forward(ctx, &m->word, b->ids),
                            qkv_nn_embedding_forward(ctx, &m->position, pos));
    for (int i = 0; i < m->cfg.num_layers && x; i++) {
        const hf_gpt2_layer *l = &m->gpt2[i];
        qkv_tensor *h = qkv_nn_layer_norm_forward(ctx, &l->ln_1, x);
        /* c_attn's [3E, E] weight stacks the q, k, v projections: contiguous row slices, one GEMM each. */
        qkv_tensor *proj[3];
        for (int k = 0; k < 3; k++)
            proj[k] = qkv_linear(ctx, h, qkv_slice(ctx, l->c_attn.weight, 0, k * E, (k + 1) * E, 1),
                                 qkv_slice(ctx, l->c_attn.bias, 0, k * E, (k + 1) * E, 1));
        qkv_tensor *a = qkv__hf_attention(ctx, m, b, proj[0], proj[1], proj[2], true,
                                          output_attentions ? &out->attentions[i] : NULL);
        x = qkv_add(ctx, x, qkv_nn_linear_forward(ctx, &l->attn_proj, a));
        h = qkv_nn_activate(ctx, m->cfg.activation, qkv_nn_linear_forward(ctx, &l->c_fc,
                                                                          qkv_nn_layer_norm_forward(ctx, &l->ln_2, x)));
        x = qkv_add(ctx, x, qkv_nn_linear_forward(ctx, &l->mlp_proj, h));
    }
    x = qkv_nn_layer_norm_forward(ctx, &m->ln_f, x);
    if (!x) return qkv_last_status();
    out->last_hidden_state = x;
    out->logits = m->cfg.tie_word_embeddings ? qkv_linear(ctx, x, m->word.weight, NULL)
                                             : qkv_nn_linear_forward(ctx, &m->lm_head, x);
    return out->logits ? QKV_OK : qkv_last_status();
}
