/* Fine-tuning heads on BERT (src/models/bert_heads.c, the bert type's features): the qa head's logits, loss and
 * every gradient against PyTorch (tests/ref/bert_qa.py); sentence pairs reach the encoder with segment ids; each head
 * learns a small task (loss falls past a bound in a few hundred steps at tiny dims); finetune.init_from moves a bert
 * run's encoder into a classifier and leaves the pretraining heads unused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "qkv/config.h"
#include "test.h"
#include "train/train_internal.h"

static char dir[] = "/tmp/qkv_bert_ft_XXXXXX";
static int run_counter;

static const char *run_dir(void) {
    static char p[512];
    snprintf(p, sizeof p, "%s/run%d", dir, run_counter++);
    return p;
}

static qkv_run *make_run(const char *json) {
    cJSON *u = qkv_config_parse("test", json);
    if (!u) printf("config: %s\n", qkv_last_error());
    qkv_run *r = u ? qkv_run_new(run_dir(), u, false) : NULL;
    if (u && !r) printf("run: %s\n", qkv_last_error());
    cJSON_Delete(u);
    return r;
}

/* The bert type's features + a qa_outputs Linear + qkv_span_loss, as the qa task computes them. */
TEST(qa_head_matches_pytorch) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("bert_qa.safetensors"));
    CHECK_NN(f);
    if (!f) return;
    const qkv_model_type *type = qkv_model_type_find("bert");
    cJSON *mc = cJSON_Parse("{\"d_model\": 16, \"n_layers\": 2, \"n_heads\": 4, \"d_ff\": 32, \"max_positions\": 12, "
                            "\"dropout\": 0, \"attn_dropout\": 0}");
    qkv_task_info info = {.vocab_size = 50, .n_classes = 2, .pad_id = 0, .max_len = 10};
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 3);
    qkv_model *m = type ? type->create(mc, &info, p, &rng) : NULL;
    cJSON_Delete(mc);
    CHECK_NN(m);
    qkv_nn_linear head;
    CHECK_OK(qkv_nn_linear_init(&head, p, "qa_outputs", 16, 2, true, &rng));
    CHECK(qkv_model_type_info(type, m).features_dim == 16);
    char key[256];
    int loaded = 0;
    for (int i = 0; i < qkv_params_count(p); i++) {
        qkv_tensor *t = qkv_params_at(p, i);
        snprintf(key, sizeof key, "p.%s", t->name);
        if (qkv_st_find(f, key) < 0) continue; /* the pretraining heads (cls.*) take no part */
        CHECKF(qkv_st_read_into(f, key, t) == QKV_OK, "%s: %s", key, qkv_last_error());
        loaded++;
    }
    CHECKF(loaded == 37 + 2 + 2, "loaded %d tensors", loaded); /* the encoder, its pooler, qa_outputs */
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_grad(ctx, true);
    qkv_ctx_set_training(ctx, true);
    qkv_batch b = {.ids = test_st_ctx_read(ctx, f, "ids"), .type_ids = test_st_ctx_read(ctx, f, "types"),
                   .mask = test_st_ctx_read(ctx, f, "mask"), .allowed = test_st_ctx_read(ctx, f, "allowed"),
                   .spans = test_st_ctx_read(ctx, f, "spans")};
    qkv_tensor *h = type->features(ctx, m, &b), *z = qkv_nn_linear_forward(ctx, &head, h);
    CHECK_NN(z);
    if (z) {
        int64_t B = z->shape[0], T = z->shape[1];
        qkv_tensor *s = qkv_reshape(ctx, qkv_contiguous(ctx, qkv_slice(ctx, z, 2, 0, 1, 1)), QKV_DIMS(B, T));
        qkv_tensor *e = qkv_reshape(ctx, qkv_contiguous(ctx, qkv_slice(ctx, z, 2, 1, 2, 1)), QKV_DIMS(B, T));
        qkv_tensor *ws = qkv_st_read(f, "start"), *we = qkv_st_read(f, "end"), *wl = qkv_st_read(f, "loss");
        CHECK(test_allclose("start logits", s, ws, 1e-4, 1e-5) && test_allclose("end logits", e, we, 1e-4, 1e-5));
        qkv_tensor *loss = qkv_span_loss(ctx, s, e, b.spans, b.allowed);
        CHECK_NN(loss);
        if (loss) {
            printf("qa loss %.6f (torch %.6f)\n", qkv_f32(loss)[0], qkv_f32(wl)[0]);
            CHECK(fabsf(qkv_f32(loss)[0] - qkv_f32(wl)[0]) < 1e-5f);
            CHECK_OK(qkv_backward(ctx, loss));
            int compared = 0;
            for (int i = 0; i < qkv_params_count(p); i++) {
                qkv_tensor *t = qkv_params_at(p, i);
                snprintf(key, sizeof key, "g.%s", t->name);
                qkv_tensor *g = qkv_st_read(f, key);
                if (!g) { /* the pooler and the pretraining heads are off the loss's path */
                    bool zero = true;
                    for (int64_t k = 0; t->grad && k < qkv_numel(t->grad); k++) zero &= qkv_f32(t->grad)[k] == 0.0f;
                    CHECKF(zero, "%s: a gradient off the loss's path", t->name);
                    continue;
                }
                CHECKF(t->grad != NULL, "%s: no gradient", key);
                if (t->grad) {
                    CHECKF(test_allclose(key, t->grad, g, 1e-3, 2e-5), "%s differs", key);
                    compared++;
                }
                qkv_tensor_free(g);
            }
            CHECKF(compared == 37 + 2, "compared %d gradients", compared);
        }
        qkv_tensor_free(ws), qkv_tensor_free(we), qkv_tensor_free(wl);
    }
    qkv_ctx_free(ctx);
    type->free(m);
    qkv_params_free(p);
    qkv_st_close(f);
}

