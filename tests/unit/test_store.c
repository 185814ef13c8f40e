/*
 * Unit tests for the history store (src/store/history.c) on real SQLite files in a temporary
 * directory: schema and identity checks, round trips, rollups, pruning, the bounded buffer,
 * write failures (a tiny max_page_count makes SQLITE_FULL) and a SIGKILLed writer. Every test
 * ends with PRAGMA integrity_check on a separate connection.
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmpdir.h"

#include <sqlite3.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "store/history.h"

#define MIN0 1700000040.0 /* unix seconds on a minute boundary (28333334 minutes) */

static int setup_tmp(void **state)
{
    return tmp_setup(state, "/tmp/gs_store_XXXXXX", "history.db");
}

static int teardown_tmp(void **state)
{
    return tmp_teardown(state);
}

/* integrity_check and one integer query through an independent connection */
static long long sql_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    long long v = -999;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_type(s, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

static void assert_integrity(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
    sqlite3_close(db);
}

static struct gs_snapshot *make_snap(unsigned n_gpus, double t)
{
    struct gs_snapshot *s = NULL;
    assert_int_equal(gs_snapshot_new(&s, n_gpus, 4, NULL), GS_OK);
    s->t_real = t;
    for (unsigned i = 0; i < n_gpus; i++) {
        struct gs_gpu *g = &s->gpus[i];
        g->index = i;
        snprintf(g->text[GS_T_UUID], GS_STR_LEN, "GPU-0000-%u", i);
        g->tst[GS_T_UUID] = GS_ST_OK;
        snprintf(g->text[GS_T_NAME], GS_STR_LEN, "NVIDIA H100 80GB HBM3");
        g->tst[GS_T_NAME] = GS_ST_OK;
        gs_gpu_set(g, GS_M_MEM_TOTAL, 85899345920.0);
    }
    return s;
}

/* Fills gpu i at sample k with recognisable values; GPM only on even GPUs. */
static void fill(struct gs_snapshot *s, unsigned k)
{
    for (unsigned i = 0; i < s->n_gpus; i++) {
        struct gs_gpu *g = &s->gpus[i];
        gs_gpu_set(g, GS_M_UTIL_GPU, (double)((k * 7 + i) % 100) / 100.0);
        gs_gpu_set(g, GS_M_POWER_DRAW, 100.0 + k + i * 0.125 + 1.0 / 3.0);
        gs_gpu_set(g, GS_M_TEMP_GPU, 40.0 + (double)(k % 10));
        gs_gpu_set(g, GS_M_MEM_USED, 1e9 * (double)i + (double)k);
        if (i % 2 == 0)
            gs_gpu_set(g, GS_M_GPM_SM_ACTIVE, 0.5);
    }
}

struct pts {
    unsigned n;
    struct gs_store_point p[4096];
};

static int collect(void *ctx, const struct gs_store_point *p)
{
    struct pts *c = ctx;
    if (c->n < 4096)
        c->p[c->n++] = *p;
    return 0;
}

static void query(struct gs_store *st, unsigned gpu, enum gs_metric m, double from, double to,
                  double step, struct pts *out, enum gs_store_source *src)
{
    struct gs_err e = {0};
    out->n = 0;
    int rc = gs_store_query(st, gpu, m, from, to, step, collect, out, src, &e);
    if (rc != GS_OK)
        fail_msg("query: %s", e.msg);
}

static void append_range(struct gs_store *st, unsigned n_gpus, double t, unsigned from, unsigned to)
{
    struct gs_snapshot *s = make_snap(n_gpus, t);
    for (unsigned k = from; k < to; k++) {
        gs_snapshot_clear(s);
        s->t_real = t + k;
        for (unsigned i = 0; i < n_gpus; i++) {
            s->gpus[i].index = i;
            snprintf(s->gpus[i].text[GS_T_UUID], GS_STR_LEN, "GPU-0000-%u", i);
            s->gpus[i].tst[GS_T_UUID] = GS_ST_OK;
        }
        fill(s, k);
        assert_int_equal(gs_store_append(st, s, NULL), GS_OK);
    }
    gs_snapshot_free(s);
}

static void flush_ok(struct gs_store *st)
{
    struct gs_err e = {0};
    if (gs_store_flush(st, &e) != GS_OK)
        fail_msg("flush: %s", e.msg);
}

/* A file with damaged pages in the middle but an intact header (issue 18) is refused at open
 * with a clear error and left as it is; an intact one passes gs_store_check. */
static void damaged_file_refused(void **state)
{
    struct tmp *t = *state;
    struct gs_store *st = NULL;
    struct gs_err e = {0};
    struct stat sb;
    unsigned char junk[4096];
    FILE *f;

    assert_int_equal(gs_store_open(&st, t->db, NULL, &e), GS_OK);
    for (unsigned b = 0; b < 20; b++) {
        append_range(st, 8, 1700000000.0, b * 300, b * 300 + 300);
        flush_ok(st);
    }
    assert_int_equal(gs_store_check(st, &e), GS_OK);
    gs_store_close(st);
    st = NULL;
    assert_int_equal(sql_int(t->db, "PRAGMA wal_checkpoint(TRUNCATE)"), 0);
    assert_int_equal(stat(t->db, &sb), 0);
    assert_true(sb.st_size > 64 * 4096);
    /* Pages 10..40 (of 4 KiB) overwritten with garbage; the 100-byte header untouched. */
    memset(junk, 0xa5, sizeof junk);
    f = fopen(t->db, "r+b");
    assert_non_null(f);
    for (long pg = 10; pg < 40; pg++) {
        assert_int_equal(fseek(f, pg * 4096, SEEK_SET), 0);
        assert_int_equal(fwrite(junk, 1, sizeof junk, f), sizeof junk);
    }
    fclose(f);
    gs_err_clear(&e);
    /* GS_EPARSE: the agent exits 2 on it (docs/agent.md), not 255 */
    assert_int_equal(gs_store_open(&st, t->db, NULL, &e), GS_EPARSE);
    assert_null(st);
    if (!strstr(e.msg, "is damaged (SQLite quick_check"))
        fail_msg("got '%s'", e.msg);
    assert_int_equal(stat(t->db, &sb), 0); /* left where it was, for the operator */
}

static void create_reopen_schema_version(void **state)
{
    struct tmp *t = *state;
    struct gs_store *st = NULL;
    struct gs_err e = {0};
    struct pts *p = calloc(1, sizeof *p);

    assert_int_equal(gs_store_open(&st, t->db, NULL, &e), GS_OK);
    append_range(st, 2, MIN0, 0, 3);
    flush_ok(st);
    gs_store_close(st);
    assert_int_equal(sql_int(t->db, "PRAGMA application_id"), GS_STORE_APP_ID);
    assert_int_equal(sql_int(t->db, "PRAGMA user_version"), GS_STORE_SCHEMA_VERSION);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM sample"), 6);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM gpu"), 2);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM samples WHERE gpu = 1"), 3);

    st = NULL;
    assert_int_equal(gs_store_open(&st, t->db, NULL, &e), GS_OK); /* reopen: no migration */
    query(st, 1, GS_M_TEMP_GPU, MIN0, MIN0 + 10, 0, p, NULL);
    assert_int_equal(p->n, 3);
    gs_store_close(st);
    gs_store_close(NULL);

    /* journal mode is persistent in the file */
    {
        sqlite3 *db;
        sqlite3_stmt *s;
        assert_int_equal(sqlite3_open_v2(t->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL), 0);
        assert_int_equal(sqlite3_step(s), SQLITE_ROW);
        assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
        sqlite3_finalize(s);
        sqlite3_close(db);
    }
    assert_integrity(t->db);
    free(p);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b = malloc(1 << 20);
    assert_non_null(f);
    *len = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

