/* Hugging Face checkpoints: the staged tiny-random BERT / RoBERTa / GPT-2 against their reference outputs (every
 * attention matrix included), end to end from text through the staged tokenizers, hub key / dtype / sharding
 * variants (tests/ref/hf_variants.py), finite-difference gradients through a loaded model, and bad checkpoints,
 * configs and inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gradcheck.h"
#include "qkv/hf.h"
#include "test.h"

#define RTOL 1e-4
#define ATOL 1e-5

/* A float32 reference tensor as int32 (the reference files store ids as F32). */
static qkv_tensor *read_ids(qkv_st_file *f, const char *name) {
    qkv_tensor *x = qkv_st_read(f, name);
    if (!x) return NULL;
    qkv_tensor *ids = qkv_tensor_new(QKV_I32, x->ndim, x->shape);
    for (int64_t i = 0; ids && i < qkv_numel(x); i++) qkv_i32(ids)[i] = (int32_t)lrintf(qkv_f32(x)[i]);
    qkv_tensor_free(x);
    return ids;
}

/* Compare every output the reference file holds. */
static void compare_outputs(const char *what, qkv_st_file *ref, const qkv_hf_outputs *out) {
    struct {
        const char *name;
        const qkv_tensor *got;
    } items[3 + QKV_HF_MAX_LAYERS] = {{"last_hidden_state", out->last_hidden_state},
                                      {"pooler_output", out->pooler_output},
                                      {"logits", out->logits}};
    int n = 3;
    char names[QKV_HF_MAX_LAYERS][32];
    for (int i = 0; i < out->n_layers; i++) {
        snprintf(names[i], sizeof names[i], "attentions.%d", i);
        items[n].name = names[i];
        items[n++].got = out->attentions[i];
    }
    int compared = 0;
    for (int i = 0; i < n; i++) {
        bool in_ref = qkv_st_find(ref, items[i].name) >= 0;
        CHECKF(in_ref == (items[i].got != NULL), "%s: %s is %s in the reference but %s here", what, items[i].name,
               in_ref ? "present" : "absent", items[i].got ? "present" : "absent");
        if (!in_ref || !items[i].got) continue;
        qkv_tensor *want = qkv_st_read(ref, items[i].name);
        CHECK_NN(want);
        char label[96];
        snprintf(label, sizeof label, "%s %s", what, items[i].name);
        if (want) CHECKF(test_allclose(label, items[i].got, want, RTOL, ATOL), "%s differs", label);
        qkv_tensor_free(want);
        compared++;
    }
    CHECK(compared >= 3);
}

/* Load a model directory, run the reference file's inputs with attentions on, compare everything. */
static void check_against_reference(const char *what, const char *model_dir, const char *ref_path) {
    qkv_hf_model *m = qkv_hf_load(model_dir);
    CHECKF(m != NULL, "%s: %s", what, qkv_last_error());
    qkv_st_file *ref = qkv_st_open(ref_path);
    CHECK_NN(ref);
    if (!m || !ref) {
        qkv_hf_free(m);
        qkv_st_close(ref);
        return;
    }
    qkv_tensor *ids = read_ids(ref, "input_ids");
    qkv_tensor *mask = qkv_st_find(ref, "attention_mask") >= 0 ? read_ids(ref, "attention_mask") : NULL;
    qkv_tensor *types = qkv_st_find(ref, "token_type_ids") >= 0 ? read_ids(ref, "token_type_ids") : NULL;
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_grad(ctx, false);
    qkv_hf_outputs out;
    qkv_hf_inputs in = {.input_ids = ids, .attention_mask = mask, .token_type_ids = types};
    CHECK_OK(qkv_hf_forward(ctx, m, &in, true, &out));
    if (out.last_hidden_state) compare_outputs(what, ref, &out);
    /* Without attentions the fused attention path runs: the same hidden states. */
    qkv_tensor *h = out.last_hidden_state ? qkv_tensor_clone(out.last_hidden_state) : NULL;
    CHECK_OK(qkv_hf_forward(ctx, m, &in, false, &out));
    CHECK(out.attentions[0] == NULL);
    if (h && out.last_hidden_state) CHECK(test_allclose("fused path", out.last_hidden_state, h, RTOL, ATOL));
    qkv_tensor_free(h);
    qkv_ctx_free(ctx);
    qkv_tensor_free(ids);
    qkv_tensor_free(mask);
    qkv_tensor_free(types);
    qkv_st_close(ref);
    qkv_hf_free(m);
}

