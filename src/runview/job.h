/*
 * job.h - one multi-node training job from the reports of its nodes (`gpuscope compare --job`,
 * docs/compare.md, JOB): each node's `gpuscope run` directory (or agent run) holds the ranks
 * that ran there; the job document puts them together: a row per node, a row per rank with
 * its busy time over the other ranks' median, the job's throughput summed over its nodes, and
 * the straggler (src/base/straggler.h's rule) with its evidence (the
 * throttle reasons, clocks and temperature of its GPU, its data and communication times
 * against the job's). A pure function of the reports.
 */
#ifndef GS_REPORT_JOB_H
#define GS_REPORT_JOB_H

#include <stddef.h>

#include <jansson.h>

#include "runview/rundata.h"

/* The job document of runs[0..n) (n >= 1): {"job", "jobs_seen", "nodes", "ranks",
 * "median_step_p50_ms", "median_busy_ms", "samples_per_second", "straggler"} (docs/compare.md,
 * JOB); NULL on allocation failure. */
json_t *gs_job_doc(const struct gs_rundata *runs, size_t n);

#endif
