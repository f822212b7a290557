/* Every registered model type, seen only through its qkv_model_type: a type with an incremental decoder (decoder.h)
 * decodes several rows at once, with reorders (rows repeated, dropped, moved across sources, the batch compacted and
 * fanned out again), and every row's scores
 * equal both a one-row decoder fed the same history and the model's full forward over that history; a type without
 * one (a classifier) says so clearly when asked to generate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "ops/log_softmax_rows.h"
#include "random_model.h"
#include "qkv/beam.h"
#include "qkv/decode.h"
#include "qkv/decoder.h"
#include "qkv/model.h"
#include "qkv/ops.h"
#include "test.h"

/* The LSTM's score function when not its small config's (additive). */
static const char *lstm_attention;

/* Small sizes for the known types; any other type is built from its defaults. */
static const char *small_config(const char *type) {
    static char lstm[160];
    if (lstm_attention && !strcmp(type, "lstm_seq2seq")) {
        snprintf(lstm, sizeof lstm, "{\"embed\": 8, \"hidden\": 6, \"n_layers\": 2, \"attention\": \"%s\", "
                 "\"input_feeding\": true}", lstm_attention);
        return lstm;
    }
    static const struct {
        const char *type, *json;
    } small[] = {
        {"gpt", "{\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, \"n_layers\": 2, \"init_std\": 0.3}"},
        {"rnnlm", "{\"d_model\": 12, \"n_layers\": 2, \"rnn\": \"lstm\"}"},
        {"lstm_seq2seq", "{\"embed\": 8, \"hidden\": 6, \"n_layers\": 2, \"attention\": \"additive\", "
                         "\"input_feeding\": true}"},
        {"transformer_seq2seq", "{\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_enc_layers\": 1, "
                                "\"n_dec_layers\": 2, \"dropout\": 0.0}"},
        {"t5", "{\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_enc_layers\": 1, \"n_dec_layers\": 2, "
               "\"num_buckets\": 8, \"max_distance\": 6, \"dropout\": 0.0}"},
        {"transformer_classifier", "{\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_layers\": 1}"},
    };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        if (!strcmp(small[i].type, type)) return small[i].json;
    return "{}";
}

enum { V_SRC = 11, V_TGT = 13, MAXLEN = 16 };

typedef struct built {
    const qkv_model_type *t;
    qkv_params *p;
    qkv_model *m;
} built;

/* The type's defaults with the small sizes merged over them (create() expects a complete "model" object). */
static bool build(const qkv_model_type *t, built *b) {
    memset(b, 0, sizeof *b);
    b->t = t;
    qkv_task_info info = {.vocab_size = V_SRC, .n_classes = 3, .pad_id = 0, .max_len = MAXLEN};
    if (!strcmp(t->task, "seq2seq")) info.tgt_vocab_size = V_TGT;
    return test_random_model(t, small_config(t->name), &info, 17, &b->p, &b->m);
}

static void unbuild(built *b) {
    if (b->m) b->t->free(b->m);
    qkv_params_free(b->p);
}

enum { N_SRC = 2, PER_SRC = 2, ROWS = N_SRC * PER_SRC, S = 5, STEPS = 6 };
static const int32_t SRC[N_SRC * S] = {3, 4, 5, 6, 7, 8, 9, 10, 0, 0}, LEN[N_SRC] = {5, 3};

/* Scores after feeding hist[0..n) to a fresh one-row decoder (source `src` when the model takes one). */
static qkv_status one_row(const qkv_decoder *d, int src, const int32_t *hist, int n, float *scores, float *attn) {
    qkv_decoder_state *st = d->info.needs_source
                                ? d->ops->start(d->model, SRC + src * S, LEN + src, 1, S, 1, STEPS)
                                : d->ops->start(d->model, NULL, NULL, 1, 0, 1, STEPS);
    if (!st) return qkv_last_status();
    qkv_status rc = QKV_OK;
    for (int i = 0; i < n && !rc; i++) rc = d->ops->step(st, &hist[i], scores, attn);
    d->ops->free(st);
    return rc;
}

