/* BERT and RoBERTa base models (HF BertModel / RobertaModel, eval mode) from qkv's nn layers: embeddings (word +
 * position + token type, LayerNorm), post-norm encoder layers with separate query/key/value projections, and the
 * tanh pooler over the first token. RoBERTa differs only in its position ids (see hf.h). */
#include <stdio.h>

#include "models/hf_internal.h"
#include "qkv/ops.h"

qkv_status qkv__hf_bert_build(qkv_hf_model *m) {
    const qkv_hf_config *c = &m->cfg;
    int64_t E = c->hidden_size, I = c->intermediate_size;
    qkv_status st;
    if ((st = qkv__hf_add_embedding(m, &m->word, "embeddings.word_embeddings", c->vocab_size, E)) ||
        (st = qkv__hf_add_embedding(m, &m->position, "embeddings.position_embeddings", c->max_positions, E)) ||
        (st = qkv__hf_add_embedding(m, &m->token_type, "embeddings.token_type_embeddings", c->type_vocab_size, E)) ||
        (st = qkv__hf_add_layer_norm(m, &m->emb_ln, "embeddings.LayerNorm", E)))
        return st;
    for (int i = 0; i < c->num_layers; i++) {
        hf_bert_layer *l = &m->bert[i];
        char p[8][96];
        const char *names[8] = {"attention.self.query", "attention.self.key", "attention.self.value",
                                "attention.output.dense", "intermediate.dense", "output.dense",
                                "attention.output.LayerNorm", "output.LayerNorm"};
        for (int k = 0; k < 8; k++) snprintf(p[k], sizeof p[k], "encoder.layer.%d.%s", i, names[k]);
        if ((st = qkv__hf_add_linear(m, &l->query, p[0], E, E, true)) ||
            (st = qkv__hf_add_linear(m, &l->key, p[1], E, E, true)) ||
            (st = qkv__hf_add_linear(m, &l->value, p[2], E, E, true)) ||
            (st = qkv__hf_add_linear(m, &l->attn_out, p[3], E, E, true)) ||
            (st = qkv__hf_add_linear(m, &l->intermediate, p[4], E, I, true)) ||
            (st = qkv__hf_add_linear(m, &l->out, p[5], I, E, true)) ||
            (st = qkv__hf_add_layer_norm(m, &l->attn_ln, p[6], E)) ||
            (st = qkv__hf_add_layer_norm(m, &l->out_ln, p[7], E)))
            return st;
    }
    m->has_pooler = true;
    return qkv__hf_add_linear(m, &m->pooler, "pooler.dense", E, E, true);
}

/* BERT: 0..T-1 for every row. RoBERTa: pad + cumulative count of non-pad tokens, pad at pad tokens. */
static qkv_tensor *position_ids(qkv_ctx *ctx, const qkv_hf_model *m, const hf_batch *b) {
    qkv_tensor *pos = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(b->B, b->T));
    if (!pos) return NULL;
    int32_t *p = qkv_i32(pos);
    const int32_t *ids = qkv_i32(b->ids);
    int32_t pad = m->cfg.pad_token_id;
    for (int64_t i = 0; i < b->B; i++) {
        int32_t count = 0;
        for (int64_t t = 0; t < b->T; t++) {
            int32_t v = (int32_t)t;
            if (m->cfg.arch == QKV_HF_ROBERTA) v = ids[i * b->T + t] == pad ? pad : pad + ++count;
            if (v >= m->cfg.max_positions) {
                qkv_error_set(QKV_ERR_RANGE, "hf forward: sequence of %lld tokens needs position %d but the model "
                              "has max_position_embeddings %lld", (long long)b->T, (int)v,
                              (long long)m->cfg.max_positions);
                return NULL;
            }
            p[i * b->T + t] = v;
        }
    }
    return pos;
}

/* h + up(act(down(h))) on a sub-layer's output when the model has adapters. */
static qkv_tensor *adapt(qkv_ctx *ctx, const qkv_hf_model *m, const qkv_nn_linear *down, const qkv_nn_linear *up,
                         qkv_tensor *h) {
    if (m->adapter_dim <= 0 || !h) return h;
    qkv_tensor *z = qkv_nn_activate(ctx, m->cfg.activation, qkv_nn_linear_forward(ctx, down, h));
    return qkv_add(ctx, h, qkv_nn_linear_forward(ctx, up, z));
}

/* Dropout only when asked for: a call with p = 0 records nothing (the inference path is unchanged). */
static qkv_tensor *drop(qkv_ctx *ctx, qkv_tensor *x, float p) { return p > 0.0f ? qkv_dropout(ctx, x, p) : x; }

qkv_status qkv__hf_bert_forward(qkv_ctx *ctx, const qkv_hf_model *m, const hf_batch *b, bool output_attentions,
                                qkv_hf_outputs *out) {
    qkv_tensor *pos = position_ids(ctx, m, b);
    if (!pos) return qkv_last_status();
    qkv_tensor *types = b->type_ids;
    if (!types && !(types = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(b->B, b->T)))) return qkv_last_status();
    qkv_tensor *x = qkv_add(ctx, qkv_add(ctx, qkv_nn_embedding_forward(ctx, &m->word, b->ids),
                                         qkv_nn_embedding_forward(ctx, &m->position, pos)),
                            qkv_nn_embedding_forward(ctx, &m->token_type, types));
    float p = b->hidden_dropout;
    x = drop(ctx, qkv_nn_layer_norm_forward(ctx, &m->emb_ln, x), p);
    for (int i = 0; i < m->cfg.num_layers && x; i++) {
        const hf_bert_layer *l = &m->bert[i];
        qkv_tensor *a = qkv__hf_attention(ctx, m, b, qkv_nn_linear_forward(ctx, &l->query, x),
                                          qkv_nn_linear_forward(ctx, &l->key, x),
                                     qkv_nn_linear_forward(ctx, &l->value, x), false,
                                     output_attentions ? &out->attentions[i] : NULL);
        a = adapt(ctx, m, &l->adapt_attn_down, &l->adapt_attn_up, qkv_nn_linear_forward(ctx, &l->attn_out, a));
        x = qkv_nn_layer_norm_forward(ctx, &l->attn_ln, qkv_add(ctx, drop(ctx, a, p), x));
        qkv_tensor *h = qkv_nn_activate(ctx, m->cfg.activation, qkv_nn_linear_forward(ctx, &l->intermediate, x));
        h = adapt(ctx, m, &l->adapt_ff_down, &l->adapt_ff_up, qkv_nn_linear_forward(ctx, &l->out, h));
        x = qkv_nn_layer_norm_forward(ctx, &l->out_ln, qkv_add(ctx, drop(ctx, h, p), x));
    }
    if (!x) return qkv_last_status();
    out->last_hidden_state = x;
    if (m->has_pooler) {
        qkv_tensor *first = qkv_reshape(ctx, qkv_slice(ctx, x, 1, 0, 1, 1), QKV_DIMS(b->B, m->cfg.hidden_size));
        out->pooler_output = qkv_tanh(ctx, qkv_nn_linear_forward(ctx, &m->pooler, first));
        if (!out->pooler_output) return qkv_last_status();
    }
    return QKV_OK;
}
