/*
 * agg.c - one run's aggregate (agg.h): keeps every step record per rank so that report time can
 * sort for exact percentiles, and folds device snapshots into per-GPU running figures
 * (utilization, memory peak, energy, throttle time by reason, idle periods) so that a run of any
 * length costs a fixed amount of memory on the device side. Where the driver keeps its own
 * utilization samples (~6 a second), gs_agg_util_samples folds those instead of the snapshots'
 * utilization, time-weighted, for a finer average, maximum and idle periods.
 *
 * Absent stays absent: a phase that was not measured is NaN in the kept step, a GPU reading
 * whose status is not GS_ST_OK is skipped, and figures that never got a value are reported as
 * null by report.c. Everything kept is capped (agg_priv.h); records past a cap are counted as
 * dropped, never stored.
 */
#include "run/agg_priv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpuscope/gs_sampler.h" /* struct gs_util_sample */

const struct gs_agg_thr_reason gs_agg_thr_reasons[GS_AGG_THR_N] = {
    {"sw_power_cap", GS_THR_SW_POWER_CAP, GS_M_THROTTLE_NS_SW_POWER, 1},
    {"hw_slowdown", GS_THR_HW_SLOWDOWN, -1, 1},
    {"sw_thermal", GS_THR_SW_THERMAL, GS_M_THROTTLE_NS_SW_THERMAL, 1},
    {"hw_thermal", GS_THR_HW_THERMAL, GS_M_THROTTLE_NS_HW_THERMAL, 1},
    {"hw_power_brake", GS_THR_HW_POWER_BRAKE, GS_M_THROTTLE_NS_HW_POWER_BRAKE, 1},
    {"sync_boost", GS_THR_SYNC_BOOST, GS_M_THROTTLE_NS_SYNC_BOOST, 0},
};

struct gs_agg *gs_agg_new(void)
{
    struct gs_agg *a = calloc(1, sizeof *a);

    if (!a)
        return NULL;
    a->end.train_runtime = a->end.train_samples = a->end.train_steps = a->end.train_loss = NAN;
    return a;
}

void gs_agg_free(struct gs_agg *a)
{
    if (!a)
        return;
    for (unsigned i = 0; a->ranks && i < a->n_ranks; i++)
        free(a->ranks[i].steps);
    free(a->ranks);
    free(a);
}

void gs_agg_set_records_dropped(struct gs_agg *a, uint64_t n)
{
    if (!a)
        return;
    a->records_dropped = n;
    a->records_dropped_known = 1;
}

void gs_agg_hello(struct gs_agg *a, const struct gs_record_hello *h, pid_t peer_pid, uid_t peer_uid)
{
    if (!a || !h)
        return;
    a->hello = *h;
    a->have_hello = 1;
    a->peer_pid = peer_pid;
    a->peer_uid = peer_uid;
}

void gs_agg_end(struct gs_agg *a, const struct gs_record_end *e)
{
    const struct gs_fact *x;
    int weak;

    if (!a || !e)
        return;
    x = gs_record_fact_get(&e->outcome, "torch_imported");
    weak = x && x->type == GS_FACT_BOOL && !x->v.b;
    /* "torch never imported" from the command's own process says nothing about the ranks
     * that trained: it stands only while no other process reported */
    if (weak && a->have_outcome && !a->outcome_weak) {
        x = gs_record_fact_get(&e->outcome, "exception");
        if (x && x->type == GS_FACT_STR && !a->exception[0])
            memcpy(a->exception, x->v.s, sizeof a->exception);
        return;
    }
    if (!weak || !a->have_end) {
        a->end = *e;
        a->have_end = 1;
    }
    if (e->outcome.n) {
        a->outcome = e->outcome;
        a->have_outcome = 1;
        a->outcome_weak = weak;
    }
    x = gs_record_fact_get(&e->outcome, "exception");
    if (x && x->type == GS_FACT_STR && !a->exception[0])
        memcpy(a->exception, x->v.s, sizeof a->exception);
}

/* The step's wall time less every measured phase: what no phase covers (logging, evaluation,
 * checkpointing, host syncs). Exposed communication counts where known; without it nothing
 * of communication is taken (it may overlap backward). NaN without a total_step. */
