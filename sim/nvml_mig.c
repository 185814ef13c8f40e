/*
 * nvml-sim entry points: MIG devices and GPM (GPU Performance Monitoring).
 *
 * MIG devices exist while the GPU's MIG mode is on (from the scenario's "mig" section and its
 * mig_enable / mig_disable events); their handles are a second static table, so
 * nvmlDeviceIsMigDeviceHandle and every other call tell them apart by address. GPM samples record
 * the device and the virtual time; nvmlGpmMetricsGet reports each metric as the exact mean of its
 * pattern between the two samples' times. Both GPM version fields take a plain 1, and GPM exists
 * only on Hopper and newer (or where the scenario says "gpm": true).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* ---- MIG ---------------------------------------------------------------------------------- */

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                                     unsigned int *pendingMode)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMigMode, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!currentMode || !pendingMode)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->mig_capable)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *currentMode =
        gs_sim_mig_on(c.sc, c.gpu, c.t) ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    *pendingMode = *currentMode;
    return gs_sim_leave(NVML_SUCCESS);
}

static unsigned mig_count(const struct gs_sim_call *c)
{
    return c->g->mig_capable && gs_sim_mig_on(c->sc, c->gpu, c->t) ? c->g->mig_max : 0;
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device,
                                                               unsigned int *count)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMaxMigDeviceCount, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *count = mig_count(&c);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                                    unsigned int index,
                                                                    nvmlDevice_t *migDevice)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMigDeviceHandleByIndex, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!migDevice)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->mig_capable)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    if (index >= mig_count(&c))
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->mig[index].present)
        return gs_sim_leave(NVML_ERROR_NOT_FOUND); /* an empty slot: skip it */
    *migDevice = gs_sim_mig_handle(c.gpu, index);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                             nvmlDevice_t *device)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetDeviceHandleFromMigDeviceHandle,
                                   migDevice, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!device || !c.mig)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *device = gs_sim_gpu_handle(c.gpu);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device,
                                                            unsigned int *isMigDevice)
{
    struct gs_sim_call c;
    nvmlReturn_t rc =
        gs_sim_enter(GS_SIM_FN_nvmlDeviceIsMigDeviceHandle, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!isMigDevice)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *isMigDevice = c.mig != NULL;
    return gs_sim_leave(NVML_SUCCESS);
}

static nvmlReturn_t instance_id(enum gs_sim_fn fn, bool compute, nvmlDevice_t device,
                                unsigned int *id)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(fn, device, GS_SIM_MIG_ONLY, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!id)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *id = compute ? c.mig->ci : c.mig->gi;
    return gs_sim_leave(NVML_SUCCESS);
}

/* A MIG device's SM and shared engine counts, from its scenario instance; full GPUs (and
 * instances without "sm_count") answer NOT_SUPPORTED. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                                           nvmlDeviceAttributes_t *attributes)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetAttributes_v2, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!attributes)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.mig || c.mig->sm_count == 0)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    memset(attributes, 0, sizeof *attributes);
    attributes->multiprocessorCount = c.mig->sm_count;
    attributes->sharedCopyEngineCount = c.mig->ce_count;
    attributes->sharedDecoderCount = c.mig->dec_count;
    attributes->sharedEncoderCount = c.mig->enc_count;
    attributes->sharedJpegCount = c.mig->jpg_count;
    attributes->sharedOfaCount = c.mig->ofa_count;
    attributes->memorySizeMB = c.mig->mem_total_bytes >> 20;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    return instance_id(GS_SIM_FN_nvmlDeviceGetGpuInstanceId, false, device, id);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device,
                                                               unsigned int *id)
{
    return instance_id(GS_SIM_FN_nvmlDeviceGetComputeInstanceId, true, device, id);
}

/* GPU instance handles: one byte per (GPU, MIG slot), the address is the handle; nothing is
 * read through it, so a handle the sim did not hand out resolves to nothing. */
static unsigned char gi_handles[GS_SIM_MAX_GPUS][GS_SIM_MAX_MIG];

static bool gi_resolve(nvmlGpuInstance_t h, unsigned *gpu, unsigned *slot)
{
    uintptr_t a = (uintptr_t)(void *)h, a0 = (uintptr_t)(void *)gi_handles;

    if (a < a0 || a >= a0 + sizeof gi_handles)
        return false;
    *gpu = (unsigned)((a - a0) / GS_SIM_MAX_MIG);
    *slot = (unsigned)((a - a0) % GS_SIM_MAX_MIG);
    return true;
}

