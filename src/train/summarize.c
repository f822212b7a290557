/* Summaries of a summarize run (include/qkv/summarize.h): prompts through qkv_generate_batch, the tokens decoded with
 * the run's BPE (specials skipped). MBR draws its candidates as n_samples sampling passes over all articles, pass k
 * seeded seed + k, so an article's candidates do not depend on the batch it was in. */
#include <stdlib.h>
#include <string.h>

#include "qkv/decode_batch.h"
#include "qkv/prompted.h"
#include "qkv/summarize.h"
#include "train_internal.h"

qkv_summarize_opts qkv_summarize_defaults(void) {
    return (qkv_summarize_opts){.search = QKV_SUMM_GREEDY, .sample = qkv_sample_defaults(), .n_samples = 8,
                                .utility = QKV_MBR_ROUGE_L, .beam = 4, .alpha = 0.6f, .max_len = 0, .batch_size = 32, .seed = 0};
}

typedef struct {
    const task *t;
    char **texts; /* [n * per] */
    int per, pass;
    qkv__summ_text_fn emit;
    void *user;
} collect;

static qkv_status got_tokens(int index, const int32_t *tokens, int64_t n, qkv_gen_end end, void *user) {
    (void)end;
    collect *c = user;
    char *text = NULL;
    qkv_status st = qkv__task_decode_target(c->t, tokens, (size_t)n, &text);
    if (st != QKV_OK) return st;
    if (!c->texts) {
        st = c->emit(index, text, c->user);
        free(text);
        return st;
    }
    c->texts[(size_t)index * (size_t)c->per + (size_t)c->pass] = text;
    return QKV_OK;
}

static qkv_status got_beam(int index, qkv_hyps *hs, void *user) {
    const qkv_hyp *h = hs->n ? &hs->h[0] : NULL;
    return got_tokens(index, h ? h->tokens : NULL, h ? h->len - h->finished : 0, QKV_GEN_STOP_TOKEN, user);
}

/* Beam search through the prompted view of the model's decoder, one article a batch (see summarize.h). */
static qkv_status beam_search(qkv_run *r, int n, const int32_t *const *prompts, const int64_t *n_prompt,
                              const qkv_summarize_opts *o, int max_new, collect *c) {
    const task *t = &r->task;
    qkv_decoder lm, d;
    qkv_prompted p;
    qkv_status st = qkv_model_decoder(r->type, r->model, &lm);
    if (st == QKV_OK) st = qkv_prompted_decoder(&lm, &p, &d);
    int *len = malloc(sizeof *len * (size_t)(n ? n : 1));
    if (st == QKV_OK && !len) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int i = 0; st == QKV_OK && i < n; i++) len[i] = (int)n_prompt[i];
    qkv_decode_opts dopt = qkv_decode_defaults();
    dopt.bos = t->sep; /* the prompt's last token, fed by the search's first step */
    dopt.eos = t->eos;
    dopt.pad = t->pad;
    dopt.max_len = max_new;
    dopt.beam = o->beam;
    dopt.n_best = 1;
    dopt.alpha = o->alpha;
    dopt.no_repeat_ngram = o->sample.no_repeat_ngram;
    dopt.repetition_penalty = o->sample.repetition_penalty;
    dopt.repeat_scope = o->sample.repeat_scope; /* all: the article's tokens count (the prompted decoder's source) */
    qkv_batch_opts bo = qkv_batch_defaults();
    bo.search = QKV_SEARCH_BEAM;
    bo.batch_size = 1;
    if (st == QKV_OK) st = qkv_decode_batch(&d, n, prompts, len, NULL, &dopt, &bo, got_beam, c);
    free(len);
    return st;
}

