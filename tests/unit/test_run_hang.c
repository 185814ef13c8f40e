/*
 * Unit tests of the hang rule (src/run/hang.c), the one of gpuscope run's watchdog and the
 * agent's training_hang: never stalled before GS_HANG_MIN_STEPS steps; steady steps then a gap
 * below and above factor x p95 and below and above the floor; once per stall, re-armed by a
 * new step; the ring of GS_HANG_WINDOW durations wrapping (old durations forgotten); wall times
 * when end times do not advance; the p95 by nearest rank; the agent (src/agent/runs_metrics.c)
 * following the same floor rule before GS_HANG_MIN_STEPS steps, on the CPU time of real
 * processes.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/runs_metrics.h"
#include "base/clock.h"
#include "gpuscope/gs_run.h"
#include "run/hang.h"
#include "run/record.h"

/* A step of wall_s seconds (data + total_step) ending at t_end. */
static struct gs_step_rec step_at(double t_end, double wall_s)
{
    struct gs_step_rec s;

    memset(&s, 0, sizeof s);
    s.version = GS_STEP_REC_VERSION;
    s.t_end = t_end;
    s.t_begin = t_end - wall_s;
    for (int p = 0; p < GS_PH_ALL; p++)
        gs_step_ms_set(&s, p, NAN);
    gs_step_ms_set(&s, GS_PH_DATA, wall_s * 1e3 / 4);
    gs_step_ms_set(&s, GS_PH_STEP, wall_s * 1e3 * 3 / 4);
    return s;
}

/* n steps every period seconds (each received as it ends), from t; returns the last end. */
static double steady(struct gs_hang *h, double *last_end, double t, unsigned n, double period)
{
    for (unsigned i = 0; i < n; i++) {
        struct gs_step_rec s = step_at(t, period / 2);
        gs_hang_step(h, last_end, &s, t);
        t += period;
    }
    return t - period;
}

static void too_few_steps(void **state)
{
    struct gs_hang h;
    double last = NAN, t;

    (void)state;
    memset(&h, 0, sizeof h);
    assert_false(gs_hang_stalled(&h, 10, 1, 1e9)); /* no step at all */
    assert_true(isnan(gs_hang_p95(&h)));
    t = steady(&h, &last, 1000, GS_HANG_MIN_STEPS - 1, 1.0);
    assert_true(isinf(gs_hang_limit(&h, 10, 1)));
    assert_false(gs_hang_stalled(&h, 10, 1, t + 1e6));
    assert_false(gs_hang_new_stall(&h, 10, 1, t + 1e6));
    t = steady(&h, &last, t + 1.0, 1, 1.0); /* the fifth: judged from now on */
    assert_true(gs_hang_stalled(&h, 10, 1, t + 1e6));
}

static void factor_and_floor(void **state)
{
    struct gs_hang h;
    double last = NAN, t;

    (void)state;
    memset(&h, 0, sizeof h);
    t = steady(&h, &last, 1000, 40, 0.5); /* a step every 0.5 s */
    assert_true(fabs(gs_hang_p95(&h) - 0.5) < 1e-9);
    /* factor 10: 5 s, above the floor of 1 s */
    assert_true(fabs(gs_hang_limit(&h, 10, 1) - 5.0) < 1e-9);
    assert_false(gs_hang_stalled(&h, 10, 1, t + 4.9));
    assert_true(gs_hang_stalled(&h, 10, 1, t + 5.0));
    /* the floor wins when it is above factor x p95 */
    assert_true(fabs(gs_hang_limit(&h, 10, 60) - 60.0) < 1e-9);
    assert_false(gs_hang_stalled(&h, 10, 60, t + 30));
    assert_false(gs_hang_stalled(&h, 10, 60, t + 59.9));
    assert_true(gs_hang_stalled(&h, 10, 60, t + 60));
    /* the defaults: gpuscope run's --hang-after/--hang-min, the agent's training_hang_* */
    assert_false(gs_hang_stalled(&h, GS_HANG_FACTOR, GS_HANG_MIN_S, t + GS_HANG_MIN_S - 1));
    assert_true(gs_hang_stalled(&h, GS_HANG_FACTOR, GS_HANG_MIN_S, t + GS_HANG_MIN_S));
}

/* The p95 is the nearest rank: one outlier in 40 does not move it, three in 40 do. */
static void p95_nearest_rank(void **state)
{
    struct gs_hang h;
    double last = NAN, t;
    struct gs_step_rec s;

    (void)state;
    memset(&h, 0, sizeof h);
    t = steady(&h, &last, 1000, 39, 0.25);
    s = step_at(t + 9.0, 0.1); /* one long step-to-step interval, e.g. a checkpoint */
    gs_hang_step(&h, &last, &s, t + 9.0);
    assert_true(fabs(gs_hang_p95(&h) - 0.25) < 1e-9);
    for (int i = 1; i <= 2; i++) {
        s = step_at(t + 9.0 * (i + 1), 0.1);
        gs_hang_step(&h, &last, &s, t + 9.0 * (i + 1));
    }
    assert_true(fabs(gs_hang_p95(&h) - 9.0) < 1e-9); /* ceil(0.95 x 42) = 40th of 42 */
}

