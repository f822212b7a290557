/* Tagging data: CoNLL-style files of "token<TAB>universal tag<TAB>Brown tag" lines, one blank line after each
 * sentence (../shared/data/pos), read into sentences with the tag layer the run's data.tagset chooses. The `names`
 * layer is derived here, as the file is read, so any file in this format is scored the same way
 * (docs/tagging.md). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "task_tagging.h"
#include "qkv/fsutil.h"

/* ---- the names layer --------------------------------------------------------------------------------------------- */

/* The Brown tag without its -hl / -tl / -nc / -fw suffixes (any number, any order) is at most `len` bytes of tag. */
static size_t base_len(const char *tag, bool *has_tl) {
    static const char *const suffixes[] = {"-hl", "-tl", "-nc", "-fw"};
    size_t len = strlen(tag);
    *has_tl = false;
    for (bool again = true; again;) {
        again = false;
        for (int i = 0; i < 4; i++)
            if (len > 3 && !memcmp(tag + len - 3, suffixes[i], 3)) {
                *has_tl |= i == 1;
                len -= 3;
                again = true;
            }
    }
    return len;
}

/* Title case as str.istitle() judges ASCII words: an uppercase letter first, and every letter that follows a letter
 * lowercase ("Grand", "O'Brien"; not "USA", not "grand"). */
static bool title_case(const char *w) {
    if (!isupper((unsigned char)w[0])) return false;
    for (size_t i = 1; w[i]; i++)
        if (isupper((unsigned char)w[i]) && isalpha((unsigned char)w[i - 1])) return false;
    return true;
}

void qkv__tagging_names(char *const *tokens, char *const *brown, size_t n, const char **out) {
    bool in = false;
    for (size_t i = 0; i < n; i++) {
        bool tl;
        size_t len = base_len(brown[i], &tl);
        bool proper = len >= 2 && brown[i][0] == 'n' && brown[i][1] == 'p';
        bool title_word = tl && title_case(tokens[i]);
        if (proper) {
            out[i] = in ? "I-NAME" : "B-NAME";
            in = true;
        } else if (in && title_word) {
            out[i] = "I-NAME"; /* inside or directly after a run of proper nouns ("Fulton County Grand Jury") */
        } else {
            out[i] = "O";
            in = false;
        }
    }
}

/* ---- reading sentences ------------------------------------------------------------------------------------------- */

typedef struct sentence {
    char **tok, **tag; /* tag: the chosen layer's tags (names: static strings) */
    char **brown;
    const char **names;
    long *line;
    size_t n, cap;
    long first_line;
} sentence;

typedef qkv_status (*sentence_fn)(void *user, const char *path, const sentence *s);

static void sentence_clear(sentence *s) {
    for (size_t i = 0; i < s->n; i++) {
        free(s->tok[i]);
        free(s->brown[i]);
        if (s->tag[i] != s->brown[i] && s->tag[i] != (char *)s->names[i]) free(s->tag[i]);
    }
    s->n = 0;
}

static void sentence_free(sentence *s) {
    sentence_clear(s);
    free(s->tok);
    free(s->tag);
    free(s->brown);
    free(s->names);
    free(s->line);
    memset(s, 0, sizeof *s);
}

static qkv_status sentence_push(sentence *s, const char *tok, const char *upos, const char *brown, long line,
                                int tagset) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        char **a = realloc(s->tok, cap * sizeof *a);
        if (a) s->tok = a;
        char **b = realloc(s->tag, cap * sizeof *b);
        if (b) s->tag = b;
        char **c = realloc(s->brown, cap * sizeof *c);
        if (c) s->brown = c;
        const char **d = realloc(s->names, cap * sizeof *d);
        if (d) s->names = d;
        long *e = realloc(s->line, cap * sizeof *e);
        if (e) s->line = e;
        if (!a || !b || !c || !d || !e) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        s->cap = cap;
    }
    size_t i = s->n;
    s->tok[i] = strdup(tok);
    s->brown[i] = strdup(brown);
    s->names[i] = NULL;
    s->tag[i] = tagset == TAGSET_UNIVERSAL ? strdup(upos) : s->brown[i];
    s->line[i] = line;
    s->n++;
    if (!s->tok[i] || !s->brown[i] || !s->tag[i]) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    return QKV_OK;
}

static qkv_status sentence_end(sentence *s, int tagset, const char *path, sentence_fn fn, void *user) {
    if (tagset == TAGSET_NAMES) {
        qkv__tagging_names(s->tok, s->brown, s->n, s->names);
        for (size_t i = 0; i < s->n; i++) s->tag[i] = (char *)s->names[i];
    }
    qkv_status st = fn(user, path, s);
    sentence_clear(s);
    return st;
}

