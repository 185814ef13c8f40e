/*
 * Our own declaration of the subset of the NVML ABI that gpuscope uses.
 *
 * We never include NVIDIA's nvml.h: the product loads libnvidia-ml.so.1 with dlopen and
 * resolves every symbol by name, so it runs on any driver without a build-time dependency.
 * Everything here is restated from shared/reference/nvml-abi.md (x86_64 Linux, LP64); the
 * sizes and offsets are checked against the real header by tests/abi/test_nvml_abi.c and
 * pinned by the static asserts at the end of this file. nvml-sim (sim/) implements the same
 * declarations, so a mistake here would be invisible to the sim alone: keep the asserts.
 *
 * Names keep NVML's spelling (nvmlFoo_t) so that a reader can match them against NVIDIA's
 * documentation; they live only in backend and sim code, never in include/gpuscope/.
 */
#ifndef GS_NVML_ABI_H
#define GS_NVML_ABI_H

#include <assert.h>
#include <stddef.h>

/* ---- return codes (§1) ------------------------------------------------------------------ */
typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_UNKNOWN = 999,
};

/* ---- handles: pointers to incomplete structs (8 bytes) ---------------------------------- */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;

/* ---- enums (all 4 bytes; declared as unsigned int) -------------------------------------- */
typedef unsigned int nvmlEnableState_t; /* NVML_FEATURE_DISABLED 0, ENABLED 1 */
enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };

typedef unsigned int nvmlBrandType_t;
typedef unsigned int nvmlDeviceArchitecture_t;
enum {
    NVML_DEVICE_ARCH_KEPLER = 2,
    NVML_DEVICE_ARCH_MAXWELL = 3,
    NVML_DEVICE_ARCH_PASCAL = 4,
    NVML_DEVICE_ARCH_VOLTA = 5,
    NVML_DEVICE_ARCH_TURING = 6,
    NVML_DEVICE_ARCH_AMPERE = 7,
    NVML_DEVICE_ARCH_ADA = 8,
    NVML_DEVICE_ARCH_HOPPER = 9,
    NVML_DEVICE_ARCH_BLACKWELL = 10,
    NVML_DEVICE_ARCH_RUBIN = 13,
};
/* A define, not an enumerator: C17 enumerators must fit an int. */
#define NVML_DEVICE_ARCH_UNKNOWN 0xFFFFFFFFu

typedef unsigned int nvmlTemperatureSensors_t;
enum { NVML_TEMPERATURE_GPU = 0 };

typedef unsigned int nvmlTemperatureThresholds_t;
enum {
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
    NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
    NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
    NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN = 4,
    NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR = 5,
    NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX = 6,
};

typedef unsigned int nvmlClockType_t;
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };

typedef unsigned int nvmlPstates_t; /* P0 = 0 .. P15 = 15 */
enum { NVML_PSTATE_UNKNOWN = 32 };

typedef unsigned int nvmlPcieUtilCounter_t;
enum { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };

typedef unsigned int nvmlComputeMode_t;
enum {
    NVML_COMPUTEMODE_DEFAULT = 0,
    NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
    NVML_COMPUTEMODE_PROHIBITED = 2,
    NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
};

typedef unsigned int nvmlMemoryErrorType_t;
enum { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
typedef unsigned int nvmlEccCounterType_t;
enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
typedef unsigned int nvmlPageRetirementCause_t;
enum {
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
};

typedef unsigned int nvmlSamplingType_t;
enum {
    NVML_TOTAL_POWER_SAMPLES = 0,
    NVML_GPU_UTILIZATION_SAMPLES = 1,
    NVML_MEMORY_UTILIZATION_SAMPLES = 2,
    NVML_ENC_UTILIZATION_SAMPLES = 3,
    NVML_DEC_UTILIZATION_SAMPLES = 4,
    NVML_PROCESSOR_CLK_SAMPLES = 5,
    NVML_MEMORY_CLK_SAMPLES = 6,
};
typedef unsigned int nvmlValueType_t;
enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    NVML_VALUE_TYPE_SIGNED_INT = 5,
    NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
};

enum { NVML_DEVICE_MIG_DISABLE = 0, NVML_DEVICE_MIG_ENABLE = 1 };

typedef unsigned int nvmlInforomObject_t; /* nvmlDeviceGetInforomVersion */
enum { NVML_INFOROM_OEM = 0, NVML_INFOROM_ECC = 1, NVML_INFOROM_POWER = 2 };

