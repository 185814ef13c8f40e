/*
 * runs.c - training runs on the agent's step-record socket (contract in runs.h).
 *
 * Live runs sit in a fixed table of GS_RUNS_MAX_LIVE pointers under `lock`, which is held for
 * a few instructions only. Each run has its own mutex `mu` around its aggregate and counters:
 * the receiver thread takes it per record, the HTTP thread while it computes a live report
 * (milliseconds for a long run), and the sampling thread only with trylock, so a report in
 * progress costs that run one snapshot (counted) and never delays a sampling cycle. A run is
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
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/log.h"
#include "agent/ratelimit.h"
#include "agent/recorder.h"
#include "agent/runs_metrics.h"
#include "backend/procfs.h"
#include "base/clock.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"
#include "run/agg.h"
#include "run/attrib.h"
#include "run/control.h"
#include "run/receiver.h"
#include "run/usamp.h"
#include "store/history.h"
#include "store/runs.h"

#define LIST_LIMIT_DEFAULT 100
#define STEPS_LIMIT_DEFAULT 100
#define LIMIT_MAX 1000
#define HEADLINE_TTL_S 5.0 /* a live run's list figures are recomputed at most this often */
/* DDP: a rank's hello joins a live run of the same uid and name whose first hello came at
 * most this long before (docs/agent.md, RUNS). */
#define DDP_JOIN_S 60.0

/* Connections (ranks) one run holds at once; more ranks of a job become runs of their own. */
#define RUN_MAX_CONNS 64

struct rank_conn {
    uint64_t conn_id;
    pid_t pid; /* SO_PEERCRED */
    /* Its hello's CUDA devices and the CUDA_VISIBLE_DEVICES they mean (from the sender's
     * /proc/PID/environ; unknown when the agent may not read it): run/attrib.h. */
    int32_t devices[GS_RECORD_MAX_DEVICES];
    unsigned n_devices;
    int cvd_known;
    char cvd[512];
};

struct run {
    pthread_mutex_t mu; /* everything below but refs, conns and n_conns */
    int refs;           /* under gs_runs.lock */
    /* The connections feeding this run, under gs_runs.lock; only the receiver thread changes
     * them. The run ends when the last one ends. */
    struct rank_conn conns[RUN_MAX_CONNS];
    unsigned n_conns;
    unsigned n_ranks_seen; /* connections ever attached (the ranks of a DDP job) */
    int64_t id;            /* history row id (or a counter when history is off); constant */
    pid_t pid;             /* the first connection's SO_PEERCRED pid; constant */
    uid_t uid;             /* its uid; every rank has the same */
    int32_t world_size;    /* the first hello's, > 1 when other ranks may join; constant */
    double start_s;        /* constant */
    char name[GS_RECORD_STR];
    uint64_t steps;        /* step records received */
    uint64_t dropped;      /* of those, not stored in the history (the report's records_dropped) */
    uint64_t refused_time; /* step records refused for their timestamps (not in steps) */
    struct gs_agg *agg;
    json_t *headline; /* cached list figures of a live run */
    double headline_t;
    /* Schema v3: the first hello's tags (an object, constant once set), and the run's logged
     * values: records kept (their seq), points kept and points dropped (beyond
     * GS_RUNS_MAX_LOG_POINTS or not stored), under mu. */
    json_t *tags;
    uint64_t log_records, log_points, logs_dropped;
};

struct gs_runs {
    pthread_mutex_t lock; /* table, stats */
    struct run *live[GS_RUNS_MAX_LIVE];
    struct gs_runs_stats st;
    int64_t next_mem_id; /* ids when history is off */
    int full_logged;
    unsigned runs_per_uid;              /* constant (gs_runs_opts) */
    unsigned conn_per_uid;              /* constant: the receiver's (for the log) */
    double rate_per_uid, burst_per_uid; /* constant */
    struct gs_ratelimit *rl;            /* per-uid record buckets (the receiver thread's calls) */
    /* (uid, reason) pairs whose refusal was logged; a full list forgets the oldest */
    struct {
        uid_t uid;
        int why;
    } logged[256];
    unsigned n_logged;

