/*
 * The history store: a bounded in-memory buffer of snapshots and the SQLite file it is
 * flushed to (history.db). Kept here: which metrics history keeps, the row layout, the
 * schema migrations, the incremental per-minute rollups, pruning in bounded batches, and the
 * range queries behind /api/v1/history. docs/history.md describes the schema for users.
 *
 * Row keys pack time and GPU into the integer primary key (t_ms * 256 + gpu for samples and
 * rollups, t_ms * 65536 + seq for processes), so rows are appended in key order (SQLite then
 * fills pages completely), a time range is a key range, and pruning deletes from the left end
 * of the b-tree. The 8-GPU cost of a range scan that filters one GPU is cheap next to an index.
 */
#include "store/history.h"
#include "store/runs.h"
#include "store/store_priv.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

#include "base/clock.h"
#include "base/testable.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_run.h"

/* The metrics history keeps: one REAL column each in `sample`, three (+ a count) in `rollup`.
 * Static or slow identity numbers live in the `gpu` table instead. Appending a metric here
 * needs a migration that adds its columns. The order is the column order; never reorder. */
static const enum gs_metric store_cols[] = {
    GS_M_UTIL_GPU,        GS_M_UTIL_MEM,      GS_M_UTIL_ENC,         GS_M_UTIL_DEC,
    GS_M_MEM_USED,        GS_M_TEMP_GPU,      GS_M_TEMP_MEM,         GS_M_FAN,
    GS_M_POWER_DRAW,      GS_M_ENERGY,        GS_M_CLOCK_GR,         GS_M_CLOCK_SM,
    GS_M_CLOCK_MEM,       GS_M_PSTATE,        GS_M_THROTTLE_ACTIVE,  GS_M_PCIE_TX,
    GS_M_PCIE_RX,         GS_M_PCIE_REPLAY,   GS_M_ECC_CORR_VOL,     GS_M_ECC_UNCORR_VOL,
    GS_M_XID_LAST,        GS_M_GPM_SM_ACTIVE, GS_M_GPM_SM_OCCUPANCY, GS_M_GPM_TENSOR_ACTIVE,
    GS_M_GPM_DRAM_ACTIVE,
};
#define STORE_NCOLS (sizeof store_cols / sizeof store_cols[0])
_Static_assert(STORE_NCOLS <= 32, "store_gpu_row.present is a 32-bit mask");

#define STORE_MINUTE_MS 60000LL
#define STORE_PROC_SEQ_MAX 65536u
#define STORE_SQL_MAX 8192
/* Step records buffered between flushes (a few hundred in steady state); more are dropped. */
#define STORE_STEP_CAP 20000u
/* Rows of a live run looked at per retention probe (its lowest step numbers first). */
#define STORE_LIVE_PROBE 1000u
/* Logged points (schema v3) buffered between flushes; more are dropped. */
#define STORE_LOG_CAP 20000u

struct store_gpu_row {
    unsigned gpu;
    uint32_t present; /* bit c: column c has a value */
    double v[STORE_NCOLS];
};

struct store_proc_row {
    unsigned gpu, pid;
    uint8_t mem_ok, sm_ok, host_ok, job_kind;
    double mem_bytes, sm_util;
    char name[GS_PROC_NAME_LEN];
    char user[GS_PROC_USER_LEN];
    char container[GS_JOB_ID_LEN];
    char pod_uid[40];
    char slurm_job[24];
};

/* One buffered snapshot; its arrays are reused when the ring wraps. */
struct store_entry {
    int64_t t_ms;
    unsigned n_gpus, cap_gpus;
    struct store_gpu_row *gpus;
    unsigned n_procs, cap_procs;
    struct store_proc_row *procs;
};

/* Latest identity of each GPU index, upserted into `gpu` on the next flush when seen. */
struct store_ident {
    int seen; /* appended since the last successful flush */
    int64_t last_ms;
    int mem_total_ok;
    double mem_total;
    char text[GS_T__COUNT][GS_STR_LEN];
    uint8_t tst[GS_T__COUNT];
};

/* One buffered step record of a run (schema v2). */
struct store_step_row {
    int64_t run, peer_pid, peer_uid;
    struct gs_step_rec rec;
};

/* A run begun on this store and not ended yet (issue 18): its share of the step buffer and
 * how many of its step rows are in the file, so neither needs a query. */
struct store_live {
    int64_t id;
    unsigned buffered; /* its steps in the buffer now */
    uint64_t kept;     /* its step rows committed and not pruned */
    int64_t uid;       /* its first step's sender (SO_PEERCRED); -1: none yet */
};

/* One buffered logged point of a run (schema v3): one entry of a "log" record. */
struct store_log_row {
    int64_t run, seq;
    double step, t, value;
    int32_t rank;
    char key[GS_STORE_LOG_KEY];
};

/* One uid's ended runs together (gs_store_prune_runs_uid). */
struct cap_uid {
    int uid_null; /* the owner is unknown (no step, no report uid) */
    int64_t uid;
    uint64_t rows, bytes;
};

struct gs_store {
    sqlite3 *db;
    char path[512];
    struct gs_store_opts opts;
    sqlite3_stmt *ins_sample, *ins_proc, *up_gpu, *rollup, *set_meta;
    struct store_entry *ring;
    unsigned head, count; /* oldest entry, number buffered */
    struct store_ident *ident;
    unsigned n_ident;
    int64_t last_proc_ms;   /* time of the last buffered process sample; -1: none */
    int64_t rollup_done_ms; /* minutes before this are rolled up; -1: none yet */
    int64_t max_t_ms;       /* newest sample written; -1: none */
    struct gs_store_stats stats;
    sqlite3_stmt *ins_run, *end_run, *ins_step;
    struct store_step_row *steps;
    unsigned n_steps, cap_steps;
    int read_only;           /* gs_store_open_read: no statements, no buffer, no writes */
    struct store_live *live; /* runs begun here, not ended */
    unsigned n_live, cap_live;
    sqlite3_stmt *ins_log; /* schema v3: logged points */
    struct store_log_row *logs;
    unsigned n_logs, cap_logs;
    /* gs_store_prune_runs_uid's per-uid totals of the ended runs (built by one scan, then kept
     * up to date: runs ended since are added, deleted ones taken off), the runs ended since
     * the last call, and the last run taken off (a run pruned over several calls once). */
    struct cap_uid *cap_uids;
    unsigned n_cap_uids, cap_uids_cap;
    int cap_valid; /* 0: rebuild at the next call */
    int64_t cap_ended[256];
    unsigned n_cap_ended;
    int64_t cap_sub_last;
};

/* ---- helpers ---------------------------------------------------------------------------- */

static int store_col_of(enum gs_metric m)
{
    for (unsigned c = 0; c < STORE_NCOLS; c++)
        if (store_cols[c] == m)
            return (int)c;
    return -1;
}

int gs_store_keeps(enum gs_metric m)
{
    return store_col_of(m) >= 0;
}

/* Maps an SQLite failure to a gpuscope code and message. Write-side trouble (full disk, I/O,
 * lock, read-only) is GS_EIO: transient, the caller keeps its data and retries. */
static int store_fail(struct gs_store *st, struct gs_err *err, const char *what)
{
    int code = sqlite3_extended_errcode(st->db);
    return gs_err_set(err, GS_EIO, "history: %s (%s): %s", what, st->path,
                      sqlite3_errmsg(st->db) ? sqlite3_errmsg(st->db) : sqlite3_errstr(code));
}

static int store_exec(struct gs_store *st, const char *sql, struct gs_err *err)
{
    if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(st, err, sql);
    return GS_OK;
}

struct sqlite3 *gs_store_conn(struct gs_store *st)
{
    return st->db;
}

int gs_store_sql_fail(struct gs_store *st, struct gs_err *err, const char *what)
{
    return store_fail(st, err, what);
}

/* The write calls' guard: a store opened for writing. */
static int store_writable(const struct gs_store *st, struct gs_err *err, const char *what)
{
    if (!st)
        return gs_err_set(err, GS_EINVAL, "history: %s without store", what);
    if (st->read_only)
        return gs_err_set(err, GS_EINVAL, "history: %s: %s is open read-only", what, st->path);
    return GS_OK;
}

#ifdef GS_TEST_BUILD
int gs_store_test_exec(struct gs_store *st, const char *sql, struct gs_err *err)
{
    return store_exec(st, sql, err);
}
#endif

/* Appends printf output to buf[*len..cap); returns -1 once it no longer fits. */
static int sql_cat(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int sql_cat(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (*len >= cap)
        return -1;
    va_start(ap, fmt);
    n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len) {
        *len = cap;
        return -1;
    }
    *len += (size_t)n;
    return 0;
}

static int store_prepare(struct gs_store *st, const char *sql, sqlite3_stmt **out,
                         struct gs_err *err)
{
    if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, NULL) != SQLITE_OK)
        return store_fail(st, err, "prepare");
    return GS_OK;
}

/* ---- schema ----------------------------------------------------------------------------- */

