/*
 * The agent's HTTP side (agent_int.h, docs/api.md): two libmicrohttpd daemons, TCP (HTTP or
 * HTTPS) on the listen address and the unix socket for local viewers, each with a thread per
 * connection (bounded by the connection limits), all calling on_request: a slow history
 * query holds its own connection's thread and the store's lock, never a /metrics scrape,
 * which reads the current publication without taking the store. A request is rate-limited
 * (ratelimit.c), its viewer identified (auth.c) and resolved to a uid (policy.c), then routed
 * by the table below:
 * each route names its path, its query arguments, whether a metrics-only credential may ask,
 * and what an admin and a filtered viewer get. Pre-rendered bodies come from the current
 * publication with a reference the response drops (pub.c); everything else is made per
 * request. Every answer leaves through respond(), with the same security headers.
 */
#include "agent/agent_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/auth.h"
#include "agent/history_api.h"
#include "agent/hosts.h"
#include "agent/listen.h"
#include "agent/log.h"
#include "agent/outbound.h"
#include "agent/policy.h"
#include "agent/ratelimit.h"
#include "agent/reaper.h"
#include "agent/recorder.h"
#include "agent/route.h"
#include "agent/runs.h"
#include "agent/usage.h"
#include "agent/usage_api.h"
#include "agent/web.h"
#include "agent/worker.h"
#include "base/clock.h"
#include "core/snapjson.h"

/* HTTP hardening (docs/api.md, "Limits"). */
#define HTTP_CONN_MAX 256         /* connections at once */
#define HTTP_IDLE_S 10            /* libmicrohttpd's inactivity timeout */
#define HTTP_MEMORY (32 * 1024)   /* per connection: request line + headers must fit */
#define HTTP_STACK (512 * 1024)   /* per connection thread (SQLite and jansson fit in it) */
#define HTTP_HISTORY_QUEUE 16     /* history queries waiting for the history worker */
#define GS_EAGAIN_HISTORY (-1000) /* a job the worker never took (queue full, stopping) */

#define TYPE_JSON "application/json"
#define TYPE_TEXT "text/plain"
#define TYPE_PROM "text/plain; version=0.0.4; charset=utf-8"

/* ---- answers ---- */

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

/* The one way an answer is sent: len bytes of body with code, the Content-Type type, the
 * common headers and, when hname is set, one more header. done(cls) runs once libmicrohttpd is
 * finished with the body (NULL: a static body that outlives every response); when no response
 * can be made it runs at once. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned code, const char *type,
                               const char *body, size_t len, void (*done)(void *), void *cls,
                               const char *hname, const char *hvalue)
{
    struct MHD_Response *r =
        done ? MHD_create_response_from_buffer_with_free_callback_cls(len, (void *)body, done, cls)
             : MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret;

    if (!r) {
        if (done)
            done(cls);
        return MHD_NO;
    }
    common_headers(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (hname)
        MHD_add_response_header(r, hname, hvalue);
    ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static void free_cb(void *cls)
{
    free(cls);
}

static enum MHD_Result send_static(struct MHD_Connection *c, unsigned code, const char *body)
{
    return respond(c, code, TYPE_TEXT, body, strlen(body), NULL, NULL, NULL, NULL);
}

/* {"error": msg} with code (429s say when to come back). */
static enum MHD_Result send_json_error(struct MHD_Connection *c, unsigned code, const char *msg)
{
    size_t len;
    char *body = gs_history_error_json(msg, &len);

    if (!body)
        return MHD_NO;
    return respond(c, code, TYPE_JSON, body, len, free_cb, body,
                   code == MHD_HTTP_TOO_MANY_REQUESTS ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, "1");
}

/* Queues a body made for this request (malloc'ed; NULL: out of memory, a 500). */
static enum MHD_Result send_owned(struct MHD_Connection *c, unsigned code, char *body, size_t len,
                                  const char *type)
{
    if (!body)
        return send_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    return respond(c, code, type, body, len, free_cb, body, NULL, NULL);
}

/* A /metrics body: gzip'ed (fastest level: a 80 KB dcgm body becomes ~7 KB in well under a
 * millisecond) when the request's Accept-Encoding takes gzip and zlib loads; as is otherwise.
 * done(cls) releases body either way. Vary: Accept-Encoding on both. */
