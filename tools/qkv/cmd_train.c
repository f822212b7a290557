/* qkv train: train a model from a JSON config into a run directory, or resume one. */
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qkv/config.h"
#include "qkv/dist.h"
#include "qkv/fsutil.h"
#include "qkv/train.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv train --config FILE --run DIR [--set key.path=value ...] [--quiet] [--json]\n"
            "       qkv train --resume --run DIR [--config FILE] [--set key.path=value ...] [--quiet] [--json]\n\n"
            "Trains the model a JSON config describes (qkv config show TYPE prints a complete one; docs/training.md\n"
            "explains every field) and writes the run directory: config.json (the complete config), log.jsonl,\n"
            "ckpt-<step>.safetensors (the last train.keep_checkpoints), best.safetensors (best dev metric),\n"
            "tokenizer files and plot.svg (train/dev curves).\n\n"
            "  --config FILE      the run config (with --resume: default DIR/config.json)\n"
            "  --run DIR          the run directory (created; must not hold checkpoints unless --resume)\n"
            "  --set K=V          override one config value, e.g. --set train.optimizer.lr=3e-4 (V is JSON, or\n"
            "                     a plain string); repeatable\n"
            "  --resume           continue from the newest checkpoint in DIR, bit-identically to a run that was\n"
            "                     never interrupted (same thread count); raise train.steps with --set to go further\n"
            "  --quiet            no progress output\n"
            "  --json             log records as JSON lines on standard output (progress stays on stderr)\n\n"
            "Progress: a bar on a terminal (step, loss, learning rate, tokens/s, ETA), plain lines otherwise.\n"
            "SIGINT / SIGTERM save a checkpoint of the current step and exit with 130 / 143 (resume with --resume).\n"
            "Data-parallel: mpirun -np N qkv train ... trains on N processes (docs/distributed.md); train.batch_size\n"
            "is the global batch, each rank takes its share; rank 0 writes the run directory.\n"
            "Exit codes: 0 done (or early-stopped), 1 usage, 2 bad config or data, 3 runtime failure (e.g.\n"
            "non-finite losses for train.max_nan_skips steps in a row).\n");
}

static volatile sig_atomic_t stop_signal = 0;
static void on_signal(int sig) { stop_signal = sig; }

typedef struct {
    cli_progress bar;
    bool json, quiet;
    double units;
    long start; /* step the session began at */
} train_ui;

static void on_step(void *user, long step, long total, double loss, double lr, double tokens) {
    train_ui *ui = user;
    (void)total;
    ui->units += tokens;
    char extra[96];
    snprintf(extra, sizeof extra, "loss %.4f lr %.3g", loss, lr);
    cli_progress_update(&ui->bar, step - ui->start, ui->units, extra);
}

/* What init_from loaded and which parameters train: "init_from: F: 38 tensors loaded; new (2): a, b; unused (1): c"
 * and "finetune: 4 parameters train, 36 frozen (layers 0-3)". */
static void show_finetune(const char *line) {
    cJSON *j = cJSON_Parse(line);
    const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(j, "kind"));
    if (kind && !strcmp(kind, "finetune")) {
        printf("finetune: %.0f parameters train, %.0f frozen (layers 0-%.0f)\n",
               cJSON_GetNumberValue(cJSON_GetObjectItem(j, "trainable")),
               cJSON_GetNumberValue(cJSON_GetObjectItem(j, "frozen")),
               cJSON_GetNumberValue(cJSON_GetObjectItem(j, "layers")) - 1);
    } else if (kind) {
        printf("init_from: %s: %.0f tensors loaded", cJSON_GetStringValue(cJSON_GetObjectItem(j, "file")),
               cJSON_GetNumberValue(cJSON_GetObjectItem(j, "loaded")));
        const char *keys[2][2] = {{"new", "n_new"}, {"unused", "n_unused"}};
        for (int k = 0; k < 2; k++) {
            double n = cJSON_GetNumberValue(cJSON_GetObjectItem(j, keys[k][1]));
            printf("; %s (%.0f)%s", keys[k][0], n, n > 0 ? ":" : "");
            const cJSON *it;
            cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, keys[k][0])) printf(" %s", it->valuestring);
            int listed = cJSON_GetArraySize(cJSON_GetObjectItem(j, keys[k][0]));
            if (n > listed) printf(" ...");
        }
        printf("\n");
    }
    cJSON_Delete(j);
}