/* Schema v1 with the metric columns spliced in. Every table keyed for append order. */
static int store_schema_v1(char *sql, size_t cap)
{
    size_t n = 0;
    int bad = 0;
    bad |= sql_cat(sql, cap, &n,
                   "CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
                   "CREATE TABLE metric(col TEXT PRIMARY KEY, unit TEXT) WITHOUT ROWID;"
                   "CREATE TABLE gpu(idx INTEGER PRIMARY KEY, uuid TEXT, name TEXT,"
                   " pci_bus_id TEXT, serial TEXT, memory_total REAL,"
                   " first_seen REAL, last_seen REAL);"
                   "CREATE TABLE proc_sample(id INTEGER PRIMARY KEY, gpu INTEGER,"
                   " pid INTEGER, name TEXT, user TEXT, job_kind INTEGER, container TEXT,"
                   " pod_uid TEXT, slurm_job TEXT, gpu_memory REAL, sm_util REAL);"
                   "CREATE TABLE sample(id INTEGER PRIMARY KEY");
    for (unsigned c = 0; c < STORE_NCOLS; c++)
        bad |= sql_cat(sql, cap, &n, ", %s REAL", gs_metric_name(store_cols[c]));
    bad |= sql_cat(sql, cap, &n, ");CREATE TABLE rollup(id INTEGER PRIMARY KEY, n INTEGER");
    for (unsigned c = 0; c < STORE_NCOLS; c++) {
        const char *m = gs_metric_name(store_cols[c]);
        bad |= sql_cat(sql, cap, &n, ", %s_min REAL, %s_avg REAL, %s_max REAL, %s_n INTEGER", m, m,
                       m, m);
    }
    bad |= sql_cat(sql, cap, &n, ");");
    for (unsigned c = 0; c < STORE_NCOLS; c++)
        bad |= sql_cat(sql, cap, &n, "INSERT INTO metric VALUES('%s','%s');",
                       gs_metric_name(store_cols[c]), gs_metric_unit(store_cols[c]));
    /* Views decode the packed keys for people typing queries by hand. */
    bad |= sql_cat(sql, cap, &n,
                   "CREATE VIEW samples AS SELECT (id >> 8) / 1000.0 AS time, id & 255 AS gpu,"
                   " * FROM sample;"
                   "CREATE VIEW rollups AS SELECT (id >> 8) / 1000.0 AS time, id & 255 AS gpu,"
                   " * FROM rollup;"
                   "CREATE VIEW processes AS SELECT (id >> 16) / 1000.0 AS time, * FROM"
                   " proc_sample;"
                   "PRAGMA application_id = %d;",
                   (int)GS_STORE_APP_ID);
    return bad ? -1 : 0;
}

/* Step columns of `step`: the version-1 phases (gs_run.h GS_PHASES) with "_ms" (not
 * gs_phase_name: the fuzz targets link this file without src/run). */
#define STORE_PHASE_COL_(e, name, wall) name "_ms",
static const char *const store_phase_cols[GS_PH_ALL] = {GS_PHASES(STORE_PHASE_COL_)};
#undef STORE_PHASE_COL_

/* v2: training runs (`gpuscope run`, later the agent) and their step records. */
static int store_schema_v2(char *sql, size_t cap)
{
    size_t n = 0;
    int bad = 0;

    bad |= sql_cat(sql, cap, &n,
                   "CREATE TABLE run(id INTEGER PRIMARY KEY, name TEXT, source TEXT,"
                   " command TEXT, hostname TEXT, start_time REAL, end_time REAL,"
                   " exit_code INTEGER, report TEXT);"
                   "CREATE TABLE step(id INTEGER PRIMARY KEY, run INTEGER NOT NULL,"
                   " peer_pid INTEGER, peer_uid INTEGER, rank INTEGER, device INTEGER,"
                   " step INTEGER, t_begin REAL, t_end REAL");
    for (unsigned p = 0; p < GS_PH_N; p++)
        bad |= sql_cat(sql, cap, &n, ", %s REAL", store_phase_cols[p]);
    bad |= sql_cat(sql, cap, &n,
                   ", samples INTEGER, cuda_events INTEGER, mem_allocated REAL,"
                   " mem_reserved REAL, mem_peak_allocated REAL, mem_peak_reserved REAL,"
                   " mem_total REAL);"
                   "CREATE INDEX step_by_run ON step(run, step);");
    return bad ? -1 : 0;
}

/* v3: a run's tags (a JSON object, NULL: none) and its logged values (loss, learning rate:
 * the "log" records of src/run/record.h), one row per point; the points of one record share
 * its seq (its number in the run), by which the read side groups and pages them. */
static int store_schema_v3(char *sql, size_t cap)
{
    size_t n = 0;

    return sql_cat(sql, cap, &n,
                   "ALTER TABLE run ADD COLUMN tags TEXT;"
                   "CREATE TABLE run_log(id INTEGER PRIMARY KEY, run INTEGER NOT NULL,"
                   " seq INTEGER NOT NULL, step REAL, t REAL, rank INTEGER, key TEXT NOT NULL,"
                   " value REAL NOT NULL);"
                   "CREATE INDEX run_log_by_run ON run_log(run, seq);")
               ? -1
               : 0;
}

/* v4: the SHA-256 (hex) of a run's resume token (src/run/record.h "token"; NULL: none), by
 * which an agent started again resumes a run its predecessor left going. */
static int store_schema_v4(char *sql, size_t cap)
{
    size_t n = 0;

    return sql_cat(sql, cap, &n, "ALTER TABLE run ADD COLUMN token TEXT;") ? -1 : 0;
}

/* v5: GPU usage accounting (store/usage.h): one row per holder per GPU per bucket (minutes,
 * rolled into hours after retention_raw); the key columns are never NULL ('' or 0: unknown) so
 * the unique index adds a holder's later part of a bucket into its row. */
static int store_schema_v5(char *sql, size_t cap)
{
    size_t n = 0;

    return sql_cat(
               sql, cap, &n,
               "CREATE TABLE IF NOT EXISTS usage(t INTEGER NOT NULL, res INTEGER NOT NULL,"
               " uid INTEGER NOT NULL, user TEXT NOT NULL, job TEXT NOT NULL,"
               " pod TEXT NOT NULL, namespace TEXT NOT NULL, container TEXT NOT NULL,"
               " gpu INTEGER NOT NULL, uuid TEXT NOT NULL, held_s REAL, busy_s REAL,"
               " idle_s REAL, mem_gib_s REAL, peak_bytes REAL, energy_j REAL,"
               " first_seen REAL, last_seen REAL);"
               "CREATE UNIQUE INDEX IF NOT EXISTS usage_key ON usage(res, t, uid, user, job, pod,"
               " namespace, container, gpu, uuid);")
               ? -1
               : 0;
}

/* v6: a step's tokens (gs_step_rec version 3; NULL: unknown, as every step stored before v6
 * reads), so that a report rebuilt from stored steps has its tokens/s and MFU. */
static int store_schema_v6(char *sql, size_t cap)
{
    size_t n = 0;

    return sql_cat(sql, cap, &n, "ALTER TABLE step ADD COLUMN tokens INTEGER;") ? -1 : 0;
}

/* Migrations, one per schema version: index v brings a file from v-1 to v. */
typedef int (*store_migration_fn)(char *sql, size_t cap);
static const store_migration_fn store_migrations[GS_STORE_SCHEMA_VERSION + 1] = {
    NULL,
    store_schema_v1,
    store_schema_v2,
    store_schema_v3,
    store_schema_v4,
    store_schema_v5,
    store_schema_v6,
};

static int store_pragma_int(struct gs_store *st, const char *sql, int *out)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int(s, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(s);
    return rc;
}

/* Reads application_id, user_version and the table count without writing anything, so a
 * foreign file is refused before SQLite could change a byte of it. */
static int store_check_identity(struct gs_store *st, int *version, struct gs_err *err)
{
    int app = 0, tables = 0, rc;

    rc = store_pragma_int(st, "PRAGMA application_id", &app);
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
        return gs_err_set(err, GS_EPARSE,
                          "%s: not a gpuscope history database (not an SQLite file, or corrupt:"
                          " %s); move it away or pick another --data-dir",
                          st->path, sqlite3_errstr(rc));
    if (rc == SQLITE_OK)
        rc = store_pragma_int(st, "PRAGMA user_version", version);
    if (rc == SQLITE_OK)
        rc = store_pragma_int(st, "SELECT count(*) FROM sqlite_schema", &tables);
    if (rc != SQLITE_OK)
        return store_fail(st, err, "read header");
    if (app == 0 && tables == 0 && *version == 0)
        return GS_OK; /* new or empty file */
    if ((uint32_t)app != GS_STORE_APP_ID)
        return gs_err_set(err, GS_EPARSE,
                          "%s: not a gpuscope history database (application_id 0x%08x,"
                          " expected 0x%08x); refusing to touch it",
                          st->path, (unsigned)app, (unsigned)GS_STORE_APP_ID);
    if (*version > GS_STORE_SCHEMA_VERSION)
        return gs_err_set(err, GS_ENOTSUP,
                          "%s: history schema v%d is newer than this gpuscope (v%d)", st->path,
                          *version, GS_STORE_SCHEMA_VERSION);
    return GS_OK;
}

static int store_migrate(struct gs_store *st, int from, struct gs_err *err)
{
    char *sql;
    int rc = GS_OK;

    if (from >= GS_STORE_SCHEMA_VERSION)
        return GS_OK;
    sql = malloc(STORE_SQL_MAX * 2);
    if (!sql)
        return gs_err_set(err, GS_ENOMEM, "history: out of memory");
    for (int v = from + 1; v <= GS_STORE_SCHEMA_VERSION && rc == GS_OK; v++) {
        int now = 0;
        char pragma[64];
        rc = store_exec(st, "BEGIN IMMEDIATE", err);
        if (rc != GS_OK)
            break;
        /* Another process may have migrated between our check and our lock. */
        if (store_pragma_int(st, "PRAGMA user_version", &now) != SQLITE_OK) {
            rc = store_fail(st, err, "read user_version");
        } else if (now >= v) {
            rc = store_exec(st, "COMMIT", err);
            continue;
        } else if (store_migrations[v](sql, STORE_SQL_MAX * 2) != 0) {
            rc = gs_err_set(err, GS_EINVAL, "history: schema v%d does not fit its buffer", v);
        } else {
            snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v);
            rc = store_exec(st, sql, err);
            if (rc == GS_OK)
                rc = store_exec(st, pragma, err);
            if (rc == GS_OK)
                rc = store_exec(st, "COMMIT", err);
        }
        if (rc != GS_OK && !sqlite3_get_autocommit(st->db))
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    }
    free(sql);
    return rc;
}

