/*
 * Snapshot allocation and metric metadata (names and units from the GS_METRICS X-macro).
 */
#include "gpuscope/gs_model.h"

#include <stdlib.h>
#include <string.h>

#include "gpuscope/gs_err.h"

#define GS_METRIC_NAME_(e, n, u) n,
#define GS_METRIC_UNIT_(e, n, u) u,
static const char *const metric_names[GS_M__COUNT] = {GS_METRICS(GS_METRIC_NAME_)};
static const char *const metric_units[GS_M__COUNT] = {GS_METRICS(GS_METRIC_UNIT_)};

const char *gs_metric_name(enum gs_metric m)
{
    return (unsigned)m < GS_M__COUNT ? metric_names[m] : NULL;
}

const char *gs_metric_unit(enum gs_metric m)
{
    return (unsigned)m < GS_M__COUNT ? metric_units[m] : NULL;
}

int gs_metric_by_name(const char *name)
{
    for (int m = 0; m < GS_M__COUNT; m++)
        if (strcmp(metric_names[m], name) == 0)
            return m;
    return -1;
}

int gs_snapshot_new(struct gs_snapshot **out, unsigned n_gpus, unsigned cap_procs,
                    struct gs_err *err)
{
    struct gs_snapshot *s = calloc(1, sizeof *s);

    if (!s)
        return gs_err_set(err, GS_ENOMEM, "snapshot: out of memory");
    s->n_gpus = n_gpus;
    if (n_gpus) {
        s->gpus = calloc(n_gpus, sizeof *s->gpus);
        if (!s->gpus)
            goto nomem;
    }
    if (cap_procs) {
        s->procs = calloc(cap_procs, sizeof *s->procs);
        if (!s->procs)
            goto nomem;
        s->cap_procs = cap_procs;
    }
    *out = s;
    return GS_OK;
nomem:
    gs_snapshot_free(s);
    return gs_err_set(err, GS_ENOMEM, "snapshot: out of memory for %u GPUs", n_gpus);
}

int gs_snapshot_reserve_procs(struct gs_snapshot *s, unsigned n, struct gs_err *err)
{
    struct gs_proc *p;
    unsigned cap;

    if (n <= s->cap_procs)
        return GS_OK;
    cap = s->cap_procs ? s->cap_procs : 16;
    while (cap < n)
        cap *= 2;
    p = realloc(s->procs, (size_t)cap * sizeof *p);
    if (!p) /* s->procs is still valid and unchanged */
        return gs_err_set(err, GS_ENOMEM, "snapshot: out of memory for %u processes", n);
    memset(p + s->cap_procs, 0, (size_t)(cap - s->cap_procs) * sizeof *p);
    s->procs = p;
    s->cap_procs = cap;
    return GS_OK;
}

int gs_snapshot_reserve_usamp(struct gs_snapshot *s, unsigned n, struct gs_err *err)
{
    struct gs_util_sample *p;
    unsigned cap;

    if (n <= s->cap_usamp)
        return GS_OK;
    cap = s->cap_usamp ? s->cap_usamp : 256;
    while (cap < n)
        cap *= 2;
    p = realloc(s->usamp, (size_t)cap * sizeof *p);
    if (!p) /* s->usamp is still valid and unchanged */
        return gs_err_set(err, GS_ENOMEM, "snapshot: out of memory for %u samples", n);
    s->usamp = p;
    s->cap_usamp = cap;
    return GS_OK;
}

const struct gs_util_sample *gs_snapshot_util_samples(const struct gs_snapshot *s, unsigned g,
                                                      unsigned *n)
{
    const struct gs_gpu *gpu;

    *n = 0;
    if (!s || g >= s->n_gpus || !s->usamp)
        return NULL;
    gpu = &s->gpus[g];
    if (gpu->usamp_st != GS_ST_OK || gpu->usamp_n == 0 || gpu->usamp_first > s->n_usamp ||
        gpu->usamp_n > s->n_usamp - gpu->usamp_first)
        return NULL;
    *n = gpu->usamp_n;
    return s->usamp + gpu->usamp_first;
}

void gs_snapshot_clear(struct gs_snapshot *s)
{
    memset(&s->sys, 0, sizeof s->sys);
    if (s->n_gpus)
        memset(s->gpus, 0, (size_t)s->n_gpus * sizeof *s->gpus);
    s->n_procs = 0;
    s->n_usamp = 0;
    s->t_real = 0;
    s->t_mono_ns = 0;
}

void gs_snapshot_free(struct gs_snapshot *s)
{
    if (!s)
        return;
    free(s->gpus);
    free(s->procs);
    free(s->usamp);
    free(s);
}

const char *gs_throttle_name(uint64_t bit)
{
    switch (bit) {
    case GS_THR_GPU_IDLE:
        return "idle";
    case GS_THR_APP_CLOCKS:
        return "app clocks";
    case GS_THR_SW_POWER_CAP:
        return "power cap";
    case GS_THR_HW_SLOWDOWN:
        return "HW slowdown";
    case GS_THR_SYNC_BOOST:
        return "sync boost";
    case GS_THR_SW_THERMAL:
        return "SW thermal";
    case GS_THR_HW_THERMAL:
        return "HW thermal";
    case GS_THR_HW_POWER_BRAKE:
        return "power brake";
    case GS_THR_DISPLAY_CLOCK:
        return "display clock";
    }
    return NULL;
}

const char *gs_mig_profile(const struct gs_mig *m)
{
    const char *p = NULL;

    /* the last " MIG " (a model name could hold the word), then the profile up to a space */
    for (const char *q = strstr(m->name, " MIG "); q; q = strstr(q + 1, " MIG "))
        p = q + 5;
    if (!p && strncmp(m->name, "MIG ", 4) == 0)
        p = m->name + 4;
    return p ? p : "";
}

enum gs_metric gs_mig_gpm_metric(enum gs_mig_gpm k)
{
    static const enum gs_metric m[GS_MIG_GPM__COUNT] = {
        [GS_MIG_GPM_SM_ACTIVE] = GS_M_GPM_SM_ACTIVE,
        [GS_MIG_GPM_SM_OCCUPANCY] = GS_M_GPM_SM_OCCUPANCY,
        [GS_MIG_GPM_TENSOR_ACTIVE] = GS_M_GPM_TENSOR_ACTIVE,
        [GS_MIG_GPM_DRAM_ACTIVE] = GS_M_GPM_DRAM_ACTIVE,
        [GS_MIG_GPM_GR_ACTIVE] = GS_M_GPM_GR_ACTIVE,
    };
    return (unsigned)k < GS_MIG_GPM__COUNT ? m[k] : GS_M_GPM_SM_ACTIVE;
}
