/*
 * Unit tests of the per-rank series of live runs (src/agent/runs_metrics.c): labels from the
 * hello (job, node, rank) with the run's name and the agent's host name as fallbacks, the gpu
 * label once attributed; the step-time and busy-time summaries' quantiles over the last 128 steps
 * and its _sum/_count over all; phase counters and ratios; a dropped connection's and a finished
 * run's series gone; the bound (256 ranks, the rest counted, never shown in part); label values
 * escaped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/metrics.h"
#include "agent/runs_metrics.h"
#include "base/clock.h"
#include "run/record.h"

static char *render(struct gs_runm *m)
{
    struct gs_buf b = {0};
    char *s;

    gs_runm_render(m, &b);
    assert_int_equal(gs_buf_status(&b), GS_BUF_OK);
    s = strndup(b.data ? b.data : "", b.len);
    gs_buf_free(&b);
    return s;
}

/* The value of the line that starts with prefix (exactly up to the value), or NAN. */
static double line_value(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);

    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return NAN;
}

/* The facts MFU needs: 1e9 parameters in bfloat16. */
static void set_facts(struct gs_record_hello *h)
{
    h->facts.n = 2;
    snprintf(h->facts.f[0].key, sizeof h->facts.f[0].key, "param_count");
    h->facts.f[0].type = GS_FACT_INT;
    h->facts.f[0].v.i = 1000000000;
    snprintf(h->facts.f[1].key, sizeof h->facts.f[1].key, "param_dtype");
    h->facts.f[1].type = GS_FACT_STR;
    snprintf(h->facts.f[1].v.s, sizeof h->facts.f[1].v.s, "bfloat16");
}

static unsigned count_series(const char *text)
{
    unsigned n = 0;

    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, "gpuscope_run_", 13) == 0 && strncmp(p, "gpuscope_run_ranks", 18) != 0)
            n++;
    return n;
}

static struct gs_step_rec step(uint64_t n, int32_t rank, double wall_ms)
{
    struct gs_step_rec s;

    memset(&s, 0, sizeof s);
    s.version = GS_STEP_REC_VERSION;
    s.step = n;
    s.rank = rank;
    s.t_begin = 1000.0 + (double)n;
    s.t_end = s.t_begin + wall_ms / 1e3;
    for (int p = 0; p < GS_PH_ALL; p++)
        gs_step_ms_set(&s, p, NAN);
    gs_step_ms_set(&s, GS_PH_DATA, wall_ms / 4);
    gs_step_ms_set(&s, GS_PH_FORWARD, wall_ms / 4);
    gs_step_ms_set(&s, GS_PH_COMM, wall_ms / 2);
    gs_step_ms_set(&s, GS_PH_STEP, wall_ms * 3 / 4);
    return s;
}

