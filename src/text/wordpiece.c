/* WordPiece, BERT compatible: BERT's normaliser and pre-tokeniser (as Hugging Face's BertNormalizer /
 * BertPreTokenizer), then greedy longest-match-first with "##" continuations. Every normalised character keeps the
 * byte span of the input character it came from, which gives HF's offsets. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "qkv/text.h"
#include "text/text_internal.h"

enum { N_SPECIALS = 5 };
static const char *const SPECIAL_TOKENS[N_SPECIALS] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

struct qkv_wordpiece {
    qkv_vocab *vocab;
    qkv_wordpiece_opts o;
    int32_t unk, cls, sep;
    int32_t special_id[N_SPECIALS]; /* -1 when absent from the vocabulary */
};

qkv_wordpiece_opts qkv_wordpiece_default_opts(void) {
    return (qkv_wordpiece_opts){.lowercase = true, .strip_accents = -1, .clean_text = true, .chinese_chars = true,
                                .max_word_chars = 100};
}

qkv_wordpiece *qkv_wordpiece_load(const char *vocab_txt, const qkv_wordpiece_opts *opts) {
    qkv_wordpiece_opts o = opts ? *opts : qkv_wordpiece_default_opts();
    if (o.max_word_chars < 1 || o.strip_accents < -1 || o.strip_accents > 1) {
        qkv_error_set(QKV_ERR_INVALID, "qkv_wordpiece_load: max_word_chars %d < 1 or strip_accents %d not -1/0/1",
                      o.max_word_chars, o.strip_accents);
        return NULL;
    }
    qkv_vocab *v = qkv_vocab_load(vocab_txt);
    if (!v) return NULL;
    qkv_wordpiece *w = calloc(1, sizeof *w);
    if (!w) {
        qkv_vocab_free(v);
        qkv_error_set(QKV_ERR_NOMEM, "qkv_wordpiece_load: out of memory");
        return NULL;
    }
    w->vocab = v;
    w->o = o;
    for (int i = 0; i < N_SPECIALS; i++)
        w->special_id[i] = qkv_vocab_id(v, SPECIAL_TOKENS[i], strlen(SPECIAL_TOKENS[i]));
    w->unk = w->special_id[1];
    w->cls = w->special_id[2];
    w->sep = w->special_id[3];
    if (w->unk < 0 || w->cls < 0 || w->sep < 0) {
        qkv_error_set(QKV_ERR_FORMAT, "%s: vocabulary lacks %s", vocab_txt,
                      w->unk < 0 ? "[UNK]" : w->cls < 0 ? "[CLS]" : "[SEP]");
        qkv_wordpiece_free(w);
        return NULL;
    }
    return w;
}

void qkv_wordpiece_free(qkv_wordpiece *w) {
    if (!w) return;
    qkv_vocab_free(w->vocab);
    free(w);
}

size_t qkv_wordpiece_vocab_size(const qkv_wordpiece *w) { return w ? qkv_vocab_size(w->vocab) : 0; }

const char *qkv_wordpiece_token(const qkv_wordpiece *w, int32_t id) {
    if (!w) {
        qkv_error_set(QKV_ERR_INVALID, "qkv_wordpiece_token: NULL tokenizer");
        return NULL;
    }
    return qkv_vocab_token(w->vocab, id, NULL);
}

int32_t qkv_wordpiece_id(const qkv_wordpiece *w, const char *tok) {
    return w && tok ? qkv_vocab_id(w->vocab, tok, strlen(tok)) : -1;
}

/* ---- normalisation ---- */

/* Normalised text: code points with the input byte span each came from. */
typedef struct norm {
    int32_t *cp;
    size_t *src_start, *src_end;
    size_t n, cap;
} norm;

static bool norm_push(norm *nm, int32_t cp, size_t s, size_t e) {
    if (nm->n == nm->cap) {
        size_t cap = nm->cap ? nm->cap * 2 : 256;
        int32_t *c = realloc(nm->cp, cap * sizeof *c);
        if (c) nm->cp = c;
        size_t *a = realloc(nm->src_start, cap * sizeof *a);
        if (a) nm->src_start = a;
        size_t *b = realloc(nm->src_end, cap * sizeof *b);
        if (b) nm->src_end = b;
        if (!c || !a || !b) return false;
        nm->cap = cap;
    }
    nm->cp[nm->n] = cp;
    nm->src_start[nm->n] = s;
    nm->src_end[nm->n] = e;
    nm->n++;
    return true;
}

