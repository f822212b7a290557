/* The config-schema engine (include/qkv/schema.h) on a table of its own: defaults, unknown keys, wrong types,
 * ranges, choices, nested keys, cross-field rules, the JSON and the reference text; then the tables of the
 * registered model types and of the run config. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/config.h"
#include "qkv/model.h"
#include "qkv/schema.h"
#include "test.h"

typedef struct opts {
    int64_t width;
    double rate;
    bool on;
    const char *name, *path, *kind;
    int64_t inner;
} opts;

static qkv_status check_opts(const void *p) {
    const opts *o = p;
    if (o->width % 2) return qkv_error_set(QKV_ERR_INVALID, "t.width %lld must be even", (long long)o->width);
    return QKV_OK;
}

static const qkv_field FIELDS[] = {
    QKV_FIELD_INT(opts, width, "width", 8, 2, 64, "a width"),
    QKV_FIELD_NUM(opts, rate, "rate", 0.5, 0, 1, QKV_FIELD_LO_OPEN | QKV_FIELD_HI_OPEN, "a rate"),
    QKV_FIELD_BOOL(opts, on, "on", true, "a switch"),
    QKV_FIELD_STR(opts, name, "name", "x", 0, "a name"),
    QKV_FIELD_STR(opts, path, "deep.path", NULL, QKV_FIELD_NULLABLE | QKV_FIELD_PATH, "a file"),
    QKV_FIELD_CHOICE(opts, kind, "deep.kind", "b", "a|b|c", "a kind"),
    QKV_FIELD_INT(opts, inner, "deep.er.inner", 3, 0, 1e15, "unbounded above"),
};
static const qkv_schema SCHEMA = QKV_SCHEMA("t", opts, FIELDS, check_opts);

/* Fills from JSON text; the tree is kept in *keep (strings point into it). */
static qkv_status fill(const char *json, opts *o, cJSON **keep) {
    cJSON *j = cJSON_Parse(json);
    CHECKF(j != NULL, "bad test JSON %s", json);
    qkv_status st = qkv_schema_fill(&SCHEMA, j, NULL, o);
    if (keep) *keep = j;
    else cJSON_Delete(j);
    return st;
}

static void expect(const char *json, const char *message) {
    opts o;
    qkv_status st = fill(json, &o, NULL);
    CHECKF(st != QKV_OK && !strcmp(qkv_last_error(), message), "%s: got '%s', wanted '%s'", json,
           st ? qkv_last_error() : "accepted", message);
}

TEST(defaults) {
    opts o;
    memset(&o, 0x55, sizeof o);
    qkv_schema_defaults(&SCHEMA, &o);
    CHECK(o.width == 8 && o.rate == 0.5 && o.on && !strcmp(o.name, "x") && o.path == NULL && !strcmp(o.kind, "b") &&
          o.inner == 3);
    CHECK_OK(fill("{}", &o, NULL));
    CHECK(o.width == 8 && !strcmp(o.kind, "b"));
    CHECK_OK(qkv_schema_fill(&SCHEMA, NULL, NULL, &o));
    CHECK(o.inner == 3);
}

