/*
 * nvml-sim entry points: device identity, memory, utilization and the driver's sample buffer.
 *
 * Utilization is "percent of time busy over the last sample period", so the sim reports the
 * pattern's exact mean over the GPU's utilization window (1 s unless the scenario says otherwise)
 * rather than its value at one instant; a square wave of a training step then reads like a real
 * board. nvmlDeviceGetSamples derives a ring of samples at the GPU's sample interval (1/6 s by
 * default, 100 entries) from the same patterns, each the mean over its interval.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

#define GS_SIM_SAMPLE_DEPTH 100u

/* ---- identity ----------------------------------------------------------------------------- */

GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetName, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    return gs_sim_leave(gs_sim_copy_str(name, length, c.mig ? c.mig->name : c.g->name));
}

GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetUUID, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    return gs_sim_leave(gs_sim_copy_str(uuid, length, c.mig ? c.mig->uuid : c.g->uuid));
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial,
                                                    unsigned int length)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetSerial, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!serial)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_serial)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    return gs_sim_leave(gs_sim_copy_str(serial, length, c.g->serial));
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetIndex, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!index)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *index = c.mig ? (unsigned)c.slot : c.gpu;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device,
                                                         unsigned int *minorNumber)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMinorNumber, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!minorNumber)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *minorNumber = c.g->minor;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device,
                                                          nvmlDeviceArchitecture_t *arch)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetArchitecture, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!arch)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *arch = c.g->arch;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetBrand, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!type)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *type = c.g->brand;
    return gs_sim_leave(NVML_SUCCESS);
}

static void fill_pci(const struct gs_sim_gpu *g, nvmlPciInfo_t *pci)
{
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", g->pci_domain & 0xFFFF,
             g->pci_bus, g->pci_device);
    pci->domain = g->pci_domain;
    pci->bus = g->pci_bus;
    pci->device = g->pci_device;
    pci->pciDeviceId = g->pci_device_id;
    pci->pciSubSystemId = g->pci_subsys_id;
    snprintf(pci->busId, sizeof pci->busId, "%s", g->bus_id);
}

static nvmlReturn_t pci_info(enum gs_sim_fn fn, nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(fn, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!pci)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    fill_pci(c.g, pci);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return pci_info(GS_SIM_FN_nvmlDeviceGetPciInfo_v3, device, pci);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return pci_info(GS_SIM_FN_nvmlDeviceGetPciInfo_v2, device, pci);
}

#ifdef NVML_SIM_MINIMAL
/* A 390-era library: the plain symbol writes the 52-byte pre-415 layout, whose busId[16] holds
 * the short "%04X:%02X:%02X.0" form and whose bytes 36..51 are reserved zeros. */
GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, void *pci)
{
    struct gs_nvml_pci_info_legacy old;
    nvmlPciInfo_t cur;
    nvmlReturn_t rc = pci_info(GS_SIM_FN_nvmlDeviceGetPciInfo, device, pci ? &cur : NULL);

    if (rc != NVML_SUCCESS)
        return rc;
    memset(&old, 0, sizeof old);
    memcpy(old.busId, cur.busIdLegacy, sizeof old.busId);
    old.domain = cur.domain;
    old.bus = cur.bus;
    old.device = cur.device;
    old.pciDeviceId = cur.pciDeviceId;
    old.pciSubSystemId = cur.pciSubSystemId;
    memcpy(pci, &old, sizeof old);
    return NVML_SUCCESS;
}
#else
/* Current libraries keep the old names exported; the sim writes the 68-byte layout through them
 * (what today's driver writes there is unconfirmed, reference §3). */
GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return pci_info(GS_SIM_FN_nvmlDeviceGetPciInfo, device, pci);
}
#endif