/* ---- constants ------------------------------------------------------------------------- */
#define NVML_INIT_FLAG_NO_GPUS 0x1u
#define NVML_INIT_FLAG_NO_ATTACH 0x2u
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30
#define NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE 32
#define NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE 16
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_VALUE_NOT_AVAILABLE (~0ULL) /* usedGpuMemory when unknown */
#define NVML_MIG_ID_NONE 0xFFFFFFFFu     /* gpuInstanceId/computeInstanceId with MIG off */

/* Clock event (throttle) reason bits, same values under the old and new names (§5). */
#define nvmlClocksEventReasonGpuIdle 0x1ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x2ULL
#define nvmlClocksEventReasonSwPowerCap 0x4ULL
#define nvmlClocksEventReasonHwSlowdown 0x8ULL
#define nvmlClocksEventReasonSyncBoost 0x10ULL
#define nvmlClocksEventReasonSwThermalSlowdown 0x20ULL
#define nvmlClocksEventReasonHwThermalSlowdown 0x40ULL
#define nvmlClocksEventReasonHwPowerBrakeSlowdown 0x80ULL
#define nvmlClocksEventReasonDisplayClockSetting 0x100ULL

/* Event type bits (§8). */
#define nvmlEventTypeSingleBitEccError 0x1ULL
#define nvmlEventTypeDoubleBitEccError 0x2ULL
#define nvmlEventTypePState 0x4ULL
#define nvmlEventTypeXidCriticalError 0x8ULL

/* Field value ids (§6); values are fixed forever. */
enum {
    NVML_FI_DEV_ECC_CURRENT = 1,
    NVML_FI_DEV_ECC_PENDING = 2,
    NVML_FI_DEV_PERF_POLICY_POWER = 74,
    NVML_FI_DEV_PERF_POLICY_THERMAL = 75,
    NVML_FI_DEV_PERF_POLICY_SYNC_BOOST = 76,
    NVML_FI_DEV_MEMORY_TEMP = 82,
    NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION = 83,
    NVML_FI_DEV_PCIE_REPLAY_COUNTER = 94,
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138,
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139,
    NVML_FI_DEV_POWER_AVERAGE = 185,
    NVML_FI_DEV_POWER_INSTANT = 186,
    NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN = 269,
    NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN = 270,
    NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN = 271,
};

/* GPM metric ids (§10). */
enum {
    NVML_GPM_METRIC_GRAPHICS_UTIL = 1,
    NVML_GPM_METRIC_SM_UTIL = 2,
    NVML_GPM_METRIC_SM_OCCUPANCY = 3,
    NVML_GPM_METRIC_INTEGER_UTIL = 4,
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
    NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
};
/* The driver's NVML_GPM_METRIC_MAX changed (98, 210, 333); we allocate the largest known. */
#define GS_NVML_GPM_METRIC_MAX 333
#define NVML_GPM_SUPPORT_VERSION 1u     /* plain 1, not size-encoded (go-nvml#168) */
#define NVML_GPM_METRICS_GET_VERSION 1u /* plain 1 */

/* ---- structs (§3 – §10) ---------------------------------------------------------------- */

