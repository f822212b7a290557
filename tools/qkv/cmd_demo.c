/* qkv demo: train a sentiment classifier on the review sample compiled into the binary, report dev accuracy, and
 * show which words each verdict rests on. Deterministic for a given --seed and thread count.
 *
 * The model is the embedding-mean baseline (Embedding -> masked mean -> Dense -> LogSoftmax): it learns in seconds
 * and, being linear after the mean, its per-word contributions are exact. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/data.h"
#include "qkv/embmean.h"
#include "qkv/qkv.h"
#include "qkv/text.h"

extern const unsigned char qkv_demo_train[], qkv_demo_dev[];
extern const unsigned long qkv_demo_train_len, qkv_demo_dev_len;

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv demo [--epochs N] [--dim D] [--seed S] [--quiet]\n\n"
            "Trains a sentiment classifier (embedding mean -> dense -> log-softmax) on 2,606 real review\n"
            "sentences compiled into qkv (examples/data/reviews: IMDb, Amazon and Yelp, CC BY 4.0), prints\n"
            "its accuracy on 373 held-out sentences, then classifies example sentences and shows how much each\n"
            "word pushed the verdict towards positive (+) or negative (-).\n\n"
            "  --epochs N   passes over the training sentences (default 12)\n"
            "  --dim D      embedding size (default 64)\n"
            "  --seed S     random seed (default 1)\n"
            "  --quiet      no progress bar\n");
}

typedef struct {
    int label;
    int32_t *ids;
    int n;
    char **words; /* one block (qkv_word_split) */
} example;

typedef struct {
    example *ex;
    int n, cap;
} split;

static const qkv_word_opts WORD_OPTS = {.lowercase = true, .strip_punct = true, .drop_stopwords = false};

/* Reads "label<TAB>text" lines into tokenised examples (ids filled later). */
static qkv_status read_split(const char *name, const unsigned char *data, unsigned long len, split *s) {
    qkv_data_opts o = {.format = QKV_DATA_TSV, .n_fields = 2};
    qkv_reader *r = qkv_reader_open_mem(name, (const char *)data, len, &o);
    if (!r) return qkv_last_status();
    const qkv_data_record *rec;
    qkv_status st;
    while ((st = qkv_reader_next(r, &rec)) == QKV_OK && rec) {
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 1024;
            example *e = realloc(s->ex, sizeof *e * (size_t)s->cap);
            if (!e) {
                st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
                break;
            }
            s->ex = e;
        }
        example *e = &s->ex[s->n];
        memset(e, 0, sizeof *e);
        e->label = atoi(rec->fields[0]);
        size_t nw = 0;
        if ((st = qkv_word_split(rec->fields[1], rec->lens[1], &WORD_OPTS, &e->words, &nw)) != QKV_OK) break;
        e->n = (int)nw;
        s->n++;
    }
    qkv_reader_close(r);
    return st;
}

static void free_split(split *s) {
    for (int i = 0; i < s->n; i++) {
        free(s->ex[i].words);
        free(s->ex[i].ids);
    }
    free(s->ex);
}

static qkv_status encode_split(const qkv_vocab *v, split *s, int32_t unk) {
    for (int i = 0; i < s->n; i++) {
        example *e = &s->ex[i];
        e->ids = malloc(sizeof(int32_t) * (size_t)(e->n ? e->n : 1));
        if (!e->ids) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        qkv_status st = qkv_vocab_encode(v, e->words, (size_t)e->n, unk, e->ids);
        if (st) return st;
    }
    return QKV_OK;
}

/* A padded batch: ids [B, T] (pad 0) and mask [B, T]. */
static void make_batch(qkv_ctx *ctx, const split *s, const int *order, int start, int B, qkv_tensor **ids,
                       qkv_tensor **mask, qkv_tensor **labels) {
    int T = 1;
    for (int b = 0; b < B; b++)
        if (s->ex[order[start + b]].n > T) T = s->ex[order[start + b]].n;
    *ids = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(B, T));
    *mask = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, T));
    *labels = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B));
    if (!*ids || !*mask || !*labels) return;
    for (int b = 0; b < B; b++) {
        const example *e = &s->ex[order[start + b]];
        for (int t = 0; t < e->n; t++) {
            qkv_i32(*ids)[b * T + t] = e->ids[t];
            qkv_f32(*mask)[b * T + t] = 1.0f;
        }
        qkv_i32(*labels)[b] = e->label;
    }
}