static double derive_other(const struct gs_step_rec *s)
{
    double rest = s->ms[GS_PH_STEP], ex = gs_step_ms(s, GS_PH_COMM_EXPOSED);

    if (isnan(rest))
        return NAN;
    for (int p = GS_PH_FORWARD; p <= GS_PH_OPTIMIZER; p++)
        if (!isnan(s->ms[p]))
            rest -= s->ms[p];
    if (!isnan(ex))
        rest -= ex;
    return rest > 0 ? rest : 0;
}

static struct gs_agg_rank *rank_get(struct gs_agg *a, int32_t rank, int32_t device)
{
    struct gs_agg_rank *r;

    for (unsigned i = 0; i < a->n_ranks; i++)
        if (a->ranks[i].rank == rank)
            return &a->ranks[i];
    if (a->n_ranks >= GS_AGG_MAX_RANKS)
        return NULL;
    if (!a->ranks) {
        a->ranks = calloc(GS_AGG_MAX_RANKS, sizeof *a->ranks);
        if (!a->ranks)
            return NULL;
    }
    r = &a->ranks[a->n_ranks++];
    memset(r, 0, sizeof *r);
    r->rank = rank;
    r->device = device;
    return r;
}

/* Room for one more step; on failure the old array is kept as it was. */
static int rank_reserve(struct gs_agg_rank *r)
{
    size_t cap;
    struct gs_agg_step *p;

    if (r->n < r->cap)
        return 0;
    cap = r->cap ? r->cap * 2 : 256;
    p = realloc(r->steps, cap * sizeof *p);
    if (!p)
        return -1;
    r->steps = p;
    r->cap = cap;
    return 0;
}

static void rank_mem(struct gs_agg_rank *r, const struct gs_step_rec *s)
{
    uint64_t pa = s->mem_peak_allocated ? s->mem_peak_allocated : s->mem_allocated;
    uint64_t pr = s->mem_peak_reserved ? s->mem_peak_reserved : s->mem_reserved;

    if (pa > r->peak_allocated)
        r->peak_allocated = pa;
    if (pr > r->peak_reserved)
        r->peak_reserved = pr;
    if (s->mem_total)
        r->mem_total = s->mem_total;
}

int gs_agg_step(struct gs_agg *a, const struct gs_step_rec *s)
{
    struct gs_agg_rank *r;
    struct gs_agg_step *k;

    if (!a || !s)
        return -1;
    r = a->n_steps < GS_AGG_MAX_STEPS ? rank_get(a, s->rank, s->device) : NULL;
    if (!r || rank_reserve(r) != 0) {
        a->dropped++;
        return -1;
    }
    k = &r->steps[r->n++];
    k->t_begin = s->t_begin;
    k->t_end = s->t_end;
    for (int p = 0; p < GS_PH_ALL; p++)
        k->ms[p] = (float)gs_step_ms(s, p);
    if (isnan(k->ms[GS_PH_OTHER]))
        k->ms[GS_PH_OTHER] = (float)derive_other(s);
    if (s->samples) {
        r->samples += s->samples;
        r->n_samples++;
    }
    if (s->tokens) {
        r->tokens += s->tokens;
        r->n_tokens++;
    }
    if (s->flags & GS_STEP_CUDA_EVENTS)
        r->cuda_events++;
    k->profiled = (s->flags & GS_STEP_PROFILED) != 0;
    r->n_profiled += k->profiled;
    if (s->device >= 0)
        r->device = s->device;
    rank_mem(r, s);
    a->n_steps++;
    return 0;
}

/* ---- device side ---- */

static struct gs_agg_gpu *gpu_get(struct gs_agg *a, const struct gs_gpu *g)
{
    struct gs_agg_gpu *x;

    for (unsigned i = 0; i < a->n_gpus; i++)
        if (a->gpus[i].index == g->index)
            return &a->gpus[i];
    if (a->n_gpus >= GS_AGG_MAX_GPUS)
        return NULL;
    x = &a->gpus[a->n_gpus++];
    memset(x, 0, sizeof *x);
    x->index = g->index;
    return x;
}

static int gpu_holds_memory(const struct gs_snapshot *snap, unsigned pos, const struct gs_gpu *g)
{
    int listed = 0;

    for (unsigned i = 0; i < snap->n_procs; i++) {
        const struct gs_proc *p = &snap->procs[i];
        if (p->gpu != pos)
            continue;
        listed = 1;
        if (p->mem_st == GS_ST_OK && p->gpu_mem_bytes > 0)
            return 1;
    }
    if (listed)
        return 0;
    return gs_gpu_has(g, GS_M_MEM_USED) && g->v[GS_M_MEM_USED] > GS_AGG_HOLD_MEM_BYTES;
}