/* nvmlPciInfo_t as written by nvmlDeviceGetPciInfo_v3: 68 bytes. */
typedef struct {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

/* nvmlDeviceGetPciInfoExt (550+): a versioned struct that adds the PCI class codes (§3). */
typedef struct {
    unsigned int version;
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    unsigned int baseClass;
    unsigned int subClass;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfoExt_v1_t;
#define nvmlPciInfoExt_v1 0x01000040u /* sizeof(nvmlPciInfoExt_v1_t) | 1 << 24 */

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 0x02000028u /* sizeof(nvmlMemory_v2_t) | 2 << 24 */

typedef struct {
    unsigned long long bar1Total;
    unsigned long long bar1Free;
    unsigned long long bar1Used;
} nvmlBAR1Memory_t;

/* nvmlDeviceGetAttributes_v2: a (MIG) device's SM and shared engine counts. */
typedef struct {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

/* nvmlGpuInstanceGetInfo: a GPU instance's memory-slice placement and profile id. */
typedef struct {
    unsigned int start; /* first memory slice */
    unsigned int size;  /* slices occupied */
} nvmlGpuInstancePlacement_t;

typedef struct {
    nvmlDevice_t device; /* the parent GPU */
    unsigned int id;
    unsigned int profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned long long timeStamp;
    nvmlValue_t sampleValue;
} nvmlSample_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

/* Process list entries. The backend allocates GS_NVML_PROC_STRIDE_MAX bytes per entry and
 * parses with the stride the loaded library is known to write (§7). */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
    unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessDetail_v1_t; /* also the "v3" entry of _v3 on 535.43.02–535.86.05 */
#define GS_NVML_PROC_STRIDE_MAX 32

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

/* nvmlDeviceGetTemperatureV (565+): a versioned struct (§5). */
typedef struct {
    unsigned int version;
    nvmlTemperatureSensors_t sensorType;
    int temperature;
} nvmlTemperature_t;
#define nvmlTemperature_v1 0x0100000Cu /* sizeof(nvmlTemperature_t) | 1 << 24 */

/* nvmlDeviceGetMarginTemperature (555+): degrees C left before the GPU slows down (§5). */
typedef struct {
    unsigned int version;
    int marginTemperature;
} nvmlMarginTemperature_t;
#define nvmlMarginTemperature_v1 0x01000008u /* sizeof(nvmlMarginTemperature_t) | 1 << 24 */

typedef struct {
    unsigned int version;
    unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

/* Buffer sizes nvml.h guarantees for nvmlDeviceGetBoardPartNumber and
 * nvmlDeviceGetGspFirmwareVersion (which takes no length). */
#define NVML_DEVICE_PART_NUMBER_BUFFER_SIZE 80
#define NVML_GSP_FIRMWARE_VERSION_BUF_SIZE 0x40

/* nvmlDeviceGetFBCStats: frame buffer capture sessions (nvml.h nvmlFBCStats_t; Maxwell+). */
typedef struct {
    unsigned int sessionsCount;
    unsigned int averageFPS;
    unsigned int averageLatency; /* us */
} nvmlFBCStats_t;

/* nvmlDeviceGetRepairStatus (NVML 13.0, drivers 580+): TPC / memory channel repair pending
 * (Ampere+), version 1. */
typedef struct {
    unsigned int version;
    unsigned int bChannelRepairPending;
    unsigned int bTpcRepairPending;
} nvmlRepairStatus_t;
#define nvmlRepairStatus_v1 0x0100000Cu /* sizeof(nvmlRepairStatus_t) | 1 << 24 */

/* ---- -q detail readings (GS_WANT_DETAIL): modes, SRAM error status, bank-remap histogram,
 * fabric, capabilities. Layouts from the 13.3 header (§0 source H). ---------------------- */
/* nvmlDeviceGetVirtualizationMode (nvmlGpuVirtualizationMode_t) */
typedef unsigned int nvmlGpuVirtualizationMode_t;
enum {
    NVML_GPU_VIRTUALIZATION_MODE_NONE = 0,
    NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH = 1,
    NVML_GPU_VIRTUALIZATION_MODE_VGPU = 2,
    NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU = 3,
    NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA = 4,
};
/* nvmlDeviceGetHostVgpuMode (nvmlHostVgpuMode_t) */
typedef unsigned int nvmlHostVgpuMode_t;
enum { NVML_HOST_VGPU_MODE_NON_SRIOV = 0, NVML_HOST_VGPU_MODE_SRIOV = 1 };

/* nvmlDeviceGetAddressingMode (NVML 12.8+), version 1: value is NONE 0, HMM 1, ATS 2. */
typedef struct {
    unsigned int version;
    unsigned int value;
} nvmlDeviceAddressingMode_t;
#define nvmlDeviceAddressingMode_v1 0x01000008u /* sizeof | 1 << 24 */
enum {
    NVML_DEVICE_ADDRESSING_MODE_NONE = 0,
    NVML_DEVICE_ADDRESSING_MODE_HMM = 1,
    NVML_DEVICE_ADDRESSING_MODE_ATS = 2,
};

/* nvmlDeviceGetC2cModeInfoV: no version member (the header's nvmlC2cModeInfo_v1_t). */
typedef struct {
    unsigned int isC2cEnabled;
} nvmlC2cModeInfo_v1_t;

/* nvmlDeviceGetCapabilities (NVML 12.8+), version 1: capMask bit NVML_DEV_CAP_EGM. */
typedef struct {
    unsigned int version;
    unsigned int capMask;
} nvmlDeviceCapabilities_t;
#define nvmlDeviceCapabilities_v1 0x01000008u /* sizeof | 1 << 24 */
#define NVML_DEV_CAP_EGM (1 << 0)             /* extended GPU memory */

/* nvmlDeviceGetSramEccErrorStatus (NVML 12.4+), version 1: 4 bytes of padding after version. */
typedef struct {
    unsigned int version;
    unsigned long long aggregateUncParity;
    unsigned long long aggregateUncSecDed;
    unsigned long long aggregateCor;
    unsigned long long volatileUncParity;
    unsigned long long volatileUncSecDed;
    unsigned long long volatileCor;
    unsigned long long aggregateUncBucketL2;
    unsigned long long aggregateUncBucketSm;
    unsigned long long aggregateUncBucketPcie;
    unsigned long long aggregateUncBucketMcu;
    unsigned long long aggregateUncBucketOther;
    unsigned int bThresholdExceeded;
} nvmlEccSramErrorStatus_t;
#define nvmlEccSramErrorStatus_v1 0x01000068u /* sizeof | 1 << 24 */

/* nvmlDeviceGetRowRemapperHistogram: banks by spare rows left. */
typedef struct {
    unsigned int max;
    unsigned int high;
    unsigned int partial;
    unsigned int low;
    unsigned int none;
} nvmlRowRemapperHistogramValues_t;

/* nvmlDeviceGetGpuFabricInfoV with version 3 (nvmlGpuFabricInfo_v3_t, 565+). */
#define NVML_GPU_FABRIC_UUID_LEN 16
typedef unsigned char nvmlGpuFabricState_t;
enum {
    NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0,
    NVML_GPU_FABRIC_STATE_NOT_STARTED = 1,
    NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2,
    NVML_GPU_FABRIC_STATE_COMPLETED = 3,
};
typedef struct {
    unsigned int version;
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status; /* meaningful once state is COMPLETED */
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
    unsigned int healthMask;
    unsigned char healthSummary;
} nvmlGpuFabricInfo_v3_t;
#define nvmlGpuFabricInfo_v3 0x03000028u /* sizeof | 3 << 24 */
/* healthMask: one field per condition, (mask >> SHIFT_X) & WIDTH_X as nvml.h's
 * NVML_GPU_FABRIC_HEALTH_GET does (the WIDTH is the field's mask). Each field's value 0 is "not
 * supported"; the two-state fields are TRUE 1 / FALSE 2. */
#define NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE 1
#define NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE 2
#define NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW 0
#define NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW 0x3
#define NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_TRUE 1
#define NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE 2
#define NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY 2
#define NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_RECOVERY 0x3
#define NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE 1
#define NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE 2
#define NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY 4
#define NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_UNHEALTHY 0x3
#define NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_TRUE 1
#define NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE 2
#define NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY 6
#define NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ACCESS_TIMEOUT_RECOVERY 0x3
#define NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE 1
#define NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCORRECT_SYSGUID 2
#define NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCORRECT_CHASSIS_SN 3
#define NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NO_PARTITION 4
#define NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INSUFFICIENT_NVLINKS 5
#define NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCOMPATIBLE_GPU_FW 6
#define NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INVALID_LOCATION 7
#define NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_GPU_STATE_INVALID 8
#define NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION 8
#define NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_INCORRECT_CONFIGURATION 0xf
#define NVML_GPU_FABRIC_HEALTH_MASK_PARTITION_ASSIGNED_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_HEALTH_MASK_PARTITION_ASSIGNED_TRUE 1
#define NVML_GPU_FABRIC_HEALTH_MASK_PARTITION_ASSIGNED_FALSE 2
#define NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_PARTITION_ASSIGNED 12
#define NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_PARTITION_ASSIGNED 0x3
/* healthSummary */
#define NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY 1
#define NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY 2
#define NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY 3

/* Power scopes of the power field values (scopeId of NVML_FI_DEV_POWER_*). */
#define NVML_POWER_SCOPE_GPU 0U
#define NVML_POWER_SCOPE_MODULE 1U
#define NVML_POWER_SCOPE_MEMORY 2U

/* Field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION's values (nvmlDeviceGpuRecoveryAction_t). */
enum {
    NVML_GPU_RECOVERY_ACTION_NONE = 0,
    NVML_GPU_RECOVERY_ACTION_GPU_RESET = 1,
    NVML_GPU_RECOVERY_ACTION_NODE_REBOOT = 2,
    NVML_GPU_RECOVERY_ACTION_DRAIN_P2P = 3,
    NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET = 4,
};

typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct {
        char *shortName;
        char *longName;
        char *unit;
    } metricInfo;
} nvmlGpmMetric_t;

typedef struct {
    unsigned int version;
    unsigned int numMetrics;
    nvmlGpmSample_t sample1;
    nvmlGpmSample_t sample2;
    nvmlGpmMetric_t metrics[GS_NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

/* ---- further declarations used by nvml-sim (sim/), same sources ------------------------ */
#define NVML_INIT_FLAG_FORCE_INIT 0x4u    /* 590+ */
#define nvmlEventMigConfigChange 0x100ULL /* NVIDIA's name has no "Type" (§8) */

typedef unsigned int nvmlMemoryLocation_t; /* nvmlDeviceGetMemoryErrorCounter (§8) */
enum {
    NVML_MEMORY_LOCATION_L1_CACHE = 0,
    NVML_MEMORY_LOCATION_L2_CACHE = 1,
    NVML_MEMORY_LOCATION_DRAM = 2,
    NVML_MEMORY_LOCATION_DEVICE_MEMORY = 2,
    NVML_MEMORY_LOCATION_REGISTER_FILE = 3,
    NVML_MEMORY_LOCATION_TEXTURE_MEMORY = 4,
    NVML_MEMORY_LOCATION_TEXTURE_SHM = 5,
    NVML_MEMORY_LOCATION_CBU = 6,
    NVML_MEMORY_LOCATION_SRAM = 7,
};

enum {
    NVML_FI_DEV_ECC_SBE_VOL_TOTAL = 3,
    NVML_FI_DEV_ECC_DBE_VOL_TOTAL = 4,
    NVML_FI_DEV_ECC_SBE_AGG_TOTAL = 5,
    NVML_FI_DEV_ECC_DBE_AGG_TOTAL = 6,
    NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER = 95,
    NVML_FI_DEV_REMAPPED_COR = 142,
    NVML_FI_DEV_REMAPPED_UNC = 143,
    NVML_FI_DEV_REMAPPED_PENDING = 144,
    NVML_FI_DEV_REMAPPED_FAILURE = 145,
    NVML_FI_DEV_POWER_MIN_LIMIT = 187,
    NVML_FI_DEV_POWER_MAX_LIMIT = 188,
    NVML_FI_DEV_POWER_DEFAULT_LIMIT = 189,
    NVML_FI_DEV_POWER_CURRENT_LIMIT = 190,
    NVML_FI_DEV_ENERGY = 191,
    NVML_FI_DEV_POWER_REQUESTED_LIMIT = 192,
    NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT = 193, /* T.Limit-relative thresholds, signed C */
    NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT = 194,
    NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT = 195,
    NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT = 196,
    NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230,
    NVML_FI_DEV_EDPP_MULTIPLIER = 274,            /* percent */
    NVML_FI_DEV_REMAPPED_ROWS_COR_INACTIVE = 301, /* remapped rows not in use (595+) */
    NVML_FI_DEV_REMAPPED_ROWS_UNC_INACTIVE = 302,
};

/* nvmlDeviceGetRunningProcessDetailList (535.104+, §7). */
typedef struct {
    unsigned int version;
    unsigned int mode;
    unsigned int numProcArrayEntries;
    nvmlProcessDetail_v1_t *procArray;
} nvmlProcessDetailList_t;
#define nvmlProcessDetailList_v1 0x01000018u /* sizeof(nvmlProcessDetailList_t) | 1 << 24 */
enum {
    NVML_PROCESS_MODE_COMPUTE = 0,
    NVML_PROCESS_MODE_GRAPHICS = 1,
    NVML_PROCESS_MODE_MPS = 2,
    NVML_PROCESS_MODE_ALL = 3,
};

typedef struct {
    unsigned long long protectedMemSizeKib;
    unsigned long long unprotectedMemSizeKib;
} nvmlConfComputeMemSizeInfo_t;

/* The pre-415 nvmlPciInfo_t that plain nvmlDeviceGetPciInfo wrote on old drivers (§3): 52 bytes,
 * busId[16] ("%04X:%02X:%02X.0") first, four reserved words last. NVIDIA gave it no own name. */
struct gs_nvml_pci_info_legacy {
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    unsigned int reserved[4];
};

/* ---- NVLink (§6): link state, speed, throughput and error counters ---------------------- */
/* nvmlDeviceGetNvLinkErrorCounter's counter (nvmlNvLinkErrorCounter_t of the header). */
typedef unsigned int nvmlNvLinkErrorCounter_t;
enum {
    NVML_NVLINK_ERROR_DL_REPLAY = 0,   /* data link transmit replays */
    NVML_NVLINK_ERROR_DL_RECOVERY = 1, /* data link transmit recoveries */
    NVML_NVLINK_ERROR_DL_CRC_FLIT = 2, /* receive flow-control digit CRC errors */
    NVML_NVLINK_ERROR_DL_CRC_DATA = 3, /* receive data CRC errors */
};
/* nvmlDeviceGetNvLinkRemoteDeviceType's answer (nvmlIntNvLinkDeviceType_t of the header). */
typedef unsigned int nvmlIntNvLinkDeviceType_t;
enum {
    NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
    NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
    NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
};

/* nvmlDeviceGetNvLinkCapability's capability (nvmlNvLinkCapability_t of the header). */
typedef unsigned int nvmlNvLinkCapability_t;
enum {
    NVML_NVLINK_CAP_P2P_SUPPORTED = 0,  /* P2P over the link */
    NVML_NVLINK_CAP_SYSMEM_ACCESS = 1,  /* access to system memory */
    NVML_NVLINK_CAP_P2P_ATOMICS = 2,    /* P2P atomics */
    NVML_NVLINK_CAP_SYSMEM_ATOMICS = 3, /* system memory atomics */
    NVML_NVLINK_CAP_SLI_BRIDGE = 4,     /* SLI over the link */
    NVML_NVLINK_CAP_VALID = 5,          /* the link is supported on this device */
    NVML_NVLINK_CAP_COUNT = 6,
};

/* ---- Topology (§ CPU and memory affinity, topology queries) ------------------------------ */
/* nvmlDeviceGetTopologyCommonAncestor's answer (nvmlGpuTopologyLevel_t of the header): the
 * closest PCIe ancestor two GPUs share. */
typedef unsigned int nvmlGpuTopologyLevel_t;
enum {
    NVML_TOPOLOGY_INTERNAL = 0,    /* on one board (Tesla K80) */
    NVML_TOPOLOGY_SINGLE = 10,     /* through a single PCIe switch */
    NVML_TOPOLOGY_MULTIPLE = 20,   /* through several switches, no host bridge */
    NVML_TOPOLOGY_HOSTBRIDGE = 30, /* through one host bridge */
    NVML_TOPOLOGY_NODE = 40,       /* host bridges of one NUMA node */
    NVML_TOPOLOGY_SYSTEM = 50,     /* across NUMA nodes */
};
/* nvmlDeviceGetMemoryAffinity's scope. */
typedef unsigned int nvmlAffinityScope_t;
#define NVML_AFFINITY_SCOPE_NODE 0
#define NVML_AFFINITY_SCOPE_SOCKET 1

/* NVML_NVLINK_MAX_LINKS grew by header: 4, 6, 12, 18, 36 (610 / 13.3). We size for the largest
 * and still stop at the first link the driver refuses (INVALID_ARGUMENT / NOT_SUPPORTED). */
#define GS_NVML_NVLINK_MAX_LINKS 36
#define GS_NVML_SCOPE_ALL_LINKS 0xFFFFFFFFu /* scopeId of a throughput field: the sum of links */
enum {
    NVML_FI_DEV_NVLINK_SPEED_MBPS_L0 = 84, /* L0..L5 = 84..89, MBps */
    NVML_FI_DEV_NVLINK_SPEED_MBPS_L5 = 89,
    NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON = 90,
    NVML_FI_DEV_NVLINK_LINK_COUNT = 91,
    NVML_FI_DEV_NVLINK_SPEED_MBPS_L6 = 132, /* L6..L11 = 132..137 */
    NVML_FI_DEV_NVLINK_SPEED_MBPS_L11 = 137,
    NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX = 140, /* KiB, data + protocol overhead */
    NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX = 141,
};

/* ---- layout pins: a wrong size here crashes a real driver ------------------------------- */
static_assert(sizeof(nvmlReturn_t) == 4, "nvmlReturn_t is a 4-byte enum");
static_assert(sizeof(nvmlDevice_t) == 8, "handles are pointers");
static_assert(sizeof(nvmlInforomObject_t) == 4, "enums are 4 bytes");
static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t (v3) is 68 bytes");
static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "busId at 36");
static_assert(sizeof(nvmlPciInfoExt_v1_t) == 64, "nvmlPciInfoExt_v1_t is 64 bytes");
static_assert(offsetof(nvmlPciInfoExt_v1_t, baseClass) == 24, "baseClass at 24");
static_assert(offsetof(nvmlPciInfoExt_v1_t, subClass) == 28, "subClass at 28");
static_assert(offsetof(nvmlPciInfoExt_v1_t, busId) == 32, "busId at 32");
static_assert(nvmlPciInfoExt_v1 == (sizeof(nvmlPciInfoExt_v1_t) | (1u << 24)), "struct version");
static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t");
static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t");
static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t");
static_assert(offsetof(nvmlMemory_v2_t, reserved) == 16, "reserved at 16");
static_assert(offsetof(nvmlMemory_v2_t, used) == 32, "used at 32");
static_assert(nvmlMemory_v2 == (sizeof(nvmlMemory_v2_t) | (2u << 24)), "struct version");
static_assert(sizeof(nvmlBAR1Memory_t) == 24, "nvmlBAR1Memory_t");
static_assert(sizeof(nvmlDeviceAttributes_t) == 40, "nvmlDeviceAttributes_t");
static_assert(sizeof(nvmlValue_t) == 8, "nvmlValue_t");
static_assert(sizeof(nvmlSample_t) == 16, "nvmlSample_t");
static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t");
static_assert(offsetof(nvmlFieldValue_t, nvmlReturn) == 28, "field nvmlReturn at 28");
static_assert(offsetof(nvmlFieldValue_t, value) == 32, "field value at 32");
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "process info v1");
static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "process info v2");
static_assert(sizeof(nvmlProcessDetail_v1_t) == 32, "process detail v1");
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "process utilization sample");
static_assert(sizeof(nvmlEventData_t) == 32, "event data");
static_assert(sizeof(nvmlGpmSupport_t) == 8, "gpm support");
static_assert(sizeof(nvmlGpmMetric_t) == 40, "gpm metric");
static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24, "gpm metrics array at 24");
static_assert(sizeof(nvmlGpmMetricsGet_t) == 13344, "gpm metrics get, MAX 333");
static_assert(sizeof(nvmlTemperature_t) == 12, "temperature v1");
static_assert(nvmlTemperature_v1 == (sizeof(nvmlTemperature_t) | (1u << 24)), "struct version");
static_assert(sizeof(nvmlMarginTemperature_t) == 8, "margin temperature v1");
static_assert(offsetof(nvmlMarginTemperature_t, marginTemperature) == 4, "margin at 4");
static_assert(nvmlMarginTemperature_v1 == (sizeof(nvmlMarginTemperature_t) | (1u << 24)),
              "struct version");
