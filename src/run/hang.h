/*
 * hang.h - the one rule that says a training run stopped stepping: `gpuscope run`'s hang
 * watchdog (src/run/runstacks.c, over the whole run) and the agent's training_hang
 * (src/agent/runs_metrics.c, per rank connection) both keep a struct gs_hang per stream of
 * step records and ask it the same question with the same settings (--hang-after/--hang-min,
 * training_hang_after/training_hang_min; docs/run.md, docs/agent.md).
 *
 * The rule: each step puts one duration in a ring of the last GS_HANG_WINDOW: its
 * step-to-step interval (its end time less the previous end time of the same rank: logging,
 * evaluation and checkpoints between steps included) or, when there is none (the rank's first
 * step, end times that do not advance), the step's wall time. After GS_HANG_MIN_STEPS steps, the
 * stream is stalled once no step was received for max(min_s, factor x the p95 of the ring,
 * nearest rank); a stall is reported once (gs_hang_new_stall, gs_hang_mark) and a new step
 * re-arms it. What else must hold (idle or spinning GPUs, live ranks) is the caller's.
 *
 * Before GS_HANG_MIN_STEPS steps the ring says nothing of the job's pace; a stream that was
 * begun (gs_hang_begin: the job's start for the watchdog, a rank's hello for the agent) is then
 * stalled once, for min_s, it received no step
 * *and* its processes showed no activity (gs_hang_active: the caller's measure, e.g. CPU time
 * of the job's process tree, gs_procfs_tree_cpu_s, advancing by at least GS_HANG_ACTIVE_CPU of
 * a core): a job still
 * importing, loading data or compiling uses CPU and is not hung, a job whose ranks sleep or
 * wait in a collective does not. A job that waits on I/O using no CPU for min_s before its
 * fifth step counts as stalled too; a stream never begun keeps the old rule (no step, no
 * stall).
 *
 * Pure: times are passed in (seconds on the caller's clock, the same for every call on one
 * struct); no locking, the caller's lock guards the struct.
 */
#ifndef GS_RUN_HANG_H
#define GS_RUN_HANG_H

#include <stdint.h>

struct gs_step_rec;

#define GS_HANG_WINDOW 128      /* durations the p95 is over */
#define GS_HANG_MIN_STEPS 5     /* steps before the rule judges a stream */
#define GS_HANG_FACTOR 10       /* default factor: --hang-after, training_hang_after */
#define GS_HANG_MIN_S 60        /* default floor in seconds: --hang-min, training_hang_min */
#define GS_HANG_ACTIVE_CPU 0.05 /* CPU seconds a second (of one core) that count as activity */
#define GS_HANG_STR_(x) #x
#define GS_HANG_STR(x) GS_HANG_STR_(x) /* a default as a string, for option and key tables */

/* One stream of steps. Zero-initialise (no step yet: never stalled). */
struct gs_hang {
    double ring[GS_HANG_WINDOW];
    unsigned head, n;
    uint64_t steps;
    double last_rx_s; /* when the last step was received */
    int reported;     /* gs_hang_mark since the last step */
    double begun_s;   /* gs_hang_begin's time; 0: not begun */
    double active_s;  /* the last gs_hang_active */
};

/* The stream's job started at now: from here, no step and no activity for min_s is a stall
 * (before GS_HANG_MIN_STEPS steps). */
void gs_hang_begin(struct gs_hang *h, double now);

/* The stream's processes were active at now (CPU used, the caller's measure). */
void gs_hang_active(struct gs_hang *h, double now);

/* When the current quiet began: the last step received, or before GS_HANG_MIN_STEPS steps the
 * latest of the start, the last step and the last activity; NAN when never begun nor stepped. */
double gs_hang_quiet_since(const struct gs_hang *h);

/* A step's wall time in seconds: its data wait plus total_step when measured, else its clock
 * span; 0 when neither is known. */
double gs_hang_wall_s(const struct gs_step_rec *r);

/* Step r of the stream, received at now. last_end: the end time of the previous step of r's
 * rank, updated here (NULL: unknown, the step's wall time goes in). */
void gs_hang_step(struct gs_hang *h, double *last_end, const struct gs_step_rec *r, double now);

/* The p95 of the ring (nearest rank); NAN when it is empty. */
double gs_hang_p95(const struct gs_hang *h);

/* How long without a step makes the stream stalled: max(min_s, factor x p95); before
 * GS_HANG_MIN_STEPS steps (or with an empty ring) min_s for a begun stream, else INFINITY. */
double gs_hang_limit(const struct gs_hang *h, double factor, double min_s);

/* 1 when, up to now, no step was received for gs_hang_limit (before GS_HANG_MIN_STEPS steps:
 * no step and no activity since gs_hang_quiet_since). */
int gs_hang_stalled(const struct gs_hang *h, double factor, double min_s, double now);

/* 1 when stalled and not yet reported since the last step (once per stall). */
int gs_hang_new_stall(const struct gs_hang *h, double factor, double min_s, double now);

/* The current stall was reported: gs_hang_new_stall says 0 until the next step. */
void gs_hang_mark(struct gs_hang *h);

#endif