static int store_prepare_all(struct gs_store *st, struct gs_err *err)
{
    char sql[STORE_SQL_MAX];
    size_t n = 0;
    int bad = 0, rc;

    bad |= sql_cat(sql, sizeof sql, &n, "INSERT OR REPLACE INTO sample(id");
    for (unsigned c = 0; c < STORE_NCOLS; c++)
        bad |= sql_cat(sql, sizeof sql, &n, ",%s", gs_metric_name(store_cols[c]));
    bad |= sql_cat(sql, sizeof sql, &n, ") VALUES(?");
    for (unsigned c = 0; c < STORE_NCOLS; c++)
        bad |= sql_cat(sql, sizeof sql, &n, ",?");
    bad |= sql_cat(sql, sizeof sql, &n, ")");
    if (bad)
        return gs_err_set(err, GS_EINVAL, "history: insert statement too long");
    rc = store_prepare(st, sql, &st->ins_sample, err);
    if (rc != GS_OK)
        return rc;

    /* Rolls up every (minute, gpu) with rows in [?1, ?2) (packed keys). SQL's min/avg/max
     * skip NULLs, so an absent reading never pulls a minimum to 0. */
    n = 0;
    bad |= sql_cat(sql, sizeof sql, &n, "INSERT OR REPLACE INTO rollup(id,n");
    for (unsigned c = 0; c < STORE_NCOLS; c++) {
        const char *m = gs_metric_name(store_cols[c]);
        bad |= sql_cat(sql, sizeof sql, &n, ",%s_min,%s_avg,%s_max,%s_n", m, m, m, m);
    }
    bad |= sql_cat(sql, sizeof sql, &n,
                   ") SELECT ((id >> 8) / %lld) * %lld * 256 + (id & 255), count(*)",
                   STORE_MINUTE_MS, STORE_MINUTE_MS);
    for (unsigned c = 0; c < STORE_NCOLS; c++) {
        const char *m = gs_metric_name(store_cols[c]);
        bad |= sql_cat(sql, sizeof sql, &n, ",min(%s),avg(%s),max(%s),count(%s)", m, m, m, m);
    }
    bad |= sql_cat(sql, sizeof sql, &n, " FROM sample WHERE id >= ?1 AND id < ?2 GROUP BY 1");
    if (bad)
        return gs_err_set(err, GS_EINVAL, "history: rollup statement too long");
    rc = store_prepare(st, sql, &st->rollup, err);
    if (rc == GS_OK)
        rc = store_prepare(st,
                           "INSERT OR REPLACE INTO proc_sample(id,gpu,pid,name,user,job_kind,"
                           "container,pod_uid,slurm_job,gpu_memory,sm_util)"
                           " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                           &st->ins_proc, err);
    if (rc == GS_OK)
        rc = store_prepare(st,
                           "INSERT INTO gpu(idx,uuid,name,pci_bus_id,serial,memory_total,"
                           "first_seen,last_seen) VALUES(?1,?2,?3,?4,?5,?6,?7,?7)"
                           " ON CONFLICT(idx) DO UPDATE SET uuid=excluded.uuid,"
                           " name=excluded.name, pci_bus_id=excluded.pci_bus_id,"
                           " serial=excluded.serial, memory_total=excluded.memory_total,"
                           " last_seen=excluded.last_seen",
                           &st->up_gpu, err);
    if (rc == GS_OK)
        rc = store_prepare(st, "INSERT OR REPLACE INTO meta(key,value) VALUES(?,?)", &st->set_meta,
                           err);
    if (rc == GS_OK)
        rc = store_prepare(st,
                           "INSERT INTO run(name,source,command,hostname,start_time,tags,token)"
                           " VALUES(?,?,?,?,?,?,?)",
                           &st->ins_run, err);
    if (rc == GS_OK)
        rc = store_prepare(st, "UPDATE run SET end_time=?2, exit_code=?3, report=?4 WHERE id=?1",
                           &st->end_run, err);
    if (rc == GS_OK)
        rc = store_prepare(st,
                           "INSERT INTO run_log(run,seq,step,t,rank,key,value)"
                           " VALUES(?,?,?,?,?,?,?)",
                           &st->ins_log, err);
    if (rc != GS_OK)
        return rc;
    n = 0;
    bad |= sql_cat(sql, sizeof sql, &n,
                   "INSERT INTO step(run,peer_pid,peer_uid,rank,device,step,t_begin,t_end");
    for (unsigned p = 0; p < GS_PH_N; p++)
        bad |= sql_cat(sql, sizeof sql, &n, ",%s", store_phase_cols[p]);
    bad |= sql_cat(sql, sizeof sql, &n,
                   ",samples,cuda_events,mem_allocated,mem_reserved,mem_peak_allocated,"
                   "mem_peak_reserved,mem_total,tokens) VALUES(?,?,?,?,?,?,?,?");
    for (unsigned p = 0; p < GS_PH_N; p++)
        bad |= sql_cat(sql, sizeof sql, &n, ",?");
    bad |= sql_cat(sql, sizeof sql, &n, ",?,?,?,?,?,?,?,?)");
    if (bad)
        return gs_err_set(err, GS_EINVAL, "history: step statement too long");
    return store_prepare(st, sql, &st->ins_step, err);
}

static int store_load_state(struct gs_store *st, struct gs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc;

    st->rollup_done_ms = -1;
    st->max_t_ms = -1;
    rc = sqlite3_prepare_v2(st->db,
                            "SELECT (SELECT value FROM meta WHERE key='rollup_done_ms'),"
                            " (SELECT max(id) >> 8 FROM sample)",
                            -1, &s, NULL);
    if (rc == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
        if (sqlite3_column_type(s, 0) != SQLITE_NULL)
            st->rollup_done_ms = sqlite3_column_int64(s, 0);
        if (sqlite3_column_type(s, 1) != SQLITE_NULL)
            st->max_t_ms = sqlite3_column_int64(s, 1);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    return rc == SQLITE_OK ? GS_OK : store_fail(st, err, "load state");
}

int gs_store_check(struct gs_store *st, struct gs_err *err)
{
    sqlite3_stmt *s = NULL;
    char what[160] = "";
    int rc = sqlite3_prepare_v2(st->db, "PRAGMA quick_check(1)", -1, &s, NULL);

    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(s, 0);
        snprintf(what, sizeof what, "%s", t ? (const char *)t : "?");
        rc = strcmp(what, "ok") == 0 ? SQLITE_OK : SQLITE_CORRUPT;
    } else if (rc == SQLITE_OK || rc == SQLITE_DONE) {
        rc = SQLITE_CORRUPT;
    } else {
        snprintf(what, sizeof what, "%s", sqlite3_errmsg(st->db));
    }
    sqlite3_finalize(s);
    if (rc == SQLITE_OK)
        return GS_OK;
    /* Damage is the file's content (GS_EPARSE: the agent exits 2, docs/agent.md); another
     * failure (I/O, a lock) may pass. */
    return gs_err_set(
        err, (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB ? GS_EPARSE : GS_EIO,
        "history: %s is damaged (SQLite quick_check: %s); move it aside (the "
        "agent then starts a new one) or repair it with sqlite3 .recover",
        st->path, what[0] ? what : sqlite3_errstr(rc));
}

static int store_open_db(struct gs_store *st, struct gs_err *err)
{
    int version = 0, rc;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
#ifdef SQLITE_OPEN_NOFOLLOW
    flags |= SQLITE_OPEN_NOFOLLOW;
#endif
    if (sqlite3_open_v2(st->path, &st->db, flags, NULL) != SQLITE_OK) {
        if (!st->db)
            return gs_err_set(err, GS_ENOMEM, "history: sqlite3_open_v2(%s): out of memory",
                              st->path);
        {
            struct stat lst; /* SQLITE_OPEN_NOFOLLOW's refusal, said plainly */
            if (lstat(st->path, &lst) == 0 && S_ISLNK(lst.st_mode))
                return gs_err_set(err, GS_EPERM,
                                  "history: %s is a symbolic link: refusing to follow it "
                                  "(remove it; the agent makes the file itself)",
                                  st->path);
        }
        return gs_err_set(err, GS_EIO, "history: sqlite3_open_v2(%s): %s", st->path,
                          sqlite3_errmsg(st->db));
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, (int)st->opts.busy_timeout_ms);
    rc = store_check_identity(st, &version, err);
    if (rc == GS_OK && version > 0)
        rc = gs_store_check(st, err); /* a damaged file is never written to */
    if (rc != GS_OK)
        return rc;
    /* WAL: readers (the sqlite3 shell, the HTTP side) never block the writer, and a killed
     * writer loses only its open transaction. NORMAL sync is durable against process crashes;
     * only an OS crash may lose the last commits, never consistency. */
    rc = store_exec(st, "PRAGMA journal_mode=WAL", err);
    if (rc == GS_OK)
        rc = store_exec(st, "PRAGMA synchronous=NORMAL", err);
    /* Page cache: SQLite's default (2000 KiB) fills up as the file grows and stays. Writes
     * append at the right edge of each b-tree and pruning deletes at the left, so only the
     * few pages on those paths are hot; 512 KiB holds them (bench_store flushes measured the
     * same, bench/RESULTS.md "Agent (issue 3)"). History queries read the OS page cache. */
    if (rc == GS_OK)
        rc = store_exec(st, "PRAGMA cache_size=-512", err);
    if (rc == GS_OK)
        rc = store_migrate(st, version, err);
    if (rc == GS_OK)
        rc = store_prepare_all(st, err);
    if (rc == GS_OK)
        rc = store_load_state(st, err);
    return rc;
}

int gs_store_open(struct gs_store **out, const char *path, const struct gs_store_opts *opts,
                  struct gs_err *err)
{
    struct gs_store *st;
    int rc;

    if (!out || !path || !*path)
        return gs_err_set(err, GS_EINVAL, "history: no database path");
    if (strlen(path) >= sizeof st->path)
        return gs_err_set(err, GS_EINVAL, "history: path too long: %s", path);
    st = calloc(1, sizeof *st);
    if (!st)
        return gs_err_set(err, GS_ENOMEM, "history: out of memory");
    strcpy(st->path, path);
    if (opts)
        st->opts = *opts;
    if (!st->opts.buffer_cap)
        st->opts.buffer_cap = 600;
    if (!st->opts.busy_timeout_ms)
        st->opts.busy_timeout_ms = 2000;
    if (!st->opts.proc_interval_ms)
        st->opts.proc_interval_ms = 10000;
    if (!st->opts.raw_max_range_s)
        st->opts.raw_max_range_s = 6 * 3600;
    st->last_proc_ms = -1;
    st->ring = calloc(st->opts.buffer_cap, sizeof *st->ring);
    if (!st->ring) {
        rc = gs_err_set(err, GS_ENOMEM, "history: out of memory");
        goto fail;
    }
    rc = store_open_db(st, err);
    if (rc == GS_EIO && st->db) { /* SQLite's "malformed" at open: the file is damaged */
        int x = sqlite3_extended_errcode(st->db) & 0xff;
        if (x == SQLITE_CORRUPT || x == SQLITE_NOTADB) {
            rc = GS_EPARSE;
            if (err)
                err->rc = rc;
        }
    }
    if (rc != GS_OK)
        goto fail;
    *out = st;
    return GS_OK;
fail:
    gs_store_close(st);
    return rc;
}

int gs_store_open_read(struct gs_store **out, const char *path, struct gs_err *err)
{
    int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, version = 0, rc;
    struct gs_store *st;
    struct stat sb;

#ifdef SQLITE_OPEN_NOFOLLOW
    flags |= SQLITE_OPEN_NOFOLLOW;
#endif
    if (!out || !path || !*path)
        return gs_err_set(err, GS_EINVAL, "history: no database path");
    if (strlen(path) >= sizeof st->path)
        return gs_err_set(err, GS_EINVAL, "history: path too long: %s", path);
    if (stat(path, &sb) != 0)
        return gs_err_set(err, GS_ENOTFOUND, "history: %s: no such file", path);
    st = calloc(1, sizeof *st);
    if (!st)
        return gs_err_set(err, GS_ENOMEM, "history: out of memory");
    strcpy(st->path, path);
    st->read_only = 1;
    st->opts.busy_timeout_ms = 2000;
    if (sqlite3_open_v2(st->path, &st->db, flags, NULL) != SQLITE_OK) {
        rc = st->db ? gs_err_set(err, GS_EIO, "history: sqlite3_open_v2(%s): %s", st->path,
                                 sqlite3_errmsg(st->db))
                    : gs_err_set(err, GS_ENOMEM, "history: out of memory");
        goto fail;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, (int)st->opts.busy_timeout_ms);
    rc = store_check_identity(st, &version, err);
    if (rc == GS_OK && version != GS_STORE_SCHEMA_VERSION)
        rc = gs_err_set(err, GS_ENOTSUP, "%s: history schema v%d, this reader needs v%d", st->path,
                        version, GS_STORE_SCHEMA_VERSION);
    if (rc != GS_OK)
        goto fail;
    *out = st;
    return GS_OK;
fail:
    gs_store_close(st);
    return rc;
}

void gs_store_close(struct gs_store *st)
{
    if (!st)
        return;
    sqlite3_finalize(st->ins_sample);
    sqlite3_finalize(st->ins_proc);
    sqlite3_finalize(st->up_gpu);
    sqlite3_finalize(st->rollup);
    sqlite3_finalize(st->set_meta);
    sqlite3_finalize(st->ins_run);
    sqlite3_finalize(st->end_run);
    sqlite3_finalize(st->ins_step);
    sqlite3_finalize(st->ins_log);
    free(st->steps);
    free(st->live);
    free(st->logs);
    free(st->cap_uids);
    sqlite3_close(st->db); /* NULL is a no-op; checkpoints the WAL when we are the last */
    if (st->ring) {
        for (unsigned i = 0; i < st->opts.buffer_cap; i++) {
            free(st->ring[i].gpus);
            free(st->ring[i].procs);
        }
        free(st->ring);
    }
    free(st->ident);
    free(st);
}

/* ---- append ----------------------------------------------------------------------------- */

static int store_reserve(void **arr, unsigned *cap, unsigned want, size_t size)
{
    void *p;
    if (want <= *cap)
        return 0;
    p = realloc(*arr, (size_t)want * size); /* on failure the old array stays valid */
    if (!p)
        return -1;
    *arr = p;
    *cap = want;
    return 0;
}

static int store_note_ident(struct gs_store *st, const struct gs_gpu *g, int64_t t_ms)
{
    struct store_ident *id;
    if (g->index >= st->n_ident) {
        unsigned want = g->index + 1;
        struct store_ident *p = realloc(st->ident, want * sizeof *p);
        if (!p)
            return -1;
        memset(p + st->n_ident, 0, (want - st->n_ident) * sizeof *p);
        st->ident = p;
        st->n_ident = want;
    }
    id = &st->ident[g->index];
    id->seen = 1;
    if (t_ms > id->last_ms)
        id->last_ms = t_ms;
    memcpy(id->text, g->text, sizeof id->text);
    memcpy(id->tst, g->tst, sizeof id->tst);
    id->mem_total_ok = gs_gpu_has(g, GS_M_MEM_TOTAL);
    id->mem_total = g->v[GS_M_MEM_TOTAL];
    return 0;
}

static void store_copy_proc(struct store_proc_row *r, const struct gs_proc *p)
{
    memset(r, 0, sizeof *r);
    r->gpu = p->gpu;
    r->pid = p->pid;
    r->mem_ok = p->mem_st == GS_ST_OK;
    r->mem_bytes = (double)p->gpu_mem_bytes;
    r->sm_ok = p->util_st == GS_ST_OK;
    r->sm_util = p->sm_util;
    r->host_ok = p->host_st == GS_ST_OK;
    r->job_kind = p->job_kind;
    if (r->host_ok) {
        memcpy(r->name, p->name, sizeof r->name - 1);
        memcpy(r->user, p->user, sizeof r->user - 1);
        memcpy(r->container, p->container_id, sizeof r->container - 1);
        memcpy(r->pod_uid, p->pod_uid, sizeof r->pod_uid - 1);
        memcpy(r->slurm_job, p->slurm_job, sizeof r->slurm_job - 1);
    }
}

int gs_store_append(struct gs_store *st, const struct gs_snapshot *snap, struct gs_err *err)
{
    struct store_entry *e;
    int64_t t_ms;
    unsigned n_procs = 0;

    if (store_writable(st, err, "append") != GS_OK)
        return GS_EINVAL;
    if (!snap)
        return gs_err_set(err, GS_EINVAL, "history: append without snapshot");
    if (!(snap->t_real > 0) || snap->t_real > 1e11)
        return gs_err_set(err, GS_EINVAL, "history: snapshot has no valid time (%g)", snap->t_real);
    t_ms = llround(snap->t_real * 1000.0);
    if (st->count == st->opts.buffer_cap) {
        /* Full (writes failing for a while): the oldest snapshot goes, counted. */
        st->head = (st->head + 1) % st->opts.buffer_cap;
        st->count--;
        st->stats.dropped++;
    }
    e = &st->ring[(st->head + st->count) % st->opts.buffer_cap];
    if (st->last_proc_ms < 0 || t_ms - st->last_proc_ms >= (int64_t)st->opts.proc_interval_ms)
        n_procs = snap->n_procs < STORE_PROC_SEQ_MAX ? snap->n_procs : STORE_PROC_SEQ_MAX;
    if (store_reserve((void **)&e->gpus, &e->cap_gpus, snap->n_gpus, sizeof *e->gpus) ||
        store_reserve((void **)&e->procs, &e->cap_procs, n_procs, sizeof *e->procs))
        return gs_err_set(err, GS_ENOMEM, "history: out of memory buffering a snapshot");
    e->t_ms = t_ms;
    e->n_gpus = 0;
    for (unsigned i = 0; i < snap->n_gpus; i++) {
        const struct gs_gpu *g = &snap->gpus[i];
        struct store_gpu_row *r;
        if (g->index > GS_STORE_MAX_GPU)
            continue;
        if (store_note_ident(st, g, t_ms))
            return gs_err_set(err, GS_ENOMEM, "history: out of memory buffering a snapshot");
        r = &e->gpus[e->n_gpus++];
        r->gpu = g->index;
        r->present = 0;
        for (unsigned c = 0; c < STORE_NCOLS; c++) {
            r->v[c] = g->v[store_cols[c]];
            if (gs_gpu_has(g, store_cols[c]) && isfinite(r->v[c]))
                r->present |= 1u << c;
        }
    }
    e->n_procs = 0;
    for (unsigned i = 0; i < n_procs; i++) {
        const struct gs_proc *p = &snap->procs[i];
        if (p->gpu >= snap->n_gpus || snap->gpus[p->gpu].index > GS_STORE_MAX_GPU)
            continue;
        store_copy_proc(&e->procs[e->n_procs], p);
        e->procs[e->n_procs].gpu = snap->gpus[p->gpu].index; /* stored by NVML index */
        e->n_procs++;
    }
    if (n_procs)
        st->last_proc_ms = t_ms;
    st->count++;
    return GS_OK;
}

/* ---- flush ------------------------------------------------------------------------------ */

static int store_step(sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static void bind_text_or_null(sqlite3_stmt *s, int i, const char *t)
{
    if (t && *t)
        sqlite3_bind_text(s, i, t, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

static int store_write_entry(struct gs_store *st, const struct store_entry *e, uint64_t *rows)
{
    for (unsigned i = 0; i < e->n_gpus; i++) {
        const struct store_gpu_row *r = &e->gpus[i];
        sqlite3_bind_int64(st->ins_sample, 1, e->t_ms * 256 + r->gpu);
        for (unsigned c = 0; c < STORE_NCOLS; c++)
            if (r->present & (1u << c))
                sqlite3_bind_double(st->ins_sample, (int)c + 2, r->v[c]);
        /* unbound parameters are NULL: absent stays absent */
        if (store_step(st->ins_sample) != SQLITE_OK)
            return -1;
        (*rows)++;
    }
    for (unsigned i = 0; i < e->n_procs; i++) {
        const struct store_proc_row *p = &e->procs[i];
        sqlite3_stmt *s = st->ins_proc;
        sqlite3_bind_int64(s, 1, e->t_ms * (int64_t)STORE_PROC_SEQ_MAX + i);
        sqlite3_bind_int(s, 2, (int)p->gpu);
        sqlite3_bind_int64(s, 3, p->pid);
        bind_text_or_null(s, 4, p->name);
        bind_text_or_null(s, 5, p->user);
        if (p->job_kind)
            sqlite3_bind_int(s, 6, p->job_kind);
        bind_text_or_null(s, 7, p->container);
        bind_text_or_null(s, 8, p->pod_uid);
        bind_text_or_null(s, 9, p->slurm_job);
        if (p->mem_ok)
            sqlite3_bind_double(s, 10, p->mem_bytes);
        if (p->sm_ok)
            sqlite3_bind_double(s, 11, p->sm_util);
        if (store_step(s) != SQLITE_OK)
            return -1;
        (*rows)++;
    }
    return 0;
}

static int store_write_idents(struct gs_store *st)
{
    static const enum gs_text cols[] = {GS_T_UUID, GS_T_NAME, GS_T_PCI_BUS_ID, GS_T_SERIAL};
    for (unsigned i = 0; i < st->n_ident; i++) {
        const struct store_ident *id = &st->ident[i];
        if (!id->seen)
            continue;
        sqlite3_bind_int(st->up_gpu, 1, (int)i);
        for (unsigned k = 0; k < 4; k++)
            if (id->tst[cols[k]] == GS_ST_OK)
                bind_text_or_null(st->up_gpu, (int)k + 2, id->text[cols[k]]);
        if (id->mem_total_ok)
            sqlite3_bind_double(st->up_gpu, 6, id->mem_total);
        sqlite3_bind_double(st->up_gpu, 7, (double)id->last_ms / 1000.0);
        if (store_step(st->up_gpu) != SQLITE_OK)
            return -1;
    }
    return 0;
}

/* Rolls up the minutes completed by this flush: from the older of the watermark and the
 * oldest minute just written (a late sample re-rolls its minute) up to the minute of the
 * newest sample, which is still open. Returns the new watermark through *done. */
static int store_roll(struct gs_store *st, int64_t min_ms, int64_t max_ms, int64_t *done,
                      uint64_t *rows)
{
    int64_t from = (min_ms / STORE_MINUTE_MS) * STORE_MINUTE_MS;
    int64_t end = (max_ms / STORE_MINUTE_MS) * STORE_MINUTE_MS;
    *done = st->rollup_done_ms;
    if (st->rollup_done_ms >= 0 && st->rollup_done_ms < from)
        from = st->rollup_done_ms;
    if (*done < 0)
        *done = from; /* first flush into a new file: nothing before it to roll */
    if (end <= from)
        goto save;
    sqlite3_bind_int64(st->rollup, 1, from * 256);
    sqlite3_bind_int64(st->rollup, 2, end * 256);
    if (store_step(st->rollup) != SQLITE_OK)
        return -1;
    *rows += (uint64_t)sqlite3_changes(st->db);
    if (end > *done)
        *done = end;
save:
    sqlite3_bind_text(st->set_meta, 1, "rollup_done_ms", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st->set_meta, 2, *done);
    return store_step(st->set_meta) == SQLITE_OK ? 0 : -1;
}

static void bind_num_or_null(sqlite3_stmt *s, int i, double v, int known)
{
    if (known && isfinite(v))
        sqlite3_bind_double(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

/* One step row; unknown values (NaN times, zero counts and bytes) are NULL. */
static int store_write_step(struct gs_store *st, const struct store_step_row *r)
{
    const struct gs_step_rec *s = &r->rec;
    sqlite3_stmt *q = st->ins_step;
    const uint64_t mem[] = {s->mem_allocated, s->mem_reserved, s->mem_peak_allocated,
                            s->mem_peak_reserved, s->mem_total};
    int i = 1;

    sqlite3_bind_int64(q, i++, r->run);
    sqlite3_bind_int64(q, i++, r->peer_pid);
    sqlite3_bind_int64(q, i++, r->peer_uid);
    sqlite3_bind_int(q, i++, s->rank);
    sqlite3_bind_int(q, i++, s->device);
    sqlite3_bind_int64(q, i++, (int64_t)s->step);
    bind_num_or_null(q, i++, s->t_begin, 1);
    bind_num_or_null(q, i++, s->t_end, 1);
    for (int p = 0; p < GS_PH_N; p++)
        bind_num_or_null(q, i++, s->ms[p], 1);
    bind_num_or_null(q, i++, (double)s->samples, s->samples != 0);
    sqlite3_bind_int(q, i++, (s->flags & GS_STEP_CUDA_EVENTS) != 0);
    for (unsigned k = 0; k < sizeof mem / sizeof mem[0]; k++)
        bind_num_or_null(q, i++, (double)mem[k], mem[k] != 0);
    if (s->tokens) /* at most 2^53 - 1 (record.c), so int64 holds it */
        sqlite3_bind_int64(q, i++, (int64_t)s->tokens);
    else
        sqlite3_bind_null(q, i++);
    return store_step(q) == SQLITE_OK ? 0 : -1;
}

/* The buffered logged points (schema v3); unknown step, time and rank are NULL. */
static int store_write_logs(struct gs_store *st, uint64_t *rows)
{
    sqlite3_stmt *q = st->ins_log;

    for (unsigned k = 0; k < st->n_logs; k++) {
        const struct store_log_row *r = &st->logs[k];

        sqlite3_bind_int64(q, 1, r->run);
        sqlite3_bind_int64(q, 2, r->seq);
        bind_num_or_null(q, 3, r->step, 1);
        bind_num_or_null(q, 4, r->t, 1);
        if (r->rank >= 0)
            sqlite3_bind_int(q, 5, r->rank);
        sqlite3_bind_text(q, 6, r->key, -1, SQLITE_STATIC);
        sqlite3_bind_double(q, 7, r->value);
        if (store_step(q) != SQLITE_OK)
            return -1;
        (*rows)++;
    }
    return 0;
}

int gs_store_flush(struct gs_store *st, struct gs_err *err)
{
    double t0 = gs_clock_mono_s(), dt;
    uint64_t rows = 0;
    int64_t min_ms = INT64_MAX, max_ms = st ? st->max_t_ms : -1, done = -1;
    int failed = 0;

    if (store_writable(st, err, "flush") != GS_OK)
        return GS_EINVAL;
    if (st->count == 0 && st->n_steps == 0 && st->n_logs == 0)
        return GS_OK;
    if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        failed = 1;
    for (unsigned k = 0; k < st->n_steps && !failed; k++) {
        failed = store_write_step(st, &st->steps[k]) != 0;
        rows++;
    }
    if (!failed)
        failed = store_write_logs(st, &rows) != 0;
    for (unsigned k = 0; k < st->count && !failed; k++) {
        const struct store_entry *e = &st->ring[(st->head + k) % st->opts.buffer_cap];
        if (e->n_gpus) {
            if (e->t_ms < min_ms)
                min_ms = e->t_ms;
            if (e->t_ms > max_ms)
                max_ms = e->t_ms;
        }
        failed = store_write_entry(st, e, &rows) != 0;
    }
    if (!failed)
        failed = store_write_idents(st) != 0;
    if (!failed && min_ms != INT64_MAX)
        failed = store_roll(st, min_ms, max_ms, &done, &rows) != 0;
    if (!failed && sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        failed = 1;
    if (failed) {
        /* Take the message before ROLLBACK overwrites it; SQLite may already have rolled
         * back on SQLITE_FULL/IOERR, which get_autocommit tells us. */
        int rc = store_fail(st, err, "flush");
        if (!sqlite3_get_autocommit(st->db))
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        st->stats.write_errors++;
        st->stats.consecutive_failures++;
        return rc;
    }
    for (unsigned i = 0; i < st->n_ident; i++)
        st->ident[i].seen = 0;
    for (unsigned i = 0; i < st->n_live; i++) { /* their buffered steps are rows now */
        st->live[i].kept += st->live[i].buffered;
        st->live[i].buffered = 0;
    }
    st->stats.steps_written += st->n_steps;
    st->n_steps = 0;
    st->stats.logs_written += st->n_logs;
    st->n_logs = 0;
    st->stats.snapshots_written += st->count;
    /* Empty again: restart at slot 0 rather than walking on, so that in steady state only
     * the first flush_interval/interval slots ever get their row arrays allocated; the rest
     * of the buffer_cap slots cost memory only during a write outage. */
    st->head = 0;
    st->count = 0;
    st->max_t_ms = max_ms;
    if (min_ms != INT64_MAX)
        st->rollup_done_ms = done;
    dt = gs_clock_mono_s() - t0;
    st->stats.rows_written += rows;
    st->stats.flushes++;
    st->stats.consecutive_failures = 0;
    st->stats.last_flush_s = dt;
    if (dt > st->stats.max_flush_s)
        st->stats.max_flush_s = dt;
    return GS_OK;
}

/* ---- prune ------------------------------------------------------------------------------ */

static int store_delete_below(struct gs_store *st, const char *table, int64_t key, unsigned limit,
                              unsigned *deleted)
{
    char sql[160];
    sqlite3_stmt *s = NULL;
    int rc;

    snprintf(sql, sizeof sql,
             "DELETE FROM %s WHERE id IN (SELECT id FROM %s WHERE id < ?1 ORDER BY id LIMIT ?2)",
             table, table);
    rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, key);
        sqlite3_bind_int(s, 2, (int)limit);
        rc = sqlite3_step(s);
        if (rc == SQLITE_DONE) {
            *deleted += (unsigned)sqlite3_changes(st->db);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(s);
    return rc;
}

/* Ends a pruning transaction begun by the caller: COMMIT when rc is still SQLITE_OK, else
 * ROLLBACK with the error named after what; counts the n rows deleted. */
static int prune_end(struct gs_store *st, int rc, unsigned n, unsigned *deleted, const char *what,
                     struct gs_err *err)
{
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        int ret = store_fail(st, err, what);
        if (!sqlite3_get_autocommit(st->db))
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        return ret;
    }
    st->stats.pruned_rows += n;
    if (deleted)
        *deleted = n;
    return GS_OK;
}

/* The prune calls' start: clears *deleted, checks the store and the time, makes a max_rows of
 * 0 the default 5000, then, when there is work, begins the write transaction (what names the
 * call in the error if it cannot). GS_OK with no transaction open when there is no work. */
static int prune_begin(struct gs_store *st, double now, unsigned *max_rows, unsigned *deleted,
                       int work, const char *what, struct gs_err *err)
{
    if (deleted)
        *deleted = 0;
    if (store_writable(st, err, "prune") != GS_OK)
        return GS_EINVAL;
    if (!(now > 0 && now <= 1e11))
        return gs_err_set(err, GS_EINVAL, "history: prune needs a store and a time");
    if (!*max_rows)
        *max_rows = 5000;
    if (work && sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(st, err, what);
    return GS_OK;
}

int gs_store_prune(struct gs_store *st, double now, double raw_retention_s,
                   double rollup_retention_s, unsigned max_rows, unsigned *deleted,
                   struct gs_err *err)
{
    unsigned n = 0;
    int rc = prune_begin(st, now, &max_rows, deleted, 1, "prune", err);

    if (rc != GS_OK)
        return rc;
    if (raw_retention_s > 0) {
        int64_t cut = llround((now - raw_retention_s) * 1000.0);
        if (cut > 0) {
            rc = store_delete_below(st, "sample", cut * 256, max_rows, &n);
            if (rc == SQLITE_OK && n < max_rows)
                rc = store_delete_below(st, "proc_sample", cut * (int64_t)STORE_PROC_SEQ_MAX,
                                        max_rows - n, &n);
        }
    }
    if (rc == SQLITE_OK && rollup_retention_s > 0 && n < max_rows) {
        int64_t cut = llround((now - rollup_retention_s) * 1000.0);
        if (cut > 0)
            rc = store_delete_below(st, "rollup", cut * 256, max_rows - n, &n);
    }
    return prune_end(st, rc, n, deleted, "prune", err);
}

/* Runs sql, a DELETE of at most ?2 rows of run ?1; *n: the rows it deleted. */
static int store_delete_of_run(struct gs_store *st, const char *sql, int64_t run_id, unsigned limit,
                               unsigned *n)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);

    *n = 0;
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, run_id);
        sqlite3_bind_int(s, 2, (int)limit);
        rc = sqlite3_step(s) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(st->db);
        *n = rc == SQLITE_OK ? (unsigned)sqlite3_changes(st->db) : 0;
    }
    sqlite3_finalize(s);
    return rc;
}

/* Deletes up to *limit logged points of run_id (schema v3), adds them to *deleted and takes
 * them off *limit. */
static int store_prune_run_logs(struct gs_store *st, int64_t run_id, unsigned *limit,
                                unsigned *deleted)
{
    unsigned n = 0;
    int rc = store_delete_of_run(st,
                                 "DELETE FROM run_log WHERE id IN"
                                 " (SELECT id FROM run_log WHERE run = ?1 LIMIT ?2)",
                                 run_id, *limit, &n);

    if (rc == SQLITE_OK) {
        *deleted += n;
        *limit -= n;
    }
    return rc;
}

static int cap_forget_run(struct gs_store *st, int64_t run_id);

/* Deletes up to limit step rows of run_id (after its logged points), then the run row once
 * it has none left; an ended run's totals leave gs_store_prune_runs_uid's first. */
static int store_prune_one_run(struct gs_store *st, int64_t run_id, unsigned limit,
                               unsigned *deleted, int *run_gone)
{
    sqlite3_stmt *s = NULL;
    unsigned n = 0;
    int rc;

    *run_gone = 0;
    if ((rc = cap_forget_run(st, run_id)) != SQLITE_OK)
        return rc;
    if ((rc = store_prune_run_logs(st, run_id, &limit, deleted)) != SQLITE_OK || limit == 0)
        return rc;
    rc = store_delete_of_run(st,
                             "DELETE FROM step WHERE id IN"
                             " (SELECT id FROM step WHERE run = ?1 LIMIT ?2)",
                             run_id, limit, &n);
    if (rc != SQLITE_OK)
        return rc;
    *deleted += n;
    if (n < limit) { /* every step gone: the run row too (it counts as one row) */
        rc = sqlite3_prepare_v2(st->db, "DELETE FROM run WHERE id = ?1", -1, &s, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(s, 1, run_id);
            rc = sqlite3_step(s) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(st->db);
        }
        sqlite3_finalize(s);
        if (rc == SQLITE_OK) {
            (*deleted)++;
            *run_gone = 1;
        }
    }
    return rc;
}

int gs_store_prune_runs(struct gs_store *st, double now, double runs_retention_s, unsigned max_rows,
                        unsigned *deleted, struct gs_err *err)
{
    unsigned n = 0;
    int work = runs_retention_s > 0;
    int rc = prune_begin(st, now, &max_rows, deleted, work, "prune runs", err);

    if (rc != GS_OK || !work)
        return rc;
    while (rc == SQLITE_OK && n < max_rows) {
        sqlite3_stmt *s = NULL;
        int64_t id = 0;
        int gone = 0;

        /* Ended runs only: a run without end_time is going on (or not yet rebuilt). */
        rc = sqlite3_prepare_v2(st->db,
                                "SELECT id FROM run WHERE end_time IS NOT NULL"
                                " AND end_time < ?1 ORDER BY id LIMIT 1",
                                -1, &s, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_double(s, 1, now - runs_retention_s);
            rc = sqlite3_step(s);
            if (rc == SQLITE_ROW)
                id = sqlite3_column_int64(s, 0);
            rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_OK || id == 0)
            break;
        rc = store_prune_one_run(st, id, max_rows - n, &n, &gone);
        if (rc == SQLITE_OK && !gone)
            break; /* budget spent inside this run's steps */
    }
    if (rc != SQLITE_OK)
        st->cap_valid = 0; /* rolled back: the per-uid totals are counted anew */
    return prune_end(st, rc, n, deleted, "prune runs", err);
}

/* An ended run's owner, rows (itself, its steps, its logged points) and stored text bytes, as
 * gs_store_prune_runs_uid counts them. The owner is RUN_OWNER_UID's for the agent's runs (the
 * report's uid is its steps' sender) with the step first: an index seek, no JSON parse. */
#define ENDED_OWNER                                                                                \
    "COALESCE((SELECT peer_uid FROM step WHERE step.run = run.id LIMIT 1), " RUN_REPORT_INT(       \
        "uid") ")"
#define ENDED_ROWS                                                                                 \
    "1 + (SELECT count(*) FROM step WHERE step.run = run.id)"                                      \
    " + (SELECT count(*) FROM run_log WHERE run_log.run = run.id)"
#define ENDED_BYTES                                                                                \
    "COALESCE(length(CAST(report AS BLOB)), 0) + COALESCE(length(CAST(tags AS BLOB)), 0)"          \
    " + COALESCE(length(CAST(name AS BLOB)), 0) + COALESCE(length(CAST(command AS BLOB)), 0)"      \
    " + COALESCE(length(CAST(hostname AS BLOB)), 0)"
#define CAP_IDS 256 /* runs of one uid chosen per query */

/* Adds (sign 1) or takes off (-1) a run's rows and bytes to its owner's totals. */
static int cap_add(struct gs_store *st, int uid_null, int64_t uid, uint64_t rows, uint64_t bytes,
                   int sign)
{
    struct cap_uid *c = NULL;

    for (unsigned i = 0; i < st->n_cap_uids && !c; i++)
        if (st->cap_uids[i].uid_null == uid_null && (uid_null || st->cap_uids[i].uid == uid))
            c = &st->cap_uids[i];
    if (!c) {
        if (sign < 0)
            return 0;
        if (st->n_cap_uids == st->cap_uids_cap) {
            unsigned cap = st->cap_uids_cap ? st->cap_uids_cap * 2 : 16;
            struct cap_uid *n = realloc(st->cap_uids, cap * sizeof *n);
            if (!n)
                return -1;
            st->cap_uids = n;
            st->cap_uids_cap = cap;
        }
        c = &st->cap_uids[st->n_cap_uids++];
        *c = (struct cap_uid){.uid_null = uid_null, .uid = uid};
    }
    if (sign > 0) {
        c->rows += rows;
        c->bytes += bytes;
    } else {
        c->rows -= rows < c->rows ? rows : c->rows;
        c->bytes -= bytes < c->bytes ? bytes : c->bytes;
    }
    return 0;
}

/* Runs sql (columns: owner, rows, bytes; ?1 bound to id when id > 0) and adds (sign 1) or
 * takes off (-1) each row's totals. */
static int cap_apply(struct gs_store *st, const char *sql, int64_t id, int sign)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);

    if (rc == SQLITE_OK && id > 0)
        sqlite3_bind_int64(s, 1, id);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW)
        rc = cap_add(st, sqlite3_column_type(s, 0) == SQLITE_NULL, sqlite3_column_int64(s, 0),
                     (uint64_t)sqlite3_column_int64(s, 1), (uint64_t)sqlite3_column_int64(s, 2),
                     sign) == 0
                 ? SQLITE_OK
                 : SQLITE_NOMEM;
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    sqlite3_finalize(s);
    return rc;
}

#define CAP_ONE                                                                                    \
    "SELECT " ENDED_OWNER ", " ENDED_ROWS ", " ENDED_BYTES " FROM run WHERE id = ?1"               \
    " AND end_time IS NOT NULL"

/* The totals up to date: built by one scan of the ended runs when not valid (at the first
 * call: seconds for 100,000 runs), else the runs ended since added. */
static int cap_refresh(struct gs_store *st)
{
    int rc = SQLITE_OK;

    if (!st->cap_valid) {
        st->n_cap_uids = 0;
        st->n_cap_ended = 0;
        st->cap_sub_last = 0;
        rc = cap_apply(st,
                       "SELECT owner, sum(nrows), sum(nbytes) FROM (SELECT " ENDED_OWNER
                       " AS owner, " ENDED_ROWS " AS nrows, " ENDED_BYTES
                       " AS nbytes FROM run WHERE end_time IS NOT NULL) GROUP BY owner",
                       0, 1);
        st->cap_valid = rc == SQLITE_OK;
        return rc;
    }
    for (unsigned i = 0; i < st->n_cap_ended && rc == SQLITE_OK; i++)
        rc = cap_apply(st, CAP_ONE, st->cap_ended[i], 1);
    st->n_cap_ended = 0;
    if (rc != SQLITE_OK)
        st->cap_valid = 0;
    return rc;
}

/* Before a prune first touches ended run run_id: its totals taken off its owner's. */
static int cap_forget_run(struct gs_store *st, int64_t run_id)
{
    int rc;

    if (!st->cap_valid || run_id == st->cap_sub_last)
        return SQLITE_OK;
    if ((rc = cap_refresh(st)) == SQLITE_OK)
        rc = cap_apply(st, CAP_ONE, run_id, -1);
    st->cap_sub_last = run_id;
    if (rc != SQLITE_OK)
        st->cap_valid = 0;
    return rc;
}

/* The first uid past a cap, or NULL. */
static const struct cap_uid *cap_over(const struct gs_store *st, uint64_t rows_cap,
                                      uint64_t bytes_cap)
{
    for (unsigned i = 0; i < st->n_cap_uids; i++)
        if ((rows_cap && st->cap_uids[i].rows > rows_cap) ||
            (bytes_cap && st->cap_uids[i].bytes > bytes_cap))
            return &st->cap_uids[i];
    return NULL;
}

/* The ids of c's oldest ended runs whose removal brings it within the caps (at most CAP_IDS of
 * them) into ids; their count into *n_ids. */
static int cap_pick_runs(struct gs_store *st, const struct cap_uid *c, uint64_t rows_cap,
                         uint64_t bytes_cap, int64_t *ids, unsigned *n_ids)
{
    sqlite3_stmt *s = NULL;
    uint64_t rows = c->rows, bytes = c->bytes;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT id, " ENDED_ROWS ", " ENDED_BYTES " FROM run"
                                " WHERE end_time IS NOT NULL AND " ENDED_OWNER " IS ?1"
                                " ORDER BY id LIMIT ?2",
                                -1, &s, NULL);

    *n_ids = 0;
    if (rc != SQLITE_OK)
        return rc;
    if (c->uid_null)
        sqlite3_bind_null(s, 1);
    else
        sqlite3_bind_int64(s, 1, c->uid);
    sqlite3_bind_int(s, 2, CAP_IDS);
    while ((rows_cap && rows > rows_cap) || (bytes_cap && bytes > bytes_cap)) {
        uint64_t r, b;
        if ((rc = sqlite3_step(s)) != SQLITE_ROW)
            break;
        ids[(*n_ids)++] = sqlite3_column_int64(s, 0);
        r = (uint64_t)sqlite3_column_int64(s, 1);
        b = (uint64_t)sqlite3_column_int64(s, 2);
        rows -= r < rows ? r : rows;
        bytes -= b < bytes ? b : bytes;
    }
    rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
    sqlite3_finalize(s);
    return rc;
}