TEST(values_fill_the_struct) {
    opts o;
    cJSON *keep = NULL;
    CHECK_OK(fill("{\"width\": 64, \"rate\": 0.25, \"on\": false, \"name\": \"y\", \"deep\": {\"path\": \"f.txt\", "
                  "\"kind\": \"c\", \"er\": {\"inner\": 1e12}}}",
                  &o, &keep));
    CHECK(o.width == 64 && o.rate == 0.25 && !o.on && !strcmp(o.name, "y") && !strcmp(o.path, "f.txt") &&
          !strcmp(o.kind, "c") && o.inner == 1000000000000LL);
    cJSON_Delete(keep);
    CHECK_OK(fill("{\"deep\": {\"path\": null}}", &o, NULL));
    CHECK(o.path == NULL);
    /* skip: keys the caller owns */
    cJSON *j = cJSON_Parse("{\"type\": \"anything\", \"width\": 4}");
    static const char *const skip[] = {"type", NULL};
    CHECK_OK(qkv_schema_fill(&SCHEMA, j, skip, &o));
    CHECK(o.width == 4);
    /* reading a field by name */
    bool on = false;
    int64_t w = 0;
    CHECK(qkv_schema_get(&SCHEMA, &o, "on", QKV_FIELD_T_BOOL, &on) && on);
    CHECK(qkv_schema_get(&SCHEMA, &o, "width", QKV_FIELD_T_INT, &w) && w == 4);
    CHECK(!qkv_schema_get(&SCHEMA, &o, "width", QKV_FIELD_T_BOOL, &on));
    CHECK(!qkv_schema_get(&SCHEMA, &o, "nosuch", QKV_FIELD_T_INT, &w));
    CHECK(qkv_schema_fill(&SCHEMA, j, NULL, &o) != QKV_OK && strstr(qkv_last_error(), "t.type: unknown key"));
    cJSON_Delete(j);
}

TEST(errors_name_key_value_and_allowed) {
    expect("{\"wdth\": 3}", "t.wdth: unknown key (known: width, rate, on, name, deep)");
    expect("{\"deep\": {\"kynd\": 3}}", "t.deep.kynd: unknown key (known: path, kind, er)");
    expect("{\"deep\": 3}", "t.deep: expected an object, got a number");
    expect("{\"width\": \"8\"}", "t.width: expected an integer in [2, 64], got a string");
    expect("{\"width\": 65}", "t.width: expected an integer in [2, 64], got 65");
    expect("{\"width\": 1}", "t.width: expected an integer in [2, 64], got 1");
    expect("{\"width\": 4.5}", "t.width: expected an integer in [2, 64], got 4.5");
    expect("{\"rate\": 0}", "t.rate: expected a number in (0, 1), got 0");
    expect("{\"rate\": 1}", "t.rate: expected a number in (0, 1), got 1");
    expect("{\"on\": 1}", "t.on: expected true or false, got a number");
    expect("{\"name\": null}", "t.name: expected a string, got null");
    expect("{\"deep\": {\"path\": 3}}", "t.deep.path: expected a file path or null, got a number");
    expect("{\"deep\": {\"kind\": \"d\"}}", "t.deep.kind: expected one of a|b|c, got 'd'");
    expect("{\"deep\": {\"kind\": true}}", "t.deep.kind: expected one of a|b|c, got a boolean");
    expect("{\"deep\": {\"er\": {\"inner\": -1}}}", "t.deep.er.inner: expected an integer >= 0, got -1");
    /* the cross-field rule runs after the fill */
    expect("{\"width\": 7}", "t.width 7 must be even");
    cJSON *v = cJSON_CreateNumber(99);
    CHECK(qkv_schema_check_value(&SCHEMA, "width", v) == QKV_ERR_RANGE);
    CHECK(qkv_schema_check_value(&SCHEMA, "nosuch", v) == QKV_OK);
    cJSON_Delete(v);
}

