/*
 * runs.c - training runs on the agent's step-record socket (contract in runs.h): the live
 * table, the receiver's callbacks, the sampling thread's feed and the life cycle. The pages
 * are in runs_http.c, the rebuild of interrupted runs in runs_rebuild.c; what they share, in
 * runs_int.h.
 *
 * Live runs sit in a fixed table of GS_RUNS_MAX_LIVE pointers under `lock`, which is held for
 * a few instructions only. Each run's records go through its session (run/session.h, the
 * same dispatch as `gpuscope run`'s: the aggregate, the time rule, the counters), whose lock
 * the receiver thread takes per record, the HTTP thread while it computes a live report
 * (milliseconds for a long run), and the sampling thread only with trylock, so a report in
 * progress costs that run one snapshot (counted) and never delays a sampling cycle; the
 * session's sink here is the history (through the recorder) and the /metrics series. A run is
 * reference counted (the table holds one, each HTTP request in flight one): the receiver
 * thread removes an ending run from the table, computes its report and stores it; the last
 * reference frees it.
 *
 * DDP: a run holds the connections of its ranks (conns, under `lock`, changed by the receiver
 * thread only); a rank's hello that matches a live run (run_join) attaches its connection
 * there, and the run finishes when its last connection detaches (end record or close).
 *
 * History: run rows and steps go through the recorder (recorder.h, the store's owner, under
 * its mutex) from the receiver thread. Ended runs and step pages are read back for HTTP
 * through a reader of history.db (store/runs.h: a second, read-only connection; WAL readers
 * never block the writer), which filters by owner and pages in its SQL; it sees steps once a
 * flush has committed them.
 */
#include "agent/runs.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "agent/auth.h"
#include "agent/log.h"
#include "agent/ratelimit.h"
#include "agent/recorder.h"
#include "agent/runs_int.h"
#include "agent/runs_metrics.h"
#include "backend/procfs.h"
#include "base/clock.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"
#include "run/agg.h"
#include "run/attrib.h"
#include "run/receiver.h"
#include "run/session.h"
#include "store/history.h"
#include "store/runs.h"

/* DDP: a rank's hello joins a live run of the same uid and name whose first hello came at
 * most this long before (docs/agent.md, RUNS). */
#define DDP_JOIN_S 60.0

static void count(struct gs_runs *r, uint64_t *field)
{
    pthread_mutex_lock(&r->lock);
    (*field)++;
    pthread_mutex_unlock(&r->lock);
}

const char *gs_runs_refusal_name(enum gs_runs_refusal why)
{
    static const char *const names[GS_RUNS_REF_N] = {
        "uid_connections",  "connections", "uid_rate",  "runs_per_uid", "runs",
        "run_buffer_share", "buffer",      "step_time", "resume_uid"};

    return (unsigned)why < GS_RUNS_REF_N ? names[why] : "other";
}

/* Counts a refusal of why for uid; returns 1 when it is the first of this (uid, why) pair,
 * which the caller logs (with what it knows), 0 when it was logged already. */
static int refuse(struct gs_runs *r, uid_t uid, enum gs_runs_refusal why)
{
    int first = 1;

    pthread_mutex_lock(&r->lock);
    r->st.refused[why]++;
    for (unsigned i = 0; i < r->n_logged && first; i++)
        first = !(r->logged[i].uid == uid && r->logged[i].why == (int)why);
    if (first) {
        if (r->n_logged == sizeof r->logged / sizeof r->logged[0])
            memmove(r->logged, r->logged + 1, sizeof r->logged[0] * --r->n_logged);
        r->logged[r->n_logged].uid = uid;
        r->logged[r->n_logged].why = (int)why;
        r->n_logged++;
    }
    pthread_mutex_unlock(&r->lock);
    return first;
}

/* ---- run life ---- */

/* What a connection's hello says about its GPUs (run/attrib.h), read on the receiver thread
 * before the connection is attached (or, for a late hello, copied in under lock). */
static void conn_devices(struct rank_conn *c, const struct gs_peer *peer,
                         const struct gs_record *rec)
{
    const struct gs_record_hello *h = &rec->u.hello;

    if (rec->type != GS_REC_HELLO)
        return;
    c->n_devices = h->n_devices < GS_RECORD_MAX_DEVICES ? h->n_devices : GS_RECORD_MAX_DEVICES;
    memcpy(c->devices, h->devices, c->n_devices * sizeof c->devices[0]);
    switch (gs_procfs_read_env(NULL, (unsigned)peer->pid, "CUDA_VISIBLE_DEVICES", c->cvd,
                               sizeof c->cvd)) {
    case GS_OK:
    case GS_ENOTFOUND: /* unset: CUDA index k is GPU k */
        c->cvd_known = 1;
        break;
    default:
        c->cvd_known = 0;
        break;
    }
}

void gs_runs_run_unref(struct gs_runs *r, struct run *run)
{
    int last;

    pthread_mutex_lock(&r->lock);
    last = --run->refs == 0;
    pthread_mutex_unlock(&r->lock);
    if (!last)
        return;
    gs_session_free(run->session);
    json_decref(run->headline);
    json_decref(run->tags);
    pthread_mutex_destroy(&run->mu);
    free(run);
}

