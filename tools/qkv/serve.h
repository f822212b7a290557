/* qkv serve: an HTTP JSON API (libmicrohttpd) over trained runs. The pieces, one file each:
 *   serve.c          the command: options, runs, daemon, signals
 *   serve_request.c  request bodies -> serve_request (pure: no I/O, no model; fuzzed by tests/fuzz)
 *   serve_models.c   the served runs by name, and which endpoints each one's task offers
 *   serve_job.c      one request's answer, shared by its connection and the worker (SSE bytes in between)
 *   serve_pool.c     worker pool and queue: batches of waiting requests of one model, gathered for up to
 *                    --batch-wait-ms; 503 when full
 *   serve_exec.c     a batch of requests run through the library (the code the CLI commands use)
 *   serve_routes.c   HTTP: routes, body limit, status codes, JSON replies and Server-Sent Events
 * Everything is internal to the qkv binary. */
#ifndef QKV_SERVE_H
#define QKV_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qkv/train.h"

struct cJSON;

/* ---- endpoints and requests (serve_request.c) ---- */
typedef enum serve_endpoint {
    SERVE_CLASSIFY = 0,
    SERVE_GENERATE,
    SERVE_COMPLETIONS,
    SERVE_TRANSLATE,
    SERVE_SUMMARIZE,
    SERVE_TAG,
    SERVE_SIMILAR,
    SERVE_EMBED,
    SERVE_N_ENDPOINTS
} serve_endpoint;

/* "/v1/classify" ... */
const char *serve_endpoint_path(serve_endpoint ep);
/* The run task ("classify", "lm", "seq2seq", "summarize", "tagging", "pairs") an endpoint serves. */
const char *serve_endpoint_task(serve_endpoint ep);
/* The endpoint of a path, or -1. */
int serve_endpoint_of(const char *path);

typedef struct serve_request {
    serve_endpoint ep;
    char *model;   /* NULL: the first run whose task the endpoint serves */
    char **texts;  /* "text" (one) or "texts" (several); generate/completions: the prompt; similar: a and b */
    int n_texts;
    bool many;     /* given as "texts": the reply is a list */
    bool explain;  /* classify: the words' attention too */
    bool stream;   /* generate, completions: Server-Sent Events */
    long max_tokens, top_k, seed, beam, n_best, mbr, max_len;
    double temperature, top_p, repetition_penalty, alpha;
    long no_repeat_ngram; /* generate, translate, summarize: include/qkv/repeat.h (0 = off) */
    int repeat_scope;     /* qkv_repeat_scope */
    int utility;   /* qkv_mbr_utility */
    int search;    /* summarize: qkv_summ_search */
    char **stop;   /* completions: strings that end the text (not included) */
    int n_stop;
} serve_request;

/* Limits of one request. */
enum { SERVE_MAX_TEXTS = 256, SERVE_MAX_STOP = 4, SERVE_MAX_TOKENS = 4096 };

/* Parses and checks a JSON body for an endpoint. 0 on success (free with serve_request_free), else 400 with msg
 * set to a sentence naming the field and *field to its name ("" for the body itself). Never reads past len. */
int serve_request_parse(serve_endpoint ep, const char *body, size_t len, serve_request *out, const char **field,
                        char *msg, size_t msg_size);
void serve_request_free(serve_request *r);

/* ---- served runs (serve_models.c) ---- */
typedef struct serve_model {
    char *name, *dir;
    qkv_run *run;
    const char *task;
    bool busy; /* a worker runs a batch of it (guarded by the pool's mutex): a run's context is one thread's at a
                * time */
} serve_model;

typedef struct serve_models {
    serve_model *m;
    int n;
} serve_models;

/* Opens "NAME=DIR" or "DIR" (named after the directory's last component); false with the message printed. */
bool serve_models_add(serve_models *ms, const char *spec);
void serve_models_free(serve_models *ms);
/* The run named `name`, or (name NULL) the first whose task the endpoint serves; NULL otherwise, with msg set. */
serve_model *serve_models_find(serve_models *ms, serve_endpoint ep, const char *name, char *msg, size_t msg_size);
/* GET /v1/models: {"models": [{name, dir, type, task, step, endpoints, config}]}. */
struct cJSON *serve_models_json(const serve_models *ms);

/* ---- jobs (serve_job.c) ---- */
typedef struct serve_job {
    serve_request req;
    serve_model *model;
    /* the answer: HTTP status and JSON body (or error message and field) */
    int status;
    struct cJSON *result;
    char error[512];
    const char *field;
    /* streaming: SSE bytes produced by the worker, read by the connection */
    char *buf;
    size_t len, cap, read;
    bool done, cancelled;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs; /* the connection and the pool each hold one */
    /* the pool's: the queue's link, and when the job joined it (CLOCK_MONOTONIC ns) */
    struct serve_job *next;
    int64_t queued_ns;
} serve_job;

serve_job *serve_job_new(void);
void serve_job_release(serve_job *j);
/* Worker side: append one SSE event "data: <text>\n\n"; false when the client has gone (stop work). */
bool serve_job_event(serve_job *j, const char *data);
/* Worker side: the job is finished (status, result or error already set). */
void serve_job_finish(serve_job *j);
/* Sets an error answer. */
void serve_job_fail(serve_job *j, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Connection side: wait until finished (non-streaming). */
void serve_job_wait(serve_job *j);

/* ---- the pool (serve_pool.c) ---- */
typedef struct serve_pool serve_pool;
/* workers threads; a batch takes up to max_batch compatible waiting jobs of one model, and its first job waits up to
 * wait_ms for the others (0: it takes those already waiting); at most max_queue jobs wait in all. */
serve_pool *serve_pool_new(int workers, int max_batch, int max_queue, int wait_ms);
/* false when the queue is full (the caller answers 503) or the pool is shutting down. Takes a reference. */
bool serve_pool_submit(serve_pool *p, serve_job *j);
/* Batches run so far, the requests they answered, the largest batch, and the requests waiting now. */
typedef struct serve_pool_stats {
    long batches, requests, largest, queued;
} serve_pool_stats;
serve_pool_stats serve_pool_get_stats(serve_pool *p);
/* Jobs still waiting are answered 503 and running ones asked to stop; then the workers are joined. */
void serve_pool_free(serve_pool *p);

/* ---- running a batch (serve_exec.c) ---- */
/* Whether b may share a batch with a (same model known); false for a with itself when a never shares one. */
bool serve_exec_compatible(const serve_request *a, const serve_request *b);
/* Runs n jobs of one model (marked busy) and finishes each. */
void serve_exec_batch(serve_model *m, serve_job **jobs, int n);
/* From now on, running generations stop at their next token (shutdown). */
void serve_exec_stop(void);

/* ---- HTTP (serve_routes.c) ---- */
typedef struct serve_config {
    const char *host;
    int port;
    int workers, max_batch, max_queue;
    int batch_wait_ms; /* how long a batch's first request waits for others */
    size_t max_body;
    int timeout; /* seconds a client may stall */
} serve_config;

typedef struct serve_server serve_server;
/* Starts listening; NULL with the message printed. *port gets the bound port (port 0: a free one). */
serve_server *serve_server_start(const serve_config *c, serve_models *ms, int *port);
void serve_server_stop(serve_server *s);

#endif
