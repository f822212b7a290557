/* Conversations from a novel's quoted speech (qkv/dialogue.h: the rule). One pass over the paragraphs: the speech of
 * each is gathered into the current turn, turns into the current conversation, which is emitted when a paragraph
 * without speech (or the end) closes it. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/dialogue.h"

qkv_dialogue_opts qkv_dialogue_defaults(void) { return (qkv_dialogue_opts){.min_turns = 2, .max_turns = 0}; }

/* A growing string. */
typedef struct {
    char *s;
    size_t n, cap;
    bool failed;
} sbuf;

static void sb_add(sbuf *b, const char *p, size_t n) {
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
}

/* Appends speech text with whitespace runs folded into one space (none at the start of the turn). */
static void sb_add_text(sbuf *b, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        bool space = c == ' ' || c == '\t' || c == '\r' || c == '\n';
        if (space) {
            if (b->n && b->s[b->n - 1] != ' ') sb_add(b, " ", 1);
        } else {
            sb_add(b, &c, 1);
        }
    }
}

static void sb_trim(sbuf *b) {
    while (b->n && b->s[b->n - 1] == ' ') b->s[--b->n] = '\0';
}

typedef struct {
    const qkv_dialogue_opts *o;
    qkv_dialogue_fn emit;
    void *user;
    sbuf conv, turn;
    int turns;     /* turns in conv */
    qkv_status st;
} state;

/* Ends the current turn: appended to the conversation as the next person's, or a new piece when full. */
static void end_turn(state *s);

static void end_conversation(state *s) {
    if (s->turn.n) end_turn(s);
    if (s->st == QKV_OK && !s->conv.failed && s->turns >= s->o->min_turns && s->conv.n)
        s->st = s->emit(s->conv.s, s->turns, s->user);
    s->conv.n = 0;
    if (s->conv.s) s->conv.s[0] = '\0';
    s->turns = 0;
}

static void end_turn(state *s) {
    sb_trim(&s->turn);
    if (!s->turn.n) return;
    if (s->o->max_turns > 0 && s->turns == s->o->max_turns) {
        sbuf keep = s->turn; /* the piece ends here; this turn opens the next one */
        s->turn = (sbuf){0};
        end_conversation(s);
        s->turn = keep;
    }
    char head[32];
    int n = snprintf(head, sizeof head, "%sPerson %d: ", s->turns ? " " : "", s->turns % 2 + 1);
    sb_add(&s->conv, head, (size_t)n);
    sb_add(&s->conv, s->turn.s, s->turn.n);
    s->turns++;
    s->turn.n = 0;
    s->turn.s[0] = '\0';
}

/* The quote mark at p (straight, or curly as UTF-8): its length, and whether it opens (1), closes (-1) or toggles
 * (0, straight). 0 length when none. */
static size_t quote_at(const char *p, const char *end, int *kind) {
    if (*p == '"') {
        *kind = 0;
        return 1;
    }
    if (end - p >= 3 && (unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x80 &&
        ((unsigned char)p[2] == 0x9C || (unsigned char)p[2] == 0x9D)) {
        *kind = (unsigned char)p[2] == 0x9C ? 1 : -1;
        return 3;
    }
    return 0;
}

qkv_status qkv_dialogue_extract(const char *text, size_t len, const qkv_dialogue_opts *opts, qkv_dialogue_fn emit,
                                void *user) {
    qkv_dialogue_opts o = opts ? *opts : qkv_dialogue_defaults();
    if (o.min_turns < 1 || o.max_turns < 0 || (o.max_turns && o.max_turns < o.min_turns) || !emit)
        return qkv_error_set(QKV_ERR_INVALID, "dialogue: need min_turns >= 1 and max_turns 0 or >= min_turns "
                             "(got %d, %d) and a callback", o.min_turns, o.max_turns);
    state s = {.o = &o, .emit = emit, .user = user};
    const char *p = text, *end = text + len;
    while (p < end && s.st == QKV_OK) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        bool inside = false, speech = false;
        const char *from = NULL;
        for (const char *q = p; q < eol;) {
            int kind;
            size_t ql = quote_at(q, eol, &kind);
            if (!ql) {
                q++;
                continue;
            }
            bool opens = kind == 1 || (kind == 0 && !inside);
            if (opens && !inside) {
                inside = true;
                from = q + ql;
            } else if (!opens && inside) {
                if (speech || s.turn.n) sb_add(&s.turn, " ", 1);
                sb_add_text(&s.turn, from, (size_t)(q - from));
                speech = true;
                inside = false;
            }
            q += ql;
        }
        if (inside) { /* open at the end of the paragraph: the speech goes on in the next one */
            if (s.turn.n) sb_add(&s.turn, " ", 1);
            sb_add_text(&s.turn, from, (size_t)(eol - from));
            speech = true;
        }
        if (!speech) end_conversation(&s);
        else if (!inside) end_turn(&s); /* open: the turn goes on in the next paragraph */
        if (s.conv.failed || s.turn.failed) s.st = qkv_error_set(QKV_ERR_NOMEM, "dialogue: out of memory");
        p = eol + 1;
    }
    if (s.st == QKV_OK) end_conversation(&s);
    if (s.st == QKV_OK && (s.conv.failed || s.turn.failed))
        s.st = qkv_error_set(QKV_ERR_NOMEM, "dialogue: out of memory");
    free(s.conv.s);
    free(s.turn.s);
    return s.st;
}
