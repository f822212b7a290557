/* Generation for many prompts at once (decode.h's qkv_generate_batch): one decoder state for a batch of prompts,
 * rows in lock step, each row running qkv_generate's loop with its own sampler; ended rows are compacted out. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"
#include "qkv/decode.h"

/* One prompt's generation: what qkv_generate keeps in its locals. */
typedef struct {
    const int32_t *prompt;
    int64_t n_prompt, fed, n, n_hist;
    int32_t *out, *hist, next;
    qkv_sampler *s;
    bool done;
    qkv_gen_end end;
} gen_row;

static bool is_stop(const qkv_gen_opts *o, int32_t t) {
    for (int i = 0; i < o->n_stop; i++)
        if (o->stop[i] == t) return true;
    return false;
}

/* The row has fed its prompt and what it generated; logits are the scores after the last token fed. */
static void choose(gen_row *g, float *logits, const qkv_gen_opts *o, int64_t capacity) {
    if (g->n == o->max_new_tokens) {
        g->done = true;
        g->end = QKV_GEN_MAX_TOKENS;
        return;
    }
    int64_t from = o->sample.repeat_scope == QKV_REPEAT_ALL ? 0 : g->n_prompt; /* the repetition rules' history */
    int32_t t = qkv_sampler_next(g->s, logits, g->hist + from, g->n_hist - from);
    if (t < 0 || is_stop(o, t)) { /* t < 0: no_repeat_ngram left nothing */
        g->done = true;
        g->end = QKV_GEN_STOP_TOKEN;
        return;
    }
    g->out[g->n++] = t;
    g->hist[g->n_hist++] = t;
    g->next = t;
    if (g->n == o->max_new_tokens) {
        g->done = true;
        g->end = QKV_GEN_MAX_TOKENS;
    } else if (capacity > 0 && g->fed >= capacity) {
        g->done = true;
        g->end = QKV_GEN_CONTEXT_FULL;
    }
}

/* Prompts first..first+m of the input, as one batch; emits them in order from *next_emit. */
static qkv_status run_batch(const qkv_decoder *d, gen_row *g, int m, int first, const qkv_gen_opts *o,
                            qkv_gen_emit_fn emit, void *user, int *next_emit) {
    int64_t V = d->info.vocab, cap = d->info.capacity, steps = 0;
    bool primed = d->info.start_token >= 0;
    for (int i = 0; i < m; i++)
        if (g[i].n_prompt + o->max_new_tokens > steps) steps = g[i].n_prompt + o->max_new_tokens;
    steps += primed;
    if (cap > 0 && steps > cap) steps = cap;
    float *logits = malloc(sizeof(float) * (size_t)m * (size_t)V);
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)m), *row = malloc(sizeof(int32_t) * (size_t)m),
            *from = malloc(sizeof(int32_t) * (size_t)m);
    qkv_decoder_state *st = NULL;
    qkv_status status = QKV_OK;
    if (!logits || !tokens || !row || !from) {
        status = qkv_error_set(QKV_ERR_NOMEM, "generate: out of memory");
        goto done;
    }
    if (!(st = d->ops->start(d->model, NULL, NULL, m, 0, 1, (int)(steps > 0 ? steps : 1)))) {
        status = qkv_last_status();
        goto done;
    }
    int alive = m;
    for (int r = 0; r < m; r++) {
        row[r] = r;
        tokens[r] = d->info.start_token;
    }
    /* A model trained on ShiftRight(text) reads its start token first (qkv_lm_decoder_reset). */
    if (primed && (status = d->ops->step(st, tokens, logits, NULL))) goto done;
    for (bool scored = primed; alive > 0; scored = true) {
        int kept = 0;
        for (int r = 0; r < alive; r++) {
            gen_row *x = &g[row[r]];
            if (scored && x->fed >= x->n_prompt) choose(x, logits + (int64_t)r * V, o, cap);
            if (x->done) continue;
            tokens[kept] = x->fed < x->n_prompt ? x->prompt[x->fed] : x->next;
            if (x->fed < x->n_prompt) x->hist[x->n_hist++] = x->prompt[x->fed];
            from[kept] = r;
            row[kept++] = row[r];
        }
        while (*next_emit < first + m && g[*next_emit - first].done) {
            gen_row *x = &g[*next_emit - first];
            if ((status = emit(*next_emit, x->out, x->n, x->end, user))) goto done;
            (*next_emit)++;
        }
        if (kept == 0) break;
        if (kept < alive && (status = d->ops->reorder(st, from, kept))) goto done;
        alive = kept;
        /* While every row is still reading its prompt, the scores of its next `ahead` tokens are never read: they go
         * in as one feed (a GPT runs them as one batched pass without its output projection). */
        int64_t ahead = INT64_MAX;
        for (int r = 0; r < alive; r++) {
            const gen_row *x = &g[row[r]];
            if (x->n_prompt - x->fed - 1 < ahead) ahead = x->n_prompt - x->fed - 1;
        }
        if (ahead >= 1 && ahead <= INT_MAX / alive) {
            int n = (int)ahead;
            int32_t *feed = malloc(sizeof *feed * (size_t)alive * (size_t)n);
            if (!feed) {
                status = qkv_error_set(QKV_ERR_NOMEM, "generate: out of memory");
                goto done;
            }
            for (int r = 0; r < alive; r++) {
                gen_row *x = &g[row[r]];
                memcpy(feed + (size_t)r * (size_t)n, x->prompt + x->fed, sizeof *feed * (size_t)n);
                for (int t = 1; t < n; t++) x->hist[x->n_hist++] = x->prompt[x->fed + t];
                x->fed += n;
            }
            status = qkv__decode_feed(d, st, alive, feed, n);
            free(feed);
            if (status) goto done;
            continue;
        }
        if ((status = d->ops->step(st, tokens, logits, NULL))) goto done;
        for (int r = 0; r < alive; r++) g[row[r]].fed++;
    }
