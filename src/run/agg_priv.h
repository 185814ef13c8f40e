/*
 * agg_priv.h - the inside of struct gs_agg, shared by agg.c (which fills it) and report.c (which
 * turns it into metrics_report.json). Nothing else includes it; other modules see gs_agg only
 * through agg.h.
 */
#ifndef GS_RUN_AGG_PRIV_H
#define GS_RUN_AGG_PRIV_H

#include <stdint.h>
#include <sys/types.h>

#include "gpuscope/gs_model.h"
#include "run/agg.h"

/* Caps on what outside input can make us keep (STYLE.md: every growing buffer has a cap). */
#define GS_AGG_MAX_STEPS (4u << 20) /* step records kept over all ranks (~160 MiB) */
#define GS_AGG_MAX_RANKS 1024
#define GS_AGG_MAX_GPUS 64
#define GS_AGG_MAX_IDLE 64 /* idle periods listed per GPU (all are counted) */

/* A GPU is idle below this utilization (ratio) while the run holds memory on it; a period
 * counts once it lasts GS_AGG_IDLE_MIN_S. Without a process list, "holds memory" means more
 * than GS_AGG_HOLD_MEM_BYTES used on the GPU. */
#define GS_AGG_IDLE_UTIL 0.05
#define GS_AGG_IDLE_MIN_S 10.0
#define GS_AGG_HOLD_MEM_BYTES (256.0 * 1048576.0)
/* Longest gap between two samples that power and throttle time are integrated over; a longer
 * one (sampler stalled, laptop suspended) counts as this much. */
#define GS_AGG_MAX_GAP_S 10.0

/* Throttle reasons the report names: NVML bit, cumulative counter (or -1), and whether the
 * diagnosis counts it as thermal/power throttling. */
enum { GS_AGG_THR_N = 6 };
struct gs_agg_thr_reason {
    const char *key;
    uint64_t bit;
    int counter; /* enum gs_metric, -1 = none */
    int thermal_power;
};
extern const struct gs_agg_thr_reason gs_agg_thr_reasons[GS_AGG_THR_N];

/* One step as kept: 48 bytes. */
struct gs_agg_step {
    double t_begin, t_end;
    float ms[GS_PH_ALL]; /* NaN = not measured; GS_PH_OTHER derived when not sent */
    uint8_t profiled;    /* GS_STEP_PROFILED: out of the step statistics */
};

struct gs_agg_rank {
    int32_t rank, device;
    size_t n, cap;
    struct gs_agg_step *steps;
    uint64_t samples;                                  /* sum of known per-step samples */
    size_t n_samples;                                  /* steps whose samples were known */
    uint64_t tokens;                                   /* sum of known per-step tokens */
    size_t n_tokens;                                   /* steps whose tokens were known */
    uint64_t peak_allocated, peak_reserved, mem_total; /* bytes, 0 = unknown */
    unsigned cuda_events;                              /* steps timed by CUDA events */
    size_t n_profiled;                                 /* steps flagged GS_STEP_PROFILED */
};

struct gs_agg_idle {
    double from, to;
};

struct gs_agg_gpu {
    unsigned index;
    char uuid[GS_STR_LEN], name[GS_STR_LEN];
    uint64_t samples;
    int lost;
    double first_t, last_t;
    uint64_t util_n;
    double util_sum, util_max; /* ratios */
    int mem_known;
    double mem_peak_bytes, mem_total_bytes; /* device-wide: every process on the GPU */
    /* the run's own processes (gs_agg_run_procs): memory they hold (sum, peak), their SM
     * utilization (per-process, sum over them, averaged over the readings), and the most
     * processes of others seen on the GPU at once */
    int run_mem_known;
    double run_mem_peak_bytes;
    uint64_t run_sm_n;
    double run_sm_sum;
    unsigned others_max;
    int energy_first_ok;
    double energy_first_j, energy_last_j; /* counter readings */
    uint64_t power_n;                     /* power readings seen */
    double energy_int_j;                  /* power integrated (left rectangles) */
    int power_prev_ok;
    double power_prev_w, power_prev_t;
    /* throttling: counters first/last (seconds), mask integration */
    int thr_ctr_ok[GS_AGG_THR_N];
    double thr_ctr_first[GS_AGG_THR_N], thr_ctr_last[GS_AGG_THR_N];
    int mask_seen, mask_prev_ok;
    uint64_t mask_prev;
    double mask_prev_t;
    double thr_mask_s[GS_AGG_THR_N];
    double thr_any_s; /* time with any thermal/power reason active (the union) */
    /* evidence for a slow rank: temperature, SM clock, PCIe link (NAN / 0 = never read) */
    double temp_max_c;
    uint64_t clock_n;
    double clock_sum_hz, clock_min_hz, clock_max_hw_hz;
    double pcie_gen_min, pcie_gen_max, pcie_width_min, pcie_width_max;
    /* utilization from the driver's sample ring (gs_agg_util_samples): once us_n > 0 these
     * replace util_* in the report and idle periods follow the samples, not the snapshots */
    uint64_t us_n;
    uint64_t us_last_us;    /* newest sample fed, driver µs */
    double us_first_v;      /* the first sample, weighted when its period is known */
    double us_wsum, us_w_s; /* sum of value x seconds, sum of seconds */
    double us_max;
    double us_gap_s; /* sum of the (capped) gaps between samples */
    int holds_mem;   /* the last snapshot's answer, for idle samples */
    /* idle periods */
    int idle_open;
    double idle_from, idle_last;
    unsigned n_idle, n_idle_kept;
    struct gs_agg_idle idle[GS_AGG_MAX_IDLE];
};

struct gs_agg {
    /* hello */
    int have_hello;
    struct gs_record_hello hello;
    pid_t peer_pid;
    uid_t peer_uid;
    /* steps */
    unsigned n_ranks;
    struct gs_agg_rank *ranks; /* GS_AGG_MAX_RANKS slots, allocated on first step */
    size_t n_steps;
    uint64_t dropped;          /* steps refused: caps reached or allocation failure */
    int records_dropped_known; /* gs_agg_set_records_dropped was called */
    uint64_t records_dropped;  /* the producer's: records lost on their way (agg.h) */
    /* end */
    int have_end;
    struct gs_record_end end;
    /* outcome: the last end record's, plus the first exception any rank reported */
    int have_outcome, outcome_weak; /* weak: only "torch_imported": false so far */
    struct gs_record_facts outcome;
    char exception[GS_RECORD_FACT_STR];
    /* devices */
    unsigned n_gpus;
    struct gs_agg_gpu gpus[GS_AGG_MAX_GPUS];
    uint64_t n_snapshots;
    double snap_first_t, snap_last_t;
};

/* Per-GPU utilization as reported: from the samples when any were fed, else the snapshots.
 * Returns 0 when there is none; avg and max are ratios, period_s the mean spacing of what was
 * used (NAN with fewer than two), *fine 1 for samples, 0 for snapshots. */
int gs_agg_gpu_util(const struct gs_agg_gpu *g, double *avg, double *max, double *period_s,
                    int *fine);

/* Closed idle periods plus the open one when it is long enough (report time, no mutation). */
unsigned gs_agg_gpu_idle_count(const struct gs_agg_gpu *g);

#endif