static void idle_close(struct gs_agg_gpu *x)
{
    if (x->idle_open && x->idle_last - x->idle_from >= GS_AGG_IDLE_MIN_S) {
        if (x->n_idle_kept < GS_AGG_MAX_IDLE) {
            x->idle[x->n_idle_kept].from = x->idle_from;
            x->idle[x->n_idle_kept].to = x->idle_last;
            x->n_idle_kept++;
        }
        x->n_idle++;
    }
    x->idle_open = 0;
}

static void fold_util(struct gs_agg_gpu *x, const struct gs_snapshot *snap, unsigned pos,
                      const struct gs_gpu *g, double t)
{
    double u;

    x->holds_mem = gpu_holds_memory(snap, pos, g);
    if (!gs_gpu_has(g, GS_M_UTIL_GPU))
        return;
    u = g->v[GS_M_UTIL_GPU];
    x->util_sum += u;
    x->util_n++;
    if (x->util_n == 1 || u > x->util_max)
        x->util_max = u;
    if (x->us_n > 0)
        return; /* the driver's samples track idle time at their finer grain */
    if (u < GS_AGG_IDLE_UTIL && x->holds_mem) {
        if (!x->idle_open) {
            x->idle_open = 1;
            x->idle_from = t;
        }
        x->idle_last = t;
    } else {
        idle_close(x);
    }
}

static void fold_memory(struct gs_agg_gpu *x, const struct gs_gpu *g)
{
    if (gs_gpu_has(g, GS_M_MEM_USED)) {
        if (!x->mem_known || g->v[GS_M_MEM_USED] > x->mem_peak_bytes)
            x->mem_peak_bytes = g->v[GS_M_MEM_USED];
        x->mem_known = 1;
    }
    if (gs_gpu_has(g, GS_M_MEM_TOTAL))
        x->mem_total_bytes = g->v[GS_M_MEM_TOTAL];
}

static int power_reading(const struct gs_gpu *g, double *w)
{
    static const enum gs_metric order[] = {GS_M_POWER_AVERAGE, GS_M_POWER_DRAW, GS_M_POWER_INSTANT};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (gs_gpu_has(g, order[i])) {
            *w = g->v[order[i]];
            return 1;
        }
    return 0;
}

static void fold_energy(struct gs_agg_gpu *x, const struct gs_gpu *g, double t)
{
    double w;

    if (gs_gpu_has(g, GS_M_ENERGY)) {
        if (!x->energy_first_ok) {
            x->energy_first_j = g->v[GS_M_ENERGY];
            x->energy_first_ok = 1;
        }
        x->energy_last_j = g->v[GS_M_ENERGY];
    }
    if (!power_reading(g, &w)) {
        x->power_prev_ok = 0;
        return;
    }
    x->power_n++;
    if (x->power_prev_ok && t > x->power_prev_t)
        x->energy_int_j += x->power_prev_w * fmin(t - x->power_prev_t, GS_AGG_MAX_GAP_S);
    x->power_prev_ok = 1;
    x->power_prev_w = w;
    x->power_prev_t = t;
}

static void fold_throttle(struct gs_agg_gpu *x, const struct gs_gpu *g, double t)
{
    for (int r = 0; r < GS_AGG_THR_N; r++) {
        int m = gs_agg_thr_reasons[r].counter;
        if (m < 0 || !gs_gpu_has(g, (enum gs_metric)m))
            continue;
        if (!x->thr_ctr_ok[r]) {
            x->thr_ctr_first[r] = g->v[m];
            x->thr_ctr_ok[r] = 1;
        }
        x->thr_ctr_last[r] = g->v[m];
    }
    if (!gs_gpu_has(g, GS_M_THROTTLE_ACTIVE)) {
        x->mask_prev_ok = 0;
        return;
    }
    /* The reasons active at one sample are taken to hold until the next one. */
    if (x->mask_prev_ok && t > x->mask_prev_t) {
        double dt = fmin(t - x->mask_prev_t, GS_AGG_MAX_GAP_S);
        int any = 0;
        for (int r = 0; r < GS_AGG_THR_N; r++)
            if (x->mask_prev & gs_agg_thr_reasons[r].bit) {
                x->thr_mask_s[r] += dt;
                any |= gs_agg_thr_reasons[r].thermal_power;
            }
        if (any)
            x->thr_any_s += dt;
    }
    x->mask_seen = 1;
    x->mask_prev_ok = 1;
    x->mask_prev = gs_gpu_mask(g, GS_M_THROTTLE_ACTIVE);
    x->mask_prev_t = t;
}