int gs_store_prune_runs_uid(struct gs_store *st, double now, uint64_t rows_per_uid,
                            uint64_t bytes_per_uid, unsigned max_rows, unsigned *deleted,
                            struct gs_err *err)
{
    unsigned n = 0;
    int rc, work = 0;

    if (deleted)
        *deleted = 0;
    if (rows_per_uid || bytes_per_uid) {
        if (store_writable(st, err, "prune") != GS_OK)
            return GS_EINVAL;
        if (cap_refresh(st) != SQLITE_OK)
            return store_fail(st, err, "prune runs per uid");
        work = cap_over(st, rows_per_uid, bytes_per_uid) != NULL;
    }
    rc = prune_begin(st, now, &max_rows, deleted, work, "prune runs per uid", err);
    if (rc != GS_OK || !work)
        return rc;
    while (rc == SQLITE_OK && n < max_rows) {
        const struct cap_uid *c = cap_over(st, rows_per_uid, bytes_per_uid);
        int64_t ids[CAP_IDS];
        unsigned n_ids = 0;
        int gone = 1;

        if (!c)
            break;
        rc = cap_pick_runs(st, c, rows_per_uid, bytes_per_uid, ids, &n_ids);
        if (rc == SQLITE_OK && n_ids == 0) { /* the totals were wrong: counted anew next time */
            st->cap_valid = 0;
            break;
        }
        for (unsigned i = 0; i < n_ids && rc == SQLITE_OK && gone && n < max_rows; i++)
            rc = store_prune_one_run(st, ids[i], max_rows - n, &n, &gone);
    }
    if (rc != SQLITE_OK)
        st->cap_valid = 0; /* rolled back: the totals are counted anew */
    return prune_end(st, rc, n, deleted, "prune runs per uid", err);
}

