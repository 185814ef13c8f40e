/*
 * runs.c - the read side of the history's runs (contract in store/runs.h): the run list,
 * filtered by source and owner and paged in one SQL statement, one run, the runs left
 * without an end, and a run's step rows back into struct gs_step_rec. The tables and the
 * write side are history.c's (schema v2, docs/history.md).
 */
#include "store/runs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "gpuscope/gs_err.h"
#include "store/history.h"
#include "store/store_priv.h"

/* A run's owner (RUN_OWNER_UID, store_priv.h) and pid: its report's, else those of the sender
 * of its first stored step. Its step count: the report's steps_received
 * (every record received, also those not aggregated), else its step rows. */
#define RUN_OWNER_PID                                                                              \
    "COALESCE(" RUN_REPORT_INT("pid") ", (SELECT peer_pid FROM step WHERE step.run = run.id"       \
                                      " LIMIT 1))"
#define RUN_STEPS                                                                                  \
    "COALESCE(" RUN_REPORT_INT(                                                                    \
        "steps_received") ","                                                                      \
                          " (SELECT count(*) FROM step WHERE step.run = run.id))"
#define RUN_COLS                                                                                   \
    "SELECT id, name, start_time, end_time, report, " RUN_OWNER_UID ", " RUN_OWNER_PID             \
    ", " RUN_STEPS ", tags, token FROM run"

#define SQL_MAX 8192

/* Appends the WHERE clause of sel (named parameters :source, :uid) to sql[*n..cap). */
static int where_of(char *sql, size_t cap, size_t *n, const struct gs_store_runs_sel *sel,
                    const char *more)
{
    int w;

    w = snprintf(sql + *n, cap - *n, " WHERE 1%s%s%s", more ? " AND " : "", more ? more : "",
                 sel && sel->source ? " AND source = :source" : "");
    if (w < 0 || (size_t)w >= cap - *n)
        return -1;
    *n += (size_t)w;
    if (sel && sel->owner_only) {
        w = sel->uid < 0 ? snprintf(sql + *n, cap - *n, " AND 0")
                         : snprintf(sql + *n, cap - *n, " AND " RUN_OWNER_UID " = :uid");
        if (w < 0 || (size_t)w >= cap - *n)
            return -1;
        *n += (size_t)w;
    }
    if (sel && sel->n_skip) {
        if (sel->n_skip > GS_STORE_RUNS_SKIP_MAX)
            return -1;
        w = snprintf(sql + *n, cap - *n, " AND id NOT IN (");
        if (w < 0 || (size_t)w >= cap - *n)
            return -1;
        *n += (size_t)w;
        for (unsigned i = 0; i < sel->n_skip; i++) {
            w = snprintf(sql + *n, cap - *n, "%s%lld", i ? "," : "", (long long)sel->skip_ids[i]);
            if (w < 0 || (size_t)w >= cap - *n)
                return -1;
            *n += (size_t)w;
        }
        if (*n + 2 > cap)
            return -1;
        sql[(*n)++] = ')';
        sql[*n] = '\0';
    }
    return 0;
}

static void bind_named_int(sqlite3_stmt *s, const char *name, int64_t v)
{
    int i = sqlite3_bind_parameter_index(s, name);

    if (i > 0)
        sqlite3_bind_int64(s, i, v);
}

/* Prepares sql with sel's parameters bound. */
static int prepare_sel(struct gs_store *st, const char *sql, const struct gs_store_runs_sel *sel,
                       sqlite3_stmt **out, struct gs_err *err)
{
    int i;

    if (sqlite3_prepare_v2(gs_store_conn(st), sql, -1, out, NULL) != SQLITE_OK) {
        sqlite3_finalize(*out);
        *out = NULL;
        return gs_store_sql_fail(st, err, "read runs");
    }
    if (sel && sel->source && (i = sqlite3_bind_parameter_index(*out, ":source")) > 0)
        sqlite3_bind_text(*out, i, sel->source, -1, SQLITE_TRANSIENT);
    if (sel && sel->owner_only)
        bind_named_int(*out, ":uid", sel->uid);
    return GS_OK;
}

static double col_num(sqlite3_stmt *s, int c)
{
    return sqlite3_column_type(s, c) == SQLITE_NULL ? NAN : sqlite3_column_double(s, c);
}

