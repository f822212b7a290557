/* BERT for pretraining (include/qkv/bert.h) and its model type "bert" (task "pretrain"). The encoder is the Hugging
 * Face loader's BERT (hf_bert.c) built into the run's parameters under "bert.", so a pretrained run and a hub
 * checkpoint share one forward; this file adds the masked-LM and next-sentence heads under HF's "cls." names. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/bert_internal.h"
#include "models/hf_internal.h"
#include "qkv/bert.h"
#include "qkv/model.h"
#include "qkv/ops.h"
#include "qkv/safetensors.h"
#include "qkv/schema.h"

struct qkv_bert {
    qkv_bert_config cfg;
    qkv_hf_model *enc;
    qkv_nn_linear transform, nsp;
    qkv_nn_layer_norm transform_ln;
    qkv_tensor *mlm_bias;
};

qkv_bert_config qkv_bert_config_default(int64_t vocab_size, int64_t hidden, int64_t layers, int64_t heads) {
    return (qkv_bert_config){.vocab_size = vocab_size, .hidden_size = hidden, .num_layers = layers,
                             .num_heads = heads, .intermediate_size = 4 * hidden, .max_positions = 512,
                             .type_vocab_size = 2, .layer_norm_eps = 1e-12f, .hidden_dropout = 0.1f,
                             .attn_dropout = 0.1f, .initializer_range = 0.02f, .activation = QKV_ACT_GELU,
                             .nsp = true, .pad_token_id = 0};
}

static qkv_status check_config(const qkv_bert_config *c) {
    if (c->vocab_size < 1 || c->hidden_size < 1 || c->num_heads < 1 || c->hidden_size % c->num_heads)
        return qkv_error_set(QKV_ERR_INVALID, "bert: vocab_size %lld must be >= 1 and hidden_size %lld a positive "
                             "multiple of num_heads %lld", (long long)c->vocab_size, (long long)c->hidden_size,
                             (long long)c->num_heads);
    if (c->num_layers < 1 || c->num_layers > QKV_HF_MAX_LAYERS || c->intermediate_size < 1 || c->max_positions < 1 ||
        c->type_vocab_size < 1)
        return qkv_error_set(QKV_ERR_INVALID, "bert: num_layers %lld outside [1, %d], or intermediate_size %lld, "
                             "max_positions %lld, type_vocab_size %lld not positive", (long long)c->num_layers,
                             QKV_HF_MAX_LAYERS, (long long)c->intermediate_size, (long long)c->max_positions,
                             (long long)c->type_vocab_size);
    if (!(c->hidden_dropout >= 0.0f && c->hidden_dropout < 1.0f) || !(c->attn_dropout >= 0.0f && c->attn_dropout < 1.0f))
        return qkv_error_set(QKV_ERR_INVALID, "bert: dropout %g / attention dropout %g outside [0, 1)",
                             (double)c->hidden_dropout, (double)c->attn_dropout);
    if (c->pad_token_id < 0 || c->pad_token_id >= c->vocab_size)
        return qkv_error_set(QKV_ERR_INVALID, "bert: pad_token_id %d outside the vocabulary", (int)c->pad_token_id);
    return QKV_OK;
}

static qkv_hf_config hf_config(const qkv_bert_config *c) {
    return (qkv_hf_config){.arch = QKV_HF_BERT, .vocab_size = c->vocab_size, .hidden_size = c->hidden_size,
                           .num_layers = c->num_layers, .num_heads = c->num_heads,
                           .intermediate_size = c->intermediate_size, .max_positions = c->max_positions,
                           .type_vocab_size = c->type_vocab_size, .layer_norm_eps = c->layer_norm_eps,
                           .activation = c->activation, .pad_token_id = c->pad_token_id,
                           .scale_attn_weights = true, .tie_word_embeddings = true};
}

qkv_hf_model *qkv__bert_encoder_new(const qkv_bert_config *cfg, qkv_params *params, qkv_rng *rng) {
    if (check_config(cfg)) return NULL;
    int first = qkv_params_count(params);
    qkv_hf_config hc = hf_config(cfg);
    qkv_hf_model *enc = qkv__hf_model_in(&hc, params, "bert.");
    /* HF's _init_weights: every matrix normal(0, initializer_range), in the order the parameters were added. */
    for (int i = first; enc && i < qkv_params_count(params); i++) {
        qkv_tensor *t = qkv_params_at(params, i);
        if (t->ndim == 2) qkv_rng_fill_normal(rng, t, 0.0f, cfg->initializer_range);
    }
    if (!enc || cfg->adapter_dim <= 0) return enc;
    enc->adapter_dim = cfg->adapter_dim;
    qkv_status st = QKV_OK;
    for (int i = 0; !st && i < cfg->num_layers; i++) {
        hf_bert_layer *l = &enc->bert[i];
        qkv_nn_linear *ls[4] = {&l->adapt_attn_down, &l->adapt_attn_up, &l->adapt_ff_down, &l->adapt_ff_up};
        const char *where[2] = {"attention.output", "output"};
        for (int k = 0; !st && k < 4; k++) {
            char name[96];
            snprintf(name, sizeof name, "encoder.layer.%d.%s.adapter.%s", i, where[k / 2], k % 2 ? "up" : "down");
            int64_t in = k % 2 ? cfg->adapter_dim : cfg->hidden_size, out = k % 2 ? cfg->hidden_size : cfg->adapter_dim;
            st = qkv__hf_add_linear(enc, ls[k], name, in, out, true);
            /* near the identity: the adapter's output starts as its input */
            if (!st) qkv_rng_fill_normal(rng, ls[k]->weight, 0.0f, 1e-3f);
        }
    }
    if (st) {
        qkv_hf_free(enc);
        return NULL;
    }
    return enc;
}

