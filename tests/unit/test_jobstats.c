/*
 * test_jobstats.c - the end-of-job summary's arithmetic and notes (src/diag/jobstats.c):
 * quantiles, one GPU's utilization from history points, and each note's rule at and around its
 * threshold, with unknown figures silent.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "diag/jobstats.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void near(double got, double want)
{
    assert_true(fabs(got - want) < 1e-9);
}

static void quantiles(void **state)
{
    const double v[] = {1, 2, 3, 4};
    (void)state;
    near(gs_jobstats_quantile(v, 4, 0.5), 2.5);
    near(gs_jobstats_quantile(v, 4, 0.25), 1.75);
    near(gs_jobstats_quantile(v, 4, 0.75), 3.25);
    near(gs_jobstats_quantile(v, 4, 0), 1);
    near(gs_jobstats_quantile(v, 4, 1), 4);
    near(gs_jobstats_quantile(v, 1, 0.25), 1);
    assert_true(isnan(gs_jobstats_quantile(v, 0, 0.5)));
}

/* Buckets' averages: mean and quartiles over them; null averages skipped; first_busy is the
 * first bucket at 5 % or more. */
static void util_from_points(void **state)
{
    json_t *pts = json_loads("[[100,0,0.0,0],[101,0,0.04,0.1],[102,null,null,null],"
                             "[103,0.5,0.6,0.7],[104,0.9,1.0,1.0],[105,0,1.5,2],[106,0,-0.2,0]]",
                             0, NULL);
    json_t *u = gs_jobstats_util(pts);
    (void)state;
    assert_non_null(u);
    near(json_number_value(json_object_get(u, "mean")), (0 + 0.04 + 0.6 + 1.0) / 4);
    near(json_number_value(json_object_get(u, "p50")), (0.04 + 0.6) / 2);
    near(json_number_value(json_object_get(u, "p25")), 0.03);
    assert_int_equal(json_integer_value(json_object_get(u, "points")), 4);
    near(json_number_value(json_object_get(u, "first_busy")), 103);
    json_decref(u);
    json_decref(pts);
    /* never busy: first_busy null; no numbers at all: NULL */
    pts = json_loads("[[1,0,0.01,0.02]]", 0, NULL);
    u = gs_jobstats_util(pts);
    assert_true(json_is_null(json_object_get(u, "first_busy")));
    json_decref(u);
    json_decref(pts);
    pts = json_loads("[[1,null,null,null]]", 0, NULL);
    assert_null(gs_jobstats_util(pts));
    json_decref(pts);
    pts = json_array();
    assert_null(gs_jobstats_util(pts));
    json_decref(pts);
}

/* A GPU of the summary: held 1 h from t=1000, idle share, mean utilization, peak of 80 GiB. */
static json_t *gpu(long idx, double idle_share, double util, double first_busy, double peak_gib)
{
    json_t *g = json_pack("{s:I, s:f, s:f, s:f, s:{s:f, s:f, s:f}}", "gpu", (json_int_t)idx,
                          "first_seen", 1000.0, "held_s", 3600.0, "idle_held_s",
                          3600.0 * idle_share, "memory", "peak_bytes", peak_gib * GIB, "mean_bytes",
                          peak_gib * GIB / 2, "total_bytes", 80 * GIB);
    json_object_set_new(g, "utilization",
                        isnan(util)
                            ? json_null()
                            : json_pack("{s:f, s:o}", "mean", util, "first_busy",
                                        isnan(first_busy) ? json_null() : json_real(first_busy)));
    return g;
}

/* A one-node summary of the GPUs (taken), to = 1000 + 1 h. */
static json_t *summary(json_t *gpus)
{
    return json_pack("{s:s, s:f, s:f, s:[{s:s, s:o}]}", "job", "4242", "from", 1000.0, "to", 4600.0,
                     "nodes", "node", "node-a", "gpus", gpus);
}

/* The note with this id, NULL when none. */
static const json_t *note(const json_t *notes, const char *id)
{
    size_t i;
    const json_t *f;
    json_array_foreach(notes, i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "id")), id) == 0)
            return f;
    }
    return NULL;
}

static const char *title(const json_t *notes, const char *id)
{
    const json_t *f = note(notes, id);
    return f ? json_string_value(json_object_get(f, "title")) : "";
}

static const char *advice(const json_t *notes, const char *id)
{
    const json_t *f = note(notes, id);
    return f ? json_string_value(json_array_get(json_object_get(f, "advice"), 0)) : "";
}

