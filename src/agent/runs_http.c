/*
 * runs_http.c - the agent's runs pages (contract in runs.h, gs_runs_http and gs_runs_capture;
 * docs/api.md): the list of live and stored runs, one run's report, its steps and its logged
 * values, paged, filtered by the viewer's uid; and the POST that asks a live run for a
 * profiler window. Live runs come from the table (runs.c, runs_int.h); stored ones through
 * the HTTP thread's reader of history.db (store/runs.h), under db_lock.
 */
#include "agent/runs.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/log.h"
#include "agent/recorder.h"
#include "agent/runs_int.h"
#include "agent/runs_metrics.h"
#include "base/clock.h"
#include "gpuscope/gs_err.h"
#include "run/agg.h"
#include "run/control.h"
#include "run/receiver.h"
#include "store/history.h"
#include "store/runs.h"

#define LIST_LIMIT_DEFAULT 100
#define STEPS_LIMIT_DEFAULT 100
#define LIMIT_MAX 1000
#define HEADLINE_TTL_S 5.0 /* a live run's list figures are recomputed at most this often */
/* ---- HTTP ---- */

static unsigned reply(json_t *doc, unsigned code, char **body, size_t *len)
{
    *body = doc ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    *len = *body ? strlen(*body) : 0;
    json_decref(doc);
    return code;
}

