/*
 * Unit tests for the trace reader and analysis (src/trace/): small hand-made traces whose
 * figures can be worked out on paper — unions that touch, the overlap sweep, HTA's rounding
 * of fractional times, the last-step filter, idle causes, "others" lumping, the legacy format
 * and the reader's errors with their offsets; the diff of two trace sets (diff.c) and the
 * profile window of gpuscope run (window.c). Adversarial input: a 64 MiB name, tokens cut by
 * pieces of every size (the same document whatever the cut), 2 M profiler steps and 20,000
 * distinct op names in bounded tables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "trace/diff.h"
#include "trace/trace.h"
#include "trace/window.h"

static struct gs_trace *load(const char *json)
{
    struct gs_trace *t = NULL;
    struct gs_err err = {0};
    int rc = gs_trace_load_mem(json, strlen(json), "t", &t, &err);

    if (rc != GS_OK)
        fail_msg("load: %s", err.msg);
    return t;
}

static json_t *analyze1(struct gs_trace *t, const struct gs_trace_opts *o)
{
    json_t *doc = gs_trace_analyze(&t, 1, o);

    assert_non_null(doc);
    return doc;
}

static json_t *rank0(json_t *doc)
{
    return json_array_get(json_object_get(doc, "ranks"), 0);
}

static long long geti(json_t *o, const char *path)
{
    json_t *v = json_object_get(o, path);

    assert_true(json_is_integer(v));
    return (long long)json_integer_value(v);
}

static long long type_sum(json_t *types, const char *name)
{
    size_t i;
    json_t *v;

    json_array_foreach(types, i, v) if (strcmp(json_string_value(json_object_get(v, "type")),
                                               name) == 0) return geti(v, "sum_us");
    return -1;
}

#define K(name, ts, dur, stream, corr)                                                             \
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"" name "\",\"ts\":" #ts ",\"dur\":" #dur          \
    ",\"args\":{\"stream\":" #stream ",\"correlation\":" #corr "}}"
#define L(ts, corr)                                                                                \
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":" #ts             \
    ",\"dur\":1,\"args\":{\"correlation\":" #corr "}}"

/* comp [0,10) [10,20) touch -> one interval; comm [15,30); mem [25,40). */
static void test_temporal_and_overlap(void **state)
{
    const char *j = "{\"traceEvents\":[" K("gemm", 0, 10, 7, 1) "," K("gemm", 10, 10, 7, 2) "," K(
        "ncclKernel_AllReduce", 15, 15, 9, 3) "," K("Memcpy HtoD (Pinned -> Device)", 25, 15, 8,
                                                    4) "," K("gemm", 50, 10, 7, 5) "]}";
    struct gs_trace *t = load(j);
    json_t *doc = analyze1(t, NULL), *r = rank0(doc), *tmp = json_object_get(r, "temporal");

    (void)state;
    assert_int_equal(geti(tmp, "kernel_span_us"), 60);
    assert_int_equal(geti(tmp, "idle_us"), 10);    /* [40,50): busy [0,40) + [50,60) */
    assert_int_equal(geti(tmp, "compute_us"), 30); /* [0,20) + [50,60) */
    assert_int_equal(geti(tmp, "non_compute_us"), 20);
    /* sweep: comp alone [0,15) 15 + [50,60) 10; comp+comm [15,20) 5; comm [20,25) 5;
     * comm+mem [25,30) 5; mem [30,40) 10 */
    {
        json_t *ty = json_object_get(r, "kernel_types");

        assert_int_equal(type_sum(ty, "COMPUTATION"), 25);
        assert_int_equal(type_sum(ty, "COMPUTATION overlapping COMMUNICATION"), 5);
        assert_int_equal(type_sum(ty, "COMMUNICATION"), 5);
        assert_int_equal(type_sum(ty, "COMMUNICATION overlapping MEMORY"), 5);
        assert_int_equal(type_sum(ty, "MEMORY"), 10);
    }
    /* comm union 15, overlapped by comp 5 */
    assert_float_equal(json_real_value(json_object_get(r, "comm_comp_overlap_pct")), 100.0 * 5 / 15,
                       1e-9);
    json_decref(doc);
    gs_trace_free(t);
}

