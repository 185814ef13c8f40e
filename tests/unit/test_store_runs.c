/*
 * Unit tests of the history store's runs (schema v2, src/store/history.c): a run row and its
 * step rows as `gpuscope run` writes them, absent values stored as NULL, a v1 file migrated to
 * v2 with its samples kept, steps flushed without any snapshot, the step buffer's cap, and
 * the retention of runs: ended runs pruned with their steps in bounded batches, a run going
 * on (no end_time) or a recent one never; the per-run share of the step buffer and the
 * retention and step cap of runs that never end (issue 18). The read side (store/runs.h)
 * through a read-only reader: the list filtered by owner (report uid, else the first step's
 * sender) and paged after the filter, live ids skipped, one run, the unended runs, steps back
 * as records with their unknowns, and a reader refusing writes. Schema v3: logged values
 * (loss, learning rate) buffered, flushed, read back grouped by record and paged, the buffer's
 * cap, pruned with their run; a run's tags; a v2 file (runs, steps) migrated to v3 with its
 * rows kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_run.h"
#include "store/history.h"
#include "store/runs.h"

struct fx {
    char dir[64];
    char path[128];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);

    snprintf(f->dir, sizeof f->dir, "/tmp/gs-store-runs-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/h.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char p[160];
    static const char *const sfx[] = {"", "-wal", "-shm"};

    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", f->path, sfx[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* A scalar from the file, through a separate connection (as a user's sqlite3 shell). */
static double sql_num(const char *path, const char *sql, int *is_null)
{
    sqlite3 *db;
    sqlite3_stmt *s;
    double v = NAN;

    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    if (is_null)
        *is_null = sqlite3_column_type(s, 0) == SQLITE_NULL;
    v = sqlite3_column_double(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

static void fill_step(struct gs_step_rec *r, uint64_t step)
{
    memset(r, 0, sizeof *r);
    r->version = GS_STEP_REC_VERSION;
    r->step = step;
    r->t_begin = 1764430000.0 + (double)step;
    r->t_end = r->t_begin + 0.25;
    for (int p = 0; p < GS_PH_N; p++)
        r->ms[p] = 10.0 * (p + 1);
    r->samples = 8;
    r->rank = 1;
    r->device = 3;
    r->flags = GS_STEP_CUDA_EVENTS;
    r->mem_allocated = 1000;
    r->mem_peak_reserved = 4000;
}

static void test_run_and_steps(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL;
    struct gs_store_run run = {.name = "sft",
                               .source = "gpuscope-run",
                               .command = "python3 train.py",
                               .hostname = "node1",
                               .start_time = 1764430000.5};
    struct gs_step_rec r;
    struct gs_err err;
    int64_t id = 0;
    int isnull = 0;

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
    assert_true(id > 0);
    fill_step(&r, 1);
    r.tokens = 9007199254740991ull; /* the record's largest (2^53 - 1) */
    assert_int_equal(gs_store_run_step(st, id, &r, 4242, 1000, &err), GS_OK);
    fill_step(&r, 2);
    r.ms[GS_PH_COMM] = NAN; /* not measured */
    r.samples = 0;          /* unknown */
    r.flags = 0;
    assert_int_equal(gs_store_run_step(st, id, &r, 4242, 1000, &err), GS_OK);
    /* nothing committed before the flush; the flush has no snapshot, only steps */
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step", NULL), 0);
    assert_int_equal(gs_store_stats(st).steps_buffered, 2);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(gs_store_stats(st).steps_written, 2);
    assert_int_equal(gs_store_stats(st).steps_buffered, 0);
    assert_int_equal(sql_num(f->path, "PRAGMA user_version", NULL), GS_STORE_SCHEMA_VERSION);
    assert_int_equal(GS_STORE_SCHEMA_VERSION, 6);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 2);
    assert_int_equal(sql_num(f->path, "SELECT peer_pid FROM step WHERE step = 1", NULL), 4242);
    assert_int_equal(sql_num(f->path, "SELECT device FROM step WHERE step = 1", NULL), 3);
    assert_true(fabs(sql_num(f->path, "SELECT backward_ms FROM step WHERE step = 1", NULL) - 30.0) <
                1e-9);
    assert_true(fabs(sql_num(f->path, "SELECT t_end - t_begin FROM step WHERE step = 2", NULL) -
                     0.25) < 1e-6);
    assert_int_equal(sql_num(f->path, "SELECT cuda_events FROM step WHERE step = 1", NULL), 1);
    assert_int_equal(sql_num(f->path, "SELECT cuda_events FROM step WHERE step = 2", NULL), 0);
    sql_num(f->path, "SELECT communication_ms FROM step WHERE step = 2", &isnull);
    assert_true(isnull);
    sql_num(f->path, "SELECT samples FROM step WHERE step = 2", &isnull);
    assert_true(isnull);
    sql_num(f->path, "SELECT tokens FROM step WHERE step = 2", &isnull);
    assert_true(isnull); /* 0 tokens = unknown */
    assert_int_equal(sql_num(f->path,
                             "SELECT tokens = 9007199254740991 AND typeof(tokens) = 'integer'"
                             " FROM step WHERE step = 1",
                             NULL),
                     1);
    sql_num(f->path, "SELECT mem_reserved FROM step WHERE step = 1", &isnull);
    assert_true(isnull); /* 0 bytes = unknown */
    assert_int_equal(sql_num(f->path, "SELECT mem_peak_reserved FROM step WHERE step = 1", &isnull),
                     4000);
    /* the run row: open until run_end */
    sql_num(f->path, "SELECT exit_code FROM run WHERE id = 1", &isnull);
    assert_true(isnull);
    assert_int_equal(gs_store_run_end(st, id, 1764430100.0, 3, "{\"schema\":\"1.0\"}", &err),
                     GS_OK);
    assert_int_equal(sql_num(f->path, "SELECT exit_code FROM run WHERE id = 1", NULL), 3);
    assert_int_equal(sql_num(f->path, "SELECT end_time - start_time FROM run", NULL), 99.5);
    assert_int_equal(
        sql_num(f->path, "SELECT json_extract(report, '$.schema') = '1.0' FROM run", NULL), 1);
    assert_int_equal(gs_store_run_end(st, id + 7, 1.0, 0, NULL, &err), GS_ENOTFOUND);
    gs_store_close(st);
}

static void test_migrate_v1(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL;
    struct gs_snapshot *snap = NULL;
    struct gs_step_rec r;
    struct gs_store_run run = {.source = "agent"};
    struct gs_err err;
    int64_t id = 0;
    sqlite3 *db;

    /* A v1 file with one sample: made by this store, then its v2 tables taken away. */
    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_snapshot_new(&snap, 1, 0, &err), GS_OK);
    snap->t_real = 1764430000.0;
    snap->gpus[0].index = 0;
    gs_gpu_set(&snap->gpus[0], GS_M_UTIL_GPU, 0.75);
    assert_int_equal(gs_store_append(st, snap, &err), GS_OK);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    gs_store_close(st);
    gs_snapshot_free(snap);
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "DROP TABLE run_log; DROP TABLE step; DROP TABLE run;"
                                  " PRAGMA user_version = 1",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(
        sql_num(f->path, "SELECT count(*) FROM sqlite_schema WHERE name = 'run'", NULL), 0);
    /* reopening migrates 1 -> 2 -> 3 and keeps the sample */
    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(sql_num(f->path, "PRAGMA user_version", NULL), GS_STORE_SCHEMA_VERSION);
    assert_true(fabs(sql_num(f->path, "SELECT utilization_gpu FROM samples", NULL) - 0.75) < 1e-12);
    assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
    fill_step(&r, 9);
    assert_int_equal(gs_store_run_step(st, id, &r, 1, 0, &err), GS_OK);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(sql_num(f->path, "SELECT step FROM step", NULL), 9);
    assert_int_equal(sql_num(f->path,
                             "SELECT count(*) FROM pragma_integrity_check"
                             " WHERE integrity_check != 'ok'",
                             NULL),
                     0);
    gs_store_close(st);
}