static enum MHD_Result send_prom(struct MHD_Connection *c, const char *body, size_t len,
                                 void (*done)(void *), void *cls)
{
    const char *ae =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    unsigned char *gz = NULL;
    size_t gz_len = 0;
    struct MHD_Response *r;
    enum MHD_Result ret;

    if (body && len && gs_web_accepts_gzip(ae) && gs_zlib_load(NULL) == GS_OK)
        gz = gs_gzip(body, len, Z_BEST_SPEED, &gz_len);
    if (gz) {
        done(cls);
        r = MHD_create_response_from_buffer_with_free_callback_cls(gz_len, gz, free, gz);
    } else {
        r = MHD_create_response_from_buffer_with_free_callback_cls(len, (void *)body, done, cls);
    }
    if (!r) {
        if (!gz)
            done(cls);
        return MHD_NO;
    }
    common_headers(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, TYPE_PROM);
    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    if (gz)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* Serves a body of the current publication: the response keeps a reference, dropped by MHD
 * once the body is sent (or the connection dies). */
static enum MHD_Result send_pub(struct MHD_Connection *c, struct gs_agent *a,
                                enum gs_pub_body which)
{
    struct gs_pub *p = gs_pub_acquire(a);
    const char *body;
    size_t len;

    if (!p)
        return send_static(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no sample yet\n");
    body = gs_pub_body(p, which, &len);
    if (which == GS_PUB_METRICS)
        return send_prom(c, body, len, gs_pub_release_cb, p);
    if (!body) {
        gs_pub_release(p);
        return respond(c, MHD_HTTP_INTERNAL_SERVER_ERROR, TYPE_JSON, "{\"error\":\"render\"}\n",
                       strlen("{\"error\":\"render\"}\n"), NULL, NULL, NULL, NULL);
    }
    return respond(c, p->up ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, TYPE_JSON, body, len,
                   gs_pub_release_cb, p, NULL, NULL);
}

static enum MHD_Result send_unauthorized(struct MHD_Connection *c, const char *challenge)
{
    static const char body[] = "{\"error\":\"unauthorized: credentials missing or wrong\"}\n";

    return respond(c, MHD_HTTP_UNAUTHORIZED, TYPE_JSON, body, sizeof body - 1, NULL, NULL,
                   MHD_HTTP_HEADER_WWW_AUTHENTICATE, challenge);
}

/* ---- the history worker ----
 * /api/v1/history runs on one worker thread of its own at nice 10 (worker.h, a bounded queue
 * of HTTP_HISTORY_QUEUE jobs; a full queue answers 503): the connection's thread hands it the
 * job and waits, so heavy queries neither run on the thread of a /metrics scrape nor take
 * the CPU from one (the scrape's thread keeps nice 0). */

struct history_job {
    struct gs_agent *a;
    struct gs_history_req q;
    struct gs_history_doc d;
    enum gs_store_source src;
    struct gs_err e;
    int rc;
    bool done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void history_job_finish(struct history_job *j)
{
    pthread_mutex_lock(&j->mu);
    j->done = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static int64_t history_run(void *ctx, void *items, unsigned n, bool stopping)
{
    static _Thread_local bool niced;
    struct history_job **jobs = items;

    (void)ctx;
    (void)stopping;
    if (!niced) {
        niced = true;
        if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10) != 0)
            gs_log(GS_LOG_DEBUG, "http: history worker: setpriority: %s", strerror(errno));
    }
    for (unsigned i = 0; i < n; i++) {
        struct history_job *j = jobs[i];
        gs_err_clear(&j->e);
        gs_history_doc_begin(&j->d);
        j->rc = gs_recorder_query(j->a->rec, j->q.gpu, j->q.metric, j->q.from, j->q.to, j->q.step,
                                  gs_history_doc_point, &j->d, &j->src, &j->e);
        if (j->rc >= 0)
            gs_history_doc_end(&j->d, &j->q, j->src);
        history_job_finish(j);
    }
    return INT64_MAX;
}

static void history_drop(void *ctx, void *item)
{
    struct history_job *j = *(struct history_job **)item;

    (void)ctx;
    j->rc = GS_EAGAIN_HISTORY;
    history_job_finish(j);
}

static const struct gs_worker_ops history_ops = {
    .name = "history queries",
    .item_size = sizeof(struct history_job *),
    .cap = HTTP_HISTORY_QUEUE,
    .run = history_run,
    .drop = history_drop,
};

/* The door of c for gpuscope_refused_total: 1 the HTTP unix socket, 0 TCP. */
static int conn_door(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;

    return ci && getsockname(ci->connect_fd, (struct sockaddr *)&ss, &len) == 0 &&
           ss.ss_family == AF_UNIX;
}

/* /api/v1/history (docs/api.md): parameters checked by history_api.c, the query run by the
 * history worker on the store, the JSON built per request (it depends on the parameters). */
static enum MHD_Result send_history(struct MHD_Connection *c, struct gs_agent *a)
{
    struct history_job j = {.a = a, .src = GS_STORE_RAW};
    char msg[2048], *body;
    size_t len;
    int rc;

    if (!a->rec)
        return send_json_error(c, MHD_HTTP_NOT_FOUND, "history is off (history = off)");
#define ARG(name) MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name)
    if (gs_history_req_parse(&j.q, ARG("gpu"), ARG("metric"), ARG("from"), ARG("to"), ARG("step"),
                             gs_clock_real_s(), msg, sizeof msg) != GS_OK)
        return send_json_error(c, MHD_HTTP_BAD_REQUEST, msg);
#undef ARG
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    struct history_job *jp = &j;
    if (!a->history_q || !gs_worker_offer(a->history_q, &jp)) {
        j.rc = GS_EAGAIN_HISTORY;
    } else {
        pthread_mutex_lock(&j.mu);
        while (!j.done)
            pthread_cond_wait(&j.cv, &j.mu);
        pthread_mutex_unlock(&j.mu);
    }
    pthread_cond_destroy(&j.cv);
    pthread_mutex_destroy(&j.mu);
    rc = j.rc;
    if (rc == GS_EAGAIN_HISTORY) {
        gs_buf_free(&j.d.text);
        atomic_fetch_add(&a->refused_http[conn_door(c)][GS_HTTP_REF_HISTORY_BUSY], 1);
        return send_json_error(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                               "history busy: too many queries waiting; retry");
    }
    if (rc < 0) {
        gs_buf_free(&j.d.text);
        gs_log(GS_LOG_WARN, "http: /api/v1/history: %s", j.e.msg);
        return send_json_error(c,
                               rc == GS_EINVAL || rc == GS_ENOTFOUND ? MHD_HTTP_BAD_REQUEST
                                                                     : MHD_HTTP_SERVICE_UNAVAILABLE,
                               j.e.msg[0] ? j.e.msg : gs_strerror(rc));
    }
    if (!j.d.text.data)
        return send_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    body = gs_buf_take(&j.d.text, &len);
    return send_owned(c, MHD_HTTP_OK, body, len, "application/json");
}

/* /api/v1/runs[/<id>[/steps]] (docs/api.md): answered by runs.c, a JSON body per request,
 * with who's runs only (NULL: every run). */
static enum MHD_Result send_runs(struct MHD_Connection *c, struct gs_agent *a, const char *url,
                                 const struct gs_runs_who *who)
{
    char *body = NULL;
    size_t len = 0;
    unsigned code;

    if (!a->runs)
        return send_json_error(c, MHD_HTTP_NOT_FOUND,
                               a->runs_off[0] ? a->runs_off : "runs are off on this agent");
    code = gs_runs_http(a->runs, url, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from"),
                        MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit"), who, &body,
                        &len);
    return send_owned(c, code, body, len, "application/json");
}

/* /api/v1/usage (docs/api.md, usage_api.h): the history's groups (on the connection's thread,
 * under the store's lock: a grouped read of minute and hour rows) and the current minute's
 * rows; who: only this uid's rows (< 0: none), NULL: every row. */
static enum MHD_Result send_usage(struct MHD_Connection *c, struct gs_agent *a, const int64_t *who)
{
    struct gs_usage_answer ans;
    struct gs_usage_prices pr;
    struct gs_agent_config cfg;
    struct gs_err e;
    char msg[512], *body;
    size_t len;
    int rc = GS_OK;

    memset(&ans, 0, sizeof ans);
#define ARG(name) MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name)
    if (gs_usage_req_parse(&ans.sel, ARG("by"), ARG("from"), ARG("to"), ARG("job"),
                           gs_clock_real_s(), msg, sizeof msg) != GS_OK)
        return send_json_error(c, MHD_HTTP_BAD_REQUEST, msg);
#undef ARG
    if (who) {
        ans.sel.owner_only = 1;
        ans.sel.uid = *who;
    }
    pthread_mutex_lock(&a->lock);
    cfg = a->cfg;
    pthread_mutex_unlock(&a->lock);
    gs_err_clear(&e);
    /* who < 0 (process_visibility = none): no row at all, not the rows of unknown holders */
    if (a->rec && !(who && *who < 0))
        rc = gs_recorder_usage_query(a->rec, &ans.sel, gs_usage_answer_group, &ans, &e);
    if (rc != GS_OK) {
        free(ans.g);
        gs_log(GS_LOG_WARN, "http: /api/v1/usage: %s", e.msg);
        return send_json_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, e.msg[0] ? e.msg : gs_strerror(rc));
    }
    if (a->usage && !(who && *who < 0))
        gs_usage_live(a->usage, gs_usage_answer_rows, &ans);
    pr.gpu_hour_price = cfg.gpu_hour_price;
    pr.kwh_price = cfg.kwh_price;
    pr.currency = cfg.currency;
    body = gs_usage_answer_json(&ans, &pr, &len);
    return send_owned(c, MHD_HTTP_OK, body, len, TYPE_JSON);
}

/* ---- what a non-admin viewer gets (policy.h, docs/security.md) ---- */

/* /metrics, /api/v1/snapshot, /api/v1/processes, /api/v1/alerts for a viewer the policy
 * filters: the publication's snapshot filtered once (policy.h), then encoded like the
 * admins' pre-rendered bodies (core/snapjson.h; /metrics by metrics.c, without the alert,
 * push and webhook series). */
static enum MHD_Result send_filtered(struct MHD_Connection *c, struct gs_agent *a,
                                     const struct gs_viewer *v, pid_t peer_pid,
                                     enum gs_pub_body which)
{
    struct gs_pub *p = gs_pub_acquire(a);
    struct gs_policy_view view;
    struct gs_snapshot *f = NULL;
    json_t *out = NULL;
    char *body;
    size_t len = 0;

    if (!p || !p->up) { /* "no sample yet" and "up 0, reason" hold nobody's data */
        if (p)
            gs_pub_release(p);
        return send_pub(c, a, which);
    }
    gs_policy_view(a->policy, &view, v, peer_pid, p->snap);
    if (which == GS_PUB_ALERTS) {
        body = p->alerts_listed ? gs_alert_list_json(&p->alerts, gs_policy_alert_shown, &view, &len)
                                : NULL;
        gs_pub_release(p);
        return send_owned(c, MHD_HTTP_OK, body, len, TYPE_JSON);
    }
    f = gs_policy_filter_snapshot(&view, p->snap);
    if (which == GS_PUB_METRICS) {
        struct gs_buf b = {0};
        if (!f || gs_metrics_render(&b, f, &p->self, p->mflags) != GS_OK)
            gs_buf_free(&b);
        else if (a->usage) { /* the usage counters and live jobs of the viewer's uid only */
            int all;
            int64_t uid;
            gs_policy_runs_owner(&view, &all, &uid);
            if (all || uid >= 0)
                gs_usage_render_prom(a->usage, &b, all ? -1 : uid,
                                     GS_USAGE_PROM_COUNTERS | GS_USAGE_PROM_JOBS);
            if (gs_buf_status(&b) != GS_BUF_OK)
                gs_buf_free(&b);
        }
        gs_snapshot_free(f);
        gs_pub_release(p);
        if (!b.data)
            return send_owned(c, MHD_HTTP_OK, b.data, b.len, TYPE_PROM);
        return send_prom(c, b.data, b.len, free, b.data);
    }
    gs_pub_release(p);
    if (f && which == GS_PUB_SNAPSHOT)
        gs_snapjson_encode(&out, f, NULL, NULL);
    else if (f)
        gs_snapjson_processes(&out, f, true, NULL);
    gs_snapshot_free(f);
    body = gs_pub_dump(out, &len);
    return send_owned(c, MHD_HTTP_OK, body, len, TYPE_JSON);
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
    p = gs_pub_acquire(a);
    gs_policy_view(a->policy, &view, v, peer_pid, p && p->up ? p->snap : NULL);
    hidden = n >= GS_POLICY_GPU_MAX || !gs_policy_gpu_visible(&view, (unsigned)n);
    if (p)
        gs_pub_release(p);
    return hidden;
}

/* /api/v1/runs for a filtered viewer: the viewer's runs only, counted and paged after the
 * filter; another user's run (report or steps) is 404 as for a run that does not exist. */
static enum MHD_Result send_runs_filtered(struct MHD_Connection *c, struct gs_agent *a,
                                          const struct gs_viewer *v, pid_t peer_pid,
                                          const char *url)
{
    struct gs_policy_view view;
    struct gs_runs_who who;

    gs_policy_view(a->policy, &view, v, peer_pid, NULL);
    gs_policy_runs_owner(&view, &who.all, &who.uid);
    return send_runs(c, a, url, &who);
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

/* ---- routing ---- */

/* One request, as the handlers see it. */
struct request {
    struct MHD_Connection *c;
    struct gs_agent *a;
    const char *url;
    struct gs_viewer v; /* who asks (auth.c), for the visibility policy */
    pid_t peer_pid;     /* the unix socket peer's, for its cgroup (policy.c) */
};

typedef enum MHD_Result (*handler_fn)(const struct request *rq);

static enum MHD_Result h_metrics(const struct request *rq)
{
    return send_pub(rq->c, rq->a, GS_PUB_METRICS);
}

static enum MHD_Result h_snapshot(const struct request *rq)
{
    return send_pub(rq->c, rq->a, GS_PUB_SNAPSHOT);
}

static enum MHD_Result h_processes(const struct request *rq)
{
    return send_pub(rq->c, rq->a, GS_PUB_PROCESSES);
}

static enum MHD_Result h_alerts(const struct request *rq)
{
    return send_pub(rq->c, rq->a, GS_PUB_ALERTS);
}

static enum MHD_Result h_metrics_f(const struct request *rq)
{
    return send_filtered(rq->c, rq->a, &rq->v, rq->peer_pid, GS_PUB_METRICS);
}

static enum MHD_Result h_snapshot_f(const struct request *rq)
{
    return send_filtered(rq->c, rq->a, &rq->v, rq->peer_pid, GS_PUB_SNAPSHOT);
}

static enum MHD_Result h_processes_f(const struct request *rq)
{
    return send_filtered(rq->c, rq->a, &rq->v, rq->peer_pid, GS_PUB_PROCESSES);
}

static enum MHD_Result h_alerts_f(const struct request *rq)
{
    return send_filtered(rq->c, rq->a, &rq->v, rq->peer_pid, GS_PUB_ALERTS);
}

static enum MHD_Result h_health(const struct request *rq)
{
    return send_static(rq->c, MHD_HTTP_OK, "ok\n");
}

static enum MHD_Result h_history(const struct request *rq)
{
    return send_history(rq->c, rq->a);
}

static enum MHD_Result h_history_f(const struct request *rq)
{
    if (history_gpu_hidden(rq->c, rq->a, &rq->v, rq->peer_pid))
        return send_json_error(rq->c, MHD_HTTP_NOT_FOUND, "gpu: no such GPU");
    return send_history(rq->c, rq->a);
}

static enum MHD_Result h_runs(const struct request *rq)
{
    return send_runs(rq->c, rq->a, rq->url, NULL);
}

/* POST /api/v1/runs/ID/capture: a profiler window of a live run (runs.h, gs_runs_capture),
 * asked by an admin or the run's owner. */
static enum MHD_Result h_runs_capture(const struct request *rq)
{
    char *body = NULL;
    size_t len = 0;
    unsigned code;

    if (!rq->a->runs)
        return send_json_error(rq->c, MHD_HTTP_NOT_FOUND,
                               rq->a->runs_off[0] ? rq->a->runs_off : "runs are off on this agent");
    code = gs_runs_capture(
        rq->a->runs, rq->url, MHD_lookup_connection_value(rq->c, MHD_GET_ARGUMENT_KIND, "steps"),
        rq->v.role == GS_ROLE_ADMIN, rq->v.uid_known ? (int64_t)rq->v.uid : -1, &body, &len);
    return send_owned(rq->c, code, body, len, "application/json");
}

static enum MHD_Result h_runs_f(const struct request *rq)
{
    return send_runs_filtered(rq->c, rq->a, &rq->v, rq->peer_pid, rq->url);
}

static enum MHD_Result h_usage(const struct request *rq)
{
    return send_usage(rq->c, rq->a, NULL);
}

/* A filtered viewer's usage: its own uid's rows (policy.h's runs owner rule), none for
 * process_visibility = none. */
static enum MHD_Result h_usage_f(const struct request *rq)
{
    struct gs_policy_view view;
    int all;
    int64_t uid;

    gs_policy_view(rq->a->policy, &view, &rq->v, rq->peer_pid, NULL);
    gs_policy_runs_owner(&view, &all, &uid);
    return send_usage(rq->c, rq->a, all ? NULL : &uid);
}

static enum MHD_Result h_web(const struct request *rq)
{
    return (enum MHD_Result)gs_web_send(rq->c, gs_web_find(rq->url));
}

/* The handlers of each route (route.h): an admin's (and an unfiltered policy's) answer, a
 * filtered viewer's (routes the table marks filtered), the POST action (routes that take one). */
static const struct {
    handler_fn serve, serve_filtered, post;
} handlers[GS_ROUTE__N] = {
    [GS_ROUTE_METRICS] = {h_metrics, h_metrics_f, NULL},
    [GS_ROUTE_HEALTHZ] = {h_health, NULL, NULL},
    [GS_ROUTE_SNAPSHOT] = {h_snapshot, h_snapshot_f, NULL},
    [GS_ROUTE_HISTORY] = {h_history, h_history_f, NULL},
    [GS_ROUTE_PROCESSES] = {h_processes, h_processes_f, NULL},
    [GS_ROUTE_ALERTS] = {h_alerts, h_alerts_f, NULL},
    [GS_ROUTE_RUNS] = {h_runs, h_runs_f, h_runs_capture},
    [GS_ROUTE_USAGE] = {h_usage, h_usage_f, NULL},
    [GS_ROUTE_WEB] = {h_web, NULL, NULL},
};

/* The rate limiter's key of a local client: its uid (a unix-socket peer's, or a loopback TCP
 * peer's that the reaper looked up at accept) as an address of its own, as
 * gs_policy_unix_rate_addr makes it, so one local user cannot spend another's budget by
 * binding other 127.0.0.0/8 addresses. False: key by address. */
static bool uid_rate_addr(struct MHD_Connection *c, struct sockaddr_in6 *out)
{
    uint32_t uid;

    if (!gs_reaper_conn_uid(c, &uid) || uid == 0) /* root's TCP clients: by address */
        return gs_policy_unix_rate_addr(c, out);
    memset(out, 0, sizeof *out);
    out->sin6_family = AF_INET6;
    out->sin6_addr.s6_addr[0] = 0x01; /* 100::/64, RFC 6666 */
    uid = htonl(uid);
    memcpy(&out->sin6_addr.s6_addr[12], &uid, 4);
    return true;
}

/* Counts a refusal of c (keyed by sa, a uid_rate_addr or client address) for reason and
 * logs it, with why, the first time for its key and reason. */
static void http_refused(struct gs_agent *a, struct MHD_Connection *c, const struct sockaddr *sa,
                         enum gs_http_refusal reason, const char *why)
{
    unsigned char key[17] = {0};
    char who[INET6_ADDRSTRLEN + 16] = "a client";
    int first = 1;

    atomic_fetch_add(&a->refused_http[conn_door(c)][reason], 1);
    key[16] = (unsigned char)reason;
    if (sa && sa->sa_family == AF_INET6) {
        const struct in6_addr *x = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        memcpy(key, x, 16);
        if (x->s6_addr[0] == 0x01 && !x->s6_addr[1]) { /* a local uid (uid_rate_addr) */
            uint32_t uid;
            memcpy(&uid, &x->s6_addr[12], 4);
            snprintf(who, sizeof who, "uid %lu", (unsigned long)ntohl(uid));
        } else {
            inet_ntop(AF_INET6, x, who, sizeof who);
        }
    } else if (sa && sa->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, who,
                  sizeof who);
    }
    pthread_mutex_lock(&a->rate_logged_lock);
    for (unsigned i = 0; i < a->n_rate_logged && first; i++)
        first = memcmp(a->rate_logged[i], key, sizeof key) != 0;
    if (first) {
        if (a->n_rate_logged == 64)
            memmove(a->rate_logged, a->rate_logged + 1,
                    sizeof a->rate_logged[0] * --a->n_rate_logged);
        memcpy(a->rate_logged[a->n_rate_logged++], key, sizeof key);
    }
    pthread_mutex_unlock(&a->rate_logged_lock);
    if (first)
        gs_log(GS_LOG_WARN, "http: %s %s (logged once)", who, why);
}

/* Whether c's Host header names this agent (hosts.h): always on the unix socket, which no
 * browser reaches; on TCP a missing Host only from an HTTP/1.0 client (libmicrohttpd answers
 * an HTTP/1.1 request without one 400 itself). */
static bool host_ok(struct gs_agent *a, struct MHD_Connection *c, const char *version,
                    const char **host)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct sockaddr_storage local;
    socklen_t len = sizeof local;
    char allowed[sizeof a->cfg.allowed_hosts];
    bool have_local;

    if (conn_door(c))
        return true;
    *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!*host)
        return version && strcmp(version, MHD_HTTP_VERSION_1_0) == 0;
    have_local = ci && getsockname(ci->connect_fd, (struct sockaddr *)&local, &len) == 0;
    pthread_mutex_lock(&a->lock);
    memcpy(allowed, a->cfg.allowed_hosts, sizeof allowed);
    pthread_mutex_unlock(&a->lock);
    return gs_hosts_allowed(*host, allowed, &a->http_addr,
                            have_local ? (const struct sockaddr *)&local : NULL, a->hostname);
}