/* The full forward's scores at the last of n positions of the history, in the decoder's convention
 * (log-probabilities or logits) into out[V]. A model with a start token reads its inputs as the targets shifted
 * right by it, so its forward gets the history after the start token as targets (and one filler token). */
static qkv_status full_forward(const built *b, const qkv_decoder *d, int src, const int32_t *hist, int n,
                              float *out) {
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_grad(ctx, false);
    qkv_ctx_set_training(ctx, false);
    const int32_t *ids = hist;
    int32_t shifted[STEPS + 1];
    if (d->info.start_token >= 0) {
        for (int i = 1; i < n; i++) shifted[i - 1] = hist[i];
        shifted[n - 1] = 0;
        ids = shifted;
    }
    qkv_batch batch = {.ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, n)),
                       .mask = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(1, n)), .n_tokens = n};
    qkv_status rc = QKV_OK;
    if (batch.ids && batch.mask) {
        memcpy(batch.ids->data, ids, sizeof(int32_t) * (size_t)n);
        qkv_tensor_fill(batch.mask, 1.0f);
        batch.targets = batch.ids;
    }
    if (d->info.needs_source) {
        batch.src_ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, LEN[src]));
        batch.src_mask = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(1, LEN[src]));
        if (batch.src_ids && batch.src_mask) {
            memcpy(batch.src_ids->data, SRC + src * S, sizeof(int32_t) * (size_t)LEN[src]);
            qkv_tensor_fill(batch.src_mask, 1.0f);
        }
    }
    qkv_tensor *y = b->t->forward(ctx, b->m, &batch, NULL);
    if (y && d->info.log_probs) y = qkv_log_softmax(ctx, y, -1);
    y = qkv_contiguous(ctx, y);
    if (!y) rc = qkv_last_status();
    else memcpy(out, qkv_f32(y) + (int64_t)(n - 1) * d->info.vocab, sizeof(float) * (size_t)d->info.vocab);
    qkv_ctx_free(ctx);
    return rc;
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double w = 0;
    for (int64_t i = 0; i < n; i++) w = fmax(w, fabs((double)a[i] - b[i]));
    return w;
}

