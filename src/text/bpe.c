/* Byte-level BPE, GPT-2 compatible: loading vocab.json + merges.txt, encoding (pre-tokenise, then merge each
 * pre-token by rank with a min-heap, results cached per pre-token) and decoding to bytes. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/text.h"
#include "text/text_internal.h"

typedef struct special {
    char *text;
    size_t len;
    int32_t id;
} special;

struct qkv_bpe {
    qkv__strmap vocab;  /* token in byte-level unicode form -> id */
    int32_t n_ids;      /* 1 + largest id */
    int64_t *tok_entry; /* id -> vocab entry, -1 for unused ids */
    size_t *raw_off;    /* id -> its bytes in raw */
    uint32_t *raw_len;
    qkv__buf raw;
    int32_t byte_id[256];
    qkv__u64map merges; /* (left id << 32 | right id) -> (rank << 32 | merged id) */
    qkv__pretok *pretok;
    special *specials;
    size_t n_specials;
    bool specials_on;
    /* Word cache: pre-token bytes -> offset in cache_ids, where the count then the ids are stored. */
    qkv__strmap cache;
    int32_t *cache_ids;
    size_t cache_n, cache_cap;
    /* Scratch for merging one pre-token (grown as needed, never shrunk). */
    int32_t *sym, *next, *prev;
    uint64_t *heap;
    size_t scratch_cap;
};

enum { CACHE_MAX_WORD = 256, CACHE_MAX_IDS = 1 << 24 };

void qkv_bpe_free(qkv_bpe *b) {
    if (!b) return;
    qkv__strmap_free(&b->vocab);
    free(b->tok_entry);
    free(b->raw_off);
    free(b->raw_len);
    free(b->raw.p);
    qkv__u64map_free(&b->merges);
    qkv__pretok_free(b->pretok);
    for (size_t i = 0; i < b->n_specials; i++) free(b->specials[i].text);
    free(b->specials);
    qkv__strmap_free(&b->cache);
    free(b->cache_ids);
    free(b->sym);
    free(b->next);
    free(b->prev);
    free(b->heap);
    free(b);
}

size_t qkv_bpe_vocab_size(const qkv_bpe *b) { return b ? (size_t)b->n_ids : 0; }

const char *qkv_bpe_token(const qkv_bpe *b, int32_t id) {
    if (!b || id < 0 || id >= b->n_ids || b->tok_entry[id] < 0) {
        qkv_error_set(QKV_ERR_RANGE, "qkv_bpe_token: unknown id %d", (int)id);
        return NULL;
    }
    return qkv__strmap_key(&b->vocab, (size_t)b->tok_entry[id]);
}

int32_t qkv_bpe_id(const qkv_bpe *b, const char *tok) {
    if (!b || !tok) return -1;
    int64_t e = qkv__strmap_find(&b->vocab, tok, strlen(tok));
    return e < 0 ? -1 : b->vocab.val[e];
}

/* The bytes a token stands for: each character mapped back through the byte-to-unicode table; a token with
 * characters outside it (an added token such as "<|endoftext|>" is plain ASCII and inside) stands for its own
 * UTF-8. */
static bool token_raw_bytes(const char *tok, size_t len, qkv__buf *out) {
    size_t start = out->n;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        int k = qkv__utf8_decode((const unsigned char *)tok + i, len - i, &cp);
        int byte = k ? qkv__unicode_to_byte(cp) : -1;
        if (byte < 0) {
            out->n = start;
            return qkv__buf_put(out, tok, len);
        }
        unsigned char c = (unsigned char)byte;
        if (!qkv__buf_put(out, &c, 1)) return false;
        i += (size_t)k;
    }
    return true;
}

