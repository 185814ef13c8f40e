/*
 * The NVML backend: the only code in gpuscope that talks to the NVIDIA driver.
 *
 * It opens libnvidia-ml.so.1 (or $GPUSCOPE_NVML_LIBRARY, or the path the caller gives) with
 * dlopen and resolves every symbol on its own, newest version first, from the table
 * NVML_SYMS below; only nvmlInit and nvmlDeviceGetCount are required, everything else may be
 * missing and then reads as absent. NVML is initialised once at open, device handles are
 * cached, and each reading is converted once to base units (W, J, Hz, bytes, ratios, s).
 * docs/backend.md explains which call fills which field, and when.
 *
 * Per-call outcome -> field status: SUCCESS -> OK; NOT_SUPPORTED, FUNCTION_NOT_FOUND,
 * ARGUMENT_VERSION_MISMATCH, DEPRECATED or a NULL symbol -> absent; NO_PERMISSION -> NOPERM;
 * GPU_IS_LOST -> the GPU is marked lost and nothing more is asked of it this cycle; anything
 * else -> ERROR for that field only.
 *
 * State (device handles, the identity cache, previous GPM samples, the event set, scratch
 * buffers for process lists) lives in struct gs_backend; scratch buffers grow only when the
 * driver reports more entries than ever before, so a warm cycle allocates nothing.
 */
#include "backend/nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/nvml_abi.h"
#include "base/clock.h"
#include "base/testable.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"
#define NVML_MAX_GPUS 1024
#define NVML_PROC_CAP_MAX 65536u    /* process entries per list: beyond this is a broken driver */
#define NVML_GPM_MIN_NS 100000000LL /* GPM samples closer than 100 ms give no metrics */
#define NVML_GPM_WAIT_NS 110000000L /* what GS_WANT_GPM_WAIT sleeps */
#define NVML_NVLINK_WAIT_NS                                                                        \
    20000000L /* between the two NVLink counter readings of a first cycle                          \
               */
#define NVML_PUTIL_KEEP_NS 5000000000LL /* keep a process's last utilization this long */
#define NVML_EVENTS_PER_CYCLE 256
#define NVML_SAMPLES_MAX 1024u /* utilization samples per call: the driver's ring holds ~120 */

/* ---- symbol table ----------------------------------------------------------------------- */

typedef nvmlReturn_t (*fn_void)(void);
typedef const char *(*fn_errstr)(nvmlReturn_t);
typedef nvmlReturn_t (*fn_sys_str)(char *, unsigned int);
typedef nvmlReturn_t (*fn_sys_int)(int *);
typedef nvmlReturn_t (*fn_uint)(unsigned int *);
typedef nvmlReturn_t (*fn_handle)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*fn_pid_name)(unsigned int, char *, unsigned int);
typedef nvmlReturn_t (*fn_d_str)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*fn_d_arg_str)(nvmlDevice_t, unsigned int, char *, unsigned int);
typedef nvmlReturn_t (*fn_d)(nvmlDevice_t);
typedef nvmlReturn_t (*fn_d_u)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*fn_d_u2)(nvmlDevice_t, unsigned int *, unsigned int *);
typedef nvmlReturn_t (*fn_d_u3)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *);
typedef nvmlReturn_t (*fn_d_u4)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *,
                                unsigned int *);
typedef nvmlReturn_t (*fn_d_i2)(nvmlDevice_t, int *, int *);
typedef nvmlReturn_t (*fn_d_ull)(nvmlDevice_t, unsigned long long *);
typedef nvmlReturn_t (*fn_d_arg_u)(nvmlDevice_t, unsigned int, unsigned int *);
typedef nvmlReturn_t (*fn_d_arg_h)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*fn_d_pci)(nvmlDevice_t, nvmlPciInfo_t *);
typedef nvmlReturn_t (*fn_d_pci_ext)(nvmlDevice_t, nvmlPciInfoExt_v1_t *);
typedef nvmlReturn_t (*fn_d_util)(nvmlDevice_t, nvmlUtilization_t *);
typedef nvmlReturn_t (*fn_d_mem)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*fn_d_mem2)(nvmlDevice_t, nvmlMemory_v2_t *);
typedef nvmlReturn_t (*fn_d_bar1)(nvmlDevice_t, nvmlBAR1Memory_t *);
typedef nvmlReturn_t (*fn_d_attrs)(nvmlDevice_t, nvmlDeviceAttributes_t *);
typedef nvmlReturn_t (*fn_d_tempv)(nvmlDevice_t, nvmlTemperature_t *);
typedef nvmlReturn_t (*fn_d_margin)(nvmlDevice_t, nvmlMarginTemperature_t *);
typedef nvmlReturn_t (*fn_d_fields)(nvmlDevice_t, int, nvmlFieldValue_t *);
typedef nvmlReturn_t (*fn_d_procs)(nvmlDevice_t, unsigned int *, void *);
typedef nvmlReturn_t (*fn_d_putil)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *,
                                   unsigned long long);
typedef nvmlReturn_t (*fn_d_ecc)(nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t,
                                 unsigned long long *);
typedef nvmlReturn_t (*fn_d_ecc_loc)(nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t,
                                     unsigned int, unsigned long long *);
typedef nvmlReturn_t (*fn_d_retired)(nvmlDevice_t, nvmlPageRetirementCause_t, unsigned int *,
                                     unsigned long long *);
typedef nvmlReturn_t (*fn_ev_create)(nvmlEventSet_t *);
typedef nvmlReturn_t (*fn_ev_free)(nvmlEventSet_t);
typedef nvmlReturn_t (*fn_ev_reg)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
typedef nvmlReturn_t (*fn_ev_wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);
typedef nvmlReturn_t (*fn_gpm_support)(nvmlDevice_t, nvmlGpmSupport_t *);
typedef nvmlReturn_t (*fn_gpm_alloc)(nvmlGpmSample_t *);
typedef nvmlReturn_t (*fn_gpm_free)(nvmlGpmSample_t);
typedef nvmlReturn_t (*fn_gpm_get)(nvmlDevice_t, nvmlGpmSample_t);
typedef nvmlReturn_t (*fn_gpm_metrics)(nvmlGpmMetricsGet_t *);
typedef nvmlReturn_t (*fn_gpm_mig_get)(nvmlDevice_t, unsigned int, nvmlGpmSample_t);
typedef nvmlReturn_t (*fn_gi_by_id)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t *);
typedef nvmlReturn_t (*fn_gi_info)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t *);
typedef nvmlReturn_t (*fn_d_samples)(nvmlDevice_t, nvmlSamplingType_t, unsigned long long,
                                     nvmlValueType_t *, unsigned int *, nvmlSample_t *);
typedef nvmlReturn_t (*fn_d_nvl_err)(nvmlDevice_t, unsigned int, nvmlNvLinkErrorCounter_t,
                                     unsigned long long *);
typedef nvmlReturn_t (*fn_d_nvl_pci)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
typedef void (*fn_any)(void); /* looked up only to learn whether the library exports it */

/* X(member, type, names...): names newest first. Process lists: index 0 = _v3, 1 = _v2,
 * 2 = plain, which decides the entry stride (gs_nvml_proc_stride). */
#define NVML_SYMS(X)                                                                               \
    X(init, fn_void, "nvmlInit_v2", "nvmlInit")                                                    \
    X(shutdown, fn_void, "nvmlShutdown")                                                           \
    X(error_string, fn_errstr, "nvmlErrorString")                                                  \
    X(driver_version, fn_sys_str, "nvmlSystemGetDriverVersion")                                    \
    X(nvml_version, fn_sys_str, "nvmlSystemGetNVMLVersion")                                        \
    X(cuda_version, fn_sys_int, "nvmlSystemGetCudaDriverVersion",                                  \
      "nvmlSystemGetCudaDriverVersion_v2")                                                         \
    X(process_name, fn_pid_name, "nvmlSystemGetProcessName")                                       \
    X(count, fn_uint, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount")                               \
    X(handle, fn_handle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex")            \
    X(name, fn_d_str, "nvmlDeviceGetName")                                                         \
    X(uuid, fn_d_str, "nvmlDeviceGetUUID")                                                         \
    X(serial, fn_d_str, "nvmlDeviceGetSerial")                                                     \
    X(vbios, fn_d_str, "nvmlDeviceGetVbiosVersion")                                                \
    X(pci, fn_d_pci, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo") \
    X(pci_ext, fn_d_pci_ext, "nvmlDeviceGetPciInfoExt")                                            \
    X(minor, fn_d_u, "nvmlDeviceGetMinorNumber")                                                   \
    X(arch, fn_d_u, "nvmlDeviceGetArchitecture")                                                   \
    X(brand, fn_d_u, "nvmlDeviceGetBrand")                                                         \
    X(cuda_cc, fn_d_i2, "nvmlDeviceGetCudaComputeCapability")                                      \
    X(utilization, fn_d_util, "nvmlDeviceGetUtilizationRates")                                     \
    X(encoder, fn_d_u2, "nvmlDeviceGetEncoderUtilization")                                         \
    X(decoder, fn_d_u2, "nvmlDeviceGetDecoderUtilization")                                         \
    X(memory_v2, fn_d_mem2, "nvmlDeviceGetMemoryInfo_v2")                                          \
    X(memory, fn_d_mem, "nvmlDeviceGetMemoryInfo")                                                 \
    X(bar1, fn_d_bar1, "nvmlDeviceGetBAR1MemoryInfo")                                              \
    X(attributes, fn_d_attrs, "nvmlDeviceGetAttributes_v2")                                        \
    X(temperature_v, fn_d_tempv, "nvmlDeviceGetTemperatureV")                                      \
    X(temperature, fn_d_arg_u, "nvmlDeviceGetTemperature")                                         \
    X(temp_threshold, fn_d_arg_u, "nvmlDeviceGetTemperatureThreshold")                             \
    X(temp_margin, fn_d_margin, "nvmlDeviceGetMarginTemperature")                                  \
    X(fan, fn_d_u, "nvmlDeviceGetFanSpeed")                                                        \
    X(power, fn_d_u, "nvmlDeviceGetPowerUsage")                                                    \
    X(power_enforced, fn_d_u, "nvmlDeviceGetEnforcedPowerLimit")                                   \
    X(power_limit, fn_d_u, "nvmlDeviceGetPowerManagementLimit")                                    \
    X(power_default, fn_d_u, "nvmlDeviceGetPowerManagementDefaultLimit")                           \
    X(power_constraints, fn_d_u2, "nvmlDeviceGetPowerManagementLimitConstraints")                  \
    X(energy, fn_d_ull, "nvmlDeviceGetTotalEnergyConsumption")                                     \
    X(clock, fn_d_arg_u, "nvmlDeviceGetClockInfo")                                                 \
    X(max_clock, fn_d_arg_u, "nvmlDeviceGetMaxClockInfo")                                          \
    X(pstate, fn_d_u, "nvmlDeviceGetPerformanceState")                                             \
    X(reasons, fn_d_ull, "nvmlDeviceGetCurrentClocksEventReasons",                                 \
      "nvmlDeviceGetCurrentClocksThrottleReasons")                                                 \
    X(reasons_supported, fn_d_ull, "nvmlDeviceGetSupportedClocksEventReasons",                     \
      "nvmlDeviceGetSupportedClocksThrottleReasons")                                               \
    X(pcie_gen, fn_d_u, "nvmlDeviceGetCurrPcieLinkGeneration")                                     \
    X(pcie_width, fn_d_u, "nvmlDeviceGetCurrPcieLinkWidth")                                        \
    X(pcie_gen_max, fn_d_u, "nvmlDeviceGetMaxPcieLinkGeneration")                                  \
    X(pcie_gen_gpumax, fn_d_u, "nvmlDeviceGetGpuMaxPcieLinkGeneration")                            \
    X(pcie_width_max, fn_d_u, "nvmlDeviceGetMaxPcieLinkWidth")                                     \
    X(pcie_tput, fn_d_arg_u, "nvmlDeviceGetPcieThroughput")                                        \
    X(pcie_replay, fn_d_u, "nvmlDeviceGetPcieReplayCounter")                                       \
    X(field_values, fn_d_fields, "nvmlDeviceGetFieldValues")                                       \
    X(ecc_mode, fn_d_u2, "nvmlDeviceGetEccMode")                                                   \
    X(ecc_total, fn_d_ecc, "nvmlDeviceGetTotalEccErrors")                                          \
    X(ecc_loc, fn_d_ecc_loc, "nvmlDeviceGetMemoryErrorCounter")                                    \
    X(retired, fn_d_retired, "nvmlDeviceGetRetiredPages")                                          \
    X(retired_pending, fn_d_u, "nvmlDeviceGetRetiredPagesPendingStatus")                           \
    X(remapped, fn_d_u4, "nvmlDeviceGetRemappedRows")                                              \
    X(persistence, fn_d_u, "nvmlDeviceGetPersistenceMode")                                         \
    X(compute_mode, fn_d_u, "nvmlDeviceGetComputeMode")                                            \
    X(mig_mode, fn_d_u2, "nvmlDeviceGetMigMode")                                                   \
    X(mig_max, fn_d_u, "nvmlDeviceGetMaxMigDeviceCount")                                           \
    X(mig_handle, fn_d_arg_h, "nvmlDeviceGetMigDeviceHandleByIndex")                               \
    X(gi_id, fn_d_u, "nvmlDeviceGetGpuInstanceId")                                                 \
    X(ci_id, fn_d_u, "nvmlDeviceGetComputeInstanceId")                                             \
    X(procs_compute, fn_d_procs, "nvmlDeviceGetComputeRunningProcesses_v3",                        \
      "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses")           \
    X(procs_graphics, fn_d_procs, "nvmlDeviceGetGraphicsRunningProcesses_v3",                      \
      "nvmlDeviceGetGraphicsRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses")         \
    X(procs_mps, fn_d_procs, "nvmlDeviceGetMPSComputeRunningProcesses_v3",                         \
      "nvmlDeviceGetMPSComputeRunningProcesses_v2", "nvmlDeviceGetMPSComputeRunningProcesses")     \
    X(conf_compute_mem, fn_any, "nvmlDeviceGetConfComputeMemSizeInfo")                             \
    X(proc_detail_list, fn_any, "nvmlDeviceGetRunningProcessDetailList")                           \
    X(proc_util, fn_d_putil, "nvmlDeviceGetProcessUtilization")                                    \
    X(event_create, fn_ev_create, "nvmlEventSetCreate")                                            \
    X(event_free, fn_ev_free, "nvmlEventSetFree")                                                  \
    X(event_register, fn_ev_reg, "nvmlDeviceRegisterEvents")                                       \
    X(event_supported, fn_d_ull, "nvmlDeviceGetSupportedEventTypes")                               \
    X(event_wait, fn_ev_wait, "nvmlEventSetWait_v2", "nvmlEventSetWait")                           \
    X(gpm_support, fn_gpm_support, "nvmlGpmQueryDeviceSupport")                                    \
    X(gpm_alloc, fn_gpm_alloc, "nvmlGpmSampleAlloc")                                               \
    X(gpm_free, fn_gpm_free, "nvmlGpmSampleFree")                                                  \
    X(gpm_get, fn_gpm_get, "nvmlGpmSampleGet")                                                     \
    X(gpm_metrics, fn_gpm_metrics, "nvmlGpmMetricsGet")                                            \
    X(gpm_mig_get, fn_gpm_mig_get, "nvmlGpmMigSampleGet")                                          \
    X(gi_by_id, fn_gi_by_id, "nvmlDeviceGetGpuInstanceById")                                       \
    X(gi_info, fn_gi_info, "nvmlGpuInstanceGetInfo")                                               \
    X(encoder_stats, fn_d_u3, "nvmlDeviceGetEncoderStats")                                         \
    X(jpg_util, fn_d_u2, "nvmlDeviceGetJpgUtilization")                                            \
    X(ofa_util, fn_d_u2, "nvmlDeviceGetOfaUtilization")                                            \
    X(inforom_image, fn_d_str, "nvmlDeviceGetInforomImageVersion")                                 \
    X(inforom_version, fn_d_arg_str, "nvmlDeviceGetInforomVersion")                                \
    X(inforom_validate, fn_d, "nvmlDeviceValidateInforom")                                         \
    X(display_mode, fn_d_u, "nvmlDeviceGetDisplayMode")                                            \
    X(display_active, fn_d_u, "nvmlDeviceGetDisplayActive")                                        \
    X(accounting_mode, fn_d_u, "nvmlDeviceGetAccountingMode")                                      \
    X(accounting_buffer, fn_d_u, "nvmlDeviceGetAccountingBufferSize")                              \
    X(gsp_mode, fn_d_u2, "nvmlDeviceGetGspFirmwareMode")                                           \
    X(samples, fn_d_samples, "nvmlDeviceGetSamples")                                               \
    X(nvlink_state, fn_d_arg_u, "nvmlDeviceGetNvLinkState")                                        \
    X(nvlink_errors, fn_d_nvl_err, "nvmlDeviceGetNvLinkErrorCounter")                              \
    X(nvlink_remote_pci, fn_d_nvl_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2")

