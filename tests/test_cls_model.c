/* The Transformer classifier: the whole model against PyTorch (tests/ref/cls_model.py: output, every parameter
 * gradient, per-layer attention maps), finite differences, the model-type interface and its config errors, and a
 * learning test on the demo review sample (examples/data/reviews). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/data.h"
#include "qkv/model.h"
#include "qkv/optim.h"
#include "qkv/text.h"
#include "qkv/threads.h"
#include "qkv/transformer_classifier.h"
#include "test_nn_common.h"

typedef struct {
    qkv_tcls *m;
    bool padded;
} fwd_case;

static qkv_tensor *f_cls(qkv_ctx *c, qkv_tensor **in, void *u) {
    fwd_case *fc = u;
    return qkv_tcls_forward(c, fc->m, in[0], fc->padded ? in[1] : NULL, NULL);
}

/* Output with maps requested equals the pruned output; each map equals torch's "K.attn.<i>". */
static void check_maps(qkv_st_file *f, const char *key, qkv_tcls *m, bool padded) {
    char name[128];
    snprintf(name, sizeof name, "%s.in.0", key);
    qkv_tensor *ids = qkv_st_read(f, name);
    snprintf(name, sizeof name, "%s.in.1", key);
    qkv_tensor *pad = padded ? qkv_st_read(f, name) : NULL;
    snprintf(name, sizeof name, "%s.out", key);
    qkv_tensor *want = qkv_st_read(f, name);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *w[QKV_TCLS_MAX_LAYERS] = {0};
    qkv_tensor *out = qkv_tcls_forward(ctx, m, ids, pad, w);
    CHECK_NN(out);
    if (out) CHECK(test_allclose("output with maps", out, want, 1e-4, 1e-5));
    for (int i = 0; out && i < m->cfg.n_layers; i++) {
        snprintf(name, sizeof name, "%s.attn.%d", key, i);
        qkv_tensor *a = qkv_st_read(f, name);
        CHECK_NN(a);
        CHECK(w[i] && w[i]->ndim == 4 && w[i]->shape[1] == m->cfg.n_heads);
        if (a && w[i]) CHECK(test_allclose(name, w[i], a, 1e-4, 1e-5));
        qkv_tensor_free(a);
    }
    qkv_ctx_free(ctx);
    qkv_tensor_free(ids);
    qkv_tensor_free(pad);
    qkv_tensor_free(want);
}

static qkv_tcls_config small(int64_t V, int64_t C, int64_t d, int64_t h, int64_t ff) {
    qkv_tcls_config c = qkv_tcls_config_default(V, C);
    c.d_model = d;
    c.n_heads = h;
    c.d_ff = ff;
    c.dropout = c.attn_dropout = 0.0f;
    c.max_len = 16;
    return c;
}

TEST(matches_torch) {
    qkv_st_file *f = nn_open_fixture("cls_model.safetensors");
    if (!f) return;
    qkv_rng rng;
    qkv_rng_init(&rng, 3);
    static qkv_tcls m;

    qkv_params *p = qkv_params_new();
    qkv_tcls_config c = small(20, 3, 8, 2, 16);
    CHECK_OK(qkv_tcls_init(&m, p, &c, &rng));
    fwd_case fc = {&m, true};
    CHECK(nn_fixture_check(f, "pre_relu_padded", p, f_cls, &fc, 1e-4, 1e-5));
    check_maps(f, "pre_relu_padded", &m, true);
    qkv_params_free(p);

    p = qkv_params_new();
    c = small(20, 3, 8, 1, 16);
    c.norm_first = false;
    c.activation = QKV_ACT_GELU;
    c.pos_enc = QKV_POSENC_LEARNED;
    c.emb_scale_sqrt_d = false;
    CHECK_OK(qkv_tcls_init(&m, p, &c, &rng));
    fc.padded = false;
    CHECK(nn_fixture_check(f, "post_gelu_learned", p, f_cls, &fc, 1e-4, 1e-5));
    check_maps(f, "post_gelu_learned", &m, false);
    CHECK(qkv_params_find(p, "encoder.norm.weight") == NULL); /* post-LN has no final norm */
    qkv_params_free(p);
    qkv_st_close(f);
}

