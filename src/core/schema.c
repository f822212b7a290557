/* The config-schema engine (include/qkv/schema.h): defaults, checks, fill, JSON and reference text from one table. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "qkv/schema.h"

/* Bounds at or beyond this are "no bound" in messages (JSON numbers are doubles; counts stay far below). */
#define UNBOUNDED 1e15

static void *member(void *base, const qkv_field *f) { return (char *)base + f->offset; }

static void set_default(const qkv_field *f, void *out) {
    switch (f->type) {
    case QKV_FIELD_T_INT: *(int64_t *)member(out, f) = (int64_t)f->def; break;
    case QKV_FIELD_T_NUM: *(double *)member(out, f) = f->def; break;
    case QKV_FIELD_T_BOOL: *(bool *)member(out, f) = f->def != 0; break;
    case QKV_FIELD_T_STR:
    case QKV_FIELD_T_CHOICE: *(const char **)member(out, f) = f->def_str; break;
    case QKV_FIELD_T_LIST: *(const cJSON **)member(out, f) = NULL; break;
    }
}

void qkv_schema_defaults(const qkv_schema *s, void *out) {
    memset(out, 0, s->size);
    for (int i = 0; i < s->n_fields; i++) set_default(&s->fields[i], out);
}

const qkv_field *qkv_schema_find(const qkv_schema *s, const char *key) {
    for (int i = 0; i < s->n_fields; i++)
        if (!strcmp(s->fields[i].key, key)) return &s->fields[i];
    return NULL;
}

bool qkv_schema_get(const qkv_schema *s, const void *cfg, const char *key, qkv_field_type type, void *out) {
    const qkv_field *f = qkv_schema_find(s, key);
    if (!f || f->type != type) return false;
    size_t size = type == QKV_FIELD_T_INT ? sizeof(int64_t) : type == QKV_FIELD_T_NUM ? sizeof(double)
                  : type == QKV_FIELD_T_BOOL ? sizeof(bool) : type == QKV_FIELD_T_LIST ? sizeof(const cJSON *)
                  : sizeof(const char *);
    memcpy(out, (const char *)cfg + f->offset, size);
    return true;
}

/* Whole bounds in full (1048576, not 1.04858e+06), others short. */
static const char *bound(double x, char *buf, size_t size) {
    if (x == floor(x) && fabs(x) < UNBOUNDED) snprintf(buf, size, "%.0f", x);
    else snprintf(buf, size, "%g", x);
    return buf;
}

const char *qkv_field_allowed(const qkv_field *f, char *buf, size_t size) {
    bool integral = f->type == QKV_FIELD_T_INT;
    char lo[32], hi[32];
    switch (f->type) {
    case QKV_FIELD_T_INT:
    case QKV_FIELD_T_NUM:
        if (f->hi >= UNBOUNDED)
            snprintf(buf, size, "%s %s %s", integral ? "an integer" : "a number",
                     f->flags & QKV_FIELD_LO_OPEN ? ">" : ">=", bound(f->lo, lo, sizeof lo));
        else
            snprintf(buf, size, "%s in %s%s, %s%s", integral ? "an integer" : "a number",
                     f->flags & QKV_FIELD_LO_OPEN ? "(" : "[", bound(f->lo, lo, sizeof lo),
                     bound(f->hi, hi, sizeof hi), f->flags & QKV_FIELD_HI_OPEN ? ")" : "]");
        break;
    case QKV_FIELD_T_BOOL: snprintf(buf, size, "true or false"); break;
    case QKV_FIELD_T_STR:
        snprintf(buf, size, "%s%s", f->flags & QKV_FIELD_PATH ? "a file path" : "a string",
                 f->flags & QKV_FIELD_NULLABLE ? " or null" : "");
        break;
    case QKV_FIELD_T_CHOICE: snprintf(buf, size, "one of %s", f->choices); break;
    case QKV_FIELD_T_LIST: snprintf(buf, size, "an array of objects"); break;
    }
    return buf;
}