#define NVML_MEMBER_(f, t, ...) t f;
struct nvml_fns {
    NVML_SYMS(NVML_MEMBER_)
};
#undef NVML_MEMBER_

#define NVML_ENUM_(f, t, ...) SYM_##f,
enum nvml_sym_id { NVML_SYMS(NVML_ENUM_) SYM__COUNT };
#undef NVML_ENUM_

struct nvml_sym {
    size_t off;           /* member of struct nvml_fns */
    const char *names[4]; /* newest first, NULL-terminated */
};
#define NVML_ROW_(f, t, ...) {offsetof(struct nvml_fns, f), {__VA_ARGS__, NULL}},
static const struct nvml_sym nvml_syms[SYM__COUNT] = {NVML_SYMS(NVML_ROW_)};
#undef NVML_ROW_

/* dlsym returns void *; we store it into function pointers by copying the bytes (POSIX
 * guarantees the sizes match, ISO C does not). */
static_assert(sizeof(void *) == sizeof(fn_void), "function and data pointers differ in size");

/* ---- state ------------------------------------------------------------------------------ */

struct util_rec {
    unsigned pid;
    unsigned long long ts; /* driver timestamp of the sample, us */
    int64_t t_ns;          /* when we received it (CLOCK_MONOTONIC) */
    unsigned sm, mem, enc, dec;
};

/* A GPU instance's placement as read once: st (enum gs_status) and the figures. */
struct mig_place {
    char uuid[GS_STR_LEN];
    uint8_t st;
    unsigned start, size, profile_id;
};

/* The GPM sample pair of one GPU instance, used in turn as the GPU's own pair is. */
struct mig_gpm {
    unsigned gi;
    nvmlGpmSample_t s[2];
    int prev, have, seen;
    int64_t t_ns;
};

struct nvml_dev {
    nvmlDevice_t h; /* NULL until nvmlDeviceGetHandleByIndex succeeds */
    nvmlReturn_t h_rc;
    int ident_done, slow_done;
    struct gs_gpu cache; /* identity (read once) and slow fields (GS_WANT_STATIC) */
    uint8_t ecc_loc_skip[2][2][GS_ECC_LOCATIONS]; /* locations that said "not supported" */
    /* GPM: two samples used in turn; gpm_prev is the older, taken at gpm_t_ns */
    int gpm; /* 0 unknown, 1 supported, -1 not */
    nvmlGpmSample_t gpm_s[2];
    int gpm_prev, gpm_have;
    int64_t gpm_t_ns;
    /* Xid events */
    int xid_reg; /* 0 not tried, 1 registered, -1 not available */
    unsigned long long xid_last;
    /* process utilization */
    unsigned long long putil_ts; /* largest sample timestamp seen, passed back to NVML */
    struct util_rec *urec;
    unsigned n_urec, cap_urec;
    /* NVLink: links found by the probe (nvl 0 not probed, 1 links, -1 none), their speed and
     * far end (read at the probe), and the previous data counters for the rate */
    int nvl;
    unsigned nvl_n;
    uint8_t nvl_speed_st;
    double nvl_speed_bps;
    struct gs_nvlink nvl_static[GS_NVLINK_MAX];
    int nvl_have;
    unsigned long long nvl_prev[2]; /* tx, rx bytes */
    long long nvl_prev_us;          /* the driver's timestamp of that reading, 0 if none */
    int64_t nvl_prev_ns;            /* CLOCK_MONOTONIC of that reading */
    /* GPM per GPU instance (nvmlGpmMigSampleGet): a pair of samples per instance id */
    struct mig_gpm mgpm[GS_MIG_MAX];
    unsigned n_mgpm;
    /* placements read (immutable while the instance lives: keyed by its MIG device UUID) */
    struct mig_place place[GS_MIG_MAX];
    unsigned n_place;
};

struct gs_backend {
    void *lib;
    char path[256];
    struct nvml_fns fn;
    signed char found[SYM__COUNT]; /* index into names[] that resolved, -1 if none */
    int inited;
    int mem_v1_only;         /* nvmlDeviceGetMemoryInfo_v2 rejected our version */
    unsigned proc_stride[3]; /* compute, graphics, MPS */
    struct gs_system sys;
    void *sim_is_host; /* nvml-sim's nvmlSimProcessIsHost; NULL otherwise */
    unsigned n;
    struct nvml_dev *dev;
    unsigned char *pbuf; /* process entries, GS_NVML_PROC_STRIDE_MAX bytes each */
    unsigned pcap;
    nvmlProcessUtilizationSample_t *ubuf;
    unsigned ucap;
    nvmlGpmMetricsGet_t *gpm_req; /* allocated at the largest known size (§10) */
    nvmlSample_t *sbuf;           /* nvmlDeviceGetSamples scratch, scap entries */
    unsigned scap;
    nvmlEventSet_t evset;
    int ev_state; /* 0 not tried, 1 created, -1 not available */
    /* What the caller reads (gs_backend_opts.need_*): identity, slow and basic readings of
     * other metrics and texts are not asked of the driver. need_all: no mask given. */
    int need_all;
    unsigned char need_m[GS_M__COUNT], need_t[GS_T__COUNT];
};

/* Fields read once at open: they never change while a handle lives. */
static const enum gs_metric ident_metrics[] = {
    GS_M_MINOR,          GS_M_ARCH,          GS_M_BRAND,         GS_M_PCI_DOMAIN,
    GS_M_PCI_BUS,        GS_M_PCI_DEVICE,    GS_M_PCI_DEVICE_ID, GS_M_PCI_SUBSYS_ID,
    GS_M_CC_MAJOR,       GS_M_CC_MINOR,      GS_M_GSP_MODE,      GS_M_GSP_MODE_DEFAULT,
    GS_M_PCI_BASE_CLASS, GS_M_PCI_SUB_CLASS,
};

/* Slow-changing fields: read at the first cycle and on GS_WANT_STATIC, repeated otherwise. */
static const enum gs_metric slow_metrics[] = {
    GS_M_POWER_LIMIT,    GS_M_POWER_DEFAULT_LIMIT, GS_M_POWER_MIN_LIMIT,   GS_M_POWER_MAX_LIMIT,
    GS_M_CLOCK_MAX_GR,   GS_M_CLOCK_MAX_SM,        GS_M_CLOCK_MAX_MEM,     GS_M_CLOCK_MAX_VIDEO,
    GS_M_TEMP_SHUTDOWN,  GS_M_TEMP_SLOWDOWN,       GS_M_TEMP_GPU_MAX,      GS_M_TEMP_MEM_MAX,
    GS_M_ECC_MODE,       GS_M_ECC_MODE_PENDING,    GS_M_PCIE_GEN_MAX,      GS_M_PCIE_GEN_GPU_MAX,
    GS_M_PCIE_WIDTH_MAX, GS_M_THROTTLE_SUPPORTED,  GS_M_PERSISTENCE,       GS_M_COMPUTE_MODE,
    GS_M_MIG_MODE,       GS_M_MIG_MODE_PENDING,    GS_M_INFOROM_VALID,     GS_M_DISPLAY_ATTACHED,
    GS_M_DISPLAY_ACTIVE, GS_M_ACCOUNTING,          GS_M_ACCOUNTING_BUFFER,
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- small helpers ---------------------------------------------------------------------- */

static const char *sym_name(const struct gs_backend *b, enum nvml_sym_id id)
{
    int k = b->found[id];
    return nvml_syms[id].names[k < 0 ? 0 : k];
}

/* NVML's own text when the library has nvmlErrorString, ours otherwise. */
static const char *nvml_errstr(const struct gs_backend *b, nvmlReturn_t r)
{
    const char *s = b && b->fn.error_string ? b->fn.error_string(r) : NULL;
    if (s && *s)
        return s;
    switch (r) {
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_GPU_NOT_FOUND:
        return "No supported GPUs were found";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "Driver/library version mismatch";
    }
    return "Unknown Error";
}

GS_TESTABLE uint8_t gs_nvml_status(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS:
        return GS_ST_OK;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
    case NVML_ERROR_DEPRECATED:
        return GS_ST_NA;
    case NVML_ERROR_NO_PERMISSION:
        return GS_ST_NOPERM;
    case NVML_ERROR_GPU_IS_LOST:
        return GS_ST_LOST;
    }
    return GS_ST_ERROR;
}

GS_TESTABLE int gs_nvml_init_rc(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS:
        return GS_OK;
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return GS_ENODRIVER;
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return GS_EMISMATCH;
    case NVML_ERROR_NO_PERMISSION:
        return GS_EPERM;
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return GS_ENOLIB;
    case NVML_ERROR_GPU_NOT_FOUND:
        return GS_ENOGPU; /* init with no supported GPU */
    case NVML_ERROR_GPU_IS_LOST:
        return GS_ELOST;
    case NVML_ERROR_MEMORY:
        return GS_ENOMEM;
    }
    return GS_ENVML;
}

/* Codes after which nothing on any GPU can work until NVML is re-initialised. */
static int driver_gone(nvmlReturn_t r)
{
    return r == NVML_ERROR_UNINITIALIZED || r == NVML_ERROR_DRIVER_NOT_LOADED ||
           r == NVML_ERROR_LIB_RM_VERSION_MISMATCH;
}

GS_TESTABLE unsigned gs_nvml_proc_stride(int found, int has_conf_compute, int has_detail_list)
{
    switch (found) {
    case 0: /* _v3 wrote 32-byte entries only on 535.43–535.86 (§7, nvitop's rule) */
        return has_conf_compute && !has_detail_list ? 32 : 24;
    case 1:
        return 24;
    case 2:
        return 16;
    }
    return 0;
}

GS_TESTABLE int gs_nvml_field_double(const nvmlFieldValue_t *fv, double *out)
{
    switch (fv->valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
        *out = fv->value.dVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        *out = fv->value.uiVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        *out = (double)fv->value.ulVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *out = (double)fv->value.ullVal;
        break;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        *out = (double)fv->value.sllVal;
        break;
    case NVML_VALUE_TYPE_SIGNED_INT:
        *out = fv->value.siVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
        *out = fv->value.usVal;
        break;
    default:
        return GS_ENOTSUP;
    }
    return GS_OK;
}

static void copy_text(char *dst, const char *src, size_t src_cap)
{
    size_t n = strnlen(src, src_cap);
    if (n >= GS_STR_LEN)
        n = GS_STR_LEN - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void copy_metrics(struct gs_gpu *dst, const struct gs_gpu *src, const enum gs_metric *ms,
                         size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst->st[ms[i]] = src->st[ms[i]];
        dst->v[ms[i]] = src->v[ms[i]];
    }
}

/* ---- loading ---------------------------------------------------------------------------- */

static void load_symbols(struct gs_backend *b)
{
    for (int i = 0; i < SYM__COUNT; i++) {
        b->found[i] = -1;
        for (int k = 0; nvml_syms[i].names[k]; k++) {
            void *p = dlsym(b->lib, nvml_syms[i].names[k]);
            if (p) {
                memcpy((char *)&b->fn + nvml_syms[i].off, &p, sizeof p);
                b->found[i] = (signed char)k;
                break;
            }
        }
    }
    b->proc_stride[0] =
        gs_nvml_proc_stride(b->found[SYM_procs_compute], b->fn.conf_compute_mem != NULL,
                            b->fn.proc_detail_list != NULL);
    b->proc_stride[1] =
        gs_nvml_proc_stride(b->found[SYM_procs_graphics], b->fn.conf_compute_mem != NULL,
                            b->fn.proc_detail_list != NULL);
    b->proc_stride[2] = gs_nvml_proc_stride(b->found[SYM_procs_mps], b->fn.conf_compute_mem != NULL,
                                            b->fn.proc_detail_list != NULL);
}

/* ---- one device's reads ----------------------------------------------------------------- */

/* Context of one device's reads in one cycle. Every helper is a no-op once lost is set, so a
 * GPU that falls off the bus costs one failed call, not fifty. */
struct rd {
    struct gs_backend *b;
    struct nvml_dev *d;
    nvmlDevice_t h;
    struct gs_gpu *g;
    int lost;
    nvmlReturn_t fatal; /* first driver-wide failure seen */
    int masked;         /* identity, slow, basic: skip what the caller does not read */
};

/* Whether metric m (text t) is to be asked of the driver in this read. */
static int need_m(const struct rd *c, enum gs_metric m)
{
    return !c->masked || c->b->need_all || c->b->need_m[m];
}

static int need_t(const struct rd *c, enum gs_text t)
{
    return !c->masked || c->b->need_all || c->b->need_t[t];
}

static int need_any(const struct rd *c, const enum gs_metric *ms, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (need_m(c, ms[i]))
            return 1;
    return 0;
}

