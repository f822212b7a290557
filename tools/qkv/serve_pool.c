/* qkv serve's worker pool. Jobs wait in one FIFO; a free worker takes the oldest job whose model no other worker is
 * running, plus up to max_batch - 1 later jobs of the same model that may share its batch (dynamic batching: requests
 * that arrive close together are answered by one forward). A job that could share a batch waits up to wait_ns for
 * others to arrive (Triton's max_queue_delay): without that window, whether concurrent requests meet in one batch
 * would depend on how fast the worker happens to wake, and on a loaded machine it mostly would not. The window ends
 * early when the batch is full, and a job that cannot share (a generation, a tag) never waits. A full queue refuses
 * new jobs (503). */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "qkv/decode_batch.h"
#include "serve.h"

struct serve_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC: a window's end is not moved by a change of the wall clock */
    serve_job *head, *tail;
    int queued, max_queue, max_batch;
    int64_t wait_ns;
    bool stopping;
    serve_pool_stats stats;
    int n_workers;
    pthread_t *workers;
};

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static bool same_batch(const serve_job *first, const serve_job *j) {
    return j->model == first->model && serve_exec_compatible(&first->req, &j->req);
}

/* Whether the batch that `first` opens may run at `now`: it cannot grow (no window, a batch of one, a request that
 * shares no batch), it is full, or its window is over. If not, *wake becomes the window's end when that is sooner. */
static bool due(const serve_pool *p, const serve_job *first, int64_t now, int64_t *wake) {
    if (p->wait_ns == 0 || p->max_batch == 1 || !serve_exec_compatible(&first->req, &first->req)) return true;
    int64_t end = first->queued_ns + p->wait_ns;
    if (now >= end) return true;
    int n = 1;
    for (const serve_job *j = first->next; j && n < p->max_batch; j = j->next) n += same_batch(first, j);
    if (n >= p->max_batch) return true;
    if (end < *wake) *wake = end;
    return false;
}

/* With the pool locked: unlinks the first due batch (its first job the oldest of a free model) into out and returns
 * its size; 0 when none is due, with *wake the soonest end of a window (INT64_MAX: none is open). */
static int take_batch(serve_pool *p, serve_job **out, int64_t now, int64_t *wake) {
    *wake = INT64_MAX;
    serve_job *prev = NULL, *j = p->head;
    while (j && (j->model->busy || !due(p, j, now, wake))) {
        prev = j;
        j = j->next;
    }
    if (!j) return 0;
    int n = 0;
    serve_job *first = j;
    while (j && n < p->max_batch) {
        serve_job *next = j->next;
        if (j == first || same_batch(first, j)) {
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

/* With the pool locked: sleeps until a submission, a finished batch or shutdown signals, or until `wake`. */
static void wait_until(serve_pool *p, int64_t wake) {
    if (wake == INT64_MAX) {
        pthread_cond_wait(&p->cv, &p->mu);
        return;
    }
    struct timespec t = {.tv_sec = (time_t)(wake / 1000000000), .tv_nsec = (long)(wake % 1000000000)};
    pthread_cond_timedwait(&p->cv, &p->mu, &t);
}

static void *worker(void *arg) {
    serve_pool *p = arg;
    serve_job **batch = malloc(sizeof *batch * (size_t)p->max_batch);
    /* Batch after batch decodes with the same weights: the packs of each model this worker decodes and its
     * decoding states' memory are kept from one batch to the next (decode_batch.h), not made again per request.
     * Packs are found by weight address, and every served run stays loaded (and unchanged) until the pool is
     * freed and its workers have returned, so two models never share packs; they are released below. */
    qkv_decode_keep_open();
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int n = 0;
        int64_t wake = INT64_MAX;
        while (!p->stopping && !(batch && (n = take_batch(p, batch, now_ns(), &wake)))) wait_until(p, wake);
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
    qkv_decode_keep_close();
    free(batch);
    return NULL;
}

serve_pool *serve_pool_new(int workers, int max_batch, int max_queue, int wait_ms) {
    serve_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    p->max_queue = max_queue;
    p->max_batch = max_batch;
    p->wait_ns = (int64_t)wait_ms * 1000000;
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
        j->queued_ns = now_ns();
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
