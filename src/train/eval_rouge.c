/* ROUGE during summarize evals: greedy summaries of a split's first examples (qkv__summ_generate, the decoder
 * `qkv summarize` uses, with eval.no_repeat_ngram / repetition_penalty / repeat_scope) scored against the split's
 * summaries as the pipeline kept them (decoded from their tokens, so cut at data.summary_max_len like the training
 * targets), averaged per pair as rouge-score does. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/metrics.h"
#include "qkv/summarize.h"
#include "train_internal.h"

typedef struct {
    char **hyps;
} hyp_texts;

static qkv_status keep(int index, const char *summary, void *user) {
    hyp_texts *h = user;
    h->hyps[index] = strdup(summary);
    return h->hyps[index] ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
}

qkv_status qkv__run_rouge(qkv_run *r, const split *s, int64_t max_examples, cJSON *out) {
    const task *t = &r->task;
    int n = (int)(max_examples > 0 && max_examples < s->n ? max_examples : s->n);
    const int32_t **prompts = calloc((size_t)n + 1, sizeof *prompts);
    int64_t *np = calloc((size_t)n + 1, sizeof *np);
    char **refs = calloc((size_t)n + 1, sizeof *refs);
    hyp_texts h = {.hyps = calloc((size_t)n + 1, sizeof *h.hyps)};
    qkv_status st = prompts && np && refs && h.hyps ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int i = 0; st == QKV_OK && i < n; i++) {
        const example *e = &s->ex[i];
        prompts[i] = s->pool + e->off;
        np[i] = e->prompt;
        st = qkv__task_decode_target(t, s->pool + e->off + e->prompt, (size_t)(e->n - e->prompt), &refs[i]);
    }
    qkv_summarize_opts o = qkv_summarize_defaults();
    o.batch_size = (int)(r->set.eval.batch_size < 1024 ? r->set.eval.batch_size : 1024);
    o.sample.no_repeat_ngram = (int)r->set.eval.no_repeat_ngram;
    o.sample.repetition_penalty = (float)r->set.eval.repetition_penalty;
    qkv_repeat_scope_parse(r->set.eval.repeat_scope, &o.sample.repeat_scope); /* the schema allows only these */
    if (st == QKV_OK) st = qkv__summ_generate(r, n, prompts, np, &o, keep, &h);
    for (int i = 0; st == QKV_OK && i < n; i++) qkv__task_hyp_for_scoring(t, h.hyps[i]);
    for (int stem = 0; st == QKV_OK && stem < 2; stem++) {
        qkv_rouge_opts ro = {.use_stemmer = stem};
        qkv_rouge_result res;
        st = qkv_rouge_mean((const char *const *)refs, (const char *const *)h.hyps, (size_t)n, &ro, &res);
        if (st != QKV_OK) break;
        const char *suffix = stem ? "_stem" : "";
        char key[32];
        const qkv_prf *prf[3] = {&res.rouge1, &res.rouge2, &res.rougeL};
        const char *names[3] = {"rouge1", "rouge2", "rougeL"};
        for (int k = 0; k < 3; k++) {
            snprintf(key, sizeof key, "%s%s", names[k], suffix);
            cJSON_AddNumberToObject(out, key, 100.0 * prf[k]->f1);
        }
    }
    if (st == QKV_OK) cJSON_AddNumberToObject(out, "rouge_examples", n);
    for (int i = 0; i < n; i++) {
        if (refs) free(refs[i]);
        if (h.hyps) free(h.hyps[i]);
    }
    free(prompts);
    free(np);
    free(refs);
    free(h.hyps);
    return st;
}