static int run_has_conn(const struct run *run, uint64_t conn_id)
{
    for (unsigned k = 0; k < run->n_conns; k++)
        if (run->conns[k].conn_id == conn_id)
            return 1;
    return 0;
}

/* A reference to the live run of conn_id (or of history id when conn_id is 0), or NULL. */
struct run *gs_runs_run_find(struct gs_runs *r, uint64_t conn_id, int64_t id)
{
    struct run *run = NULL;

    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE && !run; i++)
        if (r->live[i] && (conn_id ? run_has_conn(r->live[i], conn_id) : r->live[i]->id == id))
            run = r->live[i];
    if (run)
        run->refs++;
    pthread_mutex_unlock(&r->lock);
    return run;
}

/* DDP: the live run a new connection's hello joins (a reference), or NULL. Same uid, same
 * non-empty name, a world size > 1 on both sides, the run's start at most DDP_JOIN_S before,
 * a connection of the run still open and room for one more. The connection is attached. */
static struct run *run_join(struct gs_runs *r, const struct gs_peer *peer,
                            const struct gs_record *rec)
{
    const struct gs_record_hello *h = &rec->u.hello;
    struct run *run = NULL;
    double now = gs_clock_real_s();
    struct rank_conn conn = {.conn_id = peer->conn_id, .pid = peer->pid};
    char name[GS_RECORD_STR];

    if (rec->type != GS_REC_HELLO || !h->run[0] || h->world_size <= 1)
        return NULL;
    conn_devices(&conn, peer, rec);
    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE && !run; i++) {
        struct run *c = r->live[i];
        if (!c || c->uid != peer->uid || c->world_size <= 1 || c->n_conns == 0 ||
            c->n_conns >= RUN_MAX_CONNS || now - c->start_s > DDP_JOIN_S || now < c->start_s - 1.0)
            continue;
        gs_session_name(c->session, name, sizeof name);
        if (strcmp(name, h->run) == 0)
            run = c;
    }
    if (run) {
        run->conns[run->n_conns] = conn;
        run->n_conns++;
        run->refs++;
    }
    pthread_mutex_unlock(&r->lock);
    if (run) {
        gs_session_add_rank(run->session); /* its report keeps the first rank's hello */
        gs_log(GS_LOG_INFO, "runs: pid %ld (rank %d) joins run %lld '%s'", (long)peer->pid,
               (int)h->rank, (long long)run->id, name);
    }
    return run;
}

/* A new run's tags from its first record when it is a hello (record.h "tags"): run->tags, and
 * their text for the history's run row (malloc'ed; NULL: none). */
static char *run_tags(struct run *run, const struct gs_record *rec)
{
    if (rec->type != GS_REC_HELLO || rec->u.hello.tags.n == 0)
        return NULL;
    run->tags = gs_record_tags_json(&rec->u.hello.tags);
    return run->tags ? json_dumps(run->tags, JSON_COMPACT) : NULL;
}

/* ---- the sink of a run's session (run/session.h), on the receiver thread ---- */

/* A record the run kept: the per-rank series of /metrics (runs_metrics.h). */
static void sink_kept(void *ctx, const struct gs_peer *peer, const struct gs_record *rec)
{
    struct run *run = ctx;
    char name[GS_RECORD_STR];

    if (rec->type != GS_REC_HELLO && rec->type != GS_REC_STEP)
        return;
    gs_session_name(run->session, name, sizeof name);
    if (rec->type == GS_REC_HELLO)
        gs_runm_hello(run->owner->m, run->id, peer->conn_id, name, &rec->u.hello, peer->pid);
    else
        gs_runm_step(run->owner->m, run->id, peer->conn_id, name, &rec->u.step);
}

/* A step into the history (through the recorder); not stored when history is off. */
static int sink_store_step(void *ctx, const struct gs_peer *peer, const struct gs_step_rec *step)
{
    struct run *run = ctx;
    struct gs_runs *r = run->owner;
    struct gs_err err;
    int rc;

    if (!r->rec || run->id <= 0)
        return GS_OK;
    gs_err_clear(&err);
    rc = gs_recorder_run_step(r->rec, run->id, step, peer->pid, peer->uid, &err);
    if (rc == GS_EPERM || rc == GS_ENOMEM) {
        /* The run's share of the flush buffer (store/history.h), or the buffer full: this
         * run's record is lost, nobody else's. */
        enum gs_runs_refusal why = rc == GS_EPERM ? GS_RUNS_REF_RUN_SHARE : GS_RUNS_REF_BUFFER_FULL;
        if (refuse(r, peer->uid, why))
            gs_log(GS_LOG_WARN, "runs: run %lld (uid %lu): %s (logged once per uid)",
                   (long long)run->id, (unsigned long)peer->uid, err.msg);
    } else if (rc != GS_OK) {
        count(r, &r->st.store_errors);
    }
    if (rc != GS_OK)
        count(r, &r->st.steps_dropped); /* and the session counts it in the run's report */
    return rc;
}