/* One request, once its head is in. The order of the checks is the API's (docs/api.md):
 * rate limit, Host, path length, credentials, then the route's rules, then its answer. */
static enum MHD_Result serve_request(struct gs_agent *a, struct MHD_Connection *c, const char *url,
                                     const char *method, const char *version,
                                     size_t *upload_data_size)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    struct arg_check ac = {0};
    struct request rq = {.c = c, .a = a, .url = url};
    struct gs_route_ask ask = {.method = method};
    const struct gs_route *route;
    const char *te, *cl, *challenge, *host = NULL;
    struct sockaddr_in6 unix_key; /* a unix-socket client's rate-limit key: its uid */
    const struct sockaddr *rate_key;
    double rate, burst;
    char msg[160], why[192];

    pthread_mutex_lock(&a->lock);
    rate = a->cfg.http_rate;
    burst = a->cfg.http_burst;
    pthread_mutex_unlock(&a->lock);
    rate_key = uid_rate_addr(c, &unix_key) ? (struct sockaddr *)&unix_key
               : ci                        ? ci->client_addr
                                           : NULL;
    if (!gs_ratelimit_take(a->rl, rate_key, rate, burst, gs_clock_mono_ns())) {
        snprintf(why, sizeof why, "sends more than http_rate (%g/s, burst %g): answered 429", rate,
                 burst);
        http_refused(a, c, rate_key, GS_HTTP_REF_RATE, why);
        return send_json_error(c, MHD_HTTP_TOO_MANY_REQUESTS, "rate limit: too many requests");
    }
    /* Before anything that returns data or changes state: a page of another site whose name
     * now points here (DNS rebinding) is refused whatever its credentials. */
    if (!host_ok(a, c, version, &host)) {
        char shown[49]; /* the client's text, printable ASCII only, for the log and the body */
        size_t k = 0;
        for (const char *p = host ? host : "(none)"; *p && k + 1 < sizeof shown; p++)
            shown[k++] = *p >= ' ' && *p <= '~' ? *p : '?';
        shown[k] = '\0';
        snprintf(why, sizeof why,
                 "asked for Host '%s', not a name of this agent (allowed_hosts): answered 421",
                 shown);
        http_refused(a, c, rate_key, GS_HTTP_REF_HOST, why);
        snprintf(msg, sizeof msg,
                 "misdirected request: Host '%s' is not a name of this agent "
                 "(allowed_hosts, docs/agent.md)",
                 shown);
        return send_json_error(c, MHD_HTTP_MISDIRECTED_REQUEST, msg);
    }
    if (strlen(url) > GS_ROUTE_PATH_MAX)
        return send_json_error(c, MHD_HTTP_URI_TOO_LONG, "path too long");
    viewer_identify(a, c, &rq.v, &challenge); /* after the rate limit: bcrypt is costly */
    /* The uid behind it (policy.h): SO_PEERCRED on the unix socket, whose viewers need no
     * credential; a loopback TCP peer's or a token user's uid. Root and admins: ADMIN. */
    gs_policy_resolve(a->policy, c, &rq.v, &rq.peer_pid);
    if (rq.v.role == GS_ROLE_NONE)
        return send_unauthorized(c, challenge);
    route = gs_route_find(url);
    ac.allowed = gs_route_args(route, method);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, arg_iter, &ac);
    te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    ask.metrics_only = rq.v.role == GS_ROLE_METRICS;
    ask.filtered = gs_policy_filters(a->policy, &rq.v);
    ask.body = te || (cl && strcmp(cl, "0") != 0) || *upload_data_size;
    ask.requested_by = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Requested-By") != NULL;
    ask.unknown = ac.unknown;
    ask.query_bytes = ac.bytes;
    /* A non-admin viewer gets copies filtered by the visibility policy, an admin the
     * pre-rendered bodies. */
    switch (gs_route_decide(route, &ask)) {
    case GS_ROUTE_SERVE:
        return handlers[route->id].serve(&rq);
    case GS_ROUTE_SERVE_FILTERED:
        return handlers[route->id].serve_filtered(&rq);
    case GS_ROUTE_DO_POST:
        return handlers[route->id].post(&rq);
    case GS_ROUTE_FORBIDDEN_ROLE:
        return send_json_error(c, MHD_HTTP_FORBIDDEN,
                               "forbidden: this credential reaches /metrics and /healthz only");
    case GS_ROUTE_QUERY_LONG:
        return send_json_error(c, MHD_HTTP_URI_TOO_LONG, "query too long");
    case GS_ROUTE_NOT_FOUND:
        return send_static(c, MHD_HTTP_NOT_FOUND, "not found\n");
    case GS_ROUTE_METHOD:
        return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, TYPE_TEXT, "method not allowed\n",
                       strlen("method not allowed\n"), NULL, NULL, MHD_HTTP_HEADER_ALLOW,
                       gs_route_allow(route));
    case GS_ROUTE_BODY:
        return send_json_error(c, MHD_HTTP_BAD_REQUEST,
                               route->post && strcmp(method, MHD_HTTP_METHOD_POST) == 0
                                   ? "this POST request has no body"
                                   : "a GET request has no body");
    case GS_ROUTE_UNKNOWN_ARG:
        snprintf(msg, sizeof msg, "%.64s: unknown parameter", ac.unknown);
        return send_json_error(c, MHD_HTTP_BAD_REQUEST, msg);
    case GS_ROUTE_NO_REQUESTED_BY:
        return send_json_error(c, MHD_HTTP_FORBIDDEN,
                               "forbidden: a POST needs the header X-Requested-By");
    }
    return send_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "routing");
}