/* A busy job with memory well used: no note. */
static void healthy(void **state)
{
    json_t *s =
        summary(json_pack("[o, o]", gpu(0, 0, 0.9, 1010, 60), gpu(1, 0.02, 0.85, 1010, 62)));
    json_t *n = gs_jobstats_notes(s);
    (void)state;
    assert_int_equal(json_array_size(n), 0);
    json_decref(n);
    json_decref(s);
}

/* GPU 3 idle 94 % of the job, the others busy: one note naming it; at 49 % none. */
static void idle_gpu(void **state)
{
    json_t *s =
        summary(json_pack("[o, o, o, o]", gpu(0, 0, 0.9, 1010, 40), gpu(1, 0, 0.9, 1010, 40),
                          gpu(2, 0, 0.9, 1010, 40), gpu(3, 0.94, 0.01, NAN, 40)));
    json_t *n = gs_jobstats_notes(s);
    (void)state;
    assert_string_equal(title(n, "idle_gpus"), "GPU 3 was idle 94 % of the job");
    assert_string_equal(advice(n, "idle_gpus"), "ask for fewer GPUs");
    assert_null(note(n, "all_idle"));
    /* the idle GPU is not counted in the mean: no low_utilization, no imbalance */
    assert_null(note(n, "low_utilization"));
    assert_null(note(n, "imbalance"));
    json_decref(n);
    json_decref(s);
    s = summary(json_pack("[o, o]", gpu(0, 0, 0.9, 1010, 40), gpu(1, 0.49, 0.6, 1010, 40)));
    n = gs_jobstats_notes(s);
    assert_null(note(n, "idle_gpus"));
    json_decref(n);
    json_decref(s);
    /* two idle of three: one note listing both */
    s = summary(json_pack("[o, o, o]", gpu(0, 0, 0.9, 1010, 40), gpu(1, 0.9, 0.02, 1010, 40),
                          gpu(2, 0.5, 0.3, 1010, 40)));
    n = gs_jobstats_notes(s);
    assert_string_equal(title(n, "idle_gpus"),
                        "2 of the job's 3 GPUs were idle most of the job (GPU 1 90 %, GPU 2 50 %)");
    assert_string_equal(advice(n, "idle_gpus"), "ask for fewer GPUs (1 did the work)");
    json_decref(n);
    json_decref(s);
}

/* Every GPU idle: all_idle, and nothing about utilization or a late start. */
static void all_idle(void **state)
{
    json_t *s =
        summary(json_pack("[o, o]", gpu(0, 0.97, 0.0, NAN, 40), gpu(1, 0.97, 0.0, NAN, 40)));
    json_t *n = gs_jobstats_notes(s);
    (void)state;
    assert_string_equal(title(n, "all_idle"),
                        "The job's 2 GPUs were idle 97 % of the time they were held");
    assert_null(note(n, "idle_gpus"));
    assert_null(note(n, "low_utilization"));
    assert_null(note(n, "late_start"));
    json_decref(n);
    json_decref(s);
}

/* 8 GPUs, the first work 41 min after they were held (of 1 h): late_start; 4 min: none. */
static void late_start(void **state)
{
    json_t *gpus = json_array(), *s, *n;
    (void)state;
    for (long i = 0; i < 8; i++)
        json_array_append_new(gpus, gpu(i, 0.3, 0.6, 1000 + 41 * 60 + (double)i, 40));
    s = summary(gpus);
    n = gs_jobstats_notes(s);
    assert_string_equal(title(n, "late_start"),
                        "The job held 8 GPUs for 41 minutes before its first CUDA work");
    near(json_number_value(
             json_object_get(json_object_get(note(n, "late_start"), "evidence"), "delay_s")),
         41 * 60);
    json_decref(n);
    json_decref(s);
    s = summary(json_pack("[o]", gpu(0, 0, 0.9, 1000 + 4 * 60, 40)));
    n = gs_jobstats_notes(s);
    assert_null(note(n, "late_start"));
    json_decref(n);
    json_decref(s);
}

/* Peak 7.2 GiB of 80 (9 %): small_memory, not on a MIG instance; 12 GiB (15 %): none; one
 * unknown peak: none;
 * 78.4 GiB (98 %): memory_full naming the GPU. */
