/* Hugging Face base models (hf.h): construction, input checks and forward dispatch. The architectures are in
 * hf_bert.c and hf_gpt2.c, on the layer helpers of hf_layers.c; config.json is hf_config.c, loading hf_load.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/hf_internal.h"
#include "qkv/ops.h"

qkv_hf_model *qkv_hf_model_new(const qkv_hf_config *cfg) {
    if (!cfg) {
        qkv_error_set(QKV_ERR_INVALID, "hf model: config is NULL");
        return NULL;
    }
    if (cfg->hidden_size < 1 || cfg->num_heads < 1 || cfg->hidden_size % cfg->num_heads || cfg->num_layers < 1 ||
        cfg->num_layers > QKV_HF_MAX_LAYERS || cfg->vocab_size < 1 || cfg->max_positions < 1 ||
        cfg->intermediate_size < 1) {
        qkv_error_set(QKV_ERR_INVALID, "hf model: inconsistent config (hidden %lld, heads %lld, layers %lld, vocab "
                      "%lld, positions %lld, intermediate %lld)", (long long)cfg->hidden_size,
                      (long long)cfg->num_heads, (long long)cfg->num_layers, (long long)cfg->vocab_size,
                      (long long)cfg->max_positions, (long long)cfg->intermediate_size);
        return NULL;
    }
    qkv_hf_model *m = calloc(1, sizeof *m);
    if (!m || !(m->params = qkv_params_new())) {
        free(m);
        qkv_error_set(QKV_ERR_NOMEM, "hf model: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    qkv_status st = cfg->arch == QKV_HF_GPT2 ? qkv__hf_gpt2_build(m) : qkv__hf_bert_build(m);
    if (st) {
        qkv_hf_free(m);
        return NULL;
    }
    return m;
}

qkv_hf_model *qkv__hf_model_in(const qkv_hf_config *cfg, qkv_params *params, const char *name_prefix) {
    if (!cfg || !params || !name_prefix || cfg->arch == QKV_HF_GPT2) {
        qkv_error_set(QKV_ERR_INVALID, "hf model: a BERT config, parameters and a name prefix are needed");
        return NULL;
    }
    qkv_hf_model *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "hf model: out of memory");
        return NULL;
    }
    m->cfg = *cfg, m->params = params, m->params_borrowed = true;
    if ((size_t)snprintf(m->name_prefix, sizeof m->name_prefix, "%s", name_prefix) >= sizeof m->name_prefix) {
        free(m);
        qkv_error_set(QKV_ERR_INVALID, "hf model: name prefix '%s' is too long", name_prefix);
        return NULL;
    }
    if (qkv__hf_bert_build(m)) {
        free(m);
        return NULL;
    }
    return m;
}

void qkv_hf_free(qkv_hf_model *m) {
    if (!m) return;
    if (!m->params_borrowed) qkv_params_free(m->params);
    free(m);
}

const qkv_hf_config *qkv_hf_config_of(const qkv_hf_model *m) { return m ? &m->cfg : NULL; }
qkv_params *qkv_hf_params(qkv_hf_model *m) { return m ? m->params : NULL; }
bool qkv_hf_has_pooler(const qkv_hf_model *m) { return m && m->has_pooler; }

qkv_status qkv_hf_check_vocab(const qkv_hf_model *m, int64_t tokenizer_vocab_size) {
    if (!m) return qkv_error_set(QKV_ERR_INVALID, "hf check_vocab: model is NULL");
    if (tokenizer_vocab_size < 1 || tokenizer_vocab_size > m->cfg.vocab_size)
        return qkv_error_set(QKV_ERR_INVALID, "the tokenizer has %lld tokens but the %s model's embedding table has "
                             "%lld rows (vocab_size)", (long long)tokenizer_vocab_size,
                             qkv_hf_arch_name(m->cfg.arch), (long long)m->cfg.vocab_size);
    return QKV_OK;
}

static qkv_status check_bt(const char *what, const qkv_tensor *t, const qkv_tensor *ids, bool allow_f32) {
    char s[96];
    if (t->ndim != 2 || t->shape[0] != ids->shape[0] || t->shape[1] != ids->shape[1] ||
        !(t->dtype == QKV_I32 || (allow_f32 && t->dtype == QKV_F32)))
        return qkv_error_set(QKV_ERR_INVALID, "hf forward: %s must be %s [%lld, %lld] like input_ids, got %s %s", what,
                             allow_f32 ? "int32 or float32" : "int32", (long long)ids->shape[0],
                             (long long)ids->shape[1], t->dtype == QKV_I32 ? "int32" : "float32",
                             qkv_shape_str(t, s, sizeof s));
    return QKV_OK;
}

/* Copy a [B, T] tensor of any strides into a contiguous int32 context tensor, mapping each value through f. */
static qkv_tensor *to_i32(qkv_ctx *ctx, const qkv_tensor *t, bool padding_from_mask) {
    qkv_tensor *o = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(t->shape[0], t->shape[1]));
    if (!o) return NULL;
    int32_t *d = qkv_i32(o);
    for (int64_t i = 0; i < t->shape[0]; i++)
        for (int64_t j = 0; j < t->shape[1]; j++) {
            int64_t off = i * t->stride[0] + j * t->stride[1];
            double v = t->dtype == QKV_I32 ? qkv_i32(t)[off] : qkv_f32(t)[off];
            d[i * t->shape[1] + j] = padding_from_mask ? v == 0 : (int32_t)v;
        }
    return o;
}

