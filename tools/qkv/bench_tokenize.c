/* qkv bench bpe | wordpiece: tokenizer throughput on ~10 MB of real text (../shared/data: the Austen training text
 * and both sides of the translation training pairs), encoded line by line from a cold start (fresh handle, empty
 * word cache), single thread. bench/tokenizers_ref.js measures Hugging Face's tokenizers on the same text. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "qkv/text.h"

typedef struct {
    char **line;
    size_t *len, n, bytes;
} corpus;

static int load(const bench_ctx *b, corpus *c) {
    const char *files[] = {"data/lm/train.txt", "data/translation/train.tsv"};
    memset(c, 0, sizeof *c);
    size_t cap = 0;
    for (int f = 0; f < 2; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", b->shared_dir, files[f]);
        cli_lines *l = cli_read_lines("bench", path);
        if (!l) return CLI_INPUT;
        for (size_t i = 0; i < l->n; i++) {
            /* translation rows: both columns are text to encode */
            char *s = l->line[i];
            for (char *part = s; part;) {
                char *tab = strchr(part, '\t');
                if (tab) *tab = '\0';
                if (c->n == cap) {
                    cap = cap ? 2 * cap : 65536;
                    c->line = realloc(c->line, sizeof *c->line * cap);
                    c->len = realloc(c->len, sizeof *c->len * cap);
                    if (!c->line || !c->len) return CLI_RUNTIME;
                }
                c->line[c->n] = strdup(part);
                c->len[c->n] = strlen(part);
                c->bytes += c->len[c->n++];
                part = tab ? tab + 1 : NULL;
            }
        }
        cli_lines_free(l);
    }
    return CLI_OK;
}

static void unload(corpus *c) {
    for (size_t i = 0; i < c->n; i++) free(c->line[i]);
    free(c->line);
    free(c->len);
}

static int run(const bench_ctx *b, const char *mode, long seq_len) {
    (void)seq_len;
    corpus c;
    int rc = load(b, &c);
    if (rc) return rc;
    bool bpe = !strcmp(b->name, "bpe");
    char a[4096], m[4096];
    int64_t tokens = 0;
    double t0 = cli_now();
    if (bpe) {
        snprintf(a, sizeof a, "%s/pretrained/gpt2-tokenizer/vocab.json", b->shared_dir);
        snprintf(m, sizeof m, "%s/pretrained/gpt2-tokenizer/merges.txt", b->shared_dir);
        qkv_bpe *t = qkv_bpe_load(a, m);
        if (!t) return cli_error("bench", CLI_INPUT, "%s", qkv_last_error());
        t0 = cli_now(); /* loading is not encoding */
        for (size_t i = 0; i < c.n; i++) {
            int32_t *ids = NULL;
            size_t n = 0;
            if (qkv_bpe_encode(t, c.line[i], c.len[i], &ids, &n)) return cli_error("bench", CLI_INPUT, "%s", qkv_last_error());
            tokens += (int64_t)n;
            free(ids);
        }
        qkv_bpe_free(t);
    } else {
        snprintf(a, sizeof a, "%s/pretrained/bert-base-uncased-tokenizer/vocab.txt", b->shared_dir);
        qkv_wordpiece *t = qkv_wordpiece_load(a, NULL);
        if (!t) return cli_error("bench", CLI_INPUT, "%s", qkv_last_error());
        t0 = cli_now();
        for (size_t i = 0; i < c.n; i++) {
            qkv_encoding e;
            if (qkv_wordpiece_encode(t, c.line[i], c.len[i], NULL, 0, false, &e))
                return cli_error("bench", CLI_INPUT, "%s", qkv_last_error());
            tokens += (int64_t)e.n;
            qkv_encoding_free(&e);
        }
        qkv_wordpiece_free(t);
    }
    double s = cli_now() - t0;
    cJSON *o = bench_result(b, mode);
    cJSON_AddNumberToObject(o, "texts", (double)c.n);
    cJSON_AddNumberToObject(o, "mb", (double)c.bytes / 1e6);
    cJSON_AddNumberToObject(o, "tokens", (double)tokens);
    cJSON_AddNumberToObject(o, "seconds", s);
    cJSON_AddNumberToObject(o, "mb_per_s", (double)c.bytes / 1e6 / s);
    cJSON_AddNumberToObject(o, "threads_used", 1);
    bench_emit(o);
    unload(&c);
    return CLI_OK;
}

static const bench_entry bpe_entry = {"bpe", "encode", "GPT-2 byte-level BPE encode throughput (MB/s)", run};
static const bench_entry wp_entry = {"wordpiece", "encode", "BERT WordPiece encode throughput (MB/s)", run};
BENCH_REGISTER(bpe_entry)
BENCH_REGISTER(wp_entry)
