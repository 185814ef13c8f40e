/*
 * Unit tests for the diagnosis rules over a report's "profile" section (src/diag/
 * diag_profile.c): the real reference traces of ../shared/reference/kineto-traces analysed by
 * src/trace (skipped when that folder is absent), and small hand-made traces on each side of
 * the launch-bound and attention thresholds. Each finding must quote its kernel and numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "diag/diag.h"
#include "trace/trace.h"

static char ref[4096];

static json_t *report_of(struct gs_trace **t, size_t n, json_t *facts)
{
    json_t *doc = gs_trace_analyze(t, n, NULL);

    assert_non_null(doc);
    json_object_set_new(doc, "steps", json_string("2:4"));
    return json_pack("{s:o, s:o, s:{s:f, s:f}}", "profile", doc, "facts",
                     facts ? facts : json_object(), "run", "start_time", 1.0, "end_time", 2.0);
}

static json_t *findings_of_files(const char *const *names, json_t *facts)
{
    struct gs_trace *t[4];
    size_t n = 0;
    json_t *rep, *f;

    for (; names[n]; n++) {
        char path[8192];
        struct gs_err err = {0};

        snprintf(path, sizeof path, "%s/%s", ref, names[n]);
        if (gs_trace_load(path, &t[n], &err) != GS_OK)
            fail_msg("%s", err.msg);
    }
    rep = report_of(t, n, facts);
    f = gs_diag_findings(rep, 8);
    json_decref(rep);
    for (size_t i = 0; i < n; i++)
        gs_trace_free(t[i]);
    return f;
}

static const json_t *find(const json_t *fs, const char *id)
{
    size_t i;
    const json_t *f;

    json_array_foreach(fs, i, f) if (strcmp(json_string_value(json_object_get(f, "id")), id) ==
                                     0) return f;
    return NULL;
}

static int has_profile_finding(const json_t *fs)
{
    size_t i;
    const json_t *f;

    json_array_foreach(fs, i, f) if (strncmp(json_string_value(json_object_get(f, "id")),
                                             "profile_", 8) == 0) return 1;
    return 0;
}

static int advice_has(const json_t *f, const char *s)
{
    size_t i;
    const json_t *a;

    json_array_foreach(json_object_get(f, "advice"), i,
                       a) if (strstr(json_string_value(a), s)) return 1;
    return 0;
}

static void test_alexnet(void **state)
{
    static const char *const files[] = {"alexnet-idle.json.gz", NULL};
    json_t *fs = findings_of_files(files, json_pack("{s:b}", "loader_pin_memory", 0));
    const json_t *h = find(fs, "profile_htod"), *w = find(fs, "profile_host_wait");

    (void)state;
    assert_non_null(h);
    assert_non_null(w);
    /* 55503 us of HtoD against 66327 us of busy GPU */
    assert_float_equal(
        json_real_value(json_object_get(json_object_get(h, "evidence"), "htod_time_us")), 55503,
        0.5);
    assert_true(advice_has(h, "Memcpy HtoD (Pageable -> Device)"));
    assert_true(advice_has(h, "pin_memory=False"));
    assert_true(advice_has(h, "non_blocking=True"));
    assert_null(find(fs, "profile_exposed_communication"));
    json_decref(fs);
}

