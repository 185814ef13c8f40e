/*
 * The agent daemon (agent.h). Three kinds of thread:
 *
 * - the sampling thread owns the sampler. Each cycle it takes a spare publication (or makes
 *   one), samples into its snapshot, renders the /metrics text and the JSON document into it
 *   once, and publishes it by swapping a pointer under a mutex held for a few instructions.
 *   It sleeps until the next CLOCK_MONOTONIC boundary; a cycle that overruns skips the missed
 *   boundaries and is counted. While the driver is missing it publishes "up 0, reason" and
 *   retries with a doubling backoff (1 s .. 30 s).
 * - libmicrohttpd's thread serves requests. A scrape takes a reference to the current
 *   publication under the mutex and hands its buffer to MHD with a free callback that drops
 *   the reference, so nothing is copied or rendered per request and a slow reader only keeps
 *   an old publication alive: the sampler never waits for it.
 * - the history writer thread (recorder.c) owns the history store. Each cycle the sampling
 *   thread hands it one more reference to the publication just made (a bounded queue: when
 *   the writer is behind, the snapshot is dropped and counted, the sampler never waits on
 *   disk); the writer appends the snapshot, flushes every flush_interval and drops the
 *   reference. /api/v1/history queries the store from the HTTP thread under the store's mutex.
 * - the pusher thread (push.c), when a push sink is configured, gets one more reference the
 *   same way (its own bounded queue) and sends InfluxDB batches and Pushgateway PUTs.
 * - the calling thread blocks SIGINT/SIGTERM/SIGHUP before the others start (they inherit
 *   the mask) and takes them with sigtimedwait: no async-signal-safety puzzles. Once a second
 *   it also shuts down HTTP connections whose request head is late (slow clients).
 *
 * A publication is immutable from the moment it is published until its last reference goes;
 * then it returns to a small free list and is reused, so a steady cycle allocates only what
 * jansson's dump allocates.
 */
#include "agent/agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <gnutls/gnutls.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/alerts.h"
#include "agent/auth.h"
#include "agent/history_api.h"
#include "agent/log.h"
#include "agent/metrics.h"
#include "agent/push.h"
#include "agent/webhook.h"
#include "agent/web.h"
#include "agent/recorder.h"
#include "agent/policy.h"
#include "agent/privdrop.h"
#include "agent/ratelimit.h"
#include "agent/runs.h"
#include "agent/schedule.h"
#include "core/snapjson.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_sampler.h"

#ifndef GS_VERSION
#define GS_VERSION "0.1.0"
#endif

#define NS 1000000000LL
#define BACKOFF_MIN_S 1.0
#define BACKOFF_MAX_S 30.0
#define SPARE_MAX 4 /* publications kept for reuse; more in flight are freed on release */

struct gs_agent;

struct gs_pub {
    struct gs_agent *agent;
    int refs; /* under agent->lock */
    struct gs_pub *next_spare;
    int up;
    struct gs_snapshot *snap; /* valid when up */
    struct gs_mbuf prom;      /* /metrics body */
    /* /api/v1/snapshot and /api/v1/processes bodies (jansson's malloc): rendered by the first
     * request that asks for them (render_json), not every cycle: most agents are only scraped
     * for /metrics, and the JSON is most of a cycle's instructions. */
    pthread_mutex_t json_lock;
    int json_ready;           /* under json_lock */
    char *json;
    size_t json_len;
    char *procs_json;
    size_t procs_json_len;
    char reason[GS_ERR_MSG_LEN]; /* why the agent was down at this cycle ("" when up) */
    char *alerts_json;        /* /api/v1/alerts body (jansson's malloc) */
    size_t alerts_json_len;
    struct gs_metrics_self self; /* what /metrics was rendered with: for viewers' copies */
    unsigned mflags;
};

/* HTTP hardening (docs/api.md, "Limits"). */
#define HTTP_CONN_MAX 256       /* connections at once */
#define HTTP_CONN_PER_IP 32     /* connections at once from one address */
#define HTTP_IDLE_S 10          /* libmicrohttpd's inactivity timeout */
#define HTTP_REQUEST_S 10       /* a request's head must be complete within this (slow clients) */
#define HTTP_MEMORY (32 * 1024) /* per connection: request line + headers must fit */
#define HTTP_PATH_MAX 256       /* bytes of path; more: 414 */
#define HTTP_QUERY_MAX 1024     /* bytes of query arguments, names and values; more: 414 */
/* A connection whose request head has a deadline (the slow-client reaper). */
struct conn_track {
    int fd;
    int64_t deadline_ns; /* INT64_MAX while a request is being answered */
    struct conn_track *prev, *next;
};

struct gs_agent {
    pthread_mutex_t lock; /* guards cfg, stop, current, spare, n_spare and every refs */
    pthread_cond_t wake;  /* CLOCK_MONOTONIC */
    struct gs_agent_config cfg;
    int stop;
    struct gs_pub *current;
    struct gs_pub *spare;
    unsigned n_spare;

    /* The sampling thread's own. */
    pthread_t thread;
    int thread_started;
    struct gs_sampler *sampler;
    uint64_t n_since_open; /* cycles since the sampler opened: the cadence counter */
    uint64_t cycles, overruns, sample_errors;
    double last_sample_s;
    double backoff_s;
    int64_t retry_at;
    int down_logged;
    char reason[GS_ERR_MSG_LEN];

    struct MHD_Daemon *mhd;
    struct sockaddr_storage http_addr; /* the listen address, parsed */
    struct gs_auth *auth;              /* under lock; each request holds a reference */
    char *tls_cert_pem, *tls_key_pem;  /* the running daemon's pair (main thread); NULL: http */
    struct gs_ratelimit *rl;     /* every daemon's (ratelimit.h: its own lock) */
    pthread_mutex_t conn_lock;   /* guards conns */
    struct conn_track *conns;
    uint64_t conns_reaped;
    struct gs_recorder *rec;   /* NULL when history = off */
    struct gs_runs *runs;      /* the step-record socket (runs.h); NULL when socket = off */
    struct gs_policy *policy;  /* the visibility policy (policy.h) */
    struct MHD_Daemon *mhd_unix; /* http_socket for local viewers; NULL when off */
    struct gs_push *push;      /* NULL when no push sink is configured */
    struct gs_webhook *webhook; /* NULL without alert_webhook (webhook.h) */
    struct gs_alerts *alerts;  /* the sampling thread's own (alerts.h) */
    /* SIGHUP's new sinks (reload_sinks opens them; NULL new: removed), swapped in by the
     * sampling thread at its next cycle (swap_sinks); the ones replaced wait in *_old for the
     * main thread, since closing joins a sender that may be inside a 5 s request. Under lock. */
    struct gs_push *push_new, *push_old;
    struct gs_webhook *webhook_new, *webhook_old;
    int push_swap, webhook_swap;
    int data_dir_from_caller;  /* gs_agent_run_opts.data_dir overrides the configured one */
    int http_fd;               /* the TCP port bound before a drop (privdrop.h); -1: none */
};

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

/* ---- publications ---- */

static void pub_free(struct gs_pub *p)
{
    if (!p)
        return;
    gs_snapshot_free(p->snap);
    gs_mbuf_free(&p->prom);
    free(p->json);
    free(p->procs_json);
    free(p->alerts_json);
    pthread_mutex_destroy(&p->json_lock);
    free(p);
}

static struct gs_pub *pub_acquire(struct gs_agent *a)
{
    struct gs_pub *p;

    pthread_mutex_lock(&a->lock);
    p = a->current;
    if (p)
        p->refs++;
    pthread_mutex_unlock(&a->lock);
    return p;
}

/* Drops a reference; the last one returns p to the spare list (or frees it). Call without
 * the lock. */
static void pub_release(struct gs_pub *p)
{
    struct gs_agent *a = p->agent;
    int drop = 0;

    pthread_mutex_lock(&a->lock);
    if (--p->refs == 0) {
        if (a->n_spare < SPARE_MAX) {
            p->next_spare = a->spare;
            a->spare = p;
            a->n_spare++;
        } else {
            drop = 1;
        }
    }
    pthread_mutex_unlock(&a->lock);
    if (drop)
        pub_free(p);
}

static struct gs_pub *pub_take_spare(struct gs_agent *a)
{
    struct gs_pub *p;

    pthread_mutex_lock(&a->lock);
    p = a->spare;
    if (p) {
        a->spare = p->next_spare;
        a->n_spare--;
    }
    pthread_mutex_unlock(&a->lock);
    if (!p && (p = calloc(1, sizeof *p)) != NULL) {
        p->agent = a;
        pthread_mutex_init(&p->json_lock, NULL);
    }
    return p;
}

/* Makes p the current publication; the agent holds one reference to it. */
static void publish(struct gs_agent *a, struct gs_pub *p)
{
    struct gs_pub *old;

    p->refs = 1;
    pthread_mutex_lock(&a->lock);
    old = a->current;
    a->current = p;
    pthread_mutex_unlock(&a->lock);
    if (old)
        pub_release(old);
}

static void release_cb(void *cls)
{
    pub_release(cls);
}

/* ---- one cycle ---- */

/* Fields read on a slower cadence keep their last value in the cycles between (the sampler
 * clears a snapshot each cycle), so a series does not flap between present and absent. */
