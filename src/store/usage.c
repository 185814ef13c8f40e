/*
 * usage.c - the usage table of the history (store/usage.h): adds, roll-up, prune, grouped read.
 */
#include "store/usage.h"
#include "store/store_priv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "gpuscope/gs_err.h"

#define USAGE_KEY "res, t, uid, user, job, pod, namespace, container, gpu, uuid"
#define USAGE_SUMS                                                                                 \
    " held_s = held_s + excluded.held_s, busy_s = busy_s + excluded.busy_s,"                       \
    " idle_s = idle_s + excluded.idle_s, mem_gib_s = mem_gib_s + excluded.mem_gib_s,"              \
    " energy_j = energy_j + excluded.energy_j,"                                                    \
    " peak_bytes = max(peak_bytes, excluded.peak_bytes),"                                          \
    " first_seen = min(first_seen, excluded.first_seen),"                                          \
    " last_seen = max(last_seen, excluded.last_seen)"

static int begin(struct gs_store *st, struct gs_err *err, const char *what)
{
    if (sqlite3_exec(gs_store_conn(st), "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return gs_store_sql_fail(st, err, what);
    return GS_OK;
}

static int end(struct gs_store *st, int ok, struct gs_err *err, const char *what)
{
    sqlite3 *db = gs_store_conn(st);

    if (ok && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
        return GS_OK;
    {
        int rc = gs_store_sql_fail(st, err, what);
        if (!sqlite3_get_autocommit(db))
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return rc;
    }
}

int gs_store_usage_add(struct gs_store *st, const struct gs_usage_row *rows, unsigned n,
                       struct gs_err *err)
{
    static const char sql[] =
        "INSERT INTO usage(" USAGE_KEY ", held_s, busy_s, idle_s, mem_gib_s, energy_j,"
        " peak_bytes, first_seen, last_seen) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT(" USAGE_KEY ") DO UPDATE SET" USAGE_SUMS;
    sqlite3_stmt *s = NULL;
    int rc, ok = 1;

    if (!st)
        return gs_err_set(err, GS_EINVAL, "history: no store");
    if (n == 0)
        return GS_OK;
    if ((rc = begin(st, err, "usage")) != GS_OK)
        return rc;
    if (sqlite3_prepare_v2(gs_store_conn(st), sql, -1, &s, NULL) != SQLITE_OK)
        ok = 0;
    for (unsigned i = 0; ok && i < n; i++) {
        const struct gs_usage_row *r = &rows[i];
        int c = 1;
        sqlite3_reset(s);
        sqlite3_bind_int(s, c++, r->res);
        sqlite3_bind_int64(s, c++, (sqlite3_int64)llround(r->t));
        sqlite3_bind_int64(s, c++, GS_USAGE_UID(r->h.uid));
        sqlite3_bind_text(s, c++, r->h.user, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, c++, r->h.job, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, c++, r->h.pod, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, c++, r->h.ns, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, c++, r->h.container, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, c++, (int)r->gpu);
        sqlite3_bind_text(s, c++, r->uuid, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, c++, r->a.held_s);
        sqlite3_bind_double(s, c++, r->a.busy_s);
        sqlite3_bind_double(s, c++, r->a.idle_s);
        sqlite3_bind_double(s, c++, r->a.mem_gib_s);
        sqlite3_bind_double(s, c++, r->a.energy_j);
        sqlite3_bind_double(s, c++, r->a.peak_bytes);
        sqlite3_bind_double(s, c++, r->a.first_seen);
        sqlite3_bind_double(s, c++, r->a.last_seen);
        ok = sqlite3_step(s) == SQLITE_DONE;
    }
    sqlite3_finalize(s);
    return end(st, ok, err, "usage");
}

int gs_store_usage_prune(struct gs_store *st, double now, double raw_s, double rollup_s,
                         unsigned *changed, struct gs_err *err)
{
    static const char roll[] =
        "INSERT INTO usage(" USAGE_KEY ", held_s, busy_s, idle_s, mem_gib_s, energy_j,"
        " peak_bytes, first_seen, last_seen)"
        " SELECT 3600, (t / 3600) * 3600, uid, user, job, pod, namespace, container, gpu, uuid,"
        " sum(held_s), sum(busy_s), sum(idle_s), sum(mem_gib_s), sum(energy_j), max(peak_bytes),"
        " min(first_seen), max(last_seen) FROM usage WHERE res = 60 AND t < ?1"
        " GROUP BY t / 3600, uid, user, job, pod, namespace, container, gpu, uuid"
        " ON CONFLICT(" USAGE_KEY ") DO UPDATE SET" USAGE_SUMS;
    static const char *const del[] = {"DELETE FROM usage WHERE res = 60 AND t < ?1",
                                      "DELETE FROM usage WHERE res = 3600 AND t < ?1"};
    sqlite3 *db;
    int rc, ok = 1;

    *changed = 0;
    if (!st)
        return gs_err_set(err, GS_EINVAL, "history: no store");
    db = gs_store_conn(st);
    if ((rc = begin(st, err, "usage prune")) != GS_OK)
        return rc;
    for (int k = 0; ok && k < 3; k++) {
        sqlite3_stmt *s = NULL;
        double cut = k < 2 ? now - raw_s : now - rollup_s;
        if (k == 2 && rollup_s <= 0)
            break;
        ok = sqlite3_prepare_v2(db, k == 0 ? roll : del[k - 1], -1, &s, NULL) == SQLITE_OK;
        if (ok) {
            sqlite3_bind_int64(s, 1, (sqlite3_int64)floor(cut));
            ok = sqlite3_step(s) == SQLITE_DONE;
        }
        if (ok && k > 0)
            *changed += (unsigned)sqlite3_changes(db);
        sqlite3_finalize(s);
    }
    return end(st, ok, err, "usage prune");
}

/* The select list and GROUP BY of each grouping: uid, user, job, pod, namespace, gpu, uuid. */
#define ONE(col, none) "CASE WHEN min(" col ") = max(" col ") THEN max(" col ") ELSE " none " END"
static const struct {
    const char *cols, *group;
} by_sql[] = {
    [GS_USAGE_BY_USER] = {"uid, max(user), " ONE("job", "''") ", " ONE("pod", "''") ", " ONE(
                              "namespace", "''") ", " ONE("gpu", "-1") ", " ONE("uuid", "''"),
                          "uid"},
    [GS_USAGE_BY_JOB] = {"uid, max(user), job, " ONE("pod", "''") ", " ONE(
                             "namespace", "''") ", " ONE("gpu", "-1") ", " ONE("uuid", "''"),
                         "job, uid"},
    [GS_USAGE_BY_POD] = {ONE("uid", "-1") ", " ONE("user", "''") ", " ONE(
                             "job", "''") ", pod, namespace, " ONE("gpu", "-1") ", " ONE("uuid",
                                                                                         "''"),
                         "namespace, pod"},
    [GS_USAGE_BY_NS] = {ONE("uid", "-1") ", " ONE("user", "''") ", " ONE("job", "''") ", " ONE(
                            "pod", "''") ", namespace, " ONE("gpu", "-1") ", " ONE("uuid", "''"),
                        "namespace"},
    [GS_USAGE_BY_GPU] = {ONE("uid", "-1") ", " ONE("user", "''") ", " ONE("job", "''") ", " ONE(
                             "pod", "''") ", " ONE("namespace", "''") ", gpu, uuid",
                         "gpu, uuid"},
};

static void col_text(sqlite3_stmt *s, int c, char *out, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, c);
    snprintf(out, cap, "%s", t ? (const char *)t : "");
}

int gs_store_usage_query(struct gs_store *st, const struct gs_usage_sel *sel, gs_usage_group_fn fn,
                         void *ctx, struct gs_err *err)
{
    char sql[4096];
    sqlite3_stmt *s = NULL;
    int rc, stop = 0;

    if (!st || !sel || (unsigned)sel->by > GS_USAGE_BY_GPU)
        return gs_err_set(err, GS_EINVAL, "history: bad usage read");
    snprintf(sql, sizeof sql,
             "SELECT %s, sum(held_s), sum(busy_s), sum(idle_s), sum(mem_gib_s), sum(energy_j),"
             " max(peak_bytes), min(first_seen), max(last_seen) FROM usage"
             " WHERE ((res = 60 AND t > ?1 - 60) OR (res = 3600 AND t > ?1 - 3600)) AND t < ?2"
             "%s%s GROUP BY %s ORDER BY sum(held_s) DESC",
             by_sql[sel->by].cols, sel->owner_only ? " AND uid = ?3" : "",
             sel->job ? " AND job = ?4" : "", by_sql[sel->by].group);
    if (sqlite3_prepare_v2(gs_store_conn(st), sql, -1, &s, NULL) != SQLITE_OK) {
        sqlite3_finalize(s);
        return gs_store_sql_fail(st, err, "read usage");
    }
    sqlite3_bind_double(s, 1, sel->from);
    sqlite3_bind_double(s, 2, sel->to);
    if (sel->owner_only)
        sqlite3_bind_int64(s, 3, sel->uid);
    if (sel->job)
        sqlite3_bind_text(s, 4, sel->job, -1, SQLITE_TRANSIENT);
    while (!stop && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct gs_usage_group g;
        memset(&g, 0, sizeof g);
        g.uid = sqlite3_column_int64(s, 0);
        col_text(s, 1, g.user, sizeof g.user);
        col_text(s, 2, g.job, sizeof g.job);
        col_text(s, 3, g.pod, sizeof g.pod);
        col_text(s, 4, g.ns, sizeof g.ns);
        g.gpu = sqlite3_column_int(s, 5);
        col_text(s, 6, g.uuid, sizeof g.uuid);
        g.a.held_s = sqlite3_column_double(s, 7);
        g.a.busy_s = sqlite3_column_double(s, 8);
        g.a.idle_s = sqlite3_column_double(s, 9);
        g.a.mem_gib_s = sqlite3_column_double(s, 10);
        g.a.energy_j = sqlite3_column_double(s, 11);
        g.a.peak_bytes = sqlite3_column_double(s, 12);
        g.a.first_seen = sqlite3_column_double(s, 13);
        g.a.last_seen = sqlite3_column_double(s, 14);
        stop = fn(ctx, &g);
    }
    if (!stop && rc != SQLITE_DONE) {
        rc = gs_store_sql_fail(st, err, "read usage");
        sqlite3_finalize(s);
        return rc;
    }
    sqlite3_finalize(s);
    return stop ? stop : GS_OK;
}
