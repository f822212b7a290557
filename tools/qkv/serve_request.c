/* Request bodies of qkv serve's POST endpoints: JSON -> serve_request, every field checked, errors naming the
 * field. Pure (no I/O, no model), so tests/fuzz/fuzz_serve_request.c runs it on arbitrary bytes. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/beam.h"
#include "qkv/summarize.h"
#include "serve.h"

static const struct {
    const char *path, *task;
} endpoints[SERVE_N_ENDPOINTS] = {
    [SERVE_CLASSIFY] = {"/v1/classify", "classify"},   [SERVE_GENERATE] = {"/v1/generate", "lm"},
    [SERVE_COMPLETIONS] = {"/v1/completions", "lm"},   [SERVE_TRANSLATE] = {"/v1/translate", "seq2seq"},
    [SERVE_SUMMARIZE] = {"/v1/summarize", "summarize"}, [SERVE_TAG] = {"/v1/tag", "tagging"},
    [SERVE_SIMILAR] = {"/v1/similar", "pairs"},        [SERVE_EMBED] = {"/v1/embed", "pairs"},
};

const char *serve_endpoint_path(serve_endpoint ep) { return endpoints[ep].path; }
const char *serve_endpoint_task(serve_endpoint ep) { return endpoints[ep].task; }

int serve_endpoint_of(const char *path) {
    for (int i = 0; i < SERVE_N_ENDPOINTS; i++)
        if (!strcmp(path, endpoints[i].path)) return i;
    return -1;
}

/* The fields each endpoint accepts, space-separated (completions ignores others: OpenAI clients send more). */
static const char *const accepted[SERVE_N_ENDPOINTS] = {
    [SERVE_CLASSIFY] = " model text texts explain ",
    [SERVE_GENERATE] = " model prompt max_tokens temperature top_k top_p repetition_penalty no_repeat_ngram "
                       "repeat_scope seed stream ",
    [SERVE_COMPLETIONS] = " model prompt max_tokens temperature top_k top_p stop stream seed ",
    [SERVE_TRANSLATE] = " model text texts beam n_best mbr alpha temperature seed max_len utility "
                        "repetition_penalty no_repeat_ngram repeat_scope ",
    [SERVE_SUMMARIZE] = " model text texts search beam alpha temperature top_k top_p n_samples seed max_len utility "
                        "repetition_penalty no_repeat_ngram repeat_scope ",
    [SERVE_TAG] = " model text texts ",
    [SERVE_SIMILAR] = " model a b ",
    [SERVE_EMBED] = " model text texts ",
};

typedef struct {
    const char **field;
    char *msg;
    size_t size;
} errs;

static int bad(errs *e, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(errs *e, const char *field, const char *fmt, ...) {
    *e->field = field;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, e->size, fmt, ap);
    va_end(ap);
    return 400;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* An integer field in [lo, hi] (absent: *out unchanged). */
static int get_int(errs *e, const cJSON *o, const char *key, long lo, long hi, long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d))
        return bad(e, key, "field '%s': expected an integer in [%ld, %ld]", key, lo, hi);
    *out = (long)d;
    return 0;
}

/* A number field in [lo, hi] (lo_open: lo itself excluded). */
static int get_num(errs *e, const cJSON *o, const char *key, double lo, bool lo_open, double hi, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(lo_open ? d > lo : d >= lo) || !(d <= hi))
        return bad(e, key, "field '%s': expected a number in %c%g, %g]", key, lo_open ? '(' : '[', lo, hi);
    *out = d;
    return 0;
}