static void check_decoder(const built *b, const qkv_decoder *d) {
    const char *name = b->t->name;
    int64_t V = d->info.vocab;
    CHECKF(V == (d->info.needs_source ? V_TGT : V_SRC), "%s: vocab %lld", name, (long long)V);
    CHECKF(d->info.needs_source == !strcmp(b->t->task, "seq2seq"), "%s: needs_source does not match task %s", name,
           b->t->task);
    qkv_decoder_state *st = d->info.needs_source ? d->ops->start(d->model, SRC, LEN, N_SRC, S, PER_SRC, STEPS)
                                                 : d->ops->start(d->model, NULL, NULL, N_SRC, 0, PER_SRC, STEPS);
    CHECKF(st != NULL, "%s start: %s", name, qkv_last_error());
    if (!st) return;
    float *scores = malloc(sizeof(float) * (size_t)(ROWS * V)), *ref = malloc(sizeof(float) * (size_t)V);
    float *fwd = malloc(sizeof(float) * (size_t)V), attn[ROWS * S], ref_attn[S];
    int32_t hist[ROWS][STEPS] = {{0}}, moved[ROWS][STEPS], tok[ROWS], src_of[ROWS], src_moved[ROWS];
    /* After step `at`, the state goes to n rows, row i taking old row from[i]. */
    static const struct {
        int at, n;
        int32_t from[ROWS];
    } plan[] = {
        {0, 2, {0, 2}},       /* compact: one row per source */
        {1, 4, {0, 0, 1, 1}}, /* fan out again, as a beam grows from one row */
        {2, 4, {3, 0, 0, 2}}, /* row 1 dropped, row 0 repeated, rows cross sources */
        {3, 4, {1, 0, 3, 2}}, /* two swaps: rows that trade places with nothing else to copy from */
        {4, 3, {2, 0, 1}},    /* compact */
    };
    int R = ROWS, next = 0;
    for (int r = 0; r < ROWS; r++) src_of[r] = r / PER_SRC;
    double worst_row = 0, worst_fwd = 0, worst_attn = 0;
    for (int t = 0; t < STEPS; t++) {
        for (int r = 0; r < R; r++) {
            int32_t first = d->info.needs_source ? 1 : d->info.start_token >= 0 ? d->info.start_token : 3 + r;
            tok[r] = hist[r][t] = t == 0 ? first : 3 + (int32_t)((r * 7 + t * 5) % (V - 3));
        }
        CHECK_OK(d->ops->step(st, tok, scores, d->info.source_attention ? attn : NULL));
        for (int r = 0; r < R; r++) {
            const float *row = scores + (int64_t)r * V;
            if (one_row(d, src_of[r], hist[r], t + 1, ref, d->info.source_attention ? ref_attn : NULL) == QKV_OK)
                worst_row = fmax(worst_row, max_diff(row, ref, V));
            else
                CHECKF(false, "%s one-row decoder: %s", name, qkv_last_error());
            if (full_forward(b, d, src_of[r], hist[r], t + 1, fwd) == QKV_OK)
                worst_fwd = fmax(worst_fwd, max_diff(row, fwd, V));
            else
                CHECKF(false, "%s forward: %s", name, qkv_last_error());
            if (d->info.source_attention) {
                worst_attn = fmax(worst_attn, max_diff(attn + r * S, ref_attn, S));
                double sum = 0;
                for (int s = 0; s < S; s++) sum += attn[r * S + s];
                CHECKF(fabs(sum - 1.0) < 1e-5, "%s: attention of row %d sums to %g", name, r, sum);
            }
        }
        if (next < (int)(sizeof plan / sizeof plan[0]) && plan[next].at == t) {
            const int32_t *from = plan[next].from;
            R = plan[next++].n;
            for (int r = 0; r < R; r++) {
                memcpy(moved[r], hist[from[r]], sizeof moved[r]);
                src_moved[r] = src_of[from[r]];
            }
            memcpy(hist, moved, sizeof hist);
            memcpy(src_of, src_moved, sizeof src_of);
            CHECK_OK(d->ops->reorder(st, from, R));
        }
    }
    printf("  %-22s %d rows, %d steps, 5 reorders: max |diff| vs one row %.3g, vs full forward %.3g, "
           "attention %.3g\n", name, ROWS, STEPS, worst_row, worst_fwd, worst_attn);
    CHECKF(worst_row < 1e-5, "%s: batched rows differ from one-row decoding by %g", name, worst_row);
    CHECKF(worst_fwd < 1e-5, "%s: decoding differs from the full forward by %g", name, worst_fwd);
    CHECKF(worst_attn < 1e-5, "%s: batched attention differs by %g", name, worst_attn);
    const int32_t bad_from[ROWS + 1] = {0, 1, 2, R, 0};
    CHECKF(d->ops->reorder(st, bad_from, R + 1) == QKV_ERR_RANGE, "%s: reorder out of range accepted", name);
    CHECKF(d->ops->reorder(st, bad_from, ROWS + 1) == QKV_ERR_RANGE, "%s: reorder beyond the prepared rows", name);
    CHECKF(d->ops->reorder(st, bad_from, 0) == QKV_ERR_RANGE, "%s: reorder to no rows accepted", name);
    d->ops->free(st);
    free(scores);
    free(ref);
    free(fwd);
}

