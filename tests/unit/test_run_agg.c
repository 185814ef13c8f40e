/*
 * Unit tests for the run aggregate and its report (src/run/agg.c, report.c): known step series
 * give the ratios, percentiles and throughput computed by hand below; snapshots built by hand
 * give the per-GPU utilization, memory, energy, throttle and idle figures; unknown stays null
 * (run.records_dropped until the producer sets it, then its count, 0 included);
 * the report is written atomically and the summary prints it.
 */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"
#include "run/agg.h"
#include "run/record.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static double num(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        fail_msg("%s: not a number", key);
    return json_number_value(v);
}

static void is_null(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_null(v))
        fail_msg("%s: expected null", key);
}

static void near(double got, double want)
{
    if (!(fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want))))
        fail_msg("got %.12g, want %.12g", got, want);
}

static struct gs_step_rec step_at(int i, double data, double total)
{
    struct gs_step_rec s;

    memset(&s, 0, sizeof s);
    s.ms_x[0] = s.ms_x[1] = NAN; /* exposed communication, other: not sent */
    s.version = GS_STEP_REC_VERSION;
    s.flags = GS_STEP_CUDA_EVENTS;
    s.step = (uint64_t)i + 1;
    s.t_begin = 1000 + i * 0.5;
    s.t_end = s.t_begin + 0.4;
    s.ms[GS_PH_DATA] = data;
    s.ms[GS_PH_FORWARD] = 30;
    s.ms[GS_PH_BACKWARD] = 30;
    s.ms[GS_PH_OPTIMIZER] = 10;
    s.ms[GS_PH_COMM] = 5;
    s.ms[GS_PH_STEP] = total;
    s.samples = 8;
    s.device = 0;
    s.mem_peak_allocated = (uint64_t)(i + 1) * (uint64_t)GIB;
    s.mem_peak_reserved = 6 * (uint64_t)GIB;
    s.mem_total = 80 * (uint64_t)GIB;
    return s;
}

/* data NaN,20,30,50; total_step 90,80,70,60; forward+backward+optimizer 70; comm 5. */
static struct gs_agg *series(void)
{
    static const double data[4] = {NAN, 20, 30, 50}, total[4] = {90, 80, 70, 60};
    struct gs_agg *a = gs_agg_new();

    assert_non_null(a);
    for (int i = 0; i < 4; i++) {
        struct gs_step_rec s = step_at(i, data[i], total[i]);
        assert_int_equal(gs_agg_step(a, &s), 0);
    }
    return a;
}

static void step_series_ratios_and_percentiles(void **state)
{
    struct gs_agg *a = series();
    json_t *r = gs_agg_report(a, NULL), *ph;
    (void)state;

    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "schema")), "1.0");
    /* denominators: (0+90)+(20+80)+(30+70)+(50+60) = 400 ms */
    near(num(r, "data_loading_time_ratio"), 100.0 / 400.0);
    near(num(r, "communication_time_ratio"), 20.0 / 400.0);
    near(num(r, "gpu_busy_estimate_percent"), 100.0 * 280.0 / 400.0);
    /* no device samples: the event estimate stands in, max is step 1's 70/90 */
    assert_string_equal(json_string_value(json_object_get(r, "gpu_utilization_source")),
                        "cuda_events");
    near(num(r, "gpu_avg_utilization_percent"), 70.0);
    near(num(r, "gpu_max_utilization_percent"), 100.0 * 70.0 / 90.0);
    /* wall 1000.0 .. 1001.9 */
    near(num(r, "train_runtime"), 1.9);
    near(num(r, "train_samples_per_second"), 32 / 1.9);
    near(num(r, "train_steps_per_second"), 4 / 1.9);
    assert_int_equal((int)num(r, "steps"), 4);
    assert_int_equal((int)num(r, "ranks"), 1);
    ph = json_object_get(json_object_get(r, "phases"), "total_step");
    near(num(ph, "mean_ms"), 75);
    near(num(ph, "p50_ms"), 70); /* nearest rank ceil(0.5*4) = 2nd of 60,70,80,90 */
    near(num(ph, "p95_ms"), 90); /* ceil(0.95*4) = 4th */
    near(num(ph, "total_ms"), 300);
    assert_int_equal((int)num(ph, "count"), 4);
    ph = json_object_get(json_object_get(r, "phases"), "data");
    assert_int_equal((int)num(ph, "count"), 3);
    near(num(ph, "mean_ms"), 33.3333); /* 100/3, reported to 0.1 us */
    near(num(ph, "p50_ms"), 30);       /* ceil(1.5) = 2nd of 20,30,50 */
    near(num(ph, "p95_ms"), 50);
    /* allocator: peak allocated 4 GiB, reserved 6 GiB */
    near(num(r, "gpu_peak_memory_allocated_gb"), 4.0);
    near(num(json_object_get(r, "allocator"), "peak_reserved_gb"), 6.0);
    near(num(json_object_get(r, "allocator"), "fragmentation_gap_gb"), 2.0);
    near(num(json_object_get(r, "allocator"), "memory_total_gb"), 80.0);
    assert_int_equal(json_array_size(json_object_get(r, "gpus")), 0);
    is_null(r, "energy_joules");
    /* 0.25 > 0.15: the data-loading finding, and comm at exactly 0.05 is not above */
    assert_int_equal(json_array_size(json_object_get(r, "findings")), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(r, "findings"), 0), "id")),
        "data_loading");
    json_decref(r);
    gs_agg_free(a);
}

