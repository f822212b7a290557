/* Entity (chunk) precision/recall/F1 with the semantics of the CoNLL conlleval script: chunk starts and ends are
 * decided from (previous tag, tag, previous type, type) by the same rules, a chunk is correct when gold and
 * prediction start it together with the same type and end it together, and sentence boundaries close chunks. */
#include <stdlib.h>
#include <string.h>

#include "qkv/metrics.h"

typedef struct tag {
    char kind;          /* 'B', 'I', 'O' (other conlleval kinds are rejected by the IOB schemes) */
    const char *type;   /* not NUL-terminated */
    size_t type_len;
} tag;

static bool same_type(const tag *a, const tag *b) {
    return a->type_len == b->type_len && memcmp(a->type, b->type, a->type_len) == 0;
}

static bool chunk_end(const tag *prev, const tag *cur) {
    if (prev->kind == 'B' && (cur->kind == 'B' || cur->kind == 'O')) return true;
    if (prev->kind == 'I' && (cur->kind == 'B' || cur->kind == 'O')) return true;
    return prev->kind != 'O' && !same_type(prev, cur);
}

static bool chunk_start(const tag *prev, const tag *cur) {
    if (cur->kind == 'B') return true; /* after B, I or O */
    if (prev->kind == 'O' && cur->kind == 'I') return true;
    return cur->kind != 'O' && !same_type(prev, cur);
}

/* conlleval splits the tag on '-': kind = first piece, type = second piece ("" when absent). */
static qkv_status parse_tag(const char *s, qkv_tag_scheme scheme, const char *which, size_t i, tag *t) {
    (void)scheme; /* IOB1 and IOB2 use the same tag alphabet; conlleval scores them the same way */
    const char *dash = strchr(s, '-');
    size_t kind_len = dash ? (size_t)(dash - s) : strlen(s);
    if (kind_len != 1 || (s[0] != 'B' && s[0] != 'I' && s[0] != 'O'))
        return qkv_error_set(QKV_ERR_INVALID, "entity F1: %s tag %zu \"%s\" is not O, B-<type> or I-<type>", which,
                             i, s);
    t->kind = s[0];
    t->type = dash ? dash + 1 : s + kind_len;
    const char *next = dash ? strchr(dash + 1, '-') : NULL;
    t->type_len = next ? (size_t)(next - t->type) : strlen(t->type);
    if (t->kind == 'O' && t->type_len)
        return qkv_error_set(QKV_ERR_INVALID, "entity F1: %s tag %zu \"%s\": O takes no type", which, i, s);
    if (t->kind != 'O' && !t->type_len)
        return qkv_error_set(QKV_ERR_INVALID, "entity F1: %s tag %zu \"%s\" has no type", which, i, s);
    return QKV_OK;
}

/* Per-type counters, found by linear search: tag sets are small. */
typedef struct types {
    qkv_chunk_type_result *v;
    int n, cap;
} types;

