/* qkv tokenize: encode, decode, learn a BPE, and write token shards. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/documents.h"
#include "qkv/fsutil.h"
#include "qkv/shard.h"
#include "qkv/text.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv tokenize encode TOKENIZER [--tokens] [FILE]\n"
            "       qkv tokenize decode TOKENIZER [FILE]\n"
            "       qkv tokenize shard TOKENIZER -o OUT.bin FILE...\n"
            "       qkv tokenize train --vocab-size N [--min-freq K] [--corpus DATA_DIR] --out DIR [FILE...]\n"
            "       qkv tokenize train --wordpiece [--cased] --vocab-size N [--min-freq K] [--corpus DATA_DIR] --out DIR\n"
            "                          [FILE...]\n\n"
            "TOKENIZER is one of\n"
            "  --bpe DIR               GPT-2 byte-level BPE from DIR/vocab.json + DIR/merges.txt\n"
            "                          (also encoder.json + vocab.bpe)\n"
            "  --wordpiece VOCAB.txt   BERT WordPiece (lowercasing, accent stripping; --cased to keep case)\n\n"
            "encode  reads text lines (FILE or standard input) and prints one line of space-separated ids per\n"
            "        input line (--tokens: the tokens instead). WordPiece adds [CLS] ... [SEP].\n"
            "decode  reads lines of ids and prints the text.\n"
            "shard   encodes whole files (each line followed by a newline) into one binary token shard for\n"
            "        training (see include/qkv/shard.h), printing the token count. With --bpe it also writes\n"
            "        OUT.tokenizer.json naming the BPE's files, so a run trained from OUT keeps its tokenizer.\n"
            "train   learns a byte-level BPE with N tokens (256 bytes + merges) from the files, writing\n"
            "        DIR/vocab.json and DIR/merges.txt (plus <|endoftext|>). --wordpiece: a WordPiece vocabulary of N\n"
            "        tokens instead (BPE on BERT's lowercased words with ## continuations, as HF's\n"
            "        WordPieceTrainer; alphabet: the 1000 most frequent characters), written as DIR/vocab.txt for\n"
            "        --wordpiece DIR/vocab.txt (--cased: no lowercasing or accent stripping). --corpus DATA_DIR adds\n"
            "        the English training text of a directory laid out as ../shared/data, read as span-corruption and\n"
            "        BERT pretraining read it (include/qkv/documents.h: training splits only), one text a sentence;\n"
            "        then one tokenizer covers a pretraining corpus and the task files given beside it.\n");
}

typedef struct {
    qkv_bpe *bpe;
    qkv_wordpiece *wp;
    char bpe_files[2][4096]; /* the BPE's vocab and merges, as loaded */
} tokenizer;

static void tok_free(tokenizer *t) {
    qkv_bpe_free(t->bpe);
    qkv_wordpiece_free(t->wp);
}

static int file_exists(const char *p) {
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Parses --bpe / --wordpiece / --cased at argv[*i]; returns 1 if consumed, 0 if not a tokenizer option, -1 on bad
 * input, -2 when --bpe or --wordpiece comes last without its value (message set for both). */
static int tok_option(int argc, char **argv, int *i, tokenizer *t, bool *cased) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!v && (!strcmp(a, "--bpe") || !strcmp(a, "--wordpiece"))) {
        qkv_error_set(QKV_ERR_INVALID, "%s needs a value (see qkv tokenize --help)", a);
        return -2;
    }
    if (!strcmp(a, "--cased")) {
        *cased = true;
        return 1;
    }
    if (!strcmp(a, "--bpe") && v) {
        char vj[4096], mg[4096];
        snprintf(vj, sizeof vj, "%s/vocab.json", v);
        snprintf(mg, sizeof mg, "%s/merges.txt", v);
        if (!file_exists(vj)) snprintf(vj, sizeof vj, "%s/encoder.json", v);
        if (!file_exists(mg)) snprintf(mg, sizeof mg, "%s/vocab.bpe", v);
        (*i)++;
        if (!file_exists(vj) || !file_exists(mg)) {
            qkv_error_set(QKV_ERR_IO, "%s: expected vocab.json + merges.txt (or encoder.json + vocab.bpe) there", v);
            return -1;
        }
        if (!(t->bpe = qkv_bpe_load(vj, mg))) return -1;
        snprintf(t->bpe_files[0], sizeof t->bpe_files[0], "%s", vj);
        snprintf(t->bpe_files[1], sizeof t->bpe_files[1], "%s", mg);
        return 1;
    }
    if (!strcmp(a, "--wordpiece") && v) {
        (*i)++;
        qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
        if (*cased) o.lowercase = false;
        if (!(t->wp = qkv_wordpiece_load(v, &o))) return -1;
        return 1;
    }
    return 0;
}

