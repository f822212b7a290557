#include "run_view.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "qkv/beam.h"
#include "qkv/decoder.h"
#include "qkv/ops.h"
#include "qkv/viz.h"

/* ---- one forward with the attention maps, copied out of its context ---------------------------------------- */

/* A captured map: [heads, rows, cols] floats (malloc'd). */
typedef struct view_map {
    const char *kind; /* "self", "causal", "cross" (static strings of the model) */
    char name[QKV_ATTENTION_MAP_NAME]; /* the model's name for it, "" when it gave none */
    int heads, rows, cols;
    float *w;
} view_map;

typedef struct view_maps {
    int n;
    view_map m[QKV_ATTENTION_MAPS_MAX];
} view_maps;

static void view_maps_free(view_maps *v) {
    for (int i = 0; i < v->n; i++) free(v->m[i].w);
    memset(v, 0, sizeof *v);
}

static qkv_tensor *ids_tensor(qkv_ctx *ctx, const int32_t *ids, int64_t n) {
    qkv_tensor *t = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, n));
    if (t) memcpy(t->data, ids, sizeof(int32_t) * (size_t)n);
    return t;
}

static qkv_tensor *ones(qkv_ctx *ctx, int64_t n) {
    qkv_tensor *t = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(1, n));
    if (t) qkv_tensor_fill(t, 1.0f);
    return t;
}

/* Inference forward of the run's model on one sequence (ids [1, T]; a seq2seq model also gets src [1, S] and
 * takes ids as its decoder inputs). The model's own forward fills the maps, so they are exactly what it computes. */
static qkv_status forward_maps(qkv_run *r, const int32_t *src, int64_t S, const int32_t *ids, int64_t T,
                               view_maps *out) {
    memset(out, 0, sizeof *out);
    qkv_ctx *ctx = qkv_ctx_new();
    if (!ctx) return qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    qkv_ctx_set_grad(ctx, false);
    qkv_ctx_set_training(ctx, false);
    qkv_batch b = {.ids = ids_tensor(ctx, ids, T), .mask = ones(ctx, T), .n_tokens = T};
    /* Models that build their inputs from the targets (rnnlm's shift right) need them; the others ignore them. */
    if (!strcmp(qkv_run_model_type(r)->task, "lm")) b.targets = b.ids;
    if (src) {
        b.src_ids = ids_tensor(ctx, src, S);
        b.src_mask = ones(ctx, S);
    }
    qkv_status st = QKV_OK;
    qkv_attention_maps maps;
    memset(&maps, 0, sizeof maps);
    if (!b.ids || !b.mask || (src && (!b.src_ids || !b.src_mask)))
        st = qkv_last_status();
    else if (!qkv_run_model_type(r)->forward(ctx, qkv_run_model(r), &b, &maps))
        st = qkv_last_status();
    for (int k = 0; st == QKV_OK && k < maps.n_layers && k < QKV_ATTENTION_MAPS_MAX; k++) {
        qkv_tensor *w = maps.weights[k];
        bool ok = w && w->dtype == QKV_F32 && (w->ndim == 3 || w->ndim == 4) && w->shape[0] == 1;
        if (!ok) {
            st = qkv_error_set(QKV_ERR_INVALID, "viewer: %s returned attention map %d with an unexpected shape",
                               qkv_run_model_type(r)->name, k + 1);
            break;
        }
        qkv_tensor *c = qkv_contiguous(ctx, w);
        view_map *m = &out->m[out->n];
        m->kind = maps.kind[k] ? maps.kind[k] : "self";
        snprintf(m->name, sizeof m->name, "%s", maps.name[k]);
        m->heads = w->ndim == 4 ? (int)w->shape[1] : 1;
        m->rows = (int)w->shape[w->ndim - 2];
        m->cols = (int)w->shape[w->ndim - 1];
        size_t n = (size_t)m->heads * (size_t)m->rows * (size_t)m->cols;
        m->w = c ? malloc(sizeof(float) * n) : NULL;
        if (!m->w) {
            st = c ? qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory") : qkv_last_status();
            break;
        }
        memcpy(m->w, c->data, sizeof(float) * n);
        out->n++;
    }
    qkv_ctx_free(ctx);
    if (st) view_maps_free(out);
    return st;
}

