/* qkv demo: the first whole product a user sees. Trains a small Transformer sentiment classifier on real review
 * sentences compiled into the binary, reports held-out accuracy, classifies a few sentences, and writes the
 * attention viewer page showing which words each verdict rests on. Deterministic for a seed and thread count.
 *
 * It is an ordinary run of the training engine: the sample is written into the demo folder and trained from a
 * config, so `qkv eval / predict / viz --run qkv-demo` work on it afterwards. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "qkv/fsutil.h"
#include "qkv/qkv.h"
#include "run_view.h"

extern const unsigned char qkv_demo_train[], qkv_demo_dev[];
extern const unsigned long qkv_demo_train_len, qkv_demo_dev_len;

#define MARKER ".qkv-demo"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv demo [--out DIR] [--steps N] [--seed S] [--quiet]\n\n"
            "Trains a Transformer sentiment classifier ([CLS] + word embeddings, sinusoidal positions, 2 pre-LN\n"
            "encoder blocks with 4 heads, d_model 128) on 2,606 real review sentences compiled into qkv\n"
            "(examples/data/reviews: IMDb, Amazon and Yelp, CC BY 4.0), prints its accuracy on 373 held-out\n"
            "sentences, classifies example sentences, and writes an HTML page (DIR/viewer.html) showing the\n"
            "words each verdict rests on, every layer's and head's attention, and the loss curves.\n\n"
            "  --out DIR   the run folder (default ./qkv-demo; a previous demo there is replaced)\n"
            "  --steps N   training steps (default 900)\n"
            "  --seed S    random seed (default 1)\n"
            "  --quiet     no progress bar\n\n"
            "Afterwards the folder is an ordinary run: try qkv predict --run DIR \"some sentence\".\n");
}

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

/* label<TAB>text with 0/1 labels -> negative/positive, so predictions read as words. */
static qkv_status write_sample(const char *path, const unsigned char *data, unsigned long len) {
    FILE *f = fopen(path, "wb");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    const char *p = (const char *)data, *end = p + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (n > 2 && p[1] == '\t') fprintf(f, "%s\t%.*s\n", p[0] == '1' ? "positive" : "negative", (int)(n - 2), p + 2);
        p += n + 1;
    }
    if (fclose(f)) return qkv_error_set(QKV_ERR_IO, "%s: write failed", path);
    return QKV_OK;
}

/* A demo folder is reused only if an earlier demo made it (marker file); anything else is left alone. */
static qkv_status prepare_dir(const char *dir) {
    char path[4096];
    struct stat st;
    if (stat(dir, &st) == 0) {
        snprintf(path, sizeof path, "%s/%s", dir, MARKER);
        DIR *d = opendir(dir);
        if (!d) return qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
        bool empty = true, ours = access(path, F_OK) == 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            empty = false;
            if (ours && e->d_type != DT_DIR) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        }
        closedir(d);
        if (!empty && !ours)
            return qkv_error_set(QKV_ERR_INVALID, "%s exists and was not made by qkv demo; choose another --out", dir);
    } else if (qkv_fs_mkdirs(dir) != QKV_OK) {
        return qkv_last_status();
    }
    snprintf(path, sizeof path, "%s/%s", dir, MARKER);
    FILE *m = fopen(path, "w");
    if (!m) return qkv_error_set(QKV_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    fclose(m);
    snprintf(path, sizeof path, "%s/data", dir);
    if (mkdir(path, 0777) && errno != EEXIST) return qkv_error_set(QKV_ERR_IO, "%s: cannot create", path);
    return QKV_OK;
}

typedef struct {
    cli_progress bar;
    double tokens;
} progress;

static void on_step(void *user, long step, long total, double loss, double lr, double tokens) {
    progress *p = user;
    (void)total;
    p->tokens += tokens;
    char extra[96];
    snprintf(extra, sizeof extra, "loss %.3f lr %.1e", loss, lr);
    cli_progress_update(&p->bar, step, p->tokens, extra);
}

static cJSON *demo_config(const char *dir, long steps, long seed) {
    char train[4096], dev[4096];
    snprintf(train, sizeof train, "%s/data/train.tsv", dir);
    snprintf(dev, sizeof dev, "%s/data/dev.tsv", dir);
    cJSON *c = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(c, "model"), *d = cJSON_AddObjectToObject(c, "data");
    cJSON *t = cJSON_AddObjectToObject(c, "train"), *e = cJSON_AddObjectToObject(c, "eval");
    cJSON_AddStringToObject(m, "type", "transformer_classifier");
    cJSON_AddNumberToObject(m, "d_model", 128);
    cJSON_AddNumberToObject(m, "n_layers", 2);
    cJSON_AddNumberToObject(m, "n_heads", 4);
    cJSON_AddNumberToObject(m, "d_ff", 256);
    cJSON_AddNumberToObject(m, "dropout", 0.1);
    cJSON_AddStringToObject(d, "train", train);
    cJSON_AddStringToObject(d, "dev", dev);
    cJSON_AddNumberToObject(d, "min_freq", 2);
    cJSON_AddNumberToObject(t, "steps", (double)steps);
    cJSON_AddNumberToObject(t, "batch_size", 32);
    cJSON *o = cJSON_AddObjectToObject(t, "optimizer");
    cJSON_AddStringToObject(o, "name", "adamw");
    cJSON_AddNumberToObject(o, "lr", 1e-3);
    cJSON_AddNumberToObject(o, "weight_decay", 0.01);
    cJSON *s = cJSON_AddObjectToObject(t, "schedule");
    cJSON_AddStringToObject(s, "spec", "warmup_cosine");
    cJSON_AddNumberToObject(s, "warmup_steps", steps < 1000 ? steps / 9 + 1 : 100);
    cJSON_AddNumberToObject(s, "total_steps", (double)steps);
    cJSON_AddNumberToObject(t, "log_every", 25);
    cJSON_AddNumberToObject(t, "checkpoint_every", (double)steps);
    cJSON_AddNumberToObject(t, "keep_checkpoints", 1);
    cJSON_AddNumberToObject(e, "every", steps >= 100 ? 100 : (double)steps);
    cJSON_AddNumberToObject(c, "seed", (double)seed);
    return c;
}