static double accuracy(qkv_ctx *ctx, const qkv_embmean *m, const split *s, const int *order) {
    bool g = qkv_ctx_set_grad(ctx, false), tr = qkv_ctx_set_training(ctx, false);
    int correct = 0;
    for (int i = 0; i < s->n; i += 64) {
        int B = s->n - i < 64 ? s->n - i : 64;
        qkv_ctx_reset(ctx);
        qkv_tensor *ids, *mask, *labels;
        make_batch(ctx, s, order, i, B, &ids, &mask, &labels);
        qkv_tensor *lp = qkv_embmean_forward(ctx, m, ids, mask);
        if (!lp) return NAN;
        for (int b = 0; b < B; b++) {
            const float *row = qkv_f32(lp) + b * 2;
            correct += (row[1] > row[0]) == (qkv_i32(labels)[b] == 1);
        }
    }
    qkv_ctx_set_grad(ctx, g);
    qkv_ctx_set_training(ctx, tr);
    return (double)correct / s->n;
}

static void explain(qkv_ctx *ctx, const qkv_embmean *m, const qkv_vocab *v, const char *sentence) {
    char **words = NULL;
    size_t n = 0;
    if (qkv_word_split(sentence, strlen(sentence), &WORD_OPTS, &words, &n) != QKV_OK || n == 0) {
        free(words);
        return;
    }
    int32_t *ids = malloc(sizeof *ids * n);
    float *score = malloc(sizeof *score * n);
    if (!ids || !score || qkv_vocab_encode(v, words, n, 1, ids) != QKV_OK) goto done;
    qkv_ctx_reset(ctx);
    qkv_tensor *t_ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, (int64_t)n));
    qkv_tensor *t_mask = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(1, (int64_t)n));
    if (!t_ids || !t_mask) goto done;
    memcpy(t_ids->data, ids, sizeof *ids * n);
    qkv_tensor_fill(t_mask, 1.0f);
    bool g = qkv_ctx_set_grad(ctx, false);
    qkv_tensor *lp = qkv_embmean_forward(ctx, m, t_ids, t_mask);
    qkv_ctx_set_grad(ctx, g);
    if (!lp) goto done;
    float p_pos = expf(qkv_f32(lp)[1]);
    printf("\n  \"%s\"\n  -> %s (p = %.2f)\n    ", sentence, p_pos >= 0.5f ? "positive" : "negative",
           p_pos >= 0.5f ? p_pos : 1 - p_pos);
    qkv_embmean_word_scores(m, ids, (int)n, score);
    for (size_t i = 0; i < n; i++) printf("%s%s(%+.2f)", i ? " " : "", words[i], score[i]);
    printf("\n");
done:
    free(score);
    free(ids);
    free(words);
}

