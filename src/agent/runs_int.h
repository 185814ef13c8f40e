/*
 * runs_int.h - what the agent's runs files share (runs.c: the live table, the receiver's
 * callbacks, the sampling thread's feed, life cycle; runs_http.c: the pages; runs_rebuild.c:
 * interrupted runs). Not an API: runs.h is. Locks and threads as runs.c's opening comment says.
 */
#ifndef GS_AGENT_RUNS_INT_H
#define GS_AGENT_RUNS_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "agent/runs.h"
#include "run/agg.h"
#include "run/attrib.h"
#include "run/record.h"
#include "run/session.h"

struct gs_err;
struct gs_ratelimit;
struct gs_receiver;
struct gs_runm;
struct gs_store;

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
    pthread_mutex_t mu; /* the headline cache */
    int refs;           /* under gs_runs.lock */
    /* The connections feeding this run, under gs_runs.lock; only the receiver thread changes
     * them. The run ends when the last one ends. */
    struct rank_conn conns[RUN_MAX_CONNS];
    unsigned n_conns;
    int64_t id;         /* history row id (or a counter when history is off); constant */
    pid_t pid;          /* the first connection's SO_PEERCRED pid; constant */
    uid_t uid;          /* its uid; every rank has the same */
    int32_t world_size; /* the first hello's, > 1 when other ranks may join; constant */
    double start_s;     /* constant */
    /* The run's records (run/session.h): its aggregate, name, counters (steps received,
     * dropped, refused for their time; logged values kept and dropped) and their lock. The
     * sink's context is the run; its ranks are the DDP job's connections ever attached. */
    struct gs_session *session;
    struct gs_runs *owner;
    json_t *headline; /* cached list figures of a live run */
    double headline_t;
    /* Schema v3: the first hello's tags (an object, constant once set). */
    json_t *tags;
    /* The SHA-256 (hex) of the first hello's resume token (record.h "token"); "": none. Set
     * before the run is in the table, constant after. */
    char token[65];
    /* When the run's last connection went away without an end record (unix seconds, under
     * gs_runs.lock); 0: not interrupted. An interrupted run has no connection, waits
     * resume_timeout_s for a hello with its token from its uid, then ends. */
    double interrupted_s;
};

struct gs_runs {
    pthread_mutex_t lock; /* table, stats */
    struct run *live[GS_RUNS_MAX_LIVE];
    struct gs_runs_stats st;
    int64_t next_mem_id; /* ids when history is off */
    /* run_begin calls between their slot and their table entry (their history row is being
     * written), and how many have finished: the run list reads the table, then the history,
     * and starts again when a run began in between (else its row would read "interrupted") */
    unsigned beginning;
    uint64_t begun;
    int full_logged;
    unsigned runs_per_uid;              /* constant (gs_runs_opts) */
    double resume_timeout_s;            /* constant (gs_runs_opts) */
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

/* A reference to the live run of conn_id (or of history id when conn_id is 0), or NULL. */
struct run *gs_runs_run_find(struct gs_runs *r, uint64_t conn_id, int64_t id);
/* Drops a reference; the last one frees the run. */
void gs_runs_run_unref(struct gs_runs *r, struct run *run);
/* The sender's SO_PEERCRED uid/pid in a report's "run" object when the report lacks them. */
void gs_runs_fill_peer(json_t *report, const struct run *run);

/* The HTTP thread's reader of history.db, under db_lock (runs_http.c); NULL when history is
 * off or the file cannot be read. */
struct gs_store *gs_runs_db(struct gs_runs *r);
void gs_runs_db_warn(const struct gs_err *err);
/* A stored run's tags (the run row's JSON text) as an object; {} when none. */
json_t *gs_runs_stored_tags(const char *text);

/* Rebuilds the reports of runs left without an end (runs_rebuild.c); at open only. A run with
 * a resume token and a known owner is not rebuilt but put back in the table, interrupted,
 * with its stored steps (gs_runs_run_restore), for its sender to resume. */
void gs_runs_rebuild_interrupted(struct gs_runs *r);

/* A run the previous agent left going (runs_rebuild.c, at open): a new run object with the
 * stored row's id, start, name, tags, token hash and owner, in the table and interrupted
 * (since now); NULL when the table is full or out of memory. The caller replays its stored
 * steps into run->session (gs_session_replay_step). */
struct run *gs_runs_run_restore(struct gs_runs *r, int64_t id, double start_s, const char *name,
                                const char *tags, const char *token, uid_t uid, pid_t pid);

#endif