static void carry_forward(const struct gs_snapshot *prev, struct gs_snapshot *cur, unsigned want)
{
    static const enum gs_metric pcie[] = {GS_M_PCIE_TX, GS_M_PCIE_RX};

    if (!prev || prev->n_gpus != cur->n_gpus)
        return;
    for (unsigned i = 0; i < cur->n_gpus; i++) {
        const struct gs_gpu *pg = &prev->gpus[i];
        struct gs_gpu *g = &cur->gpus[i];
        if (g->lost || pg->lost)
            continue;
        if (!(want & GS_WANT_PCIE_TPUT))
            for (size_t k = 0; k < 2; k++)
                if (g->st[pcie[k]] == GS_ST_NA) {
                    g->st[pcie[k]] = pg->st[pcie[k]];
                    g->v[pcie[k]] = pg->v[pcie[k]];
                }
        if (!(want & GS_WANT_HEALTH)) {
            for (int m = GS_M_ECC_CORR_VOL; m <= GS_M_XID_LAST; m++)
                if (g->st[m] == GS_ST_NA) {
                    g->st[m] = pg->st[m];
                    g->v[m] = pg->v[m];
                }
            memcpy(g->ecc_loc_st, pg->ecc_loc_st, sizeof g->ecc_loc_st);
            memcpy(g->ecc_loc, pg->ecc_loc, sizeof g->ecc_loc);
        }
        if (!(want & GS_WANT_MIG) && g->n_mig == 0) {
            g->n_mig = pg->n_mig;
            memcpy(g->mig, pg->mig, sizeof g->mig);
        }
    }
}

static void go_down(struct gs_agent *a, const struct gs_err *e, int64_t now)
{
    snprintf(a->reason, sizeof a->reason, "%s", e->msg[0] ? e->msg : gs_strerror(e->rc));
    if (!a->down_logged)
        gs_log(GS_LOG_WARN, "sampler: %s; serving gpuscope_up 0, retrying", a->reason);
    else
        gs_log(GS_LOG_DEBUG, "sampler: still down: %s", a->reason);
    a->down_logged = 1;
    gs_sampler_close(a->sampler);
    a->sampler = NULL;
    a->backoff_s = a->backoff_s <= 0 ? BACKOFF_MIN_S : fmin(a->backoff_s * 2, BACKOFF_MAX_S);
    a->retry_at = now + (int64_t)(a->backoff_s * NS);
}

/* Opens the sampler when the backoff allows; returns whether one is open. */
static int ensure_sampler(struct gs_agent *a, int64_t now)
{
    struct gs_sampler_opts so = {.library = NULL};
    struct gs_err e;

    if (a->sampler)
        return 1;
    if (now < a->retry_at)
        return 0;
    gs_err_clear(&e);
    if (gs_sampler_open(&a->sampler, &so, &e) != GS_OK) {
        go_down(a, &e, now);
        return 0;
    }
    a->n_since_open = 0;
    a->backoff_s = 0;
    a->down_logged = 0;
    a->reason[0] = '\0';
    gs_log(GS_LOG_INFO, "sampler: driver up, %u GPU(s)", gs_sampler_gpu_count(a->sampler));
    return 1;
}

static int sample_into(struct gs_agent *a, struct gs_pub *p, const struct gs_pub *prev,
                       int64_t now)
{
    unsigned n = gs_sampler_gpu_count(a->sampler);
    unsigned want = gs_agent_want(a->n_since_open);
    struct gs_err e;
    int64_t t0;

    gs_err_clear(&e);
    if (p->snap && p->snap->n_gpus != n) {
        gs_snapshot_free(p->snap);
        p->snap = NULL;
    }
    if (!p->snap && gs_snapshot_new(&p->snap, n, 64, &e) != GS_OK) {
        gs_log(GS_LOG_ERROR, "sampler: %s", e.msg);
        return 0;
    }
    t0 = mono_ns();
    if (gs_sampler_sample(a->sampler, p->snap, want, &e) != GS_OK) {
        a->sample_errors++;
        go_down(a, &e, now);
        return 0;
    }
    a->last_sample_s = (double)(mono_ns() - t0) / 1e9;
    a->n_since_open++;
    carry_forward(prev && prev->up ? prev->snap : NULL, p->snap, want);
    return 1;
}

static double real_now(void);

static void render(struct gs_agent *a, struct gs_pub *p, const struct gs_agent_config *cfg)
{
    struct gs_metrics_self self = {
        .up = p->up,
        .reason = a->reason,
        .version = GS_VERSION,
        .interval_s = cfg->interval_s,
        .sample_seconds = a->last_sample_s,
        .cycles = a->cycles,
        .overruns = a->overruns,
        .sample_errors = a->sample_errors,
        .history = a->rec != NULL,
        .history_flush_last_s = -1,
        .process_series_max = cfg->process_metrics_max,
    };
    unsigned mflags = 0;

    if (a->rec) {
        struct gs_recorder_stats rs = gs_recorder_stats(a->rec); /* a short lock, no I/O */
        self.history_rows = rs.rows_written;
        self.history_write_errors = rs.write_errors;
        self.history_dropped = rs.dropped;
        self.history_flush_last_s = rs.last_flush_s;
        self.history_flush_max_s = rs.max_flush_s;
    }
    if (a->runs) {
        struct gs_runs_stats ru = gs_runs_stats(a->runs); /* a short lock */
        self.runs = 1;
        self.runs_active = ru.live;
        self.runs_started = ru.runs_started;
        self.runs_records = ru.records;
        self.runs_rejected = ru.rejected;
        self.runs_steps_dropped = ru.steps_dropped;
    }
    gs_mbuf_reset(&p->prom);
    if (cfg->metrics_compat == GS_COMPAT_DCGM)
        mflags |= GS_METRICS_DCGM;
    if (cfg->process_metrics)
        mflags |= GS_METRICS_PROCESS;
    p->self = self; /* a filtered /metrics renders with these (send_filtered) */
    p->self.reason = "";
    p->mflags = mflags;
    if (gs_metrics_render(&p->prom, p->up ? p->snap : NULL, &self, mflags) != GS_OK)
        gs_log(GS_LOG_ERROR, "metrics: render failed (out of memory)");
    if (a->push) {
        struct gs_push_stats ps = gs_push_stats(a->push); /* a short lock, no I/O */
        gs_push_render_self(&p->prom, &ps);
    }
    if (a->webhook) {
        struct gs_webhook_stats ws = gs_webhook_stats(a->webhook); /* a short lock */
        gs_webhook_render_self(&p->prom, &ws);
    }
    free(p->alerts_json);
    p->alerts_json = NULL;
    if (a->alerts) {
        gs_alerts_render_prom(&p->prom, a->alerts);
        p->alerts_json = gs_alerts_json(a->alerts, p->up ? p->snap->t_real : real_now());
    }
    p->alerts_json_len = p->alerts_json ? strlen(p->alerts_json) : 0;
    /* Not yet published: no request can see p, so no lock is needed here. */
    free(p->json);
    p->json = NULL;
    free(p->procs_json);
    p->procs_json = NULL;
    p->json_len = p->procs_json_len = 0;
    p->json_ready = 0;
    snprintf(p->reason, sizeof p->reason, "%s", p->up ? "" : a->reason);
}

/* body of doc (compact, 15 significant digits) and its length; NULL when doc is. */
static char *dump_doc(json_t *doc, size_t *len)
{
    char *s = doc ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;

    *len = s ? strlen(s) : 0;
    json_decref(doc);
    return s;
}

/* The snapshot and processes documents of a published p (core/snapjson.h), made once by
 * whichever request comes first; p->snap is immutable by then. While down, both are the
 * error document. */
static void render_json(struct gs_pub *p)
{
    json_t *doc = NULL, *procs = NULL;

    pthread_mutex_lock(&p->json_lock);
    if (!p->json_ready) {
        if (p->up) {
            gs_snapjson_encode(&doc, p->snap, NULL, NULL);
            gs_snapjson_processes(&procs, p->snap, false, NULL);
        } else {
            doc = json_pack("{s:b, s:s}", "up", 0, "error", p->reason);
            procs = json_incref(doc);
        }
        p->json = dump_doc(doc, &p->json_len);
        p->procs_json = dump_doc(procs, &p->procs_json_len);
        p->json_ready = 1;
    }
    pthread_mutex_unlock(&p->json_lock);
}

/* Takes the sinks a SIGHUP opened (reload_sinks); only the sampling thread uses a->push,
 * a->webhook and the alerts' notifier, so it alone swaps them. */
static void swap_sinks(struct gs_agent *a)
{
    pthread_mutex_lock(&a->lock);
    if (a->push_swap) {
        a->push_old = a->push;
        a->push = a->push_new;
        a->push_new = NULL;
        a->push_swap = 0;
    }
    if (a->webhook_swap) {
        a->webhook_old = a->webhook;
        a->webhook = a->webhook_new;
        a->webhook_new = NULL;
        a->webhook_swap = 0;
        gs_alerts_set_notify(a->alerts, a->webhook ? gs_webhook_notify : NULL, a->webhook);
    }
    pthread_mutex_unlock(&a->lock);
}