/* The 550+ versioned PCI call: the same identity plus the class codes, which only scenarios that
 * give them answer (others say NOT_SUPPORTED, as a pre-550 driver would). */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPciInfoExt(nvmlDevice_t device,
                                                        nvmlPciInfoExt_v1_t *pci)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetPciInfoExt, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!pci)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (pci->version != nvmlPciInfoExt_v1)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (!c.g->has_pci_class)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    pci->domain = c.g->pci_domain;
    pci->bus = c.g->pci_bus;
    pci->device = c.g->pci_device;
    pci->pciDeviceId = c.g->pci_device_id;
    pci->pciSubSystemId = c.g->pci_subsys_id;
    pci->baseClass = c.g->pci_base_class;
    pci->subClass = c.g->pci_sub_class;
    memset(pci->busId, 0, sizeof pci->busId);
    snprintf(pci->busId, sizeof pci->busId, "%s", c.g->bus_id);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version,
                                                          unsigned int length)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetVbiosVersion, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    return gs_sim_leave(gs_sim_copy_str(version, length, c.g->vbios));
}

/* The scenario's "board" (id, multi-GPU flag, part number) and GSP firmware version. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t device, unsigned int *boardId)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetBoardId, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!boardId)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_board)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *boardId = c.g->board_id;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device,
                                                           unsigned int *multiGpuBool)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMultiGpuBoard, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!multiGpuBool)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_board)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *multiGpuBool = c.g->multi_gpu_board;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *partNumber,
                                                             unsigned int length)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetBoardPartNumber, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!partNumber)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_board || !c.g->board_part[0])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    return gs_sim_leave(gs_sim_copy_str(partNumber, length, c.g->board_part));
}

/* No length: the caller's buffer holds NVML_GSP_FIRMWARE_VERSION_BUF_SIZE bytes. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetGspFirmwareVersion(nvmlDevice_t device, char *version)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetGspFirmwareVersion, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!version)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->gsp_version[0])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    return gs_sim_leave(
        gs_sim_copy_str(version, NVML_GSP_FIRMWARE_VERSION_BUF_SIZE, c.g->gsp_version));
}

/* Inforom version strings: index 0 the image, 1 + nvmlInforomObject_t the objects. */
static nvmlReturn_t inforom_str(enum gs_sim_fn fn, nvmlDevice_t device, unsigned which,
                                char *version, unsigned int length)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(fn, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!version)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_inforom || !c.g->inforom[which][0])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    return gs_sim_leave(gs_sim_copy_str(version, length, c.g->inforom[which]));
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t device, char *version,
                                                                 unsigned int length)
{
    return inforom_str(GS_SIM_FN_nvmlDeviceGetInforomImageVersion, device, 0, version, length);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t device,
                                                            nvmlInforomObject_t object,
                                                            char *version, unsigned int length)
{
    if (object > NVML_INFOROM_POWER) {
        struct gs_sim_call c;
        nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetInforomVersion, device, 0, &c);
        return rc != NVML_SUCCESS ? rc : gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    }
    return inforom_str(GS_SIM_FN_nvmlDeviceGetInforomVersion, device, 1 + object, version, length);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceValidateInforom(nvmlDevice_t device)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceValidateInforom, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!c.g->has_inforom)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    return gs_sim_leave(c.g->inforom_valid ? NVML_SUCCESS : NVML_ERROR_CORRUPTED_INFOROM);
}

/* One unsigned answer of a GPU handle, NOT_SUPPORTED when the scenario leaves it out. */
static nvmlReturn_t board_uint(enum gs_sim_fn fn, nvmlDevice_t device, unsigned int *out,
                               size_t has_off, size_t val_off, int is_bool)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(fn, device, 0, &c);
    const char *g;

    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    g = (const char *)c.g;
    if (!*(const bool *)(g + has_off))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    if (is_bool)
        *out = *(const bool *)(g + val_off) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    else
        *out = *(const unsigned *)(g + val_off);
    return gs_sim_leave(NVML_SUCCESS);
}

#define BOARD_UINT(fn, has, val, is_bool)                                                          \
    board_uint(GS_SIM_FN_##fn, device, out, offsetof(struct gs_sim_gpu, has),                      \
               offsetof(struct gs_sim_gpu, val), is_bool)

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device,
                                                         nvmlEnableState_t *out)
{
    return BOARD_UINT(nvmlDeviceGetDisplayMode, has_display_attached, display_attached, 1);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device,
                                                           nvmlEnableState_t *out)
{
    return BOARD_UINT(nvmlDeviceGetDisplayActive, has_display_active, display_active, 1);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t device,
                                                            nvmlEnableState_t *out)
{
    return BOARD_UINT(nvmlDeviceGetAccountingMode, has_accounting_mode, accounting_mode, 1);
}