static void test_step_cap(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL;
    struct gs_store_run run = {.source = "gpuscope-run"};
    struct gs_step_rec r;
    struct gs_err err;
    int64_t id = 0;
    unsigned ok = 0;

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
    /* ended: no share of its own any more, only the buffer's cap */
    assert_int_equal(gs_store_run_end(st, id, 0, -1, NULL, &err), GS_OK);
    fill_step(&r, 0);
    for (unsigned i = 0; i < 20005; i++) {
        r.step = i;
        ok += gs_store_run_step(st, id, &r, 1, 0, &err) == GS_OK;
    }
    assert_int_equal(ok, 20000);
    assert_int_equal(gs_store_stats(st).steps_dropped, 5);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(gs_store_stats(st).steps_written, 20000);
    assert_int_equal(sql_num(f->path, "SELECT max(step) FROM step", NULL), 19999);
    /* the buffer is empty again */
    assert_int_equal(gs_store_run_step(st, id, &r, 1, 0, &err), GS_OK);
    gs_store_close(st);
}

/* The per-run share of the step buffer (issue 18): a flooding run gets 20,000 / (runs + 1)
 * waiting records, the next one's records all fit, the share shrinks as runs start and grows
 * back as they end, and a flush gives every run its share again. */
static void test_step_share(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL;
    struct gs_store_run run = {.source = "agent"};
    struct gs_step_rec r;
    struct gs_err err;
    int64_t a = 0, b = 0, c = 0;
    unsigned ok = 0, perm = 0;

    assert_int_equal(gs_store_run_share(0), 20000);
    assert_int_equal(gs_store_run_share(1), 10000);
    assert_int_equal(gs_store_run_share(63), 312);
    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &a, &err), GS_OK);
    fill_step(&r, 0);
    for (unsigned i = 0; i < 30000; i++) { /* A floods alone: half the buffer */
        r.step = i;
        int rc = gs_store_run_step(st, a, &r, 1, 1000, &err);
        ok += rc == GS_OK;
        perm += rc == GS_EPERM;
    }
    assert_int_equal(ok, 10000);
    assert_int_equal(perm, 20000);
    assert_int_equal(gs_store_stats(st).steps_dropped_share, 20000);
    /* B starts: its 200 steps all fit although A flooded first */
    assert_int_equal(gs_store_run_begin(st, &run, &b, &err), GS_OK);
    for (unsigned i = 0; i < 200; i++) {
        r.step = i;
        assert_int_equal(gs_store_run_step(st, b, &r, 2, 1001, &err), GS_OK);
    }
    /* A is over the new share (20000 / 3) and gets nothing more until a flush */
    assert_int_equal(gs_store_run_step(st, a, &r, 1, 1000, &err), GS_EPERM);
    assert_non_null(strstr(err.msg, "share"));
    /* C too: with 3 runs its share is 5000 and the buffer has 9800 free */
    assert_int_equal(gs_store_run_begin(st, &run, &c, &err), GS_OK);
    ok = 0;
    for (unsigned i = 0; i < 6000; i++) {
        r.step = i;
        ok += gs_store_run_step(st, c, &r, 3, 1002, &err) == GS_OK;
    }
    assert_int_equal(ok, 5000);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 2", NULL), 200);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 10000);
    /* after the flush A has its share again; B and C ended: A's share is 10000 again */
    assert_int_equal(gs_store_run_end(st, b, 0, -1, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_end(st, c, 0, -1, NULL, &err), GS_OK);
    ok = 0;
    for (unsigned i = 0; i < 12000; i++)
        ok += gs_store_run_step(st, a, &r, 1, 1000, &err) == GS_OK;
    assert_int_equal(ok, 10000);
    gs_store_close(st);
}

/* Retention of a run that never ends (issue 18): its steps older than the retention and those
 * beyond the per-run step cap go, lowest step numbers first and in bounded batches; the run
 * row and its recent steps stay; an ended run is left to gs_store_prune_runs. */
