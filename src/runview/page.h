/*
 * page.h - the self-contained HTML page of a run report or a comparison: the template of
 * web/report/ (uPlot, the page's script and style inlined, a hash-based CSP; embedded at build
 * time by scripts/embed-report.py) around one JSON data document (docs/report-html.md).
 */
#ifndef GS_REPORT_PAGE_H
#define GS_REPORT_PAGE_H

#include <stddef.h>

#include <jansson.h>

#include "gpuscope/gs_err.h"
#include "runview/rundata.h"

/* The data document of one run (kind "report") as JSON text (for --json-data and tests). */
int gs_report_page_data(const struct gs_rundata *rd, char **out, size_t *len, struct gs_err *err);

/* The HTML page of one run. *out is malloc'ed. */
int gs_report_page_html(const struct gs_rundata *rd, char **out, size_t *len, struct gs_err *err);

/* The HTML page of a comparison document (compare.h, kind "compare"). */
int gs_report_page_compare_html(const json_t *cmp, char **out, size_t *len, struct gs_err *err);

#endif
