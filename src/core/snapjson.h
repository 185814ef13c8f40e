/*
 * The snapshot codec: a struct gs_snapshot to the public snapshot document (the JSON of
 * `gpuscope --json`, /api/v1/snapshot and, flattened, /api/v1/processes; the shape is
 * documented in docs/gpuscope.md, JSON SCHEMA) and the document back into a snapshot (what the
 * front ends read from the local agent, cli/agent_client.c). Both directions live in
 * snapjson.c, one table of keys between them; tests/unit/test_policy.c checks the round trip
 * and fuzz/fuzz_snapjson.c the decoder.
 *
 * Every metric of the GS_METRICS table goes under its model name in base units (bytes, watts,
 * celsius, hertz, ratios 0..1); an absent reading is null, never 0; a reading that failed for
 * another reason than "not supported" is also named in the GPU's "unavailable" object. A GPU
 * whose process list a visibility filter cut (src/agent/policy.c: hidden_st) carries the
 * summary of what it withheld as "hidden_processes".
 */
#ifndef GS_CORE_SNAPJSON_H
#define GS_CORE_SNAPJSON_H

#include <jansson.h>
#include <stdbool.h>

#include "gpuscope/gs_model.h"

struct gs_err;

/* What an encoding leaves out. Zeroed: nothing. */
struct gs_snapjson_opts {
    bool no_procs; /* no "processes" (nor "hidden_processes") per GPU */
    /* Which GPUs the document lists (`gpuscope --id`); NULL: all. */
    bool (*gpu_selected)(const void *ctx, const struct gs_gpu *g);
    const void *ctx;
};

/* The snapshot document of s (o may be NULL). On success *out is a new reference the caller
 * json_decref()s; GS_ENOMEM otherwise. */
int gs_snapjson_encode(json_t **out, const struct gs_snapshot *s, const struct gs_snapjson_opts *o,
                       struct gs_err *err);

/* The /api/v1/processes document of s (docs/api.md): host and time as in the snapshot
 * document, then every process of every GPU in one list, each entry led by its GPU's "gpu"
 * index and "gpu_uuid"; with hidden_list also "hidden_processes", one entry per GPU that
 * withheld processes (gpu, gpu_uuid, count, gpu_memory). GS_ENOMEM. */
int gs_snapjson_processes(json_t **out, const struct gs_snapshot *s, bool hidden_list,
                          struct gs_err *err);

/* A snapshot from a snapshot document. Every reading of the GS_METRICS table comes back with
 * its status (null: absent, or the reason named in "unavailable"); text fields, MIG devices,
 * ECC counters by location, processes, and each GPU's "hidden_processes" into its hidden_*
 * fields. hidden_as_procs: each such summary with a count also becomes one process entry with
 * pid 0, name "N hidden" and their memory, so the text view shows it. GS_EPARSE for a
 * document without a "gpus" array; GS_ENOMEM. */
int gs_snapjson_decode(const json_t *doc, bool hidden_as_procs, struct gs_snapshot **out,
                       struct gs_err *err);

#endif