static int get_bool(errs *e, const cJSON *o, const char *key, bool *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return bad(e, key, "field '%s': expected true or false", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* Appends a copy of a string item to r->texts. */
static int add_text(errs *e, serve_request *r, const cJSON *v, const char *key) {
    if (!cJSON_IsString(v) || !v->valuestring) return bad(e, key, "field '%s': expected a string", key);
    char *t = dup_str(v->valuestring);
    if (!t) return bad(e, "", "out of memory");
    r->texts[r->n_texts++] = t;
    return 0;
}

/* "text": "..." or "texts": ["...", ...] (exactly one of them), or for similar "a" and "b", for generate the
 * optional "prompt" (completions: a string or a list of one). */
static int get_texts(errs *e, const cJSON *o, serve_request *r) {
    r->texts = calloc(SERVE_MAX_TEXTS, sizeof *r->texts);
    if (!r->texts) return bad(e, "", "out of memory");
    if (r->ep == SERVE_SIMILAR) {
        for (int k = 0; k < 2; k++) {
            const char *key = k ? "b" : "a";
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
            if (!v) return bad(e, key, "field '%s' is missing: similar compares texts a and b", key);
            int rc = add_text(e, r, v, key);
            if (rc) return rc;
        }
        return 0;
    }
    if (r->ep == SERVE_GENERATE || r->ep == SERVE_COMPLETIONS) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "prompt");
        if (v && cJSON_IsArray(v) && r->ep == SERVE_COMPLETIONS) {
            if (cJSON_GetArraySize(v) != 1) return bad(e, "prompt", "field 'prompt': one prompt per request");
            v = cJSON_GetArrayItem(v, 0);
        }
        if (!v || cJSON_IsNull(v)) {
            static const cJSON empty = {.type = cJSON_String, .valuestring = ""};
            v = &empty;
        }
        return add_text(e, r, v, "prompt");
    }
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(o, "text"), *many = cJSON_GetObjectItemCaseSensitive(o, "texts");
    if (one && many) return bad(e, "texts", "give field 'text' or 'texts', not both");
    if (one) return add_text(e, r, one, "text");
    if (!many) return bad(e, "text", "field 'text' is missing (or give 'texts', a list)");
    int n = cJSON_IsArray(many) ? cJSON_GetArraySize(many) : -1;
    if (n < 1 || n > SERVE_MAX_TEXTS)
        return bad(e, "texts", "field 'texts': expected a list of 1 to %d strings", SERVE_MAX_TEXTS);
    r->many = true;
    const cJSON *v;
    cJSON_ArrayForEach(v, many) {
        int rc = add_text(e, r, v, "texts");
        if (rc) return rc;
    }
    return 0;
}

static int get_stop(errs *e, const cJSON *o, serve_request *r) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (!v || cJSON_IsNull(v)) return 0;
    r->stop = calloc(SERVE_MAX_STOP, sizeof *r->stop);
    if (!r->stop) return bad(e, "", "out of memory");
    const cJSON *one = v, *item;
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (n > SERVE_MAX_STOP) return bad(e, "stop", "field 'stop': at most %d strings", SERVE_MAX_STOP);
    for (int i = 0; i < n; i++) {
        item = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, i) : one;
        if (!cJSON_IsString(item) || !item->valuestring || !item->valuestring[0])
            return bad(e, "stop", "field 'stop': expected a non-empty string or a list of them");
        if (!(r->stop[r->n_stop] = dup_str(item->valuestring))) return bad(e, "", "out of memory");
        r->n_stop++;
    }
    return 0;
}

