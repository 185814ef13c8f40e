/*
 * nvml-sim scenario model: what a scenario file describes, once parsed.
 *
 * A scenario is a JSON document (docs/nvml-sim.md) naming the driver, the GPUs with their static
 * properties and their metrics as patterns over virtual time, the processes on them and timed
 * events (throttling, Xid errors, a GPU falling off the bus, MIG being enabled). The parser in
 * scenario.c turns that text into the plain structs below and checks every value; the NVML entry
 * points (nvml_*.c) only read them. Nothing here depends on the NVML library state, so the parser
 * can be fed arbitrary bytes by fuzz/fuzz_scenario.c.
 *
 * Everything a scenario owns (points of piecewise patterns, names) lives in its arena and is freed
 * by gs_sim_scenario_free().
 */
#ifndef GS_SIM_SCENARIO_H
#define GS_SIM_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pattern.h"

/* Caps on what a scenario may describe; every list fed from the file is bounded. */
#define GS_SIM_MAX_SCENARIO_BYTES (8u * 1024u * 1024u)
#define GS_SIM_MAX_GPUS 64u
#define GS_SIM_MAX_MIG 16u /* MIG device slots per GPU (real boards have at most 7) */
#define GS_SIM_MAX_PROCS 4096u
#define GS_SIM_MAX_EVENTS 4096u
#define GS_SIM_MAX_TEMPLATES 64u
#define GS_SIM_MAX_RETIRED 256u
#define GS_SIM_MAX_NESTING 64u
#define GS_SIM_MAX_OVERRIDES 64u
#define GS_SIM_STR_MAX 96u    /* names, UUIDs: NVML's largest string buffer is 96 bytes */
#define GS_SIM_PNAME_MAX 256u /* process names */

/* Dynamic metrics, each a pattern over time. Units are in the names. */
enum gs_sim_metric {
    GS_SIM_M_UTIL_GPU,      /* %: nvmlDeviceGetUtilizationRates .gpu */
    GS_SIM_M_UTIL_MEM,      /* %: .memory */
    GS_SIM_M_MEM_USED,      /* MiB, excluding reserved */
    GS_SIM_M_BAR1_USED,     /* MiB */
    GS_SIM_M_TEMP,          /* degrees C */
    GS_SIM_M_MEM_TEMP,      /* degrees C (field 82) */
    GS_SIM_M_POWER,         /* W, the (1 s average) reading of nvmlDeviceGetPowerUsage */
    GS_SIM_M_POWER_INSTANT, /* W, field 186 */
    GS_SIM_M_CLK_GRAPHICS,  /* MHz */
    GS_SIM_M_CLK_SM,
    GS_SIM_M_CLK_MEM,
    GS_SIM_M_CLK_VIDEO,
    GS_SIM_M_PCIE_GEN,
    GS_SIM_M_PCIE_WIDTH,
    GS_SIM_M_PCIE_TX,       /* KB/s */
    GS_SIM_M_PCIE_RX,       /* KB/s */
    GS_SIM_M_ENC,           /* % */
    GS_SIM_M_DEC,           /* % */
    GS_SIM_M_FAN,           /* % */
    GS_SIM_M_PSTATE,        /* 0..15 */
    GS_SIM_M_GPM_GRAPHICS,  /* GPM metric 1, % */
    GS_SIM_M_GPM_SM,        /* 2: SMs active */
    GS_SIM_M_GPM_OCCUPANCY, /* 3 */
    GS_SIM_M_GPM_INTEGER,   /* 4 */
    GS_SIM_M_GPM_TENSOR,    /* 5: any tensor pipe */
    GS_SIM_M_GPM_DFMA,      /* 6 */
    GS_SIM_M_GPM_HMMA,      /* 7 */
    GS_SIM_M_GPM_DMMA,      /* 8 */
    GS_SIM_M_GPM_IMMA,      /* 9 */
    GS_SIM_M_GPM_DRAM,      /* 10: DRAM bandwidth, % of peak */
    GS_SIM_M_GPM_FP64,      /* 11 */
    GS_SIM_M_GPM_FP32,      /* 12 */
    GS_SIM_M_GPM_FP16,      /* 13 */
    GS_SIM_M_GPM_NVDEC,     /* 30..37, the same value for each engine */
    GS_SIM_M_GPM_NVJPG,     /* 40..47 */
    GS_SIM_M_GPM_NVOFA,     /* 50..51 */
    GS_SIM_M_ENC_SESSIONS,  /* nvmlDeviceGetEncoderStats: active sessions */
    GS_SIM_M_ENC_FPS,       /* trailing average FPS of the sessions */
    GS_SIM_M_ENC_LATENCY,   /* us, average encode latency */
    GS_SIM_M_JPG,           /* %: nvmlDeviceGetJpgUtilization */
    GS_SIM_M_OFA,           /* %: nvmlDeviceGetOfaUtilization */
    GS_SIM_M_TEMP_MARGIN,   /* degrees C to slowdown: nvmlDeviceGetMarginTemperature */
    GS_SIM_M_NVLINK_TX,     /* KiB/s per active link: fields 138 (data) and 140 (raw) */
    GS_SIM_M_NVLINK_RX,     /* KiB/s per active link: fields 139 and 141 */
    GS_SIM_M_FBC_SESSIONS,  /* nvmlDeviceGetFBCStats: active frame buffer capture sessions */
    GS_SIM_M_FBC_FPS,       /* their trailing average FPS */
    GS_SIM_M_FBC_LATENCY,   /* us, average capture latency */
    GS_SIM_M_REPAIR_CHAN,   /* nvmlDeviceGetRepairStatus: memory channel repair pending (0/1) */
    GS_SIM_M_REPAIR_TPC,    /* TPC repair pending (0/1) */
    GS_SIM_M_POWER_MEM,     /* W, GPU memory power: field 185 with the memory scope */
    GS_SIM_M_POWER_MEM_I,   /* W, field 186 with the memory scope */
    GS_SIM_M__COUNT
};