/* Answers whether accounting is on or off, as the capture's drivers do (4000 with mode off). */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetAccountingBufferSize(nvmlDevice_t device,
                                                                  unsigned int *out)
{
    return BOARD_UINT(nvmlDeviceGetAccountingBufferSize, has_accounting_buffer, accounting_buffer,
                      0);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetGspFirmwareMode(nvmlDevice_t device,
                                                             unsigned int *isEnabled,
                                                             unsigned int *defaultMode)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetGspFirmwareMode, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!isEnabled || !defaultMode)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_gsp)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *isEnabled = c.g->gsp_enabled;
    *defaultMode = c.g->gsp_default;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                                   int *minor)
{
    struct gs_sim_call c;
    nvmlReturn_t rc =
        gs_sim_enter(GS_SIM_FN_nvmlDeviceGetCudaComputeCapability, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!major || !minor)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (c.g->cc_major < 0)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *major = c.g->cc_major;
    *minor = c.g->cc_minor;
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- memory ------------------------------------------------------------------------------- */

/* total/reserved/used/free of the GPU or MIG device at the call's time. */
static void memory_now(const struct gs_sim_call *c, uint64_t *total, uint64_t *reserved,
                       uint64_t *used, uint64_t *free_b)
{
    *total = c->mig ? c->mig->mem_total_bytes : c->g->mem_total_bytes;
    *reserved = c->mig ? c->mig->mem_reserved_bytes : c->g->mem_reserved_bytes;
    *used = gs_sim_mem_used(c, c->t);
    *free_b = *total - *reserved - *used;
}

GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    struct gs_sim_call c;
    uint64_t total, reserved, used, free_b;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMemoryInfo, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!memory)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    memory_now(&c, &total, &reserved, &used, &free_b);
    /* v1 counts driver/firmware reservations as used (reference §4). */
    memory->total = total;
    memory->used = reserved + used;
    memory->free = free_b;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                           nvmlMemory_v2_t *memory)
{
    struct gs_sim_call c;
    uint64_t total, reserved, used, free_b;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMemoryInfo_v2, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!memory)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (memory->version != nvmlMemory_v2)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    memory_now(&c, &total, &reserved, &used, &free_b);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = free_b;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device,
                                                            nvmlBAR1Memory_t *bar1Memory)
{
    struct gs_sim_call c;
    uint64_t total, used;
    bool given;
    nvmlReturn_t rc =
        gs_sim_enter(GS_SIM_FN_nvmlDeviceGetBAR1MemoryInfo, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!bar1Memory)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    total = c.mig ? c.mig->bar1_total_bytes : c.g->bar1_total_bytes;
    given = c.mig ? c.mig->metric_given[GS_SIM_M_BAR1_USED] : c.g->metric_given[GS_SIM_M_BAR1_USED];
    if (given)
        used = (uint64_t)llround(gs_sim_metric_at(&c, GS_SIM_M_BAR1_USED, c.t) * 1048576.0);
    else if (c.mig)
        used = 0;
    else /* mappings follow allocations: about the memory in use plus 1 MiB */
        used = gs_sim_mem_used(&c, c.t) + (1u << 20);
    if (used > total)
        used = total;
    bar1Memory->bar1Total = total;
    bar1Memory->bar1Used = used;
    bar1Memory->bar1Free = total - used;
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- utilization -------------------------------------------------------------------------- */

GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                         nvmlUtilization_t *utilization)
{
    struct gs_sim_call c;
    double w;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetUtilizationRates, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!utilization)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gs_sim_mig_on(c.sc, c.gpu, c.t))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    w = c.g->util_window_s;
    utilization->gpu = (unsigned)llround(gs_sim_metric_avg(&c, GS_SIM_M_UTIL_GPU, c.t - w, c.t));
    utilization->memory = (unsigned)llround(gs_sim_metric_avg(&c, GS_SIM_M_UTIL_MEM, c.t - w, c.t));
    return gs_sim_leave(NVML_SUCCESS);
}

