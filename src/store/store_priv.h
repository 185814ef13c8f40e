/*
 * store_priv.h - what the store's files share and nobody else sees: the connection of a
 * store and its error mapping, for src/store/runs.c (the run reads) next to history.c.
 */
#ifndef GS_STORE_PRIV_H
#define GS_STORE_PRIV_H

struct gs_err;
struct gs_store;
struct sqlite3;

/* SQL of a run's integer field key in its report's "run" object, and of its owner: the
 * report's uid (the agent writes SO_PEERCRED's there), else the uid of the sender of its
 * first stored step (a nested CASE: json_type is never evaluated on text that is not JSON,
 * which would be an SQL error). */
#define RUN_REPORT_INT(key)                                                                        \
    "CASE WHEN json_valid(report) THEN CASE WHEN json_type(report, '$.run." key "')"               \
    " = 'integer' THEN json_extract(report, '$.run." key "') END END"
#define RUN_OWNER_UID                                                                              \
    "COALESCE(" RUN_REPORT_INT("uid") ", (SELECT peer_uid FROM step WHERE step.run = run.id"       \
                                      " LIMIT 1))"

/* The store's connection. */
struct sqlite3 *gs_store_conn(struct gs_store *st);
/* GS_EIO with "history: what (path): SQLite's message". */
int gs_store_sql_fail(struct gs_store *st, struct gs_err *err, const char *what);

#endif