/* Metadata of a metric: its key in the scenario file and the range its values are clamped to. */
struct gs_sim_metric_info {
    const char *key;
    double lo;
    double hi;
};
const struct gs_sim_metric_info *gs_sim_metric_info(enum gs_sim_metric m);

/* Every NVML entry point the sim implements, in one list: the scenario's "errors" and
 * "not_supported" name them, and each entry point passes its id to the common checks. */
/* clang-format off */
#define GS_SIM_FUNCTIONS(X)                                                                        \
    X(nvmlInit_v2)                                                                                 \
    X(nvmlInit)                                                                                    \
    X(nvmlInitWithFlags)                                                                           \
    X(nvmlShutdown)                                                                                \
    X(nvmlSystemGetDriverVersion)                                                                  \
    X(nvmlSystemGetNVMLVersion)                                                                    \
    X(nvmlSystemGetCudaDriverVersion)                                                              \
    X(nvmlSystemGetCudaDriverVersion_v2)                                                           \
    X(nvmlSystemGetProcessName)                                                                    \
    X(nvmlDeviceGetCount_v2)                                                                       \
    X(nvmlDeviceGetCount)                                                                          \
    X(nvmlDeviceGetHandleByIndex_v2)                                                               \
    X(nvmlDeviceGetHandleByIndex)                                                                  \
    X(nvmlDeviceGetHandleByUUID)                                                                   \
    X(nvmlDeviceGetHandleByPciBusId_v2)                                                            \
    X(nvmlDeviceGetHandleByPciBusId)                                                               \
    X(nvmlDeviceGetName)                                                                           \
    X(nvmlDeviceGetUUID)                                                                           \
    X(nvmlDeviceGetSerial)                                                                         \
    X(nvmlDeviceGetIndex)                                                                          \
    X(nvmlDeviceGetMinorNumber)                                                                    \
    X(nvmlDeviceGetArchitecture)                                                                   \
    X(nvmlDeviceGetBrand)                                                                          \
    X(nvmlDeviceGetPciInfo_v3)                                                                     \
    X(nvmlDeviceGetPciInfo_v2)                                                                     \
    X(nvmlDeviceGetPciInfo)                                                                        \
    X(nvmlDeviceGetVbiosVersion)                                                                   \
    X(nvmlDeviceGetCudaComputeCapability)                                                          \
    X(nvmlDeviceGetUtilizationRates)                                                               \
    X(nvmlDeviceGetMemoryInfo)                                                                     \
    X(nvmlDeviceGetMemoryInfo_v2)                                                                  \
    X(nvmlDeviceGetBAR1MemoryInfo)                                                                 \
    X(nvmlDeviceGetAttributes_v2)                                                                  \
    X(nvmlDeviceGetEncoderUtilization)                                                             \
    X(nvmlDeviceGetDecoderUtilization)                                                             \
    X(nvmlDeviceGetSamples)                                                                        \
    X(nvmlDeviceGetTemperature)                                                                    \
    X(nvmlDeviceGetTemperatureV)                                                                   \
    X(nvmlDeviceGetTemperatureThreshold)                                                           \
    X(nvmlDeviceGetFanSpeed)                                                                       \
    X(nvmlDeviceGetPowerUsage)                                                                     \
    X(nvmlDeviceGetEnforcedPowerLimit)                                                             \
    X(nvmlDeviceGetPowerManagementLimit)                                                           \
    X(nvmlDeviceGetPowerManagementDefaultLimit)                                                    \
    X(nvmlDeviceGetPowerManagementLimitConstraints)                                                \
    X(nvmlDeviceGetTotalEnergyConsumption)                                                         \
    X(nvmlDeviceGetClockInfo)                                                                      \
    X(nvmlDeviceGetMaxClockInfo)                                                                   \
    X(nvmlDeviceGetCurrentClocksEventReasons)                                                      \
    X(nvmlDeviceGetCurrentClocksThrottleReasons)                                                   \
    X(nvmlDeviceGetSupportedClocksEventReasons)                                                    \
    X(nvmlDeviceGetSupportedClocksThrottleReasons)                                                 \
    X(nvmlDeviceGetPerformanceState)                                                               \
    X(nvmlDeviceGetCurrPcieLinkGeneration)                                                         \
    X(nvmlDeviceGetCurrPcieLinkWidth)                                                              \
    X(nvmlDeviceGetMaxPcieLinkGeneration)                                                          \
    X(nvmlDeviceGetGpuMaxPcieLinkGeneration)                                                       \
    X(nvmlDeviceGetMaxPcieLinkWidth)                                                               \
    X(nvmlDeviceGetPcieThroughput)                                                                 \
    X(nvmlDeviceGetPcieReplayCounter)                                                              \
    X(nvmlDeviceGetFieldValues)                                                                    \
    X(nvmlDeviceGetComputeRunningProcesses)                                                        \
    X(nvmlDeviceGetComputeRunningProcesses_v2)                                                     \
    X(nvmlDeviceGetComputeRunningProcesses_v3)                                                     \
    X(nvmlDeviceGetGraphicsRunningProcesses)                                                       \
    X(nvmlDeviceGetGraphicsRunningProcesses_v2)                                                    \
    X(nvmlDeviceGetGraphicsRunningProcesses_v3)                                                    \
    X(nvmlDeviceGetMPSComputeRunningProcesses)                                                     \
    X(nvmlDeviceGetMPSComputeRunningProcesses_v2)                                                  \
    X(nvmlDeviceGetMPSComputeRunningProcesses_v3)                                                  \
    X(nvmlDeviceGetRunningProcessDetailList)                                                       \
    X(nvmlDeviceGetConfComputeMemSizeInfo)                                                         \
    X(nvmlDeviceGetProcessUtilization)                                                             \
    X(nvmlDeviceGetComputeMode)                                                                    \
    X(nvmlDeviceGetPersistenceMode)                                                                \
    X(nvmlDeviceGetEccMode)                                                                        \
    X(nvmlDeviceGetTotalEccErrors)                                                                 \
    X(nvmlDeviceGetMemoryErrorCounter)                                                             \
    X(nvmlDeviceGetRetiredPages)                                                                   \
    X(nvmlDeviceGetRetiredPagesPendingStatus)                                                      \
    X(nvmlDeviceGetRemappedRows)                                                                   \
    X(nvmlEventSetCreate)                                                                          \
    X(nvmlDeviceRegisterEvents)                                                                    \
    X(nvmlDeviceGetSupportedEventTypes)                                                            \
    X(nvmlEventSetWait_v2)                                                                         \
    X(nvmlEventSetWait)                                                                            \
    X(nvmlEventSetFree)                                                                            \
    X(nvmlDeviceGetMigMode)                                                                        \
    X(nvmlDeviceGetMaxMigDeviceCount)                                                              \
    X(nvmlDeviceGetMigDeviceHandleByIndex)                                                         \
    X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)                                                \
    X(nvmlDeviceIsMigDeviceHandle)                                                                 \
    X(nvmlDeviceGetGpuInstanceId)                                                                  \
    X(nvmlDeviceGetComputeInstanceId)                                                              \
    X(nvmlDeviceGetGpuInstanceById)                                                                \
    X(nvmlGpuInstanceGetInfo)                                                                      \
    X(nvmlGpmQueryDeviceSupport)                                                                   \
    X(nvmlGpmSampleAlloc)                                                                          \
    X(nvmlGpmSampleFree)                                                                           \
    X(nvmlGpmSampleGet)                                                                            \
    X(nvmlGpmMigSampleGet)                                                                         \
    X(nvmlGpmMetricsGet)                                                                           \
    X(nvmlDeviceGetEncoderStats)                                                                   \
    X(nvmlDeviceGetFBCStats)                                                                       \
    X(nvmlDeviceGetBoardId)                                                                        \
    X(nvmlDeviceGetMultiGpuBoard)                                                                  \
    X(nvmlDeviceGetBoardPartNumber)                                                                \
    X(nvmlDeviceGetMaxCustomerBoostClock)                                                          \
    X(nvmlDeviceGetGspFirmwareVersion)                                                             \
    X(nvmlDeviceGetNvLinkCapability)                                                               \
    X(nvmlDeviceGetNvLinkRemoteDeviceType)                                                         \
    X(nvmlDeviceGetTopologyCommonAncestor)                                                         \
    X(nvmlDeviceGetCpuAffinity)                                                                    \
    X(nvmlDeviceGetMemoryAffinity)                                                                 \
    X(nvmlDeviceGetNumaNodeId)                                                                     \
    X(nvmlDeviceGetRepairStatus)                                                                   \
    X(nvmlDeviceGetAddressingMode)                                                                 \
    X(nvmlDeviceGetVirtualizationMode)                                                             \
    X(nvmlDeviceGetHostVgpuMode)                                                                   \
    X(nvmlDeviceGetC2cModeInfoV)                                                                   \
    X(nvmlDeviceGetCapabilities)                                                                   \
    X(nvmlDeviceGetSramEccErrorStatus)                                                             \
    X(nvmlDeviceGetRowRemapperHistogram)                                                           \
    X(nvmlDeviceGetGpuFabricInfoV)                                                                 \
    X(nvmlDeviceGetJpgUtilization)                                                                 \
    X(nvmlDeviceGetOfaUtilization)                                                                 \
    X(nvmlDeviceGetInforomImageVersion)                                                            \
    X(nvmlDeviceGetInforomVersion)                                                                 \
    X(nvmlDeviceValidateInforom)                                                                   \
    X(nvmlDeviceGetDisplayMode)                                                                    \
    X(nvmlDeviceGetDisplayActive)                                                                  \
    X(nvmlDeviceGetAccountingMode)                                                                 \
    X(nvmlDeviceGetAccountingBufferSize)                                                           \
    X(nvmlDeviceGetGspFirmwareMode)                                                                \
    X(nvmlDeviceGetPciInfoExt)                                                                     \
    X(nvmlDeviceGetMarginTemperature)                                                              \
    X(nvmlDeviceGetNvLinkState)                                                                    \
    X(nvmlDeviceGetNvLinkErrorCounter)                                                             \
    X(nvmlDeviceGetNvLinkRemotePciInfo_v2)                                                         \
    X(nvmlDeviceGetPdi)                                                                            \
    X(nvmlDeviceGetModuleId)                                                                       \
    X(nvmlDeviceGetGpuOperationMode)                                                               \
    X(nvmlDeviceGetVgpuHeterogeneousMode)                                                          \
    X(nvmlDeviceGetConfComputeProtectedMemoryUsage)                                                \
    X(nvmlDeviceGetUnrepairableMemoryFlag_v1)
