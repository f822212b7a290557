/* Multi-task text-to-text runs (data.tasks, docs/t5.md): every task's examples as "<prefix> <source>" -> "<target>"
 * pairs, drawn for training by the mixing rates (include/qkv/mixture.h) and scored per task on dev and test.
 *
 * The tasks' files are rewritten once into the run directory (tasks/{train,dev,test}.tsv, tasks concatenated in
 * config order, plus tasks/index.json with each task's example counts), so the seq2seq pipeline reads, tokenises
 * and evaluates them as it reads any TSV, and an eval of the run later needs nothing but the run directory. Which
 * task an example of a split belongs to follows from the counts (split->task_starts).
 *
 * Draws: batch number p (the checkpointed data position) takes its examples from a generator seeded by (seed,
 * p): each slot picks a task by the rates, then an example of that task uniformly. A batch depends on nothing but
 * the seed and its number, so a resumed run draws what the uninterrupted one would, and the seen-example counts
 * the log shows are replayed on resume. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qkv/fsutil.h"
#include "qkv/mixture.h"
#include "qkv/qa.h"
#include "train_internal.h"

static const char *const SPLIT_NAMES[3] = {"train", "dev", "test"};

/* Text with tabs and line breaks as spaces (the TSV's separators). */
static void put_clean(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) fputc(s[i] == '\t' || s[i] == '\n' || s[i] == '\r' ? ' ' : s[i], f);
}

/* The word of a label: labels "negative,positive" maps "0" to negative, "1" to positive; no labels: as is. */
static qkv_status label_word(const qkv_task_settings *t, const char *path, int64_t line, const char *label,
                             const char **word, size_t *len) {
    if (!t->labels[0]) {
        *word = label;
        *len = strlen(label);
        return QKV_OK;
    }
    char *end = NULL;
    errno = 0;
    long k = strtol(label, &end, 10);
    const char *w = t->labels;
    for (long i = 0; !errno && end != label && !*end && k >= 0 && w; i++) {
        const char *comma = strchr(w, ',');
        if (i == k) {
            *word = w;
            *len = comma ? (size_t)(comma - w) : strlen(w);
            return QKV_OK;
        }
        w = comma ? comma + 1 : NULL;
    }
    return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: label '%s' is not an index into the task's labels '%s'", path,
                         (long long)line, label, t->labels);
}

/* Appends task t's examples of one file to out; *count receives how many. */
static qkv_status write_task(const qkv_task_settings *t, const char *path, FILE *out, int64_t *count) {
    *count = 0;
    char prefix[256];
    if (t->prefix[0]) snprintf(prefix, sizeof prefix, "%s", t->prefix);
    else if (!strcmp(t->format, "qa")) prefix[0] = '\0'; /* "question: ... context: ..." is its own prefix */
    else snprintf(prefix, sizeof prefix, "%s:", t->name);
    if (!strcmp(t->format, "qa")) {
        qkv_qa_example *ex = NULL;
        size_t n = 0;
        qkv_status st = qkv_qa_read(path, &ex, &n);
        for (size_t i = 0; st == QKV_OK && i < n; i++) {
            if (ex[i].n_answers < 1 || !ex[i].answers[0][0]) continue; /* nothing to generate */
            if (prefix[0]) fprintf(out, "%s ", prefix);
            fputs("question: ", out);
            put_clean(out, ex[i].question, strlen(ex[i].question));
            fputs(" context: ", out);
            put_clean(out, ex[i].context, strlen(ex[i].context));
            fputc('\t', out);
            put_clean(out, ex[i].answers[0], strlen(ex[i].answers[0]));
            fputc('\n', out);
            (*count)++;
        }
        qkv_qa_free(ex, n);
        return st;
    }
    bool pair = !strcmp(t->format, "pair_label"), label = pair || !strcmp(t->format, "label");
    qkv_data_opts o = {.format = QKV_DATA_TSV, .n_fields = pair ? 3 : 2};
    qkv_dataset *d = qkv_data_read_all(path, &o);
    if (!d) return qkv_last_status();
    qkv_status st = QKV_OK;
    for (size_t i = 0; st == QKV_OK && i < d->n_rows; i++) {
        const qkv_row *row = &d->rows[i];
        const char *tgt = row->fields[1];
        size_t tlen = row->lens[1];
        if (label) st = label_word(t, path, row->line, row->fields[0], &tgt, &tlen);
        if (st) break;
        const char *src = label ? row->fields[1] : row->fields[0];
        size_t slen = label ? row->lens[1] : row->lens[0];
        if (!slen || !tlen) continue; /* an empty side is no example */
        fprintf(out, "%s ", prefix);
        if (pair) fputs("sentence1: ", out);
        put_clean(out, src, slen);
        if (pair) {
            fputs(" sentence2: ", out);
            put_clean(out, row->fields[2], row->lens[2]);
        }
        fputc('\t', out);
        put_clean(out, tgt, tlen);
        fputc('\n', out);
        (*count)++;
    }
    qkv_dataset_free(d);
    return st;
}