/* ---- learning ---- */

typedef struct {
    double first, last;
    int n_last;
} losses;

static void on_step(void *user, long step, long total, double loss, double lr, double tokens) {
    (void)lr, (void)tokens;
    losses *l = user;
    if (step == 1) l->first = loss;
    if (step > total - 10) l->last += loss, l->n_last++;
}

/* Trains the run of `json` (1 thread) and returns the loss of its first step and the mean of its last 10. */
static bool train(const char *json, double *first, double *last) {
    qkv_run *r = make_run(json);
    CHECK_NN(r);
    if (!r) return false;
    qkv_threads_set(1);
    losses l = {0};
    qkv_train_hooks hooks = {.user = &l, .on_step = on_step};
    qkv_train_outcome out;
    qkv_status st = qkv_run_train(r, &hooks, &out);
    CHECKF(st == QKV_OK, "%s", qkv_last_error());
    qkv_run_free(r);
    *first = l.first;
    *last = l.last / (l.n_last ? l.n_last : 1);
    return st == QKV_OK;
}

static const char *TINY = "\"d_model\": 32, \"n_layers\": 2, \"n_heads\": 2, \"d_ff\": 64, \"max_positions\": 32, "
                          "\"dropout\": 0, \"attn_dropout\": 0";
static const char *WORDS[8] = {"red", "green", "blue", "gold", "pink", "grey", "teal", "plum"};
static char vocab_txt[512];

/* A WordPiece vocabulary of the eight words (plus BERT's specials). */
static void write_vocab(void) {
    char text[512] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 0; i < 8; i++) strcat(text, WORDS[i]), strcat(text, "\n");
    snprintf(vocab_txt, sizeof vocab_txt, "%s", test_write_file(dir, "vocab.txt", text));
}

/* Sentence pairs: "yes" when the second text holds "gold"; the first may hold it too (a distractor), so the model
 * must tell the segments apart. The pair's tokens reach the model as [CLS] a [SEP] b [SEP] with segment ids 0
 * then 1. */