/* clang-format on */

enum gs_sim_fn {
#define GS_SIM_FN_ENUM(name) GS_SIM_FN_##name,
    GS_SIM_FUNCTIONS(GS_SIM_FN_ENUM)
#undef GS_SIM_FN_ENUM
        GS_SIM_FN__COUNT
};
const char *gs_sim_fn_name(enum gs_sim_fn fn);

/* A forced return code for one function ("errors" / "not_supported" in the file). */
struct gs_sim_override {
    enum gs_sim_fn fn;
    int rc;
};

/* Where a process's pid comes from. */
enum gs_sim_pid_kind { GS_SIM_PID_NUMBER, GS_SIM_PID_SELF, GS_SIM_PID_ENV };

/* Process types as bits: which process lists an entry appears in. */
enum {
    GS_SIM_PROC_COMPUTE = 0x1,
    GS_SIM_PROC_GRAPHICS = 0x2,
    GS_SIM_PROC_MPS = 0x4,
};

struct gs_sim_proc {
    char id[64]; /* label events refer to; may be empty */
    enum gs_sim_pid_kind pid_kind;
    unsigned pid; /* the number, the env default, or the resolved pid */
    bool has_pid_default;
    char pid_env[64];
    unsigned gpu;
    unsigned type;               /* GS_SIM_PROC_* bits */
    char name[GS_SIM_PNAME_MAX]; /* as nvmlSystemGetProcessName reports it; "" = read /proc */
    bool mem_unknown;            /* usedGpuMemory = NVML_VALUE_NOT_AVAILABLE */
    struct gs_sim_pattern mem_mib;
    struct gs_sim_pattern sm_pct, mem_pct, enc_pct, dec_pct;
    int mig_gi; /* -1: not in a MIG instance */
    int mig_ci;
    double start_s;
    double exit_s; /* INFINITY: runs forever */
};