/* Fractional ts: start up, end down (HTA), and only when some ts is fractional. */
static void test_rounding(void **state)
{
    const char *j = "{\"traceEvents\":[" K("a", 0.5, 10.0, 7, 1) "," K("b", 20, 5.75, 7, 2) "]}";
    struct gs_trace *t = load(j);
    json_t *doc = analyze1(t, NULL), *tmp = json_object_get(rank0(doc), "temporal");

    (void)state;
    /* a: [1,10), b: [20,25) */
    assert_int_equal(geti(tmp, "kernel_span_us"), 24);
    assert_int_equal(geti(tmp, "compute_us"), 14);
    json_decref(doc);
    gs_trace_free(t);
}

/* Three steps: kernels launched in the last one are left out unless asked. */
static void test_last_step_and_idle(void **state)
{
    const char *j =
        "{\"traceEvents\":["
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"ts\":0,\"dur\":"
        "100},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"ts\":100,\"dur\":"
        "100}," L(1, 1) "," K("k", 10, 10, 7, 1) "," /* first: other, empty */
        L(2, 2) "," K("k", 25, 10, 7, 2) ","      /* gap 5 < 30, launched before 20: kernel wait */
        L(50, 3) "," K("k", 60, 10, 7, 3) ","     /* launched at 50 > 35: host wait 25 */
        L(3, 4) "," K("k", 200, 10, 7, 4) ","     /* gap 130, launched early: other */
        L(150, 5) "," K("k", 300, 10, 7, 5) "]}"; /* launched in the last step */
    struct gs_trace *t = load(j);
    struct gs_trace_opts o;
    json_t *doc = analyze1(t, NULL), *r = rank0(doc), *idle = json_object_get(r, "idle_by_stream");
    long long got[3] = {-1, -1, -1};
    size_t i;
    json_t *v;

    (void)state;
    assert_int_equal(geti(r, "gpu_activities"), 4);
    json_array_foreach(idle, i, v)
    {
        const char *c = json_string_value(json_object_get(v, "cause"));

        got[strcmp(c, "host_wait") == 0     ? 0
            : strcmp(c, "kernel_wait") == 0 ? 1
                                            : 2] = geti(v, "idle_us");
    }
    assert_int_equal(got[0], 25);
    assert_int_equal(got[1], 5);
    assert_int_equal(got[2], 130);
    json_decref(doc);
    gs_trace_opts_default(&o);
    o.include_last_step = 1;
    doc = analyze1(t, &o);
    assert_int_equal(geti(rank0(doc), "gpu_activities"), 5);
    json_decref(doc);
    gs_trace_free(t);
}

/* Twelve names: the two past --top 10 are lumped; HTA's statistics over the totals. */
static void test_others(void **state)
{
    char j[8192];
    size_t n = 0;
    struct gs_trace *t;
    json_t *doc, *top, *v;
    size_t i;
    int others = 0;

    (void)state;
    n += (size_t)snprintf(j + n, sizeof j - n, "{\"traceEvents\":[");
    for (int k = 0; k < 12; k++)
        n += (size_t)snprintf(j + n, sizeof j - n,
                              "%s{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k%02d\",\"ts\":%d,"
                              "\"dur\":%d,\"args\":{\"stream\":7}}",
                              k ? "," : "", k, k * 1000, 1000 - k * 10);
    snprintf(j + n, sizeof j - n, "]}");
    t = load(j);
    doc = analyze1(t, NULL);
    top = json_object_get(rank0(doc), "top_kernels");
    json_array_foreach(top, i,
                       v) if (strcmp(json_string_value(json_object_get(v, "name")), "others") == 0)
    {
        others = 1;
        /* cumsum quantile 0.8 of 12 totals lumps k09.. as well: at least k10, k11 */
        assert_true(geti(v, "kernels") >= 2);
        assert_true(geti(v, "sum_us") >= 890 + 880);
    }
    assert_true(others);
    json_decref(doc);
    gs_trace_free(t);
}

