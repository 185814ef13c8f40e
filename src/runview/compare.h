/*
 * compare.h - two or more run reports side by side (`gpuscope compare`, docs/compare.md):
 * every headline field and phase with each run's value and its change against the first run
 * (absolute and in %), the settings (facts) that differ, and the findings that appeared or
 * went away. A pure function of the reports: the text, --json and --html outputs all render
 * the one document gs_compare_doc builds.
 */
#ifndef GS_REPORT_COMPARE_H
#define GS_REPORT_COMPARE_H

#include <stddef.h>

#include <jansson.h>

#include "runview/compare_fields.h"
#include "runview/rundata.h"

/* One row of GS_COMPARE_FIELDS (compare_fields.h). Directions: whether a larger value is
 * better (1), worse (-1) or neither (0). */
struct gs_compare_field {
    const char *name;
    int larger_is_better;
    int always; /* listed even when every run has null */
};

extern const struct gs_compare_field gs_compare_fields[];
extern const size_t gs_compare_n_fields;

/* The comparison document of runs[0..n) (n >= 2): {"runs", "fields", "phases", "facts",
 * "findings"} as docs/compare.md describes; NULL on allocation failure. */
json_t *gs_compare_doc(const struct gs_rundata *runs, size_t n);

#endif