static unsigned reply_error(unsigned code, char **body, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static unsigned reply_error(unsigned code, char **body, size_t *len, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return reply(json_pack("{s:s}", "error", msg), code, body, len);
}

static json_t *user_of(int64_t uid)
{
    struct passwd pw, *res = NULL;
    char buf[1024];

    if (uid < 0 || getpwuid_r((uid_t)uid, &pw, buf, sizeof buf, &res) != 0 || !res)
        return json_null();
    return json_string(res->pw_name);
}

static json_t *jnum_or_null(json_t *v)
{
    return json_is_number(v) ? json_real(json_number_value(v)) : json_null();
}

/* The list figures of a report (a borrowed object). */
static void headline(json_t *item, json_t *report)
{
    static const char *const keys[] = {"train_runtime",
                                       "train_samples_per_second",
                                       "gpu_avg_utilization_percent",
                                       "gpu_max_utilization_percent",
                                       "gpu_peak_memory_allocated_gb",
                                       "data_loading_time_ratio",
                                       "communication_time_ratio",
                                       "gpu_busy_estimate_percent",
                                       "train_tokens_per_second",
                                       "tokens_per_second_per_gpu",
                                       "mfu"};
    json_t *f = json_object_get(report, "findings"), *x;
    json_t *ids = json_array();
    size_t i;

    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        json_object_set_new(item, keys[k], jnum_or_null(json_object_get(report, keys[k])));
    json_array_foreach(f, i, x) json_array_append(ids, json_object_get(x, "id"));
    json_object_set_new(item, "findings", ids);
}

/* The state of a stored run: "ended", or "interrupted" (the agent stopped during it). */
static const char *stored_state(int has_end, json_t *report)
{
    json_t *ro = json_object_get(report, "run");

    if (!has_end || json_is_true(json_object_get(ro, "interrupted")))
        return "interrupted";
    return "ended";
}

/* Parses a decimal in [lo, hi]; absent: def. */
static int parse_uint(const char *s, long long lo, long long hi, long long def, long long *out)
{
    char *end;
    long long v;

    if (!s) {
        *out = def;
        return 0;
    }
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 12)
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The HTTP thread's reader of history.db (store/runs.h), opened at its first use; NULL when
 * history is off or the file cannot be read (logged; tried again at the next request). */
struct gs_store *gs_runs_db(struct gs_runs *r)
{
    struct gs_err err;

    if (!r->db && r->history_path[0]) {
        gs_err_clear(&err);
        if (gs_store_open_read(&r->db, r->history_path, &err) != GS_OK) {
            gs_log(GS_LOG_WARN, "runs: cannot read %s: %s", r->history_path, err.msg);
            r->db = NULL;
        }
    }
    return r->db;
}

void gs_runs_db_warn(const struct gs_err *err)
{
    gs_log(GS_LOG_WARN, "runs: %s", err->msg);
}

/* Whether who may see a run of uid (who NULL: every run). */
static int who_sees(const struct gs_runs_who *who, int64_t uid)
{
    return !who || who->all || (who->uid >= 0 && uid == who->uid);
}

static json_t *num_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

static json_t *id_or_null(int64_t v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

static json_t *bytes_or_null(uint64_t v)
{
    return v ? json_real((double)v) : json_null();
}

/* One stored step as the steps page shows it (docs/api.md): the history's columns, unknown
 * values null. */
static json_t *step_object(const struct gs_store_step_row *row)
{
    const struct gs_step_rec *s = &row->rec;
    json_t *o = json_object();
    char key[48];

    json_object_set_new(o, "id", json_integer(row->id));
    json_object_set_new(o, "peer_pid", id_or_null(row->peer_pid));
    json_object_set_new(o, "peer_uid", id_or_null(row->peer_uid));
    json_object_set_new(o, "rank", json_integer(s->rank));
    json_object_set_new(o, "device", json_integer(s->device));
    json_object_set_new(o, "step", json_integer((json_int_t)s->step));
    json_object_set_new(o, "t_begin", num_or_null(s->t_begin));
    json_object_set_new(o, "t_end", num_or_null(s->t_end));
    for (int p = 0; p < GS_PH_N; p++) {
        snprintf(key, sizeof key, "%s_ms", gs_phase_name(p));
        json_object_set_new(o, key, num_or_null(s->ms[p]));
    }
    json_object_set_new(o, "samples",
                        s->samples ? json_integer((json_int_t)s->samples) : json_null());
    json_object_set_new(o, "tokens", s->tokens ? json_integer((json_int_t)s->tokens) : json_null());
    json_object_set_new(o, "cuda_events", json_integer((s->flags & GS_STEP_CUDA_EVENTS) != 0));
    json_object_set_new(o, "mem_allocated", bytes_or_null(s->mem_allocated));
    json_object_set_new(o, "mem_reserved", bytes_or_null(s->mem_reserved));
    json_object_set_new(o, "mem_peak_allocated", bytes_or_null(s->mem_peak_allocated));
    json_object_set_new(o, "mem_peak_reserved", bytes_or_null(s->mem_peak_reserved));
    json_object_set_new(o, "mem_total", bytes_or_null(s->mem_total));
    return o;
}

/* The state of a live run: "running", or "interrupted" while it waits for its sender to come
 * back (runs.h, resume_timeout_s). */
static const char *live_state(struct gs_runs *r, struct run *run)
{
    int waiting;

    pthread_mutex_lock(&r->lock);
    waiting = run->n_conns == 0 && run->interrupted_s > 0;
    pthread_mutex_unlock(&r->lock);
    return waiting ? "interrupted" : "running";
}

static json_t *live_item(struct gs_runs *r, struct run *run)
{
    json_t *it;
    double now = gs_clock_real_s();
    char name[GS_RECORD_STR];
    uint64_t steps = gs_session_stats(run->session).steps;

    gs_session_name(run->session, name, sizeof name);
    pthread_mutex_lock(&run->mu);
    if (!run->headline || now - run->headline_t > HEADLINE_TTL_S) {
        struct gs_report_meta meta = {
            .run_name = name, .hostname = r->hostname, .exit_code = -1, .source = "agent"};
        json_t *rep = gs_session_report(run->session, &meta);
        if (rep) {
            json_decref(run->headline);
            run->headline = json_object();
            headline(run->headline, rep);
            run->headline_t = now;
            json_decref(rep);
        }
    }
    it = json_pack("{s:I, s:s, s:I, s:o, s:I, s:f, s:n, s:I, s:s}", "id", (json_int_t)run->id,
                   "name", name, "uid", (json_int_t)run->uid, "user", user_of(run->uid), "pid",
                   (json_int_t)run->pid, "start", run->start_s, "end", "steps", (json_int_t)steps,
                   "state", live_state(r, run));
    if (it && run->headline)
        json_object_update(it, run->headline);
    pthread_mutex_unlock(&run->mu);
    if (it) { /* the hang rule's verdict of the last sampling cycle (runs_metrics.h) */
        double p95, quiet = gs_runm_run_stalled(r->m, run->id, &p95);
        json_object_set_new(it, "stalled", json_boolean(quiet > 0));
        json_object_set_new(it, "stalled_seconds",
                            quiet > 0 ? json_real(round(quiet * 10) / 10) : json_null());
    }
    if (it) /* constant once the run is in the table */
        json_object_set_new(it, "tags", run->tags ? json_incref(run->tags) : json_object());
    return it;
}

/* A stored run's tags (the run row's JSON text, schema v3) as an object; {} when none. */
json_t *gs_runs_stored_tags(const char *text)
{
    json_t *t = text ? json_loads(text, 0, NULL) : NULL;

    if (json_is_object(t))
        return t;
    json_decref(t);
    return json_object();
}

/* A stored run's list entry (a gs_store_run_fn appending to the array ctx). */
static int list_row(void *ctx, const struct gs_store_run_row *row)
{
    json_t *rep = row->report ? json_loads(row->report, 0, NULL) : NULL;
    json_t *it =
        json_pack("{s:I, s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:s}", "id", (json_int_t)row->id,
                  "name", row->name, "uid", id_or_null(row->uid), "user", user_of(row->uid), "pid",
                  id_or_null(row->pid), "start", num_or_null(row->start_time), "end",
                  num_or_null(row->end_time), "steps", (json_int_t)row->steps, "state",
                  stored_state(!isnan(row->end_time), rep));

    if (it && rep)
        headline(it, rep);
    json_decref(rep);
    if (it) { /* an ended run is not stalled */
        json_object_set_new(it, "stalled", json_false());
        json_object_set_new(it, "stalled_seconds", json_null());
    }
    if (it)
        json_object_set_new(it, "tags", gs_runs_stored_tags(row->tags));
    json_array_append_new(ctx, it);
    return 0;
}

/* The list: running runs first, newest first, then the history's, newest first; only the
 * runs who may see are counted and paged (the others are "hidden" when who filters). */
/* One try of the run list; *again set when a run began meanwhile (its history row may have been
 * read without its table entry: the caller tries again). */
static unsigned list_once(struct gs_runs *r, long long from, long long limit,
                          const struct gs_runs_who *who, char **body, size_t *len, int *again)
{
    uint64_t begun;
    struct run *runs[GS_RUNS_MAX_LIVE];
    int64_t ids[GS_RUNS_MAX_LIVE];
    unsigned n = 0;
    json_t *list = json_array(), *doc;
    long long total = 0, hidden = 0, skip = from;
    struct gs_store *db;

    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE; i++)
        if (r->live[i]) {
            r->live[i]->refs++;
            runs[n++] = r->live[i];
        }
    begun = r->begun;
    *again = r->beginning > 0;
    pthread_mutex_unlock(&r->lock);
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = i + 1; j < n; j++)
            if (runs[j]->start_s > runs[i]->start_s) {
                struct run *t = runs[i];
                runs[i] = runs[j];
                runs[j] = t;
            }
    for (unsigned i = 0; i < n; i++) {
        ids[i] = runs[i]->id;
        if (!who_sees(who, runs[i]->uid)) {
            hidden++;
            continue;
        }
        total++;
        if (skip > 0)
            skip--;
        else if ((long long)json_array_size(list) < limit)
            json_array_append_new(list, live_item(r, runs[i]));
    }
    /* The history's rows but the live ones, filtered and paged by the store. */
    {
        struct gs_err err;

        gs_err_clear(&err);
        if (gs_recorder_damaged(r->rec, &err) != GS_OK) {
            for (unsigned i = 0; i < n; i++)
                gs_runs_run_unref(r, runs[i]);
            json_decref(list);
            return reply_error(503, body, len, "history.db could not be read: %s", err.msg);
        }
    }
    pthread_mutex_lock(&r->db_lock);
    if ((db = gs_runs_db(r)) != NULL) {
        struct gs_store_runs_sel sel = {.source = "agent",
                                        .owner_only = who && !who->all,
                                        .uid = who ? who->uid : -1,
                                        .skip_ids = ids,
                                        .n_skip = n};
        struct gs_store_runs_sel every = sel;
        int64_t shown = 0, all = 0;
        struct gs_err err;

        every.owner_only = 0;
        gs_err_clear(&err);
        if (gs_store_runs_count(db, &sel, &shown, &err) != GS_OK ||
            (sel.owner_only && gs_store_runs_count(db, &every, &all, &err) != GS_OK) ||
            gs_store_runs_list(db, &sel, skip, limit - (long long)json_array_size(list), list_row,
                               list, &err) != GS_OK)
            gs_runs_db_warn(&err);
        total += shown;
        if (sel.owner_only && all > shown)
            hidden += all - shown;
    }
    pthread_mutex_unlock(&r->db_lock);
    for (unsigned i = 0; i < n; i++)
        gs_runs_run_unref(r, runs[i]);
    pthread_mutex_lock(&r->lock);
    *again |= r->begun != begun || r->beginning > 0;
    pthread_mutex_unlock(&r->lock);
    doc = json_pack("{s:I, s:I, s:I, s:o}", "total", (json_int_t)total, "from", (json_int_t)from,
                    "limit", (json_int_t)limit, "runs", list);
    if (doc && who && !who->all)
        json_object_set_new(doc, "hidden", json_integer(hidden));
    if (doc && r->grafana_url[0])
        json_object_set_new(doc, "grafana_url", json_string(r->grafana_url));
    return reply(doc, doc ? 200 : 500, body, len);
}

