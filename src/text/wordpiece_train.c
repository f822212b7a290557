/* WordPiece vocabulary training (text.h, qkv_wordpiece_train): BPE over BERT's words with "##" on non-initial
 * symbols, as Hugging Face's WordPieceTrainer. Each merge touches only the words that hold its pair (a per-pair
 * list of words) and the best pair comes from a max-heap whose stale entries are re-queued when popped: pair counts
 * only ever fall, except for the new pairs a merge creates, which are queued when it ends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/text.h"
#include "text/text_internal.h"

static const char *const SPECIALS[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
enum { N_SPECIALS = 5 };

typedef struct pair_slot {
    uint64_t key; /* left << 32 | right */
    int64_t count;
    int32_t *words; /* words holding the pair (maybe no longer: checked when used) */
    size_t n, cap;
    uint64_t queued; /* merge number that last queued it */
} pair_slot;

typedef struct heap_entry {
    int64_t count;
    uint64_t key;
} heap_entry;

typedef struct trainer {
    qkv__strmap words;
    int64_t *wcount;
    size_t wcap;
    qkv__u64map chars; /* code point -> occurrences */
    qkv__strmap tokens; /* token string (with "##") -> id among the learned tokens */
    int32_t **wsym;
    size_t *wlen;
    uint64_t *wstamp;
    qkv__u64map pair_index; /* key -> slot */
    pair_slot *slots;
    size_t n_slots, cap_slots;
    heap_entry *heap;
    size_t n_heap, cap_heap;
    int64_t max_chars;
} trainer;

static qkv_status nomem(void) { return qkv_error_set(QKV_ERR_NOMEM, "qkv_wordpiece_train: out of memory"); }

static qkv_status count_word(void *ctx, const char *w, size_t len, size_t n_chars) {
    trainer *t = ctx;
    if ((int64_t)n_chars > t->max_chars) return QKV_OK;
    int64_t e = qkv__strmap_find(&t->words, w, len);
    if (e < 0) {
        if ((e = qkv__strmap_insert(&t->words, w, len, 0)) < 0) return qkv_last_status();
        if ((size_t)e >= t->wcap) {
            size_t cap = t->wcap ? 2 * t->wcap : 4096;
            int64_t *p = realloc(t->wcount, cap * sizeof *p);
            if (!p) return nomem();
            t->wcount = p, t->wcap = cap;
        }
        t->wcount[e] = 0;
    }
    t->wcount[e]++;
    return QKV_OK;
}

static int cmp_bytes(const char *a, size_t la, const char *b, size_t lb) {
    int r = memcmp(a, b, la < lb ? la : lb);
    return r ? r : (la < lb ? -1 : la > lb);
}

static int cmp_tok(const trainer *t, size_t a, size_t b) {
    const qkv__strmap *m = &t->tokens;
    return cmp_bytes(qkv__strmap_key(m, a), m->key_len[a], qkv__strmap_key(m, b), m->key_len[b]);
}

/* Is heap entry x better than y: higher count, then smaller (left, right). */
static bool better(const trainer *t, const heap_entry *x, const heap_entry *y) {
    if (x->count != y->count) return x->count > y->count;
    int r = cmp_tok(t, x->key >> 32, y->key >> 32);
    return (r ? r : cmp_tok(t, (uint32_t)x->key, (uint32_t)y->key)) < 0;
}

static qkv_status heap_push(trainer *t, int64_t count, uint64_t key) {
    if (t->n_heap == t->cap_heap) {
        size_t cap = t->cap_heap ? 2 * t->cap_heap : 4096;
        heap_entry *p = realloc(t->heap, cap * sizeof *p);
        if (!p) return nomem();
        t->heap = p, t->cap_heap = cap;
    }
    size_t i = t->n_heap++;
    t->heap[i] = (heap_entry){count, key};
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!better(t, &t->heap[i], &t->heap[up])) break;
        heap_entry tmp = t->heap[i];
        t->heap[i] = t->heap[up], t->heap[up] = tmp;
        i = up;
    }
    return QKV_OK;
}

