/* Model types, as the training engine (src/train) and the qkv command line see them.
 *
 * A model type is a table of functions registered by name ("embmean", "transformer_classifier", "gpt", "rnnlm",
 * "lstm_seq2seq", "transformer_seq2seq", ...). The engine knows nothing else about a model: it builds one from the
 * "model" object of a run's JSON config, feeds it batches, asks for a loss to minimise and for outputs to score,
 * and saves its parameters. Each model's own file (src/models/<name>.c) defines its struct and a
 * `const qkv_model_type qkv_model_<name>` table; src/models/registry.c lists them.
 *
 * Ownership: create() returns a model that owns its internal state; its parameters live in the qkv_params the
 * caller passes (and owns). free() releases the model, not the parameters. */
#ifndef QKV_MODEL_H
#define QKV_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/autograd.h"
#include "qkv/decoder.h"
#include "qkv/params.h"
#include "qkv/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/* What a task hands a model. Fields a task does not use are NULL / 0. All tensors are context tensors, batch-major.
 *   classify : ids [B, T], mask [B, T] (1 = token), labels [B]
 *   lm       : ids [B, T] (inputs), targets [B, T] (next tokens), mask [B, T] (1 = count in the loss)
 *   seq2seq  : src_ids/src_mask [B, S], ids [B, T] (decoder inputs, shifted right), targets [B, T], mask [B, T]
 *   tagging  : ids/mask [B, T], targets [B, T] (one label per token)
 *   pairs    : ids/mask [B, T] the first texts, src_ids/src_mask [B, S] the second ones, labels [B] (1 = duplicate);
 *              training batches hold duplicates alone (src_ids NULL: a batch of single texts to embed)
 *   pretrain : ids/mask/type_ids [B, T] ([CLS] A [SEP] B [SEP] with masked tokens; segment 0 for A, 1 for B),
 *              targets [B, T] (the original token at masked positions, -100 elsewhere), labels [B] (NSP: 0 = B
 *              follows A, 1 = B is random; NULL without NSP) */
typedef struct qkv_batch {
    qkv_tensor *ids, *mask, *labels, *targets;
    qkv_tensor *src_ids, *src_mask;
    qkv_tensor *weights; /* optional per-token loss weights [B, T] (e.g. summary-only loss) */
    qkv_tensor *spans;   /* qa: gold answer start and end positions [B, 2] (int32) */
    qkv_tensor *allowed; /* qa: [B, T] 1 where an answer may be (the context's tokens) */
    qkv_tensor *type_ids; /* optional segment ids [B, T] (BERT's token types) */
    int64_t n_tokens;    /* tokens counted by the loss (for throughput and perplexity) */
} qkv_batch;

/* Sizes a model needs from the data pipeline. */
typedef struct qkv_task_info {
    int64_t vocab_size;     /* input (or shared) vocabulary */
    int64_t tgt_vocab_size; /* seq2seq target vocabulary (0 = shared) */
    int64_t n_classes;      /* classify / tagging */
    int32_t pad_id;         /* padding id of the vocabulary (ids at masked positions) */
    int64_t max_len;        /* longest sequence the data pipeline will produce */
} qkv_task_info;

typedef struct qkv_model qkv_model; /* opaque: each model type's own struct */

/* Slots of qkv_attention_maps: a 64-layer encoder-decoder's cross, encoder and decoder maps. */
#define QKV_ATTENTION_MAPS_MAX 192

/* Attention weights a model can return for the viewer: per layer, per head, [B, H, Tq, Tk] context tensors. The model
 * names each map for display ("layer 3", "encoder 2 self", "decoder 1 cross", "attention"), so the viewer needs to
 * know nothing about its architecture; an empty name leaves the choice to the viewer. */
#define QKV_ATTENTION_MAP_NAME 32
typedef struct qkv_attention_maps {
    int n_layers;
    const char *kind[QKV_ATTENTION_MAPS_MAX];   /* "self", "causal", "cross" */
    qkv_tensor *weights[QKV_ATTENTION_MAPS_MAX];
    char name[QKV_ATTENTION_MAPS_MAX][QKV_ATTENTION_MAP_NAME];
} qkv_attention_maps;

/* Sizes of a built model that callers outside src/models may need. */
typedef struct qkv_model_info {
    int64_t max_positions; /* longest sequence one forward takes (a Transformer's positions table), 0 = no limit */
    int64_t features_dim;  /* width of the features() states, 0 = none */
} qkv_model_info;

/* A token embedding matrix of a model type: where pretrained word vectors go (the run's "embeddings" option,
 * docs/training.md). The row of token id i is that token's vector. */
typedef struct qkv_model_embedding {
    const char *param;    /* parameter name, e.g. "embedding.weight"; NULL ends a list */
    const char *vocab;    /* whose tokens index the rows: "input" (the task's vocabulary; seq2seq: the source's) or
                           * "target" (seq2seq's target vocabulary, the same one when data.shared_vocab) */
    const char *tied_key; /* boolean key of the model config that, when true, makes this matrix the output
                           * projection too (gpt's "tied"), or NULL when it never is */
} qkv_model_embedding;

