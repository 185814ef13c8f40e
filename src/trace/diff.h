/*
 * diff.h - two sets of traces compared (`gpuscope trace diff A B`, docs/trace.md): the job's
 * temporal figures and kernel time by type side by side, and the kernels whose time changed
 * most. A pure function of the traces, so that the CLI only loads, calls and prints.
 */
#ifndef GS_TRACE_DIFF_H
#define GS_TRACE_DIFF_H

#include <stddef.h>

#include <jansson.h>

#include "trace/trace.h"

/* The comparison of a[0..na) (A) and b[0..nb) (B), analysed with the default options:
 *   {"a", "b": {"files", "temporal": idle/compute/non-compute/span us added over ranks,
 *               "kernel_types"},
 *    "temporal": [row: idle, compute, non-compute, kernel span],
 *    "kernel_types": [row: COMPUTATION, COMMUNICATION, MEMORY],
 *    "kernels": [row + "type", "a_count", "b_count", "status": changed|vanished|appeared],
 *               at most top, largest |delta_us| first,
 *    "kernels_compared": kernels of A + kernels of B}
 * where a row is {"what", "a_us", "b_us", "delta_us", "delta_pct" (null when a_us is 0)}.
 * The traces' records are rounded and sorted in place (gs_trace_analyze). NULL when out of
 * memory. */
json_t *gs_trace_diff(struct gs_trace *const *a, size_t na, struct gs_trace *const *b, size_t nb,
                      int top);

#endif