static void norm_free(norm *nm) {
    free(nm->cp);
    free(nm->src_start);
    free(nm->src_end);
}

/* HF's is_control: categories Cc Cf Cn Co Cs, except tab, newline, carriage return. */
static bool is_control(int32_t cp) {
    if (cp == '\t' || cp == '\n' || cp == '\r') return false;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS: return true;
    default: return false;
    }
}

/* The CJK Unified Ideographs blocks BERT surrounds with spaces (not Hiragana, Katakana or Hangul). */
static bool is_cjk(int32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static int ccc(int32_t cp) { return utf8proc_get_property(cp)->combining_class; }

/* Normalise text[0..len) (a segment between special tokens starting at byte `base` of the input) into nm. */
static qkv_status normalize(const qkv_wordpiece *w, const char *text, size_t base, size_t len, norm *nm) {
    const qkv_wordpiece_opts *o = &w->o;
    bool strip = o->strip_accents < 0 ? o->lowercase : o->strip_accents == 1;
    const unsigned char *u = (const unsigned char *)text;
    for (size_t p = 0; p < len;) {
        int32_t cp;
        int k = qkv__utf8_decode(u + p, len - p, &cp);
        if (!k)
            return qkv_error_set(QKV_ERR_FORMAT, "qkv_wordpiece_encode: invalid UTF-8 at byte offset %zu",
                                 base + p);
        size_t s = base + p, e = base + p + (size_t)k;
        p += (size_t)k;
        if (cp < 0x80) { /* fast path: ASCII has no marks to strip and no CJK */
            if (o->clean_text) {
                if (cp == 0 || cp == 127 || (cp < 32 && cp != '\t' && cp != '\n' && cp != '\r')) continue;
                if (cp == '\t' || cp == '\n' || cp == '\r') cp = ' ';
            }
            if (o->lowercase && cp >= 'A' && cp <= 'Z') cp += 32;
            if (!norm_push(nm, cp, s, e)) goto nomem;
            continue;
        }
        if (o->clean_text) {
            if (cp == 0 || cp == 0xFFFD || is_control(cp)) continue;
            if (qkv__is_unicode_space(cp)) cp = ' ';
        }
        bool cjk = o->chinese_chars && is_cjk(cp);
        if (cjk && !norm_push(nm, ' ', s, e)) goto nomem;
        if (strip) {
            int32_t d[32];
            utf8proc_ssize_t nd = utf8proc_decompose_char(cp, d, 32, UTF8PROC_DECOMPOSE, NULL);
            if (nd < 1 || nd > 32) d[0] = cp, nd = 1;
            for (utf8proc_ssize_t i = 0; i < nd; i++) {
                /* Canonical ordering (NFD): a combining mark moves before marks of higher class already
                 * emitted for the same base. */
                if (!norm_push(nm, d[i], s, e)) goto nomem;
                int c = ccc(d[i]);
                for (size_t j = nm->n - 1; c && j > 0 && ccc(nm->cp[j - 1]) > c; j--) {
                    int32_t t = nm->cp[j];
                    nm->cp[j] = nm->cp[j - 1], nm->cp[j - 1] = t;
                    size_t a = nm->src_start[j], b = nm->src_end[j];
                    nm->src_start[j] = nm->src_start[j - 1], nm->src_start[j - 1] = a;
                    nm->src_end[j] = nm->src_end[j - 1], nm->src_end[j - 1] = b;
                }
            }
        } else if (!norm_push(nm, cp, s, e)) {
            goto nomem;
        }
        if (cjk && !norm_push(nm, ' ', s, e)) goto nomem;
    }
    if (strip || o->lowercase) { /* drop nonspacing marks, then lowercase (HF's order) */
        size_t k = 0;
        for (size_t i = 0; i < nm->n; i++) {
            int32_t cp = nm->cp[i];
            if (strip && cp >= 0x80 && utf8proc_category(cp) == UTF8PROC_CATEGORY_MN) continue;
            nm->cp[k] = cp, nm->src_start[k] = nm->src_start[i], nm->src_end[k] = nm->src_end[i];
            k++;
        }
        nm->n = k;
        if (o->lowercase)
            for (size_t i = 0; i < nm->n; i++) {
                if (nm->cp[i] == 0x130) { /* the one unconditional two-character lowercase: İ -> i + U+0307 */
                    nm->cp[i] = 'i';
                    size_t s = nm->src_start[i], e = nm->src_end[i];
                    if (!norm_push(nm, 0, 0, 0)) goto nomem;
                    memmove(nm->cp + i + 2, nm->cp + i + 1, (nm->n - i - 2) * sizeof *nm->cp);
                    memmove(nm->src_start + i + 2, nm->src_start + i + 1, (nm->n - i - 2) * sizeof(size_t));
                    memmove(nm->src_end + i + 2, nm->src_end + i + 1, (nm->n - i - 2) * sizeof(size_t));
                    nm->cp[i + 1] = 0x307, nm->src_start[i + 1] = s, nm->src_end[i + 1] = e;
                    i++;
                } else if (nm->cp[i] < 0x80) { /* decompositions yield ASCII letters too (Å -> A + ring) */
                    if (nm->cp[i] >= 'A' && nm->cp[i] <= 'Z') nm->cp[i] += 32;
                } else {
                    nm->cp[i] = utf8proc_tolower(nm->cp[i]);
                }
            }
    }
    return QKV_OK;
nomem:
    return qkv_error_set(QKV_ERR_NOMEM, "qkv_wordpiece_encode: out of memory");
}

/* ---- output ---- */

typedef struct out_state {
    int32_t *ids, *types;
    size_t *offsets;
    size_t n, cap;
    int32_t type;
} out_state;

static bool out_push(out_state *st, int32_t id, size_t s, size_t e) {
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 64;
        int32_t *a = realloc(st->ids, cap * sizeof *a);
        if (a) st->ids = a;
        int32_t *t = realloc(st->types, cap * sizeof *t);
        if (t) st->types = t;
        size_t *o = realloc(st->offsets, 2 * cap * sizeof *o);
        if (o) st->offsets = o;
        if (!a || !t || !o) {
            qkv_error_set(QKV_ERR_NOMEM, "qkv_wordpiece_encode: out of memory");
            return false;
        }
        st->cap = cap;
    }
    st->ids[st->n] = id;
    st->types[st->n] = st->type;
    st->offsets[2 * st->n] = s;
    st->offsets[2 * st->n + 1] = e;
    st->n++;
    return true;
}

