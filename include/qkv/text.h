/* Text: vocabularies and tokenizers (word, character, byte-level BPE as in GPT-2, WordPiece as in BERT).
 *
 * Text is passed as (pointer, byte length): it may contain NUL bytes and need not be NUL-terminated. Every
 * array or string a function hands back through an out-parameter is a single malloc'd block the caller releases
 * with free() (qkv_encoding: qkv_encoding_free). Handles (qkv_vocab, qkv_bpe, qkv_wordpiece) are owned by the
 * caller and released with their _free function (NULL is accepted). Lookups on a handle are thread-safe;
 * qkv_bpe_encode* is not (it fills a per-handle word cache): use one handle per thread.
 * Offsets are byte offsets into the input; qkv_utf8_char_offsets converts them to code-point offsets (the
 * offsets Hugging Face's Python/JS bindings report).
 */
#ifndef QKV_TEXT_H
#define QKV_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Vocabulary: token string <-> id (ids are 0..size-1 in insertion order) ---- */

typedef struct qkv_vocab qkv_vocab;

/* Special tokens, added in this order (flag order) by qkv_vocab_add_specials / qkv_vocab_build. */
enum {
    QKV_SPECIAL_PAD = 1 << 0,  /* <pad>  */
    QKV_SPECIAL_UNK = 1 << 1,  /* <unk>  */
    QKV_SPECIAL_BOS = 1 << 2,  /* <s>    */
    QKV_SPECIAL_EOS = 1 << 3,  /* </s>   */
    QKV_SPECIAL_CLS = 1 << 4,  /* [CLS]  */
    QKV_SPECIAL_SEP = 1 << 5,  /* [SEP]  */
    QKV_SPECIAL_MASK = 1 << 6, /* [MASK] */
};

qkv_vocab *qkv_vocab_new(void);
void qkv_vocab_free(qkv_vocab *v);
size_t qkv_vocab_size(const qkv_vocab *v);
/* Id of the token (existing or newly appended); -1 with an error set if the token is empty or memory runs out. */
int32_t qkv_vocab_add(qkv_vocab *v, const char *tok, size_t len);
/* Id of the token, or -1 (no error set) when absent. */
int32_t qkv_vocab_id(const qkv_vocab *v, const char *tok, size_t len);
/* The token of an id (NUL-terminated, owned by the vocabulary, valid until it changes), or NULL with an error
 * set for an out-of-range id. *len (optional) receives its byte length. */
const char *qkv_vocab_token(const qkv_vocab *v, int32_t id, size_t *len);
/* Append the flagged special tokens (QKV_SPECIAL_*) then sentinels <X0> ... <X{n_sentinels-1}>. */
qkv_status qkv_vocab_add_specials(qkv_vocab *v, unsigned specials, int n_sentinels);

/* Counts tokens of a corpus, to build a vocabulary from. */
typedef struct qkv_token_counter qkv_token_counter;
qkv_token_counter *qkv_token_counter_new(void);
void qkv_token_counter_free(qkv_token_counter *c);
qkv_status qkv_token_counter_add(qkv_token_counter *c, const char *tok, size_t len);
/* Add n NUL-terminated tokens (e.g. the output of qkv_word_split). */
qkv_status qkv_token_counter_add_all(qkv_token_counter *c, char *const *toks, size_t n);

/* A vocabulary: the special tokens (flags, then sentinels) first, then the counted tokens with count >=
 * min_freq, most frequent first, ties by byte order (memcmp, shorter first), until the total size reaches
 * max_size (0: no limit). A counted token equal to a special one is not repeated. */
qkv_vocab *qkv_vocab_build(const qkv_token_counter *c, unsigned specials, int n_sentinels, int64_t min_freq,
                           size_t max_size);

/* Plain file: one token per line in id order, UTF-8, '\n' line ends. Saving fails for a token holding '\n' or
 * '\r'. Loading fails, naming the file and line, on an empty line, invalid UTF-8 or a duplicate token; a '\r'
 * before the '\n' is dropped. */
qkv_status qkv_vocab_save(const qkv_vocab *v, const char *path);
qkv_vocab *qkv_vocab_load(const char *path);

/* Ids of n NUL-terminated tokens into ids[n]; a token not in the vocabulary gets unk_id, or, if unk_id < 0, the
 * call fails naming the token. */
qkv_status qkv_vocab_encode(const qkv_vocab *v, char *const *toks, size_t n, int32_t unk_id, int32_t *ids);

/* ---- Word- and character-level tokenizers ---- */

typedef struct qkv_word_opts {
    bool lowercase;      /* Unicode simple lowercase mapping (utf8proc) */
    bool strip_punct;    /* drop punctuation: Unicode P* and the ASCII symbols BERT treats as punctuation */
    bool drop_stopwords; /* drop words of the built-in English list (qkv_stopwords), compared after lowercasing */
} qkv_word_opts;