static_assert(sizeof(nvmlFBCStats_t) == 12, "FBC stats");
static_assert(sizeof(nvmlRepairStatus_t) == 12, "repair status v1");
static_assert(offsetof(nvmlRepairStatus_t, bTpcRepairPending) == 8, "TPC flag at 8");
static_assert(nvmlRepairStatus_v1 == (sizeof(nvmlRepairStatus_t) | (1u << 24)), "struct version");

static_assert(sizeof(nvmlDeviceAddressingMode_t) == 8, "addressing mode v1");
static_assert(nvmlDeviceAddressingMode_v1 == (sizeof(nvmlDeviceAddressingMode_t) | (1u << 24)),
              "struct version");
static_assert(sizeof(nvmlC2cModeInfo_v1_t) == 4, "C2C mode info v1");
static_assert(sizeof(nvmlDeviceCapabilities_t) == 8, "device capabilities v1");
static_assert(nvmlDeviceCapabilities_v1 == (sizeof(nvmlDeviceCapabilities_t) | (1u << 24)),
              "struct version");
static_assert(sizeof(nvmlEccSramErrorStatus_t) == 104, "SRAM ECC error status v1");
static_assert(offsetof(nvmlEccSramErrorStatus_t, aggregateUncParity) == 8, "parity at 8");
static_assert(offsetof(nvmlEccSramErrorStatus_t, bThresholdExceeded) == 96, "threshold at 96");
static_assert(nvmlEccSramErrorStatus_v1 == (sizeof(nvmlEccSramErrorStatus_t) | (1u << 24)),
              "struct version");
