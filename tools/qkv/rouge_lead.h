/* qkv rouge --lead: the lead baseline's hypotheses and references from "article<TAB>summary" lines. */
#ifndef QKV_ROUGE_LEAD_H
#define QKV_ROUGE_LEAD_H

#include <stddef.h>

/* hyps[i]: the first sentence of article i cut to the summaries' average word count (*avg_words); refs[i]: its
 * summary. Returns 0, -1 when out of memory, or the 1-based number of a line without a tab. Free both with
 * rouge_lead_free (also after an error). */
int rouge_lead_make(char *const *lines, size_t n, char ***hyps, char ***refs, double *avg_words);
void rouge_lead_free(char **hyps, char **refs, size_t n);

#endif
