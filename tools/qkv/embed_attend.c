/* qkv embed attend: the course's "basic attention" on pretrained word vectors. Every word of a sentence is a key
 * and a value (its GloVe vector); a query word scores each key by dot product (or cosine), a softmax turns the
 * scores into weights, and the weighted sum of the values is the query's new vector. Printing the words nearest
 * to that sum shows what attention did: a word surrounded by related words is pulled towards them. No parameters
 * are learned; this is the part of a Transformer's attention that needs none.
 *
 * Arithmetic in double from the float32 vectors, so the weights are the hand computation's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "embed_attend.h"
#include "qkv/glove.h"
#include "qkv/viz.h"

void embed_attend_usage(FILE *out) {
    fprintf(out, "       qkv embed attend \"SENTENCE\" (--word W | --all) [--score dot|cosine] [--scale]\n"
                 "                 [--stopwords] [--keep-punct] [-k N] [-o PAGE.html]\n");
}

void embed_attend_help(FILE *out) {
    fprintf(out,
            "attend: basic attention over the sentence's word vectors: scores = query . key (or cosine), softmax,\n"
            "         weighted sum of the vectors. Prints each word's weight and the k (default 5) words nearest to\n"
            "         the weighted sum. --word W: W is the query (its first occurrence); --all: every word in turn.\n"
            "         --scale divides dot products by sqrt(dim) (scaled dot-product attention). Words are\n"
            "         lowercased, punctuation dropped (--keep-punct keeps it attached to words), --stopwords drops\n"
            "         the built-in English stop words; words missing from the vectors are skipped (named on\n"
            "         stderr). -o writes a viewer page: the heatmap with every word as query, the query's row\n"
            "         highlighting the sentence.\n"
            "         Output: a \"# query W\" line, then \"word<TAB>weight\" per word, then \"# nearest\" and\n"
            "         \"word<TAB>cosine\" lines.\n");
}

typedef struct attend_opts {
    const char *sentence, *word, *vectors, *out;
    bool all, cosine, scale, stopwords, keep_punct;
    long k;
} attend_opts;

static int parse(int argc, char **argv, attend_opts *o, qkv_vec_format *format) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--word") && val) o->word = argv[++i];
        else if (!strcmp(a, "--all")) o->all = true;
        else if (!strcmp(a, "--score") && val) {
            val = argv[++i];
            if (!strcmp(val, "dot")) o->cosine = false;
            else if (!strcmp(val, "cosine")) o->cosine = true;
            else return cli_error("embed", CLI_USAGE, "--score takes dot or cosine, not '%s'", val);
        } else if (!strcmp(a, "--scale")) o->scale = true;
        else if (!strcmp(a, "--stopwords")) o->stopwords = true;
        else if (!strcmp(a, "--keep-punct")) o->keep_punct = true;
        else if (!strcmp(a, "-k") && val) {
            if (!cli_parse_int("embed", a, argv[++i], 1, 100000, &o->k)) return CLI_USAGE;
        } else if (!strcmp(a, "-o") && val) o->out = argv[++i];
        else if (!strcmp(a, "--vectors") && val) o->vectors = argv[++i];
        else if (!strcmp(a, "--format") && val) {
            val = argv[++i];
            if (!strcmp(val, "auto")) *format = QKV_VEC_AUTO;
            else if (!strcmp(val, "text")) *format = QKV_VEC_TEXT;
            else if (!strcmp(val, "binary")) *format = QKV_VEC_BINARY;
            else return cli_error("embed", CLI_USAGE, "--format takes auto, text or binary, not '%s'", val);
        } else if (a[0] == '-' && a[1]) return cli_error("embed", CLI_USAGE, "unknown option '%s' (see qkv embed --help)", a);
        else if (!o->sentence) o->sentence = a;
        else return cli_error("embed", CLI_USAGE, "attend takes one sentence (quote it), got '%s' too", a);
    }
    if (!o->sentence) return cli_error("embed", CLI_USAGE, "attend needs a sentence");
    if (!o->word == !o->all) return cli_error("embed", CLI_USAGE, "attend needs --word W or --all (one of them)");
    return CLI_OK;
}

/* weights[j] = softmax_j(score(q, x_j)) over the n rows; sum = sum_j weights[j] x_j. */
static void attend_row(const float *m, int64_t dim, const int64_t *rows, int n, int q, const attend_opts *o,
                       double *weights, float *sum) {
    const float *qv = m + rows[q] * dim;
    double qn = 0, top = -INFINITY, z = 0;
    for (int64_t d = 0; d < dim; d++) qn += (double)qv[d] * qv[d];
    for (int j = 0; j < n; j++) {
        const float *kv = m + rows[j] * dim;
        double dot = 0, kn = 0;
        for (int64_t d = 0; d < dim; d++) {
            dot += (double)qv[d] * kv[d];
            kn += (double)kv[d] * kv[d];
        }
        double s = o->cosine ? (qn > 0 && kn > 0 ? dot / sqrt(qn * kn) : 0) : dot;
        weights[j] = o->scale ? s / sqrt((double)dim) : s;
        if (weights[j] > top) top = weights[j];
    }
    for (int j = 0; j < n; j++) z += (weights[j] = exp(weights[j] - top));
    for (int j = 0; j < n; j++) weights[j] /= z;
    for (int64_t d = 0; d < dim; d++) {
        double acc = 0;
        for (int j = 0; j < n; j++) acc += weights[j] * m[rows[j] * dim + d];
        sum[d] = (float)acc;
    }
}

