/*
 * The history store: snapshots written to an SQLite file (history.db) for /api/v1/history.
 *
 * The agent appends every snapshot (a copy of the kept metrics goes into a bounded in-memory
 * buffer), flushes the buffer every few seconds in one transaction, prunes old rows in small
 * batches, and answers range queries from raw samples or per-minute rollups. The schema, the
 * reasons for its layout and example hand queries are in docs/history.md.
 *
 * Threads: a store is not thread-safe; one thread (the agent's writer) owns it, or callers
 * serialise every call with a mutex. Reading the same file from another connection (the
 * sqlite3 shell, a second store) is fine: the file is in WAL mode.
 *
 * Failures: a write error (full disk, I/O error) never loses the buffer at once; the flush
 * returns GS_EIO, the rows stay buffered (bounded: when the cap is hit the oldest snapshot is
 * dropped and counted) and the next flush retries. The caller keeps serving live data and logs
 * once per episode: when gs_store_stats().consecutive_failures == 1 after a failed flush, and
 * "recovered" when a flush succeeds while it was > 0 (read the stats before that flush).
 */
#ifndef GS_HISTORY_H
#define GS_HISTORY_H

#include <stdint.h>

#include "base/testable.h"
#include "gpuscope/gs_model.h"

struct gs_err;
struct gs_store;

/* PRAGMA application_id of a gpuscope history database ("GPUh"), and the schema version
 * (PRAGMA user_version) this build writes. A file with another application_id is refused. */
#define GS_STORE_APP_ID 0x47505568
#define GS_STORE_SCHEMA_VERSION 6

/* Highest GPU index kept (the row key packs the index in 8 bits). */
#define GS_STORE_MAX_GPU 255

struct gs_store_opts {
    unsigned buffer_cap;       /* snapshots held in memory between flushes; 0: 600 */
    unsigned busy_timeout_ms;  /* wait for another connection's lock; 0: 2000 */
    unsigned proc_interval_ms; /* minimum spacing of per-process samples; 0: 10000 */
    unsigned raw_max_range_s;  /* queries over a longer range read rollups; 0: 6 h */
};

struct gs_store_stats {
    uint64_t rows_written; /* sample + process + rollup rows committed */
    uint64_t snapshots_written;
    uint64_t flushes;      /* successful flushes */
    uint64_t write_errors; /* failed flushes (rolled back, buffer kept) */
    uint64_t dropped;      /* snapshots dropped from a full buffer, never written */
    uint64_t pruned_rows;
    unsigned consecutive_failures; /* failed flushes since the last success */
    unsigned buffered;             /* snapshots waiting for the next flush */
    double last_flush_s;           /* wall time of the last successful flush */
    double max_flush_s;
    uint64_t steps_written;       /* step records of runs committed */
    uint64_t steps_dropped;       /* step records refused: buffer full or no memory */
    unsigned steps_buffered;      /* step records waiting for the next flush */
    uint64_t steps_dropped_share; /* of steps_dropped: the run had its share of the buffer */
    uint64_t logs_written;        /* logged points of runs committed (schema v3) */
    uint64_t logs_dropped;        /* logged points refused: buffer full or no memory */
    unsigned logs_buffered;       /* logged points waiting for the next flush */
};

/* One point of a query: a raw sample (n == 1, min == avg == max) or a bucket of `step`
 * seconds starting at t (unix seconds). Buckets without any value are not reported. */
struct gs_store_point {
    double t;
    double min, avg, max;
    unsigned n; /* samples behind the point */
};

enum gs_store_source { GS_STORE_RAW = 0, GS_STORE_ROLLUP = 1 };

/* Called once per point in time order; a non-zero return stops the query and is returned. */
typedef int (*gs_store_point_fn)(void *ctx, const struct gs_store_point *p);

/* Opens or creates the database at path (symlinks refused). A new file gets the schema; an
 * existing gpuscope file is migrated to GS_STORE_SCHEMA_VERSION. A file that is not SQLite,
 * another application's database, a damaged one (quick_check, or SQLite finding it malformed
 * while opening), or one written by a newer gpuscope is refused with GS_EPARSE (GS_ENOTSUP for
 * newer) and left untouched. opts may be NULL. On failure *out is
 * untouched and err says why. */
/* SQLite's PRAGMA quick_check on the open file (gs_store_open runs it on an existing file,
 * which is then refused when damaged): GS_OK, or GS_EPARSE (damaged pages; GS_EIO when the
 * check itself could not read) naming the file, the first problem found and what to do. Takes
 * O(file size); callers schedule it. */
int gs_store_check(struct gs_store *st, struct gs_err *err);