static qkv_status write_split(multitask *mt, const qkv_run_settings *rs, int which) {
    FILE *f = fopen(mt->paths[which], "wb");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot write: %s", mt->paths[which], strerror(errno));
    qkv_status st = QKV_OK;
    for (int m = 0; st == QKV_OK && m < mt->n; m++) {
        qkv_task_settings t;
        st = qkv_config_task(rs, m, &t);
        const char *path = which == 0 ? t.train : which == 1 ? t.dev : t.test;
        mt->counts[which][m] = 0;
        if (st == QKV_OK && path[0]) st = write_task(&t, path, f, &mt->counts[which][m]);
        if (st == QKV_OK && which == 0 && mt->counts[0][m] == 0)
            st = qkv_error_set(QKV_ERR_FORMAT, "%s: task '%s' has no training examples", t.train, t.name);
    }
    if (fclose(f) != 0 && st == QKV_OK) st = qkv_error_set(QKV_ERR_IO, "%s: write error", mt->paths[which]);
    return st;
}

static qkv_status write_index(const multitask *mt, const char *path) {
    cJSON *j = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(j, "tasks");
    for (int m = 0; arr && m < mt->n; m++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", mt->names[m]);
        cJSON_AddStringToObject(o, "metric", mt->metrics[m]);
        for (int s = 0; s < 3; s++) cJSON_AddNumberToObject(o, SPLIT_NAMES[s], (double)mt->counts[s][m]);
        cJSON_AddItemToArray(arr, o);
    }
    char *text = arr ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!text) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    FILE *f = fopen(path, "wb");
    qkv_status st = f ? QKV_OK : qkv_error_set(QKV_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    if (f && (fputs(text, f) < 0 || fclose(f) != 0)) st = qkv_error_set(QKV_ERR_IO, "%s: write error", path);
    cJSON_free(text);
    return st;
}

static qkv_status read_index(multitask *mt, const char *path) {
    cJSON *j = qkv_config_read(path);
    if (!j) return qkv_error_set(QKV_ERR_IO, "%s: the run's task index (was the run trained?): %s", path,
                                 qkv_last_error());
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "tasks");
    qkv_status st = cJSON_GetArraySize(arr) == mt->n ? QKV_OK
                    : qkv_error_set(QKV_ERR_FORMAT, "%s: %d tasks, the config lists %d", path,
                                    cJSON_GetArraySize(arr), mt->n);
    for (int m = 0; st == QKV_OK && m < mt->n; m++) {
        const cJSON *o = cJSON_GetArrayItem(arr, m), *name = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (!cJSON_IsString(name) || strcmp(name->valuestring, mt->names[m]))
            st = qkv_error_set(QKV_ERR_FORMAT, "%s: task %d is not '%s'", path, m, mt->names[m]);
        for (int s = 0; st == QKV_OK && s < 3; s++) {
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, SPLIT_NAMES[s]);
            if (!cJSON_IsNumber(c) || c->valuedouble < 0)
                st = qkv_error_set(QKV_ERR_FORMAT, "%s: task '%s': no %s count", path, mt->names[m], SPLIT_NAMES[s]);
            else mt->counts[s][m] = (int64_t)c->valuedouble;
        }
    }
    cJSON_Delete(j);
    return st;
}

