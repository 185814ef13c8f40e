/*
 * runs_metrics.h - the per-rank step series of live training runs on /metrics
 * (gpuscope_run_*, docs/metrics.md, TRAINING RUNS): one slot per rank connection of a live
 * run, fed from the step-record socket's thread (runs.c) and rendered by the sampling thread
 * into each cycle's /metrics text (pub.c). A slot goes when its connection ends or its run
 * finishes, so its series go stale in Prometheus instead of staying at their last value.
 *
 * Bounded: at most GS_RUNM_MAX_RANKS slots over all live runs (each one renders
 * GS_RUNM_SERIES_PER_RANK series); a rank that finds no free slot has no series and is counted
 * in gpuscope_run_ranks_dropped_total. Step-time quantiles are over the rank's last
 * GS_RUNM_WINDOW steps; the summary's _sum and _count over all its steps.
 *
 * Thread-safe: one mutex, held for O(1) per record and for one render.
 */
#ifndef GS_AGENT_RUNS_METRICS_H
#define GS_AGENT_RUNS_METRICS_H

#include <stdint.h>
#include <sys/types.h>

struct gs_buf;
struct gs_record_hello;
struct gs_step_rec;

#define GS_RUNM_MAX_RANKS 256
#define GS_RUNM_WINDOW 128
#define GS_RUNM_SERIES_PER_RANK                                                                    \
    28 /* info, 2 summaries (4 quantiles, sum, count), 7 phases, 7 gauges, samples */

struct gs_runm;

/* hostname: the node label of ranks whose hello names no node. NULL when out of memory. */
struct gs_runm *gs_runm_new(const char *hostname);
void gs_runm_free(struct gs_runm *m);

/* A rank connection's hello (its job, node, rank and world size): makes its slot. run_name
 * is the job label when the hello has no job. pid: the sender's process (the connection's
 * SO_PEERCRED; 0 unknown): from the hello on, the hang rule's activity before its first
 * GS_HANG_MIN_STEPS steps is that process tree's CPU time (gs_runm_stalled). */
void gs_runm_hello(struct gs_runm *m, int64_t run_id, uint64_t conn_id, const char *run_name,
                   const struct gs_record_hello *h, pid_t pid);
/* One step of that connection (a slot is made when no hello came). */
void gs_runm_step(struct gs_runm *m, int64_t run_id, uint64_t conn_id, const char *run_name,
                  const struct gs_step_rec *s);
/* The NVML index of the connection's GPU (the gpu label) and its NVML name (the peak of
 * gpuscope_run_mfu: src/base/mfu.c; NULL unknown), from the sampling thread. */
void gs_runm_gpu(struct gs_runm *m, int64_t run_id, uint64_t conn_id, int gpu_index,
                 const char *gpu_name);
/* The connection ended (conn_id), or the whole run (conn_id 0): their series go. */
void gs_runm_drop(struct gs_runm *m, int64_t run_id, uint64_t conn_id);
/* A rank is stalled by the hang rule of src/run/hang.h, the one of `gpuscope run`'s watchdog:
 * after GS_HANG_MIN_STEPS steps, the agent has received none for max(min_s, factor x the p95
 * of its last step-to-step intervals, from the records' end times; of their wall times when
 * those are missing) up to now (unix seconds, the agent's clock at receipt); before
 * GS_HANG_MIN_STEPS steps (the first step hanging), the watchdog's floor rule: a rank whose
 * hello gave a process whose CPU time can be read is stalled once, for min_s since its hello,
 * its last step and its process tree's last activity (GS_HANG_ACTIVE_CPU of a core between
 * two calls, read here from /proc outside the lock), it sent no step; a rank without a
 * readable process is judged only after GS_HANG_MIN_STEPS steps. Sets
 * stalled[gpu] = 1 for the NVML index gpu (< n) of every stalled rank whose GPU is known,
 * leaves the others as they are; returns how many ranks are stalled (those on unknown GPUs
 * included); *no_gpu (may be NULL): how many of them have no known GPU (a CPU job: the
 * node-level training_hang). Each rank keeps the verdict for gs_runm_run_stalled. */
unsigned gs_runm_stalled(struct gs_runm *m, double now, double factor, double min_s,
                         unsigned char *stalled, unsigned n, unsigned *no_gpu);
/* As of the last gs_runm_stalled: how long the longest-stalled rank of run run_id has sent
 * no step (seconds), 0 when none of its ranks is stalled. *p95 (may be NULL): that rank's p95
 * step-to-step interval. */
double gs_runm_run_stalled(struct gs_runm *m, int64_t run_id, double *p95);
/* Appends the gpuscope_run_* families. */
void gs_runm_render(struct gs_runm *m, struct gs_buf *b);

#endif
