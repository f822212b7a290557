/* The lead baseline of summarization: the first sentence of each article, cut to the summaries' average length in
 * words (whitespace-separated, rounded), as the hypothesis; the summary as the reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rouge_lead.h"

/* End of the first sentence: after the first '.', '!' or '?' followed by whitespace or the end of the text. */
static size_t first_sentence(const char *a) {
    for (size_t i = 0; a[i]; i++)
        if ((a[i] == '.' || a[i] == '!' || a[i] == '?') && (!a[i + 1] || a[i + 1] == ' ' || a[i + 1] == '\t'))
            return i + 1;
    return strlen(a);
}

static size_t count_words(const char *s, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && (i == 0 || s[i - 1] == ' ')) n++;
    return n;
}

/* s[0..len) cut after `words` words (malloc'd). */
static char *cut_words(const char *s, size_t len, size_t words) {
    size_t i = 0, seen = 0;
    while (i < len && s[i] == ' ') i++;
    size_t start = i;
    for (; i < len; i++) {
        if (s[i] != ' ' && (i == 0 || s[i - 1] == ' ') && seen++ == words) break;
    }
    size_t end = i;
    while (end > start && s[end - 1] == ' ') end--;
    char *out = malloc(end - start + 1);
    if (out) {
        memcpy(out, s + start, end - start);
        out[end - start] = '\0';
    }
    return out;
}

int rouge_lead_make(char *const *lines, size_t n, char ***hyps, char ***refs, double *avg_words) {
    *hyps = calloc(n ? n : 1, sizeof **hyps);
    *refs = calloc(n ? n : 1, sizeof **refs);
    if (!*hyps || !*refs) return -1;
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *tab = strchr(lines[i], '\t');
        if (!tab) return (int)i + 1;
        total += (double)count_words(tab + 1, strlen(tab + 1));
    }
    *avg_words = n ? total / (double)n : 0;
    size_t words = (size_t)llround(*avg_words);
    for (size_t i = 0; i < n; i++) {
        const char *tab = strchr(lines[i], '\t');
        size_t alen = (size_t)(tab - lines[i]);
        char *article = malloc(alen + 1);
        if (!article) return -1;
        memcpy(article, lines[i], alen);
        article[alen] = '\0';
        (*hyps)[i] = cut_words(article, first_sentence(article), words);
        (*refs)[i] = strdup(tab + 1);
        free(article);
        if (!(*hyps)[i] || !(*refs)[i]) return -1;
    }
    return 0;
}

void rouge_lead_free(char **hyps, char **refs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (hyps) free(hyps[i]);
        if (refs) free(refs[i]);
    }
    free(hyps);
    free(refs);
}