/* Greedy longest-match-first of one word (normalised characters [a, b)). */
static qkv_status wordpiece_word(const qkv_wordpiece *w, const norm *nm, size_t a, size_t b, qkv__buf *key,
                                 size_t *char_pos, out_state *st) {
    size_t nchars = b - a, first = st->n;
    if (nchars > (size_t)w->o.max_word_chars)
        return out_push(st, w->unk, nm->src_start[a], nm->src_end[b - 1]) ? QKV_OK : QKV_ERR_NOMEM;
    /* UTF-8 of the word behind a "##" prefix; char_pos[i]: byte offset of character i in it. */
    key->n = 0;
    if (!qkv__buf_put(key, "##", 2)) return QKV_ERR_NOMEM;
    for (size_t i = 0; i < nchars; i++) {
        char enc[4];
        char_pos[i] = key->n - 2;
        if (!qkv__buf_put(key, enc, (size_t)qkv__utf8_encode(nm->cp[a + i], enc))) return QKV_ERR_NOMEM;
    }
    char_pos[nchars] = key->n - 2;
    const char *word = key->p + 2;
    for (size_t start = 0; start < nchars;) {
        size_t end = nchars;
        int32_t id = -1;
        for (; end > start; end--) {
            /* key->p + char_pos[start] = word + char_pos[start] - 2, without the unsigned wrap when it is 1 */
            const char *k = start ? key->p + char_pos[start] : word;
            size_t kl = char_pos[end] - char_pos[start] + (start ? 2 : 0);
            if (start) { /* "##" in front of the piece: build it in place of the preceding bytes, restore after */
                char *m = key->p + char_pos[start];
                char save[2] = {m[0], m[1]};
                m[0] = '#', m[1] = '#';
                id = qkv_vocab_id(w->vocab, k, kl);
                m[0] = save[0], m[1] = save[1];
            } else {
                id = qkv_vocab_id(w->vocab, k, kl);
            }
            if (id >= 0) break;
        }
        if (id < 0) { /* not splittable: the whole word is unknown */
            st->n = first;
            return out_push(st, w->unk, nm->src_start[a], nm->src_end[b - 1]) ? QKV_OK : QKV_ERR_NOMEM;
        }
        if (!out_push(st, id, nm->src_start[a + start], nm->src_end[a + end - 1])) return QKV_ERR_NOMEM;
        start = end;
    }
    return QKV_OK;
}

