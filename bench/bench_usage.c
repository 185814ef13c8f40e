/*
 * bench_usage: the cost of the GPU usage accounting (src/agent/usage.c) per sampling cycle and
 * per holder: a hand-made snapshot of G GPUs with H holders each (two processes per holder,
 * per-process SM utilization, memory, a Slurm job), accounted for C cycles 1 s apart (the
 * minute turns every 60 cycles: its rows are handed to a no-op sink), then one render of the
 * /metrics series. Prints the median over R rounds of ns per cycle and per holder-cycle, and
 * the render's time and size. No procfs reads (the snapshot's processes carry their details;
 * the SLURM_JOB_ID lookup of a real process is once per process life, not per cycle).
 *
 * usage: bench_usage [GPUS [HOLDERS_PER_GPU [CYCLES [ROUNDS]]]]   (default 8 4 2000 7)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/usage.h"
#include "gpuscope/gs_err.h"

static long long mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void sink(void *ctx, const struct gs_usage_row *rows, unsigned n)
{
    (void)rows;
    *(unsigned *)ctx += n;
}

int main(int argc, char **argv)
{
    unsigned gpus = argc > 1 ? (unsigned)atoi(argv[1]) : 8;
    unsigned holders = argc > 2 ? (unsigned)atoi(argv[2]) : 4;
    unsigned cycles = argc > 3 ? (unsigned)atoi(argv[3]) : 2000;
    unsigned rounds = argc > 4 ? (unsigned)atoi(argv[4]) : 7;
    double *per_cycle = calloc(rounds ? rounds : 1, sizeof *per_cycle);
    double *render = calloc(rounds ? rounds : 1, sizeof *render);
    struct gs_snapshot *s = NULL;
    struct gs_err err;
    size_t bytes = 0;
    unsigned emitted = 0;

    if (!gpus || !holders || !cycles || !rounds || !per_cycle || !render ||
        gs_snapshot_new(&s, gpus, gpus * holders * 2, &err) != GS_OK)
        return 2;
    for (unsigned g = 0; g < gpus; g++) {
        s->gpus[g].index = g;
        snprintf(s->gpus[g].text[GS_T_UUID], GS_STR_LEN, "GPU-bench-%u", g);
        gs_gpu_set(&s->gpus[g], GS_M_UTIL_GPU, 0.7);
        for (unsigned h = 0; h < holders; h++)
            for (unsigned k = 0; k < 2; k++) {
                struct gs_proc *p = &s->procs[s->n_procs++];
                memset(p, 0, sizeof *p);
                p->pid = 10000 + s->n_procs;
                p->gpu = g;
                p->gi_id = p->ci_id = 0xFFFFFFFFu;
                p->host_st = p->util_st = p->mem_st = GS_ST_OK;
                p->uid = 1000 + h;
                snprintf(p->user, sizeof p->user, "user%u", h);
                snprintf(p->slurm_job, sizeof p->slurm_job, "%u", 5000 + h);
                p->sm_util = 0.1 * (h + 1);
                p->gpu_mem_bytes = (uint64_t)(h + 1) << 30;
            }
    }
    for (unsigned r = 0; r < rounds; r++) {
        struct gs_usage_opts o = {.emit = sink, .emit_ctx = &emitted};
        struct gs_usage *u = NULL;
        struct gs_buf b = {0};
        long long t0;

        if (gs_usage_new(&u, &o) != GS_OK)
            return 2;
        t0 = mono_ns();
        for (unsigned c = 0; c < cycles; c++) {
            s->t_real = 1800000000.0 + c;
            s->t_mono_ns = (int64_t)c * 1000000000LL + 1;
            for (unsigned g = 0; g < gpus; g++)
                gs_gpu_set(&s->gpus[g], GS_M_ENERGY, 1000.0 * c);
            gs_usage_cycle(u, s);
        }
        per_cycle[r] = (double)(mono_ns() - t0) / cycles;
        t0 = mono_ns();
        gs_usage_render_prom(u, &b, -1, GS_USAGE_PROM_COUNTERS | GS_USAGE_PROM_JOBS);
        render[r] = (double)(mono_ns() - t0);
        bytes = b.len;
        gs_buf_free(&b);
        gs_usage_free(u);
    }
    qsort(per_cycle, rounds, sizeof *per_cycle, cmp_d);
    qsort(render, rounds, sizeof *render, cmp_d);
    printf("gpus %u, holders per gpu %u (2 processes each), %u cycles, %u rounds\n", gpus, holders,
           cycles, rounds);
    printf("cycle: median %.0f ns (min %.0f, max %.0f)\n", per_cycle[rounds / 2], per_cycle[0],
           per_cycle[rounds - 1]);
    printf("per holder per cycle: median %.0f ns (min %.0f, max %.0f)\n",
           per_cycle[rounds / 2] / (gpus * holders), per_cycle[0] / (gpus * holders),
           per_cycle[rounds - 1] / (gpus * holders));
    printf("render of the usage series: median %.0f ns, %zu bytes\n", render[rounds / 2], bytes);
    printf("rows handed to the sink: %u\n", emitted);
    gs_snapshot_free(s);
    free(per_cycle);
    free(render);
    return 0;
}
