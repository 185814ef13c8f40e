/*
 * agg.h - one run's aggregate: step records (from any number of ranks) plus device samples,
 * turned into metrics_report.json (docs/report.md) and the exit summary.
 *
 * Used in three places with the same code: in the training process (gs_run_open, no
 * receiver), in `gpuscope run` (records from the socket, snapshots from its sampler), and in
 * the agent (runs recorded into history). Not thread-safe: callers serialise (one mutex).
 */
#ifndef GS_RUN_AGG_H
#define GS_RUN_AGG_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include "gpuscope/gs_run.h"
#include "run/record.h"

struct gs_snapshot;
struct gs_util_sample;
struct gs_agg;

struct gs_agg *gs_agg_new(void);
void gs_agg_free(struct gs_agg *a);

/* Records. Steps are kept (phase times as float, ~40 bytes a step) so percentiles are exact. */
void gs_agg_hello(struct gs_agg *a, const struct gs_record_hello *h, pid_t peer_pid,
                  uid_t peer_uid);
int gs_agg_step(struct gs_agg *a, const struct gs_step_rec *s);
void gs_agg_end(struct gs_agg *a, const struct gs_record_end *e);

/* One device sample at realtime t (seconds). in_run[i] != 0 marks GPU index i as one the run
 * uses (NULL: every GPU in the snapshot). Accumulates per GPU: utilization avg/max, memory
 * peak, energy (counter delta, else power integrated), seconds throttled by reason, idle
 * periods (utilization < 5 % for >= 10 s while the run holds memory), lost. */
void gs_agg_snapshot(struct gs_agg *a, const struct gs_snapshot *snap, const unsigned char *in_run,
                     double t);

/* The run's own share of its GPUs (after the same cycle's gs_agg_snapshot): proc_in_run[i]
 * != 0 marks process i of snap as the run's (run/attrib.h gs_attrib_procs). Per GPU of the
 * run: the memory its processes hold (peak of the sum; per-process readings only), their SM
 * utilization (nvmlDeviceGetProcessUtilization) and how many other processes share it. */
void gs_agg_run_procs(struct gs_agg *a, const struct gs_snapshot *snap, const unsigned char *in_run,
                      const unsigned char *proc_in_run);

/* The driver's own utilization samples of GPU gpu_index (gs_gpu.index; gs_snapshot_util_samples),
 * oldest first, each the mean over the period that ends at its timestamp. Once a GPU has had
 * one, its utilization avg/max (weighted by each sample's period) and its idle periods come
 * from the samples alone and the snapshots' utilization is no longer counted for it, so
 * nothing is counted twice; memory, energy and throttling still come from snapshots. Call
 * after the same cycle's gs_agg_snapshot, whose process list says whether the run holds
 * memory. Samples not newer than the last one fed, and those of a GPU no snapshot has
 * brought into the run, are ignored. */
void gs_agg_util_samples(struct gs_agg *a, unsigned gpu_index, const struct gs_util_sample *s,
                         unsigned n);

/* Step records of this run its producer lost on the way, for the report's
 * run.records_dropped (docs/report.md): in-process, those the sender thread dropped (ring
 * full, receiver gone); in the agent, those it received but could not store. Until called the
 * figure is unknown (null). The last call wins. */
void gs_agg_set_records_dropped(struct gs_agg *a, uint64_t n);

/* Extra facts for the report's "run" object (any may be NULL / 0). */
struct gs_report_meta {
    const char *run_name;
    const char *command; /* shell-quoted argv of the child, gpuscope run only */
    const char *hostname;
    int exit_code;         /* -1 = unknown / still running */
    const char *source;    /* "in-process" | "gpuscope-run" | "agent" */
    int term_signal;       /* the signal that ended the command (exit_code 128 + N); 0: none */
    const json_t *profile; /* gpuscope run --profile: the report's "profile" section, or NULL */
    /* The job's wall clock (unix seconds: gpuscope run's CMD start and exit); 0 unknown, and
     * train_runtime is then the span of the steps (docs/report.md). */
    double job_start, job_end;
    /* A SIGTERM, SIGINT or SIGHUP that gpuscope run received and passed on to the command (a
     * stop from outside, whatever the command then exited with); 0: none. */
    int stop_signal;
    /* gpuscope run --stop-after-steps N stopped the command on purpose once N steps had come
     * (outcome "stopped", whatever the command then exited with); 0: it did not. */
    long stopped_after_steps;
};

/* The full report object (schema docs/report.md, "schema": gs_run_report_schema()), with
 * "findings" from src/diag. New reference; NULL only on allocation failure. */
json_t *gs_agg_report(const struct gs_agg *a, const struct gs_report_meta *meta);

/* Writes the report as name in the directory dirfd whole (src/base/dirfile.h: a fresh
 * temporary created O_EXCL|O_NOFOLLOW, fsync, renameat), 2-space indented. GS_OK, or GS_EIO
 * (GS_EINVAL: nothing to write) with err. gs_report_write: the same at a path. */
struct gs_err;
int gs_report_write_at(const json_t *report, int dirfd, const char *name, struct gs_err *err);
int gs_report_write(const json_t *report, const char *path, struct gs_err *err);

/* The exit summary of a report: an aligned table (phases mean/p50/p95, ratios, per-GPU
 * utilization and memory) and the findings with their advice; colour only when color != 0. */
void gs_report_print_summary(FILE *out, const json_t *report, int color);

#endif
