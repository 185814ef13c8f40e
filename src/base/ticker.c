/*
 * The periodic thread (ticker.h): a mutex and a CLOCK_MONOTONIC condition variable, so that
 * a stop from another thread ends the wait at once and the deadline never drifts with the
 * wall clock.
 */
#include "base/ticker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/clock.h"

struct gs_ticker {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    gs_ticker_fn fn;
    void *ctx;
    int64_t next_ns;   /* the boundary waited for */
    int64_t period_ns; /* guarded by lock */
    uint64_t overruns; /* guarded by lock */
    int stop;          /* guarded by lock */
};

static void *ticker_thread(void *arg)
{
    struct gs_ticker *t = arg;
    uint64_t missed = 0;

    pthread_mutex_lock(&t->lock);
    for (;;) {
        struct timespec ts = gs_clock_timespec(t->next_ns);
        int64_t step;

        while (!t->stop && gs_clock_mono_ns() < t->next_ns)
            if (pthread_cond_timedwait(&t->cond, &t->lock, &ts) == ETIMEDOUT)
                break;
        if (t->stop)
            break;
        pthread_mutex_unlock(&t->lock);
        t->fn(t->ctx, missed);
        pthread_mutex_lock(&t->lock);
        step = t->period_ns;
        t->next_ns = gs_clock_next_tick(t->next_ns, gs_clock_mono_ns(), step, &missed);
        t->overruns += missed;
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

int gs_ticker_start(struct gs_ticker **out, int64_t period_ns, int64_t first_ns, gs_ticker_fn fn,
                    void *ctx)
{
    struct gs_ticker *t;
    pthread_condattr_t ca;
    int rc;

    *out = NULL;
    if (period_ns <= 0 || !fn)
        return EINVAL;
    t = calloc(1, sizeof *t);
    if (!t)
        return ENOMEM;
    t->fn = fn;
    t->ctx = ctx;
    t->period_ns = period_ns;
    t->next_ns = first_ns;
    rc = pthread_condattr_init(&ca);
    if (rc == 0) {
        rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        if (rc == 0)
            rc = pthread_cond_init(&t->cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (rc != 0) {
        free(t);
        return rc;
    }
    pthread_mutex_init(&t->lock, NULL);
    rc = pthread_create(&t->thread, NULL, ticker_thread, t);
    if (rc != 0) {
        pthread_cond_destroy(&t->cond);
        pthread_mutex_destroy(&t->lock);
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void gs_ticker_set_period(struct gs_ticker *t, int64_t period_ns)
{
    if (!t || period_ns <= 0)
        return;
    pthread_mutex_lock(&t->lock);
    t->period_ns = period_ns;
    pthread_mutex_unlock(&t->lock);
}

uint64_t gs_ticker_overruns(struct gs_ticker *t)
{
    uint64_t n;

    pthread_mutex_lock(&t->lock);
    n = t->overruns;
    pthread_mutex_unlock(&t->lock);
    return n;
}

void gs_ticker_stop(struct gs_ticker *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    t->stop = 1;
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
