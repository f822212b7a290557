/* Transfer-learning controls (the run's "finetune" section, src/train/finetune.c, and the optimiser's per-parameter
 * settings): the layer rule from parameter names, head-only training leaves everything else bit for bit, gradual
 * unfreezing starts layers from the top at the right steps and resumes bit-identically, discriminative learning
 * rates and groups reach the optimiser, Adam counts a late parameter's own steps, and bad settings are named. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/config.h"
#include "qkv/init.h"
#include "qkv/nn_transformer.h"
#include "test.h"
#include "train/train_internal.h"

static char dir[256];
static int run_counter;

static const char *run_dir(void) {
    static char p[512];
    snprintf(p, sizeof p, "%s/run%d", dir, run_counter++);
    return p;
}

static qkv_run *make_run(const char *where, bool resume, const char *json) {
    cJSON *u = qkv_config_parse("test", json);
    qkv_run *r = u ? qkv_run_new(where, u, resume) : NULL;
    cJSON_Delete(u);
    return r;
}

static const char *TRAIN = "pos\tgood film good fun\nneg\tbad movie awful dull\npos\tgood good film great\n"
                           "neg\tbad bad dull movie\npos\tfun great film\nneg\tawful dull bad\n";

static char cfg[4096];
/* A two-block Transformer classifier: layers 0 (embedding, pos), 1, 2 (encoder.layers.0/1), 3 (norm, classifier). */
static const char *tcls_cfg(const char *train, long steps, const char *finetune) {
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"transformer_classifier\", \"d_model\": 8, \"n_layers\": 2, \"n_heads\": 2, "
             "\"d_ff\": 16, \"dropout\": 0, \"attn_dropout\": 0, \"max_len\": 16, \"pos_enc\": \"learned\"}, "
             "\"data\": {\"train\": \"%s\", \"max_len\": 16}, \"train\": {\"steps\": %ld, \"batch_size\": 2, \"checkpoint_every\": 2, "
             "\"log_every\": 1, \"optimizer\": {\"name\": \"adamw\", \"lr\": 0.01}}, \"eval\": {\"every\": 0}, "
             "\"finetune\": {%s}}",
             train, steps, finetune);
    return cfg;
}

/* Copies of every parameter's values, to compare after training. */
typedef struct {
    int n;
    char names[64][128];
    float *data[64];
    int64_t numel[64];
} snapshot;

static void snap(qkv_run *r, snapshot *s) {
    s->n = qkv_params_count(r->params);
    for (int i = 0; i < s->n && i < 64; i++) {
        qkv_tensor *p = qkv_params_at(r->params, i);
        snprintf(s->names[i], sizeof s->names[i], "%s", p->name);
        s->numel[i] = qkv_numel(p);
        s->data[i] = malloc(sizeof(float) * (size_t)s->numel[i]);
        memcpy(s->data[i], qkv_f32(p), sizeof(float) * (size_t)s->numel[i]);
    }
}
static void snap_free(snapshot *s) {
    for (int i = 0; i < s->n && i < 64; i++) free(s->data[i]);
}
static bool same(qkv_run *r, const snapshot *s, int i) {
    return !memcmp(qkv_f32(qkv_params_find(r->params, s->names[i])), s->data[i], sizeof(float) * (size_t)s->numel[i]);
}

static bool train_all(qkv_run *r) {
    qkv_train_outcome out;
    return r && qkv_run_train(r, NULL, &out) == QKV_OK;
}

