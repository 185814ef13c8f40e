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
 * - the calling thread blocks SIGINT/SIGTERM/SIGHUP before the others start (they inherit
 *   the mask) and takes them with sigwaitinfo: no async-signal-safety puzzles.
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
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/history_api.h"
#include "agent/log.h"
#include "agent/metrics.h"
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
    struct gs_recorder *rec;   /* NULL when history = off */
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
    };
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
    if (gs_metrics_render(&p->prom, p->up ? p->snap : NULL, &self,
                          cfg->metrics_compat == GS_COMPAT_DCGM ? GS_METRICS_DCGM : 0) != GS_OK)
        gs_log(GS_LOG_ERROR, "metrics: render failed (out of memory)");
    free(p->json);
    p->json = NULL;
    memset(&qo, 0, sizeof qo);
    if (p->up)
        gs_quick_json(&doc, p->snap, &qo, &e);
    else
        doc = json_pack("{s:b, s:s}", "up", 0, "error", a->reason);
    if (doc) {
        p->json = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
        json_decref(doc);
    }
    p->json_len = p->json ? strlen(p->json) : 0;
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

static enum MHD_Result send_static(struct MHD_Connection *c, unsigned code, const char *body,
                                   const char *type, const char *allow)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret;

    if (!r)
        return MHD_NO;
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
        if (!p->json) {
            pub_release(p);
            return send_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "{\"error\":\"render\"}\n",
                               "application/json", NULL);
        }
        if (!p->up)
            code = MHD_HTTP_SERVICE_UNAVAILABLE;
        r = MHD_create_response_from_buffer_with_free_callback_cls(p->json_len, p->json,
                                                                   release_cb, p);
    } else {
        r = MHD_create_response_from_buffer_with_free_callback_cls(p->prom.len, p->prom.data,
                                                                   release_cb, p);
    }
    if (!r) {
        pub_release(p);
        return MHD_NO;
    }
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
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
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
    "<li><a href=\"/api/v1/history?gpu=0&amp;metric=utilization_gpu\">/api/v1/history</a>: "
    "one GPU metric over time (docs/api.md)</li>"
    "<li><a href=\"/healthz\">/healthz</a></li></ul>\n";

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct gs_agent *a = cls;
    enum { R_NONE, R_INDEX, R_METRICS, R_HEALTH, R_SNAPSHOT, R_HISTORY } route = R_NONE;

    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
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
    if (route == R_NONE)
        return send_static(c, MHD_HTTP_NOT_FOUND, "not found\n", "text/plain", NULL);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return send_static(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", "text/plain",
                           "GET, HEAD");
    switch (route) {
    case R_METRICS:
        return send_pub(c, a, 0);
    case R_SNAPSHOT:
        return send_pub(c, a, 1);
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
                              (unsigned)256, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768, MHD_OPTION_END);
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
    if (pthread_condattr_init(&ca) != 0 ||
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&a->wake, &ca) != 0) {
        pthread_mutex_destroy(&a->lock);
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
    if (a->current)
        pub_release(a->current);
    a->current = NULL;
    while ((p = a->spare) != NULL) {
        a->spare = p->next_spare;
        pub_free(p);
    }
    gs_sampler_close(a->sampler);
    pthread_cond_destroy(&a->wake);
    pthread_mutex_destroy(&a->lock);
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
    rc = start_history(&a, err);
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
            int sig = sigwaitinfo(&set, NULL);
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