enum gs_sim_event_kind {
    GS_SIM_EV_XID,
    GS_SIM_EV_GPU_LOST,
    GS_SIM_EV_THROTTLE_ON,
    GS_SIM_EV_THROTTLE_OFF,
    GS_SIM_EV_MIG_ENABLE,
    GS_SIM_EV_MIG_DISABLE,
    GS_SIM_EV_ECC_ERROR,
    GS_SIM_EV_PROCESS_START, /* folded into the process's start_s at parse time */
    GS_SIM_EV_PROCESS_EXIT,  /* folded into exit_s */
    GS_SIM_EV_NVLINK_DOWN,   /* NVLink link `data` goes inactive */
    GS_SIM_EV_NVLINK_UP,     /* and trains again */
};

struct gs_sim_event {
    double at_s;
    enum gs_sim_event_kind kind;
    unsigned gpu;
    unsigned long long data; /* Xid number, the reason mask of THROTTLE_*, an NVLINK_* link */
    int gi, ci;              /* MIG attribution of an Xid; -1 none */
    unsigned ecc_type;       /* NVML_MEMORY_ERROR_TYPE_* */
    unsigned ecc_location;   /* nvmlMemoryLocation_t */
    unsigned long long count;
};

/* NVLink of a GPU ("nvlink" in the file): links 0..n_links-1 answer nvmlDeviceGetNvLinkState
 * (a GPU with none answers NOT_SUPPORTED, as a PCIe card does). */
