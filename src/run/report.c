/*
 * report.c - turns a run's aggregate into metrics_report.json (schema in docs/report.md), writes
 * it atomically, and prints the exit summary.
 *
 * All arithmetic that the report states happens here, once: phase statistics (exact
 * percentiles from a sorted copy, nearest-rank), the step-time ratios, the event-based busy
 * estimate, throughput, and the per-GPU device figures. A figure with no input behind it is
 * JSON null, never 0, so that a consumer can tell "not measured" from "measured as zero". The
 * diagnosis (src/diag) then reads only the finished report object, so old reports and live
 * runs are judged by the same rules.
 */
#include "run/agg_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/dirfile.h"
#include "base/straggler.h"
#include "diag/diag.h"
#include "gpuscope/gs_err.h"
#include "run/efficiency.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

struct step_sums {
    double data_ms, comm_ms, denom_ms; /* over steps with total_step measured */
    size_t profiled;                   /* steps flagged profiled (left out of the sums) */
    int data_seen, comm_seen;
    double comm_total_ms;               /* communication, hidden or not */
    double exposed_ms, exposed_comm_ms; /* steps with communication_exposed: it, their comm */
    int exposed_seen;
    double other_ms;
    int other_seen;
    double busy_ms, busy_denom_ms, busy_max_pct; /* steps with forward/backward/optimizer */
    size_t busy_steps;
    double t_first, t_last; /* first begin, last end; NAN without steps */
    size_t max_rank_steps;
    uint64_t samples;
    size_t samples_known;
    uint64_t tokens;     /* tokens trained on, over every rank (steps that carried a count) */
    size_t tokens_known; /* steps that did */
    size_t cuda_events;  /* steps timed with CUDA events (else host clocks) */
};

static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *jstr(const char *s)
{
    return s && s[0] ? json_string(s) : json_null();
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of n sorted values: the value at 1-based rank ceil(p/100 * n). */
static double percentile(const float *v, size_t n, double p)
{
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);

    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return v[rank - 1];
}

/* Steps keep phase times as float (~7 digits); round to 0.1 us so that 124.3 reads 124.3. */
static double round_ms(double ms)
{
    return round(ms * 1e4) / 1e4;
}

/* One phase's statistics over the n values of buf (sorted here), whose sum is sum. */
static json_t *stats_json(float *buf, size_t n, double sum)
{
    json_t *o = json_object();

    if (n)
        qsort(buf, n, sizeof *buf, cmp_float);
    json_object_set_new(o, "mean_ms", n ? json_real(round_ms(sum / (double)n)) : json_null());
    json_object_set_new(o, "p50_ms", n ? json_real(round_ms(percentile(buf, n, 50))) : json_null());
    json_object_set_new(o, "p95_ms", n ? json_real(round_ms(percentile(buf, n, 95))) : json_null());
    json_object_set_new(o, "total_ms", n ? json_real(round_ms(sum)) : json_null());
    json_object_set_new(o, "count", json_integer((json_int_t)n));
    return o;
}

/* The one rule for which steps the step statistics count, job-level and per rank alike: a step
 * of a `gpuscope run --profile` window is left out (a profiler's overhead is not the run's).
 * phase: the phase that must be measured (GS_PH_STEP for a step's wall time). */
static int step_counts(const struct gs_agg_step *k, int phase)
{
    return !k->profiled && !isnan(k->ms[phase]);
}

static json_t *phase_stats(const struct gs_agg *a, int phase, float *buf)
{
    size_t n = 0;
    double sum = 0;

    for (unsigned r = 0; r < a->n_ranks; r++)
        for (size_t i = 0; i < a->ranks[r].n; i++) {
            float v = a->ranks[r].steps[i].ms[phase];
            if (step_counts(&a->ranks[r].steps[i], phase)) {
                buf[n++] = v;
                sum += v;
            }
        }
    return stats_json(buf, n, sum);
}

static void sum_step(struct step_sums *s, const struct gs_agg_step *k)
{
    double data = k->ms[GS_PH_DATA], step = k->ms[GS_PH_STEP], base, busy = 0;
    int busy_known = 0;

    if (!step_counts(k, GS_PH_STEP))
        return;
    base = (isnan(data) ? 0 : data) + step;
    s->denom_ms += base;
    if (!isnan(data)) {
        s->data_ms += data;
        s->data_seen = 1;
    }
    /* The share of wall time spent waiting on communication: the exposed part where the
     * sender measured it, else all of it (older senders: it may overlap backward). */
    if (!isnan(k->ms[GS_PH_COMM])) {
        double ex = k->ms[GS_PH_COMM_EXPOSED];
        s->comm_total_ms += k->ms[GS_PH_COMM];
        s->comm_ms += isnan(ex) ? k->ms[GS_PH_COMM] : ex;
        s->comm_seen = 1;
        if (!isnan(ex)) {
            s->exposed_ms += ex;
            s->exposed_comm_ms += k->ms[GS_PH_COMM];
            s->exposed_seen = 1;
        }
    }
    if (!isnan(k->ms[GS_PH_OTHER])) {
        s->other_ms += k->ms[GS_PH_OTHER];
        s->other_seen = 1;
    }
    for (int p = GS_PH_FORWARD; p <= GS_PH_OPTIMIZER; p++)
        if (!isnan(k->ms[p])) {
            busy += k->ms[p];
            busy_known = 1;
        }
    if (!busy_known || base <= 0)
        return;
    s->busy_ms += busy;
    s->busy_denom_ms += base;
    s->busy_steps++;
    if (100.0 * busy / base > s->busy_max_pct)
        s->busy_max_pct = fmin(100.0, 100.0 * busy / base);
}

static void sum_steps(const struct gs_agg *a, struct step_sums *s)
{
    memset(s, 0, sizeof *s);
    s->t_first = s->t_last = NAN;
    for (unsigned r = 0; r < a->n_ranks; r++) {
        const struct gs_agg_rank *rk = &a->ranks[r];
        if (rk->n > s->max_rank_steps)
            s->max_rank_steps = rk->n;
        s->cuda_events += rk->cuda_events;
        s->samples += rk->samples;
        s->profiled += rk->n_profiled;
        s->samples_known += rk->n_samples;
        s->tokens += rk->tokens;
        s->tokens_known += rk->n_tokens;
        for (size_t i = 0; i < rk->n; i++) {
            const struct gs_agg_step *k = &rk->steps[i];
            if (isnan(s->t_first) || k->t_begin < s->t_first)
                s->t_first = k->t_begin;
            if (isnan(s->t_last) || k->t_end > s->t_last)
                s->t_last = k->t_end;
            sum_step(s, k);
        }
    }
}

static double ratio(double num, double den, int seen)
{
    return seen && den > 0 ? num / den : NAN;
}

/* ---- per GPU ---- */

static double gpu_energy(const struct gs_agg_gpu *g, const char **source)
{
    if (g->energy_first_ok && g->samples >= 2 && g->energy_last_j >= g->energy_first_j) {
        *source = "counter";
        return g->energy_last_j - g->energy_first_j;
    }
    if (g->power_n >= 2) {
        *source = "power";
        return g->energy_int_j;
    }
    *source = NULL;
    return NAN;
}

/* Seconds throttled for reason r, or NAN when nothing about it was ever read. */
static double gpu_throttle_s(const struct gs_agg_gpu *g, int r)
{
    if (g->thr_ctr_ok[r] && g->samples >= 2 && g->thr_ctr_last[r] >= g->thr_ctr_first[r])
        return g->thr_ctr_last[r] - g->thr_ctr_first[r];
    if (g->mask_seen)
        return g->thr_mask_s[r];
    return NAN;
}

static json_t *gpu_idle(const struct gs_agg_gpu *g)
{
    json_t *arr = json_array();

    for (unsigned i = 0; i < g->n_idle_kept; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "from", json_real(g->idle[i].from));
        json_object_set_new(p, "to", json_real(g->idle[i].to));
        json_object_set_new(p, "seconds", json_real(g->idle[i].to - g->idle[i].from));
        json_array_append_new(arr, p);
    }
    if (g->idle_open && g->idle_last - g->idle_from >= GS_AGG_IDLE_MIN_S &&
        g->n_idle_kept < GS_AGG_MAX_IDLE) {
        json_t *p = json_object();
        json_object_set_new(p, "from", json_real(g->idle_from));
        json_object_set_new(p, "to", json_real(g->idle_last));
        json_object_set_new(p, "seconds", json_real(g->idle_last - g->idle_from));
        json_array_append_new(arr, p);
    }
    return arr;
}

