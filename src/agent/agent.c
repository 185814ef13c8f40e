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
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "agent/alerts.h"
#include "agent/history_api.h"
#include "agent/log.h"
#include "agent/metrics.h"
#include "agent/push.h"
#include "agent/webhook.h"
#include "agent/recorder.h"
#include "agent/schedule.h"
#include "cli/quick.h"
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
    char *json;               /* /api/v1/snapshot body (jansson's malloc) */
    size_t json_len;
    char *procs_json;         /* /api/v1/processes body (jansson's malloc) */
    size_t procs_json_len;
    char *alerts_json;        /* /api/v1/alerts body (jansson's malloc) */
    size_t alerts_json_len;
};

/* HTTP hardening (docs/api.md, "Limits"). */
#define HTTP_CONN_MAX 256       /* connections at once */
#define HTTP_CONN_PER_IP 32     /* connections at once from one address */
#define HTTP_IDLE_S 10          /* libmicrohttpd's inactivity timeout */
#define HTTP_REQUEST_S 10       /* a request's head must be complete within this (slow clients) */
#define HTTP_MEMORY (32 * 1024) /* per connection: request line + headers must fit */
#define HTTP_PATH_MAX 256       /* bytes of path; more: 414 */
#define HTTP_QUERY_MAX 1024     /* bytes of query arguments, names and values; more: 414 */
#define RL_SLOTS 1024           /* client addresses tracked by the rate limiter */
#define RL_PROBE 8

/* One client address's token bucket. */
struct rl_slot {
    unsigned char addr[16];
    int used;
    double tokens;
    int64_t t_ns;
};

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
    struct rl_slot rl[RL_SLOTS]; /* the MHD thread's own */
    pthread_mutex_t conn_lock;   /* guards conns */
    struct conn_track *conns;
    uint64_t conns_reaped;
    struct gs_recorder *rec;   /* NULL when history = off */
    struct gs_push *push;      /* NULL when no push sink is configured */
    struct gs_webhook *webhook; /* NULL without alert_webhook (webhook.h) */
    struct gs_alerts *alerts;  /* the sampling thread's own (alerts.h) */
    int data_dir_from_caller;  /* gs_agent_run_opts.data_dir overrides the configured one */
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
    if (!p && (p = calloc(1, sizeof *p)) != NULL)
        p->agent = a;
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

/* /api/v1/processes (docs/api.md): the snapshot document's per-GPU process lists as one
 * list, each entry led by its GPU's index and UUID. While down: the snapshot's error. */
static void render_processes(struct gs_pub *p, json_t *doc)
{
    json_t *list, *gpus = json_object_get(doc, "gpus"), *out, *g;
    size_t i, j;

    if (!p->up) {
        p->procs_json = json_dumps(doc, JSON_COMPACT);
        return;
    }
    if (!(list = json_array()))
        return;
    json_array_foreach(gpus, i, g) {
        json_t *procs = json_object_get(g, "processes"), *pr;
        json_array_foreach(procs, j, pr) {
            json_t *e = json_pack("{s:O, s:O}", "gpu", json_object_get(g, "index"), "gpu_uuid",
                                  json_object_get(g, "uuid"));
            if (!e || json_object_update(e, pr) != 0 || json_array_append_new(list, e) != 0) {
                json_decref(e);
                json_decref(list);
                return;
            }
        }
    }
    out = json_pack("{s:O?, s:O?, s:O?, s:o}", "hostname", json_object_get(doc, "hostname"),
                    "query_time", json_object_get(doc, "query_time"), "query_time_unix",
                    json_object_get(doc, "query_time_unix"), "processes", list);
    if (out) {
        p->procs_json = json_dumps(out, JSON_COMPACT | JSON_REAL_PRECISION(15));
        json_decref(out);
    }
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
    struct gs_quick_opts qo;
    json_t *doc = NULL;
    struct gs_err e;

    if (a->rec) {
        struct gs_recorder_stats rs = gs_recorder_stats(a->rec); /* a short lock, no I/O */
        self.history_rows = rs.rows_written;
        self.history_write_errors = rs.write_errors;
        self.history_dropped = rs.dropped;
        self.history_flush_last_s = rs.last_flush_s;
        self.history_flush_max_s = rs.max_flush_s;
    }
    gs_mbuf_reset(&p->prom);
    if (cfg->metrics_compat == GS_COMPAT_DCGM)
        mflags |= GS_METRICS_DCGM;
    if (cfg->process_metrics)
        mflags |= GS_METRICS_PROCESS;
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
    free(p->json);
    p->json = NULL;
    free(p->procs_json);
    p->procs_json = NULL;
    memset(&qo, 0, sizeof qo);
    if (p->up)
        gs_quick_json(&doc, p->snap, &qo, &e);
    else
        doc = json_pack("{s:b, s:s}", "up", 0, "error", a->reason);
    if (doc) {
        p->json = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
        render_processes(p, doc);
        json_decref(doc);
    }
    p->json_len = p->json ? strlen(p->json) : 0;
    p->procs_json_len = p->procs_json ? strlen(p->procs_json) : 0;
}