TEST(json_and_explain) {
    cJSON *j = qkv_schema_json(&SCHEMA);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    CHECKF(text && !strcmp(text, "{\"width\":8,\"rate\":0.5,\"on\":true,\"name\":\"x\",\"deep\":{\"path\":null,"
                                 "\"kind\":\"b\",\"er\":{\"inner\":3}}}"),
           "defaults JSON %s", text ? text : "(null)");
    /* The defaults JSON fills to the defaults. */
    opts a, b;
    CHECK_OK(qkv_schema_fill(&SCHEMA, j, NULL, &a));
    qkv_schema_defaults(&SCHEMA, &b);
    CHECK(a.width == b.width && a.rate == b.rate && a.on == b.on && !strcmp(a.name, b.name) && a.path == b.path &&
          !strcmp(a.kind, b.kind) && a.inner == b.inner);
    free(text);
    cJSON_Delete(j);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_NN(f);
    if (!f) return;
    qkv_schema_explain(&SCHEMA, f);
    fclose(f);
    CHECKF(strstr(buf, "t.width") && strstr(buf, "an integer in [2, 64]. a width") &&
           strstr(buf, "t.deep.kind") && strstr(buf, "default \"b\"") && strstr(buf, "one of a|b|c. a kind") &&
           strstr(buf, "t.deep.er.inner") && strstr(buf, "an integer >= 0. unbounded above") &&
           strstr(buf, "default null") && strstr(buf, "a file path or null"),
           "explain:\n%s", buf);
    int lines = 0;
    for (char *p = buf; *p; p++) lines += *p == '\n';
    CHECK(lines == SCHEMA.n_fields);
    free(buf);
}

/* Every registered model type has a table; its defaults JSON, its create() and its check agree. */
TEST(model_types_declare_their_fields) {
    CHECK(qkv_model_type_count() >= 6);
    for (int i = 0; i < qkv_model_type_count(); i++) {
        const qkv_model_type *t = qkv_model_type_at(i);
        CHECKF(t->config != NULL, "%s has no config schema", t->name);
        if (!t->config) continue;
        CHECK(!strcmp(t->config->section, "model"));
        /* the text default_config is rendered from the table */
        cJSON *j = qkv_schema_json(t->config), *d = cJSON_Parse(t->default_config);
        CHECKF(j && d && cJSON_Compare(j, d, true), "%s: default_config differs from its table", t->name);
        /* every field of the table is in the full default config under "model" */
        cJSON *full = qkv_config_defaults(t);
        for (int k = 0; full && k < t->config->n_fields; k++) {
            char path[128];
            snprintf(path, sizeof path, "model.%s", t->config->fields[k].key);
            CHECKF(qkv_config_get(full, path) != NULL, "%s: %s missing from qkv_config_defaults", t->name, path);
            CHECKF(t->config->fields[k].doc && t->config->fields[k].doc[0], "%s: %s has no doc", t->name, path);
        }
        /* an unknown model key is refused by resolve, naming it */
        cJSON *u = qkv_config_parse("t", "{\"data\": {\"train\": \"x\"}}");
        cJSON *m = cJSON_AddObjectToObject(u, "model");
        cJSON_AddStringToObject(m, "type", t->name);
        cJSON_AddNumberToObject(m, "no_such_key", 1);
        cJSON *r = qkv_config_resolve(u, NULL);
        CHECKF(r == NULL && strstr(qkv_last_error(), "model.no_such_key: unknown key"), "%s: %s", t->name,
               r ? "accepted" : qkv_last_error());
        cJSON_Delete(r);
        cJSON_Delete(u);
        cJSON_Delete(full);
        cJSON_Delete(j);
        cJSON_Delete(d);
    }
}

/* The run config: resolve checks the model's fields with the same rule create() applies (issue 22's cases). */
TEST(resolve_checks_model_fields) {
    static const char *const bad[][2] = {
        {"\"d_model\": 1e9", "model.d_model: expected an integer in [1, 65536], got 1000000000"},
        {"\"n_heads\": 0", "model.n_heads: expected an integer in [1, 4096], got 0"},
        {"\"dropout\": 2", "model.dropout: expected a number in [0, 1), got 2"},
        {"\"activation\": \"swishy\"", "model.activation: expected one of relu|gelu|gelu_tanh|gelu_new, got 'swishy'"},
        {"\"d_model\": 10", "model.d_model 10 must be a multiple of model.n_heads 4"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"model\": {\"type\": \"transformer_classifier\", %s}, \"data\": {\"train\": \"x\"}}",
                 bad[i][0]);
        cJSON *u = qkv_config_parse("t", text);
        cJSON *r = u ? qkv_config_resolve(u, NULL) : NULL;
        CHECKF(r == NULL && !strcmp(qkv_last_error(), bad[i][1]), "%s: got '%s'", bad[i][0],
               r ? "accepted" : qkv_last_error());
        /* create() says the same */
        const qkv_model_type *t = qkv_model_type_find("transformer_classifier");
        qkv_task_info info = {.vocab_size = 10, .n_classes = 2, .max_len = 8};
        qkv_params *p = qkv_params_new();
        qkv_rng rng;
        qkv_rng_init(&rng, 1);
        qkv_model *m = t->create(cJSON_GetObjectItem(u, "model"), &info, p, &rng);
        CHECKF(m == NULL && !strcmp(qkv_last_error(), bad[i][1]), "create %s: got '%s'", bad[i][0],
               m ? "accepted" : qkv_last_error());
        if (m) t->free(m);
        qkv_params_free(p);
        cJSON_Delete(r);
        cJSON_Delete(u);
    }
}

