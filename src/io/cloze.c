/* Cloze questions from plain text in the style of the Children's Book Test (Hill et al. 2016): N consecutive
 * sentences are the context, the next sentence is the question with one word blanked out as XXXXX, and the word is
 * the answer, at its first whole-word occurrence in the context. CBT picks named entities and common nouns with a
 * tagger; without one, the rules below pick the same kinds of words from spelling and neighbours. docs/qa.md states
 * them for users; keep the two in step.
 *
 * Sentences: each line is a paragraph; a sentence ends at a run of . ! ? (then any closing quotes or brackets)
 * followed by a space or the line's end, unless the next word starts with a lowercase letter ('"Oh!" said she') or
 * the '.' ends an abbreviation (Mr, Mrs, Dr, St, ...) or an initial (one capital letter). Sentences run on across
 * lines: a window may span paragraphs. Windows do not overlap: sentences [k(N+1), k(N+1)+N) are the context and
 * sentence k(N+1)+N the question; a window whose question has no candidate is skipped.
 *
 * Words are runs of ASCII letters. Candidates in the question sentence, each of which must also occur in the
 * context with the same spelling:
 *   named word:  Capitalised (one capital, then lowercase), not the sentence's first word, not a title or "I";
 *   common noun: lowercase, 3+ letters, not a function word, right after a determiner (the, a, his, ...) and right
 *                before punctuation, the sentence's end or a function word ("the house of", "her sister.").
 * One candidate (distinct words, in order of appearance) is drawn with a Philox stream of the seed; every
 * occurrence of it in the question becomes XXXXX. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "qkv/data.h"
#include "qkv/qa.h"
#include "qkv/rng.h"

static const char *const ABBREV[] = {"Mr", "Mrs", "Ms", "Dr", "St", "Col", "Capt", "Gen", "Lt", "Rev", "Sr", "Jr",
                                     "Prof", "Messrs", "Mme", "Mlle", "vs", "etc", "No", NULL};
static const char *const TITLES[] = {"I", "Mr", "Mrs", "Ms", "Miss", "Sir", "Lady", "Lord", "Dr", "Colonel",
                                     "Captain", "Madam", "Madame", "Mister", "Master", "Mistress", "Dame", "Oh", NULL};
static const char *const DETS[] = {"the", "a", "an", "his", "her", "their", "my", "your", "our", "its", "this",
                                   "that", "these", "those", "every", "each", "no", "some", "any", NULL};
static const char *const FUNC[] = {
    "the", "a", "an", "and", "or", "but", "nor", "of", "to", "in", "on", "at", "for", "with", "by", "from", "into",
    "upon", "about", "than", "as", "so", "if", "was", "were", "is", "are", "be", "been", "had", "has", "have", "would",
    "could", "should", "will", "shall", "might", "must", "may", "which", "who", "whom", "whose", "that", "this", "he",
    "she", "it", "they", "we", "you", "i", "her", "him", "his", "them", "their", "not", "all", "same", "other",
    "own", "very", "more", "most", "such", "only", "first", "last", "whole", "least", "best", "one", "two", "few",
    "many", "much", "every", "each", "some", "any", "no", "what", "when", "where", "while", "there", "here", "then",
    "now", "even", "too", "also", "before", "after", "since", "till", "until", "without", "within", NULL};

static bool in_list(const char *const *list, const char *w, size_t n) {
    for (; *list; list++)
        if (strlen(*list) == n && !strncmp(*list, w, n)) return true;
    return false;
}

static bool alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool upper(char c) { return c >= 'A' && c <= 'Z'; }
static bool lower(char c) { return c >= 'a' && c <= 'z'; }

typedef struct {
    char *text;
    int64_t line;
} sentence;

typedef struct {
    sentence *s;
    size_t n, cap;
} sentences;

static qkv_status push(sentences *ss, const char *s, size_t len, int64_t line) {
    while (len && (s[0] == ' ' || s[0] == '\t')) s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r')) len--;
    if (!len) return QKV_OK;
    if (ss->n == ss->cap) {
        size_t cap = ss->cap ? ss->cap * 2 : 1024;
        sentence *p = realloc(ss->s, cap * sizeof *p);
        if (!p) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        ss->s = p;
        ss->cap = cap;
    }
    char *t = strndup(s, len);
    if (!t) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    ss->s[ss->n++] = (sentence){t, line};
    return QKV_OK;
}

/* Closing quotes and brackets after a sentence's final punctuation: ASCII, and U+2019 / U+201D. */
static size_t closer(const char *p) {
    if (*p == '"' || *p == '\'' || *p == ')' || *p == ']') return 1;
    if ((unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x80 &&
        ((unsigned char)p[2] == 0x99 || (unsigned char)p[2] == 0x9D))
        return 3;
    return 0;
}

static qkv_status split_line(sentences *ss, const char *line, int64_t line_no) {
    const char *start = line;
    for (const char *p = line; *p; p++) {
        if (*p != '.' && *p != '!' && *p != '?') continue;
        const char *e = p;
        while (*e == '.' || *e == '!' || *e == '?') e++;
        for (size_t k; (k = closer(e)) > 0;) e += k;
        if (*e && *e != ' ' && *e != '\t') continue;
        const char *next = e;
        while (*next == ' ' || *next == '\t') next++;
        if (lower(*next)) continue;
        if (*p == '.' && e == p + 1) { /* a single '.': an abbreviation or an initial? */
            const char *w = p;
            while (w > start && alpha(w[-1])) w--;
            size_t wl = (size_t)(p - w);
            if ((wl == 1 && upper(*w)) || (wl && in_list(ABBREV, w, wl))) continue;
        }
        qkv_status st = push(ss, start, (size_t)(e - start), line_no);
        if (st) return st;
        start = e;
        p = e - 1;
    }
    return push(ss, start, strlen(start), line_no);
}

/* Whole-word occurrence of w (NUL-terminated, n bytes) in s at or after from; -1 none. */
static int64_t find_word(const char *s, const char *w, size_t n, int64_t from) {
    for (const char *p = s + from; (p = strstr(p, w)) != NULL; p++) {
        if ((p > s && alpha(p[-1])) || alpha(p[n])) continue;
        return p - s;
    }
    return -1;
}

typedef struct {
    const char *w;
    size_t n;
} word;

/* The words of s (runs of ASCII letters). */
static size_t words_of(const char *s, word *out, size_t cap) {
    size_t k = 0;
    for (const char *p = s; *p && k < cap;) {
        if (!alpha(*p)) {
            p++;
            continue;
        }
        const char *b = p;
        while (alpha(*p)) p++;
        out[k++] = (word){b, (size_t)(p - b)};
    }
    return k;
}

static bool only_spaces(const char *a, const char *b) {
    for (; a < b; a++)
        if (*a != ' ') return false;
    return true;
}

/* Candidates of the question sentence q (distinct, in order), given the context. */
static size_t candidates(const char *q, const char *context, const qkv_cloze_opts *o, word *cand, size_t cap) {
    word w[512];
    size_t nw = words_of(q, w, 512), nc = 0;
    for (size_t i = 0; i < nw && nc < cap; i++) {
        const word *x = &w[i];
        bool named = o->named && i > 0 && x->n >= 2 && upper(x->w[0]) && !in_list(TITLES, x->w, x->n);
        for (size_t j = 1; named && j < x->n; j++) named = lower(x->w[j]);
        bool noun = false;
        if (o->nouns && i > 0 && x->n >= 3 && lower(x->w[0]) && !in_list(FUNC, x->w, x->n)) {
            bool all_lower = true;
            for (size_t j = 0; j < x->n; j++) all_lower = all_lower && lower(x->w[j]);
            const word *prev = &w[i - 1];
            char dl[16];
            size_t pn = prev->n < sizeof dl ? prev->n : 0;
            for (size_t j = 0; j < pn; j++) dl[j] = (char)(prev->w[j] | 0x20);
            bool det = pn && in_list(DETS, dl, pn) && only_spaces(prev->w + prev->n, x->w);
            const char *after = x->w + x->n;
            bool before_func = i + 1 < nw && only_spaces(after, w[i + 1].w) && in_list(FUNC, w[i + 1].w, w[i + 1].n);
            bool before_punct = *after != ' ' && *after != '\'' && *after != '-'; /* not "the house's" */
            noun = all_lower && det && (before_func || before_punct || (*after == ' ' && i + 1 == nw));
        }
        if (!named && !noun) continue;
        bool dup = false;
        for (size_t k = 0; k < nc && !dup; k++) dup = cand[k].n == x->n && !strncmp(cand[k].w, x->w, x->n);
        char buf[128];
        if (dup || x->n >= sizeof buf) continue;
        memcpy(buf, x->w, x->n);
        buf[x->n] = '\0';
        if (find_word(context, buf, x->n, 0) < 0) continue;
        cand[nc++] = *x;
    }
    return nc;
}

qkv_cloze_opts qkv_cloze_defaults(void) {
    return (qkv_cloze_opts){.context_sentences = 20, .seed = 1, .named = true, .nouns = true, .blank = "XXXXX"};
}

/* q with every whole-word occurrence of w replaced by the blank b (malloc'd). */
static char *blank(const char *q, const char *w, size_t n, const char *b) {
    size_t len = strlen(q), bl = strlen(b);
    char *out = malloc(len * (bl + 1) + 16); /* every byte of q a one-letter word replaced, at worst */
    if (!out) return NULL;
    size_t k = 0;
    int64_t at, from = 0;
    while ((at = find_word(q, w, n, from)) >= 0) {
        memcpy(out + k, q + from, (size_t)(at - from));
        k += (size_t)(at - from);
        memcpy(out + k, b, bl);
        k += bl;
        from = at + (int64_t)n;
    }
    strcpy(out + k, q + from);
    return out;
}

static qkv_status write_example(FILE *out, const char *path, const sentences *ss, size_t first, int n_ctx,
                                const word *answer, int64_t index, const char *blank_text) {
    size_t len = 0;
    for (int k = 0; k < n_ctx; k++) len += strlen(ss->s[first + (size_t)k].text) + 1;
    char *context = malloc(len + 1), w[128];
    if (!context) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    context[0] = '\0';
    for (int k = 0, at = 0; k < n_ctx; k++) {
        at += sprintf(context + at, "%s%s", k ? " " : "", ss->s[first + (size_t)k].text);
    }
    memcpy(w, answer->w, answer->n);
    w[answer->n] = '\0';
    const sentence *qs = &ss->s[first + (size_t)n_ctx];
    int64_t byte = find_word(context, w, answer->n, 0);
    char *question = blank(qs->text, w, answer->n, blank_text);
    char id[64];
    snprintf(id, sizeof id, "cloze-%lld-L%lld", (long long)index, (long long)qs->line);
    cJSON *j = cJSON_CreateObject(), *ans = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", id);
    cJSON_AddStringToObject(j, "context", context);
    cJSON_AddStringToObject(j, "question", question ? question : "");
    cJSON_AddItemToObject(ans, "text", cJSON_CreateStringArray((const char *[]){w}, 1));
    double start = (double)qkv_utf8_count(context, (size_t)byte);
    cJSON_AddItemToObject(ans, "answer_start", cJSON_CreateDoubleArray(&start, 1));
    cJSON_AddItemToObject(j, "answers", ans);
    char *line = question ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    free(context);
    free(question);
    if (!line) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    bool bad = fprintf(out, "%s\n", line) < 0;
    cJSON_free(line);
    (void)path;
    return bad ? qkv_error_set(QKV_ERR_IO, "write error: %s", strerror(errno)) : QKV_OK;
}

qkv_status qkv_cloze_qa(const char *path, FILE *out, const qkv_cloze_opts *o, int64_t *written) {
    if (written) *written = 0;
    if (o->context_sentences < 1 || (!o->named && !o->nouns))
        return qkv_error_set(QKV_ERR_INVALID, "cloze-qa: at least one context sentence and one kind of word");
    const char *b = o->blank ? o->blank : "XXXXX";
    if (!*b || strlen(b) > 64 || strpbrk(b, "\n\r"))
        return qkv_error_set(QKV_ERR_INVALID, "cloze-qa: the blank must be 1-64 bytes on one line, got '%.64s'", b);
    FILE *f = fopen(path, "r");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    sentences ss = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t line_no = 0;
    qkv_status st = QKV_OK;
    while (st == QKV_OK && (len = getline(&line, &cap, f)) >= 0) {
        line_no++;
        size_t bad;
        if (!qkv_utf8_valid(line, (size_t)len, &bad)) {
            st = qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: invalid UTF-8 at byte %zu", path, (long long)line_no, bad + 1);
            break;
        }
        line[strcspn(line, "\r\n")] = '\0';
        st = split_line(&ss, line, line_no);
    }
    free(line);
    fclose(f);
    qkv_rng rng;
    qkv_rng_init(&rng, o->seed);
    int64_t n_out = 0, N = o->context_sentences;
    for (size_t first = 0; st == QKV_OK && first + (size_t)N < ss.n; first += (size_t)N + 1) {
        if (o->max_examples > 0 && n_out >= o->max_examples) break;
        size_t clen = 0;
        for (int64_t k = 0; k < N; k++) clen += strlen(ss.s[first + (size_t)k].text) + 1;
        char *context = malloc(clen + 1);
        if (!context) {
            st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            break;
        }
        context[0] = '\0';
        for (int64_t k = 0, at = 0; k < N; k++) at += sprintf(context + at, "%s%s", k ? " " : "", ss.s[first + (size_t)k].text);
        word cand[64];
        size_t nc = candidates(ss.s[first + (size_t)N].text, context, o, cand, 64);
        free(context);
        if (!nc) continue;
        const word *pick = &cand[qkv_rng_u32(&rng) % nc];
        st = write_example(out, path, &ss, first, (int)N, pick, (int64_t)(first / ((size_t)N + 1)), b);
        n_out++;
    }
    for (size_t i = 0; i < ss.n; i++) free(ss.s[i].text);
    free(ss.s);
    if (written) *written = n_out;
    return st;
}