static void cycle(struct gs_agent *a, const struct gs_agent_config *cfg)
{
    int64_t now = mono_ns();
    struct gs_pub *p = pub_take_spare(a);
    struct gs_pub *prev = a->current; /* the sampler is its only writer: no lock to read */

    swap_sinks(a);
    if (!p) {
        gs_log(GS_LOG_ERROR, "sampler: out of memory; cycle skipped");
        return;
    }
    a->cycles++;
    p->up = ensure_sampler(a, now) && sample_into(a, p, prev, now);
    if (!p->up)
        a->last_sample_s = -1;
    if (a->alerts) {
        /* A SIGHUP may have changed the rules: what they drop resolves now. */
        gs_alerts_configure(a->alerts, &cfg->alerts, p->up ? p->snap : NULL,
                            p->up ? p->snap->t_real : real_now());
        if (cfg->alerts.enabled && p->up)
            gs_alerts_eval(a->alerts, p->snap, p->snap->t_real);
    }
    render(a, p, cfg);
    publish(a, p);
    if (a->rec && p->up) {
        /* One more reference, for the writer; it drops it once the snapshot is copied. */
        pthread_mutex_lock(&a->lock);
        p->refs++;
        pthread_mutex_unlock(&a->lock);
        if (!gs_recorder_offer(a->rec, p->snap, release_cb, p))
            pub_release(p);
    }
    if (a->runs && p->up)
        gs_runs_snapshot(a->runs, p->snap, a->sampler); /* never waits (runs.h) */
    if (a->push && p->up) {
        /* And one for the pusher (push.c), dropped once its lines and text are taken. */
        pthread_mutex_lock(&a->lock);
        p->refs++;
        pthread_mutex_unlock(&a->lock);
        if (!gs_push_offer(a->push, p->snap, p->prom.data, p->prom.len, release_cb, p))
            pub_release(p);
    }
}