/* True on success; otherwise records the outcome in *st (when not NULL). */
static int ok(struct rd *c, uint8_t *st, nvmlReturn_t r)
{
    if (r == NVML_SUCCESS)
        return 1;
    if (r == NVML_ERROR_GPU_IS_LOST)
        c->lost = 1;
    else if (driver_gone(r) && c->fatal == NVML_SUCCESS)
        c->fatal = r;
    if (st)
        *st = gs_nvml_status(r);
    return 0;
}

/* Same, for a call that fills several metrics. */
static int ok_n(struct rd *c, nvmlReturn_t r, const enum gs_metric *ms, size_t n)
{
    if (ok(c, &c->g->st[ms[0]], r))
        return 1;
    for (size_t i = 1; i < n; i++)
        c->g->st[ms[i]] = c->g->st[ms[0]];
    return 0;
}

static void rd_uint(struct rd *c, enum gs_metric m, fn_d_u fn, double scale)
{
    unsigned int v = 0;
    if (c->lost || !fn || !need_m(c, m))
        return;
    if (ok(c, &c->g->st[m], fn(c->h, &v)))
        gs_gpu_set(c->g, m, v * scale);
}

static void rd_uint_arg(struct rd *c, enum gs_metric m, fn_d_arg_u fn, unsigned arg, double scale)
{
    unsigned int v = 0;
    if (c->lost || !fn || !need_m(c, m))
        return;
    if (ok(c, &c->g->st[m], fn(c->h, arg, &v)))
        gs_gpu_set(c->g, m, v * scale);
}

static void rd_ull(struct rd *c, enum gs_metric m, fn_d_ull fn, double scale)
{
    unsigned long long v = 0;
    if (c->lost || !fn || !need_m(c, m))
        return;
    if (ok(c, &c->g->st[m], fn(c->h, &v)))
        gs_gpu_set(c->g, m, (double)v * scale);
}

static void rd_uint2(struct rd *c, enum gs_metric m1, enum gs_metric m2, fn_d_u2 fn, double scale)
{
    unsigned int a = 0, b = 0;
    enum gs_metric ms[2] = {m1, m2};
    if (c->lost || !fn || !need_any(c, ms, 2))
        return;
    if (ok_n(c, fn(c->h, &a, &b), ms, 2)) {
        gs_gpu_set(c->g, m1, a * scale);
        gs_gpu_set(c->g, m2, b * scale);
    }
}

static void rd_text(struct rd *c, enum gs_text t, fn_d_str fn)
{
    char buf[GS_STR_LEN];
    if (c->lost || !fn || !need_t(c, t))
        return;
    memset(buf, 0, sizeof buf);
    if (ok(c, &c->g->tst[t], fn(c->h, buf, sizeof buf))) {
        copy_text(c->g->text[t], buf, sizeof buf);
        c->g->tst[t] = GS_ST_OK;
    }
}

static void rd_pci(struct rd *c)
{
    static const enum gs_metric ms[] = {GS_M_PCI_DOMAIN, GS_M_PCI_BUS, GS_M_PCI_DEVICE,
                                        GS_M_PCI_DEVICE_ID, GS_M_PCI_SUBSYS_ID};
    nvmlPciInfo_t pci;
    struct gs_gpu *g = c->g;

    if (c->lost || !c->b->fn.pci || (!need_any(c, ms, COUNT_OF(ms)) && !need_t(c, GS_T_PCI_BUS_ID)))
        return;
    memset(&pci, 0, sizeof pci); /* 68 bytes whichever symbol we call (§3) */
    if (!ok_n(c, c->b->fn.pci(c->h, &pci), ms, COUNT_OF(ms))) {
        g->tst[GS_T_PCI_BUS_ID] = g->st[ms[0]];
        return;
    }
    gs_gpu_set(g, GS_M_PCI_DOMAIN, pci.domain);
    gs_gpu_set(g, GS_M_PCI_BUS, pci.bus);
    gs_gpu_set(g, GS_M_PCI_DEVICE, pci.device);
    gs_gpu_set(g, GS_M_PCI_DEVICE_ID, pci.pciDeviceId);
    gs_gpu_set(g, GS_M_PCI_SUBSYS_ID, pci.pciSubSystemId);
    /* Only _v3 has the 32-byte busId at offset 36; the old layouts hold a 16-byte legacy id at
     * offset 0. Rebuild nvidia-smi's "00000000:00:09.0" form when we lack the long one. */
    if (c->b->found[SYM_pci] == 0 && pci.busId[0])
        copy_text(g->text[GS_T_PCI_BUS_ID], pci.busId, sizeof pci.busId);
    else
        snprintf(g->text[GS_T_PCI_BUS_ID], GS_STR_LEN, "%08X:%02X:%02X.0", pci.domain, pci.bus,
                 pci.device);
    g->tst[GS_T_PCI_BUS_ID] = GS_ST_OK;
}

/* PCI class codes from nvmlDeviceGetPciInfoExt (550+), version 1. The rest of the struct repeats
 * what rd_pci read; only the class codes are new. */
static void rd_pci_class(struct rd *c)
{
    static const enum gs_metric ms[] = {GS_M_PCI_BASE_CLASS, GS_M_PCI_SUB_CLASS};
    nvmlPciInfoExt_v1_t pci;

    if (c->lost || !c->b->fn.pci_ext || !need_any(c, ms, COUNT_OF(ms)))
        return;
    memset(&pci, 0, sizeof pci);
    pci.version = nvmlPciInfoExt_v1;
    if (!ok_n(c, c->b->fn.pci_ext(c->h, &pci), ms, COUNT_OF(ms)))
        return;
    gs_gpu_set(c->g, GS_M_PCI_BASE_CLASS, pci.baseClass);
    gs_gpu_set(c->g, GS_M_PCI_SUB_CLASS, pci.subClass);
}

/* Inforom versions: the image, then the OEM, ECC and power objects (boards without an
 * inforom, and objects a board lacks, answer NOT_SUPPORTED). */
static void rd_inforom(struct rd *c)
{
    static const unsigned objs[] = {NVML_INFOROM_OEM, NVML_INFOROM_ECC, NVML_INFOROM_POWER};
    const struct nvml_fns *f = &c->b->fn;
    struct gs_gpu *g = c->g;

    for (int i = 0; i <= GS_T_INFOROM_PWR - GS_T_INFOROM_IMAGE && !c->lost; i++) {
        char buf[NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE + 1];
        enum gs_text t = (enum gs_text)(GS_T_INFOROM_IMAGE + i);
        nvmlReturn_t r;

        if ((i == 0 ? !f->inforom_image : !f->inforom_version) || !need_t(c, t))
            continue;
        memset(buf, 0, sizeof buf);
        /* one byte of the buffer stays NUL whatever the driver writes */
        r = i == 0 ? f->inforom_image(c->h, buf, sizeof buf - 1)
                   : f->inforom_version(c->h, objs[i - 1], buf, sizeof buf - 1);
        if (ok(c, &g->tst[t], r)) {
            memcpy(g->text[t], buf, sizeof buf);
            g->tst[t] = GS_ST_OK;
        }
    }
}

static void read_identity(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;
    int major = 0, minor = 0;
    enum gs_metric cc[2] = {GS_M_CC_MAJOR, GS_M_CC_MINOR};

    rd_text(c, GS_T_NAME, f->name);
    rd_text(c, GS_T_UUID, f->uuid);
    rd_text(c, GS_T_SERIAL, f->serial);
    rd_text(c, GS_T_VBIOS, f->vbios);
    rd_pci(c);
    rd_pci_class(c);
    rd_inforom(c);
    rd_uint(c, GS_M_MINOR, f->minor, 1);
    rd_uint(c, GS_M_ARCH, f->arch, 1);
    if (c->g->st[GS_M_ARCH] == GS_ST_OK && c->g->v[GS_M_ARCH] == (double)NVML_DEVICE_ARCH_UNKNOWN)
        c->g->st[GS_M_ARCH] = GS_ST_NA;
    rd_uint(c, GS_M_BRAND, f->brand, 1);
    /* GSP firmware runs or not from driver load on; NVML says to read both as booleans */
    rd_uint2(c, GS_M_GSP_MODE, GS_M_GSP_MODE_DEFAULT, f->gsp_mode, 1);
    for (int i = 0; i < 2; i++) {
        enum gs_metric m = i ? GS_M_GSP_MODE_DEFAULT : GS_M_GSP_MODE;
        if (gs_gpu_has(c->g, m))
            c->g->v[m] = c->g->v[m] != 0;
    }
    if (!c->lost && f->cuda_cc && need_any(c, cc, 2) &&
        ok_n(c, f->cuda_cc(c->h, &major, &minor), cc, 2)) {
        gs_gpu_set(c->g, GS_M_CC_MAJOR, major);
        gs_gpu_set(c->g, GS_M_CC_MINOR, minor);
    }
}

/* nvmlDeviceValidateInforom reads the inforom from flash and checks its checksums: SUCCESS is
 * valid, CORRUPTED_INFOROM invalid. Slow cadence: the answer changes only if the flash does. */
static void rd_inforom_valid(struct rd *c)
{
    nvmlReturn_t r;

    if (c->lost || !c->b->fn.inforom_validate || !need_m(c, GS_M_INFOROM_VALID))
        return;
    r = c->b->fn.inforom_validate(c->h);
    if (r == NVML_ERROR_CORRUPTED_INFOROM)
        gs_gpu_set(c->g, GS_M_INFOROM_VALID, 0);
    else if (ok(c, &c->g->st[GS_M_INFOROM_VALID], r))
        gs_gpu_set(c->g, GS_M_INFOROM_VALID, 1);
}

static void read_slow(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;

    rd_uint(c, GS_M_POWER_LIMIT, f->power_limit, 1e-3);
    rd_uint(c, GS_M_POWER_DEFAULT_LIMIT, f->power_default, 1e-3);
    rd_uint2(c, GS_M_POWER_MIN_LIMIT, GS_M_POWER_MAX_LIMIT, f->power_constraints, 1e-3);
    rd_uint_arg(c, GS_M_CLOCK_MAX_GR, f->max_clock, NVML_CLOCK_GRAPHICS, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_MAX_SM, f->max_clock, NVML_CLOCK_SM, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_MAX_MEM, f->max_clock, NVML_CLOCK_MEM, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_MAX_VIDEO, f->max_clock, NVML_CLOCK_VIDEO, 1e6);
    rd_uint_arg(c, GS_M_TEMP_SHUTDOWN, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, 1);
    rd_uint_arg(c, GS_M_TEMP_SLOWDOWN, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, 1);
    rd_uint_arg(c, GS_M_TEMP_GPU_MAX, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_GPU_MAX, 1);
    rd_uint_arg(c, GS_M_TEMP_MEM_MAX, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_MEM_MAX, 1);
    rd_uint2(c, GS_M_ECC_MODE, GS_M_ECC_MODE_PENDING, f->ecc_mode, 1);
    rd_uint(c, GS_M_PCIE_GEN_MAX, f->pcie_gen_max, 1);
    rd_uint(c, GS_M_PCIE_GEN_GPU_MAX, f->pcie_gen_gpumax, 1);
    rd_uint(c, GS_M_PCIE_WIDTH_MAX, f->pcie_width_max, 1);
    rd_ull(c, GS_M_THROTTLE_SUPPORTED, f->reasons_supported, 1);
    rd_uint(c, GS_M_PERSISTENCE, f->persistence, 1);
    rd_uint(c, GS_M_COMPUTE_MODE, f->compute_mode, 1);
    rd_uint2(c, GS_M_MIG_MODE, GS_M_MIG_MODE_PENDING, f->mig_mode, 1);
    rd_inforom_valid(c);
    rd_uint(c, GS_M_DISPLAY_ATTACHED, f->display_mode, 1); /* a monitor on a connector */
    rd_uint(c, GS_M_DISPLAY_ACTIVE, f->display_active, 1); /* a display initialised */
    rd_uint(c, GS_M_ACCOUNTING, f->accounting_mode, 1);
    rd_uint(c, GS_M_ACCOUNTING_BUFFER, f->accounting_buffer, 1);
}

/* Memory of a GPU or MIG handle: _v2 (reserved split out) unless the library lacks it or
 * rejects our version, then v1, whose `used` includes the reserved memory. */
static nvmlReturn_t mem_info(struct gs_backend *b, nvmlDevice_t h, unsigned long long out[4],
                             int *has_reserved)
{
    nvmlReturn_t r = NVML_ERROR_FUNCTION_NOT_FOUND;

    if (b->fn.memory_v2 && !b->mem_v1_only) {
        nvmlMemory_v2_t m;
        memset(&m, 0, sizeof m);
        m.version = nvmlMemory_v2;
        r = b->fn.memory_v2(h, &m);
        if (r == NVML_SUCCESS) {
            out[0] = m.total, out[1] = m.used, out[2] = m.free, out[3] = m.reserved;
            *has_reserved = 1;
            return r;
        }
        if (r == NVML_ERROR_ARGUMENT_VERSION_MISMATCH || r == NVML_ERROR_FUNCTION_NOT_FOUND)
            b->mem_v1_only = 1; /* this library will not take v2; stop asking */
        else if (r != NVML_ERROR_NOT_SUPPORTED)
            return r;
    }
    if (b->fn.memory) {
        nvmlMemory_t m;
        memset(&m, 0, sizeof m);
        r = b->fn.memory(h, &m);
        if (r == NVML_SUCCESS) {
            out[0] = m.total, out[1] = m.used, out[2] = m.free, out[3] = 0;
            *has_reserved = 0;
        }
    }
    return r;
}

static void rd_memory(struct rd *c)
{
    static const enum gs_metric ms[] = {GS_M_MEM_TOTAL, GS_M_MEM_USED, GS_M_MEM_FREE,
                                        GS_M_MEM_RESERVED};
    unsigned long long v[4];
    int has_reserved = 0;

    if (c->lost || (!c->b->fn.memory_v2 && !c->b->fn.memory) || !need_any(c, ms, 4))
        return;
    if (!ok_n(c, mem_info(c->b, c->h, v, &has_reserved), ms, 4))
        return;
    gs_gpu_set(c->g, GS_M_MEM_TOTAL, (double)v[0]);
    gs_gpu_set(c->g, GS_M_MEM_USED, (double)v[1]);
    gs_gpu_set(c->g, GS_M_MEM_FREE, (double)v[2]);
    if (has_reserved)
        gs_gpu_set(c->g, GS_M_MEM_RESERVED, (double)v[3]);
    else
        c->g->st[GS_M_MEM_RESERVED] = GS_ST_NA;
}

static void rd_temperature(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;

    if (c->lost || !need_m(c, GS_M_TEMP_GPU))
        return;
    if (f->temperature_v) {
        nvmlTemperature_t t;
        nvmlReturn_t r;
        memset(&t, 0, sizeof t);
        t.version = nvmlTemperature_v1;
        t.sensorType = NVML_TEMPERATURE_GPU;
        r = f->temperature_v(c->h, &t);
        if (r == NVML_SUCCESS) {
            gs_gpu_set(c->g, GS_M_TEMP_GPU, t.temperature);
            return;
        }
        if (gs_nvml_status(r) != GS_ST_NA || !f->temperature) {
            ok(c, &c->g->st[GS_M_TEMP_GPU], r);
            return;
        }
    }
    rd_uint_arg(c, GS_M_TEMP_GPU, f->temperature, NVML_TEMPERATURE_GPU, 1);
}

