/*
 * runs_metrics.c - per-rank step series of live runs for /metrics (contract in
 * runs_metrics.h). Each slot keeps O(1) state per step: running sums of the step's wall time
 * and phases, and a ring of the last GS_RUNM_WINDOW wall times and data/communication shares
 * for the quantiles and ratios, which are computed at render time (a sort of at most
 * GS_RUNM_WINDOW values per rank and cycle).
 */
#include "agent/runs_metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/metrics.h"
#include "backend/procfs.h"
#include "base/clock.h"
#include "base/mfu.h"
#include "gpuscope/gs_run.h"
#include "run/efficiency.h"
#include "run/hang.h"
#include "run/record.h"

struct slot {
    int used;
    int64_t run_id;
    uint64_t conn_id;
    int32_t rank, world_size;
    int gpu; /* NVML index, -1 unknown */
    char job[GS_RECORD_STR], node[GS_RECORD_JOB];
    uint64_t count, last_step;
    uint64_t samples; /* samples of the steps that gave a count */
    int samples_seen;
    /* MFU (src/run/efficiency.c): FLOPs per token and precision from the hello's facts, the
     * peak of the rank's GPU from its name (NAN / -1 / 0: unknown) */
    double fpt;
    int prec;
    double peak;
    int peak_gpu; /* the GPU index peak was looked up for (-1: not yet) */
    double sum_s, last_s, last_t;
    struct gs_hang hang;       /* the stall check (run/hang.h), on the agent's clock at receipt */
    pid_t pid;                 /* the hello's sender (SO_PEERCRED), 0 unknown */
    double hello_s;            /* when its hello came (the agent's clock) */
    double cpu_last, cpu_t;    /* its process tree's CPU seconds at the last check, and when */
    double stalled_s;          /* the last gs_runm_stalled: seconds without a step, 0 not stalled */
    double busy_sum_s;         /* wall time less the communication waited for */
    double phase_s[GS_PH_ALL]; /* totals; GS_PH_STEP unused (the wall time is sum_s) */
    int phase_seen[GS_PH_ALL];
    /* ring of the last steps: wall seconds, data seconds, communication seconds */
    unsigned head, n;
    double wall[GS_RUNM_WINDOW], data[GS_RUNM_WINDOW], comm[GS_RUNM_WINDOW];
    double tok[GS_RUNM_WINDOW]; /* the steps' tokens, NAN = not counted */
};

struct gs_runm {
    pthread_mutex_t mu;
    char hostname[GS_RECORD_JOB];
    uint64_t dropped; /* ranks that found no slot */
    /* Slots in use. The per-cycle passes (gs_runm_stalled, the render) return at once when
     * it is 0, and otherwise write only the slots in use: the 1.4 MiB array is calloc'd
     * (fresh pages from the kernel) and a slot's pages become resident only once a rank
     * has used it (bench/RESULTS.md, "The agent's CPU and memory"). */
    unsigned n_used;
    struct slot slots[GS_RUNM_MAX_RANKS];
};

struct gs_runm *gs_runm_new(const char *hostname)
{
    struct gs_runm *m = calloc(1, sizeof *m);

    if (!m)
        return NULL;
    pthread_mutex_init(&m->mu, NULL);
    snprintf(m->hostname, sizeof m->hostname, "%s", hostname ? hostname : "");
    return m;
}

void gs_runm_free(struct gs_runm *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* The connection's slot, made when absent (NULL: none free, counted). Under mu. */
static struct slot *slot_get(struct gs_runm *m, int64_t run_id, uint64_t conn_id,
                             const char *run_name)
{
    struct slot *free_slot = NULL;

    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        struct slot *s = &m->slots[i];
        if (s->used && s->run_id == run_id && s->conn_id == conn_id)
            return s;
        if (!s->used && !free_slot)
            free_slot = s;
    }
    if (!free_slot) {
        m->dropped++;
        return NULL;
    }
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->used = 1;
    free_slot->run_id = run_id;
    free_slot->conn_id = conn_id;
    free_slot->rank = free_slot->world_size = -1;
    free_slot->gpu = -1;
    free_slot->last_t = NAN;
    free_slot->cpu_last = NAN;
    free_slot->fpt = NAN;
    free_slot->prec = -1;
    free_slot->peak_gpu = -1;
    m->n_used++;
    if (run_name && run_name[0])
        snprintf(free_slot->job, sizeof free_slot->job, "%s", run_name);
    else
        snprintf(free_slot->job, sizeof free_slot->job, "run-%lld", (long long)run_id);
    snprintf(free_slot->node, sizeof free_slot->node, "%s", m->hostname);
    return free_slot;
}