/* The coverage of pretrained embeddings, which the new run logged before training: "embeddings: P <- FILE: 14,210
 * of 20,000 tokens (71.1%)". */
static void show_pretrained(const char *dir, const train_ui *ui) {
    if (ui->quiet && !ui->json) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/log.jsonl", dir);
    FILE *f = fopen(path, "r");
    char line[8192];
    while (f && fgets(line, sizeof line, f)) {
        bool warning = strstr(line, "\"kind\":\"warning\"") != NULL;
        bool init = strstr(line, "\"kind\":\"init_from\"") != NULL, ft = strstr(line, "\"kind\":\"finetune\"");
        if (!warning && !init && !ft && !strstr(line, "\"kind\":\"pretrained\"")) continue;
        line[strcspn(line, "\n")] = '\0';
        if (ui->json) {
            printf("%s\n", line);
            continue;
        }
        if (init || ft) {
            show_finetune(line);
            continue;
        }
        if (warning) { /* data the run kept but changed (summarize: articles cut to the model's room) */
            cJSON *j = cJSON_Parse(line);
            const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(j, "message"));
            if (msg) fprintf(stderr, "warning: %s\n", msg);
            cJSON_Delete(j);
            continue;
        }
        cJSON *j = cJSON_Parse(line);
        double found = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "found"));
        double tokens = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "tokens"));
        const char *param = cJSON_GetStringValue(cJSON_GetObjectItem(j, "param"));
        const char *file = cJSON_GetStringValue(cJSON_GetObjectItem(j, "file"));
        char a[32], b[32];
        if (param && file && isfinite(found) && isfinite(tokens))
            fprintf(stderr, "embeddings: %s <- %s: %s of %s tokens (%.1f%%)\n", param, file,
                    cli_grouped((long long)found, a, sizeof a), cli_grouped((long long)tokens, b, sizeof b),
                    tokens > 0 ? 100.0 * found / tokens : 0.0);
        cJSON_Delete(j);
    }
    if (f) fclose(f);
    fflush(stdout);
}

static void on_record(void *user, const char *json) {
    train_ui *ui = user;
    if (ui->json) {
        printf("%s\n", json);
        fflush(stdout);
        return;
    }
    if (ui->quiet || !strstr(json, "\"kind\":\"eval\"")) return;
    /* Evals are worth a line of their own even under a progress bar. */
    cJSON *j = cJSON_Parse(json);
    if (!j) return;
    const char *metric = cJSON_GetStringValue(cJSON_GetObjectItem(j, "metric"));
    double v = metric ? cJSON_GetNumberValue(cJSON_GetObjectItem(j, metric)) : NAN;
    char more[64] = "";
    if (metric && strcmp(metric, "loss")) snprintf(more, sizeof more, ", %s %.4f", metric, v);
    fprintf(stderr, "%seval step %.0f: dev loss %.4f%s%s\n", ui->bar.tty ? "\r\033[K" : "",
            cJSON_GetNumberValue(cJSON_GetObjectItem(j, "step")), cJSON_GetNumberValue(cJSON_GetObjectItem(j, "loss")),
            more, cJSON_IsTrue(cJSON_GetObjectItem(j, "best")) ? " (best)" : "");
    cJSON_Delete(j);
}

static int train(int argc, char **argv);

/* Under mpirun every rank runs this command (docs/distributed.md): rank 0 shows progress and records, the others
 * stay quiet; all leave the job together. */
static int run(int argc, char **argv) {
    if (qkv_dist_init(&argc, &argv) != QKV_OK) return cli_error("train", CLI_INPUT, "%s", qkv_last_error());
    int rc = train(argc, argv);
    qkv_dist_finalize();
    return rc;
}