/* Margin to the slowdown temperature (555+), version 1. Signed: a GPU past its limit reads < 0.
 * It is not slowdown threshold - current temperature; the driver computes it from its own limit. */
static void rd_temp_margin(struct rd *c)
{
    nvmlMarginTemperature_t m;

    if (c->lost || !c->b->fn.temp_margin || !need_m(c, GS_M_TEMP_MARGIN))
        return;
    memset(&m, 0, sizeof m);
    m.version = nvmlMarginTemperature_v1;
    if (ok(c, &c->g->st[GS_M_TEMP_MARGIN], c->b->fn.temp_margin(c->h, &m)))
        gs_gpu_set(c->g, GS_M_TEMP_MARGIN, m.marginTemperature);
}

/* Field values in one call (§6): memory temperature, average/instant power, and the time
 * spent in each clock-event reason (ns). */
static void rd_fields(struct rd *c)
{
    static const struct {
        unsigned id;
        enum gs_metric m;
        double scale;
    } fields[] = {
        {NVML_FI_DEV_MEMORY_TEMP, GS_M_TEMP_MEM, 1},
        {NVML_FI_DEV_POWER_AVERAGE, GS_M_POWER_AVERAGE, 1e-3},
        {NVML_FI_DEV_POWER_INSTANT, GS_M_POWER_INSTANT, 1e-3},
        {NVML_FI_DEV_PERF_POLICY_POWER, GS_M_THROTTLE_NS_SW_POWER, 1e-9},
        {NVML_FI_DEV_PERF_POLICY_SYNC_BOOST, GS_M_THROTTLE_NS_SYNC_BOOST, 1e-9},
        {NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN, GS_M_THROTTLE_NS_SW_THERMAL, 1e-9},
        {NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN, GS_M_THROTTLE_NS_HW_THERMAL, 1e-9},
        {NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN, GS_M_THROTTLE_NS_HW_POWER_BRAKE,
         1e-9},
    };
    nvmlFieldValue_t fv[COUNT_OF(fields)];
    enum gs_metric ms[COUNT_OF(fields)];
    nvmlReturn_t r;

    if (c->lost || !c->b->fn.field_values)
        return;
    memset(fv, 0, sizeof fv);
    for (size_t i = 0; i < COUNT_OF(fields); i++) {
        fv[i].fieldId = fields[i].id;
        fv[i].scopeId = 0; /* the GPU itself, not the module (power fields) */
        ms[i] = fields[i].m;
    }
    if (!need_any(c, ms, COUNT_OF(fields)))
        return;
    r = c->b->fn.field_values(c->h, (int)COUNT_OF(fields), fv);
    if (!ok_n(c, r, ms, COUNT_OF(fields)))
        return;
    for (size_t i = 0; i < COUNT_OF(fields); i++) {
        double v;
        uint8_t *st = &c->g->st[fields[i].m];
        r = fv[i].nvmlReturn;
        /* An id newer than the driver fails per field, with INVALID_ARGUMENT or NOT_FOUND on
         * some drivers: that is "absent" too. */
        if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_NOT_FOUND)
            r = NVML_ERROR_NOT_SUPPORTED;
        if (!ok(c, st, r))
            continue;
        if (gs_nvml_field_double(&fv[i], &v) == GS_OK)
            gs_gpu_set(c->g, fields[i].m, v * fields[i].scale);
        else
            *st = GS_ST_NA;
    }
}

/* Encoder sessions (count, trailing average FPS, latency in us) and the JPEG and optical-flow
 * engines (percent over the driver's sampling period, like the encoder's). */
static void rd_video_engines(struct rd *c)
{
    static const enum gs_metric enc_ms[] = {GS_M_ENC_SESSIONS, GS_M_ENC_FPS, GS_M_ENC_LATENCY};
    const struct nvml_fns *f = &c->b->fn;
    unsigned int n = 0, fps = 0, lat_us = 0, period = 0;

    if (!c->lost && f->encoder_stats && need_any(c, enc_ms, COUNT_OF(enc_ms)) &&
        ok_n(c, f->encoder_stats(c->h, &n, &fps, &lat_us), enc_ms, COUNT_OF(enc_ms))) {
        gs_gpu_set(c->g, GS_M_ENC_SESSIONS, n);
        gs_gpu_set(c->g, GS_M_ENC_FPS, fps);
        gs_gpu_set(c->g, GS_M_ENC_LATENCY, lat_us * 1e-6);
    }
    if (!c->lost && f->jpg_util && need_m(c, GS_M_UTIL_JPEG) &&
        ok(c, &c->g->st[GS_M_UTIL_JPEG], f->jpg_util(c->h, &n, &period)))
        gs_gpu_set(c->g, GS_M_UTIL_JPEG, n / 100.0);
    if (!c->lost && f->ofa_util && need_m(c, GS_M_UTIL_OFA) &&
        ok(c, &c->g->st[GS_M_UTIL_OFA], f->ofa_util(c->h, &n, &period)))
        gs_gpu_set(c->g, GS_M_UTIL_OFA, n / 100.0);
}

static void read_basic(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;
    static const enum gs_metric util_ms[] = {GS_M_UTIL_GPU, GS_M_UTIL_MEM};
    static const enum gs_metric bar1_ms[] = {GS_M_BAR1_TOTAL, GS_M_BAR1_USED, GS_M_BAR1_FREE};
    unsigned int v = 0, period = 0;

    if (!c->lost && f->utilization && need_any(c, util_ms, 2)) {
        nvmlUtilization_t u = {0, 0};
        if (ok_n(c, f->utilization(c->h, &u), util_ms, 2)) {
            gs_gpu_set(c->g, GS_M_UTIL_GPU, u.gpu / 100.0);
            gs_gpu_set(c->g, GS_M_UTIL_MEM, u.memory / 100.0);
        }
    }
    if (!c->lost && f->encoder && need_m(c, GS_M_UTIL_ENC) &&
        ok(c, &c->g->st[GS_M_UTIL_ENC], f->encoder(c->h, &v, &period)))
        gs_gpu_set(c->g, GS_M_UTIL_ENC, v / 100.0);
    if (!c->lost && f->decoder && need_m(c, GS_M_UTIL_DEC) &&
        ok(c, &c->g->st[GS_M_UTIL_DEC], f->decoder(c->h, &v, &period)))
        gs_gpu_set(c->g, GS_M_UTIL_DEC, v / 100.0);
    rd_video_engines(c);
    rd_memory(c);
    if (!c->lost && f->bar1 && need_any(c, bar1_ms, 3)) {
        nvmlBAR1Memory_t m;
        memset(&m, 0, sizeof m);
        if (ok_n(c, f->bar1(c->h, &m), bar1_ms, 3)) {
            gs_gpu_set(c->g, GS_M_BAR1_TOTAL, (double)m.bar1Total);
            gs_gpu_set(c->g, GS_M_BAR1_USED, (double)m.bar1Used);
            gs_gpu_set(c->g, GS_M_BAR1_FREE, (double)m.bar1Free);
        }
    }
    rd_temperature(c);
    rd_temp_margin(c);
    rd_uint(c, GS_M_FAN, f->fan, 0.01);
    rd_uint(c, GS_M_POWER_DRAW, f->power, 1e-3);
    rd_uint(c, GS_M_POWER_ENFORCED_LIMIT, f->power_enforced, 1e-3);
    rd_ull(c, GS_M_ENERGY, f->energy, 1e-3);
    rd_uint_arg(c, GS_M_CLOCK_GR, f->clock, NVML_CLOCK_GRAPHICS, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_SM, f->clock, NVML_CLOCK_SM, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_MEM, f->clock, NVML_CLOCK_MEM, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_VIDEO, f->clock, NVML_CLOCK_VIDEO, 1e6);
    rd_uint(c, GS_M_PSTATE, f->pstate, 1);
    if (c->g->st[GS_M_PSTATE] == GS_ST_OK && c->g->v[GS_M_PSTATE] >= NVML_PSTATE_UNKNOWN)
        c->g->st[GS_M_PSTATE] = GS_ST_NA;
    rd_ull(c, GS_M_THROTTLE_ACTIVE, f->reasons, 1);
    rd_uint(c, GS_M_PCIE_GEN, f->pcie_gen, 1);
    rd_uint(c, GS_M_PCIE_WIDTH, f->pcie_width, 1);
    rd_uint(c, GS_M_PCIE_REPLAY, f->pcie_replay, 1);
    rd_fields(c);
}

/* NVML says KB/s; whether K is 1000 or 1024 is not documented (§6). We take 1024 (the
 * binary reading) and say so in docs/backend.md; this is the one place to change it. */
static void read_pcie_tput(struct rd *c)
{
    rd_uint_arg(c, GS_M_PCIE_TX, c->b->fn.pcie_tput, NVML_PCIE_UTIL_TX_BYTES, 1024);
    rd_uint_arg(c, GS_M_PCIE_RX, c->b->fn.pcie_tput, NVML_PCIE_UTIL_RX_BYTES, 1024);
}

static void read_ecc(struct rd *c)
{
    static const enum gs_metric totals[2][2] = {{GS_M_ECC_CORR_VOL, GS_M_ECC_CORR_AGG},
                                                {GS_M_ECC_UNCORR_VOL, GS_M_ECC_UNCORR_AGG}};
    const struct nvml_fns *f = &c->b->fn;
    struct gs_gpu *g = c->g;

    /* Counters need ECC on; a board without ECC (GeForce) or with it off gets no counters. */
    if (g->st[GS_M_ECC_MODE] == GS_ST_NA ||
        (g->st[GS_M_ECC_MODE] == GS_ST_OK && g->v[GS_M_ECC_MODE] == 0))
        return;
    for (unsigned t = 0; t < 2; t++)
        for (unsigned k = 0; k < 2; k++) {
            unsigned long long v = 0;
            if (c->lost)
                return;
            if (f->ecc_total && ok(c, &g->st[totals[t][k]], f->ecc_total(c->h, t, k, &v)))
                gs_gpu_set(g, totals[t][k], (double)v);
            for (unsigned loc = 0; f->ecc_loc && loc < GS_ECC_LOCATIONS && !c->lost; loc++) {
                nvmlReturn_t r;
                if (c->d->ecc_loc_skip[t][k][loc])
                    continue;
                r = f->ecc_loc(c->h, t, k, loc, &v);
                if (ok(c, &g->ecc_loc_st[t][k][loc], r)) {
                    g->ecc_loc[t][k][loc] = v;
                    g->ecc_loc_st[t][k][loc] = GS_ST_OK;
                } else if (gs_nvml_status(r) == GS_ST_NA) {
                    c->d->ecc_loc_skip[t][k][loc] = 1; /* a location does not come back */
                }
            }
        }
}

static void read_health(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;
    static const enum gs_metric remap_ms[] = {GS_M_REMAP_CORR, GS_M_REMAP_UNCORR,
                                              GS_M_REMAP_PENDING, GS_M_REMAP_FAILURE};

    read_ecc(c);
    for (unsigned cause = 0; cause < 2 && f->retired && !c->lost; cause++) {
        enum gs_metric m = cause == 0 ? GS_M_RETIRED_SBE : GS_M_RETIRED_DBE;
        unsigned int n = 0;
        nvmlReturn_t r = f->retired(c->h, cause, &n, NULL);
        /* With room for 0 addresses the driver answers INSUFFICIENT_SIZE and the count. */
        if (r == NVML_ERROR_INSUFFICIENT_SIZE)
            r = NVML_SUCCESS;
        if (ok(c, &c->g->st[m], r))
            gs_gpu_set(c->g, m, n);
    }
    rd_uint(c, GS_M_RETIRED_PENDING, f->retired_pending, 1);
    if (!c->lost && f->remapped) {
        unsigned int a = 0, b = 0, p = 0, x = 0;
        if (ok_n(c, f->remapped(c->h, &a, &b, &p, &x), remap_ms, 4)) {
            gs_gpu_set(c->g, GS_M_REMAP_CORR, a);
            gs_gpu_set(c->g, GS_M_REMAP_UNCORR, b);
            gs_gpu_set(c->g, GS_M_REMAP_PENDING, p);
            gs_gpu_set(c->g, GS_M_REMAP_FAILURE, x);
        }
    }
    if (c->d->xid_reg == 1)
        gs_gpu_set(c->g, GS_M_XID_LAST, (double)c->d->xid_last);
}

/* The placement of m's GPU instance: from the cache when its MIG device was seen before, else
 * read through the parent's handle (a privileged call) and kept unless it failed oddly. */
static void read_mig_place(struct rd *c, struct gs_mig *m)
{
    const struct nvml_fns *f = &c->b->fn;
    struct nvml_dev *d = c->d;
    nvmlGpuInstance_t gi = NULL;
    nvmlGpuInstanceInfo_t info;
    struct mig_place *p;
    nvmlReturn_t r;

    for (unsigned i = 0; i < d->n_place; i++)
        if (strcmp(d->place[i].uuid, m->uuid) == 0) {
            p = &d->place[i];
            goto done;
        }
    memset(&info, 0, sizeof info);
    r = f->gi_by_id(c->h, m->gi_id, &gi);
    if (r == NVML_SUCCESS)
        r = f->gi_info(gi, &info);
    if (!ok(c, &m->place_st, r)) {
        if (m->place_st == GS_ST_ERROR || !m->uuid[0]) /* try again next time */
            return;
    } else {
        m->place_st = GS_ST_OK;
    }
    if (d->n_place == GS_MIG_MAX) /* instances reconfigured: start the cache over */
        d->n_place = 0;
    p = &d->place[d->n_place++];
    memset(p, 0, sizeof *p);
    snprintf(p->uuid, sizeof p->uuid, "%s", m->uuid);
    p->st = m->place_st;
    p->start = info.placement.start;
    p->size = info.placement.size;
    p->profile_id = info.profileId;
done:
    m->place_st = p->st;
    m->place_start = p->start;
    m->place_size = p->size;
    m->profile_id = p->profile_id;
}

