/*
 * Unit tests for the step-record wire format (src/run/record.c): valid records parse into the
 * exact values, absent fields stay unknown, every validation rule refuses and names the field,
 * and encode -> parse round-trips.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <jansson.h>

#include "gpuscope/gs_err.h"
#include "run/record.h"

/* gs_record_parse as 0 / -1 with the message in err (256 bytes). */
static int parse_len(const char *s, size_t len, struct gs_record *r, char *err)
{
    struct gs_err e;
    int rc;

    gs_err_clear(&e);
    rc = gs_record_parse(s, len, r, &e);
    snprintf(err, 256, "%.255s", e.msg);
    if (rc != GS_OK && rc != GS_EPARSE)
        return -2; /* never: a parse error is GS_EPARSE */
    return rc == GS_OK ? 0 : -1;
}

static int parse(const char *s, struct gs_record *r, char *err)
{
    return parse_len(s, strlen(s), r, err);
}

/* Asserts that s is refused with an error containing want. */
static void refused(const char *s, const char *want)
{
    struct gs_record r;
    char err[256] = "";

    if (parse(s, &r, err) != -1 || !strstr(err, want)) {
        print_error("input %s\n  error \"%s\", wanted \"%s\"\n", s, err, want);
        fail();
    }
}

static void phase_names_and_schema(void **state)
{
    (void)state;
    assert_string_equal(gs_phase_name(GS_PH_DATA), "data");
    assert_string_equal(gs_phase_name(GS_PH_FORWARD), "forward");
    assert_string_equal(gs_phase_name(GS_PH_BACKWARD), "backward");
    assert_string_equal(gs_phase_name(GS_PH_OPTIMIZER), "optimizer_step");
    assert_string_equal(gs_phase_name(GS_PH_COMM), "communication");
    assert_string_equal(gs_phase_name(GS_PH_STEP), "total_step");
    assert_string_equal(gs_phase_name(GS_PH_COMM_EXPOSED), "communication_exposed");
    assert_string_equal(gs_phase_name(GS_PH_OTHER), "other");
    assert_null(gs_phase_name(GS_PH_ALL));
    assert_null(gs_phase_name(-1));
    assert_string_equal(gs_run_report_schema(), "1.0");
}

static void step_parses_exactly(void **state)
{
    const char *s = "{\"v\":1,\"type\":\"step\",\"step\":100,\"t0\":1764430000.125,"
                    "\"t1\":1764430000.357,\"rank\":1,\"device\":3,\"samples\":8,"
                    "\"tokens\":16384,\"cuda_events\":true,\"ms\":{\"data\":3.1,\"forward\":124.3,"
                    "\"backward\":89.7,\"optimizer_step\":15.2,\"communication\":4,"
                    "\"total_step\":232.1},\"mem\":{\"allocated\":1000,\"reserved\":2000,"
                    "\"peak_allocated\":3000,\"peak_reserved\":4000,\"total\":80000},"
                    "\"future_field\":{\"x\":[1,2]}}";
    struct gs_record r;
    char err[256] = "";
    (void)state;

    assert_int_equal(parse(s, &r, err), 0);
    assert_int_equal(r.type, GS_REC_STEP);
    assert_int_equal(r.u.step.version, GS_STEP_REC_VERSION);
    assert_int_equal(r.u.step.step, 100);
    assert_true(r.u.step.t_begin == 1764430000.125);
    assert_true(r.u.step.t_end == 1764430000.357);
    assert_int_equal(r.u.step.rank, 1);
    assert_int_equal(r.u.step.device, 3);
    assert_int_equal(r.u.step.samples, 8);
    assert_int_equal(r.u.step.tokens, 16384);
    assert_int_equal(r.u.step.flags, GS_STEP_CUDA_EVENTS);
    assert_true(r.u.step.ms[GS_PH_DATA] == 3.1);
    assert_true(r.u.step.ms[GS_PH_FORWARD] == 124.3);
    assert_true(r.u.step.ms[GS_PH_BACKWARD] == 89.7);
    assert_true(r.u.step.ms[GS_PH_OPTIMIZER] == 15.2);
    assert_true(r.u.step.ms[GS_PH_COMM] == 4.0);
    assert_true(r.u.step.ms[GS_PH_STEP] == 232.1);
    assert_int_equal(r.u.step.mem_allocated, 1000);
    assert_int_equal(r.u.step.mem_reserved, 2000);
    assert_int_equal(r.u.step.mem_peak_allocated, 3000);
    assert_int_equal(r.u.step.mem_peak_reserved, 4000);
    assert_int_equal(r.u.step.mem_total, 80000);
    /* the loop tracker's flags */
    assert_int_equal(parse("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,"
                           "\"data_in_step\":true,\"profiled\":true}",
                           &r, err),
                     0);
    assert_int_equal(r.u.step.flags, GS_STEP_DATA_IN_STEP | GS_STEP_PROFILED);
}