#define GS_SIM_NVLINK_MAX 36u   /* NVML_NVLINK_MAX_LINKS of the 13.3 header */
#define GS_SIM_NVLINK_ERRORS 4u /* replay, recovery, CRC flit, CRC data (NVML's order) */
struct gs_sim_nvlink {
    unsigned n_links;
    unsigned speed_mbps;                /* per link and direction; 0 while inactive */
    bool active[GS_SIM_NVLINK_MAX];     /* default: every link */
    char remote[GS_SIM_NVLINK_MAX][32]; /* far-end bus ids; "" = NOT_SUPPORTED */
    unsigned long long errors[GS_SIM_NVLINK_MAX][GS_SIM_NVLINK_ERRORS];
    double raw_overhead; /* raw counters = data * (1 + this) */
    /* "capabilities": nvmlDeviceGetNvLinkCapability of every link, bit c capability c true;
     * has_caps false: NOT_SUPPORTED */
    bool has_caps;
    unsigned caps;
};

/* Memory locations of nvmlDeviceGetMemoryErrorCounter: L1 0 .. SRAM 7. */
#define GS_SIM_ECC_LOCATIONS 8u

struct gs_sim_mig {
    bool present; /* slot used */
    unsigned gi, ci;
    char profile[32];
    char name[GS_SIM_STR_MAX];
    char uuid[GS_SIM_STR_MAX];
    uint64_t mem_total_bytes;
    uint64_t bar1_total_bytes;
    unsigned sm_count; /* 0: nvmlDeviceGetAttributes_v2 answers NOT_SUPPORTED */
    unsigned ce_count, enc_count, dec_count, ofa_count, jpg_count; /* shared engines */
    struct gs_sim_pattern metric[GS_SIM_M__COUNT];
    bool metric_given[GS_SIM_M__COUNT];
    /* the GPU instance's memory-slice placement and profile id (nvmlGpuInstanceGetInfo);
     * without "placement" that call answers NOT_SUPPORTED */
    bool has_placement;
    unsigned place_start, place_size, profile_id;
    /* what nvidia-smi -q prints of the instance beyond the above: the memory the driver
     * reserves in it (nvmlDeviceGetMemoryInfo_v2's reserved, default 0) and its volatile
     * uncorrectable SRAM ECC errors (nvmlDeviceGetMemoryErrorCounter on the MIG handle) */
    uint64_t mem_reserved_bytes;
    unsigned long long sram_unc_vol;
};