/* The typed run settings: defaults from the table, values from the config; one learning rate default. */
TEST(run_settings) {
    qkv_run_settings s;
    CHECK_OK(qkv_config_settings(NULL, &s));
    CHECK(s.train.optimizer.lr == 0.001 && s.train.steps == 1000 && s.eval.every == 100 && s.seed == 1 &&
          !strcmp(s.train.optimizer.name, "adam") && s.embeddings.pretrained == NULL && s.data.shuffle);
    cJSON *u = qkv_config_parse("t", "{\"model\": {\"type\": \"embmean\"}, \"data\": {\"train\": \"t.tsv\"},"
                                     " \"train\": {\"optimizer\": {\"name\": \"sgd\", \"lr\": 0.5}}, \"seed\": 7}");
    cJSON *c = u ? qkv_config_resolve(u, NULL) : NULL;
    CHECK_NN(c);
    CHECK_OK(qkv_config_settings(c, &s));
    CHECK(s.train.optimizer.lr == 0.5 && !strcmp(s.train.optimizer.name, "sgd") && s.seed == 7 &&
          !strcmp(s.data.train, "t.tsv") && s.train.batch_size == 32);
    /* the table and the default config agree key for key */
    const qkv_schema *rs = qkv_config_schema();
    cJSON *d = qkv_config_defaults(NULL);
    for (int k = 0; d && k < rs->n_fields; k++)
        CHECKF(qkv_config_get(d, rs->fields[k].key) != NULL, "%s missing from the defaults", rs->fields[k].key);
    cJSON_Delete(d);
    cJSON_Delete(c);
    cJSON_Delete(u);
}

/* Arrays of objects: every element checked against the item schema, errors naming the index. */
typedef struct item_opts {
    const char *name;
    int64_t size;
} item_opts;
static qkv_status check_item(const void *p) {
    const item_opts *o = p;
    return o->name[0] ? QKV_OK : qkv_error_set(QKV_ERR_INVALID, "name: required");
}
static const qkv_field ITEM_FIELDS[] = {
    QKV_FIELD_STR(item_opts, name, "name", "", 0, "a name"),
    QKV_FIELD_INT(item_opts, size, "size", 2, 1, 10, "a size"),
};
static const qkv_schema ITEM = QKV_SCHEMA("", item_opts, ITEM_FIELDS, check_item);
typedef struct list_opts {
    const cJSON *items;
    int64_t n;
} list_opts;
static const qkv_field LIST_FIELDS[] = {
    QKV_FIELD_LIST(list_opts, items, "deep.items", &ITEM, "the items"),
    QKV_FIELD_INT(list_opts, n, "n", 1, 0, 5, "a count"),
};
static const qkv_schema LIST = QKV_SCHEMA("t", list_opts, LIST_FIELDS, NULL);