static int run(int argc, char **argv) {
    long epochs = 12, dim = 64, seed = 1;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--epochs") && v) {
            if (!cli_parse_int("demo", a, argv[++i], 1, 1000, &epochs)) return CLI_USAGE;
        } else if (!strcmp(a, "--dim") && v) {
            if (!cli_parse_int("demo", a, argv[++i], 1, 4096, &dim)) return CLI_USAGE;
        } else if (!strcmp(a, "--seed") && v) {
            if (!cli_parse_int("demo", a, argv[++i], 0, 1L << 31, &seed)) return CLI_USAGE;
        } else if (!strcmp(a, "--quiet")) {
            quiet = true;
        } else {
            return cli_error("demo", CLI_USAGE, "unexpected argument '%s' (see qkv demo --help)", a);
        }
    }
    int rc = CLI_RUNTIME;
    split train = {0}, dev = {0};
    qkv_vocab *vocab = NULL;
    qkv_params *params = NULL;
    qkv_optim *opt = NULL;
    qkv_ctx *ctx = NULL;
    int *order = NULL, *dev_order = NULL;
    if (read_split("reviews/train.tsv", qkv_demo_train, qkv_demo_train_len, &train) ||
        read_split("reviews/dev.tsv", qkv_demo_dev, qkv_demo_dev_len, &dev))
        goto fail;
    /* Vocabulary from the training sentences only: <pad> = 0, <unk> = 1, then words seen twice or more. */
    qkv_token_counter *counter = qkv_token_counter_new();
    for (int i = 0; counter && i < train.n; i++) qkv_token_counter_add_all(counter, train.ex[i].words, (size_t)train.ex[i].n);
    vocab = counter ? qkv_vocab_build(counter, QKV_SPECIAL_PAD | QKV_SPECIAL_UNK, 0, 2, 0) : NULL;
    qkv_token_counter_free(counter);
    if (!vocab || encode_split(vocab, &train, 1) || encode_split(vocab, &dev, 1)) goto fail;

    printf("qkv demo: sentiment of review sentences (IMDb, Amazon, Yelp)\n");
    printf("  data   %d training / %d held-out sentences, vocabulary of %zu words\n", train.n, dev.n,
           qkv_vocab_size(vocab));
    printf("  model  embedding(%zu x %ld) -> masked mean -> dense(%ld x 2) -> log-softmax, Adam lr 0.005\n",
           qkv_vocab_size(vocab), dim, dim);

    qkv_rng rng;
    qkv_rng_init(&rng, (uint64_t)seed);
    params = qkv_params_new();
    qkv_embmean model;
    if (!params || qkv_embmean_init(&model, params, (int64_t)qkv_vocab_size(vocab), dim, 2, &rng)) goto fail;
    qkv_optim_config oc = qkv_optim_defaults(QKV_ADAM);
    oc.lr = 0.005f;
    if (!(opt = qkv_optim_new(params, &oc)) || !(ctx = qkv_ctx_new())) goto fail;
    order = malloc(sizeof *order * (size_t)train.n);
    dev_order = malloc(sizeof *dev_order * (size_t)dev.n);
    if (!order || !dev_order) goto fail;
    for (int i = 0; i < dev.n; i++) dev_order[i] = i;

    const int B = 32;
    long steps_per_epoch = (train.n + B - 1) / B, step = 0;
    cli_progress prog;
    cli_progress_start(&prog, "  train ", epochs * steps_per_epoch, "sent", quiet);
    double seen = 0, loss_avg = 0;
    for (long ep = 0; ep < epochs; ep++) {
        for (int i = 0; i < train.n; i++) order[i] = i;
        for (int i = train.n - 1; i > 0; i--) { /* Fisher-Yates with the seeded generator */
            int j = (int)qkv_rng_below(&rng, (uint32_t)i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int i = 0; i < train.n; i += B) {
            int nb = train.n - i < B ? train.n - i : B;
            qkv_ctx_reset(ctx);
            qkv_tensor *ids, *mask, *labels;
            make_batch(ctx, &train, order, i, nb, &ids, &mask, &labels);
            qkv_ce_opts ce = qkv_ce_defaults();
            /* The model returns log-probabilities; cross-entropy of those equals NLL. */
            qkv_tensor *loss = qkv_cross_entropy(ctx, qkv_embmean_forward(ctx, &model, ids, mask), labels, &ce);
            qkv_optim_zero_grad(opt);
            if (!loss || qkv_backward(ctx, loss) || qkv_optim_step(opt)) goto fail;
            loss_avg = step ? 0.95 * loss_avg + 0.05 * qkv_f32(loss)[0] : qkv_f32(loss)[0];
            seen += nb;
            char extra[64];
            snprintf(extra, sizeof extra, "epoch %ld loss %.3f", ep + 1, loss_avg);
            cli_progress_update(&prog, ++step, seen, extra);
        }
    }
    char extra[64];
    snprintf(extra, sizeof extra, "loss %.3f", loss_avg);
    cli_progress_finish(&prog, extra);
    double acc = accuracy(ctx, &model, &dev, dev_order);
    printf("  dev accuracy %.1f%% (%d held-out sentences)\n", 100 * acc, dev.n);

    printf("\nWhat the verdicts rest on: each word's push towards positive (+) or negative (-):");
    const char *examples[] = {
        "The food was delicious and the staff were friendly.",
        "This phone broke after two days, a total waste of money.",
        "The acting was wooden but the soundtrack was great.",
        "I would not recommend this place to anyone.",
    };
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) explain(ctx, &model, vocab, examples[i]);
    rc = CLI_OK;
    goto done;
fail:
    rc = cli_error("demo", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
done:
    free(order);
    free(dev_order);
    qkv_ctx_free(ctx);
    qkv_optim_free(opt);
    qkv_params_free(params);
    qkv_vocab_free(vocab);
    free_split(&train);
    free_split(&dev);
    return rc;
}

const cli_command cmd_demo = {"demo", "train a sentiment classifier on real reviews and show what it learned", run,
                              help};
