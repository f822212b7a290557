/* qkv serve: running a batch of requests of one model through the library, with the entry points the CLI commands
 * use (qkv_run_predict_batch as predict, qkv_generate as generate, translate_run.c as translate, qkv_run_summarize
 * as summarize, qkv_run_predict as tag, qkv_run_embed / qkv_run_threshold as similar). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qkv/decode.h"
#include "qkv/summarize.h"
#include "serve.h"
#include "translate_run.h"

static atomic_bool stopping;
static atomic_long completion_ids;

void serve_exec_stop(void) { atomic_store(&stopping, true); }

/* Bad input (the library's input statuses) is the client's: 400 naming the field; anything else is ours: 500. */
static void fail_from_library(serve_job *j, const char *field) {
    qkv_status st = qkv_last_status();
    bool input = st == QKV_ERR_INVALID || st == QKV_ERR_FORMAT || st == QKV_ERR_RANGE || st == QKV_ERR_UNSUPPORTED;
    serve_job_fail(j, input ? 400 : 500, input ? field : "", "%s%s%s", input ? "field '" : "", input ? field : "",
                   input ? "': " : "");
    size_t used = strlen(j->error);
    snprintf(j->error + used, sizeof j->error - used, "%s", qkv_last_error());
}

static const char *text_field(const serve_request *r) { return r->many ? "texts" : "text"; }

/* A list of answers under `key` when the request gave "texts", else the one answer itself (moved). */
static cJSON *one_or_list(const serve_request *r, cJSON **items, const char *key) {
    if (!r->many) return items[0];
    cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, key);
    for (int i = 0; i < r->n_texts; i++) cJSON_AddItemToArray(list, items[i]);
    return o;
}

/* ---- classify ---- */

/* The words' grounds the viewer shows: the attention of the first position ([CLS]) over the tokens in the last
 * layer, averaged over its heads. Models without attention add nothing. */
static bool add_explanation(qkv_run *r, const char *text, cJSON *out) {
    qkv_run_explanation e = {0};
    if (qkv_run_explain(r, text, &e) != QKV_OK) return false;
    cJSON *toks = cJSON_AddArrayToObject(out, "tokens");
    for (int i = 0; i < e.n_tokens; i++) cJSON_AddItemToArray(toks, cJSON_CreateString(e.tokens[i]));
    if (e.n_maps > 0) {
        cJSON *att = cJSON_AddArrayToObject(out, "attention");
        const float *w = e.weights[e.n_maps - 1];
        int T = e.n_tokens;
        for (int k = 0; k < T; k++) {
            double s = 0;
            for (int h = 0; h < e.n_heads; h++) s += w[(size_t)h * T * T + k];
            cJSON_AddItemToArray(att, cJSON_CreateNumber(s / e.n_heads));
        }
        cJSON_AddStringToObject(out, "attention_map", e.map_names[e.n_maps - 1]);
    }
    qkv_run_explanation_free(&e);
    return true;
}

static void classify_one(serve_model *m, serve_job *j) {
    cJSON *all = qkv_run_predict_batch(m->run, (const char *const *)j->req.texts, (size_t)j->req.n_texts);
    if (!all) return fail_from_library(j, text_field(&j->req));
    cJSON **items = calloc((size_t)j->req.n_texts, sizeof *items);
    for (int i = 0; items && i < j->req.n_texts; i++) {
        items[i] = cJSON_DetachItemFromArray(all, 0);
        if (j->req.explain && !add_explanation(m->run, j->req.texts[i], items[i])) {
            for (int k = 0; k <= i; k++) cJSON_Delete(items[k]);
            free(items);
            cJSON_Delete(all);
            return fail_from_library(j, text_field(&j->req));
        }
    }
    if (items) j->result = one_or_list(&j->req, items, "results");
    else serve_job_fail(j, 500, "", "out of memory");
    free(items);
    cJSON_Delete(all);
}