/* Calls fn once per sentence of the file, in file order. */
static qkv_status read_sentences(const char *path, int tagset, sentence_fn fn, void *user) {
    FILE *f = fopen(path, "r");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    sentence s = {0};
    char *buf = NULL;
    size_t cap = 0;
    long line = 0;
    int64_t n_sent = 0;
    qkv_status st = QKV_OK;
    ssize_t got;
    while (st == QKV_OK && (got = getline(&buf, &cap, f)) >= 0) {
        line++;
        size_t len = (size_t)got;
        while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) buf[--len] = '\0';
        bool blank = true;
        for (size_t i = 0; i < len; i++) blank &= buf[i] == ' ' || buf[i] == '\t';
        if (blank) {
            if (s.n == 0) {
                st = qkv_error_set(QKV_ERR_FORMAT, "%s:%ld: empty sentence (a blank line %s)", path, line,
                                   line == 1 ? "at the start of the file" : "right after another blank line");
                break;
            }
            s.first_line = s.line[0];
            st = sentence_end(&s, tagset, path, fn, user);
            n_sent++;
            continue;
        }
        char *col[4] = {buf, NULL, NULL, NULL};
        int n_col = 1;
        for (char *p = buf; *p && n_col <= 3; p++)
            if (*p == '\t') {
                *p = '\0';
                col[n_col++] = p + 1;
            }
        if (n_col != 3) {
            st = qkv_error_set(QKV_ERR_FORMAT, "%s:%ld: expected 3 tab-separated columns (token, universal tag, Brown "
                               "tag), found %s%d", path, line, n_col > 3 ? "more than " : "", n_col > 3 ? 3 : n_col);
            break;
        }
        for (int c = 0; c < 3 && st == QKV_OK; c++)
            if (!col[c][0])
                st = qkv_error_set(QKV_ERR_FORMAT, "%s:%ld: column %d (%s) is empty", path, line, c + 1,
                                   c == 0 ? "token" : c == 1 ? "universal tag" : "Brown tag");
        if (st == QKV_OK) st = sentence_push(&s, col[0], col[1], col[2], line, tagset);
    }
    if (st == QKV_OK && ferror(f)) st = qkv_error_set(QKV_ERR_IO, "%s: read error", path);
    if (st == QKV_OK && s.n) { /* a last sentence without its blank line */
        s.first_line = s.line[0];
        st = sentence_end(&s, tagset, path, fn, user);
        n_sent++;
    }
    if (st == QKV_OK && n_sent == 0) st = qkv_error_set(QKV_ERR_FORMAT, "%s: no sentences", path);
    free(buf);
    sentence_free(&s);
    fclose(f);
    return st;
}

/* ---- vocabulary and tags ----------------------------------------------------------------------------------------- */

/* A token as the vocabulary sees it (lowercased when the run says so): malloc'd. */
static char *vocab_form(const task *t, const char *tok) {
    if (!t->wopts.lowercase) return strdup(tok);
    char **pieces = NULL;
    size_t n = 0;
    qkv_word_opts o = {.lowercase = true};
    if (qkv_word_split(tok, strlen(tok), &o, &pieces, &n) != QKV_OK) return NULL;
    char *out = strdup(n ? pieces[0] : tok); /* Brown tokens hold no whitespace: one piece */
    free(pieces);
    return out;
}

typedef struct counting {
    const task *t;
    qkv_token_counter *words, *tags;
} counting;

static qkv_status count_sentence(void *user, const char *path, const sentence *s) {
    (void)path;
    counting *c = user;
    qkv_status st = QKV_OK;
    for (size_t i = 0; st == QKV_OK && i < s->n; i++) {
        char *w = vocab_form(c->t, s->tok[i]);
        st = w ? qkv_token_counter_add(c->words, w, strlen(w)) : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        if (st == QKV_OK) st = qkv_token_counter_add(c->tags, s->tag[i], strlen(s->tag[i]));
        free(w);
    }
    return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The tags in byte order into t->labels, and (fresh) into labels.txt. */
static qkv_status tags_from_vocab(task *t, const qkv_vocab *tags, const char *path) {
    size_t n = qkv_vocab_size(tags);
    t->labels = calloc(n ? n : 1, sizeof *t->labels);
    if (!t->labels) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = qkv_vocab_token(tags, (int32_t)i, &len);
        if (!(t->labels[i] = strndup(s, len))) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        t->n_labels = (int)i + 1;
    }
    qsort(t->labels, n, sizeof *t->labels, cmp_str);
    FILE *f = fopen(path, "w");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    for (size_t i = 0; i < n; i++) fprintf(f, "%s\n", t->labels[i]);
    if (fclose(f)) return qkv_error_set(QKV_ERR_IO, "%s: write error", path);
    return QKV_OK;
}

