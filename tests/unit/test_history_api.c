/*
 * Unit tests of /api/v1/history's parameters and JSON (src/agent/history_api.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/config.h"
#include "agent/history_api.h"
#include "agent/log.h"
#include "agent/metrics.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

static void expect_req_error(const char *gpu, const char *metric, const char *from, const char *to,
                             const char *step, const char *prefix)
{
    struct gs_history_req q;
    char msg[2048];

    msg[0] = '\0';
    assert_int_equal(gs_history_req_parse(&q, gpu, metric, from, to, step, 1e9, msg, sizeof msg),
                     GS_EINVAL);
    if (strncmp(msg, prefix, strlen(prefix)) != 0)
        fail_msg("got '%s', want a message starting with '%s'", msg, prefix);
}

static void test_history_req(void **state)
{
    struct gs_history_req q;
    char msg[2048];

    (void)state;
    assert_int_equal(
        gs_history_req_parse(&q, "3", "power_draw", NULL, NULL, NULL, 1e9 + 0.7, msg, sizeof msg),
        GS_OK);
    assert_int_equal(q.gpu, 3);
    assert_int_equal(q.metric, GS_M_POWER_DRAW);
    assert_true(q.to == 1e9 && q.from == 1e9 - 900 && q.step == 1);
    assert_int_equal(
        gs_history_req_parse(&q, "0", "memory_used", "100", "86500", "0", 1e9, msg, sizeof msg),
        GS_OK);
    assert_true(q.from == 100 && q.to == 86500 && q.step == 0);
    assert_int_equal(
        gs_history_req_parse(&q, "0", "memory_used", "0", "86400", NULL, 1e9, msg, sizeof msg),
        GS_OK);
    assert_true(q.step == 300); /* a day: 288 points */
    assert_true(gs_history_default_step(900) == 1);
    assert_true(gs_history_default_step(3600) == 5);
    assert_true(gs_history_default_step(30 * 86400.0) == 3600);
    assert_true(gs_history_default_step(1e9) == 86400);
    assert_true(gs_history_effective_step(90, GS_STORE_ROLLUP) == 120);
    assert_true(gs_history_effective_step(0, GS_STORE_ROLLUP) == 60);
    assert_true(gs_history_effective_step(5, GS_STORE_RAW) == 5);

    expect_req_error(NULL, "power_draw", NULL, NULL, NULL, "gpu: missing");
    expect_req_error("1.5", "power_draw", NULL, NULL, NULL, "gpu: '1.5' is not an integer");
    expect_req_error("256", "power_draw", NULL, NULL, NULL, "gpu: '256'");
    expect_req_error("-1", "power_draw", NULL, NULL, NULL, "gpu: '-1'");
    expect_req_error("0", NULL, NULL, NULL, NULL, "metric: missing");
    expect_req_error("0", "watts", NULL, NULL, NULL,
                     "metric: 'watts' is not a metric; history "
                     "keeps: utilization_gpu, ");
    expect_req_error("0", "memory_total", NULL, NULL, NULL,
                     "metric: 'memory_total' is not kept in history");
    expect_req_error("0", "power_draw", "x", NULL, NULL, "from: 'x'");
    expect_req_error("0", "power_draw", "10", "10", NULL, "from: must be before to");
    expect_req_error("0", "power_draw", NULL, "1000000000000", NULL,
                     "to: 1000000000000 is out of range");
    /* Plain decimals only (issue 18): no exponent, hex, sign or spaces. */
    expect_req_error("0", "power_draw", NULL, "1e9", NULL, "to: '1e9'");
    expect_req_error("0x1", "power_draw", NULL, NULL, NULL, "gpu: '0x1'");
    expect_req_error("+0", "power_draw", NULL, NULL, NULL, "gpu: '+0'");
    expect_req_error(" 0", "power_draw", NULL, NULL, NULL, "gpu: ' 0'");
    expect_req_error("0", "power_draw", "+5", NULL, NULL, "from: '+5'");
    expect_req_error("0", "power_draw", NULL, NULL, "0x10", "step: '0x10'");
    expect_req_error("0", "power_draw", NULL, "nan", NULL, "to: 'nan'");
    expect_req_error("0", "power_draw", NULL, NULL, "-5", "step: '-5'");
    expect_req_error("0", "power_draw", "0", "1000000", "1", "step: 1 s over 1000000 s");
    expect_req_error("0", "power_draw", "0", "100000000000", NULL, "from: 86400 s over");
}

static void test_history_doc(void **state)
{
    struct gs_history_req q = {
        .gpu = 2, .metric = GS_M_UTIL_GPU, .from = 100, .to = 200, .step = 0};
    struct gs_store_point p1 = {.t = 150.123, .min = 0.5, .avg = 0.5, .max = 0.5, .n = 1};
    struct gs_store_point p2 = {.t = 151.123, .min = 0.25, .avg = 0.375, .max = 0.5, .n = 2};
    struct gs_history_doc d;
    size_t len;
    char *err;

    (void)state;
    gs_history_doc_begin(&d);
    gs_history_doc_end(&d, &q, GS_STORE_RAW);
    assert_string_equal(d.text.data, "{\"gpu\":2,\"metric\":\"utilization_gpu\",\"unit\":\"ratio\","
                                     "\"source\":\"raw\",\"from\":100,\"to\":200,\"step\":0,"
                                     "\"truncated\":false,\"points\":[]}\n");
    gs_buf_free(&d.text);
    gs_history_doc_begin(&d);
    assert_int_equal(gs_history_doc_point(&d, &p1), 0);
    assert_int_equal(gs_history_doc_point(&d, &p2), 0);
    q.step = 90;
    gs_history_doc_end(&d, &q, GS_STORE_ROLLUP);
    assert_non_null(
        strstr(d.text.data, "\"source\":\"rollup\",\"from\":100,\"to\":200,\"step\":120,"));
    assert_non_null(
        strstr(d.text.data, "\"points\":[[150.123,0.5,0.5,0.5],[151.123,0.25,0.375,0.5]]}"));
    assert_int_equal(d.points, 2);
    gs_buf_free(&d.text);
    gs_history_doc_begin(&d);
    for (unsigned i = 0; i < GS_HISTORY_MAX_POINTS; i++)
        assert_int_equal(gs_history_doc_point(&d, &p1), 0);
    assert_int_equal(gs_history_doc_point(&d, &p1), 1);
    gs_history_doc_end(&d, &q, GS_STORE_RAW);
    assert_non_null(strstr(d.text.data, "\"truncated\":true"));
    gs_buf_free(&d.text);

    err = gs_history_error_json("gpu: 'a\"b\\c\n'", &len);
    assert_string_equal(err, "{\"error\":\"gpu: 'a\\\"b\\\\c\\u000a'\"}\n");
    assert_int_equal(len, strlen(err));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_history_req),
        cmocka_unit_test(test_history_doc),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