static void end_record_sets_throughput(void **state)
{
    struct gs_agg *a = series();
    struct gs_record_end e = {
        .train_runtime = 10, .train_samples = 100, .train_steps = 4, .train_loss = 0.5};
    json_t *r;
    (void)state;

    gs_agg_end(a, &e);
    r = gs_agg_report(a, NULL);
    near(num(r, "train_runtime"), 10);
    near(num(r, "train_samples_per_second"), 10);
    near(num(r, "train_steps_per_second"), 0.4);
    near(num(json_object_get(r, "run"), "train_loss"), 0.5);
    json_decref(r);
    gs_agg_free(a);
}

static void unknown_is_null(void **state)
{
    struct gs_agg *a = gs_agg_new();
    struct gs_step_rec s;
    json_t *r;
    (void)state;

    r = gs_agg_report(a, NULL);
    is_null(r, "train_runtime");
    is_null(r, "train_samples_per_second");
    is_null(r, "gpu_avg_utilization_percent");
    is_null(r, "gpu_utilization_source");
    is_null(r, "data_loading_time_ratio");
    is_null(r, "gpu_peak_memory_allocated_gb");
    is_null(json_object_get(json_object_get(r, "phases"), "forward"), "p95_ms");
    assert_int_equal(json_array_size(json_object_get(r, "findings")), 0);
    json_decref(r);

    /* only total_step measured: ratios and the busy estimate stay unknown, not 0 */
    memset(&s, 0, sizeof s);
    for (int p = 0; p < GS_PH_ALL; p++)
        gs_step_ms_set(&s, p, NAN);
    s.ms[GS_PH_STEP] = 100;
    s.t_begin = 1;
    s.t_end = 2;
    gs_agg_step(a, &s);
    r = gs_agg_report(a, NULL);
    is_null(r, "data_loading_time_ratio");
    is_null(r, "communication_time_ratio");
    is_null(r, "gpu_busy_estimate_percent");
    is_null(r, "train_samples_per_second");
    near(num(r, "train_steps_per_second"), 1.0);
    json_decref(r);
    gs_agg_free(a);
}

static void ranks_counted(void **state)
{
    struct gs_agg *a = gs_agg_new();
    json_t *r;
    (void)state;

    for (int i = 0; i < 5; i++) {
        struct gs_step_rec s = step_at(i % 3, 10, 90);
        s.rank = i < 3 ? 0 : 1;
        gs_agg_step(a, &s);
    }
    r = gs_agg_report(a, NULL);
    assert_int_equal((int)num(r, "ranks"), 2);
    assert_int_equal((int)num(r, "steps"), 3);
    assert_int_equal((int)num(json_object_get(json_object_get(r, "phases"), "total_step"), "count"),
                     5);
    near(num(r, "data_loading_time_ratio"), 0.1);
    json_decref(r);
    gs_agg_free(a);
}

static struct gs_snapshot *snap_new(unsigned n)
{
    struct gs_snapshot *s = NULL;

    assert_int_equal(gs_snapshot_new(&s, n, 4, NULL), GS_OK);
    for (unsigned i = 0; i < n; i++) {
        s->gpus[i].index = i;
        snprintf(s->gpus[i].text[GS_T_UUID], GS_STR_LEN, "GPU-%u", i);
        s->gpus[i].tst[GS_T_UUID] = GS_ST_OK;
        strcpy(s->gpus[i].text[GS_T_NAME], "NVIDIA H100");
        s->gpus[i].tst[GS_T_NAME] = GS_ST_OK;
    }
    return s;
}