TEST(layer_rule_from_names) {
    qkv_params *p = qkv_params_new();
    int64_t shape[1] = {2};
    const char *names[] = {"emb.weight", "enc.layers.0.w", "enc.layers.1.w", "enc.layers.10.w", "enc.norm.weight",
                           "head.weight"};
    for (int i = 0; i < 6; i++) CHECK_NN(qkv_params_add(p, NULL, names[i], 1, shape));
    long top = 0;
    long want[] = {0, 1, 2, 11, 12, 12};
    for (int i = 0; i < 6; i++) CHECKF(qkv__finetune_layers(p, names[i], &top) == want[i], "%s", names[i]);
    CHECK(top == 12);
    qkv_params_free(p);
    /* No numbered blocks: the last parameter's module is the head. */
    p = qkv_params_new();
    const char *flat[] = {"embedding.weight", "output.weight", "output.bias"};
    for (int i = 0; i < 3; i++) CHECK_NN(qkv_params_add(p, NULL, flat[i], 1, shape));
    CHECK(qkv__finetune_layers(p, "embedding.weight", &top) == 0 && top == 1);
    CHECK(qkv__finetune_layers(p, "output.bias", &top) == 1);
    qkv_params_free(p);
    CHECK(qkv__finetune_match("encoder.layers.1", "encoder.layers.1.w"));
    CHECK(!qkv__finetune_match("encoder.layers.1", "encoder.layers.10.w"));
    CHECK(qkv__finetune_match("*.norm*", "encoder.layers.1.norm2.bias"));
    CHECK(qkv__finetune_match("", "anything"));
}

TEST(head_mode_trains_the_top_alone) {
    const char *train = test_write_file(dir, "cls.tsv", TRAIN);
    qkv_run *r = make_run(run_dir(), false, tcls_cfg(train, 4, "\"mode\": \"head\""));
    CHECK_NN(r);
    if (!r) return;
    snapshot s;
    snap(r, &s);
    CHECK(train_all(r));
    int moved = 0, kept = 0;
    long top;
    for (int i = 0; i < s.n; i++) {
        bool is_top = qkv__finetune_layers(r->params, s.names[i], &top) == top;
        bool changed = !same(r, &s, i);
        /* The head moves (its final norm's gain may not after 4 steps: bias and classifier must). */
        if (is_top && strstr(s.names[i], "classifier")) CHECKF(changed, "%s did not train", s.names[i]);
        if (!is_top) CHECKF(!changed, "%s is frozen but changed", s.names[i]);
        moved += changed;
        kept += !changed;
    }
    CHECK(moved >= 2 && kept >= 10);
    /* Frozen parameters do not require a gradient, so backward does not compute one. */
    CHECK(!(qkv_params_find(r->params, "embedding.weight")->flags & QKV_FLAG_REQUIRES_GRAD));
    snap_free(&s);
    qkv_run_free(r);
}

TEST(gradual_unfreezing_from_the_top_and_exact_resume) {
    const char *train = test_write_file(dir, "cls.tsv", TRAIN);
    /* unfreeze_every 2: head from step 0, block 2 (layer 2) from step 2, block 1 from 4, embeddings from 6. */
    char a_dir[512];
    snprintf(a_dir, sizeof a_dir, "%s", run_dir());
    qkv_run *r = make_run(a_dir, false, tcls_cfg(train, 3, "\"unfreeze_every\": 2"));
    CHECK_NN(r);
    if (!r) return;
    snapshot s;
    snap(r, &s);
    CHECK(train_all(r));
    for (int i = 0; i < s.n; i++) {
        bool changed = !same(r, &s, i);
        if (strstr(s.names[i], "layers.0.") || strstr(s.names[i], "embedding"))
            CHECKF(!changed, "%s trains before its turn", s.names[i]);
        if (strstr(s.names[i], "layers.1.linear1.weight") || strstr(s.names[i], "classifier.weight"))
            CHECKF(changed, "%s did not train", s.names[i]);
    }
    snap_free(&s);
    qkv_run_free(r);
    /* 8 steps in one go, against 3 + resume to 8 (checkpoints every 2 steps; stopping at 3 saves one). */
    char b_dir[512];
    snprintf(b_dir, sizeof b_dir, "%s", run_dir());
    qkv_run *full = make_run(b_dir, false, tcls_cfg(train, 8, "\"unfreeze_every\": 2"));
    CHECK(train_all(full));
    qkv_run *resumed = make_run(a_dir, true, tcls_cfg(train, 8, "\"unfreeze_every\": 2"));
    CHECK_NN(resumed);
    CHECK(train_all(resumed));
    for (int i = 0; full && resumed && i < qkv_params_count(full->params); i++) {
        qkv_tensor *a = qkv_params_at(full->params, i), *b = qkv_params_find(resumed->params, a->name);
        CHECKF(b && !memcmp(qkv_f32(a), qkv_f32(b), sizeof(float) * (size_t)qkv_numel(a)), "%s differs after resume",
               a->name);
    }
    qkv_run_free(full);
    qkv_run_free(resumed);
}