static void *sampling_thread(void *arg)
{
    struct gs_agent *a = arg;
    int64_t next = mono_ns();

    pthread_mutex_lock(&a->lock);
    while (!a->stop) {
        struct gs_agent_config cfg = a->cfg;
        int64_t step = (int64_t)llround(cfg.interval_s * 1e9);
        uint64_t missed;
        struct timespec ts;

        pthread_mutex_unlock(&a->lock);
        next = gs_agent_next_tick(next, mono_ns(), step, &missed);
        if (missed) {
            a->overruns++;
            gs_log(GS_LOG_DEBUG, "sampler: cycle overran, %llu tick(s) skipped",
                   (unsigned long long)missed);
        }
        ts.tv_sec = next / NS;
        ts.tv_nsec = next % NS;
        pthread_mutex_lock(&a->lock);
        while (!a->stop && mono_ns() < next)
            if (pthread_cond_timedwait(&a->wake, &a->lock, &ts) == ETIMEDOUT)
                break;
        if (a->stop)
            break;
        cfg = a->cfg;
        pthread_mutex_unlock(&a->lock);
        cycle(a, &cfg);
        pthread_mutex_lock(&a->lock);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* ---- HTTP ---- */

/* On every answer: no MIME sniffing, no framing, and a policy that allows nothing to load or
 * run (the dashboard's files at / and /assets/ get their own, web.c). */
static void common_headers(struct MHD_Response *r)
{
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; "
                            "form-action 'none'");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    /* Live data, maybe a viewer's own: no shared or browser cache keeps a copy. */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
}

static enum MHD_Result send_static(struct MHD_Connection *c, unsigned code, const char *body,
                                   const char *type, const char *allow)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret;

    if (!r)
        return MHD_NO;
    common_headers(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* Serves a body that belongs to the current publication: the response keeps a reference,
 * dropped by MHD once the body is sent (or the connection dies). */
static enum MHD_Result send_pub(struct MHD_Connection *c, struct gs_agent *a, int json)
{
    struct gs_pub *p = pub_acquire(a);
    struct MHD_Response *r;
    enum MHD_Result ret;
    unsigned code = MHD_HTTP_OK;

    if (!p)
        return send_static(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no sample yet\n", "text/plain",
                           NULL);
    if (json) {
        char *body;
        if (json != 3)
            render_json(p);
        body = json == 3 ? p->alerts_json : json == 2 ? p->procs_json : p->json;
        size_t len = json == 3   ? p->alerts_json_len
                     : json == 2 ? p->procs_json_len
                                 : p->json_len;
        if (!body) {
            pub_release(p);
            return send_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "{\"error\":\"render\"}\n",
                               "application/json", NULL);
        }
        if (!p->up)
            code = MHD_HTTP_SERVICE_UNAVAILABLE;
        r = MHD_create_response_from_buffer_with_free_callback_cls(len, body, release_cb, p);
    } else {
        r = MHD_create_response_from_buffer_with_free_callback_cls(p->prom.len, p->prom.data,
                                                                   release_cb, p);
    }
    if (!r) {
        pub_release(p);
        return MHD_NO;
    }
    common_headers(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            json ? "application/json"
                                 : "text/plain; version=0.0.4; charset=utf-8");
    ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json_error(struct MHD_Connection *c, unsigned code, const char *msg)
{
    size_t len;
    char *body = gs_history_error_json(msg, &len);
    struct MHD_Response *r;
    enum MHD_Result ret;

    if (!body)
        return MHD_NO;
    r = MHD_create_response_from_buffer_with_free_callback(len, body, free);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    common_headers(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (code == MHD_HTTP_TOO_MANY_REQUESTS)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static double real_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* /api/v1/history (docs/api.md): parameters checked by history_api.c, the query run on the
 * store under its mutex, the JSON built per request (it depends on the parameters). */
static enum MHD_Result send_history(struct MHD_Connection *c, struct gs_agent *a)
{
    struct gs_history_req q;
    struct gs_history_doc d;
    enum gs_store_source src = GS_STORE_RAW;
    struct MHD_Response *r;
    struct gs_err e;
    char msg[2048];
    enum MHD_Result ret;
    int rc;

    if (!a->rec)
        return send_json_error(c, MHD_HTTP_NOT_FOUND, "history is off (history = off)");
#define ARG(name) MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name)
    if (gs_history_req_parse(&q, ARG("gpu"), ARG("metric"), ARG("from"), ARG("to"), ARG("step"),
                             real_now(), msg, sizeof msg) != GS_OK)
        return send_json_error(c, MHD_HTTP_BAD_REQUEST, msg);
#undef ARG
    gs_err_clear(&e);
    gs_history_doc_begin(&d);
    rc = gs_recorder_query(a->rec, q.gpu, q.metric, q.from, q.to, q.step, gs_history_doc_point,
                           &d, &src, &e);
    if (rc < 0) {
        free(d.data);
        gs_log(GS_LOG_WARN, "http: /api/v1/history: %s", e.msg);
        return send_json_error(c, rc == GS_EINVAL || rc == GS_ENOTFOUND
                                      ? MHD_HTTP_BAD_REQUEST
                                      : MHD_HTTP_SERVICE_UNAVAILABLE,
                               e.msg[0] ? e.msg : gs_strerror(rc));
    }
    gs_history_doc_end(&d, &q, src);
    if (!d.data)
        return send_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    r = MHD_create_response_from_buffer_with_free_callback(d.len, d.data, free);
    if (!r) {
        free(d.data);
        return MHD_NO;
    }
    common_headers(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* Queues a body made for this request (malloc'ed; NULL: out of memory). */
static enum MHD_Result send_owned(struct MHD_Connection *c, unsigned code, char *body,
                                  size_t len, const char *type)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    if (!body)
        return send_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    r = MHD_create_response_from_buffer_with_free_callback(len, body, free);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    common_headers(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* /api/v1/runs[/<id>[/steps]] (docs/api.md): answered by runs.c, a JSON body per request. */
static enum MHD_Result send_runs(struct MHD_Connection *c, struct gs_agent *a, const char *url)
{
    char *body = NULL;
    size_t len = 0;
    unsigned code;

    if (!a->runs)
        return send_json_error(c, MHD_HTTP_NOT_FOUND, "runs: the socket is off (socket = off)");
    code = gs_runs_http(a->runs, url,
                        MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from"),
                        MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit"), &body,
                        &len);
    return send_owned(c, code, body, len, "application/json");
}

/* ---- what a non-admin viewer gets (policy.h, docs/security.md) ---- */

static void policy_settings(const struct gs_agent_config *c, struct gs_policy_settings *s)
{
    memset(s, 0, sizeof *s);
    s->process_visibility = c->process_visibility;
    s->gpu_visibility = c->gpu_visibility;
    snprintf(s->admin_group, sizeof s->admin_group, "%s", c->admin_group);
}

/* /metrics (kind 0), /api/v1/snapshot (1), /api/v1/processes (2), /api/v1/alerts (3) for a
 * viewer the policy filters: the publication's snapshot filtered once (policy.h), then
 * encoded like the admins' pre-rendered bodies (core/snapjson.h; /metrics by metrics.c,
 * without the alert, push and webhook series). */
static enum MHD_Result send_filtered(struct MHD_Connection *c, struct gs_agent *a,
                                     const struct gs_viewer *v, pid_t peer_pid, int kind)
{
    struct gs_pub *p = pub_acquire(a);
    struct gs_policy_view view;
    struct gs_snapshot *f = NULL;
    json_t *out = NULL;
    char *body;
    size_t len = 0;

    if (!p || !p->up) { /* "no sample yet" and "up 0, reason" hold nobody's data */
        if (p)
            pub_release(p);
        return send_pub(c, a, kind);
    }
    gs_policy_view(a->policy, &view, v, peer_pid, p->snap);
    if (kind == 3) {
        out = p->alerts_json ? json_loadb(p->alerts_json, p->alerts_json_len, 0, NULL) : NULL;
        if (out)
            gs_policy_filter_alerts_doc(&view, out);
        pub_release(p);
        body = dump_doc(out, &len);
        return send_owned(c, MHD_HTTP_OK, body, len, "application/json");
    }
    f = gs_policy_filter_snapshot(&view, p->snap);
    if (kind == 0) {
        struct gs_mbuf b = {0};
        if (!f || gs_metrics_render(&b, f, &p->self, p->mflags) != GS_OK)
            gs_mbuf_free(&b);
        gs_snapshot_free(f);
        pub_release(p);
        return send_owned(c, MHD_HTTP_OK, b.data, b.len,
                          "text/plain; version=0.0.4; charset=utf-8");
    }
    pub_release(p);
    if (f && kind == 1)
        gs_snapjson_encode(&out, f, NULL, NULL);
    else if (f)
        gs_snapjson_processes(&out, f, true, NULL);
    gs_snapshot_free(f);
    body = dump_doc(out, &len);
    return send_owned(c, MHD_HTTP_OK, body, len, "application/json");
}

/* Whether /api/v1/history's ?gpu= names a GPU the viewer may not see (then: 404, as for a GPU
 * that does not exist). A missing or malformed value is left to history_api.c. */
static int history_gpu_hidden(struct MHD_Connection *c, struct gs_agent *a,
                              const struct gs_viewer *v, pid_t peer_pid)
{
    const char *g = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "gpu");
    struct gs_policy_view view;
    struct gs_pub *p;
    unsigned long n;
    char *end;
    int hidden;

    if (!g || *g < '0' || *g > '9')
        return 0;
    n = strtoul(g, &end, 10);
    if (*end)
        return 0;
    p = pub_acquire(a);
    gs_policy_view(a->policy, &view, v, peer_pid, p && p->up ? p->snap : NULL);
    hidden = n >= GS_POLICY_GPU_MAX || !gs_policy_gpu_visible(&view, (unsigned)n);
    if (p)
        pub_release(p);
    return hidden;
}

/* /api/v1/runs for a filtered viewer: the list without other users' runs; one run (report or
 * steps) only when its report names the viewer's uid, else 404 as for a run that does not
 * exist. */
static enum MHD_Result send_runs_filtered(struct MHD_Connection *c, struct gs_agent *a,
                                          const struct gs_viewer *v, pid_t peer_pid,
                                          const char *url)
{
    const char *rest = url + strlen("/api/v1/runs");
    struct gs_policy_view view;
    json_t *doc = NULL;
    char *body = NULL, path[128];
    size_t len = 0;
    unsigned code;
    int visible;

    if (!a->runs)
        return send_runs(c, a, url);
    gs_policy_view(a->policy, &view, v, peer_pid, NULL);
    if (rest[0] == '\0' || strcmp(rest, "/") == 0) {
        code = gs_runs_http(a->runs, url,
                            MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from"),
                            MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit"),
                            &body, &len);
        if (body && code == MHD_HTTP_OK && (doc = json_loadb(body, len, 0, NULL)) != NULL) {
            free(body);
            gs_policy_filter_runs_doc(&view, doc);
            body = dump_doc(doc, &len);
        }
        return send_owned(c, code, body, len, "application/json");
    }
    snprintf(path, sizeof path, "/api/v1/runs/%.*s", (int)strcspn(rest + 1, "/"), rest + 1);
    code = gs_runs_http(a->runs, path, NULL, NULL, &body, &len);
    if (code != MHD_HTTP_OK) {
        free(body);
        return send_runs(c, a, url); /* the same error, from the real path */
    }
    doc = body ? json_loadb(body, len, 0, NULL) : NULL;
    visible = doc && gs_policy_run_visible(&view, doc);
    json_decref(doc);
    if (!visible) {
        free(body);
        return send_json_error(c, MHD_HTTP_NOT_FOUND, "no such run");
    }
    if (strcmp(path, url) == 0)
        return send_owned(c, code, body, len, "application/json");
    free(body);
    return send_runs(c, a, url);
}

/* The query arguments of a request against the names its path takes. */
struct arg_check {
    const char *const *allowed; /* NULL-terminated */
    const char *unknown;        /* the first name not allowed */
    size_t bytes;
};

static enum MHD_Result arg_iter(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    struct arg_check *ac = cls;
    int ok = 0;

    (void)kind;
    ac->bytes += strlen(key) + (value ? strlen(value) : 0) + 2;
    for (const char *const *n = ac->allowed; *n; n++)
        ok |= strcmp(*n, key) == 0;
    if (!ok && !ac->unknown)
        ac->unknown = key;
    return MHD_YES;
}

/* Marks the connection's head as read (the reaper leaves it alone while it is answered). */
static void conn_head_done(struct gs_agent *a, struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct conn_track *t = ci ? ci->socket_context : NULL;

    if (!t)
        return;
    pthread_mutex_lock(&a->conn_lock);
    t->deadline_ns = INT64_MAX;
    pthread_mutex_unlock(&a->conn_lock);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct gs_agent *a = cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct conn_track *t = ci ? ci->socket_context : NULL;

    (void)con_cls;
    (void)toe;
    if (!t)
        return;
    pthread_mutex_lock(&a->conn_lock); /* the next request on a kept-alive connection */
    t->deadline_ns = mono_ns() + (int64_t)HTTP_REQUEST_S * NS;
    pthread_mutex_unlock(&a->conn_lock);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct gs_agent *a = cls;
    struct conn_track *t;

    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !(t = calloc(1, sizeof *t)))
            return;
        t->fd = ci->connect_fd;
        t->deadline_ns = mono_ns() + (int64_t)HTTP_REQUEST_S * NS;
        pthread_mutex_lock(&a->conn_lock);
        t->next = a->conns;
        if (a->conns)
            a->conns->prev = t;
        a->conns = t;
        pthread_mutex_unlock(&a->conn_lock);
        *socket_context = t;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && (t = *socket_context) != NULL) {
        /* Before MHD closes the descriptor: the reaper never shuts down a reused fd. */
        pthread_mutex_lock(&a->conn_lock);
        if (t->prev)
            t->prev->next = t->next;
        else
            a->conns = t->next;
        if (t->next)
            t->next->prev = t->prev;
        pthread_mutex_unlock(&a->conn_lock);
        free(t);
        *socket_context = NULL;
    }
}

/* Shuts down connections whose request head is late (a client sending a byte now and then
 * resets libmicrohttpd's inactivity timeout; this bounds the whole head). MHD sees the end of
 * the stream and closes the connection itself. Called once a second by the main thread. */
static void reap_slow(struct gs_agent *a)
{
    int64_t now = mono_ns();
    unsigned n = 0;

    pthread_mutex_lock(&a->conn_lock);
    for (struct conn_track *t = a->conns; t; t = t->next)
        if (t->deadline_ns < now && t->fd >= 0) {
            shutdown(t->fd, SHUT_RDWR);
            t->fd = -1;
            n++;
        }
    a->conns_reaped += n;
    pthread_mutex_unlock(&a->conn_lock);
    if (n)
        gs_log(GS_LOG_DEBUG, "http: closed %u connection(s) slower than %d s", n,
               HTTP_REQUEST_S);
}

static const char *const no_args[] = {NULL};
static const char *const history_args[] = {"gpu", "metric", "from", "to", "step", NULL};
static const char *const runs_args[] = {"from", "limit", NULL};

static void viewer_identify(struct gs_agent *a, struct MHD_Connection *c, struct gs_viewer *v,
                            const char **challenge);
static enum MHD_Result send_unauthorized(struct MHD_Connection *c, const char *challenge);

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct gs_agent *a = cls;
    enum { R_NONE, R_METRICS, R_HEALTH, R_SNAPSHOT, R_HISTORY, R_PROCESSES,
           R_ALERTS, R_WEB, R_RUNS } route =
        R_NONE;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    struct arg_check ac = {.allowed = no_args};
    const char *te, *cl, *challenge;
    struct gs_viewer v; /* who asks (auth.c), for the visibility policy */
    pid_t peer_pid = 0; /* the unix socket peer's, for its cgroup (policy.c) */
    struct sockaddr_in6 unix_key; /* a unix-socket client's rate-limit key: its uid */
    double rate, burst;
    char msg[160];

    (void)version;
    (void)upload_data;
    (void)con_cls;
    conn_head_done(a, c);
    pthread_mutex_lock(&a->lock);
    rate = a->cfg.http_rate;
    burst = a->cfg.http_burst;
    pthread_mutex_unlock(&a->lock);
    if (!gs_ratelimit_take(a->rl,
                           gs_policy_unix_rate_addr(c, &unix_key) ? (struct sockaddr *)&unix_key
                           : ci                                   ? ci->client_addr
                                                                  : NULL,
                           rate, burst, mono_ns()))
        return send_json_error(c, MHD_HTTP_TOO_MANY_REQUESTS, "rate limit: too many requests");
    if (strlen(url) > HTTP_PATH_MAX)
        return send_json_error(c, MHD_HTTP_URI_TOO_LONG, "path too long");
    viewer_identify(a, c, &v, &challenge); /* after the rate limit: bcrypt is costly */
    /* The uid behind it (policy.h): SO_PEERCRED on the unix socket, whose viewers need no
     * credential; a loopback TCP peer's or a token user's uid. Root and admins: ADMIN. */
    gs_policy_resolve(a->policy, c, &v, &peer_pid);
    if (v.role == GS_ROLE_NONE)
        return send_unauthorized(c, challenge);
    if (strcmp(url, "/metrics") == 0)
        route = R_METRICS;
    else if (strcmp(url, "/healthz") == 0)
        route = R_HEALTH;
    else if (strcmp(url, "/api/v1/snapshot") == 0)
        route = R_SNAPSHOT;
    else if (strcmp(url, "/api/v1/history") == 0)
        route = R_HISTORY;
    else if (strcmp(url, "/api/v1/processes") == 0)
        route = R_PROCESSES;
    else if (strcmp(url, "/api/v1/alerts") == 0)
        route = R_ALERTS;
    else if (strcmp(url, "/api/v1/runs") == 0 || strncmp(url, "/api/v1/runs/", 13) == 0)
        route = R_RUNS;
    else if (gs_web_find(url)) /* "/" and /assets/... (web.c) */
        route = R_WEB;
    if (v.role == GS_ROLE_METRICS && route != R_METRICS && route != R_HEALTH)
        return send_json_error(c, MHD_HTTP_FORBIDDEN,
                               "forbidden: this credential reaches /metrics and /healthz only");
    if (route == R_HISTORY)
        ac.allowed = history_args;
    else if (route == R_RUNS)
        ac.allowed = runs_args;
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, arg_iter, &ac);
    if (ac.bytes > HTTP_QUERY_MAX)
        return send_json_error(c, MHD_HTTP_URI_TOO_LONG, "query too long");
    if (route == R_NONE)
        return send_static(c, MHD_HTTP_NOT_FOUND, "not found\n", "text/plain", NULL);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return send_static(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", "text/plain",
                           "GET, HEAD");
    te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (te || (cl && strcmp(cl, "0") != 0) || *upload_data_size)
        return send_json_error(c, MHD_HTTP_BAD_REQUEST, "a GET request has no body");
    if (ac.unknown && (route == R_SNAPSHOT || route == R_HISTORY || route == R_PROCESSES ||
                       route == R_ALERTS || route == R_RUNS)) {
        snprintf(msg, sizeof msg, "%.64s: unknown parameter", ac.unknown);
        return send_json_error(c, MHD_HTTP_BAD_REQUEST, msg);
    }
    /* A non-admin viewer gets copies filtered by the visibility policy, an admin the
     * pre-rendered bodies. */
    if (gs_policy_filters(a->policy, &v)) {
        switch (route) {
        case R_METRICS:
            return send_filtered(c, a, &v, peer_pid, 0);
        case R_SNAPSHOT:
            return send_filtered(c, a, &v, peer_pid, 1);
        case R_PROCESSES:
            return send_filtered(c, a, &v, peer_pid, 2);
        case R_ALERTS:
            return send_filtered(c, a, &v, peer_pid, 3);
        case R_RUNS:
            return send_runs_filtered(c, a, &v, peer_pid, url);
        case R_HISTORY:
            if (history_gpu_hidden(c, a, &v, peer_pid))
                return send_json_error(c, MHD_HTTP_NOT_FOUND, "gpu: no such GPU");
            break;
        default:
            break;
        }
    }
    switch (route) {
    case R_METRICS:
        return send_pub(c, a, 0);
    case R_SNAPSHOT:
        return send_pub(c, a, 1);
    case R_PROCESSES:
        return send_pub(c, a, 2);
    case R_ALERTS:
        return send_pub(c, a, 3);
    case R_HISTORY:
        return send_history(c, a);
    case R_RUNS:
        return send_runs(c, a, url);
    case R_WEB:
        return (enum MHD_Result)gs_web_send(c, gs_web_find(url));
    default:
        return send_static(c, MHD_HTTP_OK, "ok\n", "text/plain", NULL);
    }
}

/* ---- HTTP viewers: credentials, TLS, exposure (auth.h, docs/security.md) ---- */

#define PEM_MAX (1u << 20)

/* Who is asking: the credentials of the request against the current auth (a reference is
 * held for the check: a SIGHUP may swap it meanwhile). *challenge is a string literal. */
static void viewer_identify(struct gs_agent *a, struct MHD_Connection *c, struct gs_viewer *v,
                            const char **challenge)
{
    struct gs_auth *au;

    pthread_mutex_lock(&a->lock);
    au = a->auth;
    gs_auth_ref(au);
    pthread_mutex_unlock(&a->lock);
    gs_auth_identify(au, c, v);
    *challenge = gs_auth_challenge(au);
    gs_auth_unref(au);
}

static enum MHD_Result send_unauthorized(struct MHD_Connection *c, const char *challenge)
{
    static const char body[] = "{\"error\":\"unauthorized: credentials missing or wrong\"}\n";
    struct MHD_Response *r = MHD_create_response_from_buffer(sizeof body - 1, (void *)body,
                                                             MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret;

    if (!r)
        return MHD_NO;
    common_headers(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, challenge);
    ret = MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, r);
    MHD_destroy_response(r);
    return ret;
}

/* A PEM file read whole, NUL-terminated; NULL with err set on failure. */
static char *read_pem(const char *path, struct gs_err *err)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t n;

    if (!f) {
        gs_err_set(err, GS_EIO, "tls: %s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if ((buf = malloc(PEM_MAX + 1)) == NULL) {
        gs_err_set(err, GS_ENOMEM, "tls: %s: out of memory", path);
    } else if ((n = fread(buf, 1, PEM_MAX + 1, f)) > PEM_MAX || ferror(f) ||
               memchr(buf, '\0', n)) {
        gs_err_set(err, GS_EIO, "tls: %s: %s", path,
                   n > PEM_MAX ? "larger than 1 MiB" : "unreadable or not PEM text");
        free(buf);
        buf = NULL;
    } else {
        buf[n] = '\0';
    }
    fclose(f);
    return buf;
}

/* The TLS pair c asks for (tls_cert_file + tls_key_file, or the web config's
 * tls_server_config), read and checked with GnuTLS (parses, key matches). *cert and *key are
 * NULL when none is asked for; the caller frees them. */
static int load_tls(const struct gs_agent_config *c, const struct gs_auth *au, char **cert,
                    char **key, struct gs_err *err)
{
    const char *cf = c->tls_cert_file, *kf = c->tls_key_file;
    gnutls_certificate_credentials_t cred;
    gnutls_datum_t dc, dk;
    int rc;

    *cert = *key = NULL;
    if (!cf[0] != !kf[0])
        return gs_err_set(err, GS_EINVAL, "tls: tls_cert_file and tls_key_file go together");
    if (gs_auth_tls_cert_file(au)[0]) {
        if (cf[0])
            return gs_err_set(err, GS_EINVAL, "tls: set the pair in tls_cert_file/tls_key_file "
                                              "or in web_config_file, not both");
        cf = gs_auth_tls_cert_file(au);
        kf = gs_auth_tls_key_file(au);
    }
    if (!cf[0])
        return GS_OK;
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
        return gs_err_set(err, GS_EINVAL, "tls: this libmicrohttpd has no TLS support");
    if (!(*cert = read_pem(cf, err)) || !(*key = read_pem(kf, err)))
        goto fail;
    if (gnutls_certificate_allocate_credentials(&cred) < 0) {
        gs_err_set(err, GS_ENOMEM, "tls: out of memory");
        goto fail;
    }
    dc.data = (unsigned char *)*cert;
    dc.size = (unsigned)strlen(*cert);
    dk.data = (unsigned char *)*key;
    dk.size = (unsigned)strlen(*key);
    rc = gnutls_certificate_set_x509_key_mem(cred, &dc, &dk, GNUTLS_X509_FMT_PEM);
    gnutls_certificate_free_credentials(cred);
    if (rc < 0) {
        gs_err_set(err, GS_EINVAL, "tls: %s + %s: %s", cf, kf, gnutls_strerror(rc));
        goto fail;
    }
    return GS_OK;
fail:
    free(*cert);
    if (*key)
        memset(*key, 0, strlen(*key));
    free(*key);
    *cert = *key = NULL;
    return err ? (err->rc ? err->rc : GS_EINVAL) : GS_EINVAL;
}

static void free_pem_pair(char *cert, char *key)
{
    free(cert);
    if (key)
        memset(key, 0, strlen(key)); /* the private key */
    free(key);
}

static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)(const void *)ss;
        return (ntohl(s->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)(const void *)ss;
        const unsigned char *b = s->sin6_addr.s6_addr;
        return IN6_IS_ADDR_LOOPBACK(&s->sin6_addr) ||
               (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr) && b[12] == 127);
    }
    return 0;
}