static_assert(sizeof(nvmlRowRemapperHistogramValues_t) == 20, "row remapper histogram");
static_assert(sizeof(nvmlGpuFabricInfo_v3_t) == 40, "fabric info v3");
static_assert(offsetof(nvmlGpuFabricInfo_v3_t, status) == 20, "fabric status at 20");
static_assert(offsetof(nvmlGpuFabricInfo_v3_t, state) == 28, "fabric state at 28");
static_assert(offsetof(nvmlGpuFabricInfo_v3_t, healthMask) == 32, "fabric health mask at 32");
static_assert(offsetof(nvmlGpuFabricInfo_v3_t, healthSummary) == 36, "fabric summary at 36");
static_assert(nvmlGpuFabricInfo_v3 == (sizeof(nvmlGpuFabricInfo_v3_t) | (3u << 24)),
              "struct version");

static_assert(sizeof(nvmlProcessDetailList_t) == 24, "process detail list v1");
static_assert(nvmlProcessDetailList_v1 == (sizeof(nvmlProcessDetailList_t) | (1u << 24)),
              "struct version");
static_assert(sizeof(nvmlConfComputeMemSizeInfo_t) == 16, "conf compute mem size info");
static_assert(sizeof(struct gs_nvml_pci_info_legacy) == 52, "legacy pci info");