void gs_runm_hello(struct gs_runm *m, int64_t run_id, uint64_t conn_id, const char *run_name,
                   const struct gs_record_hello *h, pid_t pid)
{
    struct slot *s;
    json_t *facts;
    double fpt;
    int prec = -1;

    if (!m)
        return;
    /* the model's FLOPs per token, once per hello, outside the lock */
    facts = h->facts.n ? gs_record_facts_json(&h->facts) : NULL;
    fpt = gs_efficiency_model(facts, &prec, NULL, NULL);
    json_decref(facts);
    pthread_mutex_lock(&m->mu);
    s = slot_get(m, run_id, conn_id, run_name);
    if (s) {
        if (h->job[0])
            snprintf(s->job, sizeof s->job, "%s", h->job);
        if (h->node[0])
            snprintf(s->node, sizeof s->node, "%s", h->node);
        if (h->rank >= 0)
            s->rank = h->rank;
        if (h->world_size >= 0)
            s->world_size = h->world_size;
        s->fpt = fpt;
        s->prec = prec;
        s->peak_gpu = -1;               /* the peak again, for this precision (gs_runm_gpu) */
        if (pid > 0 && s->pid != pid) { /* begun at the first reading of its CPU time */
            s->pid = pid;
            s->hello_s = gs_clock_real_s();
            s->cpu_last = NAN;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

static double ms_or_zero(const struct gs_step_rec *r, int p)
{
    double v = gs_step_ms(r, p);
    return isfinite(v) && v > 0 ? v : 0.0;
}

void gs_runm_step(struct gs_runm *m, int64_t run_id, uint64_t conn_id, const char *run_name,
                  const struct gs_step_rec *r)
{
    struct slot *s;
    double wall_ms, comm_ms;

    if (!m)
        return;
    /* the step's wall time: data + total_step (docs/report.md), else its clock span */
    wall_ms = gs_hang_wall_s(r) * 1e3;
    /* communication the step waited for when measured, else all of it */
    comm_ms = isfinite(gs_step_ms(r, GS_PH_COMM_EXPOSED)) ? ms_or_zero(r, GS_PH_COMM_EXPOSED)
                                                          : ms_or_zero(r, GS_PH_COMM);
    pthread_mutex_lock(&m->mu);
    s = slot_get(m, run_id, conn_id, run_name);
    if (s) {
        s->rank = r->rank;
        s->count++;
        s->last_step = r->step;
        s->last_s = wall_ms / 1e3;
        s->sum_s += s->last_s;
        s->busy_sum_s += fmax(0.0, wall_ms - comm_ms) / 1e3;
        if (r->samples) {
            s->samples += r->samples;
            s->samples_seen = 1;
        }
        gs_hang_step(&s->hang, &s->last_t, r, gs_clock_real_s()); /* sets last_t */
        for (int p = 0; p < GS_PH_ALL; p++) {
            double v = gs_step_ms(r, p);
            if (p == GS_PH_STEP || !isfinite(v))
                continue;
            s->phase_s[p] += v > 0 ? v / 1e3 : 0.0;
            s->phase_seen[p] = 1;
        }
        s->wall[s->head] = wall_ms / 1e3;
        s->data[s->head] = ms_or_zero(r, GS_PH_DATA) / 1e3;
        s->comm[s->head] = comm_ms / 1e3;
        s->tok[s->head] = r->tokens ? (double)r->tokens : NAN;
        s->head = (s->head + 1) % GS_RUNM_WINDOW;
        if (s->n < GS_RUNM_WINDOW)
            s->n++;
    }
    pthread_mutex_unlock(&m->mu);
}

/* Called every cycle for every rank with a GPU (runs.c): the peak table is searched only
 * when the rank's GPU changes (a GPU index keeps its name while the agent runs). */
void gs_runm_gpu(struct gs_runm *m, int64_t run_id, uint64_t conn_id, int gpu_index,
                 const char *gpu_name)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS && m->n_used; i++) {
        struct slot *s = &m->slots[i];
        if (s->used && s->run_id == run_id && s->conn_id == conn_id) {
            s->gpu = gpu_index;
            if (s->peak_gpu != gpu_index) {
                const struct gs_peak_gpu *pk = gs_peak_find(gpu_name);
                s->peak = pk && s->prec >= 0 ? pk->flops[s->prec] : 0;
                s->peak_gpu = gpu_index;
            }
        }
    }
    pthread_mutex_unlock(&m->mu);
}

void gs_runm_drop(struct gs_runm *m, int64_t run_id, uint64_t conn_id)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        struct slot *s = &m->slots[i];
        if (s->used && s->run_id == run_id && (conn_id == 0 || s->conn_id == conn_id)) {
            s->used = 0;
            m->n_used--;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- rendering ---- */

static void __attribute__((format(printf, 2, 3))) out(struct gs_buf *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    gs_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

static void header(struct gs_buf *b, const char *name, const char *help, const char *type)
{
    out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{job="..",rank="..",node="..",gpu=".."[,extra] */
static void labels(struct gs_buf *b, const char *name, const struct slot *s)
{
    out(b, "%s{train_job=\"", name);
    gs_metrics_escape(b, s->job);
    out(b, "\",rank=\"%d\",node=\"", (int)s->rank);
    gs_metrics_escape(b, s->node);
    if (s->gpu >= 0)
        out(b, "\",gpu=\"%d\"", s->gpu);
    else
        out(b, "\",gpu=\"\"");
}

/* One gauge per rank: the share of its window's wall time that the slot's per-step array at
 * offset `part` (data or comm seconds) makes up; ranks without wall time are left out. */
static void window_ratio(struct gs_buf *b, const struct gs_runm *m, const char *name,
                         const char *help, size_t part)
{
    header(b, name, help, "gauge");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        const double *v = (const double *)((const char *)s + part);
        double w = 0, x = 0;
        if (!s->used || !s->n)
            continue;
        for (unsigned k = 0; k < s->n; k++)
            w += s->wall[k], x += v[k];
        if (w > 0) {
            labels(b, name, s);
            out(b, "} %.6g\n", x / w);
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q quantile of sorted v[0..n-1] (nearest rank). */
static double quantile(const double *v, unsigned n, double q)
{
    unsigned k = (unsigned)ceil(q * n);
    return v[k == 0 ? 0 : k - 1];
}

static const double quantiles[] = {0.5, 0.9, 0.95, 0.99};

/* Tokens per second of wall time over the window's steps that carried a count; NAN: none. */
static double window_tokens_per_s(const struct slot *s)
{
    double tok = 0, wall = 0;

    for (unsigned k = 0; k < s->n; k++)
        if (!isnan(s->tok[k])) {
            tok += s->tok[k];
            wall += s->wall[k];
        }
    return wall > 0 ? tok / wall : NAN;
}

/* Before GS_HANG_MIN_STEPS steps, the activity of each rank whose hello gave its process, as
 * `gpuscope run`'s watchdog measures it (src/run/runstacks.c): its process tree used
 * GS_HANG_ACTIVE_CPU of a core since the previous check. The first reading begins the rank's
 * stream at its hello (run/hang.h: from there, no step and no activity for min_s is a stall).
 * /proc is read outside the lock (a scan of the process table). */
static void ranks_activity(struct gs_runm *m, double now)
{
    struct rank_cpu {
        unsigned i;
        uint64_t conn_id;
        pid_t pid;
        double cpu;
    } q[GS_RUNM_MAX_RANKS];
    unsigned nq = 0;

    pthread_mutex_lock(&m->mu);
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS && m->n_used; i++) {
        const struct slot *s = &m->slots[i];
        if (s->used && s->pid > 0 && s->hang.steps < GS_HANG_MIN_STEPS)
            q[nq++] = (struct rank_cpu){i, s->conn_id, s->pid, NAN};
    }
    pthread_mutex_unlock(&m->mu);
    if (!nq)
        return;
    for (unsigned k = 0; k < nq; k++)
        q[k].cpu = gs_procfs_tree_cpu_s(NULL, (unsigned)q[k].pid);
    pthread_mutex_lock(&m->mu);
    for (unsigned k = 0; k < nq; k++) {
        struct slot *s = &m->slots[q[k].i];
        if (!s->used || s->conn_id != q[k].conn_id || s->pid != q[k].pid || isnan(q[k].cpu))
            continue;
        if (isnan(s->cpu_last))
            gs_hang_begin(&s->hang, s->hello_s);
        else if (now > s->cpu_t && q[k].cpu - s->cpu_last >= GS_HANG_ACTIVE_CPU * (now - s->cpu_t))
            gs_hang_active(&s->hang, now);
        s->cpu_last = q[k].cpu;
        s->cpu_t = now;
    }
    pthread_mutex_unlock(&m->mu);
}

unsigned gs_runm_stalled(struct gs_runm *m, double now, double factor, double min_s,
                         unsigned char *stalled, unsigned n, unsigned *no_gpu)
{
    unsigned ranks = 0, cpu = 0;

    if (no_gpu)
        *no_gpu = 0;
    if (!m)
        return 0;
    ranks_activity(m, now);
    pthread_mutex_lock(&m->mu);
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS && m->n_used; i++) {
        struct slot *s = &m->slots[i];
        if (!s->used) /* an unused slot is not written: its pages stay untouched */
            continue;
        s->stalled_s = 0;
        if (!gs_hang_stalled(&s->hang, factor, min_s, now))
            continue;
        s->stalled_s = fmax(now - gs_hang_quiet_since(&s->hang), 1e-3);
        ranks++;
        if (s->gpu >= 0 && (unsigned)s->gpu < n)
            stalled[s->gpu] = 1;
        else if (s->gpu < 0)
            cpu++;
    }
    pthread_mutex_unlock(&m->mu);
    if (no_gpu)
        *no_gpu = cpu;
    return ranks;
}

double gs_runm_run_stalled(struct gs_runm *m, int64_t run_id, double *p95)
{
    double worst = 0, q = NAN;

    if (!m)
        return 0;
    pthread_mutex_lock(&m->mu);
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        if (s->used && s->run_id == run_id && s->stalled_s > worst) {
            worst = s->stalled_s;
            q = gs_hang_p95(&s->hang);
        }
    }
    pthread_mutex_unlock(&m->mu);
    if (p95)
        *p95 = q;
    return worst;
}

/* One rank's summary lines of family name: the quantiles of v[0..s->n-1] (sorted here), _sum
 * and _count over all its steps. */
static void summary_rows(struct gs_buf *b, const char *name, const struct slot *s, double *v,
                         double sum)
{
    char fam[80];

    qsort(v, s->n, sizeof v[0], cmp_double);
    for (unsigned q = 0; s->n && q < sizeof quantiles / sizeof quantiles[0]; q++) {
        labels(b, name, s);
        out(b, ",quantile=\"%g\"} %.9g\n", quantiles[q], quantile(v, s->n, quantiles[q]));
    }
    snprintf(fam, sizeof fam, "%s_sum", name);
    labels(b, fam, s);
    out(b, "} %.9g\n", sum);
    snprintf(fam, sizeof fam, "%s_count", name);
    labels(b, fam, s);
    out(b, "} %llu\n", (unsigned long long)s->count);
}

void gs_runm_render(struct gs_runm *m, struct gs_buf *b)
{
    unsigned n = 0;
    double sorted[GS_RUNM_WINDOW];

    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    n = m->n_used;
    header(b, "gpuscope_run_ranks", "Rank connections of live runs with gpuscope_run_* series.",
           "gauge");
    out(b, "gpuscope_run_ranks %u\n", n);
    header(b, "gpuscope_run_ranks_dropped_total",
           "Rank connections left without gpuscope_run_* series (more than 256 at once).",
           "counter");
    out(b, "gpuscope_run_ranks_dropped_total %llu\n", (unsigned long long)m->dropped);
    if (n == 0)
        goto done;
    header(b, "gpuscope_run_rank_info",
           "A rank of a live training run; world_size is its hello's. Always 1.", "gauge");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        if (!s->used)
            continue;
        labels(b, "gpuscope_run_rank_info", s);
        out(b, ",run=\"%lld\",world_size=\"%d\"} 1\n", (long long)s->run_id, (int)s->world_size);
    }
    header(b, "gpuscope_run_step_seconds",
           "Wall time of a training step (data wait included); quantiles over the rank's last "
           "128 steps.",
           "summary");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        if (!s->used)
            continue;
        memcpy(sorted, s->wall, s->n * sizeof sorted[0]);
        summary_rows(b, "gpuscope_run_step_seconds", s, sorted, s->sum_s);
    }
    header(b, "gpuscope_run_step_busy_seconds",
           "A step's wall time less the communication the rank waited for (its compute and "
           "data time: in synchronous training every rank's step lasts as long, the straggler "
           "is the one that waits least); quantiles over its last 128 steps.",
           "summary");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        if (!s->used)
            continue;
        for (unsigned k = 0; k < s->n; k++)
            sorted[k] = fmax(0.0, s->wall[k] - s->comm[k]);
        summary_rows(b, "gpuscope_run_step_busy_seconds", s, sorted, s->busy_sum_s);
    }
    header(b, "gpuscope_run_phase_seconds_total",
           "Seconds a rank's steps spent in each phase (docs/report.md, PHASES).", "counter");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        if (!s->used)
            continue;
        for (int p = 0; p < GS_PH_ALL; p++) {
            if (p == GS_PH_STEP || !s->phase_seen[p])
                continue;
            labels(b, "gpuscope_run_phase_seconds_total", s);
            out(b, ",phase=\"%s\"} %.9g\n", gs_phase_name(p), s->phase_s[p]);
        }
    }
    window_ratio(b, m, "gpuscope_run_data_ratio",
                 "Share of the rank's wall time spent waiting for data, over its last 128 steps.",
                 offsetof(struct slot, data));
    window_ratio(b, m, "gpuscope_run_communication_ratio",
                 "Share of the rank's wall time spent waiting on communication (exposed when "
                 "measured), over its last 128 steps.",
                 offsetof(struct slot, comm));
    header(b, "gpuscope_run_steps_completed",
           "The rank's global step number after its last step (HF state.global_step).", "gauge");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        if (!s->used || !s->count)
            continue;
        labels(b, "gpuscope_run_steps_completed", s);
        out(b, "} %llu\n", (unsigned long long)s->last_step);
    }
    header(b, "gpuscope_run_samples_total",
           "Samples the rank's steps processed (the job's throughput: the sum over its ranks of "
           "the rate).",
           "counter");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        if (!s->used || !s->samples_seen)
            continue;
        labels(b, "gpuscope_run_samples_total", s);
        out(b, "} %llu\n", (unsigned long long)s->samples);
    }
    header(b, "gpuscope_run_tokens_per_second",
           "Tokens the rank trained on per second of wall time, over its last 128 steps that "
           "carried a count (docs/report.md, TOKENS AND MFU).",
           "gauge");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        double tps = window_tokens_per_s(s);
        if (!s->used || !(tps >= 0))
            continue;
        labels(b, "gpuscope_run_tokens_per_second", s);
        out(b, "} %.9g\n", tps);
    }
    header(b, "gpuscope_run_mfu",
           "Model FLOPs utilization of the rank (0..1): FLOPs per token x tokens/s over its last "
           "128 steps / its GPU's peak at the run's precision (docs/report.md, TOKENS AND MFU).",
           "gauge");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        double tps = window_tokens_per_s(s);
        if (!s->used || !(tps >= 0) || !(s->fpt > 0) || !(s->peak > 0))
            continue;
        labels(b, "gpuscope_run_mfu", s);
        out(b, "} %.9g\n", s->fpt * tps / s->peak);
    }
    header(b, "gpuscope_run_last_step_seconds", "Wall time of the rank's last step.", "gauge");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        if (!s->used || !s->count)
            continue;
        labels(b, "gpuscope_run_last_step_seconds", s);
        out(b, "} %.9g\n", s->last_s);
    }
    header(b, "gpuscope_run_last_step_timestamp_seconds", "Unix time the rank's last step ended.",
           "gauge");
    for (unsigned i = 0; i < GS_RUNM_MAX_RANKS; i++) {
        const struct slot *s = &m->slots[i];
        if (!s->used || !s->count || !isfinite(s->last_t))
            continue;
        labels(b, "gpuscope_run_last_step_timestamp_seconds", s);
        out(b, "} %.6f\n", s->last_t);
    }
done:
    pthread_mutex_unlock(&m->mu);
}