/* Deletes the step rows of run_id chosen by sel (a SELECT of ids with ?1 = run, ?2 = cut,
 * ?3 = limit); their count into *n. */
static int live_delete(struct gs_store *st, const char *sel, int64_t run_id, double cut,
                       unsigned limit, unsigned *n)
{
    char sql[512];
    sqlite3_stmt *s = NULL;
    int rc;

    snprintf(sql, sizeof sql, "DELETE FROM step WHERE id IN (%s)", sel);
    rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, run_id);
        sqlite3_bind_double(s, 2, cut);
        sqlite3_bind_int(s, 3, (int)limit);
        rc = sqlite3_step(s) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(st->db);
        *n = rc == SQLITE_OK ? (unsigned)sqlite3_changes(st->db) : 0;
    }
    sqlite3_finalize(s);
    return rc;
}

/* Deletes up to *budget of the lowest-step rows of live run lv, counting them in *n. */
static int live_trim(struct gs_store *st, struct store_live *lv, uint64_t want, unsigned *budget,
                     unsigned *n)
{
    unsigned got = 0;
    int rc = live_delete(st, "SELECT id FROM step WHERE run = ?1 ORDER BY step LIMIT ?3", lv->id, 0,
                         want < *budget ? (unsigned)want : *budget, &got);

    lv->kept -= got < lv->kept ? got : lv->kept;
    *n += got;
    *budget -= got;
    return rc;
}