qkv_bert *qkv_bert_new(const qkv_bert_config *cfg, qkv_params *params, qkv_rng *rng) {
    if (!cfg || !params || !rng) {
        qkv_error_set(QKV_ERR_INVALID, "bert: config, params or rng is NULL");
        return NULL;
    }
    if (check_config(cfg)) return NULL;
    qkv_bert *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "bert: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    qkv_hf_config hc = hf_config(cfg);
    int64_t E = cfg->hidden_size;
    qkv_status st = (m->enc = qkv__bert_encoder_new(cfg, params, rng)) ? QKV_OK : qkv_last_status();
    int first = qkv_params_count(params);
    /* The heads through the same helpers, with no prefix of their own: HF's names start at "cls.". */
    qkv_hf_model heads = {.cfg = hc, .params = params};
    if (!st) st = qkv__hf_add_linear(&heads, &m->transform, "cls.predictions.transform.dense", E, E, true);
    if (!st) st = qkv__hf_add_layer_norm(&heads, &m->transform_ln, "cls.predictions.transform.LayerNorm", E);
    if (!st && !(m->mlm_bias = qkv_params_add(params, "cls.predictions", "bias", QKV_DIMS(cfg->vocab_size))))
        st = qkv_last_status();
    if (!st && cfg->nsp) st = qkv__hf_add_linear(&heads, &m->nsp, "cls.seq_relationship", E, 2, true);
    if (st) {
        qkv_bert_free(m);
        return NULL;
    }
    for (int i = first; i < qkv_params_count(params); i++) {
        qkv_tensor *t = qkv_params_at(params, i);
        if (t->ndim == 2) qkv_rng_fill_normal(rng, t, 0.0f, cfg->initializer_range);
    }
    return m;
}

void qkv_bert_free(qkv_bert *m) {
    if (!m) return;
    qkv_hf_free(m->enc);
    free(m);
}

const qkv_bert_config *qkv_bert_config_of(const qkv_bert *m) { return m ? &m->cfg : NULL; }

static qkv_status check_bt(const char *what, const qkv_tensor *t, const qkv_tensor *ids) {
    if (!t) return QKV_OK;
    if (t->ndim != 2 || t->shape[0] != ids->shape[0] || t->shape[1] != ids->shape[1] || !qkv_is_contiguous(t))
        return qkv_error_set(QKV_ERR_INVALID, "bert: %s must be a contiguous [B, T] tensor like the ids", what);
    return QKV_OK;
}