TEST(classifier_learns_sentence_pairs) {
    write_vocab();
    char text[16384] = "", *o = text;
    for (int i = 0; i < 200; i++) {
        int a = (i * 7 + i / 8) % 8, b = (i * 5 + i / 3) % 8;
        o += sprintf(o, "%s\t%s %s\t%s %s\n", b == 3 || (i + 2) % 8 == 3 ? "yes" : "no", WORDS[a],
                     WORDS[(i + 1) % 8], WORDS[b], WORDS[(i + 2) % 8]);
    }
    char train_path[512], cfg[2048];
    snprintf(train_path, sizeof train_path, "%s", test_write_file(dir, "pairs.tsv", text));
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"bert_classifier\", %s}, \"data\": {\"train\": \"%s\", \"tokenizer\": "
             "\"wordpiece\", \"vocab_file\": \"%s\", \"max_len\": 16}, \"train\": {\"steps\": 300, \"batch_size\": 16, "
             "\"checkpoint_every\": 0, \"optimizer\": {\"name\": \"adamw\", \"lr\": 0.002}}, \"eval\": {\"every\": 0}, "
             "\"seed\": 1}", TINY, train_path, vocab_txt);
    qkv_run *r = make_run(cfg);
    CHECK_NN(r);
    if (r) { /* the first example: [CLS] a x [SEP] b y [SEP] */
        int64_t idx = 0;
        qkv_batch b;
        CHECK_OK(qkv__batch_make(r->ctx, &r->task, &r->train, &idx, 1, &b, NULL));
        CHECK_NN(b.type_ids);
        if (b.type_ids && b.ids->shape[1] == 7) {
            const int32_t want[7] = {0, 0, 0, 0, 1, 1, 1};
            for (int j = 0; j < 7; j++) CHECKF(qkv_i32(b.type_ids)[j] == want[j], "segment id at %d", j);
        } else {
            CHECKF(0, "pair of %lld tokens, expected 7", (long long)b.ids->shape[1]);
        }
        qkv_run_free(r);
    }
    double first, last;
    if (!train(cfg, &first, &last)) return;
    printf("sentence pairs: loss %.3f -> %.3f\n", first, last);
    CHECK(first > 0.5 && last < 0.2);
}

/* Single sentences, word tokenizer ([CLS] prepended by the type's data defaults): the label is whether "gold" is in
 * the text. */
TEST(classifier_learns_single_sentences) {
    char text[16384] = "", *o = text;
    for (int i = 0; i < 200; i++) {
        int a = (i * 3) % 8, b = (i * 5 + 1) % 8, c = (i / 3) % 8;
        bool gold = a == 3 || b == 3 || c == 3;
        o += sprintf(o, "%s\t%s %s %s\n", gold ? "yes" : "no", WORDS[a], WORDS[b], WORDS[c]);
    }
    char train_path[512], cfg[2048];
    snprintf(train_path, sizeof train_path, "%s", test_write_file(dir, "single.tsv", text));
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"bert_classifier\", %s}, \"data\": {\"train\": \"%s\", \"max_len\": 16}, "
             "\"train\": {\"steps\": 300, \"batch_size\": 16, \"checkpoint_every\": 0, \"optimizer\": {\"name\": "
             "\"adamw\", \"lr\": 0.002}}, \"eval\": {\"every\": 0}, \"seed\": 1}", TINY, train_path);
    double first, last;
    if (!train(cfg, &first, &last)) return;
    printf("single sentences: loss %.3f -> %.3f\n", first, last);
    CHECK(first > 0.5 && last < 0.2);
    /* Adapters mode: only the adapters, the layer norms and the head train, and that is enough here. */
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"bert_classifier\", %s, \"adapter_dim\": 8}, \"data\": {\"train\": \"%s\", "
             "\"max_len\": 16}, \"finetune\": {\"mode\": \"adapters\"}, \"train\": {\"steps\": 300, \"batch_size\": 16, "
             "\"checkpoint_every\": 0, \"optimizer\": {\"name\": \"adamw\", \"lr\": 0.005}}, \"eval\": {\"every\": 0}, "
             "\"seed\": 1}", TINY, train_path);
    if (!train(cfg, &first, &last)) return;
    printf("single sentences, adapters: loss %.3f -> %.3f\n", first, last);
    CHECK(first > 0.5 && last < 0.4);
}