/* Whitespace removed, punctuation isolated, then WordPiece of every word. */
static qkv_status encode_segment(const qkv_wordpiece *w, const char *text, size_t base, size_t len, out_state *st,
                                 norm *nm, qkv__buf *key, size_t **char_pos, size_t *char_cap) {
    nm->n = 0;
    qkv_status s = normalize(w, text + base, base, len, nm);
    if (s) return s;
    if (nm->n + 1 > *char_cap) {
        size_t *p = realloc(*char_pos, (nm->n + 1) * sizeof *p);
        if (!p) return qkv_error_set(QKV_ERR_NOMEM, "qkv_wordpiece_encode: out of memory");
        *char_pos = p;
        *char_cap = nm->n + 1;
    }
    size_t i = 0;
    while (i < nm->n) {
        int32_t cp = nm->cp[i];
        if (qkv__is_unicode_space(cp)) {
            i++;
            continue;
        }
        size_t j = i + 1;
        if (!qkv__is_bert_punct(cp))
            while (j < nm->n && !qkv__is_unicode_space(nm->cp[j]) && !qkv__is_bert_punct(nm->cp[j])) j++;
        s = wordpiece_word(w, nm, i, j, key, *char_pos, st);
        if (s) return s == QKV_ERR_NOMEM ? qkv_error_set(s, "qkv_wordpiece_encode: out of memory") : s;
        i = j;
    }
    return QKV_OK;
}

/* One text: special tokens matched literally first (earliest, then longest), the rest normalised. */
static qkv_status encode_text(const qkv_wordpiece *w, const char *text, size_t len, out_state *st) {
    norm nm = {0};
    qkv__buf key = {0};
    size_t *char_pos = NULL, char_cap = 0, pos = 0;
    size_t next_at[N_SPECIALS]; /* next occurrence of each special at or after pos (len: none left) */
    for (int k = 0; k < N_SPECIALS; k++) next_at[k] = SIZE_MAX;
    qkv_status s = QKV_OK;
    while (!s) {
        size_t best = len, best_len = 0;
        int32_t best_id = -1;
        for (int k = 0; k < N_SPECIALS; k++) {
            if (w->special_id[k] < 0) continue;
            size_t sl = strlen(SPECIAL_TOKENS[k]);
            if (next_at[k] == SIZE_MAX || (next_at[k] < pos && next_at[k] != len)) {
                const char *hit = memmem(text + pos, len - pos, SPECIAL_TOKENS[k], sl);
                next_at[k] = hit ? (size_t)(hit - text) : len;
            }
            size_t at = next_at[k];
            if (at < len && (at < best || (at == best && sl > best_len))) {
                best = at, best_len = sl;
                best_id = w->special_id[k];
            }
        }
        s = encode_segment(w, text, pos, best - pos, st, &nm, &key, &char_pos, &char_cap);
        if (s || best == len) break;
        if (!out_push(st, best_id, best, best + best_len)) s = qkv_last_status();
        pos = best + best_len;
    }
    norm_free(&nm);
    free(key.p);
    free(char_pos);
    return s;
}

qkv_status qkv_wordpiece_encode(const qkv_wordpiece *w, const char *a, size_t alen, const char *b, size_t blen,
                                bool add_special, qkv_encoding *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "qkv_wordpiece_encode: NULL output");
    memset(out, 0, sizeof *out);
    if (!w || (!a && alen) || (!b && blen))
        return qkv_error_set(QKV_ERR_INVALID, "qkv_wordpiece_encode: NULL argument");
    out_state st = {0};
    qkv_status s = QKV_ERR_NOMEM;
    if (add_special && !out_push(&st, w->cls, 0, 0)) goto fail;
    if ((s = encode_text(w, a ? a : "", alen, &st))) goto fail;
    s = QKV_ERR_NOMEM;
    if (add_special && !out_push(&st, w->sep, 0, 0)) goto fail;
    if (b) {
        st.type = 1;
        if ((s = encode_text(w, b, blen, &st))) goto fail;
        s = QKV_ERR_NOMEM;
        if (add_special && !out_push(&st, w->sep, 0, 0)) goto fail;
    }
    if (!st.ids) { /* keep the arrays non-NULL for an empty encoding */
        if (!out_push(&st, 0, 0, 0)) goto fail;
        st.n = 0;
    }
    *out = (qkv_encoding){st.ids, st.types, st.offsets, st.n};
    return QKV_OK;
fail:
    free(st.ids);
    free(st.types);
    free(st.offsets);
    return s == QKV_ERR_NOMEM ? qkv_error_set(s, "qkv_wordpiece_encode: out of memory") : s;
}