static double min_known(double a, double b)
{
    return isnan(a) || b < a ? b : a;
}

/* Temperature, SM clock and PCIe link: what a slow rank's GPU is judged by. */
static void fold_health(struct gs_agg_gpu *x, const struct gs_gpu *g)
{
    if (x->samples == 1) {
        x->temp_max_c = x->clock_min_hz = x->clock_max_hw_hz = NAN;
        x->pcie_gen_min = x->pcie_width_min = NAN;
        x->pcie_gen_max = x->pcie_width_max = NAN;
    }
    if (gs_gpu_has(g, GS_M_TEMP_GPU) &&
        (isnan(x->temp_max_c) || g->v[GS_M_TEMP_GPU] > x->temp_max_c))
        x->temp_max_c = g->v[GS_M_TEMP_GPU];
    if (gs_gpu_has(g, GS_M_CLOCK_SM)) {
        x->clock_sum_hz += g->v[GS_M_CLOCK_SM];
        x->clock_n++;
        x->clock_min_hz = min_known(x->clock_min_hz, g->v[GS_M_CLOCK_SM]);
    }
    if (gs_gpu_has(g, GS_M_CLOCK_MAX_SM))
        x->clock_max_hw_hz = g->v[GS_M_CLOCK_MAX_SM];
    if (gs_gpu_has(g, GS_M_PCIE_GEN))
        x->pcie_gen_min = min_known(x->pcie_gen_min, g->v[GS_M_PCIE_GEN]);
    if (gs_gpu_has(g, GS_M_PCIE_GEN_MAX))
        x->pcie_gen_max = g->v[GS_M_PCIE_GEN_MAX];
    if (gs_gpu_has(g, GS_M_PCIE_WIDTH))
        x->pcie_width_min = min_known(x->pcie_width_min, g->v[GS_M_PCIE_WIDTH]);
    if (gs_gpu_has(g, GS_M_PCIE_WIDTH_MAX))
        x->pcie_width_max = g->v[GS_M_PCIE_WIDTH_MAX];
}

static void fold_gpu(struct gs_agg_gpu *x, const struct gs_snapshot *snap, unsigned pos, double t)
{
    const struct gs_gpu *g = &snap->gpus[pos];

    if (x->samples == 0)
        x->first_t = t;
    x->last_t = t;
    x->samples++;
    if (gs_gpu_has_text(g, GS_T_UUID))
        memcpy(x->uuid, g->text[GS_T_UUID], sizeof x->uuid);
    if (gs_gpu_has_text(g, GS_T_NAME))
        memcpy(x->name, g->text[GS_T_NAME], sizeof x->name);
    x->uuid[sizeof x->uuid - 1] = x->name[sizeof x->name - 1] = '\0';
    if (g->lost) {
        x->lost = 1;
        idle_close(x);
        x->power_prev_ok = x->mask_prev_ok = 0;
        return;
    }
    fold_util(x, snap, pos, g, t);
    fold_health(x, g);
    fold_memory(x, g);
    fold_energy(x, g, t);
    fold_throttle(x, g, t);
}

void gs_agg_snapshot(struct gs_agg *a, const struct gs_snapshot *snap, const unsigned char *in_run,
                     double t)
{
    if (!a || !snap || !isfinite(t))
        return;
    for (unsigned i = 0; i < snap->n_gpus; i++) {
        struct gs_agg_gpu *x;
        if (in_run && !in_run[i])
            continue;
        x = gpu_get(a, &snap->gpus[i]);
        if (x)
            fold_gpu(x, snap, i, t);
    }
    if (a->n_snapshots == 0)
        a->snap_first_t = t;
    a->snap_last_t = t;
    a->n_snapshots++;
}

