/*
 * The alert webhook (webhook.h): the transition queue, the Alertmanager JSON rendering, and
 * the sender thread with its libcurl handle and retry backoff.
 *
 * One lock, lock, guards the queue and the stats; the sender holds it only to copy the queue
 * out and to count, never across a request. Each queued transition carries a sequence number:
 * after a request is accepted the sender removes the entries it sent, which the producer may
 * meanwhile have dropped as the oldest (then nothing is left to remove). The queue is the
 * webhook's own because a transition stays in it until the receiver accepts it; the sender
 * thread, its wake-ups, retry deadline and last try at stop are a worker's (worker.h, with no
 * queue of its own).
 */
#include "agent/webhook.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/log.h"
#include "agent/metrics.h"
#include "agent/outbound.h"
#include "agent/worker.h"
#include "base/clock.h"
#include "gpuscope/gs_err.h"

struct transition {
    uint64_t seq;
    char rule[GS_ALERT_NAME_LEN];
    int metric, op, severity, state, gpu;
    char uuid[96];
    double threshold, value, since, ended;
};

struct gs_webhook {
    pthread_mutex_t lock; /* q, q_head, q_n, next_seq, stats */
    struct transition q[GS_WEBHOOK_QUEUE_MAX];
    unsigned q_head, q_n;
    uint64_t next_seq;
    struct gs_webhook_stats stats;
    struct gs_worker *worker; /* the sender thread */
    struct transition *batch; /* the sender's copy of the queue */

    /* The sender thread's own. */
    char *url;
    char *instance;
    char *generator_url;
    CURL *curl;
    struct gs_backoff backoff;
};

static int64_t sender_run(void *ctx, void *items, unsigned n, bool stopping);

static const struct gs_worker_ops sender_ops = {
    .name = "alert_webhook",
    .run = sender_run,
};