static int write_page(const attend_opts *o, const char *const *words, int n, const float *heat, int highlight) {
    int rc = cli_prepare_out("embed", o->out, false);
    if (rc) return rc;
    char sub[256];
    snprintf(sub, sizeof sub, "GloVe attention: %s scores%s, softmax over the sentence; row = query word",
             o->cosine ? "cosine" : "dot-product", o->scale ? " / sqrt(dim)" : "");
    qkv_viz_map map = {.name = "word vectors", .kind = "self", .n_heads = 1, .n_rows = n, .n_cols = n,
                       .weights = heat, .row_labels = words, .highlight = true};
    qkv_viz_example ex = {.title = o->sentence, .n_tokens = n, .tokens = words, .highlight_row = highlight,
                          .probability = -1, .n_maps = 1, .maps = &map};
    qkv_viz_page page = {.title = "qkv embed attend", .subtitle = sub, .n_examples = 1, .examples = &ex};
    if (qkv_viz_write_html(o->out, &page)) return cli_error("embed", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    fprintf(stderr, "wrote %s (%d words, every word as query)\n", o->out, n);
    return CLI_OK;
}

int embed_attend(int argc, char **argv, const char *default_vectors) {
    attend_opts o = {.k = 5};
    qkv_vec_format format = QKV_VEC_AUTO;
    int rc = parse(argc, argv, &o, &format);
    if (rc) return rc;
    qkv_word_opts wo = {.lowercase = true, .strip_punct = !o.keep_punct, .drop_stopwords = o.stopwords};
    char **toks = NULL;
    size_t n_toks = 0;
    if (qkv_word_split(o.sentence, strlen(o.sentence), &wo, &toks, &n_toks))
        return cli_error("embed", CLI_INPUT, "the sentence: %s", qkv_last_error());
    qkv_vectors *v = qkv_vectors_load(o.vectors ? o.vectors : default_vectors, format);
    if (!v) {
        free(toks);
        return cli_error("embed", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    }
    int64_t dim = qkv_vectors_dim(v);
    int64_t *rows = calloc(n_toks + 1, sizeof *rows);
    const char **words = calloc(n_toks + 1, sizeof *words);
    int n = 0, q = -1;
    for (size_t i = 0; rows && words && i < n_toks; i++) {
        int64_t r = qkv_vectors_lookup(v, toks[i], strlen(toks[i]), true);
        if (r < 0) {
            fprintf(stderr, "qkv embed: skipped '%s' (not in the vectors)\n", toks[i]);
            continue;
        }
        if (q < 0 && o.word && !strcmp(toks[i], o.word)) q = n;
        rows[n] = r;
        words[n++] = toks[i];
    }
    double *weights = calloc((size_t)n * (size_t)n + 1, sizeof *weights);
    float *sum = calloc((size_t)dim, sizeof *sum), *heat = calloc((size_t)n * (size_t)n + 1, sizeof *heat);
    qkv_vec_hit *hits = calloc((size_t)o.k, sizeof *hits);
    if (!rows || !words || !weights || !sum || !heat || !hits) rc = cli_error("embed", CLI_RUNTIME, "out of memory");
    else if (!n) rc = cli_error("embed", CLI_INPUT, "no word of the sentence is in the vectors");
    else if (o.word && q < 0) {
        /* Looked up as the sentence's words are: lowercased. */
        char **wt = NULL;
        size_t wn = 0;
        if (!qkv_word_split(o.word, strlen(o.word), &(qkv_word_opts){.lowercase = true}, &wt, &wn) && wn == 1)
            for (int j = 0; j < n && q < 0; j++)
                if (!strcmp(words[j], wt[0])) q = j;
        free(wt);
        if (q < 0) rc = cli_error("embed", CLI_INPUT, "the word '%s' is not among the sentence's words (in the vectors)", o.word);
    }
    const float *m = rc ? NULL : qkv_f32(qkv_vectors_matrix(v));
    for (int i = 0; !rc && i < n; i++) {
        attend_row(m, dim, rows, n, i, &o, weights + (size_t)i * n, sum);
        for (int j = 0; j < n; j++) heat[(size_t)i * n + j] = (float)weights[(size_t)i * n + j];
        if (!o.all && i != q) continue;
        int found = 0;
        if (qkv_vectors_nearest(v, sum, NULL, 0, (int)o.k, hits, &found)) {
            rc = cli_error("embed", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
            break;
        }
        printf("%s# query %s\n", o.all && i ? "\n" : "", words[i]);
        for (int j = 0; j < n; j++) printf("%s\t%.4f\n", words[j], weights[(size_t)i * n + j]);
        printf("# nearest\n");
        for (int h = 0; h < found; h++) printf("%s\t%.4f\n", qkv_vectors_word(v, hits[h].row), hits[h].score);
    }
    if (!rc && o.out) rc = write_page(&o, words, n, heat, q < 0 ? 0 : q);
    free(hits);
    free(heat);
    free(sum);
    free(weights);
    free(words);
    free(rows);
    free(toks);
    qkv_vectors_free(v);
    return rc;
}