static void absent_stays_unknown(void **state)
{
    struct gs_record r;
    char err[256] = "";
    (void)state;

    assert_int_equal(parse("{\"v\":1,\"type\":\"step\",\"step\":0,\"t0\":5,\"t1\":5,"
                           "\"ms\":{\"forward\":null}}",
                           &r, err),
                     0);
    for (int p = 0; p < GS_PH_N; p++)
        assert_true(isnan(r.u.step.ms[p]));
    assert_int_equal(r.u.step.rank, 0);
    assert_int_equal(r.u.step.device, -1);
    assert_int_equal(r.u.step.samples, 0);
    assert_int_equal(r.u.step.tokens, 0); /* an older sender: unknown */
    assert_int_equal(r.u.step.flags, 0);
    assert_int_equal(r.u.step.mem_total, 0);

    assert_int_equal(parse("{\"type\":\"end\",\"v\":1}", &r, err), 0);
    assert_int_equal(r.type, GS_REC_END);
    assert_true(isnan(r.u.end.train_runtime) && isnan(r.u.end.train_samples) &&
                isnan(r.u.end.train_steps) && isnan(r.u.end.train_loss));

    assert_int_equal(parse("{\"v\":1,\"type\":\"hello\"}", &r, err), 0);
    assert_int_equal(r.type, GS_REC_HELLO);
    assert_int_equal(r.u.hello.pid, -1);
    assert_int_equal(r.u.hello.rank, -1);
    assert_int_equal(r.u.hello.world_size, -1);
    assert_int_equal(r.u.hello.logging_steps, -1);
    assert_int_equal(r.u.hello.n_devices, 0);
    assert_string_equal(r.u.hello.run, "");
}

static void hello_and_end_parse(void **state)
{
    struct gs_record r;
    char err[256] = "";
    (void)state;

    assert_int_equal(parse("{\"v\":1,\"type\":\"hello\",\"run\":\"qwen-sft\",\"pid\":123,"
                           "\"rank\":0,\"world_size\":2,\"local_rank\":0,\"framework\":\"hf\","
                           "\"devices\":[0,1],\"logging_steps\":10,\"output_dir\":\"/o\","
                           "\"job\":\"torchelastic-1234\",\"node\":\"node-7\"}",
                           &r, err),
                     0);
    assert_string_equal(r.u.hello.job, "torchelastic-1234");
    assert_string_equal(r.u.hello.node, "node-7");
    assert_string_equal(r.u.hello.run, "qwen-sft");
    assert_string_equal(r.u.hello.framework, "hf");
    assert_string_equal(r.u.hello.output_dir, "/o");
    assert_int_equal(r.u.hello.pid, 123);
    assert_int_equal(r.u.hello.world_size, 2);
    assert_int_equal(r.u.hello.n_devices, 2);
    assert_int_equal(r.u.hello.devices[1], 1);
    assert_int_equal(r.u.hello.logging_steps, 10);

    assert_int_equal(parse("{\"v\":1,\"type\":\"end\",\"train_runtime\":3624.5,"
                           "\"train_samples\":10296,\"train_steps\":997,\"train_loss\":-1.23}",
                           &r, err),
                     0);
    assert_true(r.u.end.train_runtime == 3624.5);
    assert_true(r.u.end.train_samples == 10296);
    assert_true(r.u.end.train_steps == 997);
    assert_true(r.u.end.train_loss == -1.23);
}