/* The exposure rule: a listen address other than loopback needs TLS and credentials (tokens
 * or basic-auth users), unless insecure = on, which is then said loudly. */
static int check_exposure(const struct gs_agent_config *c, const struct sockaddr_storage *ss,
                          int tls, const struct gs_auth *au, struct gs_err *err)
{
    int protected_ = tls && gs_auth_required(au);

    if (is_loopback(ss) || protected_)
        return GS_OK;
    if (!c->insecure)
        return gs_err_set(err, GS_EINVAL,
                          "listen %s: refusing a non-loopback address without %s%s%s; set "
                          "them up (docs/security.md) or pass --insecure",
                          c->listen, tls ? "" : "TLS (tls_cert_file/tls_key_file)",
                          !tls && !gs_auth_required(au) ? " and " : "",
                          gs_auth_required(au) ? "" : "tokens_file or basic_auth_users");
    gs_log(GS_LOG_WARN, "http: INSECURE: %s is reachable from the network %s%s%s (--insecure)",
           c->listen, tls ? "" : "in clear text",
           !tls && !gs_auth_required(au) ? " and " : "",
           gs_auth_required(au) ? "" : "without credentials: anyone who reaches it sees data");
    return GS_OK;
}

static int parse_listen(const char *listen, struct sockaddr_storage *ss, struct gs_err *err)
{
    char host[GS_LISTEN_LEN];
    unsigned port;
    struct sockaddr_in *sin = (struct sockaddr_in *)(void *)ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)(void *)ss;

    memset(ss, 0, sizeof *ss);
    if (gs_config_split_listen(listen, host, sizeof host, &port) != GS_OK)
        return gs_err_set(err, GS_EINVAL, "listen: bad address '%s'", listen);
    if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
    } else {
        return gs_err_set(err, GS_EINVAL, "listen: bad address '%s'", listen);
    }
    return GS_OK;
}

