/*
 * Unit tests of the agent's pure parts: configuration (key table, INI file, flags, errors
 * with file:line) and the Prometheus rendering (absent -> no line, label escaping, both
 * naming modes, self metrics while the driver is missing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/config.h"
#include "agent/log.h"
#include "agent/metrics.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

/* ---- configuration ---- */

static void test_defaults(void **state)
{
    struct gs_agent_config c;

    (void)state;
    gs_config_defaults(&c);
    assert_string_equal(c.listen, "127.0.0.1:9400");
    assert_true(c.interval_s == 1.0);
    assert_int_equal(c.metrics_compat, GS_COMPAT_NONE);
    assert_int_equal(c.log_level, GS_LOG_INFO);
}

static void test_ini_ok(void **state)
{
    struct gs_agent_config c;
    struct gs_err e;

    (void)state;
    gs_config_defaults(&c);
    assert_int_equal(gs_config_parse_text(&c, "a.conf",
                                          "# comment\n; other\n\n[agent]\n  listen = [::1]:9500\n"
                                          "interval=0.5\r\nmetrics_compat = \"dcgm\"\n"
                                          "log_level = debug",
                                          &e),
                     GS_OK);
    assert_string_equal(c.listen, "[::1]:9500");
    assert_true(c.interval_s == 0.5);
    assert_int_equal(c.metrics_compat, GS_COMPAT_DCGM);
    assert_int_equal(c.log_level, GS_LOG_DEBUG);
}

static void expect_error(const char *text, const char *msg)
{
    struct gs_agent_config c;
    struct gs_err e;

    gs_config_defaults(&c);
    gs_err_clear(&e);
    assert_int_equal(gs_config_parse_text(&c, "agent.conf", text, &e), GS_EINVAL);
    assert_string_equal(e.msg, msg);
}

static void test_ini_errors(void **state)
{
    (void)state;
    expect_error("interval = 1\ninterval = 0.01\n",
                 "agent.conf:2: interval: 0.01 is out of range 0.1..60");
    expect_error("\n\n\nintervall = 1\n", "agent.conf:4: intervall: unknown key");
    expect_error("interval = fast\n", "agent.conf:1: interval: 'fast' is not a number");
    expect_error("interval = 61\n", "agent.conf:1: interval: 61 is out of range 0.1..60");
    expect_error("metrics_compat = prom\n",
                 "agent.conf:1: metrics_compat: 'prom' is not one of none, dcgm");
    expect_error("log_level = loud\n",
                 "agent.conf:1: log_level: 'loud' is not one of error, warn, info, debug");
    expect_error("listen = 9400\n",
                 "agent.conf:1: listen: expected HOST:PORT with PORT 1..65535, got '9400'");
    expect_error("listen = localhost:9400\n",
                 "agent.conf:1: listen: 'localhost' is not an IPv4 or IPv6 address");
    expect_error("listen = 127.0.0.1:70000\n",
                 "agent.conf:1: listen: expected HOST:PORT with PORT 1..65535, got "
                 "'127.0.0.1:70000'");
    expect_error("just words\n", "agent.conf:1: just words: expected 'key = value'");
    expect_error("interval =\n", "agent.conf:1: interval: missing value");
    expect_error("[server]\n", "agent.conf:1: [server]: unknown section (only [agent])");
}

static void test_file(void **state)
{
    char path[] = "/tmp/gs-agent-conf-XXXXXX";
    int fd = mkstemp(path);
    struct gs_agent_config c;
    struct gs_err e;
    const char text[] = "interval = 2\nlog_level = nope\n";

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, sizeof text - 1), (int)(sizeof text - 1));
    close(fd);
    gs_config_defaults(&c);
    assert_int_equal(gs_config_load_file(&c, path, &e), GS_EINVAL);
    assert_non_null(strstr(e.msg, ":2: log_level: 'nope'"));
    assert_memory_equal(e.msg, path, strlen(path));
    unlink(path);
    assert_int_equal(gs_config_load_file(&c, path, &e), GS_EIO);
}

