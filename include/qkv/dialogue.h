/* Conversations from the quoted speech of a novel: the dialogue corpus of the Reformer chatbot (issue 27), in the
 * turn format the course gives MultiWOZ: "Person 1: ... Person 2: ... Person 1: ...".
 *
 * The rule, which needs nothing but the conventions of printed English fiction, so it applies to any plain-text
 * novel with one paragraph a line:
 *   1. A paragraph's speech is the text inside its double quotes (straight " or curly U+201C / U+201D); the quoted
 *      pieces of one paragraph are joined with a space, the narration around them ("replied her husband") is
 *      dropped, and whitespace runs become one space.
 *   2. A paragraph that leaves a quote open continues its speaker: its speech and the next paragraph's form one turn
 *      (novels reopen the quote at the start of the next paragraph and close it only at the end of the speech).
 *   3. Every other paragraph with speech is a new turn, by the other person: a new speaker starts a new paragraph.
 *      Turns alternate between Person 1 and Person 2, starting with Person 1.
 *   4. A paragraph without speech (narration, a chapter heading, a blank line) ends the conversation; so does the
 *      end of the text. Conversations with fewer than min_turns turns are dropped; longer than max_turns (if > 0)
 *      are cut into consecutive pieces of max_turns turns, each starting again at Person 1.
 */
#ifndef QKV_DIALOGUE_H
#define QKV_DIALOGUE_H

#include <stddef.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_dialogue_opts {
    int min_turns; /* default 2 */
    int max_turns; /* default 0: no limit */
} qkv_dialogue_opts;

qkv_dialogue_opts qkv_dialogue_defaults(void);

/* Called once per conversation with its one-line text ("Person 1: ... Person 2: ..."), NUL-terminated and valid
 * during the call. A status other than QKV_OK stops the extraction and is returned. */
typedef qkv_status (*qkv_dialogue_fn)(const char *conversation, int turns, void *user);

/* Runs the rule over text[0..len) (UTF-8, paragraphs separated by newlines). Returns QKV_OK, the callback's status,
 * or an error (out of memory, bad options). */
qkv_status qkv_dialogue_extract(const char *text, size_t len, const qkv_dialogue_opts *opts, qkv_dialogue_fn emit,
                                void *user);

#ifdef __cplusplus
}
#endif
#endif