/* All texts of all jobs in one forward; if that fails (one bad text), each job alone so the error is its own. */
static void classify_batch(serve_model *m, serve_job **jobs, int n) {
    int total = 0;
    for (int i = 0; i < n; i++) total += jobs[i]->req.n_texts;
    const char **texts = malloc(sizeof *texts * (size_t)total);
    cJSON *all = NULL;
    if (texts && n > 1) {
        int k = 0;
        for (int i = 0; i < n; i++)
            for (int t = 0; t < jobs[i]->req.n_texts; t++) texts[k++] = jobs[i]->req.texts[t];
        all = qkv_run_predict_batch(m->run, texts, (size_t)total);
    }
    free(texts);
    if (!all) {
        qkv_error_clear();
        for (int i = 0; i < n; i++) classify_one(m, jobs[i]);
        return;
    }
    for (int i = 0; i < n; i++) {
        serve_request *r = &jobs[i]->req;
        cJSON *items[SERVE_MAX_TEXTS];
        for (int t = 0; t < r->n_texts; t++) items[t] = cJSON_DetachItemFromArray(all, 0);
        jobs[i]->result = one_or_list(r, items, "results");
    }
    cJSON_Delete(all);
}

/* ---- generate and completions ---- */

typedef struct {
    serve_job *j;
    qkv_run *r;
    const char *model;
    int32_t *hist;
    size_t n, cap;
    char *text;   /* decode(hist) */
    size_t sent;  /* bytes of text already streamed */
    size_t end;   /* the answer's length: a stop string cuts it */
    size_t hold;  /* bytes held back while they may begin a stop string */
    bool stopped; /* a stop string ended it */
    long id;
    bool failed;
} gen_state;

static bool stream_delta(gen_state *g, size_t upto, const char *finish) {
    if (!g->j->req.stream || (upto <= g->sent && !finish)) return true;
    char *delta = malloc(upto - g->sent + 1);
    if (!delta) return false;
    memcpy(delta, g->text + g->sent, upto - g->sent);
    delta[upto - g->sent] = 0;
    g->sent = upto;
    cJSON *ev = cJSON_CreateObject();
    if (g->j->req.ep == SERVE_COMPLETIONS) {
        char id[32];
        snprintf(id, sizeof id, "cmpl-%ld", g->id);
        cJSON_AddStringToObject(ev, "id", id);
        cJSON_AddStringToObject(ev, "object", "text_completion");
        cJSON_AddNumberToObject(ev, "created", (double)time(NULL));
        cJSON_AddStringToObject(ev, "model", g->model);
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddStringToObject(ch, "text", delta);
        cJSON_AddNumberToObject(ch, "index", 0);
        if (finish) cJSON_AddStringToObject(ch, "finish_reason", finish);
        else cJSON_AddNullToObject(ch, "finish_reason");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(ev, "choices"), ch);
    } else {
        cJSON_AddStringToObject(ev, "text", delta);
    }
    free(delta);
    char *s = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    bool ok = s && serve_job_event(g->j, s);
    free(s);
    return ok;
}

/* Each token: decode the whole continuation (byte-level tokens may split a character), look for a stop string,
 * stream what can no longer change. Non-zero ends generation. */
static int on_token(int32_t token, void *user) {
    gen_state *g = user;
    if (atomic_load(&stopping)) return 1;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        int32_t *h = realloc(g->hist, sizeof *h * g->cap);
        if (!h) return g->failed = true, 1;
        g->hist = h;
    }
    g->hist[g->n++] = token;
    char *text = NULL;
    if (qkv_run_decode(g->r, g->hist, g->n, &text) != QKV_OK) return g->failed = true, 1;
    free(g->text);
    g->text = text;
    size_t len = strlen(text);
    g->end = len;
    for (int s = 0; s < g->j->req.n_stop; s++) {
        const char *at = strstr(text, g->j->req.stop[s]);
        if (at && (size_t)(at - text) < g->end) {
            g->end = (size_t)(at - text);
            g->stopped = true;
        }
    }
    if (g->stopped) return 1;
    size_t safe = len > g->hold ? len - g->hold : 0;
    while (safe > g->sent && safe < len && ((unsigned char)text[safe] & 0xC0) == 0x80) safe--; /* whole characters */
    if (safe > g->sent && !stream_delta(g, safe, NULL)) return 1; /* the client has gone */
    return 0;
}

static const char *end_name(qkv_gen_end end, bool stopped, bool openai) {
    if (stopped || end == QKV_GEN_STOP_TOKEN) return "stop";
    if (openai) return "length";
    return end == QKV_GEN_CONTEXT_FULL ? "context_full" : "max_tokens";
}