/* Fill id -> token tables once all ids are known. */
static bool build_id_tables(qkv_bpe *b) {
    size_t n = (size_t)b->n_ids;
    b->tok_entry = malloc((n + 1) * sizeof *b->tok_entry);
    b->raw_off = calloc(n + 1, sizeof *b->raw_off);
    b->raw_len = calloc(n + 1, sizeof *b->raw_len);
    if (!b->tok_entry || !b->raw_off || !b->raw_len) {
        qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_load: out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) b->tok_entry[i] = -1;
    for (size_t e = 0; e < b->vocab.n; e++) {
        int32_t id = b->vocab.val[e];
        b->tok_entry[id] = (int64_t)e;
        b->raw_off[id] = b->raw.n;
        if (!token_raw_bytes(qkv__strmap_key(&b->vocab, e), b->vocab.key_len[e], &b->raw)) return false;
        b->raw_len[id] = (uint32_t)(b->raw.n - b->raw_off[id]);
    }
    return true;
}

static bool load_vocab_json(qkv_bpe *b, const char *path) {
    size_t len;
    char *data = qkv__read_file(path, &len);
    if (!data) return false;
    cJSON *root = cJSON_ParseWithLength(data, len);
    free(data);
    bool ok = false;
    if (!root) {
        qkv_error_set(QKV_ERR_FORMAT, "%s: not valid JSON", path);
        return false;
    }
    if (!cJSON_IsObject(root)) {
        qkv_error_set(QKV_ERR_FORMAT, "%s: expected a JSON object mapping tokens to ids", path);
        goto done;
    }
    int32_t max_id = -1;
    for (cJSON *it = root->child; it; it = it->next) {
        double d = it->valuedouble;
        if (!cJSON_IsNumber(it) || !(d >= 0 && d < INT32_MAX) || d != (double)(int32_t)d) { /* cast only in range */
            qkv_error_set(QKV_ERR_FORMAT, "%s: token \"%.64s\": id is not an integer in [0, 2^31)", path,
                          it->string);
            goto done;
        }
        size_t tl = strlen(it->string);
        if (!tl || qkv__strmap_find(&b->vocab, it->string, tl) >= 0) {
            qkv_error_set(QKV_ERR_FORMAT, "%s: %s token \"%.64s\"", path, tl ? "duplicate" : "empty", it->string);
            goto done;
        }
        if (qkv__strmap_insert(&b->vocab, it->string, tl, (int32_t)d) < 0) goto done;
        if ((int32_t)d > max_id) max_id = (int32_t)d;
    }
    if (b->vocab.n > (size_t)max_id + 1 || max_id < 0) { /* more tokens than ids: some id is used twice */
        qkv_error_set(QKV_ERR_FORMAT, "%s: %s", path, max_id < 0 ? "empty vocabulary" : "an id is used twice");
        goto done;
    }
    b->n_ids = max_id + 1;
    ok = true;
done:
    cJSON_Delete(root);
    return ok;
}

static int32_t lookup(const qkv_bpe *b, const char *s, size_t len) {
    int64_t e = qkv__strmap_find(&b->vocab, s, len);
    return e < 0 ? -1 : b->vocab.val[e];
}