void qkv__mt_free(multitask *mt) {
    for (int m = 0; m < mt->n; m++) {
        free(mt->names[m]);
        free(mt->metrics[m]);
    }
    free(mt->names);
    free(mt->metrics);
    for (int s = 0; s < 3; s++) {
        free(mt->counts[s]);
        free(mt->starts[s]);
        free(mt->paths[s]);
    }
    free(mt->rates);
    free(mt->seen);
    free(mt->batch);
    cJSON_Delete(mt->cfg);
    memset(mt, 0, sizeof *mt);
}

/* The seq2seq view of the config: data.tasks gone, data.train/dev/test the rewritten files. */
static qkv_status derived_config(multitask *mt, const cJSON *cfg) {
    mt->cfg = cJSON_Duplicate(cfg, true);
    cJSON *data = mt->cfg ? cJSON_GetObjectItemCaseSensitive(mt->cfg, "data") : NULL;
    bool ok = data != NULL;
    if (ok) ok = cJSON_ReplaceItemInObjectCaseSensitive(data, "tasks", cJSON_CreateArray());
    for (int s = 0; ok && s < 3; s++)
        ok = cJSON_ReplaceItemInObjectCaseSensitive(data, SPLIT_NAMES[s], cJSON_CreateString(mt->paths[s]));
    return ok ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
}

qkv_status qkv__mt_open(qkv_run *r, bool write) {
    multitask *mt = &r->mt;
    int n = qkv_config_task_count(&r->set);
    if (n == 0) return QKV_OK;
    qkv_status st = QKV_OK;
    mt->names = calloc((size_t)n, sizeof *mt->names);
    mt->metrics = calloc((size_t)n, sizeof *mt->metrics);
    mt->rates = calloc((size_t)n, sizeof *mt->rates);
    mt->seen = calloc((size_t)n, sizeof *mt->seen);
    mt->batch = calloc((size_t)r->set.train.batch_size, sizeof *mt->batch);
    bool ok = mt->names && mt->metrics && mt->rates && mt->seen && mt->batch;
    for (int s = 0; ok && s < 3; s++) {
        mt->counts[s] = calloc((size_t)n, sizeof *mt->counts[s]);
        mt->starts[s] = calloc((size_t)n + 1, sizeof *mt->starts[s]);
        ok = mt->counts[s] && mt->starts[s];
    }
    if (!ok) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    mt->n = n;
    bool has[3] = {true, false, false};
    for (int m = 0; st == QKV_OK && m < n; m++) {
        qkv_task_settings t;
        st = qkv_config_task(&r->set, m, &t);
        if (st) break;
        const char *metric = t.metric;
        if (!strcmp(metric, "auto"))
            metric = !strcmp(t.format, "tsv") ? "bleu" : !strcmp(t.format, "qa") ? "squad" : "accuracy";
        mt->names[m] = strdup(t.name);
        mt->metrics[m] = strdup(metric);
        if (!mt->names[m] || !mt->metrics[m]) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        has[1] |= t.dev[0] != 0;
        has[2] |= t.test[0] != 0;
    }
    char *dir = st == QKV_OK ? qkv_fs_join(r->dir, "tasks") : NULL, *index = dir ? qkv_fs_join(dir, "index.json") : NULL;
    if (st == QKV_OK && !index) st = qkv_last_status();
    for (int s = 0; st == QKV_OK && s < 3; s++) {
        char name[32];
        snprintf(name, sizeof name, "%s.tsv", SPLIT_NAMES[s]);
        if (!(mt->paths[s] = qkv_fs_join(dir, name))) st = qkv_last_status();
    }
    if (st == QKV_OK && write) st = qkv_fs_mkdirs(dir);
    for (int s = 0; st == QKV_OK && write && s < 3; s++)
        if (has[s]) st = write_split(mt, &r->set, s);
    if (st == QKV_OK && write) st = write_index(mt, index);
    if (st != QKV_OK && write && dir) { /* a task file that fails leaves no half-written rewrite behind */
        for (int s = 0; s < 3; s++)
            if (mt->paths[s]) remove(mt->paths[s]);
        if (index) remove(index);
        rmdir(dir);
    }
    if (st == QKV_OK && !write) st = read_index(mt, index);
    free(dir);
    free(index);
    for (int s = 0; st == QKV_OK && s < 3; s++) {
        for (int m = 0; m < n; m++) mt->starts[s][m + 1] = mt->starts[s][m] + mt->counts[s][m];
        if (!has[s] || mt->starts[s][n] == 0) { /* no file of this split: the run has none */
            free(mt->paths[s]);
            mt->paths[s] = strdup("");
            if (!mt->paths[s]) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        }
    }
    if (st == QKV_OK) {
        qkv_mix_opts o = {.cap = r->set.data.mixing_cap, .temperature = r->set.data.mixing_temperature};
        st = qkv_mix_parse(r->set.data.mixing, &o.kind);
        if (st == QKV_OK) st = qkv_mix_rates(mt->counts[0], n, &o, mt->rates);
    }
    if (st == QKV_OK) st = derived_config(mt, r->cfg);
    if (st == QKV_OK) { /* the engine reads the rewritten files from here on */
        r->set.data.train = mt->paths[0];
        r->set.data.dev = mt->paths[1];
        r->set.data.test = mt->paths[2];
    }
    return st;
}

