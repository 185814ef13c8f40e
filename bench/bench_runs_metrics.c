/*
 * bench_runs_metrics: the cost of the per-rank series of live runs (src/agent/runs_metrics.c)
 * at the bound: GS_RUNM_MAX_RANKS rank connections with full windows of GS_RUNM_WINDOW steps.
 * Reports ns per step record (the receiver thread's share, under the series' lock) and the
 * time and size of one render (the sampling thread's share, once per cycle), medians of N.
 *
 * usage: bench_runs_metrics [RENDERS]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/metrics.h"
#include "agent/runs_metrics.h"
#include "run/record.h"

static long long mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int renders = argc > 1 ? atoi(argv[1]) : 50;
    struct gs_runm *m = gs_runm_new("bench-node");
    struct gs_step_rec s;
    long long t0, *rt;
    size_t bytes = 0;
    unsigned n = 0;

    if (!m || renders < 1 || !(rt = calloc((size_t)renders, sizeof *rt)))
        return 1;
    memset(&s, 0, sizeof s);
    s.version = GS_STEP_REC_VERSION;
    for (int p = 0; p < GS_PH_ALL; p++)
        gs_step_ms_set(&s, p, 10.0 + p);
    t0 = mono_ns();
    for (unsigned k = 0; k < GS_RUNM_WINDOW; k++)
        for (unsigned c = 0; c < GS_RUNM_MAX_RANKS; c++) {
            s.step = k;
            s.rank = (int32_t)c;
            s.t_begin = 1e9 + k;
            s.t_end = s.t_begin + 0.1 + 1e-4 * c;
            gs_runm_step(m, 1 + c / 8, c, "bench-job", &s);
            n++;
        }
    double per_step = (double)(mono_ns() - t0) / n;
    for (int i = 0; i < renders; i++) {
        struct gs_buf b = {0};
        t0 = mono_ns();
        gs_runm_render(m, &b);
        rt[i] = mono_ns() - t0;
        bytes = b.len;
        gs_buf_free(&b);
    }
    qsort(rt, (size_t)renders, sizeof *rt, cmp_ll);
    printf("ranks %u, window %u: %.0f ns per step record; render median %.2f ms (min %.2f), "
           "%zu bytes\n",
           GS_RUNM_MAX_RANKS, GS_RUNM_WINDOW, per_step, rt[renders / 2] / 1e6, rt[0] / 1e6, bytes);
    free(rt);
    gs_runm_free(m);
    return 0;
}
