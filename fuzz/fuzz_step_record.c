/*
 * libFuzzer target for the step-record wire format (src/run/record.c): gs_record_parse on any
 * bytes; every record it accepts must encode (gs_record_encode) and reparse to an equal record,
 * and a step record must then go through the aggregate and its report (src/run/agg.c,
 * report.c, src/diag/diag.c) without a crash or a UBSan report, as in the receiver.
 *
 * Input: one message as it would arrive on the socket; seeds are in fuzz/corpus/step_record/,
 * keys in fuzz/step_record.dict. Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "gpuscope/gs_err.h"
#include "run/agg.h"
#include "run/record.h"

static void aggregate(const struct gs_record *r)
{
    struct gs_agg *a = gs_agg_new();
    json_t *rep;

    CHECK(a);
    if (r->type == GS_REC_STEP) {
        CHECK(gs_agg_step(a, &r->u.step) == 0);
        CHECK(gs_agg_step(a, &r->u.step) == 0);
    } else if (r->type == GS_REC_END) {
        gs_agg_end(a, &r->u.end);
    } else if (r->type == GS_REC_HELLO) {
        gs_agg_hello(a, &r->u.hello, 1, 0);
    } /* GS_REC_LOG: the aggregate does not take it */
    rep = gs_agg_report(a, NULL);
    CHECK(rep);
    json_decref(rep);
    gs_agg_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_record r, back;
    struct gs_err err, err2;
    char buf[GS_RECORD_MAX + 1];
    int n, rc;

    gs_err_clear(&err);
    if ((rc = gs_record_parse((const char *)data, size, &r, &err)) != GS_OK) {
        CHECK(rc == GS_EPARSE && memchr(err.msg, '\0', sizeof err.msg) && err.msg[0]);
        return 0;
    }
    n = gs_record_encode(&r, buf, sizeof buf);
    CHECK(n > 0 && (size_t)n == strlen(buf));
    CHECK(gs_record_parse(buf, (size_t)n, &back, &err2) == GS_OK);
    CHECK(gs_record_equal(&r, &back));
    aggregate(&r);
    return 0;
}