/* ---- -q whole-GPU rows (GS_WANT_DETAIL): PDI, module id, GPU operation mode, vGPU
 * heterogeneous mode, PCIe atomics, protected memory, unrepairable memory. Layouts and values
 * from the 13.3 header (§0 source H). --------------------------------------------------------- */
/* nvmlDeviceGetPdi (NVML 13.0+), version 1: the GPU's 64-bit per-device identifier. */
typedef struct {
    unsigned int version;
    unsigned long long value;
} nvmlPdi_t;
#define nvmlPdi_v1 0x01000010u /* sizeof | 1 << 24 */
/* nvmlDeviceGetGpuOperationMode (current, pending) */
typedef unsigned int nvmlGpuOperationMode_t;
enum { NVML_GOM_ALL_ON = 0, NVML_GOM_COMPUTE = 1, NVML_GOM_LOW_DP = 2 };
/* nvmlDeviceGetVgpuHeterogeneousMode, version 1: mode 1 enabled, 0 disabled */
typedef struct {
    unsigned int version;
    unsigned int mode;
} nvmlVgpuHeterogeneousMode_t;
#define nvmlVgpuHeterogeneousMode_v1 0x01000008u /* sizeof | 1 << 24 */
/* nvmlDeviceGetUnrepairableMemoryFlag_v1 (NVML 13.1+; no version member) */
typedef struct {
    unsigned int bUnrepairableMemory;
} nvmlUnrepairableMemoryStatus_v1_t;
/* PCIe atomic operations the GPU can issue (outbound) and complete (inbound): field values
 * 228/229, a mask of NVML_PCIE_ATOMICS_CAP_* */