const char *qkv__json_kind(const cJSON *j) {
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "null";
}

static bool is_choice(const char *choices, const char *s) {
    size_t n = strlen(s);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && !strncmp(c, s, n)) return true;
        c += len + (bar != NULL);
    }
    return false;
}

static void full_path(char *out, size_t size, const char *section, const char *key) {
    snprintf(out, size, "%s%s%s", section, *section ? "." : "", key);
}

static qkv_status fill_item(const qkv_schema *s, const qkv_field *f, const cJSON *elem, int i, void *out);

/* Checks v against f; stores it into out when out is not NULL. */
static qkv_status take(const qkv_schema *s, const qkv_field *f, const cJSON *v, void *out) {
    char path[256], allowed[128];
    full_path(path, sizeof path, s->section, f->key);
    qkv_field_allowed(f, allowed, sizeof allowed);
    switch (f->type) {
    case QKV_FIELD_T_INT:
    case QKV_FIELD_T_NUM: {
        if (!cJSON_IsNumber(v))
            return qkv_error_set(QKV_ERR_INVALID, "%s: expected %s, got %s", path, allowed, qkv__json_kind(v));
        double x = v->valuedouble;
        bool ok = isfinite(x) && (f->flags & QKV_FIELD_LO_OPEN ? x > f->lo : x >= f->lo) &&
                  (f->flags & QKV_FIELD_HI_OPEN ? x < f->hi : x <= f->hi) &&
                  (f->type != QKV_FIELD_T_INT || x == floor(x));
        if (!ok) return qkv_error_set(QKV_ERR_RANGE, "%s: expected %s, got %.17g", path, allowed, x);
        if (out && f->type == QKV_FIELD_T_INT) *(int64_t *)member(out, f) = (int64_t)x;
        if (out && f->type == QKV_FIELD_T_NUM) *(double *)member(out, f) = x;
        return QKV_OK;
    }
    case QKV_FIELD_T_BOOL:
        if (!cJSON_IsBool(v))
            return qkv_error_set(QKV_ERR_INVALID, "%s: expected %s, got %s", path, allowed, qkv__json_kind(v));
        if (out) *(bool *)member(out, f) = cJSON_IsTrue(v);
        return QKV_OK;
    case QKV_FIELD_T_STR:
        if (cJSON_IsNull(v) && (f->flags & QKV_FIELD_NULLABLE)) {
            if (out) *(const char **)member(out, f) = NULL;
            return QKV_OK;
        }
        if (!cJSON_IsString(v))
            return qkv_error_set(QKV_ERR_INVALID, "%s: expected %s, got %s", path, allowed, qkv__json_kind(v));
        if (out) *(const char **)member(out, f) = v->valuestring;
        return QKV_OK;
    case QKV_FIELD_T_CHOICE:
        if (!cJSON_IsString(v) || !is_choice(f->choices, v->valuestring)) {
            if (cJSON_IsString(v))
                return qkv_error_set(QKV_ERR_INVALID, "%s: expected %s, got '%s'", path, allowed, v->valuestring);
            return qkv_error_set(QKV_ERR_INVALID, "%s: expected %s, got %s", path, allowed, qkv__json_kind(v));
        }
        if (out) *(const char **)member(out, f) = v->valuestring;
        return QKV_OK;
    case QKV_FIELD_T_LIST: {
        if (!cJSON_IsArray(v))
            return qkv_error_set(QKV_ERR_INVALID, "%s: expected %s, got %s", path, allowed, qkv__json_kind(v));
        /* Every element is checked here, so that the struct's readers (qkv_schema_list_item) meet no surprise. */
        void *item = f->item ? malloc(f->item->size ? f->item->size : 1) : NULL;
        if (f->item && !item) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        qkv_status st = QKV_OK;
        int i = 0;
        for (const cJSON *e = v->child; st == QKV_OK && e; e = e->next, i++) st = fill_item(s, f, e, i, item);
        free(item);
        if (st == QKV_OK && out) *(const cJSON **)member(out, f) = cJSON_GetArraySize(v) ? v : NULL;
        return st;
    }
    }
    return QKV_OK;
}