static void test_prune_live(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL;
    const double now = 1764430000.0, day = 86400.0;
    struct gs_store_run run = {.source = "agent", .start_time = now - 41 * day};
    struct gs_step_rec r;
    struct gs_err err;
    int64_t live = 0, ended = 0;
    unsigned n = 99, total = 0, calls = 0;

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &live, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &ended, &err), GS_OK);
    fill_step(&r, 0);
    /* the live run: 300 steps 40 days old, then 200 of the last hour */
    for (unsigned i = 0; i < 500; i++) {
        r.step = i;
        r.t_begin = i < 300 ? now - 40 * day + i : now - 3600 + i;
        r.t_end = r.t_begin + 0.5;
        assert_int_equal(gs_store_run_step(st, live, &r, 1, 1000, &err), GS_OK);
        if (i < 50)
            assert_int_equal(gs_store_run_step(st, ended, &r, 2, 1000, &err), GS_OK);
    }
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(gs_store_run_end(st, ended, now - 39 * day, -1, "{}", &err), GS_OK);
    /* neither a retention nor a cap: nothing */
    assert_int_equal(gs_store_prune_live(st, now, 0, 0, 0, 0, &n, &err), GS_OK);
    assert_int_equal(n, 0);
    /* 30 days: the 300 old steps go, 128 a call */
    do {
        assert_int_equal(gs_store_prune_live(st, now, 30 * day, 0, 0, 128, &n, &err), GS_OK);
        total += n;
        calls++;
    } while (n == 128 && calls < 10);
    assert_int_equal(total, 300);
    assert_int_equal(calls, 3);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 200);
    assert_int_equal(sql_num(f->path, "SELECT min(step) FROM step WHERE run = 1", NULL), 300);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run WHERE id = 1", NULL), 1);
    /* the ended run is not this function's (gs_store_prune_runs keeps it 30 days) */
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 2", NULL), 50);
    /* a cap of 120 steps: the 80 lowest step numbers go */
    assert_int_equal(gs_store_prune_live(st, now, 30 * day, 120, 0, 0, &n, &err), GS_OK);
    assert_int_equal(n, 80);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 120);
    assert_int_equal(sql_num(f->path, "SELECT min(step) FROM step WHERE run = 1", NULL), 380);
    /* more steps past the cap: the count is kept without a query, so the next prune knows */
    for (unsigned i = 500; i < 530; i++) {
        r.step = i;
        r.t_begin = now - 60 + (i - 500);
        r.t_end = r.t_begin + 0.5;
        assert_int_equal(gs_store_run_step(st, live, &r, 1, 1000, &err), GS_OK);
    }
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(gs_store_prune_live(st, now, 30 * day, 120, 0, 0, &n, &err), GS_OK);
    assert_int_equal(n, 30);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 120);
    assert_int_equal(sql_num(f->path, "SELECT max(step) FROM step WHERE run = 1", NULL), 529);
    /* once it ends it is gs_store_prune_runs's */
    assert_int_equal(gs_store_run_end(st, live, now, -1, "{}", &err), GS_OK);
    assert_int_equal(gs_store_prune_live(st, now + 100 * day, 1, 1, 1, 0, &n, &err), GS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(gs_store_prune_live(NULL, now, 30 * day, 0, 0, 0, &n, &err), GS_EINVAL);
    gs_store_close(st);
}

/* The kept steps of one uid's live runs together (issue 18): uid 1000's two runs (300 and 100
 * rows) past a 250-row cap lose 150 of the bigger's lowest steps; uid 1001's run under it and
 * an ended run of uid 1000 are untouched. */
static void test_prune_uid(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL;
    const double now = 1764430000.0;
    struct gs_store_run run = {.source = "agent", .start_time = now - 100};
    struct gs_step_rec r;
    struct gs_err err;
    int64_t a1 = 0, a2 = 0, b = 0, done = 0;
    unsigned n = 99;

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &a1, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &a2, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &b, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &done, &err), GS_OK);
    fill_step(&r, 0);
    r.t_begin = now - 10;
    r.t_end = now - 9;
    for (unsigned i = 0; i < 300; i++) {
        r.step = i;
        assert_int_equal(gs_store_run_step(st, a1, &r, 1, 1000, &err), GS_OK);
        if (i < 100)
            assert_int_equal(gs_store_run_step(st, a2, &r, 1, 1000, &err), GS_OK);
        if (i < 200)
            assert_int_equal(gs_store_run_step(st, b, &r, 2, 1001, &err), GS_OK);
        if (i < 50)
            assert_int_equal(gs_store_run_step(st, done, &r, 3, 1000, &err), GS_OK);
    }
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(gs_store_run_end(st, done, now - 1, -1, "{}", &err), GS_OK);
    assert_int_equal(gs_store_prune_live(st, now, 30 * 86400.0, 0, 250, 0, &n, &err), GS_OK);
    assert_int_equal(n, 150);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 150);
    assert_int_equal(sql_num(f->path, "SELECT min(step) FROM step WHERE run = 1", NULL), 150);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 2", NULL), 100);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 3", NULL), 200);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 4", NULL), 50);
    /* at the cap now: nothing more; a tighter one takes from the bigger first (150 vs 100) */
    assert_int_equal(gs_store_prune_live(st, now, 30 * 86400.0, 0, 250, 0, &n, &err), GS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(gs_store_prune_live(st, now, 30 * 86400.0, 0, 200, 0, &n, &err), GS_OK);
    assert_int_equal(n, 50);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 100);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 2", NULL), 100);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 3", NULL), 200);
    gs_store_close(st);
}

/* Per-uid caps on ended runs (issue 24): uid 1000 ends 10 runs of 9 steps (10 rows each), uid
 * 1001 ends 2, and uid 1000 has a live run of 50 steps. A 45-row cap leaves uid 1000 its 4
 * newest ended runs (40 rows), uid 1001 and the live run whole; with no run ended since, the
 * next call does nothing; a bytes cap (the reports' text) then takes the oldest again, the
 * owner read from the report's run.uid before the steps' sender. */
