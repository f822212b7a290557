/* qkv embed: pretrained word vectors (GloVe / word2vec) from the command line: nearest neighbours, analogies and
 * the similarity of two words. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "embed_attend.h"
#include "qkv/glove.h"

#define DEFAULT_VECTORS "pretrained/glove-6B-100d-top20k/glove.6B.100d.top20k.txt"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv embed similar WORD [-k N]\n"
            "       qkv embed analogy A B C [-k N] [--unit]\n"
            "       qkv embed compare W1 W2\n");
    embed_attend_usage(out);
    fprintf(out,
            "\noptions: --vectors FILE  GloVe / word2vec text (with or without an \"N D\" header) or word2vec binary\n"
            "         --format auto|text|binary   (default auto)\n\n"
            "similar: the k (default 10) words closest to WORD by cosine similarity.\n"
            "analogy: the k (default 5) words closest to A - B + C, the three excluded (king man woman -> queen);\n"
            "         --unit scales A, B and C to unit length first, as gensim's most_similar does.\n"
            "compare: the cosine similarity of two words.\n");
    embed_attend_help(out);
    fprintf(out,
            "The default vectors are the staged GloVe 6B 100d subset, ../shared/" DEFAULT_VECTORS ",\n"
            "found under $QKV_SHARED, the current directory's ../shared, or beside the qkv binary.\n"
            "Output: one \"word<TAB>score\" line per answer (scores with 4 decimals; compare prints the score).\n");
}


static int print_hits(const qkv_vectors *v, const qkv_vec_hit *hits, int n) {
    for (int i = 0; i < n; i++) printf("%s\t%.4f\n", qkv_vectors_word(v, hits[i].row), hits[i].score);
    return CLI_OK;
}

static int run(int argc, char **argv) {
    char buf[PATH_MAX];
    for (int i = 1; i < argc; i++) /* the first word not an option (or an option's value) picks the action */
        if (argv[i][0] != '-' || !argv[i][1]) {
            if (!strcmp(argv[i], "attend")) { /* its options, before or after the action word */
                const char *def = cli_shared_path(DEFAULT_VECTORS, buf, sizeof buf);
                char **args = malloc(sizeof *args * (size_t)argc);
                if (!args) return cli_error("embed", CLI_RUNTIME, "out of memory");
                int n = 0;
                args[n++] = argv[i];
                for (int j = 1; j < argc; j++)
                    if (j != i) args[n++] = argv[j];
                int rc = embed_attend(n, args, def ? def : buf);
                free(args);
                return rc;
            }
            break;
        } else if (strcmp(argv[i], "--unit")) {
            i++;
        }
    const char *words[3] = {0}, *action = NULL, *vectors = NULL;
    int n_words = 0;
    long k = -1;
    bool unit = false;
    qkv_vec_format format = QKV_VEC_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-k") && val) {
            if (!cli_parse_int("embed", a, argv[++i], 1, 100000, &k)) return CLI_USAGE;
        } else if (!strcmp(a, "--vectors") && val) {
            vectors = argv[++i];
        } else if (!strcmp(a, "--format") && val) {
            val = argv[++i];
            if (!strcmp(val, "auto")) format = QKV_VEC_AUTO;
            else if (!strcmp(val, "text")) format = QKV_VEC_TEXT;
            else if (!strcmp(val, "binary")) format = QKV_VEC_BINARY;
            else return cli_error("embed", CLI_USAGE, "--format takes auto, text or binary, not '%s'", val);
        } else if (!strcmp(a, "--unit")) {
            unit = true;
        } else if (a[0] == '-' && a[1]) {
            return cli_error("embed", CLI_USAGE, "unknown option '%s' (see qkv embed --help)", a);
        } else if (!action) {
            action = a;
        } else if (n_words < 3) {
            words[n_words++] = a;
        } else {
            return cli_error("embed", CLI_USAGE, "unexpected argument '%s'", a);
        }
    }
    int need = !action ? -1 : !strcmp(action, "similar") ? 1 : !strcmp(action, "analogy") ? 3
                                                           : !strcmp(action, "compare") ? 2 : -1;
    if (need < 0)
        return cli_error("embed", CLI_USAGE, "%s%s%s (similar, analogy, compare or attend)",
                         action ? "unknown action '" : "no action", action ? action : "", action ? "'" : "");
    if (n_words != need)
        return cli_error("embed", CLI_USAGE, "%s takes %d word%s, got %d", action, need, need > 1 ? "s" : "", n_words);
    if (!vectors) {
        cli_shared_path(DEFAULT_VECTORS, buf, sizeof buf);
        vectors = buf;
    }
    qkv_vectors *v = qkv_vectors_load(vectors, format);
    if (!v) return cli_error("embed", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    int rc = CLI_OK, n = 0;
    qkv_status st = QKV_OK;
    if (!strcmp(action, "compare")) {
        double c = 0;
        if (!(st = qkv_vectors_cosine(v, words[0], words[1], &c))) printf("%.4f\n", c);
    } else {
        if (k < 0) k = !strcmp(action, "similar") ? 10 : 5;
        qkv_vec_hit *hits = malloc(sizeof *hits * (size_t)k);
        if (!hits) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        else if (!strcmp(action, "similar")) st = qkv_vectors_similar(v, words[0], (int)k, hits, &n);
        else st = qkv_vectors_analogy(v, words[0], words[1], words[2], unit, (int)k, hits, &n);
        if (!st) rc = print_hits(v, hits, n);
        free(hits);
    }
    if (st) rc = cli_error("embed", cli_status_exit(st), "%s", qkv_last_error());
    qkv_vectors_free(v);
    return rc;
}

const cli_command cmd_embed = {"embed", "GloVe word vectors: similar words, analogies (texts: qkv similar)", run,
                               help};