static const char *staged(const char *name) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    const char *p = test_shared_path("pretrained");
    snprintf(buf[k], sizeof buf[k], "%s/%s", p ? p : "", name);
    return p && test_file_exists(buf[k]) ? buf[k] : NULL;
}

static const char *fixture_dir(const char *name) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s", test_fixture_path(name));
    return buf[k];
}

TEST(tiny_random_bert) {
    const char *dir = staged("tiny-random-bert/config.json");
    if (!dir) return test_skip("QKV_SHARED/pretrained/tiny-random-bert not found");
    check_against_reference("bert", staged("tiny-random-bert"),
                            staged("tiny-random-bert/reference_outputs.safetensors"));
}

TEST(tiny_random_roberta) {
    if (!staged("tiny-random-roberta/config.json"))
        return test_skip("QKV_SHARED/pretrained/tiny-random-roberta not found");
    check_against_reference("roberta", staged("tiny-random-roberta"),
                            staged("tiny-random-roberta/reference_outputs.safetensors"));
}

TEST(tiny_random_gpt2) {
    if (!staged("tiny-random-gpt2/config.json")) return test_skip("QKV_SHARED/pretrained/tiny-random-gpt2 not found");
    check_against_reference("gpt2", staged("tiny-random-gpt2"),
                            staged("tiny-random-gpt2/reference_outputs.safetensors"));
}

static void check_offsets(const char *what, const qkv_encoding *e, const size_t *want, size_t n) {
    CHECKF(e->n == n, "%s: %zu tokens, want %zu", what, e->n, n);
    for (size_t i = 0; i < n && i < e->n; i++)
        CHECKF(e->offsets[2 * i] == want[2 * i] && e->offsets[2 * i + 1] == want[2 * i + 1],
               "%s token %zu: [%zu, %zu), want [%zu, %zu)", what, i, e->offsets[2 * i], e->offsets[2 * i + 1],
               want[2 * i], want[2 * i + 1]);
}

/* Text -> the staged WordPiece vocabulary -> ids, types and offsets equal to tiny-random-bert's inputs (which are
 * HF tokenizers' encodings of these texts) -> the model's reference outputs. */
TEST(bert_from_text) {
    const char *vocab = staged("bert-base-uncased-tokenizer/vocab.txt");
    const char *dir = staged("tiny-random-bert");
    if (!vocab || !staged("tiny-random-bert/config.json")) return test_skip("staged BERT tokenizer / model not found");
    qkv_wordpiece *wp = qkv_wordpiece_load(vocab, NULL);
    CHECK_NN(wp);
    if (!wp) return;
    qkv_encoding pair = {0}, single = {0};
    const char *a = "How old are you?", *b = "I am six.", *c = "Hello world!";
    CHECK_OK(qkv_wordpiece_encode(wp, a, strlen(a), b, strlen(b), true, &pair));
    CHECK_OK(qkv_wordpiece_encode(wp, c, strlen(c), NULL, 0, true, &single));
    const size_t pair_off[] = {0, 0, 0, 3, 4, 7, 8, 11, 12, 15, 15, 16, 0, 0, 0, 1, 2, 4, 5, 8, 8, 9, 0, 0};
    const size_t single_off[] = {0, 0, 0, 5, 6, 11, 11, 12, 0, 0};
    check_offsets("pair", &pair, pair_off, 12);
    check_offsets("single", &single, single_off, 5);
    qkv_hf_model *m = qkv_hf_load(dir);
    CHECK_NN(m);
    CHECK_OK(qkv_hf_check_vocab(m, (int64_t)qkv_wordpiece_vocab_size(wp)));
    qkv_st_file *ref = qkv_st_open(staged("tiny-random-bert/reference_outputs.safetensors"));
    CHECK_NN(ref);
    qkv_tensor *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 12));
    qkv_tensor *types = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 12));
    qkv_tensor *mask = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 12));
    for (size_t i = 0; i < 12 && pair.n == 12 && single.n == 5; i++) {
        qkv_i32(ids)[i] = pair.ids[i], qkv_i32(types)[i] = pair.type_ids[i], qkv_i32(mask)[i] = 1;
        qkv_i32(ids)[12 + i] = i < 5 ? single.ids[i] : 0, qkv_i32(mask)[12 + i] = i < 5;
    }
    qkv_tensor *want_ids = ref ? read_ids(ref, "input_ids") : NULL;
    qkv_tensor *want_types = ref ? read_ids(ref, "token_type_ids") : NULL;
    CHECK(want_ids && !memcmp(want_ids->data, ids->data, 24 * sizeof(int32_t)));
    CHECK(want_types && !memcmp(want_types->data, types->data, 24 * sizeof(int32_t)));
    if (m && ref) {
        qkv_ctx *ctx = qkv_ctx_new();
        qkv_hf_outputs out;
        CHECK_OK(qkv_hf_forward(ctx, m, &(qkv_hf_inputs){ids, mask, types}, true, &out));
        if (out.last_hidden_state) compare_outputs("bert from text", ref, &out);
        qkv_ctx_free(ctx);
    }
    qkv_tensor_free(ids), qkv_tensor_free(types), qkv_tensor_free(mask);
    qkv_tensor_free(want_ids), qkv_tensor_free(want_types);
    qkv_st_close(ref);
    qkv_hf_free(m);
    qkv_encoding_free(&pair), qkv_encoding_free(&single);
    qkv_wordpiece_free(wp);
}