static void test_prune_ended_uid(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL;
    const double now = 1764430000.0;
    struct gs_store_run run = {.source = "agent", .start_time = now - 100};
    struct gs_step_rec r;
    struct gs_err err;
    int64_t ids[12], live = 0;
    unsigned n = 99;
    char report[1100];

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &live, &err), GS_OK);
    fill_step(&r, 0);
    for (unsigned i = 0; i < 50; i++) {
        r.step = i;
        assert_int_equal(gs_store_run_step(st, live, &r, 1, 1000, &err), GS_OK);
    }
    for (unsigned k = 0; k < 12; k++) {
        uint32_t uid = k < 10 ? 1000 : 1001;
        assert_int_equal(gs_store_run_begin(st, &run, &ids[k], &err), GS_OK);
        for (unsigned i = 0; i < 9; i++) {
            r.step = i;
            assert_int_equal(gs_store_run_step(st, ids[k], &r, 1, uid, &err), GS_OK);
        }
        assert_int_equal(gs_store_flush(st, &err), GS_OK);
        /* 1,000 bytes of report text each; run.uid says the owner */
        snprintf(report, sizeof report, "{\"run\":{\"uid\":%u},\"pad\":\"%0*d\"}", uid, 1000 - 29,
                 0);
        assert_int_equal(strlen(report), 1000);
        assert_int_equal(gs_store_run_end(st, ids[k], now - 50 + k, 0, report, &err), GS_OK);
    }
    if (gs_store_prune_runs_uid(st, now, 45, 0, 0, &n, &err) != GS_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(n, 60); /* 6 runs of 10 rows */
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run WHERE end_time IS NOT NULL", NULL),
                     6);
    assert_int_equal(sql_num(f->path, "SELECT min(id) FROM run WHERE end_time IS NOT NULL", NULL),
                     (double)ids[6]);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 50);
    assert_int_equal(gs_store_prune_runs_uid(st, now, 45, 0, 0, &n, &err), GS_OK);
    assert_int_equal(n, 0);
    /* 3,000 bytes: uid 1000 keeps its 3 newest (3,000 bytes, within), 1001 its 2 */
    assert_int_equal(gs_store_prune_runs_uid(st, now, 45, 3000, 0, &n, &err), GS_OK);
    assert_int_equal(n, 10);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run WHERE end_time IS NOT NULL", NULL),
                     5);
    assert_int_equal(sql_num(f->path, "SELECT min(id) FROM run WHERE end_time IS NOT NULL", NULL),
                     (double)ids[7]);
    /* no cap: no work */
    assert_int_equal(gs_store_prune_runs_uid(st, now, 0, 0, 0, &n, &err), GS_OK);
    assert_int_equal(n, 0);
    /* kept up to date: 3 more runs of uid 1001 ended since (50 rows, 5,000 bytes) lose its 2
     * oldest; the retention then deletes uid 1000's 3 (taken off its totals), so a 25-row cap
     * finds uid 1001 alone past it */
    for (unsigned k = 0; k < 3; k++) {
        int64_t id;
        assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
        for (unsigned i = 0; i < 9; i++) {
            r.step = i;
            assert_int_equal(gs_store_run_step(st, id, &r, 1, 1001, &err), GS_OK);
        }
        assert_int_equal(gs_store_flush(st, &err), GS_OK);
        assert_int_equal(gs_store_run_end(st, id, now - 5, 0, report, &err), GS_OK);
    }
    assert_int_equal(gs_store_prune_runs_uid(st, now, 45, 3000, 0, &n, &err), GS_OK);
    assert_int_equal(n, 20);
    assert_int_equal(gs_store_prune_runs(st, now, 30.0, 0, &n, &err), GS_OK);
    assert_int_equal(n, 30);
    assert_int_equal(gs_store_prune_runs_uid(st, now, 25, 0, 0, &n, &err), GS_OK);
    assert_int_equal(n, 10);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run WHERE end_time IS NOT NULL", NULL),
                     2);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 50);
    gs_store_close(st);
}

/* Three runs: A ended 40 days ago (7 steps), B going on since 40 days ago (3 steps), C ended
 * an hour ago (2 steps). A 30-day retention removes A and its steps only, 4 rows a call. */
static void test_prune_runs(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL;
    const double now = 1764430000.0, day = 86400.0;
    struct gs_store_run run = {.source = "agent", .start_time = now - 41 * day};
    struct gs_step_rec r;
    struct gs_err err;
    int64_t a = 0, b = 0, c = 0;
    unsigned n = 99, total = 0, calls = 0;

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &a, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &b, &err), GS_OK);
    run.start_time = now - 2 * 3600;
    assert_int_equal(gs_store_run_begin(st, &run, &c, &err), GS_OK);
    fill_step(&r, 0);
    for (unsigned i = 0; i < 7; i++) {
        r.step = i;
        assert_int_equal(gs_store_run_step(st, a, &r, 1, 0, &err), GS_OK);
    }
    for (unsigned i = 0; i < 3; i++) {
        r.step = i;
        assert_int_equal(gs_store_run_step(st, b, &r, 2, 0, &err), GS_OK);
    }
    for (unsigned i = 0; i < 2; i++) {
        r.step = i;
        assert_int_equal(gs_store_run_step(st, c, &r, 3, 0, &err), GS_OK);
    }
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(gs_store_run_end(st, a, now - 40 * day, -1, "{}", &err), GS_OK);
    assert_int_equal(gs_store_run_end(st, c, now - 3600, -1, "{}", &err), GS_OK);

    /* zero retention keeps everything */
    assert_int_equal(gs_store_prune_runs(st, now, 0, 4, &n, &err), GS_OK);
    assert_int_equal(n, 0);
    /* 8 rows of A (7 steps + its row) in batches of 4: 4, 4, then nothing left */
    do {
        assert_int_equal(gs_store_prune_runs(st, now, 30 * day, 4, &n, &err), GS_OK);
        assert_true(n <= 4);
        total += n;
        calls++;
        if (calls == 1) { /* the run row stays while it has steps */
            assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 3);
            assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run WHERE id = 1", NULL), 1);
        }
    } while (n == 4 && calls < 10);
    assert_int_equal(total, 8);
    assert_int_equal(calls, 3);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run WHERE id = 1", NULL), 0);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 1", NULL), 0);
    /* B (no end_time) and C (recent) are untouched */
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run", NULL), 2);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 2", NULL), 3);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step WHERE run = 3", NULL), 2);
    assert_true(gs_store_stats(st).pruned_rows >= 8);
    /* a day later than C's end + 30 d, C goes too (2 steps + row in one call); B never */
    assert_int_equal(gs_store_prune_runs(st, now + 31 * day, 30 * day, 0, &n, &err), GS_OK);
    assert_int_equal(n, 3);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run", NULL), 1);
    assert_int_equal(sql_num(f->path, "SELECT id FROM run", NULL), (double)b);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM step", NULL), 3);
    assert_int_equal(gs_store_prune_runs(NULL, now, 30 * day, 0, &n, &err), GS_EINVAL);
    gs_store_close(st);
}