static void invalid_records_name_the_field(void **state)
{
    char big[GS_RECORD_MAX + 64], name[300], devs[400];
    (void)state;

    refused("", "empty");
    refused("garbage", "invalid JSON");
    refused("[1,2]", "not a JSON object");
    refused("{\"type\":\"step\"}", "v: missing");
    refused("{\"v\":\"1\",\"type\":\"step\"}", "v: not an integer");
    refused("{\"v\":2,\"type\":\"step\"}", "unsupported record version 2");
    refused("{\"v\":1}", "type: missing");
    refused("{\"v\":1,\"type\":7}", "type: not a string");
    refused("{\"v\":1,\"type\":\"stop\"}", "type: unknown");
    refused("{\"v\":1,\"type\":\"step\",\"t0\":1,\"t1\":2}", "step.step: missing");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t1\":2}", "step.t0: missing");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1}", "step.t1: missing");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":3,\"t1\":2}", "step.t1: before t0");
    refused("{\"v\":1,\"type\":\"step\",\"step\":-1,\"t0\":1,\"t1\":2}", "step.step: -1 out of");
    refused("{\"v\":1,\"type\":\"step\",\"step\":9007199254740993,\"t0\":1,\"t1\":2}",
            "step.step:");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1.5,\"t0\":1,\"t1\":2}",
            "step.step: not an integer");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"tokens\":-5}",
            "step.tokens: -5 out of");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"tokens\":\"9\"}",
            "step.tokens: not an integer");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":\"x\",\"t1\":2}",
            "step.t0: not a number");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"ms\":{\"forward\":\"x\"}}",
            "step.ms.forward: not a number");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"ms\":{\"data\":-0.5}}",
            "step.ms.data: -0.5 out of range");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,"
            "\"ms\":{\"total_step\":10000001}}",
            "step.ms.total_step:");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"ms\":[1]}",
            "step.ms: not an object");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"ms\":{\"data\":1e999}}",
            "invalid JSON"); /* jansson refuses the overflow: never a non-finite number */
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"rank\":70000}",
            "step.rank: 70000 out of range");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"rank\":-1}",
            "step.rank: negative");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"device\":-2}",
            "step.device:");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"cuda_events\":1}",
            "step.cuda_events: not a boolean");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"data_in_step\":1}",
            "step.data_in_step: not a boolean");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"profiled\":\"y\"}",
            "step.profiled: not a boolean");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"mem\":{\"total\":1.5}}",
            "step.mem.total: not an integer");
    refused(
        "{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"mem\":{\"peak_reserved\":-4}}",
        "step.mem.peak_reserved:");
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,\"mem\":5}",
            "step.mem: not an object");
    refused("{\"v\":1,\"type\":\"end\",\"train_runtime\":-1}", "end.train_runtime:");
    refused("{\"v\":1,\"type\":\"end\",\"train_loss\":\"low\"}", "end.train_loss: not a number");
    refused("{\"v\":1,\"type\":\"hello\",\"run\":5}", "hello.run: not a string");
    /* the resume token: 32 lowercase hex digits exactly; dropped: an integer >= 0 */
    refused("{\"v\":1,\"type\":\"hello\",\"token\":\"abc\"}", "hello.token: expected 32");
    refused("{\"v\":1,\"type\":\"hello\",\"token\":\"0123456789ABCDEF0123456789abcdef\"}",
            "hello.token: not a lowercase hex digit at byte 10");
    refused("{\"v\":1,\"type\":\"hello\",\"token\":\"0123456789abcdef0123456789abcdef0\"}",
            "hello.token: longer than 32");
    refused("{\"v\":1,\"type\":\"hello\",\"token\":7}", "hello.token: not a string");
    refused("{\"v\":1,\"type\":\"hello\",\"dropped\":-1}", "hello.dropped:");
    refused("{\"v\":1,\"type\":\"hello\",\"run\":\"a\\u0000b\"}", "invalid JSON");
    refused("{\"v\":1,\"type\":\"hello\",\"framework\":\"0123456789012345678901234567890123\"}",
            "hello.framework: longer than 31");
    memset(name, 'x', sizeof name);
    snprintf(name, sizeof name, "{\"v\":1,\"type\":\"hello\",\"run\":\"%0256d\"}", 0);
    refused(name, "hello.run: longer than 255");
    refused("{\"v\":1,\"type\":\"hello\",\"world_size\":65536}", "hello.world_size:");
    refused("{\"v\":1,\"type\":\"hello\",\"job\":\"a\\nb\"}",
            "hello.job: control character at byte 1");
    refused("{\"v\":1,\"type\":\"hello\",\"node\":7}", "hello.node: not a string");
    refused("{\"v\":1,\"type\":\"hello\",\"devices\":{}}", "hello.devices: not an array");
    refused("{\"v\":1,\"type\":\"hello\",\"devices\":[0,\"1\"]}",
            "hello.devices[1]: not an integer");
    strcpy(devs, "{\"v\":1,\"type\":\"hello\",\"devices\":[0");
    for (int i = 1; i < 65; i++)
        strcat(devs, ",1");
    strcat(devs, "]}");
    refused(devs, "hello.devices: more than 64");
    refused("{\"v\":1,\"v\":1,\"type\":\"end\"}", "invalid JSON"); /* duplicate key */
    refused("{\"v\":1,\"type\":\"end\",\"x\":[[[[[[[[[[1]]]]]]]]]]}", "nested deeper");
    memset(big, ' ', sizeof big);
    memcpy(big, "{\"v\":1,\"type\":\"end\"}", 20);
    big[sizeof big - 1] = '\0';
    refused(big, "more than 8192");
}