static heap_entry heap_pop(trainer *t) {
    heap_entry top = t->heap[0];
    t->heap[0] = t->heap[--t->n_heap];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, b = i;
        if (l < t->n_heap && better(t, &t->heap[l], &t->heap[b])) b = l;
        if (r < t->n_heap && better(t, &t->heap[r], &t->heap[b])) b = r;
        if (b == i) break;
        heap_entry tmp = t->heap[i];
        t->heap[i] = t->heap[b], t->heap[b] = tmp;
        i = b;
    }
    return top;
}

/* The slot of a pair, created (count 0) when absent; NULL on NOMEM. */
static pair_slot *slot_of(trainer *t, uint64_t key) {
    int64_t *v = qkv__u64map_get(&t->pair_index, key);
    if (v) return &t->slots[*v];
    if (t->n_slots == t->cap_slots) {
        size_t cap = t->cap_slots ? 2 * t->cap_slots : 4096;
        pair_slot *p = realloc(t->slots, cap * sizeof *p);
        if (!p) {
            nomem();
            return NULL;
        }
        t->slots = p, t->cap_slots = cap;
    }
    if (!(v = qkv__u64map_put(&t->pair_index, key, (int64_t)t->n_slots))) return NULL;
    pair_slot *s = &t->slots[t->n_slots++];
    *s = (pair_slot){.key = key};
    return s;
}

static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

/* count += delta for pair (a, b) in word w; a word gaining the pair joins its list. */
static pair_slot *add_pair(trainer *t, int32_t a, int32_t b, int64_t delta, int32_t w) {
    pair_slot *s = slot_of(t, pair_key(a, b));
    if (!s) return NULL;
    s->count += delta;
    if (delta > 0 && (!s->n || s->words[s->n - 1] != w)) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 4;
            int32_t *p = realloc(s->words, cap * sizeof *p);
            if (!p) {
                nomem();
                return NULL;
            }
            s->words = p, s->cap = cap;
        }
        s->words[s->n++] = w;
    }
    return s;
}

typedef struct char_count {
    int32_t cp;
    int64_t count;
} char_count;

static int by_count(const void *x, const void *y) {
    const char_count *a = x, *b = y;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return (a->cp > b->cp) - (a->cp < b->cp);
}

static int by_cp(const void *x, const void *y) {
    const char_count *a = x, *b = y;
    return (a->cp > b->cp) - (a->cp < b->cp);
}

static qkv_status write_vocab(const trainer *t, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    for (int i = 0; i < N_SPECIALS; i++) fprintf(f, "%s\n", SPECIALS[i]);
    for (size_t i = 0; i < t->tokens.n; i++) fprintf(f, "%s\n", qkv__strmap_key(&t->tokens, i));
    return fclose(f) ? qkv_error_set(QKV_ERR_IO, "%s: write error", path) : QKV_OK;
}

static void trainer_free(trainer *t) {
    for (size_t w = 0; t->wsym && w < t->words.n; w++) free(t->wsym[w]);
    for (size_t i = 0; i < t->n_slots; i++) free(t->slots[i].words);
    free(t->slots);
    free(t->heap);
    free(t->wsym);
    free(t->wlen);
    free(t->wstamp);
    free(t->wcount);
    qkv__strmap_free(&t->words);
    qkv__strmap_free(&t->tokens);
    qkv__u64map_free(&t->chars);
    qkv__u64map_free(&t->pair_index);
}

/* Symbols of every word over the kept alphabet (words with a dropped character get none), and their pairs. */
static qkv_status split_words(trainer *t) {
    size_t nw = t->words.n;
    t->wsym = calloc(nw + 1, sizeof *t->wsym);
    t->wlen = calloc(nw + 1, sizeof *t->wlen);
    t->wstamp = calloc(nw + 1, sizeof *t->wstamp);
    if (!t->wsym || !t->wlen || !t->wstamp) return nomem();
    char sym[8] = "##";
    for (size_t w = 0; w < nw; w++) {
        const unsigned char *s = (const unsigned char *)qkv__strmap_key(&t->words, w);
        size_t len = t->words.key_len[w], n = 0;
        if (!(t->wsym[w] = malloc(len * sizeof **t->wsym))) return nomem();
        bool ok = true;
        for (size_t p = 0; p < len && ok;) {
            int32_t cp;
            int k = qkv__utf8_decode(s + p, len - p, &cp);
            memcpy(sym + 2, s + p, (size_t)k);
            int64_t id = n ? qkv__strmap_find(&t->tokens, sym, 2 + (size_t)k)
                           : qkv__strmap_find(&t->tokens, sym + 2, (size_t)k);
            ok = id >= 0;
            t->wsym[w][n++] = (int32_t)id;
            p += (size_t)k;
        }
        t->wlen[w] = ok ? n : 0;
        for (size_t i = 0; ok && i + 1 < n; i++)
            if (!add_pair(t, t->wsym[w][i], t->wsym[w][i + 1], t->wcount[w], (int32_t)w)) return qkv_last_status();
    }
    return QKV_OK;
}