struct names {
    char v[8][16];
    int64_t uid[8], steps[8];
    unsigned n;
};

static int collect(void *ctx, const struct gs_store_run_row *row)
{
    struct names *o = ctx;

    if (o->n < 8) {
        snprintf(o->v[o->n], sizeof o->v[0], "%s", row->name);
        o->uid[o->n] = row->uid;
        o->steps[o->n] = row->steps;
        o->n++;
    }
    return 0;
}

static int collect_steps(void *ctx, const struct gs_store_step_row *row)
{
    struct gs_store_step_row *out = ctx;

    out[row->rec.step - 1] = *row;
    return 0;
}

static void list_names(struct gs_store *rd, const struct gs_store_runs_sel *sel, int64_t from,
                       int64_t limit, struct names *o)
{
    struct gs_err err;

    memset(o, 0, sizeof *o);
    assert_int_equal(gs_store_runs_list(rd, sel, from, limit, collect, o, &err), GS_OK);
}

/* Runs b1 b2 (uid 2000, by their steps' sender) a1 (uid 1000, by its report) b3 (ended
 * without a report: its first step says uid 2000) and a2 (no end, no steps: owner unknown). */
static void test_read_side(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL, *rd = NULL;
    static const char *const names[] = {"b1", "b2", "a1", "b3", "a2"};
    int64_t id[5], n = 0;
    struct gs_step_rec r;
    struct gs_store_step_row back[2];
    struct gs_store_runs_sel sel = {.source = "agent", .owner_only = 1, .uid = 2000};
    struct names o;
    struct gs_err err;

    assert_int_equal(gs_store_open_read(&rd, f->path, &err), GS_ENOTFOUND);
    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    for (int i = 0; i < 5; i++) {
        struct gs_store_run run = {.name = names[i], .source = "agent", .start_time = 100 + i};
        assert_int_equal(gs_store_run_begin(st, &run, &id[i], &err), GS_OK);
    }
    fill_step(&r, 1);
    for (int i = 0; i < 4; i++)
        if (i != 2)
            assert_int_equal(gs_store_run_step(st, id[i], &r, 77, 2000, &err), GS_OK);
    fill_step(&r, 2);
    r.ms[GS_PH_DATA] = NAN;
    r.samples = 0;
    r.mem_allocated = 0;
    r.flags = 0;
    assert_int_equal(gs_store_run_step(st, id[0], &r, 78, 2000, &err), GS_OK);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(gs_store_run_end(st, id[0], 200, -1, "{\"run\":{\"steps_received\":9}}", &err),
                     GS_OK);
    assert_int_equal(gs_store_run_end(st, id[1], 200, -1, "not json", &err), GS_OK);
    assert_int_equal(
        gs_store_run_end(st, id[2], 200, -1, "{\"run\":{\"uid\":1000,\"pid\":5}}", &err), GS_OK);
    assert_int_equal(gs_store_run_end(st, id[3], 200, -1, NULL, &err), GS_OK);

    assert_int_equal(gs_store_open_read(&rd, f->path, &err), GS_OK);
    /* uid 2000 sees b3 b2 b1, paged after the filter */
    assert_int_equal(gs_store_runs_count(rd, &sel, &n, &err), GS_OK);
    assert_int_equal(n, 3);
    list_names(rd, &sel, 0, 2, &o);
    assert_int_equal(o.n, 2);
    assert_string_equal(o.v[0], "b3");
    assert_string_equal(o.v[1], "b2");
    list_names(rd, &sel, 2, 2, &o);
    assert_int_equal(o.n, 1);
    assert_string_equal(o.v[0], "b1");
    assert_int_equal(o.steps[0], 9); /* the report's steps_received */
    /* uid 1000: a1 by its report; a live run skipped; nobody: none */
    sel.uid = 1000;
    list_names(rd, &sel, 0, 10, &o);
    assert_int_equal(o.n, 1);
    assert_string_equal(o.v[0], "a1");
    sel.uid = -1;
    assert_int_equal(gs_store_runs_count(rd, &sel, &n, &err), GS_OK);
    assert_int_equal(n, 0);
    sel.owner_only = 0;
    sel.skip_ids = &id[4];
    sel.n_skip = 1;
    list_names(rd, &sel, 0, 10, &o);
    assert_int_equal(o.n, 4);
    assert_string_equal(o.v[0], "b3");
    assert_int_equal(o.uid[0], 2000);
    assert_int_equal(o.steps[0], 1);  /* no report: its step rows */
    assert_int_equal(o.uid[2], 2000); /* b2: "not json", the step's sender */
    sel.source = "gpuscope-run";
    assert_int_equal(gs_store_runs_count(rd, &sel, &n, &err), GS_OK);
    assert_int_equal(n, 0);
    /* one run; unended runs */
    memset(&o, 0, sizeof o);
    assert_int_equal(gs_store_run_get(rd, NULL, id[2], collect, &o, &err), GS_OK);
    assert_int_equal(o.uid[0], 1000);
    assert_int_equal(gs_store_run_get(rd, NULL, 999, collect, &o, &err), GS_ENOTFOUND);
    memset(&o, 0, sizeof o);
    assert_int_equal(gs_store_runs_unended(rd, "agent", 10, collect, &o, &err), GS_OK);
    assert_int_equal(o.n, 1);
    assert_string_equal(o.v[0], "a2");
    assert_int_equal(o.uid[0], -1);
    /* steps back with their unknowns */
    assert_int_equal(gs_store_run_step_count(rd, id[0], &n, &err), GS_OK);
    assert_int_equal(n, 2);
    memset(back, 0, sizeof back);
    assert_int_equal(gs_store_run_steps(rd, id[0], 0, -1, collect_steps, back, &err), GS_OK);
    assert_int_equal(back[0].peer_pid, 77);
    assert_int_equal(back[1].peer_pid, 78);
    assert_int_equal(back[0].peer_uid, 2000);
    assert_int_equal(back[0].rec.rank, 1);
    assert_int_equal(back[0].rec.device, 3);
    assert_int_equal(back[0].rec.samples, 8);
    assert_int_equal(back[0].rec.mem_allocated, 1000);
    assert_int_equal(back[0].rec.mem_reserved, 0);
    assert_int_equal(back[0].rec.mem_peak_reserved, 4000);
    assert_true(back[0].rec.flags & GS_STEP_CUDA_EVENTS);
    assert_true(fabs(back[0].rec.ms[GS_PH_DATA] - 10.0) < 1e-9);
    assert_true(fabs(back[0].rec.t_end - back[0].rec.t_begin - 0.25) < 1e-6);
    assert_true(isnan(back[1].rec.ms[GS_PH_DATA]));
    assert_int_equal(back[1].rec.samples, 0);
    assert_int_equal(back[1].rec.mem_allocated, 0);
    assert_false(back[1].rec.flags & GS_STEP_CUDA_EVENTS);
    memset(back, 0, sizeof back);
    assert_int_equal(gs_store_run_steps(rd, id[0], 1, 5, collect_steps, back, &err), GS_OK);
    assert_int_equal(back[0].id, 0); /* skipped */
    assert_int_equal(back[1].peer_pid, 78);
    /* a reader writes nothing */
    {
        struct gs_store_run run = {.name = "x", .source = "agent"};
        int64_t x;
        assert_int_equal(gs_store_run_begin(rd, &run, &x, &err), GS_EINVAL);
        assert_int_equal(gs_store_run_end(rd, id[4], 1, -1, NULL, &err), GS_EINVAL);
        assert_int_equal(gs_store_flush(rd, &err), GS_EINVAL);
        assert_int_equal(gs_store_prune_runs(rd, 1e9, 1, 0, NULL, &err), GS_EINVAL);
    }
    gs_store_close(rd);
    gs_store_close(st);
}