static void never_reads_past_len(void **state)
{
    const char *s = "{\"v\":1,\"type\":\"end\"}GARBAGE";
    struct gs_record r;
    char err[256];
    (void)state;

    assert_int_equal(parse_len(s, 20, &r, err), 0);
    assert_int_equal(parse_len(s, 19, &r, err), -1);
    /* a string quote left open must not make the depth scan run on */
    assert_int_equal(parse_len("{\"v\":1,\"type\":\"\\", 17, &r, err), -1);
}

static void round_trip(const struct gs_record *in)
{
    char buf[GS_RECORD_MAX + 1], err[256] = "";
    struct gs_record out;
    int n = gs_record_encode(in, buf, sizeof buf);

    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(buf));
    if (parse_len(buf, (size_t)n, &out, err) != 0)
        fail_msg("reparse of %s: %s", buf, err);
    assert_true(gs_record_equal(in, &out));
}

static void encode_round_trips(void **state)
{
    struct gs_record r;
    char err[256], small[16];
    (void)state;

    /* a hello with its resume token and dropped count */
    memset(&r, 0, sizeof r);
    r.type = GS_REC_HELLO;
    r.u.hello.pid = r.u.hello.rank = r.u.hello.world_size = r.u.hello.local_rank = -1;
    r.u.hello.logging_steps = -1;
    snprintf(r.u.hello.token, sizeof r.u.hello.token, "%s", "00ff00ff00ff00ff00ff00ff00ff00ff");
    r.u.hello.dropped = 12;
    round_trip(&r);
    r.u.hello.token[0] = '\0';
    r.u.hello.dropped = -1;
    round_trip(&r);

    memset(&r, 0, sizeof r);
    r.type = GS_REC_STEP;
    r.u.step.version = GS_STEP_REC_VERSION;
    r.u.step.flags = GS_STEP_CUDA_EVENTS | GS_STEP_DATA_IN_STEP | GS_STEP_PROFILED;
    r.u.step.step = 9007199254740992ULL;
    r.u.step.t_begin = 1764430000.1234567;
    r.u.step.t_end = 1764430000.9876543;
    for (int p = 0; p < GS_PH_N; p++)
        r.u.step.ms[p] = p == GS_PH_COMM ? NAN : 0.1 * (p + 1) + 1e-9;
    r.u.step.samples = 8;
    r.u.step.tokens = 9007199254740992ULL;
    r.u.step.rank = 3;
    r.u.step.device = 7;
    r.u.step.mem_allocated = 123456789012ULL;
    r.u.step.mem_peak_reserved = 1;
    r.u.step.mem_total = 85899345920ULL;
    round_trip(&r);
    r.u.step.device = -1;
    r.u.step.flags = 0;
    round_trip(&r);

    assert_int_equal(parse("{\"v\":1,\"type\":\"hello\",\"run\":\"r \\\"q\\\" \\u00e9\",\"pid\":1,"
                           "\"rank\":-1,\"devices\":[-1,65535],\"logging_steps\":0}",
                           &r, err),
                     0);
    round_trip(&r);
    assert_int_equal(parse("{\"v\":1,\"type\":\"end\",\"train_loss\":1e-300,"
                           "\"train_runtime\":0.1}",
                           &r, err),
                     0);
    round_trip(&r);
    assert_int_equal(gs_record_encode(&r, small, sizeof small), -1);
    r.type = (enum gs_record_type)9;
    assert_int_equal(gs_record_encode(&r, small, sizeof small), -1);
}

/* {"v":1,"type":"hello","facts":{<body>}} */
static int hello_facts(const char *body, struct gs_record *r, char *err)
{
    char buf[GS_RECORD_MAX + 64];

    snprintf(buf, sizeof buf, "{\"v\":1,\"type\":\"hello\",\"facts\":{%s}}", body);
    return parse(buf, r, err);
}