TEST(gpt2_from_text) {
    const char *vj = staged("gpt2-tokenizer/vocab.json"), *mt = staged("gpt2-tokenizer/merges.txt");
    if (!vj || !mt || !staged("tiny-random-gpt2/config.json"))
        return test_skip("staged GPT-2 tokenizer / model not found");
    qkv_bpe *bpe = qkv_bpe_load(vj, mt);
    CHECK_NN(bpe);
    if (!bpe) return;
    const char *text = "Hello, world! I'm here.";
    qkv_encoding e = {0};
    CHECK_OK(qkv_bpe_encode_full(bpe, text, strlen(text), &e));
    const int32_t want_ids[8] = {15496, 11, 995, 0, 314, 1101, 994, 13};
    const size_t off[16] = {0, 5, 5, 6, 6, 12, 12, 13, 13, 15, 15, 17, 17, 22, 22, 23};
    check_offsets("gpt2", &e, off, 8);
    CHECK(e.n == 8 && !memcmp(e.ids, want_ids, sizeof want_ids));
    qkv_hf_model *m = qkv_hf_load(staged("tiny-random-gpt2"));
    CHECK_NN(m);
    qkv_st_file *ref = qkv_st_open(staged("tiny-random-gpt2/reference_outputs.safetensors"));
    CHECK_NN(ref);
    if (m && ref && e.n == 8) {
        CHECK_OK(qkv_hf_check_vocab(m, (int64_t)qkv_bpe_vocab_size(bpe)));
        qkv_tensor *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(1, 8));
        memcpy(ids->data, e.ids, sizeof want_ids);
        qkv_ctx *ctx = qkv_ctx_new();
        qkv_hf_outputs out;
        CHECK_OK(qkv_hf_forward(ctx, m, &(qkv_hf_inputs){.input_ids = ids}, true, &out));
        if (out.last_hidden_state) compare_outputs("gpt2 from text", ref, &out);
        qkv_ctx_free(ctx);
        qkv_tensor_free(ids);
    }
    qkv_st_close(ref);
    qkv_hf_free(m);
    qkv_encoding_free(&e);
    qkv_bpe_free(bpe);
}

/* Hub layouts: prefixes, gamma/beta, heads and buffers ignored, F16 / BF16, sharding, Conv1D, no pooler. */
TEST(hub_variants) {
    const char *cases[3] = {"hf/bert_hub", "hf/roberta_sharded", "hf/gpt2_hub"};
    for (int i = 0; i < 3; i++) {
        char ref[1100];
        snprintf(ref, sizeof ref, "%s/reference.safetensors", fixture_dir(cases[i]));
        check_against_reference(cases[i], fixture_dir(cases[i]), ref);
    }
    qkv_hf_model *m = qkv_hf_load(fixture_dir("hf/roberta_sharded"));
    CHECK(m && !qkv_hf_has_pooler(m));
    qkv_hf_free(m);
    m = qkv_hf_load(fixture_dir("hf/bert_hub"));
    CHECK(m && qkv_hf_has_pooler(m));
    CHECK(m && qkv_params_find(qkv_hf_params(m), "encoder.layer.1.output.LayerNorm.weight"));
    qkv_hf_free(m);
}