static void once_per_stall(void **state)
{
    struct gs_hang h;
    double last = NAN, t;

    (void)state;
    memset(&h, 0, sizeof h);
    t = steady(&h, &last, 1000, 10, 1.0);
    assert_false(gs_hang_new_stall(&h, 3, 1, t + 2.9));
    assert_true(gs_hang_new_stall(&h, 3, 1, t + 3.0));
    gs_hang_mark(&h);
    assert_false(gs_hang_new_stall(&h, 3, 1, t + 3.5)); /* reported once */
    assert_true(gs_hang_stalled(&h, 3, 1, t + 3.5));    /* and still stalled */
    t = steady(&h, &last, t + 4.0, 1, 1.0);             /* a new step re-arms it */
    assert_false(gs_hang_stalled(&h, 3, 1, t + 1.0));
    assert_false(gs_hang_new_stall(&h, 3, 1, t + 1.0));
    /* the late step's 4 s interval is in the ring: the p95 of 11 durations is the largest */
    assert_true(fabs(gs_hang_p95(&h) - 4.0) < 1e-9);
    assert_false(gs_hang_new_stall(&h, 3, 1, t + 11.9));
    assert_true(gs_hang_new_stall(&h, 3, 1, t + 12.0));
}

/* GS_HANG_WINDOW durations are kept: older ones are forgotten as the ring wraps. */
static void ring_wraps(void **state)
{
    struct gs_hang h;
    double last = NAN, t;

    (void)state;
    memset(&h, 0, sizeof h);
    t = steady(&h, &last, 1000, GS_HANG_WINDOW, 5.0); /* slow steps fill the ring */
    assert_int_equal(h.n, GS_HANG_WINDOW);
    assert_true(fabs(gs_hang_p95(&h) - 5.0) < 1e-9);
    /* fast steps: while more than 5 % of the ring is still slow, the p95 is slow */
    t = steady(&h, &last, t + 0.125, GS_HANG_WINDOW - 8, 0.125);
    assert_int_equal(h.n, GS_HANG_WINDOW);
    assert_true(fabs(gs_hang_p95(&h) - 5.0) < 1e-9);
    assert_false(gs_hang_stalled(&h, 10, 0.5, t + 49));
    /* three more and only five slow ones are left of the window */
    t = steady(&h, &last, t + 0.125, 3, 0.125);
    assert_true(fabs(gs_hang_p95(&h) - 0.125) < 1e-9);
    assert_false(gs_hang_stalled(&h, 10, 0.5, t + 1.2));
    assert_true(gs_hang_stalled(&h, 10, 0.5, t + 1.25));
}

/* Records whose end times do not advance (or a stream without a previous end) count their
 * wall times: 5 steps of 0.25 s sharing one end time give a limit of 2.5 s at factor 10. */
static void wall_times_without_intervals(void **state)
{
    struct gs_hang h;
    struct gs_step_rec s = step_at(1000.0, 0.25);
    double last = NAN;

    (void)state;
    memset(&h, 0, sizeof h);
    for (int i = 0; i < GS_HANG_MIN_STEPS; i++)
        gs_hang_step(&h, &last, &s, 2000.0);
    assert_true(fabs(gs_hang_p95(&h) - 0.25) < 1e-9);
    assert_false(gs_hang_stalled(&h, 10, 1, 2002.4));
    assert_true(gs_hang_stalled(&h, 10, 1, 2002.5));
    /* no rank to follow (NULL): the wall time too */
    memset(&h, 0, sizeof h);
    s = step_at(1000.0, 0.3);
    gs_hang_step(&h, NULL, &s, 2000.0);
    assert_true(fabs(gs_hang_p95(&h) - 0.3) < 1e-9);
    /* a step without phases: its clock span */
    for (int p = 0; p < GS_PH_ALL; p++)
        gs_step_ms_set(&s, p, NAN);
    assert_true(fabs(gs_hang_wall_s(&s) - 0.3) < 1e-9);
    s.t_begin = s.t_end;
    assert_true(gs_hang_wall_s(&s) == 0);
}

/* Begun (the job's start): before GS_HANG_MIN_STEPS steps, min_s with no step and no
 * activity is a stall; activity or a step restarts the quiet; the ring takes over after. */