/* A logged record of run (schema v3): into the history with the run's seq; not kept when
 * history is off. The session keeps at most GS_RUNS_MAX_LOG_POINTS points a run; those
 * beyond (sink_refused) or refused by the store are counted in the run's log_points_dropped
 * (the logs page's "dropped") and the agent's stats. */
_Static_assert(GS_RECORD_FACT_KEY == GS_STORE_LOG_KEY && GS_RECORD_MAX_LOG <= GS_STORE_LOG_MAX_KEYS,
               "a log record's keys fit the store's");

static int sink_store_log(void *ctx, const struct gs_peer *peer, const struct gs_record_log *l,
                          int64_t seq)
{
    struct run *run = ctx;
    struct gs_runs *r = run->owner;
    struct gs_store_log sl = {.seq = seq, .step = l->step, .t = l->t, .rank = l->rank, .n = l->n};
    struct gs_err err;

    (void)peer;
    if (!r->rec || run->id <= 0)
        return GS_OK;
    for (unsigned i = 0; i < l->n; i++) {
        memcpy(sl.key[i], l->key[i], GS_STORE_LOG_KEY);
        sl.key[i][GS_STORE_LOG_KEY - 1] = '\0';
        sl.value[i] = l->val[i];
    }
    gs_err_clear(&err);
    if (gs_recorder_run_log(r->rec, run->id, &sl, &err) == GS_OK)
        return GS_OK;
    pthread_mutex_lock(&r->lock);
    r->st.logs_dropped += l->n;
    r->st.store_errors++;
    pthread_mutex_unlock(&r->lock);
    return GS_EIO;
}

/* A step dated before 2000 or before its run began (its first record, normally the hello: the
 * rule of run/record.h, shared with `gpuscope run`), or a log record beyond the run's
 * GS_RUNS_MAX_LOG_POINTS: counted, logged once per run. */
static void sink_refused(void *ctx, const struct gs_peer *peer, const struct gs_record *rec,
                         enum gs_session_refusal what, const char *why, uint64_t nth)
{
    struct run *run = ctx;
    struct gs_runs *r = run->owner;

    if (what == GS_SESSION_STEP_TIME) {
        count(r, &r->st.steps_dropped);
        refuse(r, peer->uid, GS_RUNS_REF_STEP_TIME); /* logged once per run below */
        if (nth == 1)
            gs_log(GS_LOG_WARN,
                   "runs: run %lld (pid %ld uid %lu): step %llu refused: t0 %.3f is %s; "
                   "further such steps of this run are dropped without a word",
                   (long long)run->id, (long)peer->pid, (unsigned long)peer->uid,
                   (unsigned long long)rec->u.step.step, rec->u.step.t_begin, why);
        return;
    }
    if (!r->rec || run->id <= 0) /* history off: logged values are not kept anyway */
        return;
    pthread_mutex_lock(&r->lock);
    r->st.logs_dropped += rec->u.log.n;
    pthread_mutex_unlock(&r->lock);
    if (nth == 1)
        gs_log(GS_LOG_WARN,
               "runs: run %lld: %d logged values kept; later ones are dropped "
               "(counted)",
               (long long)run->id, GS_RUNS_MAX_LOG_POINTS);
}

/* Makes the run of a connection's first record; NULL when the table is full or out of
 * memory. Only the receiver thread inserts, so nobody races it to the same conn_id. */
/* A run object with its session (the sink: this file's), one reference, not in the table;
 * NULL when out of memory. */
static struct run *run_new(struct gs_runs *r, double start_s)
{
    struct run *run = calloc(1, sizeof *run);
    struct gs_session_opts so = {.start_s = start_s,
                                 .max_agg_steps = GS_RUNS_MAX_AGG_STEPS,
                                 .max_log_points = GS_RUNS_MAX_LOG_POINTS,
                                 .first_rank_hello = 1,
                                 .drops_known = 1};
    struct gs_session_sink sink = {.ctx = run,
                                   .kept = sink_kept,
                                   .store_step = sink_store_step,
                                   .store_log = sink_store_log,
                                   .refused = sink_refused};

    if (!run || gs_session_new(&run->session, &so, &sink, NULL) != GS_OK) {
        free(run);
        return NULL;
    }
    pthread_mutex_init(&run->mu, NULL);
    run->owner = r;
    run->refs = 1;
    run->start_s = start_s;
    return run;
}

/* The SHA-256 (hex) of a hello's resume token: what a run keeps and stores of it. */
static void token_hash(const char *token, char out[65])
{
    gs_auth_sha256_hex(token, strlen(token), out);
    out[64] = '\0';
}

