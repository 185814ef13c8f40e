/*
 * bench_store_logs: what a run's logged values (schema v3, `run_log`) cost the history.
 *
 * One run logs its bound, GS_RUNS_MAX_LOG_POINTS (100,000) values, the way the HF Trainer
 * logs: records of KEYS values (loss, learning_rate, grad_norm, epoch) with realistic
 * precision, written through gs_store_run_log and flushed every FLUSH_EVERY records (a 1 s
 * flush of a fast loop logging every step). Reports the time inside gs_store_flush per value,
 * the worst flush, the bytes per value of `run_log` (file growth, WAL checkpointed at close),
 * the read of every record back (gs_store_run_logs, what /api/v1/runs/ID/logs pages) and the
 * retention's delete of the run (gs_store_prune_runs in 5000-row batches).
 *
 * usage: bench_store_logs DIR
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuscope/gs_err.h"
#include "store/history.h"
#include "store/runs.h"

#define POINTS 100000
#define KEYS 4
#define FLUSH_EVERY 50

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long file_size(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? (long long)sb.st_size : -1;
}

static int count_rec(void *ctx, const struct gs_store_log *rec)
{
    *(long long *)ctx += rec->n;
    return 0;
}

int main(int argc, char **argv)
{
    static const char *const keys[KEYS] = {"loss", "learning_rate", "grad_norm", "epoch"};
    char path[512];
    struct gs_store *st = NULL, *rd = NULL;
    struct gs_store_run run = {.name = "bench", .source = "agent", .start_time = 1764430000.0};
    struct gs_store_log l;
    struct gs_err err;
    int64_t id = 0;
    double in_flush = 0, worst = 0, t0;
    long long before, after, back = 0;
    unsigned deleted = 0, calls = 0;
    int records = POINTS / KEYS;

    if (argc != 2) {
        fprintf(stderr, "usage: bench_store_logs DIR\n");
        return 2;
    }
    snprintf(path, sizeof path, "%s/logs.db", argv[1]);
    unlink(path);
    if (gs_store_open(&st, path, NULL, &err) != GS_OK ||
        gs_store_run_begin(st, &run, &id, &err) != GS_OK) {
        fprintf(stderr, "bench_store_logs: %s\n", err.msg);
        return 1;
    }
    gs_store_close(st);
    before = file_size(path);
    if (gs_store_open(&st, path, NULL, &err) != GS_OK) {
        fprintf(stderr, "bench_store_logs: %s\n", err.msg);
        return 1;
    }
    srand(7);
    for (int i = 0; i < records; i++) {
        memset(&l, 0, sizeof l);
        l.seq = i;
        l.step = i + 1;
        l.t = 1764430000.0 + i * 0.35;
        l.rank = 0;
        l.n = KEYS;
        for (int k = 0; k < KEYS; k++)
            snprintf(l.key[k], sizeof l.key[k], "%s", keys[k]);
        l.value[0] = 2.5 * exp(-i / 8000.0) + (rand() % 1000) / 1e4; /* loss */
        l.value[1] = 2e-5 * fmin(1.0, i / 500.0);                    /* warmup */
        l.value[2] = 0.5 + (rand() % 10000) / 1e4;                   /* grad norm */
        l.value[3] = i / (double)records * 3;                        /* epoch */
        if (gs_store_run_log(st, id, &l, &err) != GS_OK) {
            fprintf(stderr, "bench_store_logs: %s\n", err.msg);
            return 1;
        }
        if ((i + 1) % FLUSH_EVERY == 0 || i + 1 == records) {
            t0 = mono_s();
            if (gs_store_flush(st, &err) != GS_OK) {
                fprintf(stderr, "bench_store_logs: %s\n", err.msg);
                return 1;
            }
            double dt = mono_s() - t0;
            in_flush += dt;
            if (dt > worst)
                worst = dt;
        }
    }
    gs_store_close(st);
    after = file_size(path);
    if (gs_store_open_read(&rd, path, &err) != GS_OK) {
        fprintf(stderr, "bench_store_logs: %s\n", err.msg);
        return 1;
    }
    t0 = mono_s();
    for (int64_t from = 0; from < records; from += 1000)
        gs_store_run_logs(rd, id, from, 1000, count_rec, &back, &err);
    double read_s = mono_s() - t0;
    gs_store_close(rd);
    if (gs_store_open(&st, path, NULL, &err) != GS_OK ||
        gs_store_run_end(st, id, 1764440000.0, 0, "{}", &err) != GS_OK)
        return 1;
    t0 = mono_s();
    do {
        gs_store_prune_runs(st, 1764440000.0 + 31 * 86400.0, 30 * 86400.0, 5000, &deleted, &err);
        calls++;
    } while (deleted == 5000);
    double prune_s = mono_s() - t0;
    gs_store_close(st);
    printf("values written           %d (%d records of %d, flush every %d records)\n", POINTS,
           records, KEYS, FLUSH_EVERY);
    printf("time in flush            %.1f ns per value, worst flush %.2f ms\n",
           in_flush / POINTS * 1e9, worst * 1e3);
    printf("run_log on disk          %.1f bytes per value (%lld bytes for the run's bound)\n",
           (double)(after - before) / POINTS, after - before);
    printf("read back (1000 a page)  %lld values in %.1f ms\n", back, read_s * 1e3);
    printf("retention delete         %.1f ms in %u calls of <= 5000 rows\n", prune_s * 1e3, calls);
    unlink(path);
    return back == POINTS ? 0 : 1;
}
