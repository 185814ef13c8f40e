/*
 * samples.c - the device samples of a history file over a time range, read-only (samples.h).
 */
#include "store/samples.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <sqlite3.h>

#include "gpuscope/gs_err.h"
#include "store/history.h"

static double col_double(sqlite3_stmt *st, int c, double scale)
{
    return sqlite3_column_type(st, c) == SQLITE_NULL ? NAN : sqlite3_column_double(st, c) * scale;
}

/* "file:PATH?immutable=1" with PATH percent-encoded where a URI needs it. */
static int uri_of(const char *path, char *out, size_t len)
{
    size_t o = 0;
    if (len < 32)
        return 0;
    o += (size_t)snprintf(out, len, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (o + 4 >= len)
            return 0;
        if (*p == '?' || *p == '#' || *p == '%' || *p < 0x21 || *p >= 0x7f)
            o += (size_t)snprintf(out + o, len - o, "%%%02X", *p);
        else
            out[o++] = (char)*p;
    }
    return snprintf(out + o, len - o, "?immutable=1") < (int)(len - o);
}

int gs_store_samples_read(const char *path, double from, double to, gs_store_sample_fn fn,
                          void *ctx, struct gs_err *err)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = GS_OK, app = 0;

    /* A history that was closed cleanly has no -wal file: everything is in the main file,
     * and "immutable" reads it without making a -shm file beside it. Otherwise (a run going
     * on, or one killed) a plain read-only open sees the WAL too. */
    char wal[4200], uri[13000];
    int immutable = snprintf(wal, sizeof wal, "%s-wal", path) < (int)sizeof wal &&
                    access(wal, F_OK) != 0 && errno == ENOENT;
    if (immutable && !uri_of(path, uri, sizeof uri))
        immutable = 0;
    if (sqlite3_open_v2(immutable ? uri : path, &db,
                        SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW |
                            (immutable ? SQLITE_OPEN_URI : 0),
                        NULL) != SQLITE_OK) {
        rc = gs_err_set(err, GS_EIO, "%s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        goto out;
    }
    sqlite3_busy_timeout(db, 2000);
    if (sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        rc =
            gs_err_set(err, GS_EPARSE, "%s: not an SQLite database (%s)", path, sqlite3_errmsg(db));
        goto out;
    }
    app = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    if ((uint32_t)app != GS_STORE_APP_ID) {
        rc = gs_err_set(err, GS_EPARSE,
                        "%s: not a gpuscope history database (application_id 0x%08x)", path,
                        (unsigned)app);
        goto out;
    }
    /* the key is t_ms * 256 + gpu (docs/history.md): a time range is a rowid range */
    if (sqlite3_prepare_v2(db,
                           "SELECT id / 256, id % 256, utilization_gpu, memory_used, power_draw,"
                           " temperature_gpu FROM sample WHERE id >= ?1 AND id < ?2 ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = gs_err_set(err, GS_EPARSE, "%s: %s", path, sqlite3_errmsg(db));
        goto out;
    }
    sqlite3_bind_int64(st, 1, (sqlite3_int64)floor(from * 1000.0) * 256);
    sqlite3_bind_int64(st, 2, ((sqlite3_int64)ceil(to * 1000.0) + 1) * 256);
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        struct gs_store_sample_row row = {
            .t = (double)sqlite3_column_int64(st, 0) / 1000.0,
            .gpu = (unsigned)sqlite3_column_int(st, 1),
            .util_ratio = col_double(st, 2, 1.0),
            .mem_used_bytes = col_double(st, 3, 1.0),
            .power_w = col_double(st, 4, 1.0),
            .temp_c = col_double(st, 5, 1.0),
        };
        if ((rc = fn(ctx, &row)) != 0)
            goto out;
    }
    if (s != SQLITE_DONE)
        rc = gs_err_set(err, GS_EIO, "%s: %s", path, sqlite3_errmsg(db));
out:
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}
