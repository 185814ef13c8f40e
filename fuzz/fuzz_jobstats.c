/*
 * libFuzzer target for the end-of-job summary's arithmetic and notes (src/diag/jobstats.c),
 * which `gpuscope jobstats` runs on what agents answered over HTTP (/api/v1/history points,
 * the usage figures): arbitrary bytes parsed as JSON, then gs_jobstats_notes on the document
 * and gs_jobstats_util on it and on its "points". Invariants: the notes are an array of
 * findings with an id and a title; a utilization's quartiles are ordered, within the points'
 * range, and its point count at most the points given.
 *
 * Input: a JSON text (a summary as `gpuscope jobstats --json` prints it, or a history answer).
 * Seeds are in fuzz/corpus/jobstats/. Build and run: make fuzz.
 */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "diag/jobstats.h"

#include "fuzz_util.h"

static void check_util(const json_t *points)
{
    json_t *u = gs_jobstats_util(points);
    double p25, p50, p75, mean;

    if (!u)
        return;
    p25 = json_number_value(json_object_get(u, "p25"));
    p50 = json_number_value(json_object_get(u, "p50"));
    p75 = json_number_value(json_object_get(u, "p75"));
    mean = json_number_value(json_object_get(u, "mean"));
    CHECK(json_is_array(points));
    CHECK(json_integer_value(json_object_get(u, "points")) >= 1 &&
          (size_t)json_integer_value(json_object_get(u, "points")) <= json_array_size(points));
    CHECK(!(p25 > p50) && !(p50 > p75));
    /* a mean of ratios 0..1 */
    CHECK(mean >= 0 && mean <= 1 && p25 >= 0 && p75 <= 1);
    json_decref(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL), *notes, *f;
    size_t i;

    if (!doc)
        return 0;
    notes = gs_jobstats_notes(doc);
    CHECK(json_is_array(notes));
    json_array_foreach(notes, i, f)
    {
        CHECK(json_is_string(json_object_get(f, "id")));
        CHECK(json_is_string(json_object_get(f, "title")));
        CHECK(json_is_array(json_object_get(f, "advice")));
    }
    json_decref(notes);
    check_util(doc);
    check_util(json_object_get(doc, "points"));
    json_decref(doc);
    return 0;
}
