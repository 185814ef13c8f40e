/*
 * Publications (agent_int.h): what one sampling cycle serves. The sampling thread takes a
 * spare (or new) publication, fills its snapshot, renders the /metrics text and lists the
 * alerts into it once (gs_pub_render) and publishes it by swapping a pointer under a->lock,
 * held for a few instructions. A request takes a reference and hands the body to libmicrohttpd
 * with gs_pub_release_cb as its free callback, so nothing is copied or rendered per request and
 * a slow reader only keeps an old publication alive: the sampler never waits for it. The JSON
 * documents (snapshot, processes, alerts) are rendered by the first request that asks
 * (gs_pub_body). When the last reference goes the publication returns to a small free list
 * and is reused, so a steady cycle with no alert firing allocates nothing
 * (tests/unit/test_budget.c holds it to that).
 */
#include "agent/agent_int.h"

#include <stdlib.h>
#include <string.h>

#include "agent/alerts.h"
#include "agent/auth.h"
#include "agent/log.h"
#include "agent/push.h"
#include "agent/reaper.h"
#include "agent/recorder.h"
#include "agent/runs.h"
#include "agent/usage.h"
#include "agent/webhook.h"
#include "base/clock.h"
#include "core/snapjson.h"

#define SPARE_MAX 4 /* publications kept for reuse; more in flight are freed on release */

void gs_pub_free(struct gs_pub *p)
{
    if (!p)
        return;
    gs_snapshot_free(p->snap);
    gs_buf_free(&p->prom);
    gs_buf_free(&p->prom_tail);
    free(p->json);
    free(p->procs_json);
    free(p->alerts_json);
    gs_alert_list_free(&p->alerts);
    pthread_mutex_destroy(&p->json_lock);
    free(p);
}

struct gs_pub *gs_pub_acquire(struct gs_agent *a)
{
    struct gs_pub *p;

    pthread_mutex_lock(&a->lock);
    p = a->current;
    if (p)
        p->refs++;
    pthread_mutex_unlock(&a->lock);
    return p;
}

void gs_pub_release(struct gs_pub *p)
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
        gs_pub_free(p);
}

struct gs_pub *gs_pub_take_spare(struct gs_agent *a)
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

void gs_pub_publish(struct gs_agent *a, struct gs_pub *p)
{
    struct gs_pub *old;

    p->refs = 1;
    pthread_mutex_lock(&a->lock);
    old = a->current;
    a->current = p;
    pthread_mutex_unlock(&a->lock);
    if (old)
        gs_pub_release(old);
}

void gs_pub_release_cb(void *cls)
{
    gs_pub_release(cls);
}

void gs_pub_ref(struct gs_pub *p)
{
    pthread_mutex_lock(&p->agent->lock);
    p->refs++;
    pthread_mutex_unlock(&p->agent->lock);
}

/* gpuscope_refused_total (issue 18): every door's refusals with a bounded reason, the
 * step socket's when it is open. */
static void render_refused(struct gs_agent *a, struct gs_buf *b)
{
    struct gs_refused_row rows[10 + GS_RUNS_REF_N];
    uint64_t uid_all = a->reaper ? gs_reaper_uid_refused(a->reaper) : 0;
    uint64_t uid_unix = a->reaper ? gs_reaper_uid_refused_unix(a->reaper) : 0;
    unsigned n = 0;

    for (int door = 0; door < 2; door++) {
        const char *name = door ? "unix" : "http";
        rows[n++] =
            (struct gs_refused_row){name, "uid_connections", door ? uid_unix : uid_all - uid_unix};
        rows[n++] = (struct gs_refused_row){name, "rate",
                                            atomic_load(&a->refused_http[door][GS_HTTP_REF_RATE])};
        rows[n++] = (struct gs_refused_row){
            name, "history_busy", atomic_load(&a->refused_http[door][GS_HTTP_REF_HISTORY_BUSY])};
    }
    rows[n++] =
        (struct gs_refused_row){"http", "host", atomic_load(&a->refused_http[0][GS_HTTP_REF_HOST])};
    rows[n++] = (struct gs_refused_row){"http", "address_connections",
                                        a->reaper ? gs_reaper_addr_refused(a->reaper) : 0};
    rows[n++] = (struct gs_refused_row){"http", "auth_budget", gs_auth_budget_refused()};
    if (a->runs) {
        struct gs_runs_stats ru = gs_runs_stats(a->runs); /* a short lock */
        for (int k = 0; k < GS_RUNS_REF_N; k++)
            rows[n++] = (struct gs_refused_row){"steps", gs_runs_refusal_name(k), ru.refused[k]};
    }
    gs_metrics_render_refused(b, rows, n);
}

/* The /metrics body of p: the snapshot's series, the live runs' and the usage accounting's,
 * then prom_tail (agent_int.h). Made once, by the first request that asks (or by the cycle,
 * for a push sink); p->snap, p->self and p->reason are immutable by then. The runs' and the
 * usage's series are read under their own locks when the body is made, as a filtered
 * /metrics reads them (http.c): at most a cycle newer than the snapshot, counters still
 * only growing. */
