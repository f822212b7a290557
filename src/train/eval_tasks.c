/* eval.tasks: per-task metrics of a text-to-text (seq2seq) run whose examples name their task by a prefix
 * ("translate English to Spanish: ...", "summarize: ...", "sentiment: ..."). An example's task is the first word of
 * its source, lowercased, without a trailing ':'; the spec "translate=bleu,summarize=rouge,sentiment=accuracy"
 * says which tasks to score and how. Every example is decoded greedily once (as qkv translate does), then each
 * task's examples are scored: bleu (corpus BLEU, as eval.bleu), rouge (mean ROUGE-L F), accuracy (exact match of
 * the output text, for label words). Examples of tasks the spec does not name are skipped. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/metrics.h"
#include "train_internal.h"

#define MAX_TASKS 32

typedef enum { M_BLEU, M_ROUGE, M_ACCURACY, M_SQUAD } metric_kind;

typedef struct {
    char name[64];
    metric_kind metric;
    int64_t n;
    char **hyps, **refs;
} task_group;

/* The lowercase first word of text without a trailing ':' into out. */
static void first_word(const char *text, char *out, size_t size) {
    size_t k = 0;
    while (*text && isspace((unsigned char)*text)) text++;
    for (; *text && !isspace((unsigned char)*text) && k + 1 < size; text++) out[k++] = (char)tolower((unsigned char)*text);
    while (k && out[k - 1] == ':') k--;
    out[k] = '\0';
}

static qkv_status parse_spec(const char *spec, task_group *g, int *n) {
    *n = 0;
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ','), *eq = strchr(p, '=');
        if (!end) end = p + strlen(p);
        if (!eq || eq > end || eq == p || *n == MAX_TASKS || (size_t)(eq - p) >= sizeof g->name)
            return qkv_error_set(QKV_ERR_INVALID, "eval.tasks: '%.*s' is not prefix=metric (at most %d tasks)",
                                 (int)(end - p), p, MAX_TASKS);
        task_group *t = &g[(*n)++];
        memset(t, 0, sizeof *t);
        char word[64];
        snprintf(word, sizeof word, "%.*s", (int)(eq - p), p);
        first_word(word, t->name, sizeof t->name);
        size_t ml = (size_t)(end - eq - 1);
        if (ml == 4 && !strncmp(eq + 1, "bleu", 4)) t->metric = M_BLEU;
        else if (ml == 5 && !strncmp(eq + 1, "rouge", 5)) t->metric = M_ROUGE;
        else if (ml == 8 && !strncmp(eq + 1, "accuracy", 8)) t->metric = M_ACCURACY;
        else
            return qkv_error_set(QKV_ERR_INVALID, "eval.tasks: metric '%.*s' of '%s': expected bleu, rouge or accuracy",
                                 (int)ml, eq + 1, t->name);
        p = *end ? end + 1 : end;
    }
    return *n ? QKV_OK : qkv_error_set(QKV_ERR_INVALID, "eval.tasks: no task given");
}

static qkv_status score(const task *t, task_group *g, cJSON *obj) {
    double v = 0;
    qkv_status st = QKV_OK;
    if (g->metric == M_BLEU) {
        qkv_bleu_opts o = qkv_bleu_default_opts();
        o.tokenizer = t->tok == TOK_BPE ? QKV_BLEU_TOK_13A : QKV_BLEU_TOK_NONE;
        const char **streams[1] = {(const char **)g->refs};
        qkv_bleu_result res;
        st = qkv_bleu_corpus((const char *const *)g->hyps, (size_t)g->n, streams, 1, &o, &res);
        v = res.score;
    } else if (g->metric == M_ROUGE) {
        qkv_rouge_result res;
        st = qkv_rouge_mean((const char *const *)g->refs, (const char *const *)g->hyps, (size_t)g->n, NULL, &res);
        v = 100.0 * res.rougeL.f1;
    } else if (g->metric == M_SQUAD) { /* SQuAD's normalised exact match and token F1 against the one answer */
        double em = 0, f1 = 0;
        for (int64_t i = 0; st == QKV_OK && i < g->n; i++) {
            double e, f;
            const char *gold[1] = {g->refs[i]};
            st = qkv_squad_score(g->hyps[i], gold, 1, &e, &f);
            em += e;
            f1 += f;
        }
        if (st == QKV_OK) {
            cJSON_AddNumberToObject(obj, "exact_match", 100.0 * em / (double)g->n);
            cJSON_AddNumberToObject(obj, "f1", 100.0 * f1 / (double)g->n);
            cJSON_AddNumberToObject(obj, "examples", (double)g->n);
        }
        return st;
    } else {
        int64_t right = 0;
        for (int64_t i = 0; i < g->n; i++) right += !strcmp(g->hyps[i], g->refs[i]);
        v = 100.0 * (double)right / (double)g->n;
    }
    if (st == QKV_OK) {
        cJSON_AddNumberToObject(obj, g->metric == M_BLEU ? "bleu" : g->metric == M_ROUGE ? "rougeL" : "accuracy", v);
        cJSON_AddNumberToObject(obj, "examples", (double)g->n);
    }
    return st;
}