qkv_status qkv__bert_encode(qkv_ctx *ctx, const qkv_hf_model *enc, const qkv_bert_config *c,
                            const qkv_bert_inputs *in, bool output_attentions, qkv_hf_outputs *out) {
    memset(out, 0, sizeof *out);
    const qkv_tensor *ids = in->ids;
    if (ids->dtype != QKV_I32 || ids->ndim != 2 || !qkv_is_contiguous(ids))
        return qkv_error_set(QKV_ERR_INVALID, "bert forward: ids must be contiguous int32 [B, T]");
    qkv_status st;
    if ((st = check_bt("type_ids", in->type_ids, ids)) || (st = check_bt("mask", in->mask, ids)) ||
        (st = check_bt("mlm_labels", in->mlm_labels, ids)))
        return st;
    int64_t B = ids->shape[0], T = ids->shape[1], V = c->vocab_size;
    const int32_t *idv = qkv_i32(ids);
    for (int64_t i = 0; i < B * T; i++)
        if (idv[i] < 0 || idv[i] >= V)
            return qkv_error_set(QKV_ERR_RANGE, "bert forward: id %d at [%lld, %lld] outside the vocabulary [0, %lld)",
                                 (int)idv[i], (long long)(i / T), (long long)(i % T), (long long)V);
    if (in->type_ids) {
        const int32_t *tv = qkv_i32(in->type_ids);
        for (int64_t i = 0; i < B * T; i++)
            if (tv[i] < 0 || tv[i] >= c->type_vocab_size)
                return qkv_error_set(QKV_ERR_RANGE, "bert forward: segment id %d outside [0, %lld)", (int)tv[i],
                                     (long long)c->type_vocab_size);
    }
    hf_batch hb = {.B = B, .T = T, .ids = (qkv_tensor *)ids, .type_ids = in->type_ids,
                   .hidden_dropout = c->hidden_dropout, .attn_dropout = c->attn_dropout};
    if (in->mask) {
        if (!(hb.key_padding = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T)))) return qkv_last_status();
        int32_t *kp = qkv_i32(hb.key_padding);
        for (int64_t i = 0; i < B * T; i++)
            kp[i] = in->mask->dtype == QKV_I32 ? qkv_i32(in->mask)[i] == 0 : qkv_f32(in->mask)[i] == 0.0f;
    }
    out->n_layers = (int)c->num_layers;
    return qkv__hf_bert_forward(ctx, enc, &hb, output_attentions, out);
}

void qkv__bert_maps(const qkv_hf_outputs *o, qkv_attention_maps *maps) {
    maps->n_layers = o->n_layers;
    for (int i = 0; i < o->n_layers && i < QKV_ATTENTION_MAPS_MAX; i++) {
        maps->kind[i] = "self";
        maps->weights[i] = o->attentions[i];
        snprintf(maps->name[i], sizeof maps->name[i], "layer %d", i);
    }
}

qkv_status qkv_bert_forward(qkv_ctx *ctx, const qkv_bert *m, const qkv_bert_inputs *in, bool output_attentions,
                            qkv_bert_outputs *out) {
    if (!ctx || !m || !in || !in->ids || !out) return qkv_error_set(QKV_ERR_INVALID, "bert forward: NULL argument");
    memset(out, 0, sizeof *out);
    const qkv_tensor *ids = in->ids;
    qkv_hf_outputs ho;
    qkv_status st = qkv__bert_encode(ctx, m->enc, &m->cfg, in, output_attentions, &ho);
    if (st) return st;
    int64_t B = ids->shape[0], T = ids->shape[1], E = m->cfg.hidden_size, V = m->cfg.vocab_size;
    out->hidden = ho.last_hidden_state;
    out->n_layers = ho.n_layers;
    for (int i = 0; i < ho.n_layers && i < 64; i++) out->attentions[i] = ho.attentions[i];
    if (m->cfg.nsp) out->nsp_logits = qkv_nn_linear_forward(ctx, &m->nsp, ho.pooler_output);
    if (in->mlm_labels) {
        const int32_t *lab = qkv_i32(in->mlm_labels);
        int64_t P = 0;
        for (int64_t i = 0; i < B * T; i++) P += lab[i] != -100;
        if (!P) return qkv_error_set(QKV_ERR_INVALID, "bert forward: no masked position in the batch (every label is -100)");
        qkv_tensor *rows = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(P));
        qkv_tensor *tgt = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(P));
        if (!rows || !tgt) return qkv_last_status();
        for (int64_t i = 0, k = 0; i < B * T; i++)
            if (lab[i] != -100) {
                if (lab[i] < 0 || lab[i] >= V)
                    return qkv_error_set(QKV_ERR_RANGE, "bert forward: MLM label %d outside the vocabulary", (int)lab[i]);
                qkv_i32(rows)[k] = (int32_t)i, qkv_i32(tgt)[k++] = lab[i];
            }
        qkv_tensor *h = qkv_index_select(ctx, qkv_reshape(ctx, out->hidden, QKV_DIMS(B * T, E)), 0, rows);
        h = qkv_nn_layer_norm_forward(
            ctx, &m->transform_ln,
            qkv_nn_activate(ctx, m->cfg.activation, qkv_nn_linear_forward(ctx, &m->transform, h)));
        /* The decoder is the token embedding itself ([V, E], a Linear weight's layout) plus the head's bias. */
        out->mlm_logits = qkv_linear(ctx, h, m->enc->word.weight, m->mlm_bias);
        out->mlm_targets = tgt;
        if (!out->mlm_logits) return qkv_last_status();
    }
    if (m->cfg.nsp && !out->nsp_logits) return qkv_last_status();
    return QKV_OK;
}