static void assert_refused(const char *path, int want_rc, const char *want_msg)
{
    struct gs_store *st = NULL;
    struct gs_err e = {0};
    size_t n0, n1;
    char *before = slurp(path, &n0), *after, wal[160];

    assert_int_equal(gs_store_open(&st, path, NULL, &e), want_rc);
    assert_null(st);
    assert_non_null(strstr(e.msg, want_msg));
    after = slurp(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    snprintf(wal, sizeof wal, "%s-wal", path);
    assert_int_not_equal(access(wal, F_OK), 0);
    free(before);
    free(after);
}

static void make_db(const char *path, const char *sql)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void foreign_db_refused(void **state)
{
    struct tmp *t = *state;
    FILE *f;

    make_db(t->db, "PRAGMA application_id = 1234; CREATE TABLE notes(x TEXT);"
                   "INSERT INTO notes VALUES('mine');");
    assert_refused(t->db, GS_EPARSE, "not a gpuscope history database (application_id");
    unlink(t->db);

    make_db(t->db, "CREATE TABLE notes(x TEXT);"); /* application_id 0, but not empty */
    assert_refused(t->db, GS_EPARSE, "application_id 0x00000000");
    unlink(t->db);

    char v[128];
    snprintf(v, sizeof v,
             "PRAGMA application_id = %d; PRAGMA user_version = 99;"
             "CREATE TABLE x(y);",
             GS_STORE_APP_ID);
    make_db(t->db, v);
    assert_refused(t->db, GS_ENOTSUP, "newer than this gpuscope");
    unlink(t->db);

    f = fopen(t->db, "wb");
    assert_non_null(f);
    for (int i = 0; i < 400; i++)
        fputs("this is somebody's notes file, not a database\n", f);
    fclose(f);
    assert_refused(t->db, GS_EPARSE, "not a gpuscope history database");
    unlink(t->db);

    /* a symlink is refused rather than followed */
    char target[160];
    snprintf(target, sizeof target, "%s/real.db", t->dir);
    assert_int_equal(symlink(target, t->db), 0);
    {
        struct gs_store *st = NULL;
        struct gs_err e = {0};
        assert_int_not_equal(gs_store_open(&st, t->db, NULL, &e), GS_OK);
        assert_null(st);
        assert_int_not_equal(access(target, F_OK), 0);
    }
    unlink(t->db);
}

static void round_trip_and_absent(void **state)
{
    struct tmp *t = *state;
    struct gs_store *st = NULL;
    struct pts *p = calloc(1, sizeof *p);
    enum gs_store_source src;

    assert_int_equal(gs_store_open(&st, t->db, NULL, NULL), GS_OK);
    append_range(st, 2, MIN0, 0, 20);
    query(st, 0, GS_M_POWER_DRAW, MIN0, MIN0 + 100, 0, p, NULL);
    assert_int_equal(p->n, 0); /* buffered only */
    assert_int_equal(gs_store_stats(st).buffered, 20);
    flush_ok(st);
    assert_int_equal(gs_store_stats(st).buffered, 0);
    assert_int_equal(gs_store_stats(st).snapshots_written, 20);

    for (unsigned gpu = 0; gpu < 2; gpu++) {
        query(st, gpu, GS_M_POWER_DRAW, MIN0, MIN0 + 100, 0, p, &src);
        assert_int_equal(src, GS_STORE_RAW);
        assert_int_equal(p->n, 20);
        for (unsigned k = 0; k < 20; k++) {
            assert_true(p->p[k].t == MIN0 + k);
            assert_true(p->p[k].avg == 100.0 + k + gpu * 0.125 + 1.0 / 3.0); /* bit-exact */
            assert_int_equal(p->p[k].n, 1);
        }
        query(st, gpu, GS_M_UTIL_GPU, MIN0 + 5, MIN0 + 8, 0, p, NULL); /* [from, to) */
        assert_int_equal(p->n, 3);
        assert_true(p->p[0].avg == (double)((5 * 7 + gpu) % 100) / 100.0);
    }
    /* GPM absent on GPU 1: no points, and NULL in the file, not 0 */
    query(st, 1, GS_M_GPM_SM_ACTIVE, MIN0, MIN0 + 100, 0, p, NULL);
    assert_int_equal(p->n, 0);
    query(st, 0, GS_M_GPM_SM_ACTIVE, MIN0, MIN0 + 100, 0, p, NULL);
    assert_int_equal(p->n, 20);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM samples WHERE gpu = 1 AND"
                                    " sm_active IS NULL AND fan_speed IS NULL"),
                     20);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM sample WHERE sm_active = 0"), 0);
    /* bucketed raw query: 5 s buckets of 5 samples */
    query(st, 0, GS_M_TEMP_GPU, MIN0, MIN0 + 20, 5, p, &src);
    assert_int_equal(src, GS_STORE_RAW);
    assert_int_equal(p->n, 4);
    assert_true(p->p[0].min == 40.0 && p->p[0].max == 44.0 && p->p[0].avg == 42.0);
    assert_int_equal(p->p[0].n, 5);
    /* not kept, bad arguments */
    struct gs_err e = {0};
    assert_int_equal(gs_store_query(st, 0, GS_M_PCI_BUS, MIN0, MIN0 + 1, 0, collect, p, NULL, &e),
                     GS_ENOTFOUND);
    assert_non_null(strstr(e.msg, "pci_bus"));
    assert_false(gs_store_keeps(GS_M_PCI_BUS));
    assert_true(gs_store_keeps(GS_M_POWER_DRAW));
    assert_int_equal(
        gs_store_query(st, 0, GS_M_POWER_DRAW, MIN0 + 1, MIN0, 0, collect, p, NULL, &e), GS_EINVAL);
    struct gs_snapshot *bad = make_snap(1, 0.0);
    assert_int_equal(gs_store_append(st, bad, &e), GS_EINVAL);
    gs_snapshot_free(bad);
    gs_store_close(st);
    assert_integrity(t->db);
    free(p);
}