static void test_legacy(void **state)
{
    struct gs_trace *t = load("[{\"name\":\"aten::mm\",\"ph\":\"X\",\"ts\":1,\"dur\":4,"
                              "\"pid\":\"CPU functions\",\"args\":{}}]");
    json_t *doc = analyze1(t, NULL), *r = rank0(doc);

    (void)state;
    assert_int_equal(t->legacy, 1);
    assert_null(json_object_get(r, "temporal"));
    assert_non_null(json_object_get(r, "note"));
    assert_int_equal(json_array_size(json_object_get(r, "cpu_ops")), 1);
    json_decref(doc);
    gs_trace_free(t);
}

static void expect_error(const char *json, const char *want)
{
    struct gs_trace *t = NULL;
    struct gs_err err = {0};

    assert_int_equal(gs_trace_load_mem(json, strlen(json), "f", &t, &err), GS_EPARSE);
    assert_null(t);
    if (!strstr(err.msg, want))
        fail_msg("got '%s', want '%s'", err.msg, want);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("{\"traceEvents\":[{\"ts\":1", "f:");
    expect_error("{\"traceEvents\":[{\"ts\":1e999}]}", "ts is not a finite number");
    expect_error("{\"traceEvents\":[{\"ts\":1,\"dur\":1e13}]}", "dur out of range");
    expect_error("{\"a\":1}", "no traceEvents");
    expect_error("17", "not a trace");
    expect_error("", "f:0: empty file");
    {
        char deep[300];

        memset(deep, '[', 200);
        deep[200] = '\0';
        expect_error(deep, "f:65: nesting deeper than 64");
    }
}

