/*
 * jobstats.h - the end-of-job summary's arithmetic and its notes (`gpuscope jobstats`,
 * docs/jobstats.md): pure functions of JSON the agents answered, so a summary built from one
 * node, from several, or read back from --json is judged by the same code.
 *
 * The summary (what `gpuscope jobstats --json` prints, docs/jobstats.md has every field):
 *   {"job": "4242", "from": t, "to": t, "duration_s": s,
 *    "nodes": [{"node": "node-a", "source": "...",
 *               "gpus": [{"gpu": 3, "uuid": "GPU-...", "mig": false, "name": "...",
 *                         "first_seen": t, "last_seen": t, "held_s": s, "busy_share": r,
 *                         "idle_held_s": s, "energy_kwh": e,
 *                         "memory": {"peak_bytes": b, "mean_bytes": b, "total_bytes": b},
 *                         "utilization": {"mean", "p25", "p50", "p75", "points",
 *                                         "first_busy": t | null} | null}]}],
 *    "notes": [findings]}
 * Numbers absent from the agent are null, and a rule whose inputs are null stays silent.
 *
 * The notes are findings built by diag.h's gs_diag_finding ({"id", "severity", "title",
 * "evidence", "advice"}); `title: advice` is the sentence printed. Rules, each a constant below:
 *   idle_gpus      some GPUs idle-held >= 50 % of the time they were held (others busy):
 *                  "GPU 3 was idle 94 % of the job: ask for fewer GPUs"
 *   all_idle       every GPU idle-held >= 50 %: the job did not use its GPUs
 *   late_start     the first GPU work came >= 5 min and >= 10 % of the job after the job first
 *                  held a GPU: "the job held 8 GPUs for 41 minutes before its first CUDA work"
 *   small_memory   the largest peak memory of the job's GPUs under 1/8 of the GPU's (the
 *                  smallest MIG slice of an A100/H100): "a MIG slice or a smaller GPU would do";
 *                  not when that GPU is a MIG instance ("mig": true, its memory the slice's)
 *   memory_full    a GPU's peak memory >= 95 % of its capacity
 *   low_utilization the mean utilization of the GPUs not idle under 50 %
 *   imbalance      the busiest and least busy of the GPUs not idle differ by > 30 points
 * GPUs held less than GS_JOBSTATS_MIN_HELD_SHARE of the longest-held GPU's time (a context
 * opened on a GPU by mistake) take part in none; a GPU whose held time is unknown neither.
 */
#ifndef GS_DIAG_JOBSTATS_H
#define GS_DIAG_JOBSTATS_H

#include <stddef.h>

#include <jansson.h>

#define GS_JOBSTATS_BUSY_MIN 0.05         /* a utilization at least this is GPU work */
#define GS_JOBSTATS_IDLE_SHARE 0.50       /* idle_gpus / all_idle: idle-held share at least */
#define GS_JOBSTATS_LATE_START_S 300.0    /* late_start: first work at least this late ... */
#define GS_JOBSTATS_LATE_START_SHARE 0.10 /* ... and this share of the job */
#define GS_JOBSTATS_SMALL_MEMORY 0.125    /* small_memory: largest peak under this share */
#define GS_JOBSTATS_FULL_MEMORY 0.95      /* memory_full: peak at least this share */
#define GS_JOBSTATS_LOW_UTIL 0.50         /* low_utilization: mean under */
#define GS_JOBSTATS_IMBALANCE 0.30        /* imbalance: max - min mean utilization above */
#define GS_JOBSTATS_MIN_HELD_SHARE 0.10   /* GPUs held less of the longest: not judged */

/* The q-quantile (0..1) of n values sorted ascending, linear between the closest ranks
 * (p50 of {1, 2, 3, 4} is 2.5). NAN when n is 0. */
double gs_jobstats_quantile(const double *sorted, size_t n, double q);

/* One GPU's utilization over the job from /api/v1/history's points ([t, min, avg, max], a
 * bucket's average in avg): a new {"mean", "p25", "p50", "p75", "points", "first_busy"}
 * over the buckets' averages (first_busy: the first bucket's t with avg >= GS_JOBSTATS_BUSY_MIN,
 * null when none); averages that are not a ratio 0..1 are skipped; NULL when points holds no
 * such number (no history of that range). */
json_t *gs_jobstats_util(const json_t *points);

/* The notes on a summary (the shape above): a new array of findings, possibly empty; NULL only
 * when out of memory. */
json_t *gs_jobstats_notes(const json_t *summary);

#endif