/* Finite differences through both block kinds (GELU: ReLU kinks make differences meaningless), padded. */
TEST(gradcheck_params) {
    for (int post = 0; post < 2; post++) {
        qkv_rng rng;
        qkv_rng_init(&rng, 11 + post);
        static qkv_tcls m;
        qkv_params *p = qkv_params_new();
        qkv_tcls_config c = small(7, 2, 4, 2, 8);
        c.activation = QKV_ACT_GELU;
        c.norm_first = !post;
        CHECK_OK(qkv_tcls_init(&m, p, &c, &rng));
        qkv_tensor *ids = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 4));
        qkv_tensor *pad = qkv_tensor_new(QKV_I32, QKV_DIMS(2, 4));
        const int32_t idv[] = {1, 3, 6, 2, 1, 5, 0, 0}, padv[] = {0, 0, 0, 0, 0, 0, 1, 1};
        qkv_tensor_load(ids, idv, sizeof idv);
        qkv_tensor_load(pad, padv, sizeof padv);
        qkv_tensor *in[2] = {ids, pad};
        fwd_case fc = {&m, true};
        CHECK(nn_gradcheck(post ? "tcls post-LN" : "tcls pre-LN", f_cls, 2, in, p, &fc));
        qkv_tensor_free(ids);
        qkv_tensor_free(pad);
        qkv_params_free(p);
    }
}

TEST(init_errors) {
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    static qkv_tcls m;
    qkv_params *p = qkv_params_new();
    qkv_tcls_config c = small(10, 2, 6, 4, 8);
    CHECK(qkv_tcls_init(&m, p, &c, &rng) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "n_heads") != NULL);
    c = small(10, 1, 8, 2, 8);
    CHECK(qkv_tcls_init(&m, p, &c, &rng) == QKV_ERR_INVALID);
    c = small(10, 2, 8, 2, 8);
    c.n_layers = 0;
    CHECK(qkv_tcls_init(&m, p, &c, &rng) == QKV_ERR_INVALID);
    qkv_tensor *bad = qkv_tensor_new(QKV_F32, QKV_DIMS(9, 8));
    c = small(10, 2, 8, 2, 8);
    c.pretrained = bad;
    CHECK(qkv_tcls_init(&m, p, &c, &rng) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "pretrained") != NULL);
    qkv_tensor_free(bad);
    qkv_params_free(p);

    /* Forward errors: too long, wrong dtype. */
    p = qkv_params_new();
    c = small(10, 2, 8, 2, 8);
    c.max_len = 4;
    CHECK_OK(qkv_tcls_init(&m, p, &c, &rng));
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *ids = qkv_ctx_zeros(ctx, QKV_I32, 2, (const int64_t[]){1, 5});
    CHECK(qkv_tcls_forward(ctx, &m, ids, NULL, NULL) == NULL);
    CHECK(strstr(qkv_last_error(), "max_len") != NULL);
    qkv_tensor *fids = qkv_ctx_zeros(ctx, QKV_F32, 2, (const int64_t[]){1, 3});
    CHECK(qkv_tcls_forward(ctx, &m, fids, NULL, NULL) == NULL);
    qkv_tensor *big = qkv_ctx_zeros(ctx, QKV_I32, 2, (const int64_t[]){1, 3});
    qkv_i32(big)[1] = 10;
    CHECK(qkv_tcls_forward(ctx, &m, big, NULL, NULL) == NULL);
    qkv_ctx_free(ctx);
    qkv_params_free(p);
}

/* Pretrained, frozen embeddings: copied exactly, no gradient. */
TEST(pretrained_frozen) {
    qkv_rng rng;
    qkv_rng_init(&rng, 2);
    static qkv_tcls m;
    qkv_params *p = qkv_params_new();
    qkv_tensor *mat = gc_rand(5, -1, 1, QKV_DIMS(10, 8));
    qkv_tcls_config c = small(10, 2, 8, 2, 8);
    c.pretrained = mat;
    c.frozen = true;
    CHECK_OK(qkv_tcls_init(&m, p, &c, &rng));
    qkv_tensor *w = qkv_params_find(p, "embedding.weight");
    CHECK(w && !(w->flags & QKV_FLAG_REQUIRES_GRAD));
    if (w) CHECK(test_allclose("pretrained copy", w, mat, 0, 0));
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *ids = qkv_ctx_zeros(ctx, QKV_I32, 2, (const int64_t[]){2, 3});
    qkv_tensor *out = qkv_tcls_forward(ctx, &m, ids, NULL, NULL);
    CHECK_NN(out);
    if (out) CHECK_OK(qkv_backward(ctx, qkv_sum_all(ctx, out)));
    CHECK(w && w->grad == NULL);
    qkv_ctx_free(ctx);
    qkv_tensor_free(mat);
    qkv_params_free(p);
}

/* ---- The model-type interface ---------------------------------------------------------------------------- */

