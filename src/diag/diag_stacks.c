/*
 * Diagnosis rules over a report's "stacks" section (gpuscope run --stacks,
 * src/run/runstacks.c): what the ranks' main threads were doing, in particular while the
 * GPUs were idle. Like the rest of src/diag, a pure function of the report.
 *
 *   stacks_data_loading  the DataLoader (torch/utils/data, *_next_data) holds >= 30 % of the
 *                        main thread's samples while a GPU was idle (or in the data phase)
 *   host_sync            >= 10 % of the samples (idle-time samples when known) sit on a
 *                        line that syncs with the GPU (.item(), .cpu(), .numpy(), .tolist(),
 *                        torch.cuda.synchronize)
 *   checkpoint_saving    >= 10 % of all samples inside torch.save / save_pretrained /
 *                        safetensors
 *   logging              >= 10 % of all samples in logging, wandb, tensorboard, mlflow or a
 *                        print() line
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "diag/diag.h"

static double group(const json_t *o, const char *key)
{
    const json_t *g = json_object_get(json_object_get(o, "groups"), key);
    return json_is_number(g) ? json_number_value(g) : 0;
}

/* The idle-GPU entry with the most samples, or NULL. */
static const json_t *busiest_idle(const json_t *st)
{
    const json_t *best = NULL, *g;
    size_t i;

    json_array_foreach(json_object_get(st, "gpu_idle"), i, g)
    {
        json_int_t n = json_integer_value(json_object_get(g, "samples"));
        if (n >= 20 && (!best || n > json_integer_value(json_object_get(best, "samples"))))
            best = g;
    }
    return best;
}

/* "f 78 %, g 12 %" of the first two of a top list. */
static void top_text(const json_t *top, char *out, size_t cap)
{
    const json_t *e;
    size_t i, n = 0;

    out[0] = '\0';
    json_array_foreach(top, i, e)
    {
        if (i >= 2)
            break;
        n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s %.0f %%", i ? ", " : "",
                              json_string_value(json_object_get(e, "function")),
                              100 * json_number_value(json_object_get(e, "own")));
        if (n >= cap)
            break;
    }
}

static int is_sync_line(const char *src, const char *fn, const char *file)
{
    static const char *const pats[] = {".item()",      ".cpu()",       ".numpy()",  ".tolist()",
                                       "synchronize(", ".to(\"cpu\")", ".to('cpu')"};
    if (strcmp(fn, "synchronize") == 0 && strstr(file, "torch/cuda/"))
        return 1;
    for (size_t i = 0; src && i < sizeof pats / sizeof pats[0]; i++)
        if (strstr(src, pats[i]))
            return 1;
    return 0;
}

/* Whether the run used a CUDA device, as the report's rules decide it (src/diag/diag.c):
 * CUDA-event step timing or a CUDA device in the facts; the GPUs NVML listed its processes on
 * only when no torch side reported. */
static int run_is_cuda(const json_t *rep)
{
    const json_t *fx = json_object_get(rep, "facts");
    const char *src = json_string_value(json_object_get(rep, "step_busy_estimate_source"));

    return (src && strcmp(src, "cuda_events") == 0) ||
           json_is_string(json_object_get(fx, "cuda_device_name")) ||
           (!json_is_string(json_object_get(fx, "torch_version")) &&
            json_array_size(json_object_get(rep, "gpus")) > 0);
}

static int has_finding(const json_t *findings, const char *id)
{
    size_t i;
    const json_t *f;

    json_array_foreach(findings, i, f)
    {
        const char *x = json_string_value(json_object_get(f, "id"));
        if (x && strcmp(x, id) == 0)
            return 1;
    }
    return 0;
}

static json_t *rule_data(const json_t *st, const json_t *rep, const json_t *findings)
{
    const json_t *w = json_object_get(json_object_get(rep, "facts"), "loader_num_workers");
    const json_t *g = busiest_idle(st), *src = g;
    const json_t *data = json_object_get(json_object_get(st, "by_phase"), "data");
    char top[300];
    double share;
    json_t *f;

    if (!src)
        src = data;
    if (!src || json_integer_value(json_object_get(src, "samples")) < 20)
        return NULL;
    share = group(src, "data_loading");
    if (share < 0.30)
        return NULL;
    top_text(json_object_get(src, "top"), top, sizeof top);
    if (g)
        f = gs_diag_finding("stacks_data_loading", "warning",
                            "Stacks confirm data loading: while GPU %lld was idle (%.0f %% of the "
                            "run) the main thread was in the DataLoader %.0f %% of the time (%s)",
                            json_integer_value(json_object_get(g, "gpu")),
                            100 * json_number_value(json_object_get(g, "idle_fraction")),
                            100 * share, top);
    else
        f = gs_diag_finding("stacks_data_loading", "warning",
                            "Stacks confirm data loading: in the data phase the main thread was in "
                            "the DataLoader %.0f %% of the time (%s)",
                            100 * share, top);
    gs_diag_evidence(f, "share", json_real(share));
    gs_diag_evidence(f, "top", json_deep_copy(json_object_get(src, "top")));
    /* the run's own settings, so that nothing here contradicts them: its num_workers,
     * prefetch_factor only with worker processes, pin_memory only where there is a CUDA
     * device to copy to; none when the data_loading finding already advises on them */
    if (!has_finding(findings, "data_loading")) {
        const char *pin = run_is_cuda(rep) ? ", pin_memory=True" : "";
        if (json_is_integer(w) && json_integer_value(w) == 0)
            gs_diag_advise(f,
                           "Load batches in worker processes: DataLoader(num_workers=N > 0, "
                           "persistent_workers=True%s)",
                           pin);
        else if (json_is_integer(w))
            gs_diag_advise(f,
                           "Raise the DataLoader's num_workers above its %lld and set "
                           "persistent_workers=True%s and a prefetch_factor of 2-4",
                           (long long)json_integer_value(w), pin);
        else
            gs_diag_advise(f,
                           "Raise the DataLoader's num_workers and set persistent_workers=True%s "
                           "and a prefetch_factor of 2-4",
                           pin);
    }
    gs_diag_advise(f,
                   "Move per-sample decoding and augmentation off the training process (workers, "
                   "GPU transforms, pre-processed shards)");
    return f;
}

