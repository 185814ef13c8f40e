/*
 * The history recorder (recorder.h): a writer thread that owns the history store.
 *
 * The writer is a bounded-queue worker (worker.h): the sampling thread's offers are copied into
 * its queue and never wait on disk. Two locks, never held together by the writer:
 * - qlock guards the policy and the published stats. It is held for a few instructions only,
 *   so the /metrics render (stats) never waits on disk.
 * - store_lock guards the store itself, held by the writer around each append, flush and
 *   prune batch, and by the HTTP thread around a query.
 *
 * Why one mutex for queries rather than a second, read-only connection: the store is not
 * thread-safe and a query is fast (a rowid range of one table), so the simplest correct
 * design is to serialise it with the writer. A query waits at most one flush (p99 ~4 ms, max
 * ~20 ms measured, docs/history.md) or one prune batch; /metrics and /api/v1/snapshot never
 * touch this mutex. A second connection would add a second prepared-statement set and buffer
 * for no measurable gain at this query rate.
 */
#include "agent/recorder.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/log.h"
#include "agent/worker.h"
#include "base/clock.h"
#include "gpuscope/gs_err.h"
#include "store/runs.h"

/* Snapshot references between the sampler and the writer. The writer drains the queue on
 * every offer, so a handful covers a writer stalled for a few cycles by a slow disk; beyond
 * that the store's own buffer would be behind anyway and dropping here is the same loss. */
#define QUEUE_CAP 8
/* Rows deleted per prune call, and calls per flush: bounded work between two flushes. */
#define PRUNE_ROWS 5000
#define PRUNE_BATCHES 8

struct queued {
    const struct gs_snapshot *snap;
    gs_recorder_release_fn release;
    void *cls;
};

struct gs_recorder {
    pthread_mutex_t qlock; /* policy, pub */
    double flush_interval_s, raw_s, rollup_s;
    double check_s;               /* the scheduled integrity check's period (0: none) */
    double runs_s;                /* ended runs and their steps kept this long */
    unsigned steps_per_run;       /* step rows kept per run (0: no cap) */
    unsigned steps_per_uid;       /* step rows of one uid's live runs together (0: no cap) */
    uint64_t ended_rows_per_uid;  /* rows of one uid's ended runs together (0: no cap) */
    uint64_t ended_bytes_per_uid; /* their stored text bytes (0: no cap) */
    struct gs_recorder_stats pub; /* the writer's last copy of the store stats */
    struct gs_worker *worker;     /* the queue and the writer thread */

    pthread_mutex_t store_lock;
    struct gs_store *st;

    int started;
    char path[PATH_MAX]; /* history.db, for the integrity check's own connection */
    /* Under qlock: the scheduled check found the file damaged (writes stop, reads 503). */
    int damaged;
    char damage[GS_ERR_MSG_LEN];
    double next_check; /* the writer's own (CLOCK_MONOTONIC s); 0: not yet set */
    double next_flush; /* the writer's own (CLOCK_MONOTONIC s) */
    int failing;       /* the writer's own: inside a failure episode */
    int prune_failed;  /* the writer's own: a prune failure was logged */
    /* Under qlock: usage rows waiting for the writer (gs_recorder_usage_add). */
    struct gs_usage_row *usage;
    unsigned n_usage, cap_usage;
};

#define USAGE_WAIT_MAX 65536u

static int64_t writer_run(void *ctx, void *items, unsigned n, bool stopping);

static void drop_queued(void *ctx, void *item)
{
    const struct queued *e = item;

    (void)ctx;
    if (e->release)
        e->release(e->cls);
}

static const struct gs_worker_ops writer_ops = {
    .name = "history",
    .item_size = sizeof(struct queued),
    .cap = QUEUE_CAP,
    .run = writer_run,
    .drop = drop_queued,
};

/* mkdir -p with mode for every directory it makes. A symbolic link on the way must belong to
 * root or to the agent's uid (issue 18): a link another user made would let them point the
 * agent's files where they like. */