/* Tagging: each word's tag depends on the word and on its left neighbour (the encoder must look around). */
TEST(tagger_learns) {
    char text[65536] = "", *o = text;
    for (int s = 0; s < 150; s++) {
        int prev = -1;
        for (int k = 0; k < 6; k++) {
            int w = (s * 7 + k * 3 + s / 5) % 8;
            const char *tag = prev < 0 ? "START" : (w + prev) % 2 ? "ODD" : "EVEN";
            o += sprintf(o, "%s\t%s\tx\n", WORDS[w], tag);
            prev = w;
        }
        o += sprintf(o, "\n");
    }
    char train_path[512], cfg[2048];
    snprintf(train_path, sizeof train_path, "%s", test_write_file(dir, "tags.tsv", text));
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"bert_tagger\", %s}, \"data\": {\"train\": \"%s\", \"max_len\": 16, "
             "\"min_freq\": 1}, \"train\": {\"steps\": 300, \"batch_size\": 16, \"checkpoint_every\": 0, "
             "\"optimizer\": {\"name\": \"adamw\", \"lr\": 0.002}}, \"eval\": {\"every\": 0}, \"seed\": 1}",
             TINY, train_path);
    double first, last;
    if (!train(cfg, &first, &last)) return;
    printf("tagging: loss %.3f -> %.3f\n", first, last);
    /* A pretrained encoder's WordPiece vocabulary: each word one id, "gold" as its vocab.txt line (line 9 -> 8). */
    write_vocab();
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"bert_tagger\", %s}, \"data\": {\"train\": \"%s\", \"max_len\": 16, "
             "\"tokenizer\": \"wordpiece\", \"vocab_file\": \"%s\"}, \"train\": {\"steps\": 1}}", TINY, train_path,
             vocab_txt);
    qkv_run *r = make_run(cfg);
    CHECK_NN(r);
    if (!r) return;
    CHECK(r->task.vocab_size == 13);
    int64_t idx = 0;
    qkv_batch b;
    CHECK_OK(qkv__batch_make(r->ctx, &r->task, &r->train, &idx, 1, &b, NULL));
    int w0 = (0 * 7 + 0 * 3 + 0 / 5) % 8; /* the first sentence's first word */
    CHECKF(b.ids && qkv_i32(b.ids)[0] == 5 + w0, "first id %d, want %d", b.ids ? qkv_i32(b.ids)[0] : -1, 5 + w0);
    qkv_run_free(r);
    CHECK(first > 0.5 && last < 0.15);
}

/* Span QA with the bert type's features: three cloze questions memorised. */
TEST(qa_head_learns) {
    const char *data =
        "{\"context\": \"Emma met Mr. Knightley at Hartfield. She smiled.\", \"question\": \"XXXXX met Mr. Knightley.\", "
        "\"answers\": {\"text\": [\"Emma\"], \"answer_start\": [0]}}\n"
        "{\"context\": \"The ball at the Crown Inn was a great success.\", \"question\": \"The XXXXX at the inn.\", "
        "\"answers\": {\"text\": [\"ball\"], \"answer_start\": [4]}}\n"
        "{\"context\": \"Harriet walked to Highbury with Emma, talking of Mr. Martin and his farm.\", "
        "\"question\": \"His XXXXX at Abbey-Mill.\", \"answers\": {\"text\": [\"farm\"], \"answer_start\": [68]}}\n";
    char train_path[512], cfg[2048];
    snprintf(train_path, sizeof train_path, "%s", test_write_file(dir, "qa.jsonl", data));
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"bert\", %s}, \"data\": {\"train\": \"%s\", \"task\": \"qa\", \"max_len\": 32}, "
             "\"train\": {\"steps\": 200, \"batch_size\": 3, \"checkpoint_every\": 0, \"optimizer\": {\"name\": "
             "\"adamw\", \"lr\": 0.002}}, \"eval\": {\"every\": 0}, \"seed\": 1}", TINY, train_path);
    double first, last;
    if (!train(cfg, &first, &last)) return;
    printf("qa: loss %.3f -> %.3f\n", first, last);
    CHECK(first > 1.5 && last < 0.3); /* from ln(context tokens) */
}

/* A bert run pretrained a few steps, then a classifier from it: the encoder's weights arrive, the MLM/NSP heads are
 * left unused, the classifier is new. */