/* The alphabet: the limit most frequent characters (0: all), each as "c" then, after all of those, as "##c". */
static qkv_status build_alphabet(trainer *t, size_t limit) {
    for (size_t w = 0; w < t->words.n; w++) {
        const unsigned char *s = (const unsigned char *)qkv__strmap_key(&t->words, w);
        size_t len = t->words.key_len[w];
        for (size_t p = 0; p < len;) {
            int32_t cp;
            int k = qkv__utf8_decode(s + p, len - p, &cp);
            int64_t *c = qkv__u64map_put(&t->chars, (uint64_t)cp, 0);
            if (!c) return qkv_last_status();
            *c += t->wcount[w];
            p += (size_t)(k ? k : 1);
        }
    }
    char_count *cc = malloc((t->chars.n + 1) * sizeof *cc);
    if (!cc) return nomem();
    size_t n = 0;
    for (size_t i = 0; i < t->chars.cap; i++)
        if (t->chars.keys[i] != UINT64_MAX) cc[n++] = (char_count){(int32_t)t->chars.keys[i], t->chars.vals[i]};
    qsort(cc, n, sizeof *cc, by_count);
    if (limit && n > limit) n = limit;
    qsort(cc, n, sizeof *cc, by_cp);
    char sym[8] = "##";
    qkv_status st = QKV_OK;
    for (int pass = 0; pass < 2 && !st; pass++)
        for (size_t i = 0; i < n && !st; i++) {
            int k = qkv__utf8_encode(cc[i].cp, sym + 2);
            const char *p = pass ? sym : sym + 2;
            size_t l = (size_t)k + (pass ? 2 : 0);
            if (qkv__strmap_insert(&t->tokens, p, l, 0) < 0) st = qkv_last_status();
        }
    free(cc);
    return st;
}

/* Merge pair (a, b) into token m in every word holding it; new pairs (with m) are queued at the end. */
static qkv_status apply_merge(trainer *t, size_t slot, int32_t m, uint64_t stamp) {
    int32_t a = (int32_t)(t->slots[slot].key >> 32), b = (int32_t)(uint32_t)t->slots[slot].key;
    int32_t *list = t->slots[slot].words;
    size_t n_list = t->slots[slot].n;
    t->slots[slot].words = NULL, t->slots[slot].n = t->slots[slot].cap = 0;
    uint64_t *fresh = NULL;
    size_t n_fresh = 0, cap_fresh = 0;
    qkv_status st = QKV_OK;
#define TOUCH(x, y, d)                                                                                              \
    do {                                                                                                            \
        pair_slot *s_ = add_pair(t, (x), (y), (d), (int32_t)w);                                                     \
        if (!s_) goto fail;                                                                                         \
        if ((d) > 0 && s_->queued != stamp) {                                                                       \
            s_->queued = stamp;                                                                                     \
            if (n_fresh == cap_fresh) {                                                                             \
                cap_fresh = cap_fresh ? 2 * cap_fresh : 64;                                                         \
                uint64_t *p_ = realloc(fresh, cap_fresh * sizeof *p_);                                              \
                if (!p_) {                                                                                          \
                    nomem();                                                                                        \
                    goto fail;                                                                                      \
                }                                                                                                   \
                fresh = p_;                                                                                         \
            }                                                                                                       \
            fresh[n_fresh++] = s_->key;                                                                             \
        }                                                                                                           \
    } while (0)
    for (size_t li = 0; li < n_list; li++) {
        size_t w = (size_t)list[li];
        if (t->wstamp[w] == stamp) continue;
        t->wstamp[w] = stamp;
        int32_t *s = t->wsym[w];
        size_t len = t->wlen[w], k = 0;
        int64_t c = t->wcount[w];
        for (size_t i = 0; i < len; i++) {
            if (i + 1 < len && s[i] == a && s[i + 1] == b) {
                if (k > 0) {
                    TOUCH(s[k - 1], a, -c);
                    TOUCH(s[k - 1], m, c);
                }
                if (i + 2 < len) {
                    TOUCH(b, s[i + 2], -c);
                    TOUCH(m, s[i + 2], c);
                }
                TOUCH(a, b, -c);
                s[k++] = m;
                i++;
            } else {
                s[k++] = s[i];
            }
        }
        t->wlen[w] = k;
    }
#undef TOUCH
    for (size_t i = 0; i < n_fresh && !st; i++) {
        int64_t *v = qkv__u64map_get(&t->pair_index, fresh[i]);
        st = heap_push(t, t->slots[*v].count, fresh[i]);
    }
    free(fresh);
    free(list);
    return st;
fail:
    free(fresh);
    free(list);
    return qkv_last_status();
}