qkv_status qkv_schema_check_value(const qkv_schema *s, const char *key, const cJSON *v) {
    const qkv_field *f = qkv_schema_find(s, key);
    return f ? take(s, f, v, NULL) : QKV_OK;
}

/* Does any field's key start with "prefix."? (then prefix names an object) */
static bool is_object_key(const qkv_schema *s, const char *prefix) {
    size_t n = strlen(prefix);
    for (int i = 0; i < s->n_fields; i++)
        if (!strncmp(s->fields[i].key, prefix, n) && s->fields[i].key[n] == '.') return true;
    return false;
}

/* The direct children names of an object prefix ("" = top level), comma-separated, for unknown-key messages. */
static void known_keys(const qkv_schema *s, const char *prefix, char *out, size_t size) {
    size_t n = strlen(prefix), used = 0;
    out[0] = '\0';
    for (int i = 0; i < s->n_fields; i++) {
        const char *k = s->fields[i].key;
        if (n && (strncmp(k, prefix, n) || k[n] != '.')) continue;
        const char *child = n ? k + n + 1 : k;
        size_t len = strcspn(child, ".");
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) {
            const char *o = s->fields[j].key;
            if (n && (strncmp(o, prefix, n) || o[n] != '.')) continue;
            const char *oc = n ? o + n + 1 : o;
            seen = strcspn(oc, ".") == len && !strncmp(oc, child, len);
        }
        if (seen) continue;
        if (used + len + 8 >= size) {
            snprintf(out + used, size - used, ", ...");
            return;
        }
        used += (size_t)snprintf(out + used, size - used, "%s%.*s", used ? ", " : "", (int)len, child);
    }
}

static qkv_status fill_object(const qkv_schema *s, const cJSON *obj, const char *prefix, const char *const *skip,
                              void *out) {
    for (const cJSON *v = obj->child; v; v = v->next) {
        bool skipped = false;
        for (const char *const *k = skip; k && *k && !skipped; k++) skipped = !strcmp(*k, v->string);
        if (skipped) continue;
        char key[256];
        full_path(key, sizeof key, prefix, v->string);
        const qkv_field *f = qkv_schema_find(s, key);
        qkv_status st;
        if (f) {
            st = take(s, f, v, out);
        } else if (is_object_key(s, key)) {
            char path[300];
            full_path(path, sizeof path, s->section, key);
            if (!cJSON_IsObject(v))
                return qkv_error_set(QKV_ERR_INVALID, "%s: expected an object, got %s", path, qkv__json_kind(v));
            st = fill_object(s, v, key, NULL, out);
        } else {
            char path[300], known[400];
            full_path(path, sizeof path, s->section, key);
            known_keys(s, prefix, known, sizeof known);
            st = qkv_error_set(QKV_ERR_INVALID, "%s: unknown key (known: %s)", path, known[0] ? known : "none");
        }
        if (st) return st;
    }
    return QKV_OK;
}

/* Element i of list field f of schema s into out, its messages under "<section.key>[i]". */
static qkv_status fill_item(const qkv_schema *s, const qkv_field *f, const cJSON *elem, int i, void *out) {
    if (!f->item) return qkv_error_set(QKV_ERR_INVALID, "%s: list field without an item schema", f->key);
    char path[256], section[300];
    full_path(path, sizeof path, s->section, f->key);
    snprintf(section, sizeof section, "%s[%d]", path, i);
    qkv_schema is = *f->item;
    is.section = section;
    qkv_status st = qkv_schema_fill(&is, elem, NULL, out);
    /* The item's check knows no index: its messages get the element's path in front. */
    if (st != QKV_OK && strncmp(qkv_last_error(), section, strlen(section))) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", qkv_last_error());
        st = qkv_error_set(st, "%s: %s", section, msg);
    }
    return st;
}

