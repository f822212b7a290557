/* qkv serve: trained runs behind an HTTP JSON API and a web page (serve.h lists the pieces). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "serve.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv serve --run DIR [--run NAME=DIR ...] [--host 127.0.0.1] [--port 8080] [--workers N]\n"
            "                 [--max-batch N] [--batch-wait-ms MS] [--queue N] [--max-body BYTES]\n"
            "                 [--timeout SECONDS]\n\n"
            "Serves trained runs over HTTP with JSON in and out, and a web page at / to try them. Each run is\n"
            "named by NAME= or its directory's name; a request picks one with \"model\" (default: the first run\n"
            "whose task fits the endpoint). Endpoints, by the run's task:\n"
            "  POST /v1/classify     classify: {\"text\"} or {\"texts\": [...]}, \"explain\": true adds the tokens and\n"
            "                        the attention of [CLS] over them (last layer, mean over heads)\n"
            "  POST /v1/generate     lm: {\"prompt\", \"max_tokens\", \"temperature\", \"top_k\", \"top_p\",\n"
            "                        \"repetition_penalty\", \"no_repeat_ngram\", \"repeat_scope\", \"seed\",\n"
            "                        \"stream\"}: qkv generate's options; \"stream\":\n"
            "                        true answers with Server-Sent Events, one per piece of text\n"
            "  POST /v1/completions  lm, OpenAI's shape: {\"prompt\", \"max_tokens\", \"temperature\", \"top_p\",\n"
            "                        \"stop\", \"stream\"} (\"data: [DONE]\" ends a stream)\n"
            "  POST /v1/translate    seq2seq: {\"text\"|\"texts\", \"beam\", \"n_best\", \"alpha\", \"mbr\",\n"
            "                        \"temperature\", \"utility\", \"seed\", \"max_len\", \"repetition_penalty\",\n"
            "                        \"no_repeat_ngram\", \"repeat_scope\"}\n"
            "  POST /v1/summarize    summarize: {\"text\"|\"texts\", \"search\": greedy|sample|beam|mbr, ...,\n"
            "                        \"repetition_penalty\", \"no_repeat_ngram\", \"repeat_scope\"}\n"
            "  POST /v1/tag          tagging: {\"text\"|\"texts\"}: tokens, tags, entities\n"
            "  POST /v1/similar      pairs: {\"a\", \"b\"}: cosine, the run's threshold, duplicate\n"
            "  POST /v1/embed        pairs: {\"text\"|\"texts\"}: unit vectors\n"
            "  GET /v1/models        the runs: name, type, task, step, endpoints, config\n"
            "  GET /health           {\"status\": \"ok\", ...}: also batches run, requests answered, largest batch,\n"
            "                        the batching settings\n"
            "Errors are JSON {\"error\": {\"message\", \"field\", \"status\"}}: 400 bad input (naming the field),\n"
            "404 unknown path, 405 wrong method, 413 body over --max-body, 503 queue full.\n\n"
            "Requests run on --workers threads (default: the number of cores), one batch per run at a time:\n"
            "classify and translate requests of one run that wait together are answered by one batched\n"
            "forward. At most --queue requests (default 256) wait; more get 503. A worker keeps the decoding\n"
            "copy of the weights of each translation or summarize run it has served (a few MB to tens of MB a\n"
            "run) until the server stops, instead of making it again for every batch.\n\n"
            "  --max-batch N      requests in one batch at most (default 16; 1 turns batching off; --batch N\n"
            "                     is the same)\n"
            "  --batch-wait-ms MS how long the first request of a batch waits for others to join it before it\n"
            "                     runs (default 2; 0: only those already waiting). A full batch runs at once;\n"
            "                     requests that are never batched (generate, tag, ...) never wait\n"
            "  --host ADDR        IPv4 address to listen on (default 127.0.0.1: this machine only)\n"
            "  --port N           TCP port (default 8080; 0 picks a free one). The address is printed as\n"
            "                     \"listening on http://ADDR:PORT/\" on standard output\n"
            "  --max-body BYTES   largest request body (default 1048576)\n"
            "  --timeout SECONDS  a client that stalls this long is disconnected (default 30)\n"
            "SIGINT or SIGTERM stops the server: waiting requests get 503, running ones finish.\n");
}

static volatile sig_atomic_t stop_signal = 0;
static void on_signal(int sig) { stop_signal = sig; }

static int run(int argc, char **argv) {
    serve_config cfg = {.host = "127.0.0.1", .port = 8080, .max_batch = 16, .max_queue = 256, .batch_wait_ms = 2,
                        .max_body = 1 << 20, .timeout = 30};
    long workers = sysconf(_SC_NPROCESSORS_ONLN), v;
    if (workers < 1) workers = 1;
    serve_models ms = {0};
    int rc = CLI_OK;
    for (int i = 1; i < argc && rc == CLI_OK; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--run") && val) {
            if (!serve_models_add(&ms, argv[++i])) rc = CLI_INPUT;
        } else if (!strcmp(a, "--host") && val) cfg.host = argv[++i];
        else if (!strcmp(a, "--port") && val) {
            if (!cli_parse_int("serve", a, argv[++i], 0, 65535, &v)) rc = CLI_USAGE;
            cfg.port = (int)v;
        } else if (!strcmp(a, "--workers") && val) {
            if (!cli_parse_int("serve", a, argv[++i], 1, 1024, &workers)) rc = CLI_USAGE;
        } else if ((!strcmp(a, "--max-batch") || !strcmp(a, "--batch")) && val) {
            if (!cli_parse_int("serve", a, argv[++i], 1, 1024, &v)) rc = CLI_USAGE;
            cfg.max_batch = (int)v;
        } else if (!strcmp(a, "--batch-wait-ms") && val) {
            if (!cli_parse_int("serve", a, argv[++i], 0, 600000, &v)) rc = CLI_USAGE;
            cfg.batch_wait_ms = (int)v;
        } else if (!strcmp(a, "--queue") && val) {
            if (!cli_parse_int("serve", a, argv[++i], 1, 1 << 20, &v)) rc = CLI_USAGE;
            cfg.max_queue = (int)v;
        } else if (!strcmp(a, "--max-body") && val) {
            if (!cli_parse_int("serve", a, argv[++i], 64, 1L << 30, &v)) rc = CLI_USAGE;
            cfg.max_body = (size_t)v;
        } else if (!strcmp(a, "--timeout") && val) {
            if (!cli_parse_int("serve", a, argv[++i], 1, 86400, &v)) rc = CLI_USAGE;
            cfg.timeout = (int)v;
        } else rc = cli_error("serve", CLI_USAGE, "unexpected argument '%s' (see qkv serve --help)", a);
    }
    if (rc == CLI_OK && !ms.n) rc = cli_error("serve", CLI_USAGE, "which runs? (--run DIR, repeatable)");
    cfg.workers = (int)workers;
    serve_server *s = NULL;
    int port = 0;
    /* SIGINT and SIGTERM are blocked in every thread the server starts and taken by this one in sigsuspend, so a
     * signal cannot slip in between the check and the wait. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term, old_pipe;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    struct sigaction ign = {.sa_handler = SIG_IGN}; /* a client that leaves mid-answer is its connection's error */
    sigaction(SIGPIPE, &ign, &old_pipe);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    if (rc == CLI_OK && !(s = serve_server_start(&cfg, &ms, &port))) rc = CLI_INPUT;
    if (rc == CLI_OK) {
        for (int i = 0; i < ms.n; i++)
            fprintf(stderr, "qkv serve: %s: %s run of %s (%s)\n", ms.m[i].name, ms.m[i].task,
                    qkv_run_model_type(ms.m[i].run)->name, ms.m[i].dir);
        printf("listening on http://%s:%d/\n", cfg.host, port);
        fflush(stdout);
        while (!stop_signal) sigsuspend(&old);
        fprintf(stderr, "qkv serve: signal %d, stopping\n", (int)stop_signal);
        serve_server_stop(s);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    serve_models_free(&ms);
    return rc;
}

const cli_command cmd_serve = {"serve", "serve trained runs over HTTP: a JSON API and a web page", run, help};