/* Every request of both daemons. libmicrohttpd calls this once the head is in and again
 * once the (empty) body is: an answer queued at the first call is "early", and
 * libmicrohttpd then closes the connection after it (Connection: close). So a request
 * without a body is answered at the second call and its connection kept alive (a scrape
 * reuses it, over TLS too); one announcing a body is answered at once and closed, since
 * its body is never read. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    static int head_seen; /* *con_cls's marker: the first call is past */
    struct gs_agent *a = cls;

    (void)upload_data;
    if (!*con_cls) {
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        gs_reaper_head_done(a->reaper, c);
        if (!MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) &&
            (!cl || strcmp(cl, "0") == 0)) {
            *con_cls = &head_seen;
            return MHD_YES;
        }
        *con_cls = &head_seen;
    }
    return serve_request(a, c, url, method, version, upload_data_size);
}

/* ---- the daemons ---- */

static int hex_val(char ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* libmicrohttpd's unescaper for the path and the query arguments: %HH decoded, except %00,
 * left as the three characters: a NUL would cut "/api/v1/runs/1%00x" or "gpu=0%00x" short
 * and let what follows it pass unseen; kept, it fails the strict parsing instead. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    char *w = s;

    (void)cls;
    (void)c;
    for (const char *r = s; *r;) {
        int hi, lo;
        if (r[0] == '%' && (hi = hex_val(r[1])) >= 0 && (lo = hex_val(r[2])) >= 0 &&
            (hi | lo) != 0) {
            *w++ = (char)(hi << 4 | lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* Starts libmicrohttpd on a->http_addr, or on listen_fd (>= 0: a quiesced daemon's socket, a
 * TLS reload), with the PEM pair when cert is not NULL. MHD_USE_ITC: MHD_quiesce_daemon
 * needs it. */
static struct MHD_Daemon *http_daemon(struct gs_agent *a, int listen_fd, const char *cert,
                                      const char *key, const char *prio)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_AUTO | MHD_USE_ITC;
    struct MHD_OptionItem opt[5];
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
        opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)prio};
    }
    opt[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    errno = 0;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, a, MHD_OPTION_ARRAY, opt, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)HTTP_CONN_MAX, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY, MHD_OPTION_THREAD_STACK_SIZE,
        (size_t)HTTP_STACK, MHD_OPTION_NOTIFY_CONNECTION, gs_reaper_on_connection, a->reaper,
        MHD_OPTION_NOTIFY_COMPLETED, gs_reaper_on_completed, a->reaper,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
}