static json_t *gpu_object(const struct gs_agg_gpu *g, double *energy_sum, int *energy_any,
                          double *thr_sum, int *thr_any)
{
    json_t *o = json_object(), *thr = json_object();
    const char *esrc;
    double e = gpu_energy(g, &esrc), thr_gpu = 0, uavg, umax, uper;
    int thr_gpu_any = 0, ufine = 0, uok = gs_agg_gpu_util(g, &uavg, &umax, &uper, &ufine);

    json_object_set_new(o, "index", json_integer(g->index));
    json_object_set_new(o, "uuid", jstr(g->uuid));
    json_object_set_new(o, "name", jstr(g->name));
    json_object_set_new(o, "samples", json_integer((json_int_t)g->samples));
    json_object_set_new(o, "utilization_avg_percent", uok ? json_real(100.0 * uavg) : json_null());
    json_object_set_new(o, "utilization_max_percent", uok ? json_real(100.0 * umax) : json_null());
    json_object_set_new(o, "utilization_source",
                        uok ? json_string(ufine ? "nvml_samples" : "snapshots") : json_null());
    json_object_set_new(o, "utilization_sample_period_ms", jnum(uok ? 1000.0 * uper : NAN));
    json_object_set_new(o, "memory_peak_bytes",
                        g->mem_known ? json_integer((json_int_t)g->mem_peak_bytes) : json_null());
    json_object_set_new(o, "memory_peak_gb",
                        g->mem_known ? json_real(g->mem_peak_bytes / GIB) : json_null());
    json_object_set_new(o, "run_memory_peak_bytes",
                        g->run_mem_known ? json_integer((json_int_t)g->run_mem_peak_bytes)
                                         : json_null());
    json_object_set_new(o, "run_memory_peak_gb",
                        g->run_mem_known ? json_real(g->run_mem_peak_bytes / GIB) : json_null());
    json_object_set_new(o, "run_sm_utilization_avg_percent",
                        g->run_sm_n ? json_real(100.0 * g->run_sm_sum / (double)g->run_sm_n)
                                    : json_null());
    json_object_set_new(o, "other_processes_max", json_integer(g->others_max));
    json_object_set_new(o, "memory_total_bytes",
                        g->mem_total_bytes > 0 ? json_integer((json_int_t)g->mem_total_bytes)
                                               : json_null());
    json_object_set_new(o, "energy_joules", jnum(e));
    json_object_set_new(o, "energy_source", jstr(esrc));
    for (int r = 0; r < GS_AGG_THR_N; r++) {
        double s = gpu_throttle_s(g, r);
        if (isnan(s))
            continue;
        json_object_set_new(thr, gs_agg_thr_reasons[r].key, json_real(s));
        /* One figure of throttled time, used by the summary and the diagnosis alike: the time
         * during which any thermal/power reason was active. Reasons overlap in time, so their
         * sum would exceed it; from the mask samples it is their union, from the driver's
         * per-reason counters alone (no union known) the longest reason. */
        if (gs_agg_thr_reasons[r].thermal_power) {
            if (s > thr_gpu)
                thr_gpu = s;
            thr_gpu_any = 1;
        }
    }
    if (thr_gpu_any && g->mask_seen && g->thr_any_s > thr_gpu)
        thr_gpu = g->thr_any_s;
    json_object_set_new(o, "throttled_seconds", thr);
    json_object_set_new(o, "throttled_seconds_total",
                        thr_gpu_any ? json_real(thr_gpu) : json_null());
    json_object_set_new(o, "temperature_max_c", jnum(g->samples ? g->temp_max_c : NAN));
    json_object_set_new(o, "clock_sm_avg_mhz",
                        g->clock_n ? json_real(g->clock_sum_hz / (double)g->clock_n / 1e6)
                                   : json_null());
    json_object_set_new(o, "clock_sm_min_mhz", jnum(g->samples ? g->clock_min_hz / 1e6 : NAN));
    json_object_set_new(o, "clock_sm_max_mhz", jnum(g->samples ? g->clock_max_hw_hz / 1e6 : NAN));
    json_object_set_new(o, "pcie_link_gen_min", jnum(g->samples ? g->pcie_gen_min : NAN));
    json_object_set_new(o, "pcie_link_gen_max", jnum(g->samples ? g->pcie_gen_max : NAN));
    json_object_set_new(o, "pcie_link_width_min", jnum(g->samples ? g->pcie_width_min : NAN));
    json_object_set_new(o, "pcie_link_width_max", jnum(g->samples ? g->pcie_width_max : NAN));
    json_object_set_new(o, "idle_periods", gpu_idle(g));
    json_object_set_new(o, "idle_periods_total", json_integer(gs_agg_gpu_idle_count(g)));
    json_object_set_new(o, "lost", json_boolean(g->lost));
    json_object_set_new(o, "first_sample", g->samples ? json_real(g->first_t) : json_null());
    json_object_set_new(o, "last_sample", g->samples ? json_real(g->last_t) : json_null());
    if (!isnan(e)) {
        *energy_sum += e;
        *energy_any = 1;
    }
    if (thr_gpu_any) {
        *thr_sum += thr_gpu;
        *thr_any = 1;
    }
    return o;
}

/* ---- report ---- */

struct devsum {
    double util_avg, util_max; /* percent, NAN = none */
    double mem_peak_bytes;     /* device-wide, NAN = none */
    double run_mem_peak_bytes; /* the run's processes (largest over its GPUs), NAN = none */
    double run_sm_avg;         /* their SM utilization, percent (mean over GPUs), NAN = none */
    unsigned others_max;       /* other processes on one of its GPUs at once */
};

static json_t *gpus_array(const struct gs_agg *a, struct devsum *d, json_t *report)
{
    json_t *arr = json_array();
    double esum = 0, tsum = 0, usum = 0;
    int eany = 0, tany = 0;
    unsigned un = 0;

    double smsum = 0;
    unsigned smn = 0;

    d->util_avg = d->util_max = d->mem_peak_bytes = d->run_mem_peak_bytes = d->run_sm_avg = NAN;
    d->others_max = 0;
    for (unsigned i = 0; i < a->n_gpus; i++) {
        const struct gs_agg_gpu *g = &a->gpus[i];
        double uavg, umax, uper;
        int ufine;
        json_array_append_new(arr, gpu_object(g, &esum, &eany, &tsum, &tany));
        if (gs_agg_gpu_util(g, &uavg, &umax, &uper, &ufine)) {
            usum += 100.0 * uavg;
            un++;
            if (isnan(d->util_max) || 100.0 * umax > d->util_max)
                d->util_max = 100.0 * umax;
        }
        if (g->mem_known && (isnan(d->mem_peak_bytes) || g->mem_peak_bytes > d->mem_peak_bytes))
            d->mem_peak_bytes = g->mem_peak_bytes;
        if (g->run_mem_known &&
            (isnan(d->run_mem_peak_bytes) || g->run_mem_peak_bytes > d->run_mem_peak_bytes))
            d->run_mem_peak_bytes = g->run_mem_peak_bytes;
        if (g->run_sm_n) {
            smsum += 100.0 * g->run_sm_sum / (double)g->run_sm_n;
            smn++;
        }
        if (g->others_max > d->others_max)
            d->others_max = g->others_max;
    }
    if (un)
        d->util_avg = usum / un;
    if (smn)
        d->run_sm_avg = smsum / smn;
    json_object_set_new(report, "energy_joules", eany ? json_real(esum) : json_null());
    json_object_set_new(report, "throttled_seconds", tany ? json_real(tsum) : json_null());
    return arr;
}

static json_t *allocator_object(const struct gs_agg *a, double *peak_alloc)
{
    json_t *o = json_object();
    uint64_t pa = 0, pr = 0, tot = 0;

    for (unsigned r = 0; r < a->n_ranks; r++) {
        const struct gs_agg_rank *k = &a->ranks[r];
        if (k->peak_allocated > pa)
            pa = k->peak_allocated;
        if (k->peak_reserved > pr)
            pr = k->peak_reserved;
        if (k->mem_total > tot)
            tot = k->mem_total;
    }
    *peak_alloc = pa ? (double)pa : NAN;
    json_object_set_new(o, "peak_allocated_gb", pa ? json_real(pa / GIB) : json_null());
    json_object_set_new(o, "peak_reserved_gb", pr ? json_real(pr / GIB) : json_null());
    json_object_set_new(o, "fragmentation_gap_gb",
                        pa && pr >= pa ? json_real((double)(pr - pa) / GIB) : json_null());
    json_object_set_new(o, "memory_total_gb", tot ? json_real(tot / GIB) : json_null());
    return o;
}

