/*
 * Unit tests of the tick math (src/base/clock.c) and the agent's cadence (src/agent/schedule.c):
 * boundaries that never stack up after an overrun, the count of skipped boundaries, large monotonic
 * clock values, and which readings each cycle number asks for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/schedule.h"
#include "base/clock.h"
#include "gpuscope/gs_sampler.h"

#define MS 1000000LL
#define SEC 1000000000LL

static void test_tick_on_time(void **state)
{
    uint64_t missed = 99;

    (void)state;
    /* Finished early, or just before the boundary: the next boundary, nothing missed. */
    assert_int_equal(gs_clock_next_tick(0, 3 * MS, SEC, &missed), SEC);
    assert_int_equal(missed, 0);
    assert_int_equal(gs_clock_next_tick(SEC, 2 * SEC - 1, SEC, &missed), 2 * SEC);
    assert_int_equal(missed, 0);
    /* missed may be NULL */
    assert_int_equal(gs_clock_next_tick(SEC, SEC + 1, SEC, NULL), 2 * SEC);
}

static void test_tick_overrun(void **state)
{
    uint64_t missed = 0;

    (void)state;
    /* Ended exactly on the boundary: that one is gone, the next is one period later. */
    assert_int_equal(gs_clock_next_tick(0, SEC, SEC, &missed), 2 * SEC);
    assert_int_equal(missed, 1);
    /* Ran 2.5 periods: boundaries 1 s and 2 s skipped, next at 3 s, still on the grid. */
    assert_int_equal(gs_clock_next_tick(0, 2 * SEC + 500 * MS, SEC, &missed), 3 * SEC);
    assert_int_equal(missed, 2);
    /* A 100 ms period and a 1.05 s stall: 10 boundaries skipped, next at 1.1 s. */
    assert_int_equal(gs_clock_next_tick(0, 1050 * MS, 100 * MS, &missed), 1100 * MS);
    assert_int_equal(missed, 10);
}

static void test_tick_grid_and_large_clock(void **state)
{
    const int64_t base = 1000000LL * 3600 * SEC; /* a monotonic clock after 1000000 hours */
    uint64_t missed;
    int64_t t = base;

    (void)state;
    /* Boundaries stay on base + k*step whatever the cycle lengths. */
    for (int i = 0; i < 1000; i++) {
        int64_t now = t + (i % 7) * 37 * MS; /* 0..222 ms of work per 250 ms period */
        t = gs_clock_next_tick(t, now, 250 * MS, &missed);
        assert_int_equal(missed, 0);
        assert_int_equal((t - base) % (250 * MS), 0);
    }
    assert_int_equal(t, base + 1000 * 250 * MS);
    /* A 60 s period overrun by an hour. */
    assert_int_equal(gs_clock_next_tick(base, base + 3600 * SEC + 1, 60 * SEC, &missed),
                     base + 3660 * SEC);
    assert_int_equal(missed, 60);
}

static void test_want_cadence(void **state)
{
    const unsigned every = GS_WANT_PROCS | GS_WANT_PROC_HOST | GS_WANT_PROC_UTIL | GS_WANT_GPM;
    unsigned n_pcie = 0, n_health = 0, n_mig = 0, n_static = 0;

    (void)state;
    for (uint64_t n = 0; n < 600; n++) {
        unsigned w = gs_agent_want(n);
        assert_int_equal(w & every, every);
        /* never the blocking first-GPM wait: the agent samples GPM from the previous cycle */
        assert_int_equal(w & GS_WANT_GPM_WAIT, 0);
        assert_int_equal(w & ~(unsigned)GS_WANT_ALL, 0);
        assert_int_equal(!!(w & GS_WANT_PCIE_TPUT), n % 5 == 0);
        assert_int_equal(!!(w & GS_WANT_HEALTH), n % 10 == 0);
        assert_int_equal(!!(w & GS_WANT_MIG), n % 10 == 0);
        assert_int_equal(!!(w & GS_WANT_NVLINK_STATE), n % 10 == 0);
        assert_int_equal(!!(w & GS_WANT_STATIC), n > 0 && n % 60 == 0);
        n_pcie += !!(w & GS_WANT_PCIE_TPUT);
        n_health += !!(w & GS_WANT_HEALTH);
        n_mig += !!(w & GS_WANT_MIG);
        n_static += !!(w & GS_WANT_STATIC);
    }
    assert_int_equal(n_pcie, 120);
    assert_int_equal(n_health, 60);
    assert_int_equal(n_mig, 60);
    assert_int_equal(n_static, 9); /* 60, 120, ... 540; cycle 0 reads them anyway */
}

static void test_want_first_cycle(void **state)
{
    unsigned w = gs_agent_want(0);

    (void)state;
    /* The first cycle after (re)opening reads health, MIG and PCIe at once, so no series
     * waits up to 10 cycles for its first value. */
    assert_true(w & GS_WANT_HEALTH);
    assert_true(w & GS_WANT_MIG);
    assert_true(w & GS_WANT_PCIE_TPUT);
    assert_false(w & GS_WANT_STATIC);
    /* A huge cycle count does not wrap the cadence. */
    assert_true(gs_agent_want(UINT64_MAX - 15) & GS_WANT_HEALTH); /* divisible by 10 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tick_on_time),
        cmocka_unit_test(test_tick_overrun),
        cmocka_unit_test(test_tick_grid_and_large_clock),
        cmocka_unit_test(test_want_cadence),
        cmocka_unit_test(test_want_first_cycle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
