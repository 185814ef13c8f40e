/*
 * job.c - the job document of the reports of a multi-node job's nodes (contract in job.h).
 * A node is one report: its name is run.node (the ranks' GPUSCOPE_NODE), else run.hostname,
 * else the run's label. A rank's GPU is the node's GPUS entry whose NVML index is the rank's
 * CUDA device (as the report's slowest_rank assumes), or the node's only GPU.
 */
#include "runview/job.h"

#include "base/straggler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double num(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorted in place; the mean of the middle two when n is even, as
 * PromQL's quantile does). */
static double median(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Rows (objects) or rank numbers ordered by rank. */
static int cmp_rank(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t rx = json_integer_value(json_is_object(x) ? json_object_get(x, "rank") : x);
    json_int_t ry = json_integer_value(json_is_object(y) ? json_object_get(y, "rank") : y);
    return (rx > ry) - (rx < ry);
}

/* arr sorted by rank (a new reference; arr's own is released), NULL when out of memory. */
static json_t *sorted_by_rank(json_t *arr)
{
    size_t n = json_array_size(arr);
    json_t **v = malloc((n ? n : 1) * sizeof *v), *out = json_array();

    if (!v || !out) {
        free(v);
        json_decref(out);
        json_decref(arr);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(arr, i);
    qsort(v, n, sizeof v[0], cmp_rank);
    for (size_t i = 0; i < n; i++)
        json_array_append(out, v[i]);
    free(v);
    json_decref(arr);
    return out;
}

static const char *node_name(const struct gs_rundata *rd)
{
    const json_t *run = json_object_get(rd->report, "run");
    const char *s = json_string_value(json_object_get(run, "node"));

    if (!s || !*s)
        s = json_string_value(json_object_get(run, "hostname"));
    return s && *s ? s : rd->label;
}

/* The GPUS entry of a rank's CUDA device in its node's report, or NULL. */
static json_t *rank_gpu(const struct gs_rundata *rd, const json_t *rank)
{
    json_t *gpus = json_object_get(rd->report, "gpus"), *g;
    json_int_t dev = json_integer_value(json_object_get(rank, "device"));
    size_t i;

    if (!json_is_array(gpus))
        return NULL;
    json_array_foreach(gpus, i,
                       g) if (json_is_integer(json_object_get(rank, "device")) &&
                              json_integer_value(json_object_get(g, "index")) == dev) return g;
    return json_array_size(gpus) == 1 ? json_array_get(gpus, 0) : NULL;
}

/* Communication a rank waited for: its exposed part when measured, else all of it. */
static double comm_ms(const json_t *mean)
{
    double x = num(json_object_get(mean, "communication_exposed"));
    return isfinite(x) ? x : num(json_object_get(mean, "communication"));
}

/* The evidence about a GPU: {"gpu", "name", "throttled_seconds_total", "throttle_reasons":
 * {reason: s > 0}, clocks, temperature, PCIe link}. */
static json_t *gpu_evidence(const json_t *g)
{
    json_t *o = json_object(), *reasons = json_object(), *v;
    const char *k;

    json_object_set(o, "gpu", json_object_get(g, "index"));
    json_object_set(o, "name", json_object_get(g, "name"));
    json_object_set(o, "throttled_seconds_total", json_object_get(g, "throttled_seconds_total"));
    json_object_foreach(json_object_get(g, "throttled_seconds"), k, v) if (num(v) > 0)
        json_object_set(reasons, k, v);
    json_object_set_new(o, "throttle_reasons", reasons);
    static const char *const keep[] = {
        "clock_sm_avg_mhz",  "clock_sm_min_mhz",        "clock_sm_max_mhz",
        "temperature_max_c", "utilization_avg_percent", "pcie_link_gen_min",
        "pcie_link_gen_max", "pcie_link_width_min",     "pcie_link_width_max"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        json_t *x = json_object_get(g, keep[i]);
        json_object_set(o, keep[i], x ? x : json_null());
    }
    return o;
}

/* Each rank's figures, in the order of the job's rank rows: busy (the step less the
 * communication waited for), data and communication waited for, in ms (NaN: unknown). */
struct rank_figs {
    double *busy, *data, *comm;
    size_t n, cap;
};

static int figs_add(struct rank_figs *f, double busy, double data, double comm)
{
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 64;
        double *a = realloc(f->busy, nc * sizeof *a), *b, *c;
        if (!a)
            return -1;
        f->busy = a;
        b = realloc(f->data, nc * sizeof *b);
        if (!b)
            return -1;
        f->data = b;
        c = realloc(f->comm, nc * sizeof *c);
        if (!c)
            return -1;
        f->comm = c;
        f->cap = nc;
    }
    f->busy[f->n] = busy;
    f->data[f->n] = data;
    f->comm[f->n] = comm;
    f->n++;
    return 0;
}

static void figs_free(struct rank_figs *f)
{
    free(f->busy);
    free(f->data);
    free(f->comm);
}

/* The median of the finite values of v[0..n) (v is left as it was). */
static double finite_median(const double *v, size_t n)
{
    double *t = malloc((n ? n : 1) * sizeof *t), m;
    size_t k = 0;

    if (!t)
        return NAN;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            t[k++] = v[i];
    m = median(t, k);
    free(t);
    return m;
}

/* A rank's busy time: the report's median over its steps (busy_p50_ms), else (a report of an
 * older gpuscope) its median step less its mean communication waited for. */
static double rank_busy(const json_t *r)
{
    double b = num(json_object_get(r, "busy_p50_ms")), p50 = num(json_object_get(r, "step_p50_ms"));
    double c = comm_ms(json_object_get(r, "mean_ms"));

    if (isfinite(b))
        return b;
    return isfinite(c) ? fmax(0.0, p50 - c) : p50;
}

/* The communication a rank waited for per step: the report's median (comm_wait_p50_ms), else
 * its mean. */
static double rank_wait(const json_t *r)
{
    double w = num(json_object_get(r, "comm_wait_p50_ms"));
    return isfinite(w) ? w : comm_ms(json_object_get(r, "mean_ms"));
}

/* A rank's row of the job document (rank, node, run, device, gpu, steps, step and busy times,
 * data and communication waited for, samples/s, tokens/s, MFU); *busy its busy time. NULL when
 * out of memory. */
static json_t *rank_row(const struct gs_rundata *rd, size_t run, const json_t *r, double *busy)
{
    double p50 = num(json_object_get(r, "step_p50_ms"));
    json_t *row = json_object(), *gpu = rank_gpu(rd, r);
    const json_t *mean = json_object_get(r, "mean_ms");

    if (!row)
        return NULL;
    json_object_set(row, "rank", json_object_get(r, "rank"));
    json_object_set_new(row, "node", json_string(node_name(rd)));
    json_object_set_new(row, "run", json_integer((json_int_t)run));
    json_object_set(row, "device", json_object_get(r, "device"));
    json_object_set(row, "gpu", gpu ? json_object_get(gpu, "index") : json_null());
    json_object_set(row, "steps", json_object_get(r, "steps"));
    json_object_set_new(row, "step_p50_ms", jnum(p50));
    json_object_set(row, "step_p95_ms", json_object_get(r, "step_p95_ms"));
    json_object_set_new(row, "data_ms", jnum(num(json_object_get(mean, "data"))));
    json_object_set_new(row, "communication_ms", jnum(rank_wait(r)));
    /* busy: the step less the communication waited for (the straggler computes longest; in
     * synchronous training every rank's step lasts as long) */
    *busy = rank_busy(r);
    json_object_set_new(row, "busy_ms", jnum(*busy));
    json_object_set(row, "samples_per_second", json_object_get(r, "samples_per_second"));
    /* its tokens/s and MFU (docs/report.md, TOKENS AND MFU), null in reports without them */
    json_object_set_new(row, "tokens_per_second",
                        jnum(num(json_object_get(r, "tokens_per_second"))));
    json_object_set_new(row, "mfu", jnum(num(json_object_get(r, "mfu"))));
    return row;
}

/* Adds job to jobs unless it is there. */
static void add_job(json_t *jobs, const char *job)
{
    size_t k;
    json_t *j;

    if (!job)
        return;
    json_array_foreach(jobs, k, j) if (strcmp(json_string_value(j), job) == 0) return;
    json_array_append_new(jobs, json_string(job));
}

/* One node's entry (a report), its ranks' rows appended to ranks and their figures to f. NULL
 * when out of memory. */
static json_t *node_doc(const struct gs_rundata *rd, size_t run, json_t *ranks, struct rank_figs *f)
{
    const json_t *rep = rd->report, *per = json_object_get(rep, "per_rank"), *r;
    const char *job = json_string_value(json_object_get(json_object_get(rep, "run"), "job"));
    json_t *node = json_object(), *nranks = json_array(), *ngpus = json_array(), *g;
    double thr = 0, np50[1024], sps = json_array_size(per) ? 0 : NAN;
    size_t k, nn = 0;
    int thr_known = 0;

    if (!node || !nranks || !ngpus)
        goto oom;
    json_array_foreach(per, k, r)
    {
        double busy, p50 = num(json_object_get(r, "step_p50_ms"));
        const json_t *mean = json_object_get(r, "mean_ms");
        json_t *row = rank_row(rd, run, r, &busy);
        if (!row || figs_add(f, busy, num(json_object_get(mean, "data")), rank_wait(r)) < 0) {
            json_decref(row);
            goto oom;
        }
        json_array_append_new(ranks, row);
        json_array_append(nranks, json_object_get(r, "rank"));
        sps += num(json_object_get(r, "samples_per_second")); /* NaN when one is unknown */
        if (isfinite(p50) && nn < sizeof np50 / sizeof np50[0])
            np50[nn++] = p50;
    }
    json_array_foreach(json_object_get(rep, "gpus"), k, g)
    {
        if (isfinite(num(json_object_get(g, "throttled_seconds_total")))) {
            thr += num(json_object_get(g, "throttled_seconds_total"));
            thr_known = 1;
        }
        json_array_append_new(ngpus, gpu_evidence(g));
    }
    json_object_set_new(node, "node", json_string(node_name(rd)));
    json_object_set_new(node, "origin", json_string(rd->origin ? rd->origin : ""));
    json_object_set_new(node, "job", job ? json_string(job) : json_null());
    json_object_set_new(node, "ranks", sorted_by_rank(nranks));
    json_object_set(node, "steps", json_object_get(rep, "steps"));
    json_object_set_new(node, "step_p50_ms", jnum(median(np50, nn)));
    json_object_set(node, "data_loading_time_ratio",
                    json_object_get(rep, "data_loading_time_ratio"));
    json_object_set(node, "communication_time_ratio",
                    json_object_get(rep, "communication_time_ratio"));
    json_object_set_new(node, "throttled_seconds", thr_known ? json_real(thr) : json_null());
    /* the node's throughput: its ranks' own samples/s summed (a framework's job-wide figure,
     * HF's train_samples_per_second, would count the other nodes' samples too) */
    json_object_set_new(node, "samples_per_second", jnum(sps));
    json_object_set_new(node, "gpus", ngpus);
    return node;
oom:
    json_decref(node);
    json_decref(nranks);
    json_decref(ngpus);
    return NULL;
}

/* The straggler's entry: the rank row worst, its figures against the other ranks' (st), its
 * GPU's evidence and the likeliest cause. */
static json_t *straggler_doc(const struct gs_rundata *runs, const json_t *worst,
                             const struct gs_straggler *st, double data_median)
{
    json_t *s = json_object();
    size_t k, run = (size_t)json_integer_value(json_object_get(worst, "run"));
    json_t *g = NULL, *per = json_object_get(runs[run].report, "per_rank"), *r;
    double dw = num(json_object_get(worst, "data_ms"));
    const char *cause;

    if (!s)
        return NULL;
    json_array_foreach(
        per, k, r) if (json_equal(json_object_get(r, "rank"), json_object_get(worst, "rank"))) g =
        rank_gpu(&runs[run], r);
    json_object_set(s, "rank", json_object_get(worst, "rank"));
    json_object_set(s, "node", json_object_get(worst, "node"));
    json_object_set(s, "step_p50_ms", json_object_get(worst, "step_p50_ms"));
    json_object_set(s, "busy_ms", json_object_get(worst, "busy_ms"));
    json_object_set_new(s, "others_busy_ms", jnum(st->others_ms));
    json_object_set_new(s, "ratio_to_others", jnum(st->ratio));
    json_object_set(s, "data_ms", json_object_get(worst, "data_ms"));
    json_object_set(s, "communication_ms", json_object_get(worst, "communication_ms"));
    json_object_set_new(s, "others_communication_ms", jnum(st->others_wait_ms));
    json_object_set_new(s, "gpu", g ? gpu_evidence(g) : json_null());
    /* the likeliest cause, from the evidence: its GPU held down, waiting for data, or slower
     * compute (it waits least on the collectives: the others wait for it) */
    cause = g && num(json_object_get(g, "throttled_seconds_total")) > 0         ? "gpu_throttled"
            : isfinite(dw) && isfinite(data_median) && dw > 2 * data_median + 1 ? "data_loading"
                                                                                : "slower_compute";
    json_object_set_new(s, "cause", json_string(cause));
    return s;
}

json_t *gs_job_doc(const struct gs_rundata *runs, size_t n)
{
    json_t *doc = json_object(), *nodes = json_array(), *ranks = json_array(), *jobs = json_array();
    json_t *row, *s = NULL;
    struct rank_figs f = {0};
    struct gs_straggler_rank *sr = NULL;
    struct gs_straggler st;
    double busy_median, data_median, sps = 0, *p50 = NULL;
    size_t k;

    if (!doc || !nodes || !ranks || !jobs)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        json_t *node = node_doc(&runs[i], i, ranks, &f);
        if (!node)
            goto oom;
        add_job(jobs,
                json_string_value(json_object_get(json_object_get(runs[i].report, "run"), "job")));
        /* the job's throughput: every node counts its own ranks' samples */
        sps = isfinite(sps) && json_is_number(json_object_get(node, "samples_per_second"))
                  ? sps + num(json_object_get(node, "samples_per_second"))
                  : NAN;
        json_array_append_new(nodes, node);
    }
    /* the job's medians: over the ranks with a figure */
    busy_median = finite_median(f.busy, f.n);
    data_median = finite_median(f.data, f.n);
    /* each rank over the median of the others; the straggler: src/base/straggler.c's rule */
    sr = malloc((f.n ? f.n : 1) * sizeof *sr);
    if (!sr)
        goto oom;
    for (k = 0; k < f.n; k++)
        sr[k] = (struct gs_straggler_rank){f.busy[k], f.comm[k]};
    json_array_foreach(ranks, k, row)
    {
        double ratio;
        if (gs_straggler_ratio(sr, f.n, k, &ratio) < 0)
            goto oom;
        json_object_set_new(row, "ratio_to_others", jnum(ratio));
    }
    if (gs_straggler_find(sr, f.n, &st) < 0)
        goto oom;
    json_object_set_new(doc, "job",
                        json_array_size(jobs) == 1 ? json_incref(json_array_get(jobs, 0))
                                                   : json_null());
    json_object_set_new(doc, "jobs_seen", jobs);
    jobs = NULL;
    p50 = malloc((f.n ? f.n : 1) * sizeof *p50);
    if (!p50)
        goto oom;
    json_array_foreach(ranks, k, row) p50[k] = num(json_object_get(row, "step_p50_ms"));
    json_object_set_new(doc, "median_step_p50_ms", jnum(finite_median(p50, f.n)));
    json_object_set_new(doc, "median_busy_ms", jnum(busy_median));
    json_object_set_new(doc, "median_data_ms", jnum(data_median));
    json_object_set_new(doc, "median_communication_ms", jnum(finite_median(f.comm, f.n)));
    json_object_set_new(doc, "straggler_ratio", json_real(GS_STRAGGLER_RATIO));
    json_object_set_new(doc, "straggler_min_gap_ms", json_real(GS_STRAGGLER_MIN_GAP_MS));
    json_object_set_new(doc, "samples_per_second", jnum(sps));
    if (st.idx >= 0 && st.straggler) {
        s = straggler_doc(runs, json_array_get(ranks, (size_t)st.idx), &st, data_median);
        if (!s)
            goto oom;
    }
    json_object_set_new(doc, "straggler", s ? s : json_null());
    json_object_set_new(doc, "nodes", nodes);
    json_object_set_new(doc, "ranks", sorted_by_rank(ranks));
    figs_free(&f);
    free(p50);
    free(sr);
    return doc;
oom:
    json_decref(doc);
    json_decref(nodes);
    json_decref(ranks);
    json_decref(jobs);
    figs_free(&f);
    free(p50);
    free(sr);
    return NULL;
}
