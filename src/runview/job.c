/*
 * job.c - the job document of the reports of a multi-node job's nodes (contract in job.h).
 * A node is one report: its name is run.node (the ranks' GPUSCOPE_NODE), else run.hostname,
 * else the run's label. A rank's GPU is the node's GPUS entry whose NVML index is the rank's
 * CUDA device (as the report's slowest_rank assumes), or the node's only GPU.
 */
#include "runview/job.h"

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

json_t *gs_job_doc(const struct gs_rundata *runs, size_t n)
{
    json_t *doc = json_object(), *nodes = json_array(), *ranks = json_array(), *jobs = json_array();
    double *p50s = NULL, *datas = NULL, *comms = NULL, job_median, data_median, comm_median;
    size_t nr = 0, cap = 0;

    if (!doc || !nodes || !ranks || !jobs)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        const json_t *rep = runs[i].report, *per = json_object_get(rep, "per_rank"), *r;
        const char *job = json_string_value(json_object_get(json_object_get(rep, "run"), "job"));
        json_t *node = json_object(), *nranks = json_array(), *ngpus = json_array(), *g;
        double thr = 0, np50[1024];
        size_t k, nn = 0;
        int thr_known = 0;

        if (!node || !nranks || !ngpus)
            goto oom;
        if (job) {
            int seen = 0;
            json_t *j;
            json_array_foreach(jobs, k, j) seen |= strcmp(json_string_value(j), job) == 0;
            if (!seen)
                json_array_append_new(jobs, json_string(job));
        }
        json_array_foreach(per, k, r)
        {
            double p50 = num(json_object_get(r, "step_p50_ms"));
            json_t *row = json_object(), *gpu = rank_gpu(&runs[i], r);
            const json_t *mean = json_object_get(r, "mean_ms");
            if (!row)
                goto oom;
            json_object_set(row, "rank", json_object_get(r, "rank"));
            json_object_set_new(row, "node", json_string(node_name(&runs[i])));
            json_object_set_new(row, "run", json_integer((json_int_t)i));
            json_object_set(row, "device", json_object_get(r, "device"));
            json_object_set(row, "gpu", gpu ? json_object_get(gpu, "index") : json_null());
            json_object_set(row, "steps", json_object_get(r, "steps"));
            json_object_set_new(row, "step_p50_ms", jnum(p50));
            json_object_set(row, "step_p95_ms", json_object_get(r, "step_p95_ms"));
            json_object_set_new(row, "data_ms", jnum(num(json_object_get(mean, "data"))));
            json_object_set_new(row, "communication_ms", jnum(comm_ms(mean)));
            /* busy: the step less the communication waited for (the straggler computes
             * longest; in synchronous training every rank's step lasts as long) */
            double busy = isfinite(comm_ms(mean)) ? fmax(0.0, p50 - comm_ms(mean)) : p50;
            json_object_set_new(row, "busy_ms", jnum(busy));
            json_object_set(row, "samples_per_second", json_object_get(r, "samples_per_second"));
            json_array_append_new(ranks, row);
            json_array_append(nranks, json_object_get(r, "rank"));
            if (nr == cap) {
                size_t nc = cap ? cap * 2 : 64;
                double *a = realloc(p50s, nc * sizeof *a), *b, *c;
                if (a)
                    p50s = a;
                b = a ? realloc(datas, nc * sizeof *b) : NULL;
                if (b)
                    datas = b;
                c = b ? realloc(comms, nc * sizeof *c) : NULL;
                if (!c)
                    goto oom;
                comms = c;
                cap = nc;
            }
            p50s[nr] = busy;
            datas[nr] = num(json_object_get(mean, "data"));
            comms[nr] = comm_ms(mean);
            nr++;
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
        json_object_set_new(node, "node", json_string(node_name(&runs[i])));
        json_object_set_new(node, "origin", json_string(runs[i].origin ? runs[i].origin : ""));
        json_object_set_new(node, "job", job ? json_string(job) : json_null());
        json_object_set_new(node, "ranks", sorted_by_rank(nranks));
        json_object_set(node, "steps", json_object_get(rep, "steps"));
        json_object_set_new(node, "step_p50_ms", jnum(median(np50, nn)));
        json_object_set(node, "data_loading_time_ratio",
                        json_object_get(rep, "data_loading_time_ratio"));
        json_object_set(node, "communication_time_ratio",
                        json_object_get(rep, "communication_time_ratio"));
        json_object_set_new(node, "throttled_seconds", thr_known ? json_real(thr) : json_null());
        json_object_set_new(node, "gpus", ngpus);
        json_array_append_new(nodes, node);
    }
    /* the job's medians: over the ranks with a figure */
    {
        double *t = malloc((nr ? nr : 1) * 3 * sizeof *t);
        size_t a = 0, b = 0, c = 0;
        if (!t)
            goto oom;
        for (size_t i = 0; i < nr; i++) {
            if (isfinite(p50s[i]))
                t[a++] = p50s[i];
        }
        job_median = median(t, a); /* of the ranks' busy times */
        for (size_t i = 0; i < nr; i++)
            if (isfinite(datas[i]))
                t[nr + b++] = datas[i];
        data_median = median(t + nr, b);
        for (size_t i = 0; i < nr; i++)
            if (isfinite(comms[i]))
                t[2 * nr + c++] = comms[i];
        comm_median = median(t + 2 * nr, c);
        free(t);
    }
    /* each rank over the median; the straggler: the highest ratio above the threshold */
    json_t *row, *worst = NULL;
    double worst_ratio = 0;
    size_t k;
    json_array_foreach(ranks, k, row)
    {
        double ratio = job_median > 0 ? p50s[k] / job_median : NAN;
        json_object_set_new(row, "ratio_to_median", jnum(ratio));
        if (isfinite(ratio) && ratio > worst_ratio) {
            worst_ratio = ratio;
            worst = row;
        }
    }
    json_object_set_new(doc, "job",
                        json_array_size(jobs) == 1 ? json_incref(json_array_get(jobs, 0))
                                                   : json_null());
    json_object_set_new(doc, "jobs_seen", jobs);
    jobs = NULL;
    {
        double *t = malloc((nr ? nr : 1) * sizeof *t);
        size_t a = 0;
        json_t *rw;
        if (!t)
            goto oom;
        json_array_foreach(ranks, k, rw) if (isfinite(num(json_object_get(rw, "step_p50_ms"))))
            t[a++] = num(json_object_get(rw, "step_p50_ms"));
        json_object_set_new(doc, "median_step_p50_ms", jnum(median(t, a)));
        free(t);
    }
    json_object_set_new(doc, "median_busy_ms", jnum(job_median));
    json_object_set_new(doc, "median_data_ms", jnum(data_median));
    json_object_set_new(doc, "median_communication_ms", jnum(comm_median));
    json_object_set_new(doc, "straggler_ratio", json_real(GS_JOB_STRAGGLER_RATIO));
    if (worst && nr >= 2 && worst_ratio > GS_JOB_STRAGGLER_RATIO) {
        json_t *s = json_object();
        size_t run = (size_t)json_integer_value(json_object_get(worst, "run"));
        json_t *g = NULL, *per = json_object_get(runs[run].report, "per_rank"), *r;
        json_array_foreach(
            per, k, r) if (json_equal(json_object_get(r, "rank"), json_object_get(worst, "rank")))
            g = rank_gpu(&runs[run], r);
        json_object_set(s, "rank", json_object_get(worst, "rank"));
        json_object_set(s, "node", json_object_get(worst, "node"));
        json_object_set(s, "step_p50_ms", json_object_get(worst, "step_p50_ms"));
        json_object_set(s, "busy_ms", json_object_get(worst, "busy_ms"));
        json_object_set_new(s, "ratio_to_median", json_real(worst_ratio));
        json_object_set(s, "data_ms", json_object_get(worst, "data_ms"));
        json_object_set(s, "communication_ms", json_object_get(worst, "communication_ms"));
        json_object_set_new(s, "gpu", g ? gpu_evidence(g) : json_null());
        /* the likeliest cause, from the evidence: its GPU held down, waiting for data, or
         * slower compute (it waits least on the collectives: the others wait for it) */
        double dw = num(json_object_get(worst, "data_ms"));
        const char *cause =
            g && num(json_object_get(g, "throttled_seconds_total")) > 0         ? "gpu_throttled"
            : isfinite(dw) && isfinite(data_median) && dw > 2 * data_median + 1 ? "data_loading"
                                                                                : "slower_compute";
        json_object_set_new(s, "cause", json_string(cause));
        json_object_set_new(doc, "straggler", s);
    } else {
        json_object_set_new(doc, "straggler", json_null());
    }
    json_object_set_new(doc, "nodes", nodes);
    json_object_set_new(doc, "ranks", sorted_by_rank(ranks));
    free(p50s);
    free(datas);
    free(comms);
    return doc;
oom:
    json_decref(doc);
    json_decref(nodes);
    json_decref(ranks);
    json_decref(jobs);
    free(p50s);
    free(datas);
    free(comms);
    return NULL;
}