/* The end record's outcome (facts rules) and version-2 phases of a step. */
static void outcome_and_v2_phases(void **state)
{
    struct gs_record r;
    char err[256] = "";
    const struct gs_fact *f;
    (void)state;

    assert_int_equal(parse("{\"v\":1,\"type\":\"end\",\"outcome\":{\"exception\":"
                           "\"ValueError: boom\",\"seen_optimizer_step\":0,"
                           "\"torch_imported\":true}}",
                           &r, err),
                     0);
    f = gs_record_fact_get(&r.u.end.outcome, "exception");
    assert_non_null(f);
    assert_string_equal(f->v.s, "ValueError: boom");
    f = gs_record_fact_get(&r.u.end.outcome, "seen_optimizer_step");
    assert_true(f && f->type == GS_FACT_INT && f->v.i == 0);
    round_trip(&r);
    refused("{\"v\":1,\"type\":\"end\",\"outcome\":[1]}", "end.outcome: not an object");
    refused("{\"v\":1,\"type\":\"end\",\"outcome\":{\"x\":[1]}}", "end.outcome.x: not a scalar");
    assert_int_equal(parse("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,"
                           "\"ms\":{\"total_step\":10,\"communication_exposed\":1.5,"
                           "\"other\":2.5}}",
                           &r, err),
                     0);
    assert_true(gs_step_ms(&r.u.step, GS_PH_COMM_EXPOSED) == 1.5);
    assert_true(gs_step_ms(&r.u.step, GS_PH_OTHER) == 2.5);
    assert_true(isnan(gs_step_ms(&r.u.step, GS_PH_FORWARD)));
    round_trip(&r);
    refused("{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":1,\"t1\":2,"
            "\"ms\":{\"other\":-1}}",
            "step.ms.other");
}

static void facts_refused(const char *body, const char *want)
{
    struct gs_record r;
    char err[256] = "";

    if (hello_facts(body, &r, err) != -1 || !strstr(err, want)) {
        print_error("facts {%s}\n  error \"%s\", wanted \"%s\"\n", body, err, want);
        fail();
    }
}

static void facts_parse_in_order(void **state)
{
    struct gs_record r;
    char err[256] = "";
    const struct gs_fact *f;
    (void)state;

    assert_int_equal(hello_facts("\"loader_num_workers\":0,\"bf16\":true,\"lr\":0.5,"
                                 "\"attn_implementation\":\"sdpa\",\"gone\":null,"
                                 "\"NCCL_IB_DISABLE\":\"1\",\"big\":-9007199254740992",
                                 &r, err),
                     0);
    assert_int_equal(r.u.hello.facts.n, 6); /* null is absent */
    assert_string_equal(r.u.hello.facts.f[0].key, "loader_num_workers");
    assert_int_equal(r.u.hello.facts.f[0].type, GS_FACT_INT);
    assert_int_equal(r.u.hello.facts.f[0].v.i, 0);
    assert_int_equal(r.u.hello.facts.f[1].type, GS_FACT_BOOL);
    assert_int_equal(r.u.hello.facts.f[1].v.b, 1);
    assert_int_equal(r.u.hello.facts.f[2].type, GS_FACT_REAL);
    assert_true(r.u.hello.facts.f[2].v.d == 0.5);
    f = gs_record_fact_get(&r.u.hello.facts, "attn_implementation");
    assert_non_null(f);
    assert_int_equal(f->type, GS_FACT_STR);
    assert_string_equal(f->v.s, "sdpa");
    assert_null(gs_record_fact_get(&r.u.hello.facts, "gone"));
    assert_int_equal(gs_record_fact_get(&r.u.hello.facts, "big")->v.i, -9007199254740992LL);
    assert_string_equal(r.u.hello.facts.f[4].key, "NCCL_IB_DISABLE");
    /* absent or null facts: none */
    assert_int_equal(parse("{\"v\":1,\"type\":\"hello\",\"facts\":null}", &r, err), 0);
    assert_int_equal(r.u.hello.facts.n, 0);
}