/* As NVML: MIG mode on, a privileged caller, the instance by its id. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                             nvmlGpuInstance_t *gpuInstance)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetGpuInstanceById, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!gpuInstance)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->mig_capable || !gs_sim_mig_on(c.sc, c.gpu, c.t))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    if (!c.sc->privileged)
        return gs_sim_leave(NVML_ERROR_NO_PERMISSION);
    for (unsigned s = 0; s < GS_SIM_MAX_MIG; s++)
        if (c.g->mig[s].present && c.g->mig[s].gi == id) {
            *gpuInstance = (nvmlGpuInstance_t)(void *)&gi_handles[c.gpu][s];
            return gs_sim_leave(NVML_SUCCESS);
        }
    return gs_sim_leave(NVML_ERROR_NOT_FOUND);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance,
                                                       nvmlGpuInstanceInfo_t *info)
{
    struct gs_sim_call c;
    const struct gs_sim_mig *m;
    unsigned gpu, slot;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlGpuInstanceGetInfo, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!info || !gi_resolve(gpuInstance, &gpu, &slot) || gpu >= c.sc->n_gpus)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gs_sim_lost(c.sc, gpu, c.t))
        return gs_sim_leave(NVML_ERROR_GPU_IS_LOST);
    m = &c.sc->gpus[gpu].mig[slot];
    if (!m->present || !gs_sim_mig_on(c.sc, gpu, c.t)) /* the instance went with MIG mode */
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!m->has_placement)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    memset(info, 0, sizeof *info);
    info->device = gs_sim_gpu_handle(gpu);
    info->id = m->gi;
    info->profileId = m->profile_id;
    info->placement.start = m->place_start;
    info->placement.size = m->place_size;
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- GPM ---------------------------------------------------------------------------------- */

struct gpm_metric {
    unsigned id_first, id_last; /* a range for per-engine metrics (NVDEC 0-7, ...) */
    enum gs_sim_metric m;
    double scale; /* pcie KB/s -> MiB/s */
    const char *short_name, *long_name, *unit;
};

static const struct gpm_metric gpm_metrics[] = {
    {1, 1, GS_SIM_M_GPM_GRAPHICS, 1, "gr_util", "Graphics or compute engine active", "%"},
    {2, 2, GS_SIM_M_GPM_SM, 1, "sm_util", "SMs with at least one warp", "%"},
    {3, 3, GS_SIM_M_GPM_OCCUPANCY, 1, "sm_occupancy", "Active warps vs. the maximum", "%"},
    {4, 4, GS_SIM_M_GPM_INTEGER, 1, "int_util", "Integer pipe active", "%"},
    {5, 5, GS_SIM_M_GPM_TENSOR, 1, "tensor_util", "Any tensor pipe active", "%"},
    {6, 6, GS_SIM_M_GPM_DFMA, 1, "dfma_tensor_util", "DFMA tensor pipe active", "%"},
    {7, 7, GS_SIM_M_GPM_HMMA, 1, "hmma_tensor_util", "HMMA tensor pipe active", "%"},
    {8, 8, GS_SIM_M_GPM_DMMA, 1, "dmma_tensor_util", "DMMA tensor pipe active", "%"},
    {9, 9, GS_SIM_M_GPM_IMMA, 1, "imma_tensor_util", "IMMA tensor pipe active", "%"},
    {10, 10, GS_SIM_M_GPM_DRAM, 1, "dram_bw_util", "DRAM bandwidth of peak", "%"},
    {11, 11, GS_SIM_M_GPM_FP64, 1, "fp64_util", "FP64 pipe active", "%"},
    {12, 12, GS_SIM_M_GPM_FP32, 1, "fp32_util", "FP32 pipe active", "%"},
    {13, 13, GS_SIM_M_GPM_FP16, 1, "fp16_util", "FP16 pipe active", "%"},
    {20, 20, GS_SIM_M_PCIE_TX, 1.0 / 1024, "pcie_tx", "PCIe bytes sent", "MiB/sec"},
    {21, 21, GS_SIM_M_PCIE_RX, 1.0 / 1024, "pcie_rx", "PCIe bytes received", "MiB/sec"},
    {30, 37, GS_SIM_M_GPM_NVDEC, 1, "nvdec_util", "NVDEC engine active", "%"},
    {40, 47, GS_SIM_M_GPM_NVJPG, 1, "nvjpg_util", "NVJPG engine active", "%"},
    {50, 51, GS_SIM_M_GPM_NVOFA, 1, "nvofa_util", "NVOFA engine active", "%"},
};

static const struct gpm_metric *gpm_metric_by_id(unsigned id)
{
    for (size_t i = 0; i < sizeof gpm_metrics / sizeof gpm_metrics[0]; i++)
        if (id >= gpm_metrics[i].id_first && id <= gpm_metrics[i].id_last)
            return &gpm_metrics[i];
    return NULL;
}