static struct run *run_begin(struct gs_runs *r, const struct gs_peer *peer,
                             const struct gs_record *rec)
{
    struct run *run;
    const char *name = rec->type == GS_REC_HELLO ? rec->u.hello.run : "";
    struct gs_err err;
    unsigned slot = GS_RUNS_MAX_LIVE;
    unsigned held = 0;

    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE; i++)
        held += r->live[i] && r->live[i]->uid == peer->uid;
    if (r->runs_per_uid && peer->uid != 0 && held >= r->runs_per_uid) {
        /* One user cannot take every run slot (issue 18): refused, logged once per uid. */
        r->st.runs_refused++;
        r->st.runs_refused_uid++;
        pthread_mutex_unlock(&r->lock);
        if (refuse(r, peer->uid, GS_RUNS_REF_RUNS_PER_UID))
            gs_log(GS_LOG_WARN,
                   "runs: uid %lu has %u runs going on (runs_per_uid); records of "
                   "its new ones are dropped (logged once)",
                   (unsigned long)peer->uid, held);
        return NULL;
    }
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE && slot == GS_RUNS_MAX_LIVE; i++)
        if (!r->live[i])
            slot = i;
    if (slot == GS_RUNS_MAX_LIVE) {
        int log = !r->full_logged;
        r->st.runs_refused++;
        r->full_logged = 1;
        pthread_mutex_unlock(&r->lock);
        refuse(r, peer->uid, GS_RUNS_REF_RUNS_FULL); /* logged once until a slot frees */
        if (log)
            gs_log(GS_LOG_WARN, "runs: %d runs going on; records of new ones are dropped",
                   GS_RUNS_MAX_LIVE);
        return NULL;
    }
    r->beginning++;
    pthread_mutex_unlock(&r->lock);
    /* steps are refused against the run's start: its first record (normally the hello) */
    run = run_new(r, gs_clock_real_s());
    if (!run) {
        pthread_mutex_lock(&r->lock);
        r->beginning--;
        r->st.runs_refused++;
        pthread_mutex_unlock(&r->lock);
        return NULL;
    }
    if (rec->type == GS_REC_HELLO && rec->u.hello.token[0])
        token_hash(rec->u.hello.token, run->token);
    run->conns[0].conn_id = peer->conn_id;
    run->conns[0].pid = peer->pid;
    conn_devices(&run->conns[0], peer, rec);
    run->n_conns = 1;
    run->pid = peer->pid;
    run->uid = peer->uid;
    if (rec->type == GS_REC_HELLO)
        run->world_size = rec->u.hello.world_size;
    char *tags_text = run_tags(run, rec);
    gs_err_clear(&err);
    if (r->rec) {
        struct gs_store_run sr = {.name = name[0] ? name : NULL,
                                  .source = "agent",
                                  .hostname = r->hostname[0] ? r->hostname : NULL,
                                  .start_time = run->start_s,
                                  .tags = tags_text,
                                  .token = run->token[0] ? run->token : NULL};
        if (gs_recorder_run_begin(r->rec, &sr, &run->id, &err) != GS_OK) {
            gs_log(GS_LOG_WARN, "runs: history: %s; run of pid %ld kept in memory only", err.msg,
                   (long)run->pid);
            count(r, &r->st.store_errors);
            run->id = 0;
        }
    }
    free(tags_text);
    pthread_mutex_lock(&r->lock);
    if (run->id <= 0)
        run->id = --r->next_mem_id; /* negative: never a history row */
    r->live[slot] = run;
    r->beginning--;
    r->begun++;
    r->st.runs_started++;
    r->st.live++;
    pthread_mutex_unlock(&r->lock);
    gs_log(GS_LOG_INFO, "runs: run %lld '%s' started (pid %ld, uid %lu)", (long long)run->id, name,
           (long)run->pid, (unsigned long)run->uid);
    return run;
}

struct run *gs_runs_run_restore(struct gs_runs *r, int64_t id, double start_s, const char *name,
                                const char *tags, const char *token, uid_t uid, pid_t pid)
{
    struct run *run = run_new(r, start_s);
    unsigned slot = GS_RUNS_MAX_LIVE;

    if (!run)
        return NULL;
    run->id = id;
    run->uid = uid;
    run->pid = pid;
    snprintf(run->token, sizeof run->token, "%s", token);
    gs_session_set_name(run->session, name);
    if (tags && *tags)
        run->tags = gs_runs_stored_tags(tags);
    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE && slot == GS_RUNS_MAX_LIVE; i++)
        if (!r->live[i])
            slot = i;
    if (slot < GS_RUNS_MAX_LIVE) {
        run->interrupted_s = gs_clock_real_s();
        r->live[slot] = run;
        r->st.live++;
    }
    pthread_mutex_unlock(&r->lock);
    if (slot == GS_RUNS_MAX_LIVE) {
        gs_runs_run_unref(r, run);
        return NULL;
    }
    return run;
}

/* The sender's SO_PEERCRED uid/pid in a report's "run" object also when no hello came (the
 * aggregate knows them from the hello only). */
void gs_runs_fill_peer(json_t *report, const struct run *run)
{
    json_t *ro = json_object_get(report, "run");

    if (!json_is_object(ro))
        return;
    if (!json_is_integer(json_object_get(ro, "uid")))
        json_object_set_new(ro, "uid", json_integer((json_int_t)run->uid));
    if (!json_is_integer(json_object_get(ro, "pid")))
        json_object_set_new(ro, "pid", json_integer((json_int_t)run->pid));
}

/* An ended run's logged points that were not kept, in its report's "run" object when there
 * were any ("log_points_dropped", docs/api.md); the logs page reads it back. */
