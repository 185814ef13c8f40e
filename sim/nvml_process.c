/*
 * nvml-sim entry points: the running-process lists, the process detail list, per-process
 * utilization, compute and persistence mode.
 *
 * The three process lists come in the three shapes real libraries export: the plain symbols write
 * 16-byte nvmlProcessInfo_v1_t entries, _v2 and _v3 write 24-byte entries as a 535.104+ driver
 * does (the 32-byte form lives in nvmlDeviceGetRunningProcessDetailList). Counting follows NVML:
 * *infoCount = 0 asks for the size (SUCCESS when there is nothing, INSUFFICIENT_SIZE with the
 * count otherwise); a short array is answered the same way and nothing is written.
 */
#include <math.h>
#include <string.h>

#include "core.h"

/* Does process p belong in the list of the call's GPU or MIG device, for the given types? */
static bool proc_matches(const struct gs_sim_call *c, const struct gs_sim_proc *p, unsigned types)
{
    if (p->gpu != c->gpu || !(p->type & types) || !gs_sim_proc_alive(c->sc, p, c->t))
        return false;
    if (c->mig)
        return p->mig_gi == (int)c->mig->gi && p->mig_ci == (int)c->mig->ci;
    /* In MIG mode a full-GPU handle lists everything only to privileged callers. */
    if (gs_sim_mig_on(c->sc, c->gpu, c->t) && !c->sc->privileged)
        return false;
    return true;
}

static void instance_ids(const struct gs_sim_call *c, const struct gs_sim_proc *p, unsigned *gi,
                         unsigned *ci)
{
    if (p->mig_gi >= 0 && gs_sim_mig_on(c->sc, c->gpu, c->t)) {
        *gi = (unsigned)p->mig_gi;
        *ci = (unsigned)p->mig_ci;
    } else {
        *gi = *ci = NVML_MIG_ID_NONE;
    }
}

static nvmlReturn_t list_procs(enum gs_sim_fn fn, nvmlDevice_t device, unsigned types,
                               size_t stride, unsigned int *infoCount, void *infos)
{
    struct gs_sim_call c;
    unsigned n = 0, k = 0;
    nvmlReturn_t rc = gs_sim_enter(fn, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!infoCount)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned i = 0; i < c.sc->n_procs; i++)
        n += proc_matches(&c, &c.sc->procs[i], types);
    if (*infoCount < n) {
        *infoCount = n;
        return gs_sim_leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    *infoCount = n;
    if (n == 0)
        return gs_sim_leave(NVML_SUCCESS);
    if (!infos)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned i = 0; i < c.sc->n_procs; i++) {
        const struct gs_sim_proc *p = &c.sc->procs[i];
        char *slot = (char *)infos + (size_t)k * stride;
        if (!proc_matches(&c, p, types))
            continue;
        if (stride == sizeof(nvmlProcessInfo_v1_t)) {
            nvmlProcessInfo_v1_t e = {0};
            e.pid = p->pid;
            e.usedGpuMemory = gs_sim_proc_mem(p, i, c.t);
            memcpy(slot, &e, sizeof e);
        } else {
            nvmlProcessInfo_v2_t e = {0};
            e.pid = p->pid;
            e.usedGpuMemory = gs_sim_proc_mem(p, i, c.t);
            instance_ids(&c, p, &e.gpuInstanceId, &e.computeInstanceId);
            memcpy(slot, &e, sizeof e);
        }
        k++;
    }
    return gs_sim_leave(NVML_SUCCESS);
}

#define V1 sizeof(nvmlProcessInfo_v1_t)
#define V2 sizeof(nvmlProcessInfo_v2_t)

GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                                unsigned int *infoCount,
                                                                nvmlProcessInfo_v1_t *infos)
{
    return list_procs(GS_SIM_FN_nvmlDeviceGetComputeRunningProcesses, device, GS_SIM_PROC_COMPUTE,
                      V1, infoCount, infos);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                        unsigned int *infoCount,
                                                                        nvmlProcessInfo_v2_t *infos)
{
    return list_procs(GS_SIM_FN_nvmlDeviceGetComputeRunningProcesses_v2, device,
                      GS_SIM_PROC_COMPUTE, V2, infoCount, infos);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                        unsigned int *infoCount,
                                                                        nvmlProcessInfo_v2_t *infos)
{
    return list_procs(GS_SIM_FN_nvmlDeviceGetComputeRunningProcesses_v3, device,
                      GS_SIM_PROC_COMPUTE, V2, infoCount, infos);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device,
                                                                      unsigned int *infoCount,
                                                                      nvmlProcessInfo_v1_t *infos)
{
    return list_procs(GS_SIM_FN_nvmlDeviceGetGraphicsRunningProcesses, device, GS_SIM_PROC_GRAPHICS,
                      V1, infoCount, infos);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(
    nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v2_t *infos)
{
    return list_procs(GS_SIM_FN_nvmlDeviceGetGraphicsRunningProcesses_v2, device,
                      GS_SIM_PROC_GRAPHICS, V2, infoCount, infos);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(
    nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v2_t *infos)
{
    return list_procs(GS_SIM_FN_nvmlDeviceGetGraphicsRunningProcesses_v3, device,
                      GS_SIM_PROC_GRAPHICS, V2, infoCount, infos);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t device,
                                                                        unsigned int *infoCount,
                                                                        nvmlProcessInfo_v1_t *infos)
{
    return list_procs(GS_SIM_FN_nvmlDeviceGetMPSComputeRunningProcesses, device, GS_SIM_PROC_MPS,
                      V1, infoCount, infos);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(
    nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v2_t *infos)
{
    return list_procs(GS_SIM_FN_nvmlDeviceGetMPSComputeRunningProcesses_v2, device, GS_SIM_PROC_MPS,
                      V2, infoCount, infos);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(
    nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v2_t *infos)
{
    return list_procs(GS_SIM_FN_nvmlDeviceGetMPSComputeRunningProcesses_v3, device, GS_SIM_PROC_MPS,
                      V2, infoCount, infos);
}

/* Versioned list of 32-byte entries (535.104+; Hopper and newer per the header). */
GS_SIM_EXPORT_FULL nvmlReturn_t
nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device, nvmlProcessDetailList_t *plist)
{
    static const unsigned mode_types[4] = {
        GS_SIM_PROC_COMPUTE, GS_SIM_PROC_GRAPHICS, GS_SIM_PROC_MPS,
        GS_SIM_PROC_COMPUTE | GS_SIM_PROC_GRAPHICS | GS_SIM_PROC_MPS};
    struct gs_sim_call c;
    unsigned n = 0, k = 0, types;
    nvmlReturn_t rc =
        gs_sim_enter(GS_SIM_FN_nvmlDeviceGetRunningProcessDetailList, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!plist)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (plist->version != nvmlProcessDetailList_v1)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (plist->mode > NVML_PROCESS_MODE_ALL)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (c.g->arch < NVML_DEVICE_ARCH_HOPPER || c.g->arch == NVML_DEVICE_ARCH_UNKNOWN)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    types = mode_types[plist->mode];
    for (unsigned i = 0; i < c.sc->n_procs; i++)
        n += proc_matches(&c, &c.sc->procs[i], types);
    if (n == 0) {
        plist->numProcArrayEntries = 0;
        return gs_sim_leave(NVML_SUCCESS);
    }
    if (!plist->procArray || plist->numProcArrayEntries < n) {
        plist->numProcArrayEntries = n;
        return gs_sim_leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; i < c.sc->n_procs; i++) {
        const struct gs_sim_proc *p = &c.sc->procs[i];
        nvmlProcessDetail_v1_t e = {0};
        if (!proc_matches(&c, p, types))
            continue;
        e.pid = p->pid;
        e.usedGpuMemory = gs_sim_proc_mem(p, i, c.t);
        instance_ids(&c, p, &e.gpuInstanceId, &e.computeInstanceId);
        e.usedGpuCcProtectedMemory = 0;
        plist->procArray[k++] = e;
    }
    plist->numProcArrayEntries = n;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t
nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device, nvmlConfComputeMemSizeInfo_t *memInfo)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetConfComputeMemSizeInfo, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!memInfo)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    /* Confidential computing is off on every simulated system. */
    return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
}

/* ---- per-process utilization -------------------------------------------------------------- */

/* One entry per process with activity in the newest driver sample after lastSeenTimeStamp. The
 * values are the process's patterns averaged from the later of lastSeen and 1 s before the
 * sample, to the sample. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
    unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp)
{
    struct gs_sim_call c;
    double iv, ts_t, from;
    unsigned long long ts;
    unsigned n = 0, k = 0;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetProcessUtilization, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!processSamplesCount)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gs_sim_mig_on(c.sc, c.gpu, c.t))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    iv = c.g->sample_interval_s;
    ts_t = floor(c.t / iv) * iv;
    ts = gs_sim_clock_wall_us(&gs_sim.clock, ts_t);
    if (!(ts_t >= 0) || ts <= lastSeenTimeStamp)
        return gs_sim_leave(NVML_ERROR_NOT_FOUND);
    from = ts_t - 1.0;
    if (lastSeenTimeStamp > 0) {
        double seen_t = ((double)lastSeenTimeStamp - gs_sim.clock.wall0_s * 1e6) / 1e6;
        if (seen_t > from)
            from = seen_t;
    }
    /* Two passes: count, then fill, so a short array is answered without writing. */
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < c.sc->n_procs; i++) {
            const struct gs_sim_proc *p = &c.sc->procs[i];
            unsigned u[4];
            if (!proc_matches(&c, p, ~0u))
                continue;
            for (int w = 0; w < 4; w++)
                u[w] = (unsigned)llround(gs_sim_proc_util(p, i, w, from, ts_t));
            if (!(u[0] | u[1] | u[2] | u[3]))
                continue;
            if (pass == 0) {
                n++;
                continue;
            }
            utilization[k].pid = p->pid;
            utilization[k].timeStamp = ts;
            utilization[k].smUtil = u[0];
            utilization[k].memUtil = u[1];
            utilization[k].encUtil = u[2];
            utilization[k].decUtil = u[3];
            k++;
        }
        if (pass == 1)
            break;
        if (n == 0)
            return gs_sim_leave(NVML_ERROR_NOT_FOUND);
        if (!utilization || *processSamplesCount < n) {
            *processSamplesCount = n;
            return gs_sim_leave(NVML_ERROR_INSUFFICIENT_SIZE);
        }
    }
    *processSamplesCount = k;
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- modes -------------------------------------------------------------------------------- */

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device,
                                                         nvmlComputeMode_t *mode)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetComputeMode, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!mode)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *mode = c.g->compute_mode;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
                                                             nvmlEnableState_t *mode)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetPersistenceMode, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!mode)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *mode = c.g->persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return gs_sim_leave(NVML_SUCCESS);
}