/* Starts libmicrohttpd on a->http_addr, or on listen_fd (>= 0: a quiesced daemon's socket, a
 * TLS reload), with the PEM pair when cert is not NULL. MHD_USE_ITC: MHD_quiesce_daemon
 * needs it. */
static struct MHD_Daemon *http_daemon(struct gs_agent *a, int listen_fd, const char *cert,
                                      const char *key)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC;
    struct MHD_OptionItem opt[4];
    unsigned n = 0;
    const struct sockaddr *sa = (const struct sockaddr *)&a->http_addr;

    if (a->http_addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (listen_fd >= 0)
        opt[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, listen_fd, NULL};
    else
        opt[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, (void *)sa};
    if (cert) {
        flags |= MHD_USE_TLS;
        opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cert};
        opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key};
    }
    opt[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    errno = 0;
    return MHD_start_daemon(flags, 0, NULL, NULL, on_request, a, MHD_OPTION_ARRAY, opt,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_MAX,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_CONN_PER_IP,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_S,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, a,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, a, MHD_OPTION_END);
}

static int start_http(struct gs_agent *a, struct gs_err *err)
{
    char *cert = NULL, *key = NULL;
    int rc;

    rc = parse_listen(a->cfg.listen, &a->http_addr, err);
    if (rc == GS_OK)
        rc = gs_auth_open(&a->auth, a->cfg.tokens_file, a->cfg.web_config_file, err);
    if (rc == GS_OK)
        rc = load_tls(&a->cfg, a->auth, &cert, &key, err);
    if (rc == GS_OK)
        rc = check_exposure(&a->cfg, &a->http_addr, cert != NULL, a->auth, err);
    if (rc != GS_OK) {
        free_pem_pair(cert, key);
        return rc;
    }
    a->mhd = http_daemon(a, a->http_fd, cert, key);
    if (!a->mhd) {
        if (a->http_fd >= 0)
            close(a->http_fd);
        a->http_fd = -1;
        free_pem_pair(cert, key);
        return gs_err_set(err, GS_EIO, "http: cannot listen on %s: %s", a->cfg.listen,
                          errno ? strerror(errno) : "libmicrohttpd failed to start");
    }
    a->tls_cert_pem = cert;
    a->tls_key_pem = key;
    gs_log(GS_LOG_INFO, "http: listening on %s (%s; %u token(s), %u basic-auth user(s)%s)",
           a->cfg.listen, cert ? "https" : "http", gs_auth_token_count(a->auth),
           gs_auth_user_count(a->auth), gs_auth_required(a->auth) ? "" : ": open to all");
    return GS_OK;
}

/* SIGHUP, HTTP's part: new credentials and, when the PEM pair changed, a new daemon on the
 * same listening socket (MHD_quiesce_daemon hands it over; connections on the old daemon are
 * closed). Anything wrong (unreadable file, bad pair, a change that would break the exposure
 * rule) keeps what runs and puts its settings back into c. */
static void reload_http(struct gs_agent *a, struct gs_agent_config *c)
{
    struct gs_auth *au = NULL, *old;
    char *cert = NULL, *key = NULL;
    struct gs_err e;
    int changed;

    gs_err_clear(&e);
    if (gs_auth_open(&au, c->tokens_file, c->web_config_file, &e) != GS_OK ||
        load_tls(c, au, &cert, &key, &e) != GS_OK ||
        check_exposure(c, &a->http_addr, cert != NULL, au, &e) != GS_OK) {
        gs_log(GS_LOG_ERROR, "reload: %s; keeping the running credentials and TLS", e.msg);
        gs_auth_unref(au);
        memcpy(c->tokens_file, a->cfg.tokens_file, sizeof c->tokens_file);
        memcpy(c->web_config_file, a->cfg.web_config_file, sizeof c->web_config_file);
        memcpy(c->tls_cert_file, a->cfg.tls_cert_file, sizeof c->tls_cert_file);
        memcpy(c->tls_key_file, a->cfg.tls_key_file, sizeof c->tls_key_file);
        c->insecure = a->cfg.insecure;
        return;
    }
    changed = a->mhd && (!cert != !a->tls_cert_pem ||
                         (cert && (strcmp(cert, a->tls_cert_pem) != 0 ||
                                   strcmp(key, a->tls_key_pem) != 0)));
    if (changed) {
        char *old_cert = NULL, *old_key = NULL;
        MHD_socket fd = MHD_quiesce_daemon(a->mhd);
        struct MHD_Daemon *d = fd == MHD_INVALID_SOCKET ? NULL : http_daemon(a, fd, cert, key);
        if (!d) {
            gs_log(GS_LOG_ERROR, "reload: http: cannot restart with the new TLS pair; %s",
                   fd == MHD_INVALID_SOCKET ? "still serving the old one"
                                            : "restarting with the old one");
            if (fd != MHD_INVALID_SOCKET &&
                !(d = http_daemon(a, fd, a->tls_cert_pem, a->tls_key_pem)))
                gs_log(GS_LOG_ERROR, "reload: http: cannot restart at all; not serving HTTP");
            free_pem_pair(cert, key);
            cert = a->tls_cert_pem;
            key = a->tls_key_pem;
        } else {
            gs_log(GS_LOG_INFO, "reload: http: %s, daemon restarted on %s",
                   cert ? "new TLS certificate and key" : "TLS off", a->cfg.listen);
            old_cert = a->tls_cert_pem; /* freed once the old daemon has stopped */
            old_key = a->tls_key_pem;
        }
        if (d || fd != MHD_INVALID_SOCKET) {
            struct MHD_Daemon *od = a->mhd;
            a->mhd = d;
            MHD_stop_daemon(od); /* quiesced: the socket is d's now */
            if (!d)
                close(fd);
        }
        free_pem_pair(old_cert, old_key);
        a->tls_cert_pem = cert;
        a->tls_key_pem = key;
    } else {
        free_pem_pair(cert, key);
    }
    pthread_mutex_lock(&a->lock);
    old = a->auth;
    a->auth = au;
    pthread_mutex_unlock(&a->lock);
    gs_auth_unref(old);
    gs_log(GS_LOG_INFO, "reload: http credentials: %u token(s), %u basic-auth user(s)",
           gs_auth_token_count(au), gs_auth_user_count(au));
}

/* The HTTP unix socket for local viewers (docs/security.md "LOCAL VIEWERS"): its directory
 * made 0755 when missing, a stale socket replaced (a live one left alone), mode 0666 since
 * who connects is learnt with SO_PEERCRED, served by a second libmicrohttpd daemon with the
 * same handler. Not fatal: the TCP port stays the agent's main door. */