static unsigned http_list(struct gs_runs *r, long long from, long long limit,
                          const struct gs_runs_who *who, char **body, size_t *len)
{
    for (int tries = 1;; tries++) {
        int again = 0;
        unsigned code = list_once(r, from, limit, who, body, len, &again);
        if (!again || tries == 5)
            return code;
        free(*body);
        *body = NULL;
        *len = 0;
        usleep(2000); /* a history row's write: well under a millisecond */
    }
}

/* Adds the agent's view of the run (id, state, user) to a report's "run" object. */
static void annotate(json_t *rep, int64_t id, const char *state, uint64_t steps_received)
{
    json_t *ro = json_object_get(rep, "run");

    if (!json_is_object(ro))
        return;
    json_object_set_new(ro, "id", json_integer(id));
    json_object_set_new(ro, "state", json_string(state));
    json_object_set_new(ro, "user",
                        json_is_integer(json_object_get(ro, "uid"))
                            ? user_of(json_integer_value(json_object_get(ro, "uid")))
                            : json_null());
    if (steps_received)
        json_object_set_new(ro, "steps_received", json_integer((json_int_t)steps_received));
}

/* What a read of one stored run found (a gs_store_run_fn). */
struct stored_run {
    int exists, has_end;
    int64_t uid;
    json_t *report;
    char fault[GS_ERR_MSG_LEN]; /* the store's error when the read failed ("": none) */
};

