/*
 * Unit tests of the agent's configuration (src/agent/config.c): the key table and its defaults,
 * the INI file, flags, errors with file:line, durations, the restart-only keys, the history keys.
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

#include <arpa/inet.h>
#include <netinet/in.h>

#include "agent/config.h"
#include "agent/history_api.h"
#include "agent/hosts.h"
#include "agent/listen.h"
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
                 "agent.conf:1: metrics_compat: 'prom' is not one of none, dcgm, dcgm3");
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

/* `user` is resolved while parsing, so a typo names its line (privdrop.h). */
static void test_user_key(void **state)
{
    struct gs_agent_config c;
    struct gs_err e;
    char *argv[] = {"agent", "--user", "no-such-gs-user-2"};

    (void)state;
    gs_config_defaults(&c);
    assert_string_equal(c.user, "");
    assert_int_equal(gs_config_parse_text(&c, "a.conf", "user = root\n", &e), GS_OK);
    assert_string_equal(c.user, "root");
    expect_error("interval = 1\nuser = no-such-gs-user\n",
                 "agent.conf:2: user: no such user 'no-such-gs-user'");
    gs_err_clear(&e);
    assert_int_equal(gs_config_apply_args(&c, 3, argv, &e), GS_EINVAL);
    assert_string_equal(e.msg, "--user: no such user 'no-such-gs-user-2'");
    assert_string_equal(c.user, "root");
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

/* SIGHUP keeps the restart-only keys of the key table (and says so in --help); the others,
 * influx_url among them, take the new value. */
static void test_restart_keys(void **state)
{
    struct gs_agent_config run, c;
    char *help = NULL;
    size_t len = 0;
    FILE *f;

    (void)state;
    gs_config_defaults(&run);
    c = run;
    snprintf(c.listen, sizeof c.listen, "0.0.0.0:9999");
    snprintf(c.data_dir, sizeof c.data_dir, "/elsewhere");
    c.history = !run.history;
    snprintf(c.push.influx_url, sizeof c.push.influx_url, "http://influx:8086");
    c.interval_s = 7;
    gs_config_keep_restart_keys(&c, &run, NULL);
    assert_string_equal(c.listen, run.listen);
    assert_string_equal(c.data_dir, run.data_dir);
    assert_int_equal(c.history, run.history);
    assert_string_equal(c.push.influx_url, "http://influx:8086");
    assert_true(c.interval_s == 7);
    snprintf(c.data_dir, sizeof c.data_dir, "/elsewhere");
    gs_config_keep_restart_keys(&c, &run, "data_dir"); /* fixed by the caller: no warning */
    assert_string_equal(c.data_dir, run.data_dir);

    f = open_memstream(&help, &len);
    assert_non_null(f);
    gs_config_usage(f);
    fclose(f);
    assert_non_null(strstr(help, "--listen           HOST:PORT of the HTTP server ([V6]:PORT for "
                                 "IPv6); restart to change (default"));
    assert_non_null(strstr(help, "--influx-url       InfluxDB base URL (http://HOST:8086); empty: "
                                 "no InfluxDB push (default"));
    assert_non_null(strstr(help, "keep a history in DATA_DIR/history.db; restart to change"));
    free(help);
}

static void test_flags(void **state)
{
    char *argv[] = {"agent",
                    "--interval",
                    "5",
                    "--metrics-compat=dcgm",
                    "--log_level=warn",
                    "--listen=0.0.0.0:9401",
                    NULL};
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

static void test_duration(void **state)
{
    static const char *const bad[] = {"",    "h",   "-1h",   "+1h", " 1h", "1h ",  "1hh", "1w",
                                      "1 h", "1e3", "1e999", "nan", "inf", "0x10", ".5h", "24H"};
    double v = -1;

    (void)state;
    assert_int_equal(gs_config_parse_duration("24h", &v), GS_OK);
    assert_true(v == 86400);
    assert_int_equal(gs_config_parse_duration("30d", &v), GS_OK);
    assert_true(v == 30 * 86400.0);
    assert_int_equal(gs_config_parse_duration("90", &v), GS_OK);
    assert_true(v == 90);
    assert_int_equal(gs_config_parse_duration("45s", &v), GS_OK);
    assert_true(v == 45);
    assert_int_equal(gs_config_parse_duration("15m", &v), GS_OK);
    assert_true(v == 900);
    assert_int_equal(gs_config_parse_duration("1.5h", &v), GS_OK);
    assert_true(v == 5400);
    v = 7;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(gs_config_parse_duration(bad[i], &v), GS_EINVAL);
    assert_true(v == 7); /* untouched on error */
    assert_int_equal(gs_config_parse_duration(NULL, &v), GS_EINVAL);
}

static void test_history_keys(void **state)
{
    struct gs_agent_config c;
    struct gs_err e;
    char dir[64];

    (void)state;
    gs_config_defaults(&c);
    assert_int_equal(c.history, GS_HISTORY_ON);
    assert_true(c.flush_interval_s == 5);
    assert_true(c.retention_raw_s == 86400);
    assert_true(c.retention_rollup_s == 30 * 86400.0);
    assert_true(c.data_dir[0] == '/');
    assert_int_equal(gs_config_parse_text(&c, "a.conf",
                                          "data_dir = \"/srv/gs\"\nhistory = off\n"
                                          "flush_interval = 10\nretention_raw = 2d\n"
                                          "retention_rollup = 365d\n",
                                          &e),
                     GS_OK);
    assert_string_equal(c.data_dir, "/srv/gs");
    assert_int_equal(c.history, GS_HISTORY_OFF);
    assert_true(c.flush_interval_s == 10);
    assert_true(c.retention_raw_s == 2 * 86400.0);
    assert_true(c.retention_rollup_s == 365 * 86400.0);
    expect_error("flush_interval = 0.5\n",
                 "agent.conf:1: flush_interval: 0.5 is out of range 1..300");
    expect_error("flush_interval = 301\n",
                 "agent.conf:1: flush_interval: 301 is out of range 1..300");
    expect_error("retention_raw = 24 hours\n",
                 "agent.conf:1: retention_raw: '24 hours' is not a duration (a number with s, m, "
                 "h or d)");
    expect_error("retention_rollup = 10s\n",
                 "agent.conf:1: retention_rollup: 10s is out of range 1m..3650d");
    expect_error("history = maybe\n", "agent.conf:1: history: 'maybe' is not one of off, on");

    gs_config_default_data_dir(dir, sizeof dir, NULL, 0, "/x", "/home/u");
    assert_string_equal(dir, "/var/lib/gpuscope");
    gs_config_default_data_dir(dir, sizeof dir, "", 1000, "/x/state", "/home/u");
    assert_string_equal(dir, "/x/state/gpuscope");
    gs_config_default_data_dir(dir, sizeof dir, NULL, 1000, "relative", "/home/u");
    assert_string_equal(dir, "/home/u/.local/state/gpuscope");
    gs_config_default_data_dir(dir, sizeof dir, NULL, 1000, NULL, "/home/u");
    assert_string_equal(dir, "/home/u/.local/state/gpuscope");
    gs_config_default_data_dir(dir, sizeof dir, "/var/lib/gpuscope:/var/lib/other", 61234, "/x",
                               "/");
    assert_string_equal(dir, "/var/lib/gpuscope");

    /* the step-record socket: systemd's RuntimeDirectory=, root, XDG, else off */
    gs_config_default_socket(dir, sizeof dir, "/run/gpuscope:/run/x", 61234, "/run/user/1");
    assert_string_equal(dir, "/run/gpuscope/steps.sock");
    gs_config_default_socket(dir, sizeof dir, NULL, 0, "/run/user/0");
    assert_string_equal(dir, "/run/gpuscope/steps.sock");
    gs_config_default_socket(dir, sizeof dir, "relative", 1000, "/run/user/1000");
    assert_string_equal(dir, "/run/user/1000/gpuscope/steps.sock");
    gs_config_default_socket(dir, sizeof dir, NULL, 1000, "relative");
    assert_string_equal(dir, "off");
}

static void test_history_flags(void **state)
{
    char *argv[] = {"agent", "--retention-raw=36h", "--data-dir", "/d", "--history", "off", NULL};
    char *bad[] = {"agent", "--retention-rollup=1y", NULL};
    struct gs_agent_args a;
    struct gs_agent_config c;
    struct gs_err e;

    (void)state;
    assert_int_equal(gs_config_parse_args(&a, 6, argv, &e), GS_OK);
    assert_int_equal(gs_config_build(&c, &a, 6, argv, &e), GS_OK);
    assert_true(c.retention_raw_s == 36 * 3600.0);
    assert_string_equal(c.data_dir, "/d");
    assert_int_equal(c.history, GS_HISTORY_OFF);
    assert_int_equal(gs_config_parse_args(&a, 2, bad, &e), GS_OK);
    assert_int_equal(gs_config_build(&c, &a, 2, bad, &e), GS_EINVAL);
    assert_string_equal(e.msg,
                        "--retention-rollup: '1y' is not a duration (a number with s, m, h or d)");
}

/* The Host allow-list (issue 24): allowed_hosts parsed and checked, and which Host values the
 * TCP door answers: localhost, loopback addresses, the listen address, the address the
 * connection came in on (a Prometheus scraping by IP), the hostname, configured names, any
 * port, case and a trailing dot; a rebinding name, a malformed value or none refused. */
static void test_allowed_hosts(void **state)
{
    struct gs_agent_config c;
    struct gs_err e;
    struct sockaddr_storage ls, wild;
    struct sockaddr_in local = {.sin_family = AF_INET};
    const struct sockaddr *lp = (const struct sockaddr *)&local;
    const char *names = "gpu1.example.com, [fd00::7]:9400 10.9.9.9";

    (void)state;
    gs_config_defaults(&c);
    assert_string_equal(c.allowed_hosts, "");
    assert_int_equal(
        gs_config_parse_text(&c, "a.conf", "allowed_hosts = a.example, b-2.ex:80\n", &e), GS_OK);
    assert_string_equal(c.allowed_hosts, "a.example, b-2.ex:80");
    expect_error("allowed_hosts = evil/x\n",
                 "agent.conf:1: allowed_hosts: 'evil/x' is not a comma-separated list of host "
                 "names (letters, digits, '.', '-', '_', IP addresses, [IPv6]) or *");
    assert_true(gs_config_hosts_valid("*"));
    assert_false(gs_config_hosts_valid("a b@c"));

    inet_pton(AF_INET, "10.1.2.3", &local.sin_addr);
    assert_int_equal(gs_listen_parse("192.168.0.5:9400", &ls, &e), GS_OK);
    assert_int_equal(gs_listen_parse("0.0.0.0:9400", &wild, &e), GS_OK);
    for (unsigned i = 0; i < 11; i++) {
        static const char *ok[] = {"localhost",   "LOCALHOST:9400",   "127.0.0.1:9400", "127.3.4.5",
                                   "[::1]:9400",  "192.168.0.5:9400", "10.1.2.3:9400",  "node7",
                                   "Node7.:9400", "gpu1.example.com", "[fd00::7]"};
        if (!gs_hosts_allowed(ok[i], names, &ls, lp, "node7"))
            fail_msg("refused '%s'", ok[i]);
    }
    for (unsigned i = 0; i < 9; i++) {
        static const char *bad[] = {"evil.example:9400",
                                    "gpu1.example.com.evil",
                                    "",
                                    "[::1",
                                    "::1",
                                    "a b",
                                    "127.0.0.1:x",
                                    "10.1.2.4",
                                    "[fd00::8]"};
        if (gs_hosts_allowed(bad[i], names, &ls, lp, "node7"))
            fail_msg("allowed '%s'", bad[i]);
    }
    assert_false(gs_hosts_allowed(NULL, names, &ls, lp, "node7"));
    assert_true(gs_hosts_allowed("10.9.9.9", names, &wild, NULL, NULL));
    /* a wildcard listen address names nothing; without the local address an IP is refused */
    assert_false(gs_hosts_allowed("0.0.0.0", "", &wild, NULL, NULL));
    assert_false(gs_hosts_allowed("10.1.2.3", "", &wild, NULL, ""));
    assert_true(gs_hosts_allowed("anything.example", "x, *", &wild, NULL, NULL));
}

/* ---- /api/v1/history ---- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),      cmocka_unit_test(test_ini_ok),
        cmocka_unit_test(test_ini_errors),    cmocka_unit_test(test_user_key),
        cmocka_unit_test(test_file),          cmocka_unit_test(test_flags),
        cmocka_unit_test(test_restart_keys),  cmocka_unit_test(test_duration),
        cmocka_unit_test(test_history_keys),  cmocka_unit_test(test_history_flags),
        cmocka_unit_test(test_allowed_hosts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
