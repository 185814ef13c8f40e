/*
 * test_straggler.c - the straggler rule (src/base/straggler.c): leave-one-out, two ranks, the
 * thresholds, ranks without figures, the text.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/straggler.h"

static void near(double got, double want)
{
    assert_true(fabs(got - want) < 1e-9);
}

/* Two ranks, one computing 1.2x its peer: named (a median over both, 110, reads 1.09x). */
static void two_ranks(void **state)
{
    struct gs_straggler_rank r[2] = {{100, 40}, {120, 2}};
    struct gs_straggler s;
    double x;
    (void)state;

    assert_int_equal(gs_straggler_find(r, 2, &s), 0);
    assert_int_equal(s.idx, 1);
    assert_true(s.straggler);
    near(s.ratio, 1.2);
    near(s.others_ms, 100);
    near(s.others_wait_ms, 40);
    near(s.wait_ms, 2);
    assert_int_equal(gs_straggler_ratio(r, 2, 0, &x), 0);
    near(x, 100.0 / 120.0);
    /* 1.12x: noise, not a straggler, but still the rank computing longest */
    r[1].busy_ms = 112;
    assert_int_equal(gs_straggler_find(r, 2, &s), 0);
    assert_int_equal(s.idx, 1);
    assert_false(s.straggler);
}

/* Short steps: 1.5x of 1 ms is under the gap of GS_STRAGGLER_MIN_GAP_MS. */
static void min_gap(void **state)
{
    struct gs_straggler_rank r[2] = {{1.0, 0}, {1.5, 0}};
    struct gs_straggler s;
    (void)state;

    assert_int_equal(gs_straggler_find(r, 2, &s), 0);
    assert_false(s.straggler);
    r[0].busy_ms = 10;
    r[1].busy_ms = 15;
    assert_int_equal(gs_straggler_find(r, 2, &s), 0);
    assert_true(s.straggler);
}

/* Many ranks: the others' median ignores the straggler; unknown ranks take no part; fewer
 * than two ranks with a figure: none. */
static void many_and_unknown(void **state)
{
    struct gs_straggler_rank r[5] = {{100, 30}, {NAN, NAN}, {102, 28}, {150, 1}, {98, 32}};
    struct gs_straggler s;
    char text[320];
    (void)state;

    assert_int_equal(gs_straggler_find(r, 5, &s), 0);
    assert_int_equal(s.idx, 3);
    near(s.others_ms, 100); /* median of 100, 102, 98 */
    near(s.others_wait_ms, 30);
    assert_true(s.straggler);
    gs_straggler_text(&s, 7, text, sizeof text);
    assert_string_equal(text, "rank 7 computes 50 % longer per step than the other ranks (150.0 "
                              "against 100.0 ms); the others wait 30.0 ms/step in "
                              "communication, it waits 1.0");
    assert_int_equal(gs_straggler_find(r, 2, &s), 0);
    assert_int_equal(s.idx, -1);
    assert_false(s.straggler);
    /* equal ranks: none */
    struct gs_straggler_rank eq[4] = {{50, 5}, {50, 5}, {50, 5}, {50, 5}};
    assert_int_equal(gs_straggler_find(eq, 4, &s), 0);
    assert_false(s.straggler);
    near(s.ratio, 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_ranks),
        cmocka_unit_test(min_gap),
        cmocka_unit_test(many_and_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
