/*
 * window.h - the profiler window of `gpuscope run --profile STEPS` (window.c): checks the
 * window spec ("A:B", "every:P:N", as python/gpuscope/_profile.py reads it) and turns the
 * traces of the run's last window into the report's "profile" section.
 */
#ifndef GS_TRACE_WINDOW_H
#define GS_TRACE_WINDOW_H

#include <jansson.h>
#include <stdio.h>

/* 0 when spec is a window the package accepts, -1 otherwise. */
int gs_trace_window_check(const char *spec);

/* The "profile" section for run_dir (its profile/ folder): the spec (NULL: no --profile,
 * windows only on request, `gpuscope trace capture`), the files of the last window and their
 * analysis (src/trace: "ranks", "job"), or a note when there is none. NULL when out of memory,
 * or when spec is NULL and there is no trace. Unreadable traces are reported on msg. */
json_t *gs_trace_window_analyze(const char *run_dir, const char *spec, FILE *msg);

#endif