static nvmlReturn_t codec_util(enum gs_sim_fn fn, enum gs_sim_metric m, nvmlDevice_t device,
                               unsigned int *utilization, unsigned int *samplingPeriodUs)
{
    struct gs_sim_call c;
    double w;
    nvmlReturn_t rc = gs_sim_enter(fn, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!utilization || !samplingPeriodUs)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gs_sim_mig_on(c.sc, c.gpu, c.t))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    w = c.g->enc_period_us / 1e6;
    *utilization = (unsigned)llround(gs_sim_metric_avg(&c, m, c.t - w, c.t));
    *samplingPeriodUs = c.g->enc_period_us;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device,
                                                                unsigned int *utilization,
                                                                unsigned int *samplingPeriodUs)
{
    return codec_util(GS_SIM_FN_nvmlDeviceGetEncoderUtilization, GS_SIM_M_ENC, device, utilization,
                      samplingPeriodUs);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device,
                                                                unsigned int *utilization,
                                                                unsigned int *samplingPeriodUs)
{
    return codec_util(GS_SIM_FN_nvmlDeviceGetDecoderUtilization, GS_SIM_M_DEC, device, utilization,
                      samplingPeriodUs);
}

/* The JPEG and optical-flow engines: like the codecs, but a board without the engine (a metric
 * the scenario does not give) answers NOT_SUPPORTED. */
