/*
 * Stacks of a training run (gpuscope run --stacks): a sampler thread reads the main thread of
 * every rank (the processes whose hello records reached gpuscope run; CMD itself until one
 * does) at a low rate, keeps each sample's time, rank and stack, and at the end joins them
 * with the run's step phases and the times its GPUs were idle into the report's "stacks"
 * section, writes stacks.svg and stacks.txt (collapsed) into the run directory, and adds
 * stack-based findings. The same thread is the hang watchdog: the run is stalled by the hang
 * rule of src/run/hang.h (no step from any rank for hang_factor times the p95 step-to-step
 * interval, at least hang_min_s; before 5 steps no step and no CPU used by CMD's process tree
 * for hang_min_s; the agent's training_hang asks the same rule per rank) while
 * the GPUs are idle, spinning (utilization near 100 % at low power) or unknown (on a GPU
 * shared with other processes: the run's own processes' SM utilization), and it dumps
 * every rank's threads into DIR/hang-N-stacks.txt and says on stderr which rank waits where.
 *
 * gpuscope run is the ranks' ancestor, so Yama's ptrace_scope=1 lets it read them without
 * privilege. Threads: the callbacks (add_rank, step, gpu) may come from any thread; one
 * mutex inside guards the state.
 */
#ifndef GS_RUN_RUNSTACKS_H
#define GS_RUN_RUNSTACKS_H

#include <jansson.h>
#include <sys/types.h>

#include "gpuscope/gs_run.h"

struct gs_err;
struct gs_runstacks;

struct gs_runstacks_cfg {
    pid_t child;        /* CMD, sampled until a rank says hello */
    double hz;          /* samples per second per rank */
    double hang_factor; /* no step for this many p95 step times: a hang; 0 = no watchdog */
    double hang_min_s;  /* ... and at least this long */
    const char *dir;    /* the run directory's path, for messages */
    int dirfd;          /* ... open and checked (base/dirfile.h): every file is made through it;
                           the caller keeps it open until gs_runstacks_free */
};

int gs_runstacks_start(const struct gs_runstacks_cfg *cfg, struct gs_runstacks **out,
                       struct gs_err *err);
/* CMD's pid once it is started (sampled until a rank says hello). */
void gs_runstacks_set_child(struct gs_runstacks *rs, pid_t pid);
/* A rank's process (from its hello record). */
void gs_runstacks_add_rank(struct gs_runstacks *rs, pid_t pid, int rank);
/* A step record: the phase timeline and the watchdog's clock. */
void gs_runstacks_step(struct gs_runstacks *rs, const struct gs_step_rec *s);
/* The run's end record arrived: the watchdog stands down (what follows is teardown). */
void gs_runstacks_end(struct gs_runstacks *rs);
/* One GPU reading of a run GPU at realtime t: utilization ratio, power and its limit in watts
 * (negative: unknown). shared: the GPU also runs other processes than the run's, and util is
 * the run's processes' own SM utilization (NVML's per-process samples): the watchdog and the
 * idle-time join then judge the run's activity, not the device's (power is not looked at). */
void gs_runstacks_gpu(struct gs_runstacks *rs, double t, unsigned gpu, double util, double power_w,
                      double power_limit_w, int shared);
/* CMD exited at t (unix seconds): a hang still going on then lasted until t. */
void gs_runstacks_job_exit(struct gs_runstacks *rs, double t);
/* Stops and joins the sampler thread; safe to call twice. */
void gs_runstacks_stop(struct gs_runstacks *rs);
/* Adds "stacks" to report (and stack-based findings to its "findings"), and "hangs" when the
 * watchdog fired (each hang: when it started, was found and ended, every rank's main thread
 * then with its file:line and whether it was in a collective, the ranks outside one; the
 * dumps' names); writes stacks.svg and stacks.txt into the run directory. Call after stop. */
void gs_runstacks_report(struct gs_runstacks *rs, json_t *report);
void gs_runstacks_free(struct gs_runstacks *rs);

/* Parses "--stacks" values: "off" -> 0, "on" -> 20, a rate 1..200 Hz. -1 when invalid. */
double gs_runstacks_parse_rate(const char *s);

#endif
