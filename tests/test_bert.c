/* BERT pretraining (src/models/bert.c): the masked-LM + next-sentence losses and every parameter's gradient against
 * PyTorch (tests/ref/bert_pretrain.py, a BertForPreTraining with Hugging Face's names and the same weights); the
 * Hugging Face directory a model saves read back by the HF loader with the same hidden states; bad inputs. The ops
 * BERT uses (index_select, linear, gelu, layer norm, attention, cross-entropy) are gradchecked in their own tests;
 * bert.c adds no op. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "corpus.h"
#include "test.h"

static char dir[] = "/tmp/qkv_bert_XXXXXX";

static qkv_bert_config small_config(void) {
    qkv_bert_config c = qkv_bert_config_default(50, 16, 2, 4);
    c.intermediate_size = 32, c.max_positions = 12, c.hidden_dropout = 0.0f, c.attn_dropout = 0.0f;
    return c;
}

TEST(pretrain_loss_and_gradients_match_pytorch) {
    qkv_st_file *f = qkv_st_open(test_fixture_path("bert_pretrain.safetensors"));
    CHECK_NN(f);
    if (!f) return;
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    qkv_bert_config c = small_config();
    qkv_bert *m = qkv_bert_new(&c, p, &rng);
    CHECK_NN(m);
    int n_fixture = 0;
    for (int i = 0; i < qkv_st_count(f); i++) n_fixture += !strncmp(qkv_st_name(f, i), "p.", 2);
    CHECKF(n_fixture == qkv_params_count(p), "fixture has %d parameters, the model %d", n_fixture, qkv_params_count(p));
    char key[256];
    for (int i = 0; i < qkv_params_count(p); i++) {
        qkv_tensor *t = qkv_params_at(p, i);
        snprintf(key, sizeof key, "p.%s", t->name);
        CHECKF(qkv_st_read_into(f, key, t) == QKV_OK, "%s: %s", key, qkv_last_error());
    }
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_grad(ctx, true);
    qkv_ctx_set_training(ctx, true);
    qkv_bert_inputs in = {.ids = test_st_ctx_read(ctx, f, "ids"), .type_ids = test_st_ctx_read(ctx, f, "types"),
                          .mask = test_st_ctx_read(ctx, f, "mask"), .mlm_labels = test_st_ctx_read(ctx, f, "labels")};
    qkv_tensor *nsp_labels = test_st_ctx_read(ctx, f, "nsp_labels");
    qkv_tensor *mlm, *nsp, *loss = qkv_bert_pretrain_loss(ctx, m, &in, nsp_labels, &mlm, &nsp);
    CHECK_NN(loss);
    if (loss) {
        qkv_tensor *want = qkv_st_read(f, "loss"), *wm = qkv_st_read(f, "mlm_loss"), *wn = qkv_st_read(f, "nsp_loss");
        printf("loss %.6f (torch %.6f), mlm %.6f (%.6f), nsp %.6f (%.6f)\n", qkv_f32(loss)[0], qkv_f32(want)[0],
               qkv_f32(mlm)[0], qkv_f32(wm)[0], qkv_f32(nsp)[0], qkv_f32(wn)[0]);
        CHECK(fabsf(qkv_f32(loss)[0] - qkv_f32(want)[0]) < 1e-4f);
        CHECK(fabsf(qkv_f32(mlm)[0] - qkv_f32(wm)[0]) < 1e-4f && fabsf(qkv_f32(nsp)[0] - qkv_f32(wn)[0]) < 1e-4f);
        qkv_tensor_free(want), qkv_tensor_free(wm), qkv_tensor_free(wn);
        CHECK_OK(qkv_backward(ctx, loss));
        for (int i = 0; i < qkv_params_count(p); i++) {
            qkv_tensor *t = qkv_params_at(p, i);
            snprintf(key, sizeof key, "g.%s", t->name);
            qkv_tensor *g = qkv_st_read(f, key);
            CHECKF(g && t->grad, "%s: no gradient", key);
            if (g && t->grad) CHECKF(test_allclose(key, t->grad, g, 1e-3, 2e-5), "%s differs", key);
            qkv_tensor_free(g);
        }
    }
    qkv_ctx_free(ctx);
    qkv_bert_free(m);
    qkv_params_free(p);
    qkv_st_close(f);
}

TEST(hf_directory_round_trip) {
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    qkv_bert_config c = small_config();
    qkv_bert *m = qkv_bert_new(&c, p, &rng);
    CHECK_NN(m);
    CHECK_OK(qkv_bert_save_hf(&c, p, dir));
    qkv_hf_model *hf = qkv_hf_load(dir);
    CHECK_NN(hf);
    if (hf) {
        CHECK(qkv_hf_has_pooler(hf));
        qkv_ctx *ctx = qkv_ctx_new();
        qkv_tensor *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(2, 7));
        for (int i = 0; i < 14; i++) qkv_i32(ids)[i] = (i * 7 + 3) % 50;
        qkv_bert_inputs in = {.ids = ids};
        qkv_bert_outputs o;
        CHECK_OK(qkv_bert_forward(ctx, m, &in, false, &o));
        qkv_hf_inputs hin = {.input_ids = ids};
        qkv_hf_outputs ho;
        CHECK_OK(qkv_hf_forward(ctx, hf, &hin, false, &ho));
        CHECK(test_allclose("hidden: qkv bert vs its HF directory", o.hidden, ho.last_hidden_state, 0, 0));
        qkv_ctx_free(ctx);
    }
    qkv_hf_free(hf);
    /* a config.json whose vocabulary disagrees with the weights is refused, naming the key */
    qkv_bert_config wrong = c;
    wrong.vocab_size = 60;
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK_OK(qkv_bert_write_hf_config(&wrong, path));
    CHECK(qkv_hf_load(dir) == NULL);
    CHECKF(strstr(qkv_last_error(), "vocab"), "error: %s", qkv_last_error());
    qkv_bert_free(m);
    qkv_params_free(p);
}