static void webhook_free(struct gs_webhook *w)
{
    gs_worker_close(w->worker); /* the sender's last try first */
    free(w->batch);
    free(w->url);
    free(w->instance);
    free(w->generator_url);
    if (w->curl)
        gs_curl()->easy_cleanup(w->curl);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

int gs_webhook_open(struct gs_webhook **out, const char *url, const char *instance,
                    const char *listen, struct gs_err *err)
{
    struct gs_webhook *w;
    size_t n;
    int rc;

    *out = NULL;
    if (!url || !url[0])
        return gs_err_set(err, GS_EINVAL, "alert_webhook: empty URL");
    rc = gs_curl_load(err); /* a config-time error: the agent does not start without it */
    if (rc != GS_OK)
        return rc;
    w = calloc(1, sizeof *w);
    if (!w)
        return gs_err_set(err, GS_ENOMEM, "alert_webhook: out of memory");
    pthread_mutex_init(&w->lock, NULL);
    rc = gs_worker_new(&w->worker, &sender_ops, w, err);
    if (rc != GS_OK) {
        pthread_mutex_destroy(&w->lock);
        free(w);
        return rc;
    }
    w->batch = malloc(sizeof(struct transition) * GS_WEBHOOK_QUEUE_MAX);
    w->url = strdup(url);
    w->instance = strdup(instance && instance[0] ? instance : "unknown");
    n = strlen(listen ? listen : "") + 32;
    w->generator_url = malloc(n);
    if (w->generator_url)
        snprintf(w->generator_url, n, "http://%s/api/v1/alerts", listen ? listen : "");
    w->curl = gs_curl()->easy_init();
    if (!w->batch || !w->url || !w->instance || !w->generator_url || !w->curl) {
        webhook_free(w);
        return gs_err_set(err, GS_ENOMEM, "alert_webhook: out of memory");
    }
    *out = w;
    return GS_OK;
}

void gs_webhook_notify(void *ctx, const struct gs_alert_event *ev)
{
    struct gs_webhook *w = ctx;
    struct transition *t;

    pthread_mutex_lock(&w->lock);
    if (w->q_n == GS_WEBHOOK_QUEUE_MAX) { /* full: the oldest goes */
        w->q_head = (w->q_head + 1) % GS_WEBHOOK_QUEUE_MAX;
        w->q_n--;
        w->stats.dropped++;
    }
    t = &w->q[(w->q_head + w->q_n) % GS_WEBHOOK_QUEUE_MAX];
    memset(t, 0, sizeof *t);
    t->seq = w->next_seq++;
    snprintf(t->rule, sizeof t->rule, "%s", ev->rule->name);
    t->metric = ev->rule->metric;
    t->op = ev->rule->op;
    t->threshold = ev->rule->threshold;
    t->severity = ev->rule->severity;
    t->state = ev->state;
    t->gpu = ev->gpu;
    snprintf(t->uuid, sizeof t->uuid, "%s", ev->gpu_uuid ? ev->gpu_uuid : "");
    t->value = ev->value;
    t->since = ev->since;
    t->ended = ev->ended;
    w->q_n++;
    pthread_mutex_unlock(&w->lock);
    gs_worker_wake(w->worker);
}

struct gs_webhook_stats gs_webhook_stats(struct gs_webhook *w)
{
    struct gs_webhook_stats s;

    pthread_mutex_lock(&w->lock);
    s = w->stats;
    pthread_mutex_unlock(&w->lock);
    return s;
}

void gs_webhook_render_self(struct gs_buf *b, const struct gs_webhook_stats *s)
{
    gs_buf_printf(
        b,
        "# HELP gpuscope_alert_webhook_sent_total Alert transitions the webhook accepted.\n"
        "# TYPE gpuscope_alert_webhook_sent_total counter\n"
        "gpuscope_alert_webhook_sent_total %llu\n"
        "# HELP gpuscope_alert_webhook_failed_total Webhook requests that failed (no "
        "connection, timeout, non-2xx); retried with backoff.\n"
        "# TYPE gpuscope_alert_webhook_failed_total counter\n"
        "gpuscope_alert_webhook_failed_total %llu\n"
        "# HELP gpuscope_alert_webhook_dropped_total Alert transitions discarded unsent "
        "(queue full, oldest first).\n"
        "# TYPE gpuscope_alert_webhook_dropped_total counter\n"
        "gpuscope_alert_webhook_dropped_total %llu\n",
        (unsigned long long)s->sent, (unsigned long long)s->failed, (unsigned long long)s->dropped);
}

/* RFC 3339 UTC with milliseconds. */
static void rfc3339(char *buf, size_t len, double t)
{
    time_t s = (time_t)floor(t);
    int ms = (int)((t - floor(t)) * 1000.0);
    struct tm tm;

    if (ms > 999)
        ms = 999;
    gmtime_r(&s, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

/* The Alertmanager /api/v2/alerts body for ts[0..n); NULL when out of memory. */
static char *render(const struct gs_webhook *w, const struct transition *ts, unsigned n)
{
    json_t *arr = json_array();
    char *out;

    if (!arr)
        return NULL;
    for (unsigned i = 0; i < n; i++) {
        const struct transition *t = &ts[i];
        char gpu[16], when[96], summary[256], value[64];
        json_t *labels, *ann, *al;

        labels = json_pack("{s:s, s:s, s:s, s:s}", "alertname", t->rule, "severity",
                           gs_alert_severity_name(t->severity), "instance", w->instance, "job",
                           "gpuscope");
        if (labels && t->gpu >= 0) {
            snprintf(gpu, sizeof gpu, "%d", t->gpu);
            json_object_set_new(labels, "gpu", json_string(gpu));
            if (t->uuid[0])
                json_object_set_new(labels, "uuid", json_string(t->uuid));
        }
        snprintf(value, sizeof value, "%.6g", t->value);
        if (t->gpu >= 0)
            snprintf(summary, sizeof summary, "%s on gpu %d: %s %s %.6g (value %s)", t->rule,
                     t->gpu, gs_alert_metric_name(t->metric), gs_alert_op_name(t->op), t->threshold,
                     value);
        else
            snprintf(summary, sizeof summary, "%s on node: %s %s %.6g (value %s)", t->rule,
                     gs_alert_metric_name(t->metric), gs_alert_op_name(t->op), t->threshold, value);
        ann = json_pack("{s:s, s:s}", "summary", summary, "value", value);
        rfc3339(when, sizeof when, t->since);
        al = json_pack("{s:o?, s:o?, s:s, s:s}", "labels", labels, "annotations", ann, "startsAt",
                       when, "generatorURL", w->generator_url);
        if (al && t->state == GS_ALERT_RESOLVED) {
            rfc3339(when, sizeof when, t->ended);
            json_object_set_new(al, "endsAt", json_string(when));
        }
        if (!al || json_array_append_new(arr, al) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    out = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return out;
}

/* One POST; returns 1 on a 2xx answer. why gets the reason of a failure. */
static int post(struct gs_webhook *w, const char *body, char *why, size_t why_len)
{
    const struct gs_curl_api *cu = gs_curl();
    struct curl_slist *h = cu->slist_append(NULL, "Content-Type: application/json");
    int ok = gs_outbound_send(w->curl, NULL, w->url, h, body, strlen(body), why, why_len);

    cu->slist_free_all(h);
    return ok;
}

/* Sends ts[0..n) (a copy of the queue); on success removes them from the queue. */
static void send_batch(struct gs_webhook *w, const struct transition *ts, unsigned n)
{
    char why[CURL_ERROR_SIZE + 32] = "out of memory";
    char *body = render(w, ts, n);
    int ok = body && post(w, body, why, sizeof why);
    uint64_t last = ts[n - 1].seq;

    free(body);
    pthread_mutex_lock(&w->lock);
    if (ok) {
        while (w->q_n > 0 && w->q[w->q_head].seq <= last) {
            w->q_head = (w->q_head + 1) % GS_WEBHOOK_QUEUE_MAX;
            w->q_n--;
        }
        w->stats.sent += n;
    } else {
        w->stats.failed++;
    }
    pthread_mutex_unlock(&w->lock);
    if (ok) {
        if (gs_backoff_ok(&w->backoff))
            gs_log(GS_LOG_INFO, "alert_webhook: %s recovered", w->url);
    } else if (gs_backoff_fail(&w->backoff, gs_clock_mono_s())) {
        gs_log(GS_LOG_WARN, "alert_webhook: %s failed: %s; retrying with backoff", w->url, why);
    } else {
        gs_log(GS_LOG_DEBUG, "alert_webhook: still failing: %s (next try in %gs)", why,
               w->backoff.delay_s);
    }
}

/* The sender's body (worker.h): what is queued goes out in one POST once the backoff allows;
 * at stop, one last try ignoring it. Returns the retry time while something is left. */
static int64_t sender_run(void *ctx, void *items, unsigned n_items, bool stopping)
{
    struct gs_webhook *w = ctx;
    unsigned n = 0;

    (void)items;
    (void)n_items;
    if (!stopping && gs_clock_mono_s() < w->backoff.retry_at) {
        pthread_mutex_lock(&w->lock);
        n = w->q_n;
        pthread_mutex_unlock(&w->lock);
        return n ? (int64_t)(w->backoff.retry_at * 1e9) : INT64_MAX;
    }
    pthread_mutex_lock(&w->lock);
    for (; n < w->q_n; n++)
        w->batch[n] = w->q[(w->q_head + n) % GS_WEBHOOK_QUEUE_MAX];
    pthread_mutex_unlock(&w->lock);
    if (n > 0)
        send_batch(w, w->batch, n);
    if (stopping)
        return INT64_MAX;
    pthread_mutex_lock(&w->lock);
    n = w->q_n;
    pthread_mutex_unlock(&w->lock);
    return n ? (int64_t)(w->backoff.retry_at * 1e9) : INT64_MAX; /* in the past: at once */
}

int gs_webhook_start(struct gs_webhook *w, struct gs_err *err)
{
    int rc = gs_worker_start(w->worker, INT64_MAX, err);

    if (rc != GS_OK)
        return rc;
    gs_log(GS_LOG_INFO, "alert_webhook: %s", w->url);
    return GS_OK;
}

void gs_webhook_close(struct gs_webhook *w)
{
    if (!w)
        return;
    webhook_free(w); /* one last try to send what is queued, then everything freed */
}