static int parse_fields(errs *e, const cJSON *o, serve_request *r) {
    serve_endpoint ep = r->ep;
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        if (ep == SERVE_COMPLETIONS) break;
        char key[80];
        if (!it->string || strlen(it->string) > sizeof key - 3 || strchr(it->string, ' '))
            return bad(e, "", "a field name is not one this endpoint accepts");
        snprintf(key, sizeof key, " %s ", it->string);
        if (!strstr(accepted[ep], key))
            return bad(e, "", "unknown field '%.64s' (%s accepts:%s)", it->string, endpoints[ep].path,
                       accepted[ep]);
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (m && !cJSON_IsNull(m)) {
        if (!cJSON_IsString(m) || !m->valuestring[0]) return bad(e, "model", "field 'model': expected a run name");
        if (!(r->model = dup_str(m->valuestring))) return bad(e, "", "out of memory");
    }
    int rc = get_texts(e, o, r);
    if (rc) return rc;
    /* Defaults: those of the CLI command each endpoint stands for (completions: OpenAI's). */
    r->max_tokens = ep == SERVE_COMPLETIONS ? 16 : 200;
    r->temperature = ep == SERVE_COMPLETIONS ? 1 : ep == SERVE_GENERATE ? 0 : 1;
    r->top_p = 1;
    r->repetition_penalty = 1;
    r->beam = ep == SERVE_SUMMARIZE ? 4 : 1;
    r->n_best = 1;
    r->alpha = 0.6;
    r->seed = ep == SERVE_TRANSLATE ? 1 : 0;
    r->mbr = ep == SERVE_SUMMARIZE ? 8 : 0;
    r->utility = ep == SERVE_SUMMARIZE ? QKV_MBR_ROUGE_L : QKV_MBR_BLEU;
    r->search = QKV_SUMM_GREEDY;
    if ((rc = get_bool(e, o, "explain", &r->explain)) || (rc = get_bool(e, o, "stream", &r->stream)) ||
        (rc = get_int(e, o, "max_tokens", 0, SERVE_MAX_TOKENS, &r->max_tokens)) ||
        (rc = get_int(e, o, "top_k", 0, 1 << 24, &r->top_k)) || (rc = get_int(e, o, "seed", 0, 1L << 40, &r->seed)) ||
        (rc = get_int(e, o, "beam", 1, 64, &r->beam)) || (rc = get_int(e, o, "n_best", 1, 64, &r->n_best)) ||
        (rc = get_int(e, o, "mbr", 0, 256, &r->mbr)) || (rc = get_int(e, o, "n_samples", 1, 256, &r->mbr)) ||
        (rc = get_int(e, o, "max_len", 0, SERVE_MAX_TOKENS, &r->max_len)) ||
        (rc = get_int(e, o, "no_repeat_ngram", 0, SERVE_MAX_TOKENS, &r->no_repeat_ngram)) ||
        (rc = get_num(e, o, "top_p", 0, true, 1, &r->top_p)) ||
        (rc = get_num(e, o, "repetition_penalty", 1e-3, false, 100, &r->repetition_penalty)) ||
        (rc = get_num(e, o, "alpha", 0, false, 10, &r->alpha)) || (rc = get_stop(e, o, r)))
        return rc;
    /* Temperature 0 is greedy where the endpoint samples with it; translation and summaries sample only with it
     * above 0. */
    bool zero_ok = ep == SERVE_GENERATE || ep == SERVE_COMPLETIONS;
    if ((rc = get_num(e, o, "temperature", zero_ok ? 0 : 1e-3, false, 100, &r->temperature))) return rc;
    if (r->n_best > r->beam) return bad(e, "n_best", "field 'n_best': %ld is more than beam %ld", r->n_best, r->beam);
    if (ep == SERVE_TRANSLATE && r->mbr && r->beam > 1)
        return bad(e, "mbr", "field 'mbr': MBR decoding and beam search exclude each other");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "utility");
    if (u && !cJSON_IsNull(u)) {
        qkv_mbr_utility mu;
        if (!cJSON_IsString(u) || !qkv_mbr_utility_parse(u->valuestring, &mu))
            return bad(e, "utility", "field 'utility': expected bleu, rougeL, rouge1 or rouge2");
        r->utility = (int)mu;
    }
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "repeat_scope");
    if (sc && !cJSON_IsNull(sc)) {
        qkv_repeat_scope scope = QKV_REPEAT_GENERATED;
        if (!cJSON_IsString(sc) || !qkv_repeat_scope_parse(sc->valuestring, &scope))
            return bad(e, "repeat_scope", "field 'repeat_scope': expected generated or all");
        r->repeat_scope = (int)scope;
    }
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "search");
    if (s && !cJSON_IsNull(s)) {
        static const char *const names[] = {[QKV_SUMM_GREEDY] = "greedy", [QKV_SUMM_SAMPLE] = "sample",
                                            [QKV_SUMM_MBR] = "mbr", [QKV_SUMM_BEAM] = "beam"};
        r->search = -1;
        for (int i = 0; cJSON_IsString(s) && i < 4; i++)
            if (!strcmp(s->valuestring, names[i])) r->search = i;
        if (r->search < 0) return bad(e, "search", "field 'search': expected greedy, sample, beam or mbr");
    }
    return 0;
}

int serve_request_parse(serve_endpoint ep, const char *body, size_t len, serve_request *out, const char **field,
                        char *msg, size_t msg_size) {
    memset(out, 0, sizeof *out);
    out->ep = ep;
    const char *unused;
    errs e = {field ? field : &unused, msg, msg_size};
    *e.field = "";
    if (msg_size) msg[0] = 0;
    if ((unsigned)ep >= SERVE_N_ENDPOINTS) return bad(&e, "", "unknown endpoint");
    cJSON *o = cJSON_ParseWithLength(body, len);
    int rc;
    if (!o) rc = bad(&e, "", "the body is not valid JSON");
    else if (!cJSON_IsObject(o)) rc = bad(&e, "", "the body must be a JSON object");
    else rc = parse_fields(&e, o, out);
    cJSON_Delete(o);
    if (rc) serve_request_free(out);
    return rc;
}

void serve_request_free(serve_request *r) {
    for (int i = 0; r->texts && i < r->n_texts; i++) free(r->texts[i]);
    for (int i = 0; r->stop && i < r->n_stop; i++) free(r->stop[i]);
    free(r->texts);
    free(r->stop);
    free(r->model);
    serve_endpoint ep = r->ep;
    memset(r, 0, sizeof *r);
    r->ep = ep;
}
