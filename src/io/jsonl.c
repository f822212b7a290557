/* JSONL records: each non-blank line is parsed with cJSON and must be exactly one JSON object. */
#include <string.h>

#include <cjson/cJSON.h>

#include "io/data_internal.h"

static const char *json_kind(const cJSON *j) {
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    return "a non-object value";
}

qkv_status qkv__jsonl_record(qkv_reader *r) {
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(r->line, r->line_len, &end, false);
    if (!j) {
        size_t col = end && end >= r->line ? (size_t)(end - r->line) + 1 : 1;
        return qkv__reader_error(r, QKV_ERR_FORMAT, r->line_no, "invalid JSON at column %zu", col);
    }
    size_t pos = (size_t)(end - r->line);
    while (pos < r->line_len && (r->line[pos] == ' ' || r->line[pos] == '\t')) pos++;
    if (pos < r->line_len) {
        cJSON_Delete(j);
        return qkv__reader_error(r, QKV_ERR_FORMAT, r->line_no, "unexpected text after the JSON value at column %zu",
                                 pos + 1);
    }
    if (!cJSON_IsObject(j)) {
        const char *kind = json_kind(j);
        cJSON_Delete(j);
        return qkv__reader_error(r, QKV_ERR_FORMAT, r->line_no, "expected a JSON object, found %s", kind);
    }
    r->json = j;
    qkv_status st = qkv__rec_append(r, r->line, r->line_len);
    return st ? st : qkv__rec_end_field(r);
}
