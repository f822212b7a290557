/* qkv serve's HTTP side on libmicrohttpd (a thread per connection): routes, the body limit, status codes, JSON
 * replies, and Server-Sent Events for streamed generation. Each request becomes a job for the worker pool; the
 * connection's thread waits for its answer (or reads its events as they come). */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cli.h"
#include "serve.h"

extern const unsigned char qkv_serve_page[];
extern const unsigned long qkv_serve_page_len;

struct serve_server {
    struct MHD_Daemon *d;
    serve_models *models;
    serve_pool *pool;
    serve_config cfg;
};

/* What a connection carries between the handler's calls: the body read so far. */
typedef struct conn {
    int ep;
    char *body;
    size_t len, cap;
    bool too_big;
} conn;

static enum MHD_Result reply(struct MHD_Connection *c, int status, const char *type, const char *body, size_t len,
                             const char *allow) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

/* A JSON body; takes o. */
static enum MHD_Result reply_json(struct MHD_Connection *c, int status, cJSON *o, const char *allow) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) return reply(c, 500, "application/json", "{\"error\":{\"message\":\"out of memory\"}}", 38, NULL);
    enum MHD_Result ret = reply(c, status, "application/json", s, strlen(s), allow);
    free(s);
    return ret;
}

/* {"error": {"message", "field" (when one is to blame), "status"}} */
static enum MHD_Result reply_error(struct MHD_Connection *c, int status, const char *field, const char *msg,
                                   const char *allow) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    if (field && field[0]) cJSON_AddStringToObject(e, "field", field);
    cJSON_AddNumberToObject(e, "status", status);
    return reply_json(c, status, o, allow);
}

/* ---- Server-Sent Events: the job's bytes as the worker writes them ---- */
static ssize_t read_events(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    serve_job *j = cls;
    pthread_mutex_lock(&j->mu);
    while (j->read == j->len && !j->done) pthread_cond_wait(&j->cv, &j->mu);
    ssize_t n;
    if (j->read < j->len) {
        size_t k = j->len - j->read < max ? j->len - j->read : max;
        memcpy(buf, j->buf + j->read, k);
        j->read += k;
        n = (ssize_t)k;
    } else {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&j->mu);
    return n;
}

/* The response is gone (finished or the client left): a generation still running stops at its next token. */
static void events_done(void *cls) {
    serve_job *j = cls;
    pthread_mutex_lock(&j->mu);
    j->cancelled = true;
    pthread_mutex_unlock(&j->mu);
    serve_job_release(j);
}