qkv_status qkv__summ_generate(qkv_run *r, int n, const int32_t *const *prompts, const int64_t *n_prompt,
                              const qkv_summarize_opts *o, qkv__summ_text_fn emit, void *user) {
    const task *t = &r->task;
    if (t->kind != TASK_SUMMARIZE)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: not a summarize run (data.task is not \"summarize\")", r->dir);
    if (o->batch_size < 1) return qkv_error_set(QKV_ERR_INVALID, "summarize: batch size %d < 1", o->batch_size);
    if (o->search == QKV_SUMM_MBR && o->n_samples < 1)
        return qkv_error_set(QKV_ERR_INVALID, "summarize: MBR needs >= 1 samples, got %d", o->n_samples);
    if (o->max_len < 0 || o->max_len > t->summary_max_len)
        return qkv_error_set(QKV_ERR_INVALID, "summarize: max length %d outside 0..%lld (data.summary_max_len)",
                             o->max_len, (long long)t->summary_max_len);
    qkv_gen_opts g = qkv_gen_defaults();
    g.sample = o->sample;
    if (o->search == QKV_SUMM_GREEDY) g.sample.temperature = 0;
    g.max_new_tokens = (o->max_len ? o->max_len : t->summary_max_len) + 1; /* + </s> */
    g.stop = &t->eos;
    g.n_stop = 1;
    g.seed = o->seed;
    collect c = {.t = t, .per = o->search == QKV_SUMM_MBR ? o->n_samples : 1, .emit = emit, .user = user};
    bool grad = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    qkv_status st = QKV_OK;
    if (o->search == QKV_SUMM_BEAM && (o->beam < 1 || o->alpha < 0)) {
        st = qkv_error_set(QKV_ERR_INVALID, "summarize: beam %d (>= 1), alpha %g (>= 0)", o->beam, (double)o->alpha);
    } else if (o->search == QKV_SUMM_BEAM) {
        st = beam_search(r, n, prompts, n_prompt, o, (int)g.max_new_tokens, &c);
    } else if (o->search != QKV_SUMM_MBR) {
        st = qkv_generate_batch(r->type, r->model, n, prompts, n_prompt, &g, o->batch_size, got_tokens, &c);
    } else {
        c.texts = calloc((size_t)n * (size_t)c.per + 1, sizeof *c.texts);
        if (!c.texts) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        qkv_decode_keep_open(); /* one packing of the weights for all the passes (decode_batch.h) */
        for (c.pass = 0; st == QKV_OK && c.pass < c.per; c.pass++) {
            g.seed = o->seed + (uint64_t)c.pass;
            st = qkv_generate_batch(r->type, r->model, n, prompts, n_prompt, &g, o->batch_size, got_tokens, &c);
        }
        qkv_decode_keep_close();
        for (int i = 0; st == QKV_OK && i < n; i++) {
            int best = 0;
            char *const *cand = c.texts + (size_t)i * (size_t)c.per;
            st = qkv_mbr_select((const char *const *)cand, c.per, o->utility, &best, NULL);
            if (st == QKV_OK) st = emit(i, cand[best], user);
        }
        for (size_t i = 0; c.texts && i < (size_t)n * (size_t)c.per; i++) free(c.texts[i]);
        free(c.texts);
    }
    qkv_ctx_set_grad(r->ctx, grad);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    return st;
}

typedef struct {
    const bool *cut;
    qkv_summary_emit_fn emit;
    void *user;
} forward;

static qkv_status pass_on(int index, const char *text, void *user) {
    forward *f = user;
    return f->emit(index, text, f->cut[index], f->user);
}

qkv_status qkv_run_summarize(qkv_run *r, int n, const char *const *articles, const qkv_summarize_opts *o,
                             qkv_summary_emit_fn emit, void *user) {
    task *t = &r->task;
    if (t->kind != TASK_SUMMARIZE)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: not a summarize run (data.task is not \"summarize\")", r->dir);
    int32_t **prompts = calloc((size_t)n + 1, sizeof *prompts);
    int64_t *np = calloc((size_t)n + 1, sizeof *np);
    bool *cut = calloc((size_t)n + 1, sizeof *cut);
    qkv_status st = prompts && np && cut ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int i = 0; st == QKV_OK && i < n; i++) {
        if (!articles[i][strspn(articles[i], " \t\r\n")]) {
            st = qkv_error_set(QKV_ERR_INVALID, "article %d is empty", i + 1);
            break;
        }
        size_t k = 0;
        st = qkv__summ_prompt(t, articles[i], strlen(articles[i]), &prompts[i], &k, &cut[i]);
        np[i] = (int64_t)k;
    }
    forward f = {.cut = cut, .emit = emit, .user = user};
    if (st == QKV_OK) st = qkv__summ_generate(r, n, (const int32_t *const *)prompts, np, o, pass_on, &f);
    for (int i = 0; prompts && i < n; i++) free(prompts[i]);
    free(prompts);
    free(np);
    free(cut);
    return st;
}

qkv_status qkv_run_summary_prompt(qkv_run *r, const char *article, int32_t **ids, size_t *n, bool *truncated) {
    if (r->task.kind != TASK_SUMMARIZE)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: not a summarize run (data.task is not \"summarize\")", r->dir);
    return qkv__summ_prompt(&r->task, article, strlen(article), ids, n, truncated);
}