    struct gs_receiver *rx;
    struct gs_recorder *rec;
    char hostname[256];
    char grafana_url[256]; /* gs_runs_opts; "": none */
    struct gs_runm *m;     /* the per-rank series of /metrics (runs_metrics.h) */

    pthread_mutex_t db_lock; /* the HTTP thread's read connection */
    struct gs_store *db;     /* a reader of history.db (store/runs.h) */
    char history_path[PATH_MAX];

    /* the sampling thread's own: per live run (table order) the GPUs it uses */
    unsigned char *in_run;
    unsigned in_run_cap;        /* GPUs per row */
    struct gs_attrib_tree tree; /* the ancestry of a snapshot's GPU processes */
};

static double real_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void count(struct gs_runs *r, uint64_t *field)
{
    pthread_mutex_lock(&r->lock);
    (*field)++;
    pthread_mutex_unlock(&r->lock);
}

const char *gs_runs_refusal_name(enum gs_runs_refusal why)
{
    static const char *const names[GS_RUNS_REF_N] = {
        "uid_connections",  "connections", "uid_rate", "runs_per_uid", "runs",
        "run_buffer_share", "buffer",      "step_time"};

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

static void run_unref(struct gs_runs *r, struct run *run)
{
    int last;

    pthread_mutex_lock(&r->lock);
    last = --run->refs == 0;
    pthread_mutex_unlock(&r->lock);
    if (!last)
        return;
    gs_agg_free(run->agg);
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
static struct run *run_find(struct gs_runs *r, uint64_t conn_id, int64_t id)
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
    double now = real_s();
    struct rank_conn conn = {.conn_id = peer->conn_id, .pid = peer->pid};

    if (rec->type != GS_REC_HELLO || !h->run[0] || h->world_size <= 1)
        return NULL;
    conn_devices(&conn, peer, rec);
    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE && !run; i++) {
        struct run *c = r->live[i];
        if (c && c->uid == peer->uid && c->world_size > 1 && c->n_conns > 0 &&
            c->n_conns < RUN_MAX_CONNS && strcmp(c->name, h->run) == 0 &&
            now - c->start_s <= DDP_JOIN_S && now >= c->start_s - 1.0)
            run = c;
    }
    if (run) {
        run->conns[run->n_conns] = conn;
        run->n_conns++;
        run->n_ranks_seen++;
        run->refs++;
    }
    pthread_mutex_unlock(&r->lock);
    if (run)
        gs_log(GS_LOG_INFO, "runs: pid %ld (rank %d) joins run %lld '%s'", (long)peer->pid,
               (int)h->rank, (long long)run->id, run->name);
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

/* A logged record of run (schema v3): into the history with the run's next seq, at most
 * GS_RUNS_MAX_LOG_POINTS points a run; beyond, or when the store refuses it, its points are
 * counted in the run's logs_dropped (the logs page's "dropped") and the agent's stats. Not
 * kept when history is off. */
_Static_assert(GS_RECORD_FACT_KEY == GS_STORE_LOG_KEY && GS_RECORD_MAX_LOG <= GS_STORE_LOG_MAX_KEYS,
               "a log record's keys fit the store's");

static void run_keep_log(struct gs_runs *r, struct run *run, const struct gs_record_log *l)
{
    struct gs_store_log sl = {.step = l->step, .t = l->t, .rank = l->rank};
    struct gs_err err;
    int over, first_over = 0;

    if (!r->rec || run->id <= 0 || l->n == 0 || l->n > GS_STORE_LOG_MAX_KEYS)
        return;
    pthread_mutex_lock(&run->mu);
    over = run->log_points + l->n > GS_RUNS_MAX_LOG_POINTS;
    if (over) {
        first_over = run->logs_dropped == 0;
        run->logs_dropped += l->n;
    } else {
        sl.seq = (int64_t)run->log_records++;
        run->log_points += l->n;
    }
    pthread_mutex_unlock(&run->mu);
    if (over) {
        pthread_mutex_lock(&r->lock);
        r->st.logs_dropped += l->n;
        pthread_mutex_unlock(&r->lock);
        if (first_over)
            gs_log(GS_LOG_WARN,
                   "runs: run %lld: %d logged values kept; later ones are dropped "
                   "(counted)",
                   (long long)run->id, GS_RUNS_MAX_LOG_POINTS);
        return;
    }
    sl.n = l->n;
    for (unsigned i = 0; i < l->n; i++) {
        memcpy(sl.key[i], l->key[i], GS_STORE_LOG_KEY);
        sl.key[i][GS_STORE_LOG_KEY - 1] = '\0';
        sl.value[i] = l->val[i];
    }
    gs_err_clear(&err);
    if (gs_recorder_run_log(r->rec, run->id, &sl, &err) != GS_OK) {
        pthread_mutex_lock(&run->mu);
        run->logs_dropped += l->n;
        pthread_mutex_unlock(&run->mu);
        pthread_mutex_lock(&r->lock);
        r->st.logs_dropped += l->n;
        r->st.store_errors++;
        pthread_mutex_unlock(&r->lock);
    }
}

/* Makes the run of a connection's first record; NULL when the table is full or out of
 * memory. Only the receiver thread inserts, so nobody races it to the same conn_id. */
static struct run *run_begin(struct gs_runs *r, const struct gs_peer *peer,
                             const struct gs_record *rec)
{
    struct run *run = calloc(1, sizeof *run);
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
        free(run);
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
    if (slot == GS_RUNS_MAX_LIVE || !run) {
        int log = !r->full_logged;
        r->st.runs_refused++;
        r->full_logged = 1;
        pthread_mutex_unlock(&r->lock);
        free(run);
        refuse(r, peer->uid, GS_RUNS_REF_RUNS_FULL); /* logged once until a slot frees */
        if (log)
            gs_log(GS_LOG_WARN, "runs: %d runs going on; records of new ones are dropped",
                   GS_RUNS_MAX_LIVE);
        return NULL;
    }
    pthread_mutex_unlock(&r->lock);
    if (!(run->agg = gs_agg_new())) {
        free(run);
        count(r, &r->st.runs_refused);
        return NULL;
    }
    gs_agg_set_records_dropped(run->agg, 0); /* known: none lost yet */
    pthread_mutex_init(&run->mu, NULL);
    run->refs = 1;
    run->conns[0].conn_id = peer->conn_id;
    run->conns[0].pid = peer->pid;
    conn_devices(&run->conns[0], peer, rec);
    run->n_conns = 1;
    run->n_ranks_seen = 1;
    run->pid = peer->pid;
    run->uid = peer->uid;
    run->start_s = real_s();
    if (rec->type == GS_REC_HELLO) {
        snprintf(run->name, sizeof run->name, "%s", rec->u.hello.run);
        run->world_size = rec->u.hello.world_size;
    }
    char *tags_text = run_tags(run, rec);
    gs_err_clear(&err);
    if (r->rec) {
        struct gs_store_run sr = {.name = run->name[0] ? run->name : NULL,
                                  .source = "agent",
                                  .hostname = r->hostname[0] ? r->hostname : NULL,
                                  .start_time = run->start_s,
                                  .tags = tags_text};
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
    r->st.runs_started++;
    r->st.live++;
    pthread_mutex_unlock(&r->lock);
    gs_log(GS_LOG_INFO, "runs: run %lld '%s' started (pid %ld, uid %lu)", (long long)run->id,
           run->name, (long)run->pid, (unsigned long)run->uid);
    return run;
}

/* The sender's SO_PEERCRED uid/pid in a report's "run" object also when no hello came (the
 * aggregate knows them from the hello only). */
static void fill_peer(json_t *report, const struct run *run)
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
static void run_report_logs(json_t *report, struct run *run)
{
    uint64_t dropped;

    pthread_mutex_lock(&run->mu);
    dropped = run->logs_dropped;
    pthread_mutex_unlock(&run->mu);
    if (dropped && json_is_object(json_object_get(report, "run")))
        json_object_set_new(json_object_get(report, "run"), "log_points_dropped",
                            json_integer((json_int_t)dropped));
}

/* Removes run from the table (the caller holds a reference), stores its report, drops the
 * table's reference. */
static void run_finish(struct gs_runs *r, struct run *run, const char *why)
{
    struct gs_report_meta meta = {.hostname = r->hostname, .exit_code = -1, .source = "agent"};
    struct gs_err err;
    json_t *report;
    char *text = NULL;
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
    pthread_mutex_lock(&run->mu);
    meta.run_name = run->name[0] ? run->name : NULL;
    report = gs_agg_report(run->agg, &meta);
    pthread_mutex_unlock(&run->mu);
    fill_peer(report, run);
    /* Every step received, also those beyond GS_RUNS_MAX_AGG_STEPS: the list's count. */
    if (json_is_object(json_object_get(report, "run")))
        json_object_set_new(json_object_get(report, "run"), "steps_received",
                            json_integer((json_int_t)run->steps));
    run_report_logs(report, run);
    if (report)
        text = json_dumps(report, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(report);
    gs_err_clear(&err);
    if (r->rec && run->id > 0 &&
        gs_recorder_run_end(r->rec, run->id, real_s(), text, &err) != GS_OK) {
        gs_log(GS_LOG_WARN, "runs: history: run %lld: %s", (long long)run->id, err.msg);
        count(r, &r->st.store_errors);
    }
    free(text);
    gs_log(GS_LOG_INFO, "runs: run %lld ended (%s), %llu step record(s)", (long long)run->id, why,
           (unsigned long long)run->steps);
    run_unref(r, run); /* the table's */
}

/* A connection of run ended (end record or close): the run ends with its last one. */
static void run_detach(struct gs_runs *r, struct run *run, uint64_t conn_id, const char *why)
{
    unsigned left;

    pthread_mutex_lock(&r->lock);
    for (unsigned k = 0; k < run->n_conns; k++)
        if (run->conns[k].conn_id == conn_id) {
            run->conns[k] = run->conns[--run->n_conns];
            break;
        }
    left = run->n_conns;
    pthread_mutex_unlock(&r->lock);
    gs_runm_drop(r->m, run->id, conn_id);
    if (left == 0)
        run_finish(r, run, why);
}

/* ---- receiver callbacks (receiver thread) ---- */

static void on_record(void *ctx, const struct gs_peer *peer, const struct gs_record *rec)
{
    struct gs_runs *r = ctx;
    struct run *run = run_find(r, peer->conn_id, 0);
    int late = run != NULL; /* a record of a connection that has its run */
    struct gs_err err;

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
            if (run) {
                pthread_mutex_lock(&run->mu);
                gs_agg_set_records_dropped(run->agg, ++run->dropped);
                pthread_mutex_unlock(&run->mu);
            }
        }
        if (run)
            run_unref(r, run);
        return;
    }
    if (!run && (run = run_join(r, peer, rec)) != NULL) {
        /* another rank of a DDP job: its steps only (the agg keeps the first hello) */
        if (rec->type == GS_REC_HELLO) {
            gs_runm_hello(r->m, run->id, peer->conn_id, run->name, &rec->u.hello);
            run_unref(r, run);
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
    /* Steps dated before 2000 or before their run began (its first record, normally the
     * hello): the rule of run/record.h, shared with `gpuscope run`. */
    const char *bad_time =
        rec->type == GS_REC_STEP ? gs_record_step_time_refusal(&rec->u.step, run->start_s) : NULL;
    if (bad_time) {
        uint64_t n;
        count(r, &r->st.steps_dropped);
        refuse(r, peer->uid, GS_RUNS_REF_STEP_TIME); /* logged once per run below */
        pthread_mutex_lock(&run->mu);
        n = ++run->refused_time;
        pthread_mutex_unlock(&run->mu);
        if (n == 1) /* once per run */
            gs_log(GS_LOG_WARN,
                   "runs: run %lld (pid %ld uid %lu): step %llu refused: t0 %.3f is %s; "
                   "further such steps of this run are dropped without a word",
                   (long long)run->id, (long)peer->pid, (unsigned long)peer->uid,
                   (unsigned long long)rec->u.step.step, rec->u.step.t_begin, bad_time);
        run_unref(r, run);
        return;
    }
    pthread_mutex_lock(&run->mu);
    switch (rec->type) {
    case GS_REC_HELLO:
        /* a hello on a connection that has one (or a late one): the first one counts */
        if (run->n_ranks_seen == 1)
            gs_agg_hello(run->agg, &rec->u.hello, peer->pid, peer->uid);
        if (!run->name[0])
            snprintf(run->name, sizeof run->name, "%s", rec->u.hello.run);
        gs_runm_hello(r->m, run->id, peer->conn_id, run->name, &rec->u.hello);
        break;
    case GS_REC_STEP:
        gs_runm_step(r->m, run->id, peer->conn_id, run->name, &rec->u.step);
        run->steps++;
        if (run->steps <= GS_RUNS_MAX_AGG_STEPS)
            gs_agg_step(run->agg, &rec->u.step);
        break;
    case GS_REC_END:
        gs_agg_end(run->agg, &rec->u.end);
        break;
    case GS_REC_LOG: /* kept in the history below (run_keep_log) */
        break;
    }
    pthread_mutex_unlock(&run->mu);
    if (rec->type == GS_REC_STEP && r->rec && run->id > 0) {
        int rc;

        gs_err_clear(&err);
        rc = gs_recorder_run_step(r->rec, run->id, &rec->u.step, peer->pid, peer->uid, &err);
        if (rc == GS_EPERM || rc == GS_ENOMEM) {
            /* The run's share of the flush buffer (store/history.h), or the buffer full:
             * this run's record is lost, nobody else's. */
            enum gs_runs_refusal why =
                rc == GS_EPERM ? GS_RUNS_REF_RUN_SHARE : GS_RUNS_REF_BUFFER_FULL;
            if (refuse(r, peer->uid, why))
                gs_log(GS_LOG_WARN, "runs: run %lld (uid %lu): %s (logged once per uid)",
                       (long long)run->id, (unsigned long)peer->uid, err.msg);
        } else if (rc != GS_OK) {
            count(r, &r->st.store_errors);
        }
        if (rc != GS_OK) {
            count(r, &r->st.steps_dropped);
            pthread_mutex_lock(&run->mu);
            gs_agg_set_records_dropped(run->agg, ++run->dropped);
            pthread_mutex_unlock(&run->mu);
        }
    }
    if (rec->type == GS_REC_LOG)
        run_keep_log(r, run, &rec->u.log);
    if (rec->type == GS_REC_END)
        run_detach(r, run, peer->conn_id, "end record");
    run_unref(r, run);
}

static void on_close(void *ctx, const struct gs_peer *peer)
{
    struct gs_runs *r = ctx;
    struct run *run = run_find(r, peer->conn_id, 0);

    if (!run)
        return;
    run_detach(r, run, peer->conn_id, "connection closed");
    run_unref(r, run);
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
            if (hit)
                gs_runm_gpu(r->m, runs[k]->id, rc->conn_id, (int)snap->gpus[hit - one].index);
        }
        pthread_mutex_unlock(&r->lock);
        any[k] = memchr(row, 1, ng) != NULL;
    }
    /* With the snapshot, the driver's utilization samples it carries (gs_runs_want asked
     * for them; run/usamp.h). A run skipped below misses both. */
    for (unsigned k = 0; k < n; k++) {
        struct run *run = runs[k];

        if (any[k]) {
            if (pthread_mutex_trylock(&run->mu) == 0) {
                gs_agg_snapshot(run->agg, snap, r->in_run + (size_t)k * ng, snap->t_real);
                gs_usamp_feed(run->agg, snap, r->in_run + (size_t)k * ng);
                pthread_mutex_unlock(&run->mu);
            } else {
                count(r, &r->st.snapshots_skipped);
            }
        }
        run_unref(r, run);
    }
}

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
                                       "gpu_busy_estimate_percent"};
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
static struct gs_store *db_get(struct gs_runs *r)
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