static void run_report_logs(json_t *report, uint64_t dropped)
{
    if (dropped && json_is_object(json_object_get(report, "run")))
        json_object_set_new(json_object_get(report, "run"), "log_points_dropped",
                            json_integer((json_int_t)dropped));
}

/* Removes run from the table (the caller holds a reference), stores its report, drops the
 * table's reference. */
static void run_finish(struct gs_runs *r, struct run *run, const char *why, int interrupted)
{
    struct gs_report_meta meta = {.hostname = r->hostname, .exit_code = -1, .source = "agent"};
    struct gs_session_stats st;
    struct gs_err err;
    json_t *report;
    char *text = NULL, name[GS_RECORD_STR];
    int found = 0;

    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE; i++)
        if (r->live[i] == run) {
            r->live[i] = NULL;
            found = 1;
        }
    if (found) {
        r->st.live--;
        r->st.runs_ended++;
        if (r->st.live < GS_RUNS_MAX_LIVE)
            r->full_logged = 0;
    }
    pthread_mutex_unlock(&r->lock);
    if (!found)
        return;
    gs_runm_drop(r->m, run->id, 0);
    gs_session_name(run->session, name, sizeof name);
    meta.run_name = name[0] ? name : NULL;
    report = gs_session_report(run->session, &meta);
    st = gs_session_stats(run->session);
    gs_runs_fill_peer(report, run);
    /* Every step received, also those beyond GS_RUNS_MAX_AGG_STEPS: the list's count. */
    if (json_is_object(json_object_get(report, "run")))
        json_object_set_new(json_object_get(report, "run"), "steps_received",
                            json_integer((json_int_t)st.steps));
    run_report_logs(report, st.log_points_dropped);
    if (interrupted && json_is_object(json_object_get(report, "run")))
        json_object_set_new(json_object_get(report, "run"), "interrupted", json_true());
    if (report)
        text = json_dumps(report, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(report);
    gs_err_clear(&err);
    if (r->rec && run->id > 0 &&
        gs_recorder_run_end(r->rec, run->id, gs_clock_real_s(), text, &err) != GS_OK) {
        gs_log(GS_LOG_WARN, "runs: history: run %lld: %s", (long long)run->id, err.msg);
        count(r, &r->st.store_errors);
    }
    free(text);
    gs_log(GS_LOG_INFO, "runs: run %lld ended (%s), %llu step record(s)", (long long)run->id, why,
           (unsigned long long)st.steps);
    gs_runs_run_unref(r, run); /* the table's */
}

/* A connection of run ended (end record or close): the run ends with its last one, unless it
 * went away without an end and the run has a resume token: then the run stays in the table,
 * interrupted, for resume_timeout_s (run_resume, on_tick). */
static void run_detach(struct gs_runs *r, struct run *run, uint64_t conn_id, const char *why,
                       int ended)
{
    unsigned left;
    int wait = !ended && run->token[0] && r->resume_timeout_s > 0;

    pthread_mutex_lock(&r->lock);
    for (unsigned k = 0; k < run->n_conns; k++)
        if (run->conns[k].conn_id == conn_id) {
            run->conns[k] = run->conns[--run->n_conns];
            break;
        }
    left = run->n_conns;
    if (left == 0 && wait)
        run->interrupted_s = gs_clock_real_s();
    pthread_mutex_unlock(&r->lock);
    gs_runm_drop(r->m, run->id, conn_id);
    if (left == 0 && wait)
        gs_log(GS_LOG_INFO,
               "runs: run %lld interrupted (%s without an end); kept %gs for its sender to "
               "resume it",
               (long long)run->id, why, r->resume_timeout_s);
    else if (left == 0)
        run_finish(r, run, why, 0);
}

/* A hello with a resume token (record.h "token") on a connection without a run: the
 * interrupted run of that token, the connection attached (a reference), or NULL. The token
 * of a run of another uid is refused (counted, logged once per uid): *refused is set and the
 * caller begins a run of its own without that token. */
static struct run *run_resume(struct gs_runs *r, const struct gs_peer *peer,
                              const struct gs_record *rec, int *refused)
{
    struct rank_conn conn = {.conn_id = peer->conn_id, .pid = peer->pid};
    struct run *run = NULL;
    char hash[65];
    int other = 0;

    *refused = 0;
    token_hash(rec->u.hello.token, hash);
    conn_devices(&conn, peer, rec);
    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE && !run && !other; i++) {
        struct run *c = r->live[i];
        if (!c || strcmp(c->token, hash) != 0)
            continue;
        if (c->uid != peer->uid)
            other = 1;
        else if (c->n_conns < RUN_MAX_CONNS)
            run = c;
    }
    if (run) {
        run->conns[run->n_conns++] = conn;
        run->interrupted_s = 0;
        run->refs++;
        r->st.runs_resumed++;
    }
    pthread_mutex_unlock(&r->lock);
    if (other) {
        *refused = 1;
        if (refuse(r, peer->uid, GS_RUNS_REF_RESUME_UID))
            gs_log(GS_LOG_WARN,
                   "runs: pid %ld uid %lu sent the resume token of another uid's run: refused, "
                   "its records make a run of their own (logged once per uid)",
                   (long)peer->pid, (unsigned long)peer->uid);
        return NULL;
    }
    if (run)
        gs_log(GS_LOG_INFO, "runs: run %lld resumed by pid %ld (uid %lu)", (long long)run->id,
               (long)peer->pid, (unsigned long)peer->uid);
    return run;
}

