/*
 * The agent's push sinks: InfluxDB line protocol over HTTP (v1 /write, v2 /api/v2/write with a
 * token) and the Prometheus Pushgateway (the /metrics text under job/instance), sent by one
 * pusher thread that owns a libcurl handle. The sampling thread offers each cycle's snapshot
 * and its rendered /metrics text through a small bounded queue of references, like the
 * history recorder (recorder.h), and never waits on the network.
 *
 * Every push interval the pusher closes the InfluxDB batch (the line protocol of every
 * snapshot taken since the last one) and POSTs it, gzip-compressed when asked, and PUTs the
 * latest /metrics text to the Pushgateway. A target that fails is retried with a doubling
 * backoff (1 s .. 60 s); meanwhile InfluxDB batches wait in a bounded buffer (push_buffer
 * batches, GS_PUSH_PENDING_BYTES bytes), the oldest dropped first and counted, and the
 * Pushgateway keeps only the newest text (a replaced one counts as dropped).
 *
 * Threads: gs_push_offer and gs_push_stats take a short lock only and may be called from any
 * thread; open, start and close belong to the agent's main thread.
 */
#ifndef GS_AGENT_PUSH_H
#define GS_AGENT_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "agent/config.h"
#include "agent/metrics.h"
#include "gpuscope/gs_model.h"

struct gs_err;
struct gs_push;

#define GS_PUSH_PENDING_MAX 64            /* batches kept when c->buffer_batches is 0 */
#define GS_PUSH_PENDING_BYTES (16u << 20) /* and their bytes, at most */

enum gs_push_sink { GS_PUSH_INFLUX = 0, GS_PUSH_PUSHGATEWAY = 1, GS_PUSH__SINKS = 2 };

struct gs_push_sink_stats {
    int enabled;
    uint64_t pushes;  /* requests the target accepted (2xx) */
    uint64_t failed;  /* requests that failed: no connection, timeout, non-2xx */
    uint64_t dropped; /* batches (InfluxDB) or bodies (Pushgateway) discarded unsent */
};

struct gs_push_stats {
    struct gs_push_sink_stats sink[GS_PUSH__SINKS];
    uint64_t queue_dropped; /* snapshots offered while the queue was full */
};

/* Appends the line protocol of snap to b: one `gpuscope_gpu` line per GPU with tags gpu,
 * hostname, uuid (an empty tag is left out) and one float field per present, finite metric
 * (named as in gs_model.h); a GPU with no such metric has no line. The timestamp is
 * snap->t_real in nanoseconds. Tag values and field keys are escaped (`,`, `=`, space and
 * `\`). Returns GS_OK or GS_ENOMEM (gs_buf_status(b) not GS_BUF_OK). */
int gs_push_render_influx(struct gs_buf *b, const struct gs_snapshot *snap);

/* The InfluxDB write URL for c (v1 /write?db=..., v2 /api/v2/write?org=&bucket=), with
 * precision=ns; NULL when out of memory. The caller frees it. */
char *gs_push_influx_write_url(const struct gs_push_config *c);

/* Appends the gpuscope_push_* self metric families of s to b (nothing when no sink). */
void gs_push_render_self(struct gs_buf *b, const struct gs_push_stats *s);

/* Returns 1 when c names at least one sink. */
int gs_push_enabled(const struct gs_push_config *c);

/* Checks c and reads the token file (v2). instance is the Pushgateway grouping-key instance
 * (the host name). Errors: GS_EINVAL (a v1 URL without db, v2 without org/bucket/token file),
 * GS_EIO (the token file cannot be read). */
int gs_push_open(struct gs_push **out, const struct gs_push_config *c, const char *instance,
                 struct gs_err *err);

/* Starts the pusher thread. */
int gs_push_start(struct gs_push *p, struct gs_err *err);

/* Releases the reference gs_push_offer took over (called on the pusher thread). */
typedef void (*gs_push_release_fn)(void *cls);

/* Hands snap and its /metrics text to the pusher, which reads them later and then calls
 * release(cls). Returns 1 when queued, 0 when the queue was full (counted; the caller keeps
 * its reference and release is not called). */
int gs_push_offer(struct gs_push *p, const struct gs_snapshot *snap, const char *prom,
                  size_t prom_len, gs_push_release_fn release, void *cls);

struct gs_push_stats gs_push_stats(struct gs_push *p);

/* Stops the pusher after it has taken every queued snapshot and tried once more to send
 * what is pending (bounded by the request timeout), then frees everything. NULL is allowed. */
void gs_push_close(struct gs_push *p);

#endif
