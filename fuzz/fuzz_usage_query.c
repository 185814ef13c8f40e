/*
 * libFuzzer target for /api/v1/usage's query parameters (src/agent/usage_api.c):
 * gs_usage_req_parse on arbitrary by, from, to and job values (what libmicrohttpd hands over
 * after URL-decoding), then the answer built from rows with the job value as their holder's
 * job and user (the merge of the current minute, the JSON with prices). A parse that succeeds
 * must give a grouping that exists, 0 <= from < to <= 1e11 and a job of 1..319 bytes; one that
 * fails must leave a message that starts with a parameter's name. The document must be JSON
 * that jansson reads back, with as many rows as groups.
 *
 * Input: the four values separated by '\n'; a value that is exactly "\x01" is absent (NULL).
 * Seeds are in fuzz/corpus/usage_query/. Build and run: make fuzz.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/usage_api.h"
#include "gpuscope/gs_err.h"

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = gs_fuzz_dup_text(data, size);
    const char *v[4] = {NULL, NULL, NULL, NULL};
    struct gs_usage_answer a;
    char msg[512];
    char *s;

    if (!text)
        return 0;
    s = text;
    for (int i = 0; i < 4 && s; i++) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        v[i] = strcmp(s, "\x01") == 0 ? NULL : s;
        s = nl ? nl + 1 : NULL;
    }
    memset(&a, 0, sizeof a);
    msg[0] = '\0';
    if (gs_usage_req_parse(&a.sel, v[0], v[1], v[2], v[3], 1.7e9, msg, sizeof msg) == GS_OK) {
        struct gs_usage_row rows[3];
        struct gs_usage_prices pr = {.gpu_hour_price = 1.5, .kwh_price = 0.2, .currency = v[3]};
        json_t *doc;
        size_t len = 0;
        char *out;

        CHECK((unsigned)a.sel.by <= GS_USAGE_BY_GPU);
        CHECK(a.sel.from >= 0 && a.sel.from < a.sel.to && a.sel.to <= 1e11);
        CHECK(!a.sel.job || (strlen(a.sel.job) >= 1 && strlen(a.sel.job) < GS_USAGE_JOB_LEN));
        memset(rows, 0, sizeof rows);
        for (int i = 0; i < 3; i++) {
            rows[i].t = a.sel.from + i * 60;
            rows[i].res = 60;
            rows[i].gpu = (unsigned)i;
            rows[i].h.uid = (uint32_t)(i == 2 ? GS_USAGE_UID_UNKNOWN : 1000u + (unsigned)i);
            snprintf(rows[i].h.job, sizeof rows[i].h.job, "%s", a.sel.job ? a.sel.job : "");
            snprintf(rows[i].h.user, sizeof rows[i].h.user, "%s", v[3] ? v[3] : "");
            snprintf(rows[i].h.pod, sizeof rows[i].h.pod, "%s", v[0] ? v[0] : "");
            rows[i].a.held_s = 60;
            rows[i].a.busy_s = 30;
            rows[i].a.first_seen = rows[i].t;
            rows[i].a.last_seen = rows[i].t + 59;
        }
        gs_usage_answer_rows(&a, rows, 3);
        out = gs_usage_answer_json(&a, &pr, &len);
        if (out) {
            CHECK(len == strlen(out));
            doc = json_loads(out, 0, NULL);
            CHECK(doc != NULL);
            CHECK(json_is_array(json_object_get(doc, "rows")));
            json_decref(doc);
            free(out);
        }
    } else {
        CHECK(memchr(msg, '\0', sizeof msg) != NULL);
        CHECK(strncmp(msg, "by: ", 4) == 0 || strncmp(msg, "from: ", 6) == 0 ||
              strncmp(msg, "to: ", 4) == 0 || strncmp(msg, "job: ", 5) == 0);
        free(a.g);
    }
    free(text);
    return 0;
}