static qkv_model *create_from(const char *json, const qkv_task_info *info, qkv_params *p, qkv_rng *rng) {
    const qkv_model_type *t = qkv_model_type_find("transformer_classifier");
    CHECK(t != NULL);
    cJSON *cfg = cJSON_Parse(json);
    CHECK(cfg != NULL);
    qkv_model *m = t && cfg ? t->create(cfg, info, p, rng) : NULL;
    cJSON_Delete(cfg);
    return m;
}

TEST(model_type) {
    const qkv_model_type *t = qkv_model_type_find("transformer_classifier");
    CHECK(t != NULL);
    if (!t) return;
    CHECK(!strcmp(t->task, "classify"));
    cJSON *def = cJSON_Parse(t->default_config);
    CHECK(def != NULL && cJSON_GetObjectItem(def, "embeddings") != NULL);
    cJSON_Delete(def);

    qkv_task_info info = {.vocab_size = 12, .n_classes = 2, .pad_id = 0, .max_len = 6};
    qkv_rng rng;
    qkv_rng_init(&rng, 4);
    struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"d_model\": 10, \"n_heads\": 4}", "n_heads"},
        {"{\"norm\": \"middle\"}", "model.norm"},
        {"{\"dropout\": 1.5}", "model.dropout"},
        {"{\"activation\": \"swish\"}", "model.activation"},
        {"{\"n_layers\": \"two\"}", "model.n_layers"},
        {"{\"max_len\": 4}", "model.max_len"},
        {"{\"emb_scale_sqrt_d\": 1}", "emb_scale_sqrt_d"},
        {"{\"embeddings\": {\"pretrained\": \"/nonexistent/emb.safetensors\"}}", "nonexistent"},
        {"{\"embeddings\": {\"frozen\": \"yes\"}}", "embeddings.frozen"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        qkv_params *p = qkv_params_new();
        qkv_model *m = create_from(bad[i].json, &info, p, &rng);
        CHECKF(m == NULL && strstr(qkv_last_error(), bad[i].needle), "%s: error '%s' should name %s", bad[i].json,
               qkv_last_error(), bad[i].needle);
        if (m) t->free(m);
        qkv_params_free(p);
    }

    qkv_params *p = qkv_params_new();
    qkv_model *m = create_from("{\"d_model\": 8, \"n_layers\": 2, \"n_heads\": 2, \"d_ff\": 16, \"max_len\": 8}",
                               &info, p, &rng);
    CHECK_NN(m);
    if (!m) {
        qkv_params_free(p);
        return;
    }
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_training(ctx, false);
    qkv_tensor *ids = qkv_ctx_zeros(ctx, QKV_I32, 2, (const int64_t[]){2, 5});
    qkv_tensor *mask = qkv_ctx_zeros(ctx, QKV_F32, 2, (const int64_t[]){2, 5});
    qkv_tensor *labels = qkv_ctx_zeros(ctx, QKV_I32, 1, (const int64_t[]){2});
    for (int i = 0; i < 10; i++) {
        qkv_i32(ids)[i] = 1 + i % 11;
        qkv_f32(mask)[i] = i < 7 ? 1.0f : 0.0f; /* second sentence: 2 words + 3 padding */
    }
    qkv_i32(labels)[1] = 1;
    qkv_batch b = {.ids = ids, .mask = mask, .labels = labels, .n_tokens = 7};
    qkv_attention_maps maps = {0};
    qkv_tensor *lp = t->forward(ctx, m, &b, &maps);
    CHECK_NN(lp);
    CHECK(maps.n_layers == 2 && maps.kind[0] && !strcmp(maps.kind[0], "self"));
    if (lp && maps.n_layers == 2) {
        CHECK(lp->ndim == 2 && lp->shape[0] == 2 && lp->shape[1] == 2);
        qkv_tensor *w = maps.weights[1];
        CHECK(w && w->ndim == 4 && w->shape[0] == 2 && w->shape[1] == 2 && w->shape[2] == 5 && w->shape[3] == 5);
        /* Padded keys get no attention; every row of a real query sums to 1. */
        const float *a = qkv_f32(w);
        for (int h = 0; h < 2; h++)
            for (int q = 0; q < 2; q++) {
                const float *row = a + (((1 * 2 + h) * 5 + q) * 5);
                CHECK(row[2] == 0.0f && row[3] == 0.0f && row[4] == 0.0f);
                CHECK(fabsf(row[0] + row[1] - 1.0f) < 1e-5f);
            }
        /* The same log-probabilities without maps (pruned last block), and a loss equal to their NLL. */
        qkv_tensor *lp2 = t->forward(ctx, m, &b, NULL);
        CHECK(lp2 && test_allclose("pruned vs full", lp2, lp, 1e-5, 1e-6));
        qkv_tensor *loss = t->loss(ctx, m, &b);
        CHECK_NN(loss);
        if (loss) {
            float want = -(qkv_f32(lp)[0] + qkv_f32(lp)[3]) / 2.0f;
            CHECKF(fabsf(qkv_f32(loss)[0] - want) < 1e-5f, "loss %g want %g", qkv_f32(loss)[0], want);
        }
    }
    /* Bad batches. */
    qkv_batch nolab = {.ids = ids, .mask = mask};
    CHECK(t->loss(ctx, m, &nolab) == NULL && strstr(qkv_last_error(), "labels"));
    qkv_tensor *mask3 = qkv_ctx_zeros(ctx, QKV_F32, 2, (const int64_t[]){2, 4});
    qkv_batch badmask = {.ids = ids, .mask = mask3, .labels = labels};
    CHECK(t->loss(ctx, m, &badmask) == NULL && strstr(qkv_last_error(), "mask"));
    qkv_ctx_free(ctx);
    t->free(m);
    qkv_params_free(p);
}