static void render_prom(struct gs_pub *p)
{
    struct gs_agent *a = p->agent;
    struct gs_metrics_self self;

    pthread_mutex_lock(&p->json_lock);
    if (!p->prom_ready) {
        self = p->self;
        self.reason = p->reason;
        gs_buf_reset(&p->prom);
        if (gs_metrics_render(&p->prom, p->up ? p->snap : NULL, &self, p->mflags) != GS_OK)
            gs_log(GS_LOG_ERROR, "metrics: render failed (out of memory)");
        if (a->runs)
            gs_runs_render_prom(a->runs, &p->prom); /* per-rank series of live runs */
        if (a->usage) /* usage counters per (user, GPU), live jobs' gauges */
            gs_usage_render_prom(a->usage, &p->prom, -1,
                                 GS_USAGE_PROM_COUNTERS | GS_USAGE_PROM_JOBS);
        if (p->prom_tail.len)
            gs_buf_put(&p->prom, p->prom_tail.data, p->prom_tail.len);
        p->prom_ready = 1;
    }
    pthread_mutex_unlock(&p->json_lock);
}

void gs_pub_render(struct gs_agent *a, struct gs_pub *p, const struct gs_agent_config *cfg)
{
    struct gs_metrics_self self = {
        .up = p->up,
        .reason = a->reason,
        .reason_rc = a->reason_rc,
        .hostname = a->hostname,
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
        self.history_integrity_ok = rs.integrity_ok;
        self.history_integrity_checks = rs.integrity_checks;
    }
    if (a->runs) {
        struct gs_runs_stats ru = gs_runs_stats(a->runs); /* a short lock */
        self.runs = 1;
        self.runs_active = ru.live;
        self.runs_started = ru.runs_started;
        self.runs_records = ru.records;
        self.runs_rejected = ru.rejected;
        self.runs_steps_dropped = ru.steps_dropped;
        self.runs_logs_dropped = ru.logs_dropped;
    }
    gs_buf_reset(&p->prom);
    gs_buf_reset(&p->prom_tail);
    if (cfg->metrics_compat == GS_COMPAT_DCGM || cfg->metrics_compat == GS_COMPAT_DCGM3)
        mflags |= GS_METRICS_DCGM;
    if (cfg->metrics_compat == GS_COMPAT_DCGM3)
        mflags |= GS_METRICS_DCGM_HOSTNAME;
    if (cfg->process_metrics)
        mflags |= GS_METRICS_PROCESS;
    p->self = self; /* a filtered /metrics renders with these (http.c) */
    p->self.reason = "";
    p->mflags = mflags;
    render_refused(a, &p->prom_tail);
    if (a->push) {
        struct gs_push_stats ps = gs_push_stats(a->push); /* a short lock, no I/O */
        gs_push_render_self(&p->prom_tail, &ps);
    }
    if (a->webhook) {
        struct gs_webhook_stats ws = gs_webhook_stats(a->webhook); /* a short lock */
        gs_webhook_render_self(&p->prom_tail, &ws);
    }
    free(p->alerts_json);
    p->alerts_json = NULL;
    p->alerts_json_len = 0;
    p->alerts_ready = 0;
    gs_alert_list_free(&p->alerts);
    p->alerts_listed = 0;
    if (a->alerts) {
        gs_alerts_render_prom(&p->prom_tail, a->alerts, a->hostname);
        p->alerts_listed = gs_alerts_list(a->alerts, p->up ? p->snap->t_real : gs_clock_real_s(),
                                          &p->alerts) == GS_OK;
    }
    /* Not yet published: no request can see p, so no lock is needed here. */
    free(p->json);
    p->json = NULL;
    free(p->procs_json);
    p->procs_json = NULL;
    p->json_len = p->procs_json_len = 0;
    p->json_ready = 0;
    snprintf(p->reason, sizeof p->reason, "%s", p->up ? "" : a->reason);
    p->prom_ready = 0;
    if (a->push) /* the pusher takes the whole text now (sampling.c) */
        render_prom(p);
}

char *gs_pub_dump(json_t *doc, size_t *len)
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
        p->json = gs_pub_dump(doc, &p->json_len);
        p->procs_json = gs_pub_dump(procs, &p->procs_json_len);
        p->json_ready = 1;
    }
    pthread_mutex_unlock(&p->json_lock);
}

/* The /api/v1/alerts document of a published p, made once by whichever request comes first
 * (p->alerts is immutable by then); NULL when the alert rules are off. */
static void render_alerts(struct gs_pub *p)
{
    pthread_mutex_lock(&p->json_lock);
    if (!p->alerts_ready) {
        if (p->alerts_listed)
            p->alerts_json = gs_alert_list_json(&p->alerts, NULL, NULL, &p->alerts_json_len);
        p->alerts_ready = 1;
    }
    pthread_mutex_unlock(&p->json_lock);
}

const char *gs_pub_body(struct gs_pub *p, enum gs_pub_body which, size_t *len)
{
    switch (which) {
    case GS_PUB_METRICS:
        render_prom(p);
        *len = p->prom.len;
        return p->prom.data;
    case GS_PUB_SNAPSHOT:
        render_json(p);
        *len = p->json_len;
        return p->json;
    case GS_PUB_PROCESSES:
        render_json(p);
        *len = p->procs_json_len;
        return p->procs_json;
    case GS_PUB_ALERTS:
        render_alerts(p);
        *len = p->alerts_json_len;
        return p->alerts_json;
    }
    *len = 0;
    return NULL;
}