static bool load_merges(qkv_bpe *b, const char *path) {
    size_t len;
    char *data = qkv__read_file(path, &len);
    if (!data) return false;
    qkv__buf joined = {0};
    size_t pos = 0, line = 0;
    int64_t rank = 0;
    bool ok = false;
    while (pos < len) {
        line++;
        char *nl = memchr(data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - data) : len, ll = end - pos;
        const char *s = data + pos;
        if (ll && s[ll - 1] == '\r') ll--;
        pos = end + 1;
        if (line == 1 && ll >= 8 && memcmp(s, "#version", 8) == 0) continue;
        const char *sp = memchr(s, ' ', ll);
        if (!ll || !sp || sp == s || sp == s + ll - 1 || memchr(sp + 1, ' ', (size_t)(s + ll - sp - 1))) {
            qkv_error_set(QKV_ERR_FORMAT, "%s:%zu: expected two tokens separated by one space, got \"%.*s\"", path,
                          line, (int)(ll > 80 ? 80 : ll), s);
            goto done;
        }
        size_t la = (size_t)(sp - s), lb = ll - la - 1;
        int32_t a = lookup(b, s, la), c = lookup(b, sp + 1, lb);
        joined.n = 0;
        if (!qkv__buf_put(&joined, s, la) || !qkv__buf_put(&joined, sp + 1, lb)) goto done;
        int32_t m = lookup(b, joined.p, joined.n);
        if (a < 0 || c < 0 || m < 0) {
            qkv_error_set(QKV_ERR_FORMAT, "%s:%zu: merge \"%.*s\": token \"%.*s\" is not in the vocabulary", path,
                          line, (int)(ll > 80 ? 80 : ll), s, (int)(a < 0 ? la : c < 0 ? lb : joined.n),
                          a < 0 ? s : c < 0 ? sp + 1 : joined.p);
            goto done;
        }
        int64_t *v = qkv__u64map_put(&b->merges, (uint64_t)a << 32 | (uint32_t)c, -1);
        if (!v) goto done;
        if (*v < 0) *v = rank << 32 | m; /* a repeated merge keeps its first (best) rank */
        rank++;
    }
    ok = true;
done:
    free(joined.p);
    free(data);
    return ok;
}

qkv_bpe *qkv_bpe_load(const char *vocab_json, const char *merges_txt) {
    if (!vocab_json || !merges_txt) {
        qkv_error_set(QKV_ERR_INVALID, "qkv_bpe_load: NULL path");
        return NULL;
    }
    qkv_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_load: out of memory");
        return NULL;
    }
    b->specials_on = true;
    if (!load_vocab_json(b, vocab_json) || !load_merges(b, merges_txt) || !build_id_tables(b)) goto fail;
    for (unsigned c = 0; c < 256; c++) {
        char u[4];
        int k = qkv__utf8_encode(qkv__byte_to_unicode(c), u);
        b->byte_id[c] = lookup(b, u, (size_t)k);
        if (b->byte_id[c] < 0) {
            qkv_error_set(QKV_ERR_FORMAT, "%s: no token for byte 0x%02x (\"%.*s\"): not a byte-level vocabulary",
                          vocab_json, c, k, u);
            goto fail;
        }
    }
    if (!(b->pretok = qkv__pretok_new())) goto fail;
    if (lookup(b, "<|endoftext|>", 13) >= 0 && qkv_bpe_add_special(b, "<|endoftext|>")) goto fail;
    return b;
fail:
    qkv_bpe_free(b);
    return NULL;
}

qkv_status qkv_bpe_add_special(qkv_bpe *b, const char *tok) {
    if (!b || !tok || !*tok) return qkv_error_set(QKV_ERR_INVALID, "qkv_bpe_add_special: NULL or empty token");
    size_t len = strlen(tok);
    for (size_t i = 0; i < b->n_specials; i++)
        if (b->specials[i].len == len && memcmp(b->specials[i].text, tok, len) == 0) return QKV_OK;
    int32_t id = lookup(b, tok, len);
    if (id < 0) { /* a new id at the end, standing for the token's own bytes */
        if (b->n_ids == INT32_MAX) return qkv_error_set(QKV_ERR_RANGE, "qkv_bpe_add_special: vocabulary full");
        int64_t *te = realloc(b->tok_entry, ((size_t)b->n_ids + 1) * sizeof *te);
        if (te) b->tok_entry = te;
        size_t *ro = realloc(b->raw_off, ((size_t)b->n_ids + 1) * sizeof *ro);
        if (ro) b->raw_off = ro;
        uint32_t *rl = realloc(b->raw_len, ((size_t)b->n_ids + 1) * sizeof *rl);
        if (rl) b->raw_len = rl;
        if (!te || !ro || !rl) return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_add_special: out of memory");
        id = b->n_ids;
        int64_t e = qkv__strmap_insert(&b->vocab, tok, len, id);
        if (e < 0) return qkv_last_status();
        b->tok_entry[id] = e;
        b->raw_off[id] = b->raw.n;
        if (!qkv__buf_put(&b->raw, tok, len)) return qkv_last_status();
        b->raw_len[id] = (uint32_t)len;
        b->n_ids++;
    }
    special *sp = realloc(b->specials, (b->n_specials + 1) * sizeof *sp);
    if (!sp) return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_add_special: out of memory");
    b->specials = sp;
    char *copy = malloc(len + 1);
    if (!copy) return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_add_special: out of memory");
    memcpy(copy, tok, len + 1);
    b->specials[b->n_specials++] = (special){copy, len, id};
    return QKV_OK;
}