/* ---- schema v3: logged values and tags ---- */

static void fill_log(struct gs_store_log *l, int64_t seq, double loss, double lr)
{
    memset(l, 0, sizeof *l);
    l->seq = seq;
    l->step = 10.0 * (double)(seq + 1);
    l->t = 1764430000.0 + (double)seq;
    l->rank = 0;
    l->n = 2;
    snprintf(l->key[0], sizeof l->key[0], "loss");
    snprintf(l->key[1], sizeof l->key[1], "learning_rate");
    l->value[0] = loss;
    l->value[1] = lr;
}

struct logs_back {
    struct gs_store_log v[32];
    unsigned n;
    unsigned stop_after; /* 0: never */
};

static int collect_logs(void *ctx, const struct gs_store_log *rec)
{
    struct logs_back *b = ctx;

    if (b->n < 32)
        b->v[b->n] = *rec;
    b->n++;
    return b->stop_after && b->n >= b->stop_after ? 7 : 0;
}

static void test_logs(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL, *rd = NULL;
    struct gs_store_run run = {.name = "sft",
                               .source = "agent",
                               .start_time = 1764430000.0,
                               .tags = "{\"team\":\"nlp\",\"lr\":\"2e-5\"}"};
    struct gs_store_log l;
    struct logs_back back = {0};
    struct gs_err err;
    int64_t id = 0, other = 0, recs = 0, pts = 0;
    int isnull = 0;

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
    run.tags = NULL;
    assert_int_equal(gs_store_run_begin(st, &run, &other, &err), GS_OK);
    for (int i = 0; i < 20; i++) {
        fill_log(&l, i, 2.0 - 0.05 * i, 1e-4 * (i + 1));
        assert_int_equal(gs_store_run_log(st, id, &l, &err), GS_OK);
    }
    fill_log(&l, 0, 9.0, 9.0);
    l.n = 1;
    l.step = NAN; /* absent: NULL */
    l.rank = -1;
    assert_int_equal(gs_store_run_log(st, other, &l, &err), GS_OK);
    /* bad records are refused, nothing buffered */
    l.n = 0;
    assert_int_equal(gs_store_run_log(st, id, &l, &err), GS_EINVAL);
    l.n = 1;
    l.value[0] = NAN;
    assert_int_equal(gs_store_run_log(st, id, &l, &err), GS_EINVAL);
    l.value[0] = 1;
    l.key[0][0] = 0;
    assert_int_equal(gs_store_run_log(st, id, &l, &err), GS_EINVAL);
    memset(l.key[0], 'k', sizeof l.key[0]); /* no NUL */
    assert_int_equal(gs_store_run_log(st, id, &l, &err), GS_EINVAL);
    assert_int_equal(gs_store_stats(st).logs_buffered, 41);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run_log", NULL), 0);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(gs_store_stats(st).logs_written, 41);
    assert_int_equal(gs_store_stats(st).logs_buffered, 0);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run_log WHERE run = 1", NULL), 40);
    sql_num(f->path, "SELECT step FROM run_log WHERE run = 2", &isnull);
    assert_true(isnull);
    sql_num(f->path, "SELECT rank FROM run_log WHERE run = 2", &isnull);
    assert_true(isnull);
    assert_int_equal(
        sql_num(f->path, "SELECT json_extract(tags, '$.team') = 'nlp' FROM run WHERE id = 1", NULL),
        1);
    sql_num(f->path, "SELECT tags FROM run WHERE id = 2", &isnull);
    assert_true(isnull);

    /* the read side: counts, records grouped with their values, pages, a stop */
    assert_int_equal(gs_store_open_read(&rd, f->path, &err), GS_OK);
    assert_int_equal(gs_store_run_log_count(rd, id, &recs, &pts, &err), GS_OK);
    assert_int_equal(recs, 20);
    assert_int_equal(pts, 40);
    assert_int_equal(gs_store_run_log_count(rd, 999, &recs, NULL, &err), GS_OK);
    assert_int_equal(recs, 0);
    assert_int_equal(gs_store_run_logs(rd, id, 0, -1, collect_logs, &back, &err), GS_OK);
    assert_int_equal(back.n, 20);
    for (unsigned i = 0; i < 20; i++) {
        assert_int_equal(back.v[i].seq, i);
        assert_int_equal(back.v[i].n, 2);
        assert_string_equal(back.v[i].key[0], "loss");
        assert_string_equal(back.v[i].key[1], "learning_rate");
        assert_true(fabs(back.v[i].value[0] - (2.0 - 0.05 * i)) < 1e-12);
        assert_true(fabs(back.v[i].value[1] - 1e-4 * (i + 1)) < 1e-15);
        assert_true(back.v[i].step == 10.0 * (i + 1));
        assert_int_equal(back.v[i].rank, 0);
    }
    memset(&back, 0, sizeof back);
    assert_int_equal(gs_store_run_logs(rd, id, 18, 5, collect_logs, &back, &err), GS_OK);
    assert_int_equal(back.n, 2);
    assert_int_equal(back.v[0].seq, 18);
    memset(&back, 0, sizeof back);
    assert_int_equal(gs_store_run_logs(rd, id, 5, 3, collect_logs, &back, &err), GS_OK);
    assert_int_equal(back.n, 3);
    assert_int_equal(back.v[2].seq, 7);
    memset(&back, 0, sizeof back);
    back.stop_after = 2;
    assert_int_equal(gs_store_run_logs(rd, id, 0, -1, collect_logs, &back, &err), 7);
    assert_int_equal(back.n, 2);
    memset(&back, 0, sizeof back);
    assert_int_equal(gs_store_run_logs(rd, other, 0, 10, collect_logs, &back, &err), GS_OK);
    assert_int_equal(back.n, 1);
    assert_true(isnan(back.v[0].step));
    assert_int_equal(back.v[0].rank, -1);
    assert_int_equal(gs_store_run_log(rd, id, &back.v[0], &err), GS_EINVAL); /* a reader */
    gs_store_close(rd);

    /* retention: the ended run goes with its points, 15 rows a call; the other stays */
    assert_int_equal(gs_store_run_end(st, id, 1764430100.0, -1, "{}", &err), GS_OK);
    {
        unsigned n = 0, total = 0, calls = 0;
        do {
            assert_int_equal(
                gs_store_prune_runs(st, 1764430100.0 + 86400 * 40, 86400 * 30, 15, &n, &err),
                GS_OK);
            total += n;
            calls++;
            if (calls == 1) /* points first, and the run row stays */
                assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run WHERE id = 1", NULL),
                                 1);
        } while (n == 15 && calls < 10);
        assert_int_equal(total, 41); /* 40 points + the run row */
        assert_int_equal(calls, 3);
    }
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run_log WHERE run = 1", NULL), 0);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run WHERE id = 1", NULL), 0);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run_log WHERE run = 2", NULL), 1);
    gs_store_close(st);
}

