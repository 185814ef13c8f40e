/*
 * diag.h - the diagnosis: rules over a run report that say what to change.
 *
 * A pure function of the report object (docs/report.md), so a report written months ago, a
 * run kept by the agent and a live run are diagnosed by the same code. Each finding:
 *   {"id": "data_loading", "severity": "warning" | "info" | "critical",
 *    "title": "Data loading is 18% of each step",
 *    "evidence": {numbers the rule used, "gpus": [...], "from": t, "to": t},
 *    "advice": ["Raise dataloader_num_workers to about 8 (half of 16 cores)", ...]}
 * Rules (thresholds from the brief): data_loading (> 0.15), communication (> 0.05),
 * low_utilization (< 30 % sustained), memory_fragmentation (memory nearly full, low
 * utilization), imbalance (GPUs of one job), throttling (during the run),
 * attention_implementation (eager/sdpa attention with low utilization or full memory),
 * precision (float32 on a bf16-capable GPU), healthy (85 +- 5 %, data < 0.05, comm < 0.03).
 * Advice names the run's settings from the report's "facts" when present; "facts.cpu_count"
 * replaces ncpu. docs/report.md lists each rule with its exact condition.
 */
#ifndef GS_DIAG_H
#define GS_DIAG_H

#include <stdarg.h>

#include <jansson.h>

/* The one finding builder of the rules (diag.c, diag_stacks.c, diag_profile.c): a new
 * {"id", "severity", "title": the printf of fmt, "evidence": {}, "advice": []}; NULL on
 * allocation failure (and the other calls accept NULL). */
json_t *gs_diag_finding(const char *id, const char *severity, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
json_t *gs_diag_vfinding(const char *id, const char *severity, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Sets evidence[key] = v, taking v. */
void gs_diag_evidence(json_t *f, const char *key, json_t *v);
/* Appends the printf of fmt to the finding's advice. */
void gs_diag_advise(json_t *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Returns a new JSON array of findings (possibly empty) for report; never NULL except on
 * allocation failure. ncpu: CPU cores of the machine for advice (0 = unknown). */
json_t *gs_diag_findings(const json_t *report, long ncpu);

/* Appends to findings the rules over report's "stacks" section (diag_stacks.c:
 * stacks_data_loading, host_sync, checkpoint_saving, logging); nothing without one. */
void gs_diag_stacks_findings(const json_t *report, json_t *findings);
/* Inserts first in findings the report's "hangs" (diag_hang.c: hang); when the last hang
 * lasted until the job was stopped or failed, sets outcome.status "hung" (and outcome.hang)
 * and removes run_failed. Nothing without "hangs". */
void gs_diag_hang_findings(json_t *report, json_t *findings);
/* Appends to out the findings of the report's "profile" section (diag_profile.c: profile_htod,
 * profile_host_wait, profile_launch_bound, profile_attention, profile_exposed_communication);
 * nothing when the report has none. gs_diag_findings calls it. */
void gs_diag_profile_findings(const json_t *report, json_t *out);

#endif
