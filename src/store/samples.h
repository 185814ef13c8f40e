/*
 * samples.h - the device samples of a history file over a time range, read-only: what the
 * report page of a run draws from its directory's samples.db (src/runview/rundata.c). The
 * file is outside input (a run directory copied from anywhere): it must carry the history's
 * application_id, is opened read-only without following a symlink, and is never written; a
 * file closed cleanly (no -wal beside it) is read as immutable, so that no -shm file appears
 * in the run directory.
 *
 * The writes are gs_store_append (store/history.h); like runs.h, this is their read side, so
 * no caller needs to know the tables.
 */
#ifndef GS_STORE_SAMPLES_H
#define GS_STORE_SAMPLES_H

struct gs_err;

/* One stored sample of one GPU; NaN: the value was absent (stored NULL). */
struct gs_store_sample_row {
    double t; /* unix seconds, to the millisecond */
    unsigned gpu;
    double util_ratio;     /* utilization_gpu, 0..1 */
    double mem_used_bytes; /* memory_used */
    double power_w;        /* power_draw */
    double temp_c;         /* temperature_gpu */
};
typedef int (*gs_store_sample_fn)(void *ctx, const struct gs_store_sample_row *row);

/* Calls fn for every sample of the history file at path whose time is in [from, to]
 * (unix seconds, taken to the millisecond: floor(from), ceil(to)), in time order and GPU
 * order within a time. A non-zero return from fn stops the read and is returned as is (err
 * untouched: fn says why). Errors: GS_EIO (cannot open, read error), GS_EPARSE (not SQLite,
 * not a gpuscope history, no sample table). */
int gs_store_samples_read(const char *path, double from, double to, gs_store_sample_fn fn,
                          void *ctx, struct gs_err *err);

#endif
