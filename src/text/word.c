/* Word-level (whitespace split with optional lowercasing, punctuation stripping, stop-word removal) and
 * character-level (one token per code point) tokenizers. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "qkv/text.h"
#include "text/text_internal.h"

/* Short function words that carry little content; a compact subset of the SMART / NLTK English lists. */
static const char *const STOPWORDS[] = {
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do",
    "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having",
    "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it",
    "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on",
    "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so",
    "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these",
    "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
    "yourself", "yourselves", NULL};

const char *const *qkv_stopwords(void) { return STOPWORDS; }

static bool is_stopword(const char *w, size_t len) {
    for (size_t i = 0; STOPWORDS[i]; i++)
        if (strlen(STOPWORDS[i]) == len && memcmp(STOPWORDS[i], w, len) == 0) return true;
    return false;
}

/* Lowercase of a word for the stop-word test (ASCII is enough: the list is ASCII). */
static bool is_stopword_ci(const char *w, size_t len) {
    char tmp[16];
    if (len >= sizeof tmp) return false;
    for (size_t i = 0; i < len; i++) tmp[i] = (char)((w[i] >= 'A' && w[i] <= 'Z') ? w[i] + 32 : w[i]);
    return is_stopword(tmp, len);
}

qkv_status qkv_word_split(const char *text, size_t len, const qkv_word_opts *opts, char ***toks, size_t *n) {
    if ((!text && len) || !toks || !n) return qkv_error_set(QKV_ERR_INVALID, "qkv_word_split: NULL argument");
    qkv_word_opts o = opts ? *opts : (qkv_word_opts){0};
    const unsigned char *u = (const unsigned char *)text;
    qkv__buf out = {0};
    size_t count = 0, pos = 0, word_start = 0; /* word_start: offset in out.p of the word being built */
    bool in_word = false;
    for (;;) {
        int32_t cp = ' ';
        int k = 1;
        if (pos < len) {
            k = qkv__utf8_decode(u + pos, len - pos, &cp);
            if (!k) {
                free(out.p);
                return qkv_error_set(QKV_ERR_FORMAT, "qkv_word_split: invalid UTF-8 at byte offset %zu", pos);
            }
            if (cp == 0) { /* would end its token's C string early */
                free(out.p);
                return qkv_error_set(QKV_ERR_INVALID, "qkv_word_split: NUL byte at offset %zu", pos);
            }
        }
        bool end = pos >= len;
        if (end || qkv__is_unicode_space(cp)) {
            if (in_word) {
                size_t wl = out.n - word_start;
                if (wl == 0 || (o.drop_stopwords && is_stopword_ci(out.p + word_start, wl))) {
                    out.n = word_start; /* drop it: everything stripped, or a stop word */
                } else {
                    if (!qkv__buf_put(&out, "", 1)) goto nomem;
                    count++;
                }
                in_word = false;
            }
            if (end) break;
        } else {
            if (!in_word) word_start = out.n, in_word = true;
            if (!(o.strip_punct && qkv__is_bert_punct(cp))) {
                if (o.lowercase) cp = utf8proc_tolower(cp);
                char enc[4];
                if (!qkv__buf_put(&out, enc, (size_t)qkv__utf8_encode(cp, enc))) goto nomem;
            }
        }
        pos += (size_t)k;
    }
    qkv_status s = qkv__tokens_pack(&out, count, toks);
    free(out.p);
    if (s) return s;
    *n = count;
    return QKV_OK;
nomem:
    free(out.p);
    return qkv_last_status();
}

qkv_status qkv_char_split(const char *text, size_t len, char ***toks, size_t *n) {
    if ((!text && len) || !toks || !n) return qkv_error_set(QKV_ERR_INVALID, "qkv_char_split: NULL argument");
    const unsigned char *u = (const unsigned char *)text;
    qkv__buf out = {0};
    size_t count = 0;
    for (size_t pos = 0; pos < len;) {
        int32_t cp;
        int k = qkv__utf8_decode(u + pos, len - pos, &cp);
        if (!k) {
            free(out.p);
            return qkv_error_set(QKV_ERR_FORMAT, "qkv_char_split: invalid UTF-8 at byte offset %zu", pos);
        }
        /* A NUL code point would end its C string early: refuse it rather than return an empty token. */
        if (cp == 0) {
            free(out.p);
            return qkv_error_set(QKV_ERR_INVALID, "qkv_char_split: NUL byte at offset %zu", pos);
        }
        if (!qkv__buf_put(&out, text + pos, (size_t)k) || !qkv__buf_put(&out, "", 1)) {
            free(out.p);
            return qkv_last_status();
        }
        count++;
        pos += (size_t)k;
    }
    qkv_status s = qkv__tokens_pack(&out, count, toks);
    free(out.p);
    if (s) return s;
    *n = count;
    return QKV_OK;
}