static void expect_list(const char *json, const char *message) {
    cJSON *j = cJSON_Parse(json);
    list_opts o;
    qkv_status st = qkv_schema_fill(&LIST, j, NULL, &o);
    CHECKF(st != QKV_OK && !strcmp(qkv_last_error(), message), "%s: got '%s', wanted '%s'", json,
           st ? qkv_last_error() : "accepted", message);
    cJSON_Delete(j);
}

TEST(lists_of_objects) {
    list_opts o;
    CHECK_OK(qkv_schema_fill(&LIST, NULL, NULL, &o));
    CHECK(o.items == NULL && cJSON_GetArraySize(o.items) == 0);
    cJSON *j = cJSON_Parse("{\"deep\": {\"items\": [{\"name\": \"a\"}, {\"name\": \"b\", \"size\": 7}]}}");
    CHECK_OK(qkv_schema_fill(&LIST, j, NULL, &o));
    CHECK(cJSON_GetArraySize(o.items) == 2);
    const qkv_field *f = qkv_schema_find(&LIST, "deep.items");
    CHECK(f && f->type == QKV_FIELD_T_LIST);
    item_opts it;
    CHECK_OK(qkv_schema_list_item(&LIST, f, o.items, 0, &it));
    CHECK(!strcmp(it.name, "a") && it.size == 2);
    CHECK_OK(qkv_schema_list_item(&LIST, f, o.items, 1, &it));
    CHECK(!strcmp(it.name, "b") && it.size == 7);
    CHECK(qkv_schema_list_item(&LIST, f, o.items, 2, &it) == QKV_ERR_RANGE);
    CHECK(strstr(qkv_last_error(), "t.deep.items[2]") != NULL);
    cJSON_Delete(j);
    expect_list("{\"deep\": {\"items\": {}}}", "t.deep.items: expected an array of objects, got an object");
    expect_list("{\"deep\": {\"items\": [{\"name\": \"a\"}, 3]}}", "t.deep.items[1]: expected an object, got a number");
    expect_list("{\"deep\": {\"items\": [{\"name\": \"a\"}, {\"name\": \"b\", \"size\": 11}]}}",
                "t.deep.items[1].size: expected an integer in [1, 10], got 11");
    expect_list("{\"deep\": {\"items\": [{\"nam\": \"a\"}]}}", "t.deep.items[0].nam: unknown key (known: name, size)");
    expect_list("{\"deep\": {\"items\": [{\"size\": 3}]}}", "t.deep.items[0]: name: required");
    /* the defaults and the reference text */
    cJSON *d = qkv_schema_json(&LIST);
    char *text = cJSON_PrintUnformatted(d);
    CHECKF(text && !strcmp(text, "{\"deep\":{\"items\":[]},\"n\":1}"), "%s", text ? text : "(null)");
    cJSON_free(text);
    cJSON_Delete(d);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    CHECK_NN(mem);
    if (!mem) return;
    qkv_schema_explain(&LIST, mem);
    fclose(mem);
    CHECKF(strstr(buf, "t.deep.items ") && strstr(buf, "t.deep.items[].size"), "%s", buf);
    free(buf);
}

static void expect_resolve(const char *json, const char *message) {
    cJSON *u = cJSON_Parse(json);
    cJSON *c = qkv_config_resolve(u, NULL);
    CHECKF(!c && !strcmp(qkv_last_error(), message), "%s: got '%s', wanted '%s'", json, c ? "accepted" : qkv_last_error(),
           message);
    cJSON_Delete(c);
    cJSON_Delete(u);
}