int gs_agent_http_start(struct gs_agent *a, struct gs_err *err)
{
    char *cert = NULL, *key = NULL;
    int rc;

    rc = gs_listen_parse(a->cfg.listen, &a->http_addr, err);
    if (rc == GS_OK)
        rc = gs_auth_open(&a->auth, a->cfg.tokens_file, a->cfg.web_config_file, err);
    if (rc == GS_OK)
        rc = gs_listen_load_tls(&a->cfg, a->auth, &cert, &key, err);
    if (rc == GS_OK)
        rc = gs_listen_check_exposure(&a->cfg, &a->http_addr, cert != NULL, a->auth, err);
    if (rc != GS_OK) {
        gs_listen_free_pem(cert, key);
        return rc;
    }
    if (a->rec && !a->history_q &&
        (gs_worker_new(&a->history_q, &history_ops, NULL, err) != GS_OK ||
         gs_worker_start(a->history_q, INT64_MAX, err) != GS_OK)) {
        gs_worker_close(a->history_q);
        a->history_q = NULL;
        gs_listen_free_pem(cert, key);
        return err && err->rc ? err->rc : GS_ENOMEM;
    }
    gs_reaper_set_uid_limit(a->reaper, a->cfg.http_conn_per_uid, gs_policy_peer_uid);
    gs_listen_tls_priorities(a->auth, a->tls_prio, sizeof a->tls_prio);
    a->mhd = http_daemon(a, a->http_fd, cert, key, a->tls_prio);
    if (!a->mhd) {
        if (a->http_fd >= 0)
            close(a->http_fd);
        a->http_fd = -1;
        gs_listen_free_pem(cert, key);
        return gs_err_set(err, GS_EIO, "http: cannot listen on %s: %s", a->cfg.listen,
                          errno ? strerror(errno) : "libmicrohttpd failed to start");
    }
    a->tls_cert_pem = cert;
    a->tls_key_pem = key;
    gs_log(GS_LOG_INFO, "http: listening on %s (%s%s%s; %u token(s), %u basic-auth user(s)%s)",
           a->cfg.listen, cert ? "https " : "http", cert ? "with " : "", cert ? a->tls_prio : "",
           gs_auth_token_count(a->auth), gs_auth_user_count(a->auth),
           gs_auth_required(a->auth) ? "" : ": open to all");
    return GS_OK;
}

