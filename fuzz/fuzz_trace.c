/*
 * libFuzzer target for the profiler trace reader and analysis (src/trace/): any bytes as a
 * trace file through gs_trace_load_mem; a rejected input must leave a "label:offset: what"
 * message, an accepted one must go through gs_trace_analyze (alone and as two ranks), the
 * text tables and the profile diagnosis (src/diag/diag_profile.c) without a crash, a leak or
 * a UBSan report. The same bytes read again in pieces of 1 to 16 bytes (the size taken from
 * the input), so that tokens cut by pieces go through the loader's long-token path, must give
 * the same verdict and, when accepted, the same document.
 *
 * Seeds in fuzz/corpus/trace/ (a small Kineto trace, the legacy CPU-only array, events out of
 * order, missing fields, huge numbers, deep nesting, truncation); keys in fuzz/trace.dict.
 * Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh).
 */
#include <stdio.h>
#include <stdlib.h>
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
    struct gs_trace *cut = NULL;
    int rc_cut;

    gs_trace_set_mem_chunk(size ? 1 + data[size / 2] % 16 : 1);
    rc_cut = gs_trace_load_mem((const char *)data, size, "in", &cut, &err);
    gs_trace_set_mem_chunk(0);
    CHECK((rc == GS_OK) == (rc_cut == GS_OK));
    if (rc != GS_OK) {
        CHECK(rc == GS_EPARSE || rc == GS_ENOMEM);
        CHECK(strncmp(err.msg, "in:", 3) == 0);
        return 0;
    }
    gs_trace_opts_default(&o);
    {
        json_t *a = gs_trace_analyze(&t[0], 1, &o), *b = gs_trace_analyze(&cut, 1, &o);
        char *sa, *sb;

        CHECK(a && b);
        sa = json_dumps(a, JSON_SORT_KEYS | JSON_COMPACT);
        sb = json_dumps(b, JSON_SORT_KEYS | JSON_COMPACT);
        CHECK(sa && sb && strcmp(sa, sb) == 0);
        free(sa);
        free(sb);
        json_decref(a);
        json_decref(b);
    }
    gs_trace_free(cut);
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