static void cycle(struct gs_agent *a, const struct gs_agent_config *cfg)
{
    int64_t now = mono_ns();
    struct gs_pub *p = pub_take_spare(a);
    struct gs_pub *prev = a->current; /* the sampler is its only writer: no lock to read */

    if (!p) {
        gs_log(GS_LOG_ERROR, "sampler: out of memory; cycle skipped");
        return;
    }
    a->cycles++;
    p->up = ensure_sampler(a, now) && sample_into(a, p, prev, now);
    if (!p->up)
        a->last_sample_s = -1;
    if (a->alerts) {
        gs_alerts_configure(a->alerts, &cfg->alerts); /* a SIGHUP may have changed the rules */
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
 * run (the page at / is plain HTML with links: no script, no style). */
static void common_headers(struct MHD_Response *r)
{
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; "
                            "form-action 'none'");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
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
        char *body = json == 3 ? p->alerts_json : json == 2 ? p->procs_json : p->json;
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

/* "/": what `gpuscope demo` points a browser at until the web UI lands. */
static const char index_html[] =
    "<!doctype html><title>gpuscope agent</title><h1>gpuscope agent</h1><ul>"
    "<li><a href=\"/metrics\">/metrics</a>: Prometheus text</li>"
    "<li><a href=\"/api/v1/snapshot\">/api/v1/snapshot</a>: the latest snapshot as JSON</li>"
    "<li><a href=\"/api/v1/alerts\">/api/v1/alerts</a>: firing and recently resolved alerts</li>"
    "<li><a href=\"/api/v1/processes\">/api/v1/processes</a>: the GPU processes as JSON</li>"
    "<li><a href=\"/api/v1/history?gpu=0&amp;metric=utilization_gpu\">/api/v1/history</a>: "
    "one GPU metric over time (docs/api.md)</li>"
    "<li><a href=\"/healthz\">/healthz</a></li></ul>\n";

/* The per-client token bucket: rate tokens per second up to burst; a request takes one. Keyed
 * by address (IPv4 or IPv6, no port); a full table evicts the least recently seen of the probed
 * slots, which then starts with a full bucket. Returns whether the request may go on. Runs on
 * the MHD thread only. */
static int rate_ok(struct gs_agent *a, const struct sockaddr *sa, double rate, double burst)
{
    unsigned char key[16] = {0};
    uint32_t h = 2166136261u;
    int64_t now = mono_ns();
    struct rl_slot *slot = NULL, *oldest = NULL;

    if (rate <= 0 || !sa)
        return 1;
    if (sa->sa_family == AF_INET)
        memcpy(key, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    else if (sa->sa_family == AF_INET6)
        memcpy(key, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    for (size_t k = 0; k < sizeof key; k++)
        h = (h ^ key[k]) * 16777619u;
    for (unsigned k = 0; k < RL_PROBE && !slot; k++) {
        struct rl_slot *e = &a->rl[(h + k) % RL_SLOTS];
        if (e->used && memcmp(e->addr, key, sizeof key) == 0)
            slot = e;
        else if (!oldest || !e->used || (oldest->used && e->t_ns < oldest->t_ns))
            oldest = e;
    }
    if (!slot) {
        slot = oldest;
        memcpy(slot->addr, key, sizeof key);
        slot->used = 1;
        slot->tokens = burst;
        slot->t_ns = now;
    }
    slot->tokens = fmin(burst, slot->tokens + rate * (double)(now - slot->t_ns) / 1e9);
    slot->t_ns = now;
    if (slot->tokens < 1)
        return 0;
    slot->tokens -= 1;
    return 1;
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct gs_agent *a = cls;
    enum { R_NONE, R_INDEX, R_METRICS, R_HEALTH, R_SNAPSHOT, R_HISTORY, R_PROCESSES,
           R_ALERTS } route =
        R_NONE;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    struct arg_check ac = {.allowed = no_args};
    const char *te, *cl;
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
    if (!rate_ok(a, ci ? ci->client_addr : NULL, rate, burst))
        return send_json_error(c, MHD_HTTP_TOO_MANY_REQUESTS, "rate limit: too many requests");
    if (strlen(url) > HTTP_PATH_MAX)
        return send_json_error(c, MHD_HTTP_URI_TOO_LONG, "path too long");
    if (strcmp(url, "/") == 0)
        route = R_INDEX;
    else if (strcmp(url, "/metrics") == 0)
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
    if (route == R_HISTORY)
        ac.allowed = history_args;
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
                       route == R_ALERTS)) {
        snprintf(msg, sizeof msg, "%.64s: unknown parameter", ac.unknown);
        return send_json_error(c, MHD_HTTP_BAD_REQUEST, msg);
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
    case R_INDEX:
        return send_static(c, MHD_HTTP_OK, index_html, "text/html; charset=utf-8", NULL);
    default:
        return send_static(c, MHD_HTTP_OK, "ok\n", "text/plain", NULL);
    }
}

static int start_http(struct gs_agent *a, struct gs_err *err)
{
    char host[GS_LISTEN_LEN];
    unsigned port;
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
    const struct sockaddr *sa;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;

    if (gs_config_split_listen(a->cfg.listen, host, sizeof host, &port) != GS_OK)
        return gs_err_set(err, GS_EINVAL, "listen: bad address '%s'", a->cfg.listen);
    memset(&sin, 0, sizeof sin);
    memset(&sin6, 0, sizeof sin6);
    if (inet_pton(AF_INET, host, &sin.sin_addr) == 1) {
        sin.sin_family = AF_INET;
        sin.sin_port = htons((uint16_t)port);
        sa = (const struct sockaddr *)&sin;
    } else if (inet_pton(AF_INET6, host, &sin6.sin6_addr) == 1) {
        sin6.sin6_family = AF_INET6;
        sin6.sin6_port = htons((uint16_t)port);
        sa = (const struct sockaddr *)&sin6;
        flags |= MHD_USE_IPv6;
    } else {
        return gs_err_set(err, GS_EINVAL, "listen: bad address '%s'", a->cfg.listen);
    }
    errno = 0;
    a->mhd = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, a,
                              MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_CONNECTION_LIMIT,
                              (unsigned)HTTP_CONN_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                              (unsigned)HTTP_CONN_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
                              (unsigned)HTTP_IDLE_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)HTTP_MEMORY, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                              a, MHD_OPTION_NOTIFY_COMPLETED, on_completed, a, MHD_OPTION_END);
    if (!a->mhd)
        return gs_err_set(err, GS_EIO, "http: cannot listen on %s: %s", a->cfg.listen,
                          errno ? strerror(errno) : "libmicrohttpd failed to start");
    gs_log(GS_LOG_INFO, "http: listening on %s", a->cfg.listen);
    return GS_OK;
}