int run_view_check_attention(qkv_run *r) {
    const qkv_model_type *t = qkv_run_model_type(r);
    int32_t bos = 0, eos, pad;
    int64_t max_len;
    bool s2s = !strcmp(t->task, "seq2seq");
    if (s2s) qkv_run_target_ids(r, &bos, &eos, &pad, &max_len);
    int32_t zero = 0;
    view_maps v;
    qkv_status st = forward_maps(r, s2s ? &zero : NULL, 1, s2s ? &bos : &zero, 1, &v);
    if (st) return st;
    int n = v.n;
    view_maps_free(&v);
    return n ? QKV_OK : qkv_error_set(QKV_ERR_UNSUPPORTED, "%s has no attention to show", t->name);
}

/* ---- token labels ------------------------------------------------------------------------------------------ */

char *run_view_token(qkv_run *r, int32_t id, bool target) {
    char *s = NULL, buf[32];
    qkv_status st = target ? qkv_run_decode_target(r, &id, 1, &s) : qkv_run_decode(r, &id, 1, &s);
    if (st || !s || !*s) { /* decoding drops special tokens ([CLS], [SEP], <pad>): show their vocabulary entry */
        free(s);
        qkv_error_clear();
        if (!target && (s = qkv_run_token(r, id))) return s;
        snprintf(buf, sizeof buf, "#%d", (int)id);
        return strdup(buf);
    }
    /* Whitespace tokens would be invisible labels: show them as symbols (3 UTF-8 bytes each). */
    char *out = malloc(3 * strlen(s) + 1), *p = out;
    for (const char *c = s; out && *c; c++) {
        const char *sym = *c == ' '    ? "\xe2\x90\xa3"
                          : *c == '\n' ? "\xe2\x8f\x8e"
                          : *c == '\t' ? "\xe2\x87\xa5"
                                       : NULL;
        if (sym) p += sprintf(p, "%s", sym);
        else if (*c != '\r') *p++ = *c;
    }
    if (out) *p = '\0';
    free(s);
    return out;
}

static void labels_free(char **l, int n) {
    for (int i = 0; l && i < n; i++) free(l[i]);
    free(l);
}

/* n labels of ids (target side: <s> / </s> named); NULL when out of memory. */
static char **labels_of(qkv_run *r, const int32_t *ids, int n, bool target) {
    int32_t bos = -1, eos = -1, pad;
    int64_t max_len;
    if (target) qkv_run_target_ids(r, &bos, &eos, &pad, &max_len);
    char **l = calloc((size_t)(n ? n : 1), sizeof *l);
    for (int i = 0; l && i < n; i++) {
        l[i] = target && ids[i] == bos ? strdup("<s>") : target && ids[i] == eos ? strdup("</s>")
                                                                                 : run_view_token(r, ids[i], target);
        if (!l[i]) {
            labels_free(l, n);
            return NULL;
        }
    }
    return l;
}

/* ---- the page: examples plus the run's curves --------------------------------------------------------------- */

static qkv_status write_page(qkv_run *r, const char *run_dir, const char *what, const qkv_viz_example *ex, int n,
                             const char *out_html) {
    qkv_run_curves c = {0};
    qkv_viz_curve curves[3];
    int n_curves = 0;
    if (qkv_run_read_curves(run_dir, &c) == QKV_OK) {
        if (c.n_train) curves[n_curves++] = (qkv_viz_curve){"loss", "train", c.n_train, c.train_step, c.train_loss};
        if (c.n_dev) {
            curves[n_curves++] = (qkv_viz_curve){"loss", "dev", c.n_dev, c.dev_step, c.dev_loss};
            if (c.metric[0]) curves[n_curves++] = (qkv_viz_curve){c.metric, "dev", c.n_dev, c.dev_step, c.dev_metric};
        }
    }
    qkv_error_clear(); /* a run without a log still gets its page */
    char subtitle[1024];
    snprintf(subtitle, sizeof subtitle, "model %s, run %s, step %ld%s%s", qkv_run_model_type(r)->name, run_dir,
             qkv_run_step(r), what ? ": " : "", what ? what : "");
    qkv_viz_page page = {.title = "qkv: what the model attends to",
                         .subtitle = subtitle,
                         .n_examples = n,
                         .examples = ex,
                         .n_curves = n_curves,
                         .curves = curves};
    qkv_status st = qkv_viz_write_html(out_html, &page);
    qkv_run_curves_free(&c);
    return st;
}

