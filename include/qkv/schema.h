/* Config schemas: a section of a JSON config declared once, as a table of fields.
 *
 * Each field names a key (dots for nested objects: "optimizer.lr"), its type, its default, the values it allows,
 * a one-line doc, and where it lives in a typed C struct (offsetof). From the one table come the defaults as JSON
 * (`qkv config show`), the validation of a user's object (unknown key, wrong type, out of range, not a choice:
 * QKV_ERR_INVALID / QKV_ERR_RANGE naming the key, the value and what is allowed), the filled struct the code reads,
 * and the reference text (`qkv config explain`). Rules that tie fields together go in the schema's check function,
 * run after the fill.
 *
 *     typedef struct { int64_t dim; double dropout; } my_opts;
 *     static const qkv_field fields[] = {
 *         QKV_FIELD_INT(my_opts, dim, "dim", 64, 1, 65536, "embedding width"),
 *         QKV_FIELD_NUM(my_opts, dropout, "dropout", 0.1, 0, 1, QKV_FIELD_HI_OPEN, "dropout probability"),
 *     };
 *     const qkv_schema my_schema = QKV_SCHEMA("model", my_opts, fields, NULL);
 *
 * Strings in a filled struct point into the cJSON tree it was filled from (or to the table's defaults): keep the
 * tree while the struct is used. */
#ifndef QKV_SCHEMA_H
#define QKV_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

typedef enum {
    QKV_FIELD_T_INT,    /* int64_t; an integral JSON number */
    QKV_FIELD_T_NUM,    /* double */
    QKV_FIELD_T_BOOL,   /* bool */
    QKV_FIELD_T_STR,    /* const char *; with QKV_FIELD_NULLABLE also null (stored as NULL) */
    QKV_FIELD_T_CHOICE, /* const char *, one of the '|'-separated choices */
    QKV_FIELD_T_LIST,   /* const struct cJSON *: an array of objects, each checked against the field's item schema
                         * (an error names the index: "data.tasks[1].train: ..."); default [] (stored as NULL) */
} qkv_field_type;

enum {
    QKV_FIELD_LO_OPEN = 1,  /* the range excludes lo */
    QKV_FIELD_HI_OPEN = 2,  /* the range excludes hi */
    QKV_FIELD_NULLABLE = 4, /* STR: null is allowed (an optional setting) */
    QKV_FIELD_PATH = 8,     /* STR: a file path (said so in messages and docs) */
};

struct qkv_schema;

typedef struct qkv_field {
    const char *key;      /* path inside the section, dots for nested objects */
    qkv_field_type type;
    size_t offset;        /* of the member in the schema's struct */
    double def;           /* default of INT, NUM, BOOL (0 / 1) */
    const char *def_str;  /* default of STR, CHOICE (NULL: JSON null) */
    double lo, hi;        /* allowed range of INT, NUM */
    unsigned flags;
    const char *choices;  /* CHOICE: "a|b|c" */
    const char *doc;      /* one line */
    const struct qkv_schema *item; /* LIST: the schema of each element (its section is ignored) */
} qkv_field;

typedef struct qkv_schema {
    const char *section;     /* prefix of key paths in messages ("model"), "" for the top level */
    const qkv_field *fields;
    int n_fields;
    size_t size;             /* sizeof the typed struct */
    /* Rules between fields, on a filled struct; an error names the keys. NULL: none. */
    qkv_status (*check)(const void *cfg);
} qkv_schema;

#define QKV_FIELD_INT(st, member, key, def, lo, hi, doc) \
    {key, QKV_FIELD_T_INT, offsetof(st, member), def, NULL, lo, hi, 0, NULL, doc, NULL}
#define QKV_FIELD_NUM(st, member, key, def, lo, hi, flags, doc) \
    {key, QKV_FIELD_T_NUM, offsetof(st, member), def, NULL, lo, hi, flags, NULL, doc, NULL}
#define QKV_FIELD_BOOL(st, member, key, def, doc) \
    {key, QKV_FIELD_T_BOOL, offsetof(st, member), def, NULL, 0, 1, 0, NULL, doc, NULL}
#define QKV_FIELD_STR(st, member, key, def, flags, doc) \
    {key, QKV_FIELD_T_STR, offsetof(st, member), 0, def, 0, 0, flags, NULL, doc, NULL}
#define QKV_FIELD_CHOICE(st, member, key, def, choices, doc) \
    {key, QKV_FIELD_T_CHOICE, offsetof(st, member), 0, def, 0, 0, 0, choices, doc, NULL}
/* An array of objects, each element filled by qkv_schema_list_item against `item` (a qkv_schema). */
#define QKV_FIELD_LIST(st, member, key, item, doc) \
    {key, QKV_FIELD_T_LIST, offsetof(st, member), 0, NULL, 0, 0, 0, NULL, doc, item}
#define QKV_SCHEMA(section, st, fields, check) \
    {section, fields, (int)(sizeof(fields) / sizeof((fields)[0])), sizeof(st), check}

/* The defaults into *out (s->size bytes). */
void qkv_schema_defaults(const qkv_schema *s, void *out);

/* Defaults, then the values of `obj` (a JSON object, may be partial) over them, each checked against its field;
 * then s->check. Keys in `skip` (a NULL-ended list, or NULL) are ignored at the top level (a model's "type"). */
qkv_status qkv_schema_fill(const qkv_schema *s, const struct cJSON *obj, const char *const *skip, void *out);

/* The defaults as a JSON object, nested by the keys' dots, fields in table order (caller frees). */
struct cJSON *qkv_schema_json(const qkv_schema *s);

/* Checks one value against the field at `key` (a full path inside the section); QKV_OK when no field has that key.
 * Used when the caller merges JSON itself and wants the same rules. */
qkv_status qkv_schema_check_value(const qkv_schema *s, const char *key, const struct cJSON *v);

/* Element i of a LIST field's array (what the filled struct holds) filled into *out (f->item->size bytes): the
 * item schema's defaults, the element's values, its check; errors name "<section.key>[i].<key>". The number of
 * elements is cJSON_GetArraySize(array) (0 for NULL). fill already checked every element, so this fails only when
 * called on an array fill did not see. */
qkv_status qkv_schema_list_item(const qkv_schema *s, const qkv_field *f, const struct cJSON *array, int i, void *out);

/* The field of a key path, or NULL. */
const qkv_field *qkv_schema_find(const qkv_schema *s, const char *key);

/* Copies the member of key from a filled struct into *out (int64_t, double, bool or const char * by the field's
 * type); false when the schema has no field of that key and type. For code that reads a field by name (a model
 * type's declared tied_key). */
bool qkv_schema_get(const qkv_schema *s, const void *cfg, const char *key, qkv_field_type type, void *out);

/* What a field allows, as text ("an integer in [1, 65536]", "one of relu|gelu"); returns buf. */
const char *qkv_field_allowed(const qkv_field *f, char *buf, size_t size);

/* The reference of every field: key, type, default, allowed values, doc; one line each. */
void qkv_schema_explain(const qkv_schema *s, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
