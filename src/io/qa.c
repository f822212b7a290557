/* SQuAD-format JSONL: one question a line, each answer checked against its context at its character offset. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "qkv/data.h"
#include "qkv/qa.h"

/* Byte offset of character `chars` in s (len bytes), or -1 past the end. */
static int64_t byte_of(const char *s, size_t len, int64_t chars) {
    size_t b = 0;
    for (int64_t c = 0; c < chars; c++) {
        if (b >= len) return -1;
        b++;
        while (b < len && ((unsigned char)s[b] & 0xC0) == 0x80) b++;
    }
    return (int64_t)b;
}

static char *dup_str(const cJSON *j) { return cJSON_IsString(j) ? strdup(j->valuestring) : NULL; }

static qkv_status answer_at(const char *path, int64_t line, qkv_qa_example *e, const cJSON *text, const cJSON *start) {
    int k = e->n_answers;
    if (k == QKV_QA_MAX_ANSWERS) return QKV_OK; /* more golds than kept: the first ones score */
    double s = cJSON_GetNumberValue(start);
    if (!cJSON_IsString(text) || !cJSON_IsNumber(start) || s < 0 || s != floor(s) || s > 1e15)
        return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: answer %d: expected a string \"text\" and an integer "
                             "\"answer_start\" >= 0", path, (long long)line, k + 1);
    size_t clen = strlen(e->context), alen = strlen(text->valuestring);
    int64_t b = byte_of(e->context, clen, (int64_t)s);
    if (b < 0 || (size_t)b + alen > clen || memcmp(e->context + b, text->valuestring, alen)) {
        char seen[64] = "";
        if (b >= 0) snprintf(seen, sizeof seen, "%.*s", (int)(alen < 40 ? alen : 40), e->context + b);
        return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: answer %d '%s' at character %.0f does not match the context "
                             "(%s%s%s)", path, (long long)line, k + 1, text->valuestring, s,
                             b < 0 ? "past its end" : "it reads '", seen, b < 0 ? "" : "'");
    }
    e->answers[k] = strdup(text->valuestring);
    if (!e->answers[k]) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    e->answer_char[k] = (int64_t)s;
    e->answer_byte[k] = b;
    e->n_answers++;
    return QKV_OK;
}

static qkv_status parse(const char *path, int64_t line, const char *text, qkv_qa_example *e) {
    cJSON *j = cJSON_Parse(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: invalid JSON (expected one object a line)", path,
                             (long long)line);
    }
    qkv_status st = QKV_OK;
    e->line = line;
    e->context = dup_str(cJSON_GetObjectItemCaseSensitive(j, "context"));
    e->question = dup_str(cJSON_GetObjectItemCaseSensitive(j, "question"));
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)line);
    e->id = cJSON_IsString(id) ? strdup(id->valuestring) : strdup(num);
    if (!e->context || !e->question)
        st = qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: expected string fields \"context\" and \"question\"", path,
                           (long long)line);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "answers");
    if (!st && cJSON_IsObject(a)) { /* {"text": [...], "answer_start": [...]} (Hugging Face datasets) */
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(a, "text"), *s = cJSON_GetObjectItemCaseSensitive(a, "answer_start");
        if (!cJSON_IsArray(t) || !cJSON_IsArray(s) || cJSON_GetArraySize(t) != cJSON_GetArraySize(s))
            st = qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: \"answers\" needs arrays \"text\" and \"answer_start\" of one "
                               "length", path, (long long)line);
        for (int i = 0; !st && i < cJSON_GetArraySize(t); i++)
            st = answer_at(path, line, e, cJSON_GetArrayItem(t, i), cJSON_GetArrayItem(s, i));
    } else if (!st && cJSON_IsArray(a)) { /* [{"text": ..., "answer_start": ...}] (the SQuAD files) */
        const cJSON *it;
        cJSON_ArrayForEach(it, a) {
            if (st) break;
            st = answer_at(path, line, e, cJSON_GetObjectItemCaseSensitive(it, "text"),
                           cJSON_GetObjectItemCaseSensitive(it, "answer_start"));
        }
    } else if (!st) {
        st = qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: no \"answers\"", path, (long long)line);
    }
    if (!st && !e->n_answers) st = qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: no answer", path, (long long)line);
    cJSON_Delete(j);
    return st;
}

void qkv_qa_free(qkv_qa_example *e, size_t n) {
    for (size_t i = 0; e && i < n; i++) {
        free(e[i].id);
        free(e[i].context);
        free(e[i].question);
        for (int k = 0; k < e[i].n_answers; k++) free(e[i].answers[k]);
    }
    free(e);
}

qkv_status qkv_qa_read(const char *path, qkv_qa_example **out, size_t *n) {
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    qkv_qa_example *ex = NULL;
    size_t count = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    int64_t line_no = 0;
    qkv_status st = QKV_OK;
    while (st == QKV_OK && (len = getline(&line, &lcap, f)) >= 0) {
        line_no++;
        size_t bad;
        if (!qkv_utf8_valid(line, (size_t)len, &bad)) {
            st = qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: invalid UTF-8 at byte %zu", path, (long long)line_no, bad + 1);
            break;
        }
        if (strspn(line, " \t\r\n") == (size_t)len) continue;
        if (count == cap) {
            size_t nc = cap ? cap * 2 : 256;
            qkv_qa_example *p = realloc(ex, nc * sizeof *p);
            if (!p) {
                st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
                break;
            }
            ex = p;
            cap = nc;
        }
        memset(&ex[count], 0, sizeof ex[count]);
        st = parse(path, line_no, line, &ex[count]);
        count++;
    }
    free(line);
    fclose(f);
    if (st == QKV_OK && !count) st = qkv_error_set(QKV_ERR_FORMAT, "%s: no examples", path);
    if (st) {
        qkv_qa_free(ex, count);
        return st;
    }
    *out = ex;
    *n = count;
    return QKV_OK;
}
