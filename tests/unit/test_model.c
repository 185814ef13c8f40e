/*
 * Unit tests for the data model: metric metadata and snapshot allocation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

static void metric_names_round_trip(void **state)
{
    (void)state;
    for (int m = 0; m < GS_M__COUNT; m++) {
        const char *n = gs_metric_name((enum gs_metric)m);
        assert_non_null(n);
        assert_int_equal(gs_metric_by_name(n), m);
    }
    assert_int_equal(gs_metric_by_name("no_such_metric"), -1);
    assert_string_equal(gs_metric_unit(GS_M_POWER_DRAW), "watts");
}

static void zeroed_gpu_reads_absent(void **state)
{
    struct gs_snapshot *s = NULL;
    (void)state;
    assert_int_equal(gs_snapshot_new(&s, 2, 0, NULL), GS_OK);
    assert_false(gs_gpu_has(&s->gpus[1], GS_M_UTIL_GPU));
    gs_gpu_set(&s->gpus[1], GS_M_UTIL_GPU, 0.0);
    assert_true(gs_gpu_has(&s->gpus[1], GS_M_UTIL_GPU)); /* zero is a value, not absence */
    gs_snapshot_clear(s);
    assert_false(gs_gpu_has(&s->gpus[1], GS_M_UTIL_GPU));
    gs_snapshot_free(s);
}

static void procs_grow_and_keep(void **state)
{
    struct gs_snapshot *s = NULL;
    (void)state;
    assert_int_equal(gs_snapshot_new(&s, 1, 2, NULL), GS_OK);
    s->procs[1].pid = 42;
    assert_int_equal(gs_snapshot_reserve_procs(s, 100, NULL), GS_OK);
    assert_true(s->cap_procs >= 100);
    assert_int_equal(s->procs[1].pid, 42);
    assert_int_equal(s->procs[99].pid, 0);
    gs_snapshot_free(s);
    gs_snapshot_free(NULL);
}

static void err_codes_map_to_nvidia_smi_exits(void **state)
{
    struct gs_err e;
    (void)state;
    assert_int_equal(gs_err_set(&e, GS_ELOST, "nvml: gpu %d", 3), GS_ELOST);
    assert_string_equal(e.msg, "nvml: gpu 3");
    assert_int_equal(gs_rc_exit_code(GS_ENODRIVER), 9);
    assert_int_equal(gs_rc_exit_code(GS_ENOLIB), 12);
    assert_int_equal(gs_rc_exit_code(GS_ENOGPU), 6);
    assert_int_equal(gs_rc_exit_code(GS_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(metric_names_round_trip),
        cmocka_unit_test(zeroed_gpu_reads_absent),
        cmocka_unit_test(procs_grow_and_keep),
        cmocka_unit_test(err_codes_map_to_nvidia_smi_exits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
