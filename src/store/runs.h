/*
 * runs.h - reading the training runs of a history file (schema v3+, docs/history.md): the
 * run list with its paging and owner filter, one run, a run's step records, and the runs
 * left without an end. The writes (gs_store_run_begin/_step/_end, gs_store_prune_runs) are
 * in store/history.h; this is their read side, so no caller needs to know the tables.
 *
 * The agent reads through a second connection (gs_store_open_read): WAL readers never block
 * the writer thread, and a read sees what a flush has committed. Like every store, a reader
 * is not thread-safe: one thread at a time (the agent holds a mutex around it).
 *
 * A run's owner: the uid in its report's "run" object (SO_PEERCRED, written by the agent),
 * else the uid of its first stored step's sender; its pid likewise. Filters and paging are
 * in the SQL, so `total`, `from` and `limit` count only the runs a selection shows.
 */
#ifndef GS_STORE_RUNS_H
#define GS_STORE_RUNS_H

#include <stdint.h>

#include "gpuscope/gs_run.h"

struct gs_err;
struct gs_store;

/* Which runs a read sees. */
struct gs_store_runs_sel {
    const char *source; /* only runs of this source ("agent"); NULL: any */
    int owner_only;     /* 1: only runs whose owner is uid (uid < 0: none at all) */
    int64_t uid;
    const int64_t *skip_ids; /* left out (the agent lists its live runs from memory) */
    unsigned n_skip;         /* at most GS_STORE_RUNS_SKIP_MAX */
};
#define GS_STORE_RUNS_SKIP_MAX 256

/* One run row as read; strings live until the callback returns. */
struct gs_store_run_row {
    int64_t id;
    const char *name;   /* "" when unnamed */
    double start_time;  /* unix seconds; NaN: unknown */
    double end_time;    /* NaN: no end (going on, or the writer stopped during it) */
    const char *report; /* the stored report text; NULL: none */
    int64_t uid, pid;   /* the owner (above); -1: unknown */
    int64_t steps;      /* the report's run.steps_received, else the stored step rows */
    const char *tags;   /* schema v3: the run's tags (a JSON object's text); NULL: none */
    const char *token;  /* schema v4: its resume token's SHA-256 in hex; NULL: none */
};
typedef int (*gs_store_run_fn)(void *ctx, const struct gs_store_run_row *row);

/* One stored step record with its row id and sender. Stored NULLs read back as the record's
 * "unknown" values: NaN times, 0 samples, 0 tokens (schema v6; every step stored before it),
 * 0 bytes; a NULL pid/uid as -1. */
struct gs_store_step_row {
    int64_t id, peer_pid, peer_uid;
    struct gs_step_rec rec;
};
typedef int (*gs_store_step_fn)(void *ctx, const struct gs_store_step_row *row);

/* Opens an existing history file read-only (no schema change, no migration: its writer
 * does that). GS_ENOTFOUND for a missing file, GS_EPARSE for a foreign one, GS_ENOTSUP for
 * a schema other than GS_STORE_SCHEMA_VERSION. Close with gs_store_close; the write calls
 * refuse a reader with GS_EINVAL. */
int gs_store_open_read(struct gs_store **out, const char *path, struct gs_err *err);

/* How many runs sel shows. */
int gs_store_runs_count(struct gs_store *st, const struct gs_store_runs_sel *sel, int64_t *n,
                        struct gs_err *err);
/* The runs sel shows, newest (highest id) first, skipping `from` of them, at most limit, one
 * fn call each; fn's non-zero return stops the read and is returned. */
int gs_store_runs_list(struct gs_store *st, const struct gs_store_runs_sel *sel, int64_t from,
                       int64_t limit, gs_store_run_fn fn, void *ctx, struct gs_err *err);
/* Run id (of sel->source when sel is given; the owner filter applies too) through fn.
 * GS_ENOTFOUND when there is no such run. */
int gs_store_run_get(struct gs_store *st, const struct gs_store_runs_sel *sel, int64_t id,
                     gs_store_run_fn fn, void *ctx, struct gs_err *err);
/* The runs of source without an end, oldest first, at most limit. */
int gs_store_runs_unended(struct gs_store *st, const char *source, int64_t limit,
                          gs_store_run_fn fn, void *ctx, struct gs_err *err);
/* How many step rows run id has (0 for an unknown run). */
int gs_store_run_step_count(struct gs_store *st, int64_t id, int64_t *n, struct gs_err *err);
/* Run id's steps in the order they were stored, skipping `from`, at most limit (< 0: all). */
int gs_store_run_steps(struct gs_store *st, int64_t id, int64_t from, int64_t limit,
                       gs_store_step_fn fn, void *ctx, struct gs_err *err);

/* Logged values (schema v3, store/history.h): how many records and points run id has (0 for
 * an unknown run; points may be NULL), and its records in seq order (each with its values in
 * the order stored), skipping `from` records, at most limit (< 0: all), one fn call each;
 * fn's non-zero return stops the read and is returned. */
struct gs_store_log;
typedef int (*gs_store_log_fn)(void *ctx, const struct gs_store_log *rec);
int gs_store_run_log_count(struct gs_store *st, int64_t id, int64_t *records, int64_t *points,
                           struct gs_err *err);
int gs_store_run_logs(struct gs_store *st, int64_t id, int64_t from, int64_t limit,
                      gs_store_log_fn fn, void *ctx, struct gs_err *err);

#endif