static void db_warn(const struct gs_err *err)
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
    json_object_set_new(o, "cuda_events", json_integer((s->flags & GS_STEP_CUDA_EVENTS) != 0));
    json_object_set_new(o, "mem_allocated", bytes_or_null(s->mem_allocated));
    json_object_set_new(o, "mem_reserved", bytes_or_null(s->mem_reserved));
    json_object_set_new(o, "mem_peak_allocated", bytes_or_null(s->mem_peak_allocated));
    json_object_set_new(o, "mem_peak_reserved", bytes_or_null(s->mem_peak_reserved));
    json_object_set_new(o, "mem_total", bytes_or_null(s->mem_total));
    return o;
}

static json_t *live_item(struct gs_runs *r, struct run *run)
{
    json_t *it;
    double now = real_s();

    pthread_mutex_lock(&run->mu);
    if (!run->headline || now - run->headline_t > HEADLINE_TTL_S) {
        struct gs_report_meta meta = {
            .run_name = run->name, .hostname = r->hostname, .exit_code = -1, .source = "agent"};
        json_t *rep = gs_agg_report(run->agg, &meta);
        if (rep) {
            json_decref(run->headline);
            run->headline = json_object();
            headline(run->headline, rep);
            run->headline_t = now;
            json_decref(rep);
        }
    }
    it = json_pack("{s:I, s:s, s:I, s:o, s:I, s:f, s:n, s:I, s:s}", "id", (json_int_t)run->id,
                   "name", run->name, "uid", (json_int_t)run->uid, "user", user_of(run->uid), "pid",
                   (json_int_t)run->pid, "start", run->start_s, "end", "steps",
                   (json_int_t)run->steps, "state", "running");
    if (it && run->headline)
        json_object_update(it, run->headline);
    pthread_mutex_unlock(&run->mu);
    if (it) /* constant once the run is in the table */
        json_object_set_new(it, "tags", run->tags ? json_incref(run->tags) : json_object());
    return it;
}