static void test_log_cap(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL;
    struct gs_store_run run = {.source = "agent"};
    struct gs_store_log l;
    struct gs_err err;
    int64_t id = 0;
    unsigned ok = 0;

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
    /* 2 points a record: 10,000 records fill the 20,000 points; 3 more are dropped whole */
    for (int i = 0; i < 10003; i++) {
        fill_log(&l, i, 1.0, 1e-4);
        ok += gs_store_run_log(st, id, &l, &err) == GS_OK;
    }
    assert_int_equal(ok, 10000);
    assert_int_equal(gs_store_stats(st).logs_dropped, 6);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(gs_store_stats(st).logs_written, 20000);
    assert_int_equal(sql_num(f->path, "SELECT max(seq) FROM run_log", NULL), 9999);
    assert_int_equal(gs_store_run_log(st, id, &l, &err), GS_OK); /* room again */
    gs_store_close(st);
}

/* A v2 file (a run with a step) as the previous gpuscope wrote it: reopening migrates it to
 * v3, keeps its rows, and the run takes logged points and tags after. */
static void test_migrate_v2(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL;
    struct gs_store_run run = {.name = "old", .source = "agent", .start_time = 1764430000.0};
    struct gs_step_rec r;
    struct gs_store_log l;
    struct gs_err err;
    int64_t id = 0, id2 = 0;
    sqlite3 *db;

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
    fill_step(&r, 5);
    assert_int_equal(gs_store_run_step(st, id, &r, 1, 1000, &err), GS_OK);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    gs_store_close(st);
    /* back to v2's shape exactly: no run_log table, no tags column */
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db,
                     "DROP TABLE run_log; ALTER TABLE run DROP COLUMN tags;"
                     " ALTER TABLE run DROP COLUMN token; ALTER TABLE step DROP COLUMN tokens;"
                     " PRAGMA user_version = 2",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(
        sql_num(f->path, "SELECT count(*) FROM sqlite_schema WHERE name = 'run_log'", NULL), 0);
    assert_int_equal(
        sql_num(f->path, "SELECT count(*) FROM pragma_table_info('run') WHERE name = 'tags'", NULL),
        0);
    /* a v3 reader refuses the v2 file until its writer migrated it */
    {
        struct gs_store *rd = NULL;
        assert_int_equal(gs_store_open_read(&rd, f->path, &err), GS_ENOTSUP);
    }
    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(sql_num(f->path, "PRAGMA user_version", NULL), GS_STORE_SCHEMA_VERSION);
    assert_int_equal(sql_num(f->path, "SELECT step FROM step WHERE run = 1", NULL), 5);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run", NULL), 1);
    fill_log(&l, 0, 1.5, 3e-5);
    assert_int_equal(gs_store_run_log(st, id, &l, &err), GS_OK);
    run.tags = "{\"a\":\"b\"}";
    assert_int_equal(gs_store_run_begin(st, &run, &id2, &err), GS_OK);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run_log WHERE run = 1", NULL), 2);
    assert_int_equal(
        sql_num(f->path, "SELECT json_extract(tags, '$.a') = 'b' FROM run WHERE id = 2", NULL), 1);
    assert_int_equal(sql_num(f->path,
                             "SELECT count(*) FROM pragma_integrity_check"
                             " WHERE integrity_check != 'ok'",
                             NULL),
                     0);
    gs_store_close(st);
    /* reopening a v3 file migrates nothing */
    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(sql_num(f->path, "SELECT count(*) FROM run_log", NULL), 2);
    gs_store_close(st);
}