static int64_t col_id(sqlite3_stmt *s, int c)
{
    return sqlite3_column_type(s, c) == SQLITE_INTEGER ? sqlite3_column_int64(s, c) : -1;
}

/* Steps through a statement of RUN_COLS rows, one fn call each. */
static int each_run(struct gs_store *st, sqlite3_stmt *s, gs_store_run_fn fn, void *ctx,
                    int64_t *rows, struct gs_err *err)
{
    int rc = SQLITE_DONE, stop = 0;

    *rows = 0;
    while (!stop && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct gs_store_run_row r = {
            .id = sqlite3_column_int64(s, 0),
            .name = sqlite3_column_type(s, 1) == SQLITE_TEXT
                        ? (const char *)sqlite3_column_text(s, 1)
                        : "",
            .start_time = col_num(s, 2),
            .end_time = col_num(s, 3),
            .report = sqlite3_column_type(s, 4) == SQLITE_TEXT
                          ? (const char *)sqlite3_column_text(s, 4)
                          : NULL,
            .uid = col_id(s, 5),
            .pid = col_id(s, 6),
            .steps = sqlite3_column_int64(s, 7),
            .tags = sqlite3_column_type(s, 8) == SQLITE_TEXT
                        ? (const char *)sqlite3_column_text(s, 8)
                        : NULL,
            .token = sqlite3_column_type(s, 9) == SQLITE_TEXT
                         ? (const char *)sqlite3_column_text(s, 9)
                         : NULL,
        };
        (*rows)++;
        stop = fn(ctx, &r);
    }
    if (stop)
        return stop;
    return rc == SQLITE_DONE ? GS_OK : gs_store_sql_fail(st, err, "read runs");
}

int gs_store_runs_count(struct gs_store *st, const struct gs_store_runs_sel *sel, int64_t *n,
                        struct gs_err *err)
{
    char sql[SQL_MAX] = "SELECT count(*) FROM run";
    size_t len = strlen(sql);
    sqlite3_stmt *s = NULL;
    int rc;

    if (!st || !n)
        return gs_err_set(err, GS_EINVAL, "history: runs_count: missing argument");
    *n = 0;
    if (where_of(sql, sizeof sql, &len, sel, NULL) != 0)
        return gs_err_set(err, GS_EINVAL, "history: runs_count: selection too long");
    rc = prepare_sel(st, sql, sel, &s, err);
    if (rc != GS_OK)
        return rc;
    if (sqlite3_step(s) == SQLITE_ROW)
        *n = sqlite3_column_int64(s, 0);
    else
        rc = gs_store_sql_fail(st, err, "count runs");
    sqlite3_finalize(s);
    return rc;
}

int gs_store_runs_list(struct gs_store *st, const struct gs_store_runs_sel *sel, int64_t from,
                       int64_t limit, gs_store_run_fn fn, void *ctx, struct gs_err *err)
{
    char sql[SQL_MAX] = RUN_COLS;
    size_t len = strlen(sql);
    sqlite3_stmt *s = NULL;
    int64_t rows;
    int rc;

    if (!st || !fn || from < 0)
        return gs_err_set(err, GS_EINVAL, "history: runs_list: bad argument");
    if (limit <= 0)
        return GS_OK;
    if (where_of(sql, sizeof sql, &len, sel, NULL) != 0 ||
        snprintf(sql + len, sizeof sql - len, " ORDER BY id DESC LIMIT :limit OFFSET :from") >=
            (int)(sizeof sql - len))
        return gs_err_set(err, GS_EINVAL, "history: runs_list: selection too long");
    rc = prepare_sel(st, sql, sel, &s, err);
    if (rc != GS_OK)
        return rc;
    bind_named_int(s, ":limit", limit);
    bind_named_int(s, ":from", from);
    rc = each_run(st, s, fn, ctx, &rows, err);
    sqlite3_finalize(s);
    return rc;
}

int gs_store_run_get(struct gs_store *st, const struct gs_store_runs_sel *sel, int64_t id,
                     gs_store_run_fn fn, void *ctx, struct gs_err *err)
{
    char sql[SQL_MAX] = RUN_COLS;
    size_t len = strlen(sql);
    sqlite3_stmt *s = NULL;
    int64_t rows = 0;
    int rc;

    if (!st || !fn)
        return gs_err_set(err, GS_EINVAL, "history: run_get: missing argument");
    if (where_of(sql, sizeof sql, &len, sel, "id = :id") != 0)
        return gs_err_set(err, GS_EINVAL, "history: run_get: selection too long");
    rc = prepare_sel(st, sql, sel, &s, err);
    if (rc != GS_OK)
        return rc;
    bind_named_int(s, ":id", id);
    rc = each_run(st, s, fn, ctx, &rows, err);
    sqlite3_finalize(s);
    if (rc == GS_OK && rows == 0)
        return gs_err_set(err, GS_ENOTFOUND, "history: no run %lld", (long long)id);
    return rc;
}

