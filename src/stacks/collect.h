/*
 * Folding sampled Python stacks (pyread.h) into a stack profile (profile.h), and the one-shot
 * text dump of every thread with its OS state (taskstate.h). Shared by `gpuscope stacks` and
 * by gpuscope run's sampler and hang watchdog.
 */
#ifndef GS_STACKS_COLLECT_H
#define GS_STACKS_COLLECT_H

#include <stdio.h>
#include <sys/types.h>

#include "stacks/profile.h"
#include "stacks/pyread.h"

struct gs_err;

struct gs_collect {
    struct gs_stackprof *prof;     /* not owned */
    const struct gs_pyread *r;     /* not owned */
    uint32_t map[GS_PY_MAX_FUNCS]; /* reader function id -> profile label + 1; 0 unmapped */
};

/* Binds c to a profile and a reader (clears the map). */
void gs_collect_init(struct gs_collect *c, struct gs_stackprof *prof, const struct gs_pyread *r);

/* Adds thread th's stack, root first, optionally under a root label (e.g. "thread 42"),
 * with weight w. Returns gs_stackprof_add's code. */
int gs_collect_add(struct gs_collect *c, const struct gs_pythread *th, const char *root, uint64_t w);

/* The profile label of reader function f (interned on first use); GS_PROF_NONE when full. */
uint32_t gs_collect_label(struct gs_collect *c, uint32_t f);

/* Writes every thread of sample s (read from process pid by r) as text: a header line with
 * the thread's OS id, name and state (running, waiting on a futex, in I/O), then one line per
 * frame, innermost first: "    func (file:line)". */
void gs_collect_dump(const struct gs_pyread *r, pid_t pid, const struct gs_pysample *s, FILE *out);

/* The same as JSON text: {"pid":..,"python":"3.11.2","threads":[{"tid":..,"name":..,
 * "state":..,"what":..,"frames":[{"function":..,"file":..,"line":..}]}]}. */
int gs_collect_dump_json(const struct gs_pyread *r, pid_t pid, const struct gs_pysample *s,
                         FILE *out, struct gs_err *err);

#endif
