/*
 * store_priv.h - what the store's files share and nobody else sees: the connection of a
 * store and its error mapping, for src/store/runs.c (the run reads) next to history.c.
 */
#ifndef GS_STORE_PRIV_H
#define GS_STORE_PRIV_H

struct gs_err;
struct gs_store;
struct sqlite3;

/* The store's connection. */
struct sqlite3 *gs_store_conn(struct gs_store *st);
/* GS_EIO with "history: what (path): SQLite's message". */
int gs_store_sql_fail(struct gs_store *st, struct gs_err *err, const char *what);

#endif