static int train(int argc, char **argv) {
    const char *config = NULL, *dir = NULL;
    const char **sets = calloc((size_t)argc, sizeof *sets);
    int n_sets = 0;
    bool resume = false;
    train_ui ui = {0};
    if (!sets) return cli_error("train", CLI_RUNTIME, "out of memory");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--config") && v) config = argv[++i];
        else if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--set") && v) sets[n_sets++] = argv[++i];
        else if (!strcmp(a, "--resume")) resume = true;
        else if (!strcmp(a, "--quiet")) ui.quiet = true;
        else if (!strcmp(a, "--json")) ui.json = true;
        else {
            free(sets);
            return cli_error("train", CLI_USAGE, "unexpected argument '%s' (see qkv train --help)", a);
        }
    }
    if (qkv_dist_rank() > 0) {
        ui.quiet = true;
        ui.json = false;
    }
    if (!dir || (!config && !resume)) {
        free(sets);
        return cli_error("train", CLI_USAGE, "needs --run DIR and --config FILE (or --resume)");
    }
    char cfg_path[4096];
    if (!config) {
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
        config = cfg_path;
    }
    cJSON *user = qkv_config_read(config);
    for (int i = 0; user && i < n_sets; i++)
        if (qkv_config_set(user, sets[i]) != QKV_OK) {
            cJSON_Delete(user);
            user = NULL;
        }
    free(sets);
    cJSON *cfg = user ? qkv_config_resolve(user, NULL) : NULL;
    cJSON_Delete(user);
    if (!cfg) return cli_error("train", CLI_INPUT, "%s", qkv_last_error());
    /* A new run refused before its first step (a bad config value, an unreadable data file) leaves nothing it created
     * in DIR. A refused resume needs no undo: it writes nothing before every check passed. Rank 0 writes DIR. */
    qkv_fs_undo *undo = !resume && qkv_dist_rank() == 0 ? qkv_fs_undo_begin(dir) : NULL;
    qkv_run_settings set;
    qkv_run *r = qkv_config_settings(cfg, &set) == QKV_OK ? qkv_run_new(dir, cfg, resume) : NULL;
    long total = r ? (long)set.train.steps : 0;
    cJSON_Delete(cfg);
    if (!r) {
        qkv_fs_undo_rollback(undo);
        return cli_error("train", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    }
    if (!resume) show_pretrained(dir, &ui);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* A resumed run counts its bar from where it starts, so the rate and ETA are this session's. */
    long start = qkv_run_step(r);
    char label[48];
    snprintf(label, sizeof label, start ? "train (from step %ld)" : "train", start);
    cli_progress_start(&ui.bar, label, total - start, "tok", ui.quiet);
    ui.start = start;
    qkv_train_hooks hooks = {.user = &ui, .on_step = on_step, .on_record = on_record, .stop = &stop_signal};
    qkv_train_outcome outcome;
    qkv_status st = qkv_run_train(r, &hooks, &outcome);
    long step = qkv_run_step(r);
    bool export_hf = qkv_run_model_type(r)->save_pretrained != NULL;
    qkv_run_free(r);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (st != QKV_OK && step == 0) qkv_fs_undo_rollback(undo); /* refused at the start, e.g. a bad eval.metric */
    else qkv_fs_undo_free(undo);
    if (st != QKV_OK) {
        if (ui.bar.tty && !ui.quiet) fputc('\n', stderr);
        return cli_error("train", st == QKV_ERR_NUMERIC ? CLI_RUNTIME : cli_status_exit(st), "%s", qkv_last_error());
    }
    const char *how = outcome == QKV_TRAIN_EARLY_STOP ? "early stop"
                      : outcome == QKV_TRAIN_TIME_LIMIT ? "time limit (train.max_seconds)"
                      : outcome == QKV_TRAIN_STOPPED  ? "stopped"
                                                      : "done";
    char extra[96];
    snprintf(extra, sizeof extra, "%s at step %ld", how, step);
    cli_progress_finish(&ui.bar, extra);
    /* Models with a Hugging Face counterpart (bert) also leave DIR/hf: the best checkpoint's weights, config.json
     * and vocab.txt, for qkv attend --model and transformers. */
    if (export_hf && outcome != QKV_TRAIN_STOPPED) {
        char hf[4096];
        snprintf(hf, sizeof hf, "%s/hf", dir);
        qkv_run *best = qkv_run_open(dir, NULL);
        st = best ? qkv_run_export_hf(best, hf) : qkv_last_status();
        qkv_run_free(best);
        if (st != QKV_OK) return cli_error("train", cli_status_exit(st), "%s", qkv_last_error());
        if (!ui.quiet) fprintf(stderr, "qkv train: Hugging Face directory %s\n", hf);
    }
    if (outcome == QKV_TRAIN_STOPPED) {
        if (!ui.quiet)
            fprintf(stderr, "qkv train: interrupted; checkpoint saved at step %ld (continue with --resume)\n", step);
        return stop_signal == SIGTERM ? 143 : 130;
    }
    return CLI_OK;
}

const cli_command cmd_train = {"train", "train a model from a JSON config (resumable)", run, help};
