/*
 * rundata.h - one training run gathered for `gpuscope report` and `gpuscope compare`: its
 * metrics_report.json, its step records, the device samples of its GPUs and its logged
 * values (loss, learning rate), from a run directory of `gpuscope run` (metrics_report.json,
 * steps.jsonl, samples.db) or from the local agent (a run id: /api/v1/runs/ID, its steps and
 * /api/v1/history). docs/report-html.md describes the data document page.c embeds.
 *
 * Series are columnar (one array per field, null where a value is absent), times relative to
 * t_base (the run's start) so that the page stays small, and cut to a bounded number of
 * points by bucket means when a run is long (GS_RUNDATA_MAX_* below; "n" says how many there
 * were, "kept" how many are listed).
 */
#ifndef GS_REPORT_RUNDATA_H
#define GS_REPORT_RUNDATA_H

#include <stddef.h>

#include <jansson.h>

#include "gpuscope/gs_err.h"

/* Points per chart: steps of all ranks, device samples over all GPUs, log records. */
#define GS_RUNDATA_MAX_STEPS 1200
#define GS_RUNDATA_MAX_SAMPLES 2400 /* over all GPUs; at least 300 per GPU */
#define GS_RUNDATA_MAX_LOGS 1000
#define GS_RUNDATA_MAX_FLAME (48u * 1024u) /* stacks.svg embedded up to this size, else linked */

enum { GS_RUNDATA_REPORT_ONLY = 1 }; /* flags: skip steps, samples and logs (compare) */

struct gs_rundata {
    char *origin;      /* the run directory, or "agent run ID (socket)" */
    char *label;       /* run name, else the directory's name, else "run ID" */
    char *report_text; /* metrics_report.json as read (embedded unchanged) */
    json_t *report;    /* the same, parsed */
    double t_base;     /* series times are relative to this (unix s) */
    json_t *steps;     /* columnar step records, or NULL */
    json_t *gpus;      /* array of per-GPU series (may be empty) */
    char *gpus_note;   /* why there are no GPU series, or NULL */
    json_t *logs;      /* logged values, or NULL */
    char *flamegraph;  /* data: URL of DIR/stacks.svg, or "stacks.svg" (too big: linked), or NULL */
};

/* Loads what (a directory, a metrics_report.json file inside one, or a run id of the local
 * agent when what is all digits and no such file exists). Errors name the file and line
 * ("DIR/steps.jsonl:12: not JSON: ...") or the agent's answer. */
int gs_rundata_load(const char *what, unsigned flags, struct gs_rundata *out, struct gs_err *err);

/* Loads steps.jsonl / samples.db given as paths (either may be NULL) into rd, whose report
 * must be set; what gs_rundata_load does for a directory. Exposed for the unit tests. */
int gs_rundata_load_files(struct gs_rundata *rd, const char *steps_path, const char *db_path,
                          struct gs_err *err);

void gs_rundata_free(struct gs_rundata *rd);

#endif