/* ---- signals and the life cycle ---- */

static void reload(struct gs_agent *a, const struct gs_agent_args *args, int argc, char **argv)
{
    struct gs_agent_config c;
    struct gs_err e;

    gs_err_clear(&e);
    if (gs_config_build(&c, args, argc, argv, &e) != GS_OK) {
        gs_log(GS_LOG_ERROR, "reload: %s; keeping the running configuration", e.msg);
        return;
    }
    pthread_mutex_lock(&a->lock);
    if (strcmp(c.listen, a->cfg.listen) != 0)
        gs_log(GS_LOG_WARN, "reload: listen %s -> %s needs a restart; still on %s",
               a->cfg.listen, c.listen, a->cfg.listen);
    snprintf(c.listen, sizeof c.listen, "%s", a->cfg.listen);
    if (!a->data_dir_from_caller && strcmp(c.data_dir, a->cfg.data_dir) != 0)
        gs_log(GS_LOG_WARN, "reload: data_dir %s -> %s needs a restart; still in %s",
               a->cfg.data_dir, c.data_dir, a->cfg.data_dir);
    if (c.history != a->cfg.history)
        gs_log(GS_LOG_WARN, "reload: history %s needs a restart", c.history ? "on" : "off");
    snprintf(c.data_dir, sizeof c.data_dir, "%s", a->cfg.data_dir);
    c.history = a->cfg.history;
    if (memcmp(&c.push, &a->cfg.push, sizeof c.push) != 0)
        gs_log(GS_LOG_WARN, "reload: push settings changed; they need a restart");
    c.push = a->cfg.push;
    if (strcmp(c.alerts.webhook, a->cfg.alerts.webhook) != 0)
        gs_log(GS_LOG_WARN, "reload: alert_webhook changed; it needs a restart");
    snprintf(c.alerts.webhook, sizeof c.alerts.webhook, "%s", a->cfg.alerts.webhook);
    a->cfg = c;
    pthread_cond_signal(&a->wake);
    pthread_mutex_unlock(&a->lock);
    gs_log_set_level((enum gs_log_level)c.log_level);
    if (a->rec)
        gs_recorder_set_policy(a->rec, c.flush_interval_s, c.retention_raw_s,
                               c.retention_rollup_s);
    gs_log(GS_LOG_INFO, "reload: interval %gs, metrics_compat %s, log_level %s", c.interval_s,
           c.metrics_compat == GS_COMPAT_DCGM ? "dcgm" : "none",
           gs_log_level_name((enum gs_log_level)c.log_level));
}