static void facts_validated(void **state)
{
    char body[8192], key[64], val[200];
    size_t o = 0;
    (void)state;

    facts_refused("\"a\":{\"b\":1}", "hello.facts.a: not a scalar");
    facts_refused("\"a\":[1]", "hello.facts.a: not a scalar");
    facts_refused("\"a\":1e400", "invalid JSON"); /* jansson refuses overflow itself */
    facts_refused("\"a\":9007199254740993", "hello.facts.a: integer out of range");
    facts_refused("\"bad key\":1", "hello.facts: key \"bad key\"");
    facts_refused("\"\":1", "hello.facts: key \"\"");
    facts_refused("\"s\":\"a\\u0007b\"", "hello.facts.s: contains a control character");
    facts_refused("\"s\":\"a\\u0000b\"", "invalid JSON"); /* jansson refuses NUL itself */
    /* keys: 48 bytes pass, 49 are refused */
    memset(key, 'k', 49);
    key[48] = '\0';
    snprintf(body, sizeof body, "\"%s\":1", key);
    {
        struct gs_record r;
        char err[256] = "";
        assert_int_equal(hello_facts(body, &r, err), 0);
    }
    key[48] = 'k';
    key[49] = '\0';
    snprintf(body, sizeof body, "\"%s\":1", key);
    facts_refused(body, "not 1-48 of");
    /* string values: 128 bytes pass, 129 are refused */
    memset(val, 'v', 129);
    val[128] = '\0';
    snprintf(body, sizeof body, "\"s\":\"%s\"", val);
    {
        struct gs_record r;
        char err[256] = "";
        assert_int_equal(hello_facts(body, &r, err), 0);
        assert_int_equal(strlen(r.u.hello.facts.f[0].v.s), 128);
    }
    val[128] = 'v';
    val[129] = '\0';
    snprintf(body, sizeof body, "\"s\":\"%s\"", val);
    facts_refused(body, "hello.facts.s: longer than 128 bytes");
    /* 32 entries pass, 33 are refused */
    for (int i = 0; i < 33; i++)
        o += (size_t)snprintf(body + o, sizeof body - o, "%s\"k%d\":%d", i ? "," : "", i, i);
    facts_refused(body, "hello.facts: more than 32 entries");
    {
        struct gs_record r;
        char err[256] = "";
        *strstr(body, ",\"k32\"") = '\0';
        assert_int_equal(hello_facts(body, &r, err), 0);
        assert_int_equal(r.u.hello.facts.n, 32);
    }
    /* within the caps but over GS_RECORD_FACTS_BYTES encoded */
    o = 0;
    memset(val, 'v', 120);
    val[120] = '\0';
    for (int i = 0; i < 30; i++)
        o += (size_t)snprintf(body + o, sizeof body - o, "%s\"k%d\":\"%s\"", i ? "," : "", i, val);
    facts_refused(body, "bytes encoded, more than 3072");
}

static void facts_round_trip_at_the_limits(void **state)
{
    struct gs_record r;
    (void)state;

    /* The largest hello we accept still encodes into one message. */
    memset(&r, 0, sizeof r);
    r.type = GS_REC_HELLO;
    r.u.hello.pid = INT64_C(1) << 32;
    r.u.hello.rank = r.u.hello.world_size = r.u.hello.local_rank = 65535;
    r.u.hello.logging_steps = INT32_MAX;
    memset(r.u.hello.run, '\x01', GS_RECORD_STR - 1); /* \u0001: 6 bytes each */
    memset(r.u.hello.output_dir, '\x01', GS_RECORD_STR - 1);
    memset(r.u.hello.framework, '\x01', sizeof r.u.hello.framework - 1);
    memset(r.u.hello.job, '"', GS_RECORD_JOB - 1); /* printable only: \" is the longest */
    memset(r.u.hello.node, '\\', GS_RECORD_JOB - 1);
    r.u.hello.n_devices = GS_RECORD_MAX_DEVICES;
    for (int i = 0; i < GS_RECORD_MAX_DEVICES; i++)
        r.u.hello.devices[i] = 65535;
    for (int i = 0; i < 16; i++) { /* about 2.9 KiB, just under GS_RECORD_FACTS_BYTES */
        struct gs_fact *f = &r.u.hello.facts.f[i];
        snprintf(f->key, sizeof f->key, "key_%02d_%s", i, "abcdefghijklmnopqrstuvwxyz0123456789ab");
        f->type = GS_FACT_STR;
        memset(f->v.s, '"', 64); /* \" : 2 bytes each */
        r.u.hello.facts.n++;
    }
    {
        json_t *j = gs_record_facts_json(&r.u.hello.facts);
        size_t n = json_dumpb(j, NULL, 0, JSON_COMPACT);
        json_decref(j);
        assert_true(n > 2800 && n <= GS_RECORD_FACTS_BYTES);
    }
    round_trip(&r);
    r.u.hello.facts.f[3].type = GS_FACT_REAL;
    r.u.hello.facts.f[3].v.d = 1.0000000000000002;
    r.u.hello.facts.f[4].type = GS_FACT_BOOL;
    r.u.hello.facts.f[4].v.b = 0;
    r.u.hello.facts.f[5].type = GS_FACT_INT;
    r.u.hello.facts.f[5].v.i = -5;
    round_trip(&r);
    {
        /* facts take part in equality */
        struct gs_record r2 = r;
        r2.u.hello.facts.f[5].v.i = -6;
        assert_false(gs_record_equal(&r, &r2));
        r2 = r;
        r2.u.hello.facts.n--;
        assert_false(gs_record_equal(&r, &r2));
    }
}