/* ---- Gradients through a loaded model (the backward comes from the ops' autograd). ---- */

static qkv_tensor *bert_hidden(qkv_ctx *ctx, qkv_tensor **inputs, void *user) {
    (void)inputs;
    qkv_hf_model *m = user;
    qkv_tensor *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(2, 5));
    qkv_tensor *mask = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(2, 5));
    const int32_t idv[10] = {2, 17, 5, 33, 3, 2, 11, 3, 0, 0}, mv[10] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    memcpy(ids->data, idv, sizeof idv);
    memcpy(mask->data, mv, sizeof mv);
    qkv_hf_outputs out;
    if (qkv_hf_forward(ctx, m, &(qkv_hf_inputs){.input_ids = ids, .attention_mask = mask}, false, &out)) return NULL;
    return qkv_concat(ctx, 2, (qkv_tensor *[]){qkv_reshape(ctx, out.last_hidden_state, QKV_DIMS(2, 40)),
                                               out.pooler_output}, 1);
}

static qkv_tensor *gpt2_logits(qkv_ctx *ctx, qkv_tensor **inputs, void *user) {
    (void)inputs;
    qkv_tensor *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, 5));
    const int32_t idv[5] = {5, 17, 3, 29, 8};
    memcpy(ids->data, idv, sizeof idv);
    qkv_hf_outputs out;
    if (qkv_hf_forward(ctx, user, &(qkv_hf_inputs){.input_ids = ids}, false, &out)) return NULL;
    return out.logits;
}

TEST(gradients_through_loaded_models) {
    qkv_hf_model *m = qkv_hf_load(fixture_dir("hf/bert_hub"));
    CHECK_NN(m);
    if (m) {
        qkv_params *p = qkv_hf_params(m);
        qkv_tensor *in[4] = {qkv_params_find(p, "encoder.layer.0.attention.self.query.weight"),
                             qkv_params_find(p, "embeddings.LayerNorm.weight"),
                             qkv_params_find(p, "encoder.layer.1.intermediate.dense.bias"),
                             qkv_params_find(p, "pooler.dense.bias")};
        CHECK(gradcheck("bert params", bert_hidden, 4, in, m, NULL));
    }
    qkv_hf_free(m);
    m = qkv_hf_load(fixture_dir("hf/gpt2_hub"));
    CHECK_NN(m);
    if (m) {
        qkv_params *p = qkv_hf_params(m);
        qkv_tensor *in[3] = {qkv_params_find(p, "h.0.attn.c_attn.weight"), qkv_params_find(p, "h.1.mlp.c_fc.bias"),
                             qkv_params_find(p, "ln_f.bias")};
        CHECK(gradcheck("gpt2 params", gpt2_logits, 3, in, m, NULL));
    }
    qkv_hf_free(m);
}

/* ---- Bad input ---- */

static char tmpdir[256];

static const char *tmp_file(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void copy_file(const char *src, const char *dst, long limit) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    CHECK(in && out);
    char buf[4096];
    size_t n;
    long total = 0;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0 && (limit < 0 || total < limit)) {
        if (limit >= 0 && total + (long)n > limit) n = (size_t)(limit - total);
        fwrite(buf, 1, n, out);
        total += (long)n;
    }
    if (in) fclose(in);
    if (out) fclose(out);
}

static void expect_error(const char *what, bool failed, const char *needle) {
    CHECKF(failed, "%s: no error", what);
    CHECKF(strstr(qkv_last_error(), needle) != NULL, "%s: error '%s' lacks '%s'", what, qkv_last_error(), needle);
}

