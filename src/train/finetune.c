/* Transfer-learning controls on the optimiser's parameters: the run's "finetune" section (mode, freeze, groups,
 * gradual unfreezing, discriminative learning rates) turned into per-parameter settings (qkv_optim_param).
 *
 * Layers come from parameter names, so every model type works without declaring anything (docs/training.md,
 * "Fine-tuning"): the first dotted component made of digits alone numbers a block ("encoder.layers.3.linear1.weight"
 * and "bert.encoder.layer.3.output.dense.weight" are in block 3, layer 4); parameters without such a component are
 * layer 0 (embeddings) when created before the first numbered one, else the top layer L + 1 (final norm, pooler,
 * head). A model without numbered blocks has two layers: the parameters sharing the last parameter's first name
 * component are the top (the head), the rest layer 0. */
#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cjson/cJSON.h>

#include "core/internal.h"
#include "train_internal.h"

#define PATTERN_MAX 256
#define GROUPS_MAX 32

typedef struct {
    char pattern[PATTERN_MAX]; /* "" = every parameter */
    long lo, hi;               /* layers, inclusive; lo -1 = any */
    float lr, wd;              /* NAN: unset */
    int frozen;                /* -1 unset */
} group;

bool qkv__finetune_match(const char *pattern, const char *name) {
    if (!*pattern) return true;
    if (strpbrk(pattern, "*?[")) return fnmatch(pattern, name, 0) == 0;
    size_t n = strlen(pattern);
    return !strncmp(name, pattern, n) && (name[n] == '\0' || name[n] == '.' || pattern[n - 1] == '.');
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

static bool parse_num(const char *s, double *out) {
    char *end;
    *out = strtod(s, &end);
    return end != s && *trim(end) == '\0' && isfinite(*out);
}

static qkv_status parse_layers(const char *spec, const char *text, group *g) {
    char *end;
    g->lo = strtol(text, &end, 10);
    g->hi = g->lo;
    if (*end == '-') g->hi = strtol(end + 1, &end, 10);
    if (end == text || *trim(end) || g->lo < 0 || g->hi < g->lo)
        return qkv_error_set(QKV_ERR_INVALID, "finetune.groups: '%s': expected layers as @N or @LO-HI (LO <= HI, "
                             "0 = embeddings)", spec);
    return QKV_OK;
}

static qkv_status parse_setting(const char *spec, char *kv, group *g) {
    char *eq = strchr(kv, '=');
    if (eq) *eq = '\0';
    char *key = trim(kv), *val = eq ? trim(eq + 1) : NULL;
    double x;
    if (!strcmp(key, "frozen") && (!val || !strcmp(val, "true") || !strcmp(val, "false"))) {
        g->frozen = !val || !strcmp(val, "true");
    } else if (!strcmp(key, "lr") && val && parse_num(val, &x) && x >= 0) {
        g->lr = (float)x;
    } else if (!strcmp(key, "wd") && val && parse_num(val, &x) && x >= 0) {
        g->wd = (float)x;
    } else {
        return qkv_error_set(QKV_ERR_INVALID, "finetune.groups: '%s': setting '%s%s%s' is not one of lr=MULTIPLIER, "
                             "wd=WEIGHT_DECAY (numbers >= 0), frozen, frozen=true|false", spec, key, val ? "=" : "",
                             val ? val : "");
    }
    return QKV_OK;
}

/* "SELECTOR:SETTINGS;..." where SELECTOR is PATTERN, @LAYERS or PATTERN@LAYERS and SETTINGS a comma list. */
static qkv_status parse_groups(const char *text, group *out, int *n) {
    *n = 0;
    char *copy = strdup(text ? text : "");
    if (!copy) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    qkv_status st = QKV_OK;
    char *save = NULL;
    for (char *part = strtok_r(copy, ";", &save); part && !st; part = strtok_r(NULL, ";", &save)) {
        char spec[PATTERN_MAX * 2];
        part = trim(part);
        if (!*part) continue;
        snprintf(spec, sizeof spec, "%s", part);
        if (*n == GROUPS_MAX) {
            st = qkv_error_set(QKV_ERR_INVALID, "finetune.groups: more than %d groups", GROUPS_MAX);
            break;
        }
        group *g = &out[(*n)++];
        *g = (group){.lo = -1, .hi = -1, .lr = NAN, .wd = NAN, .frozen = -1};
        char *colon = strrchr(part, ':');
        if (!colon) {
            st = qkv_error_set(QKV_ERR_INVALID, "finetune.groups: '%s': expected SELECTOR:SETTINGS, e.g. "
                               "'encoder.*@1-2:lr=0.5,wd=0' or 'embedding:frozen'", spec);
            break;
        }
        *colon = '\0';
        char *at = strchr(part, '@');
        if (at) {
            *at = '\0';
            st = parse_layers(spec, at + 1, g);
        }
        char *pat = trim(part);
        if (!st && strlen(pat) >= PATTERN_MAX)
            st = qkv_error_set(QKV_ERR_INVALID, "finetune.groups: '%s': pattern too long", spec);
        if (!st) snprintf(g->pattern, sizeof g->pattern, "%s", pat);
        char *save2 = NULL;
        int settings = 0;
        for (char *kv = strtok_r(colon + 1, ",", &save2); kv && !st; kv = strtok_r(NULL, ",", &save2), settings++)
            st = parse_setting(spec, kv, g);
        if (!st && !settings)
            st = qkv_error_set(QKV_ERR_INVALID, "finetune.groups: '%s': no settings after ':'", spec);
    }
    free(copy);
    return st;
}

qkv_status qkv__finetune_check(const qkv_run_settings *c) {
    group g[GROUPS_MAX];
    int n;
    qkv_status st = parse_groups(c->finetune.groups, g, &n);
    if (st) return st;
    const char *f = c->finetune.freeze ? c->finetune.freeze : "";
    for (const char *p = f; *p;) {
        size_t len = strcspn(p, ",");
        bool blank = true;
        for (size_t i = 0; i < len; i++) blank = blank && isspace((unsigned char)p[i]);
        if (blank && *f)
            return qkv_error_set(QKV_ERR_INVALID, "finetune.freeze: '%s': an empty pattern (comma-separated "
                                 "patterns expected)", f);
        if (len >= PATTERN_MAX) return qkv_error_set(QKV_ERR_INVALID, "finetune.freeze: a pattern is too long");
        p += len + (p[len] == ',');
    }
    return QKV_OK;
}

/* ---- layers ------------------------------------------------------------------------------------------------------ */

static long block_of(const char *name) {
    for (const char *p = name; *p;) {
        size_t len = strcspn(p, ".");
        bool digits = len > 0 && len < 9;
        for (size_t i = 0; digits && i < len; i++) digits = isdigit((unsigned char)p[i]);
        if (digits) return strtol(p, NULL, 10);
        p += len + (p[len] == '.');
    }
    return -1;
}

long qkv__finetune_layers(const qkv_params *params, const char *name, long *top) {
    int n = qkv_params_count(params);
    long max_block = -1, first_numbered = -1, self = -1;
    for (int i = 0; i < n; i++) {
        const char *pn = qkv_params_at(params, i)->name;
        long b = block_of(pn);
        if (b > max_block) max_block = b;
        if (b >= 0 && first_numbered < 0) first_numbered = i;
        if (!strcmp(pn, name)) self = i;
    }
    long L = max_block + 1;
    *top = L + 1;
    if (max_block < 0) {
        /* No numbered blocks: the last parameter's first component is the head. */
        *top = 1;
        const char *last = n ? qkv_params_at(params, n - 1)->name : "";
        size_t len = strcspn(last, ".");
        return !strncmp(name, last, len) && (name[len] == '.' || name[len] == '\0') ? 1 : 0;
    }
    long b = block_of(name);
    if (b >= 0) return b + 1;
    return self >= 0 && self < first_numbered ? 0 : L + 1;
}

/* Adapters mode trains the adapters, the layer norms (whatever their module is called: norm1, LayerNorm, ln_f) and
 * the head. */
static bool is_adapter(const char *name) { return strstr(name, "adapter") != NULL; }
static bool is_norm(const char *name) {
    for (const char *p = name; *p;) {
        size_t len = strcspn(p, ".");
        for (size_t i = 0; i + 4 <= len; i++)
            if (!strncasecmp(p + i, "norm", 4)) return true;
        if (len >= 2 && (!strncmp(p, "ln_", 3) || (len == 2 && !strncmp(p, "ln", 2)))) return true;
        p += len + (p[len] == '.');
    }
    return false;
}

/* ---- applying the section ---------------------------------------------------------------------------------------- */

static qkv_status log_record(const qkv_run *r, int trainable, int frozen, long top, long step) {
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "kind", "finetune");
    cJSON_AddNumberToObject(rec, "step", (double)step);
    cJSON_AddNumberToObject(rec, "trainable", trainable);
    cJSON_AddNumberToObject(rec, "frozen", frozen);
    cJSON_AddNumberToObject(rec, "layers", (double)(top + 1));
    char *line = rec ? cJSON_PrintUnformatted(rec) : NULL;
    cJSON_Delete(rec);
    if (!line) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    qkv_status st = qkv__run_log_line(r, line);
    cJSON_free(line);
    return st;
}