static void read_mig_device(struct rd *c, nvmlDevice_t mh, unsigned slot, struct gs_mig *m)
{
    const struct nvml_fns *f = &c->b->fn;
    char buf[GS_STR_LEN];
    unsigned int id = 0;
    unsigned long long v[4];
    int has_reserved = 0;
    nvmlReturn_t r;

    memset(m, 0, sizeof *m);
    m->index = slot;
    m->gi_id = m->ci_id = NVML_MIG_ID_NONE;
    memset(buf, 0, sizeof buf);
    if (f->name && ok(c, NULL, f->name(mh, buf, sizeof buf)))
        copy_text(m->name, buf, sizeof buf);
    memset(buf, 0, sizeof buf);
    if (!c->lost && f->uuid && ok(c, NULL, f->uuid(mh, buf, sizeof buf)))
        copy_text(m->uuid, buf, sizeof buf);
    if (!c->lost && f->gi_id && ok(c, NULL, f->gi_id(mh, &id)))
        m->gi_id = id;
    if (!c->lost && f->ci_id && ok(c, NULL, f->ci_id(mh, &id)))
        m->ci_id = id;
    if (c->lost)
        return;
    r = mem_info(c->b, mh, v, &has_reserved);
    if (ok(c, &m->mem_st, r)) {
        m->mem_st = GS_ST_OK;
        m->mem_total_bytes = v[0];
        m->mem_used_bytes = v[1];
        m->mem_free_bytes = v[2];
    }
    if (!c->lost && f->bar1) {
        nvmlBAR1Memory_t b1;

        memset(&b1, 0, sizeof b1);
        if (ok(c, &m->bar1_st, f->bar1(mh, &b1))) {
            m->bar1_st = GS_ST_OK;
            m->bar1_total_bytes = b1.bar1Total;
            m->bar1_used_bytes = b1.bar1Used;
        }
    }
    if (!c->lost && f->attributes) {
        nvmlDeviceAttributes_t a;

        memset(&a, 0, sizeof a);
        if (ok(c, &m->attr_st, f->attributes(mh, &a))) {
            m->attr_st = GS_ST_OK;
            m->sm_count = a.multiprocessorCount;
            m->ce_count = a.sharedCopyEngineCount;
            m->enc_count = a.sharedEncoderCount;
            m->dec_count = a.sharedDecoderCount;
            m->ofa_count = a.sharedOfaCount;
            m->jpg_count = a.sharedJpegCount;
        }
    }
    if (!c->lost && f->gi_by_id && f->gi_info && m->gi_id != NVML_MIG_ID_NONE)
        read_mig_place(c, m);
}

static void read_mig(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;
    unsigned int max = 0;

    /* The mode can change with a GPU reset: read it fresh rather than from the slow cache. */
    rd_uint2(c, GS_M_MIG_MODE, GS_M_MIG_MODE_PENDING, f->mig_mode, 1);
    if (c->lost || !gs_gpu_has(c->g, GS_M_MIG_MODE) ||
        c->g->v[GS_M_MIG_MODE] != NVML_DEVICE_MIG_ENABLE || !f->mig_max || !f->mig_handle)
        return;
    if (!ok(c, NULL, f->mig_max(c->h, &max)))
        return;
    for (unsigned i = 0; i < max && c->g->n_mig < GS_MIG_MAX && !c->lost; i++) {
        nvmlDevice_t mh = NULL;
        nvmlReturn_t r = f->mig_handle(c->h, i, &mh);
        if (r == NVML_ERROR_NOT_FOUND) /* an empty slot */
            continue;
        if (!ok(c, NULL, r) || !mh)
            continue;
        read_mig_device(c, mh, i, &c->g->mig[c->g->n_mig]);
        if (!c->lost)
            c->g->n_mig++;
    }
}

/* ---- GPM -------------------------------------------------------------------------------- */

/* Learns once whether the GPU does GPM and allocates its two samples. */
static int gpm_ready(struct gs_backend *b, struct nvml_dev *d, int *lost)
{
    const struct nvml_fns *f = &b->fn;
    nvmlGpmSupport_t sup;
    nvmlReturn_t r;

    if (d->gpm != 0)
        return d->gpm > 0;
    if (!f->gpm_support || !f->gpm_alloc || !f->gpm_free || !f->gpm_get || !f->gpm_metrics) {
        d->gpm = -1;
        return 0;
    }
    memset(&sup, 0, sizeof sup);
    sup.version = NVML_GPM_SUPPORT_VERSION;
    r = f->gpm_support(d->h, &sup);
    if (r == NVML_ERROR_GPU_IS_LOST) {
        *lost = 1; /* ask again when it is back */
        return 0;
    }
    if (r != NVML_SUCCESS || !sup.isSupportedDevice) {
        d->gpm = -1;
        return 0;
    }
    if (!b->gpm_req) {
        b->gpm_req = calloc(1, sizeof *b->gpm_req);
        if (!b->gpm_req)
            return 0; /* try again next cycle */
    }
    if (f->gpm_alloc(&d->gpm_s[0]) != NVML_SUCCESS) {
        d->gpm_s[0] = NULL;
        d->gpm = -1;
        return 0;
    }
    if (f->gpm_alloc(&d->gpm_s[1]) != NVML_SUCCESS) {
        f->gpm_free(d->gpm_s[0]);
        d->gpm_s[0] = d->gpm_s[1] = NULL;
        d->gpm = -1;
        return 0;
    }
    d->gpm = 1;
    return 1;
}

/* Takes the first sample of a pair. */
static nvmlReturn_t gpm_first(struct gs_backend *b, struct nvml_dev *d)
{
    int64_t t = gs_clock_mono_ns();
    nvmlReturn_t r = b->fn.gpm_get(d->h, d->gpm_s[0]);
    if (r == NVML_SUCCESS) {
        d->gpm_prev = 0;
        d->gpm_have = 1;
        d->gpm_t_ns = t;
    }
    return r;
}

static void read_gpm(struct rd *c)
{
    static const struct {
        unsigned id;
        enum gs_metric m;
    } metrics[] = {
        {NVML_GPM_METRIC_SM_UTIL, GS_M_GPM_SM_ACTIVE},
        {NVML_GPM_METRIC_SM_OCCUPANCY, GS_M_GPM_SM_OCCUPANCY},
        {NVML_GPM_METRIC_ANY_TENSOR_UTIL, GS_M_GPM_TENSOR_ACTIVE},
        {NVML_GPM_METRIC_DRAM_BW_UTIL, GS_M_GPM_DRAM_ACTIVE},
        {NVML_GPM_METRIC_GRAPHICS_UTIL, GS_M_GPM_GR_ACTIVE}, /* DCGM_FI_PROF_GR_ENGINE_ACTIVE */
    };
    struct gs_backend *b = c->b;
    struct nvml_dev *d = c->d;
    nvmlGpmMetricsGet_t *q;
    nvmlGpmSample_t cur;
    int64_t now;
    nvmlReturn_t r;

    if (c->lost || !gpm_ready(b, d, &c->lost))
        return;
    if (!d->gpm_have) { /* the first of a pair: metrics come from the next cycle on */
        ok(c, NULL, gpm_first(b, d));
        return;
    }
    now = gs_clock_mono_ns();
    if (now - d->gpm_t_ns < NVML_GPM_MIN_NS)
        return; /* too close to the previous sample: absent, keep the older one */
    cur = d->gpm_s[d->gpm_prev ^ 1];
    r = b->fn.gpm_get(c->h, cur);
    if (!ok(c, &c->g->st[GS_M_GPM_SM_ACTIVE], r))
        return;
    q = b->gpm_req;
    memset(q, 0, offsetof(nvmlGpmMetricsGet_t, metrics) + COUNT_OF(metrics) * sizeof q->metrics[0]);
    q->version = NVML_GPM_METRICS_GET_VERSION;
    q->numMetrics = COUNT_OF(metrics); /* far below the 98 of the oldest drivers */
    q->sample1 = d->gpm_s[d->gpm_prev];
    q->sample2 = cur;
    for (size_t i = 0; i < COUNT_OF(metrics); i++)
        q->metrics[i].metricId = metrics[i].id;
    r = b->fn.gpm_metrics(q);
    /* The new sample is the start of the next interval whatever MetricsGet said. */
    d->gpm_prev ^= 1;
    d->gpm_t_ns = now;
    if (!ok(c, &c->g->st[GS_M_GPM_SM_ACTIVE], r)) {
        for (size_t i = 1; i < COUNT_OF(metrics); i++)
            c->g->st[metrics[i].m] = c->g->st[GS_M_GPM_SM_ACTIVE];
        return;
    }
    for (size_t i = 0; i < COUNT_OF(metrics); i++) {
        if (q->metrics[i].nvmlReturn == NVML_SUCCESS)
            gs_gpu_set(c->g, metrics[i].m, q->metrics[i].value / 100.0);
        else
            c->g->st[metrics[i].m] = gs_nvml_status(q->metrics[i].nvmlReturn);
    }
}

/* ---- NVLink ----------------------------------------------------------------------------- */

static const enum gs_metric nvl_metrics[] = {
    GS_M_NVLINK_LINKS,    GS_M_NVLINK_LINKS_ACTIVE, GS_M_NVLINK_SPEED,    GS_M_NVLINK_TX,
    GS_M_NVLINK_RX,       GS_M_NVLINK_TX_BYTES,     GS_M_NVLINK_RX_BYTES, GS_M_NVLINK_REPLAY,
    GS_M_NVLINK_RECOVERY, GS_M_NVLINK_CRC_FLIT,     GS_M_NVLINK_CRC_DATA,
};

/* The speed field of link l (NVML has per-link ids for links 0..11 only), 0 past them. */
GS_TESTABLE unsigned gs_nvml_nvlink_speed_field(unsigned l)
{
    if (l <= 5)
        return NVML_FI_DEV_NVLINK_SPEED_MBPS_L0 + l;
    if (l <= 11)
        return NVML_FI_DEV_NVLINK_SPEED_MBPS_L6 + (l - 6);
    return 0;
}

/* One field's value as an unsigned count, or -1 when it failed (status in *st). */
static int nvl_field_u64(struct rd *c, const nvmlFieldValue_t *fv, uint8_t *st,
                         unsigned long long *out)
{
    double v;
    nvmlReturn_t r = fv->nvmlReturn;

    if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_NOT_FOUND)
        r = NVML_ERROR_NOT_SUPPORTED; /* an id or a scope this driver does not know */
    if (!ok(c, st, r))
        return -1;
    if (gs_nvml_field_double(fv, &v) != GS_OK || !(v >= 0 && v < 18446744073709551616.0)) {
        *st = GS_ST_NA;
        return -1;
    }
    *out = (unsigned long long)v;
    return 0;
}

/* Finds the GPU's links: nvmlDeviceGetNvLinkState for link 0, 1, ... until the driver refuses
 * one (INVALID_ARGUMENT past the last link; NOT_SUPPORTED on a GPU without NVLink, e.g. a PCIe
 * card), then reads what does not change while the links stay trained: each link's speed
 * (fields 84..89, 132..137, and 90 for all) and the PCI bus id of its far end. Once, and again
 * on GS_WANT_STATIC. */
static void nvl_probe(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;
    struct nvml_dev *d = c->d;
    nvmlFieldValue_t fv[1 + 12];
    unsigned n = 0, nf = 0;

    d->nvl = -1;
    d->nvl_n = 0;
    d->nvl_speed_st = GS_ST_NA;
    memset(d->nvl_static, 0, sizeof d->nvl_static);
    if (c->lost || !f->nvlink_state)
        return;
    for (unsigned l = 0; l < GS_NVLINK_MAX; l++) {
        unsigned int st = 0;
        nvmlReturn_t r = f->nvlink_state(c->h, l, &st);
        if (r == NVML_ERROR_GPU_IS_LOST) {
            c->lost = 1;
            d->nvl = 0; /* probe again when it is back */
            return;
        }
        if (r != NVML_SUCCESS)
            break;
        n = l + 1;
    }
    if (n == 0)
        return;
    d->nvl = 1;
    d->nvl_n = n;
    if (f->field_values) {
        memset(fv, 0, sizeof fv);
        fv[nf++].fieldId = NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON;
        for (unsigned l = 0; l < n && gs_nvml_nvlink_speed_field(l); l++)
            fv[nf++].fieldId = gs_nvml_nvlink_speed_field(l);
        if (ok(c, &d->nvl_speed_st, f->field_values(c->h, (int)nf, fv))) {
            unsigned long long mbps;
            if (nvl_field_u64(c, &fv[0], &d->nvl_speed_st, &mbps) == 0 && mbps > 0) {
                d->nvl_speed_bps = (double)mbps * 1e6;
                d->nvl_speed_st = GS_ST_OK;
            } else if (d->nvl_speed_st == GS_ST_OK) {
                d->nvl_speed_st = GS_ST_NA; /* 0: links down or speeds differ */
            }
            for (unsigned k = 1; k < nf; k++) {
                struct gs_nvlink *lk = &d->nvl_static[k - 1];
                if (nvl_field_u64(c, &fv[k], &lk->speed_st, &mbps) == 0) {
                    lk->speed_bps = (double)mbps * 1e6;
                    lk->speed_st = GS_ST_OK;
                }
            }
        }
        /* links past 11 have no field of their own: the common speed is theirs */
        for (unsigned l = nf - 1; l < n && d->nvl_speed_st == GS_ST_OK; l++) {
            d->nvl_static[l].speed_bps = d->nvl_speed_bps;
            d->nvl_static[l].speed_st = GS_ST_OK;
        }
    }
    for (unsigned l = 0; l < n && f->nvlink_remote_pci && !c->lost; l++) {
        struct gs_nvlink *lk = &d->nvl_static[l];
        nvmlPciInfo_t pci;
        memset(&pci, 0, sizeof pci); /* the 68-byte struct of _v3 (§3) */
        if (!ok(c, &lk->remote_st, f->nvlink_remote_pci(c->h, l, &pci)))
            continue;
        if (pci.busId[0])
            snprintf(lk->remote_bus_id, sizeof lk->remote_bus_id, "%.*s", (int)sizeof pci.busId,
                     pci.busId);
        else
            snprintf(lk->remote_bus_id, sizeof lk->remote_bus_id, "%08X:%02X:%02X.0", pci.domain,
                     pci.bus, pci.device);
        lk->remote_st = GS_ST_OK;
    }
}

/* The data counters (fields 138/139, KiB) of every link and of all links (scopeId UINT_MAX), in
 * one call; the rate is the change of the total since the previous reading over the driver's
 * own timestamps (our clock when the driver gives none). Returns 0 when the totals were read. */