void qkv_bpe_set_specials_enabled(qkv_bpe *b, bool on) {
    if (b) b->specials_on = on;
}

/* ---- encoding ---- */

typedef struct enc_state {
    qkv_bpe *b;
    const char *text;
    int32_t *ids;
    size_t *offsets; /* NULL when not wanted */
    size_t n, cap;
} enc_state;

static bool enc_reserve(enc_state *st, size_t extra) {
    if (st->n + extra <= st->cap) return true;
    size_t cap = st->cap ? st->cap : 64;
    while (cap < st->n + extra) cap *= 2;
    int32_t *ids = realloc(st->ids, cap * sizeof *ids);
    if (ids) st->ids = ids;
    if (!ids) return false;
    if (st->offsets) {
        size_t *off = realloc(st->offsets, 2 * cap * sizeof *off);
        if (!off) return false;
        st->offsets = off;
    }
    st->cap = cap;
    return true;
}

static bool scratch_reserve(qkv_bpe *b, size_t n) {
    if (n <= b->scratch_cap) return true;
    size_t cap = b->scratch_cap ? b->scratch_cap : 64;
    while (cap < n) cap *= 2;
    int32_t *s = realloc(b->sym, cap * sizeof *s);
    if (s) b->sym = s;
    int32_t *nx = realloc(b->next, cap * sizeof *nx);
    if (nx) b->next = nx;
    int32_t *pv = realloc(b->prev, cap * sizeof *pv);
    if (pv) b->prev = pv;
    uint64_t *h = realloc(b->heap, 3 * cap * sizeof *h); /* len-1 pairs, then at most two per merge */
    if (h) b->heap = h;
    if (!s || !nx || !pv || !h) return false;
    b->scratch_cap = cap;
    return true;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
    return top;
}

/* Merge rank (and merged id) of the pair at symbol i and its successor, pushed as (rank << 32 | i): the heap
 * pops the lowest rank, then the leftmost position, as Hugging Face's BPE does. */
static void push_pair(qkv_bpe *b, size_t *hn, int32_t i) {
    int32_t j = b->next[i];
    if (j < 0) return;
    int64_t *v = qkv__u64map_get(&b->merges, (uint64_t)b->sym[i] << 32 | (uint32_t)b->sym[j]);
    if (v) heap_push(b->heap, hn, ((uint64_t)*v >> 32) << 32 | (uint32_t)i);
}

