/*
 * usamp.h - the driver's own utilization samples (nvmlDeviceGetSamples, ~6 a second) for run
 * aggregates. The three producers of run reports (`gpuscope run`, the in-process sampler
 * thread of src/run/client.c, the agent's runs) sample snapshots every 0.5-1 s with
 * GS_WANT_UTIL_SAMPLES, so each snapshot carries what the driver sampled since the previous
 * one (gs_snapshot_util_samples, read by the sampler: gs_sampler.h); gs_usamp_feed folds those
 * of a run's GPUs into its aggregate (gs_agg_util_samples), so a run's utilization max/avg
 * catch sub-second peaks and gaps. Nothing here calls the driver.
 *
 * A cycle is: gs_agg_snapshot of the cycle's snapshot, then gs_usamp_feed of the same
 * snapshot, both under the caller's lock of the aggregate. A GPU whose driver keeps no
 * samples (old driver, MIG) or that is lost has none; its reports keep "utilization_source"
 * "snapshots".
 */
#ifndef GS_RUN_USAMP_H
#define GS_RUN_USAMP_H

struct gs_agg;
struct gs_snapshot;

/* Feeds agg the driver's samples snap carries for the GPUs i with in_run[i] != 0 (NULL: all).
 * Call after the same cycle's gs_agg_snapshot; not thread-safe for agg (hold its lock).
 * Returns how many GPUs had samples. */
unsigned gs_usamp_feed(struct gs_agg *agg, const struct gs_snapshot *snap,
                       const unsigned char *in_run);

#endif