int gs_store_runs_unended(struct gs_store *st, const char *source, int64_t limit,
                          gs_store_run_fn fn, void *ctx, struct gs_err *err)
{
    struct gs_store_runs_sel sel = {.source = source};
    char sql[SQL_MAX] = RUN_COLS;
    size_t len = strlen(sql);
    sqlite3_stmt *s = NULL;
    int64_t rows;
    int rc;

    if (!st || !fn)
        return gs_err_set(err, GS_EINVAL, "history: runs_unended: missing argument");
    if (where_of(sql, sizeof sql, &len, &sel, "end_time IS NULL") != 0 ||
        snprintf(sql + len, sizeof sql - len, " ORDER BY id LIMIT :limit") >=
            (int)(sizeof sql - len))
        return gs_err_set(err, GS_EINVAL, "history: runs_unended: selection too long");
    rc = prepare_sel(st, sql, &sel, &s, err);
    if (rc != GS_OK)
        return rc;
    bind_named_int(s, ":limit", limit);
    rc = each_run(st, s, fn, ctx, &rows, err);
    sqlite3_finalize(s);
    return rc;
}

int gs_store_run_step_count(struct gs_store *st, int64_t id, int64_t *n, struct gs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = GS_OK;

    if (!st || !n)
        return gs_err_set(err, GS_EINVAL, "history: run_step_count: missing argument");
    *n = 0;
    if (sqlite3_prepare_v2(gs_store_conn(st), "SELECT count(*) FROM step WHERE run = ?", -1, &s,
                           NULL) != SQLITE_OK) {
        sqlite3_finalize(s);
        return gs_store_sql_fail(st, err, "count steps");
    }
    sqlite3_bind_int64(s, 1, id);
    if (sqlite3_step(s) == SQLITE_ROW)
        *n = sqlite3_column_int64(s, 0);
    else
        rc = gs_store_sql_fail(st, err, "count steps");
    sqlite3_finalize(s);
    return rc;
}

static uint64_t col_u64(sqlite3_stmt *s, int c)
{
    double v = col_num(s, c);

    return v > 0 ? (uint64_t)v : 0;
}

int gs_store_run_steps(struct gs_store *st, int64_t id, int64_t from, int64_t limit,
                       gs_store_step_fn fn, void *ctx, struct gs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = SQLITE_DONE, stop = 0;

    if (!st || !fn || from < 0)
        return gs_err_set(err, GS_EINVAL, "history: run_steps: bad argument");
    if (sqlite3_prepare_v2(gs_store_conn(st),
                           "SELECT id, peer_pid, peer_uid, rank, device, step, t_begin, t_end,"
                           " data_ms, forward_ms, backward_ms, optimizer_step_ms,"
                           " communication_ms, total_step_ms, samples, cuda_events,"
                           " mem_allocated, mem_reserved, mem_peak_allocated,"
                           " mem_peak_reserved, mem_total, tokens"
                           " FROM step WHERE run = ? ORDER BY id LIMIT ? OFFSET ?",
                           -1, &s, NULL) != SQLITE_OK) {
        sqlite3_finalize(s);
        return gs_store_sql_fail(st, err, "read steps");
    }
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, limit < 0 ? -1 : limit);
    sqlite3_bind_int64(s, 3, from);
    while (!stop && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct gs_store_step_row r = {.rec.version = GS_STEP_REC_VERSION};
        struct gs_step_rec *x = &r.rec;
        int c = 0;

        r.id = sqlite3_column_int64(s, c++);
        r.peer_pid = col_id(s, c++);
        r.peer_uid = col_id(s, c++);
        x->rank = sqlite3_column_int(s, c++);
        x->device = sqlite3_column_int(s, c++);
        x->step = (uint64_t)sqlite3_column_int64(s, c++);
        x->t_begin = col_num(s, c++);
        x->t_end = col_num(s, c++);
        for (int p = 0; p < GS_PH_N; p++)
            x->ms[p] = col_num(s, c++);
        for (int p = GS_PH_N; p < GS_PH_ALL; p++) /* not stored: derived or unknown */
            x->ms_x[p - GS_PH_N] = NAN;
        x->samples = col_u64(s, c++);
        x->flags = sqlite3_column_int(s, c++) ? GS_STEP_CUDA_EVENTS : 0;
        x->mem_allocated = col_u64(s, c++);
        x->mem_reserved = col_u64(s, c++);
        x->mem_peak_allocated = col_u64(s, c++);
        x->mem_peak_reserved = col_u64(s, c++);
        x->mem_total = col_u64(s, c++);
        x->tokens = col_u64(s, c++);
        stop = fn(ctx, &r);
    }
    if (!stop && rc != SQLITE_DONE)
        stop = gs_store_sql_fail(st, err, "read steps");
    sqlite3_finalize(s);
    return stop;
}