static void labels_summary_and_staleness(void **state)
{
    struct gs_runm *m = gs_runm_new("host-1");
    struct gs_record_hello h;
    char *text;
    (void)state;

    memset(&h, 0, sizeof h);
    h.rank = 5;
    h.world_size = 8;
    snprintf(h.job, sizeof h.job, "slurm-42");
    snprintf(h.node, sizeof h.node, "node-\"7\"");
    set_facts(&h);
    gs_runm_hello(m, 3, 100, "llama", &h, 0);
    for (uint64_t n = 1; n <= 200; n++) {
        struct gs_step_rec s = step(n, 5, (double)n);
        s.tokens = 1000;
        gs_runm_step(m, 3, 100, "llama", &s);
    }
    /* a connection without a hello: the run's name and the agent's host name */
    struct gs_step_rec s2 = step(1, 0, 10.0);
    gs_runm_step(m, 4, 200, "", &s2);
    gs_runm_gpu(m, 3, 100, 6, "NVIDIA H100 80GB HBM3");
    text = render(m);
    /* tokens/s over the last 128 steps (73..200 ms: 17.472 s, 128000 tokens); MFU = 6N x that
     * / the H100 SXM's bf16 peak (989.5 TFLOP/s, the parameters are bfloat16) */
    assert_true(fabs(line_value(text, "gpuscope_run_tokens_per_second{train_job=\"slurm-42\","
                                      "rank=\"5\",node=\"node-\\\"7\\\"\",gpu=\"6\"}") -
                     128000.0 / 17.472) < 1e-4); /* printed with 9 digits */
    assert_true(fabs(line_value(text, "gpuscope_run_mfu{train_job=\"slurm-42\",rank=\"5\","
                                      "node=\"node-\\\"7\\\"\",gpu=\"6\"}") /
                         (6e9 * 128000.0 / 17.472 / 989.5e12) -
                     1.0) < 1e-6);
    /* no tokens, no hello: neither series for run 4 */
    assert_null(strstr(text, "gpuscope_run_tokens_per_second{train_job=\"run-4\""));
    assert_null(strstr(text, "gpuscope_run_mfu{train_job=\"run-4\""));
    /* last 128 of 1..200 ms: 73..200; nearest rank p50 = the 64th = 136 ms */
    assert_true(line_value(text, "gpuscope_run_step_seconds{train_job=\"slurm-42\",rank=\"5\","
                                 "node=\"node-\\\"7\\\"\",gpu=\"6\",quantile=\"0.5\"}") == 0.136);
    assert_true(line_value(text, "gpuscope_run_step_seconds{train_job=\"slurm-42\",rank=\"5\","
                                 "node=\"node-\\\"7\\\"\",gpu=\"6\",quantile=\"0.99\"}") == 0.199);
    /* busy = wall - communication (half of each step here): 68 ms */
    assert_true(
        fabs(line_value(text, "gpuscope_run_step_busy_seconds{train_job=\"slurm-42\","
                              "rank=\"5\",node=\"node-\\\"7\\\"\",gpu=\"6\",quantile=\"0.5\"}") -
             0.068) < 1e-12);
    assert_true(fabs(line_value(text, "gpuscope_run_step_seconds_sum{train_job=\"slurm-42\","
                                      "rank=\"5\",node=\"node-\\\"7\\\"\",gpu=\"6\"}") -
                     20.1) < 1e-9); /* 1 + ... + 200 ms */
    assert_true(line_value(text, "gpuscope_run_step_seconds_count{train_job=\"slurm-42\","
                                 "rank=\"5\",node=\"node-\\\"7\\\"\",gpu=\"6\"}") == 200);
    assert_true(fabs(line_value(text, "gpuscope_run_data_ratio{train_job=\"slurm-42\",rank=\"5\","
                                      "node=\"node-\\\"7\\\"\",gpu=\"6\"}") -
                     0.25) < 1e-9);
    assert_true(fabs(line_value(text, "gpuscope_run_communication_ratio{train_job=\"slurm-42\","
                                      "rank=\"5\",node=\"node-\\\"7\\\"\",gpu=\"6\"}") -
                     0.5) < 1e-9);
    assert_true(line_value(text, "gpuscope_run_steps_completed{train_job=\"slurm-42\",rank=\"5\","
                                 "node=\"node-\\\"7\\\"\",gpu=\"6\"}") == 200);
    assert_non_null(strstr(text,
                           "gpuscope_run_rank_info{train_job=\"slurm-42\",rank=\"5\","
                           "node=\"node-\\\"7\\\"\",gpu=\"6\",run=\"3\",world_size=\"8\"} 1\n"));
    assert_non_null(strstr(text,
                           "gpuscope_run_phase_seconds_total{train_job=\"slurm-42\","
                           "rank=\"5\",node=\"node-\\\"7\\\"\",gpu=\"6\",phase=\"forward\"}"));
    assert_null(strstr(text, "phase=\"total_step\"")); /* the wall time is the summary's */
    assert_null(strstr(text, "phase=\"backward\""));   /* never measured: no series */
    assert_non_null(strstr(text, "gpuscope_run_rank_info{train_job=\"run-4\",rank=\"0\","
                                 "node=\"host-1\",gpu=\"\",run=\"4\",world_size=\"-1\"} 1\n"));
    assert_true(line_value(text, "gpuscope_run_ranks") == 2);
    free(text);
    /* the connection ends: its series go; then the other run ends */
    gs_runm_drop(m, 3, 100);
    text = render(m);
    assert_null(strstr(text, "slurm-42"));
    assert_non_null(strstr(text, "run-4"));
    free(text);
    gs_runm_drop(m, 4, 0);
    text = render(m);
    assert_int_equal(count_series(text), 0);
    assert_true(line_value(text, "gpuscope_run_ranks") == 0);
    assert_null(strstr(text, "# TYPE gpuscope_run_step_seconds")); /* no empty families */
    free(text);
    gs_runm_free(m);
}

