/*
 * The agent's history recorder: the history store (src/store/history.h) plus the one thread
 * that owns it. The sampling thread offers each cycle's snapshot through a small bounded
 * queue of references and never waits on disk; the writer thread appends what it takes,
 * flushes every flush_interval, prunes old rows in bounded batches after each flush, and
 * flushes once more when the recorder closes (SIGTERM/SIGINT). /api/v1/history reads through
 * gs_recorder_query from the HTTP thread.
 *
 * Threads: gs_recorder_offer, gs_recorder_stats and gs_recorder_set_policy never block on
 * I/O (a short queue lock only) and may be called from any thread; gs_recorder_query takes
 * the store's mutex and may wait for one flush or prune batch (milliseconds). open, start and
 * close belong to the agent's main thread.
 *
 * Failures: a write error (full disk) is logged once when it starts and once when it ends;
 * the buffer is retried at every flush (history.h). A snapshot offered while the queue is
 * full is dropped and counted.
 */
#ifndef GS_AGENT_RECORDER_H
#define GS_AGENT_RECORDER_H

#include <stdint.h>

#include "gpuscope/gs_model.h"
#include "store/history.h"
#include "store/usage.h"

struct gs_err;
struct gs_recorder;

struct gs_recorder_stats {
    uint64_t rows_written; /* rows committed (samples, processes, rollups) */
    uint64_t write_errors; /* failed flushes */
    uint64_t dropped;      /* snapshots never written: queue full or store buffer full */
    uint64_t flushes;
    double last_flush_s; /* < 0: none yet */
    double max_flush_s;
    unsigned buffered;         /* snapshots waiting in the store's buffer */
    int integrity_ok;          /* 0 once the scheduled check found history.db damaged */
    uint64_t integrity_checks; /* scheduled checks run */
    double integrity_last_s;   /* the last one's duration */
};

/* Releases the reference gs_recorder_offer took over (called on the writer thread). */
typedef void (*gs_recorder_release_fn)(void *cls);

/* Makes data_dir (0750, parents too) when missing and opens data_dir/history.db. A foreign
 * or corrupt file is refused with the store's error (GS_EPARSE, GS_ENOTSUP) and left as is. */
int gs_recorder_open(struct gs_recorder **out, const char *data_dir, struct gs_err *err);

/* Flush period (seconds) and retentions (seconds); applied from the writer's next wake. */
void gs_recorder_set_policy(struct gs_recorder *r, double flush_interval_s, double raw_s,
                            double rollup_s);

/* How long ended runs and their steps are kept (seconds; 0: for ever); default 30 days.
 * Applied from the writer's next prune. */
void gs_recorder_set_runs_retention(struct gs_recorder *r, double runs_s);

/* Step rows kept per run, also of a run that never ends, and of one uid's live runs together
 * (0: no cap; store/history.h gs_store_prune_live, which also applies the runs' retention to
 * live runs' steps). Applied from the writer's next prune. */
void gs_recorder_set_steps_per_run(struct gs_recorder *r, unsigned steps_per_run,
                                   unsigned steps_per_uid);

/* The period of the scheduled integrity check of history.db (SQLite's quick_check, on the
 * writer thread through a connection of its own; 0: none); default 6 h. A damaged file stops
 * every write and makes gs_recorder_query, the run calls and gs_recorder_damaged fail with
 * GS_EIO and the reason (the HTTP answers are 503). */
/* Per-uid caps on ended runs (gs_store_prune_runs_uid): rows and stored text bytes of one
 * uid's ended runs together, its oldest pruned first after each flush; 0: no cap. */
void gs_recorder_set_ended_caps(struct gs_recorder *r, uint64_t rows_per_uid,
                                uint64_t bytes_per_uid);
void gs_recorder_set_check_interval(struct gs_recorder *r, double check_s);

/* GS_OK, or GS_EIO with the reason once the scheduled check found the file damaged. NULL: OK. */
int gs_recorder_damaged(struct gs_recorder *r, struct gs_err *err);

/* Starts the writer thread. */
int gs_recorder_start(struct gs_recorder *r, struct gs_err *err);

/* Hands snap to the writer, which reads it later and then calls release(cls); snap must stay
 * unchanged until then. Returns 1 when queued, 0 when the queue was full (counted as dropped;
 * the caller keeps its reference and release is not called). */
int gs_recorder_offer(struct gs_recorder *r, const struct gs_snapshot *snap,
                      gs_recorder_release_fn release, void *cls);

struct gs_recorder_stats gs_recorder_stats(struct gs_recorder *r);

/* gs_store_query under the store's mutex (see history.h for arguments and errors). */
int gs_recorder_query(struct gs_recorder *r, unsigned gpu, enum gs_metric metric, double from,
                      double to, double step, gs_store_point_fn fn, void *ctx,
                      enum gs_store_source *source, struct gs_err *err);

/* The run calls of history.h (gs_store_run_begin/step/end) under the store's mutex, for the
 * agent's runs module (runs.h) on the receiver thread, never the sampling thread: each may
 * wait for one flush or prune batch. A step is only buffered (committed by the next flush);
 * begin and end commit at once. */
int gs_recorder_run_begin(struct gs_recorder *r, const struct gs_store_run *run, int64_t *run_id,
                          struct gs_err *err);
int gs_recorder_run_step(struct gs_recorder *r, int64_t run_id, const struct gs_step_rec *rec,
                         int64_t peer_pid, int64_t peer_uid, struct gs_err *err);
int gs_recorder_run_end(struct gs_recorder *r, int64_t run_id, double end_time,
                        const char *report_json, struct gs_err *err);

/* gs_store_run_log (schema v3: a run's logged values, buffered like a step) under the
 * store's mutex, for the runs module on the receiver thread. */
int gs_recorder_run_log(struct gs_recorder *r, int64_t run_id, const struct gs_store_log *rec,
                        struct gs_err *err);

/* Hands n usage rows (store/usage.h) to the writer, which adds them at its next wake (the
 * next snapshot offer, or the flush timer); copied under a short lock, never waits on I/O.
 * Rows past a bound of 65536 waiting are dropped and counted. */
void gs_recorder_usage_add(struct gs_recorder *r, const struct gs_usage_row *rows, unsigned n);

/* gs_store_usage_query under the store's mutex. */
int gs_recorder_usage_query(struct gs_recorder *r, const struct gs_usage_sel *sel,
                            gs_usage_group_fn fn, void *ctx, struct gs_err *err);

/* Stops the writer after it has appended every queued snapshot and flushed (one last try),
 * then closes the store. NULL is allowed. */
void gs_recorder_close(struct gs_recorder *r);

#endif
