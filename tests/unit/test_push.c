/*
 * Unit tests of the push sinks (src/agent/push.h): the InfluxDB line protocol (tags, escaping,
 * absent and non-finite fields, GPUs with no field, nanosecond timestamps), the write URLs,
 * the push configuration keys, the self metrics, and a pusher against a port nobody listens
 * on (failures counted, every reference given back at close).
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/config.h"
#include "agent/metrics.h"
#include "agent/push.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

static struct gs_snapshot *two_gpus(void)
{
    struct gs_snapshot *s;

    assert_int_equal(gs_snapshot_new(&s, 2, 4, NULL), GS_OK);
    snprintf(s->sys.hostname, sizeof s->sys.hostname, "node 1,a=b");
    s->t_real = 1700000000.25;
    s->gpus[0].index = 0;
    s->gpus[1].index = 1;
    snprintf(s->gpus[0].text[GS_T_UUID], GS_STR_LEN, "GPU-aaaa");
    s->gpus[0].tst[GS_T_UUID] = GS_ST_OK;
    gs_gpu_set(&s->gpus[0], GS_M_UTIL_GPU, 0.5);
    gs_gpu_set(&s->gpus[0], GS_M_MEM_USED, 1073741824.0);
    return s;
}

static void test_line_protocol(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_buf b = {0};

    (void)state;
    assert_int_equal(gs_push_render_influx(&b, s), GS_OK);
    /* GPU 1 has no metric: no line. Tags sorted, hostname escaped. */
    assert_string_equal(b.data, "gpuscope_gpu,gpu=0,hostname=node\\ 1\\,a\\=b,uuid=GPU-aaaa "
                                "utilization_gpu=0.5,memory_used=1073741824 "
                                "1700000000250000000\n");
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