static qkv_chunk_type_result *type_get(types *ts, const tag *t) {
    for (int i = 0; i < ts->n; i++)
        if (strlen(ts->v[i].type) == t->type_len && memcmp(ts->v[i].type, t->type, t->type_len) == 0)
            return &ts->v[i];
    if (ts->n == ts->cap) {
        int cap = ts->cap ? ts->cap * 2 : 8;
        qkv_chunk_type_result *v = realloc(ts->v, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        ts->v = v;
        ts->cap = cap;
    }
    qkv_chunk_type_result *r = &ts->v[ts->n];
    memset(r, 0, sizeof *r);
    r->type = strndup(t->type, t->type_len);
    if (!r->type) return NULL;
    ts->n++;
    return r;
}

void qkv_chunk_free(qkv_chunk_result *r) {
    if (!r) return;
    for (int i = 0; i < r->n_types; i++) free(r->types[i].type);
    free(r->types);
    memset(r, 0, sizeof *r);
}

static int cmp_type(const void *a, const void *b) {
    return strcmp(((const qkv_chunk_type_result *)a)->type, ((const qkv_chunk_type_result *)b)->type);
}

static qkv_prf prf(int64_t correct, int64_t n_pred, int64_t n_gold) {
    qkv_prf r = {n_pred ? (double)correct / (double)n_pred : 0.0, n_gold ? (double)correct / (double)n_gold : 0.0, 0};
    r.f1 = r.precision + r.recall > 0 ? 2 * r.precision * r.recall / (r.precision + r.recall) : 0.0;
    return r;
}

qkv_status qkv_metric_chunk_f1(const char *const *gold, const char *const *pred, size_t n, qkv_tag_scheme scheme,
                               qkv_chunk_result *out) {
    if (!gold || !pred || !out) return qkv_error_set(QKV_ERR_INVALID, "entity F1: gold, pred and out must not be NULL");
    memset(out, 0, sizeof *out);
    if ((unsigned)scheme > QKV_TAGS_IOB1) return qkv_error_set(QKV_ERR_INVALID, "entity F1: unknown tag scheme %d",
                                                               (int)scheme);
    types ts = {0};
    tag O = {'O', "", 0};
    tag lg = O, lp = O; /* last gold / last predicted */
    bool in_correct = false;
    qkv_status st = QKV_OK;
    qkv_chunk_type_result *last_type = NULL;
    for (size_t i = 0; i <= n && st == QKV_OK; i++) {
        tag g = O, p = O;
        bool boundary = i == n;
        if (!boundary) {
            bool gb = !gold[i] || !gold[i][0], pb = !pred[i] || !pred[i][0];
            if (gb != pb) {
                st = qkv_error_set(QKV_ERR_INVALID, "entity F1: position %zu is a sentence boundary in %s only", i,
                                   gb ? "gold" : "pred");
                break;
            }
            boundary = gb;
            if (!boundary && ((st = parse_tag(gold[i], scheme, "gold", i, &g)) ||
                              (st = parse_tag(pred[i], scheme, "pred", i, &p))))
                break;
        }
        bool end_g = chunk_end(&lg, &g), end_p = chunk_end(&lp, &p);
        if (in_correct) {
            if (end_g && end_p && same_type(&lg, &lp)) {
                in_correct = false;
                out->n_correct++;
                last_type = type_get(&ts, &lg);
                if (!last_type) goto oom;
                last_type->n_correct++;
            } else if (end_g != end_p || !same_type(&g, &p)) {
                in_correct = false;
            }
        }
        bool start_g = chunk_start(&lg, &g), start_p = chunk_start(&lp, &p);
        if (start_g && start_p && same_type(&g, &p)) in_correct = true;
        if (start_g) {
            out->n_gold++;
            qkv_chunk_type_result *t = type_get(&ts, &g);
            if (!t) goto oom;
            t->n_gold++;
        }
        if (start_p) {
            out->n_pred++;
            qkv_chunk_type_result *t = type_get(&ts, &p);
            if (!t) goto oom;
            t->n_pred++;
        }
        if (!boundary) {
            out->n_tokens++;
            if (g.kind == p.kind && same_type(&g, &p)) out->n_correct_tags++;
        }
        lg = g;
        lp = p;
    }
    if (st) {
        for (int i = 0; i < ts.n; i++) free(ts.v[i].type);
        free(ts.v);
        return st;
    }
    /* i == n acted as a final boundary, which closes any open correct chunk */
    qsort(ts.v, (size_t)ts.n, sizeof *ts.v, cmp_type);
    for (int i = 0; i < ts.n; i++) ts.v[i].prf = prf(ts.v[i].n_correct, ts.v[i].n_pred, ts.v[i].n_gold);
    out->types = ts.v;
    out->n_types = ts.n;
    out->prf = prf(out->n_correct, out->n_pred, out->n_gold);
    out->accuracy = out->n_tokens ? (double)out->n_correct_tags / (double)out->n_tokens : 0.0;
    return QKV_OK;
oom:
    for (int i = 0; i < ts.n; i++) free(ts.v[i].type);
    free(ts.v);
    memset(out, 0, sizeof *out);
    return qkv_error_set(QKV_ERR_NOMEM, "entity F1: out of memory");
}