static double min_nan(double a, double b)
{
    return isnan(a) ? b : isnan(b) ? a : fmin(a, b);
}

static double max_nan(double a, double b)
{
    return isnan(a) ? b : isnan(b) ? a : fmax(a, b);
}

static json_t *run_object(const struct gs_agg *a, const struct gs_report_meta *m,
                          const struct step_sums *s)
{
    json_t *o = json_object();
    const struct gs_record_hello *h = &a->hello;
    double sf = a->n_snapshots ? a->snap_first_t : NAN, sl = a->n_snapshots ? a->snap_last_t : NAN;

    json_object_set_new(o, "name",
                        jstr(m && m->run_name ? m->run_name
                             : a->have_hello  ? h->run
                                              : NULL));
    json_object_set_new(o, "source", jstr(m ? m->source : NULL));
    json_object_set_new(o, "command", jstr(m ? m->command : NULL));
    json_object_set_new(o, "hostname", jstr(m ? m->hostname : NULL));
    json_object_set_new(o, "exit_code",
                        m && m->exit_code >= 0 ? json_integer(m->exit_code) : json_null());
    json_object_set_new(o, "framework", jstr(a->have_hello ? h->framework : NULL));
    json_object_set_new(o, "world_size",
                        a->have_hello && h->world_size >= 0 ? json_integer(h->world_size)
                                                            : json_null());
    json_object_set_new(o, "job", jstr(a->have_hello && h->job[0] ? h->job : NULL));
    json_object_set_new(o, "node", jstr(a->have_hello && h->node[0] ? h->node : NULL));
    json_object_set_new(o, "logging_steps",
                        a->have_hello && h->logging_steps >= 0 ? json_integer(h->logging_steps)
                                                               : json_null());
    json_object_set_new(o, "pid",
                        a->have_hello && a->peer_pid > 0 ? json_integer(a->peer_pid)
                        : a->have_hello && h->pid >= 0   ? json_integer(h->pid)
                                                         : json_null());
    json_object_set_new(o, "uid",
                        a->have_hello && a->peer_pid > 0 ? json_integer(a->peer_uid) : json_null());
    json_object_set_new(o, "start_time", jnum(min_nan(s->t_first, sf)));
    json_object_set_new(o, "end_time", jnum(max_nan(s->t_last, sl)));
    json_object_set_new(o, "steps_from", jnum(s->t_first));
    json_object_set_new(o, "steps_to", jnum(s->t_last));
    json_object_set_new(o, "device_samples", json_integer((json_int_t)a->n_snapshots));
    json_object_set_new(o, "device_samples_from", jnum(sf));
    json_object_set_new(o, "device_samples_to", jnum(sl));
    json_object_set_new(o, "step_records", json_integer((json_int_t)a->n_steps));
    json_object_set_new(o, "dropped_records", json_integer((json_int_t)a->dropped));
    json_object_set_new(o, "records_dropped",
                        a->records_dropped_known ? json_integer((json_int_t)a->records_dropped)
                                                 : json_null());
    json_object_set_new(o, "train_loss", jnum(a->end.train_loss));
    if (a->have_hello && h->tags.n) /* the hello's (gpuscope run --tag, $GPUSCOPE_RUN_TAGS) */
        json_object_set_new(o, "tags", gs_record_tags_json(&h->tags));
    return o;
}

/* train_runtime: the framework's own figure when the end record has one, else the job's wall
 * time when the caller knows it (gpuscope run), else the span of the steps; throughput: the
 * framework's figures over its runtime, else over the span of the steps (their own pace). */
static void throughput(const struct gs_agg *a, const struct gs_report_meta *m,
                       const struct step_sums *s, json_t *rep)
{
    double span = s->max_rank_steps ? s->t_last - s->t_first : NAN, per = span;
    double rt = a->end.train_runtime, samples = a->end.train_samples, steps = a->end.train_steps;

    if (isnan(span) && a->n_snapshots >= 2)
        per = a->snap_last_t - a->snap_first_t;
    if (!isnan(rt))
        per = rt;
    else if (m && m->job_start > 0 && m->job_end >= m->job_start)
        rt = m->job_end - m->job_start;
    else
        rt = per;
    if (isnan(samples) && s->samples_known)
        samples = (double)s->samples;
    if (isnan(steps) && s->max_rank_steps)
        steps = (double)s->max_rank_steps;
    json_object_set_new(rep, "train_runtime", jnum(rt));
    json_object_set_new(rep, "steps_span_seconds", jnum(span));
    json_object_set_new(rep, "train_samples_per_second",
                        per > 0 ? jnum(samples / per) : json_null());
    json_object_set_new(rep, "train_steps_per_second", per > 0 ? jnum(steps / per) : json_null());
    /* tokens: the steps' own count over the span of the steps, whatever the framework's
     * runtime (which may hold evaluation and saving); per GPU: the job's over its ranks (one
     * GPU a rank) */
    json_object_set_new(rep, "train_tokens",
                        s->tokens_known ? json_integer((json_int_t)s->tokens) : json_null());
    json_object_set_new(rep, "train_tokens_per_second",
                        s->tokens_known && span > 0 ? json_real((double)s->tokens / span)
                                                    : json_null());
    json_object_set_new(rep, "tokens_per_second_per_gpu",
                        s->tokens_known && span > 0 && a->n_ranks
                            ? json_real((double)s->tokens / span / a->n_ranks)
                            : json_null());
}

static void utilization(const struct devsum *d, const struct step_sums *s, double busy, json_t *rep)
{
    if (!isnan(d->util_avg)) {
        json_object_set_new(rep, "gpu_avg_utilization_percent", json_real(d->util_avg));
        json_object_set_new(rep, "gpu_max_utilization_percent", json_real(d->util_max));
        json_object_set_new(rep, "gpu_utilization_source", json_string("nvml"));
    } else if (!isnan(busy) && s->cuda_events) {
        json_object_set_new(rep, "gpu_avg_utilization_percent", json_real(busy));
        json_object_set_new(rep, "gpu_max_utilization_percent", json_real(s->busy_max_pct));
        json_object_set_new(rep, "gpu_utilization_source", json_string("cuda_events"));
    } else {
        /* Host-timed steps (a CPU run) say nothing of a GPU: step_busy_estimate_percent
         * carries that estimate under its own name. */
        json_object_set_new(rep, "gpu_avg_utilization_percent", json_null());
        json_object_set_new(rep, "gpu_max_utilization_percent", json_null());
        json_object_set_new(rep, "gpu_utilization_source", json_null());
    }
}

/* ---- per rank ---- */

/* A step's wall time: its data wait plus the rest of it. */
static double step_wall(const struct gs_agg_step *k)
{
    return (isnan(k->ms[GS_PH_DATA]) ? 0 : k->ms[GS_PH_DATA]) + k->ms[GS_PH_STEP];
}

/* "step_wall" in the report's phases: each step's wall time, data + total_step (total_step
 * leaves the data wait out), over the steps with total_step measured. */
static json_t *step_wall_stats(const struct gs_agg *a, float *buf)
{
    size_t n = 0;
    double sum = 0;

    for (unsigned r = 0; r < a->n_ranks; r++)
        for (size_t i = 0; i < a->ranks[r].n; i++)
            if (step_counts(&a->ranks[r].steps[i], GS_PH_STEP)) {
                double v = step_wall(&a->ranks[r].steps[i]);
                buf[n++] = (float)v;
                sum += v;
            }
    return stats_json(buf, n, sum);
}

/* The report's entry for GPU index idx, or NULL. */
static const json_t *gpu_entry(const json_t *gpus, long idx)
{
    size_t i;
    const json_t *g;

    json_array_foreach(gpus, i, g)
    {
        if (json_is_integer(json_object_get(g, "index")) &&
            json_integer_value(json_object_get(g, "index")) == idx)
            return g;
    }
    return NULL;
}

/* The communication a step waited for: exposed when measured, else all of it (0: none). */
static double step_wait(const struct gs_agg_step *k)
{
    double x = isnan(k->ms[GS_PH_COMM_EXPOSED]) ? k->ms[GS_PH_COMM] : k->ms[GS_PH_COMM_EXPOSED];
    return isnan(x) || x < 0 ? 0 : x;
}