/* Decodes the first n examples of s whose group[i] >= 0 and scores each group. */
static qkv_status score_groups(qkv_run *r, const split *s, task_group *g, int ng, int *group, int64_t n, cJSON *out) {
    const task *t = &r->task;
    qkv_status st = QKV_OK;
    int64_t bs = r->set.eval.batch_size, cap = t->max_len + 1;
    int32_t *hyp = malloc(sizeof *hyp * (size_t)(bs * cap));
    int64_t *idx = malloc(sizeof *idx * (size_t)bs);
    if (!hyp || !idx) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int k = 0; st == QKV_OK && k < ng; k++) {
        g[k].hyps = calloc((size_t)(n ? n : 1), sizeof(char *));
        g[k].refs = calloc((size_t)(n ? n : 1), sizeof(char *));
        if (!g[k].hyps || !g[k].refs) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    }
    bool gr = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    for (int64_t start = 0; st == QKV_OK && start < n; start += bs) {
        int64_t B = 0;
        for (int64_t i = start; i < n && i < start + bs; i++)
            if (group[i] >= 0) idx[B++] = i;
        if (!B) continue;
        st = qkv__run_decode_greedy(r, s, idx, B, cap, hyp);
        for (int64_t b = 0; st == QKV_OK && b < B; b++) {
            const example *e = &s->ex[idx[b]];
            task_group *k = &g[group[idx[b]]];
            k->hyps[k->n] = qkv__run_detokenize(t, hyp + b * cap, cap);
            qkv__task_hyp_for_scoring(t, k->hyps[k->n]);
            k->refs[k->n] = qkv__run_detokenize(t, s->pool + e->toff + 1, e->tn - 1); /* skip <s> */
            if (!k->hyps[k->n] || !k->refs[k->n]) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            k->n++;
        }
    }
    qkv_ctx_set_grad(r->ctx, gr);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    cJSON *tasks = st == QKV_OK ? cJSON_AddObjectToObject(out, "tasks") : NULL;
    if (st == QKV_OK && !tasks) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int k = 0; st == QKV_OK && k < ng; k++)
        if (g[k].n > 0) {
            cJSON *o = cJSON_AddObjectToObject(tasks, g[k].name);
            st = o ? score(t, &g[k], o) : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        }
    for (int k = 0; k < ng; k++) {
        for (int64_t i = 0; g[k].hyps && i < g[k].n; i++) {
            free(g[k].hyps[i]);
            free(g[k].refs[i]);
        }
        free(g[k].hyps);
        free(g[k].refs);
    }
    free(hyp);
    free(idx);
    return st;
}

qkv_status qkv__run_task_metrics(qkv_run *r, const split *s, const char *spec, int64_t max_examples, cJSON *out) {
    task_group g[MAX_TASKS];
    int ng = 0;
    qkv_status st = parse_spec(spec, g, &ng);
    if (st != QKV_OK) return st;
    int64_t n = max_examples > 0 && max_examples < s->n ? max_examples : s->n;
    int *group = malloc(sizeof *group * (size_t)(n ? n : 1));
    if (!group) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; st == QKV_OK && i < n; i++) { /* the task of each example, from its source's first word */
        const example *e = &s->ex[i];
        char *text = NULL, word[64];
        size_t head = e->n < 8 ? (size_t)e->n : 8;
        st = qkv_run_decode(r, s->pool + e->off, head, &text);
        first_word(text ? text : "", word, sizeof word);
        free(text);
        group[i] = -1;
        for (int k = 0; k < ng; k++)
            if (!strcmp(word, g[k].name)) group[i] = k;
    }
    if (st == QKV_OK) st = score_groups(r, s, g, ng, group, n, out);
    free(group);
    return st;
}

qkv_status qkv__run_task_metrics_mt(qkv_run *r, const split *s, cJSON *out) {
    const multitask *mt = &r->mt;
    if (mt->n > MAX_TASKS) return qkv_error_set(QKV_ERR_UNSUPPORTED, "data.tasks: at most %d tasks", MAX_TASKS);
    task_group g[MAX_TASKS];
    for (int k = 0; k < mt->n; k++) {
        memset(&g[k], 0, sizeof g[k]);
        snprintf(g[k].name, sizeof g[k].name, "%s", mt->names[k]);
        const char *m = mt->metrics[k];
        g[k].metric = !strcmp(m, "bleu") ? M_BLEU : !strcmp(m, "rouge") ? M_ROUGE : !strcmp(m, "squad") ? M_SQUAD
                                                                                                 : M_ACCURACY;
    }
    int *group = malloc(sizeof *group * (size_t)(s->n ? s->n : 1));
    if (!group) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (int k = 0; k < mt->n; k++)
        for (int64_t i = s->task_starts[k]; i < s->task_starts[k + 1] && i < s->n; i++) group[i] = k;
    qkv_status st = score_groups(r, s, g, mt->n, group, s->n, out);
    free(group);
    return st;
}