#define NVML_FI_DEV_PCIE_OUTBOUND_ATOMICS_MASK 228
#define NVML_FI_DEV_PCIE_INBOUND_ATOMICS_MASK 229
/* Cumulative PCIe bytes sent / received since the driver loaded ("may wrap", at the width of the
 * value's type): field values 197/198 */
#define NVML_FI_DEV_PCIE_COUNT_TX_BYTES 197
#define NVML_FI_DEV_PCIE_COUNT_RX_BYTES 198
#define NVML_PCIE_ATOMICS_CAP_FETCHADD32 0x01
#define NVML_PCIE_ATOMICS_CAP_FETCHADD64 0x02
#define NVML_PCIE_ATOMICS_CAP_SWAP32 0x04
#define NVML_PCIE_ATOMICS_CAP_SWAP64 0x08
#define NVML_PCIE_ATOMICS_CAP_CAS32 0x10
#define NVML_PCIE_ATOMICS_CAP_CAS64 0x20
#define NVML_PCIE_ATOMICS_CAP_CAS128 0x40
#define NVML_PCIE_ATOMICS_OPS_MAX 7

static_assert(sizeof(nvmlPdi_t) == 16, "PDI v1");
static_assert(offsetof(nvmlPdi_t, value) == 8, "PDI value at 8");
static_assert(nvmlPdi_v1 == (sizeof(nvmlPdi_t) | (1u << 24)), "struct version");
static_assert(sizeof(nvmlVgpuHeterogeneousMode_t) == 8, "vGPU heterogeneous mode v1");
static_assert(nvmlVgpuHeterogeneousMode_v1 == (sizeof(nvmlVgpuHeterogeneousMode_t) | (1u << 24)),
              "struct version");
static_assert(sizeof(nvmlUnrepairableMemoryStatus_v1_t) == 4, "unrepairable memory status v1");

#endif