qkv_status qkv_hf_forward(qkv_ctx *ctx, const qkv_hf_model *m, const qkv_hf_inputs *in, bool output_attentions,
                          qkv_hf_outputs *out) {
    if (!ctx || !m || !in || !in->input_ids || !out)
        return qkv_error_set(QKV_ERR_INVALID, "hf forward: NULL context, model, inputs or outputs");
    memset(out, 0, sizeof *out);
    const qkv_tensor *ids = in->input_ids;
    char s[96];
    if (ids->dtype != QKV_I32 || ids->ndim != 2 || ids->shape[0] < 1 || ids->shape[1] < 1)
        return qkv_error_set(QKV_ERR_INVALID, "hf forward: input_ids must be int32 [batch, length], got %s %s",
                             ids->dtype == QKV_I32 ? "int32" : "float32", qkv_shape_str(ids, s, sizeof s));
    qkv_status st;
    if (in->attention_mask && (st = check_bt("attention_mask", in->attention_mask, ids, true))) return st;
    if (in->token_type_ids && (st = check_bt("token_type_ids", in->token_type_ids, ids, false))) return st;
    hf_batch b = {.B = ids->shape[0], .T = ids->shape[1]};
    b.ids = to_i32(ctx, ids, false);
    if (!b.ids) return qkv_last_status();
    if (in->attention_mask && !(b.key_padding = to_i32(ctx, in->attention_mask, true))) return qkv_last_status();
    if (in->token_type_ids && !(b.type_ids = to_i32(ctx, in->token_type_ids, false))) return qkv_last_status();
    const int32_t *idv = qkv_i32(b.ids);
    for (int64_t i = 0; i < b.B * b.T; i++)
        if (idv[i] < 0 || idv[i] >= m->cfg.vocab_size)
            return qkv_error_set(QKV_ERR_RANGE, "hf forward: input id %d at [%lld, %lld] is outside the vocabulary "
                                 "[0, %lld)", (int)idv[i], (long long)(i / b.T), (long long)(i % b.T),
                                 (long long)m->cfg.vocab_size);
    out->n_layers = (int)m->cfg.num_layers;
    return m->cfg.arch == QKV_HF_GPT2 ? qkv__hf_gpt2_forward(ctx, m, &b, output_attentions, out)
                                      : qkv__hf_bert_forward(ctx, m, &b, output_attentions, out);
}