static int stored_row(void *ctx, const struct gs_store_run_row *row)
{
    struct stored_run *s = ctx;

    s->exists = 1;
    s->has_end = !isnan(row->end_time);
    s->uid = row->uid;
    s->report = row->report ? json_loads(row->report, 0, NULL) : NULL;
    return 0;
}

/* Run id of this agent in the history (exists stays 0 when there is none or no history). */
static void stored_get(struct gs_runs *r, int64_t id, struct stored_run *out)
{
    struct gs_store_runs_sel sel = {.source = "agent"};
    struct gs_store *db;
    struct gs_err err;
    int rc;

    memset(out, 0, sizeof *out);
    out->uid = -1;
    gs_err_clear(&err);
    if (gs_recorder_damaged(r->rec, &err) != GS_OK) { /* the scheduled check's finding */
        snprintf(out->fault, sizeof out->fault, "%s", err.msg);
        return;
    }
    if ((db = gs_runs_db(r)) == NULL)
        return;
    gs_err_clear(&err);
    rc = gs_store_run_get(db, &sel, id, stored_row, out, &err);
    if (rc != GS_OK && rc != GS_ENOTFOUND) {
        gs_runs_db_warn(&err);
        snprintf(out->fault, sizeof out->fault, "%s", err.msg[0] ? err.msg : gs_strerror(rc));
    }
}