static int nvl_counters(struct rd *c, struct gs_gpu *g, unsigned long long tot[2], long long *ts_us)
{
    const struct nvml_fns *f = &c->b->fn;
    struct nvml_dev *d = c->d;
    nvmlFieldValue_t fv[2 * GS_NVLINK_MAX + 2];
    unsigned n = d->nvl_n, nf = 0;
    uint8_t st = GS_ST_NA;
    int have_sum = 1;

    if (!f->field_values)
        return -1;
    memset(fv, 0, sizeof fv);
    for (unsigned k = 0; k < 2; k++) {
        unsigned id =
            k ? NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX : NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
        fv[nf].fieldId = id;
        fv[nf++].scopeId = GS_NVML_SCOPE_ALL_LINKS;
        for (unsigned l = 0; l < n; l++) {
            fv[nf].fieldId = id;
            fv[nf++].scopeId = l;
        }
    }
    if (!ok(c, &st, f->field_values(c->h, (int)nf, fv))) {
        for (size_t i = 0; i < COUNT_OF(nvl_metrics); i++)
            if (nvl_metrics[i] == GS_M_NVLINK_TX_BYTES || nvl_metrics[i] == GS_M_NVLINK_RX_BYTES)
                g->st[nvl_metrics[i]] = st;
        return -1;
    }
    *ts_us = fv[0].timestamp;
    for (unsigned k = 0; k < 2; k++) {
        const nvmlFieldValue_t *base = &fv[k * (n + 1)];
        unsigned long long sum = 0, v;
        int all = 1;
        for (unsigned l = 0; l < n; l++) {
            struct gs_nvlink *lk = &g->nvlink[l];
            uint8_t lst = GS_ST_NA;
            if (nvl_field_u64(c, &base[1 + l], &lst, &v) != 0) {
                lk->tput_st = lst;
                all = 0;
                continue;
            }
            if (k == 0)
                lk->tx_bytes = v * 1024;
            else
                lk->rx_bytes = v * 1024;
            lk->tput_st = (k == 0 || lk->tput_st == GS_ST_OK) ? GS_ST_OK : lk->tput_st;
            sum += v;
        }
        st = GS_ST_NA;
        if (nvl_field_u64(c, &base[0], &st, &v) == 0)
            tot[k] = v * 1024;
        else if (all)
            tot[k] = sum * 1024; /* a driver without the all-links scope: the links' sum */
        else
            have_sum = 0;
        if (have_sum)
            gs_gpu_set(g, k ? GS_M_NVLINK_RX_BYTES : GS_M_NVLINK_TX_BYTES, (double)tot[k]);
        else
            g->st[k ? GS_M_NVLINK_RX_BYTES : GS_M_NVLINK_TX_BYTES] = st;
    }
    return have_sum ? 0 : -1;
}

/* The rate from two readings of the totals: absent on the first, after a counter went back
 * (reset, wrap) or when no time passed between them. */
static void nvl_rate(struct nvml_dev *d, struct gs_gpu *g, const unsigned long long tot[2],
                     long long ts_us, int64_t now)
{
    double dt = 0;

    if (d->nvl_have) {
        if (ts_us > 0 && d->nvl_prev_us > 0)
            dt = (double)(ts_us - d->nvl_prev_us) * 1e-6;
        else if (ts_us <= 0)
            dt = (double)(now - d->nvl_prev_ns) * 1e-9;
    }
    if (dt > 0 && tot[0] >= d->nvl_prev[0] && tot[1] >= d->nvl_prev[1]) {
        gs_gpu_set(g, GS_M_NVLINK_TX, (double)(tot[0] - d->nvl_prev[0]) / dt);
        gs_gpu_set(g, GS_M_NVLINK_RX, (double)(tot[1] - d->nvl_prev[1]) / dt);
    }
    /* keep the older reading when no time passed, so the next interval is not lost */
    if (!d->nvl_have || dt > 0 || tot[0] < d->nvl_prev[0] || tot[1] < d->nvl_prev[1]) {
        d->nvl_prev[0] = tot[0];
        d->nvl_prev[1] = tot[1];
        d->nvl_prev_us = ts_us;
        d->nvl_prev_ns = now;
        d->nvl_have = 1;
    }
}

/* Each link's error counters (nvmlDeviceGetNvLinkErrorCounter) and their sums (health). */
static void nvl_errors(struct rd *c, struct gs_gpu *g)
{
    static const enum gs_metric sums[GS_NVL_ERR__COUNT] = {
        GS_M_NVLINK_REPLAY, GS_M_NVLINK_RECOVERY, GS_M_NVLINK_CRC_FLIT, GS_M_NVLINK_CRC_DATA};
    static const unsigned counters[GS_NVL_ERR__COUNT] = {
        NVML_NVLINK_ERROR_DL_REPLAY, NVML_NVLINK_ERROR_DL_RECOVERY, NVML_NVLINK_ERROR_DL_CRC_FLIT,
        NVML_NVLINK_ERROR_DL_CRC_DATA};
    fn_d_nvl_err fn = c->b->fn.nvlink_errors;

    if (!fn)
        return;
    for (unsigned e = 0; e < GS_NVL_ERR__COUNT && !c->lost; e++) {
        unsigned long long sum = 0;
        unsigned got = 0;
        uint8_t st = GS_ST_NA;
        for (unsigned l = 0; l < c->d->nvl_n && !c->lost; l++) {
            struct gs_nvlink *lk = &g->nvlink[l];
            unsigned long long v = 0;
            if (!ok(c, &lk->err_st[e], fn(c->h, l, counters[e], &v))) {
                st = lk->err_st[e] != GS_ST_NA ? lk->err_st[e] : st;
                continue;
            }
            lk->err[e] = v;
            lk->err_st[e] = GS_ST_OK;
            sum += v;
            got++;
        }
        if (got)
            gs_gpu_set(g, sums[e], (double)sum);
        else
            g->st[sums[e]] = st;
    }
}

/* Links, their state, data counters and rate every cycle (one state call per link and one
 * field-value call); error counters with GS_WANT_HEALTH. */
static void read_nvlink(struct rd *c, unsigned want)
{
    struct nvml_dev *d = c->d;
    struct gs_gpu *g = c->g;
    unsigned long long tot[2] = {0, 0};
    long long ts_us = 0;
    unsigned active = 0;

    if (c->lost || !need_any(c, nvl_metrics, COUNT_OF(nvl_metrics)))
        return;
    if (d->nvl == 0 || (want & GS_WANT_STATIC))
        nvl_probe(c);
    if (c->lost || d->nvl <= 0)
        return;
    g->n_nvlink = d->nvl_n;
    memcpy(g->nvlink, d->nvl_static, d->nvl_n * sizeof g->nvlink[0]);
    gs_gpu_set(g, GS_M_NVLINK_LINKS, d->nvl_n);
    if (d->nvl_speed_st == GS_ST_OK)
        gs_gpu_set(g, GS_M_NVLINK_SPEED, d->nvl_speed_bps);
    else
        g->st[GS_M_NVLINK_SPEED] = d->nvl_speed_st;
    for (unsigned l = 0; l < d->nvl_n && !c->lost; l++) {
        unsigned int st = 0;
        if (ok(c, &g->st[GS_M_NVLINK_LINKS_ACTIVE], c->b->fn.nvlink_state(c->h, l, &st)) &&
            st == NVML_FEATURE_ENABLED) {
            g->nvlink[l].active = 1;
            active++;
        }
    }
    if (c->lost)
        return;
    gs_gpu_set(g, GS_M_NVLINK_LINKS_ACTIVE, active);
    if (nvl_counters(c, g, tot, &ts_us) == 0)
        nvl_rate(d, g, tot, ts_us, gs_clock_mono_ns());
    if (want & GS_WANT_HEALTH)
        nvl_errors(c, g);
}

/* GS_WANT_PCIE_TPUT at a GPU's first cycle: one counter reading now, so that this cycle has a
 * rate (begin then waits 20 ms once for all GPUs, like NVML's own PCIe window). */
static int nvl_prime(struct gs_backend *b, struct nvml_dev *d)
{
    struct gs_gpu *g = calloc(1, sizeof *g);
    struct rd c = {b, d, d->h, g, 0, NVML_SUCCESS, 0};
    unsigned long long tot[2] = {0, 0};
    long long ts_us = 0;
    int primed = 0;

    if (!g)
        return 0;
    if (d->nvl == 0)
        nvl_probe(&c);
    if (!c.lost && d->nvl > 0 && !d->nvl_have && nvl_counters(&c, g, tot, &ts_us) == 0) {
        nvl_rate(d, g, tot, ts_us, gs_clock_mono_ns());
        primed = 1;
    }
    free(g);
    return primed;
}

/* ---- GPM per MIG GPU instance ------------------------------------------------------------ */

static void mig_gpm_drop(struct gs_backend *b, struct mig_gpm *p)
{
    for (int k = 0; k < 2; k++)
        if (p->s[k])
            b->fn.gpm_free(p->s[k]);
    memset(p, 0, sizeof *p);
}

/* The sample pair of instance gi, made on first sight; NULL when no room or no memory. */
static struct mig_gpm *mig_gpm_slot(struct gs_backend *b, struct nvml_dev *d, unsigned gi)
{
    struct mig_gpm *p;

    for (unsigned i = 0; i < d->n_mgpm; i++)
        if (d->mgpm[i].gi == gi)
            return &d->mgpm[i];
    if (d->n_mgpm >= GS_MIG_MAX)
        return NULL;
    p = &d->mgpm[d->n_mgpm];
    memset(p, 0, sizeof *p);
    p->gi = gi;
    if (b->fn.gpm_alloc(&p->s[0]) != NVML_SUCCESS || b->fn.gpm_alloc(&p->s[1]) != NVML_SUCCESS) {
        if (p->s[0])
            b->fn.gpm_free(p->s[0]);
        memset(p, 0, sizeof *p);
        return NULL;
    }
    d->n_mgpm++;
    return p;
}

/* One instance's GPM figures into m (absent on the first sample of a pair). */
static void mig_gpm_read(struct rd *c, struct mig_gpm *p, struct gs_mig *m)
{
    static const unsigned ids[GS_MIG_GPM__COUNT] = {
        [GS_MIG_GPM_SM_ACTIVE] = NVML_GPM_METRIC_SM_UTIL,
        [GS_MIG_GPM_SM_OCCUPANCY] = NVML_GPM_METRIC_SM_OCCUPANCY,
        [GS_MIG_GPM_TENSOR_ACTIVE] = NVML_GPM_METRIC_ANY_TENSOR_UTIL,
        [GS_MIG_GPM_DRAM_ACTIVE] = NVML_GPM_METRIC_DRAM_BW_UTIL,
        [GS_MIG_GPM_GR_ACTIVE] = NVML_GPM_METRIC_GRAPHICS_UTIL,
    };
    struct gs_backend *b = c->b;
    nvmlGpmMetricsGet_t *q = b->gpm_req;
    nvmlGpmSample_t cur;
    int64_t now = gs_clock_mono_ns();
    nvmlReturn_t r;

    if (!p->have) {
        if (ok(c, NULL, b->fn.gpm_mig_get(c->h, p->gi, p->s[0]))) {
            p->prev = 0;
            p->have = 1;
            p->t_ns = now;
        }
        return;
    }
    if (now - p->t_ns < NVML_GPM_MIN_NS)
        return;
    cur = p->s[p->prev ^ 1];
    r = b->fn.gpm_mig_get(c->h, p->gi, cur);
    if (!ok(c, &m->gpm_st[0], r)) {
        for (int k = 1; k < GS_MIG_GPM__COUNT; k++)
            m->gpm_st[k] = m->gpm_st[0];
        return;
    }
    memset(q, 0, offsetof(nvmlGpmMetricsGet_t, metrics) + COUNT_OF(ids) * sizeof q->metrics[0]);
    q->version = NVML_GPM_METRICS_GET_VERSION;
    q->numMetrics = COUNT_OF(ids);
    q->sample1 = p->s[p->prev];
    q->sample2 = cur;
    for (size_t k = 0; k < COUNT_OF(ids); k++)
        q->metrics[k].metricId = ids[k];
    r = b->fn.gpm_metrics(q);
    p->prev ^= 1;
    p->t_ns = now;
    for (size_t k = 0; k < COUNT_OF(ids); k++) {
        nvmlReturn_t mr = r == NVML_SUCCESS ? q->metrics[k].nvmlReturn : r;
        if (mr == NVML_SUCCESS) {
            m->gpm_st[k] = GS_ST_OK;
            m->gpm[k] = q->metrics[k].value / 100.0;
        } else {
            m->gpm_st[k] = gs_nvml_status(mr);
        }
    }
}

/* GPM of every GPU instance of a GPU in MIG mode (GS_WANT_GPM with GS_WANT_MIG): the
 * parent's handle and the instance id; compute instances of one GPU instance share it. */
static void read_mig_gpm(struct rd *c)
{
    struct gs_backend *b = c->b;
    struct nvml_dev *d = c->d;
    struct gs_gpu *g = c->g;

    if (c->lost || !b->fn.gpm_mig_get || !gs_gpu_mig_on(g) || g->n_mig == 0 ||
        !gpm_ready(b, d, &c->lost))
        return;
    for (unsigned i = 0; i < d->n_mgpm; i++)
        d->mgpm[i].seen = 0;
    for (unsigned i = 0; i < g->n_mig && !c->lost; i++) {
        struct gs_mig *m = &g->mig[i];
        struct mig_gpm *p;
        unsigned j;

        for (j = 0; j < i && g->mig[j].gi_id != m->gi_id; j++)
            ;
        if (j < i) { /* a second compute instance of a GPU instance read already */
            memcpy(m->gpm_st, g->mig[j].gpm_st, sizeof m->gpm_st);
            memcpy(m->gpm, g->mig[j].gpm, sizeof m->gpm);
            continue;
        }
        if (m->gi_id == NVML_MIG_ID_NONE || !(p = mig_gpm_slot(b, d, m->gi_id)))
            continue;
        p->seen = 1;
        mig_gpm_read(c, p, m);
    }
    for (unsigned i = 0; i < d->n_mgpm;) /* instances gone (MIG reconfigured): free them */
        if (!d->mgpm[i].seen) {
            mig_gpm_drop(b, &d->mgpm[i]);
            d->mgpm[i] = d->mgpm[--d->n_mgpm];
            memset(&d->mgpm[d->n_mgpm], 0, sizeof d->mgpm[0]);
        } else {
            i++;
        }
}

/* ---- events ----------------------------------------------------------------------------- */

static void events_register(struct gs_backend *b)
{
    const struct nvml_fns *f = &b->fn;

    if (b->ev_state == 0) {
        b->ev_state = -1;
        if (f->event_create && f->event_register && f->event_wait && f->event_free &&
            f->event_create(&b->evset) == NVML_SUCCESS)
            b->ev_state = 1;
    }
    if (b->ev_state < 0)
        return;
    for (unsigned i = 0; i < b->n; i++) {
        struct nvml_dev *d = &b->dev[i];
        unsigned long long mask = 0;
        nvmlReturn_t r;
        if (!d->h || d->xid_reg != 0)
            continue;
        /* Register only what the GPU reports: newer bits confuse older drivers (§8). */
        if (f->event_supported) {
            r = f->event_supported(d->h, &mask);
            if (r == NVML_ERROR_GPU_IS_LOST)
                continue;
            if (r == NVML_SUCCESS && !(mask & nvmlEventTypeXidCriticalError)) {
                d->xid_reg = -1;
                continue;
            }
        }
        r = f->event_register(d->h, nvmlEventTypeXidCriticalError, b->evset);
        if (r == NVML_SUCCESS)
            d->xid_reg = 1;
        else if (r != NVML_ERROR_GPU_IS_LOST)
            d->xid_reg = -1;
    }
}