static void rollups_min_avg_max(void **state)
{
    struct tmp *t = *state;
    struct gs_store *st = NULL;
    struct gs_store_opts o = {.raw_max_range_s = 60};
    struct pts *p = calloc(1, sizeof *p);
    enum gs_store_source src;

    assert_int_equal(gs_store_open(&st, t->db, &o, NULL), GS_OK);
    /* 150 s: minutes 0 and 1 complete, minute 2 open; flushed in 5 s batches like the agent */
    for (unsigned k = 0; k < 150; k += 5) {
        append_range(st, 2, MIN0, k, k + 5);
        flush_ok(st);
    }
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM rollup"), 4); /* 2 minutes x 2 GPUs */
    query(st, 0, GS_M_POWER_DRAW, MIN0, MIN0 + 3600, 0, p, &src);
    assert_int_equal(src, GS_STORE_ROLLUP);
    assert_int_equal(p->n, 2);
    for (unsigned m = 0; m < 2; m++) {
        double lo = 100.0 + 60 * m + 0 * 0.125 + 1.0 / 3.0, sum = 0;
        double hi = 100.0 + (60 * m + 59) + 0 * 0.125 + 1.0 / 3.0; /* as fill() computes */
        for (unsigned k = 60 * m; k < 60 * m + 60; k++)
            sum += 100.0 + k + 1.0 / 3.0;
        assert_true(p->p[m].t == MIN0 + 60 * m);
        assert_true(p->p[m].min == lo);
        assert_true(p->p[m].max == hi);
        assert_true(fabs(p->p[m].avg - sum / 60) < 1e-9);
        assert_int_equal(p->p[m].n, 60);
    }
    /* absent metric: no rollup point for GPU 1 GPM, and no fake zero */
    query(st, 1, GS_M_GPM_SM_ACTIVE, MIN0, MIN0 + 3600, 0, p, NULL);
    assert_int_equal(p->n, 0);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM rollups WHERE gpu = 1 AND"
                                    " sm_active_min IS NULL AND sm_active_n = 0"),
                     2);
    /* a 2-minute step merges the two minutes */
    query(st, 0, GS_M_TEMP_GPU, MIN0, MIN0 + 3600, 120, p, NULL);
    assert_int_equal(p->n, 1);
    assert_true(p->p[0].min == 40.0 && p->p[0].max == 49.0 && p->p[0].avg == 44.5);
    assert_int_equal(p->p[0].n, 120);
    /* the next minute completes only when later data arrives, also after a reopen */
    gs_store_close(st);
    st = NULL;
    assert_int_equal(gs_store_open(&st, t->db, &o, NULL), GS_OK);
    append_range(st, 2, MIN0, 180, 181);
    flush_ok(st);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM rollup"), 6);
    assert_int_equal(sql_int(t->db, "SELECT n FROM rollups WHERE time = 1700000160 AND gpu=0"), 30);
    /* a late sample re-rolls its minute */
    append_range(st, 2, MIN0 + 0.5, 0, 1);
    flush_ok(st);
    assert_int_equal(sql_int(t->db, "SELECT n FROM rollups WHERE time = 1700000040 AND gpu=0"), 61);
    gs_store_close(st);
    assert_integrity(t->db);
    free(p);
}