static int make_dirs(const char *dir, mode_t mode, struct gs_err *err)
{
    char path[PATH_MAX];
    size_t n = strlen(dir);
    struct stat lst;

    if (n == 0 || n >= sizeof path)
        return gs_err_set(err, GS_EINVAL, "history: bad data dir '%s'", dir);
    memcpy(path, dir, n + 1);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && lst.st_uid != 0 &&
                lst.st_uid != geteuid())
                return gs_err_set(err, GS_EPERM,
                                  "history: data dir %s: %s is a symbolic link owned by uid "
                                  "%u (neither root nor the agent's): refusing to follow it",
                                  dir, path, (unsigned)lst.st_uid);
            if (mkdir(path, mode) != 0 && errno != EEXIST)
                return gs_err_set(err, errno == EACCES ? GS_EPERM : GS_EIO, "history: mkdir %s: %s",
                                  path, strerror(errno));
            *p = c;
            if (c == '\0')
                break;
        }
    }
    return GS_OK;
}

int gs_recorder_open(struct gs_recorder **out, const char *data_dir, struct gs_err *err)
{
    struct gs_recorder *r;
    char path[PATH_MAX];
    struct stat sb;
    int rc;

    if (snprintf(path, sizeof path, "%s/history.db", data_dir) >= (int)sizeof path)
        return gs_err_set(err, GS_EINVAL, "history: data dir path too long");
    rc = make_dirs(data_dir, 0750, err);
    if (rc != GS_OK)
        return rc;
    if (stat(data_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return gs_err_set(err, GS_EINVAL, "history: data dir %s is not a directory", data_dir);
    r = calloc(1, sizeof *r);
    if (!r)
        return gs_err_set(err, GS_ENOMEM, "history: out of memory");
    r->flush_interval_s = 5;
    r->runs_s = 30 * 86400.0;
    r->check_s = 6 * 3600.0;
    r->pub.last_flush_s = -1;
    r->pub.integrity_ok = 1; /* gs_store_open checked it */
    snprintf(r->path, sizeof r->path, "%s", path);
    rc = gs_worker_new(&r->worker, &writer_ops, r, err);
    if (rc != GS_OK) {
        free(r);
        return rc;
    }
    pthread_mutex_init(&r->qlock, NULL);
    pthread_mutex_init(&r->store_lock, NULL);
    rc = gs_store_open(&r->st, path, NULL, err);
    if (rc != GS_OK) {
        gs_worker_close(r->worker);
        pthread_mutex_destroy(&r->qlock);
        pthread_mutex_destroy(&r->store_lock);
        free(r);
        return rc;
    }
    *out = r;
    return GS_OK;
}

void gs_recorder_set_policy(struct gs_recorder *r, double flush_interval_s, double raw_s,
                            double rollup_s)
{
    pthread_mutex_lock(&r->qlock);
    r->flush_interval_s = flush_interval_s;
    r->raw_s = raw_s;
    r->rollup_s = rollup_s;
    pthread_mutex_unlock(&r->qlock);
    gs_worker_wake(r->worker); /* a shorter flush_interval applies now */
}

void gs_recorder_set_runs_retention(struct gs_recorder *r, double runs_s)
{
    pthread_mutex_lock(&r->qlock);
    r->runs_s = runs_s;
    pthread_mutex_unlock(&r->qlock);
}

void gs_recorder_set_steps_per_run(struct gs_recorder *r, unsigned steps_per_run,
                                   unsigned steps_per_uid)
{
    pthread_mutex_lock(&r->qlock);
    r->steps_per_run = steps_per_run;
    r->steps_per_uid = steps_per_uid;
    pthread_mutex_unlock(&r->qlock);
}

void gs_recorder_set_ended_caps(struct gs_recorder *r, uint64_t rows_per_uid,
                                uint64_t bytes_per_uid)
{
    pthread_mutex_lock(&r->qlock);
    r->ended_rows_per_uid = rows_per_uid;
    r->ended_bytes_per_uid = bytes_per_uid;
    pthread_mutex_unlock(&r->qlock);
}

void gs_recorder_set_check_interval(struct gs_recorder *r, double check_s)
{
    pthread_mutex_lock(&r->qlock);
    r->check_s = check_s;
    pthread_mutex_unlock(&r->qlock);
}

int gs_recorder_damaged(struct gs_recorder *r, struct gs_err *err)
{
    int rc = GS_OK;

    if (!r)
        return GS_OK;
    pthread_mutex_lock(&r->qlock);
    if (r->damaged)
        rc = gs_err_set(err, GS_EIO, "%s", r->damage);
    pthread_mutex_unlock(&r->qlock);
    return rc;
}

int gs_recorder_offer(struct gs_recorder *r, const struct gs_snapshot *snap,
                      gs_recorder_release_fn release, void *cls)
{
    struct queued e = {snap, release, cls};

    return gs_worker_offer(r->worker, &e);
}

struct gs_recorder_stats gs_recorder_stats(struct gs_recorder *r)
{
    struct gs_recorder_stats s;

    pthread_mutex_lock(&r->qlock);
    s = r->pub;
    pthread_mutex_unlock(&r->qlock);
    s.dropped += gs_worker_dropped(r->worker);
    return s;
}

int gs_recorder_query(struct gs_recorder *r, unsigned gpu, enum gs_metric metric, double from,
                      double to, double step, gs_store_point_fn fn, void *ctx,
                      enum gs_store_source *source, struct gs_err *err)
{
    int rc;

    if ((rc = gs_recorder_damaged(r, err)) != GS_OK)
        return rc;
    pthread_mutex_lock(&r->store_lock);
    rc = gs_store_query(r->st, gpu, metric, from, to, step, fn, ctx, source, err);
    pthread_mutex_unlock(&r->store_lock);
    return rc;
}

int gs_recorder_run_begin(struct gs_recorder *r, const struct gs_store_run *run, int64_t *run_id,
                          struct gs_err *err)
{
    int rc;

    if ((rc = gs_recorder_damaged(r, err)) != GS_OK)
        return rc;
    pthread_mutex_lock(&r->store_lock);
    rc = gs_store_run_begin(r->st, run, run_id, err);
    pthread_mutex_unlock(&r->store_lock);
    return rc;
}

int gs_recorder_run_step(struct gs_recorder *r, int64_t run_id, const struct gs_step_rec *rec,
                         int64_t peer_pid, int64_t peer_uid, struct gs_err *err)
{
    int rc;

    if ((rc = gs_recorder_damaged(r, err)) != GS_OK)
        return rc;
    pthread_mutex_lock(&r->store_lock);
    rc = gs_store_run_step(r->st, run_id, rec, peer_pid, peer_uid, err);
    pthread_mutex_unlock(&r->store_lock);
    return rc;
}

int gs_recorder_run_end(struct gs_recorder *r, int64_t run_id, double end_time,
                        const char *report_json, struct gs_err *err)
{
    int rc;

    if ((rc = gs_recorder_damaged(r, err)) != GS_OK)
        return rc;
    pthread_mutex_lock(&r->store_lock);
    rc = gs_store_run_end(r->st, run_id, end_time, -1, report_json, err);
    pthread_mutex_unlock(&r->store_lock);
    return rc;
}

int gs_recorder_run_log(struct gs_recorder *r, int64_t run_id, const struct gs_store_log *rec,
                        struct gs_err *err)
{
    int rc;

    pthread_mutex_lock(&r->store_lock);
    rc = gs_store_run_log(r->st, run_id, rec, err);
    pthread_mutex_unlock(&r->store_lock);
    return rc;
}

void gs_recorder_usage_add(struct gs_recorder *r, const struct gs_usage_row *rows, unsigned n)
{
    pthread_mutex_lock(&r->qlock);
    if (r->n_usage + n > r->cap_usage && r->n_usage + n <= USAGE_WAIT_MAX) {
        unsigned cap = r->cap_usage ? r->cap_usage : 64;
        struct gs_usage_row *p;
        while (cap < r->n_usage + n)
            cap *= 2;
        if ((p = realloc(r->usage, cap * sizeof *p)) != NULL) {
            r->usage = p;
            r->cap_usage = cap;
        }
    }
    if (r->n_usage + n <= r->cap_usage) {
        memcpy(r->usage + r->n_usage, rows, n * sizeof *rows);
        r->n_usage += n;
    } else {
        r->pub.dropped += n;
    }
    pthread_mutex_unlock(&r->qlock);
}

int gs_recorder_usage_query(struct gs_recorder *r, const struct gs_usage_sel *sel,
                            gs_usage_group_fn fn, void *ctx, struct gs_err *err)
{
    int rc;

    if ((rc = gs_recorder_damaged(r, err)) != GS_OK)
        return rc;
    pthread_mutex_lock(&r->store_lock);
    rc = gs_store_usage_query(r->st, sel, fn, ctx, err);
    pthread_mutex_unlock(&r->store_lock);
    return rc;
}

/* ---- the writer thread ---- */

/* Adds the usage rows waiting (the writer's, and the close's last call). */
static void write_usage(struct gs_recorder *r)
{
    struct gs_usage_row *rows;
    unsigned n;
    struct gs_err err;

    pthread_mutex_lock(&r->qlock);
    rows = r->usage;
    n = r->n_usage;
    r->usage = NULL;
    r->n_usage = r->cap_usage = 0;
    pthread_mutex_unlock(&r->qlock);
    if (n) {
        gs_err_clear(&err);
        pthread_mutex_lock(&r->store_lock);
        if (gs_store_usage_add(r->st, rows, n, &err) != GS_OK)
            gs_log(GS_LOG_WARN, "history: %u usage row(s) not kept: %s", n, err.msg);
        pthread_mutex_unlock(&r->store_lock);
    }
    free(rows);
}

/* Copies the store's stats where offer/stats can read them without the store lock. Called
 * with store_lock held. */
static void publish_stats(struct gs_recorder *r)
{
    struct gs_store_stats ss = gs_store_stats(r->st);

    pthread_mutex_lock(&r->qlock);
    r->pub.rows_written = ss.rows_written;
    r->pub.write_errors = ss.write_errors;
    r->pub.dropped = ss.dropped;
    r->pub.flushes = ss.flushes;
    r->pub.last_flush_s = ss.flushes ? ss.last_flush_s : -1;
    r->pub.max_flush_s = ss.max_flush_s;
    r->pub.buffered = ss.buffered;
    pthread_mutex_unlock(&r->qlock);
}

static void append_one(struct gs_recorder *r, const struct queued *e)
{
    struct gs_err err;

    gs_err_clear(&err);
    if (gs_recorder_damaged(r, &err) == GS_OK) { /* a damaged file is not written to */
        pthread_mutex_lock(&r->store_lock);
        if (gs_store_append(r->st, e->snap, &err) != GS_OK)
            gs_log(GS_LOG_DEBUG, "history: snapshot not kept: %s", err.msg);
        pthread_mutex_unlock(&r->store_lock);
    }
    if (e->release)
        e->release(e->cls);
}

/* One flush; logs the first failure of an episode and the recovery. Returns whether it
 * succeeded. */
static int flush_once(struct gs_recorder *r)
{
    struct gs_err err;
    struct gs_store_stats ss;
    int rc;

    gs_err_clear(&err);
    pthread_mutex_lock(&r->store_lock);
    rc = gs_store_flush(r->st, &err);
    ss = gs_store_stats(r->st);
    publish_stats(r);
    pthread_mutex_unlock(&r->store_lock);
    if (rc != GS_OK) {
        /* Transient: the buffer is kept and retried at the next flush; live data goes on. */
        if (ss.consecutive_failures == 1)
            gs_log(GS_LOG_ERROR,
                   "history: write failed: %s; still serving live data, retrying every flush",
                   err.msg);
        r->failing = 1;
        return 0;
    }
    if (r->failing)
        gs_log(GS_LOG_INFO,
               "history: writes recovered (%llu failed flush(es), %llu snapshot(s)"
               " dropped in all)",
               (unsigned long long)ss.write_errors, (unsigned long long)ss.dropped);
    r->failing = 0;
    return 1;
}

/* Prunes in batches, releasing the store lock between them so a query can slip in. */
static void prune(struct gs_recorder *r, double raw_s, double rollup_s, double runs_s,
                  unsigned steps_per_run, unsigned steps_per_uid, uint64_t ended_rows,
                  uint64_t ended_bytes)
{
    {
        unsigned changed = 0;
        struct gs_err err;
        gs_err_clear(&err);
        pthread_mutex_lock(&r->store_lock);
        if (gs_store_usage_prune(r->st, gs_clock_real_s(), raw_s, rollup_s, &changed, &err) !=
            GS_OK)
            gs_log(GS_LOG_WARN, "history: usage roll-up failed: %s", err.msg);
        pthread_mutex_unlock(&r->store_lock);
    }
    for (int i = 0; i < PRUNE_BATCHES; i++) {
        unsigned deleted = 0, run_rows = 0;
        struct gs_err err;
        int rc;

        gs_err_clear(&err);
        pthread_mutex_lock(&r->store_lock);
        rc = gs_store_prune(r->st, gs_clock_real_s(), raw_s, rollup_s, PRUNE_ROWS, &deleted, &err);
        /* Then ended runs and their steps, in what is left of the batch. */
        if (rc == GS_OK && deleted < PRUNE_ROWS) {
            rc = gs_store_prune_runs(r->st, gs_clock_real_s(), runs_s, PRUNE_ROWS - deleted,
                                     &run_rows, &err);
            deleted += run_rows;
        }
        /* Then each uid's oldest ended runs past the per-uid caps. */
        if (rc == GS_OK && deleted < PRUNE_ROWS) {
            rc = gs_store_prune_runs_uid(r->st, gs_clock_real_s(), ended_rows, ended_bytes,
                                         PRUNE_ROWS - deleted, &run_rows, &err);
            deleted += run_rows;
        }
        /* And the steps of runs going on past the retention or the per-run cap. */
        if (rc == GS_OK && deleted < PRUNE_ROWS) {
            rc = gs_store_prune_live(r->st, gs_clock_real_s(), runs_s, steps_per_run, steps_per_uid,
                                     PRUNE_ROWS - deleted, &run_rows, &err);
            deleted += run_rows;
        }
        pthread_mutex_unlock(&r->store_lock);
        if (rc != GS_OK) {
            if (!r->prune_failed)
                gs_log(GS_LOG_WARN, "history: prune failed: %s; retrying after the next flush",
                       err.msg);
            r->prune_failed = 1;
            return;
        }
        if (r->prune_failed)
            gs_log(GS_LOG_INFO, "history: prune recovered");
        r->prune_failed = 0;
        if (deleted < PRUNE_ROWS)
            return;
    }
}

/* The scheduled integrity check (issue 18): PRAGMA quick_check through a connection of its
 * own (a WAL reader: the store lock is not held, so steps and queries go on meanwhile). A
 * damaged file stops the writes and makes reads answer 503 with the reason until a restart
 * (which refuses the file: gs_store_open). */
static void check_once(struct gs_recorder *r)
{
    struct gs_store *rd = NULL;
    struct gs_err err;
    double t0 = gs_clock_mono_s();
    int rc, damaged;

    gs_err_clear(&err);
    rc = gs_store_open_read(&rd, r->path, &err);
    if (rc == GS_OK)
        rc = gs_store_check(rd, &err);
    gs_store_close(rd);
    /* gs_store_check's answer, or SQLite's own word for a page it could not read */
    damaged = rc != GS_OK && (strstr(err.msg, "is damaged") || strstr(err.msg, "malformed"));
    pthread_mutex_lock(&r->qlock);
    r->pub.integrity_checks++;
    r->pub.integrity_last_s = gs_clock_mono_s() - t0;
    if (damaged) {
        r->pub.integrity_ok = 0;
        r->damaged = 1;
        if (strstr(err.msg, "is damaged"))
            snprintf(r->damage, sizeof r->damage, "%s", err.msg);
        else /* SQLite could not even read its schema: the same finding, said the same way */
            snprintf(r->damage, sizeof r->damage, "history: %.200s is damaged (%.200s)", r->path,
                     err.msg);
    }
    pthread_mutex_unlock(&r->qlock);
    if (damaged)
        gs_log(GS_LOG_ERROR, "%s; history writes stopped, history and stored runs answer 503",
               r->damage);
    else if (rc != GS_OK) /* could not open it for the check (an I/O error): tried again */
        gs_log(GS_LOG_WARN, "history: integrity check could not run: %s", err.msg);
}

/* The writer's body (worker.h): appends what was queued, flushes every flush_interval (and
 * at stop), prunes after each flush, checks the file every check_s. */
static int64_t writer_run(void *ctx, void *items, unsigned n, bool stopping)
{
    struct gs_recorder *r = ctx;
    const struct queued *batch = items;
    double raw_s, rollup_s, runs_s, interval_s, check_s;
    unsigned steps_per_run, steps_per_uid;
    uint64_t ended_rows, ended_bytes;
    int damaged;

    pthread_mutex_lock(&r->qlock);
    raw_s = r->raw_s;
    rollup_s = r->rollup_s;
    runs_s = r->runs_s;
    steps_per_run = r->steps_per_run;
    steps_per_uid = r->steps_per_uid;
    ended_rows = r->ended_rows_per_uid;
    ended_bytes = r->ended_bytes_per_uid;
    interval_s = r->flush_interval_s;
    check_s = r->check_s;
    damaged = r->damaged;
    pthread_mutex_unlock(&r->qlock);
    for (unsigned i = 0; i < n; i++)
        append_one(r, &batch[i]);
    if (!damaged)
        write_usage(r);
    if (n > 0) {
        pthread_mutex_lock(&r->store_lock);
        publish_stats(r);
        pthread_mutex_unlock(&r->store_lock);
    }
    if (check_s > 0 && !stopping && !damaged) {
        if (r->next_check == 0 || r->next_check > gs_clock_mono_s() + check_s)
            r->next_check = gs_clock_mono_s() + check_s; /* the first, or a reload shortened it */
        else if (gs_clock_mono_s() >= r->next_check) {
            check_once(r);
            r->next_check = gs_clock_mono_s() + check_s;
        }
    }
    if (damaged) {
        r->next_flush = gs_clock_mono_s() + interval_s; /* nothing written to a damaged file */
    } else if (stopping || gs_clock_mono_s() >= r->next_flush) {
        if (flush_once(r) && !stopping)
            prune(r, raw_s, rollup_s, runs_s, steps_per_run, steps_per_uid, ended_rows,
                  ended_bytes);
        r->next_flush = gs_clock_mono_s() + interval_s;
    } else if (r->next_flush > gs_clock_mono_s() + interval_s) {
        r->next_flush = gs_clock_mono_s() + interval_s; /* a reload shortened the period */
    }
    return (int64_t)(r->next_flush * 1e9);
}

int gs_recorder_start(struct gs_recorder *r, struct gs_err *err)
{
    int rc;

    pthread_mutex_lock(&r->qlock);
    r->next_flush = gs_clock_mono_s() + r->flush_interval_s;
    pthread_mutex_unlock(&r->qlock);
    rc = gs_worker_start(r->worker, (int64_t)(r->next_flush * 1e9), err);
    r->started = rc == GS_OK;
    return rc;
}

void gs_recorder_close(struct gs_recorder *r)
{
    if (!r)
        return;
    gs_worker_close(r->worker); /* drains the queue and flushes (unstarted: releases) */
    if (!r->started)
        flush_once(r);
    if (!r->damaged)
        write_usage(r); /* what the agent's shutdown handed over last */
    free(r->usage);
    gs_store_close(r->st);
    pthread_mutex_destroy(&r->qlock);
    pthread_mutex_destroy(&r->store_lock);
    free(r);
}