/* Whether a reload would turn credentials off by accident: the running auth has some, the
 * new one none while the config still names a tokens file or web config (an empty or
 * emptied file). Removing both keys from the config is the explicit way (logged at
 * warning). 1 with e set when refused. */
static int credentials_dropped(struct gs_agent *a, const struct gs_agent_config *c,
                               const struct gs_auth *au, struct gs_err *e)
{
    if (!gs_auth_required(a->auth) || gs_auth_required(au))
        return 0;
    if (!c->tokens_file[0] && !c->web_config_file[0]) {
        gs_log(GS_LOG_WARN,
               "reload: tokens_file and web_config_file removed from the config: "
               "HTTP credentials are OFF, anyone who reaches %s sees data",
               c->listen);
        return 0;
    }
    gs_err_set(e, GS_EPERM,
               "%s%s%s name no credential: refusing to turn credentials off (remove "
               "tokens_file and web_config_file from the config to do that)",
               c->tokens_file, c->tokens_file[0] && c->web_config_file[0] ? " and " : "",
               c->web_config_file);
    return 1;
}

/* SIGHUP, HTTP's part: new credentials and, when the PEM pair changed, a new daemon on the
 * same listening socket (MHD_quiesce_daemon hands it over; connections on the old daemon are
 * closed). Anything wrong (unreadable file, bad pair, a change that would break the exposure
 * rule) keeps what runs and puts its settings back into c. */
