/*
 * bench_store: the history store's write cost and size on disk.
 *
 * Simulates HOURS of an 8-GPU node sampled at 1 s with realistic values (integer percents as
 * ratios, milliwatt-precision power, MHz clocks, a growing energy counter, GPM ratios), flushed
 * every 5 snapshots as the agent does, into a fresh history.db in DIR. Reports flush
 * throughput (rows/s over the time spent inside gs_store_flush, rollups included), the median
 * and worst flush, and the file size after close (WAL checkpointed) as bytes per GPU per day.
 * A second pass adds 64 processes (8 per GPU) sampled every 10 s to size the process table.
 *
 * usage: bench_store DIR [HOURS]   (default 24)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "store/history.h"

#define N_GPUS 8
#define N_PROCS 64
#define FLUSH_EVERY 5

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill(struct gs_snapshot *s, unsigned k, double *energy)
{
    for (unsigned i = 0; i < s->n_gpus; i++) {
        struct gs_gpu *g = &s->gpus[i];
        unsigned r = (unsigned)rand();
        double power = 250.0 + (double)(r % 200000) / 1000.0; /* mW precision */
        g->index = i;
        energy[i] += power;
        gs_gpu_set(g, GS_M_UTIL_GPU, (double)(r % 101) / 100.0);
        gs_gpu_set(g, GS_M_UTIL_MEM, (double)((r >> 8) % 101) / 100.0);
        gs_gpu_set(g, GS_M_UTIL_ENC, 0.0);
        gs_gpu_set(g, GS_M_UTIL_DEC, 0.0);
        gs_gpu_set(g, GS_M_MEM_USED, (double)(40000 + (r >> 4) % 30000) * 1048576.0);
        gs_gpu_set(g, GS_M_TEMP_GPU, 55.0 + (double)(r % 20));
        gs_gpu_set(g, GS_M_TEMP_MEM, 60.0 + (double)(r % 15));
        gs_gpu_set(g, GS_M_POWER_DRAW, power);
        gs_gpu_set(g, GS_M_ENERGY, energy[i]);
        gs_gpu_set(g, GS_M_CLOCK_GR, 1980e6 - (double)(r % 4) * 15e6);
        gs_gpu_set(g, GS_M_CLOCK_SM, 1980e6 - (double)(r % 4) * 15e6);
        gs_gpu_set(g, GS_M_CLOCK_MEM, 2619e6);
        gs_gpu_set(g, GS_M_PSTATE, 0);
        gs_gpu_set(g, GS_M_THROTTLE_ACTIVE, (r % 10) ? 0 : 4);
        gs_gpu_set(g, GS_M_PCIE_TX, (double)(r % 50000) * 1024.0);
        gs_gpu_set(g, GS_M_PCIE_RX, (double)((r >> 3) % 50000) * 1024.0);
        gs_gpu_set(g, GS_M_PCIE_REPLAY, 0);
        gs_gpu_set(g, GS_M_ECC_CORR_VOL, 0);
        gs_gpu_set(g, GS_M_ECC_UNCORR_VOL, 0);
        gs_gpu_set(g, GS_M_GPM_SM_ACTIVE, (double)(r % 1000) / 997.0);
        gs_gpu_set(g, GS_M_GPM_SM_OCCUPANCY, (double)((r >> 2) % 1000) / 997.0);
        gs_gpu_set(g, GS_M_GPM_TENSOR_ACTIVE, (double)((r >> 5) % 1000) / 997.0);
        gs_gpu_set(g, GS_M_GPM_DRAM_ACTIVE, (double)((r >> 7) % 1000) / 997.0);
    }
    (void)k;
}