TEST(every_decoder_batches_reorders_and_matches_forward) {
    int with = 0;
    for (int i = 0; i < qkv_model_type_count(); i++) {
        const qkv_model_type *t = qkv_model_type_at(i);
        if (!t->decoder) continue;
        built b;
        if (build(t, &b)) {
            qkv_decoder d;
            CHECKF(qkv_model_decoder(t, b.m, &d) == QKV_OK, "%s: %s", t->name, qkv_last_error());
            check_decoder(&b, &d);
            with++;
        }
        unbuild(&b);
    }
    CHECKF(with >= 4, "only %d model types can generate", with);
    /* The LSTM's other score functions: general keeps W h_s from start() on (its decoder's own path). */
    static const char *const kinds[] = {"general", "dot", "scaled_dot"};
    for (int k = 0; k < 3; k++) {
        lstm_attention = kinds[k];
        built b;
        qkv_decoder d;
        if (build(qkv_model_type_find("lstm_seq2seq"), &b) && qkv_model_decoder(b.t, b.m, &d) == QKV_OK) {
            printf("  attention %s:\n", kinds[k]);
            check_decoder(&b, &d);
        }
        unbuild(&b);
    }
    lstm_attention = NULL;
}

/* A step's raw logits (step_logits, which greedy search reads) are the very numbers its normalised step takes the
 * log_softmax of: the two paths give the same bits after log_softmax, for several rows (the packed products) and
 * after a reorder. The LSTM and the Transformer write the projection straight into the caller's buffer. */
TEST(step_logits_are_the_logits_the_step_normalises) {
    int tried = 0;
    for (int i = 0; i < qkv_model_type_count(); i++) {
        const qkv_model_type *t = qkv_model_type_at(i);
        built b;
        qkv_decoder d;
        if (!t->decoder || !build(t, &b) || qkv_model_decoder(t, b.m, &d) != QKV_OK || !d.ops->step_logits ||
            !d.info.log_probs) {
            if (t->decoder) unbuild(&b);
            continue;
        }
        tried++;
        int64_t V = d.info.vocab;
        qkv_decoder_state *st[2];
        for (int k = 0; k < 2; k++)
            st[k] = d.info.needs_source ? d.ops->start(d.model, SRC, LEN, N_SRC, S, PER_SRC, STEPS)
                                        : d.ops->start(d.model, NULL, NULL, N_SRC, 0, PER_SRC, STEPS);
        float *lp = malloc(sizeof(float) * (size_t)(ROWS * V)), *raw = malloc(sizeof(float) * (size_t)(ROWS * V));
        float *norm = malloc(sizeof(float) * (size_t)(ROWS * V));
        CHECKF(st[0] && st[1] && lp && raw && norm, "%s start: %s", t->name, qkv_last_error());
        int R = ROWS, same = 1;
        for (int step = 0; st[0] && st[1] && lp && raw && norm && step < 3; step++) {
            int32_t tok[ROWS];
            for (int r = 0; r < R; r++) tok[r] = step == 0 ? 1 : 3 + (int32_t)((r * 5 + step * 3) % (V - 3));
            CHECK_OK(d.ops->step(st[0], tok, lp, NULL));
            CHECK_OK(d.ops->step_logits(st[1], tok, raw, NULL));
            qkv__log_softmax_rows(norm, raw, R, V);
            same &= !memcmp(norm, lp, sizeof(float) * (size_t)(R * V));
            if (step == 0) { /* a beam-like reorder: row 2 dropped, row 0 repeated */
                const int32_t from[ROWS - 1] = {1, 0, 0};
                R = ROWS - 1;
                CHECK_OK(d.ops->reorder(st[0], from, R));
                CHECK_OK(d.ops->reorder(st[1], from, R));
            }
        }
        CHECKF(same, "%s: log_softmax of step_logits differs from step", t->name);
        for (int k = 0; k < 2; k++)
            if (st[k]) d.ops->free(st[k]);
        free(lp);
        free(raw);
        free(norm);
        unbuild(&b);
    }
    CHECKF(tried >= 2, "only %d decoders with normalised steps and raw logits", tried);
}

/* The search algorithms of beam.h take any decoder: on a language model (no source) greedy decoding's scores are
 * the log-probabilities of its tokens, also when the model's steps return raw logits. */