static qkv_status load_tags(task *t, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    qkv_status st = QKV_OK;
    while (st == QKV_OK && (got = getline(&buf, &cap, f)) > 0) {
        if (buf[got - 1] == '\n') buf[--got] = '\0';
        if (!got) continue;
        char **l = realloc(t->labels, sizeof *l * (size_t)(t->n_labels + 1));
        if (!l || !(l[t->n_labels] = strdup(buf))) {
            if (l) t->labels = l;
            st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            break;
        }
        t->labels = l;
        t->n_labels++;
    }
    free(buf);
    fclose(f);
    if (st == QKV_OK && t->n_labels == 0) st = qkv_error_set(QKV_ERR_FORMAT, "%s: no tags", path);
    return st;
}

qkv_status qkv__tagging_prepare(task *t, const qkv_run_settings *rs, const char *dir, bool fresh) {
    const char *ts = rs->data.tagset;
    t->tagset = !strcmp(ts, "brown") ? TAGSET_BROWN : !strcmp(ts, "names") ? TAGSET_NAMES : TAGSET_UNIVERSAL;
    t->tok = TOK_WORD;
    t->wopts.lowercase = rs->data.lowercase;
    t->max_len = rs->data.max_len;
    t->cls = -1;
    bool wordpiece = !strcmp(rs->data.tokenizer, "wordpiece");
    if (strcmp(rs->data.tokenizer, "auto") && strcmp(rs->data.tokenizer, "word") && !wordpiece)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "data.tokenizer: tagging data is already split into words (auto "
                             "or word; wordpiece: each word as its first WordPiece of data.vocab_file)");
    if (wordpiece && !*rs->data.vocab_file)
        return qkv_error_set(QKV_ERR_INVALID, "data.vocab_file: the wordpiece tokenizer needs a vocab.txt");
    char *vocab_path = qkv_fs_join(dir, "vocab.txt"), *label_path = qkv_fs_join(dir, "labels.txt");
    qkv_status st = vocab_path && label_path ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (st == QKV_OK && fresh) {
        counting c = {t, qkv_token_counter_new(), qkv_token_counter_new()};
        qkv_vocab *tags = NULL;
        if (!c.words || !c.tags) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        if (st == QKV_OK) st = read_sentences(rs->data.train, t->tagset, count_sentence, &c);
        if (st == QKV_OK && !(t->vocab = qkv_vocab_build(c.words, QKV_SPECIAL_PAD | QKV_SPECIAL_UNK, 0,
                                                         rs->data.min_freq, (size_t)rs->data.max_vocab)))
            st = qkv_last_status();
        if (st == QKV_OK) st = qkv_vocab_save(t->vocab, vocab_path);
        if (st == QKV_OK && !(tags = qkv_vocab_build(c.tags, 0, 0, 1, 0))) st = qkv_last_status();
        if (st == QKV_OK) st = tags_from_vocab(t, tags, label_path);
        qkv_vocab_free(tags);
        qkv_token_counter_free(c.words);
        qkv_token_counter_free(c.tags);
    } else if (st == QKV_OK) {
        if (!(t->vocab = qkv_vocab_load(vocab_path))) st = qkv_last_status();
        if (st == QKV_OK) st = load_tags(t, label_path);
    }
    if (st == QKV_OK) {
        t->vocab_size = (int64_t)qkv_vocab_size(t->vocab);
        t->pad = qkv_vocab_id(t->vocab, "<pad>", 5);
        t->unk = qkv_vocab_id(t->vocab, "<unk>", 5);
        if (t->pad < 0) t->pad = 0;
    }
    /* A pretrained encoder's vocabulary: one id a word (its first piece) keeps tags and tokens aligned. The word
     * vocabulary above still names the words the training data knows. */
    if (st == QKV_OK && wordpiece) {
        qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
        o.lowercase = rs->data.lowercase;
        if (!(t->wp = qkv_wordpiece_load(rs->data.vocab_file, &o))) st = qkv_last_status();
        if (st == QKV_OK) {
            t->tok = TOK_WORDPIECE;
            t->vocab_size = (int64_t)qkv_wordpiece_vocab_size(t->wp);
            t->pad = qkv_wordpiece_id(t->wp, "[PAD]");
            t->unk = qkv_wordpiece_id(t->wp, "[UNK]");
            if (t->pad < 0) t->pad = 0;
        }
    }
    free(vocab_path);
    free(label_path);
    return st;
}

/* ---- encoding ---------------------------------------------------------------------------------------------------- */

