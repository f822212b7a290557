/* Generation for many prompts at once (decode.h's qkv_generate_batch): prompts sorted by length into batches, one
 * decoder state for all of them (restarted per batch where the model allows), rows in lock step, each row running
 * qkv_generate's loop with its own sampler; ended rows are compacted out, results handed back in input order. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "decode_internal.h"
#include "ops/gemm_packed.h"
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
/* capacity: the tokens a row can feed (-1: no limit). */
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
    } else if (capacity >= 0 && g->fed >= capacity) {
        g->done = true;
        g->end = QKV_GEN_CONTEXT_FULL;
    }
}

/* A call's prompts in input order (each filled in when its batch starts) and the next one to hand back. */
typedef struct {
    gen_row *rows;
    int n, next;
    qkv_gen_emit_fn emit;
    void *user;
} gen_out;

/* Hands back, in input order, every prompt that has ended and whose predecessors have. */
static qkv_status flush(gen_out *go) {
    while (go->next < go->n && go->rows[go->next].done) {
        gen_row *x = &go->rows[go->next];
        qkv_status st = go->emit(go->next, x->out, x->n, x->end, go->user);
        free(x->out);
        x->out = NULL;
        go->next++;
        if (st) return st;
    }
    return QKV_OK;
}

/* An ended row keeps only its tokens until it is handed back. */
static void row_release(gen_row *x) {
    free(x->hist);
    x->hist = NULL;
    qkv_sampler_free(x->s);
    x->s = NULL;
}

/* Work memory of a batch of up to B rows: the scores [B, V], the rows' tokens, which prompt each decoder row
 * extends, and a reorder's sources. */
typedef struct {
    float *logits;
    int32_t *tokens, *row, *from;
} gen_work;

/* The m prompts g[0..m) as one batch through st (a fresh or restarted state of m rows). */
static qkv_status run_batch(const qkv_decoder *d, qkv_decoder_state *st, gen_row *const *g, int m,
                            const qkv_gen_opts *o, const gen_work *w, gen_out *go) {
    bool primed = d->info.start_token >= 0;
    /* A ShiftRight model's start token takes a position of its own (as in qkv_generate). */
    int64_t V = d->info.vocab, cap = d->info.capacity > 0 ? d->info.capacity - primed : -1;
    float *logits = w->logits;
    int32_t *tokens = w->tokens, *row = w->row, *from = w->from;
    qkv_status status = QKV_OK;
    int alive = m;
    for (int r = 0; r < m; r++) {
        row[r] = r;
        tokens[r] = d->info.start_token;
    }
    /* A model trained on ShiftRight(text) reads its start token first (qkv_lm_decoder_reset). */
    if (primed && (status = d->ops->step(st, tokens, logits, NULL))) return status;
    for (bool scored = primed; alive > 0; scored = true) {
        int kept = 0;
        for (int r = 0; r < alive; r++) {
            gen_row *x = g[row[r]];
            if (scored && x->fed >= x->n_prompt) choose(x, logits + (int64_t)r * V, o, cap);
            if (x->done) {
                row_release(x);
                continue;
            }
            tokens[kept] = x->fed < x->n_prompt ? x->prompt[x->fed] : x->next;
            if (x->fed < x->n_prompt) x->hist[x->n_hist++] = x->prompt[x->fed];
            from[kept] = r;
            row[kept++] = row[r];
        }
        if ((status = flush(go))) return status;
        if (kept == 0) break;
        if (kept < alive && (status = d->ops->reorder(st, from, kept))) return status;
        alive = kept;
        /* While every row is still reading its prompt, the scores of its next `ahead` tokens are never read: they go
         * in as one feed (a GPT runs them as one batched pass without its output projection). */
        int64_t ahead = INT64_MAX;
        for (int r = 0; r < alive; r++) {
            const gen_row *x = g[row[r]];
            if (x->n_prompt - x->fed - 1 < ahead) ahead = x->n_prompt - x->fed - 1;
        }
        if (ahead >= 1 && ahead <= INT_MAX / alive) {
            int n = (int)ahead;
            int32_t *feed = malloc(sizeof *feed * (size_t)alive * (size_t)n);
            if (!feed) return qkv_error_set(QKV_ERR_NOMEM, "generate: out of memory");
            for (int r = 0; r < alive; r++) {
                gen_row *x = g[row[r]];
                memcpy(feed + (size_t)r * (size_t)n, x->prompt + x->fed, sizeof *feed * (size_t)n);
                for (int t = 1; t < n; t++) x->hist[x->n_hist++] = x->prompt[x->fed + t];
                x->fed += n;
            }
            status = qkv__decode_feed(d, st, alive, feed, n);
            free(feed);
            if (status) return status;
            continue;
        }
        if ((status = d->ops->step(st, tokens, logits, NULL))) return status;
        for (int r = 0; r < alive; r++) g[row[r]]->fed++;
    }
    return QKV_OK;
}