/* The "log" record: the training loop's logged values (loss, learning rate). */
static void log_records(void **state)
{
    struct gs_record r;
    char err[256];
    (void)state;

    assert_int_equal(parse("{\"v\":1,\"type\":\"log\",\"step\":100,\"t\":1764430000.5,\"rank\":2,"
                           "\"values\":{\"loss\":1.25,\"learning_rate\":2e-05,"
                           "\"train/grad_norm\":0.5}}",
                           &r, err),
                     0);
    assert_int_equal(r.type, GS_REC_LOG);
    assert_true(r.u.log.step == 100 && r.u.log.t == 1764430000.5 && r.u.log.rank == 2);
    assert_int_equal(r.u.log.n, 3);
    assert_string_equal(r.u.log.key[0], "loss");
    assert_true(r.u.log.val[1] == 2e-05);
    assert_string_equal(r.u.log.key[2], "train/grad_norm");
    round_trip(&r);
    /* step, t and rank are optional */
    assert_int_equal(parse("{\"v\":1,\"type\":\"log\",\"values\":{\"loss\":-3}}", &r, err), 0);
    assert_true(isnan(r.u.log.step) && isnan(r.u.log.t) && r.u.log.rank == -1);
    round_trip(&r);
    /* every finite double is a value (issue 24: ±1e308 was refused as "not finite") */
    assert_int_equal(
        parse("{\"v\":1,\"type\":\"log\",\"values\":{\"hi\":1e308,\"lo\":-1.7976931348623157e308}}",
              &r, err),
        0);
    assert_true(r.u.log.n == 2 && r.u.log.val[0] == 1e308 && r.u.log.val[1] == -DBL_MAX);
    round_trip(&r);
    refused("{\"v\":1,\"type\":\"log\"}", "log.values: missing");
    refused("{\"v\":1,\"type\":\"log\",\"values\":{}}", "log.values: empty");
    refused("{\"v\":1,\"type\":\"log\",\"values\":[1]}", "log.values: not an object");
    refused("{\"v\":1,\"type\":\"log\",\"values\":{\"loss\":\"x\"}}",
            "log.values.loss: not a number");
    refused("{\"v\":1,\"type\":\"log\",\"values\":{\"a b\":1}}",
            "log.values: key 'a b' is not 1..48 bytes of [A-Za-z0-9_.-/]");
    refused("{\"v\":1,\"type\":\"log\",\"step\":-1,\"values\":{\"a\":1}}",
            "log.step: -1 out of range [0, 9.0072e+15]");
    char big[GS_RECORD_MAX], *p = big;
    p += sprintf(p, "{\"v\":1,\"type\":\"log\",\"values\":{");
    for (int i = 0; i < GS_RECORD_MAX_LOG + 1; i++)
        p += sprintf(p, "%s\"k%d\":%d", i ? "," : "", i, i);
    sprintf(p, "}}");
    refused(big, "log.values: 33 entries, more than 32");
    /* at the limits it still fits one message */
    p = big;
    p += sprintf(p, "{\"v\":1,\"type\":\"log\",\"step\":9007199254740992,\"t\":1e11,\"rank\":65535,"
                    "\"values\":{");
    for (int i = 0; i < GS_RECORD_MAX_LOG; i++)
        p += sprintf(p, "%s\"k%046d\":-1.2345678901234567e-300", i ? "," : "", i);
    sprintf(p, "}}");
    assert_int_equal(parse(big, &r, err), 0);
    round_trip(&r);
}

/* The step time rule shared by the agent and `gpuscope run` (issue 18). */
static void step_time_rule(void **state)
{
    struct gs_step_rec st;
    const double start = 1764430000.0;

    (void)state;
    memset(&st, 0, sizeof st);
    st.t_begin = start + 1;
    assert_null(gs_record_step_time_refusal(&st, start));
    st.t_begin = start - 59.9; /* a clock a little behind: kept */
    assert_null(gs_record_step_time_refusal(&st, start));
    st.t_begin = start - 60.1;
    assert_string_equal(gs_record_step_time_refusal(&st, start),
                        "before the run began (its hello)");
    assert_null(gs_record_step_time_refusal(&st, 0)); /* start unknown: only the 2000 rule */
    st.t_begin = 1.0;
    assert_string_equal(gs_record_step_time_refusal(&st, 0), "before 2000-01-01");
    assert_string_equal(gs_record_step_time_refusal(&st, start), "before 2000-01-01");
    st.t_begin = 946684800.0; /* 2000-01-01T00:00:00Z itself is fine */
    assert_null(gs_record_step_time_refusal(&st, 0));
    st.t_begin = NAN;
    assert_non_null(gs_record_step_time_refusal(&st, start));
}

