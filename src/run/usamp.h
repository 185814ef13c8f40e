/*
 * usamp.h - the driver's own utilization samples (gs_sampler_util_samples, nvmlDeviceGetSamples,
 * ~6 a second) for run aggregates. The three producers of run reports (`gpuscope run`, the
 * in-process sampler thread of src/run/client.c, the agent's runs) sample snapshots every
 * 0.5-1 s; between two snapshots each reads here what the driver sampled on the GPUs of its
 * runs and feeds it to the aggregates (gs_agg_util_samples), so a run's utilization
 * max/avg catch sub-second peaks and gaps.
 *
 * A cycle is: gs_agg_snapshot of the cycle's snapshot, then gs_usamp_read (NVML calls, no
 * lock needed), then gs_usamp_feed for each aggregate under the caller's lock. A GPU read in
 * the previous cycle continues from its newest sample, without gaps or repeats; one that was
 * not (it just joined a run) starts at since_us, normally the previous cycle's time. A GPU
 * whose driver keeps no samples (GS_ENOTSUP: old driver, MIG) or that is lost is not asked
 * again; its reports keep "utilization_source" "snapshots".
 *
 * Threads: a gs_usamp belongs to the thread that uses its sampler (gs_sampler.h).
 */
#ifndef GS_RUN_USAMP_H
#define GS_RUN_USAMP_H

#include <stdint.h>

struct gs_agg;
struct gs_sampler;
struct gs_snapshot;
struct gs_usamp;

/* Per-GPU read state for n_gpus GPUs (gs_sampler_gpu_count). NULL when out of memory. */
struct gs_usamp *gs_usamp_new(unsigned n_gpus);

/* NULL is allowed. */
void gs_usamp_free(struct gs_usamp *u);

/* Reads the new samples of every GPU i of snap with want[i] != 0 (not lost) and keeps them
 * until the next read; the other GPUs keep none. Returns how many GPUs have samples now. */
unsigned gs_usamp_read(struct gs_usamp *u, struct gs_sampler *s, const struct gs_snapshot *snap,
                       const unsigned char *want, uint64_t since_us);

/* Feeds agg the samples the last read kept for the GPUs i with in_run[i] != 0 (NULL: all).
 * Call after the same cycle's gs_agg_snapshot; not thread-safe for agg (hold its lock). */
void gs_usamp_feed(const struct gs_usamp *u, struct gs_agg *agg, const struct gs_snapshot *snap,
                   const unsigned char *in_run);

#endif