static int sample_index(nvmlGpmSample_t s)
{
    for (unsigned i = 0; i < gs_sim.n_samples; i++)
        if ((void *)gs_sim.samples[i] == (void *)s)
            return (int)i;
    return -1;
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device,
                                                          nvmlGpmSupport_t *gpmSupport)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlGpmQueryDeviceSupport, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!gpmSupport)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    gpmSupport->isSupportedDevice = c.g->gpm;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample)
{
    struct gs_sim_call c;
    struct gs_sim_gpm_sample *s;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlGpmSampleAlloc, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!gpmSample)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gs_sim.n_samples >= GS_SIM_MAX_SAMPLES)
        return gs_sim_leave(NVML_ERROR_MEMORY);
    s = calloc(1, sizeof *s);
    if (!s)
        return gs_sim_leave(NVML_ERROR_MEMORY);
    gs_sim.samples[gs_sim.n_samples++] = s;
    *gpmSample = (nvmlGpmSample_t)(void *)s;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample)
{
    struct gs_sim_call c;
    int i;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlGpmSampleFree, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    i = sample_index(gpmSample);
    if (i < 0)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    free(gs_sim.samples[i]);
    gs_sim.samples[i] = gs_sim.samples[--gs_sim.n_samples];
    return gs_sim_leave(NVML_SUCCESS);
}

static nvmlReturn_t take_sample(const struct gs_sim_call *c, int slot, nvmlGpmSample_t gpmSample)
{
    int i = sample_index(gpmSample);

    if (i < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!c->g->gpm)
        return NVML_ERROR_NOT_SUPPORTED;
    gs_sim.samples[i]->filled = true;
    gs_sim.samples[i]->gpu = c->gpu;
    gs_sim.samples[i]->slot = slot;
    gs_sim.samples[i]->t = c->t;
    return NVML_SUCCESS;
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlGpmSampleGet, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    return gs_sim_leave(take_sample(&c, c.slot, gpmSample));
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                                    nvmlGpmSample_t gpmSample)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlGpmMigSampleGet, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!c.g->gpm)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    if (gs_sim_mig_on(c.sc, c.gpu, c.t)) {
        for (unsigned s = 0; s < GS_SIM_MAX_MIG; s++)
            if (c.g->mig[s].present && c.g->mig[s].gi == gpuInstanceId)
                return gs_sim_leave(take_sample(&c, (int)s, gpmSample));
    }
    return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
}

static bool gpm_forced_off(const struct gs_sim_gpu *g, unsigned id)
{
    for (unsigned i = 0; i < g->n_unsupported_gpm; i++)
        if (g->unsupported_gpm[i] == id)
            return true;
    return false;
}

static nvmlReturn_t metrics_get(const struct gs_sim_gpm_sample *s1,
                                const struct gs_sim_gpm_sample *s2, nvmlGpmMetricsGet_t *mg)
{
    const struct gs_sim_scenario *sc = gs_sim.sc;
    struct gs_sim_call c = {0};
    double t0, t1;

    if (!s1->filled || !s2->filled || s1->gpu != s2->gpu || s1->slot != s2->slot ||
        s1->gpu >= sc->n_gpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    c.sc = sc;
    c.gpu = s1->gpu;
    c.g = &sc->gpus[s1->gpu];
    c.slot = s1->slot;
    c.t = gs_sim_clock_now(&gs_sim.clock);
    if (gs_sim_lost(sc, c.gpu, c.t))
        return NVML_ERROR_GPU_IS_LOST;
    if (!c.g->gpm)
        return NVML_ERROR_NOT_SUPPORTED;
    for (unsigned k = 0; k < c.g->n_override; k++)
        if (c.g->override[k].fn == GS_SIM_FN_nvmlGpmMetricsGet)
            return c.g->override[k].rc;
    if (c.slot >= 0) {
        if (!c.g->mig[c.slot].present)
            return NVML_ERROR_INVALID_ARGUMENT;
        c.mig = &c.g->mig[c.slot];
    }
    t0 = fmin(s1->t, s2->t);
    t1 = fmax(s1->t, s2->t);
    for (unsigned i = 0; i < mg->numMetrics; i++) {
        nvmlGpmMetric_t *m = &mg->metrics[i];
        const struct gpm_metric *gm = gpm_metric_by_id(m->metricId);
        m->value = 0;
        m->metricInfo.shortName = m->metricInfo.longName = m->metricInfo.unit = NULL;
        if (!gm || gpm_forced_off(c.g, m->metricId)) {
            m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        m->value = gs_sim_metric_avg(&c, gm->m, t0, t1) * gm->scale;
        m->metricInfo.shortName = (char *)gm->short_name;
        m->metricInfo.longName = (char *)gm->long_name;
        m->metricInfo.unit = (char *)gm->unit;
        m->nvmlReturn = NVML_SUCCESS;
    }
    return NVML_SUCCESS;
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet)
{
    struct gs_sim_call c;
    int i1, i2;
    nvmlReturn_t rc;

    rc = gs_sim_enter_system(GS_SIM_FN_nvmlGpmMetricsGet, &c);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!metricsGet)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (metricsGet->numMetrics > GS_NVML_GPM_METRIC_MAX)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    i1 = sample_index(metricsGet->sample1);
    i2 = sample_index(metricsGet->sample2);
    if (i1 < 0 || i2 < 0)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    return gs_sim_leave(metrics_get(gs_sim.samples[i1], gs_sim.samples[i2], metricsGet));
}