int gs_store_open(struct gs_store **out, const char *path, const struct gs_store_opts *opts,
                  struct gs_err *err);
/* Flushes nothing: call gs_store_flush first to keep the buffer. NULL is allowed. */
void gs_store_close(struct gs_store *st);

/* Copies the kept metrics of snap into the buffer (snap is not retained). Absent readings are
 * stored as NULL, never 0. Fails with GS_EINVAL for a snapshot without a time; GPUs with an
 * index above GS_STORE_MAX_GPU are skipped. A full buffer drops its oldest snapshot. */
int gs_store_append(struct gs_store *st, const struct gs_snapshot *snap, struct gs_err *err);

/* Writes everything buffered in one transaction, with the rollups of every minute completed
 * by it. GS_OK empties the buffer; GS_EIO (disk full, I/O error, locked) rolls back and keeps
 * the buffer for the next call. */
int gs_store_flush(struct gs_store *st, struct gs_err *err);

/* Deletes raw and process samples older than now - raw_retention_s and rollups older than
 * now - rollup_retention_s, at most max_rows rows per call (0: 5000) so no call stalls a
 * flush; *deleted (may be NULL) gets the count. Call again while *deleted == max_rows. A zero
 * retention keeps that data. */
int gs_store_prune(struct gs_store *st, double now, double raw_retention_s,
                   double rollup_retention_s, unsigned max_rows, unsigned *deleted,
                   struct gs_err *err);

/* Reports the values of one GPU metric in [from, to) (unix seconds) through fn, buckets
 * aligned to multiples of step since the epoch. Raw samples are read when step < 60 and the
 * range is at most raw_max_range_s (step <= 0: every sample); otherwise per-minute rollups,
 * with step rounded up to whole minutes (step <= 0: 60). *source (may be NULL) says which.
 * GS_ENOTFOUND for a metric the history does not keep (gs_store_keeps), GS_EINVAL for
 * gpu > GS_STORE_MAX_GPU, from >= to, from < 0, to > 1e11 or |step| > 1e10. Returns what fn
 * returned when it stopped the query. Only flushed data is seen. */
int gs_store_query(struct gs_store *st, unsigned gpu, enum gs_metric metric, double from, double to,
                   double step, gs_store_point_fn fn, void *ctx, enum gs_store_source *source,
                   struct gs_err *err);

/* Whether the history keeps metric m (the columns of the sample table). */
int gs_store_keeps(enum gs_metric m);

/* Self metrics; cheap, no I/O. */
struct gs_store_stats gs_store_stats(const struct gs_store *st);

/* ---- Runs (schema v2): training runs and their step records ----
 *
 * `gpuscope run` keeps one run in its samples.db; the agent keeps the runs of its node in
 * history.db the same way. A run row is written at once; step rows are buffered like snapshots
 * and committed by the next gs_store_flush (in the same transaction as the samples). */
struct gs_step_rec;

struct gs_store_run {
    const char *name;    /* NULL: unnamed */
    const char *source;  /* "gpuscope-run", "agent" */
    const char *command; /* shell-quoted argv, NULL: unknown */
    const char *hostname;
    double start_time; /* unix seconds; <= 0: unknown */
    const char *tags;  /* schema v3: the run's tags as a JSON object's text; NULL: none */
    const char *token; /* schema v4: its resume token's SHA-256 in hex; NULL: none */
};

/* Inserts a run (committed immediately) and returns its id. */
int gs_store_run_begin(struct gs_store *st, const struct gs_store_run *run, int64_t *run_id,
                       struct gs_err *err);
/* Buffers one step record of run_id with its sender (SO_PEERCRED pid/uid). GS_ENOMEM when
 * 20,000 records are already waiting for a flush (the record is dropped and counted in
 * steps_dropped). A run begun on this store and not ended has a share of that buffer,
 * gs_store_run_share(runs going on): GS_EPERM when it has that many waiting (dropped, counted
 * in steps_dropped and steps_dropped_share), so one flooding run never makes another lose
 * records, and a run that starts next always finds room. NaN phase times, 0 samples and 0
 * bytes are stored as NULL. */
int gs_store_run_step(struct gs_store *st, int64_t run_id, const struct gs_step_rec *rec,
                      int64_t peer_pid, int64_t peer_uid, struct gs_err *err);
/* Records the end of a run (committed immediately): end_time (<= 0: NULL), exit_code (< 0:
 * NULL) and the report text (NULL: none). GS_ENOTFOUND for an unknown run id. */
int gs_store_run_end(struct gs_store *st, int64_t run_id, double end_time, int exit_code,
                     const char *report_json, struct gs_err *err);