TEST(rates_and_groups_reach_the_optimiser) {
    const char *train = test_write_file(dir, "cls.tsv", TRAIN);
    qkv_run *r = make_run(run_dir(), false,
                          tcls_cfg(train, 1, "\"layer_lr_decay\": 0.5, \"groups\": \"classifier:lr=4,wd=0; @1:frozen\""));
    CHECK_NN(r);
    if (!r) return;
    for (int i = 0; i < qkv_optim_param_count(r->opt); i++) {
        const char *name = qkv_optim_param_at(r->opt, i)->name;
        qkv_optim_param p = qkv_optim_param_get(r->opt, i);
        long top, layer = qkv__finetune_layers(r->params, name, &top);
        float want = (float)pow(0.5, (double)(top - layer)) * (strstr(name, "classifier") ? 4.0f : 1.0f);
        CHECKF(fabsf(p.lr_scale - want) < 1e-7f, "%s: lr scale %g, wanted %g", name, p.lr_scale, want);
        CHECKF(p.frozen == (layer == 1), "%s: frozen %d", name, p.frozen);
        if (strstr(name, "classifier")) CHECK(p.weight_decay == 0.0f);
        else CHECK(isnan(p.weight_decay));
    }
    qkv_run_free(r);
}

/* A parameter that starts training at optimiser step S takes Adam's first step then, as a fresh optimiser would. */
TEST(adam_counts_a_late_parameters_own_steps) {
    qkv_params *pa = qkv_params_new(), *pb = qkv_params_new();
    int64_t shape[1] = {3};
    qkv_tensor *a = qkv_params_add(pa, NULL, "w", 1, shape), *b = qkv_params_add(pb, NULL, "w", 1, shape);
    for (int i = 0; i < 3; i++) qkv_f32(a)[i] = qkv_f32(b)[i] = 0.5f * (float)i - 0.3f;
    qkv_optim_config c = qkv_optim_defaults(QKV_ADAM);
    qkv_optim *oa = qkv_optim_new(pa, &c), *ob = qkv_optim_new(pb, &c);
    qkv_optim_param frozen = {.frozen = true, .lr_scale = 1, .weight_decay = NAN};
    qkv_optim_param_set(oa, 0, &frozen);
    CHECK(!(a->flags & QKV_FLAG_REQUIRES_GRAD));
    qkv_optim_set_steps(oa, 5); /* five steps of other parameters */
    qkv_optim_param live = {.frozen = false, .lr_scale = 1, .weight_decay = NAN, .since = 5};
    qkv_optim_param_set(oa, 0, &live);
    CHECK(a->flags & QKV_FLAG_REQUIRES_GRAD);
    for (int step = 0; step < 3; step++) {
        for (qkv_tensor **t = (qkv_tensor *[]){a, b, NULL}; *t; t++) {
            qkv_tensor_zero_grad(*t);
            if (!(*t)->grad) (*t)->grad = qkv_tensor_new(QKV_F32, 1, shape);
            for (int i = 0; i < 3; i++) qkv_f32((*t)->grad)[i] = 0.1f * (float)(i + 1) * (float)(step + 1);
        }
        qkv_optim_step(oa);
        qkv_optim_step(ob);
    }
    CHECK(!memcmp(qkv_f32(a), qkv_f32(b), sizeof(float) * 3));
    qkv_optim_free(oa);
    qkv_optim_free(ob);
    qkv_params_free(pa);
    qkv_params_free(pb);
}

