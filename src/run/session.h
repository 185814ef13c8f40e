/*
 * session.h - one training run's record dispatch, the same for `gpuscope run` (one session for
 * CMD's whole run) and the agent (one session a run of its step socket, runs.h): the run's
 * aggregate (run/agg.h), the time rule of step records against the run's start
 * (gs_record_step_time_refusal, run/record.h), what a hello, step, end and log record do to
 * the run, the counters of records received, refused and dropped, and the lock around all
 * of it. What differs between the two receivers (the agent's store and live series, `gpuscope
 * run`'s steps.jsonl and samples.db) is the caller's sink: callbacks, so that src/run never
 * links the store (it goes into the Python package's ctypes library).
 *
 * A record goes through gs_session_record:
 *   - a step dated before 2000, or more than GS_RECORD_BEFORE_RUN_S before the run's start,
 *     is refused: counted (steps_refused), given to sink.refused, nothing else;
 *   - a hello goes to the aggregate (every hello, or with first_rank_hello only while the
 *     session has one rank: gs_session_add_rank), and names the run when it has no name yet;
 *   - a step is counted (steps) and aggregated (at most max_agg_steps), then stored through
 *     sink.store_step: a failure counts it dropped (the report's run.records_dropped);
 *   - a hello's "dropped" (the sender's own count of steps it could not pass on) adds to the
 *     report's run.records_dropped (the largest count seen: the sender's is cumulative);
 *   - an end goes to the aggregate;
 *   - a log record is kept (its number in the run, seq, and its points counted) while the run
 *     has kept fewer than max_log_points points, then stored through sink.store_log (a failure
 *     counts its points dropped); beyond, its points are dropped and sink.refused says so.
 * Every record kept (all but the refused ones) is given to sink.kept before it is stored.
 *
 * Threads: every call may come from any thread; one mutex guards the aggregate, the counters
 * and the name, held for the aggregate's own work only. The sink's callbacks are called on the
 * thread that called gs_session_record, without that mutex: they may call gs_session_* (stats,
 * name), and must not call gs_session_record or gs_session_free.
 */
#ifndef GS_RUN_SESSION_H
#define GS_RUN_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "run/agg.h"
#include "run/receiver.h"
#include "run/record.h"

struct gs_err;
struct gs_snapshot;
struct gs_session;

/* What the session refused (gs_session_sink.refused). */
enum gs_session_refusal {
    GS_SESSION_STEP_TIME = 0, /* a step dated before 2000 or before the run (record.h) */
    GS_SESSION_LOG_FULL,      /* a log record beyond max_log_points */
};

/* What gs_session_record did with a record. */
enum gs_session_verdict {
    GS_SESSION_KEPT = 0, /* aggregated and given to the sink (its store may still have failed) */
    GS_SESSION_REFUSED,  /* refused (sink.refused) */
};

struct gs_session_sink {
    void *ctx;
    /* Every record kept, after the aggregate took it. NULL: none. */
    void (*kept)(void *ctx, const struct gs_peer *peer, const struct gs_record *rec);
    /* Stores a kept step record: GS_OK, anything else counts it dropped. NULL: not stored,
     * never dropped. */
    int (*store_step)(void *ctx, const struct gs_peer *peer, const struct gs_step_rec *step);
    /* Stores a kept log record, the seq-th (0, 1, ...) the run kept: GS_OK, anything else
     * counts its points dropped. NULL: not stored, never dropped. */
    int (*store_log)(void *ctx, const struct gs_peer *peer, const struct gs_record_log *log,
                     int64_t seq);
    /* A record refused, what and why (gs_record_step_time_refusal's reason; "log points" for
     * GS_SESSION_LOG_FULL); nth: the session's refusals of that kind so far, this one
     * included (1: the first, the one worth a word). NULL: none. */
    void (*refused)(void *ctx, const struct gs_peer *peer, const struct gs_record *rec,
                    enum gs_session_refusal what, const char *why, uint64_t nth);
};

