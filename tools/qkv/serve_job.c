/* qkv serve's jobs: one request's answer shared by the connection that waits for it and the worker that computes
 * it (reference-counted), with the Server-Sent Event bytes a streamed generation produces in between. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

serve_job *serve_job_new(void) {
    serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->status = 200;
    j->field = "";
    return j;
}

void serve_job_release(serve_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    serve_request_free(&j->req);
    cJSON_Delete(j->result);
    free(j->buf);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

bool serve_job_event(serve_job *j, const char *data) {
    size_t n = strlen(data) + 8;
    pthread_mutex_lock(&j->mu);
    bool ok = !j->cancelled;
    if (ok && j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 1024;
        while (cap < j->len + n + 1) cap *= 2;
        char *b = realloc(j->buf, cap);
        if (b) {
            j->buf = b;
            j->cap = cap;
        } else ok = false;
    }
    if (ok) {
        j->len += (size_t)snprintf(j->buf + j->len, j->cap - j->len, "data: %s\n\n", data);
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
    return ok;
}

void serve_job_finish(serve_job *j) {
    pthread_mutex_lock(&j->mu);
    j->done = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void serve_job_fail(serve_job *j, int status, const char *field, const char *fmt, ...) {
    j->status = status;
    j->field = field ? field : "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->error, sizeof j->error, fmt, ap);
    va_end(ap);
}

void serve_job_wait(serve_job *j) {
    pthread_mutex_lock(&j->mu);
    while (!j->done) pthread_cond_wait(&j->cv, &j->mu);
    pthread_mutex_unlock(&j->mu);
}
