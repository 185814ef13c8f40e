/*
 * `gpuscope --json`: the snapshot document of core/snapjson.c (docs/gpuscope.md, JSON SCHEMA)
 * with the command line's choices, the GPUs --id selects and --no-processes.
 */
#include "cli/quick/quick.h"

#include "core/snapjson.h"

static bool selected(const void *ctx, const struct gs_gpu *g)
{
    return gs_quick_selected(ctx, g) != 0;
}

int gs_quick_json(json_t **out, const struct gs_snapshot *s, const struct gs_quick_opts *o,
                  struct gs_err *err)
{
    struct gs_snapjson_opts so = {.no_procs = o->no_procs != 0, .gpu_selected = selected, .ctx = o};

    return gs_snapjson_encode(out, s, &so, err);
}