static bool active(const qkv_run_settings *c) {
    return strcmp(c->finetune.mode, "full") || *c->finetune.freeze || c->finetune.unfreeze_every > 0 ||
           c->finetune.layer_lr_decay != 1 || *c->finetune.groups;
}

qkv_status qkv__finetune_apply(qkv_run *r, long step, bool log) {
    const qkv_run_settings *c = &r->set;
    if (!r->opt || !active(c)) return QKV_OK;
    group g[GROUPS_MAX];
    int ng;
    qkv_status st = parse_groups(c->finetune.groups, g, &ng);
    if (st) return st;
    int np = qkv_optim_param_count(r->opt), group_hits[GROUPS_MAX] = {0};
    bool head = !strcmp(c->finetune.mode, "head"), adapters = !strcmp(c->finetune.mode, "adapters");
    int n_frozen = 0, n_adapters = 0;
    long top = 0, N = (long)c->finetune.unfreeze_every;
    for (int i = 0; i < np; i++) {
        const char *name = qkv_optim_param_at(r->opt, i)->name;
        long layer = qkv__finetune_layers(r->params, name, &top);
        qkv_optim_param p = {.lr_scale = (float)pow(c->finetune.layer_lr_decay, (double)(top - layer)),
                             .weight_decay = NAN};
        if (head) p.frozen = layer != top;
        if (adapters) p.frozen = !(is_adapter(name) || is_norm(name) || layer == top);
        n_adapters += is_adapter(name);
        for (const char *f = c->finetune.freeze; *f;) {
            size_t len = strcspn(f, ",");
            char pat[PATTERN_MAX];
            snprintf(pat, sizeof pat, "%.*s", (int)len, f);
            if (qkv__finetune_match(trim(pat), name)) p.frozen = true;
            f += len + (f[len] == ',');
        }
        for (int k = 0; k < ng; k++) {
            if (!qkv__finetune_match(g[k].pattern, name) || (g[k].lo >= 0 && (layer < g[k].lo || layer > g[k].hi)))
                continue;
            group_hits[k]++;
            if (!isnan(g[k].lr)) p.lr_scale *= g[k].lr;
            if (!isnan(g[k].wd)) p.weight_decay = g[k].wd;
            if (g[k].frozen >= 0) p.frozen = g[k].frozen;
        }
        if (N > 0 && !p.frozen) {
            long starts = (top - layer) * N; /* the head at once, then one layer down every N steps */
            if (step < starts) p.frozen = true;
            else p.since = starts;
        }
        n_frozen += p.frozen;
        qkv_optim_param_set(r->opt, i, &p);
    }
    /* Typos must not pass silently: every pattern names something. */
    for (const char *f = c->finetune.freeze; *f;) {
        size_t len = strcspn(f, ",");
        char pat[PATTERN_MAX];
        snprintf(pat, sizeof pat, "%.*s", (int)len, f);
        bool hit = false;
        for (int i = 0; i < np && !hit; i++) hit = qkv__finetune_match(trim(pat), qkv_optim_param_at(r->opt, i)->name);
        if (!hit)
            return qkv_error_set(QKV_ERR_INVALID, "finetune.freeze: '%s' matches no trainable parameter of model "
                                 "type '%s' (e.g. '%s')", trim(pat), r->type->name,
                                 np ? qkv_optim_param_at(r->opt, 0)->name : "none");
        f += len + (f[len] == ',');
    }
    for (int k = 0; k < ng; k++)
        if (!group_hits[k])
            return qkv_error_set(QKV_ERR_INVALID, "finetune.groups: group %d ('%s', layers %ld-%ld) matches no "
                                 "trainable parameter of model type '%s' (layers 0-%ld)", k + 1, g[k].pattern,
                                 g[k].lo, g[k].hi, r->type->name, top);
    if (adapters && !n_adapters)
        return qkv_error_set(QKV_ERR_INVALID, "finetune.mode: 'adapters' but model type '%s' has no adapter "
                             "parameters (enable the model's adapters)", r->type->name);
    if (n_frozen == np && np && !(N > 0))
        return qkv_error_set(QKV_ERR_INVALID, "finetune: every parameter is frozen, nothing would train");
    return log ? log_record(r, np - n_frozen, n_frozen, top, step) : QKV_OK;
}

bool qkv__finetune_due(const qkv_run *r, long step) {
    long N = (long)r->set.finetune.unfreeze_every;
    return N > 0 && step > 0 && step % N == 0;
}