/* ---- Learning on real reviews ------------------------------------------------------------------------------ */

#define LT 32 /* words per sentence, [CLS] included */

typedef struct {
    int n;
    int32_t *ids; /* n x LT */
    float *mask;
    int32_t *labels;
} encoded;

/* [CLS] + lowercased words without punctuation, unknown words -> <unk>, cut to LT, padded with <pad> (id 0). */
static bool encode_file(const char *path, qkv_vocab **vocab, encoded *e) {
    qkv_data_opts o = {.format = QKV_DATA_TSV, .n_fields = 2};
    qkv_dataset *d = qkv_data_read_all(path, &o);
    if (!d) return false;
    qkv_word_opts wo = {.lowercase = true, .strip_punct = true};
    if (!*vocab) {
        qkv_token_counter *c = qkv_token_counter_new();
        for (size_t i = 0; i < d->n_rows; i++) {
            char **toks;
            size_t n;
            if (qkv_word_split(d->rows[i].fields[1], d->rows[i].lens[1], &wo, &toks, &n) == QKV_OK) {
                qkv_token_counter_add_all(c, toks, n);
                free(toks);
            }
        }
        *vocab = qkv_vocab_build(c, QKV_SPECIAL_PAD | QKV_SPECIAL_UNK | QKV_SPECIAL_CLS, 0, 2, 0);
        qkv_token_counter_free(c);
    }
    e->n = (int)d->n_rows;
    e->ids = calloc((size_t)e->n * LT, sizeof *e->ids);
    e->mask = calloc((size_t)e->n * LT, sizeof *e->mask);
    e->labels = calloc((size_t)e->n, sizeof *e->labels);
    int32_t unk = qkv_vocab_id(*vocab, "<unk>", 5), cls = qkv_vocab_id(*vocab, "[CLS]", 5);
    for (int i = 0; i < e->n; i++) {
        e->labels[i] = d->rows[i].fields[0][0] == '1';
        e->ids[i * LT] = cls;
        e->mask[i * LT] = 1;
        char **toks;
        size_t n;
        if (qkv_word_split(d->rows[i].fields[1], d->rows[i].lens[1], &wo, &toks, &n) != QKV_OK) continue;
        if (n > LT - 1) n = LT - 1;
        qkv_vocab_encode(*vocab, toks, n, unk, e->ids + i * LT + 1);
        for (size_t k = 0; k < n; k++) e->mask[i * LT + 1 + (int)k] = 1;
        free(toks);
    }
    qkv_dataset_free(d);
    return true;
}

static void fill_batch(qkv_ctx *ctx, const encoded *e, const int *rows, int B, qkv_batch *b) {
    b->ids = qkv_ctx_tensor(ctx, QKV_I32, 2, (const int64_t[]){B, LT});
    b->mask = qkv_ctx_tensor(ctx, QKV_F32, 2, (const int64_t[]){B, LT});
    b->labels = qkv_ctx_tensor(ctx, QKV_I32, 1, (const int64_t[]){B});
    for (int i = 0; i < B; i++) {
        memcpy(qkv_i32(b->ids) + i * LT, e->ids + rows[i] * LT, LT * sizeof(int32_t));
        memcpy(qkv_f32(b->mask) + i * LT, e->mask + rows[i] * LT, LT * sizeof(float));
        qkv_i32(b->labels)[i] = e->labels[rows[i]];
    }
}