static qkv_status encode_line(tokenizer *t, const char *s, size_t len, qkv_encoding *e) {
    memset(e, 0, sizeof *e);
    if (t->bpe) return qkv_bpe_encode_full(t->bpe, s, len, e);
    return qkv_wordpiece_encode(t->wp, s, len, NULL, 0, true, e);
}

static int tokenize_encode(int argc, char **argv, bool decode) {
    tokenizer t = {0};
    bool tokens = false, cased = false;
    const char *path = "-";
    for (int i = 1; i < argc; i++) {
        int r = tok_option(argc, argv, &i, &t, &cased);
        if (r < 0) {
            tok_free(&t);
            return cli_error("tokenize", r == -2 ? CLI_USAGE : CLI_INPUT, "%s", qkv_last_error());
        }
        if (r) continue;
        if (!strcmp(argv[i], "--tokens") && !decode) tokens = true;
        else if (argv[i][0] != '-' || !strcmp(argv[i], "-")) path = argv[i];
        else {
            tok_free(&t);
            return cli_error("tokenize", CLI_USAGE, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!t.bpe && !t.wp) return cli_error("tokenize", CLI_USAGE, "no tokenizer (--bpe DIR or --wordpiece VOCAB)");
    cli_lines *lines = cli_read_lines("tokenize", path);
    int rc = lines ? CLI_OK : CLI_INPUT;
    for (size_t l = 0; lines && l < lines->n && rc == CLI_OK; l++) {
        const char *s = lines->line[l];
        if (decode) {
            size_t n = 0, cap = 16;
            int32_t *ids = malloc(sizeof *ids * cap);
            char *end;
            for (const char *p = s; ids;) {
                while (*p == ' ' || *p == '\t') p++;
                if (!*p) break;
                errno = 0;
                long v = strtol(p, &end, 10);
                if (end == p) {
                    rc = cli_error("tokenize", CLI_INPUT, "%s:%zu: '%s' is not a token id", path, l + 1, p);
                    break;
                }
                /* Out of int32's range (99999999999999999999, -5): named as written, not as what a cast makes. */
                if (errno == ERANGE || v < 0 || v > INT32_MAX) {
                    size_t vocab = t.bpe ? qkv_bpe_vocab_size(t.bpe) : qkv_wordpiece_vocab_size(t.wp);
                    rc = cli_error("tokenize", CLI_INPUT, "%s:%zu: token id %.*s is outside the vocabulary (0..%zu)",
                                   path, l + 1, (int)(end - p), p, vocab - 1);
                    break;
                }
                if (n == cap) ids = realloc(ids, sizeof *ids * (cap *= 2));
                if (ids) ids[n++] = (int32_t)v;
                p = end;
            }
            char *text = NULL;
            size_t len = 0;
            qkv_status st = rc ? QKV_OK
                               : (t.bpe ? qkv_bpe_decode(t.bpe, ids, n, &text, &len)
                                        : qkv_wordpiece_decode(t.wp, ids, n, &text, &len));
            if (st) rc = cli_error("tokenize", CLI_INPUT, "%s:%zu: %s", path, l + 1, qkv_last_error());
            else if (!rc) printf("%s\n", text);
            free(text);
            free(ids);
        } else {
            qkv_encoding e;
            if (encode_line(&t, s, strlen(s), &e) != QKV_OK) {
                rc = cli_error("tokenize", CLI_INPUT, "%s:%zu: %s", path, l + 1, qkv_last_error());
                break;
            }
            for (size_t k = 0; k < e.n; k++) {
                if (tokens)
                    printf("%s%s", k ? " " : "",
                           t.bpe ? qkv_bpe_token(t.bpe, e.ids[k]) : qkv_wordpiece_token(t.wp, e.ids[k]));
                else
                    printf("%s%d", k ? " " : "", e.ids[k]);
            }
            printf("\n");
            qkv_encoding_free(&e);
        }
    }
    cli_lines_free(lines);
    tok_free(&t);
    return rc;
}

/* OUT.tokenizer.json beside a shard: the BPE files it was encoded with (absolute), so a run trained from the shard
 * can take its tokenizer along (src/train/shard_tokenizer.c). */
static int note_tokenizer(const char *out, const tokenizer *t) {
    char note[4200], abs[2][PATH_MAX];
    snprintf(note, sizeof note, "%s.tokenizer.json", out);
    for (int i = 0; i < 2; i++)
        if (!realpath(t->bpe_files[i], abs[i])) snprintf(abs[i], sizeof abs[i], "%s", t->bpe_files[i]);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "tokenizer", "bpe");
    cJSON_AddStringToObject(j, "vocab_file", abs[0]);
    cJSON_AddStringToObject(j, "merges_file", abs[1]);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return cli_error("tokenize", CLI_RUNTIME, "out of memory");
    qkv_status st = qkv_fs_write_atomic(note, text, strlen(text));
    cJSON_free(text);
    return st == QKV_OK ? CLI_OK : cli_error("tokenize", cli_status_exit(st), "%s", qkv_last_error());
}

static int tokenize_shard(int argc, char **argv) {
    tokenizer t = {0};
    bool cased = false;
    const char *out = NULL, *files[256];
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        int r = tok_option(argc, argv, &i, &t, &cased);
        if (r < 0) {
            tok_free(&t);
            return cli_error("tokenize", r == -2 ? CLI_USAGE : CLI_INPUT, "%s", qkv_last_error());
        }
        if (r) continue;
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] != '-' && nf < 256) files[nf++] = argv[i];
        else {
            tok_free(&t);
            return cli_error("tokenize", CLI_USAGE, "unexpected argument '%s'", argv[i]);
        }
    }
    if ((!t.bpe && !t.wp) || !out || !nf) {
        tok_free(&t);
        return cli_error("tokenize", CLI_USAGE, "shard needs a tokenizer, -o OUT and input files");
    }
    size_t vocab = t.bpe ? qkv_bpe_vocab_size(t.bpe) : qkv_wordpiece_vocab_size(t.wp);
    if (cli_prepare_out("tokenize", out, false)) {
        tok_free(&t);
        return CLI_INPUT;
    }
    qkv_shard_writer *w = qkv_shard_writer_open(out, vocab);
    int rc = w ? CLI_OK : cli_error("tokenize", CLI_INPUT, "%s", qkv_last_error());
    unsigned long long total = 0;
    for (int f = 0; w && f < nf && rc == CLI_OK; f++) {
        cli_lines *lines = cli_read_lines("tokenize", files[f]);
        if (!lines) rc = CLI_INPUT;
        for (size_t l = 0; lines && l < lines->n && rc == CLI_OK; l++) {
            size_t len = strlen(lines->line[l]);
            char *s = malloc(len + 2);
            qkv_encoding e = {0};
            if (!s) {
                rc = cli_error("tokenize", CLI_RUNTIME, "out of memory");
                break;
            }
            memcpy(s, lines->line[l], len);
            s[len] = '\n';
            s[len + 1] = '\0';
            if (encode_line(&t, s, len + 1, &e) || qkv_shard_writer_add(w, e.ids, e.n))
                rc = cli_error("tokenize", CLI_INPUT, "%s:%zu: %s", files[f], l + 1, qkv_last_error());
            total += e.n;
            qkv_encoding_free(&e);
            free(s);
        }
        cli_lines_free(lines);
    }
    if (w && rc == CLI_OK && qkv_shard_writer_close(w) != QKV_OK)
        rc = cli_error("tokenize", CLI_RUNTIME, "%s", qkv_last_error());
    else if (w && rc != CLI_OK)
        qkv_shard_writer_abort(w);
    if (rc == CLI_OK && t.bpe) rc = note_tokenizer(out, &t);
    if (rc == CLI_OK) printf("%s: %llu tokens, vocabulary %zu\n", out, total, vocab);
    tok_free(&t);
    return rc;
}

