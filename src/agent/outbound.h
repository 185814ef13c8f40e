/*
 * What the agent's outbound HTTP senders (push.c, webhook.c) share: one request with the same
 * timeouts and error reporting, and the retry backoff of a destination.
 *
 * Threads: each sender thread owns its CURL handle and its backoffs; nothing here locks.
 */
#ifndef GS_AGENT_OUTBOUND_H
#define GS_AGENT_OUTBOUND_H

#include <stddef.h>

#include <curl/curl.h>

/* Sends body (len bytes) to url with method ("POST" when NULL) and headers (not taken), on a
 * reset handle: 2 s to connect, 5 s in all, no signals, answer body discarded. Returns 1 on a
 * 2xx answer; otherwise 0 with the reason in why ("HTTP 503", curl's error text). */
int gs_outbound_send(CURL *c, const char *method, const char *url, struct curl_slist *headers,
                     const void *body, size_t len, char *why, size_t why_len);

/* Exponential backoff of one destination: 1 s doubling to 60 s after each failure, cleared by
 * a success. failing marks a failure episode, so callers log its start and end once. */
struct gs_backoff {
    double delay_s;
    double retry_at; /* CLOCK_MONOTONIC seconds; 0: now */
    int failing;
};

/* Records a success; returns 1 when it ends a failure episode (log the recovery). */
int gs_backoff_ok(struct gs_backoff *b);
/* Records a failure at now (monotonic seconds); returns 1 when it starts an episode. */
int gs_backoff_fail(struct gs_backoff *b, double now);

#endif