static void generate_one(serve_model *m, serve_job *j) {
    serve_request *r = &j->req;
    bool openai = r->ep == SERVE_COMPLETIONS;
    gen_state g = {.j = j, .r = m->run, .model = m->name, .id = atomic_fetch_add(&completion_ids, 1) + 1};
    for (int s = 0; s < r->n_stop; s++)
        if (strlen(r->stop[s]) > g.hold + 1) g.hold = strlen(r->stop[s]) - 1;
    int32_t *ids = NULL, *out = NULL;
    size_t n = 0;
    qkv_lm_decoder *d = NULL;
    if (qkv_run_encode(m->run, r->texts[0], &ids, &n) != QKV_OK) {
        fail_from_library(j, "prompt");
        goto done;
    }
    if (!(d = qkv_lm_decoder_new(qkv_run_model_type(m->run), qkv_run_model(m->run)))) {
        fail_from_library(j, "model");
        goto done;
    }
    qkv_gen_opts o = qkv_gen_defaults();
    o.sample.temperature = (float)r->temperature;
    o.sample.top_k = r->top_k;
    o.sample.top_p = (float)r->top_p;
    o.sample.repetition_penalty = (float)r->repetition_penalty;
    o.sample.no_repeat_ngram = (int)r->no_repeat_ngram;
    o.sample.repeat_scope = (qkv_repeat_scope)r->repeat_scope;
    o.max_new_tokens = r->max_tokens;
    o.seed = (uint64_t)r->seed;
    o.on_token = on_token;
    o.user = &g;
    if (!(out = malloc(sizeof *out * (size_t)(r->max_tokens + 1)))) {
        serve_job_fail(j, 500, "", "out of memory");
        goto done;
    }
    qkv_gen_end end;
    int64_t got = qkv_generate(d, ids, (int64_t)n, &o, out, r->max_tokens, &end);
    if (got < 0) {
        fail_from_library(j, "prompt");
        goto done;
    }
    if (g.failed) {
        serve_job_fail(j, 500, "", "decoding the generated tokens failed");
        goto done;
    }
    if (!g.text) g.text = calloc(1, 1);
    const char *finish = end_name(end, g.stopped, openai);
    if (r->stream) { /* the rest, then the closing event */
        stream_delta(&g, g.end, openai ? finish : NULL);
        if (openai) {
            serve_job_event(j, "[DONE]");
        } else {
            cJSON *ev = cJSON_CreateObject();
            cJSON_AddBoolToObject(ev, "done", true);
            cJSON_AddNumberToObject(ev, "tokens", (double)g.n);
            cJSON_AddStringToObject(ev, "end", finish);
            char *s = cJSON_PrintUnformatted(ev);
            if (s) serve_job_event(j, s);
            free(s);
            cJSON_Delete(ev);
        }
        goto done;
    }
    if (g.text) g.text[g.end] = 0;
    cJSON *res = cJSON_CreateObject();
    if (openai) {
        char id[32];
        snprintf(id, sizeof id, "cmpl-%ld", g.id);
        cJSON_AddStringToObject(res, "id", id);
        cJSON_AddStringToObject(res, "object", "text_completion");
        cJSON_AddNumberToObject(res, "created", (double)time(NULL));
        cJSON_AddStringToObject(res, "model", m->name);
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddStringToObject(ch, "text", g.text ? g.text : "");
        cJSON_AddNumberToObject(ch, "index", 0);
        cJSON_AddNullToObject(ch, "logprobs");
        cJSON_AddStringToObject(ch, "finish_reason", finish);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(res, "choices"), ch);
        cJSON *u = cJSON_AddObjectToObject(res, "usage");
        cJSON_AddNumberToObject(u, "prompt_tokens", (double)n);
        cJSON_AddNumberToObject(u, "completion_tokens", (double)g.n);
        cJSON_AddNumberToObject(u, "total_tokens", (double)(n + g.n));
    } else {
        cJSON_AddStringToObject(res, "text", g.text ? g.text : "");
        cJSON_AddNumberToObject(res, "tokens", (double)g.n);
        cJSON_AddStringToObject(res, "end", finish);
    }
    j->result = res;
done:
    free(ids);
    free(out);
    free(g.hist);
    free(g.text);
    qkv_lm_decoder_free(d);
}

/* ---- translate ---- */

typedef struct {
    serve_job **jobs;
    int *first; /* index of each job's first text in the batch */
    int n_jobs;
    cJSON **items;
    qkv_run *r;
    int n_best;
} tr_out;

