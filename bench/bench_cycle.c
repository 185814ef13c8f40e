/*
 * bench_cycle: the CPU cost of one sampling cycle, excluding the time spent inside NVML.
 *
 * Opens the sampler on nvml-sim (built with self-profiling: NVML_SIM_PROFILE=1 makes every
 * entry point add the time it spent to a counter read through nvmlSimProfileGet), runs
 * warm-up cycles, then N measured cycles. For each cycle it takes the time spent in
 * gs_sampler_sample and subtracts the time the sim reports for the same cycle: what is left is
 * our own code (backend bookkeeping, unit conversion, procfs reads and parsing). Times are
 * CLOCK_MONOTONIC (a vDSO read; the per-thread CPU clock is a ~600 ns system call on VMs and
 * would swamp the figure). The run is single-threaded, so wall time is CPU time except when
 * the thread is preempted; medians discard those cycles.
 * The slow PCIe throughput call is excluded (it sleeps inside the driver, see docs/backend.md).
 *
 * usage: bench_cycle LIBRARY SCENARIO [CYCLES] [WANT]
 *   WANT: "basic" (GPU readings only) or "procs" (+ processes, per-process utilization,
 *   health, MIG, GPM) — the agent's default cycle.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"

typedef void (*profile_fn)(unsigned long long *ns, unsigned long long *calls);

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    struct gs_sampler_opts opts = {0};
    struct gs_sampler *s = NULL;
    struct gs_snapshot *snap = NULL;
    struct gs_err err = {0};
    unsigned cycles = argc > 3 ? (unsigned)atoi(argv[3]) : 2000;
    const char *mode = argc > 4 ? argv[4] : "procs";
    unsigned want = strcmp(mode, "basic") == 0
                        ? 0
                        : GS_WANT_PROCS | GS_WANT_PROC_HOST | GS_WANT_PROC_UTIL | GS_WANT_HEALTH |
                              GS_WANT_MIG | GS_WANT_GPM;
    unsigned long long nvml_ns0, nvml_ns1, calls0, calls1;
    long long *own, *total;
    profile_fn profile;
    void *lib;

    if (argc < 3 || cycles == 0) {
        fprintf(stderr, "usage: bench_cycle LIBRARY SCENARIO [CYCLES] [basic|procs]\n");
        return 2;
    }
    setenv("NVML_SIM_PROFILE", "1", 1);
    setenv("NVML_SIM_SCENARIO", argv[2], 1);
    opts.library = argv[1];
    if (gs_sampler_open(&s, &opts, &err) != GS_OK) {
        fprintf(stderr, "bench_cycle: %s\n", err.msg);
        return 1;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    profile = lib ? (profile_fn)(uintptr_t)dlsym(lib, "nvmlSimProfileGet") : NULL;
    if (!profile) {
        fprintf(stderr, "bench_cycle: %s is not nvml-sim with profiling\n", argv[1]);
        return 1;
    }
    if (gs_snapshot_new(&snap, gs_sampler_gpu_count(s), 128, &err) != GS_OK)
        return 1;
    own = calloc(cycles, sizeof *own);
    total = calloc(cycles, sizeof *total);
    if (!own || !total)
        return 1;
    for (unsigned i = 0; i < 20; i++) /* warm-up: caches, first GPM sample, procfs tables */
        gs_sampler_sample(s, snap, want, &err);
    for (unsigned i = 0; i < cycles; i++) {
        long long t0, t1;
        profile(&nvml_ns0, &calls0);
        t0 = mono_ns();
        if (gs_sampler_sample(s, snap, want, &err) != GS_OK) {
            fprintf(stderr, "bench_cycle: %s\n", err.msg);
            return 1;
        }
        t1 = mono_ns();
        profile(&nvml_ns1, &calls1);
        total[i] = t1 - t0;
        own[i] = total[i] - (long long)(nvml_ns1 - nvml_ns0);
    }
    qsort(own, cycles, sizeof *own, cmp_ll);
    qsort(total, cycles, sizeof *total, cmp_ll);
    printf("mode=%s gpus=%u procs=%u cycles=%u nvml_calls_per_cycle=%llu\n", mode, snap->n_gpus,
           snap->n_procs, cycles, (calls1 - calls0));
    printf("own_us_median=%.1f own_us_p90=%.1f total_us_median=%.1f total_us_p90=%.1f\n",
           own[cycles / 2] / 1000.0, own[cycles * 9 / 10] / 1000.0, total[cycles / 2] / 1000.0,
           total[cycles * 9 / 10] / 1000.0);
    free(own);
    free(total);
    gs_snapshot_free(snap);
    gs_sampler_close(s);
    return 0;
}