/* ---- classifiers (and every model qkv_run_explain knows) ---------------------------------------------------- */

static qkv_status write_lm_texts(qkv_run *r, const char *run_dir, const char *const *texts, int n,
                                 const char *out_html);

/* ---- taggers: each text's words with their predicted tags (entities for BIO tag sets) ------------------------- */

typedef struct tagged_view {
    cJSON *pred; /* qkv_run_predict's answer: tokens, tags, entities; the strings below point into it */
    const char **toks, **tags;
    char summary[512];
} tagged_view;

static qkv_status tagged_view_make(qkv_run *r, const char *text, tagged_view *v, qkv_viz_example *ex) {
    memset(v, 0, sizeof *v);
    if (!(v->pred = qkv_run_predict(r, text))) return qkv_last_status();
    const cJSON *toks = cJSON_GetObjectItem(v->pred, "tokens"), *tags = cJSON_GetObjectItem(v->pred, "tags");
    const cJSON *ents = cJSON_GetObjectItem(v->pred, "entities"), *e;
    int n = cJSON_GetArraySize(toks);
    v->toks = malloc(sizeof *v->toks * (size_t)(n ? n : 1));
    v->tags = malloc(sizeof *v->tags * (size_t)(n ? n : 1));
    if (!v->toks || !v->tags) return qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    for (int i = 0; i < n; i++) {
        v->toks[i] = cJSON_GetStringValue(cJSON_GetArrayItem(toks, i));
        v->tags[i] = cJSON_GetStringValue(cJSON_GetArrayItem(tags, i));
    }
    if (ents) {
        size_t at = (size_t)snprintf(v->summary, sizeof v->summary, "%d entit%s", cJSON_GetArraySize(ents),
                                     cJSON_GetArraySize(ents) == 1 ? "y" : "ies");
        const char *sep = ": ";
        cJSON_ArrayForEach(e, ents) {
            if (at < sizeof v->summary)
                at += (size_t)snprintf(v->summary + at, sizeof v->summary - at, "%s[%s] %s", sep,
                                       cJSON_GetStringValue(cJSON_GetObjectItem(e, "text")),
                                       cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")));
            sep = ", ";
        }
    }
    *ex = (qkv_viz_example){.title = text, .n_tokens = n, .tokens = v->toks, .highlight_row = -1,
                            .prediction = ents ? v->summary : NULL, .probability = -1, .tags = v->tags};
    return QKV_OK;
}

static qkv_status write_tagged(qkv_run *r, const char *run_dir, const char *const *texts, int n,
                               const char *out_html) {
    tagged_view *v = calloc((size_t)(n ? n : 1), sizeof *v);
    qkv_viz_example *ex = calloc((size_t)(n ? n : 1), sizeof *ex);
    qkv_status st = v && ex ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    for (int i = 0; st == QKV_OK && i < n; i++) st = tagged_view_make(r, texts[i], &v[i], &ex[i]);
    if (st == QKV_OK) st = write_page(r, run_dir, "predicted tags (entities coloured by type)", ex, n, out_html);
    for (int i = 0; v && i < n; i++) {
        cJSON_Delete(v[i].pred);
        free(v[i].toks);
        free(v[i].tags);
    }
    free(v);
    free(ex);
    return st;
}

int run_view_write(qkv_run *r, const char *run_dir, const char *const *texts, int n, const char *out_html,
                   const char *svg_dir) {
    if (!strcmp(qkv_run_model_type(r)->task, "tagging")) {
        if (svg_dir) return qkv_error_set(QKV_ERR_UNSUPPORTED, "viewer: --svg is not available for tagger runs");
        return write_tagged(r, run_dir, texts, n, out_html);
    }
    if (!strcmp(qkv_run_model_type(r)->task, "seq2seq")) {
        if (svg_dir) return qkv_error_set(QKV_ERR_UNSUPPORTED, "viewer: --svg is not available for translation runs");
        return run_view_write_translations(r, run_dir, texts, n, out_html);
    }
    if (!strcmp(qkv_run_model_type(r)->task, "lm")) {
        if (svg_dir) return qkv_error_set(QKV_ERR_UNSUPPORTED, "viewer: --svg is for classifiers");
        return write_lm_texts(r, run_dir, texts, n, out_html);
    }
    qkv_run_explanation *ex = calloc((size_t)(n ? n : 1), sizeof *ex);
    qkv_viz_example *vex = calloc((size_t)(n ? n : 1), sizeof *vex);
    qkv_viz_map **maps = calloc((size_t)(n ? n : 1), sizeof *maps);
    qkv_status st = ex && vex && maps ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    for (int i = 0; st == QKV_OK && i < n; i++) {
        if ((st = qkv_run_explain(r, texts[i], &ex[i])) != QKV_OK) break;
        maps[i] = calloc((size_t)(ex[i].n_maps ? ex[i].n_maps : 1), sizeof **maps);
        if (!maps[i]) {
            st = qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
            break;
        }
        for (int m = 0; m < ex[i].n_maps; m++) {
            maps[i][m] = (qkv_viz_map){.name = ex[i].map_names[m],
                                       .kind = ex[i].map_kinds[m],
                                       .n_heads = ex[i].n_heads,
                                       .n_rows = ex[i].n_tokens,
                                       .n_cols = ex[i].n_tokens,
                                       .weights = ex[i].weights[m],
                                       .row_labels = (const char *const *)ex[i].tokens,
                                       .highlight = strcmp(ex[i].map_kinds[m], "causal") != 0};
            if (svg_dir) {
                char path[4096];
                mkdir(svg_dir, 0777);
                snprintf(path, sizeof path, "%s/text%d_layer%d.svg", svg_dir, i + 1, m + 1);
                if ((st = qkv_viz_write_svg(path, &maps[i][m], -1, texts[i])) != QKV_OK) break;
            }
        }
        vex[i] = (qkv_viz_example){.title = texts[i],
                                   .n_tokens = ex[i].n_tokens,
                                   .tokens = (const char *const *)ex[i].tokens,
                                   .highlight_row = ex[i].label ? 0 : -1,
                                   .prediction = ex[i].label,
                                   .probability = ex[i].probability,
                                   .n_maps = ex[i].n_maps,
                                   .maps = maps[i]};
    }
    if (st == QKV_OK) st = write_page(r, run_dir, NULL, vex, n, out_html);
    for (int i = 0; i < n; i++) {
        if (ex) qkv_run_explanation_free(&ex[i]);
        if (maps) free(maps[i]);
    }
    free(ex);
    free(vex);
    free(maps);
    return st;
}

/* ---- language models ------------------------------------------------------------------------------------------ */

/* Longest sequence the model takes in one forward (0 = no limit known). */
static int64_t model_context(qkv_run *r) {
    return qkv_model_type_info(qkv_run_model_type(r), qkv_run_model(r)).max_positions;
}

/* What one text of a causal self-attention page owns (the example borrows from it). */
typedef struct text_view {
    char **labels;
    int n;
    view_maps v;
    qkv_viz_map maps[32];
    char names[32][32];
} text_view;

static void text_view_free(text_view *p) {
    labels_free(p->labels, p->n);
    view_maps_free(&p->v);
}

/* One full forward over n ids (n within the context) with the maps captured; ex shows row `row` highlighted.
 * labels: n readable tokens, owned by p from here on (also on an error). */
static qkv_status text_view_make(qkv_run *r, const int32_t *ids, int n, char **labels, const char *title, int row,
                                 text_view *p, qkv_viz_example *ex) {
    memset(p, 0, sizeof *p);
    p->labels = labels;
    p->n = n;
    qkv_status st = forward_maps(r, NULL, 0, ids, n, &p->v);
    if (st) return st;
    if (p->v.n == 0)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s has no attention to show", qkv_run_model_type(r)->name);
    for (int k = 0; k < p->v.n; k++) {
        const view_map *m = &p->v.m[k];
        if (m->rows != n || m->cols != n)
            return qkv_error_set(QKV_ERR_INVALID, "viewer: map %d is %d x %d for %d tokens", k + 1, m->rows, m->cols,
                                 n);
        if (m->name[0]) snprintf(p->names[k], sizeof p->names[k], "%s", m->name);
        else snprintf(p->names[k], sizeof p->names[k], "layer %d", k + 1);
        p->maps[k] = (qkv_viz_map){.name = p->names[k], .kind = m->kind, .n_heads = m->heads, .n_rows = n,
                                   .n_cols = n, .weights = m->w, .row_labels = (const char *const *)labels,
                                   .highlight = true};
    }
    *ex = (qkv_viz_example){.title = title, .n_tokens = n, .tokens = (const char *const *)labels,
                            .highlight_row = row, .probability = -1, .n_maps = p->v.n, .maps = p->maps};
    return QKV_OK;
}

/* The ids' view (first n_ctx tokens), the last token's row highlighted: what the model looked at to predict the
 * token after it. */
static qkv_status lm_text_view(qkv_run *r, const int32_t *ids, size_t n, const char *title, text_view *p,
                               qkv_viz_example *ex) {
    memset(p, 0, sizeof *p);
    int64_t ctx = model_context(r);
    if (ctx > 0 && (int64_t)n > ctx) n = (size_t)ctx;
    if (n == 0) return qkv_error_set(QKV_ERR_INVALID, "viewer: '%s' has no tokens", title ? title : "");
    if (n > 1 << 20) return qkv_error_set(QKV_ERR_RANGE, "viewer: %zu tokens are too many to show", n);
    char **labels = labels_of(r, ids, (int)n, false);
    if (!labels) return qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    return text_view_make(r, ids, (int)n, labels, title, (int)n - 1, p, ex);
}

int run_view_write_lm(qkv_run *r, const char *run_dir, const int32_t *ids, size_t n, const char *title,
                      const char *out_html) {
    text_view p;
    qkv_viz_example ex;
    qkv_status st = lm_text_view(r, ids, n, title, &p, &ex);
    if (st == QKV_OK) st = write_page(r, run_dir, "causal self-attention over the text", &ex, 1, out_html);
    text_view_free(&p);
    return st;
}

/* Every text of `qkv viz` on a language model: the whole text is the input (no token is held back as a target). */
static qkv_status write_lm_texts(qkv_run *r, const char *run_dir, const char *const *texts, int n,
                                 const char *out_html) {
    text_view *p = calloc((size_t)n, sizeof *p);
    qkv_viz_example *ex = calloc((size_t)n, sizeof *ex);
    qkv_status st = p && ex ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    int made = 0;
    for (; st == QKV_OK && made < n; made++) {
        int32_t *ids = NULL;
        size_t len = 0;
        if ((st = qkv_run_encode(r, texts[made], &ids, &len)) != QKV_OK) break;
        st = lm_text_view(r, ids, len, texts[made], &p[made], &ex[made]);
        free(ids);
    }
    if (st == QKV_OK) st = write_page(r, run_dir, "causal self-attention over each text", ex, n, out_html);
    for (int i = 0; p && i < made && i < n; i++) text_view_free(&p[i]);
    free(p);
    free(ex);
    return st;
}

/* ---- translation: alignments -------------------------------------------------------------------------------- */

/* What one example of the alignment page owns. */
typedef struct pair_view {
    char **src, **tgt, **in; /* labels: source tokens, produced target tokens, decoder inputs (<s> y1 ...) */
    int S, T;
    char *translation;
    view_maps v;
    qkv_viz_map maps[32];
    char names[32][32];
} pair_view;

static void pair_view_free(pair_view *p) {
    labels_free(p->src, p->S);
    labels_free(p->tgt, p->T);
    labels_free(p->in, p->T);
    free(p->translation);
    view_maps_free(&p->v);
}

static qkv_status pair_view_make(qkv_run *r, const run_view_pair *pr, pair_view *p, qkv_viz_example *ex) {
    memset(p, 0, sizeof *p);
    int32_t bos, eos, pad;
    int64_t max_len;
    qkv_run_target_ids(r, &bos, &eos, &pad, &max_len);
    if (pr->n_src < 1 || !pr->src || pr->n_tgt < 0 || (pr->n_tgt > 0 && !pr->tgt))
        return qkv_error_set(QKV_ERR_INVALID, "viewer: '%s': no source tokens", pr->source_text ? pr->source_text : "");
    p->S = pr->n_src;
    p->T = pr->n_tgt;
    int32_t *in = malloc(sizeof *in * (size_t)(p->T ? p->T : 1));
    p->src = labels_of(r, pr->src, p->S, false);
    p->tgt = labels_of(r, pr->tgt, p->T, true);
    if (in) {
        in[0] = bos; /* teacher forcing: row t is the step that produced target token t */
        for (int t = 1; t < p->T; t++) in[t] = pr->tgt[t - 1];
    }
    p->in = in ? labels_of(r, in, p->T, true) : NULL;
    int n_text = p->T && pr->tgt[p->T - 1] == eos ? p->T - 1 : p->T;
    qkv_status st = in && p->src && p->tgt && p->in ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    if (st == QKV_OK && qkv_run_decode_target(r, pr->tgt, (size_t)n_text, &p->translation) != QKV_OK)
        st = qkv_last_status();
    if (st == QKV_OK && p->T > 0) st = forward_maps(r, pr->src, p->S, in, p->T, &p->v);
    free(in);
    if (st) return st;
    int count[3] = {0, 0, 0}; /* cross, self, causal */
    for (int k = 0; k < p->v.n; k++) {
        const view_map *m = &p->v.m[k];
        bool cross = !strcmp(m->kind, "cross"), causal = !strcmp(m->kind, "causal");
        int rows = cross || causal ? p->T : p->S, cols = cross ? p->S : causal ? p->T : p->S;
        if (m->rows != rows || m->cols != cols)
            return qkv_error_set(QKV_ERR_INVALID, "viewer: %s map %d is %d x %d, expected %d x %d", m->kind, k + 1,
                                 m->rows, m->cols, rows, cols);
        int which = cross ? 0 : causal ? 2 : 1;
        count[which]++;
        if (m->name[0]) snprintf(p->names[k], sizeof p->names[k], "%s", m->name);
        else snprintf(p->names[k], sizeof p->names[k], "%s %d %s", which == 1 ? "encoder" : "decoder", count[which],
                      which == 0 ? "cross" : "self");
        p->maps[k] = (qkv_viz_map){.name = p->names[k], .kind = m->kind, .n_heads = m->heads, .n_rows = rows,
                                   .n_cols = cols, .weights = m->w,
                                   .row_labels = (const char *const *)(cross ? p->tgt : causal ? p->in : p->src),
                                   .col_labels = cross ? (const char *const *)p->src : NULL};
    }
    *ex = (qkv_viz_example){.title = pr->source_text, .n_tokens = p->S, .tokens = (const char *const *)p->src,
                            .highlight_row = -1, .prediction = p->translation, .probability = -1, .n_maps = p->v.n,
                            .maps = p->maps};
    return QKV_OK;
}

int run_view_write_pairs(qkv_run *r, const char *run_dir, const run_view_pair *pairs, int n, const char *out_html) {
    if (strcmp(qkv_run_model_type(r)->task, "seq2seq"))
        return qkv_error_set(QKV_ERR_INVALID, "viewer: %s is not a translation model", qkv_run_model_type(r)->name);
    pair_view *pv = calloc((size_t)(n ? n : 1), sizeof *pv);
    qkv_viz_example *ex = calloc((size_t)(n ? n : 1), sizeof *ex);
    qkv_status st = pv && ex ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    int made = 0;
    for (; st == QKV_OK && made < n; made++) st = pair_view_make(r, &pairs[made], &pv[made], &ex[made]);
    if (st == QKV_OK)
        st = write_page(r, run_dir, "alignments (rows: target tokens, columns: source tokens)", ex, n, out_html);
    for (int i = 0; pv && i < made; i++) pair_view_free(&pv[i]);
    free(pv);
    free(ex);
    return st;
}

int run_view_write_translations(qkv_run *r, const char *run_dir, const char *const *texts, int n,
                                const char *out_html) {
    qkv_decoder dec;
    if (qkv_model_decoder(qkv_run_model_type(r), qkv_run_model(r), &dec) != QKV_OK || !dec.info.needs_source)
        return qkv_error_set(QKV_ERR_INVALID, "viewer: %s is not a translation model", qkv_run_model_type(r)->name);
    qkv_decode_opts o = qkv_decode_defaults();
    int64_t src_max;
    qkv_run_target_ids(r, &o.bos, &o.eos, &o.pad, &src_max);
    o.beam = 1;
    run_view_pair *pairs = calloc((size_t)(n ? n : 1), sizeof *pairs);
    int32_t **srcs = calloc((size_t)(n ? n : 1), sizeof *srcs);
    qkv_hyps *hs = calloc((size_t)(n ? n : 1), sizeof *hs);
    qkv_status st = pairs && srcs && hs ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    for (int i = 0; st == QKV_OK && i < n; i++) {
        size_t len = 0;
        if ((st = qkv_run_encode(r, texts[i], &srcs[i], &len)) != QKV_OK) break;
        if ((int64_t)len > src_max) len = (size_t)src_max;
        if (len == 0) { /* as qkv translate: an empty source is one padding token */
            free(srcs[i]);
            if (!(srcs[i] = malloc(sizeof(int32_t)))) {
                st = qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
                break;
            }
            srcs[i][0] = o.pad >= 0 ? o.pad : 0;
            len = 1;
        }
        o.max_len = 2 * (int)len + 10;
        if ((st = qkv_decode_greedy(&dec, srcs[i], NULL, 1, (int)len, &o, &hs[i])) != QKV_OK) break;
        pairs[i] = (run_view_pair){.source_text = texts[i], .src = srcs[i], .n_src = (int)len,
                                   .tgt = hs[i].n ? hs[i].h[0].tokens : NULL, .n_tgt = hs[i].n ? hs[i].h[0].len : 0};
    }
    if (st == QKV_OK) st = run_view_write_pairs(r, run_dir, pairs, n, out_html);
    for (int i = 0; i < n && srcs; i++) {
        free(srcs[i]);
        if (hs) qkv_hyps_free(&hs[i]);
    }
    free(srcs);
    free(hs);
    free(pairs);
    return st;
}

/* ---- attend: the self-attention view of one sentence ---------------------------------------------------------- */

/* A label without its word-piece / byte-level space markers. */
static const char *bare(const char *l) {
    for (;;) {
        if (!strncmp(l, "##", 2)) l += 2;
        else if (!strncmp(l, "\xe2\x90\xa3", 3)) l += 3; /* the "␣" of run_view_token */
        else if (!strncmp(l, "\xc4\xa0", 2)) l += 2;      /* GPT-2's byte-level space "Ġ" */
        else if (*l == ' ') l++;
        else return l;
    }
}

/* The first token equal to the word (case-insensitively), else the first piece the word starts with; -1 if none. */
static int find_word(char *const *labels, int n, const char *word) {
    for (int i = 0; i < n; i++)
        if (!strcasecmp(bare(labels[i]), word)) return i;
    for (int i = 0; i < n; i++) {
        const char *l = bare(labels[i]);
        if (*l && !strncasecmp(word, l, strlen(l))) return i;
    }
    return -1;
}

static int attend_row(char *const *labels, int n, const char *word, int fallback) {
    if (!word) return fallback;
    int row = find_word(labels, n, word);
    if (row < 0) qkv_error_set(QKV_ERR_INVALID, "the word '%s' is not among the sentence's tokens", word);
    return row;
}

int run_view_write_attend(qkv_run *r, const char *run_dir, const char *text, const char *word,
                          const char *out_html) {
    const qkv_model_type *t = qkv_run_model_type(r);
    char what[512];
    if (!strcmp(t->task, "classify")) {
        qkv_run_explanation e;
        qkv_status st = qkv_run_explain(r, text, &e);
        if (st) return st;
        int row = e.n_maps ? attend_row(e.tokens, e.n_tokens, word, 0) : 0;
        if (!e.n_maps) st = qkv_error_set(QKV_ERR_UNSUPPORTED, "%s has no attention to show", t->name);
        else if (row < 0) st = qkv_last_status();
        qkv_viz_map maps[QKV_ATTENTION_MAPS_MAX];
        for (int m = 0; st == QKV_OK && m < e.n_maps && m < QKV_ATTENTION_MAPS_MAX; m++)
            maps[m] = (qkv_viz_map){.name = e.map_names[m], .kind = e.map_kinds[m], .n_heads = e.n_heads,
                                    .n_rows = e.n_tokens, .n_cols = e.n_tokens, .weights = e.weights[m],
                                    .row_labels = (const char *const *)e.tokens, .highlight = true};
        if (st == QKV_OK) {
            snprintf(what, sizeof what, "attention of '%s' (prediction %s, p = %.3f)", e.tokens[row],
                     e.label ? e.label : "?", e.probability);
            qkv_viz_example ex = {.title = text, .n_tokens = e.n_tokens, .tokens = (const char *const *)e.tokens,
                                  .highlight_row = row, .prediction = e.label, .probability = e.probability,
                                  .n_maps = e.n_maps < QKV_ATTENTION_MAPS_MAX ? e.n_maps : QKV_ATTENTION_MAPS_MAX,
                                  .maps = maps};
            st = write_page(r, run_dir, what, &ex, 1, out_html);
        }
        qkv_run_explanation_free(&e);
        return st;
    }
    bool s2s = !strcmp(t->task, "seq2seq");
    bool encoder = !strcmp(t->task, "pretrain"); /* a BERT-style encoder: bidirectional maps, [CLS] row */
    if (strcmp(t->task, "lm") && !s2s && !encoder)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s (task %s) has no attention to show", t->name, t->task);
    int32_t *ids = NULL;
    size_t n = 0;
    qkv_status st = qkv_run_encode(r, text, &ids, &n);
    if (st) return st;
    int64_t limit = s2s ? 0 : model_context(r);
    if (s2s) {
        int32_t bos, eos, pad;
        qkv_run_target_ids(r, &bos, &eos, &pad, &limit);
    }
    if (limit > 0 && (int64_t)n > limit) n = (size_t)limit;
    char **labels = n ? labels_of(r, ids, (int)n, false) : NULL;
    if (n == 0) st = qkv_error_set(QKV_ERR_INVALID, "the sentence has no tokens");
    else if (!labels) st = qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    int row = st ? 0 : attend_row(labels, (int)n, word, s2s || encoder ? 0 : (int)n - 1);
    if (st == QKV_OK && row < 0) st = qkv_last_status();
    if (st == QKV_OK && !s2s) {
        snprintf(what, sizeof what, "%s, row of '%s'", encoder ? "self-attention" : "causal self-attention",
                 labels[row]);
        text_view p;
        qkv_viz_example ex;
        st = text_view_make(r, ids, (int)n, labels, text, row, &p, &ex);
        labels = NULL; /* p owns them now */
        if (st == QKV_OK) st = write_page(r, run_dir, what, &ex, 1, out_html);
        text_view_free(&p);
    } else if (st == QKV_OK) {
        /* The encoder's self-attention does not depend on the target: one decoder step (<s>) is enough. */
        int32_t bos, eos, pad;
        int64_t max_len;
        qkv_run_target_ids(r, &bos, &eos, &pad, &max_len);
        view_maps v;
        if ((st = forward_maps(r, ids, (int64_t)n, &bos, 1, &v)) == QKV_OK) {
            qkv_viz_map maps[32];
            char names[32][32];
            int k = 0;
            for (int m = 0; m < v.n; m++) {
                if (strcmp(v.m[m].kind, "self") || v.m[m].rows != (int)n || v.m[m].cols != (int)n) continue;
                snprintf(names[k], sizeof names[k], "encoder %d", k + 1);
                maps[k] = (qkv_viz_map){.name = names[k], .kind = "self", .n_heads = v.m[m].heads,
                                        .n_rows = (int)n, .n_cols = (int)n, .weights = v.m[m].w,
                                        .row_labels = (const char *const *)labels, .highlight = true};
                k++;
            }
            if (k == 0) {
                st = qkv_error_set(QKV_ERR_UNSUPPORTED,
                                   "%s has no self-attention to show (its source x target alignments: qkv translate "
                                   "--run DIR --view PAGE.html)", t->name);
            } else {
                snprintf(what, sizeof what, "encoder self-attention, row of '%s'", labels[row]);
                qkv_viz_example ex = {.title = text, .n_tokens = (int)n, .tokens = (const char *const *)labels,
                                      .highlight_row = row, .probability = -1, .n_maps = k, .maps = maps};
                st = write_page(r, run_dir, what, &ex, 1, out_html);
            }
            view_maps_free(&v);
        }
    }
    labels_free(labels, (int)n);
    free(ids);
    return st;
}