static void device_figures(void **state)
{
    static const double u0[3] = {0.5, 0.7, 0.9}, m0[3] = {10, 30, 20}, e0[3] = {1000, 1150, 1300};
    static const double c1[3] = {5.0, 6.0, 7.5};
    struct gs_agg *a = gs_agg_new();
    struct gs_snapshot *s = snap_new(3);
    const unsigned char in_run[3] = {1, 1, 0};
    json_t *r, *g0, *g1;
    (void)state;

    for (int k = 0; k < 3; k++) {
        struct gs_gpu *g = s->gpus;
        gs_snapshot_clear(s);
        s->n_gpus = 3;
        for (unsigned i = 0; i < 3; i++)
            s->gpus[i].index = i;
        gs_gpu_set(&g[0], GS_M_UTIL_GPU, u0[k]);
        gs_gpu_set(&g[0], GS_M_MEM_USED, m0[k] * GIB);
        gs_gpu_set(&g[0], GS_M_MEM_TOTAL, 80 * GIB);
        gs_gpu_set(&g[0], GS_M_ENERGY, e0[k]);
        gs_gpu_set(&g[0], GS_M_POWER_DRAW, 300);
        gs_gpu_set(&g[0], GS_M_THROTTLE_ACTIVE, k < 2 ? (double)GS_THR_HW_THERMAL : 0);
        if (k == 0)
            g[1].st[GS_M_UTIL_GPU] = GS_ST_ERROR; /* not a value: must not count as 0 */
        else
            gs_gpu_set(&g[1], GS_M_UTIL_GPU, 0.2 * k);
        gs_gpu_set(&g[1], GS_M_POWER_DRAW, 100);
        gs_gpu_set(&g[1], GS_M_THROTTLE_NS_SW_POWER, c1[k]);
        gs_gpu_set(&g[2], GS_M_UTIL_GPU, 1.0);
        gs_agg_snapshot(a, s, in_run, 100 + k);
    }
    r = gs_agg_report(a, NULL);
    assert_int_equal(json_array_size(json_object_get(r, "gpus")), 2);
    g0 = json_array_get(json_object_get(r, "gpus"), 0);
    g1 = json_array_get(json_object_get(r, "gpus"), 1);
    assert_int_equal((int)num(g0, "index"), 0);
    assert_int_equal((int)num(g0, "samples"), 3);
    near(num(g0, "utilization_avg_percent"), 70);
    near(num(g0, "utilization_max_percent"), 90);
    near(num(g0, "memory_peak_bytes"), 30 * GIB);
    near(num(g0, "memory_peak_gb"), 30);
    near(num(g0, "energy_joules"), 300); /* counter 1000 -> 1300 */
    assert_string_equal(json_string_value(json_object_get(g0, "energy_source")), "counter");
    near(num(json_object_get(g0, "throttled_seconds"), "hw_thermal"), 2); /* 100..102 */
    near(num(json_object_get(g0, "throttled_seconds"), "sw_power_cap"), 0);
    near(num(g1, "utilization_avg_percent"), 30); /* (20 + 40) / 2, the error sample skipped */
    near(num(g1, "utilization_max_percent"), 40);
    near(num(g1, "energy_joules"), 200); /* 100 W over 2 s */
    assert_string_equal(json_string_value(json_object_get(g1, "energy_source")), "power");
    near(num(json_object_get(g1, "throttled_seconds"), "sw_power_cap"), 2.5); /* 7.5 - 5.0 */
    assert_null(json_object_get(json_object_get(g1, "throttled_seconds"), "hw_thermal"));
    is_null(g1, "memory_peak_bytes");
    near(num(r, "energy_joules"), 500);
    near(num(r, "throttled_seconds"), 4.5);
    assert_string_equal(json_string_value(json_object_get(r, "gpu_utilization_source")), "nvml");
    near(num(r, "gpu_avg_utilization_percent"), 50);
    near(num(r, "gpu_max_utilization_percent"), 90);
    near(num(r, "gpu_peak_memory_allocated_gb"), 30);
    assert_string_equal(json_string_value(json_object_get(r, "gpu_peak_memory_source")), "nvml");
    near(num(r, "train_runtime"), 2);
    near(num(json_object_get(r, "run"), "start_time"), 100);
    near(num(json_object_get(r, "run"), "end_time"), 102);
    is_null(r, "data_loading_time_ratio");
    json_decref(r);
    gs_snapshot_free(s);
    gs_agg_free(a);
}

/* A GPU shared with two other tenants: the run's own memory and SM utilization, the device's
 * labelled as such. */
static void run_share_of_shared_gpu(void **state)
{
    static const double mine[2] = {0.5, 1.05}, sm[2] = {0.10, 0.30};
    struct gs_agg *a = gs_agg_new();
    struct gs_snapshot *s = snap_new(1);
    const unsigned char in_run[1] = {1}, procs[4] = {1, 0, 0, 1};
    json_t *r, *g0;
    (void)state;

    for (int k = 0; k < 2; k++) {
        gs_snapshot_clear(s);
        s->n_gpus = 1;
        s->gpus[0].index = 0;
        gs_gpu_set(&s->gpus[0], GS_M_UTIL_GPU, 0.95);
        gs_gpu_set(&s->gpus[0], GS_M_MEM_USED, 57 * GIB);
        gs_gpu_set(&s->gpus[0], GS_M_MEM_TOTAL, 80 * GIB);
        for (unsigned i = 0; i < 4; i++) {
            struct gs_proc *p = &s->procs[s->n_procs++];
            memset(p, 0, sizeof *p);
            p->pid = i == 3 ? 10 : 10 + i; /* the run's pid listed twice (compute, graphics) */
            p->mem_st = p->util_st = GS_ST_OK;
            p->gpu_mem_bytes = (uint64_t)((i == 0 ? mine[k] : i == 3 ? mine[k] : 28.0) * GIB);
            p->sm_util = i == 0 || i == 3 ? sm[k] : 0.4;
        }
        gs_agg_snapshot(a, s, in_run, 100 + k);
        gs_agg_run_procs(a, s, in_run, procs);
    }
    r = gs_agg_report(a, NULL);
    g0 = json_array_get(json_object_get(r, "gpus"), 0);
    near(num(g0, "memory_peak_gb"), 57);
    near(num(g0, "run_memory_peak_gb"), 1.05);
    near(num(g0, "run_sm_utilization_avg_percent"), 20);
    assert_int_equal((int)num(g0, "other_processes_max"), 2);
    near(num(r, "gpu_peak_memory_allocated_gb"), 1.05);
    assert_string_equal(json_string_value(json_object_get(r, "gpu_peak_memory_source")),
                        "nvml_processes");
    near(num(r, "gpu_peak_memory_device_gb"), 57);
    near(num(r, "gpu_run_sm_utilization_avg_percent"), 20);
    near(num(r, "gpu_avg_utilization_percent"), 95);
    assert_int_equal((int)num(r, "gpu_other_processes_max"), 2);
    json_decref(r);
    gs_snapshot_free(s);
    gs_agg_free(a);
}