/* The interrupted runs not resumed within resume_timeout_s end (receiver thread, once a
 * second): their report says "interrupted". Returns whether runs are left waiting, so the
 * receiver ticks only while some are (receiver.h: a run is interrupted only on its thread,
 * by a close or a record, or at the start, gs_runs_rebuild_interrupted). */
static int on_tick(void *ctx)
{
    struct gs_runs *r = ctx;
    struct run *due[GS_RUNS_MAX_LIVE];
    unsigned n = 0, waiting = 0;
    double now = gs_clock_real_s();

    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE; i++) {
        struct run *c = r->live[i];
        if (!c || c->n_conns != 0 || c->interrupted_s <= 0)
            continue;
        if (now - c->interrupted_s >= r->resume_timeout_s) {
            c->refs++;
            due[n++] = c;
        } else {
            waiting++;
        }
    }
    pthread_mutex_unlock(&r->lock);
    for (unsigned k = 0; k < n; k++) {
        run_finish(r, due[k], "not resumed within runs_resume_timeout", 1);
        gs_runs_run_unref(r, due[k]);
    }
    return waiting > 0;
}

/* ---- receiver callbacks (receiver thread) ---- */

static void on_record(void *ctx, const struct gs_peer *peer, const struct gs_record *rec)
{
    struct gs_runs *r = ctx;
    struct run *run = gs_runs_run_find(r, peer->conn_id, 0);
    int late = run != NULL; /* a record of a connection that has its run */

    count(r, &r->st.records);
    /* Records per second per uid (issue 18): a flooding user loses its own records, counted
     * against its run; an end record always passes (it frees the run's slot). */
    if (rec->type != GS_REC_END && peer->uid != 0 &&
        !gs_ratelimit_take_uid(r->rl, (uint32_t)peer->uid, r->rate_per_uid, r->burst_per_uid,
                               gs_clock_mono_ns())) {
        if (refuse(r, peer->uid, GS_RUNS_REF_UID_RATE))
            gs_log(GS_LOG_WARN,
                   "runs: uid %lu sends more than %g records/s (steps_rate_per_uid, burst %g): "
                   "the excess is dropped (logged once)",
                   (unsigned long)peer->uid, r->rate_per_uid, r->burst_per_uid);
        if (rec->type == GS_REC_STEP) {
            count(r, &r->st.steps_dropped);
            if (run)
                gs_session_drop_step(run->session);
        }
        if (run)
            gs_runs_run_unref(r, run);
        return;
    }
    struct gs_record untokened;
    if (!run && rec->type == GS_REC_HELLO && rec->u.hello.token[0]) {
        int refused;
        run = run_resume(r, peer, rec, &refused);
        if (refused) { /* a run of its own, which that token does not name */
            untokened = *rec;
            untokened.u.hello.token[0] = '\0';
            rec = &untokened;
        }
    }
    if (!run && (run = run_join(r, peer, rec)) != NULL) {
        /* another rank of a DDP job: its steps only (the report keeps the first hello) */
        if (rec->type == GS_REC_HELLO) {
            char name[GS_RECORD_STR];
            gs_session_name(run->session, name, sizeof name);
            gs_runm_hello(r->m, run->id, peer->conn_id, name, &rec->u.hello, peer->pid);
            gs_runs_run_unref(r, run);
            return;
        }
    }
    if (!run) {
        run = run_begin(r, peer, rec);
        if (!run) {
            if (rec->type == GS_REC_STEP)
                count(r, &r->st.steps_dropped);
            return;
        }
        pthread_mutex_lock(&r->lock);
        run->refs++;
        pthread_mutex_unlock(&r->lock);
    }
    if (late && rec->type == GS_REC_HELLO) { /* a late hello: its devices count from now on */
        struct rank_conn conn = {0};
        conn_devices(&conn, peer, rec);
        pthread_mutex_lock(&r->lock);
        for (unsigned k = 0; k < run->n_conns; k++)
            if (run->conns[k].conn_id == peer->conn_id && run->conns[k].n_devices == 0) {
                conn.conn_id = run->conns[k].conn_id;
                conn.pid = run->conns[k].pid;
                run->conns[k] = conn;
            }
        pthread_mutex_unlock(&r->lock);
    }
    /* the aggregate, the time rule, the history and the series: run/session.h and the sink */
    gs_session_record(run->session, peer, rec);
    if (rec->type == GS_REC_END)
        run_detach(r, run, peer->conn_id, "end record", 1);
    gs_runs_run_unref(r, run);
}

static void on_close(void *ctx, const struct gs_peer *peer)
{
    struct gs_runs *r = ctx;
    struct run *run = gs_runs_run_find(r, peer->conn_id, 0);

    if (!run)
        return;
    run_detach(r, run, peer->conn_id, "connection closed", 0);
    gs_runs_run_unref(r, run);
}

