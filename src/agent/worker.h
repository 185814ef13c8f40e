/*
 * One bounded-queue worker thread, the shape of every agent worker (the history writer,
 * recorder.c; the pusher, push.c; the alert webhook sender, webhook.c): producers copy items
 * into a fixed ring under a lock held for a few instructions and never wait; the thread wakes
 * for an item, an explicit wake-up or its own deadline, takes every queued item at once and
 * hands them to the owner's run callback outside the lock; at stop it runs once more with
 * stopping set and what was left, then exits. What does not fit is refused (or, with
 * drop_oldest, the oldest item goes) and counted.
 */
#ifndef GS_AGENT_WORKER_H
#define GS_AGENT_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuscope/gs_err.h"

struct gs_worker;

struct gs_worker_ops {
    const char *name; /* for error messages ("history", "push", ...) */
    size_t item_size; /* bytes per item; 0 with cap 0: a thread with wake-ups only */
    unsigned cap;     /* items the queue holds */
    bool drop_oldest; /* a full queue drops its oldest item for the new one (else refuses) */
    /* The worker thread's body, called with the items taken (n may be 0: a deadline or a
     * wake-up), without the worker's lock. stopping: the last call. Returns the next
     * CLOCK_MONOTONIC deadline in ns (INT64_MAX: none; at or before now: at once). */
    int64_t (*run)(void *ctx, void *items, unsigned n, bool stopping);
    /* An item that will never reach run: the oldest one dropped, or one queued when a worker
     * that never started stops. May be NULL. Called under the worker's lock. */
    void (*drop)(void *ctx, void *item);
};

/* A worker (not yet running) for ops (kept by pointer) and ctx. GS_ENOMEM. */
int gs_worker_new(struct gs_worker **out, const struct gs_worker_ops *ops, void *ctx,
                  struct gs_err *err);
/* Starts the thread; its first deadline is first_ns (CLOCK_MONOTONIC). GS_ENOMEM. */
int gs_worker_start(struct gs_worker *w, int64_t first_ns, struct gs_err *err);
/* Copies item into the queue and wakes the thread. false when it is refused (full, or
 * stopping); both that and a drop_oldest drop are counted. Any thread. */
bool gs_worker_offer(struct gs_worker *w, const void *item);
/* Items refused or dropped so far. */
uint64_t gs_worker_dropped(struct gs_worker *w);
/* Has the thread call run (n = 0) at once: settings changed, work arrived by another way. */
void gs_worker_wake(struct gs_worker *w);
/* Stops: the thread runs once more with stopping and what is queued, and is joined; a worker
 * that never started gives what is queued to ops->drop. Then frees w. NULL is allowed. */
void gs_worker_close(struct gs_worker *w);

#endif