TEST(learns_reviews) {
    const char *train_path = test_fixture_path("../../examples/data/reviews/train.tsv");
    char train[1024], dev[1024];
    snprintf(train, sizeof train, "%s", train_path);
    snprintf(dev, sizeof dev, "%s", test_fixture_path("../../examples/data/reviews/dev.tsv"));
    qkv_vocab *vocab = NULL;
    encoded tr = {0}, dv = {0};
    if (!encode_file(train, &vocab, &tr) || !encode_file(dev, &vocab, &dv)) {
        CHECKF(false, "reading the review sample: %s", qkv_last_error());
        return;
    }
    const qkv_model_type *t = qkv_model_type_find("transformer_classifier");
    qkv_task_info info = {.vocab_size = (int64_t)qkv_vocab_size(vocab), .n_classes = 2, .pad_id = 0, .max_len = LT};
    qkv_rng rng;
    qkv_rng_init(&rng, 42);
    qkv_params *p = qkv_params_new();
    qkv_model *m = create_from("{\"d_model\": 32, \"n_layers\": 2, \"n_heads\": 2, \"d_ff\": 64, \"max_len\": 32, "
                               "\"dropout\": 0.1, \"attn_dropout\": 0.1}",
                               &info, p, &rng);
    CHECK_NN(m);
    qkv_optim_config oc = qkv_optim_defaults(QKV_ADAM);
    oc.lr = 2e-3f;
    qkv_optim *opt = qkv_optim_new(p, &oc);
    qkv_ctx *ctx = qkv_ctx_new();
    enum { B = 32, STEPS = 240 };
    int rows[B], *perm = malloc(sizeof(int) * (size_t)tr.n), pos = tr.n;
    double first = 0, last = 0;
    for (int s = 0; m && opt && s < STEPS; s++) {
        if (pos + B > tr.n) { /* reshuffle each epoch */
            for (int i = 0; i < tr.n; i++) perm[i] = i;
            for (int i = tr.n - 1; i > 0; i--) {
                int j = (int)qkv_rng_below(&rng, (uint32_t)(i + 1)), x = perm[i];
                perm[i] = perm[j];
                perm[j] = x;
            }
            pos = 0;
        }
        memcpy(rows, perm + pos, sizeof rows);
        pos += B;
        qkv_ctx_reset(ctx);
        qkv_ctx_set_training(ctx, true);
        qkv_optim_zero_grad(opt);
        qkv_batch b = {0};
        fill_batch(ctx, &tr, rows, B, &b);
        qkv_tensor *loss = t->loss(ctx, m, &b);
        if (!loss || qkv_backward(ctx, loss) || qkv_optim_step(opt)) {
            CHECKF(false, "step %d: %s", s, qkv_last_error());
            break;
        }
        if (s < 30) first += qkv_f32(loss)[0] / 30;
        if (s >= STEPS - 30) last += qkv_f32(loss)[0] / 30;
    }
    /* Dev accuracy in eval mode. */
    int correct = 0;
    qkv_ctx_set_training(ctx, false);
    qkv_ctx_set_grad(ctx, false);
    for (int i = 0; m && i + B <= dv.n; i += B) {
        for (int k = 0; k < B; k++) rows[k] = i + k;
        qkv_ctx_reset(ctx);
        qkv_batch b = {0};
        fill_batch(ctx, &dv, rows, B, &b);
        qkv_tensor *lp = t->forward(ctx, m, &b, NULL);
        if (!lp) break;
        for (int k = 0; k < B; k++) correct += (qkv_f32(lp)[2 * k + 1] > qkv_f32(lp)[2 * k]) == dv.labels[i + k];
    }
    int n_dev = dv.n / B * B;
    double acc = n_dev ? (double)correct / n_dev : 0;
    printf("  reviews: loss %.3f -> %.3f over %d steps, dev accuracy %.3f (%d sentences)\n", first, last, STEPS, acc,
           n_dev);
    CHECKF(last < first - 0.15, "loss did not fall enough: %.3f -> %.3f", first, last);
    CHECKF(acc > 0.62, "dev accuracy %.3f", acc);
    free(perm);
    qkv_ctx_free(ctx);
    qkv_optim_free(opt);
    if (m) t->free(m);
    qkv_params_free(p);
    qkv_vocab_free(vocab);
    free(tr.ids), free(tr.mask), free(tr.labels), free(dv.ids), free(dv.mask), free(dv.labels);
}

int main(void) {
    /* Tiny tensors: thread start-up would cost more than the work on a shared 2-core machine. */
    qkv_threads_set(1);
    RUN(matches_torch);
    RUN(gradcheck_params);
    RUN(init_errors);
    RUN(pretrained_frozen);
    RUN(model_type);
    RUN(learns_reviews);
    return test_finish();
}