static void test_flags(void **state)
{
    char *argv[] = {"agent", "--interval", "5", "--metrics-compat=dcgm", "--log_level=warn",
                    "--listen=0.0.0.0:9401", NULL};
    char *bad[] = {"agent", "--interval=0", NULL};
    char *unknown[] = {"agent", "--frobnicate=1", NULL};
    char *missing[] = {"agent", "--config", NULL};
    struct gs_agent_args a;
    struct gs_agent_config c;
    struct gs_err e;

    (void)state;
    assert_int_equal(gs_config_parse_args(&a, 6, argv, &e), GS_OK);
    assert_null(a.config_path);
    assert_int_equal(gs_config_build(&c, &a, 6, argv, &e), GS_OK);
    assert_true(c.interval_s == 5);
    assert_int_equal(c.metrics_compat, GS_COMPAT_DCGM);
    assert_int_equal(c.log_level, GS_LOG_WARN);
    assert_string_equal(c.listen, "0.0.0.0:9401");
    assert_int_equal(gs_config_parse_args(&a, 2, bad, &e), GS_OK);
    assert_int_equal(gs_config_build(&c, &a, 2, bad, &e), GS_EINVAL);
    assert_string_equal(e.msg, "--interval: 0 is out of range 0.1..60");
    assert_int_equal(gs_config_parse_args(&a, 2, unknown, &e), GS_EUSAGE);
    assert_string_equal(e.msg, "agent: unknown option '--frobnicate'");
    assert_int_equal(gs_config_parse_args(&a, 2, missing, &e), GS_EUSAGE);
}

/* ---- metrics ---- */

static struct gs_snapshot *one_gpu(void)
{
    struct gs_snapshot *s;
    struct gs_gpu *g;

    assert_int_equal(gs_snapshot_new(&s, 1, 4, NULL), GS_OK);
    strcpy(s->sys.hostname, "node\"1\\\n");
    g = &s->gpus[0];
    g->index = 0;
    g->tst[GS_T_UUID] = GS_ST_OK;
    strcpy(g->text[GS_T_UUID], "GPU-abc");
    g->tst[GS_T_NAME] = GS_ST_OK;
    strcpy(g->text[GS_T_NAME], "NVIDIA H100");
    g->tst[GS_T_PCI_BUS_ID] = GS_ST_OK;
    strcpy(g->text[GS_T_PCI_BUS_ID], "00000000:18:00.0");
    gs_gpu_set(g, GS_M_MINOR, 3);
    gs_gpu_set(g, GS_M_MEM_USED, 2 * 1048576.0);
    gs_gpu_set(g, GS_M_UTIL_GPU, 0.92);
    gs_gpu_set(g, GS_M_CLOCK_SM, 1980e6);
    gs_gpu_set(g, GS_M_ENERGY, 1234.5);
    gs_gpu_set(g, GS_M_THROTTLE_ACTIVE, (double)GS_THR_SW_POWER_CAP);
    gs_gpu_set(g, GS_M_THROTTLE_SUPPORTED, (double)(GS_THR_SW_POWER_CAP | GS_THR_GPU_IDLE));
    g->st[GS_M_TEMP_GPU] = GS_ST_ERROR; /* present in the struct, not valid */
    g->v[GS_M_TEMP_GPU] = 55;
    return s;
}

static const struct gs_metrics_self up_self = {.up = 1, .version = "9.9", .interval_s = 1,
                                               .sample_seconds = 0.001, .cycles = 3};

