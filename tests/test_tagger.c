/* The tagger: the model against PyTorch (tests/ref/tagger.py: BiLSTM, LSTM and Transformer log-probabilities, every
 * parameter gradient, the masked loss), the loss ignoring padding, the `names` rule of docs/tagging.md and
 * conlleval entity scores on hand-worked sentences, the reader's errors (file:line), and learning on real Brown
 * sentences (../shared/data/pos). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/metrics.h"
#include "qkv/ops.h"
#include "qkv/tagger.h"
#include "qkv/train.h"
#include "test_nn_common.h"
#include "train/task_tagging.h"

static char root[256];

typedef struct {
    qkv_tagger *m;
    bool loss;
} fwd_case;

static qkv_tensor *f_tag(qkv_ctx *c, qkv_tensor **in, void *u) {
    fwd_case *fc = u;
    if (fc->loss) return qkv_reshape(c, qkv_tagger_loss(c, fc->m, in[0], in[1], in[2]), QKV_DIMS(1)); /* torch: [1] */
    return qkv_tagger_forward(c, fc->m, in[0], in[1], NULL);
}

static void check_case(qkv_st_file *f, const char *key, const qkv_tagger_config *c, bool loss) {
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    qkv_params *p = qkv_params_new();
    qkv_tagger *m = qkv_tagger_new(c, p, &rng);
    CHECKF(m != NULL, "%s: %s", key, qkv_last_error());
    fwd_case fc = {m, loss};
    if (m) CHECKF(nn_fixture_check(f, key, p, f_tag, &fc, 1e-4, 1e-5), "%s", key);
    qkv_tagger_free(m);
    qkv_params_free(p);
}

TEST(matches_torch) {
    qkv_st_file *f = nn_open_fixture("tagger.safetensors");
    if (!f) return;
    qkv_tagger_config c = qkv_tagger_config_default(20, 5);
    c.d_model = 6;
    c.n_layers = 2;
    check_case(f, "bilstm", &c, false);
    check_case(f, "bilstm_loss", &c, true);
    c.n_layers = 1;
    c.bidirectional = false;
    check_case(f, "lstm", &c, false);
    c = qkv_tagger_config_default(20, 5);
    c.encoder = QKV_TAGGER_TRANSFORMER;
    c.d_model = 8;
    c.n_layers = 2;
    c.n_heads = 2;
    c.d_ff = 16;
    c.max_len = 16;
    check_case(f, "transformer", &c, false);
    check_case(f, "transformer_loss", &c, true);
    qkv_st_close(f);
}

/* Targets at padded positions change nothing; the mean is over the 4 tokens. */
TEST(loss_leaves_padding_out) {
    qkv_rng rng;
    qkv_rng_init(&rng, 1);
    qkv_params *p = qkv_params_new();
    qkv_tagger_config c = qkv_tagger_config_default(10, 3);
    c.d_model = 4;
    qkv_tagger *m = qkv_tagger_new(&c, p, &rng);
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_grad(ctx, false);
    qkv_tensor *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(2, 3)), *mask = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(2, 3));
    qkv_tensor *t1 = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(2, 3)), *t2 = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(2, 3));
    int32_t v[6] = {1, 2, 3, 4, 0, 0};
    float mk[6] = {1, 1, 1, 1, 0, 0};
    for (int i = 0; i < 6; i++) {
        qkv_i32(ids)[i] = v[i];
        qkv_f32(mask)[i] = mk[i];
        qkv_i32(t1)[i] = i % 3;
        qkv_i32(t2)[i] = mk[i] ? i % 3 : 2 - i % 3;
    }
    qkv_tensor *l1 = qkv_tagger_loss(ctx, m, ids, mask, t1), *l2 = qkv_tagger_loss(ctx, m, ids, mask, t2);
    qkv_tensor *lp = qkv_contiguous(ctx, qkv_tagger_forward(ctx, m, ids, mask, NULL));
    CHECK_NN(l1);
    CHECK_NN(l2);
    CHECK_NN(lp);
    if (l1 && l2 && lp) {
        CHECK(qkv_f32(l1)[0] == qkv_f32(l2)[0]);
        double want = 0;
        for (int i = 0; i < 4; i++) want -= qkv_f32(lp)[i * 3 + i % 3];
        CHECKF(fabs(qkv_f32(l1)[0] - want / 4) < 1e-6, "loss %g, want %g", (double)qkv_f32(l1)[0], want / 4);
    }
    qkv_ctx_free(ctx);
    qkv_tagger_free(m);
    qkv_params_free(p);
}