/* Drains queued events without waiting (timeout 0). */
static void events_poll(struct gs_backend *b)
{
    for (int k = 0; k < NVML_EVENTS_PER_CYCLE; k++) {
        nvmlEventData_t ev; /* 32 bytes whichever symbol writes it (§8) */
        memset(&ev, 0, sizeof ev);
        if (b->fn.event_wait(b->evset, &ev, 0) != NVML_SUCCESS)
            return; /* TIMEOUT: nothing queued */
        if (!(ev.eventType & nvmlEventTypeXidCriticalError))
            continue;
        for (unsigned i = 0; i < b->n; i++)
            if (b->dev[i].h && b->dev[i].h == ev.device)
                b->dev[i].xid_last = ev.eventData;
    }
}

/* ---- ops -------------------------------------------------------------------------------- */

static void nvml_close(struct gs_backend *b)
{
    if (!b)
        return;
    for (unsigned i = 0; b->dev && i < b->n; i++) {
        struct nvml_dev *d = &b->dev[i];
        for (int k = 0; k < 2; k++)
            if (d->gpm_s[k] && b->fn.gpm_free)
                b->fn.gpm_free(d->gpm_s[k]);
        for (unsigned k = 0; k < d->n_mgpm; k++)
            mig_gpm_drop(b, &d->mgpm[k]);
        free(d->urec);
    }
    if (b->ev_state > 0)
        b->fn.event_free(b->evset);
    if (b->inited && b->fn.shutdown)
        b->fn.shutdown();
    if (b->lib)
        dlclose(b->lib);
    free(b->dev);
    free(b->pbuf);
    free(b->ubuf);
    free(b->sbuf);
    free(b->gpm_req);
    free(b);
}

/* nvml-sim's marker (sim/nvml_system.c): not part of NVML, so not in nvml_abi.h; a driver's
 * library has no such symbol. */
typedef nvmlReturn_t (*sim_info_fn)(char *info, unsigned int length);
typedef nvmlReturn_t (*sim_host_fn)(unsigned int pid, unsigned int *is_host);

static void read_simulated(struct gs_backend *b)
{
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    void *p = dlsym(b->lib, "nvmlSimGetInfo");
    sim_info_fn f;

    if (!p)
        return;
    memcpy(&f, &p, sizeof f);
    memset(buf, 0, sizeof buf);
    b->sys.simulated = 1;
    if (f(buf, sizeof buf) != NVML_SUCCESS || !buf[0])
        snprintf(buf, sizeof buf, "nvml-sim");
    copy_text(b->sys.sim_info, buf, sizeof buf);
    p = dlsym(b->lib, "nvmlSimProcessIsHost");
    if (p)
        memcpy(&b->sim_is_host, &p, sizeof p);
}

/* Whether a simulated pid has no process of this host behind it (see nvmlSimProcessIsHost):
 * always 0 with a driver's library; 1 with a sim that cannot tell. */
static int sim_only_pid(const struct gs_backend *b, unsigned pid)
{
    sim_host_fn f;
    unsigned int host = 0;

    if (!b->sys.simulated)
        return 0;
    if (!b->sim_is_host)
        return 1;
    memcpy(&f, &b->sim_is_host, sizeof f);
    return f(pid, &host) != NVML_SUCCESS || !host;
}

static void read_system(struct gs_backend *b)
{
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    int cuda = 0;

    read_simulated(b);

    memset(buf, 0, sizeof buf);
    if (b->fn.driver_version && b->fn.driver_version(buf, sizeof buf) == NVML_SUCCESS) {
        copy_text(b->sys.driver_version, buf, sizeof buf);
        b->sys.driver_st = GS_ST_OK;
    }
    memset(buf, 0, sizeof buf);
    if (b->fn.nvml_version && b->fn.nvml_version(buf, sizeof buf) == NVML_SUCCESS) {
        copy_text(b->sys.nvml_version, buf, sizeof buf);
        b->sys.nvml_st = GS_ST_OK;
    }
    if (b->fn.cuda_version && b->fn.cuda_version(&cuda) == NVML_SUCCESS) {
        b->sys.cuda_version = cuda;
        b->sys.cuda_st = GS_ST_OK;
    }
    b->sys.gpu_count = b->n;
}

static void dev_attach(struct gs_backend *b, unsigned i)
{
    struct nvml_dev *d = &b->dev[i];
    struct rd c = {b, d, NULL, &d->cache, 0, NVML_SUCCESS, 1};

    if (!d->h) {
        d->h_rc = b->fn.handle(i, &d->h);
        if (d->h_rc != NVML_SUCCESS) {
            d->h = NULL;
            return;
        }
    }
    if (d->ident_done)
        return;
    c.h = d->h;
    read_identity(&c);
    d->ident_done = !c.lost;
}

static int nvml_open(struct gs_backend **out, const struct gs_backend_opts *opts,
                     struct gs_err *err)
{
    struct gs_backend *b = calloc(1, sizeof *b);
    const char *path = opts ? opts->library : NULL;
    unsigned int n = 0;
    nvmlReturn_t r;
    int rc;

    if (!b)
        return gs_err_set(err, GS_ENOMEM, "nvml: out of memory");
    b->need_all = !opts || (!opts->need_metrics && !opts->need_texts);
    if (!b->need_all) {
        if (opts->need_metrics)
            memcpy(b->need_m, opts->need_metrics, sizeof b->need_m);
        if (opts->need_texts)
            memcpy(b->need_t, opts->need_texts, sizeof b->need_t);
    }
    if (!path || !*path)
        path = getenv("GPUSCOPE_NVML_LIBRARY");
    if (!path || !*path)
        path = NVML_DEFAULT_LIBRARY;
    snprintf(b->path, sizeof b->path, "%s", path);
    b->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!b->lib) {
        const char *why = dlerror();
        rc = gs_err_set(err, GS_ENOLIB, "nvml: cannot load %s: %s", path, why ? why : "?");
        goto fail;
    }
    load_symbols(b);
    if (!b->fn.init) {
        rc = gs_err_set(err, GS_ENOLIB, "nvml: %s has neither nvmlInit_v2 nor nvmlInit", path);
        goto fail;
    }
    r = b->fn.init();
    if (r != NVML_SUCCESS) {
        rc = gs_err_set(err, gs_nvml_init_rc(r), "nvml: %s: %s", sym_name(b, SYM_init),
                        nvml_errstr(b, r));
        goto fail;
    }
    b->inited = 1;
    if (!b->fn.count || !b->fn.handle) {
        rc = gs_err_set(err, GS_ENOLIB, "nvml: %s lacks nvmlDeviceGetCount/GetHandleByIndex", path);
        goto fail;
    }
    r = b->fn.count(&n);
    if (r != NVML_SUCCESS) {
        rc = gs_err_set(err, gs_nvml_init_rc(r), "nvml: %s: %s", sym_name(b, SYM_count),
                        nvml_errstr(b, r));
        goto fail;
    }
    if (n == 0) {
        rc = gs_err_set(err, GS_ENOGPU, "nvml: %s: no NVIDIA GPU found", sym_name(b, SYM_count));
        goto fail;
    }
    if (n > NVML_MAX_GPUS)
        n = NVML_MAX_GPUS;
    b->n = n;
    b->dev = calloc(n, sizeof *b->dev);
    b->pcap = 64;
    b->pbuf = calloc(b->pcap, GS_NVML_PROC_STRIDE_MAX);
    b->ucap = 64;
    b->ubuf = calloc(b->ucap, sizeof *b->ubuf);
    if (!b->dev || !b->pbuf || !b->ubuf) {
        rc = gs_err_set(err, GS_ENOMEM, "nvml: out of memory for %u GPUs", n);
        goto fail;
    }
    for (unsigned i = 0; i < n; i++)
        dev_attach(b, i);
    read_system(b);
    *out = b;
    return GS_OK;
fail:
    nvml_close(b);
    return rc;
}

static unsigned nvml_count(const struct gs_backend *b)
{
    return b->n;
}

static void nvml_system(const struct gs_backend *b, struct gs_system *sys)
{
    char host[sizeof sys->hostname];
    memcpy(host, sys->hostname, sizeof host);
    *sys = b->sys;
    memcpy(sys->hostname, host, sizeof host);
}

static int nvml_begin(struct gs_backend *b, unsigned want, struct gs_err *err)
{
    int primed = 0;
    (void)err;

    if (want & GS_WANT_HEALTH) {
        events_register(b);
        if (b->ev_state > 0)
            events_poll(b);
    }
    if ((want & GS_WANT_GPM) && (want & GS_WANT_GPM_WAIT)) {
        for (unsigned i = 0; i < b->n; i++) {
            struct nvml_dev *d = &b->dev[i];
            int lost = 0;
            if (!d->h || d->gpm_have || !gpm_ready(b, d, &lost))
                continue;
            if (gpm_first(b, d) == NVML_SUCCESS)
                primed = 1;
        }
        if (primed) { /* one wait for all GPUs, not one per GPU */
            struct timespec ts = {0, NVML_GPM_WAIT_NS};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
        }
    }
    if (want & GS_WANT_PCIE_TPUT) {
        primed = 0;
        for (unsigned i = 0; i < b->n; i++)
            if (b->dev[i].h && !b->dev[i].nvl_have && b->dev[i].nvl >= 0)
                primed |= nvl_prime(b, &b->dev[i]);
        if (primed) { /* NVLink counters need two readings for a rate: one wait for all */
            struct timespec ts = {0, NVML_NVLINK_WAIT_NS};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
        }
    }
    return GS_OK;
}

static int basic_any_ok(const struct gs_gpu *g)
{
    static const enum gs_metric ms[] = {GS_M_MEM_TOTAL, GS_M_TEMP_GPU, GS_M_POWER_DRAW,
                                        GS_M_UTIL_GPU,  GS_M_CLOCK_SM, GS_M_PSTATE};
    for (size_t i = 0; i < COUNT_OF(ms); i++)
        if (gs_gpu_has(g, ms[i]))
            return 1;
    return 0;
}

/* Everything but identity reads as lost; identity stays so front ends can say which GPU. */
static void mark_lost(struct gs_gpu *g)
{
    uint8_t keep[GS_M__COUNT] = {0};
    for (size_t i = 0; i < COUNT_OF(ident_metrics); i++)
        keep[ident_metrics[i]] = 1;
    for (int m = 0; m < GS_M__COUNT; m++)
        if (!keep[m]) {
            g->st[m] = GS_ST_LOST;
            g->v[m] = 0;
        }
    memset(g->ecc_loc_st, 0, sizeof g->ecc_loc_st);
    g->n_mig = 0;
    g->n_nvlink = 0;
    g->lost = 1;
}

static int nvml_sample(struct gs_backend *b, unsigned dev, struct gs_gpu *g, unsigned want,
                       struct gs_err *err)
{
    struct nvml_dev *d;
    struct rd c;

    if (dev >= b->n)
        return gs_err_set(err, GS_ENOGPU, "nvml: no GPU %u (have %u)", dev, b->n);
    d = &b->dev[dev];
    g->index = dev;
    dev_attach(b, dev);
    memcpy(g->text, d->cache.text, sizeof g->text);
    memcpy(g->tst, d->cache.tst, sizeof g->tst);
    copy_metrics(g, &d->cache, ident_metrics, COUNT_OF(ident_metrics));
    if (!d->h) {
        if (d->h_rc == NVML_ERROR_GPU_IS_LOST) {
            mark_lost(g);
            if (d->xid_reg == 1 && d->xid_last)
                gs_gpu_set(g, GS_M_XID_LAST, (double)d->xid_last);
            return GS_OK;
        }
        for (int m = 0; m < GS_M__COUNT; m++)
            g->st[m] = gs_nvml_status(d->h_rc);
        return gs_err_set(err, gs_nvml_init_rc(d->h_rc), "nvml: %s(%u): %s",
                          sym_name(b, SYM_handle), dev, nvml_errstr(b, d->h_rc));
    }

    c = (struct rd){b, d, d->h, &d->cache, 0, NVML_SUCCESS, 1};
    if ((want & GS_WANT_STATIC) || !d->slow_done) {
        read_slow(&c);
        d->slow_done = !c.lost;
    }
    c.g = g;
    copy_metrics(g, &d->cache, slow_metrics, COUNT_OF(slow_metrics));
    read_basic(&c);
    read_nvlink(&c, want);
    c.masked = 0; /* what the want bits ask for is read in full */
    if (want & GS_WANT_PCIE_TPUT)
        read_pcie_tput(&c);
    if (want & GS_WANT_HEALTH)
        read_health(&c);
    if (want & GS_WANT_MIG)
        read_mig(&c);
    if (want & GS_WANT_GPM)
        read_gpm(&c);
    if ((want & GS_WANT_GPM) && (want & GS_WANT_MIG))
        read_mig_gpm(&c);
    if (c.lost) {
        mark_lost(g);
        /* the Xid event the GPU fell off with (79) was drained in begin: keep it */
        if (d->xid_reg == 1 && d->xid_last)
            gs_gpu_set(g, GS_M_XID_LAST, (double)d->xid_last);
        return GS_OK;
    }
    /* The driver went away (unloaded, re-initialised elsewhere): an error only if it left
     * nothing readable; a library that answers UNINITIALIZED for one odd call is not dead. */
    if (c.fatal != NVML_SUCCESS && !basic_any_ok(g))
        return gs_err_set(
            err, c.fatal == NVML_ERROR_LIB_RM_VERSION_MISMATCH ? GS_EMISMATCH : GS_ENODRIVER,
            "nvml: gpu %u: %s", dev, nvml_errstr(b, c.fatal));
    return GS_OK;
}

/* ---- processes -------------------------------------------------------------------------- */

static int pbuf_grow(struct gs_backend *b, unsigned want)
{
    unsigned char *p;
    if (want > NVML_PROC_CAP_MAX)
        want = NVML_PROC_CAP_MAX;
    if (want <= b->pcap)
        return -1;
    p = realloc(b->pbuf, (size_t)want * GS_NVML_PROC_STRIDE_MAX); /* old kept on failure */
    if (!p)
        return -1;
    b->pbuf = p;
    b->pcap = want;
    return 0;
}

/* Calls a process-list function with our buffer, growing it while the driver says
 * INSUFFICIENT_SIZE (processes can appear between calls). */