static void retention_prune(void **state)
{
    struct tmp *t = *state;
    struct gs_store *st = NULL;
    struct gs_store_opts o = {.proc_interval_ms = 1000};
    unsigned del = 0, total = 0, calls = 0;
    double now = MIN0 + 7200;

    assert_int_equal(gs_store_open(&st, t->db, &o, NULL), GS_OK);
    /* 2 h of 1 GPU at 1 s, with one process per snapshot */
    struct gs_snapshot *s = make_snap(1, MIN0);
    gs_snapshot_reserve_procs(s, 1, NULL);
    for (unsigned k = 0; k < 7200; k++) {
        s->t_real = MIN0 + k;
        fill(s, k);
        s->n_procs = 1;
        s->procs[0].pid = 4242;
        s->procs[0].gpu = 0;
        s->procs[0].mem_st = GS_ST_OK;
        s->procs[0].gpu_mem_bytes = 1u << 30;
        assert_int_equal(gs_store_append(st, s, NULL), GS_OK);
        if (k % 300 == 299)
            flush_ok(st);
    }
    gs_snapshot_free(s);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM sample"), 7200);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM proc_sample"), 7200);
    long long rollups = sql_int(t->db, "SELECT count(*) FROM rollup");
    assert_int_equal(rollups, 119);
    /* keep 1 h of raw, 90 min of rollups, 500 rows per call */
    do {
        assert_int_equal(gs_store_prune(st, now, 3600, 5400, 500, &del, NULL), GS_OK);
        assert_true(del <= 500);
        total += del;
        calls++;
    } while (del == 500);
    assert_int_equal(total, 3600 + 3600 + 30);
    assert_true(calls >= 15);
    assert_int_equal(sql_int(t->db, "SELECT min(time) FROM samples"), (long long)(now - 3600));
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM proc_sample"), 3600);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM rollup"), rollups - 30);
    assert_int_equal(gs_store_stats(st).pruned_rows, total);
    /* nothing left to do */
    assert_int_equal(gs_store_prune(st, now, 3600, 5400, 500, &del, NULL), GS_OK);
    assert_int_equal(del, 0);
    gs_store_close(st);
    assert_integrity(t->db);
}