static void idle_feed(struct gs_agg *a, struct gs_snapshot *s, double t, double util)
{
    gs_snapshot_clear(s);
    s->n_gpus = 1;
    gs_gpu_set(&s->gpus[0], GS_M_UTIL_GPU, util);
    gs_gpu_set(&s->gpus[0], GS_M_MEM_USED, GIB);
    gs_agg_snapshot(a, s, NULL, t);
}

static void idle_periods(void **state)
{
    struct gs_agg *a = gs_agg_new();
    struct gs_snapshot *s = snap_new(1);
    json_t *r, *idle;
    (void)state;

    for (int t = 0; t <= 11; t++) /* 11 s idle: counts */
        idle_feed(a, s, t, 0.01);
    idle_feed(a, s, 12, 0.9);
    for (int t = 13; t <= 21; t++) /* 8 s idle: too short */
        idle_feed(a, s, t, 0.0);
    idle_feed(a, s, 22, 0.9);
    for (int t = 30; t <= 41; t++) /* open at the end, 11 s: counts */
        idle_feed(a, s, t, 0.02);
    r = gs_agg_report(a, NULL);
    idle = json_object_get(json_array_get(json_object_get(r, "gpus"), 0), "idle_periods");
    assert_int_equal(json_array_size(idle), 2);
    near(num(json_array_get(idle, 0), "from"), 0);
    near(num(json_array_get(idle, 0), "to"), 11);
    near(num(json_array_get(idle, 0), "seconds"), 11);
    near(num(json_array_get(idle, 1), "from"), 30);
    near(num(json_array_get(idle, 1), "seconds"), 11);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(r, "findings"), 0), "id")),
        "low_utilization");
    json_decref(r);
    gs_agg_free(a);

    /* a process listed on the GPU holding no memory: not the run idling with memory held */
    a = gs_agg_new();
    s->n_procs = 1;
    s->procs[0].gpu = 0;
    s->procs[0].mem_st = GS_ST_OK;
    s->procs[0].gpu_mem_bytes = 0;
    for (int t = 0; t <= 20; t++) {
        gs_gpu_set(&s->gpus[0], GS_M_UTIL_GPU, 0.0);
        gs_gpu_set(&s->gpus[0], GS_M_MEM_USED, GIB);
        gs_agg_snapshot(a, s, NULL, t);
    }
    r = gs_agg_report(a, NULL);
    idle = json_object_get(json_array_get(json_object_get(r, "gpus"), 0), "idle_periods");
    assert_int_equal(json_array_size(idle), 0);
    json_decref(r);
    gs_agg_free(a);
    gs_snapshot_free(s);
}

static void lost_gpu(void **state)
{
    struct gs_agg *a = gs_agg_new();
    struct gs_snapshot *s = snap_new(1);
    json_t *r, *g;
    (void)state;

    s->gpus[0].lost = 1;
    gs_agg_snapshot(a, s, NULL, 5);
    r = gs_agg_report(a, NULL);
    g = json_array_get(json_object_get(r, "gpus"), 0);
    assert_true(json_is_true(json_object_get(g, "lost")));
    is_null(g, "utilization_avg_percent");
    is_null(g, "energy_joules");
    is_null(g, "throttled_seconds_total");
    assert_string_equal(json_string_value(json_object_get(g, "uuid")), "GPU-0");
    json_decref(r);
    gs_snapshot_free(s);
    gs_agg_free(a);
}

/* One snapshot (utilization `util`, 1 GiB used) at t seconds on GPU 0. */
static void snap_at(struct gs_agg *a, struct gs_snapshot *s, double t, double util)
{
    gs_snapshot_clear(s);
    s->n_gpus = 1;
    s->gpus[0].index = 0;
    gs_gpu_set(&s->gpus[0], GS_M_UTIL_GPU, util);
    gs_gpu_set(&s->gpus[0], GS_M_MEM_USED, GIB);
    gs_agg_snapshot(a, s, NULL, t);
}