static nvmlReturn_t list_procs(struct gs_backend *b, fn_d_procs fn, nvmlDevice_t h, unsigned *n)
{
    for (int tries = 0; tries < 4; tries++) {
        unsigned int cnt = b->pcap;
        nvmlReturn_t r;
        /* 32 bytes per entry whatever stride we parse with (§7): a driver that writes the
         * larger struct cannot overrun the buffer. */
        r = fn(h, &cnt, b->pbuf);
        if (r == NVML_SUCCESS) {
            *n = cnt < b->pcap ? cnt : b->pcap;
            return r;
        }
        if (r != NVML_ERROR_INSUFFICIENT_SIZE)
            return r;
        if (pbuf_grow(b, cnt > b->pcap ? cnt * 2 + 5 : b->pcap * 2) != 0)
            return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    return NVML_ERROR_INSUFFICIENT_SIZE;
}

/* The entry for pid among this GPU's processes (from index first on), added if new. */
static struct gs_proc *proc_slot(struct gs_snapshot *s, unsigned first, unsigned pid, unsigned gpu,
                                 struct gs_err *err)
{
    struct gs_proc *p;
    for (unsigned i = first; i < s->n_procs; i++)
        if (s->procs[i].pid == pid)
            return &s->procs[i];
    if (gs_snapshot_reserve_procs(s, s->n_procs + 1, err) != GS_OK)
        return NULL;
    p = &s->procs[s->n_procs++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->gpu = gpu;
    p->gi_id = p->ci_id = NVML_MIG_ID_NONE;
    return p;
}

static int merge_list(struct gs_backend *b, unsigned dev, unsigned first, struct gs_snapshot *s,
                      unsigned n, unsigned stride, unsigned type, struct gs_err *err)
{
    for (unsigned i = 0; i < n; i++) {
        const unsigned char *e = b->pbuf + (size_t)i * stride;
        unsigned int pid, gi = NVML_MIG_ID_NONE, ci = NVML_MIG_ID_NONE;
        unsigned long long mem;
        struct gs_proc *p;

        memcpy(&pid, e + offsetof(nvmlProcessInfo_v2_t, pid), sizeof pid);
        memcpy(&mem, e + offsetof(nvmlProcessInfo_v2_t, usedGpuMemory), sizeof mem);
        if (stride >= sizeof(nvmlProcessInfo_v2_t)) {
            memcpy(&gi, e + offsetof(nvmlProcessInfo_v2_t, gpuInstanceId), sizeof gi);
            memcpy(&ci, e + offsetof(nvmlProcessInfo_v2_t, computeInstanceId), sizeof ci);
        }
        p = proc_slot(s, first, pid, dev, err);
        if (!p)
            return GS_ENOMEM;
        p->type |= type;
        p->sim_only = (uint8_t)sim_only_pid(b, pid);
        if (p->gi_id == NVML_MIG_ID_NONE) {
            p->gi_id = gi;
            p->ci_id = ci;
        }
        /* One process in two lists shares one allocation: take the larger, never the sum. */
        if (mem != NVML_VALUE_NOT_AVAILABLE && (p->mem_st != GS_ST_OK || mem > p->gpu_mem_bytes)) {
            p->gpu_mem_bytes = mem;
            p->mem_st = GS_ST_OK;
        }
    }
    return GS_OK;
}

static struct util_rec *urec_find(struct nvml_dev *d, unsigned pid)
{
    for (unsigned i = 0; i < d->n_urec; i++)
        if (d->urec[i].pid == pid)
            return &d->urec[i];
    return NULL;
}

static void urec_put(struct nvml_dev *d, const nvmlProcessUtilizationSample_t *e, int64_t now)
{
    struct util_rec *u = urec_find(d, e->pid);
    if (!u) {
        if (d->n_urec == d->cap_urec) {
            unsigned cap = d->cap_urec ? d->cap_urec * 2 : 16;
            struct util_rec *p = realloc(d->urec, cap * sizeof *p);
            if (!p)
                return;
            d->urec = p;
            d->cap_urec = cap;
        }
        u = &d->urec[d->n_urec++];
        memset(u, 0, sizeof *u);
        u->pid = e->pid;
    } else if (e->timeStamp < u->ts) {
        return; /* an older sample of the same process in the same batch */
    }
    u->ts = e->timeStamp;
    u->t_ns = now;
    u->sm = e->smUtil;
    u->mem = e->memUtil;
    u->enc = e->encUtil;
    u->dec = e->decUtil;
}

static void urec_prune(struct nvml_dev *d, int64_t now)
{
    unsigned k = 0;
    for (unsigned i = 0; i < d->n_urec; i++)
        if (now - d->urec[i].t_ns <= NVML_PUTIL_KEEP_NS)
            d->urec[k++] = d->urec[i];
    d->n_urec = k;
}

/* Fetches the samples newer than the last one seen. Returns the status the query earned:
 * OK when it worked (even with no new sample: NOT_FOUND means exactly that). */
static uint8_t putil_update(struct gs_backend *b, struct nvml_dev *d, int64_t now, int *lost)
{
    fn_d_putil fn = b->fn.proc_util;
    unsigned int cnt = 0;
    nvmlReturn_t r;

    urec_prune(d, now);
    r = fn(d->h, NULL, &cnt, d->putil_ts);
    if (r == NVML_ERROR_NOT_FOUND || (r == NVML_SUCCESS && cnt == 0))
        return GS_ST_OK;
    if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE)
        goto fail;
    if (cnt + 8 > b->ucap) {
        unsigned cap = cnt + 8 > NVML_PROC_CAP_MAX ? NVML_PROC_CAP_MAX : cnt + 8;
        nvmlProcessUtilizationSample_t *p = realloc(b->ubuf, cap * sizeof *p);
        if (!p)
            return GS_ST_ERROR;
        b->ubuf = p;
        b->ucap = cap;
    }
    cnt = b->ucap;
    memset(b->ubuf, 0, cnt * sizeof *b->ubuf);
    r = fn(d->h, b->ubuf, &cnt, d->putil_ts);
    if (r == NVML_ERROR_NOT_FOUND)
        return GS_ST_OK;
    if (r != NVML_SUCCESS)
        goto fail;
    for (unsigned i = 0; i < cnt && i < b->ucap; i++) {
        const nvmlProcessUtilizationSample_t *e = &b->ubuf[i];
        /* Values above 100 % are driver glitches (nvtop#110); skip the whole entry. */
        if (e->smUtil > 100 || e->memUtil > 100 || e->encUtil > 100 || e->decUtil > 100)
            continue;
        if (e->timeStamp > d->putil_ts)
            d->putil_ts = e->timeStamp;
        urec_put(d, e, now);
    }
    return GS_ST_OK;
fail:
    if (r == NVML_ERROR_GPU_IS_LOST)
        *lost = 1;
    return gs_nvml_status(r);
}

static void fill_proc_util(struct gs_backend *b, struct nvml_dev *d, struct gs_snapshot *s,
                           unsigned first, int *lost)
{
    int64_t now = gs_clock_mono_ns();
    uint8_t st = putil_update(b, d, now, lost);

    for (unsigned i = first; i < s->n_procs; i++) {
        struct gs_proc *p = &s->procs[i];
        const struct util_rec *u = urec_find(d, p->pid);
        if (u && now - u->t_ns <= NVML_PUTIL_KEEP_NS) {
            p->sm_util = u->sm / 100.0;
            p->mem_util = u->mem / 100.0;
            p->enc_util = u->enc / 100.0;
            p->dec_util = u->dec / 100.0;
            p->util_st = GS_ST_OK;
        } else {
            /* No sample in the window: the process was idle or just started. Absent, not 0. */
            p->util_st = st == GS_ST_OK ? GS_ST_NA : st;
        }
    }
}

static int nvml_processes(struct gs_backend *b, unsigned dev, struct gs_snapshot *s, unsigned want,
                          struct gs_err *err)
{
    const fn_d_procs fns[3] = {b->fn.procs_compute, b->fn.procs_graphics, b->fn.procs_mps};
    static const unsigned types[3] = {GS_PROC_COMPUTE, GS_PROC_GRAPHICS, GS_PROC_MPS};
    struct nvml_dev *d;
    unsigned first = s->n_procs;
    int lost = 0;

    if (dev >= b->n)
        return gs_err_set(err, GS_ENOGPU, "nvml: no GPU %u (have %u)", dev, b->n);
    d = &b->dev[dev];
    if (!d->h)
        return GS_OK;
    for (int k = 0; k < 3 && !lost; k++) {
        unsigned n = 0;
        nvmlReturn_t r;
        int rc;
        if (!fns[k])
            continue;
        r = list_procs(b, fns[k], d->h, &n);
        if (r == NVML_ERROR_GPU_IS_LOST)
            lost = 1;
        if (r != NVML_SUCCESS)
            continue; /* NOT_SUPPORTED, NO_PERMISSION: this list stays empty */
        rc = merge_list(b, dev, first, s, n, b->proc_stride[k], types[k], err);
        if (rc != GS_OK)
            return rc;
    }
    if ((want & GS_WANT_PROC_UTIL) && b->fn.proc_util && !lost && s->n_procs > first)
        fill_proc_util(b, d, s, first, &lost);
    return GS_OK;
}

static int nvml_process_name(struct gs_backend *b, unsigned pid, char *buf, size_t len)
{
    nvmlReturn_t r;
    if (!b->fn.process_name || len == 0)
        return GS_ENOTSUP;
    memset(buf, 0, len);
    r = b->fn.process_name(pid, buf, (unsigned int)(len > 4096 ? 4096 : len));
    buf[len - 1] = '\0';
    if (r == NVML_SUCCESS)
        return GS_OK;
    buf[0] = '\0';
    switch (gs_nvml_status(r)) {
    case GS_ST_NA:
        return GS_ENOTSUP;
    case GS_ST_NOPERM:
        return GS_EPERM;
    }
    return r == NVML_ERROR_NOT_FOUND ? GS_ENOTFOUND : GS_ENVML;
}

/* ---- utilization samples ---------------------------------------------------------------- */

/* One sample's value as a number; utilization comes as UNSIGNED_INT, the rest is defensive. */
static int sample_value(nvmlValueType_t vt, const nvmlValue_t *v, double *out)
{
    switch (vt) {
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        *out = v->uiVal;
        return 1;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *out = (double)v->ullVal;
        return 1;
    case NVML_VALUE_TYPE_DOUBLE:
        *out = v->dVal;
        return 1;
    }
    return 0;
}

/* Sorts b->sbuf[0..n) by timestamp. The driver hands its ring out in order, so this is one
 * pass in practice; it only guards the "newest timestamp seen" bookkeeping. */
static void samples_sort(nvmlSample_t *s, unsigned n)
{
    for (unsigned i = 1; i < n; i++) {
        nvmlSample_t x = s[i];
        unsigned j = i;
        for (; j > 0 && s[j - 1].timeStamp > x.timeStamp; j--)
            s[j] = s[j - 1];
        s[j] = x;
    }
}

static int samples_rc(struct gs_backend *b, unsigned dev, nvmlReturn_t r, struct gs_err *err)
{
    int rc = GS_ENVML;

    if (r == NVML_ERROR_GPU_IS_LOST)
        rc = GS_ELOST;
    else if (driver_gone(r))
        rc = GS_ENODRIVER;
    else if (gs_nvml_status(r) == GS_ST_NA)
        rc = GS_ENOTSUP;
    else if (r == NVML_ERROR_NO_PERMISSION)
        rc = GS_EPERM;
    return gs_err_set(err, rc, "nvml: nvmlDeviceGetSamples(gpu %u): %s", dev, nvml_errstr(b, r));
}

/* One call into the ring with our scratch buffer; a driver that answers INSUFFICIENT_SIZE
 * instead of filling what fits gets a buffer of the size it asks for, once. */
static nvmlReturn_t samples_fetch(struct gs_backend *b, nvmlDevice_t h, unsigned long long since,
                                  unsigned cap, nvmlValueType_t *vt, unsigned *n)
{
    unsigned int cnt = cap;
    nvmlReturn_t r = b->fn.samples(h, NVML_GPU_UTILIZATION_SAMPLES, since, vt, &cnt, b->sbuf);

    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        cnt = 0;
        r = b->fn.samples(h, NVML_GPU_UTILIZATION_SAMPLES, since, vt, &cnt, NULL);
        if (r != NVML_SUCCESS)
            return r;
        if (cnt > b->scap && cnt <= NVML_SAMPLES_MAX) {
            nvmlSample_t *p = realloc(b->sbuf, cnt * sizeof *p); /* old kept on failure */
            if (!p)
                return NVML_ERROR_MEMORY;
            b->sbuf = p;
            b->scap = cnt;
        }
        cnt = b->scap;
        r = b->fn.samples(h, NVML_GPU_UTILIZATION_SAMPLES, since, vt, &cnt, b->sbuf);
    }
    *n = r == NVML_SUCCESS ? (cnt < b->scap ? cnt : b->scap) : 0;
    return r;
}

static int nvml_util_samples(struct gs_backend *b, unsigned dev, uint64_t *last_ts_us,
                             struct gs_util_sample *out, unsigned cap, unsigned *n,
                             struct gs_err *err)
{
    nvmlValueType_t vt = NVML_VALUE_TYPE_UNSIGNED_INT;
    unsigned got = 0;
    nvmlReturn_t r;
    struct nvml_dev *d;

    *n = 0;
    if (dev >= b->n)
        return gs_err_set(err, GS_ENOGPU, "nvml: no GPU %u (have %u)", dev, b->n);
    d = &b->dev[dev];
    if (!b->fn.samples) /* before ~R304, or a stripped library: the feature is absent */
        return gs_err_set(err, GS_ENOTSUP, "nvml: nvmlDeviceGetSamples: not in %s", b->path);
    if (!d->h)
        return samples_rc(b, dev, d->h_rc, err);
    if (cap == 0)
        return GS_OK;
    if (cap > NVML_SAMPLES_MAX)
        cap = NVML_SAMPLES_MAX;
    if (cap > b->scap) { /* grows to the largest cap ever asked for, then stays */
        nvmlSample_t *p = realloc(b->sbuf, cap * sizeof *p);
        if (!p)
            return gs_err_set(err, GS_ENOMEM, "nvml: out of memory");
        b->sbuf = p;
        b->scap = cap;
    }
    memset(b->sbuf, 0, (size_t)b->scap * sizeof *b->sbuf);
    r = samples_fetch(b, d->h, *last_ts_us, cap, &vt, &got);
    if (r == NVML_ERROR_NOT_FOUND) /* nothing newer than *last_ts_us: not an error */
        return GS_OK;
    if (r != NVML_SUCCESS)
        return samples_rc(b, dev, r, err);
    if (got > cap)
        got = cap;
    samples_sort(b->sbuf, got);
    for (unsigned i = 0; i < got; i++) {
        const nvmlSample_t *e = &b->sbuf[i];
        double v;
        if (e->timeStamp <= *last_ts_us)
            continue; /* the driver's contract, checked: never count a sample twice */
        *last_ts_us = e->timeStamp;
        /* Values above 100 % are driver glitches (as in process utilization); skip them. */
        if (!sample_value(vt, &e->sampleValue, &v) || !(v >= 0 && v <= 100))
            continue;
        out[*n].t_us = e->timeStamp;
        out[*n].util_ratio = v / 100.0;
        (*n)++;
    }
    return GS_OK;
}

const struct gs_backend_ops gs_backend_nvml = {
    .abi = GS_BACKEND_ABI,
    .name = "nvml",
    .caps =
        GS_CAP_PROCS | GS_CAP_PROC_UTIL | GS_CAP_GPM | GS_CAP_EVENTS | GS_CAP_MIG | GS_CAP_HEALTH,
    .open = nvml_open,
    .count = nvml_count,
    .system = nvml_system,
    .begin = nvml_begin,
    .sample = nvml_sample,
    .processes = nvml_processes,
    .process_name = nvml_process_name,
    .close = nvml_close,
    .util_samples = nvml_util_samples,
};
