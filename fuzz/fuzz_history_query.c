/*
 * libFuzzer target for /api/v1/history's query parameters (src/agent/history_api.c):
 * gs_history_req_parse on arbitrary gpu, metric, from, to and step values (what
 * libmicrohttpd hands over after URL-decoding), then the JSON built from a few points and the
 * escaped error document. A parse that succeeds must give what gs_store_query accepts (gpu
 * <= 255, a kept metric, 0 <= from < to <= 1e11, 0 <= step, at most GS_HISTORY_MAX_POINTS
 * buckets); one that fails must leave a message starting with a parameter's name, and its
 * JSON error must carry no raw control character or unescaped quote.
 *
 * Input: the five values separated by '\n'; a value that is exactly "\x01" is absent (NULL).
 * Seeds are in fuzz/corpus/history_query/. Build and run: make fuzz.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/history_api.h"
#include "gpuscope/gs_err.h"

#include "fuzz_util.h"

static void check_error_json(const char *msg)
{
    size_t len = 0;
    char *j = gs_history_error_json(msg, &len);

    if (!j)
        return;
    CHECK(len == strlen(j));
    CHECK(strncmp(j, "{\"error\":\"", 10) == 0 && len >= 13);
    CHECK(strcmp(j + len - 3, "\"}\n") == 0);
    for (size_t i = 10; i < len - 3; i++) {
        CHECK((unsigned char)j[i] >= 0x20);
        if (j[i] == '\\')
            i++; /* the escaped character */
        else
            CHECK(j[i] != '"');
    }
    free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* libmicrohttpd's values are C strings: the part before a NUL */
    char *text = gs_fuzz_dup_text(data, size);
    const char *v[5] = {NULL, NULL, NULL, NULL, NULL};
    struct gs_history_req q;
    char msg[2048];
    char *s;

    if (!text)
        return 0;
    s = text;
    for (int i = 0; i < 5 && s; i++) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        v[i] = strcmp(s, "\x01") == 0 ? NULL : s;
        s = nl ? nl + 1 : NULL;
    }
    msg[0] = '\0';
    if (gs_history_req_parse(&q, v[0], v[1], v[2], v[3], v[4], 1.7e9, msg, sizeof msg) == GS_OK) {
        struct gs_history_doc d;
        struct gs_store_point p = {.t = q.from, .min = 1, .avg = 2, .max = 3, .n = 2};
        CHECK(q.gpu <= GS_STORE_MAX_GPU);
        CHECK(gs_store_keeps(q.metric));
        CHECK(q.from >= 0 && q.from < q.to && q.to <= 1e11);
        CHECK(q.step >= 0 && q.step <= 1e10);
        CHECK(q.step == 0 || (q.to - q.from) / q.step <= GS_HISTORY_MAX_POINTS);
        gs_history_doc_begin(&d);
        gs_history_doc_point(&d, &p);
        gs_history_doc_end(&d, &q, q.step >= 60 ? GS_STORE_ROLLUP : GS_STORE_RAW);
        CHECK(!d.text.data ||
              (d.text.len == strlen(d.text.data) && d.text.data[d.text.len - 1] == '\n'));
        gs_buf_free(&d.text);
    } else {
        CHECK(memchr(msg, '\0', sizeof msg) != NULL);
        CHECK(strncmp(msg, "gpu: ", 5) == 0 || strncmp(msg, "metric: ", 8) == 0 ||
              strncmp(msg, "from: ", 6) == 0 || strncmp(msg, "to: ", 4) == 0 ||
              strncmp(msg, "step: ", 6) == 0);
        check_error_json(msg);
    }
    free(text);
    return 0;
}