static void memory(void **state)
{
    json_t *s = summary(json_pack("[o]", gpu(0, 0, 0.9, 1010, 7.2)));
    json_t *n = gs_jobstats_notes(s), *g;
    (void)state;
    assert_string_equal(title(n, "small_memory"), "Peak memory 9 % of the GPU (7.2 GiB of 80 GiB)");
    assert_string_equal(advice(n, "small_memory"), "a MIG slice or a smaller GPU would do");
    json_decref(n);
    json_decref(s);
    /* a MIG instance at 9 % of its slice: no smaller slice to advise */
    g = gpu(0, 0, 0.9, 1010, 7.2);
    json_object_set_new(g, "mig", json_true());
    s = summary(json_pack("[o]", g));
    n = gs_jobstats_notes(s);
    assert_null(note(n, "small_memory"));
    json_decref(n);
    json_decref(s);
    s = summary(json_pack("[o, o]", gpu(0, 0, 0.9, 1010, 7.2), gpu(1, 0, 0.9, 1010, 12)));
    n = gs_jobstats_notes(s);
    assert_null(note(n, "small_memory"));
    json_decref(n);
    json_decref(s);
    g = gpu(1, 0, 0.9, 1010, 1);
    json_object_set_new(json_object_get(g, "memory"), "peak_bytes", json_null());
    s = summary(json_pack("[o, o]", gpu(0, 0, 0.9, 1010, 2), g));
    n = gs_jobstats_notes(s);
    assert_null(note(n, "small_memory"));
    json_decref(n);
    json_decref(s);
    s = summary(json_pack("[o, o]", gpu(0, 0, 0.9, 1010, 40), gpu(1, 0, 0.9, 1010, 78.4)));
    n = gs_jobstats_notes(s);
    assert_string_equal(title(n, "memory_full"),
                        "Peak memory 98 % of GPU 1 (78.4 GiB of 80.0 GiB)");
    json_decref(n);
    json_decref(s);
}

/* Two nodes: GPUs named with their node; mean 42 % -> low_utilization; 75 vs 10 % ->
 * imbalance; 70 vs 45 % (25 points) -> none. A GPU held 30 s of the others' hour (under
 * 10 %) is not judged. */
static void utilization_two_nodes(void **state)
{
    json_t *s =
        json_pack("{s:s, s:f, s:f, s:[{s:s, s:[o]}, {s:s, s:[o, o]}]}", "job", "7", "from", 1000.0,
                  "to", 4600.0, "nodes", "node", "node-a", "gpus", gpu(0, 0, 0.75, 1010, 40),
                  "node", "node-b", "gpus", gpu(1, 0.1, 0.1, 1010, 40), gpu(2, 0, 0.0, NAN, 40));
    json_t *n;
    (void)state;
    json_object_set_new(
        json_array_get(json_object_get(json_array_get(json_object_get(s, "nodes"), 1), "gpus"), 1),
        "held_s", json_real(30));
    n = gs_jobstats_notes(s);
    assert_string_equal(title(n, "low_utilization"),
                        "GPU utilization averaged 42 % on the 2 GPUs in use");
    assert_string_equal(title(n, "imbalance"),
                        "Utilization uneven across the GPUs: node-a GPU 0 75 %, node-b GPU 1 10 %");
    assert_null(note(n, "all_idle"));
    assert_null(note(n, "idle_gpus"));
    json_decref(n);
    json_decref(s);
    s = summary(json_pack("[o, o]", gpu(0, 0, 0.7, 1010, 40), gpu(1, 0, 0.45, 1010, 40)));
    n = gs_jobstats_notes(s);
    assert_null(note(n, "imbalance"));
    assert_null(note(n, "low_utilization")); /* mean 57.5 % */
    json_decref(n);
    json_decref(s);
}

/* Unknown figures: no utilization, no idle time: no note built on them. */
static void unknown_silent(void **state)
{
    json_t *g = gpu(0, 0, NAN, NAN, 40), *s, *n;
    (void)state;
    json_object_set_new(g, "idle_held_s", json_null());
    s = summary(json_pack("[o]", g));
    n = gs_jobstats_notes(s);
    assert_int_equal(json_array_size(n), 0);
    json_decref(n);
    json_decref(s);
    s = json_pack("{s:s, s:[]}", "job", "x", "nodes");
    n = gs_jobstats_notes(s);
    assert_int_equal(json_array_size(n), 0);
    json_decref(n);
    json_decref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quantiles),      cmocka_unit_test(util_from_points),
        cmocka_unit_test(healthy),        cmocka_unit_test(idle_gpu),
        cmocka_unit_test(all_idle),       cmocka_unit_test(late_start),
        cmocka_unit_test(memory),         cmocka_unit_test(utilization_two_nodes),
        cmocka_unit_test(unknown_silent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