static const json_t *gpu0(const json_t *r)
{
    return json_array_get(json_object_get(r, "gpus"), 0);
}

/* The driver's 0.1 s samples replace the 0.5 s snapshots' utilization: the peak the 1 s
 * window of the snapshots averaged away is found, and the snapshots' values are not mixed in. */
static void util_samples_replace_snapshots(void **state)
{
    struct gs_agg *a = gs_agg_new();
    struct gs_snapshot *s = snap_new(1);
    struct gs_util_sample u[100];
    json_t *r;
    (void)state;

    for (int k = 0; k < 100; k++) { /* 1.0 every fourth sample, else 0.2: mean 0.4 */
        u[k].t_us = 100000000ull + 100000ull * (unsigned)k;
        u[k].util_ratio = k % 4 == 1 ? 1.0 : 0.2;
    }
    gs_agg_util_samples(a, 0, u, 5); /* before any snapshot: GPU not in the run, ignored */
    for (int c = 0; c < 20; c++) {
        snap_at(a, s, 100.0 + 0.5 * c, 0.5);
        gs_agg_util_samples(a, 0, &u[5 * c], 5);
        if (c > 0)
            gs_agg_util_samples(a, 0, &u[5 * (c - 1)], 10); /* repeats: counted once */
    }
    gs_agg_util_samples(a, 3, u, 100); /* a GPU the run never had: ignored */
    r = gs_agg_report(a, NULL);
    assert_int_equal(json_array_size(json_object_get(r, "gpus")), 1);
    near(num(gpu0(r), "utilization_avg_percent"), 40);
    near(num(gpu0(r), "utilization_max_percent"), 100);
    near(num(gpu0(r), "utilization_sample_period_ms"), 100);
    assert_string_equal(json_string_value(json_object_get(gpu0(r), "utilization_source")),
                        "nvml_samples");
    assert_int_equal((int)num(gpu0(r), "samples"), 20); /* snapshots, as before */
    near(num(r, "gpu_avg_utilization_percent"), 40);
    near(num(r, "gpu_max_utilization_percent"), 100);
    json_decref(r);
    gs_agg_free(a);

    /* without samples: the snapshots, and their spacing */
    a = gs_agg_new();
    for (int c = 0; c < 20; c++)
        snap_at(a, s, 100.0 + 0.5 * c, 0.5);
    r = gs_agg_report(a, NULL);
    near(num(gpu0(r), "utilization_max_percent"), 50);
    near(num(gpu0(r), "utilization_sample_period_ms"), 500);
    assert_string_equal(json_string_value(json_object_get(gpu0(r), "utilization_source")),
                        "snapshots");
    json_decref(r);
    gs_agg_free(a);
    gs_snapshot_free(s);
}

/* Each sample weighs the time since the previous one; the first the same as the second. */
static void util_samples_time_weighted(void **state)
{
    static const double ts[4] = {0, 1.0, 1.1, 3.1}, v[4] = {0.2, 0.2, 1.0, 0.6};
    struct gs_agg *a = gs_agg_new();
    struct gs_snapshot *s = snap_new(1);
    struct gs_util_sample u[4];
    json_t *r;
    (void)state;

    for (int k = 0; k < 4; k++) {
        u[k].t_us = (uint64_t)llround((50 + ts[k]) * 1e6);
        u[k].util_ratio = v[k];
    }
    snap_at(a, s, 50, 0.9);
    gs_agg_util_samples(a, 0, u, 1);
    r = gs_agg_report(a, NULL); /* one sample: its value, no period yet */
    near(num(gpu0(r), "utilization_avg_percent"), 20);
    is_null(gpu0(r), "utilization_sample_period_ms");
    json_decref(r);
    gs_agg_util_samples(a, 0, u + 1, 3);
    r = gs_agg_report(a, NULL);
    /* (0.2·1 + 0.2·1 + 1.0·0.1 + 0.6·2) / 4.1; an unweighted mean would say 50 */
    near(num(gpu0(r), "utilization_avg_percent"), 100.0 * 1.7 / 4.1);
    near(num(gpu0(r), "utilization_max_percent"), 100);
    near(num(gpu0(r), "utilization_sample_period_ms"), 3100.0 / 3);
    json_decref(r);
    gs_agg_free(a);
    gs_snapshot_free(s);
}

/* Idle periods follow the samples: snapshots at 1 % (idle all along by themselves) but the
 * samples busy except 1.0..12.0 s give exactly that one period, from the start of the first
 * idle sample's interval. */
