/*
 * runs_rebuild.c - the agent's runs left without an end in history.db by an agent that
 * stopped mid-run (contract in runs.h: at open, before the socket accepts anything): each
 * one's report rebuilt from its stored steps and stored, marked "interrupted"; or, for a run
 * with a resume token, put back in the table, interrupted, for its sender to resume.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent/log.h"
#include "agent/recorder.h"
#include "agent/runs_int.h"
#include "base/clock.h"
#include "gpuscope/gs_err.h"
#include "run/agg.h"
#include "run/session.h"
#include "store/runs.h"

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
        char token[65];                      /* its resume token's hash (v4); "": none */
    } todo[64];
    unsigned n;
};

static struct unended u; /* the main thread's, at open only */

static int unended_row(void *ctx, const struct gs_store_run_row *row)
{
    struct unended *u = ctx;

    if (u->n >= sizeof u->todo / sizeof u->todo[0])
        return 1;
    u->todo[u->n].id = row->id;
    u->todo[u->n].start = row->start_time;
    snprintf(u->todo[u->n].name, sizeof u->todo[u->n].name, "%s", row->name);
    snprintf(u->todo[u->n].tags, sizeof u->todo[u->n].tags, "%s", row->tags ? row->tags : "");
    snprintf(u->todo[u->n].token, sizeof u->todo[u->n].token, "%s",
             row->token && strlen(row->token) == 64 ? row->token : "");
    u->n++;
    return 0;
}

/* The first stored step's sender (the run's owner). */
static int first_step(void *ctx, const struct gs_store_step_row *row)
{
    struct refeed *f = ctx;

    f->uid = row->peer_uid;
    f->pid = row->peer_pid;
    return 1;
}

static int replay_step(void *ctx, const struct gs_store_step_row *row)
{
    gs_session_replay_step(ctx, &row->rec);
    return 0;
}

/* A run left going with a resume token and at least one stored step (its owner): back in the
 * table, interrupted, with its stored steps, for its sender to resume within
 * resume_timeout_s; 0 when it cannot be (the caller rebuilds it). db_lock held. */
static int put_back(struct gs_runs *r, struct gs_store *db, unsigned i)
{
    struct refeed f = {.uid = -1, .pid = -1};
    struct gs_err err;
    struct run *run;

    if (!u.todo[i].token[0] || r->resume_timeout_s <= 0)
        return 0;
    gs_err_clear(&err);
    if (gs_store_run_steps(db, u.todo[i].id, 0, 1, first_step, &f, &err) < 0 || f.uid < 0)
        return 0; /* no step stored: nobody known to resume it */
    run = gs_runs_run_restore(r, u.todo[i].id, u.todo[i].start, u.todo[i].name, u.todo[i].tags,
                              u.todo[i].token, (uid_t)f.uid, (pid_t)f.pid);
    if (!run)
        return 0;
    gs_err_clear(&err);
    if (gs_store_run_steps(db, u.todo[i].id, 0, -1, replay_step, run->session, &err) < 0)
        gs_runs_db_warn(&err);
    gs_log(GS_LOG_INFO,
           "runs: run %lld was going on when the agent stopped: %llu stored step(s), kept "
           "interrupted %gs for its sender to resume it",
           (long long)u.todo[i].id, (unsigned long long)gs_session_stats(run->session).steps,
           r->resume_timeout_s);
    return 1;
}

/* Runs of this agent left without an end by an agent that stopped mid-run (killed, power
 * lost): their report is rebuilt from their stored steps (no device figures: the samples
 * of those minutes are in the history, /api/v1/history), marked "interrupted": true in its
 * "run" object, and stored with end_time = the last step's end (else the start), so the
 * retention applies to them. Runs at open, before the socket accepts anything. */
void gs_runs_rebuild_interrupted(struct gs_runs *r)
{
    unsigned done = 0;
    struct gs_store *db;
    struct gs_err err;

    pthread_mutex_lock(&r->db_lock);
    db = gs_runs_db(r);
    u.n = 0;
    gs_err_clear(&err);
    /* 64 a start: a node with more left over would rebuild the rest at the next start */
    if (db && gs_store_runs_unended(db, "agent", 64, unended_row, &u, &err) < 0)
        gs_runs_db_warn(&err);
    for (unsigned i = 0; i < u.n; i++) {
        struct gs_report_meta meta = {.run_name = u.todo[i].name[0] ? u.todo[i].name : NULL,
                                      .hostname = r->hostname,
                                      .exit_code = -1,
                                      .source = "agent"};
        struct refeed f = {.agg = gs_agg_new(), .uid = -1, .pid = -1};
        json_t *rep = NULL, *ro;
        char *text = NULL;
        long long steps = -1;

        if (put_back(r, db, i)) {
            gs_agg_free(f.agg);
            continue;
        }
        f.last_end = u.todo[i].start > 0 ? u.todo[i].start : gs_clock_real_s();
        gs_err_clear(&err);
        if (f.agg && gs_store_run_steps(db, u.todo[i].id, 0, -1, refeed_step, &f, &err) == GS_OK)
            steps = f.n;
        else if (f.agg)
            gs_runs_db_warn(&err);
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
                json_object_set_new(ro, "tags", gs_runs_stored_tags(u.todo[i].tags));
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