done:
    if (st) d->ops->free(st);
    free(logits);
    free(tokens);
    free(row);
    free(from);
    return status;
}

qkv_status qkv_generate_batch(const qkv_model_type *type, qkv_model *model, int n, const int32_t *const *prompts,
                              const int64_t *n_prompt, const qkv_gen_opts *o, int batch_size, qkv_gen_emit_fn emit,
                              void *user) {
    qkv_gen_opts def = qkv_gen_defaults();
    if (!o) o = &def;
    if (!type || !model || !emit || n < 0 || batch_size < 1 || (n > 0 && (!prompts || !n_prompt)))
        return qkv_error_set(QKV_ERR_INVALID, "generate batch: need a model, prompts, an emit callback and "
                             "batch_size >= 1 (got %d)", batch_size);
    if (o->max_new_tokens < 0 || (o->n_stop > 0 && !o->stop))
        return qkv_error_set(QKV_ERR_INVALID, "generate batch: max_new_tokens %lld must be >= 0, with a stop list "
                             "matching its count", (long long)o->max_new_tokens);
    qkv_status status = qkv_sample_check(&o->sample);
    if (status) return status;
    qkv_decoder d;
    if ((status = qkv_model_decoder(type, model, &d))) return status;
    if (d.info.needs_source)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "generate batch: model type '%s' (task %s) decodes from a source "
                             "sentence, not from a prompt", type->name, type->task);
    for (int i = 0; i < n; i++) {
        if (n_prompt[i] < 0 || (n_prompt[i] > 0 && !prompts[i]))
            return qkv_error_set(QKV_ERR_INVALID, "generate batch: prompt %d has no tokens to match its count", i);
        if (n_prompt[i] == 0 && d.info.start_token < 0)
            return qkv_error_set(QKV_ERR_INVALID, "generate: prompt %d is empty; this model needs a prompt of at "
                                 "least one token", i);
        if (d.info.capacity > 0 && n_prompt[i] > d.info.capacity)
            return qkv_error_set(QKV_ERR_RANGE, "generate: prompt %d of %lld tokens exceeds the model's context of "
                                 "%lld", i, (long long)n_prompt[i], (long long)d.info.capacity);
    }
    int B = batch_size < n ? batch_size : (n > 0 ? n : 1);
    gen_row *g = calloc((size_t)B, sizeof *g);
    if (!g) return qkv_error_set(QKV_ERR_NOMEM, "generate batch: out of memory");
    int next_emit = 0;
    for (int first = 0; first < n && !status; first += B) {
        int m = n - first < B ? n - first : B;
        for (int i = 0; i < m && !status; i++) {
            gen_row *x = &g[i];
            *x = (gen_row){.prompt = prompts[first + i], .n_prompt = n_prompt[first + i]};
            x->out = malloc(sizeof(int32_t) * (size_t)(o->max_new_tokens + 1));
            x->hist = malloc(sizeof(int32_t) * (size_t)(x->n_prompt + o->max_new_tokens + 1));
            x->s = qkv_sampler_new(d.info.vocab, &o->sample, o->seed);
            if (!x->out || !x->hist || !x->s)
                status = x->s ? qkv_error_set(QKV_ERR_NOMEM, "generate batch: out of memory") : qkv_last_status();
        }
        if (!status) status = run_batch(&d, g, m, first, o, emit, user, &next_emit);
        for (int i = 0; i < m; i++) {
            free(g[i].out);
            free(g[i].hist);
            qkv_sampler_free(g[i].s);
            g[i] = (gen_row){0};
        }
    }
    free(g);
    return status;
}