/* Schema v4: a v3 file (no token column) is migrated on open and keeps its runs; a run's
 * token hash is stored and read back by gs_store_runs_unended, NULL for one without. */
static int unended_token(void *ctx, const struct gs_store_run_row *row)
{
    char *out = ctx;

    snprintf(out + 80 * (row->id - 1), 80, "%s", row->token ? row->token : "(null)");
    return 0;
}

static void test_migrate_v3_token(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL, *rd = NULL;
    struct gs_store_run run = {.name = "old", .source = "agent", .start_time = 1764430000.0};
    char tokens[160] = "";
    struct gs_err err;
    int64_t id = 0;
    sqlite3 *db;

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
    gs_store_close(st);
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "ALTER TABLE run DROP COLUMN token;"
                                  " ALTER TABLE step DROP COLUMN tokens; PRAGMA user_version = 3",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(gs_store_open_read(&rd, f->path, &err), GS_ENOTSUP);
    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(sql_num(f->path, "PRAGMA user_version", NULL), GS_STORE_SCHEMA_VERSION);
    run.token = "5f0c6e0a1c1c6b2b9e4a9d1d2f3e4a5b6c7d8e9f00112233445566778899aabb";
    assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
    assert_int_equal(id, 2);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    assert_int_equal(gs_store_open_read(&rd, f->path, &err), GS_OK);
    assert_int_equal(gs_store_runs_unended(rd, "agent", 10, unended_token, tokens, &err), GS_OK);
    assert_string_equal(tokens, "(null)");
    assert_string_equal(tokens + 80, run.token);
    gs_store_close(rd);
    gs_store_close(st);
}

/* Schema v6: a v5 file (no step.tokens) is migrated on open and keeps its steps, whose tokens
 * read back as unknown (0); a step stored after carries its tokens through gs_store_run_steps,
 * and one without reads 0. A v6 reader refuses the v5 file until its writer migrated it. */
static void test_migrate_v5_tokens(void **state)
{
    struct fx *f = *state;
    struct gs_store *st = NULL, *rd = NULL;
    struct gs_store_run run = {.name = "old", .source = "agent", .start_time = 1764430000.0};
    struct gs_store_step_row got[3];
    struct gs_step_rec r;
    struct gs_err err;
    int64_t id = 0;
    int isnull = 0;
    sqlite3 *db;

    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
    fill_step(&r, 1);
    assert_int_equal(gs_store_run_step(st, id, &r, 1, 1000, &err), GS_OK);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    gs_store_close(st);
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "ALTER TABLE step DROP COLUMN tokens; PRAGMA user_version = 5",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(sql_num(f->path,
                             "SELECT count(*) FROM pragma_table_info('step') WHERE name = 'tokens'",
                             NULL),
                     0);
    assert_int_equal(gs_store_open_read(&rd, f->path, &err), GS_ENOTSUP);
    assert_int_equal(gs_store_open(&st, f->path, NULL, &err), GS_OK);
    assert_int_equal(sql_num(f->path, "PRAGMA user_version", NULL), 6);
    sql_num(f->path, "SELECT tokens FROM step WHERE step = 1", &isnull);
    assert_true(isnull); /* the old row: unknown, not 0 */
    fill_step(&r, 2);
    r.tokens = 4096;
    assert_int_equal(gs_store_run_step(st, id, &r, 1, 1000, &err), GS_OK);
    fill_step(&r, 3); /* a record without tokens */
    assert_int_equal(gs_store_run_step(st, id, &r, 1, 1000, &err), GS_OK);
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    memset(got, 0xff, sizeof got);
    assert_int_equal(gs_store_open_read(&rd, f->path, &err), GS_OK);
    assert_int_equal(gs_store_run_steps(rd, id, 0, -1, collect_steps, got, &err), GS_OK);
    assert_int_equal(got[0].rec.step, 1);
    assert_int_equal(got[0].rec.tokens, 0);
    assert_int_equal(got[1].rec.tokens, 4096);
    assert_int_equal(got[2].rec.step, 3);
    assert_int_equal(got[2].rec.tokens, 0);
    assert_int_equal(got[1].rec.samples, 8); /* the columns after it still line up */
    assert_int_equal(got[1].rec.mem_peak_reserved, 4000);
    gs_store_close(rd);
    gs_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_run_and_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_live, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_uid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_ended_uid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_side, setup, teardown),
        cmocka_unit_test_setup_teardown(test_logs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v3_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v5_tokens, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
