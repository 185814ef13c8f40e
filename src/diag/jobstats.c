/*
 * jobstats.c - the end-of-job summary's arithmetic and its notes (jobstats.h). The rules read
 * the summary into one struct per GPU first, so each rule reads like its condition; a rule whose
 * inputs are unknown (null in the summary) stays silent.
 */
#include "diag/jobstats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

double gs_jobstats_quantile(const double *sorted, size_t n, double q)
{
    double pos, frac;
    size_t lo;

    if (n == 0)
        return NAN;
    if (q <= 0)
        return sorted[0];
    if (q >= 1)
        return sorted[n - 1];
    pos = q * (double)(n - 1);
    lo = (size_t)pos;
    frac = pos - (double)lo;
    if (lo + 1 >= n)
        return sorted[n - 1];
    return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

json_t *gs_jobstats_util(const json_t *points)
{
    size_t n = 0, i;
    const json_t *p;
    double *v, sum = 0, first_busy = NAN;
    json_t *out;

    if (!json_is_array(points) || json_array_size(points) == 0)
        return NULL;
    v = malloc(json_array_size(points) * sizeof *v);
    if (!v)
        return NULL;
    json_array_foreach(points, i, p)
    {
        const json_t *t = json_array_get(p, 0), *avg = json_array_get(p, 2);
        double a;
        if (!json_is_number(avg) || !json_is_number(t))
            continue;
        a = json_number_value(avg);
        if (!(a >= 0 && a <= 1)) /* not a utilization ratio (NaN too) */
            continue;
        v[n++] = a;
        sum += a;
        if (isnan(first_busy) && a >= GS_JOBSTATS_BUSY_MIN)
            first_busy = json_number_value(t);
    }
    if (n == 0) {
        free(v);
        return NULL;
    }
    qsort(v, n, sizeof *v, cmp_double);
    out = json_pack("{s:f, s:f, s:f, s:f, s:I, s:o}", "mean", sum / (double)n, "p25",
                    gs_jobstats_quantile(v, n, 0.25), "p50", gs_jobstats_quantile(v, n, 0.5), "p75",
                    gs_jobstats_quantile(v, n, 0.75), "points", (json_int_t)n, "first_busy",
                    isnan(first_busy) ? json_null() : json_real(first_busy));
    free(v);
    return out;
}

/* One GPU of the summary, NAN where the summary has null. */
struct js_gpu {
    const char *node;
    long gpu;
    double held, idle, first_seen, util, first_busy, peak, total;
    int mig; /* a MIG instance: its memory is the slice's */
};

struct js_in {
    struct js_gpu *g;
    size_t n;
    int multi_node;
    double to;
};

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int read_in(const json_t *summary, struct js_in *in)
{
    const json_t *nodes = json_object_get(summary, "nodes"), *node, *gpu;
    size_t i, j, cap = 0;
    double longest = 0;

    memset(in, 0, sizeof *in);
    in->to = num(summary, "to");
    in->multi_node = json_array_size(nodes) > 1;
    json_array_foreach(nodes, i, node)
    {
        cap += json_array_size(json_object_get(node, "gpus"));
    }
    if (cap == 0)
        return 0;
    in->g = calloc(cap, sizeof *in->g);
    if (!in->g)
        return -1;
    json_array_foreach(nodes, i, node)
    {
        const char *name = json_string_value(json_object_get(node, "node"));
        json_array_foreach(json_object_get(node, "gpus"), j, gpu)
        {
            struct js_gpu *g = &in->g[in->n];
            const json_t *mem = json_object_get(gpu, "memory");
            const json_t *util = json_object_get(gpu, "utilization");
            g->node = name ? name : "?";
            g->gpu = (long)json_integer_value(json_object_get(gpu, "gpu"));
            g->held = num(gpu, "held_s");
            g->idle = num(gpu, "idle_held_s");
            g->first_seen = num(gpu, "first_seen");
            g->util = num(util, "mean");
            g->first_busy = num(util, "first_busy");
            g->peak = num(mem, "peak_bytes");
            g->total = num(mem, "total_bytes");
            g->mig = json_is_true(json_object_get(gpu, "mig"));
            if (isfinite(g->held) && !(g->held <= longest))
                longest = g->held;
            in->n++;
        }
    }
    /* judged only when held long enough: GPUs the job barely touched drop out */
    for (i = j = 0; i < in->n; i++)
        if (in->g[i].held >= GS_JOBSTATS_MIN_HELD_SHARE * longest)
            in->g[j++] = in->g[i];
    in->n = j;
    return 0;
}

static void gpu_name(const struct js_in *in, const struct js_gpu *g, char *out, size_t len)
{
    if (in->multi_node)
        snprintf(out, len, "%s GPU %ld", g->node, g->gpu);
    else
        snprintf(out, len, "GPU %ld", g->gpu);
}

static int is_idle(const struct js_gpu *g)
{
    return g->held > 0 && g->idle / g->held >= GS_JOBSTATS_IDLE_SHARE;
}

static void fmt_span(char *out, size_t len, double s)
{
    if (s < 90)
        snprintf(out, len, "%.0f seconds", s);
    else if (s < 5400)
        snprintf(out, len, "%.0f minutes", s / 60);
    else
        snprintf(out, len, "%.1f hours", s / 3600);
}

static json_t *gpu_ref(const struct js_in *in, const struct js_gpu *g)
{
    return in->multi_node ? json_pack("{s:s, s:I}", "node", g->node, "gpu", (json_int_t)g->gpu)
                          : json_integer(g->gpu);
}

/* idle_gpus / all_idle */
static void rule_idle(const struct js_in *in, json_t *out)
{
    size_t idle = 0, i;
    char list[512] = "", name[160];
    size_t used = 0;
    json_t *f, *gpus = json_array();
    double held = 0, idle_s = 0;

    for (i = 0; i < in->n; i++) {
        const struct js_gpu *g = &in->g[i];
        if (!isfinite(g->idle) || !isfinite(g->held))
            continue;
        held += g->held;
        idle_s += g->idle;
        if (!is_idle(g))
            continue;
        idle++;
        json_array_append_new(gpus, gpu_ref(in, g));
        gpu_name(in, g, name, sizeof name);
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s %.0f %%",
                                     idle > 1 ? ", " : "", name, 100 * g->idle / g->held);
    }
    if (idle == 0) {
        json_decref(gpus);
        return;
    }
    if (idle == in->n) {
        f = gs_diag_finding("all_idle", "critical",
                            "The job's %zu GPU%s %s idle %.0f %% of the time %s held", idle,
                            idle == 1 ? "" : "s", idle == 1 ? "was" : "were", 100 * idle_s / held,
                            idle == 1 ? "it was" : "they were");
        gs_diag_advise(f, "check that the job runs on the GPU at all (the model and the data "
                          "moved to cuda, CUDA_VISIBLE_DEVICES), or run it without GPUs");
    } else if (idle == 1) {
        const struct js_gpu *g = NULL;
        for (i = 0; i < in->n && !g; i++)
            if (isfinite(in->g[i].idle) && isfinite(in->g[i].held) && is_idle(&in->g[i]))
                g = &in->g[i];
        gpu_name(in, g, name, sizeof name);
        f = gs_diag_finding("idle_gpus", "warning", "%s was idle %.0f %% of the job", name,
                            100 * g->idle / g->held);
        gs_diag_advise(f, "ask for fewer GPUs");
    } else {
        f = gs_diag_finding("idle_gpus", "warning",
                            "%zu of the job's %zu GPUs were idle most of the job (%s)", idle, in->n,
                            list);
        gs_diag_advise(f, "ask for fewer GPUs (%zu did the work)", in->n - idle);
    }
    gs_diag_evidence(f, "gpus", gpus);
    gs_diag_evidence(f, "idle_held_s", json_real(idle_s));
    gs_diag_evidence(f, "held_s", json_real(held));
    json_array_append_new(out, f);
}

