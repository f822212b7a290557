/* BERT pretraining data (src/train/task_pretrain.c) on real text (Austen's first chapters): sequence layout, the
 * masking rule (15%, at most max_predictions, never [CLS]/[SEP], 80/10/10), NSP labels near one half, new sequences
 * and masks each epoch that replay for the same epoch, fixed held-out masks, and dynamic masking at batch time. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus.h"
#include "test.h"
#include "train/train_internal.h"

static char dir[] = "/tmp/qkv_ptd_XXXXXX";
static char corpus[256];

static qkv_run *open_run(const char *name, const char *masking) {
    char cfg_text[1024], run[256];
    snprintf(cfg_text, sizeof cfg_text,
             "{\"model\": {\"type\": \"bert\", \"d_model\": 16, \"n_layers\": 1, \"n_heads\": 2, \"d_ff\": 32,"
             " \"max_positions\": 64},"
             " \"data\": {\"train\": \"%s\", \"max_len\": 64, \"wordpiece_vocab_size\": 1000, \"heldout\": 0.1,"
             " \"masking\": \"%s\"}, \"train\": {\"steps\": 1}, \"seed\": 4}",
             corpus, masking);
    snprintf(run, sizeof run, "%s/%s", dir, name);
    cJSON *cfg = cJSON_Parse(cfg_text);
    qkv_run *r = qkv_run_new(run, cfg, false);
    cJSON_Delete(cfg);
    return r;
}

static int32_t id_of(const qkv_run *r, const char *tok) { return qkv_wordpiece_id(r->task.wp, tok); }

TEST(sequences_and_masks) {
    if (!corpus[0]) {
        test_skip("no ../shared/data");
        return;
    }
    qkv_run *r = open_run("epoch", "epoch");
    CHECK_NN(r);
    if (!r) return;
    int32_t cls = id_of(r, "[CLS]"), sep = id_of(r, "[SEP]"), msk = id_of(r, "[MASK]");
    const split *s = &r->train;
    int64_t predicted = 0, as_mask = 0, kept = 0, nsp1 = 0, bad_layout = 0, bad_count = 0, special_target = 0;
    for (int64_t i = 0; i < s->n; i++) {
        const example *e = &s->ex[i];
        const int32_t *x = s->pool + e->off, *y = s->pool + e->toff;
        int n_sep = 0, k = 0;
        for (int64_t j = 0; j < e->n; j++) {
            int32_t orig = y[j] != -100 ? y[j] : x[j];
            n_sep += orig == sep;
            if (y[j] == -100) continue;
            k++;
            special_target += y[j] == cls || y[j] == sep;
            as_mask += x[j] == msk;
            kept += x[j] == y[j];
        }
        bad_layout += x[0] != cls || n_sep != 2 || x[e->prompt - 1] != sep || y[0] != -100 || e->n > 64;
        int64_t want = (int64_t)llround(0.15 * (double)e->n);
        want = want < 1 ? 1 : want > 20 ? 20 : want;
        bad_count += k != want;
        predicted += k;
        nsp1 += e->label == 1;
    }
    double f_mask = (double)as_mask / (double)predicted, f_kept = (double)kept / (double)predicted;
    double f_nsp = (double)nsp1 / (double)s->n;
    printf("%lld sequences, %lld predictions: %.3f [MASK], %.3f kept, %.3f random; NotNext %.3f\n", (long long)s->n,
           (long long)predicted, f_mask, f_kept, 1 - f_mask - f_kept, f_nsp);
    CHECK(s->n > 300 && bad_layout == 0 && bad_count == 0 && special_target == 0);
    CHECK(fabs(f_mask - 0.8) < 0.03 && fabs(f_kept - 0.1) < 0.03);
    CHECK(f_nsp > 0.45 && f_nsp < 0.75); /* above 1/2: a one-sentence chunk always takes a random B */
    CHECK(r->have_dev && r->dev.n > 10);
    /* epoch 1 differs; rebuilding epoch 0 gives back the very same sequences and masks */
    int64_t n0 = s->n, pool0 = s->pool_n;
    int32_t *copy = malloc(sizeof *copy * (size_t)pool0);
    memcpy(copy, s->pool, sizeof *copy * (size_t)pool0);
    CHECK_OK(qkv__pretrain_epoch(&r->task, &r->train, 1));
    CHECK(s->n != n0 || s->pool_n != pool0 || memcmp(copy, s->pool, sizeof *copy * (size_t)pool0));
    CHECK_OK(qkv__pretrain_epoch(&r->task, &r->train, 0));
    CHECK(s->n == n0 && s->pool_n == pool0 && !memcmp(copy, s->pool, sizeof *copy * (size_t)pool0));
    free(copy);
    qkv_run_free(r);
}

TEST(dynamic_masking) {
    if (!corpus[0]) {
        test_skip("no ../shared/data");
        return;
    }
    qkv_run *r = open_run("dynamic", "dynamic");
    CHECK_NN(r);
    if (!r) return;
    const split *s = &r->train;
    bool untargeted = true;
    for (int64_t i = 0; i < s->n && untargeted; i++)
        for (int64_t j = 0; j < s->ex[i].tn; j++) untargeted &= s->pool[s->ex[i].toff + j] == -100;
    CHECK(untargeted);
    int64_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_batch a, b;
    CHECK_OK(qkv__batch_make(ctx, &r->task, s, idx, 8, &a, NULL));
    CHECK_OK(qkv__batch_make(ctx, &r->task, s, idx, 8, &b, NULL));
    int64_t n = a.targets->shape[0] * a.targets->shape[1];
    CHECK(a.n_tokens > 8 && b.n_tokens > 8);
    CHECK(memcmp(qkv_i32(a.targets), qkv_i32(b.targets), sizeof(int32_t) * (size_t)n) != 0);
    /* held-out sequences keep their masks */
    CHECK_OK(qkv__batch_make(ctx, &r->task, &r->dev, idx, 4, &a, NULL));
    CHECK_OK(qkv__batch_make(ctx, &r->task, &r->dev, idx, 4, &b, NULL));
    n = a.targets->shape[0] * a.targets->shape[1];
    CHECK(!memcmp(qkv_i32(a.targets), qkv_i32(b.targets), sizeof(int32_t) * (size_t)n));
    qkv_ctx_free(ctx);
    qkv_run_free(r);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    const char *austen = test_austen_documents(dir);
    if (austen) snprintf(corpus, sizeof corpus, "%s", austen);
    RUN(sequences_and_masks);
    RUN(dynamic_masking);
    return test_finish();
}