static void test_absent_and_nonfinite(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_buf b = {0};

    (void)state;
    s->gpus[0].st[GS_M_MEM_USED] = GS_ST_NOPERM; /* present but unreadable: no field */
    gs_gpu_set(&s->gpus[0], GS_M_POWER_DRAW, NAN);
    gs_gpu_set(&s->gpus[1], GS_M_TEMP_GPU, 41);
    s->gpus[1].tst[GS_T_UUID] = GS_ST_NA; /* absent uuid: tag left out */
    s->sys.hostname[0] = '\0';
    assert_int_equal(gs_push_render_influx(&b, s), GS_OK);
    assert_string_equal(b.data, "gpuscope_gpu,gpu=0,uuid=GPU-aaaa utilization_gpu=0.5 "
                                "1700000000250000000\n"
                                "gpuscope_gpu,gpu=1 temperature_gpu=41 1700000000250000000\n");
    assert_null(strstr(b.data, "power"));
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

static void test_escaping_and_time(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_buf b = {0};

    (void)state;
    snprintf(s->sys.hostname, sizeof s->sys.hostname, "a\\b\nc");
    s->t_real = 1234.000000001;
    gs_gpu_set(&s->gpus[0], GS_M_ENERGY, 1e20);
    s->gpus[0].st[GS_M_UTIL_GPU] = GS_ST_NA;
    s->gpus[0].st[GS_M_MEM_USED] = GS_ST_NA;
    assert_int_equal(gs_push_render_influx(&b, s), GS_OK);
    assert_string_equal(b.data, "gpuscope_gpu,gpu=0,hostname=a\\\\b\\ c,uuid=GPU-aaaa energy=1e+20 "
                                "1234000000001\n");
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

static void test_urls_and_config(void **state)
{
    struct gs_agent_config c;
    struct gs_err e;
    char *u;

    (void)state;
    gs_config_defaults(&c);
    assert_int_equal(c.push.interval_s, 10);
    assert_string_equal(c.push.pushgateway_job, "gpuscope");
    assert_int_equal(c.push.influx_version, GS_INFLUX_V1);
    assert_int_equal(c.push.buffer_batches, 64);
    assert_false(gs_push_enabled(&c.push));
    assert_int_equal(gs_config_parse_text(&c, "t.conf",
                                          "influx_url = http://127.0.0.1:8086/\n"
                                          "influx_db = gpu metrics\ninflux_version = 2\n"
                                          "influx_org = my&org\ninflux_bucket = b\n"
                                          "push_interval = 2\ninflux_gzip = on\n",
                                          &e),
                     GS_OK);
    assert_true(gs_push_enabled(&c.push));
    assert_int_equal(c.push.influx_gzip, 1);
    u = gs_push_influx_write_url(&c.push);
    assert_string_equal(u, "http://127.0.0.1:8086/api/v2/write?org=my%26org&bucket=b&precision=ns");
    free(u);
    c.push.influx_version = GS_INFLUX_V1;
    u = gs_push_influx_write_url(&c.push);
    assert_string_equal(u, "http://127.0.0.1:8086/write?db=gpu%20metrics&precision=ns");
    free(u);
    assert_int_equal(gs_config_set(&c, "influx_version", "3", "x", &e), GS_EINVAL);
    assert_int_equal(gs_config_set(&c, "push_interval", "0.5", "x", &e), GS_EINVAL);
    /* v2 without a token file is refused; an unreadable one too. */
    c.push.influx_version = GS_INFLUX_V2;
    {
        struct gs_push *p = NULL;
        assert_int_equal(gs_push_open(&p, &c.push, "h", &e), GS_EINVAL);
        snprintf(c.push.influx_token_file, sizeof c.push.influx_token_file, "/nonexistent/tok");
        assert_int_equal(gs_push_open(&p, &c.push, "h", &e), GS_EIO);
        assert_null(p);
    }
}

static void test_self_metrics(void **state)
{
    struct gs_push_stats st = {0};
    struct gs_buf b = {0};

    (void)state;
    gs_push_render_self(&b, &st);
    assert_int_equal(b.len, 0);
    st.sink[GS_PUSH_INFLUX].enabled = 1;
    st.sink[GS_PUSH_INFLUX].pushes = 3;
    st.sink[GS_PUSH_INFLUX].failed = 2;
    st.sink[GS_PUSH_INFLUX].dropped = 1;
    gs_push_render_self(&b, &st);
    assert_non_null(strstr(b.data, "gpuscope_push_total{sink=\"influxdb\"} 3\n"));
    assert_non_null(strstr(b.data, "gpuscope_push_failed_total{sink=\"influxdb\"} 2\n"));
    assert_non_null(strstr(b.data, "gpuscope_push_dropped_total{sink=\"influxdb\"} 1\n"));
    assert_null(strstr(b.data, "sink=\"pushgateway\""));
    gs_buf_free(&b);
}

static int released;

static void release(void *cls)
{
    (void)cls;
    released++;
}

/* A port bound but never listened on: connections are refused at once. */
static void test_pusher_down(void **state)
{
    struct gs_agent_config c;
    struct gs_snapshot *s = two_gpus();
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t len = sizeof sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct gs_push *p;
    struct gs_push_stats st;
    struct gs_err e;
    int offered = 0;

    (void)state;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    gs_config_defaults(&c);
    snprintf(c.push.influx_url, sizeof c.push.influx_url, "http://127.0.0.1:%u",
             ntohs(sin.sin_port));
    snprintf(c.push.influx_db, sizeof c.push.influx_db, "db");
    snprintf(c.push.pushgateway_url, sizeof c.push.pushgateway_url, "http://127.0.0.1:%u",
             ntohs(sin.sin_port));
    c.push.interval_s = 0.05;
    c.push.buffer_batches = 2;
    assert_int_equal(gs_push_open(&p, &c.push, "host/1", &e), GS_OK);
    assert_int_equal(gs_push_start(p, &e), GS_OK);
    for (int i = 0; i < 30; i++) {
        offered += gs_push_offer(p, s, "x 1\n", 4, release, NULL);
        usleep(20000);
    }
    st = gs_push_stats(p);
    assert_true(st.sink[GS_PUSH_INFLUX].enabled && st.sink[GS_PUSH_PUSHGATEWAY].enabled);
    assert_true(st.sink[GS_PUSH_INFLUX].failed >= 1);
    assert_int_equal(st.sink[GS_PUSH_INFLUX].pushes, 0);
    /* 0.6 s of 0.05 s batches against a 1 s backoff and room for 2: some were dropped. */
    assert_true(st.sink[GS_PUSH_INFLUX].dropped >= 1);
    assert_true(st.sink[GS_PUSH_PUSHGATEWAY].failed >= 1);
    gs_push_close(p);
    assert_int_equal(released, offered);
    close(fd);
    gs_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_protocol),     cmocka_unit_test(test_absent_and_nonfinite),
        cmocka_unit_test(test_escaping_and_time), cmocka_unit_test(test_urls_and_config),
        cmocka_unit_test(test_self_metrics),      cmocka_unit_test(test_pusher_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