/* data.tasks in a run config: read element by element, errors naming the index. */
TEST(run_config_tasks) {
    cJSON *u = cJSON_Parse("{\"model\": {\"type\": \"t5\"}, \"data\": {\"tasks\": [{\"name\": \"tr\", \"train\": "
                           "\"a.tsv\"}, {\"name\": \"se\", \"train\": \"b.tsv\", \"format\": \"label\", \"labels\": "
                           "\"negative,positive\"}], \"mixing\": \"temperature\", \"mixing_temperature\": 2}}");
    cJSON *c = qkv_config_resolve(u, NULL);
    CHECKF(c != NULL, "%s", qkv_last_error());
    qkv_run_settings rs;
    CHECK_OK(qkv_config_settings(c, &rs));
    CHECK(qkv_config_task_count(&rs) == 2 && !strcmp(rs.data.mixing, "temperature") && rs.data.mixing_temperature == 2);
    qkv_task_settings t;
    CHECK_OK(qkv_config_task(&rs, 1, &t));
    CHECK(!strcmp(t.name, "se") && !strcmp(t.format, "label") && !strcmp(t.labels, "negative,positive") &&
          !strcmp(t.metric, "auto") && !t.prefix[0] && !t.dev[0]);
    cJSON_Delete(c);
    cJSON_Delete(u);
    expect_resolve("{\"model\": {\"type\": \"t5\"}, \"data\": {\"tasks\": [{\"name\": \"a\", \"train\": \"x\", "
                   "\"format\": \"nope\"}]}}",
                   "data.tasks[0].format: expected one of tsv|label|pair_label|qa, got 'nope'");
    expect_resolve("{\"model\": {\"type\": \"t5\"}, \"data\": {\"tasks\": [{\"name\": \"a\", \"train\": \"x\"}, "
                   "{\"name\": \"b\"}]}}",
                   "data.tasks[1]: b: train: required (the task's training file)");
    expect_resolve("{\"model\": {\"type\": \"t5\"}, \"data\": {\"tasks\": [{\"name\": \"a\", \"train\": \"x\"}, "
                   "{\"name\": \"a\", \"train\": \"y\"}]}}",
                   "data.tasks[1].name: 'a' is also task 0's");
    expect_resolve("{\"model\": {\"type\": \"t5\"}, \"data\": {\"train\": \"t\", \"tasks\": [{\"name\": \"a\", "
                   "\"train\": \"x\"}]}}",
                   "data.train/dev/test: leave them empty when data.tasks lists the tasks (each task names its own files)");
    expect_resolve("{\"model\": {\"type\": \"t5\"}, \"data\": {\"tasks\": {}}}",
                   "data.tasks: expected an array, got an object");
}

/* Presets come from the model files (qkv_model_type.presets): each resolves to a whole config of the type that
 * offers it, and no name is taken twice or shadows a model type. */
TEST(presets_belong_to_their_model_types) {
    int listed = 0;
    for (int k = 0; k < qkv_model_type_count(); k++) {
        const qkv_model_type *t = qkv_model_type_at(k);
        for (const qkv_model_preset *p = t->presets; p && p->name; p++, listed++) {
            cJSON *c = qkv_config_preset(p->name);
            CHECKF(c != NULL, "%s: %s", p->name, c ? "" : qkv_last_error());
            const char *type = c ? qkv_config_str(c, "model.type", "") : "";
            CHECKF(!strcmp(type, t->name), "preset %s has model.type '%s', offered by '%s'", p->name, type, t->name);
            cJSON_Delete(c);
            CHECKF(qkv_model_type_find(p->name) == NULL, "preset %s shadows a model type", p->name);
            qkv_error_clear();
        }
    }
    CHECK(listed == qkv_config_preset_count() && listed >= 1);
    for (int i = 0; i < listed; i++)
        for (int j = i + 1; j < listed; j++)
            CHECK(strcmp(qkv_config_preset_name(i, NULL), qkv_config_preset_name(j, NULL)));
    CHECK(qkv_config_preset("no_such_preset") == NULL);
}

int main(void) {
    RUN(run_config_tasks);
    RUN(lists_of_objects);
    RUN(defaults);
    RUN(values_fill_the_struct);
    RUN(errors_name_key_value_and_allowed);
    RUN(json_and_explain);
    RUN(model_types_declare_their_fields);
    RUN(resolve_checks_model_fields);
    RUN(run_settings);
    RUN(presets_belong_to_their_model_types);
    return test_finish();
}