static unsigned http_report(struct gs_runs *r, int64_t id, const struct gs_runs_who *who,
                            char **body, size_t *len)
{
    struct run *run = gs_runs_run_find(r, 0, id);
    struct stored_run s;

    if (run && !who_sees(who, run->uid)) {
        gs_runs_run_unref(r, run);
        return reply_error(404, body, len, "no run %lld", (long long)id);
    }
    if (run) {
        struct gs_report_meta meta = {.hostname = r->hostname, .exit_code = -1, .source = "agent"};
        json_t *rep;
        uint64_t steps;
        char name[GS_RECORD_STR];
        gs_session_name(run->session, name, sizeof name);
        meta.run_name = name[0] ? name : NULL;
        rep = gs_session_report(run->session, &meta);
        gs_runs_fill_peer(rep, run);
        steps = gs_session_stats(run->session).steps;
        const char *state = live_state(r, run);
        gs_runs_run_unref(r, run);
        if (!rep)
            return reply_error(500, body, len, "out of memory");
        annotate(rep, id, state, steps);
        return reply(rep, 200, body, len);
    }
    pthread_mutex_lock(&r->db_lock);
    stored_get(r, id, &s);
    pthread_mutex_unlock(&r->db_lock);
    if (s.fault[0]) { /* a damaged page is not "no such run" */
        json_decref(s.report);
        return reply_error(503, body, len, "history.db could not be read: %s", s.fault);
    }
    if (!s.exists)
        return reply_error(404, body, len, "no run %lld", (long long)id);
    if (!who_sees(who, s.uid)) {
        json_decref(s.report);
        return reply_error(404, body, len, "no run %lld", (long long)id);
    }
    if (!s.report)
        return reply_error(404, body, len,
                           "run %lld has no report: the agent stopped before it ended "
                           "(its steps: /api/v1/runs/%lld/steps)",
                           (long long)id, (long long)id);
    annotate(s.report, id, stored_state(s.has_end, s.report), 0);
    return reply(s.report, 200, body, len);
}

static int page_step(void *ctx, const struct gs_store_step_row *row)
{
    json_array_append_new(ctx, step_object(row));
    return 0;
}

/* A paged answer about run id (its steps, its logged values): page_begin finds the run (live,
 * else stored) and whether who sees it, and leaves the history's reader to the caller under
 * db_lock (pg->db: NULL when there is nothing to read); page_end unlocks and answers 503 when
 * the store failed or is damaged, 404 for a run that is not there or not who's. */
struct page {
    struct stored_run s;
    struct gs_store *db;
    int exists, visible;
    uint64_t logs_dropped; /* the run's logged values not kept (a live run's, a stored one's) */
};

