/*
 * nvml_int.h - what the NVML backend's files share (src/backend/nvml*.c): the symbol table of
 * the NVML subset, the backend's state, one device's read context, and the functions one file
 * calls in another. Only src/backend/nvml*.c include it.
 */
#ifndef GS_BACKEND_NVML_INT_H
#define GS_BACKEND_NVML_INT_H

#include <stddef.h>
#include <stdint.h>

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
typedef nvmlReturn_t (*fn_d_fbc)(nvmlDevice_t, nvmlFBCStats_t *);
typedef nvmlReturn_t (*fn_d_str1)(nvmlDevice_t, char *);
typedef nvmlReturn_t (*fn_d_repair)(nvmlDevice_t, nvmlRepairStatus_t *);
typedef nvmlReturn_t (*fn_d_addr)(nvmlDevice_t, nvmlDeviceAddressingMode_t *);
typedef nvmlReturn_t (*fn_d_c2c)(nvmlDevice_t, nvmlC2cModeInfo_v1_t *);
typedef nvmlReturn_t (*fn_d_caps)(nvmlDevice_t, nvmlDeviceCapabilities_t *);
typedef nvmlReturn_t (*fn_d_sram)(nvmlDevice_t, nvmlEccSramErrorStatus_t *);
typedef nvmlReturn_t (*fn_d_hist)(nvmlDevice_t, nvmlRowRemapperHistogramValues_t *);
typedef nvmlReturn_t (*fn_d_fabric)(nvmlDevice_t, nvmlGpuFabricInfo_v3_t *);
typedef nvmlReturn_t (*fn_d_pdi)(nvmlDevice_t, nvmlPdi_t *);
typedef nvmlReturn_t (*fn_d_vgpu_het)(nvmlDevice_t, nvmlVgpuHeterogeneousMode_t *);
typedef nvmlReturn_t (*fn_d_unrepairable)(nvmlDevice_t, nvmlUnrepairableMemoryStatus_v1_t *);
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
typedef nvmlReturn_t (*fn_d_nvl_type)(nvmlDevice_t, unsigned int, nvmlIntNvLinkDeviceType_t *);
typedef nvmlReturn_t (*fn_d_nvl_cap)(nvmlDevice_t, unsigned int, nvmlNvLinkCapability_t,
                                     unsigned int *);