struct gs_sim_gpu {
    char name[GS_SIM_STR_MAX];
    char uuid[GS_SIM_STR_MAX];
    bool has_serial;
    char serial[32];
    char vbios[32];
    unsigned pci_domain, pci_bus, pci_device;
    unsigned pci_device_id; /* device << 16 | 0x10DE */
    unsigned pci_subsys_id;
    char bus_id[32];    /* "%08X:%02X:%02X.0" */
    bool has_pci_class; /* false: nvmlDeviceGetPciInfoExt answers NOT_SUPPORTED */
    unsigned pci_base_class, pci_sub_class;
    unsigned minor;
    unsigned arch;  /* NVML_DEVICE_ARCH_* */
    unsigned brand; /* nvmlBrandType_t */
    int cc_major, cc_minor;
    uint64_t mem_total_bytes, mem_reserved_bytes, bar1_total_bytes;
    bool has_threshold[8];
    unsigned threshold_c[8];
    bool has_power_limits;
    unsigned power_default_mw, power_limit_mw, power_enforced_mw, power_min_mw, power_max_mw;
    double energy_base_mj;
    bool has_energy;
    unsigned clock_max_mhz[4];    /* 0: not supported */
    unsigned clock_boost_max_mhz; /* customer boost maximum, graphics; 0: not supported */
    /* "board": nvmlDeviceGetBoardId / GetMultiGpuBoard / GetBoardPartNumber; without it the
     * three answer NOT_SUPPORTED, as does a part number left out */
    bool has_board, multi_gpu_board;
    unsigned board_id;
    char board_part[GS_SIM_STR_MAX];
    char gsp_version[GS_SIM_STR_MAX]; /* "" : GetGspFirmwareVersion answers NOT_SUPPORTED */
    unsigned pcie_max_gen, pcie_gpu_max_gen, pcie_max_width;
    unsigned pcie_replays, pcie_replay_rollovers;
    double pcie_count_base; /* fields 197/198 at t = 0, bytes (pcie.count_base_bytes) */
    double
        pcie_count_reset_s; /* the counters restart from 0 here (pcie.count_reset_s; -1: never) */
    bool persistence;
    unsigned compute_mode;
    bool has_ecc;
    bool ecc_current, ecc_pending;
    bool ecc_location[GS_SIM_ECC_LOCATIONS];
    unsigned long long ecc_aggregate[2][GS_SIM_ECC_LOCATIONS]; /* [type][location] at t = 0 */
    bool has_retired;
    unsigned retired_count[2];
    unsigned long long *retired_addr[2];
    bool retired_pending;
    bool has_remap;
    unsigned remap_corr, remap_unc;
    bool remap_pending, remap_failure;
    bool has_remap_inactive[2]; /* correctable, uncorrectable not in use: fields 301, 302 */
    unsigned remap_inactive[2];
    /* "remapped_rows"."histogram": banks with max/high/partial/low/none spare rows left */
    bool has_remap_hist;
    unsigned remap_hist[5];
    /* nvidia-smi -q detail readings; has_ false: the call answers NOT_SUPPORTED (the recovery
     * action: field 230 does) */
    bool has_addressing, has_virt, has_host_vgpu, has_c2c, has_egm, has_recovery;
    unsigned addressing_mode, virt_mode, host_vgpu_mode, recovery_action;
    bool c2c_enabled, egm;
    /* "edpp_multiplier_pct": field 274 */
    bool has_edpp;
    unsigned edpp_pct;
    /* "tlimit_thresholds_c": fields 193-196 (shutdown, slowdown, memory max, GPU max), signed */
    bool has_tlimit[4];
    int tlimit_c[4];
    /* "sram_ecc": nvmlDeviceGetSramEccErrorStatus, in the struct's order: aggregate parity,
     * SEC-DED, corrected; volatile parity, SEC-DED, corrected; aggregate L2, SM, PCIe, MCU,
     * other */
    bool has_sram;
    unsigned long long sram[11];
    bool sram_threshold;
    /* "fabric": nvmlDeviceGetGpuFabricInfoV */
    bool has_fabric;
    unsigned fabric_state, fabric_clique;
    int fabric_status;
    unsigned char fabric_cluster[16];
    unsigned fabric_health_mask; /* healthMask as nvml.h lays it out (NVML_GPU_FABRIC_HEALTH_*) */
    unsigned fabric_health_summary; /* NVML_GPU_FABRIC_HEALTH_SUMMARY_* */
    unsigned long long reasons_supported;
    bool idle_reason;
    bool gpm;
    bool accessible;
    double util_window_s;
    double power_window_s;
    double sample_interval_s;
    unsigned enc_period_us;
    double pcie_delay_ms;
    bool mig_capable;
    bool mig_initially_on;
    unsigned mig_max;
    struct gs_sim_mig mig[GS_SIM_MAX_MIG];
    struct gs_sim_override override[GS_SIM_MAX_OVERRIDES];
    unsigned n_override;
    unsigned unsupported_fields[GS_SIM_MAX_OVERRIDES];
    unsigned n_unsupported_fields;
    unsigned unsupported_gpm[GS_SIM_MAX_OVERRIDES];
    unsigned n_unsupported_gpm;
    unsigned unsupported_samples; /* bit per nvmlSamplingType_t */
    struct gs_sim_pattern metric[GS_SIM_M__COUNT];
    bool metric_given[GS_SIM_M__COUNT];
    /* inforom: image version and the OEM, ECC and power object versions ("" = the object is
     * missing: NOT_SUPPORTED); no inforom at all: every call NOT_SUPPORTED */
    bool has_inforom;
    bool inforom_valid; /* false: nvmlDeviceValidateInforom answers CORRUPTED_INFOROM */
    char inforom[4][16];
    /* display (a monitor attached, a display initialised), accounting (mode, ring size) and
     * GSP firmware (enabled, enabled by default); has_ false: NOT_SUPPORTED */
    bool has_display_attached, display_attached;
    bool has_display_active, display_active;
    bool has_accounting_mode, accounting_mode;
    bool has_accounting_buffer;
    unsigned accounting_buffer;
    bool has_gsp;
    bool gsp_enabled, gsp_default;
    struct gs_sim_nvlink nvlink;
    /* "topology": nvmlDeviceGetCpuAffinity / GetMemoryAffinity (CPU and NUMA node lists as
     * ranges, "" : NOT_SUPPORTED), GetNumaNodeId (has_gpu_numa) and
     * GetTopologyCommonAncestor (level[j] toward GPU j, NVML's nvmlGpuTopologyLevel_t;
     * has_level[j] false: NOT_SUPPORTED). Without it every one answers NOT_SUPPORTED. */
    char cpu_affinity[GS_SIM_STR_MAX * 4], numa_affinity[GS_SIM_STR_MAX];
    bool has_gpu_numa;
    unsigned gpu_numa_id;
    bool has_level[GS_SIM_MAX_GPUS];
    unsigned level[GS_SIM_MAX_GPUS];
    /* the whole GPU's other -q rows (parse_detail_gpu); has_ false: NOT_SUPPORTED */
    bool has_pdi, has_module_id, has_gom, has_vgpu_hetero, has_protected, has_unrepairable;
    unsigned long long pdi;
    unsigned module_id, gom[2]; /* gom: current, pending */
    bool vgpu_hetero, unrepairable;
    bool has_atomics[2]; /* fields 228 (outbound) and 229 (inbound) */
    unsigned atomics[2];
    uint64_t protected_total, protected_used;
};