/* trace diff: A gemm 10 us + an NCCL kernel 15 us; B gemm 20 us + a new kernel 5 us. */
static void test_diff(void **state)
{
    struct gs_trace *a = load("{\"traceEvents\":[" K("gemm", 0, 10, 7, 1) "," K(
        "ncclKernel_AllReduce", 15, 15, 9, 2) "]}");
    struct gs_trace *b =
        load("{\"traceEvents\":[" K("gemm", 0, 20, 7, 1) "," K("fresh", 30, 5, 7, 2) "]}");
    json_t *d = gs_trace_diff(&a, 1, &b, 1, 2), *rows, *r;

    (void)state;
    assert_non_null(d);
    /* temporal: idle, compute, non-compute, kernel span */
    rows = json_object_get(d, "temporal");
    assert_int_equal(json_array_size(rows), 4);
    r = json_array_get(rows, 1);
    assert_string_equal(json_string_value(json_object_get(r, "what")), "compute");
    assert_int_equal(geti(r, "a_us"), 10);
    assert_int_equal(geti(r, "b_us"), 25);
    assert_int_equal(geti(r, "delta_us"), 15);
    assert_float_equal(json_real_value(json_object_get(r, "delta_pct")), 150.0, 1e-9);
    /* kernel time by type */
    r = json_array_get(json_object_get(d, "kernel_types"), 1);
    assert_string_equal(json_string_value(json_object_get(r, "what")), "COMMUNICATION");
    assert_int_equal(geti(r, "a_us"), 15);
    assert_int_equal(geti(r, "b_us"), 0);
    /* kernels, largest change first, top 2 of 3 */
    rows = json_object_get(d, "kernels");
    assert_int_equal(json_array_size(rows), 2);
    r = json_array_get(rows, 0);
    assert_string_equal(json_string_value(json_object_get(r, "what")), "ncclKernel_AllReduce");
    assert_string_equal(json_string_value(json_object_get(r, "status")), "vanished");
    assert_int_equal(geti(r, "delta_us"), -15);
    r = json_array_get(rows, 1);
    assert_string_equal(json_string_value(json_object_get(r, "what")), "gemm");
    assert_string_equal(json_string_value(json_object_get(r, "status")), "changed");
    assert_int_equal(geti(r, "a_count"), 1);
    assert_int_equal(geti(r, "b_count"), 1);
    assert_int_equal(geti(d, "kernels_compared"), 4);
    assert_int_equal(json_array_size(json_object_get(json_object_get(d, "a"), "files")), 1);
    json_decref(d);
    d = gs_trace_diff(&a, 1, &b, 1, 10);
    r = json_array_get(json_object_get(d, "kernels"), 2);
    assert_string_equal(json_string_value(json_object_get(r, "what")), "fresh");
    assert_string_equal(json_string_value(json_object_get(r, "status")), "appeared");
    assert_true(json_is_null(json_object_get(r, "delta_pct")));
    json_decref(d);
    gs_trace_free(a);
    gs_trace_free(b);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The --profile spec, and the profile section of a run directory's last window. */
static void test_window(void **state)
{
    char dir[] = "/tmp/gs_test_window_XXXXXX", prof[64];
    const char *j = "{\"traceEvents\":[" K("gemm", 0, 10, 7, 1) "]}";
    json_t *sec;

    (void)state;
    assert_int_equal(gs_trace_window_check("5:8"), 0);
    assert_int_equal(gs_trace_window_check("1:3"), 0);
    assert_int_equal(gs_trace_window_check("every:10:2"), 0);
    assert_int_equal(gs_trace_window_check("0:3"), -1);
    assert_int_equal(gs_trace_window_check("3:2"), -1);
    assert_int_equal(gs_trace_window_check("1:2"), -1);
    assert_int_equal(gs_trace_window_check("every:2:2"), -1);
    assert_int_equal(gs_trace_window_check("every:1:0"), -1);
    assert_int_equal(gs_trace_window_check("5:8x"), -1);
    assert_int_equal(gs_trace_window_check("x"), -1);

    assert_non_null(mkdtemp(dir));
    /* no profile/ and no --profile: no section; with --profile: a note */
    assert_null(gs_trace_window_analyze(dir, NULL, stderr));
    sec = gs_trace_window_analyze(dir, "5:8", stderr);
    assert_non_null(sec);
    assert_string_equal(json_string_value(json_object_get(sec, "steps")), "5:8");
    assert_int_equal(geti(sec, "windows"), 0);
    assert_non_null(json_object_get(sec, "note"));
    json_decref(sec);

    snprintf(prof, sizeof prof, "%s/profile", dir);
    assert_int_equal(mkdir(prof, 0700), 0);
    write_file(prof, "rank0-step2.json", j);
    write_file(prof, "rank0-step5.json", j);
    write_file(prof, "rank1-step5.json", j);
    write_file(prof, "notes.txt", "not a trace");
    /* on request (no spec): the last window, every rank of it */
    sec = gs_trace_window_analyze(dir, NULL, stderr);
    assert_non_null(sec);
    assert_string_equal(json_string_value(json_object_get(sec, "steps")), "on request");
    assert_int_equal(geti(sec, "windows"), 2);
    assert_int_equal(geti(sec, "window_first_step"), 5);
    assert_int_equal(json_array_size(json_object_get(sec, "files")), 2);
    assert_int_equal(json_array_size(json_object_get(sec, "ranks")), 2);
    assert_null(json_object_get(sec, "note"));
    json_decref(sec);

    /* an unreadable trace of the last window is left out, with a note when none is left */
    write_file(prof, "rank0-step9.json", "{\"traceEvents\":[");
    sec = gs_trace_window_analyze(dir, "5:8", stderr);
    assert_int_equal(geti(sec, "window_first_step"), 9);
    assert_int_equal(json_array_size(json_object_get(sec, "files")), 0);
    assert_string_equal(json_string_value(json_object_get(sec, "note")),
                        "no readable trace in the last window");
    json_decref(sec);

    {
        const char *names[] = {"rank0-step2.json", "rank0-step5.json", "rank1-step5.json",
                               "rank0-step9.json", "notes.txt"};
        char path[512];

        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            snprintf(path, sizeof path, "%s/%s", prof, names[i]);
            unlink(path);
        }
        rmdir(prof);
        rmdir(dir);
    }
}

/* A growing text buffer for generated traces. */
struct gbuf {
    char *s;
    size_t len, cap;
};

static void gb_add(struct gbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if ((size_t)n < b->cap - b->len)
            break;
        b->cap = (b->cap + (size_t)n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        assert_non_null(b->s);
    }
    b->len += (size_t)n;
}