static void test_render_native(void **state)
{
    struct gs_snapshot *s = one_gpu();
    struct gs_mbuf b = {0};
    const char *lbl = "{gpu=\"0\",uuid=\"GPU-abc\",hostname=\"node\\\"1\\\\\\n\"}";
    char want[256];

    (void)state;
    gs_gpu_set(&s->gpus[0], GS_M_TEMP_MARGIN, -3);
    assert_int_equal(gs_metrics_render(&b, s, &up_self, 0), GS_OK);
    snprintf(want, sizeof want, "\ngpuscope_gpu_temperature_margin_celsius%s -3\n", lbl);
    assert_non_null(strstr(b.data, want));
    snprintf(want, sizeof want, "\ngpuscope_gpu_memory_used_bytes%s 2097152\n", lbl);
    assert_non_null(strstr(b.data, want));
    snprintf(want, sizeof want, "\ngpuscope_gpu_utilization_ratio%s 0.92\n", lbl);
    assert_non_null(strstr(b.data, want));
    assert_non_null(strstr(b.data, "# TYPE gpuscope_gpu_energy_joules_total counter\n"));
    assert_non_null(strstr(b.data, "hostname=\"node\\\"1\\\\\\n\",clock=\"sm\"} 1980000000\n"));
    assert_non_null(strstr(b.data, ",reason=\"sw_power_cap\"} 1\n"));
    assert_non_null(strstr(b.data, ",reason=\"gpu_idle\"} 0\n"));
    assert_null(strstr(b.data, "hw_slowdown")); /* not supported by this GPU */
    /* absent or failed: neither a line nor a header */
    assert_null(strstr(b.data, "temperature_celsius"));
    assert_null(strstr(b.data, "power_watts"));
    assert_null(strstr(b.data, "DCGM_"));
    assert_non_null(strstr(b.data, "\ngpuscope_up 1\n"));
    assert_non_null(strstr(b.data, "\ngpuscope_cycles_total 3\n"));
    assert_non_null(strstr(b.data, "gpuscope_build_info{version=\"9.9\",schema=\"1\"} 1\n"));
    gs_mbuf_free(&b);
    gs_snapshot_free(s);
}

static void test_render_dcgm(void **state)
{
    struct gs_snapshot *s = one_gpu();
    struct gs_mbuf b = {0};

    (void)state;
    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM), GS_OK);
    assert_non_null(strstr(b.data, "\nDCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-abc\","
                                   "pci_bus_id=\"00000000:18:00.0\",device=\"nvidia3\","
                                   "modelName=\"NVIDIA H100\",Hostname=\"node\\\"1\\\\\\n\"} 2\n"));
    assert_non_null(strstr(b.data, "} 92\n"));         /* GPU_UTIL in percent */
    assert_non_null(strstr(b.data, "} 1980\n"));       /* SM clock in MHz */
    assert_non_null(strstr(b.data, "} 1234500\n"));    /* energy in mJ */
    assert_null(strstr(b.data, "DCGM_FI_DEV_GPU_TEMP")); /* absent */
    assert_non_null(strstr(b.data, "gpuscope_gpu_memory_used_bytes{")); /* native still there */
    gs_mbuf_free(&b);
    gs_snapshot_free(s);
}

static void test_render_down(void **state)
{
    struct gs_metrics_self self = {.up = 0, .reason = "nvml: nvmlInit_v2: Driver \"Not\" Loaded",
                                   .version = "1", .interval_s = 1, .sample_seconds = -1};
    struct gs_mbuf b = {0};

    (void)state;
    assert_int_equal(gs_metrics_render(&b, NULL, &self, GS_METRICS_DCGM), GS_OK);
    assert_non_null(
        strstr(b.data, "gpuscope_up{reason=\"nvml: nvmlInit_v2: Driver \\\"Not\\\" Loaded\"} 0\n"));
    assert_null(strstr(b.data, "gpuscope_gpu_"));
    assert_null(strstr(b.data, "sample_duration"));
    gs_mbuf_free(&b);
}

static void test_lost_gpu(void **state)
{
    struct gs_snapshot *s = one_gpu();
    struct gs_mbuf b = {0};

    (void)state;
    s->gpus[0].lost = 1;
    for (int m = 0; m < GS_M__COUNT; m++)
        if (s->gpus[0].st[m] == GS_ST_OK && m != GS_M_MINOR)
            s->gpus[0].st[m] = GS_ST_LOST;
    assert_int_equal(gs_metrics_render(&b, s, &up_self, 0), GS_OK);
    assert_non_null(strstr(b.data, "\ngpuscope_gpu_up{gpu=\"0\","));
    assert_non_null(strstr(b.data, "\"} 0\n"));
    assert_null(strstr(b.data, "memory_used_bytes"));
    gs_mbuf_free(&b);
    gs_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),      cmocka_unit_test(test_ini_ok),
        cmocka_unit_test(test_ini_errors),    cmocka_unit_test(test_file),
        cmocka_unit_test(test_flags),         cmocka_unit_test(test_render_native),
        cmocka_unit_test(test_render_dcgm),   cmocka_unit_test(test_render_down),
        cmocka_unit_test(test_lost_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