/* A hello's tags (gpuscope run --tag, $GPUSCOPE_RUN_TAGS): kept in order, null absent, the
 * rules enforced with errors naming the tag, round trip, and the encoded bound. */
static void hello_tags(void **state)
{
    struct gs_record r;
    char err[256] = "", buf[GS_RECORD_MAX + 256], val[140];
    (void)state;

    assert_int_equal(parse("{\"v\":1,\"type\":\"hello\",\"run\":\"sft\",\"tags\":"
                           "{\"team\":\"nlp\",\"gone\":null,\"ablation\":\"no \\\"warmup\\\"\"}}",
                           &r, err),
                     0);
    assert_int_equal(r.u.hello.tags.n, 2);
    assert_string_equal(r.u.hello.tags.key[0], "team");
    assert_string_equal(r.u.hello.tags.val[0], "nlp");
    assert_string_equal(r.u.hello.tags.key[1], "ablation");
    assert_string_equal(r.u.hello.tags.val[1], "no \"warmup\"");
    round_trip(&r);
    assert_int_equal(parse("{\"v\":1,\"type\":\"hello\"}", &r, err), 0);
    assert_int_equal(r.u.hello.tags.n, 0);
    refused("{\"v\":1,\"type\":\"hello\",\"tags\":[1]}", "hello.tags: not an object");
    refused("{\"v\":1,\"type\":\"hello\",\"tags\":{\"n\":1}}", "hello.tags.n: not a string");
    refused("{\"v\":1,\"type\":\"hello\",\"tags\":{\"bad key\":\"x\"}}",
            "hello.tags: key \"bad key\"");
    refused("{\"v\":1,\"type\":\"hello\",\"tags\":{\"k\":\"a\\u0001\"}}",
            "hello.tags.k: contains a control character");
    memset(val, 'v', 129);
    val[129] = '\0';
    snprintf(buf, sizeof buf, "{\"v\":1,\"type\":\"hello\",\"tags\":{\"k\":\"%s\"}}", val);
    refused(buf, "hello.tags.k: longer than 128 bytes");
    /* 17 tags: more than 16 */
    {
        size_t o = (size_t)snprintf(buf, sizeof buf, "{\"v\":1,\"type\":\"hello\",\"tags\":{");
        for (int i = 0; i < 17; i++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s\"k%d\":\"v\"", i ? "," : "", i);
        snprintf(buf + o, sizeof buf - o, "}}");
        refused(buf, "hello.tags: more than 16 entries");
    }
    /* 16 tags of 48-byte keys and 128-byte values of quotes: over the encoded bound */
    {
        size_t o = (size_t)snprintf(buf, sizeof buf, "{\"v\":1,\"type\":\"hello\",\"tags\":{");
        char q[300] = "";
        for (int j = 0; j < 128; j++)
            strcat(q, "\\\"");
        for (int i = 0; i < 16; i++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s\"k%046d\":\"%s\"", i ? "," : "", i,
                                  q);
        snprintf(buf + o, sizeof buf - o, "}}");
        refused(buf, "bytes encoded, more than 2048");
    }
    /* the same helper the package and gpuscope run use */
    {
        json_t *o = json_pack("{s:s}", "x", "y");
        struct gs_record_tags t;
        struct gs_err e;
        assert_int_equal(gs_record_tags_parse(o, "GPUSCOPE_RUN_TAGS: ", &t, &e), GS_OK);
        assert_int_equal(t.n, 1);
        json_object_set_new(o, "z", json_integer(1));
        assert_int_equal(gs_record_tags_parse(o, "GPUSCOPE_RUN_TAGS: ", &t, &e), GS_EPARSE);
        assert_non_null(strstr(e.msg, "GPUSCOPE_RUN_TAGS: tags.z: not a string"));
        json_decref(o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(phase_names_and_schema),
        cmocka_unit_test(step_parses_exactly),
        cmocka_unit_test(absent_stays_unknown),
        cmocka_unit_test(hello_and_end_parse),
        cmocka_unit_test(invalid_records_name_the_field),
        cmocka_unit_test(never_reads_past_len),
        cmocka_unit_test(encode_round_trips),
        cmocka_unit_test(facts_parse_in_order),
        cmocka_unit_test(facts_validated),
        cmocka_unit_test(facts_round_trip_at_the_limits),
        cmocka_unit_test(outcome_and_v2_phases),
        cmocka_unit_test(log_records),
        cmocka_unit_test(step_time_rule),
        cmocka_unit_test(hello_tags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