static json_t *rule_sync(const json_t *st)
{
    const json_t *g = busiest_idle(st);
    const json_t *lines = json_object_get(g ? g : st, "lines"), *e, *first = NULL;
    double share = 0;
    size_t i;
    json_t *f, *where;

    if (json_integer_value(json_object_get(g ? g : st, "samples")) < 20)
        return NULL;
    where = json_array();
    json_array_foreach(lines, i, e)
    {
        const char *src = json_string_value(json_object_get(e, "source"));
        const char *fn = json_string_value(json_object_get(e, "function"));
        const char *file = json_string_value(json_object_get(e, "file"));
        if (fn && file && is_sync_line(src, fn, file)) {
            share += json_number_value(json_object_get(e, "share"));
            json_array_append_new(where, json_deep_copy(e));
            if (!first)
                first = e;
        }
    }
    if (share < 0.10 || !first) {
        json_decref(where);
        return NULL;
    }
    f = gs_diag_finding("host_sync", "warning",
                        "Host syncs: %.0f %% of the main thread's samples%s wait at `%s` (%s:%lld)",
                        100 * share, g ? " while the GPU was idle" : "",
                        json_string_value(json_object_get(first, "source"))
                            ? json_string_value(json_object_get(first, "source"))
                            : json_string_value(json_object_get(first, "function")),
                        json_string_value(json_object_get(first, "file")),
                        json_integer_value(json_object_get(first, "line")));
    gs_diag_evidence(f, "share", json_real(share));
    gs_diag_evidence(f, "lines", where);
    gs_diag_advise(f, "Keep metrics on the GPU and call .item()/.cpu() every N steps (e.g. at "
                      "logging_steps), not every step");
    gs_diag_advise(f,
                   "Drop explicit torch.cuda.synchronize() from the training loop; time with CUDA "
                   "events instead");
    return f;
}

static json_t *rule_share(const json_t *st, const char *key, const char *id, const char *what,
                          const char *adv1, const char *adv2)
{
    double share = group(st, key);
    json_t *f;

    if (json_integer_value(json_object_get(st, "samples")) < 20 || share < 0.10)
        return NULL;
    f = gs_diag_finding(id, share >= 0.25 ? "warning" : "info",
                        "%s: %.0f %% of the main thread's samples", what, 100 * share);
    gs_diag_evidence(f, "share", json_real(share));
    gs_diag_advise(f, "%s", adv1);
    gs_diag_advise(f, "%s", adv2);
    return f;
}

static double print_share(const json_t *st)
{
    const json_t *e;
    double s = 0;
    size_t i;

    json_array_foreach(json_object_get(st, "lines"), i, e)
    {
        const char *src = json_string_value(json_object_get(e, "source"));
        if (src && strncmp(src, "print(", 6) == 0)
            s += json_number_value(json_object_get(e, "share"));
    }
    return s;
}

void gs_diag_stacks_findings(const json_t *report, json_t *findings)
{
    const json_t *st = json_object_get(report, "stacks");
    json_t *f;

    if (!json_is_object(st) || !json_is_array(findings))
        return;
    if ((f = rule_data(st, report, findings)))
        json_array_append_new(findings, f);
    if ((f = rule_sync(st)))
        json_array_append_new(findings, f);
    if ((f = rule_share(st, "checkpoint", "checkpoint_saving", "Checkpoint saving",
                        "Save checkpoints less often (save_steps) and from rank 0 only",
                        "Use asynchronous checkpointing (torch.distributed.checkpoint."
                        "async_save) or save to local disk and copy in the background")))
        json_array_append_new(findings, f);
    if (group(st, "logging") + print_share(st) >= 0.10 &&
        json_integer_value(json_object_get(st, "samples")) >= 20) {
        double share = group(st, "logging") + print_share(st);
        f = gs_diag_finding("logging", share >= 0.25 ? "warning" : "info",
                            "Logging: %.0f %% of the main thread's samples", 100 * share);
        gs_diag_evidence(f, "share", json_real(share));
        gs_diag_advise(
            f, "%s",
            "Log every N steps (logging_steps), not every step; aggregate on the GPU first");
        gs_diag_advise(f,
                       "Send metrics from a background thread (wandb/tensorboard do; print() and "
                       "logging handlers to slow files do not)");
        json_array_append_new(findings, f);
    }
}
