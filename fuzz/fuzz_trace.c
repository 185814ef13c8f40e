/*
 * libFuzzer target for the profiler trace reader and analysis (src/trace/): any bytes as a
 * trace file through gs_trace_load_mem; a rejected input must leave a "label:offset: what"
 * message, an accepted one must go through gs_trace_analyze (alone and as two ranks), the
 * text tables and the profile diagnosis (src/diag/diag_profile.c) without a crash, a leak or
 * a UBSan report.
 *
 * Seeds in fuzz/corpus/trace/ (a small Kineto trace, the legacy CPU-only array, events out of
 * order, missing fields, huge numbers, deep nesting, truncation); keys in fuzz/trace.dict.
 * Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh).
 */
#include <stdio.h>
#include <string.h>

#include "diag/diag.h"
#include "fuzz_util.h"
#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_trace *t[2] = {NULL, NULL};
    struct gs_err err = {0};
    struct gs_trace_opts o;
    json_t *doc;
    FILE *null;
    int rc = gs_trace_load_mem((const char *)data, size, "in", &t[0], &err);

    if (rc != GS_OK) {
        CHECK(rc == GS_EPARSE || rc == GS_ENOMEM);
        CHECK(strncmp(err.msg, "in:", 3) == 0);
        return 0;
    }
    CHECK(gs_trace_load_mem((const char *)data, size, "in2", &t[1], &err) == GS_OK);
    gs_trace_opts_default(&o);
    o.top_kernels = 2; /* reach the "others" lumping with few names */
    doc = gs_trace_analyze(t, 1, &o);
    CHECK(doc);
    null = fopen("/dev/null", "w");
    CHECK(null);
    gs_trace_print(null, doc, 1);
    {
        json_t *rep = json_pack("{s:O}", "profile", doc), *fs = json_array();

        CHECK(rep && fs);
        gs_diag_profile_findings(rep, fs);
        json_decref(fs);
        json_decref(rep);
    }
    json_decref(doc);
    o.include_last_step = 1;
    doc = gs_trace_analyze(t, 2, &o);
    CHECK(doc);
    gs_trace_print(null, doc, 0);
    json_decref(doc);
    fclose(null);
    gs_trace_free(t[0]);
    gs_trace_free(t[1]);
    return 0;
}
