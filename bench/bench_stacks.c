/*
 * One Python stack read, timed: attaches to a running CPython (gs_pyread_find) and calls
 * gs_pyread_sample N times (all threads), after 200 warm-up reads that fill the code cache.
 * Prints the median, p95 and p99 per read in µs, the memory reads (process_vm_readv calls) per
 * sample and the frames read. Usage: bench_stacks PID [N] (bench/bench_stacks.py drives it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpuscope/gs_err.h"
#include "stacks/pyread.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    struct gs_pyread *r;
    struct gs_err err = {0};
    struct gs_pysample *s = malloc(sizeof *s);
    int n = argc > 2 ? atoi(argv[2]) : 5000;
    double *t;
    uint64_t reads0, frames = 0;

    if (argc < 2 || n <= 0 || !s) {
        fprintf(stderr, "usage: bench_stacks PID [N]\n");
        return 2;
    }
    t = malloc((size_t)n * sizeof *t);
    if (!t || gs_pyread_find((pid_t)atoi(argv[1]), &r, &err) != GS_OK) {
        fprintf(stderr, "bench_stacks: %s\n", err.msg);
        return 1;
    }
    for (int i = 0; i < 200; i++)
        gs_pyread_sample(r, 0, s, NULL);
    reads0 = gs_pyread_reads(r);
    for (int i = 0; i < n; i++) {
        double a = now_us();
        if (gs_pyread_sample(r, 0, s, &err) != GS_OK) {
            fprintf(stderr, "bench_stacks: %s\n", err.msg);
            return 1;
        }
        t[i] = now_us() - a;
        for (unsigned k = 0; k < s->nthreads; k++)
            frames += s->threads[k].nframes;
    }
    qsort(t, (size_t)n, sizeof *t, cmp);
    printf("reads=%d threads=%u frames_per_sample=%.1f syscalls_per_sample=%.1f "
           "median_us=%.1f p95_us=%.1f p99_us=%.1f\n",
           n, s->nthreads, (double)frames / n, (double)(gs_pyread_reads(r) - reads0) / n, t[n / 2],
           t[(int)(n * 0.95)], t[(int)(n * 0.99)]);
    gs_pyread_close(r);
    free(t);
    free(s);
    return 0;
}