static void start_http_unix(struct gs_agent *a)
{
    const char *path = a->cfg.http_socket;
    struct sockaddr_un sun;
    char dir[GS_SOCKET_LEN], *slash;
    struct stat st;
    int fd;

    if (!path[0] || strcmp(path, "off") == 0) {
        gs_log(GS_LOG_INFO, "http: unix socket off");
        return;
    }
    memset(&sun, 0, sizeof sun);
    sun.sun_family = AF_UNIX;
    if (path[0] != '/' || strlen(path) >= sizeof sun.sun_path) {
        gs_log(GS_LOG_ERROR, "http_socket: '%s' is not an absolute path of at most %zu bytes",
               path, sizeof sun.sun_path - 1);
        return;
    }
    memcpy(sun.sun_path, path, strlen(path));
    snprintf(dir, sizeof dir, "%s", path);
    slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            gs_log(GS_LOG_ERROR, "http_socket: cannot make %s: %s", dir, strerror(errno));
            return;
        }
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        gs_log(GS_LOG_ERROR, "http_socket: socket: %s", strerror(errno));
        return;
    }
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            gs_log(GS_LOG_ERROR, "http_socket: %s exists and is not a socket", path);
            close(fd);
            return;
        }
        if (connect(fd, (const struct sockaddr *)&sun, sizeof sun) == 0) {
            gs_log(GS_LOG_ERROR, "http_socket: %s is served by another process", path);
            close(fd);
            return;
        }
        unlink(path);
    }
    if (bind(fd, (const struct sockaddr *)&sun, sizeof sun) != 0 || chmod(path, 0666) != 0 ||
        listen(fd, 64) != 0) {
        gs_log(GS_LOG_ERROR, "http_socket: cannot listen on %s: %s", path, strerror(errno));
        close(fd);
        return;
    }
    a->mhd_unix = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, 0, NULL, NULL, on_request, a,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_MAX,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HTTP_MEMORY, MHD_OPTION_NOTIFY_CONNECTION, on_connection, a,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, a, MHD_OPTION_END);
    if (!a->mhd_unix) {
        gs_log(GS_LOG_ERROR, "http_socket: libmicrohttpd cannot serve %s", path);
        close(fd);
        unlink(path);
        return;
    }
    gs_log(GS_LOG_INFO, "http: local viewers on %s (unix socket, mode 0666)", path);
}

/* ---- signals and the life cycle ---- */

/* Closes the sinks the sampling thread swapped out (main thread: may wait for a request);
 * cancel also closes new ones it has not taken yet (a newer SIGHUP replaces them). */
static void close_retired(struct gs_agent *a, int cancel)
{
    struct gs_push *p, *pn = NULL;
    struct gs_webhook *w, *wn = NULL;

    pthread_mutex_lock(&a->lock);
    p = a->push_old;
    w = a->webhook_old;
    a->push_old = NULL;
    a->webhook_old = NULL;
    if (cancel) {
        pn = a->push_new;
        wn = a->webhook_new;
        a->push_new = NULL;
        a->webhook_new = NULL;
        a->push_swap = a->webhook_swap = 0;
    }
    pthread_mutex_unlock(&a->lock);
    gs_push_close(p);
    gs_push_close(pn);
    gs_webhook_close(w);
    gs_webhook_close(wn);
}

/* Opens what a SIGHUP's push settings and alert_webhook ask for and queues it for
 * swap_sinks. On failure (bad token file, libcurl missing, ...) the running sinks stay and c
 * gets their settings back. */
static void reload_sinks(struct gs_agent *a, struct gs_agent_config *c)
{
    char host[256] = "";
    struct gs_push *p = NULL;
    struct gs_webhook *w = NULL;
    int push_changed = memcmp(&c->push, &a->cfg.push, sizeof c->push) != 0;
    int hook_changed = strcmp(c->alerts.webhook, a->cfg.alerts.webhook) != 0;
    struct gs_err e;

    if (!push_changed && !hook_changed)
        return;
    close_retired(a, 1);
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    gs_err_clear(&e);
    if (push_changed && gs_push_enabled(&c->push) &&
        (gs_push_open(&p, &c->push, host, &e) != GS_OK || gs_push_start(p, &e) != GS_OK)) {
        gs_log(GS_LOG_ERROR, "reload: %s; keeping the running push settings", e.msg);
        gs_push_close(p);
        p = NULL;
        c->push = a->cfg.push;
        push_changed = 0;
    }
    if (hook_changed && c->alerts.webhook[0] &&
        (gs_webhook_open(&w, c->alerts.webhook, host, a->cfg.listen, &e) != GS_OK ||
         gs_webhook_start(w, &e) != GS_OK)) {
        gs_log(GS_LOG_ERROR, "reload: %s; keeping the running alert_webhook", e.msg);
        gs_webhook_close(w);
        w = NULL;
        snprintf(c->alerts.webhook, sizeof c->alerts.webhook, "%s", a->cfg.alerts.webhook);
        hook_changed = 0;
    }
    pthread_mutex_lock(&a->lock);
    if (push_changed) {
        a->push_new = p;
        a->push_swap = 1;
    }
    if (hook_changed) {
        a->webhook_new = w;
        a->webhook_swap = 1;
    }
    pthread_mutex_unlock(&a->lock);
    if (push_changed)
        gs_log(GS_LOG_INFO, "reload: push settings applied (influxdb %s, pushgateway %s)",
               c->push.influx_url[0] ? c->push.influx_url : "off",
               c->push.pushgateway_url[0] ? c->push.pushgateway_url : "off");
    if (hook_changed)
        gs_log(GS_LOG_INFO, "reload: alert_webhook %s",
               c->alerts.webhook[0] ? c->alerts.webhook : "off");
}

/* The text keys a SIGHUP cannot change: what they bind or open at start. */
#define RESTART_ONLY(key)                                                                          \
    {#key, offsetof(struct gs_agent_config, key), sizeof(((struct gs_agent_config *)0)->key)}
static const struct {
    const char *name;
    size_t off, size;
} restart_only[] = {
    RESTART_ONLY(listen), RESTART_ONLY(http_socket), RESTART_ONLY(data_dir),
    RESTART_ONLY(socket), RESTART_ONLY(user),
};
#undef RESTART_ONLY

/* Puts the running values of the restart-only keys back into a reloaded c, warning about each
 * one the new configuration changes (data_dir: unless the caller fixed it). */
static void keep_restart_only(const struct gs_agent *a, struct gs_agent_config *c)
{
    for (size_t i = 0; i < sizeof restart_only / sizeof restart_only[0]; i++) {
        char *now = (char *)c + restart_only[i].off;
        const char *run = (const char *)&a->cfg + restart_only[i].off;
        int fixed = restart_only[i].off == offsetof(struct gs_agent_config, data_dir) &&
                    a->data_dir_from_caller;
        if (!fixed && strcmp(now, run) != 0)
            gs_log(GS_LOG_WARN, "reload: %s '%s' -> '%s' needs a restart; still '%s'",
                   restart_only[i].name, run, now, run);
        snprintf(now, restart_only[i].size, "%s", run);
    }
    if (c->history != a->cfg.history)
        gs_log(GS_LOG_WARN, "reload: history %s needs a restart", c->history ? "on" : "off");
    c->history = a->cfg.history;
}

static void reload(struct gs_agent *a, const struct gs_agent_args *args, int argc, char **argv)
{
    struct gs_policy_settings ps;
    struct gs_agent_config c;
    struct gs_err e;

    gs_err_clear(&e);
    if (gs_config_build(&c, args, argc, argv, &e) != GS_OK) {
        gs_log(GS_LOG_ERROR, "reload: %s; keeping the running configuration", e.msg);
        return;
    }
    reload_sinks(a, &c); /* a->cfg is the main thread's to write: read without the lock */
    reload_http(a, &c);  /* credentials and TLS pair; the listen address stays */
    pthread_mutex_lock(&a->lock);
    keep_restart_only(a, &c);
    a->cfg = c;
    policy_settings(&c, &ps);
    gs_policy_set(a->policy, &ps);
    pthread_cond_signal(&a->wake);
    pthread_mutex_unlock(&a->lock);
    gs_log_set_level((enum gs_log_level)c.log_level);
    if (a->rec) {
        gs_recorder_set_policy(a->rec, c.flush_interval_s, c.retention_raw_s,
                               c.retention_rollup_s);
        gs_recorder_set_runs_retention(a->rec, c.retention_runs_s);
    }
    gs_log(GS_LOG_INFO, "reload: interval %gs, metrics_compat %s, log_level %s", c.interval_s,
           c.metrics_compat == GS_COMPAT_DCGM ? "dcgm" : "none",
           gs_log_level_name((enum gs_log_level)c.log_level));
}

static int init_agent(struct gs_agent *a, const struct gs_agent_config *cfg, struct gs_err *err)
{
    pthread_condattr_t ca;
    int rc;

    memset(a, 0, sizeof *a);
    a->cfg = *cfg;
    a->last_sample_s = -1;
    if (pthread_mutex_init(&a->lock, NULL) != 0)
        return gs_err_set(err, GS_ENOMEM, "agent: pthread_mutex_init failed");
    if (pthread_mutex_init(&a->conn_lock, NULL) != 0) {
        pthread_mutex_destroy(&a->lock);
        return gs_err_set(err, GS_ENOMEM, "agent: pthread_mutex_init failed");
    }
    if (pthread_condattr_init(&ca) != 0 ||
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&a->wake, &ca) != 0) {
        pthread_mutex_destroy(&a->lock);
        pthread_mutex_destroy(&a->conn_lock);
        return gs_err_set(err, GS_ENOMEM, "agent: pthread_cond_init failed");
    }
    pthread_condattr_destroy(&ca);
    rc = gs_ratelimit_new(&a->rl, err);
    if (rc != GS_OK) {
        pthread_cond_destroy(&a->wake);
        pthread_mutex_destroy(&a->lock);
        pthread_mutex_destroy(&a->conn_lock);
    }
    return rc;
}

/* Opens the history (a foreign or corrupt history.db stops the start: fatal, never
 * overwritten) and starts its writer. */