/* Split on Unicode whitespace (the White_Space property) after applying opts (NULL: all false). Punctuation that is
 * not stripped stays attached to its word. *toks receives n pointers to NUL-terminated tokens, all in ONE block:
 * free(*toks) releases everything. Fails on invalid UTF-8 or a NUL byte, naming the byte offset. */
qkv_status qkv_word_split(const char *text, size_t len, const qkv_word_opts *opts, char ***toks, size_t *n);
/* One token per Unicode code point (whitespace included), same ownership and errors as qkv_word_split. */
qkv_status qkv_char_split(const char *text, size_t len, char ***toks, size_t *n);
/* The built-in English stop-word list (NULL-terminated, lowercase, static): articles, pronouns, auxiliaries,
 * conjunctions and common prepositions (a subset of the classic SMART/NLTK lists, ~120 words). */
const char *const *qkv_stopwords(void);

/* ---- Encodings ---- */

typedef struct qkv_encoding {
    int32_t *ids;      /* n token ids */
    int32_t *type_ids; /* n segment ids (0 first sentence, 1 second); all 0 for a single text */
    size_t *offsets;   /* 2n: [start, end) byte offsets of token i into its own input text; 0,0 for added
                        * [CLS]/[SEP] */
    size_t n;
} qkv_encoding;
/* Free the arrays of e and zero it (the struct itself is the caller's). */
void qkv_encoding_free(qkv_encoding *e);

/* Turn n/2 [start, end) byte spans (offsets[2i], offsets[2i+1]) into code-point spans in place: start maps to
 * the character holding that byte, a non-empty span ends after the character holding its last byte (so a span
 * covering part of a character covers that character, as HF reports). Invalid UTF-8 bytes count as one
 * character each; offsets beyond len are clamped. */
void qkv_utf8_char_offsets(const char *text, size_t len, size_t *offsets, size_t n);

/* ---- Byte-level BPE (GPT-2 compatible) ---- */

typedef struct qkv_bpe qkv_bpe;

/* Load vocab.json (or encoder.json: a JSON object token -> id) and merges.txt (or vocab.bpe: "a b" per line, an
 * optional first line starting with "#version"). Tokens are in GPT-2's byte-to-unicode form. "<|endoftext|>",
 * if in the vocabulary, is registered as a special token. Errors name the file (and line for merges). */
qkv_bpe *qkv_bpe_load(const char *vocab_json, const char *merges_txt);
void qkv_bpe_free(qkv_bpe *b);
size_t qkv_bpe_vocab_size(const qkv_bpe *b);
/* Token string (byte-level unicode form, as in vocab.json; owned by b) of an id, NULL with error if unknown. */
const char *qkv_bpe_token(const qkv_bpe *b, int32_t id);
/* Id of a token in byte-level unicode form, or -1. */
int32_t qkv_bpe_id(const qkv_bpe *b, const char *tok);
/* Register a special token: its literal text is matched in the input before pre-tokenisation (when specials
 * are enabled) and becomes one id. It gets its vocabulary id, or a new id at the end if absent. */
qkv_status qkv_bpe_add_special(qkv_bpe *b, const char *tok);
/* Recognise special tokens in the input (default true). When false they are encoded as ordinary text. */
void qkv_bpe_set_specials_enabled(qkv_bpe *b, bool on);

/* Encode any byte string. The GPT-2 regex (PCRE2, UTF+UCP) splits each maximal valid UTF-8 run; every byte of
 * invalid UTF-8 is a pre-token of its own (its single-byte token). HF tokenizers and OpenAI's encoder cannot take
 * invalid UTF-8 at all (Rust &str / Python str), so this only extends them: for valid UTF-8 the ids are theirs.
 * NUL and control bytes are ordinary bytes (GPT-2: NUL is "Ā", id 188, as in HF).
 * *ids (n entries, caller free()s; may be NULL when n == 0). */
qkv_status qkv_bpe_encode(qkv_bpe *b, const char *text, size_t len, int32_t **ids, size_t *n);
/* Same, with byte offsets; type_ids all 0. */
qkv_status qkv_bpe_encode_full(qkv_bpe *b, const char *text, size_t len, qkv_encoding *out);
/* The bytes of the tokens concatenated: decode(encode(x)) == x for every byte string x. *text is NUL-terminated
 * (not counted in *len), caller free()s. Fails on an unknown id, naming it and its position. */
qkv_status qkv_bpe_decode(const qkv_bpe *b, const int32_t *ids, size_t n, char **text, size_t *len);