/* Returns 0 with db_lock held, or the HTTP status of an answer already made in *body. */
static unsigned page_begin(struct gs_runs *r, int64_t id, const struct gs_runs_who *who,
                           const char *off, struct page *pg, char **body, size_t *len)
{
    struct run *run = gs_runs_run_find(r, 0, id);

    memset(pg, 0, sizeof *pg);
    pg->s.uid = -1;
    pg->exists = run != NULL;
    pg->visible = run && who_sees(who, run->uid);
    if (run) {
        pg->logs_dropped = gs_session_stats(run->session).log_points_dropped;
        gs_runs_run_unref(r, run);
    }
    if (pg->exists && !pg->visible)
        return reply_error(404, body, len, "no run %lld", (long long)id);
    if (!r->history_path[0])
        return pg->exists ? reply_error(404, body, len, "%s", off)
                          : reply_error(404, body, len, "no run %lld", (long long)id);
    pthread_mutex_lock(&r->db_lock);
    if (!pg->exists) {
        const json_t *d;
        stored_get(r, id, &pg->s);
        pg->exists = pg->s.exists;
        pg->visible = pg->s.exists && who_sees(who, pg->s.uid);
        d = json_object_get(json_object_get(pg->s.report, "run"), "log_points_dropped");
        pg->logs_dropped =
            json_is_integer(d) && json_integer_value(d) > 0 ? (uint64_t)json_integer_value(d) : 0;
        json_decref(pg->s.report);
        pg->s.report = NULL;
    }
    if (pg->visible && !pg->s.fault[0] && (pg->db = gs_runs_db(r)) != NULL) {
        struct gs_err err;

        gs_err_clear(&err);
        if (gs_recorder_damaged(r->rec, &err) != GS_OK) {
            snprintf(pg->s.fault, sizeof pg->s.fault, "%s", err.msg);
            pg->db = NULL;
        }
    }
    return 0;
}

/* The caller's read failed: err says why (logged, and the answer is a 503). */
static void page_fault(struct page *pg, const struct gs_err *err)
{
    gs_runs_db_warn(err);
    snprintf(pg->s.fault, sizeof pg->s.fault, "%s", err->msg[0] ? err->msg : "read error");
}

/* Unlocks db_lock; 0 when the page (list) is to be answered, else the status of the error
 * answer made in *body (list freed). */
static unsigned page_end(struct gs_runs *r, int64_t id, struct page *pg, json_t *list, char **body,
                         size_t *len)
{
    pthread_mutex_unlock(&r->db_lock);
    if (pg->s.fault[0]) {
        json_decref(list);
        return reply_error(503, body, len, "history.db could not be read: %s", pg->s.fault);
    }
    if (!pg->exists || !pg->visible) {
        json_decref(list);
        return reply_error(404, body, len, "no run %lld", (long long)id);
    }
    return 0;
}

/* "next": the from of the next page, null on the last. */
static json_t *page_next(long long from, const json_t *list, int64_t total)
{
    return from + (long long)json_array_size(list) < total
               ? json_integer(from + (json_int_t)json_array_size(list))
               : json_null();
}

static unsigned http_steps(struct gs_runs *r, int64_t id, long long from, long long limit,
                           const struct gs_runs_who *who, char **body, size_t *len)
{
    struct page pg;
    json_t *list, *doc;
    int64_t total = 0;
    unsigned code;

    if ((code = page_begin(r, id, who, "history is off: steps are not kept", &pg, body, len)))
        return code;
    list = json_array();
    if (pg.db) {
        struct gs_err err;

        gs_err_clear(&err);
        if (gs_store_run_step_count(pg.db, id, &total, &err) != GS_OK ||
            gs_store_run_steps(pg.db, id, from, limit, page_step, list, &err) != GS_OK)
            page_fault(&pg, &err);
    }
    if ((code = page_end(r, id, &pg, list, body, len)))
        return code;
    doc = json_pack("{s:I, s:I, s:I, s:I, s:o, s:o}", "id", (json_int_t)id, "total",
                    (json_int_t)total, "from", (json_int_t)from, "limit", (json_int_t)limit, "next",
                    page_next(from, list, total), "steps", list);
    return reply(doc, doc ? 200 : 500, body, len);
}