/* late_start */
static void rule_late_start(const struct js_in *in, json_t *out)
{
    double start = NAN, first = NAN, dur, delay;
    char span[64];
    json_t *f;

    for (size_t i = 0; i < in->n; i++) {
        const struct js_gpu *g = &in->g[i];
        if (isfinite(g->first_seen) && !(g->first_seen >= start))
            start = g->first_seen;
        if (isfinite(g->first_busy) && !(g->first_busy >= first))
            first = g->first_busy;
    }
    if (!isfinite(start) || !isfinite(first) || !isfinite(in->to))
        return;
    dur = in->to - start;
    delay = first - start;
    if (!(delay >= GS_JOBSTATS_LATE_START_S && dur > 0 &&
          delay / dur >= GS_JOBSTATS_LATE_START_SHARE))
        return;
    fmt_span(span, sizeof span, delay);
    f = gs_diag_finding("late_start", "warning",
                        "The job held %zu GPU%s for %s before its first CUDA work", in->n,
                        in->n == 1 ? "" : "s", span);
    gs_diag_advise(f, "prepare the data and load the model before the GPUs are allocated (a CPU "
                      "step first), or cache the preprocessed dataset");
    gs_diag_evidence(f, "start", json_real(start));
    gs_diag_evidence(f, "first_busy", json_real(first));
    gs_diag_evidence(f, "delay_s", json_real(delay));
    json_array_append_new(out, f);
}