static qkv_status keep_translation(int index, qkv_hyps *hs, void *user) {
    tr_out *t = user;
    cJSON *o = cJSON_CreateObject();
    char *best = hs->n ? translate_text(t->r, hs->h[0].tokens, hs->h[0].len) : calloc(1, 1);
    if (!o || !best) {
        cJSON_Delete(o);
        free(best);
        return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    }
    cJSON_AddStringToObject(o, "translation", best);
    free(best);
    if (t->n_best > 1) {
        cJSON *list = cJSON_AddArrayToObject(o, "hypotheses");
        for (int k = 0; k < hs->n && k < t->n_best; k++) {
            char *text = translate_text(t->r, hs->h[k].tokens, hs->h[k].len);
            cJSON *h = cJSON_CreateObject();
            cJSON_AddStringToObject(h, "text", text ? text : "");
            cJSON_AddNumberToObject(h, "score", hs->h[k].score);
            cJSON_AddItemToArray(list, h);
            free(text);
        }
    }
    t->items[index] = o;
    return QKV_OK;
}

static translate_opts translate_options(const serve_request *r) {
    translate_opts t = translate_defaults();
    t.beam = (int)r->beam;
    t.n_best = (int)r->n_best;
    t.mbr = (int)r->mbr;
    t.max_len = (int)r->max_len;
    t.seed = (uint64_t)r->seed;
    t.alpha = (float)r->alpha;
    t.temperature = (float)r->temperature;
    t.utility = (qkv_mbr_utility)r->utility;
    t.no_repeat_ngram = (int)r->no_repeat_ngram;
    t.repetition_penalty = (float)r->repetition_penalty;
    t.repeat_scope = (qkv_repeat_scope)r->repeat_scope;
    return t;
}

/* The texts of all jobs (same options) as one decoding batch; a text that does not encode fails its own job. */
static void translate_batch(serve_model *m, serve_job **jobs, int n) {
    int total = 0;
    for (int i = 0; i < n; i++) total += jobs[i]->req.n_texts;
    const char **texts = malloc(sizeof *texts * (size_t)total);
    int *first = malloc(sizeof *first * (size_t)n);
    cJSON **items = calloc((size_t)total, sizeof *items);
    if (!texts || !first || !items) {
        for (int i = 0; i < n; i++) serve_job_fail(jobs[i], 500, "", "out of memory");
        goto done;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        first[i] = k;
        for (int t = 0; t < jobs[i]->req.n_texts; t++) texts[k++] = jobs[i]->req.texts[t];
    }
    translate_opts o = translate_options(&jobs[0]->req);
    o.batch = total < 64 ? total : 64;
    translate_job tj;
    int bad;
    qkv_status st = translate_prepare(&tj, m->run, &o, total, texts, &bad);
    if (st == QKV_OK) {
        tr_out out = {jobs, first, n, items, m->run, o.n_best};
        st = translate_decode(&tj, keep_translation, &out);
    }
    translate_free(&tj);
    if (st != QKV_OK && n > 1) { /* each alone, so a bad text fails its own request only */
        qkv_error_clear();
        for (int i = 0; i < n; i++) translate_batch(m, &jobs[i], 1);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (st != QKV_OK) {
            fail_from_library(jobs[i], text_field(&jobs[i]->req));
            continue;
        }
        serve_request *r = &jobs[i]->req;
        jobs[i]->result = one_or_list(r, items + first[i], "translations");
        for (int t = 0; t < r->n_texts; t++) items[first[i] + t] = NULL;
    }
done:
    for (int t = 0; items && t < total; t++) cJSON_Delete(items[t]);
    free(items);
    free(texts);
    free(first);
}

/* ---- summarize, tag, similar, embed ---- */

static qkv_status keep_summary(int index, const char *summary, bool truncated, void *user) {
    cJSON **items = user;
    items[index] = cJSON_CreateObject();
    cJSON_AddStringToObject(items[index], "summary", summary);
    cJSON_AddBoolToObject(items[index], "truncated", truncated);
    return QKV_OK;
}