qkv_status qkv_wordpiece_train(const char *const *texts, const size_t *lens, size_t ntexts, size_t vocab_size,
                               int64_t min_freq, size_t limit_alphabet, const qkv_wordpiece_opts *opts,
                               const char *vocab_txt) {
    if ((ntexts && (!texts || !lens)) || !vocab_txt)
        return qkv_error_set(QKV_ERR_INVALID, "qkv_wordpiece_train: NULL argument");
    if (vocab_size < N_SPECIALS + 1 || vocab_size > INT32_MAX)
        return qkv_error_set(QKV_ERR_INVALID, "qkv_wordpiece_train: vocab_size %zu must be in [%d, 2^31)", vocab_size,
                             N_SPECIALS + 1);
    if (min_freq < 1)
        return qkv_error_set(QKV_ERR_INVALID, "qkv_wordpiece_train: min_freq %lld < 1", (long long)min_freq);
    qkv_wordpiece_opts o = opts ? *opts : qkv_wordpiece_default_opts();
    trainer t = {.max_chars = o.max_word_chars > 0 ? o.max_word_chars : 100};
    qkv__buf joined = {0};
    qkv_status st = QKV_OK;
    for (size_t i = 0; i < ntexts && !st; i++) st = qkv__wordpiece_words(&o, texts[i], lens[i], count_word, &t);
    if (!st) st = build_alphabet(&t, limit_alphabet);
    if (!st) st = split_words(&t);
    for (size_t i = 0; i < t.n_slots && !st; i++)
        if (t.slots[i].count >= min_freq) st = heap_push(&t, t.slots[i].count, t.slots[i].key);
    for (uint64_t stamp = 1; !st && t.tokens.n + N_SPECIALS < vocab_size && t.n_heap; stamp++) {
        heap_entry top = heap_pop(&t);
        size_t slot = (size_t)*qkv__u64map_get(&t.pair_index, top.key);
        int64_t cur = t.slots[slot].count;
        if (cur != top.count) { /* stale: counts only fall, so re-queue with the current one */
            if (cur >= min_freq) st = heap_push(&t, cur, top.key);
            stamp--;
            continue;
        }
        int32_t a = (int32_t)(top.key >> 32), b = (int32_t)(uint32_t)top.key;
        const char *rb = qkv__strmap_key(&t.tokens, (size_t)b);
        size_t lb = t.tokens.key_len[b];
        if (lb >= 2 && rb[0] == '#' && rb[1] == '#') rb += 2, lb -= 2;
        joined.n = 0;
        if (!qkv__buf_put(&joined, qkv__strmap_key(&t.tokens, (size_t)a), t.tokens.key_len[a]) ||
            !qkv__buf_put(&joined, rb, lb)) {
            st = nomem();
            break;
        }
        int64_t m = qkv__strmap_find(&t.tokens, joined.p, joined.n);
        if (m < 0 && (m = qkv__strmap_insert(&t.tokens, joined.p, joined.n, 0)) < 0) {
            st = qkv_last_status();
            break;
        }
        st = apply_merge(&t, slot, (int32_t)m, stamp);
    }
    if (!st) st = write_vocab(&t, vocab_txt);
    free(joined.p);
    trainer_free(&t);
    return st;
}