typedef nvmlReturn_t (*fn_d_d_topo)(nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t *);
typedef nvmlReturn_t (*fn_d_cpuset)(nvmlDevice_t, unsigned int, unsigned long *);
typedef nvmlReturn_t (*fn_d_nodeset)(nvmlDevice_t, unsigned int, unsigned long *,
                                     nvmlAffinityScope_t);
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
    X(fbc_stats, fn_d_fbc, "nvmlDeviceGetFBCStats")                                                \
    X(board_part, fn_d_str, "nvmlDeviceGetBoardPartNumber")                                        \
    X(board_id, fn_d_u, "nvmlDeviceGetBoardId")                                                    \
    X(multi_gpu, fn_d_u, "nvmlDeviceGetMultiGpuBoard")                                             \
    X(boost_max, fn_d_arg_u, "nvmlDeviceGetMaxCustomerBoostClock")                                 \
    X(gsp_version, fn_d_str1, "nvmlDeviceGetGspFirmwareVersion")                                   \
    X(repair_status, fn_d_repair, "nvmlDeviceGetRepairStatus")                                     \
    X(addressing_mode, fn_d_addr, "nvmlDeviceGetAddressingMode")                                   \
    X(virt_mode, fn_d_u, "nvmlDeviceGetVirtualizationMode")                                        \
    X(host_vgpu_mode, fn_d_u, "nvmlDeviceGetHostVgpuMode")                                         \
    X(c2c_mode, fn_d_c2c, "nvmlDeviceGetC2cModeInfoV")                                             \
    X(capabilities, fn_d_caps, "nvmlDeviceGetCapabilities")                                        \
    X(sram_status, fn_d_sram, "nvmlDeviceGetSramEccErrorStatus")                                   \
    X(remap_histogram, fn_d_hist, "nvmlDeviceGetRowRemapperHistogram")                             \
    X(fabric_info, fn_d_fabric, "nvmlDeviceGetGpuFabricInfoV")                                     \
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
    X(nvlink_remote_pci, fn_d_nvl_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2")                      \
    X(nvlink_remote_type, fn_d_nvl_type, "nvmlDeviceGetNvLinkRemoteDeviceType")                    \
    X(nvlink_cap, fn_d_nvl_cap, "nvmlDeviceGetNvLinkCapability")                                   \
    X(topo_common, fn_d_d_topo, "nvmlDeviceGetTopologyCommonAncestor")                             \
    X(cpu_affinity, fn_d_cpuset, "nvmlDeviceGetCpuAffinity")                                       \
    X(mem_affinity, fn_d_nodeset, "nvmlDeviceGetMemoryAffinity")                                   \
    X(numa_node, fn_d_u, "nvmlDeviceGetNumaNodeId")                                                \
    X(pdi, fn_d_pdi, "nvmlDeviceGetPdi")                                                           \
    X(module_id, fn_d_u, "nvmlDeviceGetModuleId")                                                  \
    X(gom, fn_d_u2, "nvmlDeviceGetGpuOperationMode")                                               \
    X(vgpu_hetero, fn_d_vgpu_het, "nvmlDeviceGetVgpuHeterogeneousMode")                            \
    X(cc_protected_mem, fn_d_mem, "nvmlDeviceGetConfComputeProtectedMemoryUsage")                  \
    X(unrepairable_mem, fn_d_unrepairable, "nvmlDeviceGetUnrepairableMemoryFlag_v1")

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
extern const struct nvml_sym nvml_syms[SYM__COUNT];

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
    /* the links' states last read (GS_WANT_NVLINK_STATE): per link in nvl_static[].active,
     * how many active, and when (unix s; 0: not read since the probe) */
    unsigned nvl_active;
    double nvl_state_t;
    unsigned long long nvl_prev[2]; /* tx, rx bytes */
    long long nvl_prev_us;          /* the driver's timestamp of that reading, 0 if none */
    int64_t nvl_prev_ns;            /* CLOCK_MONOTONIC of that reading */
    /* PCIe byte counters (fields 197/198): 0 not tried, 1 answered, -1 not supported (then
     * GS_WANT_PCIE_TPUT calls nvmlDeviceGetPcieThroughput); the previous reading for the rate,
     * the counters' width in bits, and whether this cycle's reading gave a rate */
    int pcie_cnt, pcie_have, pcie_rated;
    unsigned pcie_bits;
    unsigned long long pcie_prev[2]; /* tx, rx bytes */
    long long pcie_prev_us;          /* the driver's timestamp of that reading, 0 if none */
    int64_t pcie_prev_ns;            /* CLOCK_MONOTONIC of that reading */
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
    /* gs_backend_opts.mask_health with a mask: health readings follow need_m, and the
     * per-location ECC counters (no metric of their own) are not read */
    int mask_health;
    int mig_sram_ecc; /* gs_backend_opts.mig_sram_ecc: MIG devices' SRAM ECC count, always */
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

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

/* nvml.c */
uint8_t gs_nvml_status(nvmlReturn_t r);
int gs_nvml_field_double(const nvmlFieldValue_t *fv, double *out);
nvmlReturn_t gs_nvml_field_return(const nvmlFieldValue_t *fv);
void gs_nvml_copy_text(char *dst, const char *src, size_t src_cap);
int gs_nvml_driver_gone(nvmlReturn_t r);
const char *gs_nvml_errstr(const struct gs_backend *b, nvmlReturn_t r);
int gs_nvml_sim_only_pid(const struct gs_backend *b, unsigned pid);

/* nvml_read.c */
int gs_nvml_need_any(const struct rd *c, const enum gs_metric *ms, size_t n);
int gs_nvml_need_m(const struct rd *c, enum gs_metric m);
int gs_nvml_need_t(const struct rd *c, enum gs_text t);
int gs_nvml_ok(struct rd *c, uint8_t *st, nvmlReturn_t r);
void gs_nvml_read_basic(struct rd *c);
void gs_nvml_read_detail(struct rd *c);
void gs_nvml_read_detail_gpu(struct rd *c);
void gs_nvml_read_health(struct rd *c);
void gs_nvml_read_identity(struct rd *c);
/* detail: also the SRAM ECC count only nvidia-smi prints (gs_backend_opts.mig_sram_ecc) */
void gs_nvml_read_mig(struct rd *c, int detail);
void gs_nvml_read_pcie_tput(struct rd *c);
void gs_nvml_read_slow(struct rd *c);

/* nvml_link.c */
nvmlReturn_t nvml_gpm_first(struct gs_backend *b, struct nvml_dev *d);
int gs_nvml_gpm_ready(struct gs_backend *b, struct nvml_dev *d, int *lost);
void gs_nvml_mig_gpm_drop(struct gs_backend *b, struct mig_gpm *p);
int gs_nvml_nvl_prime(struct gs_backend *b, struct nvml_dev *d);
void gs_nvml_read_gpm(struct rd *c);
void gs_nvml_read_mig_gpm(struct rd *c);
void gs_nvml_read_nvlink(struct rd *c, unsigned want);

/* nvml_topo.c */
int gs_nvml_topology(struct gs_backend *b, const unsigned char *sel, unsigned what,
                     struct gs_topo *t, unsigned n, struct gs_err *err);

/* nvml_proc.c */
int gs_nvml_process_name(struct gs_backend *b, unsigned pid, char *buf, size_t len);
int gs_nvml_processes(struct gs_backend *b, unsigned dev, struct gs_snapshot *s, unsigned want,
                      struct gs_err *err);
int gs_nvml_util_samples(struct gs_backend *b, unsigned dev, uint64_t *last_ts_us,
                         struct gs_util_sample *out, unsigned cap, unsigned *n, struct gs_err *err);

#endif
