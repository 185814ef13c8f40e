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

#include <jansson.h>

/* Returns a new JSON array of findings (possibly empty) for report; never NULL except on
 * allocation failure. ncpu: CPU cores of the machine for advice (0 = unknown). */
json_t *gs_diag_findings(const json_t *report, long ncpu);

/* Appends to findings the rules over report's "stacks" section (diag_stacks.c:
 * stacks_data_loading, host_sync, checkpoint_saving, logging); nothing without one. */
void gs_diag_stacks_findings(const json_t *report, json_t *findings);

#endif