TEST(search_over_a_language_model_normalises_its_scores) {
    int tried = 0;
    for (int i = 0; i < qkv_model_type_count(); i++) {
        const qkv_model_type *t = qkv_model_type_at(i);
        if (!t->decoder) continue;
        built b;
        qkv_decoder d;
        if (!build(t, &b) || qkv_model_decoder(t, b.m, &d) != QKV_OK || d.info.needs_source) {
            unbuild(&b);
            continue;
        }
        tried++;
        qkv_decode_opts o = qkv_decode_defaults();
        o.bos = d.info.start_token >= 0 ? d.info.start_token : 1;
        o.eos = o.bos == 2 ? 3 : 2;
        o.pad = -1;
        o.max_len = STEPS - 1;
        qkv_hyps hs = {0};
        CHECKF(qkv_decode_greedy(&d, NULL, NULL, 1, 0, &o, &hs) == QKV_OK && hs.n == 1, "%s greedy: %s", t->name,
               qkv_last_error());
        if (hs.n == 1) {
            const qkv_hyp *h = &hs.h[0];
            int32_t seq[STEPS] = {o.bos};
            memcpy(seq + 1, h->tokens, sizeof(int32_t) * (size_t)h->len);
            float *sc = malloc(sizeof(float) * (size_t)d.info.vocab);
            double want = 0;
            for (int k = 0; k < h->len; k++) {
                CHECK_OK(one_row(&d, 0, seq, k + 1, sc, NULL));
                double mx = -INFINITY, sum = 0;
                for (int64_t v = 0; v < d.info.vocab; v++) mx = fmax(mx, sc[v]);
                for (int64_t v = 0; v < d.info.vocab; v++) sum += exp(sc[v] - mx);
                want += sc[h->tokens[k]] - mx - log(sum);
            }
            CHECKF(h->len >= 1 && fabs(h->logprob - want) < 1e-4, "%s: greedy log-probability %g, want %g", t->name,
                   h->logprob, want);
            free(sc);
        }
        qkv_hyps_free(&hs);
        unbuild(&b);
    }
    CHECKF(tried >= 2, "only %d language models", tried);
}

/* A type without a decoder is an error naming it, through the type and through the generation API; a seq2seq type
 * is not a prompt-continuing language model. */
TEST(types_without_a_decoder_cannot_generate) {
    const char *none[] = {"embmean", "transformer_classifier"};
    for (int i = 0; i < 2; i++) {
        const qkv_model_type *t = qkv_model_type_find(none[i]);
        CHECKF(t != NULL, "%s: %s", none[i], qkv_last_error());
        if (!t) continue;
        CHECKF(t->decoder == NULL, "%s has a decoder", none[i]);
        built b;
        if (build(t, &b)) {
            qkv_decoder d;
            CHECK(qkv_model_decoder(t, b.m, &d) == QKV_ERR_UNSUPPORTED);
            CHECKF(strstr(qkv_last_error(), none[i]) && strstr(qkv_last_error(), "cannot generate"), "%s: '%s'",
                   none[i], qkv_last_error());
            CHECK(qkv_lm_decoder_new(t, b.m) == NULL);
            CHECKF(strstr(qkv_last_error(), none[i]) && strstr(qkv_last_error(), "cannot generate"), "%s: '%s'",
                   none[i], qkv_last_error());
        }
        unbuild(&b);
    }
    const qkv_model_type *t = qkv_model_type_find("transformer_seq2seq");
    built b;
    if (t && build(t, &b)) {
        CHECK(qkv_lm_decoder_new(t, b.m) == NULL && strstr(qkv_last_error(), "source"));
        unbuild(&b);
    }
}

int main(void) {
    RUN(every_decoder_batches_reorders_and_matches_forward);
    RUN(search_over_a_language_model_normalises_its_scores);
    RUN(step_logits_are_the_logits_the_step_normalises);
    RUN(types_without_a_decoder_cannot_generate);
    return test_finish();
}