static void buffer_cap_drops_oldest(void **state)
{
    struct tmp *t = *state;
    struct gs_store *st = NULL;
    struct gs_store_opts o = {.buffer_cap = 5};
    struct pts *p = calloc(1, sizeof *p);

    assert_int_equal(gs_store_open(&st, t->db, &o, NULL), GS_OK);
    append_range(st, 1, MIN0, 0, 8);
    assert_int_equal(gs_store_stats(st).dropped, 3);
    assert_int_equal(gs_store_stats(st).buffered, 5);
    flush_ok(st);
    query(st, 0, GS_M_TEMP_GPU, MIN0, MIN0 + 100, 0, p, NULL);
    assert_int_equal(p->n, 5);
    assert_true(p->p[0].t == MIN0 + 3); /* 0, 1, 2 dropped */
    assert_true(p->p[4].t == MIN0 + 7);
    /* the ring wraps and reuses its slots */
    append_range(st, 1, MIN0, 8, 20);
    flush_ok(st);
    assert_int_equal(gs_store_stats(st).dropped, 10);
    query(st, 0, GS_M_TEMP_GPU, MIN0, MIN0 + 100, 0, p, NULL);
    assert_int_equal(p->n, 10);
    gs_store_close(st);
    assert_integrity(t->db);
    free(p);
}