TEST(errors_name_the_setting) {
    const char *train = test_write_file(dir, "cls.tsv", TRAIN);
    struct {
        const char *finetune, *want;
    } cases[] = {
        {"\"freeze\": \"encoder.layerz\"", "finetune.freeze: 'encoder.layerz' matches no trainable parameter"},
        {"\"groups\": \"classifier\"", "finetune.groups: 'classifier': expected SELECTOR:SETTINGS"},
        {"\"groups\": \"classifier:lr=-1\"", "is not one of lr=MULTIPLIER"},
        {"\"groups\": \"@3-1:frozen\"", "expected layers as @N or @LO-HI"},
        {"\"groups\": \"@9:frozen\"", "group 1 ('', layers 9-9) matches no trainable parameter"},
        {"\"mode\": \"adapters\"", "has no adapter parameters"},
        {"\"freeze\": \"*\"", "every parameter is frozen"},
        {"\"layer_lr_decay\": 0", "finetune.layer_lr_decay: expected a number in (0, 1]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qkv_run *r = make_run(run_dir(), false, tcls_cfg(train, 1, cases[i].finetune));
        CHECKF(!r && strstr(qkv_last_error(), cases[i].want), "%s: got '%s'", cases[i].finetune,
               r ? "(no error)" : qkv_last_error());
        qkv_run_free(r);
    }
}

/* The last "init_from" record of a run's log. */
static cJSON *init_record(const char *where) {
    char path[600];
    snprintf(path, sizeof path, "%s/log.jsonl", where);
    char *text = test_read_file(path);
    cJSON *found = NULL;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n"))
        if (strstr(line, "\"init_from\"")) {
            cJSON_Delete(found);
            found = cJSON_Parse(line);
        }
    free(text);
    return found;
}

TEST(init_from_a_run_and_a_renamed_file) {
    const char *train = test_write_file(dir, "cls.tsv", TRAIN);
    char a_dir[512], extra[700];
    snprintf(a_dir, sizeof a_dir, "%s", run_dir());
    qkv_run *a = make_run(a_dir, false, tcls_cfg(train, 4, ""));
    CHECK(train_all(a));
    snprintf(extra, sizeof extra, "\"init_from\": \"%s\"", a_dir);
    char b_dir[512];
    snprintf(b_dir, sizeof b_dir, "%s", run_dir());
    qkv_run *b = make_run(b_dir, false, tcls_cfg(train, 4, extra));
    CHECK_NN(b);
    for (int i = 0; a && b && i < qkv_params_count(a->params); i++) {
        qkv_tensor *x = qkv_params_at(a->params, i), *y = qkv_params_find(b->params, x->name);
        CHECKF(y && !memcmp(qkv_f32(x), qkv_f32(y), sizeof(float) * (size_t)qkv_numel(x)), "%s not loaded", x->name);
    }
    cJSON *rec = init_record(b_dir);
    CHECK(rec && cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "n_new")) == 0 &&
          cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "n_unused")) == 0 &&
          cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "loaded")) == qkv_params_count(a->params));
    cJSON_Delete(rec);
    qkv_run_free(b);
    /* A file whose names carry a prefix (as a Hugging Face head's do), with an extra tensor and no classifier. */
    qkv_st_writer *w = qkv_st_writer_new();
    for (int i = 0; a && i < qkv_params_count(a->params); i++) {
        qkv_tensor *x = qkv_params_at(a->params, i);
        char name[300];
        snprintf(name, sizeof name, "model.%s", x->name);
        if (!strstr(x->name, "classifier")) CHECK_OK(qkv_st_writer_add(w, name, x));
        if (i == 0) CHECK_OK(qkv_st_writer_add(w, "pooler.dense.weight", x));
    }
    char file[600];
    snprintf(file, sizeof file, "%s/renamed.safetensors", dir);
    CHECK_OK(qkv_st_writer_save(w, file));
    qkv_st_writer_free(w);
    snprintf(extra, sizeof extra, "\"init_from\": \"%s\"", file);
    snprintf(b_dir, sizeof b_dir, "%s", run_dir());
    b = make_run(b_dir, false, tcls_cfg(train, 4, extra));
    CHECK_NN(b);
    qkv_tensor *x = a ? qkv_params_find(a->params, "encoder.layers.1.linear2.weight") : NULL;
    qkv_tensor *y = b ? qkv_params_find(b->params, "encoder.layers.1.linear2.weight") : NULL;
    CHECK(x && y && !memcmp(qkv_f32(x), qkv_f32(y), sizeof(float) * (size_t)qkv_numel(x)));
    x = a ? qkv_params_find(a->params, "classifier.weight") : NULL;
    y = b ? qkv_params_find(b->params, "classifier.weight") : NULL;
    CHECK(x && y && memcmp(qkv_f32(x), qkv_f32(y), sizeof(float) * (size_t)qkv_numel(x)));
    rec = init_record(b_dir);
    CHECK(rec && cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "n_new")) == 2 &&
          cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "n_unused")) == 1);
    cJSON_Delete(rec);
    qkv_run_free(b);
    /* Another width: an error naming the weights and the config that describes them. */
    snprintf(extra, sizeof extra, "\"init_from\": \"%s\"", a_dir);
    char *c = strdup(tcls_cfg(train, 4, extra));
    char *ff = strstr(c, "\"d_ff\": 16");
    if (ff) memcpy(ff, "\"d_ff\": 32", 10);
    b = make_run(run_dir(), false, c);
    CHECKF(!b && strstr(qkv_last_error(), "ckpt-4.safetensors: tensor 'encoder.layers.0.linear1.weight' has shape "
                                          "[16, 8] but this run's model needs [32, 8]") &&
               strstr(qkv_last_error(), "config.json"), "%s", b ? "(no error)" : qkv_last_error());
    qkv_run_free(b);
    free(c);
    /* A directory with no weights. */
    snprintf(extra, sizeof extra, "\"init_from\": \"%s\"", dir);
    b = make_run(run_dir(), false, tcls_cfg(train, 4, extra));
    CHECKF(!b && strstr(qkv_last_error(), "has no model.safetensors"), "%s", b ? "(no error)" : qkv_last_error());
    qkv_run_free(b);
    qkv_run_free(a);
}