/* The median of buf[0..n) (sorted in place), NaN when n is 0. */
static double median_of(float *buf, size_t n)
{
    if (!n)
        return NAN;
    qsort(buf, n, sizeof *buf, cmp_float);
    return percentile(buf, n, 50);
}

/* "slowest_rank" (two ranks or more): the rank that computes longest by the straggler rule
 * (src/base/straggler.c), whether it is a straggler, its figures against the other ranks' and
 * its GPU's (the GPU whose NVML index is the rank's CUDA device); null otherwise. */
static json_t *slowest_rank(const struct gs_agg *a, const struct gs_straggler_rank *fig,
                            const double *p50, const json_t *gpus)
{
    struct gs_straggler s;
    const struct gs_agg_rank *rk;
    const json_t *g;
    json_t *o;

    if (a->n_ranks < 2 || gs_straggler_find(fig, a->n_ranks, &s) < 0 || s.idx < 0)
        return json_null();
    rk = &a->ranks[s.idx];
    g = rk->device >= 0 ? gpu_entry(gpus, rk->device) : NULL;
    o = json_object();
    json_object_set_new(o, "rank", json_integer(rk->rank));
    json_object_set_new(o, "straggler", json_boolean(s.straggler));
    json_object_set_new(o, "busy_p50_ms", json_real(round_ms(s.busy_ms)));
    json_object_set_new(o, "others_busy_p50_ms", json_real(round_ms(s.others_ms)));
    json_object_set_new(o, "slower_by_ratio",
                        isfinite(s.ratio) ? json_real(s.ratio - 1.0) : json_null());
    json_object_set_new(o, "comm_wait_p50_ms",
                        isfinite(s.wait_ms) ? json_real(round_ms(s.wait_ms)) : json_null());
    json_object_set_new(o, "others_comm_wait_p50_ms",
                        isfinite(s.others_wait_ms) ? json_real(round_ms(s.others_wait_ms))
                                                   : json_null());
    json_object_set_new(o, "step_p50_ms",
                        isfinite(p50[s.idx]) ? json_real(round_ms(p50[s.idx])) : json_null());
    json_object_set_new(o, "threshold_ratio", json_real(GS_STRAGGLER_RATIO));
    json_object_set_new(o, "device", rk->device >= 0 ? json_integer(rk->device) : json_null());
    json_object_set_new(o, "gpu", g ? json_deep_copy(g) : json_null());
    return o;
}

/* "per_rank": one row per rank (steps, step wall p50/p95, busy and communication-wait p50,
 * mean of each phase, samples/s), and "slowest_rank" (see above). */
static json_t *per_rank(const struct gs_agg *a, float *buf, const json_t *gpus, json_t *rep)
{
    static const int cols[] = {GS_PH_DATA, GS_PH_FORWARD,      GS_PH_BACKWARD, GS_PH_OPTIMIZER,
                               GS_PH_COMM, GS_PH_COMM_EXPOSED, GS_PH_OTHER};
    json_t *arr = json_array();
    struct gs_straggler_rank *fig = calloc(a->n_ranks ? a->n_ranks : 1, sizeof *fig);
    double *p50s = calloc(a->n_ranks ? a->n_ranks : 1, sizeof *p50s);

    for (unsigned r = 0; r < a->n_ranks; r++) {
        const struct gs_agg_rank *rk = &a->ranks[r];
        json_t *o = json_object(), *ph = json_object();
        size_t n = 0;
        double t0 = NAN, t1 = NAN, p50 = NAN, p95 = NAN, busy, wait;
        for (size_t i = 0; i < rk->n; i++) {
            const struct gs_agg_step *k = &rk->steps[i];
            if (step_counts(k, GS_PH_STEP))
                buf[n++] = (float)step_wall(k);
            t0 = isnan(t0) || k->t_begin < t0 ? k->t_begin : t0;
            t1 = isnan(t1) || k->t_end > t1 ? k->t_end : t1;
        }
        if (n) {
            p50 = median_of(buf, n);
            p95 = percentile(buf, n, 95);
        }
        /* compute (busy) and communication waited for, medians over the same steps */
        n = 0;
        for (size_t i = 0; i < rk->n; i++)
            if (step_counts(&rk->steps[i], GS_PH_STEP))
                buf[n++] = (float)fmax(0.0, step_wall(&rk->steps[i]) - step_wait(&rk->steps[i]));
        busy = median_of(buf, n);
        n = 0;
        for (size_t i = 0; i < rk->n; i++)
            if (step_counts(&rk->steps[i], GS_PH_STEP))
                buf[n++] = (float)step_wait(&rk->steps[i]);
        wait = median_of(buf, n);
        if (fig && p50s) {
            fig[r] = (struct gs_straggler_rank){busy, wait};
            p50s[r] = p50;
        }
        json_object_set_new(o, "rank", json_integer(rk->rank));
        json_object_set_new(o, "device", rk->device >= 0 ? json_integer(rk->device) : json_null());
        json_object_set_new(o, "steps", json_integer((json_int_t)rk->n));
        json_object_set_new(o, "step_p50_ms", n ? json_real(round_ms(p50)) : json_null());
        json_object_set_new(o, "step_p95_ms", n ? json_real(round_ms(p95)) : json_null());
        json_object_set_new(o, "busy_p50_ms", n ? json_real(round_ms(busy)) : json_null());
        json_object_set_new(o, "comm_wait_p50_ms", n ? json_real(round_ms(wait)) : json_null());
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
            double sum = 0;
            size_t m = 0;
            for (size_t i = 0; i < rk->n; i++)
                if (step_counts(&rk->steps[i], cols[c])) {
                    sum += rk->steps[i].ms[cols[c]];
                    m++;
                }
            json_object_set_new(ph, gs_phase_name(cols[c]),
                                m ? json_real(round_ms(sum / (double)m)) : json_null());
        }
        json_object_set_new(o, "mean_ms", ph);
        json_object_set_new(o, "samples",
                            rk->n_samples ? json_integer((json_int_t)rk->samples) : json_null());
        json_object_set_new(o, "samples_per_second",
                            rk->n_samples && t1 > t0 ? json_real((double)rk->samples / (t1 - t0))
                                                     : json_null());
        json_object_set_new(o, "tokens",
                            rk->n_tokens ? json_integer((json_int_t)rk->tokens) : json_null());
        json_object_set_new(o, "tokens_per_second",
                            rk->n_tokens && t1 > t0 ? json_real((double)rk->tokens / (t1 - t0))
                                                    : json_null());
        json_array_append_new(arr, o);
    }
    json_object_set_new(rep, "slowest_rank",
                        fig && p50s ? slowest_rank(a, fig, p50s, gpus) : json_null());
    free(fig);
    free(p50s);
    return arr;
}

/* ---- outcome ---- */

static const char *signal_name(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
                 {SIGILL, "SIGILL"},   {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},
                 {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGSEGV, "SIGSEGV"},
                 {SIGPIPE, "SIGPIPE"}, {SIGTERM, "SIGTERM"}, {SIGUSR1, "SIGUSR1"},
                 {SIGUSR2, "SIGUSR2"}, {SIGXCPU, "SIGXCPU"}};

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    return NULL;
}

static long outcome_count(const struct gs_agg *a, const char *key)
{
    const struct gs_fact *f = a->have_outcome ? gs_record_fact_get(&a->outcome, key) : NULL;
    return f && f->type == GS_FACT_INT ? (long)f->v.i : -1;
}