/* HF's WordPiece decoder cleanup, applied to each token with its leading space. */
static const char *const CLEANUP[][2] = {{" .", "."},       {" ?", "?"},     {" !", "!"},     {" ,", ","},
                                         {" ' ", "'"},      {" n't", "n't"}, {" 'm", "'m"},   {" do not", " don't"},
                                         {" 's", "'s"},     {" 've", "'ve"}, {" 're", "'re"}};

static bool put_cleaned(qkv__buf *out, const char *t, size_t tl) {
    /* Replacement in order, each over the whole token (they only shrink it, so work in place on a copy). */
    char *s = malloc(tl + 1);
    if (!s) return false;
    memcpy(s, t, tl);
    s[tl] = '\0';
    for (size_t r = 0; r < sizeof CLEANUP / sizeof *CLEANUP; r++) {
        const char *from = CLEANUP[r][0], *to = CLEANUP[r][1];
        size_t fl = strlen(from), tol = strlen(to), k = 0;
        for (size_t i = 0; s[i];) {
            if (strncmp(s + i, from, fl) == 0) {
                memcpy(s + k, to, tol);
                k += tol;
                i += fl;
            } else {
                s[k++] = s[i++];
            }
        }
        s[k] = '\0';
    }
    bool ok = qkv__buf_put(out, s, strlen(s));
    free(s);
    return ok;
}

qkv_status qkv_wordpiece_decode(const qkv_wordpiece *w, const int32_t *ids, size_t n, char **text, size_t *len) {
    if (!w || (n && !ids) || !text) return qkv_error_set(QKV_ERR_INVALID, "qkv_wordpiece_decode: NULL argument");
    qkv__buf out = {0}, tok = {0};
    if (!qkv__buf_reserve(&out, 0)) return qkv_last_status();
    out.p[0] = '\0';
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        size_t tl;
        const char *t = qkv_vocab_token(w->vocab, ids[i], &tl);
        if (!t) {
            free(out.p);
            free(tok.p);
            return qkv_error_set(QKV_ERR_RANGE, "qkv_wordpiece_decode: unknown id %d at position %zu", (int)ids[i], i);
        }
        bool special = false;
        for (int k = 0; k < N_SPECIALS; k++) special |= ids[i] == w->special_id[k];
        if (special) continue;
        tok.n = 0;
        bool ok = true;
        if (kept++ > 0) {
            if (tl >= 2 && t[0] == '#' && t[1] == '#') t += 2, tl -= 2;
            else ok = qkv__buf_put(&tok, " ", 1);
        }
        if (!ok || !qkv__buf_put(&tok, t, tl) || !put_cleaned(&out, tok.p, tok.n)) {
            free(out.p);
            free(tok.p);
            return qkv_error_set(QKV_ERR_NOMEM, "qkv_wordpiece_decode: out of memory");
        }
    }
    free(tok.p);
    *text = out.p;
    if (len) *len = out.n;
    return QKV_OK;
}

/* The words the encoder would look up, for the trainer (wordpiece_train.c): normalised, split at whitespace and
 * around punctuation exactly as encode_segment does. Special tokens are not matched: training text is plain text. */
qkv_status qkv__wordpiece_words(const qkv_wordpiece_opts *o, const char *text, size_t len, qkv__word_fn fn,
                                void *ctx) {
    qkv_wordpiece w = {.o = *o};
    norm nm = {0};
    qkv__buf word = {0};
    qkv_status s = normalize(&w, text, 0, len, &nm);
    for (size_t i = 0; !s && i < nm.n;) {
        int32_t cp = nm.cp[i];
        if (qkv__is_unicode_space(cp)) {
            i++;
            continue;
        }
        size_t j = i + 1;
        if (!qkv__is_bert_punct(cp))
            while (j < nm.n && !qkv__is_unicode_space(nm.cp[j]) && !qkv__is_bert_punct(nm.cp[j])) j++;
        word.n = 0;
        for (size_t k = i; k < j; k++) {
            char enc[4];
            if (!qkv__buf_put(&word, enc, (size_t)qkv__utf8_encode(nm.cp[k], enc))) {
                s = qkv_error_set(QKV_ERR_NOMEM, "wordpiece words: out of memory");
                break;
            }
        }
        if (!s) s = fn(ctx, word.p, word.n, j - i);
        i = j;
    }
    norm_free(&nm);
    free(word.p);
    return s;
}
