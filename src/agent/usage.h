/*
 * usage.h - GPU usage accounting (issue 27, docs/usage.md): who held which GPU, how busy they
 * kept it, how long it sat idle in their hands, their memory and the energy it drew.
 *
 * A holder is one (uid, job, pod, container) on one GPU or MIG instance. Every sampling cycle
 * gs_usage_cycle adds, for each holder seen in the snapshot, the cycle's seconds to:
 *   held_s      a process of the holder has a context on the GPU;
 *   busy_s      held_s x the GPU's utilization x the holder's share of it (on a GPU shared by
 *               several holders the share is each holder's per-process SM utilization over
 *               their sum, a process without a sample in the driver's window counting 0;
 *               equal shares when the driver gives no per-process figure for the GPU);
 *   idle_s      held while the holder's busy ratio (utilization x share) is below 5 %;
 *   mem_gib_s   the holder's GPU memory (GiB) x seconds; peak_bytes its largest;
 *   energy_j    the GPU's energy counter delta over the cycle x the holder's busy share
 *               (equal shares when the GPU did nothing).
 * The arithmetic is gs_usage_shares and gs_usage_accrue (pure, tests/unit/test_usage.c).
 *
 * Three views of the same figures:
 *   - per-minute rows of the current minute, handed to the emit callback (the history
 *     writer, recorder.h) when the minute turns and at gs_usage_flush; gs_usage_live lists
 *     them for /api/v1/usage, which adds them to what the history holds;
 *   - totals per (user, GPU) since the agent started: the gpuscope_usage_*_total counters;
 *   - live jobs (a holder with a job id): gpuscope_job_gpu_held and
 *     gpuscope_job_gpu_idle_seconds, gone when the job leaves the GPU.
 *
 * Threads: gs_usage_cycle runs on the sampling thread; the readers (gs_usage_live,
 * gs_usage_render_prom) on the HTTP threads and the sampling thread; one mutex of the module's
 * own guards the tables (held for a cycle's arithmetic, microseconds).
 */
#ifndef GS_AGENT_USAGE_H
#define GS_AGENT_USAGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "gpuscope/gs_model.h"
#include "store/usage.h"

/* Below this busy ratio a holder's GPU counts as idle in its hands. */
#define GS_USAGE_IDLE_BELOW 0.05
/* The longest gap between two cycles that is accounted whole (an agent stopped, a suspended
 * host): a longer one counts this much. */
#define GS_USAGE_MAX_GAP_S 30.0
/* Holders one GPU is accounted for per cycle; more are counted in gs_usage_stats.dropped. */
#define GS_USAGE_HOLDERS_PER_GPU 64
/* Rows of one minute, (user, GPU) totals and live jobs kept at most. */
#define GS_USAGE_MAX_ROWS 4096

/* ---- the arithmetic ---- */

/* Each of n holders' share of a GPU's busy time: sm[i] (the holder's summed per-process SM
 * utilization) over their sum when have_sm and the sum is > 0, else 1/n each. */
void gs_usage_shares(unsigned n, const double *sm, int have_sm, double *share);

/* Adds one cycle of dt seconds at unix time t to a: util is the GPU's utilization (0..1; NaN:
 * unknown, then neither busy nor idle time is added), share the holder's share of it,
 * mem_bytes its memory (NaN: unknown), energy_j its part of the GPU's energy (NaN: unknown). */
void gs_usage_accrue(struct gs_usage_acc *a, double dt, double t, double util, double share,
                     double mem_bytes, double energy_j);

/* ---- the accounting ---- */

struct gs_usage;

/* Receives rows, valid during the call (the callee copies what it keeps): as emit, those of a
 * finished minute (or of gs_usage_flush), called with the module's lock held, so it must not
 * call back into the module; as gs_usage_live's fn, a copy, outside the lock. */
typedef void (*gs_usage_emit_fn)(void *ctx, const struct gs_usage_row *rows, unsigned n);

/* Looks up the gpuscope run (its id as text into out, cap bytes) of a pid; 0 when none. */
typedef int (*gs_usage_run_fn)(void *ctx, unsigned pid, char *out, size_t cap);

struct gs_usage_opts {
    gs_usage_emit_fn emit;
    void *emit_ctx;
    gs_usage_run_fn run_of; /* NULL: no run ids */
    void *run_ctx;
    /* 1: read SLURM_JOB_ID from /proc/PID/environ (once per process) when its cgroup names no
     * Slurm job; 0 in tests of hand-made snapshots. */
    int read_env;
};

int gs_usage_new(struct gs_usage **out, const struct gs_usage_opts *o);
void gs_usage_free(struct gs_usage *u);

/* One sampling cycle's snapshot (see the top of this file). */
void gs_usage_cycle(struct gs_usage *u, const struct gs_snapshot *s);

/* Hands the current minute's rows to emit and starts a new minute (the agent's shutdown).
 * NULL is allowed. */
void gs_usage_flush(struct gs_usage *u);

/* Calls fn with a copy of the rows of the current minute (taken under the lock, handed over
 * outside it; none when out of memory). */
void gs_usage_live(struct gs_usage *u, gs_usage_emit_fn fn, void *ctx);

struct gs_usage_stats {
    uint64_t cycles;
    uint64_t dropped; /* holders or rows left out at a bound */
    unsigned rows;    /* of the current minute */
    unsigned totals;  /* (user, GPU) counters */
    unsigned jobs;    /* live (job, GPU) gauges */
};
struct gs_usage_stats gs_usage_stats(struct gs_usage *u);

/* What gs_usage_render_prom appends. */
enum gs_usage_prom {
    GS_USAGE_PROM_COUNTERS = 1, /* gpuscope_usage_*_total per (user, GPU), _dropped_total */
    GS_USAGE_PROM_JOBS = 2,     /* gpuscope_job_gpu_held and _idle_seconds of live jobs */
};

/* Appends the families what (enum gs_usage_prom bits) names (docs/metrics.md); uid >= 0: only
 * that uid's series (a filtered viewer), else all. */
void gs_usage_render_prom(struct gs_usage *u, struct gs_buf *b, int64_t uid, unsigned what);

#endif