static enum MHD_Result run_job(serve_server *s, struct MHD_Connection *c, conn *k) {
    serve_job *j = serve_job_new();
    if (!j) return reply_error(c, 500, "", "out of memory", NULL);
    const char *field;
    char msg[512];
    int rc = serve_request_parse((serve_endpoint)k->ep, k->body ? k->body : "", k->len, &j->req, &field, msg,
                                 sizeof msg);
    if (rc) {
        serve_job_release(j);
        return reply_error(c, rc, field, msg, NULL);
    }
    if (!(j->model = serve_models_find(s->models, j->req.ep, j->req.model, msg, sizeof msg))) {
        serve_job_release(j);
        return reply_error(c, 400, "model", msg, NULL);
    }
    if (!serve_pool_submit(s->pool, j)) {
        serve_job_release(j);
        return reply_error(c, 503, "", "the server is busy (request queue full): try again", NULL);
    }
    if (j->req.stream) { /* wait for the first event, so an error before any token is a plain JSON error */
        pthread_mutex_lock(&j->mu);
        while (!j->len && !j->done) pthread_cond_wait(&j->cv, &j->mu);
        bool failed = !j->len && j->done;
        pthread_mutex_unlock(&j->mu);
        if (!failed) {
            struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_events, j,
                                                                       events_done);
            if (!r) {
                events_done(j);
                return MHD_NO;
            }
            MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
            MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
            enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
            MHD_destroy_response(r);
            return ret;
        }
    }
    serve_job_wait(j);
    enum MHD_Result ret;
    if (j->status != 200 || !j->result) {
        ret = reply_error(c, j->status != 200 ? j->status : 500, j->field, j->error[0] ? j->error : "no answer",
                          NULL);
    } else {
        ret = reply_json(c, 200, j->result, NULL);
        j->result = NULL;
    }
    serve_job_release(j);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    serve_server *s = cls;
    conn *k = *con_cls;
    bool get = !strcmp(method, MHD_HTTP_METHOD_GET), post = !strcmp(method, MHD_HTTP_METHOD_POST);
    if (!k) { /* the first call: headers only */
        if (!(k = calloc(1, sizeof *k))) return MHD_NO;
        *con_cls = k;
        k->ep = serve_endpoint_of(url);
        bool page = !strcmp(url, "/") || !strcmp(url, "/health") || !strcmp(url, "/v1/models");
        if (k->ep >= 0 && !post)
            return reply_error(c, 405, "", "this endpoint takes POST with a JSON body", "POST");
        if (page && !get) return reply_error(c, 405, "", "this path takes GET", "GET");
        if (!page && k->ep < 0) {
            char msg[300];
            snprintf(msg, sizeof msg, "no route %.200s (GET /v1/models lists the runs and their endpoints)", url);
            return reply_error(c, 404, "", msg, NULL);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (post && cl && strtoull(cl, NULL, 10) > s->cfg.max_body) k->too_big = true;
        if (k->too_big) {
            char msg[120];
            snprintf(msg, sizeof msg, "the body is larger than the limit of %zu bytes", s->cfg.max_body);
            return reply_error(c, 413, "", msg, NULL);
        }
        if (post) return MHD_YES; /* the body follows */
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (k->too_big || k->len + n > s->cfg.max_body) {
            k->too_big = true;
            return MHD_YES;
        }
        if (k->len + n > k->cap) {
            size_t cap = k->cap ? k->cap : 4096;
            while (cap < k->len + n) cap *= 2;
            char *b = realloc(k->body, cap);
            if (!b) return MHD_NO;
            k->body = b;
            k->cap = cap;
        }
        memcpy(k->body + k->len, upload, n);
        k->len += n;
        return MHD_YES;
    }
    if (k->too_big) {
        char msg[120];
        snprintf(msg, sizeof msg, "the body is larger than the limit of %zu bytes", s->cfg.max_body);
        return reply_error(c, 413, "", msg, NULL);
    }
    if (k->ep >= 0) return run_job(s, c, k);
    if (!strcmp(url, "/health")) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "ok");
        cJSON_AddNumberToObject(o, "models", s->models->n);
        serve_pool_stats st = serve_pool_get_stats(s->pool);
        cJSON_AddNumberToObject(o, "queued", (double)st.queued);
        cJSON_AddNumberToObject(o, "batches", (double)st.batches);
        cJSON_AddNumberToObject(o, "requests", (double)st.requests);
        cJSON_AddNumberToObject(o, "largest_batch", (double)st.largest);
        cJSON_AddNumberToObject(o, "max_batch", s->cfg.max_batch);
        cJSON_AddNumberToObject(o, "batch_wait_ms", s->cfg.batch_wait_ms);
        return reply_json(c, 200, o, NULL);
    }
    if (!strcmp(url, "/v1/models")) return reply_json(c, 200, serve_models_json(s->models), NULL);
    return reply(c, 200, "text/html; charset=utf-8", (const char *)qkv_serve_page, qkv_serve_page_len, NULL);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    (void)cls;
    (void)c;
    (void)why;
    conn *k = *con_cls;
    if (k) free(k->body);
    free(k);
    *con_cls = NULL;
}

serve_server *serve_server_start(const serve_config *cfg, serve_models *ms, int *port) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    const char *host = !strcmp(cfg->host, "localhost") ? "127.0.0.1" : cfg->host;
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return cli_error("serve", CLI_USAGE, "--host '%s': expected an IPv4 address such as 127.0.0.1", cfg->host),
               NULL;
    serve_server *s = calloc(1, sizeof *s);
    if (!s) return cli_error("serve", CLI_RUNTIME, "out of memory"), NULL;
    s->cfg = *cfg;
    s->models = ms;
    if (!(s->pool = serve_pool_new(cfg->workers, cfg->max_batch, cfg->max_queue, cfg->batch_wait_ms))) {
        free(s);
        return cli_error("serve", CLI_RUNTIME, "cannot start the worker threads"), NULL;
    }
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC |
                                MHD_USE_ERROR_LOG,
                            0, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout, MHD_OPTION_NOTIFY_COMPLETED,
                            completed, NULL, MHD_OPTION_END);
    if (!s->d) {
        serve_pool_free(s->pool);
        free(s);
        return cli_error("serve", CLI_RUNTIME, "cannot listen on %s:%d (in use, or not an address of this host?)",
                         cfg->host, cfg->port),
               NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? (int)info->port : cfg->port;
    return s;
}

void serve_server_stop(serve_server *s) {
    if (!s) return;
    MHD_quiesce_daemon(s->d); /* no new connections */
    serve_pool_free(s->pool); /* waiting requests get 503, running generations stop */
    MHD_stop_daemon(s->d);
    free(s);
}