static int start_history(struct gs_agent *a, struct gs_err *err)
{
    const struct gs_agent_config *c = &a->cfg;
    int rc;

    if (!c->history) {
        gs_log(GS_LOG_INFO, "history: off");
        return GS_OK;
    }
    rc = gs_recorder_open(&a->rec, c->data_dir, err);
    if (rc != GS_OK)
        return rc;
    gs_recorder_set_policy(a->rec, c->flush_interval_s, c->retention_raw_s,
                           c->retention_rollup_s);
    gs_recorder_set_runs_retention(a->rec, c->retention_runs_s);
    rc = gs_recorder_start(a->rec, err);
    if (rc != GS_OK)
        return rc;
    gs_log(GS_LOG_INFO, "history: data dir %s, flush every %gs, raw kept %.15gs, rollups %.15gs",
           c->data_dir, c->flush_interval_s, c->retention_raw_s, c->retention_rollup_s);
    return GS_OK;
}

/* Opens the step-record socket (runs.h) unless socket = off. A socket that cannot be bound
 * (another agent on it, no permission) is logged and the agent goes on without it: metrics
 * and history matter more than runs. */
static void start_runs(struct gs_agent *a)
{
    char host[256] = "", db[GS_DATA_DIR_LEN + 16];
    struct gs_runs_opts o = {.socket_path = a->cfg.socket, .rec = a->rec, .hostname = host};
    struct gs_err e;

    if (!a->cfg.socket[0] || strcmp(a->cfg.socket, "off") == 0) {
        gs_log(GS_LOG_INFO, "runs: socket off");
        return;
    }
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    snprintf(db, sizeof db, "%s/history.db", a->cfg.data_dir);
    o.history_path = a->rec ? db : NULL;
    gs_err_clear(&e);
    if (gs_runs_open(&a->runs, &o, &e) != GS_OK) {
        gs_log(GS_LOG_ERROR, "runs: %s; going on without the step-record socket", e.msg);
        a->runs = NULL;
        return;
    }
    gs_log(GS_LOG_INFO, "runs: step records on %s%s", a->cfg.socket,
           a->rec ? "" : " (history off: runs are not kept once they end)");
}

/* Opens the push sinks when any is configured (a bad token file stops the start). */
static int start_push(struct gs_agent *a, struct gs_err *err)
{
    char host[256] = "";
    int rc;

    if (!gs_push_enabled(&a->cfg.push))
        return GS_OK;
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    rc = gs_push_open(&a->push, &a->cfg.push, host, err);
    if (rc == GS_OK)
        rc = gs_push_start(a->push, err);
    return rc;
}

/* Starts the alert webhook sender when alert_webhook is set, and hands it the transitions. */
static int start_webhook(struct gs_agent *a, struct gs_err *err)
{
    char host[256] = "";
    int rc;

    if (!a->cfg.alerts.webhook[0])
        return GS_OK;
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    rc = gs_webhook_open(&a->webhook, a->cfg.alerts.webhook, host, a->cfg.listen, err);
    if (rc == GS_OK)
        rc = gs_webhook_start(a->webhook, err);
    if (rc == GS_OK)
        gs_alerts_set_notify(a->alerts, gs_webhook_notify, a->webhook);
    return rc;
}

static void shutdown_agent(struct gs_agent *a)
{
    struct gs_pub *p;

    pthread_mutex_lock(&a->lock);
    a->stop = 1;
    pthread_cond_signal(&a->wake);
    pthread_mutex_unlock(&a->lock);
    if (a->thread_started)
        pthread_join(a->thread, NULL);
    if (!a->mhd && a->http_fd >= 0)
        close(a->http_fd); /* bound before a drop, never served */
    if (a->mhd)
        MHD_stop_daemon(a->mhd); /* drops every response, so every reference comes back */
    if (a->mhd_unix) {
        MHD_stop_daemon(a->mhd_unix); /* closes the listening socket too */
        unlink(a->cfg.http_socket);
    }
    a->mhd = NULL;
    free_pem_pair(a->tls_cert_pem, a->tls_key_pem);
    a->tls_cert_pem = a->tls_key_pem = NULL;
    gs_auth_unref(a->auth);
    a->auth = NULL;
    /* After the sampler (no more offers) and HTTP (no more queries): appends what is queued,
     * flushes, and gives the queued references back before the publications are freed. */
    gs_runs_close(a->runs); /* live runs end and are stored: before the recorder closes */
    a->runs = NULL;
    gs_recorder_close(a->rec);
    a->rec = NULL;
    gs_push_close(a->push); /* gives its queued references back, like the recorder */
    a->push = NULL;
    gs_webhook_close(a->webhook); /* after the sampler: no more transitions */
    a->webhook = NULL;
    close_retired(a, 1); /* a SIGHUP's sinks, swapped out or never taken */
    if (a->current)
        pub_release(a->current);
    a->current = NULL;
    while ((p = a->spare) != NULL) {
        a->spare = p->next_spare;
        pub_free(p);
    }
    gs_sampler_close(a->sampler);
    gs_alerts_free(a->alerts);
    gs_policy_free(a->policy);
    a->policy = NULL;
    a->alerts = NULL;
    gs_ratelimit_free(a->rl);
    pthread_cond_destroy(&a->wake);
    pthread_mutex_destroy(&a->lock);
    pthread_mutex_destroy(&a->conn_lock);
}

/* The `user` key (privdrop.h): checks the data dir (always); started as root with a user,
 * also prepares the data and socket directories for it, binds the TCP port and drops root. */
static int drop_privileges(struct gs_agent *a, struct gs_err *err)
{
    struct gs_privdrop pd;
    int rc = gs_privdrop_plan(&pd, a->cfg.user, err);

    if (rc == GS_OK && a->cfg.history)
        rc = gs_privdrop_data_dir(&pd, a->cfg.data_dir, err);
    if (rc != GS_OK || !pd.active)
        return rc;
    gs_privdrop_socket_dir(&pd, a->cfg.socket);
    gs_privdrop_socket_dir(&pd, a->cfg.http_socket);
    rc = parse_listen(a->cfg.listen, &a->http_addr, err);
    if (rc == GS_OK)
        rc = gs_privdrop_listen_tcp(&a->http_addr, a->cfg.listen, &a->http_fd, err);
    if (rc == GS_OK)
        rc = gs_privdrop_apply(&pd, err);
    if (rc == GS_OK)
        gs_config_pin_euid(0); /* SIGHUP: the defaults of the start, not the user's */
    return rc;
}

int gs_agent_run(const struct gs_agent_config *cfg, const struct gs_agent_args *args, int argc,
                 char **argv, const struct gs_agent_run_opts *opts, struct gs_err *err)
{
    struct gs_agent a;
    sigset_t set, old;
    int rc;

    gs_log_set_level((enum gs_log_level)cfg->log_level);
    rc = init_agent(&a, cfg, err);
    if (rc != GS_OK)
        return rc;
    a.http_fd = -1;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    signal(SIGPIPE, SIG_IGN);

    if (opts && opts->data_dir) {
        snprintf(a.cfg.data_dir, sizeof a.cfg.data_dir, "%s", opts->data_dir);
        a.data_dir_from_caller = 1;
    }
    rc = gs_alerts_new(&a.alerts, &a.cfg.alerts, err);
    if (rc == GS_OK) {
        struct gs_policy_settings ps;
        policy_settings(&a.cfg, &ps);
        rc = gs_policy_new(&a.policy, &ps, err);
    }
    if (rc == GS_OK)
        rc = drop_privileges(&a, err); /* before the history, NVML and the unix sockets */
    if (rc == GS_OK)
        rc = start_history(&a, err);
    if (rc == GS_OK)
        start_runs(&a);
    if (rc == GS_OK)
        rc = start_push(&a, err);
    if (rc == GS_OK)
        rc = start_webhook(&a, err);
    if (rc == GS_OK) {
        cycle(&a, &a.cfg); /* the first publication exists before the port opens */
        rc = start_http(&a, err);
    if (rc == GS_OK)
        start_http_unix(&a);
    }
    if (rc == GS_OK) {
        if (pthread_create(&a.thread, NULL, sampling_thread, &a) != 0)
            rc = gs_err_set(err, GS_ENOMEM, "agent: cannot start the sampling thread");
        else
            a.thread_started = 1;
    }
    if (rc == GS_OK) {
        gs_log(GS_LOG_INFO, "agent: started, interval %gs", cfg->interval_s);
        if (opts && opts->ready)
            opts->ready(opts->ctx, a.cfg.listen);
        for (;;) {
            struct timespec tick = {1, 0};
            int sig = sigtimedwait(&set, NULL, &tick);
            if (sig < 0) {
                reap_slow(&a); /* a second without a signal */
                close_retired(&a, 0);
                continue;
            }
            if (sig == SIGHUP) {
                reload(&a, args, argc, argv);
            } else if (sig == SIGINT || sig == SIGTERM) {
                gs_log(GS_LOG_INFO, "agent: %s, shutting down",
                       sig == SIGINT ? "SIGINT" : "SIGTERM");
                break;
            }
        }
    }
    shutdown_agent(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == GS_OK)
        gs_log(GS_LOG_INFO, "agent: stopped");
    return rc;
}