static int init_agent(struct gs_agent *a, const struct gs_agent_config *cfg, struct gs_err *err)
{
    pthread_condattr_t ca;

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
    return GS_OK;
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
    rc = gs_recorder_start(a->rec, err);
    if (rc != GS_OK)
        return rc;
    gs_log(GS_LOG_INFO, "history: data dir %s, flush every %gs, raw kept %.15gs, rollups %.15gs",
           c->data_dir, c->flush_interval_s, c->retention_raw_s, c->retention_rollup_s);
    return GS_OK;
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
    if (a->mhd)
        MHD_stop_daemon(a->mhd); /* drops every response, so every reference comes back */
    /* After the sampler (no more offers) and HTTP (no more queries): appends what is queued,
     * flushes, and gives the queued references back before the publications are freed. */
    gs_recorder_close(a->rec);
    a->rec = NULL;
    gs_push_close(a->push); /* gives its queued references back, like the recorder */
    a->push = NULL;
    gs_webhook_close(a->webhook); /* after the sampler: no more transitions */
    a->webhook = NULL;
    if (a->current)
        pub_release(a->current);
    a->current = NULL;
    while ((p = a->spare) != NULL) {
        a->spare = p->next_spare;
        pub_free(p);
    }
    gs_sampler_close(a->sampler);
    gs_alerts_free(a->alerts);
    a->alerts = NULL;
    pthread_cond_destroy(&a->wake);
    pthread_mutex_destroy(&a->lock);
    pthread_mutex_destroy(&a->conn_lock);
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
    if (rc == GS_OK)
        rc = start_history(&a, err);
    if (rc == GS_OK)
        rc = start_push(&a, err);
    if (rc == GS_OK)
        rc = start_webhook(&a, err);
    if (rc == GS_OK) {
        cycle(&a, &a.cfg); /* the first publication exists before the port opens */
        rc = start_http(&a, err);
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