qkv_tensor *qkv_bert_pretrain_loss(qkv_ctx *ctx, const qkv_bert *m, const qkv_bert_inputs *in, qkv_tensor *nsp_labels,
                                   qkv_tensor **mlm, qkv_tensor **nsp) {
    if (mlm) *mlm = NULL;
    if (nsp) *nsp = NULL;
    if (!in || !in->mlm_labels) {
        qkv_error_set(QKV_ERR_INVALID, "bert pretrain loss: no MLM labels");
        return NULL;
    }
    qkv_bert_outputs o;
    if (qkv_bert_forward(ctx, m, in, false, &o)) return NULL;
    qkv_tensor *lm = qkv_cross_entropy(ctx, o.mlm_logits, o.mlm_targets, NULL), *ns = NULL;
    if (mlm) *mlm = lm;
    if (!m->cfg.nsp || !nsp_labels) return lm;
    if (nsp_labels->dtype != QKV_I32 || nsp_labels->ndim != 1 || nsp_labels->shape[0] != in->ids->shape[0]) {
        qkv_error_set(QKV_ERR_INVALID, "bert pretrain loss: NSP labels must be int32 [B]");
        return NULL;
    }
    ns = qkv_cross_entropy(ctx, o.nsp_logits, nsp_labels, NULL);
    if (nsp) *nsp = ns;
    return qkv_add(ctx, lm, ns);
}

/* ---- Hugging Face files ---------------------------------------------------------------------------------------- */