static void disk_full_keeps_buffer_and_recovers(void **state)
{
    struct tmp *t = *state;
    struct gs_store *st = NULL;
    struct gs_err e = {0};
    struct gs_store_opts o = {.buffer_cap = 1000};
    struct pts *p = calloc(1, sizeof *p);
    char sql[80];

    assert_int_equal(gs_store_open(&st, t->db, &o, NULL), GS_OK);
    append_range(st, 8, MIN0, 0, 5);
    flush_ok(st);
    long long pages = sql_int(t->db, "PRAGMA page_count");
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", pages);
    assert_int_equal(gs_store_test_exec(st, sql, NULL), GS_OK);

    append_range(st, 8, MIN0, 5, 600);
    assert_int_equal(gs_store_flush(st, &e), GS_EIO);
    assert_non_null(strstr(e.msg, "full"));
    struct gs_store_stats s = gs_store_stats(st);
    assert_int_equal(s.write_errors, 1);
    assert_int_equal(s.consecutive_failures, 1);
    assert_int_equal(s.buffered, 595);
    assert_int_equal(gs_store_flush(st, &e), GS_EIO); /* still full: retried, kept */
    assert_int_equal(gs_store_stats(st).consecutive_failures, 2);
    /* live data keeps coming while the disk is full */
    append_range(st, 8, MIN0, 600, 610);
    assert_int_equal(gs_store_stats(st).buffered, 605);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM sample"), 40);
    assert_integrity(t->db);

    /* space returns */
    assert_int_equal(gs_store_test_exec(st, "PRAGMA max_page_count = 1073741823", NULL), GS_OK);
    flush_ok(st);
    s = gs_store_stats(st);
    assert_int_equal(s.consecutive_failures, 0);
    assert_int_equal(s.write_errors, 2);
    assert_int_equal(s.buffered, 0);
    assert_int_equal(s.dropped, 0);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM sample"), 610 * 8);
    query(st, 7, GS_M_MEM_USED, MIN0, MIN0 + 1000, 0, p, NULL);
    assert_int_equal(p->n, 610);
    gs_store_close(st);
    assert_integrity(t->db);
    free(p);
}

/* A child flushes 5-snapshot batches and acknowledges each through a pipe after its flush
 * returned; the parent SIGKILLs it mid-stream. Every acknowledged batch must be there. */