/* A stored run's tags (the run row's JSON text, schema v3) as an object; {} when none. */
static json_t *stored_tags(const char *text)
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
    if (it)
        json_object_set_new(it, "tags", stored_tags(row->tags));
    json_array_append_new(ctx, it);
    return 0;
}

/* The list: running runs first, newest first, then the history's, newest first; only the
 * runs who may see are counted and paged (the others are "hidden" when who filters). */
static unsigned http_list(struct gs_runs *r, long long from, long long limit,
                          const struct gs_runs_who *who, char **body, size_t *len)
{
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
                run_unref(r, runs[i]);
            json_decref(list);
            return reply_error(503, body, len, "history.db could not be read: %s", err.msg);
        }
    }
    pthread_mutex_lock(&r->db_lock);
    if ((db = db_get(r)) != NULL) {
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
            db_warn(&err);
        total += shown;
        if (sel.owner_only && all > shown)
            hidden += all - shown;
    }
    pthread_mutex_unlock(&r->db_lock);
    for (unsigned i = 0; i < n; i++)
        run_unref(r, runs[i]);
    doc = json_pack("{s:I, s:I, s:I, s:o}", "total", (json_int_t)total, "from", (json_int_t)from,
                    "limit", (json_int_t)limit, "runs", list);
    if (doc && who && !who->all)
        json_object_set_new(doc, "hidden", json_integer(hidden));
    if (doc && r->grafana_url[0])
        json_object_set_new(doc, "grafana_url", json_string(r->grafana_url));
    return reply(doc, doc ? 200 : 500, body, len);
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
    if ((db = db_get(r)) == NULL)
        return;
    gs_err_clear(&err);
    rc = gs_store_run_get(db, &sel, id, stored_row, out, &err);
    if (rc != GS_OK && rc != GS_ENOTFOUND) {
        db_warn(&err);
        snprintf(out->fault, sizeof out->fault, "%s", err.msg[0] ? err.msg : gs_strerror(rc));
    }
}