/* ---- logged values (schema v3) ---- */

int gs_store_run_log_count(struct gs_store *st, int64_t id, int64_t *records, int64_t *points,
                           struct gs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = GS_OK;

    if (!st || !records)
        return gs_err_set(err, GS_EINVAL, "history: run_log_count: missing argument");
    *records = 0;
    if (points)
        *points = 0;
    if (sqlite3_prepare_v2(gs_store_conn(st),
                           "SELECT count(DISTINCT seq), count(*) FROM run_log WHERE run = ?", -1,
                           &s, NULL) != SQLITE_OK) {
        sqlite3_finalize(s);
        return gs_store_sql_fail(st, err, "count logged values");
    }
    sqlite3_bind_int64(s, 1, id);
    if (sqlite3_step(s) == SQLITE_ROW) {
        *records = sqlite3_column_int64(s, 0);
        if (points)
            *points = sqlite3_column_int64(s, 1);
    } else {
        rc = gs_store_sql_fail(st, err, "count logged values");
    }
    sqlite3_finalize(s);
    return rc;
}

int gs_store_run_logs(struct gs_store *st, int64_t id, int64_t from, int64_t limit,
                      gs_store_log_fn fn, void *ctx, struct gs_err *err)
{
    struct gs_store_log rec;
    sqlite3_stmt *s = NULL;
    int rc = SQLITE_DONE, stop = 0, have = 0;

    if (!st || !fn || from < 0)
        return gs_err_set(err, GS_EINVAL, "history: run_logs: bad argument");
    /* the records (distinct seq) of the page, then their points in the order stored */
    if (sqlite3_prepare_v2(gs_store_conn(st),
                           "SELECT seq, step, t, rank, key, value FROM run_log"
                           " WHERE run = ?1 AND seq IN (SELECT DISTINCT seq FROM run_log"
                           " WHERE run = ?1 ORDER BY seq LIMIT ?2 OFFSET ?3)"
                           " ORDER BY seq, id",
                           -1, &s, NULL) != SQLITE_OK) {
        sqlite3_finalize(s);
        return gs_store_sql_fail(st, err, "read logged values");
    }
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, limit < 0 ? -1 : limit);
    sqlite3_bind_int64(s, 3, from);
    while (!stop && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(s, 0);
        const unsigned char *key = sqlite3_column_text(s, 4);

        if (have && seq != rec.seq) {
            stop = fn(ctx, &rec);
            have = 0;
            if (stop)
                break;
        }
        if (!have) {
            memset(&rec, 0, sizeof rec);
            rec.seq = seq;
            rec.step = col_num(s, 1);
            rec.t = col_num(s, 2);
            rec.rank = sqlite3_column_type(s, 3) == SQLITE_INTEGER ? sqlite3_column_int(s, 3) : -1;
            have = 1;
        }
        if (rec.n < GS_STORE_LOG_MAX_KEYS && key) {
            snprintf(rec.key[rec.n], sizeof rec.key[rec.n], "%s", (const char *)key);
            rec.value[rec.n] = col_num(s, 5);
            rec.n++;
        }
    }
    if (!stop && have && (rc == SQLITE_DONE || rc == SQLITE_ROW))
        stop = fn(ctx, &rec);
    if (!stop && rc != SQLITE_DONE && rc != SQLITE_ROW)
        stop = gs_store_sql_fail(st, err, "read logged values");
    sqlite3_finalize(s);
    return stop;
}