/* Learn a byte-level BPE from texts (same pre-tokenisation as encoding): vocabulary = 256 byte tokens (GPT-2's
 * byte order), then one token per merge, then the special tokens (NULL-terminated list, may be NULL; not counted
 * in vocab_size). Merges are learned until there are vocab_size byte+merged tokens or no pair occurs min_freq
 * (>= 1) times. The most frequent pair wins; ties go to the pair whose (left bytes, right bytes) is smallest
 * (memcmp order, shorter first). A merge whose bytes already form a token reuses that token's id.
 * Writes vocab.json and merges.txt ("#version: 0.2" first) loadable by qkv_bpe_load. */
qkv_status qkv_bpe_train(const char *const *texts, const size_t *lens, size_t ntexts, size_t vocab_size,
                         int64_t min_freq, const char *const *specials, const char *vocab_json,
                         const char *merges_txt);

/* ---- WordPiece (BERT compatible) ---- */

typedef struct qkv_wordpiece qkv_wordpiece;

typedef struct qkv_wordpiece_opts {
    bool lowercase;      /* lowercase (and strip accents unless strip_accents == 0) */
    int strip_accents;   /* -1: follow lowercase; 0: no; 1: NFD + drop Mn marks */
    bool clean_text;     /* drop NUL, U+FFFD and control/format chars; whitespace -> ' ' */
    bool chinese_chars;  /* put spaces around CJK ideographs */
    int max_word_chars;  /* longer words become [UNK] (BERT: 100) */
} qkv_wordpiece_opts;
/* bert-base-uncased's settings: lowercase, strip_accents -1, clean_text, chinese_chars, 100. */
qkv_wordpiece_opts qkv_wordpiece_default_opts(void);

/* Load vocab.txt (one token per line; duplicates are an error naming file and line). opts NULL: defaults. Needs
 * [UNK], [CLS], [SEP] in the vocabulary; [PAD], [UNK], [CLS], [SEP], [MASK] (those present) are matched
 * literally in the input, as HF does. */
qkv_wordpiece *qkv_wordpiece_load(const char *vocab_txt, const qkv_wordpiece_opts *opts);
void qkv_wordpiece_free(qkv_wordpiece *w);
size_t qkv_wordpiece_vocab_size(const qkv_wordpiece *w);
const char *qkv_wordpiece_token(const qkv_wordpiece *w, int32_t id);
int32_t qkv_wordpiece_id(const qkv_wordpiece *w, const char *tok);

/* Encode text a (and, if b != NULL, pair b). add_special: [CLS] a [SEP] (b [SEP]); type_ids 0 for a's part, 1
 * for b's. Offsets are byte offsets into a or b respectively (HF's per-sequence offsets). Invalid UTF-8 is an
 * error naming the byte offset (HF cannot take it either). */
qkv_status qkv_wordpiece_encode(const qkv_wordpiece *w, const char *a, size_t alen, const char *b, size_t blen,
                                bool add_special, qkv_encoding *out);
/* Tokens joined by spaces, "##" pieces glued on, special tokens skipped, then HF's cleanup (" ." -> ".", " n't"
 * -> "n't", ...). *text NUL-terminated, caller free()s. Fails on an unknown id. */
qkv_status qkv_wordpiece_decode(const qkv_wordpiece *w, const int32_t *ids, size_t n, char **text, size_t *len);

/* Learn a WordPiece vocabulary from texts as Hugging Face tokenizers' WordPieceTrainer does: a BPE whose
 * non-initial symbols carry the "##" prefix, its tokens then read as WordPiece pieces. Words are those the encoder
 * sees (BERT normalisation with opts, NULL: defaults; whitespace and punctuation splits); words longer than
 * opts.max_word_chars are skipped, as the encoder makes them [UNK]. The alphabet is every character of the words,
 * both word-initial ("a") and continuing ("##a"), keeping the limit_alphabet most frequent characters (0: all; a
 * word holding a dropped character is not learned from). Then the most frequent adjacent pair of symbols is merged
 * (left + right without its "##") until the vocabulary has vocab_size tokens or no pair occurs min_freq (>= 1)
 * times; ties go to the pair whose (left, right) strings are smallest (byte order, shorter first). Writes vocab_txt:
 * [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0..4), the initial characters then the "##" ones in code point order, then
 * one token per merge in merge order (a merge whose string is already a token adds nothing). Loadable by
 * qkv_wordpiece_load with the same opts. */
qkv_status qkv_wordpiece_train(const char *const *texts, const size_t *lens, size_t ntexts, size_t vocab_size,
                               int64_t min_freq, size_t limit_alphabet, const qkv_wordpiece_opts *opts,
                               const char *vocab_txt);

#ifdef __cplusplus
}
#endif
#endif