static int tokenize_train(int argc, char **argv) {
    long vocab = 0, min_freq = 2;
    const char *dir = NULL, *corpus = NULL, *files[256];
    int nf = 0;
    bool wordpiece = false, cased = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--wordpiece")) {
            wordpiece = true;
        } else if (!strcmp(a, "--cased")) {
            cased = true;
        } else if (!strcmp(a, "--vocab-size") && v) {
            if (!cli_parse_int("tokenize", a, argv[++i], 6, 1 << 20, &vocab)) return CLI_USAGE;
        } else if (!strcmp(a, "--min-freq") && v) {
            if (!cli_parse_int("tokenize", a, argv[++i], 1, 1L << 40, &min_freq)) return CLI_USAGE;
        } else if (!strcmp(a, "--out") && v) {
            dir = argv[++i];
        } else if (!strcmp(a, "--corpus") && v) {
            corpus = argv[++i];
        } else if (a[0] != '-' && nf < 256) {
            files[nf++] = a;
        } else {
            return cli_error("tokenize", CLI_USAGE, "unexpected argument '%s'", a);
        }
    }
    if (!vocab || !dir || (!nf && !corpus))
        return cli_error("tokenize", CLI_USAGE, "train needs --vocab-size, --out and files (or --corpus)");
    if (!wordpiece && vocab < 257)
        return cli_error("tokenize", CLI_USAGE, "--vocab-size %ld: a byte-level BPE needs at least 257", vocab);
    if (cased && !wordpiece) return cli_error("tokenize", CLI_USAGE, "--cased goes with --wordpiece");
    cli_lines *all[256];
    size_t total = 0;
    for (int f = 0; f < nf; f++) {
        if (!(all[f] = cli_read_lines("tokenize", files[f]))) {
            for (int g = 0; g < f; g++) cli_lines_free(all[g]);
            return CLI_INPUT;
        }
        total += all[f]->n;
    }
    qkv_documents *docs = corpus ? qkv_documents_new() : NULL;
    if (corpus && (!docs || qkv_documents_read_data_dir(docs, corpus) != QKV_OK)) {
        int rc = docs ? cli_error("tokenize", cli_status_exit(qkv_last_status()), "--corpus %s: %s", corpus,
                                  qkv_last_error())
                      : cli_error("tokenize", CLI_RUNTIME, "out of memory");
        qkv_documents_free(docs);
        for (int f = 0; f < nf; f++) cli_lines_free(all[f]);
        return rc;
    }
    if (docs) total += docs->n_sentences;
    /* Only now: a refused input leaves no output directory behind. */
    if (cli_prepare_out("tokenize", dir, true)) {
        for (int f = 0; f < nf; f++) cli_lines_free(all[f]);
        qkv_documents_free(docs);
        return CLI_INPUT;
    }
    const char **texts = malloc(sizeof *texts * (total ? total : 1));
    size_t *lens = malloc(sizeof *lens * (total ? total : 1)), k = 0;
    int rc = texts && lens ? CLI_OK : cli_error("tokenize", CLI_RUNTIME, "out of memory");
    for (int f = 0; rc == CLI_OK && f < nf; f++)
        for (size_t l = 0; l < all[f]->n; l++, k++) {
            texts[k] = all[f]->line[l];
            lens[k] = strlen(texts[k]);
        }
    for (size_t i = 0; rc == CLI_OK && docs && i < docs->n_sentences; i++, k++) {
        texts[k] = docs->sentences[i];
        lens[k] = strlen(texts[k]);
    }
    if (wordpiece) {
        char vt[4096];
        snprintf(vt, sizeof vt, "%s/vocab.txt", dir);
        qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
        if (cased) o.lowercase = false;
        if (rc == CLI_OK && qkv_wordpiece_train(texts, lens, total, (size_t)vocab, min_freq, 1000, &o, vt) != QKV_OK)
            rc = cli_error("tokenize", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        if (rc == CLI_OK) printf("wrote %s\n", vt);
        free(texts);
        free(lens);
        for (int f = 0; f < nf; f++) cli_lines_free(all[f]);
        qkv_documents_free(docs);
        return rc;
    }
    char vj[4096], mg[4096];
    snprintf(vj, sizeof vj, "%s/vocab.json", dir);
    snprintf(mg, sizeof mg, "%s/merges.txt", dir);
    size_t text_bytes = 0;
    for (size_t i = 0; i < total; i++) text_bytes += lens ? lens[i] : 0;
    if (rc == CLI_OK && text_bytes == 0)
        fprintf(stderr, "qkv tokenize: warning: the input files hold no text: the vocabulary has only the 256 bytes "
                        "(and specials), no merges\n");
    const char *specials[] = {"<|endoftext|>", NULL};
    if (rc == CLI_OK && qkv_bpe_train(texts, lens, total, (size_t)vocab, min_freq, specials, vj, mg) != QKV_OK)
        rc = cli_error("tokenize", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    if (rc == CLI_OK) printf("wrote %s and %s\n", vj, mg);
    free(texts);
    free(lens);
    for (int f = 0; f < nf; f++) cli_lines_free(all[f]);
    qkv_documents_free(docs);
    return rc;
}

static int run(int argc, char **argv) {
    if (argc < 2) return cli_error("tokenize", CLI_USAGE, "which action? encode, decode, shard or train");
    if (!strcmp(argv[1], "encode")) return tokenize_encode(argc - 1, argv + 1, false);
    if (!strcmp(argv[1], "decode")) return tokenize_encode(argc - 1, argv + 1, true);
    if (!strcmp(argv[1], "shard")) return tokenize_shard(argc - 1, argv + 1);
    if (!strcmp(argv[1], "train")) return tokenize_train(argc - 1, argv + 1);
    return cli_error("tokenize", CLI_USAGE, "unknown action '%s' (encode, decode, shard, train)", argv[1]);
}

const cli_command cmd_tokenize = {"tokenize", "encode/decode text (GPT-2 BPE, WordPiece), learn a BPE, write shards",
                                  run, help};
