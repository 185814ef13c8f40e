/*
 * runs.h - training runs seen by the agent. When no `gpuscope run` is around, the Python
 * package sends its step records (src/run/record.h) to the agent's socket; this module owns
 * that socket (a node-wide receiver, src/run/receiver.h, that accepts every local uid),
 * aggregates each run (src/run/agg.h) with the agent's snapshots of the run's GPUs (the ranks'
 * pids, their descendants and the devices their hellos announce: src/run/attrib.h), keeps runs, steps and logged values in the history (schema v3, through the recorder) and answers
 * /api/v1/runs (docs/api.md).
 *
 * A run is one connection's records from its first record (normally the hello) to its end
 * record or the connection's close, whichever comes first; a record after an end starts the
 * next run of that connection. The ranks of one DDP job are one run: a hello with the same
 * SO_PEERCRED uid, the same non-empty run name and world_size > 1 as a run going on that
 * started at most 60 s before joins it (its connection is one more of the run's), and the
 * run ends when all its connections have ended. Runs are attributed to their SO_PEERCRED
 * uid/pid (the first rank's pid), never to what a record claims.
 *
 * At open, runs of this agent left without an end in history.db (the agent was killed) get
 * their report rebuilt from their stored steps, marked "interrupted" (docs/agent.md, RUNS).
 *
 * Threads: records arrive on the receiver's thread; gs_runs_snapshot is called by the
 * sampling thread and never waits (a run busy with a report skips that snapshot, counted); it
 * reads snapshots only, never NVML (the driver's utilization samples come in the snapshot:
 * gs_runs_want);
 * gs_runs_http runs on the HTTP thread. open and close belong to the main thread.
 */
#ifndef GS_AGENT_RUNS_H
#define GS_AGENT_RUNS_H

#include <stddef.h>
#include <stdint.h>

struct gs_err;
struct gs_recorder;
struct gs_snapshot;
struct gs_runs;

/* Runs going on at once; records of more are dropped, counted. */
#define GS_RUNS_MAX_LIVE 64
/* Step records a live run aggregates (40 bytes each, plus ~180 KB a run: at most ~270 MB for
 * 64 runs); later ones are still stored in the history and counted in steps_received. */
#define GS_RUNS_MAX_AGG_STEPS 100000
/* Logged values (loss, learning rate: "log" records) the history keeps of one run: one point
 * per value (56 bytes of history.db each, bench_store_logs: 5.6 MB a run at the bound); later
 * ones are dropped and counted. */
#define GS_RUNS_MAX_LOG_POINTS 100000

struct gs_runs_opts {
    const char *socket_path;  /* bound with mode 0666; its directory is made 0755 */
    struct gs_recorder *rec;  /* NULL (history off): runs are kept while they go on only */
    const char *history_path; /* DATA_DIR/history.db, read for ended runs; NULL with rec */
    const char *hostname;     /* for the reports; may be NULL */
    unsigned runs_per_uid;    /* live runs one uid other than root may hold; 0: no limit */
};

struct gs_runs_stats {
    uint64_t runs_started, runs_ended, runs_refused; /* refused: GS_RUNS_MAX_LIVE reached */
    uint64_t records, rejected, snapshots_skipped, store_errors;
    uint64_t steps_dropped; /* step records not kept: no run (table full) or not stored */
    uint64_t runs_refused_uid; /* of runs_refused: the uid held runs_per_uid already */
    unsigned live;
    uint64_t logs_dropped; /* logged points not kept: over GS_RUNS_MAX_LOG_POINTS or not stored */
};

struct gs_mbuf;
/* Appends the per-rank series of the live runs (gpuscope_run_*, runs_metrics.h) to b. Called
 * by the sampling thread once per cycle; waits only for the series' own short lock. */
void gs_runs_render_prom(struct gs_runs *r, struct gs_mbuf *b);

/* Makes the socket's directory, starts the receiver. GS_EIO (with err) when the socket cannot
 * be bound (another agent listening, no permission). */
int gs_runs_open(struct gs_runs **out, const struct gs_runs_opts *o, struct gs_err *err);

/* What the runs want in the next snapshot besides the sink's usual fields: the driver's
 * utilization samples (GS_WANT_UTIL_SAMPLES) while a run goes on, else 0. */
unsigned gs_runs_want(struct gs_runs *r);

/* Feeds snap to every live run with GPUs in it (run/attrib.h; only those GPUs), with the
 * driver's utilization samples snap carries for them. Never blocks. */
void gs_runs_snapshot(struct gs_runs *r, const struct gs_snapshot *snap);

/* Whose runs an answer shows (the visibility policy's word for a viewer, policy.h): every
 * run, or only those of one uid (the runs' SO_PEERCRED uid). */
struct gs_runs_who {
    int all;     /* 1: every run */
    int64_t uid; /* else only this uid's runs; < 0: none */
};

/* Answers GET path (which starts with "/api/v1/runs") with its query arguments from and limit
 * (NULL: absent) for who (NULL: every run). The list counts and pages only who's runs (and
 * says how many others it left out in "hidden" when who filters); another uid's run, its
 * steps and its logged values (/api/v1/runs/ID/logs) are 404. Returns the HTTP status and a
 * JSON body (malloc'ed, *body_len bytes) in *body, an {"error": "..."} object for
 * 400/404/503; *body is NULL only when out of memory. */
unsigned gs_runs_http(struct gs_runs *r, const char *path, const char *from, const char *limit,
                      const struct gs_runs_who *who, char **body, size_t *body_len);

struct gs_runs_stats gs_runs_stats(struct gs_runs *r);

/* The GPUs (stalled[NVML index], n entries, zeroed first) of live ranks that sent no step for
 * max(min_s, factor x their p95 step time) up to now (gs_runm_stalled): what the agent's
 * training_hang alert combines with the GPU's own state. Returns the stalled ranks. */
unsigned gs_runs_stalled(struct gs_runs *r, double now, double factor, double min_s,
                         unsigned char *stalled, unsigned n);

/* Stops the receiver: every live run ends as if its connection closed (report computed and
 * stored). NULL is allowed. */
void gs_runs_close(struct gs_runs *r);

#endif