static void summarize_one(serve_model *m, serve_job *j) {
    serve_request *r = &j->req;
    qkv_summarize_opts o = qkv_summarize_defaults();
    o.search = (qkv_summ_search)r->search;
    o.sample.temperature = (float)r->temperature;
    o.sample.top_k = r->top_k;
    o.sample.top_p = (float)r->top_p;
    o.n_samples = (int)r->mbr;
    o.utility = (qkv_mbr_utility)r->utility;
    o.beam = (int)r->beam;
    o.alpha = (float)r->alpha;
    o.max_len = (int)r->max_len;
    o.seed = (uint64_t)r->seed;
    o.sample.no_repeat_ngram = (int)r->no_repeat_ngram;
    o.sample.repetition_penalty = (float)r->repetition_penalty;
    o.sample.repeat_scope = (qkv_repeat_scope)r->repeat_scope;
    cJSON *items[SERVE_MAX_TEXTS] = {0};
    if (qkv_run_summarize(m->run, r->n_texts, (const char *const *)r->texts, &o, keep_summary, items) != QKV_OK) {
        fail_from_library(j, text_field(r));
        for (int t = 0; t < r->n_texts; t++) cJSON_Delete(items[t]);
        return;
    }
    j->result = one_or_list(r, items, "summaries");
}

static void tag_one(serve_model *m, serve_job *j) {
    serve_request *r = &j->req;
    cJSON *items[SERVE_MAX_TEXTS] = {0};
    for (int t = 0; t < r->n_texts; t++)
        if (!(items[t] = qkv_run_predict(m->run, r->texts[t]))) {
            fail_from_library(j, text_field(r));
            for (int k = 0; k < t; k++) cJSON_Delete(items[k]);
            return;
        }
    j->result = one_or_list(r, items, "results");
}

static void pairs_one(serve_model *m, serve_job *j) {
    serve_request *r = &j->req;
    float *v = NULL;
    int64_t dim = 0;
    if (qkv_run_embed(m->run, (const char *const *)r->texts, (size_t)r->n_texts, &v, &dim) != QKV_OK)
        return fail_from_library(j, r->ep == SERVE_SIMILAR ? "a" : text_field(r));
    cJSON *res = cJSON_CreateObject();
    if (r->ep == SERVE_SIMILAR) {
        double c = 0, threshold;
        for (int64_t k = 0; k < dim; k++) c += (double)v[k] * v[dim + k];
        if (qkv_run_threshold(m->run, &threshold) != QKV_OK) {
            cJSON_Delete(res);
            free(v);
            return fail_from_library(j, "model");
        }
        cJSON_AddNumberToObject(res, "cosine", c);
        cJSON_AddNumberToObject(res, "threshold", threshold);
        cJSON_AddBoolToObject(res, "duplicate", c >= threshold);
    } else {
        cJSON_AddNumberToObject(res, "dim", (double)dim);
        cJSON *list = r->many ? cJSON_AddArrayToObject(res, "vectors") : NULL;
        for (int t = 0; t < r->n_texts; t++) {
            cJSON *vec = cJSON_CreateFloatArray(v + (size_t)t * (size_t)dim, (int)dim);
            if (list) cJSON_AddItemToArray(list, vec);
            else cJSON_AddItemToObject(res, "vector", vec);
        }
    }
    free(v);
    j->result = res;
}

/* ---- batches ---- */

bool serve_exec_compatible(const serve_request *a, const serve_request *b) {
    if (a->ep != b->ep) return false;
    if (a->ep == SERVE_CLASSIFY) return !a->explain && !b->explain;
    if (a->ep == SERVE_TRANSLATE)
        return a->beam == b->beam && a->n_best == b->n_best && a->mbr == b->mbr && a->max_len == b->max_len &&
               a->seed == b->seed && a->alpha == b->alpha && a->temperature == b->temperature &&
               a->utility == b->utility && a->no_repeat_ngram == b->no_repeat_ngram &&
               a->repetition_penalty == b->repetition_penalty && a->repeat_scope == b->repeat_scope;
    return false;
}

void serve_exec_batch(serve_model *m, serve_job **jobs, int n) {
    switch (jobs[0]->req.ep) {
    case SERVE_CLASSIFY: classify_batch(m, jobs, n); break;
    case SERVE_TRANSLATE: translate_batch(m, jobs, n); break;
    default:
        for (int i = 0; i < n; i++) {
            switch (jobs[i]->req.ep) {
            case SERVE_GENERATE:
            case SERVE_COMPLETIONS: generate_one(m, jobs[i]); break;
            case SERVE_SUMMARIZE: summarize_one(m, jobs[i]); break;
            case SERVE_TAG: tag_one(m, jobs[i]); break;
            default: pairs_one(m, jobs[i]); break;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        if (!jobs[i]->result && jobs[i]->status == 200 && !jobs[i]->req.stream)
            serve_job_fail(jobs[i], 500, "", "out of memory");
        serve_job_finish(jobs[i]);
    }
}