static const char *bert_cfg =
    "{\"model_type\": \"bert\", \"vocab_size\": 40, \"hidden_size\": %d, \"num_hidden_layers\": 2, "
    "\"num_attention_heads\": 2, \"intermediate_size\": 16, \"max_position_embeddings\": 16, "
    "\"type_vocab_size\": 2, \"hidden_act\": \"%s\"%s}";

TEST(bad_configs) {
    qkv_hf_config c;
    char json[1024];
    snprintf(json, sizeof json, bert_cfg, 8, "gelu", "");
    CHECK_OK(qkv_hf_config_parse(json, "ok.json", &c));
    CHECK(c.arch == QKV_HF_BERT && c.hidden_size == 8 && c.layer_norm_eps == 1e-12f && c.pad_token_id == 0);
    expect_error("missing field", qkv_hf_config_parse("{\"model_type\": \"bert\", \"vocab_size\": 40}", "c.json", &c),
                 "c.json: missing field \"hidden_size\"");
    expect_error("no model_type", qkv_hf_config_parse("{\"vocab_size\": 40}", "c.json", &c), "\"model_type\"");
    expect_error("other model", qkv_hf_config_parse("{\"model_type\": \"t5\"}", "c.json", &c),
                 "\"t5\" is not supported");
    snprintf(json, sizeof json, bert_cfg, 9, "gelu", "");
    expect_error("heads", qkv_hf_config_parse(json, "c.json", &c), "not divisible by the 2 attention heads");
    snprintf(json, sizeof json, bert_cfg, 8, "swish", "");
    expect_error("activation", qkv_hf_config_parse(json, "c.json", &c), "hidden_act \"swish\"");
    snprintf(json, sizeof json, bert_cfg, 8, "gelu", ", \"position_embedding_type\": \"relative_key\"");
    expect_error("relative positions", qkv_hf_config_parse(json, "c.json", &c), "relative_key");
    expect_error("negative", qkv_hf_config_parse("{\"model_type\": \"gpt2\", \"vocab_size\": 40, \"n_embd\": 8, "
                                                 "\"n_layer\": -1}", "c.json", &c),
                 "c.json: field \"n_layer\" must be an integer >= 1");
    expect_error("not json", qkv_hf_config_parse("{oops", "c.json", &c), "not a JSON object");
    expect_error("no file", qkv_hf_config_load("/nonexistent/config.json", &c), "/nonexistent/config.json");
}