/* docs/tagging.md's rule, worked by hand. */
TEST(names_rule) {
    struct {
        const char *toks, *brown, *want;
    } cases[] = {
        /* the example: np-tl starts, title-case -tl words continue */
        {"The Fulton County Grand Jury said Friday", "at-tl np-tl nn-tl jj-tl nn-tl vbd nr",
         "O B-NAME I-NAME I-NAME I-NAME O O"},
        /* np$ / nps / np+bez count; a -tl word not after a name is O; adjacent proper nouns make one run */
        {"Atlanta's John Smith visited the Grand Jury", "np$ np np vbd at jj-tl nn-tl", "B-NAME I-NAME I-NAME O O O O"},
        /* a lowercase -tl word ends the run; -hl suffixes are dropped; nps-hl is a name */
        {"Texas of America Democrats", "np-tl in-tl np-tl nps-hl", "B-NAME O B-NAME I-NAME"},
        /* all-caps -tl word is not title case; "nn" never starts a name */
        {"Fulton USA Court county", "np nn-tl nn-tl nn", "B-NAME O O O"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char tb[256], bb[256], wb[256];
        snprintf(tb, sizeof tb, "%s", cases[k].toks);
        snprintf(bb, sizeof bb, "%s", cases[k].brown);
        snprintf(wb, sizeof wb, "%s", cases[k].want);
        char *toks[16], *brown[16], *want[16], *sv;
        size_t n = 0, nb = 0, nw = 0;
        for (char *p = strtok_r(tb, " ", &sv); p; p = strtok_r(NULL, " ", &sv)) toks[n++] = p;
        for (char *p = strtok_r(bb, " ", &sv); p; p = strtok_r(NULL, " ", &sv)) brown[nb++] = p;
        for (char *p = strtok_r(wb, " ", &sv); p; p = strtok_r(NULL, " ", &sv)) want[nw++] = p;
        CHECK(n == nb && n == nw);
        const char *got[16];
        qkv__tagging_names(toks, brown, n, got);
        for (size_t i = 0; i < n; i++)
            CHECKF(!strcmp(got[i], want[i]), "case %zu token %zu '%s': %s, want %s", k, i, toks[i], got[i], want[i]);
    }
}

/* Entity scores on two sentences, counted by hand as conlleval does: gold has 3 entities (Fulton County Grand Jury,
 * Atlanta; John Smith), the prediction 3 (Fulton County, Atlanta; John Smith): 2 correct (Atlanta, John Smith).
 * P = R = 2/3; the I-NAME after O at "Grand" starts a predicted entity (so predicted is 4 if it followed O). */
TEST(entity_f1_hand_worked) {
    const char *gold[] = {"B-NAME", "I-NAME", "I-NAME", "I-NAME", "O", "B-NAME", "", "B-NAME", "I-NAME", "O", ""};
    const char *pred[] = {"B-NAME", "I-NAME", "O", "O", "O", "B-NAME", "", "B-NAME", "I-NAME", "O", ""};
    qkv_chunk_result r;
    CHECK_OK(qkv_metric_chunk_f1(gold, pred, 11, QKV_TAGS_IOB2, &r));
    CHECK(r.n_gold == 3 && r.n_pred == 3 && r.n_correct == 2);
    CHECK(fabs(r.prf.precision - 2.0 / 3) < 1e-12 && fabs(r.prf.recall - 2.0 / 3) < 1e-12);
    CHECK(fabs(r.prf.f1 - 2.0 / 3) < 1e-12);
    qkv_chunk_free(&r);
    /* conlleval: an I- after O starts an entity; a sentence end closes one */
    const char *g2[] = {"O", "I-NAME", "I-NAME", "", "I-NAME", ""};
    const char *p2[] = {"O", "B-NAME", "I-NAME", "", "B-NAME", ""};
    CHECK_OK(qkv_metric_chunk_f1(g2, p2, 6, QKV_TAGS_IOB2, &r));
    CHECK(r.n_gold == 2 && r.n_pred == 2 && r.n_correct == 2);
    qkv_chunk_free(&r);
}

static const char *tmp_file(const char *name, const char *content) { return test_write_file(root, name, content); }

static cJSON *config(const char *train, const char *dev, const char *extra_model, int steps) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"model\": {\"type\": \"tagger\", \"d_model\": 32%s}, \"data\": {\"train\": \"%s\", \"dev\": \"%s\"},"
             " \"train\": {\"steps\": %d, \"batch_size\": 16, \"optimizer\": {\"lr\": 0.01}, \"log_every\": 1000,"
             " \"checkpoint_every\": 0}, \"eval\": {\"every\": 0}}",
             extra_model, train, dev, steps);
    return cJSON_Parse(text);
}