static unsigned http_report(struct gs_runs *r, int64_t id, const struct gs_runs_who *who,
                            char **body, size_t *len)
{
    struct run *run = run_find(r, 0, id);
    struct stored_run s;

    if (run && !who_sees(who, run->uid)) {
        run_unref(r, run);
        return reply_error(404, body, len, "no run %lld", (long long)id);
    }
    if (run) {
        struct gs_report_meta meta = {.hostname = r->hostname, .exit_code = -1, .source = "agent"};
        json_t *rep;
        uint64_t steps;
        pthread_mutex_lock(&run->mu);
        meta.run_name = run->name[0] ? run->name : NULL;
        rep = gs_agg_report(run->agg, &meta);
        fill_peer(rep, run);
        steps = run->steps;
        pthread_mutex_unlock(&run->mu);
        run_unref(r, run);
        if (!rep)
            return reply_error(500, body, len, "out of memory");
        annotate(rep, id, "running", steps);
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
    struct run *run = run_find(r, 0, id);

    memset(pg, 0, sizeof *pg);
    pg->s.uid = -1;
    pg->exists = run != NULL;
    pg->visible = run && who_sees(who, run->uid);
    if (run) {
        pthread_mutex_lock(&run->mu);
        pg->logs_dropped = run->logs_dropped;
        pthread_mutex_unlock(&run->mu);
        run_unref(r, run);
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
    if (pg->visible && !pg->s.fault[0] && (pg->db = db_get(r)) != NULL) {
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
    db_warn(err);
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

/* ---- interrupted runs ---- */

/* A stored run's steps fed to an aggregate (at most GS_RUNS_MAX_AGG_STEPS): their count, the
 * first step's sender and the last t_end. */
struct refeed {
    struct gs_agg *agg;
    long long n;
    int64_t uid, pid;
    double last_end;
};

static int refeed_step(void *ctx, const struct gs_store_step_row *row)
{
    struct refeed *f = ctx;

    if (f->n == 0) {
        f->pid = row->peer_pid;
        f->uid = row->peer_uid;
    }
    if (row->rec.t_end > f->last_end)
        f->last_end = row->rec.t_end;
    if (++f->n <= GS_RUNS_MAX_AGG_STEPS)
        gs_agg_step(f->agg, &row->rec);
    return 0;
}

struct unended {
    struct {
        int64_t id;
        double start;
        char name[GS_RECORD_STR];
        char tags[GS_RECORD_TAGS_BYTES + 1]; /* the run row's (schema v3); "": none */
    } todo[64];
    unsigned n;
};

static int unended_row(void *ctx, const struct gs_store_run_row *row)
{
    struct unended *u = ctx;

    if (u->n >= sizeof u->todo / sizeof u->todo[0])
        return 1;
    u->todo[u->n].id = row->id;
    u->todo[u->n].start = row->start_time;
    snprintf(u->todo[u->n].name, sizeof u->todo[u->n].name, "%s", row->name);
    snprintf(u->todo[u->n].tags, sizeof u->todo[u->n].tags, "%s", row->tags ? row->tags : "");
    u->n++;
    return 0;
}

/* Runs of this agent left without an end by an agent that stopped mid-run (killed, power
 * lost): their report is rebuilt from their stored steps (no device figures: the samples
 * of those minutes are in the history, /api/v1/history), marked "interrupted": true in its
 * "run" object, and stored with end_time = the last step's end (else the start), so the
 * retention applies to them. Runs at open, before the socket accepts anything. */
static void rebuild_interrupted(struct gs_runs *r)
{
    static struct unended u; /* the main thread's, at open only */
    unsigned done = 0;
    struct gs_store *db;
    struct gs_err err;

    pthread_mutex_lock(&r->db_lock);
    db = db_get(r);
    u.n = 0;
    gs_err_clear(&err);
    /* 64 a start: a node with more left over would rebuild the rest at the next start */
    if (db && gs_store_runs_unended(db, "agent", 64, unended_row, &u, &err) < 0)
        db_warn(&err);
    for (unsigned i = 0; i < u.n; i++) {
        struct gs_report_meta meta = {.run_name = u.todo[i].name[0] ? u.todo[i].name : NULL,
                                      .hostname = r->hostname,
                                      .exit_code = -1,
                                      .source = "agent"};
        struct refeed f = {.agg = gs_agg_new(), .uid = -1, .pid = -1};
        json_t *rep = NULL, *ro;
        char *text = NULL;
        long long steps = -1;

        f.last_end = u.todo[i].start > 0 ? u.todo[i].start : real_s();
        gs_err_clear(&err);
        if (f.agg && gs_store_run_steps(db, u.todo[i].id, 0, -1, refeed_step, &f, &err) == GS_OK)
            steps = f.n;
        else if (f.agg)
            db_warn(&err);
        rep = steps >= 0 ? gs_agg_report(f.agg, &meta) : NULL;
        gs_agg_free(f.agg);
        ro = json_object_get(rep, "run");
        if (json_is_object(ro)) {
            if (f.uid >= 0 && !json_is_integer(json_object_get(ro, "uid")))
                json_object_set_new(ro, "uid", json_integer(f.uid));
            if (f.pid >= 0 && !json_is_integer(json_object_get(ro, "pid")))
                json_object_set_new(ro, "pid", json_integer(f.pid));
            json_object_set_new(ro, "steps_received", json_integer(steps));
            json_object_set_new(ro, "interrupted", json_true());
            if (u.todo[i].tags[0]) /* the hello's tags, kept in the run row */
                json_object_set_new(ro, "tags", stored_tags(u.todo[i].tags));
            text = json_dumps(rep, JSON_COMPACT | JSON_REAL_PRECISION(15));
        }
        json_decref(rep);
        gs_err_clear(&err);
        if (!text) {
            gs_log(GS_LOG_WARN, "runs: interrupted run %lld: cannot rebuild its report",
                   (long long)u.todo[i].id);
        } else if (gs_recorder_run_end(r->rec, u.todo[i].id, f.last_end, text, &err) != GS_OK) {
            gs_log(GS_LOG_WARN, "runs: history: run %lld: %s", (long long)u.todo[i].id, err.msg);
        } else {
            done++;
            gs_log(GS_LOG_INFO,
                   "runs: run %lld was interrupted (agent stopped); report rebuilt from %lld "
                   "stored step(s)",
                   (long long)u.todo[i].id, steps);
        }
        free(text);
    }
    pthread_mutex_unlock(&r->db_lock);
    if (done)
        gs_log(GS_LOG_INFO, "runs: %u interrupted run(s) rebuilt", done);
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
                                .on_refuse = on_refuse};
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
    r->conn_per_uid = o->conn_per_uid;
    r->rate_per_uid = o->rate_per_uid;
    r->burst_per_uid = o->burst_per_uid >= 1 ? o->burst_per_uid : 1;
    snprintf(r->hostname, sizeof r->hostname, "%s", o->hostname ? o->hostname : "");
    snprintf(r->grafana_url, sizeof r->grafana_url, "%s", o->grafana_url ? o->grafana_url : "");
    if (o->rec && o->history_path)
        snprintf(r->history_path, sizeof r->history_path, "%s", o->history_path);
    cb.ctx = r;
    if (r->history_path[0])
        rebuild_interrupted(r);
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
    gs_receiver_stop(r->rx); /* on_close for every connection: their runs end and are stored */
    for (unsigned i = 0; i < GS_RUNS_MAX_LIVE; i++)
        if (r->live[i])
            run_finish(r, r->live[i], "agent stopping");
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
                         unsigned char *stalled, unsigned n)
{
    memset(stalled, 0, n);
    return r ? gs_runm_stalled(r->m, now, factor, min_s, stalled, n) : 0;
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
    c.id = (int64_t)(real_s() * 1e6);
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
