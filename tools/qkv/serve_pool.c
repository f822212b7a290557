/* qkv serve's worker pool. Jobs wait in one FIFO; a free worker takes the oldest job whose model no other worker is
 * running, plus up to max_batch - 1 later jobs of the same model that may share its batch (dynamic batching: requests
 * that arrive while the model is busy are answered together by one forward). A full queue refuses new jobs (503). */
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

struct serve_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_job *head, *tail;
    int queued, max_queue, max_batch;
    bool stopping;
    serve_pool_stats stats;
    int n_workers;
    pthread_t *workers;
};

/* With the pool locked: unlinks and returns up to max_batch jobs of the oldest runnable model into out. */
static int take_batch(serve_pool *p, serve_job **out) {
    serve_job *prev = NULL, *j = p->head;
    while (j && j->model->busy) {
        prev = j;
        j = j->next;
    }
    if (!j) return 0;
    int n = 0;
    serve_job *first = j;
    while (j && n < p->max_batch) {
        serve_job *next = j->next;
        bool take = j == first || (j->model == first->model && serve_exec_compatible(&first->req, &j->req));
        if (take) {
            if (prev) prev->next = next;
            else p->head = next;
            if (p->tail == j) p->tail = prev;
            j->next = NULL;
            out[n++] = j;
            p->queued--;
        } else {
            prev = j;
        }
        j = next;
    }
    first->model->busy = true;
    p->stats.batches++;
    p->stats.requests += n;
    if (n > p->stats.largest) p->stats.largest = n;
    return n;
}

static void *worker(void *arg) {
    serve_pool *p = arg;
    serve_job **batch = malloc(sizeof *batch * (size_t)p->max_batch);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int n = 0;
        while (!p->stopping && !(batch && (n = take_batch(p, batch)))) pthread_cond_wait(&p->cv, &p->mu);
        if (p->stopping && !n) break;
        serve_model *m = batch[0]->model;
        pthread_mutex_unlock(&p->mu);
        serve_exec_batch(m, batch, n);
        for (int i = 0; i < n; i++) serve_job_release(batch[i]);
        pthread_mutex_lock(&p->mu);
        m->busy = false;
        pthread_cond_broadcast(&p->cv); /* jobs of this model may wait for it */
    }
    pthread_mutex_unlock(&p->mu);
    free(batch);
    return NULL;
}

serve_pool *serve_pool_new(int workers, int max_batch, int max_queue) {
    serve_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->max_queue = max_queue;
    p->max_batch = max_batch;
    p->workers = calloc((size_t)workers, sizeof *p->workers);
    for (int i = 0; p->workers && i < workers; i++) {
        if (pthread_create(&p->workers[i], NULL, worker, p)) break;
        p->n_workers++;
    }
    if (p->n_workers < 1) {
        serve_pool_free(p);
        return NULL;
    }
    return p;
}

bool serve_pool_submit(serve_pool *p, serve_job *j) {
    pthread_mutex_lock(&p->mu);
    bool ok = !p->stopping && p->queued < p->max_queue;
    if (ok) {
        pthread_mutex_lock(&j->mu);
        j->refs++;
        pthread_mutex_unlock(&j->mu);
        j->next = NULL;
        if (p->tail) p->tail->next = j;
        else p->head = j;
        p->tail = j;
        p->queued++;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return ok;
}

serve_pool_stats serve_pool_get_stats(serve_pool *p) {
    pthread_mutex_lock(&p->mu);
    serve_pool_stats s = p->stats;
    s.queued = p->queued;
    pthread_mutex_unlock(&p->mu);
    return s;
}

void serve_pool_free(serve_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    serve_job *j = p->head;
    p->head = p->tail = NULL;
    p->queued = 0;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    serve_exec_stop(); /* running generations end at their next token */
    while (j) {
        serve_job *next = j->next;
        serve_job_fail(j, 503, "", "the server is shutting down");
        serve_job_finish(j);
        serve_job_release(j);
        j = next;
    }
    for (int i = 0; i < p->n_workers; i++) pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