/* Why a run has no steps, from what the sender saw (its outcome) and what the receiver saw. */
static void zero_steps_reason(const struct gs_agg *a, char *out, size_t size)
{
    const struct gs_fact *ti =
        a->have_outcome ? gs_record_fact_get(&a->outcome, "torch_imported") : NULL;
    char gpu[96];
    size_t n;

    if (a->n_gpus)
        snprintf(gpu, sizeof gpu, "; the command was on %u GPU(s)", a->n_gpus);
    else
        snprintf(gpu, sizeof gpu, "; no process of the command appeared on a GPU");
    if (!a->have_hello && !a->have_outcome) {
        snprintf(out, size,
                 "no step record came from the command: gpuscope never started in "
                 "it (not a Python program, --no-auto, or a process that never ran a training "
                 "loop)%s",
                 gpu);
        return;
    }
    if (ti && ti->type == GS_FACT_BOOL && !ti->v.b) {
        snprintf(out, size, "torch was never imported%s", gpu);
        return;
    }
    if (outcome_count(a, "seen_optimizer_step") == 0) {
        n = (size_t)snprintf(out, size,
                             "torch ran but no optimizer step was seen (the step "
                             "boundary)");
        if (n < size) {
            static const char *const keys[] = {"seen_data", "seen_forward", "seen_backward"};
            static const char *const what[] = {"DataLoader batches", "training forwards",
                                               "backward calls"};
            for (size_t i = 0; i < 3 && n < size; i++) {
                long c = outcome_count(a, keys[i]);
                if (c >= 0)
                    n += (size_t)snprintf(out + n, size - n, "%s%ld %s", i ? ", " : ": ", c,
                                          what[i]);
            }
        }
        if (n < size)
            snprintf(out + n, size - n, "%s", gpu);
        return;
    }
    snprintf(out, size, "the command connected but sent no step record%s", gpu);
}

static json_t *outcome_object(const struct gs_agg *a, const struct gs_report_meta *m,
                              const struct step_sums *s)
{
    json_t *o = json_object(), *seen;
    int code = m ? m->exit_code : -1, sig = m ? m->term_signal : 0;
    const char *exc = a->exception[0] ? a->exception : NULL, *status;
    int kbd = exc && strncmp(exc, "KeyboardInterrupt", 17) == 0;
    char why[512];

    /* a stop gpuscope run passed on (SIGTERM, SIGINT, SIGHUP) is no failure, whatever CMD
     * made of it (torchrun exits 1 with a SignalException) */
    if (m && m->stopped_after_steps > 0)
        status = "stopped"; /* on purpose, after the measured window: not a failure */
    else if (sig == SIGINT || (sig == 0 && kbd) ||
             (m && m->stop_signal > 0 && (sig > 0 || code > 0)))
        status = "interrupted";
    else if (sig > 0)
        status = "killed";
    else if ((code > 0) || exc)
        status = "failed";
    else if (code == 0 || (m && m->source && strcmp(m->source, "in-process") == 0))
        status = "completed";
    else
        status = "unknown";
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "exit_code", code >= 0 ? json_integer(code) : json_null());
    json_object_set_new(o, "signal", sig > 0 ? json_integer(sig) : json_null());
    json_object_set_new(o, "signal_name", sig > 0 ? jstr(signal_name(sig)) : json_null());
    json_object_set_new(o, "stopped_by",
                        m && m->stop_signal > 0 ? jstr(signal_name(m->stop_signal)) : json_null());
    json_object_set_new(o, "stopped_after_steps",
                        m && m->stopped_after_steps > 0 ? json_integer(m->stopped_after_steps)
                                                        : json_null());
    json_object_set_new(o, "steps_completed", json_integer((json_int_t)s->max_rank_steps));
    json_object_set_new(o, "exception",
                        m && m->stopped_after_steps > 0 && exc ? json_null() : jstr(exc));
    if (s->max_rank_steps == 0) {
        zero_steps_reason(a, why, sizeof why);
        json_object_set_new(o, "zero_steps_reason", json_string(why));
    } else {
        json_object_set_new(o, "zero_steps_reason", json_null());
    }
    seen = a->have_outcome ? gs_record_facts_json(&a->outcome) : json_object();
    if (seen)
        json_object_del(seen, "exception");
    json_object_set_new(o, "seen", seen ? seen : json_object());
    return o;
}

/* Report keys in reading order: the brief's eight fields first. */
static const char *const report_order[] = {
    "schema",
    "train_runtime",
    "train_samples_per_second",
    "train_steps_per_second",
    "steps_span_seconds",
    "train_tokens",
    "train_tokens_per_second",
    "tokens_per_second_per_gpu",
    "mfu",
    "mfu_null_reason",
    "hfu",
    "model_flops_per_token",
    "model_flops_formula",
    "peak_flops",
    "peak_flops_precision",
    "peak_flops_gpu",
    "gpu_peak_memory_allocated_gb",
    "gpu_avg_utilization_percent",
    "gpu_max_utilization_percent",
    "data_loading_time_ratio",
    "communication_time_ratio",
    "gpu_utilization_source",
    "gpu_peak_memory_source",
    "gpu_peak_memory_device_gb",
    "gpu_run_sm_utilization_avg_percent",
    "gpu_other_processes_max",
    "gpu_busy_estimate_percent",
    "step_busy_estimate_percent",
    "step_busy_estimate_source",
    "other_time_ratio",
    "communication_total_seconds",
    "communication_hidden_ratio",
    "steps",
    "profiled_steps",
    "ranks",
    "energy_joules",
    "throttled_seconds",
    "outcome",
    "hangs",
    "phases",
    "per_rank",
    "slowest_rank",
    "gpus",
    "allocator",
    "run",
    "facts",
    "profile",
    "findings",
};

static json_t *ordered(json_t *rep)
{
    json_t *o = json_object();
    const char *key;
    json_t *v;

    if (!o)
        return rep;
    for (size_t i = 0; i < sizeof report_order / sizeof report_order[0]; i++)
        if ((v = json_object_get(rep, report_order[i])))
            json_object_set(o, report_order[i], v);
    json_object_foreach(rep, key, v)
    {
        if (!json_object_get(o, key))
            json_object_set(o, key, v);
    }
    json_decref(rep);
    return o;
}

json_t *gs_agg_report(const struct gs_agg *a, const struct gs_report_meta *meta)
{
    json_t *rep, *phases, *gpus, *alloc, *findings, *facts;
    struct step_sums s;
    struct devsum d;
    double busy, peak_alloc;
    float *buf;

    if (!a)
        return NULL;
    rep = json_object();
    buf = malloc((a->n_steps ? a->n_steps : 1) * sizeof *buf);
    if (!rep || !buf) {
        json_decref(rep);
        free(buf);
        return NULL;
    }
    sum_steps(a, &s);
    busy = s.busy_steps ? fmin(100.0, 100.0 * s.busy_ms / s.busy_denom_ms) : NAN;
    json_object_set_new(rep, "schema", json_string(gs_run_report_schema()));
    throughput(a, meta, &s, rep);
    gpus = gpus_array(a, &d, rep);
    alloc = allocator_object(a, &peak_alloc);
    /* the run's own memory: torch's allocator, else what NVML lists for the run's processes;
     * the device's whole use (other tenants included) only when neither is known, and also
     * as gpu_peak_memory_device_gb, labelled as such */
    json_object_set_new(rep, "gpu_peak_memory_allocated_gb",
                        jnum((!isnan(peak_alloc)             ? peak_alloc
                              : !isnan(d.run_mem_peak_bytes) ? d.run_mem_peak_bytes
                                                             : d.mem_peak_bytes) /
                             GIB));
    json_object_set_new(rep, "gpu_peak_memory_source",
                        !isnan(peak_alloc)             ? json_string("allocator")
                        : !isnan(d.run_mem_peak_bytes) ? json_string("nvml_processes")
                        : !isnan(d.mem_peak_bytes)     ? json_string("nvml")
                                                       : json_null());
    json_object_set_new(rep, "gpu_peak_memory_device_gb", jnum(d.mem_peak_bytes / GIB));
    json_object_set_new(rep, "gpu_run_sm_utilization_avg_percent", jnum(d.run_sm_avg));
    json_object_set_new(rep, "gpu_other_processes_max",
                        a->n_gpus ? json_integer(d.others_max) : json_null());
    utilization(&d, &s, busy, rep);
    json_object_set_new(rep, "data_loading_time_ratio",
                        jnum(ratio(s.data_ms, s.denom_ms, s.data_seen)));
    json_object_set_new(rep, "communication_time_ratio",
                        jnum(ratio(s.comm_ms, s.denom_ms, s.comm_seen)));
    json_object_set_new(rep, "gpu_busy_estimate_percent", jnum(s.cuda_events ? busy : NAN));
    json_object_set_new(rep, "step_busy_estimate_percent", jnum(busy));
    json_object_set_new(rep, "step_busy_estimate_source",
                        isnan(busy) ? json_null()
                                    : json_string(s.cuda_events ? "cuda_events" : "host_timing"));
    json_object_set_new(rep, "other_time_ratio", jnum(ratio(s.other_ms, s.denom_ms, s.other_seen)));
    json_object_set_new(rep, "communication_total_seconds",
                        s.comm_seen ? json_real(s.comm_total_ms / 1000.0) : json_null());
    json_object_set_new(rep, "communication_hidden_ratio",
                        s.exposed_seen && s.exposed_comm_ms > 0
                            ? json_real(fmax(0.0, 1.0 - s.exposed_ms / s.exposed_comm_ms))
                            : json_null());
    json_object_set_new(rep, "steps", json_integer((json_int_t)s.max_rank_steps));
    json_object_set_new(rep, "profiled_steps", json_integer((json_int_t)s.profiled));
    json_object_set_new(rep, "ranks", json_integer(a->n_ranks));
    phases = json_object();
    for (int p = 0; p < GS_PH_ALL; p++)
        json_object_set_new(phases, gs_phase_name(p), phase_stats(a, p, buf));
    json_object_set_new(phases, "step_wall", step_wall_stats(a, buf));
    json_object_set_new(rep, "per_rank", per_rank(a, buf, gpus, rep));
    free(buf);
    json_object_set_new(rep, "phases", phases);
    json_object_set_new(rep, "gpus", gpus);
    json_object_set_new(rep, "allocator", alloc);
    json_object_set_new(rep, "run", run_object(a, meta, &s));
    json_object_set_new(rep, "outcome", outcome_object(a, meta, &s));
    facts = a->have_hello ? gs_record_facts_json(&a->hello.facts) : json_object();
    json_object_set_new(rep, "facts", facts ? facts : json_object());
    if (meta && meta->profile) /* gpuscope run --profile: src/cli/run/run_profile.c */
        json_object_set(rep, "profile", (json_t *)meta->profile);
    gs_efficiency(rep); /* tokens/s -> MFU (src/run/efficiency.c), before the diagnosis */
    findings = gs_diag_findings(rep, sysconf(_SC_NPROCESSORS_ONLN));
    json_object_set_new(rep, "findings", findings ? findings : json_array());
    return ordered(rep);
}