/* A uid's live runs past steps_per_uid together: the biggest of them loses its lowest steps
 * until the uid is back at the cap (or the budget is spent). */
static int live_trim_uids(struct gs_store *st, uint64_t steps_per_uid, unsigned *budget,
                          unsigned *n)
{
    int rc = SQLITE_OK;

    for (unsigned i = 0; i < st->n_live && rc == SQLITE_OK && *budget > 0; i++) {
        int64_t uid = st->live[i].uid;
        uint64_t total = 0;
        int first = 1;

        for (unsigned j = 0; j < st->n_live; j++) {
            if (st->live[j].uid != uid)
                continue;
            first &= j >= i; /* this uid's first entry: it is summed once */
            total += st->live[j].kept;
        }
        if (uid < 0 || !first)
            continue;
        while (total > steps_per_uid && *budget > 0 && rc == SQLITE_OK) {
            struct store_live *big = NULL;
            uint64_t before;

            for (unsigned j = 0; j < st->n_live; j++)
                if (st->live[j].uid == uid && (!big || st->live[j].kept > big->kept))
                    big = &st->live[j];
            if (!big || big->kept == 0)
                break;
            before = big->kept;
            rc = live_trim(st, big, total - steps_per_uid, budget, n);
            if (big->kept == before)
                break; /* its rows are gone already (counted too high): nothing to do */
            total -= before - big->kept;
        }
    }
    return rc;
}