static void test_two_ranks(void **state)
{
    static const char *const files[] = {"two-ranks-rank-0.json.gz", "two-ranks-rank-1.json.gz",
                                        NULL};
    json_t *fs = findings_of_files(files, NULL);
    const json_t *c = find(fs, "profile_exposed_communication");

    (void)state;
    assert_non_null(c);
    assert_true(advice_has(c, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"));
    /* leave-one-out (base/straggler.c): 135548 us of compute against rank 0's 106252 */
    assert_true(advice_has(c, "Rank 1 computes 28% more than the other ranks"));
    assert_null(find(fs, "profile_htod"));
    /* the side streams wait for the host; the main stream 7 does not (45 %) */
    assert_null(find(fs, "profile_host_wait"));
    json_decref(fs);
}

static void test_nccl_inference(void **state)
{
    static const char *const nccl[] = {"nccl-sendrecv-rank-0.json.gz", NULL};
    static const char *const inf[] = {"inference-ns-resolution.json.gz", NULL};
    json_t *fs = findings_of_files(nccl, NULL);

    (void)state;
    assert_non_null(find(fs, "profile_exposed_communication"));
    assert_null(find(fs, "profile_host_wait")); /* host wait is 35 % of the streams' idle */
    json_decref(fs);
    fs = findings_of_files(inf, NULL);
    assert_false(has_profile_finding(fs)); /* 97 % compute: nothing to say */
    json_decref(fs);
}

/* n kernels of dur us, gap us apart, launched early (no host wait); name given. */
static char *kernels(const char *name, int n, int dur, int gap)
{
    static char buf[1 << 16];
    size_t len = 0;
    long ts = 0;

    len += (size_t)snprintf(buf + len, sizeof buf - len, "{\"traceEvents\":[");
    for (int i = 0; i < n; i++, ts += dur + gap)
        len += (size_t)snprintf(buf + len, sizeof buf - len,
                                "%s{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":"
                                "\"cudaLaunchKernel\",\"ts\":0,\"dur\":1,\"args\":{\"correlation\":"
                                "%d}},{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"ts\":%ld,"
                                "\"dur\":%d,\"args\":{\"stream\":7,\"correlation\":%d}}",
                                i ? "," : "", i + 1, name, ts, dur, i + 1);
    snprintf(buf + len, sizeof buf - len, "]}");
    return buf;
}

static json_t *findings_of_text(const char *text)
{
    struct gs_trace *t = NULL;
    struct gs_err err = {0};
    json_t *rep, *fs;

    if (gs_trace_load_mem(text, strlen(text), "mem", &t, &err) != GS_OK)
        fail_msg("%s", err.msg);
    rep = report_of(&t, 1, NULL);
    fs = gs_diag_findings(rep, 8);
    json_decref(rep);
    gs_trace_free(t);
    return fs;
}

static void test_launch_bound(void **state)
{
    json_t *fs;

    (void)state;
    /* 4 us kernels 10 us apart: idle 71 %, all of it kernel wait, all kernels tiny */
    fs = findings_of_text(kernels("elementwise_add", 200, 4, 10));
    assert_non_null(find(fs, "profile_launch_bound"));
    assert_true(advice_has(find(fs, "profile_launch_bound"), "CUDA graph"));
    json_decref(fs);
    /* 40 us kernels: not tiny */
    fs = findings_of_text(kernels("gemm", 200, 40, 10));
    assert_null(find(fs, "profile_launch_bound"));
    json_decref(fs);
}

static void test_attention(void **state)
{
    json_t *fs;

    (void)state;
    fs = findings_of_text(kernels("softmax_warp_forward", 50, 40, 1));
    assert_non_null(find(fs, "profile_attention"));
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(find(fs, "profile_attention"), "evidence"), "softmax_kernel")),
        "softmax_warp_forward");
    json_decref(fs);
    fs = findings_of_text(kernels("flash_fwd_kernel", 50, 40, 1));
    assert_null(find(fs, "profile_attention"));
    json_decref(fs);
}

static int have_ref(void)
{
    const char *src = getenv("GPUSCOPE_SOURCE_ROOT");

    snprintf(ref, sizeof ref, "%s/../shared/reference/kineto-traces", src ? src : ".");
    return access(ref, R_OK) == 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alexnet),        cmocka_unit_test(test_two_ranks),
        cmocka_unit_test(test_nccl_inference), cmocka_unit_test(test_launch_bound),
        cmocka_unit_test(test_attention),
    };

    if (!have_ref()) {
        /* the reference traces live beside the worktree (../shared); without them only the
         * hand-made traces run */
        const struct CMUnitTest mine[] = {
            cmocka_unit_test(test_launch_bound),
            cmocka_unit_test(test_attention),
        };

        printf("# ../shared/reference/kineto-traces absent: reference-trace cases skipped\n");
        return cmocka_run_group_tests(mine, NULL, NULL);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