void gs_agg_run_procs(struct gs_agg *a, const struct gs_snapshot *snap, const unsigned char *in_run,
                      const unsigned char *proc_in_run)
{
    if (!a || !snap || !proc_in_run)
        return;
    for (unsigned g = 0; g < snap->n_gpus; g++) {
        struct gs_agg_gpu *x;
        double mem = 0, sm = 0;
        int mem_ok = 0, sm_ok = 0;
        unsigned others = 0;

        if ((in_run && !in_run[g]) || snap->gpus[g].lost)
            continue;
        x = gpu_get(a, &snap->gpus[g]);
        if (!x)
            continue;
        for (unsigned i = 0; i < snap->n_procs; i++) {
            const struct gs_proc *p = &snap->procs[i];
            int dup = 0;

            if (p->gpu != g)
                continue;
            for (unsigned j = 0; j < i && !dup; j++) /* listed as compute and graphics */
                dup = snap->procs[j].pid == p->pid && snap->procs[j].gpu == g;
            if (dup)
                continue;
            if (!proc_in_run[i]) {
                others++;
                continue;
            }
            if (p->mem_st == GS_ST_OK) {
                mem += (double)p->gpu_mem_bytes;
                mem_ok = 1;
            }
            if (p->util_st == GS_ST_OK) {
                sm += p->sm_util;
                sm_ok = 1;
            }
        }
        if (mem_ok && (!x->run_mem_known || mem > x->run_mem_peak_bytes)) {
            x->run_mem_peak_bytes = mem;
            x->run_mem_known = 1;
        }
        if (sm_ok) {
            x->run_sm_sum += sm;
            x->run_sm_n++;
        }
        if (others > x->others_max)
            x->others_max = others;
    }
}

/* ---- the driver's utilization samples ---- */

/* Idle tracking for one sample covering [from, t]. */
static void idle_sample(struct gs_agg_gpu *x, double u, double from, double t)
{
    if (u < GS_AGG_IDLE_UTIL && x->holds_mem) {
        if (!x->idle_open) {
            x->idle_open = 1;
            x->idle_from = from;
        }
        x->idle_last = t;
    } else {
        idle_close(x);
    }
}

/* Each sample is the mean over the period ending at its timestamp, so it weighs the gap to the
 * previous one (capped like power); the first one's period is unknown until the second comes
 * and is then taken to be the same. */
static void fold_sample(struct gs_agg_gpu *x, const struct gs_util_sample *s)
{
    double t = (double)s->t_us / 1e6, u = s->util_ratio, dt;

    if (x->us_n == 0) {
        x->idle_open = 0; /* an open period from the snapshots: the samples take over */
        x->us_first_v = x->us_max = u;
        idle_sample(x, u, t, t);
    } else {
        dt = fmin((double)(s->t_us - x->us_last_us) / 1e6, GS_AGG_MAX_GAP_S);
        if (x->us_n == 1) {
            x->us_wsum += x->us_first_v * dt;
            x->us_w_s += dt;
        }
        x->us_wsum += u * dt;
        x->us_w_s += dt;
        x->us_gap_s += dt;
        if (u > x->us_max)
            x->us_max = u;
        idle_sample(x, u, t - dt, t);
    }
    x->us_last_us = s->t_us;
    x->us_n++;
}

void gs_agg_util_samples(struct gs_agg *a, unsigned gpu_index, const struct gs_util_sample *s,
                         unsigned n)
{
    struct gs_agg_gpu *x = NULL;

    if (!a || !s)
        return;
    for (unsigned i = 0; i < a->n_gpus && !x; i++)
        if (a->gpus[i].index == gpu_index)
            x = &a->gpus[i];
    if (!x || x->lost)
        return;
    for (unsigned i = 0; i < n; i++) {
        if (x->us_n > 0 && s[i].t_us <= x->us_last_us)
            continue;
        if (!(s[i].util_ratio >= 0 && s[i].util_ratio <= 1))
            continue;
        fold_sample(x, &s[i]);
    }
}

int gs_agg_gpu_util(const struct gs_agg_gpu *g, double *avg, double *max, double *period_s,
                    int *fine)
{
    if (g->us_n > 0) {
        *avg = g->us_w_s > 0 ? g->us_wsum / g->us_w_s : g->us_first_v;
        *max = g->us_max;
        *period_s = g->us_n > 1 ? g->us_gap_s / (double)(g->us_n - 1) : NAN;
        *fine = 1;
        return 1;
    }
    if (!g->util_n)
        return 0;
    *avg = g->util_sum / (double)g->util_n;
    *max = g->util_max;
    *period_s = g->samples > 1 && g->last_t > g->first_t
                    ? (g->last_t - g->first_t) / (double)(g->samples - 1)
                    : NAN;
    *fine = 0;
    return 1;
}

unsigned gs_agg_gpu_idle_count(const struct gs_agg_gpu *g)
{
    unsigned n = g->n_idle;

    if (g->idle_open && g->idle_last - g->idle_from >= GS_AGG_IDLE_MIN_S)
        n++;
    return n;
}