TEST(bad_checkpoints) {
    const char *src = fixture_dir("hf/bert_hub");
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    char json[1024];
    /* A config with another hidden size: every shape is wrong, the first is named. */
    snprintf(json, sizeof json, bert_cfg, 16, "gelu", "");
    write_text(tmp_file("config.json"), json);
    copy_file(path, tmp_file("model.safetensors"), -1);
    expect_error("shape", qkv_hf_load(tmpdir) == NULL, "has shape [");
    CHECK(strstr(qkv_last_error(), "needs [") != NULL);
    /* Truncated weights. */
    snprintf(json, sizeof json, bert_cfg, 8, "gelu", "");
    write_text(tmp_file("config.json"), json);
    copy_file(path, tmp_file("model.safetensors"), 3000);
    CHECK(qkv_hf_load(tmpdir) == NULL);
    CHECK(strstr(qkv_last_error(), "model.safetensors") != NULL);
    copy_file(path, tmp_file("model.safetensors"), 5);
    CHECK(qkv_hf_load(tmpdir) == NULL);
    /* Missing and unknown keys, listed together. */
    qkv_hf_model *m = qkv_hf_load(src);
    CHECK_NN(m);
    if (m) {
        qkv_params *p = qkv_hf_params(m);
        qkv_st_writer *w = qkv_st_writer_new();
        for (int i = 0; i < qkv_params_count(p); i++) {
            qkv_tensor *t = qkv_params_at(p, i);
            if (strcmp(t->name, "encoder.layer.1.output.dense.bias") && strcmp(t->name, "embeddings.LayerNorm.bias"))
                qkv_st_writer_add(w, t->name, t);
        }
        qkv_tensor *extra = qkv_params_find(p, "pooler.dense.bias");
        qkv_st_writer_add(w, "encoder.layer.1.output.dense.extra", extra);
        qkv_st_writer_add(w, "classifier.bias", extra);
        CHECK_OK(qkv_st_writer_save(w, tmp_file("model.safetensors")));
        qkv_st_writer_free(w);
        expect_error("keys", qkv_hf_load(tmpdir) == NULL, "2 unknown keys: ");
        CHECK(strstr(qkv_last_error(), "'classifier.bias'") &&
              strstr(qkv_last_error(), "'encoder.layer.1.output.dense.extra'"));
        CHECK(strstr(qkv_last_error(), "2 missing keys: 'embeddings.LayerNorm.bias', "
                                       "'encoder.layer.1.output.dense.bias'") != NULL);
        /* The same parameter twice (new and TF-era names). */
        w = qkv_st_writer_new();
        for (int i = 0; i < qkv_params_count(p); i++)
            qkv_st_writer_add(w, qkv_params_at(p, i)->name, qkv_params_at(p, i));
        qkv_st_writer_add(w, "embeddings.LayerNorm.gamma", qkv_params_find(p, "embeddings.LayerNorm.weight"));
        CHECK_OK(qkv_st_writer_save(w, tmp_file("model.safetensors")));
        qkv_st_writer_free(w);
        expect_error("duplicate", qkv_hf_load(tmpdir) == NULL, "a second time");
        /* A tokenizer larger than the embedding table. */
        expect_error("vocab", qkv_hf_check_vocab(m, 50257) != QKV_OK, "50257 tokens but the bert model's embedding "
                                                                       "table has 40 rows");
    }
    qkv_hf_free(m);
    /* No safetensors at all. */
    unlink(tmp_file("model.safetensors"));
    expect_error("no weights", qkv_hf_load(tmpdir) == NULL, "not pytorch_model.bin");
    /* A broken index. */
    write_text(tmp_file("model.safetensors.index.json"), "{\"weight_map\": {\"a\": \"../x.safetensors\"}}");
    expect_error("index", qkv_hf_load(tmpdir) == NULL, "must be a file name beside the index");
    unlink(tmp_file("model.safetensors.index.json"));
    unlink(tmp_file("config.json"));
}

TEST(bad_forward_inputs) {
    qkv_hf_model *m = qkv_hf_load(fixture_dir("hf/bert_hub"));
    CHECK_NN(m);
    if (!m) return;
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_hf_outputs out;
    qkv_tensor *ids = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(1, 4));
    qkv_i32(ids)[2] = 40;
    expect_error("id range", qkv_hf_forward(ctx, m, &(qkv_hf_inputs){.input_ids = ids}, false, &out) != QKV_OK,
                 "input id 40 at [0, 2] is outside the vocabulary [0, 40)");
    qkv_tensor *longer = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(1, 17));
    expect_error("too long", qkv_hf_forward(ctx, m, &(qkv_hf_inputs){.input_ids = longer}, false, &out) != QKV_OK,
                 "max_position_embeddings 16");
    qkv_i32(ids)[2] = 1;
    qkv_tensor *mask = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(1, 3));
    expect_error("mask shape", qkv_hf_forward(ctx, m, &(qkv_hf_inputs){ids, mask, NULL}, false, &out) != QKV_OK,
                 "attention_mask must be");
    qkv_tensor *types = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(1, 4));
    qkv_i32(types)[0] = 2;
    CHECK(qkv_hf_forward(ctx, m, &(qkv_hf_inputs){ids, NULL, types}, false, &out) != QKV_OK);
    qkv_tensor *fids = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(1, 4));
    expect_error("float ids", qkv_hf_forward(ctx, m, &(qkv_hf_inputs){.input_ids = fids}, false, &out) != QKV_OK,
                 "input_ids must be int32");
    qkv_ctx_free(ctx);
    qkv_hf_free(m);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/qkv_test_hf_%d", (int)getpid());
    mkdir(tmpdir, 0700);
    RUN(tiny_random_bert);
    RUN(tiny_random_roberta);
    RUN(tiny_random_gpt2);
    RUN(bert_from_text);
    RUN(gpt2_from_text);
    RUN(hub_variants);
    RUN(gradients_through_loaded_models);
    RUN(bad_configs);
    RUN(bad_checkpoints);
    RUN(bad_forward_inputs);
    rmdir(tmpdir);
    return test_finish();
}