struct gs_session_opts {
    /* The run's start, unix seconds (the time rule's reference); <= 0: unknown until
     * gs_session_set_start, and only the 2000 rule applies. */
    double start_s;
    /* Steps aggregated at most; later ones are still counted and stored. 0: no limit. */
    uint64_t max_agg_steps;
    /* Logged points (values of log records) kept at most; 0: no limit. */
    uint64_t max_log_points;
    /* 1: the aggregate takes hellos only while the session has one rank (the agent: a DDP
     * job's report describes its first rank); 0: every hello, the last one wins. */
    int first_rank_hello;
    /* 1: the report's run.records_dropped is known from the start (0 until a step is
     * dropped); 0: null until a step is dropped. */
    int drops_known;
};

struct gs_session_stats {
    uint64_t records;            /* given to gs_session_record */
    uint64_t steps;              /* step records kept (the report's run.steps_received) */
    uint64_t steps_refused;      /* step records refused for their time */
    uint64_t steps_dropped;      /* kept but not stored, or lost before (gs_session_drop_step) */
    uint64_t sender_dropped;     /* the sender's own count (its latest hello's "dropped") */
    uint64_t log_records;        /* log records kept */
    uint64_t log_points;         /* their values */
    uint64_t log_points_dropped; /* values not kept: beyond max_log_points or not stored */
    unsigned ranks;              /* 1 + gs_session_add_rank calls */
};

/* A new session (its aggregate empty, one rank). GS_OK, or GS_ENOMEM with err. sink is
 * copied; o NULL: all defaults (0). */
int gs_session_new(struct gs_session **out, const struct gs_session_opts *o,
                   const struct gs_session_sink *sink, struct gs_err *err);
/* NULL is allowed. */
void gs_session_free(struct gs_session *s);

/* Sets the run's start (unix seconds) for the records that come after. */
void gs_session_set_start(struct gs_session *s, double start_s);

/* One record of the run from peer (the receiver's SO_PEERCRED view), as described above. */
enum gs_session_verdict gs_session_record(struct gs_session *s, const struct gs_peer *peer,
                                          const struct gs_record *rec);

/* A step record of the run lost before it reached the session (the agent's per-uid rate
 * limit): counted dropped. */
void gs_session_drop_step(struct gs_session *s);

/* Names the run when it has no name yet (a stored run put back by the agent). */
void gs_session_set_name(struct gs_session *s, const char *name);

/* A step the run kept before (the agent resuming a stored run after a restart): counted and
 * aggregated like a kept one, neither checked nor given to the sink. */
void gs_session_replay_step(struct gs_session *s, const struct gs_step_rec *step);

/* Another rank (connection) joins the run (first_rank_hello). */
void gs_session_add_rank(struct gs_session *s);

/* Feeds a snapshot of the run's GPUs (in_run[i] marks snap->gpus[i], run/agg.h) and the
 * driver's utilization samples it carries (run/usamp.h) to the aggregate. wait 0: skips it
 * when the session is busy (a report in progress) and returns 0; else 1 when fed. */
int gs_session_snapshot(struct gs_session *s, const struct gs_snapshot *snap,
                        const unsigned char *in_run, int wait);

/* The run's own processes on its GPUs in that snapshot (proc_in_run: run/attrib.h
 * gs_attrib_procs), for its share of a shared GPU (run/agg.h gs_agg_run_procs). */
void gs_session_run_procs(struct gs_session *s, const struct gs_snapshot *snap,
                          const unsigned char *in_run, const unsigned char *proc_in_run);

/* The run's report so far (gs_agg_report with meta). New reference; NULL when out of memory. */
json_t *gs_session_report(struct gs_session *s, const struct gs_report_meta *meta);

struct gs_session_stats gs_session_stats(struct gs_session *s);

/* The run's name (the first non-empty "run" of the hellos it took; "" when none) into out. */
void gs_session_name(struct gs_session *s, char *out, size_t size);

#endif
