/*
 * runs.h - training runs seen by the agent. When no `gpuscope run` is around, the Python
 * package sends its step records (src/run/record.h) to the agent's socket; this module owns
 * that socket (a node-wide receiver, src/run/receiver.h, that accepts every local uid),
 * aggregates each run (src/run/agg.h) with the agent's snapshots of the run's GPUs (the ranks'
 * pids, their descendants and the devices their hellos announce: src/run/attrib.h), keeps runs,
 * steps and logged values in the history (schema v3, through the recorder) and answers /api/v1/runs
 * (docs/api.md).
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
    const char *grafana_url;  /* "grafana_url" of the list (the dashboard's job link); NULL */
    /* Per-uid quotas of the socket (issue 18), for every uid but root; 0: no limit. */
    unsigned conn_per_uid; /* connections held at once (more closed at accept) */
    double rate_per_uid;   /* records per second (token bucket; end records never count) */
    double burst_per_uid;  /* the bucket's size */
    /* A run with a resume token (record.h "token") whose sender went away without an end, or
     * that the previous agent left going, stays "interrupted" this long for its sender to
     * resume it (the same uid, the same token), then ends. 0: ends at once. */
    unsigned resume_timeout_s;
};

/* Why the socket refused something (a connection, a run, a record), each counted in
 * gs_runs_stats.refused and logged once per uid: gpuscope_refused_total{door="steps",reason}
 * on /metrics, with gs_runs_refusal_name as the reason. */
enum gs_runs_refusal {
    GS_RUNS_REF_UID_CONN = 0, /* "uid_connections": conn_per_uid reached */
    GS_RUNS_REF_CONN_FULL,    /* "connections": the receiver's 256 */
    GS_RUNS_REF_UID_RATE,     /* "uid_rate": rate_per_uid (a record dropped) */
    GS_RUNS_REF_RUNS_PER_UID, /* "runs_per_uid": a run refused */
    GS_RUNS_REF_RUNS_FULL,    /* "runs": GS_RUNS_MAX_LIVE going on */
    GS_RUNS_REF_RUN_SHARE,    /* "run_buffer_share": the run's share of the flush buffer */
    GS_RUNS_REF_BUFFER_FULL,  /* "buffer": the flush buffer full */
    GS_RUNS_REF_STEP_TIME,    /* "step_time": dated before 2000 or before its run's hello */
    GS_RUNS_REF_RESUME_UID,   /* "resume_uid": a run's token from another uid (a new run) */
    GS_RUNS_REF_N
};
const char *gs_runs_refusal_name(enum gs_runs_refusal why);

struct gs_runs_stats {
    uint64_t runs_started, runs_ended, runs_refused; /* refused: GS_RUNS_MAX_LIVE reached */
    uint64_t records, rejected, snapshots_skipped, store_errors;
    uint64_t steps_dropped;    /* step records not kept: no run (table full) or not stored */
    uint64_t runs_refused_uid; /* of runs_refused: the uid held runs_per_uid already */
    uint64_t runs_resumed;     /* interrupted runs a sender resumed (its token, its uid) */
    unsigned live;
    uint64_t refused[GS_RUNS_REF_N]; /* by enum gs_runs_refusal */
    uint64_t logs_dropped; /* logged points not kept: over GS_RUNS_MAX_LOG_POINTS or not stored */
};

struct gs_buf;
/* Appends the per-rank series of the live runs (gpuscope_run_*, runs_metrics.h) to b. Called
 * by the sampling thread once per cycle; waits only for the series' own short lock. */
void gs_runs_render_prom(struct gs_runs *r, struct gs_buf *b);

/* Makes the socket's directory, starts the receiver. GS_EIO (with err) when the socket cannot
 * be bound (another agent listening, no permission). */
int gs_runs_open(struct gs_runs **out, const struct gs_runs_opts *o, struct gs_err *err);

/* What the runs want in the next snapshot besides the sink's usual fields: the driver's
 * utilization samples (GS_WANT_UTIL_SAMPLES) while a run goes on, else 0. */
unsigned gs_runs_want(struct gs_runs *r);

/* The id of the live run one of whose ranks (SO_PEERCRED pids) is pid, as decimal text into
 * out (cap bytes): 1; 0 when pid is no live run's rank. A short lock, no I/O. */
int gs_runs_of_pid(struct gs_runs *r, unsigned pid, char *out, size_t cap);

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

/* POST /api/v1/runs/ID/capture?steps=N (path and the steps argument, NULL: 5; docs/api.md):
 * asks every rank of live run ID for a profiler window of its next `steps` steps (a control message
 * over its step-record connection, run/control.h; the Python package opens the window). Only an
 * admin, or the run's owner (uid >= 0), may ask: another user's run is 404 like a missing or ended
 * one. 202 with {"run","request","steps","ranks","sent"}; 503 when no rank could be reached; 400
 * for steps outside 1..1000. *body as gs_runs_http's. */
unsigned gs_runs_capture(struct gs_runs *r, const char *path, const char *steps_arg, int admin,
                         int64_t uid, char **body, size_t *len);

/* The GPUs (stalled[NVML index], n entries, zeroed first) of live ranks that sent no step for
 * max(min_s, factor x their p95 step time) up to now (gs_runm_stalled): what the agent's
 * training_hang alert combines with the GPU's own state. Returns the stalled ranks; *no_gpu
 * (may be NULL): those with no known GPU. The runs API's "stalled" shows the verdict. */
unsigned gs_runs_stalled(struct gs_runs *r, double now, double factor, double min_s,
                         unsigned char *stalled, unsigned n, unsigned *no_gpu);

/* Stops the receiver: every live run ends as if its connection closed (report computed and
 * stored), but for a run with a resume token (resume_timeout_s > 0, history on), left without
 * an end in the history for the next agent to put back. NULL is allowed. */
void gs_runs_close(struct gs_runs *r);

#endif