/* BPE of one pre-token: its ids appended to st. */
static qkv_status bpe_word(enc_state *st, size_t start, size_t end) {
    qkv_bpe *b = st->b;
    const unsigned char *w = (const unsigned char *)st->text + start;
    size_t len = end - start;
    int64_t ce = len <= CACHE_MAX_WORD ? qkv__strmap_find(&b->cache, (const char *)w, len) : -1;
    const int32_t *out;
    size_t nout;
    if (ce >= 0) {
        const int32_t *c = b->cache_ids + b->cache.val[ce];
        nout = (size_t)c[0];
        out = c + 1;
    } else {
        if (len >= INT32_MAX || !scratch_reserve(b, len))
            return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_encode: pre-token of %zu bytes too large", len);
        int32_t *sym = b->sym, *next = b->next, *prev = b->prev;
        for (size_t i = 0; i < len; i++) {
            sym[i] = b->byte_id[w[i]];
            next[i] = i + 1 < len ? (int32_t)i + 1 : -1;
            prev[i] = (int32_t)i - 1;
        }
        size_t hn = 0;
        for (size_t i = 0; i + 1 < len; i++) push_pair(b, &hn, (int32_t)i);
        while (hn) {
            uint64_t top = heap_pop(b->heap, &hn);
            int32_t i = (int32_t)(uint32_t)top, j = next[i];
            if (sym[i] < 0 || j < 0) continue; /* stale: i was merged away or is now last */
            int64_t *v = qkv__u64map_get(&b->merges, (uint64_t)sym[i] << 32 | (uint32_t)sym[j]);
            if (!v || (uint64_t)(*v >> 32) != top >> 32) continue; /* stale: the pair at i has changed */
            sym[i] = (int32_t)(uint32_t)*v;
            sym[j] = -1;
            next[i] = next[j];
            if (next[j] >= 0) prev[next[j]] = i;
            if (prev[i] >= 0) push_pair(b, &hn, prev[i]);
            push_pair(b, &hn, i);
        }
        /* Compact the surviving symbols in place (positions only grow along the list). */
        size_t k = 0;
        for (int32_t i = 0; i >= 0; i = next[i]) sym[k++] = sym[i];
        out = sym;
        nout = k;
        if (len <= CACHE_MAX_WORD) {
            if (b->cache_n + nout + 1 > CACHE_MAX_IDS) { /* bounded memory: start the cache afresh */
                qkv__strmap_free(&b->cache);
                b->cache_n = 0;
            }
            if (b->cache_n + nout + 1 > b->cache_cap) {
                size_t cap = b->cache_cap ? b->cache_cap * 2 : 4096;
                while (cap < b->cache_n + nout + 1) cap *= 2;
                int32_t *p = realloc(b->cache_ids, cap * sizeof *p);
                if (!p) return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_encode: out of memory");
                b->cache_ids = p;
                b->cache_cap = cap;
            }
            if (qkv__strmap_insert(&b->cache, (const char *)w, len, (int32_t)b->cache_n) < 0) return qkv_last_status();
            b->cache_ids[b->cache_n] = (int32_t)nout;
            memcpy(b->cache_ids + b->cache_n + 1, out, nout * sizeof *out);
            b->cache_n += nout + 1;
        }
    }
    if (!enc_reserve(st, nout)) return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_encode: out of memory");
    memcpy(st->ids + st->n, out, nout * sizeof *out);
    if (st->offsets) { /* the tokens' bytes tile the pre-token */
        size_t pos = start;
        for (size_t i = 0; i < nout; i++) {
            st->offsets[2 * (st->n + i)] = pos;
            pos += b->raw_len[out[i]];
            st->offsets[2 * (st->n + i) + 1] = pos;
        }
    }
    st->n += nout;
    return QKV_OK;
}

static qkv_status bpe_word_cb(void *ctx, size_t start, size_t end) { return bpe_word(ctx, start, end); }

/* Text between special tokens. */
static qkv_status encode_plain(enc_state *st, size_t start, size_t end) {
    if (end <= start) return QKV_OK;
    enc_state sub = *st;
    sub.text = st->text + start;
    /* Pre-token positions are relative to sub.text; shift the offsets written for them afterwards. */
    size_t first = st->n;
    qkv_status s = qkv__pretok_run(st->b->pretok, sub.text, end - start, bpe_word_cb, &sub);
    *st = sub;
    st->text -= start;
    if (s) return s;
    if (st->offsets)
        for (size_t i = 2 * first; i < 2 * st->n; i++) st->offsets[i] += start;
    return QKV_OK;
}