static nvmlReturn_t engine_util(enum gs_sim_fn fn, enum gs_sim_metric m, nvmlDevice_t device,
                                unsigned int *utilization, unsigned int *samplingPeriodUs)
{
    struct gs_sim_call c;
    double w;
    nvmlReturn_t rc = gs_sim_enter(fn, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!utilization || !samplingPeriodUs)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->metric_given[m] || gs_sim_mig_on(c.sc, c.gpu, c.t))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    w = c.g->enc_period_us / 1e6;
    *utilization = (unsigned)llround(gs_sim_metric_avg(&c, m, c.t - w, c.t));
    *samplingPeriodUs = c.g->enc_period_us;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetJpgUtilization(nvmlDevice_t device,
                                                            unsigned int *utilization,
                                                            unsigned int *samplingPeriodUs)
{
    return engine_util(GS_SIM_FN_nvmlDeviceGetJpgUtilization, GS_SIM_M_JPG, device, utilization,
                       samplingPeriodUs);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetOfaUtilization(nvmlDevice_t device,
                                                            unsigned int *utilization,
                                                            unsigned int *samplingPeriodUs)
{
    return engine_util(GS_SIM_FN_nvmlDeviceGetOfaUtilization, GS_SIM_M_OFA, device, utilization,
                       samplingPeriodUs);
}

/* Encoder sessions: supported when the scenario gives any of the three metrics (the others read
 * 0); values at the call's instant. Answers in MIG mode too, as the H100 MIG capture shows. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t device,
                                                          unsigned int *sessionCount,
                                                          unsigned int *averageFps,
                                                          unsigned int *averageLatency)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetEncoderStats, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!sessionCount || !averageFps || !averageLatency)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->metric_given[GS_SIM_M_ENC_SESSIONS] && !c.g->metric_given[GS_SIM_M_ENC_FPS] &&
        !c.g->metric_given[GS_SIM_M_ENC_LATENCY])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *sessionCount = gs_sim_metric_u(&c, GS_SIM_M_ENC_SESSIONS, c.t);
    *averageFps = gs_sim_metric_u(&c, GS_SIM_M_ENC_FPS, c.t);
    *averageLatency = gs_sim_metric_u(&c, GS_SIM_M_ENC_LATENCY, c.t);
    return gs_sim_leave(NVML_SUCCESS);
}

/* Frame buffer capture sessions: as the encoder's, supported when the scenario gives any of the
 * three metrics. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetFBCStats(nvmlDevice_t device, nvmlFBCStats_t *fbcStats)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetFBCStats, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!fbcStats)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->metric_given[GS_SIM_M_FBC_SESSIONS] && !c.g->metric_given[GS_SIM_M_FBC_FPS] &&
        !c.g->metric_given[GS_SIM_M_FBC_LATENCY])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    fbcStats->sessionsCount = gs_sim_metric_u(&c, GS_SIM_M_FBC_SESSIONS, c.t);
    fbcStats->averageFPS = gs_sim_metric_u(&c, GS_SIM_M_FBC_FPS, c.t);
    fbcStats->averageLatency = gs_sim_metric_u(&c, GS_SIM_M_FBC_LATENCY, c.t);
    return gs_sim_leave(NVML_SUCCESS);
}

/* TPC / memory channel repair flags (drivers 580+): supported when the scenario gives either; the
 * struct version is checked as the driver does. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetRepairStatus(nvmlDevice_t device,
                                                          nvmlRepairStatus_t *repairStatus)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetRepairStatus, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!repairStatus)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (repairStatus->version != nvmlRepairStatus_v1)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (!c.g->metric_given[GS_SIM_M_REPAIR_CHAN] && !c.g->metric_given[GS_SIM_M_REPAIR_TPC])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    repairStatus->bChannelRepairPending = gs_sim_metric_u(&c, GS_SIM_M_REPAIR_CHAN, c.t) != 0;
    repairStatus->bTpcRepairPending = gs_sim_metric_u(&c, GS_SIM_M_REPAIR_TPC, c.t) != 0;
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- what only nvidia-smi -q shows: modes, SRAM error status, bank-remap histogram, fabric --- */

/* A scenario value behind a NULL-checked pointer argument; NOT_SUPPORTED when not given. */
#define SIM_SIMPLE(fn, ptr_ok, given)                                                              \
    struct gs_sim_call c;                                                                          \
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_##fn, device, 0, &c);                                 \
    if (rc != NVML_SUCCESS)                                                                        \
        return rc;                                                                                 \
    if (!(ptr_ok))                                                                                 \
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);                                          \
    if (!c.g->given)                                                                               \
    return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED)

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device,
                                                            nvmlDeviceAddressingMode_t *mode)
{
    SIM_SIMPLE(nvmlDeviceGetAddressingMode, mode, has_addressing);
    if (mode->version != nvmlDeviceAddressingMode_v1)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    mode->value = c.g->addressing_mode;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t
nvmlDeviceGetVirtualizationMode(nvmlDevice_t device, nvmlGpuVirtualizationMode_t *pVirtualMode)
{
    SIM_SIMPLE(nvmlDeviceGetVirtualizationMode, pVirtualMode, has_virt);
    *pVirtualMode = c.g->virt_mode;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetHostVgpuMode(nvmlDevice_t device,
                                                          nvmlHostVgpuMode_t *pHostVgpuMode)
{
    SIM_SIMPLE(nvmlDeviceGetHostVgpuMode, pHostVgpuMode, has_host_vgpu);
    *pHostVgpuMode = c.g->host_vgpu_mode;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetC2cModeInfoV(nvmlDevice_t device,
                                                          nvmlC2cModeInfo_v1_t *c2cModeInfo)
{
    SIM_SIMPLE(nvmlDeviceGetC2cModeInfoV, c2cModeInfo, has_c2c);
    c2cModeInfo->isC2cEnabled = c.g->c2c_enabled;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetCapabilities(nvmlDevice_t device,
                                                          nvmlDeviceCapabilities_t *caps)
{
    SIM_SIMPLE(nvmlDeviceGetCapabilities, caps, has_egm);
    if (caps->version != nvmlDeviceCapabilities_v1)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    caps->capMask = c.g->egm ? NVML_DEV_CAP_EGM : 0;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetSramEccErrorStatus(nvmlDevice_t device,
                                                                nvmlEccSramErrorStatus_t *status)
{
    SIM_SIMPLE(nvmlDeviceGetSramEccErrorStatus, status, has_sram);
    if (status->version != nvmlEccSramErrorStatus_v1)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    status->aggregateUncParity = c.g->sram[0];
    status->aggregateUncSecDed = c.g->sram[1];
    status->aggregateCor = c.g->sram[2];
    status->volatileUncParity = c.g->sram[3];
    status->volatileUncSecDed = c.g->sram[4];
    status->volatileCor = c.g->sram[5];
    status->aggregateUncBucketL2 = c.g->sram[6];
    status->aggregateUncBucketSm = c.g->sram[7];
    status->aggregateUncBucketPcie = c.g->sram[8];
    status->aggregateUncBucketMcu = c.g->sram[9];
    status->aggregateUncBucketOther = c.g->sram[10];
    status->bThresholdExceeded = c.g->sram_threshold;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t
nvmlDeviceGetRowRemapperHistogram(nvmlDevice_t device, nvmlRowRemapperHistogramValues_t *values)
{
    SIM_SIMPLE(nvmlDeviceGetRowRemapperHistogram, values, has_remap_hist);
    values->max = c.g->remap_hist[0];
    values->high = c.g->remap_hist[1];
    values->partial = c.g->remap_hist[2];
    values->low = c.g->remap_hist[3];
    values->none = c.g->remap_hist[4];
    return gs_sim_leave(NVML_SUCCESS);
}

/* Version 3 only (this sim's driver is newer than 565); a GPU without "fabric" reports state
 * NOT_SUPPORTED with SUCCESS, as a PCIe board on a recent driver does. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device,
                                                            nvmlGpuFabricInfo_v3_t *gpuFabricInfo)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetGpuFabricInfoV, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!gpuFabricInfo)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gpuFabricInfo->version != nvmlGpuFabricInfo_v3)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    memset((char *)gpuFabricInfo + sizeof gpuFabricInfo->version, 0,
           sizeof *gpuFabricInfo - sizeof gpuFabricInfo->version);
    if (!c.g->has_fabric)
        return gs_sim_leave(NVML_SUCCESS); /* state NOT_SUPPORTED (0) */
    memcpy(gpuFabricInfo->clusterUuid, c.g->fabric_cluster, sizeof gpuFabricInfo->clusterUuid);
    gpuFabricInfo->state = (nvmlGpuFabricState_t)c.g->fabric_state;
    gpuFabricInfo->healthMask = c.g->fabric_health_mask;
    gpuFabricInfo->healthSummary = (unsigned char)c.g->fabric_health_summary;
    if (c.g->fabric_state == NVML_GPU_FABRIC_STATE_COMPLETED) {
        gpuFabricInfo->status = c.g->fabric_status;
        gpuFabricInfo->cliqueId = c.g->fabric_clique;
    }
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- the whole GPU's other -q rows: PDI, module id, GOM, vGPU heterogeneous mode, protected
 * memory, unrepairable memory ---------------------------------------------------------------- */

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPdi(nvmlDevice_t device, nvmlPdi_t *pdi)
{
    SIM_SIMPLE(nvmlDeviceGetPdi, pdi, has_pdi);
    if (pdi->version != nvmlPdi_v1)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    pdi->value = c.g->pdi;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetModuleId(nvmlDevice_t device, unsigned int *moduleId)
{
    SIM_SIMPLE(nvmlDeviceGetModuleId, moduleId, has_module_id);
    *moduleId = c.g->module_id;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetGpuOperationMode(nvmlDevice_t device,
                                                              nvmlGpuOperationMode_t *current,
                                                              nvmlGpuOperationMode_t *pending)
{
    SIM_SIMPLE(nvmlDeviceGetGpuOperationMode, current && pending, has_gom);
    *current = c.g->gom[0];
    *pending = c.g->gom[1];
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetVgpuHeterogeneousMode(
    nvmlDevice_t device, nvmlVgpuHeterogeneousMode_t *pHeterogeneousMode)
{
    SIM_SIMPLE(nvmlDeviceGetVgpuHeterogeneousMode, pHeterogeneousMode, has_vgpu_hetero);
    if (pHeterogeneousMode->version != nvmlVgpuHeterogeneousMode_v1)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    pHeterogeneousMode->mode = c.g->vgpu_hetero ? 1 : 0;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetConfComputeProtectedMemoryUsage(nvmlDevice_t device,
                                                                             nvmlMemory_t *memory)
{
    SIM_SIMPLE(nvmlDeviceGetConfComputeProtectedMemoryUsage, memory, has_protected);
    memory->total = c.g->protected_total;
    memory->used = c.g->protected_used;
    memory->free = c.g->protected_total - c.g->protected_used;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetUnrepairableMemoryFlag_v1(
    nvmlDevice_t device, nvmlUnrepairableMemoryStatus_v1_t *unrepairableMemoryStatus)
{
    SIM_SIMPLE(nvmlDeviceGetUnrepairableMemoryFlag_v1, unrepairableMemoryStatus, has_unrepairable);
    unrepairableMemoryStatus->bUnrepairableMemory = c.g->unrepairable ? 1 : 0;
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- the sample buffer -------------------------------------------------------------------- */

/* Value of sample type `type` for the interval ending at tk. */
static unsigned sample_value(const struct gs_sim_call *c, unsigned type, double tk, double iv)
{
    switch (type) {
    case NVML_TOTAL_POWER_SAMPLES:
        return (unsigned)llround(gs_sim_metric_avg(c, GS_SIM_M_POWER, tk - iv, tk) * 1000);
    case NVML_GPU_UTILIZATION_SAMPLES:
        return (unsigned)llround(gs_sim_metric_avg(c, GS_SIM_M_UTIL_GPU, tk - iv, tk));
    case NVML_MEMORY_UTILIZATION_SAMPLES:
        return (unsigned)llround(gs_sim_metric_avg(c, GS_SIM_M_UTIL_MEM, tk - iv, tk));
    case NVML_ENC_UTILIZATION_SAMPLES:
        return (unsigned)llround(gs_sim_metric_avg(c, GS_SIM_M_ENC, tk - iv, tk));
    case NVML_DEC_UTILIZATION_SAMPLES:
        return (unsigned)llround(gs_sim_metric_avg(c, GS_SIM_M_DEC, tk - iv, tk));
    case NVML_PROCESSOR_CLK_SAMPLES:
        return gs_sim_metric_u(c, GS_SIM_M_CLK_SM, tk);
    default:
        return gs_sim_metric_u(c, GS_SIM_M_CLK_MEM, tk);
    }
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type,
                                                     unsigned long long lastSeenTimeStamp,
                                                     nvmlValueType_t *sampleValType,
                                                     unsigned int *sampleCount,
                                                     nvmlSample_t *samples)
{
    struct gs_sim_call c;
    double iv, kf;
    long long k_now, k_first, k;
    unsigned n = 0, cap, written = 0;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetSamples, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!sampleValType || !sampleCount || type > 9)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (samples && *sampleCount == 0)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (type > NVML_MEMORY_CLK_SAMPLES || (c.g->unsupported_samples & (1u << type)))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    if (type >= NVML_GPU_UTILIZATION_SAMPLES && type <= NVML_DEC_UTILIZATION_SAMPLES &&
        gs_sim_mig_on(c.sc, c.gpu, c.t))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    iv = c.g->sample_interval_s;
    kf = floor(c.t / iv);
    if (!(kf >= 0))
        return gs_sim_leave(NVML_ERROR_NOT_FOUND); /* the driver has not sampled yet */
    k_now = kf > 1e15 ? (long long)1e15 : (long long)kf;
    k_first = k_now >= (long long)GS_SIM_SAMPLE_DEPTH ? k_now - GS_SIM_SAMPLE_DEPTH + 1 : 0;
    /* Only samples newer than lastSeenTimeStamp; the ring is ordered, so skip the old ones. */
    while (k_first <= k_now &&
           gs_sim_clock_wall_us(&gs_sim.clock, (double)k_first * iv) <= lastSeenTimeStamp)
        k_first++;
    n = k_first <= k_now ? (unsigned)(k_now - k_first + 1) : 0;
    *sampleValType = NVML_VALUE_TYPE_UNSIGNED_INT;
    if (n == 0)
        return gs_sim_leave(NVML_ERROR_NOT_FOUND);
    if (!samples) {
        *sampleCount = n;
        return gs_sim_leave(NVML_SUCCESS);
    }
    /* A short array gets the oldest entries: passing the newest timestamp seen next time then
     * continues without a gap. */
    cap = *sampleCount;
    for (k = k_first; k <= k_now && written < cap; k++, written++) {
        double tk = (double)k * iv;
        samples[written].timeStamp = gs_sim_clock_wall_us(&gs_sim.clock, tk);
        samples[written].sampleValue.ullVal = 0;
        samples[written].sampleValue.uiVal = sample_value(&c, type, tk, iv);
    }
    *sampleCount = written;
    return gs_sim_leave(NVML_SUCCESS);
}