/* A 64 MiB name: read whole (cut at 1 MiB as every name), the next event intact. */
static void test_long_string(void **state)
{
    size_t big = (size_t)64 << 20;
    const char *head = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"";
    const char *tail =
        "\",\"ts\":1,\"dur\":2},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\","
        "\"ts\":3,\"dur\":40}]}";
    size_t hl = strlen(head), tl = strlen(tail);
    char *json = malloc(hl + big + tl);
    struct gs_trace *t = NULL;
    struct gs_err err = {0};
    json_t *doc, *ops;
    const char *nm;

    (void)state;
    assert_non_null(json);
    memcpy(json, head, hl);
    memset(json + hl, 'x', big);
    json[hl + big / 2] = '\\'; /* an escape in the middle: \" */
    json[hl + big / 2 + 1] = '"';
    memcpy(json + hl + big, tail, tl);
    assert_int_equal(gs_trace_load_mem(json, hl + big + tl, "t", &t, &err), GS_OK);
    doc = analyze1(t, NULL);
    ops = json_object_get(rank0(doc), "cpu_ops");
    assert_int_equal(json_array_size(ops), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ops, 0), "name")),
                        "aten::mm");
    nm = json_string_value(json_object_get(json_array_get(ops, 1), "name"));
    assert_int_equal(strlen(nm), 1 << 20);
    assert_int_equal(strspn(nm, "x"), 1 << 20);
    assert_int_equal(geti(rank0(doc), "events"), 2);
    json_decref(doc);
    gs_trace_free(t);
    /* unterminated: an error at the end, not a hang or a cut name taken as whole */
    assert_int_equal(gs_trace_load_mem(json, hl + big, "t", &t, &err), GS_EPARSE);
    assert_non_null(strstr(err.msg, "premature EOF"));
    /* a number of 64 MiB digits: an error, never a cut number taken as another value */
    memcpy(json, "{\"traceEvents\":[{\"ts\":", 22);
    memset(json + 22, '7', big);
    memcpy(json + 22 + big, "}]}", 3);
    assert_int_equal(gs_trace_load_mem(json, 22 + big + 3, "t", &t, &err), GS_EPARSE);
    if (!strstr(err.msg, "a number longer than 1 MiB"))
        fail_msg("got '%s'", err.msg);
    free(json);
}

/* Tokens cut anywhere: strings with escapes (\" \\ \u00e9) and numbers split by pieces of
 * 1, 2, 3, 7, 64 and 4096 bytes give the same document as one piece. */
static void test_cut_tokens(void **state)
{
    struct gbuf b = {NULL, 0, 0};
    static const size_t sizes[] = {1, 2, 3, 7, 64, 4096};
    char *want;

    (void)state;
    gb_add(&b, "{\"traceEvents\":[");
    for (int i = 0; i < 200; i++) {
        gb_add(&b,
               "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"op\\\"%d\\\\ \\u00e9%.*s\",\"ts\":%d.5,"
               "\"dur\":%d,\"args\":{\"stream\":%d,\"correlation\":%d,\"x\":123456789012345678"
               "9012345678901234567890e-3}},",
               i % 3 ? "cpu_op" : "kernel", i % 17, i % 40,
               "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i * 10, 1 + i % 9, i % 3 ? -1 : 7, i);
        if (i % 3 == 0)
            gb_add(&b,
                   "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\","
                   "\"ts\":%d,\"dur\":1,\"args\":{\"correlation\":%d}},",
                   i * 10 - 1, i);
        if (i % 50 == 0)
            gb_add(&b,
                   "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\","
                   "\"ts\":%d,\"dur\":500},",
                   i / 50, i * 10);
    }
    gb_add(&b, "{\"ph\":\"i\",\"name\":\"end\",\"ts\":0}], \"n\":%s}", "-0.5e+10");
    {
        struct gs_trace *t = load(b.s);
        json_t *doc = analyze1(t, NULL);

        want = json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII);
        assert_non_null(strstr(want, "op\\\"3\\\\ \\u00E9"));
        assert_true(json_array_size(json_object_get(json_object_get(doc, "job"), "kernel_types")));
        json_decref(doc);
        gs_trace_free(t);
    }
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        struct gs_trace *t;
        json_t *doc;
        char *got;

        gs_trace_set_mem_chunk(sizes[k]);
        t = load(b.s);
        doc = analyze1(t, NULL);
        got = json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII);
        if (strcmp(got, want) != 0)
            fail_msg("pieces of %zu bytes: another document", sizes[k]);
        free(got);
        json_decref(doc);
        gs_trace_free(t);
    }
    gs_trace_set_mem_chunk(0);
    free(want);
    free(b.s);
}