/* Bad files: a missing column, an empty sentence, a tag the training data never had; each names file:line. */
TEST(bad_files_name_the_line) {
    const char *train = tmp_file("train.tsv", "The\tDET\tat\njury\tNOUN\tnn\n\nIt\tPRON\tpps\nran\tVERB\tvbd\n\n");
    char tr[512];
    snprintf(tr, sizeof tr, "%s", train);
    cJSON *cfg = config(tr, "", "", 1);
    task t;
    CHECK_OK(qkv__task_prepare(&t, cfg, "tagging", root, true));
    split s;
    struct {
        const char *name, *content, *want;
    } bad[] = {
        {"cols.tsv", "The\tDET\tat\njury\tNOUN\n\n", "cols.tsv:2: expected 3 tab-separated columns"},
        {"empty.tsv", "The\tDET\tat\n\n\njury\tNOUN\tnn\n\n", "empty.tsv:3: empty sentence"},
        {"unknown.tsv", "The\tDET\tat\njury\tX\tnn\n\n", "unknown.tsv:2: tag 'X' is not one of the 4 tags"},
        {"blank.tsv", "The\tDET\t\n\n", "blank.tsv:1: column 3 (Brown tag) is empty"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *p = tmp_file(bad[k].name, bad[k].content);
        CHECK(qkv__task_load(&t, p, &s) == QKV_ERR_FORMAT);
        CHECKF(strstr(qkv_last_error(), bad[k].want), "%s: got '%s'", bad[k].name, qkv_last_error());
    }
    CHECK_OK(qkv__task_load(&t, tr, &s));
    CHECK(s.n == 2 && s.pool_n == 8);
    qkv__split_free(&s);
    qkv__task_free(&t);
    cJSON_Delete(cfg);
}

/* The first n sentences of a shared file into root/name; NULL (skip) when the data is absent. */
static const char *slice(const char *rel, const char *name, int n) {
    const char *src = test_shared_path(rel);
    FILE *f = src ? fopen(src, "r") : NULL;
    if (!f) return NULL;
    static char path[2][512];
    static int which;
    char *out = path[which++ % 2];
    snprintf(out, 512, "%s/%s", root, name);
    FILE *o = fopen(out, "w");
    char line[1024];
    int seen = 0;
    while (o && seen < n && fgets(line, sizeof line, f)) {
        fputs(line, o);
        seen += line[0] == '\n';
    }
    if (o) fclose(o);
    fclose(f);
    return out;
}

/* A small BiLSTM on 1,000 Brown sentences: dev accuracy from chance to above 85% in 150 steps. */
TEST(learns_universal_tags) {
    const char *train = slice("data/pos/train.tsv", "learn_train.tsv", 1000);
    const char *dev = slice("data/pos/dev.tsv", "learn_dev.tsv", 200);
    if (!train || !dev) {
        test_skip("../shared/data/pos is not there");
        return;
    }
    cJSON *cfg = config(train, dev, "", 150);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/learn_run", root);
    qkv_run *r = qkv_run_new(dir, cfg, false);
    CHECKF(r != NULL, "%s", qkv_last_error());
    if (r) {
        cJSON *before = qkv_run_eval(r, "dev", NULL);
        qkv_train_outcome out;
        CHECK_OK(qkv_run_train(r, NULL, &out));
        cJSON *after = qkv_run_eval(r, "dev", NULL);
        CHECK(before && after);
        if (before && after) {
            double a0 = cJSON_GetNumberValue(cJSON_GetObjectItem(before, "accuracy"));
            double a1 = cJSON_GetNumberValue(cJSON_GetObjectItem(after, "accuracy"));
            double l0 = cJSON_GetNumberValue(cJSON_GetObjectItem(before, "loss"));
            double l1 = cJSON_GetNumberValue(cJSON_GetObjectItem(after, "loss"));
            printf("  dev accuracy %.4f -> %.4f, loss %.4f -> %.4f\n", a0, a1, l0, l1);
            CHECK(a0 < 0.3 && a1 > 0.85 && l1 < 0.6 && l0 > 2.0);
        }
        cJSON_Delete(before);
        cJSON_Delete(after);
    }
    qkv_run_free(r);
    cJSON_Delete(cfg);
}

int main(void) {
    snprintf(root, sizeof root, "%s/qkv_tagger_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(root)) {
        printf("cannot create a temporary directory\n");
        return 1;
    }
    RUN(matches_torch);
    RUN(loss_leaves_padding_out);
    RUN(names_rule);
    RUN(entity_f1_hand_worked);
    RUN(bad_files_name_the_line);
    RUN(learns_universal_tags);
    int rc = test_finish();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) printf("note: could not remove %s\n", root);
    return rc;
}