static void util_samples_idle(void **state)
{
    struct gs_agg *a = gs_agg_new();
    struct gs_snapshot *s = snap_new(1);
    struct gs_util_sample u[10];
    const json_t *idle;
    json_t *r;
    (void)state;

    for (int sec = 0; sec <= 16; sec++) {
        unsigned n = 0;
        snap_at(a, s, sec, 0.01);
        for (int k = sec == 0 ? 0 : (sec - 1) * 10 + 1; k <= sec * 10; k++) {
            u[n].t_us = 100000ull * (unsigned)k;
            u[n].util_ratio = k >= 10 && k <= 120 ? 0.0 : 0.9;
            n++;
        }
        gs_agg_util_samples(a, 0, u, n);
    }
    r = gs_agg_report(a, NULL);
    idle = json_object_get(gpu0(r), "idle_periods");
    assert_int_equal(json_array_size(idle), 1);
    near(num(json_array_get(idle, 0), "from"), 0.9);
    near(num(json_array_get(idle, 0), "to"), 12.0);
    assert_int_equal((int)num(gpu0(r), "idle_periods_total"), 1);
    near(num(gpu0(r), "utilization_max_percent"), 90);
    json_decref(r);
    gs_agg_free(a);
    gs_snapshot_free(s);
}

/* gs_report_write as 0 / -1 with the message in err (256 bytes). */
static int write_report(const json_t *r, const char *path, char *err)
{
    struct gs_err e;
    int rc;

    gs_err_clear(&e);
    rc = gs_report_write(r, path, &e);
    snprintf(err, 256, "%.255s", e.msg);
    return rc == GS_OK ? 0 : -1;
}