static qkv_status encode(qkv_bpe *b, const char *text, size_t len, enc_state *st) {
    if (!b || (!text && len)) return qkv_error_set(QKV_ERR_INVALID, "qkv_bpe_encode: NULL argument");
    st->b = b;
    st->text = text;
    size_t pos = 0;
    if (b->specials_on && b->n_specials) {
        /* Next occurrence of each special at or after pos, searched again only once passed, so many occurrences
         * of one special do not make the others rescan the text. The earliest wins, the longest at a tie. */
        size_t *next_at = malloc(b->n_specials * sizeof *next_at);
        if (!next_at) return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_encode: out of memory");
        for (size_t k = 0; k < b->n_specials; k++) next_at[k] = SIZE_MAX;
        for (;;) {
            size_t best = len, best_k = 0;
            for (size_t k = 0; k < b->n_specials; k++) {
                if (next_at[k] == SIZE_MAX || (next_at[k] < pos && next_at[k] != len)) {
                    const char *hit = memmem(text + pos, len - pos, b->specials[k].text, b->specials[k].len);
                    next_at[k] = hit ? (size_t)(hit - text) : len;
                }
                size_t at = next_at[k];
                if (at < best || (at == best && at < len && b->specials[k].len > b->specials[best_k].len))
                    best = at, best_k = k;
            }
            if (best == len) break;
            qkv_status s = encode_plain(st, pos, best);
            if (!s && !enc_reserve(st, 1)) s = qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_encode: out of memory");
            if (s) {
                free(next_at);
                return s;
            }
            st->ids[st->n] = b->specials[best_k].id;
            if (st->offsets) {
                st->offsets[2 * st->n] = best;
                st->offsets[2 * st->n + 1] = best + b->specials[best_k].len;
            }
            st->n++;
            pos = best + b->specials[best_k].len;
        }
        free(next_at);
    }
    return encode_plain(st, pos, len);
}

qkv_status qkv_bpe_encode(qkv_bpe *b, const char *text, size_t len, int32_t **ids, size_t *n) {
    if (!ids || !n) return qkv_error_set(QKV_ERR_INVALID, "qkv_bpe_encode: NULL output");
    enc_state st = {0};
    qkv_status s = encode(b, text, len, &st);
    if (s) {
        free(st.ids);
        return s;
    }
    *ids = st.ids;
    *n = st.n;
    return QKV_OK;
}

qkv_status qkv_bpe_encode_full(qkv_bpe *b, const char *text, size_t len, qkv_encoding *out) {
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "qkv_bpe_encode_full: NULL output");
    memset(out, 0, sizeof *out);
    enc_state st = {0};
    st.offsets = malloc(2 * 64 * sizeof *st.offsets);
    st.ids = malloc(64 * sizeof *st.ids);
    st.cap = 64;
    if (!st.offsets || !st.ids) {
        free(st.offsets);
        free(st.ids);
        return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_encode_full: out of memory");
    }
    qkv_status s = encode(b, text, len, &st);
    int32_t *types = s ? NULL : calloc(st.n + 1, sizeof *types);
    if (s || !types) {
        free(st.ids);
        free(st.offsets);
        return s ? s : qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_encode_full: out of memory");
    }
    *out = (qkv_encoding){st.ids, types, st.offsets, st.n};
    return QKV_OK;
}

qkv_status qkv_bpe_decode(const qkv_bpe *b, const int32_t *ids, size_t n, char **text, size_t *len) {
    if (!b || (n && !ids) || !text) return qkv_error_set(QKV_ERR_INVALID, "qkv_bpe_decode: NULL argument");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= b->n_ids || b->tok_entry[ids[i]] < 0)
            return qkv_error_set(QKV_ERR_RANGE, "qkv_bpe_decode: unknown id %d at position %zu (vocabulary: %d ids)",
                                 (int)ids[i], i, (int)b->n_ids);
        total += b->raw_len[ids[i]];
    }
    char *out = malloc(total + 1);
    if (!out) return qkv_error_set(QKV_ERR_NOMEM, "qkv_bpe_decode: out of memory (%zu bytes)", total);
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(out + pos, b->raw.p + b->raw_off[ids[i]], b->raw_len[ids[i]]);
        pos += b->raw_len[ids[i]];
    }
    out[pos] = '\0';
    *text = out;
    if (len) *len = pos;
    return QKV_OK;
}