TEST(bad_inputs) {
    qkv_params *p = qkv_params_new();
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    qkv_bert_config c = small_config();
    c.num_heads = 5;
    CHECK(qkv_bert_new(&c, p, &rng) == NULL);
    c = small_config();
    qkv_bert *m = qkv_bert_new(&c, p, &rng);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *ids = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(1, 4)), *lab = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, 4));
    for (int i = 0; i < 4; i++) qkv_i32(lab)[i] = -100;
    qkv_bert_inputs in = {.ids = ids, .mlm_labels = lab};
    CHECK(qkv_bert_pretrain_loss(ctx, m, &in, NULL, NULL, NULL) == NULL);
    CHECK(strstr(qkv_last_error(), "no masked position"));
    qkv_i32(ids)[2] = 50;
    qkv_i32(lab)[1] = 7;
    CHECK(qkv_bert_pretrain_loss(ctx, m, &in, NULL, NULL, NULL) == NULL);
    CHECK(strstr(qkv_last_error(), "outside the vocabulary"));
    qkv_ctx_free(ctx);
    qkv_bert_free(m);
    qkv_params_free(p);
}

/* ---- learning on real text: Austen's first chapters, a WordPiece vocabulary learned from them ---- */

typedef struct {
    double first, last, mlm_acc, nsp_acc;
    int n_first, n_last;
    bool evaluated;
} learn_log;

static void on_step(void *user, long step, long total, double loss, double lr, double tokens) {
    (void)lr, (void)tokens;
    learn_log *l = user;
    if (step <= 10) l->first += loss, l->n_first++;
    if (step > total - 10) l->last += loss, l->n_last++;
}

static void on_record(void *user, const char *json) {
    learn_log *l = user;
    cJSON *j = cJSON_Parse(json);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
    if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "eval")) {
        l->mlm_acc = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "mlm_accuracy"));
        l->nsp_acc = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "nsp_accuracy"));
        l->evaluated = true;
    }
    cJSON_Delete(j);
}

TEST(learns_on_austen) {
    /* The first ~2,500 paragraphs, chapters as the documents. */
    const char *corpus = test_austen_documents(dir);
    if (!corpus) {
        test_skip("no ../shared/data");
        return;
    }
    char cfg_text[1024], run[256];
    snprintf(cfg_text, sizeof cfg_text,
             "{\"model\": {\"type\": \"bert\", \"d_model\": 64, \"n_layers\": 2, \"n_heads\": 2, \"d_ff\": 256,"
             " \"max_positions\": 64, \"dropout\": 0, \"attn_dropout\": 0},"
             " \"data\": {\"train\": \"%s\", \"max_len\": 64, \"wordpiece_vocab_size\": 2000, \"heldout\": 0.1},"
             " \"train\": {\"steps\": 200, \"batch_size\": 16, \"log_every\": 50, \"checkpoint_every\": 0,"
             " \"optimizer\": {\"name\": \"adamw\", \"lr\": 0.002},"
             " \"schedule\": {\"spec\": \"constant * linear_warmup\", \"warmup_steps\": 30}},"
             " \"eval\": {\"every\": 200, \"max_batches\": 10}, \"seed\": 1}",
             corpus);
    snprintf(run, sizeof run, "%s/run", dir);
    cJSON *cfg = cJSON_Parse(cfg_text);
    qkv_run *r = qkv_run_new(run, cfg, false);
    cJSON_Delete(cfg);
    CHECK_NN(r);
    if (!r) return;
    qkv_threads_set(1); /* small matrices: one thread is fastest on a shared machine, and deterministic */
    learn_log l = {0};
    qkv_train_hooks hooks = {.user = &l, .on_step = on_step, .on_record = on_record};
    qkv_train_outcome out;
    CHECK_OK(qkv_run_train(r, &hooks, &out));
    qkv_run_free(r);
    double first = l.first / (l.n_first ? l.n_first : 1), last = l.last / (l.n_last ? l.n_last : 1);
    printf("austen, 200 steps: loss %.3f -> %.3f; held-out MLM accuracy %.3f, NSP accuracy %.3f\n", first, last,
           l.mlm_acc, l.nsp_acc);
    CHECK(l.evaluated);
    CHECK(last < first - 1.0);          /* from ~ln(2000) + ln(2) = 8.3 */
    CHECK(l.mlm_acc > 0.05);            /* chance: 1 / 2000 */
    CHECK(l.nsp_acc >= 0.0 && l.nsp_acc <= 1.0);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    RUN(pretrain_loss_and_gradients_match_pytorch);
    RUN(hf_directory_round_trip);
    RUN(bad_inputs);
    RUN(learns_on_austen);
    return test_finish();
}