/* small_memory / memory_full */
static void rule_memory(const struct js_in *in, json_t *out)
{
    const struct js_gpu *top = NULL;
    char name[160];
    json_t *f;

    for (size_t i = 0; i < in->n; i++) {
        const struct js_gpu *g = &in->g[i];
        if (!isfinite(g->peak) || !(g->total > 0))
            return; /* one GPU unknown: its peak may be the large one */
        if (!top || g->peak / g->total > top->peak / top->total)
            top = g;
        if (g->peak / g->total >= GS_JOBSTATS_FULL_MEMORY) {
            gpu_name(in, g, name, sizeof name);
            f = gs_diag_finding("memory_full", "warning",
                                "Peak memory %.0f %% of %s (%.1f GiB of %.1f GiB)",
                                100 * g->peak / g->total, name, g->peak / GIB, g->total / GIB);
            gs_diag_advise(f, "close to out of memory: a smaller micro-batch, activation "
                              "checkpointing or a GPU with more memory gives room");
            gs_diag_evidence(f, "gpus", json_pack("[o]", gpu_ref(in, g)));
            gs_diag_evidence(f, "peak_bytes", json_real(g->peak));
            gs_diag_evidence(f, "total_bytes", json_real(g->total));
            json_array_append_new(out, f);
        }
    }
    /* a MIG instance is already a slice: no smaller one to advise */
    if (!top || top->mig || top->peak / top->total >= GS_JOBSTATS_SMALL_MEMORY)
        return;
    f = gs_diag_finding("small_memory", "info",
                        "Peak memory %s%.0f %% of the GPU (%.1f GiB of %.0f GiB)",
                        in->n > 1 ? "at most " : "", 100 * top->peak / top->total, top->peak / GIB,
                        top->total / GIB);
    gs_diag_advise(f, "a MIG slice or a smaller GPU would do");
    gs_diag_evidence(f, "peak_bytes", json_real(top->peak));
    gs_diag_evidence(f, "total_bytes", json_real(top->total));
    json_array_append_new(out, f);
}

/* low_utilization / imbalance, over the GPUs not idle */
static void rule_util(const struct js_in *in, json_t *out)
{
    const struct js_gpu *lo = NULL, *hi = NULL;
    double sum = 0;
    size_t n = 0;
    char a[160], b[160];
    json_t *f;

    for (size_t i = 0; i < in->n; i++) {
        const struct js_gpu *g = &in->g[i];
        if (!isfinite(g->util) || (isfinite(g->idle) && is_idle(g)))
            continue;
        sum += g->util;
        n++;
        if (!lo || g->util < lo->util)
            lo = g;
        if (!hi || g->util > hi->util)
            hi = g;
    }
    if (n == 0)
        return;
    if (sum / (double)n < GS_JOBSTATS_LOW_UTIL) {
        f = gs_diag_finding("low_utilization", "warning",
                            "GPU utilization averaged %.0f %% on the %zu GPU%s in use",
                            100 * sum / (double)n, n, n == 1 ? "" : "s");
        gs_diag_advise(f, "the GPUs waited most of the time: `gpuscope run -- CMD` shows whether "
                          "data loading, communication or the host holds them up");
        gs_diag_evidence(f, "mean", json_real(sum / (double)n));
        json_array_append_new(out, f);
    }
    if (n >= 2 && hi->util - lo->util > GS_JOBSTATS_IMBALANCE) {
        gpu_name(in, hi, a, sizeof a);
        gpu_name(in, lo, b, sizeof b);
        f = gs_diag_finding("imbalance", "warning",
                            "Utilization uneven across the GPUs: %s %.0f %%, %s %.0f %%", a,
                            100 * hi->util, b, 100 * lo->util);
        gs_diag_advise(f, "the work is not spread evenly (device_map=\"auto\" placement, uneven "
                          "shards): `gpuscope compare --job` on the ranks' run directories names "
                          "the slow rank");
        gs_diag_evidence(f, "gpus", json_pack("[o, o]", gpu_ref(in, hi), gpu_ref(in, lo)));
        gs_diag_evidence(f, "spread", json_real(hi->util - lo->util));
        json_array_append_new(out, f);
    }
}

json_t *gs_jobstats_notes(const json_t *summary)
{
    struct js_in in;
    json_t *out = json_array();

    if (!out || read_in(summary, &in) != 0) {
        json_decref(out);
        return NULL;
    }
    if (in.n > 0) {
        rule_idle(&in, out);
        rule_late_start(&in, out);
        rule_memory(&in, out);
        rule_util(&in, out);
    }
    free(in.g);
    return out;
}