void gs_agent_http_reload(struct gs_agent *a, struct gs_agent_config *c)
{
    struct gs_auth *au = NULL, *old;
    char *cert = NULL, *key = NULL, prio[sizeof a->tls_prio];
    struct gs_err e;
    int changed, dropped = 0;

    gs_reaper_set_uid_limit(a->reaper, c->http_conn_per_uid, gs_policy_peer_uid);
    gs_err_clear(&e);
    if (gs_auth_open(&au, c->tokens_file, c->web_config_file, &e) != GS_OK ||
        gs_listen_load_tls(c, au, &cert, &key, &e) != GS_OK ||
        gs_listen_check_exposure(c, &a->http_addr, cert != NULL, au, &e) != GS_OK ||
        (dropped = credentials_dropped(a, c, au, &e)) != 0) {
        gs_log(dropped ? GS_LOG_WARN : GS_LOG_ERROR,
               "reload: %s; keeping the running credentials and TLS", e.msg);
        gs_listen_free_pem(cert, key);
        gs_auth_unref(au);
        memcpy(c->tokens_file, a->cfg.tokens_file, sizeof c->tokens_file);
        memcpy(c->web_config_file, a->cfg.web_config_file, sizeof c->web_config_file);
        memcpy(c->tls_cert_file, a->cfg.tls_cert_file, sizeof c->tls_cert_file);
        memcpy(c->tls_key_file, a->cfg.tls_key_file, sizeof c->tls_key_file);
        c->insecure = a->cfg.insecure;
        return;
    }
    gs_listen_tls_priorities(au, prio, sizeof prio);
    changed =
        a->mhd && (!cert != !a->tls_cert_pem ||
                   (cert && (strcmp(cert, a->tls_cert_pem) != 0 ||
                             strcmp(key, a->tls_key_pem) != 0 || strcmp(prio, a->tls_prio) != 0)));
    if (changed) {
        char *old_cert = NULL, *old_key = NULL;
        MHD_socket fd = MHD_quiesce_daemon(a->mhd);
        struct MHD_Daemon *d =
            fd == MHD_INVALID_SOCKET ? NULL : http_daemon(a, fd, cert, key, prio);
        if (!d) {
            gs_log(GS_LOG_ERROR, "reload: http: cannot restart with the new TLS pair; %s",
                   fd == MHD_INVALID_SOCKET ? "still serving the old one"
                                            : "restarting with the old one");
            if (fd != MHD_INVALID_SOCKET &&
                !(d = http_daemon(a, fd, a->tls_cert_pem, a->tls_key_pem, a->tls_prio)))
                gs_log(GS_LOG_ERROR, "reload: http: cannot restart at all; not serving HTTP");
            gs_listen_free_pem(cert, key);
            cert = a->tls_cert_pem;
            key = a->tls_key_pem;
        } else {
            gs_log(GS_LOG_INFO, "reload: http: %s, daemon restarted on %s",
                   cert ? "new TLS certificate, key or versions" : "TLS off", a->cfg.listen);
            memcpy(a->tls_prio, prio, sizeof prio);
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
        gs_listen_free_pem(old_cert, old_key);
        a->tls_cert_pem = cert;
        a->tls_key_pem = key;
    } else {
        gs_listen_free_pem(cert, key);
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
void gs_agent_http_start_unix(struct gs_agent *a)
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
        gs_log(GS_LOG_ERROR, "http_socket: '%s' is not an absolute path of at most %zu bytes", path,
               sizeof sun.sun_path - 1);
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
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO, 0, NULL,
        NULL, on_request, a, MHD_OPTION_THREAD_STACK_SIZE, (size_t)HTTP_STACK,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_MAX,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HTTP_MEMORY, MHD_OPTION_NOTIFY_CONNECTION, gs_reaper_on_connection, a->reaper,
        MHD_OPTION_NOTIFY_COMPLETED, gs_reaper_on_completed, a->reaper,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
    if (!a->mhd_unix) {
        gs_log(GS_LOG_ERROR, "http_socket: libmicrohttpd cannot serve %s", path);
        close(fd);
        unlink(path);
        return;
    }
    gs_log(GS_LOG_INFO, "http: local viewers on %s (unix socket, mode 0666)", path);
}

void gs_agent_http_stop(struct gs_agent *a)
{
    if (!a->mhd && a->http_fd >= 0)
        close(a->http_fd); /* bound before a drop, never served */
    a->http_fd = -1;
    if (a->mhd)
        MHD_stop_daemon(a->mhd); /* drops every response, so every reference comes back */
    if (a->mhd_unix) {
        MHD_stop_daemon(a->mhd_unix); /* closes the listening socket too */
        unlink(a->cfg.http_socket);
    }
    a->mhd = NULL;
    a->mhd_unix = NULL;
    gs_worker_close(a->history_q); /* after the daemons: no connection waits on it now */
    a->history_q = NULL;
    gs_listen_free_pem(a->tls_cert_pem, a->tls_key_pem);
    a->tls_cert_pem = a->tls_key_pem = NULL;
    gs_auth_unref(a->auth);
    a->auth = NULL;
}