/* ---- Logged values (schema v3): loss, learning rate, ... of a run ----
 *
 * One "log" record of a run (src/run/record.h): up to GS_STORE_LOG_MAX_KEYS values at a step,
 * stored as one row per value in `run_log`; the values of one record share its seq (its
 * number in the run, given by the caller), by which they are read back together. */
#define GS_STORE_LOG_MAX_KEYS 32
#define GS_STORE_LOG_KEY 49 /* 48 bytes + NUL */

struct gs_store_log {
    int64_t seq;  /* the record's number in its run: 0, 1, ... */
    double step;  /* NaN: absent */
    double t;     /* unix seconds; NaN: absent */
    int32_t rank; /* -1: absent */
    unsigned n;   /* 1..GS_STORE_LOG_MAX_KEYS */
    char key[GS_STORE_LOG_MAX_KEYS][GS_STORE_LOG_KEY];
    double value[GS_STORE_LOG_MAX_KEYS]; /* finite */
};

/* Buffers the values of one logged record of run_id, committed by the next gs_store_flush
 * with the steps. GS_EINVAL for n outside 1..GS_STORE_LOG_MAX_KEYS, an empty or unterminated
 * key or a value that is not finite; GS_ENOMEM when 20,000 points are already waiting (the
 * record is dropped and its points counted in logs_dropped). A bound per run is the caller's
 * (the agent keeps at most GS_RUNS_MAX_LOG_POINTS a run, runs.h). gs_store_prune_runs deletes
 * a run's points with it (before its steps; they count in its max_rows). */
int gs_store_run_log(struct gs_store *st, int64_t run_id, const struct gs_store_log *rec,
                     struct gs_err *err);

/* Deletes ended runs (end_time set) whose end_time is older than now - runs_retention_s, with
 * their step rows, oldest run first: at most max_rows rows per call (0: 5000; a run row
 * counts as one, and goes only after its last step), so no call stalls a flush; *deleted (may
 * be NULL) gets the count and it is added to pruned_rows. Call again while *deleted ==
 * max_rows. A run without end_time (going on, or interrupted and not yet rebuilt) is never
 * deleted. A zero retention keeps every run. */
int gs_store_prune_runs(struct gs_store *st, double now, double runs_retention_s, unsigned max_rows,
                        unsigned *deleted, struct gs_err *err);

/* Per-uid caps on ended runs (issue 24): for each uid (a run's owner: its report's uid, else
 * its first step's sender) whose ended runs together hold more than rows_per_uid rows (a run
 * row, its step rows and logged points; 0: no cap) or bytes_per_uid bytes of stored text
 * (report, tags, name, command, hostname; 0: no cap), deletes that uid's oldest ended runs
 * until it is within both. Runs without end_time are never deleted. At most max_rows rows per
 * call (0: 5000); *deleted (may be NULL) gets the count, added to pruned_rows. Call again
 * while *deleted == max_rows. The totals are counted once (the first call scans every ended
 * run: ~1 s per 50,000 runs on a busy machine), then kept: runs ended on this store since are
 * added at the next call, runs any prune deletes taken off. */
int gs_store_prune_runs_uid(struct gs_store *st, double now, uint64_t rows_per_uid,
                            uint64_t bytes_per_uid, unsigned max_rows, unsigned *deleted,
                            struct gs_err *err);

/* The step records one run may have waiting for a flush while live_runs runs begun on the
 * store go on: 20,000 / (live_runs + 1), so what the live runs hold leaves room for one more. */
unsigned gs_store_run_share(unsigned live_runs);

/* Retention of runs that never end (issue 18): for each run begun on this store and not ended,
 * deletes its step rows beyond steps_per_run (0: no cap; the lowest step numbers first) and
 * those that ended before now - runs_retention_s (0: kept; checked among its 1,000 lowest
 * step numbers per call, so a call costs the same whatever the run's size); then, for each
 * uid (its first step's peer_uid) whose such runs keep more than steps_per_uid rows together
 * (0: no cap), the lowest steps of its biggest run until it is back at the cap. The run rows
 * stay. The counts are the store's own (no count(*) query). At most max_rows rows per call
 * (0: 5000); *deleted (may be NULL) gets the count, added to pruned_rows. Call again while
 * *deleted == max_rows. */
int gs_store_prune_live(struct gs_store *st, double now, double runs_retention_s,
                        uint64_t steps_per_run, uint64_t steps_per_uid, unsigned max_rows,
                        unsigned *deleted, struct gs_err *err);

#ifdef GS_TEST_BUILD
/* Test builds only: runs SQL on the store's connection (to shrink max_page_count, say). */
int gs_store_test_exec(struct gs_store *st, const char *sql, struct gs_err *err);
#endif

#endif