static void write_and_summary(void **state)
{
    char dir[] = "/tmp/gs_run_agg_XXXXXX", path[256], *text = NULL;
    struct gs_agg *a = series();
    struct gs_report_meta meta = {.run_name = "unit", .source = "in-process", .exit_code = 0};
    json_t *r = gs_agg_report(a, &meta), *back;
    json_error_t jerr;
    char err[256];
    size_t len = 0;
    FILE *m;
    DIR *d;
    struct dirent *de;
    int entries = 0;
    (void)state;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/metrics_report.json", dir);
    assert_int_equal(write_report(r, path, err), 0);
    back = json_load_file(path, 0, &jerr);
    assert_non_null(back);
    assert_true(json_equal(back, r) || fabs(num(back, "train_runtime") - 1.9) < 1e-9);
    assert_string_equal(json_string_value(json_object_get(json_object_get(back, "run"), "name")),
                        "unit");
    d = opendir(dir);
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            entries++;
    closedir(d);
    assert_int_equal(entries, 1); /* no temp file left behind */
    {
        /* A link planted at the temporary name: removed, never written through. */
        char tmp[300], victim[300], buf[16] = "";
        struct stat st;
        FILE *f;
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
        snprintf(victim, sizeof victim, "%s/victim", dir);
        f = fopen(victim, "w");
        assert_non_null(f);
        fputs("precious", f);
        fclose(f);
        assert_int_equal(symlink(victim, tmp), 0);
        assert_int_equal(write_report(r, path, err), 0);
        f = fopen(victim, "r");
        assert_non_null(f);
        assert_non_null(fgets(buf, sizeof buf, f));
        fclose(f);
        assert_string_equal(buf, "precious");
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        /* the report is written under a fresh name of its own (base/dirfile.c): a link
         * planted at another name is neither followed nor touched */
        assert_int_equal(lstat(tmp, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        unlink(tmp);
        unlink(victim);
    }
    unlink(path);
    rmdir(dir);
    assert_int_equal(write_report(r, "/nonexistent-dir/x.json", err), -1);
    assert_non_null(strstr(err, "/nonexistent-dir"));

    m = open_memstream(&text, &len);
    gs_report_print_summary(m, r, 0);
    fclose(m);
    assert_non_null(strstr(text, "gpuscope run summary: unit"));
    assert_non_null(strstr(text, "total_step"));
    assert_non_null(strstr(text, "[warning] data_loading"));
    assert_non_null(strstr(text, "0.250"));
    assert_null(strchr(text, '\033'));
    free(text);
    m = open_memstream(&text, &len);
    gs_report_print_summary(m, r, 1);
    fclose(m);
    assert_non_null(strstr(text, "\033["));
    free(text);
    json_decref(back);
    json_decref(r);
    gs_agg_free(a);
}

static void facts_in_report(void **state)
{
    struct gs_agg *a = series(); /* data ratio 0.25: data_loading fires */
    struct gs_record_hello h;
    json_t *r, *fx, *f;
    char *text = NULL;
    size_t len = 0, i;
    FILE *m;
    int named = 0;
    (void)state;

    r = gs_agg_report(a, NULL); /* no hello: an empty facts object */
    fx = json_object_get(r, "facts");
    assert_true(json_is_object(fx));
    assert_int_equal(json_object_size(fx), 0);
    json_decref(r);

    memset(&h, 0, sizeof h);
    h.pid = h.rank = h.world_size = h.local_rank = h.logging_steps = -1;
    {
        json_t *in =
            json_pack("{s:i, s:b, s:s, s:i, s:f}", "loader_num_workers", 0, "loader_pin_memory", 0,
                      "attn_implementation", "sdpa", "cpu_count", 12, "lr", 0.25);
        struct gs_err e;
        assert_int_equal(gs_record_facts_parse(in, "", &h.facts, &e), 0);
        json_decref(in);
    }
    gs_agg_hello(a, &h, 1, 0);
    r = gs_agg_report(a, NULL);
    fx = json_object_get(r, "facts");
    assert_int_equal(json_object_size(fx), 5);
    assert_int_equal(json_integer_value(json_object_get(fx, "loader_num_workers")), 0);
    assert_true(json_is_false(json_object_get(fx, "loader_pin_memory")));
    assert_string_equal(json_string_value(json_object_get(fx, "attn_implementation")), "sdpa");
    assert_true(json_real_value(json_object_get(fx, "lr")) == 0.25);
    /* the diagnosis read them */
    json_array_foreach(json_object_get(r, "findings"), i, f)
    {
        json_t *adv;
        size_t j;
        if (strcmp(json_string_value(json_object_get(f, "id")), "data_loading") != 0)
            continue;
        json_array_foreach(
            json_object_get(f, "advice"), j,
            adv) if (strstr(json_string_value(adv), "num_workers is 0 of 12 CPU core(s)") &&
                     strstr(json_string_value(adv), "DataLoader(num_workers=6)")) named = 1;
    }
    assert_true(named);
    m = open_memstream(&text, &len);
    gs_report_print_summary(m, r, 0);
    fclose(m);
    assert_non_null(strstr(text, "settings (facts)             loader_num_workers=0, "
                                 "loader_pin_memory=false, attn_implementation=sdpa, "
                                 "cpu_count=12, lr=0.25\n"));
    free(text);
    json_decref(r);
    gs_agg_free(a);
}

/* run.records_dropped: null until set, then the last value set (0 is a figure, not null);
 * the aggregate's own dropped_records stays apart. */
/* Two ranks: per_rank rows, the slowest rank (the one computing longest) named with its GPU's
 * figures (temperature, SM clock, PCIe link, throttling); throttle reasons that overlap in time
 * count once. */
static void slowest_rank_and_throttle_union(void **state)
{
    struct gs_agg *a = gs_agg_new();
    struct gs_snapshot *s = snap_new(2);
    json_t *r, *sl, *g, *per;
    (void)state;

    for (int i = 0; i < 4; i++)
        for (int rk = 0; rk < 2; rk++) {
            struct gs_step_rec st = step_at(i, 10, rk ? 190 : 90); /* rank 1: 200 ms steps */
            st.rank = rk;
            st.device = rk;
            st.samples = 8;
            gs_agg_step(a, &st);
        }
    for (int k = 0; k < 5; k++) {
        gs_snapshot_clear(s);
        s->n_gpus = 2;
        for (unsigned i = 0; i < 2; i++) {
            s->gpus[i].index = i;
            gs_gpu_set(&s->gpus[i], GS_M_UTIL_GPU, 0.5);
            gs_gpu_set(&s->gpus[i], GS_M_TEMP_GPU, i ? 80 + k : 60);
            gs_gpu_set(&s->gpus[i], GS_M_CLOCK_SM, i ? 1.2e9 : 1.9e9);
            gs_gpu_set(&s->gpus[i], GS_M_CLOCK_MAX_SM, 1.98e9);
            gs_gpu_set(&s->gpus[i], GS_M_PCIE_GEN, i ? 3 : 5);
            gs_gpu_set(&s->gpus[i], GS_M_PCIE_WIDTH, 16);
        }
        /* GPU 1: power cap and thermal slowdown at once for 4 s: 4 s throttled, not 8 */
        gs_gpu_set(&s->gpus[1], GS_M_THROTTLE_ACTIVE,
                   (double)(GS_THR_SW_POWER_CAP | GS_THR_SW_THERMAL));
        gs_gpu_set(&s->gpus[0], GS_M_THROTTLE_ACTIVE, 0);
        gs_agg_snapshot(a, s, NULL, 1000 + k);
    }
    r = gs_agg_report(a, NULL);
    per = json_object_get(r, "per_rank");
    assert_int_equal(json_array_size(per), 2);
    near(num(json_array_get(per, 1), "step_p50_ms"), 200);
    near(num(json_object_get(json_array_get(per, 0), "mean_ms"), "data"), 10);
    sl = json_object_get(r, "slowest_rank");
    assert_true(json_is_object(sl));
    assert_int_equal((int)num(sl, "rank"), 1);
    near(num(sl, "step_p50_ms"), 200);
    /* busy: the step less its 5 ms of communication (exposed not measured: all of it counts
     * as waited for); rank 1 computes 195 ms against its peer's 95 */
    near(num(sl, "busy_p50_ms"), 195);
    near(num(sl, "others_busy_p50_ms"), 95);
    near(num(sl, "slower_by_ratio"), 195.0 / 95.0 - 1.0);
    near(num(sl, "others_comm_wait_p50_ms"), 5);
    assert_true(json_is_true(json_object_get(sl, "straggler")));
    near(num(json_array_get(per, 0), "busy_p50_ms"), 95);
    near(num(json_array_get(per, 0), "comm_wait_p50_ms"), 5);
    g = json_object_get(sl, "gpu");
    assert_int_equal((int)num(g, "index"), 1);
    near(num(g, "temperature_max_c"), 84);
    near(num(g, "clock_sm_avg_mhz"), 1200);
    near(num(g, "clock_sm_max_mhz"), 1980);
    near(num(g, "pcie_link_gen_min"), 3);
    near(num(g, "pcie_link_width_min"), 16);
    near(num(g, "throttled_seconds_total"), 4); /* the union, not 4 + 4 */
    near(num(json_object_get(g, "throttled_seconds"), "sw_power_cap"), 4);
    near(num(r, "throttled_seconds"), 4);
    /* the throttling finding says the same 4 s */
    {
        const json_t *f, *thr = NULL;
        size_t i;
        json_array_foreach(json_object_get(r, "findings"), i, f)
        {
            if (strcmp(json_string_value(json_object_get(f, "id")), "throttling") == 0)
                thr = f;
        }
        assert_non_null(thr);
        assert_non_null(
            strstr(json_string_value(json_object_get(thr, "title")), "GPU 1 throttled 4 s"));
    }
    json_decref(r);
    gs_snapshot_free(s);
    gs_agg_free(a);
}

/* Steps of a `gpuscope run --profile` window (flagged profiled) are slowed by the profiler: the
 * per-rank figures leave them out by the job-level rule, so a profiled rank is not taken for a
 * straggler. Rank 0's steps 4..6 are profiled and take 2 s each. */
static void per_rank_leaves_profiled_out(void **state)
{
    struct gs_agg *a = gs_agg_new();
    json_t *r, *per, *r0, *ph;
    (void)state;

    for (int i = 0; i < 10; i++)
        for (int rk = 0; rk < 2; rk++) {
            struct gs_step_rec st = step_at(i, 10, 90);
            st.rank = rk;
            st.device = rk;
            if (rk == 0 && i >= 4 && i < 7) {
                st.flags |= GS_STEP_PROFILED;
                st.ms[GS_PH_STEP] = 1990;
                st.ms[GS_PH_FORWARD] = 1000;
            }
            assert_int_equal(gs_agg_step(a, &st), 0);
        }
    r = gs_agg_report(a, NULL);
    per = json_object_get(r, "per_rank");
    r0 = json_array_get(per, 0);
    assert_int_equal((int)num(r0, "steps"), 10); /* steps taken: all of them */
    near(num(r0, "step_p50_ms"), 100);
    near(num(r0, "step_p95_ms"), 100);
    near(num(r0, "busy_p50_ms"), 95);
    near(num(json_object_get(r0, "mean_ms"), "forward"), 30);
    /* the job-level rule, for comparison: the same steps */
    ph = json_object_get(json_object_get(r, "phases"), "total_step");
    assert_int_equal((int)num(ph, "count"), 17);
    near(num(ph, "p95_ms"), 90);
    assert_int_equal((int)num(r, "profiled_steps"), 3);
    /* equal ranks: no straggler */
    assert_true(json_is_false(json_object_get(json_object_get(r, "slowest_rank"), "straggler")));
    json_decref(r);
    gs_agg_free(a);
}

static void records_dropped_setter(void **state)
{
    struct gs_agg *a = gs_agg_new();
    json_t *r, *run;
    (void)state;

    r = gs_agg_report(a, NULL);
    run = json_object_get(r, "run");
    assert_non_null(json_object_get(run, "records_dropped"));
    assert_true(json_is_null(json_object_get(run, "records_dropped")));
    json_decref(r);

    gs_agg_set_records_dropped(a, 0);
    r = gs_agg_report(a, NULL);
    run = json_object_get(r, "run");
    assert_true(json_is_integer(json_object_get(run, "records_dropped")));
    assert_int_equal(json_integer_value(json_object_get(run, "records_dropped")), 0);
    json_decref(r);

    gs_agg_set_records_dropped(a, 7);
    gs_agg_set_records_dropped(a, 4242);
    r = gs_agg_report(a, NULL);
    run = json_object_get(r, "run");
    assert_int_equal(json_integer_value(json_object_get(run, "records_dropped")), 4242);
    assert_int_equal(json_integer_value(json_object_get(run, "dropped_records")), 0);
    json_decref(r);
    gs_agg_set_records_dropped(NULL, 1); /* harmless */
    gs_agg_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(step_series_ratios_and_percentiles),
        cmocka_unit_test(end_record_sets_throughput),
        cmocka_unit_test(unknown_is_null),
        cmocka_unit_test(ranks_counted),
        cmocka_unit_test(device_figures),
        cmocka_unit_test(run_share_of_shared_gpu),
        cmocka_unit_test(idle_periods),
        cmocka_unit_test(lost_gpu),
        cmocka_unit_test(util_samples_replace_snapshots),
        cmocka_unit_test(util_samples_time_weighted),
        cmocka_unit_test(util_samples_idle),
        cmocka_unit_test(write_and_summary),
        cmocka_unit_test(facts_in_report),
        cmocka_unit_test(records_dropped_setter),
        cmocka_unit_test(slowest_rank_and_throttle_union),
        cmocka_unit_test(per_rank_leaves_profiled_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