qkv_status qkv__tagging_encode(const task *t, char *const *toks, size_t n, int32_t *ids) {
    for (size_t i = 0; t->wp && i < n; i++) {
        qkv_encoding e = {0};
        qkv_status st = qkv_wordpiece_encode(t->wp, toks[i], strlen(toks[i]), NULL, 0, false, &e);
        ids[i] = st == QKV_OK && e.n ? e.ids[0] : t->unk;
        qkv_encoding_free(&e);
        if (st) return st;
    }
    for (size_t i = 0; !t->wp && i < n; i++) {
        char *w = vocab_form(t, toks[i]);
        if (!w) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        int32_t id = qkv_vocab_id(t->vocab, w, strlen(w));
        ids[i] = id >= 0 ? id : t->unk;
        free(w);
    }
    return QKV_OK;
}

static int find_tag(const task *t, const char *tag) {
    int lo = 0, hi = t->n_labels - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(t->labels[mid], tag);
        if (!c) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

typedef struct loading {
    task *t;
    split *s;
} loading;

static qkv_status load_sentence(void *user, const char *path, const sentence *sen) {
    loading *L = user;
    task *t = L->t;
    split *s = L->s;
    if ((int64_t)sen->n > t->max_len)
        return qkv_error_set(QKV_ERR_FORMAT, "%s:%ld: a sentence of %zu tokens, longer than data.max_len %lld", path,
                             sen->first_line, sen->n, (long long)t->max_len);
    int64_t n = (int64_t)sen->n;
    qkv_status st = qkv__split_reserve(s, 2 * n);
    example *e = st == QKV_OK ? qkv__split_example(s) : NULL;
    if (!e) return st ? st : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    e->off = s->pool_n;
    e->n = n;
    if ((st = qkv__tagging_encode(t, sen->tok, sen->n, s->pool + s->pool_n))) return st;
    s->pool_n += n;
    e->toff = s->pool_n;
    e->tn = n;
    for (size_t i = 0; i < sen->n; i++) {
        int id = find_tag(t, sen->tag[i]);
        static const char *const set[] = {"universal", "brown", "names"};
        if (id < 0)
            return qkv_error_set(QKV_ERR_FORMAT, "%s:%ld: tag '%s' is not one of the %d tags of the training data "
                                 "(data.tagset %s)", path, sen->line[i], sen->tag[i], t->n_labels, set[t->tagset]);
        s->pool[s->pool_n++] = id;
        s->n_chars += (int64_t)strlen(sen->tok[i]);
    }
    return QKV_OK;
}

qkv_status qkv__tagging_load(task *t, const char *path, split *s) {
    memset(s, 0, sizeof *s);
    loading L = {t, s};
    qkv_status st = read_sentences(path, t->tagset, load_sentence, &L);
    if (st != QKV_OK) qkv__split_free(s);
    return st;
}

bool qkv__tagging_is_bio(const task *t) {
    bool entity = false;
    for (int i = 0; i < t->n_labels; i++) {
        const char *l = t->labels[i];
        if (!strcmp(l, "O")) continue;
        if ((l[0] != 'B' && l[0] != 'I') || l[1] != '-' || !l[2]) return false;
        entity = true;
    }
    return entity;
}

/* ---- free text --------------------------------------------------------------------------------------------------- */

static bool punct(char c) { return strchr(".,;:!?\"()[]{}`", c) != NULL && c; }

static bool known(const task *t, const char *w, size_t len) {
    if (!t || !t->vocab || len > 256) return false;
    char buf[257];
    memcpy(buf, w, len);
    buf[len] = '\0';
    char *v = vocab_form(t, buf);
    bool k = v && qkv_vocab_id(t->vocab, v, strlen(v)) >= 0;
    free(v);
    return k;
}

qkv_status qkv__tagging_split(const task *t, const char *text, char ***toks, size_t *n) {
    /* Pieces point into one block after the pointer array, as qkv_word_split's. */
    size_t len = strlen(text), max = 2 * len + 1;
    char **out = malloc(sizeof *out * (max + 1) + 2 * len + 2);
    if (!out) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    char *w = (char *)(out + max + 1);
    size_t k = 0, i = 0;
    while (i < len) {
        while (i < len && isspace((unsigned char)text[i])) i++;
        size_t a = i;
        while (i < len && !isspace((unsigned char)text[i])) i++;
        size_t b = i;
        size_t lead = a, trail = b;
        while (lead < b && punct(text[lead])) lead++;
        while (trail > lead && punct(text[trail - 1])) trail--;
        if (trail > lead && trail < b && known(t, text + lead, b - lead)) trail = b; /* "Mr." */
        for (size_t p = a; p < lead; p++) { /* each leading mark its own token */
            out[k++] = w;
            *w++ = text[p];
            *w++ = '\0';
        }
        if (trail > lead) {
            out[k++] = w;
            memcpy(w, text + lead, trail - lead);
            w += trail - lead;
            *w++ = '\0';
        }
        for (size_t p = trail; p < b && p >= lead; p++) {
            out[k++] = w;
            *w++ = text[p];
            *w++ = '\0';
        }
    }
    *toks = out;
    *n = k;
    return QKV_OK;
}