static void kill9_loses_only_unflushed(void **state)
{
    struct tmp *t = *state;
    int fds[2];
    pid_t pid;
    unsigned acked = 0, b;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct gs_store *st = NULL;
        close(fds[0]);
        if (gs_store_open(&st, t->db, NULL, NULL) != GS_OK)
            _exit(2);
        for (b = 0;; b++) {
            append_range(st, 8, MIN0, b * 5, b * 5 + 5);
            if (gs_store_flush(st, NULL) != GS_OK)
                _exit(3);
            if (write(fds[1], &b, sizeof b) != sizeof b)
                _exit(4);
        }
    }
    close(fds[1]);
    while (acked < 40 && read(fds[0], &b, sizeof b) == sizeof b)
        acked = b + 1;
    usleep(3000); /* land the kill inside a later flush, most likely */
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    while (read(fds[0], &b, sizeof b) == sizeof b)
        acked = b + 1;
    close(fds[0]);
    assert_true(acked >= 40);

    assert_integrity(t->db);
    struct gs_store *st = NULL;
    struct gs_err e = {0};
    if (gs_store_open(&st, t->db, NULL, &e) != GS_OK)
        fail_msg("reopen: %s", e.msg);
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM samples WHERE time < %.0f", MIN0 + acked * 5);
    assert_int_equal(sql_int(t->db, sql), (long long)acked * 5 * 8);
    /* the store goes on writing after the crash */
    append_range(st, 8, MIN0, 100000, 100005);
    flush_ok(st);
    gs_store_close(st);
    assert_integrity(t->db);
}

static void processes_stored(void **state)
{
    struct tmp *t = *state;
    struct gs_store *st = NULL;
    struct gs_store_opts o = {.proc_interval_ms = 10000};
    struct gs_snapshot *s = make_snap(2, MIN0);

    assert_int_equal(gs_store_open(&st, t->db, &o, NULL), GS_OK);
    s->gpus[1].index = 3; /* stored by NVML index, not array slot */
    gs_snapshot_reserve_procs(s, 2, NULL);
    for (unsigned k = 0; k < 25; k++) {
        s->t_real = MIN0 + k;
        s->n_procs = 2;
        memset(s->procs, 0, 2 * sizeof *s->procs);
        s->procs[0] = (struct gs_proc){.pid = 100,
                                       .gpu = 0,
                                       .mem_st = GS_ST_OK,
                                       .gpu_mem_bytes = 123456789,
                                       .util_st = GS_ST_OK,
                                       .sm_util = 0.25,
                                       .host_st = GS_ST_OK,
                                       .job_kind = GS_JOB_SLURM};
        strcpy(s->procs[0].user, "alice");
        strcpy(s->procs[0].name, "python3");
        strcpy(s->procs[0].slurm_job, "4711");
        s->procs[1] = (struct gs_proc){.pid = 200, .gpu = 1}; /* nothing known */
        assert_int_equal(gs_store_append(st, s, NULL), GS_OK);
    }
    flush_ok(st);
    /* every 10 s: t = 0, 10, 20 */
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM processes WHERE pid = 100"), 3);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM processes WHERE pid = 100 AND"
                                    " user = 'alice' AND slurm_job = '4711' AND"
                                    " gpu_memory = 123456789 AND sm_util = 0.25 AND gpu = 0"),
                     3);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM processes WHERE pid = 200 AND"
                                    " gpu = 3 AND gpu_memory IS NULL AND sm_util IS NULL AND"
                                    " user IS NULL"),
                     3);
    assert_int_equal(sql_int(t->db, "SELECT count(*) FROM gpu WHERE idx = 3 AND"
                                    " uuid = 'GPU-0000-1'"),
                     1);
    gs_snapshot_free(s);
    gs_store_close(st);
    assert_integrity(t->db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(create_reopen_schema_version, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(foreign_db_refused, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(round_trip_and_absent, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(rollups_min_avg_max, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(retention_prune, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(buffer_cap_drops_oldest, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(disk_full_keeps_buffer_and_recovers, setup_tmp,
                                        teardown_tmp),
        cmocka_unit_test_setup_teardown(kill9_loses_only_unflushed, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(processes_stored, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(damaged_file_refused, setup_tmp, teardown_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