/* 2 M ProfilerStep events without GPU activity: 1024 steps listed (the latest), the rest
 * counted, the table never past 2048; the last-step rule still sees two distinct steps. */
static void test_many_steps(void **state)
{
    struct gbuf b = {NULL, 0, 0};
    struct gs_trace *t;
    json_t *doc, *r, *steps;
    const int n = 2000000;

    (void)state;
    gb_add(&b, "{\"traceEvents\":[");
    for (int i = 0; i < n; i++)
        gb_add(&b,
               "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\","
               "\"ts\":%d,\"dur\":90},",
               i, i * 100);
    gb_add(&b, "%s,%s]}", K("gemm", 199999950, 10, 7, 1), L(199999940, 1));
    t = load(b.s);
    free(b.s);
    assert_true(t->cap_step <= 2048);
    doc = analyze1(t, NULL);
    r = rank0(doc);
    steps = json_object_get(r, "steps");
    assert_int_equal(geti(r, "profiler_steps"), n);
    assert_int_equal(json_array_size(steps), 1024);
    assert_int_equal(geti(r, "steps_omitted"), n - 1024);
    assert_int_equal(geti(json_array_get(steps, 0), "step"), n - 1024);
    assert_int_equal(geti(json_array_get(steps, 1023), "step"), n - 1);
    /* the kernel's launch is in the last step: left out (HTA's rule) */
    assert_int_equal(geti(r, "gpu_activities"), 0);
    json_decref(doc);
    gs_trace_free(t);
}

/* 20,000 distinct op names, each 1 us, and two busy ops: the busy ones stay exact at the top,
 * the rest is listed or folded, and every call is counted once. */
static void test_many_ops(void **state)
{
    struct gbuf b = {NULL, 0, 0};
    struct gs_trace *t;
    json_t *doc, *r, *ops, *fold, *v;
    const int n = 20000;
    long long calls = 0;
    size_t i;

    (void)state;
    gb_add(&b, "{\"traceEvents\":[");
    for (int k = 0; k < n; k++) {
        gb_add(&b,
               "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::op_%d\",\"ts\":%d,\"dur\":1},", k,
               k);
        if (k % 100 == 0)
            gb_add(&b,
                   "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"ts\":%d,\"dur\":50},"
                   "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"ts\":%d,\"dur\":5},",
                   k, k);
    }
    gb_add(&b, "{\"ph\":\"i\",\"name\":\"end\",\"ts\":0}]}");
    t = load(b.s);
    free(b.s);
    assert_true(t->n_cpuop <= 8192);
    doc = analyze1(t, NULL);
    r = rank0(doc);
    ops = json_object_get(r, "cpu_ops");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ops, 0), "name")),
                        "aten::mm");
    assert_int_equal(geti(json_array_get(ops, 0), "count"), n / 100);
    assert_true(json_real_value(json_object_get(json_array_get(ops, 0), "sum_us")) ==
                50.0 * (n / 100));
    assert_string_equal(json_string_value(json_object_get(json_array_get(ops, 1), "name")),
                        "aten::add");
    assert_int_equal(geti(json_array_get(ops, 1), "count"), n / 100);
    fold = json_object_get(r, "cpu_ops_folded");
    assert_non_null(fold);
    assert_true(geti(fold, "names") > 0);
    calls = geti(fold, "count");
    for (i = 0; i < t->n_cpuop; i++)
        calls += (long long)t->cpuop[i].count;
    assert_int_equal(calls, n + 2 * (n / 100));
    json_array_foreach(ops, i, v) assert_true(geti(v, "count") >= 1);
    json_decref(doc);
    gs_trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temporal_and_overlap),
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_last_step_and_idle),
        cmocka_unit_test(test_others),
        cmocka_unit_test(test_legacy),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_long_string),
        cmocka_unit_test(test_cut_tokens),
        cmocka_unit_test(test_many_steps),
        cmocka_unit_test(test_many_ops),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