/* ---- writing ---- */

int gs_report_write_at(const json_t *report, int dirfd, const char *name, struct gs_err *err)
{
    struct gs_dirfile df;
    char *text;
    int rc;

    if (!report || !name)
        return gs_err_set(err, GS_EINVAL, "report: nothing to write");
    text = json_dumps(report, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
    if (!text)
        return gs_err_set(err, GS_ENOMEM, "report: out of memory");
    /* A fresh file of ours (never through a link, never an existing file), renamed into
     * place whole (src/base/dirfile.h). */
    rc = gs_dirfile_begin(&df, dirfd, name, 0644, err);
    if (rc == GS_OK) {
        if (fputs(text, df.f) < 0 || fputc('\n', df.f) == EOF) {
            rc = gs_err_set(err, GS_EIO, "report: write %s: %s", name, strerror(errno));
            gs_dirfile_abort(&df);
        } else {
            rc = gs_dirfile_commit(&df, err);
        }
    }
    free(text);
    return rc;
}

int gs_report_write(const json_t *report, const char *path, struct gs_err *err)
{
    char dir[4096];
    const char *slash = path ? strrchr(path, '/') : NULL;
    int dirfd, rc;

    if (!report || !path || !path[0])
        return gs_err_set(err, GS_EINVAL, "report: nothing to write");
    if (slash && (size_t)(slash - path) >= sizeof dir)
        return gs_err_set(err, GS_EINVAL, "report: path too long");
    snprintf(dir, sizeof dir, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1,
             slash ? path : ".");
    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return gs_err_set(err, GS_EIO, "report: %s: %s", dir, strerror(errno));
    rc = gs_report_write_at(report, dirfd, slash ? slash + 1 : path, err);
    close(dirfd);
    return rc;
}

/* ---- exit summary ---- */

struct paint {
    const char *bold, *warn, *crit, *info, *off;
};

static double jget(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Prints a number with fmt into a field, or "n/a". */
static const char *jtext(const json_t *o, const char *key, const char *absent)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : absent;
}

static const char *fmtnum(char *buf, size_t size, const char *fmt, double v)
{
    if (isnan(v))
        snprintf(buf, size, "n/a");
    else
        snprintf(buf, size, fmt, v);
    return buf;
}

static void print_phases(FILE *out, const json_t *rep, const struct paint *c)
{
    const json_t *phases = json_object_get(rep, "phases");
    char b[5][32];
    int header = 0;

    for (int p = 0; p < GS_PH_N; p++) {
        const json_t *ph = json_object_get(phases, gs_phase_name(p));
        double n = jget(ph, "count");
        if (!(n > 0))
            continue;
        if (!header++)
            fprintf(out, "  %s%-16s %10s %10s %10s %12s %8s%s\n", c->bold, "phase", "mean ms",
                    "p50 ms", "p95 ms", "total s", "count", c->off);
        fprintf(out, "  %-16s %10s %10s %10s %12s %8.0f\n", gs_phase_name(p),
                fmtnum(b[0], 32, "%.2f", jget(ph, "mean_ms")),
                fmtnum(b[1], 32, "%.2f", jget(ph, "p50_ms")),
                fmtnum(b[2], 32, "%.2f", jget(ph, "p95_ms")),
                fmtnum(b[3], 32, "%.3f", jget(ph, "total_ms") / 1000.0), n);
    }
    {
        const json_t *ph = json_object_get(phases, "step_wall");
        double n = jget(ph, "count");
        if (header && n > 0) /* the step's wall time: data + total_step */
            fprintf(out, "  %-16s %10s %10s %10s %12s %8.0f\n", "step_wall",
                    fmtnum(b[0], 32, "%.2f", jget(ph, "mean_ms")),
                    fmtnum(b[1], 32, "%.2f", jget(ph, "p50_ms")),
                    fmtnum(b[2], 32, "%.2f", jget(ph, "p95_ms")),
                    fmtnum(b[3], 32, "%.3f", jget(ph, "total_ms") / 1000.0), n);
    }
}

/* One "label  value" line of the totals, left out when nothing in it is known. */
static void total_line(FILE *out, const char *label, int known, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void total_line(FILE *out, const char *label, int known, const char *fmt, ...)
{
    va_list ap;

    if (!known)
        return;
    fprintf(out, "  %-28s ", label);
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
}

/* The run's settings (report "facts") on one line: key=value, in the sender's order. */
static void print_facts(FILE *out, const json_t *facts)
{
    const char *key;
    const json_t *v;
    int first = 1;

    if (!json_object_size(facts))
        return;
    fprintf(out, "  %-28s ", "settings (facts)");
    json_object_foreach((json_t *)facts, key, v)
    {
        fprintf(out, "%s%s=", first ? "" : ", ", key);
        first = 0;
        if (json_is_string(v))
            fputs(json_string_value(v), out);
        else if (json_is_integer(v))
            fprintf(out, "%lld", (long long)json_integer_value(v));
        else if (json_is_real(v))
            fprintf(out, "%g", json_real_value(v));
        else
            fputs(json_is_true(v) ? "true" : json_is_false(v) ? "false" : "null", out);
    }
    fputc('\n', out);
}

/* "outcome  failed: exit 1 after 30 steps: ValueError: boom", and why a run has no steps. */
static void print_outcome(FILE *out, const json_t *oc)
{
    const char *status = jtext(oc, "status", NULL), *exc = jtext(oc, "exception", NULL);
    const char *sig = jtext(oc, "signal_name", NULL), *why = jtext(oc, "zero_steps_reason", NULL);
    const char *stop = jtext(oc, "stopped_by", NULL);
    double code = jget(oc, "exit_code");

    if (!status)
        return;
    fprintf(out, "  %-28s %s", "outcome", status);
    if (strcmp(status, "stopped") == 0) { /* --stop-after-steps: on purpose */
        fprintf(out, ": by gpuscope run (--stop-after-steps %.0f)",
                jget(oc, "stopped_after_steps"));
        exc = NULL;
    } else if (stop) { /* passed on by gpuscope run: what the command made of it is secondary */
        fprintf(out, ": stopped by %s", stop);
        exc = NULL;
    } else if (sig) /* SIGTERM, SIGINT, SIGHUP: a stop from outside, not a crash */
        fprintf(out, ": %s by %s",
                strcmp(sig, "SIGTERM") == 0 || strcmp(sig, "SIGINT") == 0 ||
                        strcmp(sig, "SIGHUP") == 0 || strcmp(status, "hung") == 0
                    ? "stopped"
                    : "killed",
                sig);
    else if (!isnan(code))
        fprintf(out, ": exit %.0f", code);
    fprintf(out, " after %.0f step(s)", jget(oc, "steps_completed"));
    if (exc)
        fprintf(out, ": %s", exc);
    fputc('\n', out);
    if (why)
        fprintf(out, "  %-28s %s\n", "why no steps", why);
}

/* One row per rank (step wall p50/p95, phase means) and the slowest rank, for 2+ ranks. */
static void print_ranks(FILE *out, const json_t *rep, const struct paint *c)
{
#define PHASE_WALL_(e, name, is_wall) is_wall,
    static const int wall[GS_PH_ALL] = {GS_PHASES(PHASE_WALL_)};
#undef PHASE_WALL_
    const json_t *ranks = json_object_get(rep, "per_rank"), *r, *sl;
    size_t i;
    char b[8][32];
    int tok = 0;

    if (json_array_size(ranks) < 2)
        return;
    json_array_foreach(ranks, i, r) if (!isnan(jget(r, "tokens_per_second"))) tok = 1;
    fprintf(out, "  %s%-5s %7s %10s %10s %9s %9s %9s %9s %9s %9s", c->bold, "rank", "steps",
            "step p50", "step p95", "data", "forward", "backward", "optim", "comm exp", "other");
    if (tok)
        fprintf(out, " %10s %7s", "tokens/s", "MFU");
    fprintf(out, "%s\n", c->off);
    json_array_foreach(ranks, i, r)
    {
        const json_t *m = json_object_get(r, "mean_ms");
        fprintf(out, "  %-5.0f %7.0f %10s %10s", jget(r, "rank"), jget(r, "steps"),
                fmtnum(b[0], 32, "%.2f", jget(r, "step_p50_ms")),
                fmtnum(b[1], 32, "%.2f", jget(r, "step_p95_ms")));
        for (int p = 0; p < GS_PH_ALL; p++) /* the parts of the wall time, as the header */
            if (wall[p])
                fprintf(out, " %9s", fmtnum(b[2], 32, "%.2f", jget(m, gs_phase_name(p))));
        if (tok)
            fprintf(out, " %10s %7s", fmtnum(b[2], 32, "%.1f", jget(r, "tokens_per_second")),
                    fmtnum(b[3], 32, 100.0 * jget(r, "mfu") >= 0.1 ? "%.2f%%" : "%.2g%%",
                           100.0 * jget(r, "mfu")));
        fputc('\n', out);
    }
    sl = json_object_get(rep, "slowest_rank");
    if (json_is_object(sl)) {
        const json_t *g = json_object_get(sl, "gpu");
        struct gs_straggler s = {.busy_ms = jget(sl, "busy_p50_ms"),
                                 .others_ms = jget(sl, "others_busy_p50_ms"),
                                 .ratio = 1.0 + jget(sl, "slower_by_ratio"),
                                 .wait_ms = jget(sl, "comm_wait_p50_ms"),
                                 .others_wait_ms = jget(sl, "others_comm_wait_p50_ms")};
        char text[320];
        int strag = json_is_true(json_object_get(sl, "straggler"));
        gs_straggler_text(&s, (long)jget(sl, "rank"), text, sizeof text);
        fprintf(out, "  %sslowest rank: %s%s", strag ? c->warn : "", text,
                strag ? ": a straggler" : "");
        if (!strag)
            fprintf(out, " (under the straggler threshold of %.0f %%)",
                    100.0 * (GS_STRAGGLER_RATIO - 1.0));
        fputs(strag ? c->off : "", out);
        if (!isnan(jget(sl, "mfu")))
            fprintf(out, "; its MFU %s %%",
                    fmtnum(b[0], 32, 100.0 * jget(sl, "mfu") >= 0.1 ? "%.2f" : "%.2g",
                           100.0 * jget(sl, "mfu")));
        if (json_is_object(g))
            fprintf(out,
                    "; its GPU %.0f: util avg %s %%, throttled %s s, max %s C, SM clock "
                    "avg %s of %s MHz, PCIe gen %s x%s",
                    jget(g, "index"), fmtnum(b[1], 32, "%.1f", jget(g, "utilization_avg_percent")),
                    fmtnum(b[2], 32, "%.1f", jget(g, "throttled_seconds_total")),
                    fmtnum(b[3], 32, "%.0f", jget(g, "temperature_max_c")),
                    fmtnum(b[4], 32, "%.0f", jget(g, "clock_sm_avg_mhz")),
                    fmtnum(b[5], 32, "%.0f", jget(g, "clock_sm_max_mhz")),
                    fmtnum(b[6], 32, "%.0f", jget(g, "pcie_link_gen_min")),
                    fmtnum(b[7], 32, "%.0f", jget(g, "pcie_link_width_min")));
        fputc('\n', out);
    }
}

/* tokens/s and MFU (src/run/efficiency.c), or why MFU is not known */
static void print_efficiency(FILE *out, const json_t *rep)
{
    double tps = jget(rep, "train_tokens_per_second"), mfu = jget(rep, "mfu");
    double hfu = jget(rep, "hfu");
    char b[4][32];

    total_line(out, "tokens", !isnan(tps), "%s tokens/s, %s per GPU, %s tokens trained on",
               fmtnum(b[0], 32, "%.1f", tps),
               fmtnum(b[1], 32, "%.1f", jget(rep, "tokens_per_second_per_gpu")),
               fmtnum(b[2], 32, "%.0f", jget(rep, "train_tokens")));
    if (!isnan(mfu)) {
        fprintf(out, "  %-28s %s %% (%s FLOPs/token x tokens/s / %s TFLOP/s %s peak of %s)", "MFU",
                fmtnum(b[3], 32, 100.0 * mfu >= 0.1 ? "%.2f" : "%.2g", 100.0 * mfu),
                fmtnum(b[0], 32, "%.4g", jget(rep, "model_flops_per_token")),
                fmtnum(b[1], 32, "%.1f", jget(rep, "peak_flops") / 1e12),
                jtext(rep, "peak_flops_precision", "?"), jtext(rep, "peak_flops_gpu", "?"));
        if (!isnan(hfu))
            fprintf(out, ", HFU %s %%",
                    fmtnum(b[3], 32, 100.0 * hfu >= 0.1 ? "%.2f" : "%.2g", 100.0 * hfu));
        fputc('\n', out);
    } else if (!isnan(tps)) {
        total_line(out, "MFU", 1, "n/a: %s", jtext(rep, "mfu_null_reason", "unknown"));
    }
}

static void print_totals(FILE *out, const json_t *rep)
{
    const json_t *src = json_object_get(rep, "gpu_utilization_source");
    const json_t *al = json_object_get(rep, "allocator");
    double sps = jget(rep, "train_samples_per_second"), tps = jget(rep, "train_steps_per_second");
    double ua = jget(rep, "gpu_avg_utilization_percent");
    double um = jget(rep, "gpu_max_utilization_percent");
    double pa = jget(al, "peak_allocated_gb"), pr = jget(al, "peak_reserved_gb");
    char b[8][32];

    print_outcome(out, json_object_get(rep, "outcome"));
    fprintf(out, "  %-28s %s s, %s steps, %s rank(s)\n", "runtime",
            fmtnum(b[0], 32, "%.1f", jget(rep, "train_runtime")),
            fmtnum(b[1], 32, "%.0f", jget(rep, "steps")),
            fmtnum(b[2], 32, "%.0f", jget(rep, "ranks")));
    total_line(out, "throughput", !isnan(sps) || !isnan(tps), "%s samples/s, %s steps/s",
               fmtnum(b[0], 32, "%.3f", sps), fmtnum(b[1], 32, "%.3f", tps));
    print_efficiency(out, rep);
    total_line(out, "data loading time ratio", !isnan(jget(rep, "data_loading_time_ratio")),
               "%.3f of wall time (host clock)", jget(rep, "data_loading_time_ratio"));
    total_line(out, "communication time ratio", !isnan(jget(rep, "communication_time_ratio")),
               "%.3f of wall time (exposed)", jget(rep, "communication_time_ratio"));
    total_line(out, "GPU utilization", !isnan(ua) || !isnan(um), "avg %s %%, max %s %% (source %s)",
               fmtnum(b[0], 32, "%.1f", ua), fmtnum(b[1], 32, "%.1f", um),
               json_is_string(src) ? json_string_value(src) : "unknown");
    total_line(out, "step busy estimate", !isnan(jget(rep, "step_busy_estimate_percent")),
               "%.1f %% (forward+backward+optimizer of wall time, %s)",
               jget(rep, "step_busy_estimate_percent"),
               jtext(rep, "step_busy_estimate_source", "unknown"));
    total_line(out, "other time ratio", !isnan(jget(rep, "other_time_ratio")),
               "%.3f (wall time in no phase: logging, evaluation, host syncs)",
               jget(rep, "other_time_ratio"));
    total_line(out, "communication total", !isnan(jget(rep, "communication_total_seconds")),
               "%.3f s, %s hidden behind compute", jget(rep, "communication_total_seconds"),
               fmtnum(b[3], 32, "%.0f %%", 100.0 * jget(rep, "communication_hidden_ratio")));
    total_line(out, "GPU peak memory", !isnan(jget(rep, "gpu_peak_memory_allocated_gb")),
               "%.2f GiB (%s)", jget(rep, "gpu_peak_memory_allocated_gb"),
               jtext(rep, "gpu_peak_memory_source", "unknown"));
    if (jget(rep, "gpu_other_processes_max") > 0) /* a shared GPU: the device's figures */
        total_line(out, "shared GPU", 1,
                   "up to %.0f other process(es); whole device: peak memory %s GiB, "
                   "utilization %s %% (the run's processes: SM %s %%)",
                   jget(rep, "gpu_other_processes_max"),
                   fmtnum(b[0], 32, "%.2f", jget(rep, "gpu_peak_memory_device_gb")),
                   fmtnum(b[1], 32, "%.1f", jget(rep, "gpu_avg_utilization_percent")),
                   fmtnum(b[2], 32, "%.1f", jget(rep, "gpu_run_sm_utilization_avg_percent")));
    total_line(out, "allocator peaks", !isnan(pa) || !isnan(pr),
               "allocated %s GiB, reserved %s GiB, gap %s GiB", fmtnum(b[0], 32, "%.2f", pa),
               fmtnum(b[1], 32, "%.2f", pr),
               fmtnum(b[2], 32, "%.2f", jget(al, "fragmentation_gap_gb")));
    total_line(out, "energy", !isnan(jget(rep, "energy_joules")), "%.0f J",
               jget(rep, "energy_joules"));
    print_facts(out, json_object_get(rep, "facts"));
}

static void print_gpus(FILE *out, const json_t *rep, const struct paint *c)
{
    const json_t *gpus = json_object_get(rep, "gpus");
    size_t i;
    const json_t *g;
    char b[6][32];

    if (!json_array_size(gpus))
        return;
    fprintf(out, "  %s%-4s %-24s %8s %8s %11s %10s %10s %5s%s\n", c->bold, "gpu", "name",
            "util avg", "util max", "mem peak", "energy J", "throttle s", "idle", c->off);
    json_array_foreach(gpus, i, g)
    {
        const json_t *name = json_object_get(g, "name");
        fprintf(out, "  %-4.0f %-24.24s %7s%% %7s%% %7s GiB %10s %10s %5zu%s\n", jget(g, "index"),
                json_is_string(name) ? json_string_value(name) : "?",
                fmtnum(b[0], 32, "%.1f", jget(g, "utilization_avg_percent")),
                fmtnum(b[1], 32, "%.1f", jget(g, "utilization_max_percent")),
                fmtnum(b[2], 32, "%.2f", jget(g, "memory_peak_gb")),
                fmtnum(b[3], 32, "%.0f", jget(g, "energy_joules")),
                fmtnum(b[4], 32, "%.1f", jget(g, "throttled_seconds_total")),
                json_array_size(json_object_get(g, "idle_periods")),
                json_is_true(json_object_get(g, "lost")) ? "  LOST" : "");
    }
}

/* gpuscope run --profile: one line per rank of the window's analysis (docs/trace.md). */
static void print_profile(FILE *out, const json_t *rep, const struct paint *c)
{
    const json_t *p = json_object_get(rep, "profile"), *r;
    size_t i;

    char win[96] = "";

    if (!p)
        return;
    /* several windows: the figures below are the last one's, which the label names */
    if (jget(p, "windows") > 1 && jget(p, "window_first_step") > 0)
        snprintf(win, sizeof win, "; %.0f windows, the last (from step %.0f) analysed",
                 jget(p, "windows"), jget(p, "window_first_step"));
    fprintf(out, "%sprofile%s (steps %s%s, %s)\n", c->bold, c->off, jtext(p, "steps", "?"), win,
            json_is_string(json_object_get(p, "note")) ? jtext(p, "note", "")
                                                       : jtext(p, "dir", ""));
    json_array_foreach(json_object_get(p, "ranks"), i, r)
    {
        const json_t *t = json_object_get(r, "temporal");

        if (!t) {
            fprintf(out, "  rank %.0f: %s\n", jget(r, "rank"), jtext(r, "note", "no GPU activity"));
            continue;
        }
        fprintf(out,
                "  rank %.0f: GPU idle %.1f %%, compute %.1f %%, non-compute %.1f %% of %.0f us"
                " kernel span\n",
                jget(r, "rank"), jget(t, "idle_pct"), jget(t, "compute_pct"),
                jget(t, "non_compute_pct"), jget(t, "kernel_span_us"));
    }
}

static void print_findings(FILE *out, const json_t *rep, const struct paint *c)
{
    const json_t *fs = json_object_get(rep, "findings");
    size_t i, j;
    const json_t *f, *adv;

    if (!json_array_size(fs)) {
        fprintf(out, "findings: none\n");
        return;
    }
    fprintf(out, "%sfindings:%s\n", c->bold, c->off);
    json_array_foreach(fs, i, f)
    {
        const char *sev = jtext(f, "severity", NULL);
        const char *col = !sev                           ? ""
                          : strcmp(sev, "critical") == 0 ? c->crit
                          : strcmp(sev, "warning") == 0  ? c->warn
                                                         : c->info;
        fprintf(out, "  %s[%s]%s %s: %s\n", col, sev ? sev : "?", c->off, jtext(f, "id", "?"),
                jtext(f, "title", ""));
        json_array_foreach(json_object_get(f, "advice"), j, adv)
            fprintf(out, "      - %s\n", json_is_string(adv) ? json_string_value(adv) : "");
    }
}

/* The stacks section (gpuscope run --stacks) in two lines: the main threads' top functions
 * and, when a GPU was idle, what they did meanwhile. */
static void print_stacks(FILE *out, const json_t *rep, const struct paint *c)
{
    const json_t *st = json_object_get(rep, "stacks"), *g, *e;
    size_t i, j;

    if (!json_is_object(st) || !json_array_size(json_object_get(st, "top")))
        return;
    fprintf(out, "  %-28s", "main thread (stacks)");
    json_array_foreach(json_object_get(st, "top"), i, e)
    {
        if (i >= 3)
            break;
        fprintf(out, "%s%s %.0f %%", i ? ", " : "", jtext(e, "function", "?"),
                100 * jget(e, "own"));
    }
    fprintf(out, "%s\n", c->off);
    json_array_foreach(json_object_get(st, "gpu_idle"), i, g)
    {
        if (jget(g, "samples") < 1)
            continue;
        fprintf(out, "  %-28s", "");
        fprintf(out, "while GPU %.0f was idle (%.0f %% of the run): ", jget(g, "gpu"),
                100 * jget(g, "idle_fraction"));
        json_array_foreach(json_object_get(g, "top"), j, e)
        {
            if (j >= 2)
                break;
            fprintf(out, "%s%s %.0f %%", j ? ", " : "", jtext(e, "function", "?"),
                    100 * jget(e, "own"));
        }
        fputc('\n', out);
    }
}

void gs_report_print_summary(FILE *out, const json_t *report, int color)
{
    static const struct paint plain = {"", "", "", "", ""};
    static const struct paint ansi = {"\033[1m", "\033[33m", "\033[1;31m", "\033[36m", "\033[0m"};
    const struct paint *c = color ? &ansi : &plain;
    const char *name;

    if (!out || !report)
        return;
    name = json_string_value(json_object_get(json_object_get(report, "run"), "name"));
    fprintf(out, "%sgpuscope run summary%s%s%s\n", c->bold, name ? ": " : "", name ? name : "",
            c->off);
    print_totals(out, report);
    print_phases(out, report, c);
    print_ranks(out, report, c);
    print_gpus(out, report, c);
    print_stacks(out, report, c);
    print_profile(out, report, c);
    print_findings(out, report, c);
}