int gs_store_prune_live(struct gs_store *st, double now, double runs_retention_s,
                        uint64_t steps_per_run, uint64_t steps_per_uid, unsigned max_rows,
                        unsigned *deleted, struct gs_err *err)
{
    unsigned n = 0;
    /* (a NULL st fails in prune_begin, whatever work says) */
    int work = st && st->n_live > 0 && (runs_retention_s > 0 || steps_per_run || steps_per_uid);
    int rc = prune_begin(st, now, &max_rows, deleted, work, "prune live runs", err);

    if (rc != GS_OK || !work)
        return rc;
    for (unsigned i = 0; i < st->n_live && rc == SQLITE_OK && n < max_rows; i++) {
        struct store_live *lv = &st->live[i];
        unsigned got = 0, budget = max_rows - n;

        /* Beyond the step cap: the lowest step numbers go first (the index's order; a sender
         * numbering its steps oddly only changes which of its own rows go). */
        if (steps_per_run && lv->kept > steps_per_run)
            rc = live_trim(st, lv, lv->kept - steps_per_run, &budget, &n);
        /* Older than the retention: of its first STORE_LIVE_PROBE rows in step order, those
         * that ended before now - runs_retention_s (bounded work whatever the run's size). */
        if (rc == SQLITE_OK && runs_retention_s > 0 && budget > 0) {
            unsigned probe = budget < STORE_LIVE_PROBE ? budget : STORE_LIVE_PROBE;
            rc = live_delete(st,
                             "SELECT id FROM (SELECT id, COALESCE(t_end, t_begin) AS t FROM step"
                             " WHERE run = ?1 ORDER BY step LIMIT ?3) WHERE t < ?2",
                             lv->id, now - runs_retention_s, probe, &got);
            lv->kept -= got < lv->kept ? got : lv->kept;
            n += got;
        }
    }
    if (rc == SQLITE_OK && steps_per_uid && n < max_rows) {
        unsigned budget = max_rows - n;
        rc = live_trim_uids(st, steps_per_uid, &budget, &n);
    }
    return prune_end(st, rc, n, deleted, "prune live runs", err);
}

/* ---- query ------------------------------------------------------------------------------ */

int gs_store_query(struct gs_store *st, unsigned gpu, enum gs_metric metric, double from, double to,
                   double step, gs_store_point_fn fn, void *ctx, enum gs_store_source *source,
                   struct gs_err *err)
{
    char sql[512];
    const char *m;
    int col, rc, stop = 0, raw;
    int64_t from_ms, to_ms, step_ms;
    sqlite3_stmt *s = NULL;