qkv_status qkv_bert_write_hf_config(const qkv_bert_config *c, const char *path) {
    if (!c || !path) return qkv_error_set(QKV_ERR_INVALID, "bert config: NULL argument");
    cJSON *j = cJSON_CreateObject(), *arch = cJSON_CreateArray();
    if (!j || !arch) {
        cJSON_Delete(j);
        cJSON_Delete(arch);
        return qkv_error_set(QKV_ERR_NOMEM, "bert config: out of memory");
    }
    cJSON_AddItemToArray(arch, cJSON_CreateString(c->nsp ? "BertForPreTraining" : "BertForMaskedLM"));
    cJSON_AddItemToObject(j, "architectures", arch);
    cJSON_AddStringToObject(j, "model_type", "bert");
    cJSON_AddNumberToObject(j, "vocab_size", (double)c->vocab_size);
    cJSON_AddNumberToObject(j, "hidden_size", (double)c->hidden_size);
    cJSON_AddNumberToObject(j, "num_hidden_layers", (double)c->num_layers);
    cJSON_AddNumberToObject(j, "num_attention_heads", (double)c->num_heads);
    cJSON_AddNumberToObject(j, "intermediate_size", (double)c->intermediate_size);
    cJSON_AddStringToObject(j, "hidden_act", c->activation == QKV_ACT_GELU_TANH ? "gelu_new"
                                             : c->activation == QKV_ACT_RELU    ? "relu"
                                                                                : "gelu");
    cJSON_AddNumberToObject(j, "hidden_dropout_prob", (double)c->hidden_dropout);
    cJSON_AddNumberToObject(j, "attention_probs_dropout_prob", (double)c->attn_dropout);
    cJSON_AddNumberToObject(j, "max_position_embeddings", (double)c->max_positions);
    cJSON_AddNumberToObject(j, "type_vocab_size", (double)c->type_vocab_size);
    cJSON_AddNumberToObject(j, "initializer_range", (double)c->initializer_range);
    cJSON_AddNumberToObject(j, "layer_norm_eps", (double)c->layer_norm_eps);
    cJSON_AddNumberToObject(j, "pad_token_id", (double)c->pad_token_id);
    cJSON_AddStringToObject(j, "position_embedding_type", "absolute");
    cJSON_AddBoolToObject(j, "tie_word_embeddings", true);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return qkv_error_set(QKV_ERR_NOMEM, "bert config: out of memory");
    FILE *f = fopen(path, "wb");
    qkv_status st = QKV_OK;
    if (!f) st = qkv_error_set(QKV_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    else if (fprintf(f, "%s\n", text) < 0 || fclose(f)) st = qkv_error_set(QKV_ERR_IO, "%s: write error", path);
    cJSON_free(text);
    return st;
}

qkv_status qkv_bert_save_hf(const qkv_bert_config *cfg, const qkv_params *params, const char *dir) {
    if (!cfg || !params || !dir) return qkv_error_set(QKV_ERR_INVALID, "bert save: NULL argument");
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    qkv_status st = qkv_bert_write_hf_config(cfg, path);
    if (st) return st;
    qkv_st_writer *w = qkv_st_writer_new();
    if (!w) return qkv_last_status();
    st = qkv_st_writer_meta(w, "format", "pt");
    for (int i = 0; !st && i < qkv_params_count(params); i++) {
        qkv_tensor *t = qkv_params_at(params, i);
        if (!strncmp(t->name, "bert.", 5) || !strncmp(t->name, "cls.", 4)) st = qkv_st_writer_add(w, t->name, t);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!st) st = qkv_st_writer_save(w, path);
    qkv_st_writer_free(w);
    return st;
}

/* ---- The model type -------------------------------------------------------------------------------------------- */

typedef struct bert_opts {
    int64_t d_model, n_layers, n_heads, d_ff, max_positions, type_vocab_size;
    double dropout, attn_dropout, layer_norm_eps, init_std;
    int64_t adapter_dim;
    const char *activation;
    bool nsp;
} bert_opts;

static const qkv_field fields[] = {
    QKV_FIELD_INT(bert_opts, d_model, "d_model", 256, 1, 1 << 16, "hidden size (HF hidden_size)"),
    QKV_FIELD_INT(bert_opts, n_layers, "n_layers", 4, 1, QKV_HF_MAX_LAYERS, "encoder layers (num_hidden_layers)"),
    QKV_FIELD_INT(bert_opts, n_heads, "n_heads", 4, 1, 1024, "attention heads (num_attention_heads)"),
    QKV_FIELD_INT(bert_opts, d_ff, "d_ff", 1024, 1, 1 << 20, "feed-forward width (intermediate_size)"),
    QKV_FIELD_INT(bert_opts, max_positions, "max_positions", 512, 1, 1 << 16,
                  "position table (max_position_embeddings); at least data.max_len"),
    QKV_FIELD_INT(bert_opts, type_vocab_size, "type_vocab_size", 2, 1, 16, "segment ids (type_vocab_size)"),
    QKV_FIELD_NUM(bert_opts, dropout, "dropout", 0.1, 0, 1, QKV_FIELD_HI_OPEN, "hidden_dropout_prob"),
    QKV_FIELD_NUM(bert_opts, attn_dropout, "attn_dropout", 0.1, 0, 1, QKV_FIELD_HI_OPEN,
                  "attention_probs_dropout_prob"),
    QKV_FIELD_NUM(bert_opts, layer_norm_eps, "layer_norm_eps", 1e-12, 0, 1, QKV_FIELD_LO_OPEN, "LayerNorm epsilon"),
    QKV_FIELD_NUM(bert_opts, init_std, "init_std", 0.02, 0, 1, QKV_FIELD_LO_OPEN,
                  "initializer_range: weights normal(0, init_std)"),
    QKV_FIELD_CHOICE(bert_opts, activation, "activation", "gelu", "gelu|gelu_tanh|relu", "feed-forward activation"),
    QKV_FIELD_INT(bert_opts, adapter_dim, "adapter_dim", 0, 0, 1 << 16,
                  "Houlsby adapter bottleneck in every layer (0 = none; finetune.mode adapters trains them)"),
    QKV_FIELD_BOOL(bert_opts, nsp, "nsp", true,
                   "next-sentence head and loss (false: MLM only, RoBERTa-style; set data.nsp false too)"),
};

static qkv_status check_opts(const void *p) {
    const bert_opts *o = p;
    if (o->d_model % o->n_heads)
        return qkv_error_set(QKV_ERR_INVALID, "model.d_model %lld must be a multiple of model.n_heads %lld",
                             (long long)o->d_model, (long long)o->n_heads);
    return QKV_OK;
}

const qkv_schema qkv__bert_schema = QKV_SCHEMA("model", bert_opts, fields, check_opts);
/* The same fields but the last ("nsp"): a fine-tuning head has no pretraining heads to choose. */
const qkv_schema qkv__bert_encoder_schema = {"model", fields, (int)(sizeof fields / sizeof fields[0]) - 1,
                                             sizeof(bert_opts), check_opts};
static char defaults_json[QKV_MODEL_DEFAULTS_MAX];

qkv_status qkv__bert_config_from(const qkv_schema *s, const cJSON *cfg, const qkv_task_info *info,
                                 qkv_bert_config *c) {
    bert_opts o;
    memset(&o, 0, sizeof o);
    qkv_status st = qkv_model_config(s, cfg, &o);
    if (st) return st;
    if (info->max_len > o.max_positions)
        return qkv_error_set(QKV_ERR_INVALID, "model.max_positions %lld is shorter than the data's sequences (%lld "
                             "tokens)", (long long)o.max_positions, (long long)info->max_len);
    *c = qkv_bert_config_default(info->vocab_size, o.d_model, o.n_layers, o.n_heads);
    c->intermediate_size = o.d_ff, c->max_positions = o.max_positions, c->type_vocab_size = o.type_vocab_size;
    c->hidden_dropout = (float)o.dropout, c->attn_dropout = (float)o.attn_dropout;
    c->layer_norm_eps = (float)o.layer_norm_eps, c->initializer_range = (float)o.init_std;
    c->nsp = s == &qkv__bert_schema && o.nsp;
    c->pad_token_id = info->pad_id >= 0 ? info->pad_id : 0;
    c->adapter_dim = o.adapter_dim;
    qkv_activation_parse(o.activation, &c->activation);
    return QKV_OK;
}

struct qkv_model {
    qkv_bert *bert;
};

static qkv_model *bert_create(const cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng) {
    if (!info || !params || !rng) {
        qkv_error_set(QKV_ERR_INVALID, "bert: task info, params or rng is NULL");
        return NULL;
    }
    qkv_bert_config c;
    if (qkv__bert_config_from(&qkv__bert_schema, cfg, info, &c)) return NULL;
    qkv_model *m = calloc(1, sizeof *m);
    if (!m) {
        qkv_error_set(QKV_ERR_NOMEM, "bert: out of memory");
        return NULL;
    }
    if (!(m->bert = qkv_bert_new(&c, params, rng))) {
        free(m);
        return NULL;
    }
    return m;
}

static void bert_free(qkv_model *m) {
    if (!m) return;
    qkv_bert_free(m->bert);
    free(m);
}

static qkv_bert_inputs inputs_of(const qkv_batch *b, bool with_labels) {
    return (qkv_bert_inputs){.ids = b->ids, .type_ids = b->type_ids, .mask = b->mask,
                             .mlm_labels = with_labels ? b->targets : NULL};
}

static qkv_tensor *bert_loss(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b) {
    if (!b || !b->ids || !b->targets) {
        qkv_error_set(QKV_ERR_INVALID, "bert: a pretraining batch needs ids and MLM targets");
        return NULL;
    }
    qkv_bert_inputs in = inputs_of(b, true);
    return qkv_bert_pretrain_loss(ctx, m->bert, &in, b->labels, NULL, NULL);
}

/* With targets: the MLM logits [P, V] of the masked positions (row-major order); without: the NSP logits [B, 2]
 * (the last hidden state [B, T, E] for a model without the NSP head). */
static qkv_tensor *bert_fwd(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b, qkv_attention_maps *maps) {
    if (!b || !b->ids) {
        qkv_error_set(QKV_ERR_INVALID, "bert: batch has no ids");
        return NULL;
    }
    qkv_bert_inputs in = inputs_of(b, b->targets != NULL);
    qkv_bert_outputs o;
    if (qkv_bert_forward(ctx, m->bert, &in, maps != NULL, &o)) return NULL;
    if (maps) {
        qkv_hf_outputs ho = {.n_layers = o.n_layers};
        for (int i = 0; i < o.n_layers; i++) ho.attentions[i] = o.attentions[i];
        qkv__bert_maps(&ho, maps);
    }
    return b->targets ? o.mlm_logits : o.nsp_logits ? o.nsp_logits : o.hidden;
}

/* The last hidden state alone (no MLM or NSP head): the input of a task's own head (the qa task's qa_outputs). */
static qkv_tensor *bert_features(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b) {
    if (!b || !b->ids) {
        qkv_error_set(QKV_ERR_INVALID, "bert: batch has no ids");
        return NULL;
    }
    qkv_bert_inputs in = inputs_of(b, false);
    qkv_hf_outputs ho;
    return qkv__bert_encode(ctx, m->bert->enc, &m->bert->cfg, &in, false, &ho) ? NULL : ho.last_hidden_state;
}

static void bert_info(const qkv_model *m, qkv_model_info *out) {
    out->max_positions = m->bert->cfg.max_positions;
    out->features_dim = m->bert->cfg.hidden_size;
}

static qkv_status bert_save_pretrained(const qkv_model *m, const qkv_params *params, const char *dir) {
    return qkv_bert_save_hf(&m->bert->cfg, params, dir);
}

/* Paths are relative to the directory qkv runs in (the checkout beside ../shared, as every doc's commands assume).
 * The cosine ends at step 10,500 because 60 minutes on 2 cores make ~11,400 steps (docs/bert.md): the learning rate
 * should be low when the time budget, not the step count, ends the run. */
static const qkv_model_preset bert_presets[] = {
    {"bert_small", "BERT pretraining on the English text of ../shared/data: d 256, 4 layers, 4 heads, seq 128, 60 min",
     "{\"model\": {\"type\": \"bert\", \"d_model\": 256, \"n_layers\": 4, \"n_heads\": 4, \"d_ff\": 1024,"
     " \"max_positions\": 128},"
     " \"data\": {\"train\": \"../shared/data\", \"max_len\": 128, \"wordpiece_vocab_size\": 16000,"
     " \"heldout\": 0.01, \"mask_prob\": 0.15, \"max_predictions\": 20, \"nsp\": true, \"masking\": \"epoch\"},"
     " \"train\": {\"steps\": 1000000, \"max_seconds\": 3600, \"batch_size\": 32,"
     " \"optimizer\": {\"name\": \"adamw\", \"lr\": 0.0005, \"weight_decay\": 0.01, \"beta2\": 0.98, \"eps\": 1e-6},"
     " \"schedule\": {\"spec\": \"warmup_cosine\", \"warmup_steps\": 1000, \"total_steps\": 10500,"
     " \"min_ratio\": 0.1}, \"clip_norm\": 1.0,"
     " \"log_every\": 50, \"checkpoint_every\": 1000},"
     " \"eval\": {\"every\": 1000, \"batch_size\": 64, \"max_batches\": 30}, \"seed\": 1}"},
    {NULL, NULL, NULL}};

static const qkv_model_embedding bert_embeddings[] = {
    {"bert.embeddings.word_embeddings.weight", "input", NULL}, {NULL, NULL, NULL}};

const qkv_model_type qkv_model_bert = {
    .name = "bert",
    .task = "pretrain",
    .summary = "BERT pretraining (masked LM + next sentence), Hugging Face BertForPreTraining names",
    .config = &qkv__bert_schema,
    .default_config = defaults_json,
    .data_defaults = NULL,
    .create = bert_create,
    .free = bert_free,
    .loss = bert_loss,
    .forward = bert_fwd,
    .embeddings = bert_embeddings,
    .features = bert_features,
    .info = bert_info,
    .save_pretrained = bert_save_pretrained,
    .presets = bert_presets,
};