TEST(init_from_a_bert_run) {
    write_vocab();
    char text[16384] = "", *o = text;
    for (int d = 0; d < 20; d++) {
        for (int s = 0; s < 4; s++) o += sprintf(o, "%s %s %s.\n", WORDS[(d + s) % 8], WORDS[(d * 3 + s) % 8],
                                                 WORDS[(s * 5 + 1) % 8]);
        o += sprintf(o, "\n");
    }
    char corpus[512], cfg[2048], pre_dir[512];
    snprintf(corpus, sizeof corpus, "%s", test_write_file(dir, "corpus.txt", text));
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"bert\", %s}, \"data\": {\"train\": \"%s\", \"vocab_file\": \"%s\", "
             "\"max_len\": 16, \"heldout\": 0.1}, \"train\": {\"steps\": 5, \"batch_size\": 4, \"checkpoint_every\": 0},"
             " \"eval\": {\"every\": 0}, \"seed\": 1}", TINY, corpus, vocab_txt);
    qkv_run *r = make_run(cfg);
    CHECK_NN(r);
    if (!r) return;
    snprintf(pre_dir, sizeof pre_dir, "%s", r->dir);
    qkv_train_outcome out;
    CHECK_OK(qkv_run_train(r, NULL, &out));
    qkv_tensor *w = qkv_params_find(r->params, "bert.encoder.layer.1.output.dense.weight");
    float want = w ? qkv_f32(w)[5] : NAN;
    qkv_run_free(r);
    char pairs[512];
    snprintf(pairs, sizeof pairs, "%s/pairs.tsv", dir);
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"bert_classifier\", %s}, \"data\": {\"train\": \"%s\", \"tokenizer\": "
             "\"wordpiece\", \"vocab_file\": \"%s\", \"max_len\": 16}, \"finetune\": {\"init_from\": \"%s\"}, "
             "\"train\": {\"steps\": 1, \"checkpoint_every\": 0}, \"eval\": {\"every\": 0}}",
             TINY, pairs, vocab_txt, pre_dir);
    r = make_run(cfg);
    CHECK_NN(r);
    if (!r) return;
    w = qkv_params_find(r->params, "bert.encoder.layer.1.output.dense.weight");
    CHECKF(w && qkv_f32(w)[5] == want, "encoder weight %g, the bert run's %g", w ? qkv_f32(w)[5] : NAN, want);
    qkv_run_free(r);
    /* A classifier whose vocabulary is not the bert run's (the word tokenizer's): refused, naming the tensor. */
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"bert_classifier\", %s}, \"data\": {\"train\": \"%s/single.tsv\", "
             "\"max_len\": 16}, \"finetune\": {\"init_from\": \"%s\"}, \"train\": {\"steps\": 1}}",
             TINY, dir, pre_dir);
    cJSON *u = qkv_config_parse("test", cfg);
    qkv_run *bad = u ? qkv_run_new(run_dir(), u, false) : NULL;
    cJSON_Delete(u);
    CHECKF(!bad && strstr(qkv_last_error(), "bert.embeddings.word_embeddings.weight") &&
               strstr(qkv_last_error(), "vocabulary size"), "%s", bad ? "(accepted)" : qkv_last_error());
    qkv_run_free(bad);
    run_counter--; /* the log below is the previous run's */
    /* The record in the new run's log: classifier.* new, cls.* unused. */
    char log_path[600];
    snprintf(log_path, sizeof log_path, "%s/run%d/log.jsonl", dir, run_counter - 1);
    char *log = test_read_file(log_path);
    CHECK_NN(log);
    if (log) {
        CHECKF(strstr(log, "\"init_from\"") && strstr(log, "\"n_new\":2") && strstr(log, "cls.predictions"),
               "log: %.400s", log);
        free(log);
    }
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    RUN(qa_head_matches_pytorch);
    RUN(classifier_learns_sentence_pairs);
    RUN(classifier_learns_single_sentences);
    RUN(tagger_learns);
    RUN(qa_head_learns);
    RUN(init_from_a_bert_run);
    return test_finish();
}