/* An adapter whose up-projection is zero is the identity: the block's output is bit for bit the block without
 * adapters (the other parameters draw the same init, adapters being created last); other weights change it. */
TEST(adapters_start_as_the_identity) {
    for (int norm_first = 0; norm_first < 2; norm_first++) {
        qkv_nn_block_config c = qkv_nn_block_config_default(8, 2);
        c.dim_feedforward = 16;
        c.dropout = 0;
        c.norm_first = norm_first;
        qkv_nn_block_config ca = c;
        ca.adapter_dim = 3;
        qkv_params *p0 = qkv_params_new(), *p1 = qkv_params_new();
        qkv_rng r0, r1;
        qkv_rng_init(&r0, 7);
        qkv_rng_init(&r1, 7);
        qkv_nn_encoder_layer l0, l1;
        CHECK_OK(qkv_nn_encoder_layer_init(&l0, p0, "l", &c, &r0));
        CHECK_OK(qkv_nn_encoder_layer_init(&l1, p1, "l", &ca, &r1));
        CHECK(qkv_params_count(p1) == qkv_params_count(p0) + 8);
        CHECK_NN(qkv_params_find(p1, "l.adapter2.down.weight"));
        qkv_ctx *ctx = qkv_ctx_new();
        int64_t shape[3] = {2, 5, 8};
        qkv_tensor *x = qkv_tensor_new(QKV_F32, 3, shape);
        for (int i = 0; i < 80; i++) qkv_f32(x)[i] = qkv_rng_normal(&r0);
        qkv_tensor *y0 = qkv_nn_encoder_layer_forward(ctx, &l0, x, NULL, NULL);
        qkv_tensor *y1 = qkv_nn_encoder_layer_forward(ctx, &l1, x, NULL, NULL);
        CHECK(y0 && y1 && memcmp(qkv_f32(y0), qkv_f32(y1), sizeof(float) * 80)); /* N(0, 1e-3): close, not equal */
        CHECK(test_allclose("adapters near the identity", y1, y0, 0, 1e-3));
        qkv_init_constant(l1.adapter1.up.weight, 0);
        qkv_init_constant(l1.adapter2.up.weight, 0);
        y1 = qkv_nn_encoder_layer_forward(ctx, &l1, x, NULL, NULL);
        CHECK(y0 && y1 && !memcmp(qkv_f32(y0), qkv_f32(y1), sizeof(float) * 80));
        qkv_tensor_free(x);
        qkv_ctx_free(ctx);
        qkv_params_free(p0);
        qkv_params_free(p1);
    }
}