static int run(int argc, char **argv) {
    long steps = 900, seed = 1;
    bool quiet = false;
    const char *dir = "qkv-demo";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--steps") && v) {
            if (!cli_parse_int("demo", a, argv[++i], 1, 1000000, &steps)) return CLI_USAGE;
        } else if (!strcmp(a, "--seed") && v) {
            if (!cli_parse_int("demo", a, argv[++i], 0, 1L << 31, &seed)) return CLI_USAGE;
        } else if (!strcmp(a, "--out") && v) {
            dir = argv[++i];
        } else if (!strcmp(a, "--quiet")) {
            quiet = true;
        } else {
            return cli_error("demo", CLI_USAGE, "unexpected argument '%s' (see qkv demo --help)", a);
        }
    }
    char path[4096];
    qkv_run *r = NULL;
    cJSON *cfg = NULL, *metrics = NULL;
    int rc = CLI_OK;
    qkv_status st = prepare_dir(dir);
    if (st == QKV_OK) {
        snprintf(path, sizeof path, "%s/data/train.tsv", dir);
        st = write_sample(path, qkv_demo_train, qkv_demo_train_len);
    }
    if (st == QKV_OK) {
        snprintf(path, sizeof path, "%s/data/dev.tsv", dir);
        st = write_sample(path, qkv_demo_dev, qkv_demo_dev_len);
    }
    if (st != QKV_OK) return cli_error("demo", cli_status_exit(st), "%s", qkv_last_error());

    printf("qkv demo: which words does a Transformer read sentiment from?\n"
           "  data   2,606 review sentences to learn from, 373 held out (IMDb, Amazon, Yelp)\n"
           "  model  [CLS] + words -> embedding(128) + positions -> 2 encoder blocks (4 heads) -> [CLS] -> classes\n"
           "  train  %ld steps of 32 sentences, AdamW with warmup and cosine decay, seed %ld, %d thread(s)\n",
           steps, seed, qkv_threads_get());
    fflush(stdout);
    cfg = demo_config(dir, steps, seed);
    if (!cfg || !(r = qkv_run_new(dir, cfg, false))) {
        rc = cli_error("demo", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        goto done;
    }
    progress prog = {0};
    cli_progress_start(&prog.bar, "  train ", steps, "tok", quiet);
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    qkv_train_hooks hooks = {.user = &prog, .on_step = on_step, .stop = &stop_flag};
    qkv_train_outcome outcome;
    st = qkv_run_train(r, &hooks, &outcome);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    cli_progress_finish(&prog.bar, NULL);
    if (st != QKV_OK || outcome == QKV_TRAIN_STOPPED) {
        rc = st != QKV_OK ? cli_error("demo", cli_status_exit(st), "%s", qkv_last_error()) : 130;
        goto done;
    }
    /* Score and explain with the best checkpoint (by held-out accuracy), as `qkv eval` would. */
    qkv_run_free(r);
    if (!(r = qkv_run_open(dir, NULL)) || !(metrics = qkv_run_eval(r, "dev", NULL))) {
        rc = cli_error("demo", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        goto done;
    }
    printf("  held-out accuracy %.1f%% (best checkpoint, step %ld)\n",
           100 * cJSON_GetNumberValue(cJSON_GetObjectItem(metrics, "accuracy")), qkv_run_step(r));
    const char *examples[] = {
        "The food was delicious and the staff were friendly.",
        "This phone broke after two days, a total waste of money.",
        "The acting was wooden but the soundtrack was great.",
        "I would not recommend this place to anyone.",
    };
    const int n_examples = (int)(sizeof examples / sizeof examples[0]);
    printf("\n");
    for (int i = 0; i < n_examples; i++) {
        qkv_run_explanation e;
        if (qkv_run_explain(r, examples[i], &e) != QKV_OK) {
            rc = cli_error("demo", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
            goto done;
        }
        printf("  %-58s %s (p = %.2f)\n", examples[i], e.label, e.probability);
        qkv_run_explanation_free(&e);
    }
    snprintf(path, sizeof path, "%s/viewer.html", dir);
    if (run_view_write(r, dir, examples, n_examples, path, NULL) != QKV_OK) {
        rc = cli_error("demo", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        goto done;
    }
    char *abs = realpath(path, NULL);
    printf("\n  Open %s in a browser to see which words each verdict rests on,\n"
           "  every layer's and head's attention, and the training curves.\n"
           "  Try: qkv predict --run %s \"your own sentence\"\n",
           abs ? abs : path, dir);
    free(abs);
done:
    cJSON_Delete(metrics);
    cJSON_Delete(cfg);
    qkv_run_free(r);
    return rc;
}

const cli_command cmd_demo = {"demo", "train a Transformer on real reviews and show the words it reads", run, help};