static void on_refuse(void *ctx, const struct gs_peer *peer, int why)
{
    struct gs_runs *r = ctx;

    if (why == GS_RECEIVER_UID_CONN) {
        if (refuse(r, peer->uid, GS_RUNS_REF_UID_CONN))
            gs_log(GS_LOG_WARN,
                   "runs: uid %lu holds %u step-socket connections (steps_conn_per_uid): its "
                   "next ones are closed (logged once)",
                   (unsigned long)peer->uid, r->conn_per_uid);
    } else if (refuse(r, peer->uid, GS_RUNS_REF_CONN_FULL)) {
        gs_log(GS_LOG_WARN,
               "runs: %d step-socket connections open: uid %lu's next one closed "
               "(logged once per uid)",
               GS_RECEIVER_MAX_CONN, (unsigned long)peer->uid);
    }
}

static void on_reject(void *ctx, const struct gs_peer *peer, const char *why)
{
    struct gs_runs *r = ctx;

    count(r, &r->st.rejected);
    gs_log(GS_LOG_DEBUG, "runs: pid %ld uid %lu: record refused: %s", (long)peer->pid,
           (unsigned long)peer->uid, why);
}

/* ---- sampling thread ---- */

/* The per-run GPU rows and their union for snapshots of n_gpus GPUs; 0 when out of memory. */
static int snap_rows(struct gs_runs *r, unsigned n_gpus)
{
    unsigned char *p;

    if (n_gpus <= r->in_run_cap)
        return 1;
    p = realloc(r->in_run, (size_t)(GS_RUNS_MAX_LIVE + 1) * n_gpus); /* + a scratch row */
    if (!p)
        return 0;
    r->in_run = p;
    r->in_run_cap = n_gpus;
    return 1;
}

int gs_runs_of_pid(struct gs_runs *r, unsigned pid, char *out, size_t cap)
{
    int found = 0;

    if (!r || pid == 0)
        return 0;
    pthread_mutex_lock(&r->lock);
    /* asked for every process every cycle (usage.c): nothing to look through without runs */
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE && !found && r->st.live; i++) {
        const struct run *run = r->live[i];
        for (unsigned k = 0; run && k < run->n_conns && !found; k++)
            if ((unsigned)run->conns[k].pid == pid) {
                snprintf(out, cap, "%lld", (long long)run->id);
                found = 1;
            }
    }
    pthread_mutex_unlock(&r->lock);
    return found;
}

unsigned gs_runs_want(struct gs_runs *r)
{
    unsigned live;

    if (!r)
        return 0;
    pthread_mutex_lock(&r->lock);
    live = r->st.live;
    pthread_mutex_unlock(&r->lock);
    return live ? GS_WANT_UTIL_SAMPLES : 0;
}

void gs_runs_snapshot(struct gs_runs *r, const struct gs_snapshot *snap)
{
    struct run *runs[GS_RUNS_MAX_LIVE];
    int any[GS_RUNS_MAX_LIVE];
    unsigned n = 0, ng;
    int tree_ok = 0;

    if (!r || !snap || snap->n_gpus == 0 || !snap_rows(r, snap->n_gpus))
        return;
    ng = snap->n_gpus;
    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE; i++)
        if (r->live[i]) {
            r->live[i]->refs++;
            runs[n++] = r->live[i];
        }
    pthread_mutex_unlock(&r->lock);
    /* The ancestry of the GPU processes, once for every run (run/attrib.h). */
    if (n > 0 && snap->n_procs > 0)
        tree_ok = gs_attrib_tree_read(&r->tree, snap, NULL) == 0;
    for (unsigned k = 0; k < n; k++) {
        unsigned char *row = r->in_run + (size_t)k * ng;

        memset(row, 0, ng);
        pthread_mutex_lock(&r->lock); /* the run's connections (ranks) */
        for (unsigned c = 0; c < runs[k]->n_conns; c++) {
            const struct rank_conn *rc = &runs[k]->conns[c];
            struct gs_attrib a = {.pids = &rc->pid,
                                  .n_pids = 1,
                                  .descendants = tree_ok,
                                  .devices = rc->devices,
                                  .n_devices = rc->n_devices,
                                  .cvd_known = rc->cvd_known,
                                  .cvd = rc->cvd};
            unsigned char *one = r->in_run + (size_t)GS_RUNS_MAX_LIVE * ng;
            memset(one, 0, ng);
            gs_attrib_mark(&a, tree_ok ? &r->tree : NULL, snap, one);
            for (unsigned g = 0; g < ng; g++)
                row[g] |= one[g];
            /* the rank's gpu label: the first GPU attributed to its connection */
            const unsigned char *hit = memchr(one, 1, ng);
            if (hit) {
                const struct gs_gpu *g = &snap->gpus[hit - one];
                gs_runm_gpu(r->m, runs[k]->id, rc->conn_id, (int)g->index,
                            gs_gpu_has_text(g, GS_T_NAME) ? g->text[GS_T_NAME] : NULL);
            }
        }
        pthread_mutex_unlock(&r->lock);
        any[k] = memchr(row, 1, ng) != NULL;
    }
    /* With the snapshot, the driver's utilization samples it carries (gs_runs_want asked
     * for them; run/usamp.h). A run skipped below misses both. */
    for (unsigned k = 0; k < n; k++) {
        struct run *run = runs[k];

        if (any[k] && !gs_session_snapshot(run->session, snap, r->in_run + (size_t)k * ng, 0))
            count(r, &r->st.snapshots_skipped);
        gs_runs_run_unref(r, run);
    }
}