/* A prompt's length and place, for the sort into batches. */
typedef struct {
    int64_t len;
    int index;
} by_len;

static int cmp_longer(const void *a, const void *b) {
    const by_len *x = a, *y = b;
    if (x->len != y->len) return (x->len < y->len) - (x->len > y->len);
    return (x->index > y->index) - (x->index < y->index);
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
        const int64_t room = d.info.capacity - (d.info.start_token >= 0); /* after the start token, if any */
        if (d.info.capacity > 0 && n_prompt[i] > room)
            return qkv_error_set(QKV_ERR_RANGE, "generate: prompt %d of %lld tokens exceeds the model's context of "
                                 "%lld%s", i, (long long)n_prompt[i], (long long)room,
                                 d.info.start_token >= 0 ? " (after its start token)" : "");
    }
    if (n == 0) return QKV_OK;
    int B = batch_size < n ? batch_size : n;
    gen_out go = {.rows = calloc((size_t)n, sizeof(gen_row)), .n = n, .emit = emit, .user = user};
    by_len *order = malloc(sizeof *order * (size_t)n);
    gen_row **g = malloc(sizeof *g * (size_t)B);
    gen_work w = {.logits = malloc(sizeof(float) * (size_t)B * (size_t)d.info.vocab),
                  .tokens = malloc(sizeof(int32_t) * (size_t)B),
                  .row = malloc(sizeof(int32_t) * (size_t)B),
                  .from = malloc(sizeof(int32_t) * (size_t)B)};
    if (!go.rows || !order || !g || !w.logits || !w.tokens || !w.row || !w.from) {
        status = qkv_error_set(QKV_ERR_NOMEM, "generate batch: out of memory");
        goto done;
    }
    /* Longest first (input order among equals): a batch's prompts end their prefill about together instead of the
     * batch feeding its longer prompts one step at a time after its shortest, and the first batch takes the most
     * rows and steps, so the state started for it serves every batch. */
    int64_t steps = 0;
    for (int i = 0; i < n; i++) {
        order[i] = (by_len){n_prompt[i], i};
        if (n_prompt[i] + o->max_new_tokens > steps) steps = n_prompt[i] + o->max_new_tokens;
    }
    qsort(order, (size_t)n, sizeof *order, cmp_longer);
    steps += d.info.start_token >= 0;
    if (d.info.capacity > 0 && steps > d.info.capacity) steps = d.info.capacity;
    /* A restarted state takes its packed weights again from the pack cache (ops/gemm_packed.h). A model without a
     * restart starts a state per batch, which also takes the work memory of the one before (core/arena.h); with one
     * state, parking the chunks its arena outgrows would only raise the peak (summarize gen: +25 MB). */
    bool fresh_states = !d.ops->restart;
    qkv__pack_cache_open();
    if (fresh_states) qkv__arena_cache_open();
    qkv_decoder_state *st = NULL;
    for (int first = 0; first < n && !status; first += B) {
        int m = n - first < B ? n - first : B;
        for (int i = 0; i < m && !status; i++) {
            gen_row *x = g[i] = &go.rows[order[first + i].index];
            *x = (gen_row){.prompt = prompts[order[first + i].index], .n_prompt = order[first + i].len};
            x->out = malloc(sizeof(int32_t) * (size_t)(o->max_new_tokens + 1));
            x->hist = malloc(sizeof(int32_t) * (size_t)(x->n_prompt + o->max_new_tokens + 1));
            x->s = qkv_sampler_new(d.info.vocab, &o->sample, o->seed);
            if (!x->out || !x->hist || !x->s)
                status = x->s ? qkv_error_set(QKV_ERR_NOMEM, "generate batch: out of memory") : qkv_last_status();
        }
        if (status) break;
        if (st && !(d.ops->restart && d.ops->restart(st, m) == QKV_OK)) {
            d.ops->free(st);
            st = NULL;
        }
        if (!st && !(st = d.ops->start(d.model, NULL, NULL, m, 0, 1, (int)(steps > 0 ? steps : 1)))) {
            status = qkv_last_status();
            break;
        }
        status = run_batch(&d, st, g, m, o, &w, &go);
    }
    if (st) d.ops->free(st);
    if (fresh_states) qkv__arena_cache_close();
    qkv__pack_cache_close();
done:
    for (int i = 0; go.rows && i < n; i++) {
        free(go.rows[i].out);
        row_release(&go.rows[i]);
    }
    free(go.rows);
    free(order);
    free(g);
    free(w.logits);
    free(w.tokens);
    free(w.row);
    free(w.from);
    return status;
}