static void fill_procs(struct gs_snapshot *s)
{
    s->n_procs = N_PROCS;
    for (unsigned p = 0; p < N_PROCS; p++) {
        struct gs_proc *q = &s->procs[p];
        memset(q, 0, sizeof *q);
        q->pid = 10000 + p;
        q->gpu = p % N_GPUS;
        q->mem_st = GS_ST_OK;
        q->gpu_mem_bytes = (uint64_t)(1000 + rand() % 9000) << 20;
        q->util_st = GS_ST_OK;
        q->sm_util = (double)(rand() % 101) / 100.0;
        q->host_st = GS_ST_OK;
        snprintf(q->name, sizeof q->name, "python3");
        snprintf(q->user, sizeof q->user, "user%u", p % 4);
        q->job_kind = GS_JOB_SLURM;
        snprintf(q->slurm_job, sizeof q->slurm_job, "%u", 4711 + p / 8);
    }
}

static int run(const char *dir, double hours, int procs)
{
    char path[512], wal[600];
    struct gs_store *st = NULL;
    struct gs_snapshot *s = NULL;
    struct gs_err e = {0};
    struct stat sb;
    double energy[N_GPUS] = {0}, t_flush = 0, t0;
    unsigned n = (unsigned)(hours * 3600), n_flush = 0, nf = n / FLUSH_EVERY + 1;
    double *flush_s = calloc(nf, sizeof *flush_s);

    snprintf(path, sizeof path, "%s/bench-history-%s.db", dir, procs ? "procs" : "gpus");
    snprintf(wal, sizeof wal, "%s-wal", path);
    unlink(path);
    unlink(wal);
    if (!flush_s || gs_store_open(&st, path, NULL, &e) != GS_OK ||
        gs_snapshot_new(&s, N_GPUS, N_PROCS, &e) != GS_OK) {
        fprintf(stderr, "bench_store: %s\n", e.msg);
        return 1;
    }
    srand(42);
    for (unsigned k = 0; k < n; k++) {
        s->t_real = 1700000040.0 + k;
        fill(s, k, energy);
        if (procs)
            fill_procs(s);
        if (gs_store_append(st, s, &e) != GS_OK)
            goto fail;
        if (k % FLUSH_EVERY == FLUSH_EVERY - 1 || k == n - 1) {
            t0 = mono_s();
            if (gs_store_flush(st, &e) != GS_OK)
                goto fail;
            flush_s[n_flush] = mono_s() - t0;
            t_flush += flush_s[n_flush++];
        }
    }
    struct gs_store_stats ss = gs_store_stats(st);
    gs_store_close(st);
    if (stat(path, &sb) != 0)
        return 1;
    qsort(flush_s, n_flush, sizeof *flush_s, cmp_double);
    printf("%s: %.1f h, %u GPUs%s, %u flushes of %u snapshots\n", procs ? "gpus+procs" : "gpus",
           hours, N_GPUS, procs ? ", 64 processes every 10 s" : "", n_flush, FLUSH_EVERY);
    printf("  rows written   %llu (%.0f rows/s inside gs_store_flush)\n",
           (unsigned long long)ss.rows_written, (double)ss.rows_written / t_flush);
    printf("  flush          median %.3f ms, p99 %.3f ms, max %.3f ms\n",
           flush_s[n_flush / 2] * 1e3, flush_s[(size_t)(n_flush * 0.99)] * 1e3,
           flush_s[n_flush - 1] * 1e3);
    printf("  file           %lld bytes = %.2f MiB per GPU per day\n", (long long)sb.st_size,
           (double)sb.st_size / N_GPUS / (hours / 24.0) / 1048576.0);
    free(flush_s);
    gs_snapshot_free(s);
    return 0;
fail:
    fprintf(stderr, "bench_store: %s\n", e.msg);
    return 1;
}

int main(int argc, char **argv)
{
    double hours = argc > 2 ? atof(argv[2]) : 24.0;
    if (argc < 2 || !(hours > 0)) {
        fprintf(stderr, "usage: bench_store DIR [HOURS]\n");
        return 2;
    }
    return run(argv[1], hours, 0) || run(argv[1], hours, 1);
}