struct gs_sim_arena;

struct gs_sim_scenario {
    char description[1024];
    char driver_version[80];
    char nvml_version[80];
    int cuda_version; /* major * 1000 + minor * 10 */
    int init_error;   /* nvmlReturn_t forced on init; 0 = none */
    bool privileged;
    struct gs_sim_override override[GS_SIM_MAX_OVERRIDES];
    unsigned n_override;
    unsigned n_gpus;
    struct gs_sim_gpu *gpus; /* n_gpus, in the arena */
    unsigned n_procs;
    struct gs_sim_proc *procs; /* in the arena */
    unsigned n_events;
    struct gs_sim_event *events; /* sorted by at_s (stable) */
    struct gs_sim_arena *arena;
};

/*
 * Parses a scenario from buf (len bytes, need not be NUL-terminated). origin names the text in
 * messages ("path/to/file.json"). On success returns 0 and sets *out (free it with
 * gs_sim_scenario_free). On failure returns -1, leaves *out NULL and writes one line
 * "origin:line:column: what is wrong" into err (err_len bytes, always terminated). Never prints.
 * Pids of "self" and {"env": ...} processes are resolved later by gs_sim_scenario_resolve.
 */
int gs_sim_scenario_parse(const char *buf, size_t len, const char *origin,
                          struct gs_sim_scenario **out, char *err, size_t err_len);

/* Reads the file at path (at most GS_SIM_MAX_SCENARIO_BYTES) and parses it as above. */
int gs_sim_scenario_load(const char *path, struct gs_sim_scenario **out, char *err, size_t err_len);

/* Resolves "self" and environment pids for this process. Returns 0, or -1 with a message. */
int gs_sim_scenario_resolve(struct gs_sim_scenario *sc, char *err, size_t err_len);

/* Frees a scenario and everything in its arena; NULL is fine. */
void gs_sim_scenario_free(struct gs_sim_scenario *sc);

/* Maps "NOT_SUPPORTED", "GPU_IS_LOST", ... (with or without the NVML_ERROR_ prefix) to a code;
 * -1 if unknown. */
int gs_sim_rc_by_name(const char *name);

#endif