const cJSON *qkv__mt_task_config(const qkv_run *r) { return r->mt.n ? r->mt.cfg : r->cfg; }

qkv_status qkv__mt_check_split(const qkv_run *r, split *s, const char *path) {
    if (!r->mt.n) return QKV_OK;
    for (int w = 0; w < 3; w++)
        if (!strcmp(path, r->mt.paths[w])) {
            if (s->n != r->mt.starts[w][r->mt.n])
                return qkv_error_set(QKV_ERR_FORMAT, "%s: %lld examples, the task index says %lld", path,
                                     (long long)s->n, (long long)r->mt.starts[w][r->mt.n]);
            s->task_starts = r->mt.starts[w];
        }
    return QKV_OK;
}

/* Batch number pos: task by the rates, then an example of it, slot by slot. */
static void draw(const qkv_run *r, uint64_t pos, int64_t *idx, int64_t bs, int64_t *seen) {
    const multitask *mt = &r->mt;
    qkv_rng rng;
    uint32_t key[4];
    qkv_philox4x32(r->data_seed ^ 0x6d69787475726573ULL, pos, key); /* one stream a batch */
    qkv_rng_init(&rng, ((uint64_t)key[0] << 32) | key[1]);
    for (int64_t b = 0; b < bs; b++) {
        int m = qkv_mix_pick(mt->rates, mt->n, &rng);
        int64_t c = mt->counts[0][m];
        idx[b] = mt->starts[0][m] + (int64_t)qkv_rng_below(&rng, (uint32_t)(c < UINT32_MAX ? c : UINT32_MAX));
        if (seen) seen[m]++;
    }
}

qkv_status qkv__mt_next_batch(qkv_run *r, const int64_t **idx, int64_t *count) {
    multitask *mt = &r->mt;
    int64_t bs = r->set.train.batch_size;
    if (!mt->replayed) { /* a resumed run's counts: the draws of the batches before this one */
        memset(mt->seen, 0, sizeof *mt->seen * (size_t)mt->n);
        for (uint64_t p = 0; p < r->state.data_pos; p++) draw(r, p, mt->batch, bs, mt->seen);
        mt->replayed = true;
    }
    draw(r, r->state.data_pos, mt->batch, bs, mt->seen);
    *idx = mt->batch;
    *count = bs;
    return QKV_OK;
}

qkv_status qkv__mt_log(const qkv_run *r, cJSON *rec) {
    const multitask *mt = &r->mt;
    int64_t total = 0;
    for (int m = 0; m < mt->n; m++) total += mt->seen[m];
    cJSON *o = cJSON_AddObjectToObject(rec, "task_share");
    for (int m = 0; o && m < mt->n; m++)
        if (!cJSON_AddNumberToObject(o, mt->names[m], total ? (double)mt->seen[m] / (double)total : 0)) o = NULL;
    return o ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
}