qkv_status qkv_schema_list_item(const qkv_schema *s, const qkv_field *f, const cJSON *array, int i, void *out) {
    const cJSON *e = cJSON_IsArray(array) ? cJSON_GetArrayItem(array, i) : NULL;
    if (!e) {
        char path[256];
        full_path(path, sizeof path, s->section, f->key);
        return qkv_error_set(QKV_ERR_RANGE, "%s[%d]: no such element (%d in the list)", path, i,
                             cJSON_GetArraySize(array));
    }
    return fill_item(s, f, e, i, out);
}

qkv_status qkv_schema_fill(const qkv_schema *s, const cJSON *obj, const char *const *skip, void *out) {
    qkv_schema_defaults(s, out);
    if (obj && !cJSON_IsObject(obj))
        return qkv_error_set(QKV_ERR_INVALID, "%s: expected an object, got %s", *s->section ? s->section : "config",
                             qkv__json_kind(obj));
    qkv_status st = obj ? fill_object(s, obj, "", skip, out) : QKV_OK;
    if (st == QKV_OK && s->check) st = s->check(out);
    return st;
}

static cJSON *default_json(const qkv_field *f) {
    switch (f->type) {
    case QKV_FIELD_T_INT:
    case QKV_FIELD_T_NUM: return cJSON_CreateNumber(f->def);
    case QKV_FIELD_T_BOOL: return cJSON_CreateBool(f->def != 0);
    case QKV_FIELD_T_STR:
    case QKV_FIELD_T_CHOICE: return f->def_str ? cJSON_CreateString(f->def_str) : cJSON_CreateNull();
    case QKV_FIELD_T_LIST: return cJSON_CreateArray();
    }
    return NULL;
}

cJSON *qkv_schema_json(const qkv_schema *s) {
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    for (int i = 0; ok && i < s->n_fields; i++) {
        const qkv_field *f = &s->fields[i];
        cJSON *obj = root;
        char part[128];
        const char *k = f->key;
        for (const char *dot; ok && (dot = strchr(k, '.')); k = dot + 1) {
            size_t len = (size_t)(dot - k);
            ok = len < sizeof part;
            if (!ok) break;
            memcpy(part, k, len);
            part[len] = '\0';
            cJSON *next = cJSON_GetObjectItemCaseSensitive(obj, part);
            obj = next ? next : cJSON_AddObjectToObject(obj, part);
            ok = obj != NULL;
        }
        cJSON *v = ok ? default_json(f) : NULL;
        ok = v && cJSON_AddItemToObject(obj, k, v);
        if (!ok) cJSON_Delete(v);
    }
    if (!ok) {
        cJSON_Delete(root);
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return root;
}

void qkv_schema_explain(const qkv_schema *s, FILE *out) {
    static const char *const names[] = {"int", "number", "bool", "string", "choice", "list"};
    for (int i = 0; i < s->n_fields; i++) {
        const qkv_field *f = &s->fields[i];
        char path[256], allowed[128], def[64];
        full_path(path, sizeof path, s->section, f->key);
        cJSON *d = default_json(f);
        char *text = d ? cJSON_PrintUnformatted(d) : NULL;
        snprintf(def, sizeof def, "%s", text ? text : "?");
        cJSON_free(text);
        cJSON_Delete(d);
        const char *type = f->type == QKV_FIELD_T_STR && (f->flags & QKV_FIELD_PATH) ? "path" : names[f->type];
        fprintf(out, "%-32s %-7s default %-12s %s. %s\n", path, type, def,
                qkv_field_allowed(f, allowed, sizeof allowed), f->doc ? f->doc : "");
        if (f->type == QKV_FIELD_T_LIST && f->item) { /* each element's keys as "list[].key" */
            char section[300];
            snprintf(section, sizeof section, "%s[]", path);
            qkv_schema is = *f->item;
            is.section = section;
            qkv_schema_explain(&is, out);
        }
    }
}