static void begun_no_steps(void **state)
{
    struct gs_hang h;
    double last = NAN, t;

    (void)state;
    memset(&h, 0, sizeof h);
    gs_hang_begin(&h, 1000);
    assert_true(gs_hang_quiet_since(&h) == 1000);
    assert_true(gs_hang_limit(&h, 10, 5) == 5);
    assert_false(gs_hang_stalled(&h, 10, 5, 1004.9));
    assert_true(gs_hang_stalled(&h, 10, 5, 1005));
    gs_hang_active(&h, 1003); /* CPU used: not quiet since then */
    assert_false(gs_hang_stalled(&h, 10, 5, 1007.9));
    assert_true(gs_hang_new_stall(&h, 10, 5, 1008));
    gs_hang_mark(&h);
    assert_false(gs_hang_new_stall(&h, 10, 5, 1009));
    gs_hang_begin(&h, 2000); /* a second begin keeps the first */
    assert_true(h.begun_s == 1000);
    t = steady(&h, &last, 1010, 2, 1.0); /* two steps, still before the ring judges */
    assert_true(gs_hang_quiet_since(&h) == t);
    assert_false(gs_hang_stalled(&h, 10, 5, t + 4.9));
    assert_true(gs_hang_stalled(&h, 10, 5, t + 5));
    t = steady(&h, &last, t + 1.0, GS_HANG_MIN_STEPS, 1.0); /* the ring: 10 x 1 s */
    gs_hang_active(&h, t + 100);                            /* activity no longer counts */
    assert_true(gs_hang_quiet_since(&h) == t);
    assert_false(gs_hang_stalled(&h, 10, 5, t + 9.9));
    assert_true(gs_hang_stalled(&h, 10, 5, t + 10));
}

/* CPU seconds this process has used. */
static double cpu_self(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Uses sec seconds of CPU (the busy rank's process works). */
static void spin(double sec)
{
    double c0 = cpu_self();

    while (cpu_self() - c0 < sec)
        ;
}

/* The agent's training_hang judges a rank by the same rule as `gpuscope run`'s watchdog: two
 * steps then nothing (a hang at step 2, before GS_HANG_MIN_STEPS) is a stall after min_s when
 * the rank's process tree uses no CPU (a sleeping child); a rank whose process works (this
 * one, spinning 0.1 s of CPU a second) is not stalled; one whose hello gave no process is judged
 * only from GS_HANG_MIN_STEPS steps on. */
static void agent_first_steps(void **state)
{
    struct gs_runm *m = gs_runm_new("node");
    struct gs_record_hello h;
    unsigned char st[8];
    unsigned no_gpu = 0;
    double now;
    pid_t idle;

    (void)state;
    assert_non_null(m);
    idle = fork();
    assert_true(idle >= 0);
    if (idle == 0) { /* holds no pipe of the test's, and goes by itself if left behind */
        close(STDOUT_FILENO);
        close(STDERR_FILENO);
        alarm(60);
        pause();
        _exit(0);
    }
    memset(&h, 0, sizeof h);
    h.world_size = 3;
    for (int r = 0; r < 3; r++) {
        h.rank = r;
        gs_runm_hello(m, 1, 10 + (uint64_t)r, "job", &h, r == 0 ? idle : r == 1 ? getpid() : 0);
    }
    for (int k = 1; k <= 2; k++) /* steps 1 and 2 of each rank, then none */
        for (int r = 0; r < 3; r++) {
            struct gs_step_rec s = step_at(1000.0 + k, 0.5);
            s.rank = r;
            s.step = (uint64_t)k;
            gs_runm_step(m, 1, 10 + (uint64_t)r, "job", &s);
        }
    now = gs_clock_real_s();
    memset(st, 0, sizeof st);
    assert_int_equal(gs_runm_stalled(m, now, 10, 3, st, 8, &no_gpu), 0); /* first reading */
    for (int k = 1; k <= 5; k++) {
        unsigned n;
        spin(0.1);
        n = gs_runm_stalled(m, now + k, 10, 3, st, 8, &no_gpu);
        if (k < 3) {
            assert_int_equal(n, 0);
        } else { /* min_s since its last step: the idle rank only */
            assert_int_equal(n, 1);
            assert_int_equal(no_gpu, 1);
            assert_true(gs_runm_run_stalled(m, 1, NULL) >= 3.0);
        }
    }
    /* the rank without a process: after GS_HANG_MIN_STEPS steps, the ring's rule as before */
    for (int k = 3; k <= GS_HANG_MIN_STEPS; k++) {
        struct gs_step_rec s = step_at(1000.0 + k, 0.5);
        s.rank = 2;
        s.step = (uint64_t)k;
        gs_runm_step(m, 1, 12, "job", &s);
    }
    now = gs_clock_real_s();
    /* idle rank 0 still stalled, busy rank 1 not; rank 2: 1 s steps, factor 10, floor 3:
     * stalled after 10 s */
    spin(0.6); /* 0.05 of a core over the 5.5 s (and real time) since the last check */
    assert_int_equal(gs_runm_stalled(m, now + 9.5, 10, 3, st, 8, &no_gpu), 1);
    spin(0.1);
    assert_int_equal(gs_runm_stalled(m, now + 10.5, 10, 3, st, 8, &no_gpu), 2);
    kill(idle, SIGKILL);
    waitpid(idle, NULL, 0);
    gs_runm_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(too_few_steps),    cmocka_unit_test(factor_and_floor),
        cmocka_unit_test(p95_nearest_rank), cmocka_unit_test(once_per_stall),
        cmocka_unit_test(ring_wraps),       cmocka_unit_test(wall_times_without_intervals),
        cmocka_unit_test(begun_no_steps),   cmocka_unit_test(agent_first_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
