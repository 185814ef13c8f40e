/*
 * The bounded-queue worker (worker.h): a ring of fixed-size items, a CLOCK_MONOTONIC condition
 * variable and one thread. The lock guards the ring, the stop and wake flags and the drop
 * count; run is always called without it, so a producer waits at most for a memcpy.
 */
#include "agent/worker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

struct gs_worker {
    const struct gs_worker_ops *ops;
    void *ctx;
    pthread_mutex_t lock; /* ring, head, n, stop, woken, dropped */
    pthread_cond_t cond;  /* CLOCK_MONOTONIC */
    unsigned char *ring;  /* cap items */
    unsigned char *batch; /* the thread's copy of what it took */
    unsigned head, n;
    int stop, woken;
    uint64_t dropped;
    int64_t deadline_ns; /* the thread's own */
    pthread_t thread;
    int started;
};

static void *item_at(struct gs_worker *w, unsigned k)
{
    return w->ring + (size_t)((w->head + k) % w->ops->cap) * w->ops->item_size;
}

int gs_worker_new(struct gs_worker **out, const struct gs_worker_ops *ops, void *ctx,
                  struct gs_err *err)
{
    struct gs_worker *w = calloc(1, sizeof *w);
    size_t bytes = (size_t)ops->cap * ops->item_size;
    pthread_condattr_t ca;

    *out = NULL;
    if (!w)
        return gs_err_set(err, GS_ENOMEM, "%s: out of memory", ops->name);
    w->ops = ops;
    w->ctx = ctx;
    w->ring = bytes ? malloc(bytes) : NULL;
    w->batch = bytes ? malloc(bytes) : NULL;
    if ((bytes && (!w->ring || !w->batch)) || pthread_condattr_init(&ca) != 0) {
        free(w->ring);
        free(w->batch);
        free(w);
        return gs_err_set(err, GS_ENOMEM, "%s: out of memory", ops->name);
    }
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&w->cond, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        free(w->ring);
        free(w->batch);
        free(w);
        return gs_err_set(err, GS_ENOMEM, "%s: pthread_cond_init failed", ops->name);
    }
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->lock, NULL);
    *out = w;
    return GS_OK;
}

static void *worker_thread(void *arg)
{
    struct gs_worker *w = arg;
    char name[16];

    /* "gs-history", "gs-push", ...: per-thread figures (top -H, /proc/PID/task/TID/comm) */
    snprintf(name, sizeof name, "gs-%s", w->ops->name);
    pthread_setname_np(pthread_self(), name);

    pthread_mutex_lock(&w->lock);
    for (;;) {
        unsigned n = 0;
        int stopping;

        while (!w->stop && w->n == 0 && !w->woken && gs_clock_mono_ns() < w->deadline_ns) {
            if (w->deadline_ns == INT64_MAX) {
                pthread_cond_wait(&w->cond, &w->lock);
            } else {
                struct timespec ts = gs_clock_timespec(w->deadline_ns);
                pthread_cond_timedwait(&w->cond, &w->lock, &ts);
            }
        }
        for (; w->n > 0; w->n--, n++) {
            memcpy(w->batch + (size_t)n * w->ops->item_size, item_at(w, 0), w->ops->item_size);
            w->head = (w->head + 1) % w->ops->cap;
        }
        stopping = w->stop;
        w->woken = 0;
        pthread_mutex_unlock(&w->lock);
        w->deadline_ns = w->ops->run(w->ctx, w->batch, n, stopping);
        pthread_mutex_lock(&w->lock);
        if (stopping && w->n == 0)
            break;
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int gs_worker_start(struct gs_worker *w, int64_t first_ns, struct gs_err *err)
{
    w->deadline_ns = first_ns;
    if (pthread_create(&w->thread, NULL, worker_thread, w) != 0)
        return gs_err_set(err, GS_ENOMEM, "%s: cannot start its thread", w->ops->name);
    w->started = 1;
    return GS_OK;
}

bool gs_worker_offer(struct gs_worker *w, const void *item)
{
    bool ok = false;

    pthread_mutex_lock(&w->lock);
    if (!w->stop && w->ops->cap > 0) {
        if (w->n == w->ops->cap && w->ops->drop_oldest) {
            if (w->ops->drop)
                w->ops->drop(w->ctx, item_at(w, 0));
            w->head = (w->head + 1) % w->ops->cap;
            w->n--;
            w->dropped++;
        }
        if (w->n < w->ops->cap) {
            memcpy(item_at(w, w->n), item, w->ops->item_size);
            w->n++;
            ok = true;
            pthread_cond_signal(&w->cond);
        }
    }
    if (!ok)
        w->dropped++;
    pthread_mutex_unlock(&w->lock);
    return ok;
}

uint64_t gs_worker_dropped(struct gs_worker *w)
{
    uint64_t n;

    pthread_mutex_lock(&w->lock);
    n = w->dropped;
    pthread_mutex_unlock(&w->lock);
    return n;
}

void gs_worker_wake(struct gs_worker *w)
{
    pthread_mutex_lock(&w->lock);
    w->woken = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void gs_worker_close(struct gs_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_signal(&w->cond);
    if (!w->started)
        for (; w->n > 0; w->n--, w->head = (w->head + 1) % w->ops->cap)
            if (w->ops->drop)
                w->ops->drop(w->ctx, item_at(w, 0));
    pthread_mutex_unlock(&w->lock);
    if (w->started)
        pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w->ring);
    free(w->batch);
    free(w);
}