/* finetune.mode adapters: adapters, layer norms and the head train; attention, feed-forward and embeddings do not. */
TEST(adapters_mode_trains_adapters_norms_and_head) {
    const char *train = test_write_file(dir, "cls.tsv", TRAIN);
    char *c = strdup(tcls_cfg(train, 4, "\"mode\": \"adapters\""));
    char *at = strstr(c, "\"d_ff\": 16");
    char buf[4200];
    snprintf(buf, sizeof buf, "%.*s\"adapter_dim\": 4, %s", (int)(at - c), c, at);
    free(c);
    qkv_run *r = make_run(run_dir(), false, buf);
    CHECK_NN(r);
    if (!r) return;
    snapshot s;
    snap(r, &s);
    CHECK(train_all(r));
    int adapters_moved = 0;
    for (int i = 0; i < s.n; i++) {
        bool changed = !same(r, &s, i);
        bool trains = strstr(s.names[i], "adapter") || strstr(s.names[i], "norm") || strstr(s.names[i], "classifier");
        if (!trains) CHECKF(!changed, "%s is frozen but changed", s.names[i]);
        if (strstr(s.names[i], "adapter") && strstr(s.names[i], "up.weight")) adapters_moved += changed;
        if (strstr(s.names[i], "classifier.weight")) CHECK(changed);
    }
    CHECK(adapters_moved == 4); /* 2 blocks x 2 adapters */
    snap_free(&s);
    qkv_run_free(r);
}

/* The tagger's Transformer encoder takes the same adapters, and gradual unfreezing works on its layers. */
TEST(tagger_adapters_and_unfreezing) {
    const char *train = test_write_file(dir, "tags.tsv", "The\tDET\tat\ndog\tNOUN\tnn\nran\tVERB\tvbd\n\n"
                                                         "A\tDET\tat\ncat\tNOUN\tnn\nsat\tVERB\tvbd\n\n");
    for (int mode = 0; mode < 2; mode++) {
        snprintf(cfg, sizeof cfg,
                 "{\"model\": {\"type\": \"tagger\", \"encoder\": \"transformer\", \"d_model\": 8, \"n_layers\": 2, "
                 "\"n_heads\": 2, \"d_ff\": 16, \"max_len\": 16, \"adapter_dim\": 2}, \"data\": {\"train\": \"%s\", \"max_len\": 16}, "
                 "\"train\": {\"steps\": 3, \"batch_size\": 2, \"checkpoint_every\": 0}, \"eval\": {\"every\": 0}, "
                 "\"finetune\": {%s}}",
                 train, mode ? "\"unfreeze_every\": 2" : "\"mode\": \"adapters\"");
        qkv_run *r = make_run(run_dir(), false, cfg);
        CHECK_NN(r);
        if (!r) return;
        CHECK_NN(qkv_params_find(r->params, "encoder.layers.1.adapter2.up.weight"));
        snapshot s;
        snap(r, &s);
        CHECK(train_all(r));
        int adapters_moved = 0;
        for (int i = 0; i < s.n; i++) {
            bool changed = !same(r, &s, i);
            if (mode == 0 && strstr(s.names[i], "linear1.weight")) CHECKF(!changed, "%s changed", s.names[i]);
            /* a 2-unit ReLU bottleneck may start dead in one adapter: count them */
            if (mode == 0 && strstr(s.names[i], "up.weight")) adapters_moved += changed;
            if (mode == 1 && strstr(s.names[i], "layers.0.")) CHECKF(!changed, "%s trains early", s.names[i]);
            if (mode == 1 && strstr(s.names[i], "output.weight")) CHECKF(changed, "%s did not", s.names[i]);
        }
        if (mode == 0) CHECKF(adapters_moved >= 2, "%d of 4 adapters trained", adapters_moved);
        snap_free(&s);
        qkv_run_free(r);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/qkv_finetune_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(layer_rule_from_names);
    RUN(head_mode_trains_the_top_alone);
    RUN(gradual_unfreezing_from_the_top_and_exact_resume);
    RUN(rates_and_groups_reach_the_optimiser);
    RUN(adam_counts_a_late_parameters_own_steps);
    RUN(errors_name_the_setting);
    RUN(init_from_a_run_and_a_renamed_file);
    RUN(adapters_start_as_the_identity);
    RUN(adapters_mode_trains_adapters_norms_and_head);
    RUN(tagger_adapters_and_unfreezing);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish();
}