static void series_are_bounded(void **state)
{
    struct gs_runm *m = gs_runm_new("h");
    struct gs_record_hello h;
    char *text;
    (void)state;

    memset(&h, 0, sizeof h);
    h.rank = h.world_size = -1;
    set_facts(&h); /* with tokens and a known GPU: every family, gpuscope_run_mfu included */
    for (unsigned c = 0; c < GS_RUNM_MAX_RANKS + 44; c++) {
        struct gs_step_rec s = step(1, (int32_t)c, 100.0);
        gs_step_ms_set(&s, GS_PH_BACKWARD, 1.0);
        gs_step_ms_set(&s, GS_PH_OPTIMIZER, 1.0);
        gs_step_ms_set(&s, GS_PH_COMM_EXPOSED, 1.0);
        gs_step_ms_set(&s, GS_PH_OTHER, 1.0);
        s.samples = 8;
        s.tokens = 4096;
        gs_runm_hello(m, 1 + c / 64, 1000 + c, "big", &h, 0);
        gs_runm_step(m, 1 + c / 64, 1000 + c, "big", &s);
        gs_runm_step(m, 1 + c / 64, 1000 + c, "big", &s); /* a second step: no new slot */
        gs_runm_gpu(m, 1 + c / 64, 1000 + c, 0, "NVIDIA A100-SXM4-80GB");
    }
    text = render(m);
    assert_true(line_value(text, "gpuscope_run_ranks") == GS_RUNM_MAX_RANKS);
    assert_true(line_value(text, "gpuscope_run_ranks_dropped_total") ==
                44 * 3); /* hello, 2 steps */
    /* every kept rank whole: all its series, at the documented bound */
    assert_int_equal(count_series(text), GS_RUNM_MAX_RANKS * GS_RUNM_SERIES_PER_RANK);
    free(text);
    /* a run ends: its slots serve new ranks */
    gs_runm_drop(m, 1, 0);
    struct gs_step_rec s = step(1, 9999, 10.0);
    gs_runm_step(m, 99, 1, "new", &s);
    text = render(m);
    assert_non_null(strstr(text, "rank=\"9999\""));
    assert_true(line_value(text, "gpuscope_run_ranks") == GS_RUNM_MAX_RANKS - 64 + 1);
    free(text);
    gs_runm_free(m);
}

/* A rank is stalled once no step came for max(min_s, factor x p95 step-to-step interval): not
 * before 5 steps, not while steps come, its GPU marked, an unknown GPU counted but marking
 * nothing. */
static void stalled_ranks(void **state)
{
    struct gs_runm *m = gs_runm_new("node1");
    unsigned char st[8];
    double now;

    (void)state;
    assert_non_null(m);
    for (uint64_t i = 1; i <= 4; i++) {
        struct gs_step_rec s = step(i, 0, 200.0);
        s.t_begin = 1000.0 + 0.25 * (double)i;
        s.t_end = s.t_begin + 0.2;
        gs_runm_step(m, 1, 10, "r", &s);
    }
    gs_runm_gpu(m, 1, 10, 3, NULL);
    now = gs_clock_real_s();
    memset(st, 0, sizeof st);
    assert_int_equal(gs_runm_stalled(m, now + 1000, 10, 60, st, 8, NULL), 0); /* 4 steps: too few */
    for (uint64_t i = 5; i <= 40; i++) {
        struct gs_step_rec s = step(i, 0, i == 40 ? 9000.0 : 200.0); /* one outlier */
        s.t_begin = 1000.0 + 0.25 * (double)i;                       /* a step every 0.25 s */
        s.t_end = s.t_begin + (i == 40 ? 9.0 : 0.2);
        gs_runm_step(m, 1, 10, "r", &s);
    }
    {
        struct gs_step_rec s = step(1, 1, 200.0); /* rank 1, GPU unknown */
        for (int k = 0; k < 5; k++)
            gs_runm_step(m, 1, 11, "r", &s);
    }
    now = gs_clock_real_s();
    assert_int_equal(gs_runm_stalled(m, now + 30, 10, 60, st, 8, NULL), 0); /* under min_s */
    assert_int_equal(st[3], 0);
    /* rank 0: the p95 step-to-step interval is 0.25 s (the outlier is above it), factor 10
     * gives 2.5 s; rank 1's records share one end time: its wall times' 0.2 s, 2 s */
    assert_int_equal(gs_runm_stalled(m, now + 1.5, 10, 1, st, 8, NULL), 0);
    assert_int_equal(gs_runm_stalled(m, now + 2.2, 10, 1, st, 8, NULL), 1);
    assert_int_equal(st[3], 0);
    assert_int_equal(gs_runm_stalled(m, now + 3.0, 10, 1, st, 8, NULL), 2);
    assert_int_equal(st[3], 1);
    for (int i = 0; i < 8; i++)
        if (i != 3)
            assert_int_equal(st[i], 0);
    /* a dropped connection is no stalled rank */
    gs_runm_drop(m, 1, 0);
    memset(st, 0, sizeof st);
    assert_int_equal(gs_runm_stalled(m, now + 1000, 10, 1, st, 8, NULL), 0);
    assert_int_equal(st[3], 0);
    gs_runm_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(labels_summary_and_staleness),
        cmocka_unit_test(series_are_bounded),
        cmocka_unit_test(stalled_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
