/*
 * The alert webhook: every firing/resolved transition of the alert engine (alerts.h) POSTed as
 * Alertmanager-compatible JSON (the body /api/v2/alerts accepts: an array of alerts with
 * labels, annotations, startsAt, endsAt when resolved, generatorURL) to `alert_webhook` by one
 * sender thread that owns a libcurl handle, the shape of the pusher (push.h).
 *
 * The sampling thread hands each transition to gs_webhook_notify (the gs_alert_notify_fn of
 * gs_alerts_set_notify), which copies it into a bounded queue (GS_WEBHOOK_QUEUE_MAX, the
 * oldest dropped and counted) and never waits on the network. The sender POSTs everything
 * queued as one array; a failed request is retried with a doubling backoff (1 s .. 60 s) and
 * a 5 s request timeout; the first failure and the recovery are logged once each.
 *
 * Threads: gs_webhook_notify and gs_webhook_stats take a short lock only and may be called
 * from any thread; open, start and close belong to the agent's main thread.
 */
#ifndef GS_AGENT_WEBHOOK_H
#define GS_AGENT_WEBHOOK_H

#include <stdint.h>

#include "agent/alerts.h"

struct gs_err;
struct gs_buf;
struct gs_webhook;

#define GS_WEBHOOK_QUEUE_MAX 256 /* transitions waiting to be sent */

struct gs_webhook_stats {
    uint64_t sent;    /* transitions the receiver accepted (2xx) */
    uint64_t failed;  /* requests that failed: no connection, timeout, non-2xx */
    uint64_t dropped; /* transitions discarded unsent (queue full, oldest first) */
};

/* url: the receiver; instance: the `instance` label (the host name); listen: the agent's
 * HOST:PORT, for generatorURL. GS_EINVAL when url is empty, GS_ENOMEM. */
int gs_webhook_open(struct gs_webhook **out, const char *url, const char *instance,
                    const char *listen, struct gs_err *err);
int gs_webhook_start(struct gs_webhook *w, struct gs_err *err);

/* A gs_alert_notify_fn: ctx is the struct gs_webhook. Copies ev; never blocks on I/O. */
void gs_webhook_notify(void *ctx, const struct gs_alert_event *ev);

struct gs_webhook_stats gs_webhook_stats(struct gs_webhook *w);

/* Appends the gpuscope_alert_webhook_* self metric families of s to b. */
void gs_webhook_render_self(struct gs_buf *b, const struct gs_webhook_stats *s);

/* Stops the sender after one last try (bounded by the request timeout) to send what is
 * queued, then frees everything. NULL is allowed. */
void gs_webhook_close(struct gs_webhook *w);

#endif