/* One logged record as the logs page shows it (docs/api.md): the wire record's shape. */
static int page_log(void *ctx, const struct gs_store_log *rec)
{
    json_t *o = json_object(), *vals = json_object();

    json_object_set_new(o, "step",
                        isnan(rec->step) ? json_null()
                        : rec->step == floor(rec->step) && fabs(rec->step) < 9e15
                            ? json_integer((json_int_t)rec->step)
                            : json_real(rec->step));
    json_object_set_new(o, "t", num_or_null(rec->t));
    json_object_set_new(o, "rank", rec->rank >= 0 ? json_integer(rec->rank) : json_null());
    for (unsigned i = 0; i < rec->n; i++)
        json_object_set_new(vals, rec->key[i], json_real(rec->value[i]));
    json_object_set_new(o, "values", vals);
    json_array_append_new(ctx, o);
    return 0;
}

/* GET /api/v1/runs/ID/logs: the run's logged records from the history, paged like its steps
 * (from, limit count records), with the same visibility as the run. "dropped": the points
 * not kept (a live run's count, an ended run's from its report; 0 when none). */
static unsigned http_logs(struct gs_runs *r, int64_t id, long long from, long long limit,
                          const struct gs_runs_who *who, char **body, size_t *len)
{
    struct page pg;
    json_t *list, *doc;
    int64_t total = 0, points = 0;
    unsigned code;

    if ((code =
             page_begin(r, id, who, "history is off: logged values are not kept", &pg, body, len)))
        return code;
    list = json_array();
    if (pg.db) {
        struct gs_err err;

        gs_err_clear(&err);
        if (gs_store_run_log_count(pg.db, id, &total, &points, &err) != GS_OK ||
            gs_store_run_logs(pg.db, id, from, limit, page_log, list, &err) != GS_OK)
            page_fault(&pg, &err);
    }
    if ((code = page_end(r, id, &pg, list, body, len)))
        return code;
    doc = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "id", (json_int_t)id, "total",
                    (json_int_t)total, "points", (json_int_t)points, "dropped",
                    (json_int_t)pg.logs_dropped, "from", (json_int_t)from, "limit",
                    (json_int_t)limit, "next", page_next(from, list, total), "logs", list);
    return reply(doc, doc ? 200 : 500, body, len);
}

unsigned gs_runs_http(struct gs_runs *r, const char *path, const char *from, const char *limit,
                      const struct gs_runs_who *who, char **body, size_t *body_len)
{
    const char *rest = path + strlen("/api/v1/runs");
    long long vfrom, vlimit, id;
    size_t idlen;
    int steps = 0;
    char idtext[24];

    if (parse_uint(from, 0, 1000000000000LL, 0, &vfrom) != 0)
        return reply_error(400, body, body_len, "from: expected an integer >= 0");
    if (parse_uint(limit, 1, LIMIT_MAX, rest[0] ? STEPS_LIMIT_DEFAULT : LIST_LIMIT_DEFAULT,
                   &vlimit) != 0)
        return reply_error(400, body, body_len, "limit: expected an integer in 1..%d", LIMIT_MAX);
    if (rest[0] == '\0' || strcmp(rest, "/") == 0)
        return http_list(r, vfrom, vlimit, who, body, body_len);
    if (rest[0] != '/')
        return reply_error(404, body, body_len, "not found");
    rest++;
    idlen = strcspn(rest, "/");
    if (rest[idlen] == '/') {
        if (strcmp(rest + idlen, "/logs") == 0)
            steps = 2; /* the logged values, paged like the steps */
        else if (strcmp(rest + idlen, "/steps") != 0)
            return reply_error(404, body, body_len, "not found");
        else
            steps = 1;
    }
    if (idlen == 0 || idlen >= sizeof idtext || strspn(rest, "0123456789") != idlen ||
        rest[0] == '0')
        return reply_error(404, body, body_len, "no run '%.32s'", rest);
    memcpy(idtext, rest, idlen);
    idtext[idlen] = '\0';
    if (parse_uint(idtext, 1, INT64_MAX / 2, 0, &id) != 0)
        return reply_error(404, body, body_len, "no run '%s'", idtext);
    if (!steps && (from || limit))
        return reply_error(400, body, body_len, "from, limit: only for the list and steps");
    if (steps == 2)
        return http_logs(r, id, vfrom, vlimit, who, body, body_len);
    return steps ? http_steps(r, id, vfrom, vlimit, who, body, body_len)
                 : http_report(r, id, who, body, body_len);
}