/* ---- life cycle ---- */

/* mkdir -p of path's directory, 0755 for each directory it makes. */
static int make_parent(const char *path, struct gs_err *err)
{
    char dir[PATH_MAX];
    char *slash;

    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return gs_err_set(err, GS_EINVAL, "runs: socket path too long");
    slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return GS_OK;
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(dir, 0755) != 0 && errno != EEXIST)
                return gs_err_set(err, GS_EIO, "runs: mkdir %s: %s", dir, strerror(errno));
            *p = c;
            if (!c)
                break;
        }
    }
    return GS_OK;
}

int gs_runs_open(struct gs_runs **out, const struct gs_runs_opts *o, struct gs_err *err)
{
    struct gs_receiver_cb cb = {.on_record = on_record,
                                .on_close = on_close,
                                .on_reject = on_reject,
                                .on_refuse = on_refuse,
                                .on_tick = on_tick};
    struct gs_runs *r;
    int rc;

    if (!o || !o->socket_path || o->socket_path[0] != '/')
        return gs_err_set(err, GS_EINVAL, "socket: expected an absolute path or off, not '%s'",
                          o && o->socket_path ? o->socket_path : "");
    rc = make_parent(o->socket_path, err);
    if (rc != GS_OK)
        return rc;
    if (!(r = calloc(1, sizeof *r)) || !(r->m = gs_runm_new(o->hostname)) ||
        gs_ratelimit_new(&r->rl, err) != GS_OK) {
        if (r)
            gs_runm_free(r->m);
        free(r);
        return gs_err_set(err, GS_ENOMEM, "runs: out of memory");
    }
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->db_lock, NULL);
    r->rec = o->rec;
    r->runs_per_uid = o->runs_per_uid;
    r->resume_timeout_s = o->resume_timeout_s;
    r->conn_per_uid = o->conn_per_uid;
    r->rate_per_uid = o->rate_per_uid;
    r->burst_per_uid = o->burst_per_uid >= 1 ? o->burst_per_uid : 1;
    snprintf(r->hostname, sizeof r->hostname, "%s", o->hostname ? o->hostname : "");
    snprintf(r->grafana_url, sizeof r->grafana_url, "%s", o->grafana_url ? o->grafana_url : "");
    if (o->rec && o->history_path)
        snprintf(r->history_path, sizeof r->history_path, "%s", o->history_path);
    cb.ctx = r;
    if (r->history_path[0])
        gs_runs_rebuild_interrupted(r);
    rc = gs_receiver_start_limited(&r->rx, o->socket_path, 0666, GS_RECEIVER_ANY_UID,
                                   o->conn_per_uid, &cb, err);
    if (rc != GS_OK) {
        gs_runs_close(r);
        return rc;
    }
    *out = r;
    return GS_OK;
}

void gs_runs_render_prom(struct gs_runs *r, struct gs_buf *b)
{
    if (r)
        gs_runm_render(r->m, b);
}

struct gs_runs_stats gs_runs_stats(struct gs_runs *r)
{
    struct gs_runs_stats s;

    pthread_mutex_lock(&r->lock);
    s = r->st;
    pthread_mutex_unlock(&r->lock);
    return s;
}

void gs_runs_close(struct gs_runs *r)
{
    if (!r)
        return;
    /* on_close for every connection: their runs end and are stored, but for those with a
     * resume token, which stay without an end in the history: the next agent puts them back
     * in its table, interrupted, for their senders to resume (runs_rebuild.c) */
    gs_receiver_stop(r->rx);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE; i++) {
        struct run *run = r->live[i];
        if (!run)
            continue;
        if (run->token[0] && run->id > 0 && r->rec && r->resume_timeout_s > 0) {
            gs_log(GS_LOG_INFO, "runs: run %lld left for the next agent to resume",
                   (long long)run->id);
            gs_runm_drop(r->m, run->id, 0);
            r->live[i] = NULL;
            r->st.live--;
            gs_runs_run_unref(r, run);
        } else {
            run_finish(r, run, "agent stopping", 0);
        }
    }
    gs_store_close(r->db);
    gs_runm_free(r->m);
    gs_ratelimit_free(r->rl);
    free(r->in_run);
    gs_attrib_tree_free(&r->tree);
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->db_lock);
    free(r);
}

unsigned gs_runs_stalled(struct gs_runs *r, double now, double factor, double min_s,
                         unsigned char *stalled, unsigned n, unsigned *no_gpu)
{
    memset(stalled, 0, n);
    if (no_gpu)
        *no_gpu = 0;
    return r ? gs_runm_stalled(r->m, now, factor, min_s, stalled, n, no_gpu) : 0;
}
