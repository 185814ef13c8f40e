/*
 * libFuzzer target for the snapshot codec's decoder (src/core/snapjson.c), what `gpuscope` and
 * `gpuscope query` read from the local agent's socket: arbitrary bytes parsed as JSON, then
 * gs_snapjson_decode, with and without the hidden-process entries. A document that decodes
 * must encode again (snapshot and processes documents), and what that encoding decodes to
 * must encode to the same text: decode(encode(s)) keeps everything encode wrote.
 *
 * Input: a JSON text. Seeds are in fuzz/corpus/snapjson/. Build and run: make fuzz.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/snapjson.h"
#include "gpuscope/gs_err.h"

#include "fuzz_util.h"

static char *encode_text(const struct gs_snapshot *s)
{
    json_t *doc = NULL, *procs = NULL;
    char *text;

    CHECK(gs_snapjson_encode(&doc, s, NULL, NULL) == GS_OK);
    CHECK(gs_snapjson_processes(&procs, s, true, NULL) == GS_OK);
    json_decref(procs);
    text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(17));
    CHECK(text != NULL);
    json_decref(doc);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, 0, NULL), *again;
    struct gs_snapshot *s = NULL, *s2 = NULL;
    char *t1, *t2;

    if (!doc)
        return 0;
    if (gs_snapjson_decode(doc, true, &s, NULL) == GS_OK)
        gs_snapshot_free(s);
    s = NULL;
    if (gs_snapjson_decode(doc, false, &s, NULL) != GS_OK) {
        CHECK(s == NULL);
        json_decref(doc);
        return 0;
    }
    json_decref(doc);
    t1 = encode_text(s);
    again = json_loads(t1, 0, NULL);
    CHECK(again != NULL);
    CHECK(gs_snapjson_decode(again, false, &s2, NULL) == GS_OK);
    json_decref(again);
    CHECK(s2->n_gpus == s->n_gpus && s2->n_procs == s->n_procs);
    t2 = encode_text(s2);
    CHECK(strcmp(t1, t2) == 0);
    free(t1);
    free(t2);
    gs_snapshot_free(s);
    gs_snapshot_free(s2);
    return 0;
}