unsigned gs_runs_capture(struct gs_runs *r, const char *path, const char *steps_arg, int admin,
                         int64_t uid, char **body, size_t *len)
{
    static const char prefix[] = "/api/v1/runs/", suffix[] = "/capture";
    struct gs_control c = {0};
    uint64_t conns[RUN_MAX_CONNS];
    unsigned n = 0, sent = 0;
    struct run *run = NULL;
    char msg[GS_CONTROL_MAX], idbuf[24];
    long long id, steps;
    size_t plen = strlen(path), idlen;
    int mlen;

    idlen = plen > sizeof prefix - 1 + sizeof suffix - 1
                ? plen - (sizeof prefix - 1) - (sizeof suffix - 1)
                : 0;
    if (strncmp(path, prefix, sizeof prefix - 1) != 0 || idlen == 0 || idlen >= sizeof idbuf ||
        strcmp(path + plen - (sizeof suffix - 1), suffix) != 0)
        return reply_error(404, body, len, "not found: POST /api/v1/runs/ID/capture");
    memcpy(idbuf, path + sizeof prefix - 1, idlen);
    idbuf[idlen] = '\0';
    if (parse_uint(idbuf, 1, INT64_MAX, 0, &id) != 0)
        return reply_error(404, body, len, "no live run %.24s", idbuf);
    if (parse_uint(steps_arg, 1, GS_CONTROL_MAX_STEPS, 5, &steps) != 0)
        return reply_error(400, body, len, "steps: want 1..%d", GS_CONTROL_MAX_STEPS);
    c.steps = (int32_t)steps;
    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE && !run; i++)
        if (r->live[i] && r->live[i]->id == id)
            run = r->live[i];
    /* another user's run answers as a missing one (docs/api.md): its id says nothing */
    if (run && (admin || (uid >= 0 && (int64_t)run->uid == uid))) {
        n = run->n_conns;
        for (unsigned k = 0; k < n; k++)
            conns[k] = run->conns[k].conn_id;
    } else {
        run = NULL;
    }
    pthread_mutex_unlock(&r->lock);
    if (!run)
        return reply_error(404, body, len, "no live run %lld", id);
    /* the request's id: unique per agent and time, so that each rank answers it once */
    c.id = (int64_t)(gs_clock_real_s() * 1e6);
    mlen = gs_control_encode(&c, msg, sizeof msg);
    for (unsigned k = 0; mlen > 0 && k < n; k++)
        sent += gs_receiver_send(r->rx, conns[k], msg, (size_t)mlen) == 0;
    gs_log(GS_LOG_INFO,
           "runs: run %lld: profiler window of %d step(s) asked of %u of %u "
           "rank(s)",
           id, (int)steps, sent, n);
    return reply(json_pack("{s:I, s:I, s:i, s:i, s:i}", "run", (json_int_t)id, "request",
                           (json_int_t)c.id, "steps", (int)steps, "ranks", (int)n, "sent",
                           (int)sent),
                 sent ? 202 : 503, body, len);
}
