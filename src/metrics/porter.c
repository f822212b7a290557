/* The Porter stemmer as NLTK's PorterStemmer implements it in its default NLTK_EXTENSIONS mode (the mode
 * rouge-score uses): the 1980 algorithm plus NLTK's irregular-forms table and its changes to steps 1a, 1b, 1c and 2.
 * Words are lowercase ASCII (rouge-score only stems [a-z0-9]+ tokens). Each step edits a buffer in place. */
#include <string.h>

#include "qkv/error.h"
#include "qkv/metrics.h"

typedef struct word {
    char *s;
    int n;
} word;

static bool is_vowel_letter(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

/* A consonant is anything but a e i o u, and y is a consonant only when preceded by a vowel (or first). */
static bool is_cons(const char *s, int i) {
    if (is_vowel_letter(s[i])) return false;
    if (s[i] == 'y') return i == 0 ? true : !is_cons(s, i - 1);
    return true;
}

/* m: the number of vowel->consonant transitions in s[0..n). */
static int measure(const char *s, int n) {
    int m = 0;
    for (int i = 1; i < n; i++)
        if (!is_cons(s, i - 1) && is_cons(s, i)) m++;
    return m;
}

static bool contains_vowel(const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (!is_cons(s, i)) return true;
    return false;
}

static bool ends_double_cons(const char *s, int n) { return n >= 2 && s[n - 1] == s[n - 2] && is_cons(s, n - 1); }

/* *o: ends consonant-vowel-consonant, the last not w, x or y; NLTK also accepts a two-letter vowel-consonant word. */
static bool ends_cvc(const char *s, int n) {
    if (n >= 3 && is_cons(s, n - 3) && !is_cons(s, n - 2) && is_cons(s, n - 1) && s[n - 1] != 'w' &&
        s[n - 1] != 'x' && s[n - 1] != 'y')
        return true;
    return n == 2 && !is_cons(s, 0) && is_cons(s, 1);
}

static bool ends_with(const word *w, const char *suf) {
    int k = (int)strlen(suf);
    return w->n >= k && memcmp(w->s + w->n - k, suf, (size_t)k) == 0;
}

/* Replace the suffix of length k by rep. */
static void replace(word *w, int k, const char *rep) {
    int r = (int)strlen(rep);
    memcpy(w->s + w->n - k, rep, (size_t)r);
    w->n = w->n - k + r;
}

typedef enum cond { C_NONE, C_M_GT0, C_M_GT1, C_ION, C_LOGI } cond;

typedef struct rule {
    const char *suf, *rep;
    cond c;
} rule;

static bool holds(const word *w, int stem_len, cond c) {
    switch (c) {
    case C_NONE: return true;
    case C_M_GT0: return measure(w->s, stem_len) > 0;
    case C_M_GT1: return measure(w->s, stem_len) > 1;
    case C_ION: return measure(w->s, stem_len) > 1 && stem_len > 0 &&
                       (w->s[stem_len - 1] == 's' || w->s[stem_len - 1] == 't');
    case C_LOGI: return measure(w->s, stem_len + 1) > 0; /* NLTK keeps the 'l' with the stem: word[:-3] */
    }
    return false;
}

/* The first rule whose suffix matches decides: applied if its condition holds, else the word is left alone. */
static void apply_rules(word *w, const rule *rules, int n_rules) {
    for (int i = 0; i < n_rules; i++) {
        int k = (int)strlen(rules[i].suf);
        if (!ends_with(w, rules[i].suf)) continue;
        if (holds(w, w->n - k, rules[i].c)) replace(w, k, rules[i].rep);
        return;
    }
}

static void step1a(word *w) {
    if (ends_with(w, "ies") && w->n == 4) { /* NLTK: 'dies' -> 'die', but 'flies' -> 'fli' */
        replace(w, 3, "ie");
        return;
    }
    static const rule r[] = {{"sses", "ss", C_NONE}, {"ies", "i", C_NONE}, {"ss", "ss", C_NONE}, {"s", "", C_NONE}};
    apply_rules(w, r, 4);
}

static void step1b(word *w) {
    if (ends_with(w, "ied")) { /* NLTK: 'died' -> 'die', 'spied' -> 'spi' */
        replace(w, 3, w->n == 4 ? "ie" : "i");
        return;
    }
    if (ends_with(w, "eed")) {
        if (measure(w->s, w->n - 3) > 0) replace(w, 3, "ee");
        return;
    }
    int k = 0;
    if (ends_with(w, "ed") && contains_vowel(w->s, w->n - 2)) k = 2;
    else if (ends_with(w, "ing") && contains_vowel(w->s, w->n - 3)) k = 3;
    if (!k) return;
    w->n -= k;
    if (ends_with(w, "at")) replace(w, 2, "ate");
    else if (ends_with(w, "bl")) replace(w, 2, "ble");
    else if (ends_with(w, "iz")) replace(w, 2, "ize");
    else if (ends_double_cons(w->s, w->n)) {
        char last = w->s[w->n - 1];
        if (last != 'l' && last != 's' && last != 'z') w->n -= 1;
    } else if (measure(w->s, w->n) == 1 && ends_cvc(w->s, w->n)) {
        w->s[w->n++] = 'e';
    }
}

static void step1c(word *w) {
    /* NLTK: y -> i only after a consonant that is not the whole stem ('happy' -> 'happi', 'by' unchanged) */
    if (ends_with(w, "y") && w->n - 1 > 1 && is_cons(w->s, w->n - 2)) w->s[w->n - 1] = 'i';
}

static void step2(word *w) {
    if (ends_with(w, "alli") && measure(w->s, w->n - 4) > 0) { /* NLTK: alli -> al first, then step 2 again */
        replace(w, 4, "al");
        step2(w);
        return;
    }
    static const rule r[] = {
        {"ational", "ate", C_M_GT0}, {"tional", "tion", C_M_GT0}, {"enci", "ence", C_M_GT0},
        {"anci", "ance", C_M_GT0},   {"izer", "ize", C_M_GT0},    {"bli", "ble", C_M_GT0},
        {"alli", "al", C_M_GT0},     {"entli", "ent", C_M_GT0},   {"eli", "e", C_M_GT0},
        {"ousli", "ous", C_M_GT0},   {"ization", "ize", C_M_GT0}, {"ation", "ate", C_M_GT0},
        {"ator", "ate", C_M_GT0},    {"alism", "al", C_M_GT0},    {"iveness", "ive", C_M_GT0},
        {"fulness", "ful", C_M_GT0}, {"ousness", "ous", C_M_GT0}, {"aliti", "al", C_M_GT0},
        {"iviti", "ive", C_M_GT0},   {"biliti", "ble", C_M_GT0},  {"fulli", "ful", C_M_GT0},
        {"logi", "log", C_LOGI},
    };
    apply_rules(w, r, (int)(sizeof r / sizeof r[0]));
}

static void step3(word *w) {
    static const rule r[] = {{"icate", "ic", C_M_GT0}, {"ative", "", C_M_GT0}, {"alize", "al", C_M_GT0},
                             {"iciti", "ic", C_M_GT0}, {"ical", "ic", C_M_GT0}, {"ful", "", C_M_GT0},
                             {"ness", "", C_M_GT0}};
    apply_rules(w, r, (int)(sizeof r / sizeof r[0]));
}

static void step4(word *w) {
    static const rule r[] = {{"al", "", C_M_GT1},   {"ance", "", C_M_GT1}, {"ence", "", C_M_GT1},
                             {"er", "", C_M_GT1},   {"ic", "", C_M_GT1},   {"able", "", C_M_GT1},
                             {"ible", "", C_M_GT1}, {"ant", "", C_M_GT1},  {"ement", "", C_M_GT1},
                             {"ment", "", C_M_GT1}, {"ent", "", C_M_GT1},  {"ion", "", C_ION},
                             {"ou", "", C_M_GT1},   {"ism", "", C_M_GT1},  {"ate", "", C_M_GT1},
                             {"iti", "", C_M_GT1},  {"ous", "", C_M_GT1},  {"ive", "", C_M_GT1},
                             {"ize", "", C_M_GT1}};
    apply_rules(w, r, (int)(sizeof r / sizeof r[0]));
}

static void step5a(word *w) {
    if (!ends_with(w, "e")) return;
    int m = measure(w->s, w->n - 1);
    if (m > 1 || (m == 1 && !ends_cvc(w->s, w->n - 1))) w->n -= 1;
}

static void step5b(word *w) {
    if (ends_with(w, "ll") && measure(w->s, w->n - 1) > 1) w->n -= 1;
}

int qkv_porter_stem(const char *in, size_t len, char *out, size_t out_size) {
    if (!in || !out) {
        qkv_error_set(QKV_ERR_INVALID, "qkv_porter_stem: word and out must not be NULL");
        return -1;
    }
    if (out_size < len + 2 || len > (1u << 20)) {
        qkv_error_set(QKV_ERR_RANGE, "qkv_porter_stem: a %zu-byte word needs an output of %zu bytes, got %zu", len,
                      len + 2, out_size);
        return -1;
    }
    static const struct { const char *form, *stem; } irregular[] = {
        {"sky", "sky"},       {"skies", "sky"},   {"dying", "die"},     {"lying", "lie"},
        {"tying", "tie"},     {"news", "news"},   {"innings", "inning"}, {"inning", "inning"},
        {"outings", "outing"}, {"outing", "outing"}, {"cannings", "canning"}, {"canning", "canning"},
        {"howe", "howe"},     {"proceed", "proceed"}, {"exceed", "exceed"}, {"succeed", "succeed"},
    };
    for (size_t i = 0; i < sizeof irregular / sizeof irregular[0]; i++)
        if (strlen(irregular[i].form) == len && memcmp(irregular[i].form, in, len) == 0) {
            size_t k = strlen(irregular[i].stem);
            memcpy(out, irregular[i].stem, k + 1);
            return (int)k;
        }
    memcpy(out, in, len);
    out[len] = '\0';
    if (len <= 2) return (int)len; /* NLTK leaves one- and two-letter words alone */
    word w = {out, (int)len};
    step1a(&w);
    step1b(&w);
    step1c(&w);
    step2(&w);
    step3(&w);
    step4(&w);
    step5a(&w);
    step5b(&w);
    out[w.n] = '\0';
    return w.n;
}