struct qkv_schema;

/* A named ready-made run config a model file offers (`qkv config list / show NAME`): the JSON text of the part of
 * a whole run config ("model" with its "type", "data", "train", "eval", ...) that differs from the defaults; the
 * config module resolves it like a user's config. Paths are relative to the directory qkv runs in. */
typedef struct qkv_model_preset {
    const char *name;    /* NULL ends a list */
    const char *summary; /* one line for `qkv config list` */
    const char *json;
} qkv_model_preset;

/* Size of a model file's buffer for its rendered default_config. */
#define QKV_MODEL_DEFAULTS_MAX 2048

typedef struct qkv_model_type {
    const char *name;    /* config "model.type" */
    const char *task;    /* "classify", "lm", "seq2seq", "tagging", "pairs" */
    const char *summary; /* one line for `qkv config show` */
    /* The "model" object's fields, declared once (include/qkv/schema.h): defaults, allowed values, docs, and the
     * rules between fields. `qkv config show / check / explain` and create() all go through it. */
    const struct qkv_schema *config;
    /* The defaults as JSON text, derived from `config`: a char[QKV_MODEL_DEFAULTS_MAX] of the model's file that the
     * registry renders on the first lookup (qkv_model_type_find / _at). Kept for readers of the JSON text. */
    const char *default_config;
    /* Overrides of the engine's "data" defaults this model needs, as a JSON object text, or NULL; e.g.
     * {"cls_token": true} for a classifier that reads position 0. Users can still set them explicitly. */
    const char *data_defaults;
    /* Build from a "model" config object (complete or partial: absent keys take the defaults). The model reads it
     * with qkv_model_config into its typed struct; an unknown key, a wrong type or value: NULL with an error naming
     * the key. */
    qkv_model *(*create)(const struct cJSON *cfg, const qkv_task_info *info, qkv_params *params, qkv_rng *rng);
    void (*free)(qkv_model *m);
    /* Mean loss over the batch's counted tokens (training mode is set on ctx by the caller). */
    qkv_tensor *(*loss)(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b);
    /* Outputs to score: classify -> log-probabilities [B, C]; lm -> logits [B, T, V]; seq2seq -> logits
     * [B, T, V_tgt] under teacher forcing; tagging -> log-probabilities [B, T, C]; pairs -> unit vectors [2, B, D]
     * of both texts ([1, B, D] without src_ids), a pair's cosine their dot product; pretrain -> with targets the
     * MLM logits [P, V] of the P masked positions (row-major order), without them the NSP logits [B, 2]. If maps is non-NULL and the
     * model has attention, fill it (weights requested from the attention layers). */
    qkv_tensor *(*forward)(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b, qkv_attention_maps *maps);
    /* The token embeddings, a list ended by a NULL param, or NULL for none. An entry whose parameter a model did not
     * create is skipped: a config option can choose between layouts (transformer_seq2seq's share_embeddings makes
     * one "emb.weight" instead of "src_emb.weight" and "tgt_emb.weight"). */
    const qkv_model_embedding *embeddings;
    /* The incremental decoder (decoder.h) of a model that can generate text, or NULL when it cannot. Generation,
     * translation, beam search, MBR, BLEU evals and the viewer reach a model's decoding only through it. */
    const qkv_decoder_ops *decoder;
    /* Per-token states [B, T, features_dim] of the batch's ids (and mask), the input of a task's own head (the qa
     * task's start/end logits); NULL when the model has none. */
    qkv_tensor *(*features)(qkv_ctx *ctx, qkv_model *m, const qkv_batch *b);
    /* Fills the built model's sizes (qkv_model_info); NULL: nothing known (every field 0). */
    void (*info)(const qkv_model *m, qkv_model_info *out);
    /* Writes the model as a Hugging Face directory (model.safetensors + config.json in dir, which exists) that
     * qkv_hf_load and transformers read, or NULL when the type has no Hugging Face counterpart (bert). */
    qkv_status (*save_pretrained)(const qkv_model *m, const qkv_params *params, const char *dir);
    /* Named ready-made run configs for this type, a list ended by a NULL name, or NULL for none. */
    const qkv_model_preset *presets;
} qkv_model_type;

/* The registry (src/models/registry.c). NULL (error listing the known types) if unknown. */
const qkv_model_type *qkv_model_type_find(const char *name);
int qkv_model_type_count(void);
const qkv_model_type *qkv_model_type_at(int i);
/* A "model" config object (NULL: all defaults) into the typed struct of a model's schema: defaults, then each key
 * checked against its field (the "type" key is skipped), then the schema's cross-field rules. */
qkv_status qkv_model_config(const struct qkv_schema *s, const struct cJSON *cfg, void *out);
/* The token embeddings of a model type (its table's list); NULL when it has none (pretrained vectors then cannot
 * be used with it). */
const qkv_model_embedding *qkv_model_type_embeddings(const qkv_model_type *t);
/* The sizes of model m of type t (zeros for what the type does not report). */
qkv_model_info qkv_model_type_info(const qkv_model_type *t, const qkv_model *m);

#ifdef __cplusplus
}
#endif
#endif