    if (!st || !fn)
        return gs_err_set(err, GS_EINVAL, "history: query without store or callback");
    if ((unsigned)metric >= GS_M__COUNT || (col = store_col_of(metric)) < 0)
        return gs_err_set(err, GS_ENOTFOUND, "history: metric %s is not kept in history",
                          (unsigned)metric < GS_M__COUNT ? gs_metric_name(metric) : "?");
    /* Bounds keep the packed keys (ms * 256) far from int64 overflow: years up to ~5000. */
    if (gpu > GS_STORE_MAX_GPU || !(to > from) || !(from >= 0) || !(to <= 1e11) ||
        !(step >= -1e10 && step <= 1e10))
        return gs_err_set(err, GS_EINVAL, "history: bad query (gpu %u, from %g, to %g, step %g)",
                          gpu, from, to, step);
    m = gs_metric_name(metric);
    from_ms = llround(from * 1000.0);
    to_ms = llround(to * 1000.0);
    raw = to - from <= st->opts.raw_max_range_s && step < 60;
    if (step <= 0 && !raw)
        step = 60;
    step_ms = step > 0 ? llround(step * 1000.0) : 0;
    if (raw && step_ms == 0)
        snprintf(sql, sizeof sql,
                 "SELECT id >> 8, %s, %s, %s, 1 FROM sample WHERE id >= ?1 AND id < ?2"
                 " AND (id & 255) = ?3 AND %s IS NOT NULL ORDER BY id",
                 m, m, m, m);
    else if (raw)
        snprintf(sql, sizeof sql,
                 "SELECT ((id >> 8) / ?4) * ?4 AS b, min(%s), avg(%s), max(%s), count(%s)"
                 " FROM sample WHERE id >= ?1 AND id < ?2 AND (id & 255) = ?3"
                 " AND %s IS NOT NULL GROUP BY b ORDER BY b",
                 m, m, m, m, m);
    else {
        step_ms = ((step_ms + STORE_MINUTE_MS - 1) / STORE_MINUTE_MS) * STORE_MINUTE_MS;
        snprintf(sql, sizeof sql,
                 "SELECT ((id >> 8) / ?4) * ?4 AS b, min(%s_min),"
                 " sum(%s_avg * %s_n) / sum(%s_n), max(%s_max), sum(%s_n) FROM rollup"
                 " WHERE id >= ?1 AND id < ?2 AND (id & 255) = ?3 AND %s_n > 0"
                 " GROUP BY b ORDER BY b",
                 m, m, m, m, m, m, m);
    }
    if (source)
        *source = raw ? GS_STORE_RAW : GS_STORE_ROLLUP;
    rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    if (rc != SQLITE_OK)
        return store_fail(st, err, "query");
    sqlite3_bind_int64(s, 1, from_ms * 256);
    sqlite3_bind_int64(s, 2, to_ms * 256);
    sqlite3_bind_int(s, 3, (int)gpu);
    if (step_ms > 0 && sqlite3_bind_parameter_count(s) >= 4)
        sqlite3_bind_int64(s, 4, step_ms);
    while (!stop && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct gs_store_point p = {
            .t = (double)sqlite3_column_int64(s, 0) / 1000.0,
            .min = sqlite3_column_double(s, 1),
            .avg = sqlite3_column_double(s, 2),
            .max = sqlite3_column_double(s, 3),
            .n = (unsigned)sqlite3_column_int64(s, 4),
        };
        stop = fn(ctx, &p);
    }
    if (!stop && rc != SQLITE_DONE) {
        rc = store_fail(st, err, "query");
        sqlite3_finalize(s);
        return rc;
    }
    sqlite3_finalize(s);
    return stop;
}

struct gs_store_stats gs_store_stats(const struct gs_store *st)
{
    struct gs_store_stats s = {0};
    if (st) {
        s = st->stats;
        s.buffered = st->count;
        s.steps_buffered = st->n_steps;
        s.logs_buffered = st->n_logs;
    }
    return s;
}

/* ---- runs ------------------------------------------------------------------------------- */

int gs_store_run_begin(struct gs_store *st, const struct gs_store_run *run, int64_t *run_id,
                       struct gs_err *err)
{
    if (store_writable(st, err, "run_begin") != GS_OK)
        return GS_EINVAL;
    if (!run || !run_id)
        return gs_err_set(err, GS_EINVAL, "history: run_begin: missing argument");
    bind_text_or_null(st->ins_run, 1, run->name);
    bind_text_or_null(st->ins_run, 2, run->source);
    bind_text_or_null(st->ins_run, 3, run->command);
    bind_text_or_null(st->ins_run, 4, run->hostname);
    bind_num_or_null(st->ins_run, 5, run->start_time, run->start_time > 0);
    bind_text_or_null(st->ins_run, 6, run->tags);
    bind_text_or_null(st->ins_run, 7, run->token);
    if (store_step(st->ins_run) != SQLITE_OK)
        return store_fail(st, err, "insert run");
    *run_id = sqlite3_last_insert_rowid(st->db);
    if (st->n_live == st->cap_live) {
        unsigned cap = st->cap_live ? st->cap_live * 2 : 8;
        struct store_live *p = realloc(st->live, (size_t)cap * sizeof *p);
        if (!p) /* the run is there; it just goes without a share or a step cap */
            return GS_OK;
        st->live = p;
        st->cap_live = cap;
    }
    st->live[st->n_live++] = (struct store_live){.id = *run_id, .uid = -1};
    return GS_OK;
}

/* The live-run entry of run_id, or NULL (not begun here, or ended). */
static struct store_live *live_of(struct gs_store *st, int64_t run_id)
{
    for (unsigned i = 0; i < st->n_live; i++)
        if (st->live[i].id == run_id)
            return &st->live[i];
    return NULL;
}

unsigned gs_store_run_share(unsigned live_runs)
{
    return STORE_STEP_CAP / (live_runs + 1);
}

int gs_store_run_step(struct gs_store *st, int64_t run_id, const struct gs_step_rec *rec,
                      int64_t peer_pid, int64_t peer_uid, struct gs_err *err)
{
    struct store_step_row *r;
    struct store_live *lv;

    if (store_writable(st, err, "run_step") != GS_OK)
        return GS_EINVAL;
    if (!rec)
        return gs_err_set(err, GS_EINVAL, "history: run_step: missing argument");
    if (st->n_steps >= STORE_STEP_CAP) {
        st->stats.steps_dropped++;
        return gs_err_set(err, GS_ENOMEM, "history: %u step records waiting; record dropped",
                          st->n_steps);
    }
    lv = live_of(st, run_id);
    if (lv && lv->buffered >= gs_store_run_share(st->n_live)) {
        /* One flooding run cannot take the buffer from the others (issue 18). */
        st->stats.steps_dropped++;
        st->stats.steps_dropped_share++;
        return gs_err_set(err, GS_EPERM,
                          "history: run %lld has %u step records waiting, its share of the "
                          "buffer with %u runs going on; record dropped",
                          (long long)run_id, lv->buffered, st->n_live);
    }
    if (st->n_steps == st->cap_steps) {
        unsigned cap = st->cap_steps ? st->cap_steps * 2 : 64;
        void *p;

        if (cap > STORE_STEP_CAP)
            cap = STORE_STEP_CAP;
        p = realloc(st->steps, (size_t)cap * sizeof *st->steps);
        if (!p) {
            st->stats.steps_dropped++;
            return gs_err_set(err, GS_ENOMEM, "history: out of memory");
        }
        st->steps = p;
        st->cap_steps = cap;
    }
    r = &st->steps[st->n_steps++];
    if (lv) {
        lv->buffered++;
        if (lv->uid < 0)
            lv->uid = peer_uid;
    }
    r->run = run_id;
    r->peer_pid = peer_pid;
    r->peer_uid = peer_uid;
    r->rec = *rec;
    return GS_OK;
}

int gs_store_run_end(struct gs_store *st, int64_t run_id, double end_time, int exit_code,
                     const char *report_json, struct gs_err *err)
{
    if (store_writable(st, err, "run_end") != GS_OK)
        return GS_EINVAL;
    sqlite3_bind_int64(st->end_run, 1, run_id);
    bind_num_or_null(st->end_run, 2, end_time, end_time > 0);
    if (exit_code >= 0)
        sqlite3_bind_int(st->end_run, 3, exit_code);
    bind_text_or_null(st->end_run, 4, report_json);
    if (store_step(st->end_run) != SQLITE_OK)
        return store_fail(st, err, "update run");
    if (sqlite3_changes(st->db) != 1)
        return gs_err_set(err, GS_ENOTFOUND, "history: no run %lld", (long long)run_id);
    if (st->cap_valid) { /* counted at the next cap call, once its last rows are flushed */
        if (st->n_cap_ended < sizeof st->cap_ended / sizeof st->cap_ended[0])
            st->cap_ended[st->n_cap_ended++] = run_id;
        else
            st->cap_valid = 0;
    }
    for (unsigned i = 0; i < st->n_live; i++) /* ended: no share any more, pruned as ended */
        if (st->live[i].id == run_id) {
            st->live[i] = st->live[--st->n_live];
            break;
        }
    return GS_OK;
}

int gs_store_run_log(struct gs_store *st, int64_t run_id, const struct gs_store_log *rec,
                     struct gs_err *err)
{
    if (store_writable(st, err, "run_log") != GS_OK)
        return GS_EINVAL;
    if (!rec || rec->n == 0 || rec->n > GS_STORE_LOG_MAX_KEYS)
        return gs_err_set(err, GS_EINVAL, "history: run_log: 1..%d values expected",
                          GS_STORE_LOG_MAX_KEYS);
    for (unsigned i = 0; i < rec->n; i++)
        if (!rec->key[i][0] || memchr(rec->key[i], 0, GS_STORE_LOG_KEY) == NULL ||
            !isfinite(rec->value[i]))
            return gs_err_set(err, GS_EINVAL, "history: run_log: value %u: bad key or value", i);
    if (st->n_logs + rec->n > STORE_LOG_CAP) {
        st->stats.logs_dropped += rec->n;
        return gs_err_set(err, GS_ENOMEM, "history: %u logged points waiting; record dropped",
                          st->n_logs);
    }
    if (st->n_logs + rec->n > st->cap_logs) {
        unsigned cap = st->cap_logs ? st->cap_logs : 64;
        void *p;

        while (cap < st->n_logs + rec->n)
            cap *= 2;
        if (cap > STORE_LOG_CAP)
            cap = STORE_LOG_CAP;
        p = realloc(st->logs, (size_t)cap * sizeof *st->logs);
        if (!p) {
            st->stats.logs_dropped += rec->n;
            return gs_err_set(err, GS_ENOMEM, "history: out of memory");
        }
        st->logs = p;
        st->cap_logs = cap;
    }
    for (unsigned i = 0; i < rec->n; i++) {
        struct store_log_row *r = &st->logs[st->n_logs++];

        r->run = run_id;
        r->seq = rec->seq;
        r->step = rec->step;
        r->t = rec->t;
        r->rank = rec->rank;
        r->value = rec->value[i];
        memcpy(r->key, rec->key[i], GS_STORE_LOG_KEY);
    }
    return GS_OK;
}
